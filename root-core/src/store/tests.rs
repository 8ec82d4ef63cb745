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

/// The database an earlier root left: the first `applied` migrations, run by the runner
/// before sqlx's (its versions in `schema_migrations`), and one lease.
async fn earlier_runners_database(url: &str, applied: usize, versions: &[i64]) {
    let opts = sqlx::sqlite::SqliteConnectOptions::from_str(url)
        .unwrap()
        .create_if_missing(true);
    let pool = sqlx::SqlitePool::connect_with(opts).await.unwrap();
    for sql in &super::migrations::MIGRATIONS[..applied] {
        sqlx::query(*sql).execute(&pool).await.unwrap();
    }
    sqlx::query("CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY)")
        .execute(&pool)
        .await
        .unwrap();
    for v in versions {
        sqlx::query("INSERT INTO schema_migrations (version) VALUES ($1)")
            .bind(v)
            .execute(&pool)
            .await
            .unwrap();
    }
    sqlx::query(
        "INSERT INTO leases (session_id, token_hash, audience, target_id, subnet_id, zone,
            capability_profile, effective_tools, created_at, deadline_at, use_count, status)
         VALUES ('s-old', 'h-old', 'mcp-client', 'hub:a', 'default', 'z', 'InfraOpsRead',
            '[]', 1, 2, 0, 'active')",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
}

/// The versions sqlx's migrator records as applied.
async fn recorded(url: &str) -> Vec<i64> {
    let pool = sqlx::SqlitePool::connect(url).await.unwrap();
    let v =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
            .fetch_all(&pool)
            .await
            .unwrap();
    pool.close().await;
    v
}

/// A database the earlier runner migrated, fully or partly, opens under sqlx's migrator:
/// what it applied is not run again (an `ALTER TABLE ... ADD COLUMN` twice would fail), what
/// it did not is, every version is recorded once, and the data stays. Reopening runs nothing.
#[tokio::test]
async fn a_database_of_the_earlier_runner_continues_under_sqlx_migrations() {
    let all = super::migrations::MIGRATIONS.len();
    for applied in [all, all - 3] {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("root.db").display());
        let versions: Vec<i64> = (1..=applied as i64).collect();
        earlier_runners_database(&url, applied, &versions).await;
        let store = Store::open(&url).await.unwrap();
        assert_eq!(recorded(&url).await, (1..=all as i64).collect::<Vec<_>>());
        let lease = store.lease_by_id("s-old").await.unwrap();
        assert!(
            lease.is_some(),
            "the lease the earlier root stored is still there"
        );
        drop(store);
        Store::open(&url).await.unwrap();
        assert_eq!(
            recorded(&url).await.len(),
            all,
            "reopening recorded nothing new"
        );
    }
}

/// A fresh database is migrated by sqlx's migrator alone (no `schema_migrations`), and an
/// earlier runner's table that does not list 1..=n is refused with what it lists.
#[tokio::test]
async fn a_fresh_database_has_only_sqlx_migrations_and_a_gap_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("fresh.db").display());
    Store::open(&url).await.unwrap();
    let all = super::migrations::MIGRATIONS.len();
    assert_eq!(recorded(&url).await.len(), all);
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let legacy: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE name = 'schema_migrations'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(legacy, 0);
    pool.close().await;

    let gap = format!("sqlite:{}", dir.path().join("gap.db").display());
    earlier_runners_database(&gap, 3, &[1, 3]).await;
    let err = Store::open(&gap).await.err().expect("a gap is refused");
    assert!(err.to_string().contains("[1, 3]"), "{err}");
}

fn grant(grant_id: &str, client_id: &str, code_hash: &str) -> GrantRow {
    GrantRow {
        grant_id: grant_id.into(),
        client_id: client_id.into(),
        operator: "admin".into(),
        target_id: "hub:t".into(),
        capability_profile: "InfraOpsRead".into(),
        resource: "http://127.0.0.1/mcp".into(),
        redirect_uri: "http://127.0.0.1/cb".into(),
        code_challenge: "c".into(),
        code_hash: code_hash.into(),
        code_expires_at_ms: 0,
        code_used_at_ms: None,
        created_at_ms: 0,
        expires_at_ms: 0,
        session_id: None,
        refresh_hash: None,
        ended_at_ms: None,
        dpop_jkt: None,
    }
}

