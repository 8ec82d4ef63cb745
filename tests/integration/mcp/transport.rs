//! Root's Streamable HTTP transport (`root/src/mcp/transport`), stateless and on sessions:
//! every request gets its answer with the right status and its audit event; the two
//! lifecycles give the same results; stateless clients cannot collide on request ids; a
//! session is its lease's, ends on `DELETE` or when idle, and stays open while used; a
//! stateless client that goes away mid-call still leaves the call's audit event.

use mcp_tests::TestRoot;
use serde_json::{Value, json};

const ACCEPT: &str = "application/json, text/event-stream";

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "transport-test", "version": "1"}
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

/// What a case must be answered with.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// HTTP 200 and a tool result, an error result (`isError`) or not.
    Result { error: bool },
    /// This HTTP status and a JSON-RPC error with this code.
    Rpc { status: u16, code: i64 },
}

/// Checks an answer against its expectation; for a tool result, that its event is stored, of
/// this tool, with `trace` as its trace id when given.
async fn check(
    root: &TestRoot,
    what: &str,
    tool: &str,
    (status, v): (u16, Value),
    expect: Expect,
    trace: Option<&str>,
) {
    match expect {
        Expect::Result { error } => {
            assert_eq!(status, 200, "{what}: {v}");
            assert_eq!(
                v["result"]["isError"].as_bool().unwrap_or(false),
                error,
                "{what}: {v}"
            );
            let event_id = v
                .pointer("/result/_meta/event_id")
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("{what}: a result names its event: {v}"));
            let ev = root.audit_event(event_id).await;
            assert_eq!(ev["tool_id"], tool, "{what}: {ev}");
            if let Some(trace) = trace {
                assert_eq!(ev["trace_id"], trace, "{what}: {ev}");
            }
            if !error {
                assert!(v["result"]["structuredContent"].is_object(), "{what}: {v}");
            }
        }
        Expect::Rpc { status: want, code } => {
            assert_eq!(status, want, "{what}: {v}");
            assert_eq!(v["error"]["code"], code, "{what}: {v}");
            assert!(v.get("result").is_none(), "{what}: {v}");
        }
    }
}

/// A stateless case: lease index, tool, `Mcp-Name`, arguments, extra headers, expectation.
type StatelessCase<'a> = (
    usize,
    &'a str,
    &'a str,
    Value,
    Vec<(&'a str, &'a str)>,
    Expect,
);

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_requests_get_their_answers_and_events() {
    let root = TestRoot::start().await.unwrap();
    let target = "hub:transport";
    let _hub = root.start_hub(target, "").await.unwrap();
    let mut leases = Vec::new();
    for profile in ["AdaOSDevRead", "InfraOpsRead", "InfraOpsControl"] {
        leases.push(root.lease(target, profile).await.1);
    }
    let traceparent = (
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    );
    let status = "hub.get_status";
    let ok = Expect::Result { error: false };
    let refused = Expect::Result { error: true };
    // (lease index: 0 AdaOSDevRead, 1 InfraOpsRead, 2 InfraOpsControl; tool; Mcp-Name;
    // arguments; extra headers; expected answer)
    #[rustfmt::skip]
    let cases: Vec<StatelessCase> = vec![
        // A descriptive call, a routed read, one with the caller's trace.
        (0, "sdk.list_schemas", "sdk.list_schemas", json!({}), vec![], ok),
        (1, status, status, json!({}), vec![], ok),
        (1, status, status, json!({}), vec![traceparent], ok),
        // Refusals are answers too: policy, then the input schema.
        (0, status, status, json!({}), vec![], refused),
        (1, "hub.get_logs", "hub.get_logs", json!({"bogus": 1}), vec![], refused),
        // A write without its confirmation, answered with the refusal.
        (2, "hub.run_allowed_tests", "hub.run_allowed_tests", json!({"name": "none-such"}), vec![], refused),
        // An `Mcp-Name` that contradicts the body: a header mismatch (-32020).
        (1, status, "hub.get_logs", json!({}), vec![], Expect::Rpc { status: 400, code: -32020 }),
        // An unknown tool: invalid params, no event.
        (1, "no.such_tool", "no.such_tool", json!({}), vec![], Expect::Rpc { status: 200, code: -32602 }),
        // A session id on a self-contained 2026-07-28 request changes nothing.
        (1, status, status, json!({}), vec![("mcp-session-id", "s-1")], ok),
    ];
    for (lease, tool, name, args, extra, expect) in cases {
        let what = format!("{tool} as {name} with {extra:?}");
        let answer = call(&root, &leases[lease], tool, name, args, &extra).await;
        let trace = extra.contains(&traceparent).then_some(TRACE);
        check(&root, &what, tool, answer, expect, trace).await;
    }
    root.stop().await;
}

