//! Bearer handling: 401s, lease lifecycle, forged actor headers.

use mcp_tests::items;
use mcp_tests::{TestRoot, mcp_client};
use serde_json::json;

async fn post_initialize(root: &TestRoot, bearer: Option<&str>) -> reqwest::Response {
    let mut req = root
        .http
        .post(root.mcp_url())
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}));
    if let Some(b) = bearer {
        req = req.bearer_auth(b);
    }
    req.send().await.unwrap()
}

fn assert_invalid_token(res: &reqwest::Response) {
    assert_eq!(res.status(), 401);
    assert_eq!(
        res.headers()["www-authenticate"],
        "Bearer error=\"invalid_token\""
    );
}

#[tokio::test]
async fn missing_unknown_expired_and_revoked_bearers_get_401() {
    let root = TestRoot::start().await.unwrap();
    assert_invalid_token(&post_initialize(&root, None).await);
    assert_invalid_token(&post_initialize(&root, Some("mcpl_not-a-real-token-at-all")).await);
    // The admin token is not a lease: MCP refuses it too.
    assert_invalid_token(&post_initialize(&root, Some(&root.admin_token())).await);

    let (_, short) = root.lease_for("hub:test-alpha", "AdaOSDevRead", 1).await;
    assert_eq!(post_initialize(&root, Some(&short)).await.status(), 200);
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    assert_invalid_token(&post_initialize(&root, Some(&short)).await);

    let (id, token) = root.lease("hub:test-alpha", "AdaOSDevRead").await;
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
    assert!(!client.list_all_tools().await.unwrap().is_empty());
    root.on_lease(&id, "revoke").await;
    // Revocation takes effect on the very next request of an open MCP session.
    assert!(client.list_all_tools().await.is_err());
    assert_invalid_token(&post_initialize(&root, Some(&token)).await);

    // REST answers the same way.
    let (status, body) = root.call(&token, "sdk.get_metadata", json!({})).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], "unauthenticated");
    root.stop().await;
}

#[tokio::test]
async fn leases_are_listed_freshness_normalized_and_rotation_kills_the_old_bearer() {
    let root = TestRoot::start().await.unwrap();
    let (short_id, _) = root.lease_for("hub:test-alpha", "AdaOSDevRead", 1).await;
    let (id, old) = root.lease("hub:test-alpha", "InfraOpsRead").await;
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let list = root.admin_get("/v1/root/mcp/sessions").await;
    let status_of = |sid: &str| {
        items(&list["sessions"])
            .iter()
            .find(|s| s["session_id"] == sid)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(status_of(&short_id), "expired");
    assert_eq!(status_of(&id), "active");

    // Use increments the counters.
    let (s, _) = root.call(&old, "sdk.get_metadata", json!({})).await;
    assert_eq!(s, 403, "InfraOpsRead does not grant sdk.read.metadata");
    let got = root.admin_get(&format!("/v1/root/mcp/sessions/{id}")).await;
    assert_eq!(got["use_count"], 1);
    assert!(got["last_used_at"].is_string());

    let rotated = root.on_lease(&id, "rotate").await;
    let new = rotated["token"].as_str().unwrap();
    assert_ne!(new, old);
    assert_eq!(root.call(&old, "sdk.get_metadata", json!({})).await.0, 401);
    assert_eq!(root.call(new, "sdk.get_metadata", json!({})).await.0, 403);
    let old_lease = root.admin_get(&format!("/v1/root/mcp/sessions/{id}")).await;
    assert_eq!(old_lease["status"], "revoked");
    // The token is never stored or listed.
    let all = root.admin_get("/v1/root/mcp/sessions").await.to_string();
    assert!(!all.contains(&old) && !all.contains(new));
    root.stop().await;
}

#[tokio::test]
async fn leases_survive_a_restart_and_bad_create_requests_are_refused() {
    let mut root = TestRoot::start().await.unwrap();
    let (id, token) = root.lease("hub:test-alpha", "AdaOSDevRead").await;
    let dir = root.data_dir();
    root.handle.take().unwrap().shutdown().await;
    let root2 = TestRoot::start_with(|c| c.data_dir = dir.clone())
        .await
        .unwrap();
    let (s, body) = root2.call(&token, "sdk.get_metadata", json!({})).await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["tool_id"], "sdk.get_metadata");
    assert!(
        root2
            .admin()
            .get(&format!("/v1/root/mcp/sessions/{id}"))
            .await
            .is_ok()
    );

    for (body, why) in [
        (
            json!({"target_id":"t","capability_profile":"NoSuchProfile","ttl_sec":60}),
            "unknown capability profile",
        ),
        (
            json!({"target_id":"t","capability_profile":"AdaOSDevRead","ttl_sec":0}),
            "ttl_sec",
        ),
        (
            json!({"target_id":"t","capability_profile":"AdaOSDevRead","ttl_sec":60,"admin":true}),
            "unknown field",
        ),
        (
            json!({"capability_profile":"AdaOSDevRead","ttl_sec":60}),
            "target_id",
        ),
    ] {
        let res = root2
            .post_as(root2.admin_token(), "/v1/root/mcp/sessions", &body)
            .await;
        assert_eq!(res.status(), 400, "{body}");
        let msg = res.json::<serde_json::Value>().await.unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(msg.contains(why), "{msg} should mention {why}");
    }
    // A lease bearer is not an operator.
    let res = root2.get_as(&token, "/v1/root/mcp/sessions").await;
    assert_eq!(res.status(), 403);
    root.dir.close().ok();
    root2.stop().await;
}

#[tokio::test]
async fn forged_actor_headers_are_ignored() {
    let root = TestRoot::start().await.unwrap();
    let (id, token) = root.lease("hub:test-alpha", "AdaOSDevRead").await;
    let res = root
        .http
        .post(root.url("/v1/root/mcp/call"))
        .bearer_auth(&token)
        .header("x-actor", "root-admin")
        .header("x-user-id", "someone-else")
        .json(&json!({"tool_id": "sdk.get_metadata"}))
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = res.json().await.unwrap();
    let event = root.audit_event(body["event_id"].as_str().unwrap()).await;
    assert_eq!(event["actor"]["id"], format!("lease:{id}"));
    assert!(!event.to_string().contains("root-admin"));
    root.stop().await;
}
