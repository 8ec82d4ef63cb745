//! Operational tools that root executes itself: the access-token tools over root's leases,
//! the subnet views (health, timeline, pressure) and root-local log reads, against real hubs.

use mcp_tests::TestRoot;
use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::refusal;
use serde_json::{Value, json};

/// Preview, then execute with the confirmation token under `key`.
async fn write(root: &TestRoot, token: &str, tool: &str, args: Value, key: &str) -> (u16, Value) {
    let (s, b) = root.call(token, tool, args.clone()).await;
    assert_eq!(
        (s, b["result"]["phase"].as_str()),
        (200, Some("preview")),
        "{b}"
    );
    let conf = b["result"]["confirmation_token"]
        .as_str()
        .unwrap()
        .to_string();
    let mut exec = args;
    exec["phase"] = json!("execute");
    exec["confirmation_token"] = json!(conf);
    exec["idempotency_key"] = json!(key);
    root.call(token, tool, exec).await
}

fn session_ids(b: &Value) -> Vec<String> {
    items(&b["result"]["tokens"])
        .iter()
        .map(|t| t["session_id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn access_tokens_are_leases_bounded_by_the_caller() {
    let root = TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:tok-a", "").await.unwrap();
    let other = root.start_hub("hub:tok-b", "").await.unwrap();
    let (me, token) = root.lease("hub:tok-a", "InfraOpsControl").await;
    let (foreign, _) = root.lease("hub:tok-b", "InfraOpsRead").await;

    // The list holds this target's leases only, the caller marked, and no bearer.
    let (s, b) = root.call(&token, "hub.list_access_tokens", json!({})).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(session_ids(&b), [me.as_str()]);
    assert_eq!(b["result"]["tokens"][0]["is_caller"], true);
    assert!(!b.to_string().contains(&token));

    // Issue: write discipline first.
    let args = json!({"capability_profile": "InfraOpsRead", "ttl_sec": 300, "audience": "ci"});
    let mut no_token = args.clone();
    no_token["phase"] = json!("execute");
    no_token["idempotency_key"] = json!("k1");
    let (s, b) = root.call(&token, "hub.issue_access_token", no_token).await;
    assert_eq!(refusal(s, &b), (428, "confirmation_required"), "{b}");
    let (s, b) = write(&root, &token, "hub.issue_access_token", args.clone(), "k1").await;
    assert_eq!(s, 200, "{b}");
    let issued = b["result"]["result"].clone();
    let bearer = issued["token"].as_str().unwrap().to_string();
    let issued_id = issued["session_id"].as_str().unwrap().to_string();
    assert!(bearer.starts_with("mcpl_"));
    // The issued bearer works, for its own (narrower) profile only.
    let (s, b) = root.call(&bearer, "hub.get_status", json!({})).await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = root
        .call(&bearer, "hub.run_allowed_tests", json!({"name": "x"}))
        .await;
    assert_eq!(refusal(s, &b), (403, "capability_not_granted"), "{b}");
    // A replay returns the first lease, with the bearer redacted, and issues nothing.
    let mut replay = args.clone();
    replay["phase"] = json!("execute");
    replay["idempotency_key"] = json!("k1");
    let (s, b) = root.call(&token, "hub.issue_access_token", replay).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["replay"], true);
    assert_eq!(b["result"]["result"]["session_id"], issued_id.as_str());
    assert!(!b.to_string().contains(&bearer), "{b}");
    let (_, b) = root.call(&token, "hub.list_access_tokens", json!({})).await;
    assert_eq!(session_ids(&b).len(), 2, "{b}");
    // The issued bearer is in no audit row.
    let audit = root.admin_get("/v1/root/mcp/audit?limit=500").await;
    assert!(!audit.to_string().contains(&bearer));

    // No escalation: a profile wider than the caller's, or a lease outliving the caller.
    let (s, b) = root
        .call(
            &token,
            "hub.issue_access_token",
            json!({"capability_profile": "ProfileOpsRead", "ttl_sec": 60}),
        )
        .await;
    assert_eq!(refusal(s, &b), (403, "capability_not_granted"), "{b}");
    let (s, b) = root
        .call(
            &token,
            "hub.issue_access_token",
            json!({"capability_profile": "InfraOpsRead", "ttl_sec": 3600}),
        )
        .await;
    assert_eq!(refusal(s, &b), (400, "invalid_arguments"), "{b}");
    assert!(error_message(&b).contains("outlive"), "{b}");
    let (s, b) = root
        .call(
            &token,
            "hub.issue_access_token",
            json!({"capability_profile": "Nope", "ttl_sec": 60}),
        )
        .await;
    assert_eq!(refusal(s, &b), (400, "invalid_arguments"), "{b}");

    // Revoke: another target's lease is not found; this target's stops working at once.
    let (s, b) = root
        .call(
            &token,
            "hub.revoke_access_token",
            json!({"session_id": foreign}),
        )
        .await;
    assert_eq!(refusal(s, &b), (404, "not_found"), "{b}");
    let (s, b) = write(
        &root,
        &token,
        "hub.revoke_access_token",
        json!({"session_id": issued_id}),
        "r1",
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["result"]["revoked"]["status"], "revoked");
    let (s, _) = root.call(&bearer, "hub.get_status", json!({})).await;
    assert_eq!(s, 401);
    let (_, b) = root
        .call(
            &token,
            "hub.list_access_tokens",
            json!({"include_inactive": true}),
        )
        .await;
    let statuses: Vec<&str> = items(&b["result"]["tokens"])
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["revoked", "active"], "{b}");

    // A read-only profile sees the list but cannot issue.
    let read = root.bearer("hub:tok-a", "InfraOpsRead").await;
    let (s, _) = root.call(&read, "hub.list_access_tokens", json!({})).await;
    assert_eq!(s, 200);
    let (s, b) = root
        .call(
            &read,
            "hub.issue_access_token",
            json!({"capability_profile": "InfraOpsRead", "ttl_sec": 60}),
        )
        .await;
    assert_eq!(refusal(s, &b), (403, "capability_not_granted"), "{b}");
    hub.stop().await;
    other.stop().await;
    root.stop().await;
}

