//! MCP tasks for long work, over rmcp's client on 2026-07-28 with the
//! `io.modelcontextprotocol/tasks` extension: a test run polled to completion with its
//! progress, a deploy cancelled mid-way (stopped on the hub), a task read after a root
//! restart, a task whose root was killed under it (failed at restart, with its event), and
//! what a client must not get (another lease's task, unknown ids, task methods without the
//! extension). A call that is not a task gets its progress on its own stream. The tasks of
//! 2025-11-25 on sessions are driven by the MCP TypeScript SDK's task driver
//! (`clients/tasks.mjs`; the Python SDK 2.3 has no driver for them). Replicas: `replicas.rs`.

use mcp_tests::items;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_tests::TestRoot;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    CreateTaskResult, GetTaskParams, GetTaskResult, Implementation, NumberOrString,
    ProgressNotificationParam, ProtocolVersion, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use serde_json::{Value, json};

/// How long a test waits for a task to get somewhere.
const PATIENCE: Duration = Duration::from_secs(60);

/// A 2026-07-28 client that declares the tasks extension (or not) and keeps the progress
/// notifications it receives.
#[derive(Clone, Default)]
pub(crate) struct TaskClient {
    tasks: bool,
    pub(crate) progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl rmcp::ClientHandler for TaskClient {
    fn get_info(&self) -> ClientConfig {
        let caps = if self.tasks {
            ClientCapabilities::builder().enable_tasks().build()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(caps, Implementation::new("tasks-test", "0.1.0"))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _ctx: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

pub(crate) type Client = RunningService<rmcp::RoleClient, TaskClient>;

async fn connect(root: &TestRoot, token: &str, tasks: bool) -> Client {
    connect_to(&root.mcp_url(), token, tasks).await
}

pub(crate) async fn connect_to(url: &str, token: &str, tasks: bool) -> Client {
    mcp_tests::init_crypto();
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            url.to_owned(),
        )
        .auth_header(token.to_string()),
    );
    let handler = TaskClient {
        tasks,
        ..Default::default()
    };
    handler
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap()
}

pub(crate) fn params(tool: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().cloned().unwrap())
}

/// A preview's confirmation token (a preview is never a task).
pub(crate) async fn preview(client: &Client, tool: &str, args: &Value) -> String {
    match client
        .peer()
        .call_tool_once(params(tool, args.clone()))
        .await
        .unwrap()
    {
        CallToolResponse::Complete(r) => {
            let b = r.structured_content.unwrap();
            assert_eq!(b["phase"], "preview", "{b}");
            b["confirmation_token"].as_str().unwrap().to_owned()
        }
        other => panic!("a preview answered {other:?}"),
    }
}

pub(crate) fn execute_args(args: &Value, token: &str, key: &str) -> Value {
    let mut exec = args.clone();
    exec["phase"] = json!("execute");
    exec["confirmation_token"] = json!(token);
    exec["idempotency_key"] = json!(key);
    exec
}

/// Previews and executes `tool` as a task.
pub(crate) async fn start_task(
    client: &Client,
    tool: &str,
    args: Value,
    key: &str,
) -> CreateTaskResult {
    let token = preview(client, tool, &args).await;
    let exec = execute_args(&args, &token, key);
    match client
        .peer()
        .call_tool_once(params(tool, exec))
        .await
        .unwrap()
    {
        CallToolResponse::Task(t) => t,
        other => panic!("an execute by a client with tasks answered {other:?}"),
    }
}

pub(crate) async fn get(client: &Client, task_id: &str) -> GetTaskResult {
    client
        .peer()
        .get_task(GetTaskParams::new(task_id))
        .await
        .unwrap()
}

/// Polls the task until `done` holds, returning every status message seen on the way.
pub(crate) async fn poll_until(
    client: &Client,
    task_id: &str,
    done: impl Fn(&GetTaskResult) -> bool,
) -> (GetTaskResult, Vec<String>) {
    let start = Instant::now();
    let mut seen = Vec::new();
    loop {
        let t = get(client, task_id).await;
        if let Some(m) = &t.task.task.status_message
            && seen.last() != Some(m)
        {
            seen.push(m.clone());
        }
        if done(&t) {
            return (t, seen);
        }
        assert!(start.elapsed() < PATIENCE, "task {task_id}: {seen:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) fn terminal(t: &GetTaskResult) -> bool {
    t.task.status().is_terminal()
}

/// The JSON-RPC error code of a failed request.
fn rpc_code(e: &rmcp::service::ServiceError) -> i32 {
    match e {
        rmcp::service::ServiceError::McpError(e) => e.code.0,
        other => panic!("not a JSON-RPC error: {other:?}"),
    }
}

/// The audit events of `tool`, oldest first.
async fn events(root: &TestRoot, tool: &str) -> Vec<Value> {
    let audit = root.trail(&format!("tool_id={tool}")).await;
    let mut events = audit.clone();
    events.reverse();
    events
}

/// An allowed test that reports 5 tests, one every 0.4 s, and how to count them.
const SUITE: &str = r#"[[skill.allowed_tests]]
name = "suite"
argv = ["sh", "-c", "echo running 5 tests; for i in 1 2 3 4 5; do sleep 0.4; echo \"test t$i ... ok\"; done"]
timeout_ms = 30000
progress_line = '^test .* \.\.\. ok$'
progress_total = '^running (\d+) tests$'
"#;

#[tokio::test]
async fn a_test_run_is_a_task_polled_to_completion_with_its_progress() {
    let root = TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:tasks-run", SUITE).await.unwrap();
    let token = root.bearer("hub:tasks-run", "InfraOpsControl").await;
    let client = connect(&root, &token, true).await;
    let args = json!({ "name": "suite" });
    let created = start_task(&client, "hub.run_allowed_tests", args.clone(), "k-run").await;
    let task = &created.task;
    assert_eq!(task.status, TaskStatus::Working);
    assert_eq!(task.ttl_ms, Some(86_400_000));
    assert_eq!(task.poll_interval_ms, Some(1_000));
    let trace = created.meta.as_ref().unwrap().0["trace_id"].clone();
    assert_eq!(trace.as_str().map(str::len), Some(32), "{trace}");

    let (done, seen) = poll_until(&client, &task.task_id, terminal).await;
    assert!(
        seen.iter().any(|m| m.contains("of 5 tests done")),
        "the run's counts reach the task: {seen:?}"
    );
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("{done:?}")
    };
    let body = &result["structuredContent"];
    assert_eq!(result["isError"], false, "{result:?}");
    assert_eq!(
        (body["phase"].as_str(), body["result"]["passed"].as_bool()),
        (Some("execute"), Some(true)),
        "{body}"
    );
    // One audited call, the execute, whose event the result names; the preview before it.
    let evs = events(&root, "hub.run_allowed_tests").await;
    let dry: Vec<(bool, &str)> = evs
        .iter()
        .map(|e| {
            (
                e["dry_run"].as_bool().unwrap(),
                e["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(dry, [(true, "ok"), (false, "ok")], "{evs:?}");
    assert_eq!(result["_meta"]["event_id"], evs[1]["event_id"]);
    assert_eq!(evs[1]["trace_id"], trace);

    // A client without the extension gets the answer within its request, and the counts as
    // progress notifications on that request's stream (rmcp's client gives every request a
    // progress token).
    let plain = connect(&root, &token, false).await;
    let token2 = preview(&plain, "hub.run_allowed_tests", &args).await;
    let call = params(
        "hub.run_allowed_tests",
        execute_args(&args, &token2, "k-plain"),
    );
    let answer = plain.peer().call_tool_once(call).await.unwrap();
    let CallToolResponse::Complete(r) = answer else {
        panic!("{answer:?}")
    };
    assert_eq!(r.structured_content.unwrap()["result"]["passed"], true);
    // Notifications are handled on the client's own task: one sent before the answer may be
    // handled just after it.
    mcp_tests::until("progress to arrive", async || {
        !plain.service().progress.lock().unwrap().is_empty()
    })
    .await;
    let progress = plain.service().progress.lock().unwrap().clone();
    assert!(
        progress
            .iter()
            .any(|p| p.total == Some(5.0) && p.progress >= 1.0),
        "{progress:?}"
    );
    // The token comes back as the client gave it (root's service saw one of its own).
    assert!(
        progress
            .iter()
            .all(|p| p.progress_token == progress[0].progress_token
                && matches!(p.progress_token.0, NumberOrString::Number(_))),
        "{progress:?}"
    );
    hub.stop().await;
    root.stop().await;
}

#[tokio::test]
async fn a_deploy_task_cancelled_midway_is_stopped_on_the_hub() {
    let dir = tempfile::tempdir().unwrap();
    let (src, _) = mcp_tests::git::repository(dir.path());
    let root = TestRoot::start().await.unwrap();
    // The service ignores SIGTERM: restarting it takes its whole stop timeout (8 s), the
    // deploy's last step, long enough to cancel the task there.
    let hub = root
        .start_hub(
            "hub:tasks-deploy",
            &format!(
                "[deploy]\nrepository = \"{}\"\nworktree = \"deploy/app\"\n\
                 allowed_refs = [\"main\", \"v*\"]\nrestart_services = [\"stubborn\"]\n\
                 [[services]]\nname = \"stubborn\"\n\
                 argv = [\"sh\", \"-c\", \"trap '' TERM; while true; do sleep 1; done\"]\n\
                 stop_timeout_ms = 8000\n",
                src.display()
            ),
        )
        .await
        .unwrap();
    let token = root.bearer("hub:tasks-deploy", "InfraOpsControl").await;
    let client = connect(&root, &token, true).await;
    let created = start_task(&client, "hub.deploy_ref", json!({ "ref": "v2" }), "k-dep").await;
    let id = created.task.task_id.clone();
    let (t, seen) = poll_until(&client, &id, |t| {
        terminal(t)
            || t.task
                .task
                .status_message
                .as_deref()
                .is_some_and(|m| m.contains("restarting service `stubborn`"))
    })
    .await;
    assert_eq!(t.task.status(), TaskStatus::Working, "{seen:?}");
    assert!(
        seen.iter().any(|m| m.contains("step 1 of 4")),
        "every step is reported: {seen:?}"
    );
    client
        .peer()
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    let t = get(&client, &id).await;
    assert_eq!(t.task.status(), TaskStatus::Cancelled);

    // The call's one event says it was cancelled, and the hub stopped the adapter.
    let start = Instant::now();
    let event = loop {
        let evs = events(&root, "hub.deploy_ref").await;
        if let Some(e) = evs.iter().find(|e| e["dry_run"] == false) {
            break e.clone();
        }
        assert!(
            start.elapsed() < PATIENCE,
            "no event for the cancelled deploy"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        (event["status"].as_str(), event["error"]["code"].as_str()),
        (Some("error"), Some("cancelled")),
        "{event}"
    );
    let reader = root.lease("hub:tasks-deploy", "InfraOpsRead").await.1;
    let (_, log) = root.call(&reader, "hub.get_activity_log", json!({})).await;
    let entries = items(&log["result"]["entries"]);
    let deploy = entries
        .iter()
        .find(|e| e["tool_id"] == "hub.deploy_ref" && e["dry_run"] == false)
        .unwrap_or_else(|| panic!("{log}"));
    assert_eq!(deploy["error_code"], "cancelled", "{deploy}");
    // Cancelling again is acknowledged (the extension's cancel is eventually consistent).
    client
        .peer()
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    assert_eq!(get(&client, &id).await.task.status(), TaskStatus::Cancelled);
    hub.stop().await;
    root.stop().await;
}

#[tokio::test]
async fn tasks_outlive_a_root_restart_and_stay_their_owners() {
    let mut root = TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:tasks-keep", SUITE).await.unwrap();
    let token = root.bearer("hub:tasks-keep", "InfraOpsControl").await;
    let client = connect(&root, &token, true).await;
    let created = start_task(
        &client,
        "hub.run_allowed_tests",
        json!({ "name": "suite" }),
        "k-keep",
    )
    .await;
    let id = created.task.task_id.clone();
    let (before, _) = poll_until(&client, &id, terminal).await;
    assert_eq!(before.task.status(), TaskStatus::Completed);

    root.restart().await.unwrap();
    let client = connect(&root, &token, true).await;
    let after = get(&client, &id).await;
    assert_eq!(after.task.status(), TaskStatus::Completed);
    assert_eq!(after.task.payload, before.task.payload, "the same result");

    // Another lease on the same target is told there is no such task, for every method.
    let other = root.bearer("hub:tasks-keep", "InfraOpsControl").await;
    let stranger = connect(&root, &other, true).await;
    let e = stranger
        .peer()
        .get_task(GetTaskParams::new(id.clone()))
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&e), -32602);
    assert!(e.to_string().contains("no task"), "{e}");
    let e = stranger
        .peer()
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&e), -32602);
    let unknown = stranger
        .peer()
        .get_task(GetTaskParams::new("not-a-task"))
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&unknown), -32602);
    // tasks/update has nothing to take: acknowledged for the owner, refused for others.
    let empty = serde_json::from_value(json!({})).unwrap();
    client
        .peer()
        .update_task(UpdateTaskParams::new(id.clone(), empty))
        .await
        .unwrap();
    // Without the extension, task methods are refused as the extension says (-32021).
    let plain = connect(&root, &token, false).await;
    let e = plain
        .peer()
        .get_task(GetTaskParams::new(id.clone()))
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&e), -32021, "{e}");
    assert_eq!(get(&client, &id).await.task.status(), TaskStatus::Completed);

    // On the wire: `Mcp-Name` must repeat the task id, and the id is a string.
    let (status, body) = raw_task_get(&root, &token, json!(id), "another-task").await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("does not match"), "{body}");
    let (status, body) = raw_task_get(&root, &token, json!(7), "7").await;
    assert_eq!(body["error"]["code"], -32602, "{status} {body}");

    // The checks run when the task would be created: a lease that may not run the test is
    // refused at once, within its request, and no task exists.
    let reader = root.bearer("hub:tasks-keep", "InfraOpsRead").await;
    let reader = connect(&root, &reader, true).await;
    let exec = execute_args(&json!({ "name": "suite" }), "mcpc_forged", "k-r");
    let answer = reader
        .peer()
        .call_tool_once(params("hub.run_allowed_tests", exec))
        .await
        .unwrap();
    let CallToolResponse::Complete(r) = answer else {
        panic!("a refused call became a task: {answer:?}")
    };
    assert_eq!(
        r.structured_content.unwrap()["error"]["code"],
        "capability_not_granted"
    );
    hub.stop().await;
    root.stop().await;
}

