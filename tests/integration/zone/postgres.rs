//! The same store code on PostgreSQL (`MCP_TEST_DATABASE_URL`; skipped, and said so, without).

use mcp_tests::TestRoot;
use mcp_tests::zone::PgSchema;
use serde_json::json;
use sqlx::Connection;

#[tokio::test]
async fn leases_calls_and_the_audit_chain_work_on_postgres() {
    let Some(db) = PgSchema::create("leases_calls_and_the_audit_chain_work_on_postgres").await
    else {
        return;
    };
    let root = TestRoot::start_with(|c| c.database_url = Some(db.url.clone()))
        .await
        .unwrap();
    assert_eq!(root.handle().app.store.backend(), "postgres");
    let (id, token) = root.lease("hub:test-alpha", "AdaOSDevRead").await;
    let (s, body) = root
        .call(&token, "sdk.get_schema", json!({"name": "tool-contract"}))
        .await;
    assert_eq!(s, 200, "{body}");
    let (s, _) = root.call(&token, "sdk.get_schema", json!({})).await;
    assert_eq!(s, 400);
    let ev = root.audit_event(body["event_id"].as_str().unwrap()).await;
    assert_eq!(ev["tool_id"], "sdk.get_schema");
    let v = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(v["ok"], true);
    assert_eq!(v["checked"], 3, "the lease's issue and two calls");
    root.on_lease(&id, "revoke").await;
    assert_eq!(
        root.call(&token, "sdk.get_metadata", json!({})).await.0,
        401
    );
    let n = db.count("SELECT count(*) FROM audit_events").await;
    assert_eq!(
        n, 5,
        "the lease's issue, two calls, its revocation, the revoked bearer refused"
    );
    root.stop().await;
    db.drop_schema().await;
}