#[tokio::test]
async fn access_token_writes_need_a_test_target() {
    let root = TestRoot::start().await.unwrap();
    root.admin_post(
        "/v1/root/hubs",
        json!({"target_id": "hub:prod-1", "environment": "prod", "subnet_id": "subnet-a"}),
    )
    .await;
    let token = root.bearer("hub:prod-1", "InfraOpsControl").await;
    // Reads are answered by root even though the hub never connected.
    let (s, b) = root.call(&token, "hub.list_access_tokens", json!({})).await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = root
        .call(
            &token,
            "hub.issue_access_token",
            json!({"capability_profile": "InfraOpsRead", "ttl_sec": 60}),
        )
        .await;
    assert_eq!(refusal(s, &b), (403, "environment_forbidden"), "{b}");
    root.stop().await;
}

#[tokio::test]
async fn subnet_views_answer_from_root_and_notice_a_missing_hub() {
    let root = TestRoot::start().await.unwrap();
    let a = root.start_hub("hub:sub-a", "").await.unwrap();
    let b_hub = root.start_hub("hub:sub-b", "").await.unwrap();
    let token = root.bearer("hub:sub-a", "InfraOpsRead").await;
    let (s, b) = root.call(&token, "hub.get_status", json!({})).await;
    assert_eq!(s, 200, "{b}");

    let (s, b) = root
        .call(&token, "root.get_subnet_analysis_health", json!({}))
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["subnet_id"], "subnet-a");
    assert_eq!(b["result"]["health"], "healthy", "{b}");
    let targets: Vec<&str> = items(&b["result"]["targets"])
        .iter()
        .map(|t| t["target_id"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["hub:sub-a", "hub:sub-b"]);
    assert!(
        b["result"]["targets"][0]["recent_calls"]["total"]
            .as_u64()
            .unwrap()
            >= 1,
        "{b}"
    );

    let (s, b) = root
        .call(&token, "root.get_subnet_diagnostics", json!({}))
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(items(&b["result"]["targets"]).len(), 2);
    assert_eq!(b["result"]["targets"][0]["connected"], true);
    assert_eq!(b["result"]["targets"][0]["transport"]["pressure"], "low");

    // One hub goes away: health is partial, the timeline shows it, diagnostics still answer.
    b_hub.stop().await;
    let mut health = Value::Null;
    for _ in 0..100 {
        let (_, b) = root
            .call(&token, "root.get_subnet_analysis_health", json!({}))
            .await;
        health = b;
        if health["result"]["health"] == "partial" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(health["result"]["health"], "partial", "{health}");
    assert_eq!(health["result"]["targets"][1]["status"], "offline");
    let (s, b) = root
        .call(&token, "root.get_subnet_timeline", json!({"limit": 50}))
        .await;
    assert_eq!(s, 200, "{b}");
    let kinds: Vec<(String, String)> = items(&b["result"]["events"])
        .iter()
        .map(|e| {
            (
                e["target_id"].as_str().unwrap().to_string(),
                e["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for want in [
        ("hub:sub-b", "disconnected"),
        ("hub:sub-b", "connected"),
        ("hub:sub-a", "connected"),
        ("hub:sub-a", "call"),
    ] {
        assert!(
            kinds.contains(&(want.0.to_string(), want.1.to_string())),
            "{want:?} in {kinds:?}"
        );
    }
    // Newest first: b's disconnect comes before its connect.
    let pos = |k: &str| {
        kinds
            .iter()
            .position(|e| e.0 == "hub:sub-b" && e.1 == k)
            .unwrap()
    };
    assert!(pos("disconnected") < pos("connected"));
    // `kinds` selects: lifecycle events only (no call crowds them out), or one kind.
    let (s, b) = root
        .call(
            &token,
            "root.get_subnet_timeline",
            json!({"kinds": ["connected", "disconnected", "surface_changed"]}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    let events = items(&b["result"]["events"]);
    assert!(events.len() >= 3, "{b}");
    assert!(events.iter().all(|e| e["kind"] != "call"), "{b}");
    let (_, b) = root
        .call(
            &token,
            "root.get_subnet_timeline",
            json!({"kinds": ["disconnected"]}),
        )
        .await;
    let only: Vec<&Value> = items(&b["result"]["events"]).iter().collect();
    assert_eq!(only.len(), 1, "{b}");
    assert_eq!(only[0]["target_id"], "hub:sub-b");
    // The limit counts the kinds asked for: the newest event (a disconnection) does not
    // hide the newest connection.
    let (_, b) = root
        .call(
            &token,
            "root.get_subnet_timeline",
            json!({"kinds": ["connected"], "limit": 1}),
        )
        .await;
    assert_eq!(b["result"]["events"][0]["kind"], "connected", "{b}");
    let (s, b) = root
        .call(
            &token,
            "root.get_subnet_timeline",
            json!({"kinds": ["rumour"]}),
        )
        .await;
    assert_eq!(
        (s, &b["error"]["code"]),
        (400, &json!("invalid_arguments")),
        "{b}"
    );
    let (s, b) = root
        .call(&token, "root.get_subnet_diagnostics", json!({}))
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["targets"][1]["connected"], false);

    // Root-local logs: root's own log, with provenance and a health summary.
    let (s, b) = root
        .call(
            &token,
            "hub.get_logs",
            json!({"source": "root_local", "contains": "hub connected", "lines": 10}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["source"], "root_local");
    assert_eq!(b["result"]["health"], "healthy");
    let lines = items(&b["result"]["entries"][0]["lines"]);
    assert!(
        !lines.is_empty()
            && lines
                .iter()
                .all(|l| l.as_str().unwrap().contains("hub connected")),
        "{b}"
    );
    a.stop().await;
    root.stop().await;
}
