//! Fleet runs: a read on every target a selector names, under a plan (canaries, a window, an
//! error budget), each target's call governed and audited under the run's trace, every target
//! accounted for (an offline one `undeliverable`, a cordoned one `excluded` with its reason), durable across a
//! restart, and controlled (pause, resume, cancel) by audited operator commands; bad runs and
//! commands refused precisely, refusals audited.

use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::refusal;
use mcp_tests::{TestRoot, until};
use serde_json::{Value, json};

use crate::ops::admin_cli::admin;

/// Starts a run; its report.
async fn start(root: &TestRoot, body: Value) -> Value {
    root.admin_post("/v1/root/fleet/runs", body).await
}

/// The events of the run's trace, oldest first: `(tool_id, target_id, status)`.
async fn trace(root: &TestRoot, trace_id: &str) -> Vec<(String, String, String)> {
    let v = root
        .trail(&format!("trace_id={trace_id}&limit=1000&order=asc"))
        .await;
    v.iter()
        .map(|e| {
            (
                e["tool_id"].as_str().unwrap().to_owned(),
                e["target_id"].as_str().unwrap_or("").to_owned(),
                e["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn count(r: &Value, status: &str) -> u64 {
    r["counts"][status].as_u64().unwrap()
}

/// Three hubs, one enrolled target whose hub never connected and one cordoned hub, all
/// labelled `role=web`, plus one other target: a read on `label:role=web` reaches exactly the
/// five, reports each (3 succeeded, 1 undeliverable, 1 excluded: an operator's cordon is not an error), groups the outcomes, and its
/// trace holds the run's event and one call event per target. From the CLI too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_read_reaches_every_selected_target_and_accounts_for_each() {
    let root = TestRoot::start().await.unwrap();
    let mut hubs = Vec::new();
    for id in ["web-1", "web-2", "web-3", "web-5", "db-1"] {
        hubs.push(root.start_hub(id, "").await.unwrap());
    }
    root.admin_post(
        "/v1/root/hubs",
        json!({ "target_id": "web-4", "environment": "test", "labels": { "role": "web" } }),
    )
    .await;
    for id in ["web-1", "web-2", "web-3", "web-5"] {
        root.admin_post(
            &format!("/v1/root/hubs/{id}/labels"),
            json!({ "set": { "role": "web" } }),
        )
        .await;
    }
    root.admin_post("/v1/root/hubs/web-5/lifecycle/cordon", json!({}))
        .await;

    let started = start(
        &root,
        json!({ "selector": "label:role=web", "tool_id": "hub.get_status",
                "plan": { "canary": 1, "max_concurrency": 2, "max_errors": 5 } }),
    )
    .await;
    assert_eq!(started["total"], 5, "{started}");
    assert_eq!(started["set_hash"].as_str().unwrap().len(), 64);
    assert!(started["event_id"].is_string());
    let run_id = started["run_id"].as_str().unwrap().to_owned();
    let r = root.fleet_run_ended(&run_id).await;
    assert_eq!(r["state"], "completed", "{r}");
    assert_eq!(
        (
            count(&r, "succeeded"),
            count(&r, "undeliverable"),
            count(&r, "excluded")
        ),
        (3, 1, 1),
        "{r}"
    );
    assert_eq!(
        (r["errors"].as_u64(), r["error_budget"].as_u64()),
        (Some(1), Some(5))
    );
    assert_eq!(
        r["summary"],
        "5 targets: 3 succeeded, 1 undeliverable, 1 excluded"
    );
    let group = |status: &str| {
        items(&r["groups"])
            .iter()
            .find(|g| g["status"] == status)
            .cloned()
            .unwrap()
    };
    assert_eq!(group("undeliverable")["code"], "target_offline");
    assert_eq!(group("undeliverable")["targets"], json!(["web-4"]));
    assert_eq!(group("excluded")["code"], "target_cordoned");
    assert_eq!(group("excluded")["targets"], json!(["web-5"]));
    let canary = &r["targets"][0];
    assert_eq!(
        canary["target_id"], "web-1",
        "the canary is the first target by id"
    );

    // The run's trace: its own event, then one governed call event per target, none for
    // the target the selector did not name.
    let events = trace(&root, r["trace_id"].as_str().unwrap()).await;
    assert_eq!(events[0].0, "admin.fleet.run", "{events:?}");
    let calls: Vec<_> = events.iter().filter(|e| e.0 == "hub.get_status").collect();
    assert_eq!(calls.len(), 5, "{events:?}");
    let mut reached: Vec<&str> = calls.iter().map(|e| e.1.as_str()).collect();
    reached.sort();
    assert_eq!(reached, ["web-1", "web-2", "web-3", "web-4", "web-5"]);
    assert_eq!(calls.iter().filter(|e| e.2 == "ok").count(), 3);

    // A target's full result.
    let one = root
        .admin_get(&format!("/v1/root/fleet/runs/{run_id}/targets/web-2"))
        .await;
    assert_eq!(one["status"], "succeeded");
    assert!(one["result"].is_object(), "{one}");
    let listed = root.admin_get("/v1/root/fleet/runs").await;
    assert_eq!(listed["runs"][0]["run_id"], run_id.as_str());

    // The CLI: a run followed to its end, exit 1 since targets failed; its status.
    let (code, out, err) = admin(
        &root,
        &[
            "fleet",
            "run",
            "--selector",
            "label:role=web",
            "--tool",
            "hub.get_status",
            "--max-concurrency",
            "50%",
            "--max-errors",
            "40%",
            "--wait",
        ],
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("5 targets: 3 succeeded, 1 undeliverable, 1 excluded"),
        "{out}"
    );
    assert!(err.contains("5/5 done"), "the progress line: {err}");
    let (code, out, err) = admin(&root, &["fleet", "status", &run_id]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("(completed)") && out.contains("1 x excluded (target_cordoned): web-5"),
        "{out}"
    );
    for hub in hubs {
        hub.stop().await;
    }
}

/// An error budget of 0: the first failure stops new targets (the rest `skipped`, one call
/// made); a run paused during its post-canary pause starts nothing until resumed; a
/// cancelled run cancels what had not started; bad runs and commands are refused precisely,
/// each refusal an event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_budget_pause_resume_cancel_and_bad_runs() {
    let root = TestRoot::start().await.unwrap();
    let ops = root.admin();
    for id in ["a-off-1", "a-off-2"] {
        root.enroll(id, "test").await.unwrap();
    }
    let hub = root.start_hub("b-live", "").await.unwrap();

    let stopped = start(
        &root,
        json!({ "selector": "id=*", "tool_id": "hub.get_status",
                "plan": { "canary": 1, "max_errors": 0 } }),
    )
    .await;
    let r = root
        .fleet_run_ended(stopped["run_id"].as_str().unwrap())
        .await;
    assert_eq!(r["state"], "stopped", "{r}");
    assert_eq!(
        (count(&r, "undeliverable"), count(&r, "skipped")),
        (1, 2),
        "{r}"
    );
    let calls = trace(&root, r["trace_id"].as_str().unwrap()).await;
    assert_eq!(
        calls.iter().filter(|e| e.0 == "hub.get_status").count(),
        1,
        "no target starts once the budget is spent: {calls:?}"
    );

    // Paused during the pause after its canary: nothing starts until resumed. The pause is
    // long enough for the command to arrive within it on a loaded machine (a CI run, with the
    // CLI being built beside it, failed this test once with a pause of 1.5 s; the cause was
    // not shown), and ends soon after the resume.
    let paused = start(
        &root,
        json!({ "selector": "id=*", "tool_id": "hub.get_status",
                "plan": { "canary": 1, "max_errors": 5, "pause_after_canary_ms": 5000 } }),
    )
    .await;
    let id = paused["run_id"].as_str().unwrap().to_owned();
    let path = format!("/v1/root/fleet/runs/{id}");
    until("the canary finished", async || {
        count(&root.admin_get(&path).await, "pending") == 2
    })
    .await;
    let p = root.admin_post(&format!("{path}/pause"), json!({})).await;
    assert_eq!(p["state"], "paused");
    let (got, body) = ops
        .post_status(&format!("{path}/pause"), json!({}))
        .await
        .unwrap();
    assert_eq!(refusal(got, &body), (409, "conflict"), "{body}");
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let still = root.admin_get(&path).await;
    assert_eq!(
        (still["state"].as_str(), count(&still, "pending")),
        (Some("paused"), 2),
        "{still}"
    );
    root.admin_post(&format!("{path}/resume"), json!({})).await;
    let r = root.fleet_run_ended(&id).await;
    assert_eq!(
        (
            r["state"].as_str(),
            count(&r, "succeeded"),
            count(&r, "undeliverable")
        ),
        (Some("completed"), 1, 2),
        "{r}"
    );
    let (got, body) = ops
        .post_status(&format!("{path}/pause"), json!({}))
        .await
        .unwrap();
    assert_eq!(got, 409, "a finished run cannot be paused: {body}");
    assert!(error_message(&body).contains("is completed"), "{body}");

    // Cancelled during its pause: the targets not started are cancelled.
    let cancelled = start(
        &root,
        json!({ "selector": "id=*", "tool_id": "hub.get_status",
                "plan": { "canary": 1, "max_errors": 5, "pause_after_canary_ms": 60000 } }),
    )
    .await;
    let id = cancelled["run_id"].as_str().unwrap().to_owned();
    let path = format!("/v1/root/fleet/runs/{id}");
    until("the canary finished", async || {
        count(&root.admin_get(&path).await, "pending") == 2
    })
    .await;
    // Over REST: the CLI's first use in a fresh checkout builds it, which may outlast the
    // pause (CI saw the run completed by then).
    let c = root.admin_post(&format!("{path}/cancel"), json!({})).await;
    assert_eq!(c["state"], "cancelled", "{c}");
    let r = root.fleet_run_ended(&id).await;
    assert_eq!(
        (r["state"].as_str(), count(&r, "cancelled")),
        (Some("cancelled"), 2),
        "{r}"
    );
    let commands = root.trace_of(&r, "tool_id=admin.fleet.cancel").await;
    assert_eq!(commands.len(), 1, "the cancel joins the run's trace");
    let (code, out, err) = admin(&root, &["fleet", "cancel", &id]);
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("is cancelled: it cannot be cancelled"),
        "{err}"
    );

    // Bad runs and commands.
    let refused_before = root
        .trail("tool_id=admin.fleet.run&status=error&limit=100")
        .await
        .len();
    let bad = [
        (
            json!({ "selector": "env=test,,x", "tool_id": "hub.get_status" }),
            400,
            "selector: term 2 is empty",
        ),
        (
            json!({ "selector": "id=nothing-*", "tool_id": "hub.get_status" }),
            400,
            "names no enrolled target",
        ),
        (
            json!({ "selector": "id=*", "tool_id": "hub.no_such" }),
            404,
            "no tool `hub.no_such`",
        ),
        (
            json!({ "selector": "id=*", "tool_id": "hub.run_allowed_tests" }),
            428,
            "is not a read: preview it on the fleet first",
        ),
        (
            json!({ "selector": "id=*", "tool_id": "hub.get_status", "plan": { "canary": 101 } }),
            400,
            "canary must be at most 100",
        ),
        (
            json!({ "selector": "id=*", "tool_id": "hub.get_status", "plan": { "max_errors": "0%" } }),
            400,
            "not a percentage from 1% to 100%",
        ),
        (
            json!({ "selector": "id=*", "tool_id": "hub.get_status", "plan": { "max_concurrency": 0 } }),
            400,
            "max_concurrency must be",
        ),
        (
            json!({ "selector": "id=*", "tool_id": "hub.get_status", "arguments": [1] }),
            400,
            "arguments must be a JSON object",
        ),
        (
            json!({ "selector": "id=*" }),
            400,
            "missing field `tool_id`",
        ),
    ];
    for (body, status, why) in &bad {
        let (got, answer) = ops
            .post_status("/v1/root/fleet/runs", body.clone())
            .await
            .unwrap();
        assert_eq!(got, *status, "{body}: {answer}");
        assert!(error_message(&answer).contains(why), "{body}: {answer}");
        assert!(answer["event_id"].is_string(), "{answer}");
    }
    let refused_after = root
        .trail("tool_id=admin.fleet.run&status=error&limit=100")
        .await
        .len();
    assert_eq!(
        refused_after - refused_before,
        bad.len(),
        "every refused run is an event"
    );
    let (got, _) = ops
        .get_status("/v1/root/fleet/runs/no-such-run")
        .await
        .unwrap();
    assert_eq!(got, 404);
    let (got, body) = ops
        .post_status(&format!("{path}/drain"), json!({}))
        .await
        .unwrap();
    assert_eq!(got, 400, "{body}");
    let (got, body) = ops
        .post_status("/v1/root/fleet/runs/no-such-run/pause", json!({}))
        .await
        .unwrap();
    assert_eq!(got, 404, "{body}");
    hub.stop().await;
}

/// A run survives its root: restarted during the pause after its canary, root takes the
/// run up again and finishes it, each target called exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_goes_on_after_root_restarts() {
    // A fixed port, so the hubs dial the restarted root where they dialled the first one.
    let mut root = TestRoot::start_restartable().await.unwrap();
    let mut hubs = Vec::new();
    for id in ["r-1", "r-2", "r-3"] {
        hubs.push(root.start_hub(id, "").await.unwrap());
    }
    let started = start(
        &root,
        json!({ "selector": "id=r-*", "tool_id": "hub.get_status",
                "plan": { "canary": 1, "pause_after_canary_ms": 3000 } }),
    )
    .await;
    let id = started["run_id"].as_str().unwrap().to_owned();
    let path = format!("/v1/root/fleet/runs/{id}");
    until("the canary finished", async || {
        count(&root.admin_get(&path).await, "succeeded") == 1
    })
    .await;
    root.restart().await.unwrap();
    let r = root.fleet_run_ended(&id).await;
    assert_eq!(
        (r["state"].as_str(), count(&r, "succeeded")),
        (Some("completed"), 3),
        "{r}"
    );
    let calls = trace(&root, r["trace_id"].as_str().unwrap()).await;
    let mut reached: Vec<&str> = calls
        .iter()
        .filter(|e| e.0 == "hub.get_status")
        .map(|e| e.1.as_str())
        .collect();
    reached.sort();
    assert_eq!(
        reached,
        ["r-1", "r-2", "r-3"],
        "each target exactly once: {calls:?}"
    );
    for hub in hubs {
        hub.stop().await;
    }
}

