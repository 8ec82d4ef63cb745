//! Safe writes through root to a real hub: preview, single-use confirmation tokens bound to
//! lease, tool, target and arguments, idempotent execute, dry runs, and environment guards.
//! The fixture's test command appends a line to a file, so "ran" and "did not run" are counted.

use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::refusal;
use mcp_tests::runs;
use std::time::Duration;

use mcp_tests::TestRoot;
use serde_json::json;

fn hub_config(counter: &std::path::Path) -> String {
    format!(
        "[[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"sh\", \"-c\", \"echo run >> {0}; echo secret mcpl_AAAAAAAAAAAAAAAAAAAAAAAAAAAA\"]\ntimeout_ms = 10000\n\
         [[skill.allowed_tests]]\nname = \"failing\"\nargv = [\"sh\", \"-c\", \"echo run >> {0}; exit 3\"]\ntimeout_ms = 10000\n",
        counter.display()
    )
}

/// The fixture's write tool.
const TOOL: &str = "hub.run_allowed_tests";

#[tokio::test]
async fn preview_confirm_execute_and_replay() {
    let root = TestRoot::start_with(|c| c.limits.confirmation_ttl_sec = 2)
        .await
        .unwrap();
    let (_dir, counter, hub) = root.start_counting_hub("hub:test-alpha", hub_config).await;
    let token = root.bearer("hub:test-alpha", "InfraOpsControl").await;
    let other_lease = root.bearer("hub:test-alpha", "InfraOpsControl").await;

    // Execute without a token: confirmation_required, nothing runs.
    let (s, b) = root
        .call(
            &token,
            TOOL,
            json!({"name": "smoke", "phase": "execute", "idempotency_key": "k0"}),
        )
        .await;
    assert_eq!(refusal(s, &b), (428, "confirmation_required"), "{b}");
    // No phase means preview: the expected effect and a token, nothing runs.
    let (s, b) = root.call(&token, TOOL, json!({"name": "smoke"})).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["phase"], "preview");
    assert_eq!(b["result"]["expected_effect"]["test"], "smoke");
    let conf = b["result"]["confirmation_token"]
        .as_str()
        .unwrap()
        .to_string();
    let ev = root.audit_event(b["event_id"].as_str().unwrap()).await;
    assert_eq!(ev["dry_run"], true);
    // A dry run reports and runs nothing either.
    let (s, b) = root
        .call(&token, TOOL, json!({"name": "smoke", "dry_run": true}))
        .await;
    assert_eq!(
        (s, b["result"]["phase"].as_str()),
        (200, Some("dry_run")),
        "{b}"
    );
    assert_eq!(runs(&counter), 0);
    // A control field of the wrong type is refused by name, not read as absent: a dry run
    // asked for as a string must not become a preview, a numeric key not a missing one; the
    // refusal consumes no token.
    for (args, field) in [
        (json!({"name": "smoke", "dry_run": "true"}), "dry_run"),
        (
            json!({"name": "smoke", "phase": "execute", "confirmation_token": conf, "idempotency_key": 7}),
            "idempotency_key",
        ),
        (json!({"name": "smoke", "phase": ["execute"]}), "phase"),
    ] {
        let (s, b) = root.call(&token, TOOL, args).await;
        assert_eq!(refusal(s, &b), (400, "invalid_arguments"), "{b}");
        // The contract's input schema names the field (root's write path would as well).
        assert!(b["error"].to_string().contains(field), "{b}");
    }
    assert_eq!(runs(&counter), 0);

    // The token is bound: other arguments, another lease.
    let (s, b) = root.call(&other_lease, TOOL, json!({"name": "smoke", "phase": "execute", "confirmation_token": conf, "idempotency_key": "k1"})).await;
    assert_eq!(refusal(s, &b), (428, "confirmation_required"), "{b}");
    // ... and that attempt consumed it: tokens are single-use whatever happens.
    let (s, b) = root.call(&token, TOOL, json!({"name": "smoke", "phase": "execute", "confirmation_token": conf, "idempotency_key": "k1"})).await;
    assert_eq!(refusal(s, &b), (428, "confirmation_required"), "{b}");
    let (_, b) = root.call(&token, TOOL, json!({"name": "smoke"})).await;
    let conf = b["result"]["confirmation_token"]
        .as_str()
        .unwrap()
        .to_string();
    let (s, b) = root.call(&token, TOOL, json!({"name": "failing", "phase": "execute", "confirmation_token": conf, "idempotency_key": "k1"})).await;
    assert_eq!(
        refusal(s, &b),
        (428, "confirmation_required"),
        "bound to other arguments: {b}"
    );
    assert_eq!(runs(&counter), 0);

    // The real thing.
    let (_, b) = root.call(&token, TOOL, json!({"name": "smoke"})).await;
    let conf = b["result"]["confirmation_token"]
        .as_str()
        .unwrap()
        .to_string();
    let exec = json!({"name": "smoke", "phase": "execute", "confirmation_token": conf, "idempotency_key": "k2"});
    let (s, first) = root.call(&token, TOOL, exec.clone()).await;
    assert_eq!(s, 200, "{first}");
    assert_eq!(first["result"]["replay"], false);
    assert_eq!(first["result"]["result"]["passed"], true);
    assert_eq!(runs(&counter), 1);
    // The secret the test printed never reaches the client or the audit store.
    assert!(!first.to_string().contains("mcpl_AAAA"), "{first}");
    let ev = root.audit_event(first["event_id"].as_str().unwrap()).await;
    assert!(!ev.to_string().contains("mcpl_AAAA") && !ev.to_string().contains(&conf));
    assert_eq!(ev["execution_adapter"], "infra_access_skill.allowed_tests");

    // Replay with the same key: the first result, nothing runs again.
    let (s, again) = root.call(&token, TOOL, exec.clone()).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["result"]["replay"], true);
    assert_eq!(
        again["result"]["result"]["run_id"],
        first["result"]["result"]["run_id"]
    );
    assert_eq!(runs(&counter), 1);
    // Same key, other arguments: a conflict.
    let (s, b) = root.call(&token, TOOL, json!({"name": "failing", "phase": "execute", "confirmation_token": "x", "idempotency_key": "k2"})).await;
    assert_eq!(refusal(s, &b), (409, "idempotency_conflict"), "{b}");

    // Expired tokens are refused.
    let (_, b) = root.call(&token, TOOL, json!({"name": "failing"})).await;
    let conf = b["result"]["confirmation_token"]
        .as_str()
        .unwrap()
        .to_string();
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let (s, b) = root.call(&token, TOOL, json!({"name": "failing", "phase": "execute", "confirmation_token": conf, "idempotency_key": "k3"})).await;
    assert_eq!(refusal(s, &b), (428, "confirmation_required"), "{b}");
    assert!(error_message(&b).contains("expired"), "{b}");

    // A failing test is recorded as failed and readable.
    let (_, b) = root.call(&token, TOOL, json!({"name": "failing"})).await;
    let conf = b["result"]["confirmation_token"]
        .as_str()
        .unwrap()
        .to_string();
    let (s, b) = root.call(&token, TOOL, json!({"name": "failing", "phase": "execute", "confirmation_token": conf, "idempotency_key": "k4"})).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["result"]["passed"], false);
    assert_eq!(b["result"]["result"]["exit_code"], 3);
    let (s, r) = root
        .call(&token, "hub.get_test_results", json!({"limit": 5}))
        .await;
    assert_eq!(s, 200, "{r}");
    let results = items(&r["result"]["results"]);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["test"], "failing");
    assert_eq!(runs(&counter), 2);
    hub.stop().await;
    root.stop().await;
}