/// The write ledger and the target registry on both backends, through the same `Store` code.
#[tokio::test]
async fn confirmations_idempotency_and_targets_on_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    let mut urls = vec![format!("sqlite:{}", dir.path().join("ledger.db").display())];
    let db = PgSchema::create(
        "the PostgreSQL half of confirmations_idempotency_and_targets_on_both_backends",
    )
    .await;
    urls.extend(db.as_ref().map(|db| db.url.clone()));
    for url in urls {
        let store = mcp_root::store::Store::open(&url).await.unwrap();
        let c = mcp_root::store::ConfirmationRow {
            token_hash: "h1".into(),
            session_id: "s".into(),
            tool_id: "hub.run_allowed_tests".into(),
            target_id: "hub:t".into(),
            args_hash: "a".into(),
            expires_at_ms: 5_000,
            arguments: Some("{\"template_id\":\"t\"}".into()),
            effect: Some("{\"target\":{\"commit\":\"c0ffee\"}}".into()),
        };
        store.insert_confirmation(&c).await.unwrap();
        assert_eq!(
            store.consume_confirmation("h1").await.unwrap(),
            Some(c.clone()),
            "{url}"
        );
        assert_eq!(
            store.consume_confirmation("h1").await.unwrap(),
            None,
            "single use on {url}"
        );

        // Approvals: a pending one is decided once, applied once, never after expiry.
        let a = mcp_root::store::ApprovalRow {
            approval_id: "apr_1".into(),
            token_hash: "th1".into(),
            session_id: "s".into(),
            target_id: "hub:t".into(),
            tool_id: "nlu_authoring.apply_change".into(),
            arguments: serde_json::json!({"template_id": "t"}),
            effect: serde_json::json!({"diff": ["+ x"]}),
            status: mcp_root::store::ApprovalStatus::Pending,
            requested_at_ms: 1_000,
            expires_at_ms: 10_000,
            decided_at_ms: None,
            reason: None,
            preview_event_id: "e0".into(),
            applied_event_id: None,
        };
        store.insert_approval(&a).await.unwrap();
        assert_eq!(
            store.get_approval(None, Some("th1")).await.unwrap(),
            Some(a.clone()),
            "{url}"
        );
        assert_eq!(
            a.status_at(10_000),
            mcp_root::store::ApprovalStatus::Expired
        );
        assert!(
            !store
                .transition_approval(
                    "apr_1",
                    mcp_root::store::ApprovalStatus::Pending,
                    mcp_root::store::ApprovalStatus::Approved,
                    10_000,
                    None,
                    None
                )
                .await
                .unwrap(),
            "expired on {url}"
        );
        assert!(
            store
                .transition_approval(
                    "apr_1",
                    mcp_root::store::ApprovalStatus::Pending,
                    mcp_root::store::ApprovalStatus::Approved,
                    2_000,
                    Some("ok"),
                    None
                )
                .await
                .unwrap()
        );
        assert!(
            !store
                .transition_approval(
                    "apr_1",
                    mcp_root::store::ApprovalStatus::Pending,
                    mcp_root::store::ApprovalStatus::Rejected,
                    2_500,
                    None,
                    None
                )
                .await
                .unwrap(),
            "decided once on {url}"
        );
        assert!(
            store
                .transition_approval(
                    "apr_1",
                    mcp_root::store::ApprovalStatus::Approved,
                    mcp_root::store::ApprovalStatus::Applied,
                    3_000,
                    None,
                    Some("e9")
                )
                .await
                .unwrap()
        );
        let got = store
            .get_approval(Some("apr_1"), None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                got.status.as_str(),
                got.decided_at_ms,
                got.reason.as_deref(),
                got.applied_event_id.as_deref()
            ),
            ("applied", Some(2_000), Some("ok"), Some("e9")),
            "{url}"
        );
        assert_eq!(
            store
                .list_approvals(Some(mcp_root::store::ApprovalStatus::Applied), 10)
                .await
                .unwrap()
                .len(),
            1
        );
        assert!(
            store
                .list_approvals(Some(mcp_root::store::ApprovalStatus::Pending), 10)
                .await
                .unwrap()
                .is_empty()
        );

        // Idempotency claims: one statement inserts the claim or finds the key's record.
        use mcp_root::store::{Claim, ClaimState, NewClaim};
        let key = |owner, key| mcp_root::store::IdempotencyKey {
            owner,
            target_id: "hub:t",
            tool_id: "tool",
            key,
        };
        let claim = |args_hash, event_id, now_ms, expires_at_ms| NewClaim {
            args_hash,
            event_id,
            claimed_by: "r1",
            now_ms,
            expires_at_ms,
        };
        let k = key("lease:a", "k");
        assert!(matches!(
            store
                .claim_idempotency(&k, &claim("a", "e1", 1, 1_000))
                .await
                .unwrap(),
            Claim::Won(None)
        ));
        match store
            .claim_idempotency(&k, &claim("a", "e2", 2, 1_000))
            .await
            .unwrap()
        {
            Claim::Held(r) => assert_eq!(
                (r.state, r.event_id.as_str(), r.claimed_by.as_str()),
                (ClaimState::Claimed, "e1", "r1"),
                "on {url}"
            ),
            Claim::Won(_) => panic!("a held claim was won again on {url}"),
        }
        store
            .note_idempotency(&k, "e1", "{\"arguments\":{}}")
            .await
            .unwrap();
        // Past its expiry, one caller takes it over, with what it had noted.
        match store
            .claim_idempotency(&k, &claim("a", "e3", 2_000, 9_000))
            .await
            .unwrap()
        {
            Claim::Won(Some(d)) => assert_eq!(d, "{\"arguments\":{}}", "on {url}"),
            other => panic!("an expired claim was not taken over on {url}: {other:?}"),
        }
        // Its first claimer finishing late changes nothing; the new claimer's result stays.
        assert!(
            !store
                .finish_idempotency(&k, "e1", "{\"x\":0}")
                .await
                .unwrap()
        );
        assert!(
            store
                .finish_idempotency(&k, "e3", "{\"x\":1}")
                .await
                .unwrap()
        );
        match store
            .claim_idempotency(&k, &claim("b", "e4", 3_000, 9_000))
            .await
            .unwrap()
        {
            Claim::Held(r) => assert_eq!(
                (
                    r.state,
                    r.args_hash.as_str(),
                    r.result.as_str(),
                    r.event_id.as_str()
                ),
                (ClaimState::Done, "a", "{\"x\":1}", "e3"),
                "on {url}"
            ),
            Claim::Won(_) => panic!("a done key was claimed again on {url}"),
        }
        assert!(
            store
                .get_idempotency(&key("lease:a", "other"))
                .await
                .unwrap()
                .is_none()
        );
        // Another owner's identical key is another record; a released claim is gone.
        let theirs = key("lease:b", "k");
        assert!(matches!(
            store
                .claim_idempotency(&theirs, &claim("a", "e5", 1, 1_000))
                .await
                .unwrap(),
            Claim::Won(None)
        ));
        store.release_idempotency(&theirs, "e5").await.unwrap();
        assert!(
            store.get_idempotency(&theirs).await.unwrap().is_none(),
            "on {url}"
        );
        // At start, a replica's claims left by a crash: released when nothing was redeemed,
        // expired (for a takeover) when something was.
        let bare = key("lease:c", "bare");
        let noted = key("lease:c", "noted");
        for (k, e) in [(&bare, "e6"), (&noted, "e7")] {
            store
                .claim_idempotency(k, &claim("a", e, 1, i64::MAX / 2))
                .await
                .unwrap();
        }
        store.note_idempotency(&noted, "e7", "{}").await.unwrap();
        assert_eq!(store.release_claims_of("r1").await.unwrap(), 2, "on {url}");
        assert!(store.get_idempotency(&bare).await.unwrap().is_none());
        assert_eq!(
            store
                .get_idempotency(&noted)
                .await
                .unwrap()
                .unwrap()
                .expires_at_ms,
            0,
            "on {url}"
        );

        let t = mcp_root::store::TargetRow {
            target_id: "hub:t".into(),
            environment: "test".into(),
            subnet_id: "s".into(),
            zone: "z".into(),
            token_hash: "th".into(),
            signing_key: "00".repeat(32),
            enrolled_at_ms: 1,
            last_seen_at_ms: None,
            descriptor: None,
            skills: None,
            skill_desired: None,
            labels: None,
            lifecycle: None,
            narrowing: None,
        };
        assert!(store.insert_target(&t).await.unwrap());
        assert!(
            !store.insert_target(&t).await.unwrap(),
            "enrolled once on {url}"
        );
        store
            .update_target_seen("hub:t", 9, Some("{}"), None)
            .await
            .unwrap();
        let rows = store.load_targets().await.unwrap();
        assert_eq!(
            (rows[0].last_seen_at_ms, rows[0].descriptor.as_deref()),
            (Some(9), Some("{}"))
        );
        // The fleet's last-seen times in one transaction: newer ones land, an older one (a
        // round racing a connection's own write) does not go back, unknown targets are no
        // error.
        store
            .update_targets_seen(&[("hub:t".into(), 20), ("hub:gone".into(), 5)])
            .await
            .unwrap();
        store
            .update_targets_seen(&[("hub:t".into(), 15)])
            .await
            .unwrap();
        let rows = store.load_targets().await.unwrap();
        assert_eq!(rows[0].last_seen_at_ms, Some(20), "on {url}");
    }
    if let Some(db) = db {
        db.drop_schema().await;
    }
}

