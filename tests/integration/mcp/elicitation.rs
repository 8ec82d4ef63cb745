//! Write confirmation through MCP elicitation: a client that offers `elicitation/create` is
//! asked to confirm the preview's expected effect; accepted, the write runs once; declined or
//! cancelled, nothing runs. A client without elicitation still gets `confirmation_required`.
//! On 2026-07-28 the same question is a multi-round-trip request (an `InputRequiredResult`
//! whose `requestState` is the confirmation): driven by rmcp's client, and on the wire for
//! what a client must not get away with (forged, replayed, foreign or misplaced state).
//! The fixture's test command appends a line to a file, so runs are counted.

use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::runs;
use std::sync::{Arc, Mutex};

use mcp_tests::TestRoot;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, Implementation,
};
use serde_json::{Value, json};

/// A client that answers every elicitation with `action` (and `confirm: true` on accept),
/// and remembers the messages it was shown.
#[derive(Clone)]
struct Operator {
    action: ElicitationAction,
    asked: Arc<Mutex<Vec<String>>>,
}

impl rmcp::ClientHandler for Operator {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("elicitation-test", "0.1.0"),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _ctx: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.asked.lock().unwrap().push(message);
        }
        let mut r = ElicitResult::new(self.action.clone());
        if self.action == ElicitationAction::Accept {
            r = r.with_content(json!({ "confirm": true }));
        }
        Ok(r)
    }
}

async fn connect(
    root: &TestRoot,
    token: &str,
    action: ElicitationAction,
) -> (
    rmcp::service::RunningService<rmcp::RoleClient, Operator>,
    Arc<Mutex<Vec<String>>>,
) {
    connect_with(root, token, action, None).await
}

/// [`connect`] on the stateless lifecycle of `version` (`server/discover`, then
/// self-contained requests) when one is given.
async fn connect_with(
    root: &TestRoot,
    token: &str,
    action: ElicitationAction,
    version: Option<rmcp::model::ProtocolVersion>,
) -> (
    rmcp::service::RunningService<rmcp::RoleClient, Operator>,
    Arc<Mutex<Vec<String>>>,
) {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    mcp_tests::init_crypto();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            root.mcp_url(),
        )
        .auth_header(token.to_string()),
    );
    let op = Operator {
        action,
        asked: asked.clone(),
    };
    let client = match version {
        None => rmcp::ServiceExt::serve(op, transport).await.unwrap(),
        Some(v) => op
            .serve_with_lifecycle(
                transport,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![v],
                },
            )
            .await
            .unwrap(),
    };
    (client, asked)
}

fn execute(key: &str) -> CallToolRequestParams {
    CallToolRequestParams::new("hub.run_allowed_tests").with_arguments(
        json!({"name": "smoke", "phase": "execute", "idempotency_key": key})
            .as_object()
            .unwrap()
            .clone(),
    )
}

fn body(res: &rmcp::model::CallToolResult) -> Value {
    res.structured_content.clone().unwrap()
}

#[tokio::test]
async fn an_operator_confirms_or_refuses_a_write_through_elicitation() {
    let root = TestRoot::start().await.unwrap();
    let (_dir, counter, hub) = root
        .start_counting_hub("hub:elicit", |counter| format!(
                "[[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"sh\", \"-c\", \"echo run >> {}\"]\ntimeout_ms = 10000\n",
                counter.display()
            ))
        .await;
    let token = root.bearer("hub:elicit", "InfraOpsControl").await;

    // Accepted: asked once with the expected effect, then the write runs once.
    let (client, asked) = connect(&root, &token, ElicitationAction::Accept).await;
    let res = client.call_tool(execute("k-accept")).await.unwrap();
    let b = body(&res);
    assert_ne!(res.is_error, Some(true), "{b}");
    assert_eq!(
        (b["phase"].as_str(), b["replay"].as_bool()),
        (Some("execute"), Some(false)),
        "{b}"
    );
    assert_eq!(runs(&counter), 1);
    let messages = asked.lock().unwrap().clone();
    assert_eq!(messages.len(), 1);
    assert!(
        messages[0].contains("hub.run_allowed_tests") && messages[0].contains("smoke"),
        "{}",
        messages[0]
    );
    // Both phases are in the audit trail: a dry-run preview and the execute.
    let audit = root
        .admin_get("/v1/root/mcp/audit?tool_id=hub.run_allowed_tests")
        .await;
    let dry: Vec<bool> = items(&audit["events"])
        .iter()
        .map(|e| e["dry_run"].as_bool().unwrap())
        .collect();
    assert_eq!(dry, [false, true], "{audit}");
    // The same key again is a replay: no question, nothing runs.
    let res = client.call_tool(execute("k-accept")).await.unwrap();
    assert_eq!(body(&res)["replay"], true);
    assert_eq!(asked.lock().unwrap().len(), 1);
    assert_eq!(runs(&counter), 1);
    client.cancel().await.unwrap();

    // Declined or cancelled: nothing runs.
    for action in [ElicitationAction::Decline, ElicitationAction::Cancel] {
        let (client, asked) = connect(&root, &token, action.clone()).await;
        let res = client
            .call_tool(execute(&format!("k-{action:?}")))
            .await
            .unwrap();
        let b = body(&res);
        assert_eq!(res.is_error, Some(true), "{b}");
        assert_eq!(b["error"]["code"], "confirmation_required", "{b}");
        assert_eq!(asked.lock().unwrap().len(), 1);
        assert_eq!(runs(&counter), 1);
        client.cancel().await.unwrap();
    }

    // A client without elicitation gets the two-call flow's answer.
    let plain = mcp_tests::mcp_client(&root.mcp_url(), &token)
        .await
        .unwrap();
    let res = plain.call_tool(execute("k-plain")).await.unwrap();
    assert_eq!(body(&res)["error"]["code"], "confirmation_required");
    assert_eq!(runs(&counter), 1);
    hub.stop().await;
    root.stop().await;
}