#[tokio::test]
async fn a_full_client_registry_drops_its_oldest_unused_client_and_never_a_used_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&format!("sqlite:{}", dir.path().join("s.db").display()))
        .await
        .expect("store");
    let t0 = 1_000_000;
    let stored = Registered::Stored { evicted: 0 };
    for (i, id) in ["used", "unused-1", "unused-2"].into_iter().enumerate() {
        let at = t0 + i as i64;
        assert_eq!(
            store.insert_oauth_client(id, "{}", at, 3).await.unwrap(),
            stored
        );
    }
    store
        .insert_oauth_grant(&grant("g", "used", "code"))
        .await
        .unwrap();
    // Full: the oldest registration that never got a grant makes room, at once.
    assert_eq!(
        store
            .insert_oauth_client("new", "{}", t0 + 10, 3)
            .await
            .unwrap(),
        Registered::Stored { evicted: 1 }
    );
    assert!(store.oauth_client("unused-1").await.unwrap().is_none());
    for kept in ["used", "unused-2", "new"] {
        assert!(store.oauth_client(kept).await.unwrap().is_some(), "{kept}");
    }
    // When every registration kept has signed in, nothing is dropped and nothing stored.
    for (g, client) in [("g2", "unused-2"), ("g3", "new")] {
        store
            .insert_oauth_grant(&grant(g, client, &format!("code-{g}")))
            .await
            .unwrap();
    }
    assert_eq!(
        store
            .insert_oauth_client("late", "{}", t0 + 20, 3)
            .await
            .unwrap(),
        Registered::Full
    );
    assert!(store.oauth_client("late").await.unwrap().is_none());
}

#[tokio::test]
async fn a_code_is_claimed_once_and_a_refresh_token_rotates_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&format!("sqlite:{}", dir.path().join("s.db").display()))
        .await
        .expect("store");
    store
        .insert_oauth_grant(&grant("g", "c", "code"))
        .await
        .unwrap();
    let first = store.claim_code("code", 5).await.unwrap().unwrap().unwrap();
    assert_eq!(first.code_used_at_ms, Some(5));
    let again = store.claim_code("code", 6).await.unwrap().unwrap_err();
    assert_eq!(again.grant_id, "g");
    assert!(
        store
            .claim_code("nope", 6)
            .await
            .unwrap()
            .unwrap()
            .is_none()
    );
    store
        .set_grant_tokens("g", "s1", Some("r1"), None)
        .await
        .unwrap();
    assert!(matches!(
        store.claim_refresh("r1", "r2", None, 7).await.unwrap(),
        RefreshClaim::Claimed(_)
    ));
    assert_eq!(
        store.claim_refresh("r1", "r3", None, 8).await.unwrap(),
        RefreshClaim::Spent {
            grant_id: "g".into()
        }
    );
    assert_eq!(
        store.claim_refresh("zz", "r4", None, 8).await.unwrap(),
        RefreshClaim::Unknown
    );
    assert_eq!(store.end_grants_of_lease("s1", 9).await.unwrap(), 1);
    assert_eq!(
        store.claim_refresh("r2", "r5", None, 9).await.unwrap(),
        RefreshClaim::Ended
    );
    assert_eq!(
        store.claim_refresh("r1", "r5", None, 9).await.unwrap(),
        RefreshClaim::Ended
    );
}

#[tokio::test]
async fn targets_are_loaded_by_id_without_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&format!("sqlite:{}", dir.path().join("s.db").display()))
        .await
        .expect("store");
    for id in ["hub:a", "hub:b", "hub:c", "hub:\"quoted\""] {
        let row = TargetRow {
            target_id: id.into(),
            environment: "test".into(),
            subnet_id: "s".into(),
            zone: "z".into(),
            token_hash: format!("hash-{id}"),
            signing_key: "k".into(),
            enrolled_at_ms: 1,
            last_seen_at_ms: None,
            descriptor: None,
            skills: None,
            skill_desired: None,
            labels: None,
            lifecycle: None,
            narrowing: None,
        };
        assert!(store.insert_target(&row).await.expect("insert"));
    }
    let ids = |rows: Vec<TargetRow>| rows.into_iter().map(|r| r.target_id).collect::<Vec<_>>();
    let some = store
        .load_targets_of(&["hub:c".into(), "hub:a".into(), "hub:none".into()])
        .await
        .expect("some");
    assert_eq!(ids(some), ["hub:a", "hub:c"]);
    let quoted = store
        .load_targets_of(&["hub:\"quoted\"".into()])
        .await
        .expect("quoted");
    assert_eq!(ids(quoted), ["hub:\"quoted\""]);
    assert!(store.load_targets_of(&[]).await.expect("none").is_empty());
    assert_eq!(store.load_targets().await.expect("all").len(), 4);
}

