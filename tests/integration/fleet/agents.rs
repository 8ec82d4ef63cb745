//! Fleet runs from MCP: an agent's fleet lease is bound to a selector, lists and calls only
//! the fleet tools, and reaches each target through a lease of its own that the fleet lease
//! hands on (its profile, its deadline), so it reaches no target a single-target lease could
//! not. Reads run at once; writes are previewed, confirmed once and executed once per
//! target; revoking the fleet lease ends its targets' leases and cancels its run. The hubs'
//! test command appends a line to a file per hub, so "ran" is counted on the machine.

use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::{TestRoot, listed_tools, mcp_client, until};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use mcp_tests::runs;

/// Calls `tool` with `args`: its structured content, and whether it is an error.
pub(super) async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &'static str,
    args: Value,
) -> (Value, bool) {
    let res = client
        .call_tool(
            CallToolRequestParams::new(tool).with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    (
        res.structured_content.unwrap_or(Value::Null),
        res.is_error == Some(true),
    )
}

fn count(r: &Value, status: &str) -> u64 {
    r["counts"][status]
        .as_u64()
        .unwrap_or_else(|| panic!("{r}"))
}

/// A fleet lease is issued for a selector and refused precisely when it cannot be; it lists
/// only the fleet tools its profile grants and calls nothing else. A read runs on every
/// target (a cordoned one excluded, not missing); a write is previewed (nothing runs), its
/// confirmation redeemed once, each target written once, and a replay of its key runs
/// nothing. Its targets' leases are children of the fleet lease, ended with the run; another
/// caller's run is not found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_lease_reads_and_writes_its_selector_through_fleet_tools_only() {
    let root = TestRoot::start().await.unwrap();
    let (dir, hubs) = root
        .start_counted_hubs(&["a-1", "a-2", "a-3", "a-4"], 0)
        .await;
    let counter = |id: &str| dir.path().join(format!("{id}.txt"));
    root.admin_post("/v1/root/hubs/a-4/lifecycle/cordon", json!({}))
        .await;
    let ops = root.admin();
    let ran = || ["a-1", "a-2", "a-3", "a-4"].map(|id| runs(&counter(id)));

    // Refusals, each precise.
    for (body, status, words) in [
        (
            json!({ "selector": "id=a-*,", "capability_profile": "InfraOpsControl", "ttl_sec": 600 }),
            400,
            "selector:",
        ),
        (
            json!({ "selector": "id=nothing-*", "capability_profile": "InfraOpsControl", "ttl_sec": 600 }),
            400,
            "names no enrolled target",
        ),
        (
            json!({ "selector": "id=a-*", "target_id": "a-1", "capability_profile": "InfraOpsControl", "ttl_sec": 600 }),
            400,
            "not both",
        ),
        (
            json!({ "selector": "id=a-*", "capability_profile": "ProfileOpsRead", "ttl_sec": 600 }),
            403,
            "grants no fleet tool",
        ),
    ] {
        let (s, b) = ops
            .post_status("/v1/root/mcp/sessions", body.clone())
            .await
            .unwrap();
        assert_eq!(s, status, "{body}: {b}");
        assert!(error_message(&b).contains(words), "{body}: {b}");
    }

    let issued = root.fleet_lease("id=a-*", "InfraOpsControl").await;
    assert_eq!(issued["lease"]["target_id"], "fleet:id=a-*", "{issued}");
    assert_eq!(issued["lease"]["subnet_id"], "*", "{issued}");
    let fleet_id = issued["session_id"].as_str().unwrap().to_owned();
    let client = mcp_client(&root.mcp_url(), issued["token"].as_str().unwrap())
        .await
        .unwrap();
    let mut tools = listed_tools(&client).await;
    tools.sort();
    assert_eq!(
        tools,
        [
            "root.get_fleet_run",
            "root.run_fleet_read",
            "root.run_fleet_write"
        ]
    );
    // No tool of one target, and no target's tool run through the fleet tool unless its
    // profile grants it.
    let (e, is_error) = call(&client, "hub.get_status", json!({})).await;
    assert!(is_error, "{e}");
    assert_eq!(e["error"]["code"], "capability_not_granted", "{e}");
    assert!(error_message(&e).contains("fleet tools only"), "{e}");
    let (e, is_error) = call(
        &client,
        "root.run_fleet_read",
        json!({ "tool": "hub.memory.get_status" }),
    )
    .await;
    assert!(is_error, "{e}");
    assert_eq!(e["error"]["code"], "capability_not_granted", "{e}");
    let (e, _) = call(
        &client,
        "root.run_fleet_read",
        json!({ "tool": "hub.run_allowed_tests", "arguments": { "name": "smoke" } }),
    )
    .await;
    assert_eq!(e["error"]["code"], "invalid_arguments", "{e}");
    let (e, _) = call(
        &client,
        "root.run_fleet_read",
        json!({ "tool": "hub.get_status", "plan": { "max_concurrency": 0 } }),
    )
    .await;
    assert!(error_message(&e).contains("max_concurrency"), "{e}");

    // A read: every target accounted for, the cordoned one excluded (with why) by its own
    // lease: an operator's cordon is not an error.
    let (r, is_error) = call(
        &client,
        "root.run_fleet_read",
        json!({ "tool": "hub.get_status", "plan": { "max_concurrency": 2 } }),
    )
    .await;
    assert!(!is_error, "{r}");
    assert_eq!(r["state"], "completed", "{r}");
    assert_eq!(
        (
            count(&r, "succeeded"),
            count(&r, "excluded"),
            r["errors"].as_u64().unwrap()
        ),
        (3, 1, 0),
        "{r}"
    );
    assert_eq!(r["created_by"], format!("lease:{fleet_id}"), "{r}");
    let read_run = r["run_id"].as_str().unwrap().to_owned();

    // A write: the preview runs nothing and shows who takes part.
    let write = json!({ "tool": "hub.run_allowed_tests", "arguments": { "name": "smoke" }, "plan": { "canary": 1, "max_concurrency": 2 } });
    let (p, is_error) = call(&client, "root.run_fleet_write", write.clone()).await;
    assert!(!is_error, "{p}");
    let effect = &p["expected_effect"];
    assert_eq!(
        (effect["total"].as_u64(), effect["taking_part"].as_u64()),
        (Some(4), Some(3)),
        "{p}"
    );
    assert_eq!(
        effect["excluded"],
        json!([{ "target_id": "a-4", "code": "target_cordoned" }]),
        "{p}"
    );
    assert!(
        effect["description"]
            .as_str()
            .unwrap()
            .contains("on 3 of the 4 targets"),
        "{p}"
    );
    assert_eq!(ran(), [0, 0, 0, 0]);
    let token = p["confirmation_token"].as_str().unwrap();
    let mut execute = write.clone();
    execute["phase"] = json!("execute");
    execute["confirmation_token"] = json!(token);
    execute["idempotency_key"] = json!("agent-k1");
    let (x, is_error) = call(&client, "root.run_fleet_write", execute.clone()).await;
    assert!(!is_error, "{x}");
    let report = &x["result"];
    assert_eq!(report["run_id"], effect["run_id"], "{x}");
    assert_eq!(report["state"], "completed", "{x}");
    assert_eq!(
        (count(report, "succeeded"), count(report, "excluded")),
        (3, 1),
        "{x}"
    );
    assert_eq!(ran(), [1, 1, 1, 0]);
    // The same key again: the first execution answers, nothing runs.
    let (again, _) = call(&client, "root.run_fleet_write", execute).await;
    assert_eq!(again["replay"], true, "{again}");
    assert_eq!(ran(), [1, 1, 1, 0]);

    // Its targets' leases were the fleet lease's children, ended with the run.
    let d = root
        .admin_get(&format!("/v1/root/mcp/sessions/{fleet_id}/delegation"))
        .await;
    let children: Vec<&Value> = items(&d["descendants"]).iter().collect();
    assert!(children.len() >= 4, "{d}");
    for c in &children {
        assert_eq!(c["lease"]["kind"], "fleet", "{d}");
        assert_eq!(c["lease"]["capability_profile"], "InfraOpsControl", "{d}");
        assert_eq!(c["lease"]["status"], "revoked", "{d}");
    }

    // Reports of its own runs only.
    let (g, is_error) = call(
        &client,
        "root.get_fleet_run",
        json!({ "run_id": read_run, "target_id": "a-1" }),
    )
    .await;
    assert!(!is_error, "{g}");
    assert_eq!(g["status"], "succeeded", "{g}");
    let theirs = root
        .admin_post(
            "/v1/root/fleet/runs",
            json!({ "selector": "id=a-1", "tool_id": "hub.get_status" }),
        )
        .await;
    let (e, _) = call(
        &client,
        "root.get_fleet_run",
        json!({ "run_id": theirs["run_id"] }),
    )
    .await;
    assert_eq!(e["error"]["code"], "not_found", "{e}");
    client.cancel().await.unwrap();
    for h in hubs {
        h.stop().await;
    }
}