fn smoke_hub(counter: &std::path::Path) -> String {
    format!(
        "[[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"sh\", \"-c\", \"echo run >> {0}\"]\ntimeout_ms = 10000\n\
         [[skill.allowed_tests]]\nname = \"other\"\nargv = [\"sh\", \"-c\", \"echo run >> {0}\"]\ntimeout_ms = 10000\n",
        counter.display()
    )
}

/// The audit events of `hub.run_allowed_tests`, oldest first: (status, dry run, error code).
async fn write_events(root: &TestRoot) -> Vec<(String, bool, Option<String>)> {
    let audit = root.trail("tool_id=hub.run_allowed_tests&limit=100").await;
    let mut events: Vec<_> = audit
        .iter()
        .map(|e| {
            (
                e["status"].as_str().unwrap().to_owned(),
                e["dry_run"].as_bool().unwrap(),
                e["error"]["code"].as_str().map(str::to_owned),
            )
        })
        .collect();
    events.reverse();
    events
}

#[tokio::test]
async fn a_2026_07_28_client_confirms_or_refuses_a_write_in_two_round_trips() {
    let root = TestRoot::start().await.unwrap();
    let (_dir, counter, hub) = root.start_counting_hub("hub:mrtr", smoke_hub).await;
    let token = root.bearer("hub:mrtr", "InfraOpsControl").await;
    let modern = Some(rmcp::model::ProtocolVersion::V_2026_07_28);

    // Accepted: rmcp's client gets the question, answers it and retries; the write runs once.
    let (client, asked) =
        connect_with(&root, &token, ElicitationAction::Accept, modern.clone()).await;
    let res = client.call_tool(execute("m-accept")).await.unwrap();
    let b = body(&res);
    assert_ne!(res.is_error, Some(true), "{b}");
    assert_eq!(
        (b["phase"].as_str(), b["replay"].as_bool()),
        (Some("execute"), Some(false)),
        "{b}"
    );
    assert_eq!(runs(&counter), 1);
    let messages = asked.lock().unwrap().clone();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(
        messages[0].contains("hub.run_allowed_tests"),
        "{}",
        messages[0]
    );
    // Both round trips are audited: the preview (a dry run), then the execute.
    let ok = |dry: bool| ("ok".to_owned(), dry, None);
    assert_eq!(write_events(&root).await, [ok(true), ok(false)]);
    // The key again is a replay: no question, nothing runs.
    let res = client.call_tool(execute("m-accept")).await.unwrap();
    assert_eq!(body(&res)["replay"], true);
    assert_eq!((asked.lock().unwrap().len(), runs(&counter)), (1, 1));
    client.cancel().await.unwrap();

    // Declined or cancelled: nothing runs, and the retry is an audited refusal.
    for action in [ElicitationAction::Decline, ElicitationAction::Cancel] {
        let (client, asked) = connect_with(&root, &token, action.clone(), modern.clone()).await;
        let res = client
            .call_tool(execute(&format!("m-{action:?}")))
            .await
            .unwrap();
        let b = body(&res);
        assert_eq!(res.is_error, Some(true), "{b}");
        assert_eq!(b["error"]["code"], "confirmation_required", "{b}");
        let message = error_message(&b);
        assert!(message.contains("nothing was changed"), "{message}");
        assert_eq!((asked.lock().unwrap().len(), runs(&counter)), (1, 1));
        let events = write_events(&root).await;
        assert_eq!(
            events[events.len() - 2..],
            [
                ok(true),
                ("denied".into(), false, Some("confirmation_required".into()))
            ]
        );
        client.cancel().await.unwrap();
    }

    // A 2026-07-28 client that declares no elicitation gets the two-call flow's answer.
    let plain = mcp_tests::mcp_client_stateless(&root.mcp_url(), &token)
        .await
        .unwrap();
    let res = plain.call_tool(execute("m-plain")).await.unwrap();
    assert_eq!(body(&res)["error"]["code"], "confirmation_required");
    assert_eq!(runs(&counter), 1);
    hub.stop().await;
    root.stop().await;
}