#[tokio::test]
async fn writes_are_refused_outside_test_environments_and_without_the_capability() {
    let root = TestRoot::start().await.unwrap();
    let (_dir, counter, hub) = root.start_counting_hub("hub:test-alpha", hub_config).await;
    // Read-only profile: the write tool is neither listed nor callable.
    let read = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let (s, b) = root.call(&read, TOOL, json!({"name": "smoke"})).await;
    assert_eq!(refusal(s, &b), (403, "capability_not_granted"), "{b}");

    // A production target refuses writes, even with the control profile.
    let prod_token = root.enroll("hub:prod-1", "production").await.unwrap();
    let prod_state = tempfile::tempdir().unwrap();
    let mut cfg = mcp_hub::config::HubConfig::new(
        "hub:prod-1",
        "production",
        root.handle().base_url(),
        prod_token,
        prod_state.path(),
    );
    cfg.write_scope = mcp_shared::target::WriteScope::TestOnly;
    let prod = mcp_hub::start(cfg).await.unwrap();
    prod.wait_connected(Duration::from_secs(10)).await.unwrap();
    let control = root.bearer("hub:prod-1", "InfraOpsControl").await;
    let (s, b) = root.call(&control, TOOL, json!({"name": "smoke"})).await;
    assert_eq!(refusal(s, &b), (403, "environment_forbidden"), "{b}");
    let client = mcp_tests::mcp_client(&root.mcp_url(), &control)
        .await
        .unwrap();
    let names: Vec<String> = mcp_tests::listed_tools(&client).await;
    assert!(
        !names.contains(&"hub.run_allowed_tests".to_string()),
        "{names:?}"
    );
    assert!(names.contains(&"hub.get_status".to_string()), "{names:?}");
    assert_eq!(runs(&counter), 0);
    prod.shutdown().await;
    hub.stop().await;
    root.stop().await;
}