#[tokio::test]
async fn a_transaction_that_reads_then_writes_waits_for_another_writer_instead_of_failing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&format!("sqlite:{}", dir.path().join("s.db").display()))
        .await
        .expect("store");
    let Pool::Sqlite(pool) = &store.pool else {
        unreachable!("a sqlite url")
    };
    // Another connection holds the write lock, as a fleet run's bookkeeping does.
    let mut other = begin_write(pool).await.expect("begin");
    sqlx::query("INSERT INTO descriptor_sets (revision, set_hash, published_at, descriptors) VALUES (100, 'x', 0, '[]')")
        .execute(&mut *other)
        .await
        .expect("insert");
    // Publishing reads the newest revision, then writes: it must wait for the lock. Begun
    // deferred, its read would be outdated by the other commit and it would fail at once
    // with "database is locked" (CI's model test found that).
    let publish = tokio::spawn({
        let store = store.clone();
        async move { store.put_descriptor_set("h", 1, "[]").await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    other.commit().await.expect("commit");
    let revision = publish
        .await
        .expect("join")
        .expect("published after the other writer");
    assert_eq!(
        revision, 101,
        "it read the newest revision after the other commit"
    );
}

#[tokio::test]
async fn the_audit_tree_grows_in_steps_and_proves_inclusion_and_consistency() {
    use crate::audit::tree;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&format!("sqlite:{}", dir.path().join("s.db").display()))
        .await
        .expect("store");
    // Leaves as the trail gives them: (seq, chain hash).
    let leaves: Vec<(i64, String)> = (1..=37)
        .map(|seq: i64| {
            (
                seq,
                hex::encode(<sha2::Sha256 as sha2::Digest>::digest(seq.to_be_bytes())),
            )
        })
        .collect();
    let data = |upto: usize| {
        leaves[..upto]
            .iter()
            .map(|(_, h)| <[u8; 32]>::try_from(hex::decode(h).unwrap()).unwrap())
            .collect::<Vec<_>>()
    };
    let mut size = 0u64;
    for step in [1usize, 9, 16, 37] {
        let grown = tree::grow(&store, size, &leaves[size as usize..step])
            .await
            .expect("grow");
        assert_eq!(grown.size, step as u64);
        assert_eq!(
            grown.root,
            tree::root_of(data(step)).unwrap().1,
            "size {step}"
        );
        let row = CheckpointRow {
            tree_size: grown.size,
            root_hash: hex::encode(grown.root.0),
            note: format!("note {step}"),
            created_at_ms: 0,
        };
        let hashes: Vec<(u64, String)> = grown
            .hashes
            .iter()
            .map(|(i, h)| (*i, hex::encode(h.0)))
            .collect();
        assert!(
            store
                .put_audit_checkpoint(&hashes, &row)
                .await
                .expect("put")
        );
        assert!(
            !store
                .put_audit_checkpoint(&hashes, &row)
                .await
                .expect("again"),
            "a size stored already is not stored twice"
        );
        size = grown.size;
    }
    let root = |n: usize| tree::root_of(data(n)).unwrap().1;
    for n in [0u64, 8, 15, 36] {
        let proof = tree::inclusion(&store, 37, n).await.expect("inclusion");
        let leaf = tree::leaf_hash(&leaves[n as usize].1).unwrap();
        tlog_tiles::check_record(&proof, 37, root(37), n, leaf).expect("verifies");
        let wrong = tree::leaf_hash(&leaves[(n as usize + 1) % 37].1).unwrap();
        assert!(tlog_tiles::check_record(&proof, 37, root(37), n, wrong).is_err());
    }
    for old in [1u64, 9, 16] {
        let proof = tree::consistency(&store, 37, old)
            .await
            .expect("consistency");
        tlog_tiles::check_tree(&proof, 37, root(37), old, root(old as usize)).expect("consistent");
        assert!(tlog_tiles::check_tree(&proof, 37, root(37), old, root(old as usize + 1)).is_err());
    }
    // Growing from a size whose events do not follow is refused.
    let e = tree::grow(&store, 37, &leaves[..2]).await.unwrap_err();
    assert!(
        matches!(
            e,
            tree::TreeError::Gap {
                expected: 38,
                found: 1
            }
        ),
        "{e}"
    );
    let latest = store.audit_checkpoints(1).await.expect("list");
    assert_eq!(latest[0].tree_size, 37);
}