/// Revoking a fleet lease while its write runs: the run is cancelled (targets not started
/// never run), its targets' leases end, and its bearer is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_fleet_lease_cancels_its_run() {
    let root = TestRoot::start().await.unwrap();
    let (dir, hubs) = root.start_counted_hubs(&["r-1", "r-2", "r-3"], 2).await;
    let counter = |id: &str| dir.path().join(format!("{id}.txt"));
    let issued = root.fleet_lease("id=r-*", "InfraOpsControl").await;
    let fleet_id = issued["session_id"].as_str().unwrap().to_owned();
    let token = issued["token"].as_str().unwrap().to_owned();
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
    let write = json!({ "tool": "hub.run_allowed_tests", "arguments": { "name": "smoke" }, "plan": { "max_concurrency": 1 } });
    let (p, _) = call(&client, "root.run_fleet_write", write.clone()).await;
    let mut execute = write;
    execute["phase"] = json!("execute");
    execute["confirmation_token"] = p["confirmation_token"].clone();
    execute["idempotency_key"] = json!("agent-k2");
    let running = tokio::spawn(async move { call(&client, "root.run_fleet_write", execute).await });
    let started = |id: &str| dir.path().join(format!("{id}.txt.started")).exists();
    until("the first target starts", async || started("r-1")).await;
    root.on_lease(&fleet_id, "revoke").await;
    let (x, is_error) = running.await.unwrap();
    assert!(!is_error, "{x}");
    let r = &x["result"];
    assert_eq!(r["state"], "cancelled", "{x}");
    assert_eq!(count(r, "cancelled"), 2, "{x}");
    // The target running finished (a write is not cut off midway); no other ever started.
    until("the running target finishes", async || {
        runs(&counter("r-1")) == 1
    })
    .await;
    assert!(!started("r-2") && !started("r-3"));
    let d = root
        .admin_get(&format!("/v1/root/mcp/sessions/{fleet_id}/delegation"))
        .await;
    for c in items(&d["descendants"]) {
        assert_eq!(c["lease"]["status"], "revoked", "{d}");
    }
    let refused = mcp_client(&root.mcp_url(), &token).await;
    assert!(
        refused.is_err(),
        "a revoked fleet lease's bearer is refused"
    );
    for h in hubs {
        h.stop().await;
    }
}