/// A PostgreSQL database the runner before sqlx's migrated (its versions in
/// `schema_migrations`, no `_sqlx_migrations`) opens under sqlx's migrator without running a
/// migration again (an `ALTER TABLE ... ADD COLUMN` twice would fail), every version recorded
/// once, its rows kept.
#[tokio::test]
async fn an_earlier_runners_postgres_database_continues_under_sqlx_migrations() {
    let Some(db) =
        PgSchema::create("an_earlier_runners_postgres_database_continues_under_sqlx_migrations")
            .await
    else {
        return;
    };
    let (schema, url) = (&db.schema, &db.url);
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let store = mcp_root::store::Store::open(url).await.unwrap();
    drop(store);
    // Turn it into the earlier runner's database: its versions table instead of sqlx's.
    let q = |sql: String| sqlx::query(sqlx::AssertSqlSafe(sql));
    let all: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM {schema}._sqlx_migrations"
    )))
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(all > 30, "{all} migrations");
    for sql in [
        format!("DROP TABLE {schema}._sqlx_migrations"),
        format!("CREATE TABLE {schema}.schema_migrations (version BIGINT PRIMARY KEY)"),
        format!("INSERT INTO {schema}.schema_migrations SELECT generate_series(1, {all})"),
        format!(
            "INSERT INTO {schema}.operators (name, token_hash, created_at, created_by) \
             VALUES ('ann', 'h-ann', 1, 'admin')"
        ),
    ] {
        q(sql).execute(&mut conn).await.unwrap();
    }
    let store = mcp_root::store::Store::open(url).await.unwrap();
    let recorded: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT version FROM {schema}._sqlx_migrations WHERE success ORDER BY version"
    )))
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(recorded, (1..=all).collect::<Vec<_>>());
    let operators = store.load_operators().await.unwrap();
    assert!(operators.iter().any(|o| o.name == "ann"), "rows are kept");
    drop(store);
    drop(conn);
    db.drop_schema().await;
}