/// One stateless 2026-07-28 `tools/call` on the wire, from a client that declares form
/// elicitation: the JSON-RPC `result`.
async fn wire_call(root: &TestRoot, bearer: &str, tool: &str, params: Value) -> Value {
    let mut params = params;
    params["name"] = json!(tool);
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "mrtr-wire-test", "version": "1"}
    });
    let res = root
        .http
        .post(root.mcp_url())
        .bearer_auth(bearer)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    body["result"].clone()
}

fn run_args(name: &str, key: &str) -> Value {
    json!({"name": name, "phase": "execute", "idempotency_key": key})
}

/// The refusal a tool result carries: (code, message).
fn refusal(result: &Value) -> (String, String) {
    assert_eq!(result["isError"], true, "{result}");
    let e = &result["structuredContent"]["error"];
    (
        e["code"].as_str().unwrap().to_owned(),
        e["message"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn request_state_is_single_use_bound_and_unforgeable() {
    let root = TestRoot::start().await.unwrap();
    let (_dir, counter, hub) = root.start_counting_hub("hub:mrtr-wire", smoke_hub).await;
    let token = root.bearer("hub:mrtr-wire", "InfraOpsControl").await;
    let other_lease = root.bearer("hub:mrtr-wire", "InfraOpsControl").await;
    let args = run_args("smoke", "w-1");
    let first = wire_call(
        &root,
        &token,
        "hub.run_allowed_tests",
        json!({"arguments": args}),
    )
    .await;
    assert_eq!(first["resultType"], "input_required", "{first}");
    let question = &first["inputRequests"]["confirm"];
    assert_eq!(question["method"], "elicitation/create", "{first}");
    assert_eq!(question["params"]["mode"], "form", "{first}");
    assert!(
        question["params"]["requestedSchema"]["properties"]["confirm"].is_object(),
        "{first}"
    );
    let state = first["requestState"].as_str().unwrap().to_owned();
    let yes = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    let retry = |bearer: String,
                 tool: &'static str,
                 arguments: Value,
                 state: String,
                 answer: Option<Value>| {
        let root = &root;
        async move {
            let mut params = json!({"arguments": arguments, "requestState": state});
            if let Some(a) = answer {
                params["inputResponses"] = a;
            }
            wire_call(root, &bearer, tool, params).await
        }
    };

    // Altered, another lease's, another call's, or on a tool that asks nothing: refused by
    // name, audited, nothing runs.
    let mut forged = state.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    let cases = [
        (
            token.clone(),
            "hub.run_allowed_tests",
            args.clone(),
            forged,
            "does not verify",
        ),
        (
            other_lease.clone(),
            "hub.run_allowed_tests",
            args.clone(),
            state.clone(),
            "another lease",
        ),
        (
            token.clone(),
            "hub.run_allowed_tests",
            run_args("other", "w-1"),
            state.clone(),
            "another call",
        ),
        (
            token.clone(),
            "hub.run_allowed_tests",
            args.clone(),
            "mrs1.e30.AAAA".into(),
            "does not verify",
        ),
        (
            token.clone(),
            "hub.run_allowed_tests",
            args.clone(),
            "not-a-state".into(),
            "not a request state",
        ),
        (
            token.clone(),
            "hub.get_status",
            json!({}),
            state.clone(),
            "asks for no input",
        ),
    ];
    for (bearer, tool, arguments, state, why) in cases {
        let result = retry(bearer, tool, arguments, state, Some(yes.clone())).await;
        let (code, message) = refusal(&result);
        assert_eq!(code, "invalid_arguments", "{message}");
        assert!(message.contains(why), "{why}: {message}");
    }
    assert_eq!(runs(&counter), 0);

    // No answer: asked again, with the same state.
    let again = retry(
        token.clone(),
        "hub.run_allowed_tests",
        args.clone(),
        state.clone(),
        None,
    )
    .await;
    assert_eq!(again["resultType"], "input_required", "{again}");
    assert_eq!(again["requestState"], json!(state));
    assert_eq!(again["inputRequests"], first["inputRequests"]);

    // Confirmed: runs once. The state again, with another key: spent.
    let done = retry(
        token.clone(),
        "hub.run_allowed_tests",
        args.clone(),
        state.clone(),
        Some(yes.clone()),
    )
    .await;
    assert_ne!(done["isError"], true, "{done}");
    assert_eq!(done["structuredContent"]["phase"], "execute", "{done}");
    assert_eq!(runs(&counter), 1);
    let replayed = retry(
        token.clone(),
        "hub.run_allowed_tests",
        run_args("smoke", "w-2"),
        state.clone(),
        Some(yes.clone()),
    )
    .await;
    assert_eq!(refusal(&replayed).0, "confirmation_required", "{replayed}");
    assert_eq!(runs(&counter), 1);

    // A declined state is spent too: accepting it afterwards runs nothing.
    let second = wire_call(
        &root,
        &token,
        "hub.run_allowed_tests",
        json!({"arguments": run_args("smoke", "w-3")}),
    )
    .await;
    let state = second["requestState"].as_str().unwrap().to_owned();
    let no = json!({"confirm": {"action": "decline"}});
    let declined = retry(
        token.clone(),
        "hub.run_allowed_tests",
        run_args("smoke", "w-3"),
        state.clone(),
        Some(no),
    )
    .await;
    assert_eq!(refusal(&declined).0, "confirmation_required", "{declined}");
    let late = retry(
        token.clone(),
        "hub.run_allowed_tests",
        run_args("smoke", "w-3"),
        state,
        Some(yes),
    )
    .await;
    assert_eq!(refusal(&late).0, "confirmation_required", "{late}");
    assert_eq!(runs(&counter), 1);

    // Every round trip left its event: two previews and, besides, one per retry.
    let events = write_events(&root).await;
    let previews = events.iter().filter(|e| e.1).count();
    assert_eq!(previews, 2, "{events:?}");
    assert_eq!(events.len(), 2 + 5 + 1 + 1 + 2, "{events:?}");
    hub.stop().await;
    root.stop().await;
}

/// The same two round trips with a client of another implementation: the Python SDK 2.3 on
/// 2026-07-28 (`tests/clients/mrtr.py`), whose `elicitation_callback` answers the question.
#[tokio::test]
async fn the_python_sdk_confirms_or_declines_a_write_in_two_round_trips() {
    let root = TestRoot::start().await.unwrap();
    let (_dir, counter, hub) = root.start_counting_hub("hub:mrtr-py", smoke_hub).await;
    let token = root.bearer("hub:mrtr-py", "InfraOpsControl").await;
    let url = root.mcp_url();
    let accepted = mcp_tests::run_python_client("mrtr.py", &[&url, &token, "accept", "py-1"])
        .await
        .unwrap();
    assert_eq!(accepted["is_error"], false, "{accepted}");
    assert_eq!(accepted["structured"]["phase"], "execute", "{accepted}");
    let asked = items(&accepted["asked"]);
    assert_eq!(asked.len(), 1, "{accepted}");
    assert!(
        asked[0].as_str().unwrap().contains("hub.run_allowed_tests"),
        "{accepted}"
    );
    assert_eq!(runs(&counter), 1);
    let declined = mcp_tests::run_python_client("mrtr.py", &[&url, &token, "decline", "py-2"])
        .await
        .unwrap();
    assert_eq!(declined["is_error"], true, "{declined}");
    assert_eq!(
        declined["structured"]["error"]["code"], "confirmation_required",
        "{declined}"
    );
    assert_eq!(runs(&counter), 1);
    let ok = |dry: bool| ("ok".to_owned(), dry, None);
    let denied = (
        "denied".to_owned(),
        false,
        Some("confirmation_required".to_owned()),
    );
    assert_eq!(
        write_events(&root).await,
        [ok(true), ok(false), ok(true), denied]
    );
    hub.stop().await;
    root.stop().await;
}