/// The Python SDK (`mcp` 2.3, protocol 2026-07-28) drives a fleet write as an agent would:
/// it calls `root.run_fleet_write` to execute with a key and no token, answers root's
/// multi-round-trip question (the person sees the fleet preview: who takes part, the plan,
/// the expected effect), and, declaring the tasks extension, gets a task it polls until the
/// run ended, its status following the run's progress. Each target ran once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_confirms_a_fleet_write_and_follows_its_task() {
    let root = TestRoot::start().await.unwrap();
    let (dir, hubs) = root.start_counted_hubs(&["p-1", "p-2", "p-3"], 1).await;
    let counter = |id: &str| dir.path().join(format!("{id}.txt"));
    let issued = root.fleet_lease("id=p-*", "InfraOpsControl").await;
    let token = issued["token"].as_str().unwrap();
    let seen = mcp_tests::run_python_client("fleet.py", &[&root.mcp_url(), token, "py-fleet-1"])
        .await
        .unwrap();
    let mut tools: Vec<&str> = items(&seen["tools"])
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    tools.sort();
    assert_eq!(
        tools,
        [
            "root.get_fleet_run",
            "root.run_fleet_read",
            "root.run_fleet_write"
        ],
        "{seen}"
    );
    let asked = items(&seen["asked"]);
    assert_eq!(asked.len(), 1, "{seen}");
    let question = asked[0].as_str().unwrap();
    assert!(
        question.contains("on 3 of the 3 targets of `id=p-*`") && question.contains("smoke"),
        "{seen}"
    );
    assert!(seen["task_id"].is_string(), "a task was created: {seen}");
    assert!(
        items(&seen["statuses"])
            .iter()
            .any(|s| s.as_str().unwrap().contains("fleet run")),
        "the task's status follows the run: {seen}"
    );
    assert!(
        items(&seen["statuses"])
            .iter()
            .any(|s| s == "`root.run_fleet_write` completed: 3 targets: 3 succeeded"),
        "the task's last status sums the run up: {seen}"
    );
    assert_eq!(seen["is_error"], false, "{seen}");
    let report = &seen["structured"]["result"];
    assert_eq!(report["state"], "completed", "{seen}");
    assert_eq!(count(report, "succeeded"), 3, "{seen}");
    assert_eq!(
        ["p-1", "p-2", "p-3"].map(|id| runs(&counter(id))),
        [1, 1, 1]
    );
    for h in hubs {
        h.stop().await;
    }
}
