//! Managed services on a real hub behind a real root, driven through MCP with the rmcp client:
//! `hub.restart_service` (preview → confirmation token → execute with an idempotency key, and
//! a replay that restarts nothing), the services in `hub.get_runtime_summary`, and a service's
//! health check in `hub.run_healthchecks` passing while it runs and failing once it exited.
//! The service is `mcp-fixture-service` (tests/src/bin).

use mcp_tests::items;
use mcp_tests::ports::free_port;
use mcp_tests::{TestRoot, eventually, mcp_client, workspace_bin};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};

pub type Client = RunningService<rmcp::RoleClient, ()>;

/// `[[services]]` TOML for the fixture on `port` with `extra` arguments (the fixture binds
/// `port` itself and its health URL names it: a [`free_port`]).
pub fn fixture_service(name: &str, port: u16, extra: &[&str], more_toml: &str) -> String {
    let bin = workspace_bin("mcp-fixture-service").unwrap();
    let mut argv = vec![
        format!("{:?}", bin.display().to_string()),
        "\"--port\"".into(),
        format!("\"{port}\""),
        "\"--log-every-ms\"".into(),
        "\"50\"".into(),
    ];
    argv.extend(extra.iter().map(|a| format!("{a:?}")));
    format!(
        "[[services]]\nname = \"{name}\"\nargv = [{}]\nstop_timeout_ms = 3000\n\
         health = {{ kind = \"http\", url = \"http://127.0.0.1:{port}/healthz\", timeout_ms = 2000 }}\n{more_toml}\n",
        argv.join(", ")
    )
}

/// Calls `tool` with `args`; the structured answer (`isError` answers carry `error`).
pub async fn call(client: &Client, tool: &str, args: Value) -> Value {
    let params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().unwrap());
    let res = client.call_tool(params).await.unwrap();
    let sc = res.structured_content.unwrap_or(Value::Null);
    if res.is_error == Some(true) {
        json!({ "error": sc["error"].clone(), "is_error": true })
    } else {
        sc
    }
}

/// Preview then execute `tool` with `args` and `key`; the execute answer.
pub async fn write(client: &Client, tool: &str, args: Value, key: &str) -> Value {
    let preview = call(client, tool, args.clone()).await;
    assert_eq!(preview["phase"], "preview", "{preview}");
    let token = preview["confirmation_token"].as_str().unwrap().to_owned();
    let mut exec = args;
    exec["phase"] = json!("execute");
    exec["confirmation_token"] = json!(token);
    exec["idempotency_key"] = json!(key);
    call(client, tool, exec).await
}

async fn service(client: &Client, name: &str) -> Value {
    let summary = call(client, "hub.get_runtime_summary", json!({})).await;
    summary["services"]
        .as_array()
        .unwrap_or_else(|| panic!("no services: {summary}"))
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no service {name}: {summary}"))
}

