//! The audit trail: one event per call, hash chain verification, tamper detection, export.

use mcp_tests::TestRoot;
use mcp_tests::items;
use serde_json::json;
use sqlx::Connection;

#[tokio::test]
async fn chain_verification_detects_a_tampered_row() {
    // Tampers with the SQLite file itself.
    let root = TestRoot::start_with(TestRoot::on_sqlite).await.unwrap();
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        let (s, body) = root.call(&token, "sdk.get_metadata", json!({})).await;
        assert_eq!(s, 200);
        ids.push(body["event_id"].as_str().unwrap().to_string());
    }
    let v = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["checked"], 6, "the lease's issue and five calls");

    // Change the third event behind root's back.
    let db = root.data_dir().join("root.db");
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite:{}", db.display()))
        .await
        .unwrap();
    let n = sqlx::query("UPDATE audit_events SET event = replace(event, '\"status\":\"ok\"', '\"status\":\"denied\"') WHERE event_id = $1")
        .bind(&ids[2])
        .execute(&mut conn)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(n, 1);
    conn.close().await.unwrap();

    let v = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(v["ok"], false);
    assert_eq!(v["first_broken"]["seq"], 4);
    assert_eq!(v["first_broken"]["event_id"], ids[2].as_str());
    assert_eq!(v["checked"], 3);
    root.stop().await;
}

#[tokio::test]
async fn audit_filters_and_pages_newest_first() {
    let root = TestRoot::start().await.unwrap();
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    for _ in 0..3 {
        root.call(&token, "sdk.get_metadata", json!({})).await;
        root.call(&token, "sdk.list_templates", json!({})).await;
    }
    root.call(&token, "sdk.get_template", json!({"bad": 1}))
        .await;
    let page1 = root.admin_get("/v1/root/mcp/audit?limit=4").await;
    let evs = items(&page1["events"]);
    assert_eq!(evs.len(), 4);
    assert!(evs[0]["seq"].as_i64() > evs[1]["seq"].as_i64());
    let cursor = page1["next_cursor"].as_str().unwrap();
    let page2 = root
        .admin_get(&format!("/v1/root/mcp/audit?limit=4&cursor={cursor}"))
        .await;
    // Seven calls and the lease's issue.
    assert_eq!(items(&page2["events"]).len(), 4);
    let page3 = root
        .admin_get(&format!(
            "/v1/root/mcp/audit?limit=4&cursor={}",
            page2["next_cursor"].as_str().unwrap()
        ))
        .await;
    assert!(items(&page3["events"]).is_empty());
    assert!(page3["next_cursor"].is_null());

    let tmpl = root.trail("tool_id=sdk.list_templates").await;
    assert_eq!(tmpl.len(), 3);
    let denied = root.trail("status=denied").await;
    assert_eq!(denied.len(), 1);
    let future = root.trail("since=2999-01-01T00:00:00Z").await;
    assert!(future.is_empty());

    for bad in [
        "since=yesterday",
        "limit=0",
        "status=weird",
        "cursor=zzz",
        "order=sideways",
        "nope=1",
    ] {
        let res = root
            .get_as(root.admin_token(), &format!("/v1/root/mcp/audit?{bad}"))
            .await;
        assert_eq!(res.status(), 400, "{bad}");
    }
    // Lease bearers cannot read the trail.
    let res = root.get_as(&token, "/v1/root/mcp/audit").await;
    assert_eq!(res.status(), 403);
    root.stop().await;
}