/// A raw 2026-07-28 `tasks/get` with `task_id` as given and `Mcp-Name: name`.
async fn raw_task_get(root: &TestRoot, token: &str, task_id: Value, name: &str) -> (u16, Value) {
    let res = mcp_tests::http_client()
        .post(root.mcp_url())
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tasks/get")
        .header("mcp-name", name)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {
                "taskId": task_id,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {
                        "extensions": { "io.modelcontextprotocol/tasks": {} }
                    },
                    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}
                }
            }}),
        )
        .send()
        .await
        .unwrap();
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn the_typescript_sdk_runs_a_2025_11_25_task_on_a_session() {
    let root = TestRoot::start().await.unwrap();
    let extra = format!(
        "{SUITE}[[skill.allowed_tests]]\nname = \"slow\"\nargv = [\"sleep\", \"30\"]\ntimeout_ms = 60000\n"
    );
    let hub = root.start_hub("hub:tasks-ts", &extra).await.unwrap();
    let token = root.bearer("hub:tasks-ts", "InfraOpsControl").await;
    let seen = mcp_tests::run_node_client("tasks.mjs", &[&root.mcp_url(), &token])
        .await
        .unwrap();
    assert_eq!(seen["protocol"], "2025-11-25", "{seen}");
    assert_eq!(
        seen["tasks_capability"]["requests"]["tools"]["call"],
        json!({}),
        "{seen}"
    );
    assert_eq!(
        seen["task_support"],
        json!({ "hub.run_allowed_tests": "optional", "hub.get_status": null }),
        "{seen}"
    );
    // The SDK's driver: created, polled until completed, then the result.
    let messages = items(&seen["messages"]);
    assert_eq!(messages.first(), Some(&json!("taskCreated")), "{seen}");
    assert_eq!(messages.last(), Some(&json!("result")), "{seen}");
    assert!(seen.get("error").is_none(), "{seen}");
    assert_eq!(seen["result"]["result"]["passed"], true, "{seen}");
    assert_eq!(
        seen["result_meta"]["io.modelcontextprotocol/related-task"]["taskId"], seen["task_id"],
        "{seen}"
    );
    assert!(items(&seen["listed"]).contains(&seen["task_id"]), "{seen}");
    // The run's progress, on the session's stream, under the call's progress token.
    let progress = items(&seen["progress"]);
    assert!(
        progress
            .iter()
            .any(|p| p[1] == 5.0 && p[0].as_f64() >= Some(1.0)),
        "{seen}"
    );
    assert_eq!(seen["forbidden"], -32601, "{seen}");
    assert_eq!(seen["cancelled_status"], "cancelled", "{seen}");
    assert_eq!(seen["second_cancel"], -32602, "{seen}");
    assert_eq!(seen["unknown"], -32602, "{seen}");
    assert_eq!(seen["bad_cursor"], -32602, "{seen}");
    assert_eq!(seen["cancelled_result"], -32603, "{seen}");
    // The cancelled task's call ends with its event, saying so.
    let start = Instant::now();
    loop {
        let evs = events(&root, "hub.run_allowed_tests").await;
        let cancelled = evs
            .iter()
            .filter(|e| e["error"]["code"] == "cancelled")
            .count();
        if cancelled == 1 {
            break;
        }
        assert!(start.elapsed() < PATIENCE, "{evs:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    hub.stop().await;
    root.stop().await;
}

#[tokio::test]
async fn a_task_whose_root_is_killed_fails_with_its_event_at_restart() {
    use crate::hardening::faults::RootProc;
    mcp_tests::init_crypto();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut root = RootProc::start(dir.path(), "root", 0, &data, "").await;
    let port = root.port();
    let hub_token = root.enroll("hub:tasks-crash").await;
    let slow = "[[skill.allowed_tests]]\nname = \"slow\"\nargv = [\"sleep\", \"30\"]\ntimeout_ms = 60000\n";
    let hub = mcp_tests::TestHub::start(&root.base, "hub:tasks-crash", &hub_token, slow)
        .await
        .unwrap();
    let (_, token) = root.lease("hub:tasks-crash", "InfraOpsControl").await;
    let url = format!("{}/mcp", root.base);
    let client = connect_to(&url, &token, true).await;
    let created = start_task(
        &client,
        "hub.run_allowed_tests",
        json!({ "name": "slow" }),
        "k-crash",
    )
    .await;
    let id = created.task.task_id.clone();
    assert_eq!(get(&client, &id).await.task.status(), TaskStatus::Working);

    root.proc.kill();
    let root = RootProc::start(dir.path(), "root", port, &data, "").await;
    let client = connect_to(&url, &token, true).await;
    let t = get(&client, &id).await;
    let TaskPayload::Failed { error } = &t.task.payload else {
        panic!("{t:?}")
    };
    assert_eq!(error["code"], -32603, "{error:?}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("root stopped while the task ran") && message.contains("unknown"),
        "{message}"
    );
    // The call's one event, committed at the restart, says so; the preview's is there too.
    let audit = root
        .admin_get("/v1/root/mcp/audit?tool_id=hub.run_allowed_tests")
        .await;
    let executes: Vec<&Value> = items(&audit["events"])
        .iter()
        .filter(|e| e["dry_run"] == false)
        .collect();
    assert_eq!(executes.len(), 1, "{audit}");
    assert_eq!(
        (
            executes[0]["status"].as_str(),
            executes[0]["error"]["code"].as_str()
        ),
        (Some("error"), Some("internal")),
        "{audit}"
    );
    assert_eq!(error["data"]["event_id"], executes[0]["event_id"]);
    hub.stop().await;
}
