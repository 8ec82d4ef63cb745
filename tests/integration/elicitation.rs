//! Write confirmation through MCP elicitation: a client that offers `elicitation/create` is
//! asked to confirm the preview's expected effect; accepted, the write runs once; declined or
//! cancelled, nothing runs. A client without elicitation still gets `confirmation_required`.
//! The fixture's test command appends a line to a file, so runs are counted.

use std::sync::{Arc, Mutex};

use mcp_tests::TestRoot;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, Implementation,
};
use serde_json::{Value, json};

fn runs(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

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
    (rmcp::ServiceExt::serve(op, transport).await.unwrap(), asked)
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
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("runs.txt");
    let hub = root
        .start_hub(
            "hub:elicit",
            &format!(
                "[[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"sh\", \"-c\", \"echo run >> {}\"]\ntimeout_ms = 10000\n",
                counter.display()
            ),
        )
        .await
        .unwrap();
    let (_, token) = root
        .lease("hub:elicit", "InfraOpsControl", 600)
        .await
        .unwrap();

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
        .await
        .unwrap();
    let dry: Vec<bool> = audit["events"]
        .as_array()
        .unwrap()
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
