//! The direct path for reads (`root/src/mcp/direct.rs`), stateless and on sessions: the same
//! requests sent to a root that takes it and to one that sends everything through rmcp get
//! the same answers; what does not qualify goes to rmcp; a session used only there stays
//! open; a client that goes away mid-call still leaves the call's audit event.

use mcp_tests::TestRoot;
use serde_json::{Value, json};

const ACCEPT: &str = "application/json, text/event-stream";

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "direct-test", "version": "1"}
    })
}

/// One stateless `tools/call` as a 2026-07-28 client sends it, on `http`; `mcp_name` is the
/// `Mcp-Name` header (normally the tool's name).
fn request(
    http: &reqwest::Client,
    root: &TestRoot,
    bearer: &str,
    tool: &str,
    mcp_name: &str,
    arguments: Value,
) -> reqwest::RequestBuilder {
    http.post(root.mcp_url())
        .bearer_auth(bearer)
        .header("accept", ACCEPT)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", mcp_name)
        .json(
            &json!({"jsonrpc": "2.0", "id": "c-1", "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta()}}),
        )
}

/// [`request`] with `extra` headers, sent: its status and JSON body.
async fn call(
    root: &TestRoot,
    bearer: &str,
    tool: &str,
    mcp_name: &str,
    arguments: Value,
    extra: &[(&str, &str)],
) -> (u16, Value) {
    let mut req = request(&root.http, root, bearer, tool, mcp_name, arguments);
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    let body: Value =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("a JSON body, not {text}"));
    (status, body)
}

/// The answer with what differs between two runs of one call replaced: the event and trace
/// ids, and in a hub's status its clock readings.
fn comparable(mut v: Value) -> Value {
    fn scrub(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if matches!(
                        k.as_str(),
                        "event_id" | "connected_since" | "started_at" | "uptime_sec"
                    ) || (k == "trace_id"
                        && x.as_str()
                            .is_some_and(|t| t != "4bf92f3577b34da6a3ce929d0e0e4736"))
                    {
                        *x = json!("-");
                    } else {
                        scrub(x);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(scrub),
            _ => {}
        }
    }
    // The text content is the structured content serialized: compare it parsed.
    if let Some(content) = v
        .pointer_mut("/result/content")
        .and_then(Value::as_array_mut)
    {
        for c in content {
            if let Some(t) = c.get("text").and_then(Value::as_str) {
                c["text"] = serde_json::from_str(t).unwrap_or(Value::Null);
            }
        }
    }
    scrub(&mut v);
    v
}

async fn direct_calls(root: &TestRoot) -> u64 {
    root.metric("mcp_root_mcp_direct_calls_total")
        .await
        .unwrap()
        .expect("root counts direct calls")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_reads_answer_alike_on_the_direct_path_and_through_rmcp() {
    let direct = TestRoot::start().await.unwrap();
    let rmcp_only = TestRoot::start_with(|c| c.mcp.direct_reads = false)
        .await
        .unwrap();
    let target = "hub:direct";
    let _hubs = (
        direct.start_hub(target, "").await.unwrap(),
        rmcp_only.start_hub(target, "").await.unwrap(),
    );
    let leases = async |root: &TestRoot| {
        let mut out = Vec::new();
        for profile in ["AdaOSDevRead", "InfraOpsRead", "InfraOpsControl"] {
            out.push(root.lease(target, profile, 600).await.unwrap().1);
        }
        out
    };
    let (a, b) = (leases(&direct).await, leases(&rmcp_only).await);
    let traceparent = (
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    );
    // (lease index: 0 AdaOSDevRead, 1 InfraOpsRead, 2 InfraOpsControl; tool; Mcp-Name;
    // arguments; extra headers; whether the direct path takes it)
    type Case<'a> = (
        usize,
        &'a str,
        &'a str,
        Value,
        Vec<(&'a str, &'a str)>,
        bool,
    );
    let status = "hub.get_status";
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        // A descriptive call, a routed read, one with the caller's trace.
        (0, "sdk.list_schemas", "sdk.list_schemas", json!({}), vec![], true),
        (1, status, status, json!({}), vec![], true),
        (1, status, status, json!({}), vec![traceparent], true),
        // Refusals are answers too: policy, then the input schema.
        (0, status, status, json!({}), vec![], true),
        (1, "hub.get_logs", "hub.get_logs", json!({"bogus": 1}), vec![], true),
        // Not for the direct path: rmcp answers, on both roots alike.
        (1, status, "hub.get_logs", json!({}), vec![], false),
        (1, "no.such_tool", "no.such_tool", json!({}), vec![], false),
        (2, "hub.run_allowed_tests", "hub.run_allowed_tests", json!({"name": "none-such"}), vec![], false),
        (1, status, status, json!({}), vec![("mcp-session-id", "s-1")], false),
    ];
    let mut expected_direct = 0;
    for (lease, tool, name, args, extra, taken) in cases {
        let before = direct_calls(&direct).await;
        let (sa, va) = call(&direct, &a[lease], tool, name, args.clone(), &extra).await;
        let (sb, vb) = call(&rmcp_only, &b[lease], tool, name, args, &extra).await;
        assert_eq!(sa, sb, "{tool} as {name}: status\n{va}\n{vb}");
        assert_eq!(
            comparable(va.clone()),
            comparable(vb.clone()),
            "{tool} as {name} with {extra:?}: the two paths answered differently"
        );
        assert_eq!(
            direct_calls(&direct).await - before,
            u64::from(taken),
            "{tool} as {name} with {extra:?}: direct path taken?"
        );
        expected_direct += u64::from(taken);
        // Every call answered with a result names its event, stored and of this tool.
        if let Some(event_id) = va.pointer("/result/_meta/event_id").and_then(Value::as_str) {
            let ev = direct
                .admin_get(&format!("/v1/root/mcp/audit/{event_id}"))
                .await
                .unwrap();
            assert_eq!(ev["tool_id"], tool, "{ev}");
            if extra.contains(&traceparent) {
                assert_eq!(ev["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736", "{ev}");
            }
        }
    }
    assert_eq!(direct_calls(&rmcp_only).await, 0);
    assert_eq!(direct_calls(&direct).await, expected_direct);
    direct.stop().await;
    rmcp_only.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_call_on_the_direct_path_still_leaves_its_event() {
    let root = TestRoot::start_with(mcp_tests::faults::with_contract)
        .await
        .unwrap();
    let target = "hub:direct-gone";
    let _hub = root.start_fault_hub(target, "").await.unwrap();
    let (_, bearer) = root.lease(target, "InfraOpsRead", 600).await.unwrap();
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(500))
        .build()
        .unwrap();
    let sent = request(
        &client,
        &root,
        &bearer,
        mcp_tests::faults::TOOL,
        mcp_tests::faults::TOOL,
        json!({"fault": "hang"}),
    )
    .send()
    .await;
    assert!(
        sent.is_err(),
        "the hub holds the call past the client's timeout"
    );
    assert_eq!(direct_calls(&root).await, 1);
    // The call is cancelled when its client goes, and its event is written all the same.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let page = root
            .admin_get("/v1/root/mcp/audit?tool_id=test.fault")
            .await
            .unwrap();
        if let Some(ev) = page["events"].as_array().and_then(|e| e.first()) {
            assert_eq!(ev["error"]["code"], "cancelled", "{ev}");
            assert_eq!(ev["status"], "error", "{ev}");
            assert_eq!(ev["request"]["arguments"]["fault"], "hang", "{ev}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no audit event for the abandoned call"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    root.stop().await;
}

/// Opens an MCP session on revision 2025-11-25 as a client does (`initialize`, then
/// `notifications/initialized`, answered 200 and 202): its `Mcp-Session-Id`.
pub(crate) async fn open_session(root: &TestRoot, bearer: &str) -> String {
    let res = root
        .http
        .post(root.mcp_url())
        .bearer_auth(bearer)
        .header("accept", ACCEPT)
        .json(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "direct-session-test", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let sid = res.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    drop(res);
    let (status, _) = session_post(
        root,
        bearer,
        &sid,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(status, 202);
    sid
}

/// One message on session `sid`: the status and the JSON-RPC answer (a JSON body or the
/// message of an SSE stream).
async fn session_post(root: &TestRoot, bearer: &str, sid: &str, body: Value) -> (u16, Value) {
    let res = root
        .http
        .post(root.mcp_url())
        .bearer_auth(bearer)
        .header("accept", ACCEPT)
        .header("mcp-session-id", sid)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&body)
        .send()
        .await
        .unwrap();
    crate::bad_input::json_of(res).await
}

fn session_call(tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_reads_answer_alike_on_the_direct_path_and_through_rmcp() {
    let direct = TestRoot::start().await.unwrap();
    let rmcp_only = TestRoot::start_with(|c| c.mcp.direct_reads = false)
        .await
        .unwrap();
    let target = "hub:direct-session";
    let _hubs = (
        direct.start_hub(target, "").await.unwrap(),
        rmcp_only.start_hub(target, "").await.unwrap(),
    );
    let open = async |root: &TestRoot| {
        let mut out = Vec::new();
        for profile in ["AdaOSDevRead", "InfraOpsRead", "InfraOpsControl"] {
            let bearer = root.lease(target, profile, 600).await.unwrap().1;
            let sid = open_session(root, &bearer).await;
            out.push((bearer, sid));
        }
        out
    };
    let (a, b) = (open(&direct).await, open(&rmcp_only).await);
    let status = "hub.get_status";
    // (lease index: 0 AdaOSDevRead, 1 InfraOpsRead, 2 InfraOpsControl; message; whether the
    // direct path takes it)
    #[rustfmt::skip]
    let cases: Vec<(usize, Value, bool)> = vec![
        // Descriptive calls: answered, refused by policy, schema-invalid arguments.
        (0, session_call("sdk.list_schemas", json!({})), true),
        (0, session_call("sdk.get_schema", json!({"name": "descriptor"})), true),
        (1, session_call("sdk.list_schemas", json!({})), true),
        (0, session_call("sdk.get_schema", json!({"bogus": 1})), true),
        // A string id and a `_meta` without a revision in it.
        (0, json!({"jsonrpc": "2.0", "id": "s-9", "method": "tools/call",
            "params": {"name": "sdk.list_schemas", "arguments": {},
                "_meta": {"progressToken": 3}}}), true),
        // Not for the direct path: rmcp answers, on both roots alike. Routed reads (a client
        // may cancel them through the session), unknown tools, writes, other methods, a
        // request naming its own revision.
        (1, session_call(status, json!({})), false),
        (0, session_call(status, json!({})), false),
        (1, session_call("no.such_tool", json!({})), false),
        (2, session_call("hub.run_allowed_tests", json!({"name": "none-such"})), false),
        (1, json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}), false),
        (1, json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": status, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}), false),
    ];
    for (lease, message, taken) in cases {
        let before = direct_calls(&direct).await;
        let (bearer, sid) = &a[lease];
        let (sa, va) = session_post(&direct, bearer, sid, message.clone()).await;
        let (bearer, sid) = &b[lease];
        let (sb, vb) = session_post(&rmcp_only, bearer, sid, message.clone()).await;
        assert_eq!(sa, sb, "{message}: status\n{va}\n{vb}");
        assert_eq!(
            comparable(va.clone()),
            comparable(vb.clone()),
            "{message}: the two paths answered differently"
        );
        assert_eq!(
            direct_calls(&direct).await - before,
            u64::from(taken),
            "{message}: direct path taken?"
        );
        if let Some(event_id) = va.pointer("/result/_meta/event_id").and_then(Value::as_str) {
            let ev = direct
                .admin_get(&format!("/v1/root/mcp/audit/{event_id}"))
                .await
                .unwrap();
            assert_eq!(ev["tool_id"], message["params"]["name"], "{ev}");
        }
    }
    // A session is the lease's that opened it, on either path; an unknown or ended one is
    // refused by rmcp, as before.
    let (bearer, sid) = &a[1];
    let other = &a[0].0;
    let before = direct_calls(&direct).await;
    let (s, v) = session_post(&direct, other, sid, session_call(status, json!({}))).await;
    assert_eq!(s, 404, "{v}");
    let (s, v) = session_post(&direct, bearer, "no-such", session_call(status, json!({}))).await;
    assert_eq!(s, 404, "{v}");
    let res = direct
        .http
        .delete(direct.mcp_url())
        .bearer_auth(bearer)
        .header("mcp-session-id", sid)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    let (s, v) = session_post(&direct, bearer, sid, session_call(status, json!({}))).await;
    assert_eq!(s, 404, "an ended session: {v}");
    assert_eq!(
        direct_calls(&direct).await,
        before,
        "none of these was taken"
    );
    direct.stop().await;
    rmcp_only.stop().await;
}

/// A session used only for calls the direct path answers stays open as one used through rmcp
/// does: each resets its idle timer. Without calls it ends after `mcp.session_idle_sec`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_used_only_on_the_direct_path_stays_open() {
    let root = TestRoot::start_with(|c| c.mcp.session_idle_sec = 2)
        .await
        .unwrap();
    let bearer = root.lease("hub:none", "AdaOSDevRead", 600).await.unwrap().1;
    let (used, idle) = (
        open_session(&root, &bearer).await,
        open_session(&root, &bearer).await,
    );
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_millis(3500) {
        let (s, v) = session_post(
            &root,
            &bearer,
            &used,
            session_call("sdk.list_schemas", json!({})),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        assert!(v["result"]["structuredContent"].is_object(), "{v}");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert!(
        direct_calls(&root).await >= 10,
        "the calls took the direct path"
    );
    let (s, v) = session_post(&root, &bearer, &used, list.clone()).await;
    assert_eq!(s, 200, "the session in use is still open: {v}");
    let (s, v) = session_post(&root, &bearer, &idle, list).await;
    assert_eq!(s, 404, "the idle session ended: {v}");
    root.stop().await;
}