/// Stateless requests of many clients at once, all with the same JSON-RPC id: each gets the
/// answer to its own request (root renumbers them on the way to its service).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_clients_do_not_collide_on_request_ids() {
    let root = TestRoot::start().await.unwrap();
    // One lease per client, so the per-lease concurrency limit is not what is met.
    let mut bearers = Vec::new();
    for _ in 0..12 {
        bearers.push(root.lease("hub:none", "AdaOSDevRead").await.1);
    }
    let names = [
        "descriptor",
        "tool-contract",
        "operational-event",
        "session-lease",
    ];
    let calls = bearers.iter().enumerate().map(|(i, bearer)| {
        let name = names[i % names.len()];
        let root = &root;
        async move {
            let answer = call(
                root,
                bearer,
                "sdk.get_schema",
                "sdk.get_schema",
                json!({ "name": name }),
                &[],
            )
            .await;
            (name, answer)
        }
    });
    for (name, (status, v)) in futures::future::join_all(calls).await {
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["id"], "c-1", "the client's own id comes back: {v}");
        assert_eq!(v["result"]["isError"], false, "{v}");
        let text = serde_json::to_string(&v["result"]["structuredContent"]).unwrap();
        assert!(
            text.contains(&format!("\"{name}")),
            "the answer to `{name}` is about `{name}`: {v}"
        );
    }
    root.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_client_gone_mid_call_still_leaves_its_event() {
    let root = TestRoot::start_with(mcp_tests::faults::with_contract)
        .await
        .unwrap();
    let target = "hub:direct-gone";
    let _hub = root.start_fault_hub(target, "").await.unwrap();
    let bearer = root.bearer(target, "InfraOpsRead").await;
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
    // The call is cancelled when its client goes, and its event is written all the same.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let page = root
            .admin_get("/v1/root/mcp/audit?tool_id=test.fault")
            .await;
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
    crate::hardening::bad_input::json_of(res).await
}

fn session_call(tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_requests_get_their_answers_and_the_same_results_as_stateless_ones() {
    let root = TestRoot::start().await.unwrap();
    let target = "hub:transport-session";
    let _hub = root.start_hub(target, "").await.unwrap();
    let mut sessions = Vec::new();
    for profile in ["AdaOSDevRead", "InfraOpsRead", "InfraOpsControl"] {
        let bearer = root.lease(target, profile).await.1;
        let sid = open_session(&root, &bearer).await;
        sessions.push((bearer, sid));
    }
    let status = "hub.get_status";
    let ok = Expect::Result { error: false };
    let refused = Expect::Result { error: true };
    // (lease index: 0 AdaOSDevRead, 1 InfraOpsRead, 2 InfraOpsControl; message; expected)
    #[rustfmt::skip]
    let cases: Vec<(usize, Value, Expect)> = vec![
        // Descriptive calls: answered, refused by policy, schema-invalid arguments.
        (0, session_call("sdk.list_schemas", json!({})), ok),
        (0, session_call("sdk.get_schema", json!({"name": "descriptor"})), ok),
        (1, session_call("sdk.list_schemas", json!({})), refused),
        (0, session_call("sdk.get_schema", json!({"bogus": 1})), refused),
        // A string id and a `_meta` with a progress token.
        (0, json!({"jsonrpc": "2.0", "id": "s-9", "method": "tools/call",
            "params": {"name": "sdk.list_schemas", "arguments": {},
                "_meta": {"progressToken": 3}}}), ok),
        // Routed reads, allowed and refused; an unknown tool; a write without confirmation.
        (1, session_call(status, json!({})), ok),
        (0, session_call(status, json!({})), refused),
        (1, session_call("no.such_tool", json!({})), Expect::Rpc { status: 200, code: -32602 }),
        (2, session_call("hub.run_allowed_tests", json!({"name": "none-such"})), refused),
    ];
    for (lease, message, expect) in cases {
        let (bearer, sid) = &sessions[lease];
        let answer = session_post(&root, bearer, sid, message.clone()).await;
        let tool = message["params"]["name"].as_str().unwrap_or_default();
        check(
            &root,
            &message.to_string(),
            tool,
            answer.clone(),
            expect,
            None,
        )
        .await;
        assert_eq!(answer.1["id"], message["id"], "{}", answer.1);
        // The same call made stateless has the same result (ids and clocks aside).
        if let Expect::Result { .. } = expect {
            let args = message["params"]["arguments"].clone();
            let (_, stateless) = call(&root, bearer, tool, tool, args, &[]).await;
            assert_eq!(
                comparable(stateless["result"]["structuredContent"].clone()),
                comparable(answer.1["result"]["structuredContent"].clone()),
                "{message}: the two lifecycles answered differently"
            );
        }
    }
    let (s, v) = session_post(
        &root,
        &sessions[1].0,
        &sessions[1].1,
        json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert!(
        v["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{v}"
    );
    // A session is the lease's that opened it; an unknown or ended one is not found.
    let (bearer, sid) = &sessions[1];
    let other = &sessions[0].0;
    let (s, v) = session_post(&root, other, sid, session_call(status, json!({}))).await;
    assert_eq!(s, 404, "{v}");
    let (s, v) = session_post(&root, bearer, "no-such", session_call(status, json!({}))).await;
    assert_eq!(s, 404, "{v}");
    let res = root
        .http
        .delete(root.mcp_url())
        .bearer_auth(bearer)
        .header("mcp-session-id", sid)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    // 200, as the Python SDK expects of a session it ends (it logs anything else but 204).
    assert_eq!(res.status(), 200);
    let (s, v) = session_post(&root, bearer, sid, session_call(status, json!({}))).await;
    assert_eq!(s, 404, "an ended session: {v}");
    root.stop().await;
}

/// A session in use stays open: every message resets its idle timer. Without messages it
/// ends after `mcp.session_idle_sec`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_in_use_stays_open_and_an_idle_one_ends() {
    let root = TestRoot::start_with(|c| c.mcp.session_idle_sec = 2)
        .await
        .unwrap();
    let bearer = root.lease("hub:none", "AdaOSDevRead").await.1;
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
    let (s, v) = session_post(&root, &bearer, &used, list.clone()).await;
    assert_eq!(s, 200, "the session in use is still open: {v}");
    let (s, v) = session_post(&root, &bearer, &idle, list).await;
    assert_eq!(s, 404, "the idle session ended: {v}");
    root.stop().await;
}
