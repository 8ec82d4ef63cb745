//! Operational tools that root executes itself: the access-token tools over root's leases,
//! the subnet views (health, timeline, pressure) and root-local log reads, against real hubs.

use mcp_tests::TestRoot;
use serde_json::{Value, json};

async fn call(root: &TestRoot, token: &str, tool: &str, args: Value) -> (u16, Value) {
    root.rest_call(token, tool, args).await.unwrap()
}

/// Preview, then execute with the confirmation token under `key`.
async fn write(root: &TestRoot, token: &str, tool: &str, args: Value, key: &str) -> (u16, Value) {
    let (s, b) = call(root, token, tool, args.clone()).await;
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
    call(root, token, tool, exec).await
}

fn session_ids(b: &Value) -> Vec<String> {
    b["result"]["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["session_id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn access_tokens_are_leases_bounded_by_the_caller() {
    let root = TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:tok-a", "").await.unwrap();
    let other = root.start_hub("hub:tok-b", "").await.unwrap();
    let (me, token) = root
        .lease("hub:tok-a", "InfraOpsControl", 600)
        .await
        .unwrap();
    let (foreign, _) = root.lease("hub:tok-b", "InfraOpsRead", 600).await.unwrap();

    // The list holds this target's leases only, the caller marked, and no bearer.
    let (s, b) = call(&root, &token, "hub.list_access_tokens", json!({})).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(session_ids(&b), [me.as_str()]);
    assert_eq!(b["result"]["tokens"][0]["is_caller"], true);
    assert!(!b.to_string().contains(&token));

    // Issue: write discipline first.
    let args = json!({"capability_profile": "InfraOpsRead", "ttl_sec": 300, "audience": "ci"});
    let mut no_token = args.clone();
    no_token["phase"] = json!("execute");
    no_token["idempotency_key"] = json!("k1");
    let (s, b) = call(&root, &token, "hub.issue_access_token", no_token).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (428, Some("confirmation_required")),
        "{b}"
    );
    let (s, b) = write(&root, &token, "hub.issue_access_token", args.clone(), "k1").await;
    assert_eq!(s, 200, "{b}");
    let issued = b["result"]["result"].clone();
    let bearer = issued["token"].as_str().unwrap().to_string();
    let issued_id = issued["session_id"].as_str().unwrap().to_string();
    assert!(bearer.starts_with("mcpl_"));
    // The issued bearer works, for its own (narrower) profile only.
    let (s, b) = call(&root, &bearer, "hub.get_status", json!({})).await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = call(
        &root,
        &bearer,
        "hub.run_allowed_tests",
        json!({"name": "x"}),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (403, Some("capability_not_granted")),
        "{b}"
    );
    // A replay returns the first lease, with the bearer redacted, and issues nothing.
    let mut replay = args.clone();
    replay["phase"] = json!("execute");
    replay["idempotency_key"] = json!("k1");
    let (s, b) = call(&root, &token, "hub.issue_access_token", replay).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["replay"], true);
    assert_eq!(b["result"]["result"]["session_id"], issued_id.as_str());
    assert!(!b.to_string().contains(&bearer), "{b}");
    let (_, b) = call(&root, &token, "hub.list_access_tokens", json!({})).await;
    assert_eq!(session_ids(&b).len(), 2, "{b}");
    // The issued bearer is in no audit row.
    let audit = root
        .admin_get("/v1/root/mcp/audit?limit=500")
        .await
        .unwrap();
    assert!(!audit.to_string().contains(&bearer));

    // No escalation: a profile wider than the caller's, or a lease outliving the caller.
    let (s, b) = call(
        &root,
        &token,
        "hub.issue_access_token",
        json!({"capability_profile": "ProfileOpsRead", "ttl_sec": 60}),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (403, Some("capability_not_granted")),
        "{b}"
    );
    let (s, b) = call(
        &root,
        &token,
        "hub.issue_access_token",
        json!({"capability_profile": "InfraOpsRead", "ttl_sec": 3600}),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (400, Some("invalid_arguments")),
        "{b}"
    );
    assert!(
        b["error"]["message"].as_str().unwrap().contains("outlive"),
        "{b}"
    );
    let (s, b) = call(
        &root,
        &token,
        "hub.issue_access_token",
        json!({"capability_profile": "Nope", "ttl_sec": 60}),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (400, Some("invalid_arguments")),
        "{b}"
    );

    // Revoke: another target's lease is not found; this target's stops working at once.
    let (s, b) = call(
        &root,
        &token,
        "hub.revoke_access_token",
        json!({"session_id": foreign}),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{b}"
    );
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
    let (s, _) = call(&root, &bearer, "hub.get_status", json!({})).await;
    assert_eq!(s, 401);
    let (_, b) = call(
        &root,
        &token,
        "hub.list_access_tokens",
        json!({"include_inactive": true}),
    )
    .await;
    let statuses: Vec<&str> = b["result"]["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["revoked", "active"], "{b}");

    // A read-only profile sees the list but cannot issue.
    let (_, read) = root.lease("hub:tok-a", "InfraOpsRead", 600).await.unwrap();
    let (s, _) = call(&root, &read, "hub.list_access_tokens", json!({})).await;
    assert_eq!(s, 200);
    let (s, b) = call(
        &root,
        &read,
        "hub.issue_access_token",
        json!({"capability_profile": "InfraOpsRead", "ttl_sec": 60}),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (403, Some("capability_not_granted")),
        "{b}"
    );
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
    .await
    .unwrap();
    let (_, token) = root
        .lease("hub:prod-1", "InfraOpsControl", 600)
        .await
        .unwrap();
    // Reads are answered by root even though the hub never connected.
    let (s, b) = call(&root, &token, "hub.list_access_tokens", json!({})).await;
    assert_eq!(s, 200, "{b}");
    let (s, b) = call(
        &root,
        &token,
        "hub.issue_access_token",
        json!({"capability_profile": "InfraOpsRead", "ttl_sec": 60}),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (403, Some("environment_forbidden")),
        "{b}"
    );
    root.stop().await;
}

#[tokio::test]
async fn subnet_views_answer_from_root_and_notice_a_missing_hub() {
    let root = TestRoot::start().await.unwrap();
    let a = root.start_hub("hub:sub-a", "").await.unwrap();
    let b_hub = root.start_hub("hub:sub-b", "").await.unwrap();
    let (_, token) = root.lease("hub:sub-a", "InfraOpsRead", 600).await.unwrap();
    let (s, b) = call(&root, &token, "hub.get_status", json!({})).await;
    assert_eq!(s, 200, "{b}");

    let (s, b) = call(&root, &token, "root.get_subnet_analysis_health", json!({})).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["subnet_id"], "subnet-a");
    assert_eq!(b["result"]["health"], "healthy", "{b}");
    let targets: Vec<&str> = b["result"]["targets"]
        .as_array()
        .unwrap()
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

    let (s, b) = call(&root, &token, "root.get_subnet_diagnostics", json!({})).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["targets"].as_array().unwrap().len(), 2);
    assert_eq!(b["result"]["targets"][0]["connected"], true);
    assert_eq!(b["result"]["targets"][0]["transport"]["pressure"], "low");

    // One hub goes away: health is partial, the timeline shows it, diagnostics still answer.
    b_hub.stop().await;
    let mut health = Value::Null;
    for _ in 0..100 {
        let (_, b) = call(&root, &token, "root.get_subnet_analysis_health", json!({})).await;
        health = b;
        if health["result"]["health"] == "partial" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(health["result"]["health"], "partial", "{health}");
    assert_eq!(health["result"]["targets"][1]["status"], "offline");
    let (s, b) = call(
        &root,
        &token,
        "root.get_subnet_timeline",
        json!({"limit": 50}),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let kinds: Vec<(String, String)> = b["result"]["events"]
        .as_array()
        .unwrap()
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
    let (s, b) = call(
        &root,
        &token,
        "root.get_subnet_timeline",
        json!({"kinds": ["connected", "disconnected", "surface_changed"]}),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let events = b["result"]["events"].as_array().unwrap();
    assert!(events.len() >= 3, "{b}");
    assert!(events.iter().all(|e| e["kind"] != "call"), "{b}");
    let (_, b) = call(
        &root,
        &token,
        "root.get_subnet_timeline",
        json!({"kinds": ["disconnected"]}),
    )
    .await;
    let only: Vec<&Value> = b["result"]["events"].as_array().unwrap().iter().collect();
    assert_eq!(only.len(), 1, "{b}");
    assert_eq!(only[0]["target_id"], "hub:sub-b");
    // The limit counts the kinds asked for: the newest event (a disconnection) does not
    // hide the newest connection.
    let (_, b) = call(
        &root,
        &token,
        "root.get_subnet_timeline",
        json!({"kinds": ["connected"], "limit": 1}),
    )
    .await;
    assert_eq!(b["result"]["events"][0]["kind"], "connected", "{b}");
    let (s, b) = call(
        &root,
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
    let (s, b) = call(&root, &token, "root.get_subnet_diagnostics", json!({})).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["targets"][1]["connected"], false);

    // Root-local logs: root's own log, with provenance and a health summary.
    let (s, b) = call(
        &root,
        &token,
        "hub.get_logs",
        json!({"source": "root_local", "contains": "hub connected", "lines": 10}),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["source"], "root_local");
    assert_eq!(b["result"]["health"], "healthy");
    let lines = b["result"]["entries"][0]["lines"].as_array().unwrap();
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
