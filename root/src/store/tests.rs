//! Store behaviour on SQLite, without a root.

use super::*;

fn confirmation(token_hash: &str, expires_at_ms: i64) -> ConfirmationRow {
    ConfirmationRow {
        token_hash: token_hash.into(),
        session_id: "s".into(),
        tool_id: "hub.run_allowed_tests".into(),
        target_id: "hub:t".into(),
        args_hash: "h".into(),
        expires_at_ms,
        arguments: None,
        effect: Some("{}".into()),
    }
}

#[tokio::test]
async fn an_in_memory_database_is_refused_with_the_reason() {
    for url in ["sqlite::memory:", "sqlite:file:x?mode=memory&cache=shared"] {
        let err = Store::open(url).await.err().expect("refused");
        assert!(matches!(err, Error::InMemory(_)), "{url}: {err}");
        assert!(err.to_string().contains("must outlive root"), "{err}");
    }
}

#[tokio::test]
async fn a_preview_sweeps_tokens_expired_a_day_ago_and_keeps_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&format!("sqlite:{}", dir.path().join("s.db").display()))
        .await
        .expect("store");
    let now = mcp_shared::time::unix_ms(mcp_shared::time::now());
    let day = 24 * 3600 * 1000;
    store
        .insert_confirmation(&confirmation("old", now - 2 * day))
        .await
        .expect("old");
    store
        .insert_confirmation(&confirmation("recent", now - 1000))
        .await
        .expect("recent");
    store
        .insert_confirmation(&confirmation("new", now + 120_000))
        .await
        .expect("new");
    assert!(
        store
            .consume_confirmation("old")
            .await
            .expect("q")
            .is_none()
    );
    let recent = store.consume_confirmation("recent").await.expect("q");
    assert_eq!(recent.map(|c| c.token_hash), Some("recent".into()));
    let new = store.consume_confirmation("new").await.expect("q");
    assert_eq!(new.and_then(|c| c.effect), Some("{}".into()));
    // The sweep is an index range, not a scan of every token.
    let plan: Vec<String> = on_pool!(store, pool => {
        sqlx::query("EXPLAIN QUERY PLAN DELETE FROM confirmations WHERE expires_at < 0")
            .fetch_all(pool)
            .await
            .map(|rows| rows.iter().map(|r| r.get::<String, _>(3)).collect())
    })
    .expect("plan");
    assert!(
        plan.iter().any(|d| d.contains("confirmations_expires")),
        "{plan:?}"
    );
}