/// A wide window over simulated hubs, twice: 60 targets at once (many more than the store's
/// connections), two of them failing and one slow; every target is accounted for and no
/// target's call waited anywhere near the store's 30 s acquire timeout (a run whose calls
/// were polled only by its driving loop once held every connection until that timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wide_window_over_simulated_hubs_accounts_for_every_target() {
    use mcp_tests::hubsim::{self, Faults, Fleet, FleetOptions};
    let root = TestRoot::start().await.unwrap();
    let base = root.handle().base_url();
    let ids = hubsim::target_ids("wide", 60);
    let enrolled = hubsim::enroll_all(
        &root.http,
        &base,
        &root.admin_token(),
        &ids,
        "test",
        "subnet-sim",
        8,
    )
    .await
    .unwrap();
    let faults = Faults {
        failing: [ids[10].clone(), ids[40].clone()].into(),
        slow: [(ids[20].clone(), std::time::Duration::from_secs(2))].into(),
    };
    let mut fleet = Fleet::connect(
        &base,
        enrolled,
        FleetOptions {
            writes: true,
            faults: std::sync::Arc::new(faults),
            ..FleetOptions::default()
        },
    )
    .await
    .unwrap();
    // Twice: when fleet reads shared the console's reader leases (issued one at a time under
    // a lock), only the second run's calls reached the store together; each run now issues
    // its own leases, and both runs are kept.
    for _ in 0..2 {
        let started = start(
            &root,
            json!({ "selector": "id=wide-*", "tool_id": "hub.get_status",
                    "plan": { "max_concurrency": 60, "max_errors": "100%" } }),
        )
        .await;
        let r = root
            .fleet_run_ended(started["run_id"].as_str().unwrap())
            .await;
        assert_eq!(
            (
                r["state"].as_str(),
                count(&r, "succeeded"),
                count(&r, "failed")
            ),
            (Some("completed"), 58, 2),
            "{r}"
        );
        let time = |v: &Value| {
            time::OffsetDateTime::parse(
                v.as_str().unwrap(),
                &time::format_description::well_known::Rfc3339,
            )
            .unwrap()
        };
        let longest = items(&r["targets"])
            .iter()
            .map(|t| time(&t["finished_at"]) - time(&t["started_at"]))
            .max()
            .unwrap();
        assert!(
            longest < time::Duration::seconds(15),
            "a target's call took {longest}: {r}"
        );
    }
    fleet.shutdown().await;
}