/// Idempotency keys belong to the lease that used them: a second lease on the same target
/// that sends the first lease's key is neither answered with the first result (a leak) nor
/// spared the confirmation; with its own preview the same key runs its own write. A rotated
/// lease keeps its keys (a client retrying with the new bearer gets its replay).
#[tokio::test]
async fn another_leases_idempotency_key_is_not_a_replay() {
    let root = TestRoot::start().await.unwrap();
    let (_dir, counter, _hub) = root.start_counting_hub("hub:test-alpha", hub_config).await;
    let (first_id, first) = root.lease("hub:test-alpha", "InfraOpsControl").await;
    let second = root.bearer("hub:test-alpha", "InfraOpsControl").await;
    let execute = |conf: Option<&str>| {
        let mut a = json!({"name": "smoke", "phase": "execute", "idempotency_key": "shared-key"});
        if let Some(c) = conf {
            a["confirmation_token"] = json!(c);
        }
        a
    };
    let (_, b) = root.call(&first, TOOL, json!({"name": "smoke"})).await;
    let conf = b["result"]["confirmation_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, b) = root.call(&first, TOOL, execute(Some(&conf))).await;
    assert_eq!(
        (s, b["result"]["replay"].as_bool()),
        (200, Some(false)),
        "{b}"
    );
    let first_event = b["event_id"].as_str().unwrap().to_owned();
    assert_eq!(runs(&counter), 1);

    // The second lease, the same key, no confirmation: refused, nothing of the first leaks.
    let (s, b) = root.call(&second, TOOL, execute(None)).await;
    assert_eq!(
        refusal(s, &b),
        (428, "confirmation_required"),
        "another lease's key is no replay: {b}"
    );
    assert!(!b.to_string().contains(&first_event), "{b}");
    assert!(b["result"].is_null(), "{b}");
    assert_eq!(runs(&counter), 1);

    // With its own preview the second lease's key is its own: the write runs again.
    let (_, b) = root.call(&second, TOOL, json!({"name": "smoke"})).await;
    let conf = b["result"]["confirmation_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, b) = root.call(&second, TOOL, execute(Some(&conf))).await;
    assert_eq!(
        (s, b["result"]["replay"].as_bool()),
        (200, Some(false)),
        "{b}"
    );
    assert_eq!(
        runs(&counter),
        2,
        "the hub's ledger keeps the leases' keys apart too"
    );

    // Each lease's replay is its own first result.
    let (s, b) = root.call(&first, TOOL, execute(None)).await;
    assert_eq!(
        (s, b["result"]["replay"].as_bool()),
        (200, Some(true)),
        "{b}"
    );
    assert!(
        b["result"]["summary"]
            .as_str()
            .unwrap()
            .contains(&first_event),
        "{b}"
    );
    // A rotated bearer is the same lease: its key replays.
    let rotated = root.on_lease(&first_id, "rotate").await;
    let rotated = rotated["token"].as_str().unwrap();
    let (s, b) = root.call(rotated, TOOL, execute(None)).await;
    assert_eq!(
        (s, b["result"]["replay"].as_bool()),
        (200, Some(true)),
        "{b}"
    );
    assert!(
        b["result"]["summary"]
            .as_str()
            .unwrap()
            .contains(&first_event),
        "{b}"
    );
    assert_eq!(runs(&counter), 2);
}
