//! Fleet writes: a preview per target (each target's dry run, or why it cannot take part), one
//! confirmation for the whole set bound to its hash, the tool, the arguments, the operator and
//! a deadline, redeemed once; then each target executed exactly once, also across a restart of
//! root. The hubs' test command appends a line to a file per hub, so "ran" is counted on the
//! machine, not read from root's report.

use mcp_tests::counted_test;
use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::refusal;
use mcp_tests::runs;
use std::path::PathBuf;

use mcp_tests::{TestRoot, until};
use serde_json::{Value, json};

use crate::ops::admin_cli::admin;

fn count(r: &Value, status: &str) -> u64 {
    r["counts"][status].as_u64().unwrap()
}

fn request(selector: &str, token: Option<&str>) -> Value {
    let mut body = json!({
        "selector": selector,
        "tool_id": "hub.run_allowed_tests",
        "arguments": { "name": "smoke" },
        "plan": { "canary": 1, "max_concurrency": 2 },
    });
    if let Some(t) = token {
        body["confirmation_token"] = json!(t);
    }
    body
}

/// Three hubs that run the write, one cordoned and one whose hub never connected (so it
/// never published its write scope), all
/// `id=w-*`: nothing runs without a preview; the preview runs nothing, shows three targets
/// taking part with their expected effect and two excluded with why; confirmations for other
/// arguments, another tool, another operator or an unknown token are refused and the token
/// survives them; redeemed, the run executes each of the three exactly once, and the token
/// is spent. A second preview is refused once the set changed, and a cancelled preview's
/// token is dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_write_is_previewed_confirmed_once_and_run_once_per_target() {
    let root = TestRoot::start().await.unwrap();
    let (dir, hubs) = root
        .start_counted_hubs(&["w-1", "w-2", "w-3", "w-4"], 0)
        .await;
    let counter = |id: &str| dir.path().join(format!("{id}.txt"));
    root.enroll("w-off", "test").await.unwrap();
    root.admin_post("/v1/root/hubs/w-4/lifecycle/cordon", json!({}))
        .await;
    let ops = root.admin();
    let ran = || -> Vec<usize> {
        ["w-1", "w-2", "w-3", "w-4"]
            .map(|id| runs(&counter(id)))
            .to_vec()
    };

    // A write needs its preview.
    let (s, b) = ops
        .post_status("/v1/root/fleet/runs", request("id=w-*", None))
        .await
        .unwrap();
    assert_eq!(refusal(s, &b), (428, "confirmation_required"), "{b}");
    assert!(
        error_message(&b).contains("preview it on the fleet first"),
        "{b}"
    );

    let p = root
        .admin_post("/v1/root/fleet/previews", request("id=w-*", None))
        .await;
    let token = p["confirmation_token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("mcpc_"), "{p}");
    let r = &p["report"];
    assert_eq!(r["state"], "previewed", "{p}");
    assert_eq!((count(r, "pending"), count(r, "excluded")), (3, 2), "{p}");
    assert_eq!(r["capability_profile"], "InfraOpsControl", "{p}");
    assert!(r["confirmation_expires_at"].is_string(), "{p}");
    let group = |code: Option<&str>| {
        items(&r["groups"])
            .iter()
            .find(|g| g["code"].as_str() == code)
            .cloned()
            .unwrap_or_else(|| panic!("no group {code:?}: {p}"))
    };
    // A hub that never connected never published its write scope: policy refuses it.
    assert_eq!(
        group(Some("environment_forbidden"))["targets"],
        json!(["w-off"])
    );
    assert_eq!(group(Some("target_cordoned"))["targets"], json!(["w-4"]));
    // Each target's effect names its own counter file: a group each.
    let taking_part = group(None);
    assert_eq!(taking_part["status"], "pending", "{p}");
    assert!(
        taking_part["sample"].as_str().unwrap().contains("smoke"),
        "{p}"
    );
    let one = root
        .admin_get(&format!(
            "/v1/root/fleet/runs/{}/targets/w-2",
            r["run_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(one["preview"]["expected_effect"]["test"], "smoke", "{one}");
    assert_eq!(ran(), [0, 0, 0, 0], "a preview runs nothing");

    // Confirmations that do not fit are refused, and leave the token usable.
    let bob = {
        let added = root
            .admin_post(
                "/v1/root/operators",
                json!({"name": "bob", "roles": ["operator"], "profiles": ["*"]}),
            )
            .await;
        mcp_tests::admin::Admin::new(
            root.http.clone(),
            root.handle().base_url(),
            added["token"].as_str().unwrap(),
        )
    };
    let mut other_args = request("id=w-*", Some(&token));
    other_args["arguments"] = json!({ "name": "other" });
    let mut other_tool = request("id=w-*", Some(&token));
    other_tool["tool_id"] = json!("hub.get_status");
    for (who, body, status, why) in [
        (&ops, other_args, 428, "issued for other arguments"),
        (
            &ops,
            other_tool,
            428,
            "issued for `hub.run_allowed_tests`, not `hub.get_status`",
        ),
        (
            &ops,
            request("id=w-*", Some("mcpc_unknown")),
            428,
            "unknown or was already used",
        ),
        (
            &bob,
            request("id=w-*", Some(&token)),
            403,
            "issued to operator:admin",
        ),
        (
            &ops,
            request("id=w-1|w-2", Some(&token)),
            409,
            "issued for the set `id=w-*` names, not `id=w-1|w-2`'s (3 left",
        ),
    ] {
        let (s, b) = who
            .post_status("/v1/root/fleet/runs", body.clone())
            .await
            .unwrap();
        assert_eq!(s, status, "{body}: {b}");
        assert!(error_message(&b).contains(why), "{body}: {b}");
        assert!(b["event_id"].is_string(), "a refusal is an event: {b}");
    }

    let started = root
        .admin_post("/v1/root/fleet/runs", request("id=w-*", Some(&token)))
        .await;
    let run_id = started["run_id"].as_str().unwrap().to_owned();
    assert_eq!(
        run_id,
        r["run_id"].as_str().unwrap(),
        "the previewed run is the one that runs"
    );
    let done = root.fleet_run_ended(&run_id).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(
        (count(&done, "succeeded"), count(&done, "excluded")),
        (3, 2),
        "{done}"
    );
    assert_eq!(
        (done["errors"].as_u64(), done["total"].as_u64()),
        (Some(0), Some(5))
    );
    assert_eq!(
        ran(),
        [1, 1, 1, 0],
        "each target taking part ran once; the cordoned one never"
    );
    let one = root
        .admin_get(&format!("/v1/root/fleet/runs/{run_id}/targets/w-1"))
        .await;
    assert_eq!(
        (one["status"].as_str(), one["result"]["phase"].as_str()),
        (Some("succeeded"), Some("execute")),
        "{one}"
    );
    // The whole run is one trace: the preview, the run, each target's dry run and execute.
    let events = root.trace_of(&done, "limit=1000").await;
    let of = |tool: &str, status: &str| {
        events
            .iter()
            .filter(|e| e["tool_id"] == tool && e["status"] == status)
            .count()
    };
    assert_eq!(
        (of("admin.fleet.preview", "ok"), of("admin.fleet.run", "ok")),
        (1, 1),
        "{events:?}"
    );
    let writes = events
        .iter()
        .filter(|e| {
            e["tool_id"] == "hub.run_allowed_tests" && e["status"] == "ok" && e["dry_run"] == false
        })
        .count();
    assert_eq!(writes, 3, "{events:?}");

    // Spent.
    let (s, b) = ops
        .post_status("/v1/root/fleet/runs", request("id=w-*", Some(&token)))
        .await
        .unwrap();
    assert_eq!(refusal(s, &b), (428, "confirmation_required"), "{b}");

    // The set changed since the preview: refused, nothing runs, the preview stays.
    let p2 = root
        .admin_post("/v1/root/fleet/previews", request("id=w-*", None))
        .await;
    let token2 = p2["confirmation_token"].as_str().unwrap().to_owned();
    root.enroll("w-new", "test").await.unwrap();
    let (s, b) = ops
        .post_status("/v1/root/fleet/runs", request("id=w-*", Some(&token2)))
        .await
        .unwrap();
    assert_eq!(refusal(s, &b), (409, "conflict"), "{b}");
    let msg = error_message(&b);
    assert!(
        msg.contains("changed since the preview") && msg.contains("1 joined (`w-new`)"),
        "{b}"
    );
    let id2 = p2["report"]["run_id"].as_str().unwrap();
    let cancelled = root
        .admin_post(&format!("/v1/root/fleet/runs/{id2}/cancel"), json!({}))
        .await;
    assert_eq!(
        cancelled["state"], "cancelled",
        "a preview can be dropped: {cancelled}"
    );
    let (s, _) = ops
        .post_status("/v1/root/fleet/runs", request("id=w-*", Some(&token2)))
        .await
        .unwrap();
    assert_eq!(s, 428);
    assert_eq!(ran(), [1, 1, 1, 0]);

    // From the CLI: a preview, then its run with --confirm.
    let common = [
        "--selector",
        "id=w-1|w-2",
        "--tool",
        "hub.run_allowed_tests",
        "--arguments",
        r#"{"name":"smoke"}"#,
    ];
    let (code, out, err) = admin(
        &root,
        &[&["fleet", "preview"][..], &common, &["--json"]].concat(),
    );
    assert_eq!(code, 0, "{out}{err}");
    let preview: Value = serde_json::from_str(&out).unwrap();
    let cli_token = preview["confirmation_token"].as_str().unwrap();
    let (code, out, err) = admin(
        &root,
        &[
            &["fleet", "run"][..],
            &common,
            &["--confirm", cli_token, "--wait"],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 targets: 2 succeeded"), "{out}");
    assert_eq!(ran(), [2, 2, 1, 0]);

    // The first run's trail, exported by run: its events and no other.
    let (code, out, err) = admin(&root, &["audit", "export", "--run", &run_id]);
    assert_eq!(code, 0, "{err}");
    let exported: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(exported.len(), events.len(), "{out}");
    assert!(
        exported.iter().all(|e| e["trace_id"] == done["trace_id"]),
        "{out}"
    );
    assert!(
        exported
            .iter()
            .any(|e| e["tool_id"] == "admin.fleet.preview"),
        "{out}"
    );
    for hub in hubs {
        hub.stop().await;
    }
}

/// A write run whose targets' hubs are executing it when root restarts: root takes the run
/// up again, and every target has started and run exactly once on its machine. A target
/// whose call the stop cut off is called again under the same idempotency key: its hub
/// answers `busy` while the first execution runs (root asks again) and then that execution's
/// recorded result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_write_across_a_restart_runs_each_target_once() {
    // A fixed port, so the hubs dial the restarted root where they dialled the first one.
    let mut root = TestRoot::start_restartable().await.unwrap();
    let (dir, hubs) = root.start_counted_hubs(&["x-1", "x-2", "x-3"], 2).await;
    let counter = |id: &str| -> PathBuf { dir.path().join(format!("{id}.txt")) };
    let started = |id: &str| -> PathBuf { dir.path().join(format!("{id}.txt.started")) };
    let mut body = request("id=x-*", None);
    body["plan"] = json!({ "canary": 0, "max_concurrency": 3 });
    let p = root
        .admin_post("/v1/root/fleet/previews", body.clone())
        .await;
    body["confirmation_token"] = p["confirmation_token"].clone();
    let run = root.admin_post("/v1/root/fleet/runs", body).await;
    let id = run["run_id"].as_str().unwrap().to_owned();
    until("every hub is executing its target's write", async || {
        ["x-1", "x-2", "x-3"]
            .iter()
            .all(|id| runs(&started(id)) == 1)
    })
    .await;
    root.restart().await.unwrap();
    let r = root.fleet_run_ended(&id).await;
    assert_eq!(
        (r["state"].as_str(), count(&r, "succeeded")),
        (Some("completed"), 3),
        "{r}"
    );
    for id in ["x-1", "x-2", "x-3"] {
        assert_eq!(runs(&counter(id)), 1, "{id} ran exactly once: {r}");
        assert_eq!(runs(&started(id)), 1, "{id} started exactly once: {r}");
    }
    for hub in hubs {
        hub.stop().await;
    }
}

/// A preview whose confirmation deadline passed shows `expired`, its token is refused saying
/// so, and it can still be dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_preview_is_shown_so_and_its_token_refused() {
    let root = TestRoot::start_with(|c| c.limits.confirmation_ttl_sec = 1)
        .await
        .unwrap();
    let (_dir, counter, hub) = root.start_counting_hub("e-1", |c| counted_test(c, 0)).await;
    let p = root
        .admin_post("/v1/root/fleet/previews", request("id=e-*", None))
        .await;
    let token = p["confirmation_token"].as_str().unwrap().to_owned();
    let path = format!(
        "/v1/root/fleet/runs/{}",
        p["report"]["run_id"].as_str().unwrap()
    );
    until("the preview expires", async || {
        root.admin_get(&path).await["state"] == "expired"
    })
    .await;
    let listed = root.admin_get("/v1/root/fleet/runs").await;
    assert_eq!(listed["runs"][0]["state"], "expired", "{listed}");
    let (s, b) = root
        .admin()
        .post_status("/v1/root/fleet/runs", request("id=e-*", Some(&token)))
        .await
        .unwrap();
    assert_eq!(refusal(s, &b), (428, "confirmation_required"), "{b}");
    assert!(error_message(&b).contains("expired at"), "{b}");
    let dropped = root.admin_post(&format!("{path}/cancel"), json!({})).await;
    assert_eq!(dropped["state"], "cancelled", "{dropped}");
    assert_eq!(runs(&counter), 0);
    hub.stop().await;
}
