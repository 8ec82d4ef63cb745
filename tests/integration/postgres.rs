//! The same store code on PostgreSQL (`MCP_TEST_DATABASE_URL`; skipped, and said so, without).

use mcp_tests::TestRoot;
use serde_json::json;
use sqlx::Connection;

#[tokio::test]
async fn leases_calls_and_the_audit_chain_work_on_postgres() {
    let Ok(base) = std::env::var("MCP_TEST_DATABASE_URL") else {
        eprintln!(
            "SKIPPED leases_calls_and_the_audit_chain_work_on_postgres: MCP_TEST_DATABASE_URL is not set"
        );
        return;
    };
    // A schema of its own, so runs never see each other's rows.
    let schema = format!("t_{}", uuid::Uuid::now_v7().simple());
    let mut conn = sqlx::PgConnection::connect(&base)
        .await
        .expect("connect to MCP_TEST_DATABASE_URL");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut conn)
        .await
        .unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");

    let root = TestRoot::start_with(|c| c.database_url = Some(url.clone()))
        .await
        .unwrap();
    assert_eq!(root.handle().app.store.backend(), "postgres");
    let (id, token) = root
        .lease("hub:test-alpha", "AdaOSDevRead", 600)
        .await
        .unwrap();
    let (s, body) = root
        .rest_call(&token, "sdk.get_schema", json!({"name": "tool-contract"}))
        .await
        .unwrap();
    assert_eq!(s, 200, "{body}");
    let (s, _) = root
        .rest_call(&token, "sdk.get_schema", json!({}))
        .await
        .unwrap();
    assert_eq!(s, 400);
    let ev = root
        .admin_get(&format!(
            "/v1/root/mcp/audit/{}",
            body["event_id"].as_str().unwrap()
        ))
        .await
        .unwrap();
    assert_eq!(ev["tool_id"], "sdk.get_schema");
    let v = root.admin_get("/v1/root/mcp/audit/verify").await.unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["checked"], 2);
    root.admin_post(&format!("/v1/root/mcp/sessions/{id}/revoke"), json!({}))
        .await
        .unwrap();
    assert_eq!(
        root.rest_call(&token, "sdk.get_metadata", json!({}))
            .await
            .unwrap()
            .0,
        401
    );
    let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM {schema}.audit_events"
    )))
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(n, 2);
    root.stop().await;
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&mut conn)
        .await
        .unwrap();
}