async fn health_of(client: &Client, name: &str) -> Value {
    let health = call(client, "hub.run_healthchecks", json!({})).await;
    items(&health["checks"])
        .iter()
        .find(|c| c["service"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no check of {name}: {health}"))
}

#[tokio::test]
async fn restart_service_through_mcp_with_replay_and_health() {
    let root = TestRoot::start().await.unwrap();
    let port = free_port();
    let hub = root
        .start_hub(
            "hub:test-alpha",
            &fixture_service("fixture", port, &["--print-secret"], ""),
        )
        .await
        .unwrap();
    let token = root.bearer("hub:test-alpha", "InfraOpsControl").await;
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();

    let first = service(&client, "fixture").await;
    assert_eq!(first["state"], "running", "{first}");
    assert_eq!(first["mode"], "normal");
    assert_eq!(first["restarts"], 0);
    let first_pid = first["pid"].as_u64().unwrap();
    eventually("the fixture's health check to pass", async || {
        let check = health_of(&client, "fixture").await;
        (check["ok"] == true).then_some(())
    })
    .await;

    // Preview: the current pid and what would happen; nothing changes.
    let preview = call(
        &client,
        "hub.restart_service",
        json!({"service": "fixture"}),
    )
    .await;
    assert_eq!(preview["phase"], "preview", "{preview}");
    let effect = &preview["expected_effect"];
    assert_eq!(effect["pid"], first_pid);
    assert_eq!(effect["state"], "running");
    assert!(
        effect["description"]
            .as_str()
            .unwrap()
            .starts_with(&format!("will stop pid {first_pid} ")),
        "{effect}"
    );
    assert_eq!(service(&client, "fixture").await["pid"], first_pid);

    // Execute: a new process.
    let exec = write(
        &client,
        "hub.restart_service",
        json!({"service": "fixture"}),
        "restart-1",
    )
    .await;
    assert_eq!(exec["phase"], "execute", "{exec}");
    assert_eq!(exec["replay"], false);
    let result = &exec["result"];
    assert_eq!(result["old_pid"], first_pid);
    assert_eq!(result["restarts"], 1);
    assert_eq!(result["stopped"], "terminated");
    let new_pid = result["new_pid"].as_u64().unwrap();
    assert_ne!(new_pid, first_pid);
    assert!(!std::path::Path::new(&format!("/proc/{first_pid}")).exists());
    let now = service(&client, "fixture").await;
    assert_eq!(
        (now["pid"].as_u64(), now["restarts"].as_u64()),
        (Some(new_pid), Some(1))
    );

    // A replay with the same key restarts nothing.
    let again = call(
        &client,
        "hub.restart_service",
        json!({"service": "fixture", "phase": "execute", "idempotency_key": "restart-1"}),
    )
    .await;
    assert_eq!(again["replay"], true, "{again}");
    assert_eq!(again["result"], exec["result"]);
    let now = service(&client, "fixture").await;
    assert_eq!(
        (now["pid"].as_u64(), now["restarts"].as_u64()),
        (Some(new_pid), Some(1))
    );

    // Healthy while it runs; once it exits by itself it is not restarted and fails its check.
    eventually("the restarted fixture to answer", async || {
        (health_of(&client, "fixture").await["ok"] == true).then_some(())
    })
    .await;
    let http = mcp_tests::http_client();
    let bye = http
        .get(format!("http://127.0.0.1:{port}/exit"))
        .send()
        .await
        .unwrap();
    assert_eq!(bye.status(), 200);
    let exited = eventually("the fixture to be reported exited", async || {
        let s = service(&client, "fixture").await;
        (s["state"] == "exited").then_some(s)
    })
    .await;
    assert_eq!(exited["pid"], Value::Null);
    assert_eq!(exited["last_exit"]["code"], 0);
    assert_eq!(exited["restarts"], 1, "not restarted automatically");
    let check = health_of(&client, "fixture").await;
    assert_eq!(check["ok"], false, "{check}");
    assert!(
        check["detail"].as_str().unwrap().contains("not running"),
        "{check}"
    );
    let health = call(&client, "hub.run_healthchecks", json!({})).await;
    assert_eq!(health["status"], "degraded");

    // The log file got the fixture's output (raw: redaction is for what leaves the hub).
    let log = hub.state_dir.path().join("state/services/fixture.log");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("tick ") && text.contains("exiting on request"),
        "{text}"
    );
    // Nothing the MCP client saw carried the planted secret.
    for v in [&first, &exec, &again, &exited, &check] {
        assert!(!v.to_string().contains("sk_live_"), "{v}");
    }

    // An InfraOpsRead lease cannot restart.
    let read = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let (status, body) = root
        .call(&read, "hub.restart_service", json!({"service": "fixture"}))
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "capability_not_granted");
    hub.stop().await;
    root.stop().await;
}

#[tokio::test]
async fn hub_shutdown_stops_its_services() {
    let root = TestRoot::start().await.unwrap();
    let port = free_port();
    let hub = root
        .start_hub("hub:test-alpha", &fixture_service("fixture", port, &[], ""))
        .await
        .unwrap();
    let token = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
    let pid = service(&client, "fixture").await["pid"].as_u64().unwrap();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    hub.stop().await;
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the service outlived its hub"
    );
    root.stop().await;
}
