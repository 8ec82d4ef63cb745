//! The schema, as migrations applied in order once each (recorded in `schema_migrations`);
//! both backends accept this SQL.

use super::*;

/// Schema migrations, applied in order once each; both backends accept this SQL.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS leases (
        session_id TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL UNIQUE,
        audience TEXT NOT NULL,
        target_id TEXT NOT NULL,
        subnet_id TEXT NOT NULL,
        zone TEXT NOT NULL,
        capability_profile TEXT NOT NULL,
        effective_tools TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        deadline_at BIGINT NOT NULL,
        last_used_at BIGINT,
        use_count BIGINT NOT NULL,
        status TEXT NOT NULL
    )",
    "CREATE TABLE IF NOT EXISTS audit_events (
        seq BIGINT PRIMARY KEY,
        event_id TEXT NOT NULL UNIQUE,
        trace_id TEXT NOT NULL,
        target_id TEXT,
        tool_id TEXT NOT NULL,
        status TEXT NOT NULL,
        actor TEXT NOT NULL,
        started_at BIGINT NOT NULL,
        event TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL
    )",
    "CREATE INDEX IF NOT EXISTS audit_events_trace ON audit_events (trace_id)",
    "CREATE INDEX IF NOT EXISTS audit_events_tool ON audit_events (tool_id, seq)",
    "CREATE INDEX IF NOT EXISTS audit_events_target ON audit_events (target_id, seq)",
    "CREATE INDEX IF NOT EXISTS audit_events_started ON audit_events (started_at)",
    "CREATE TABLE IF NOT EXISTS targets (
        target_id TEXT PRIMARY KEY,
        environment TEXT NOT NULL,
        subnet_id TEXT NOT NULL,
        zone TEXT NOT NULL,
        token_hash TEXT NOT NULL UNIQUE,
        signing_key TEXT NOT NULL,
        enrolled_at BIGINT NOT NULL,
        last_seen_at BIGINT,
        descriptor TEXT,
        skills TEXT
    )",
    "CREATE TABLE IF NOT EXISTS confirmations (
        token_hash TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        tool_id TEXT NOT NULL,
        target_id TEXT NOT NULL,
        args_hash TEXT NOT NULL,
        expires_at BIGINT NOT NULL
    )",
    "CREATE TABLE IF NOT EXISTS idempotency (
        target_id TEXT NOT NULL,
        tool_id TEXT NOT NULL,
        idem_key TEXT NOT NULL,
        args_hash TEXT NOT NULL,
        result TEXT NOT NULL,
        event_id TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (target_id, tool_id, idem_key)
    )",
    "CREATE TABLE IF NOT EXISTS retained (
        target_id TEXT NOT NULL,
        collection TEXT NOT NULL,
        item_key TEXT NOT NULL,
        body TEXT NOT NULL,
        retained_at BIGINT NOT NULL,
        event_id TEXT NOT NULL,
        PRIMARY KEY (target_id, collection, item_key)
    )",
    "CREATE TABLE IF NOT EXISTS descriptor_sets (
        revision BIGINT PRIMARY KEY,
        set_hash TEXT NOT NULL,
        published_at BIGINT NOT NULL,
        descriptors TEXT NOT NULL
    )",
    // A proposal's confirmation keeps the arguments it was issued for (the apply tool runs
    // with them).
    "ALTER TABLE confirmations ADD COLUMN arguments TEXT",
    "CREATE TABLE IF NOT EXISTS approvals (
        approval_id TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL UNIQUE,
        session_id TEXT NOT NULL,
        target_id TEXT NOT NULL,
        tool_id TEXT NOT NULL,
        arguments TEXT NOT NULL,
        effect TEXT NOT NULL,
        status TEXT NOT NULL,
        requested_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        decided_at BIGINT,
        reason TEXT,
        preview_event_id TEXT NOT NULL,
        applied_event_id TEXT
    )",
    "CREATE INDEX IF NOT EXISTS approvals_status ON approvals (status, requested_at)",
    // Hub key rotation: the previous token (hash) and signing key stay valid until
    // `prev_expires_at` (the grace period the operator chose).
    "ALTER TABLE targets ADD COLUMN prev_token_hash TEXT",
    "ALTER TABLE targets ADD COLUMN prev_signing_key TEXT",
    "ALTER TABLE targets ADD COLUMN prev_expires_at BIGINT",
    // Replicas (PostgreSQL only; see `replica`): which replica wrote an audit event, the
    // registry with heartbeats, which replica holds each hub's connection, and the change
    // feed that invalidates the replicas' caches.
    "ALTER TABLE audit_events ADD COLUMN replica_id TEXT",
    "CREATE TABLE IF NOT EXISTS replicas (
        replica_id TEXT PRIMARY KEY,
        zone TEXT NOT NULL,
        advertise_url TEXT NOT NULL,
        instance_id TEXT NOT NULL,
        version TEXT NOT NULL,
        started_at BIGINT NOT NULL,
        heartbeat_at BIGINT NOT NULL,
        applied_change BIGINT NOT NULL
    )",
    "CREATE TABLE IF NOT EXISTS hub_ownership (
        target_id TEXT PRIMARY KEY,
        replica_id TEXT NOT NULL,
        connection_id TEXT NOT NULL,
        connected_at BIGINT NOT NULL,
        heartbeat_at BIGINT NOT NULL
    )",
    "CREATE TABLE IF NOT EXISTS zone_changes (
        change_id BIGINT PRIMARY KEY,
        kind TEXT NOT NULL,
        item TEXT NOT NULL,
        origin TEXT NOT NULL,
        at BIGINT NOT NULL
    )",
    // Console sessions of a zone with replicas (PostgreSQL only; see `console`): a login on
    // one replica is honoured by every replica, a logout ends it everywhere.
    "CREATE TABLE IF NOT EXISTS console_sessions (
        session_id TEXT PRIMARY KEY,
        expires_at BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        replica_id TEXT NOT NULL
    )",
    // A confirmation keeps the expected effect of its preview: the execute hands it to the
    // adapter, which refuses when the world moved since (see `CallRequest::confirmed_effect`).
    "ALTER TABLE confirmations ADD COLUMN effect TEXT",
    // Each preview sweeps tokens expired a day ago; without this index that sweep read the
    // whole table on every preview (a full scan per write preview, growing with the table).
    "CREATE INDEX IF NOT EXISTS confirmations_expires ON confirmations (expires_at)",
    // Idempotency keys belong to the lease that used them (its lineage: a rotation keeps
    // it): the key of another lease is another key, never a replay of its result. Rows of
    // the target-wide table take their owner from the event that stored them.
    "ALTER TABLE leases ADD COLUMN lineage TEXT",
    // A run credential's parent lease (revoked with it).
    "ALTER TABLE leases ADD COLUMN parent_id TEXT",
    "CREATE INDEX IF NOT EXISTS leases_parent ON leases (parent_id)",
    // Root's desired state of each target's infra_access_skill (JSON; NULL: installed and
    // enabled, as every target was before operators could say otherwise).
    "ALTER TABLE targets ADD COLUMN skill_desired TEXT",
    // Named operators: each has its own credential (hash only); revoked ones are kept so the
    // trail's actors stay explained. Console sessions name the operator who logged in.
    "CREATE TABLE IF NOT EXISTS operators (
        name TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL UNIQUE,
        created_at BIGINT NOT NULL,
        created_by TEXT NOT NULL,
        revoked_at BIGINT,
        revoked_by TEXT
    )",
    "ALTER TABLE console_sessions ADD COLUMN operator TEXT",
    "CREATE TABLE IF NOT EXISTS idempotency_keys (
        owner TEXT NOT NULL,
        target_id TEXT NOT NULL,
        tool_id TEXT NOT NULL,
        idem_key TEXT NOT NULL,
        args_hash TEXT NOT NULL,
        result TEXT NOT NULL,
        event_id TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (owner, target_id, tool_id, idem_key)
    )",
    "INSERT INTO idempotency_keys (owner, target_id, tool_id, idem_key, args_hash, result, event_id, created_at)
     SELECT COALESCE((SELECT a.actor FROM audit_events a WHERE a.event_id = i.event_id), ''),
            i.target_id, i.tool_id, i.idem_key, i.args_hash, i.result, i.event_id, i.created_at
     FROM idempotency i",
    "DROP TABLE idempotency",
];

impl Store {
    pub(super) async fn migrate(&self) -> Result<()> {
        // Replicas starting together on one PostgreSQL database migrate one at a time (a
        // session advisory lock on the connection that migrates).
        let lock = self.shared.as_ref().map(|n| n.changes_lock ^ 0x4d49_4752);
        on_pool!(self, pool => {
            let mut conn = pool.acquire().await.map_err(db("migrate"))?;
            if let Some(key) = lock {
                sqlx::query("SELECT pg_advisory_lock($1)")
                    .bind(key).execute(&mut *conn).await.map_err(db("migrate"))?;
            }
            let res = async {
                sqlx::query("CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY)")
                    .execute(&mut *conn).await.map_err(db("migrate"))?;
                let applied: Vec<i64> = sqlx::query("SELECT version FROM schema_migrations")
                    .fetch_all(&mut *conn).await.map_err(db("migrate"))?
                    .iter().map(|r| r.try_get::<i64, _>(0)).collect::<std::result::Result<_, _>>()
                    .map_err(db("migrate"))?;
                for (i, sql) in MIGRATIONS.iter().enumerate() {
                    let version = i as i64 + 1;
                    if applied.contains(&version) {
                        continue;
                    }
                    let mut tx = sqlx::Connection::begin(&mut *conn).await.map_err(db("migrate"))?;
                    sqlx::query(*sql).execute(&mut *tx).await.map_err(db("migrate"))?;
                    sqlx::query("INSERT INTO schema_migrations (version) VALUES ($1)")
                        .bind(version).execute(&mut *tx).await.map_err(db("migrate"))?;
                    tx.commit().await.map_err(db("migrate"))?;
                }
                Ok(())
            }
            .await;
            if let Some(key) = lock {
                sqlx::query("SELECT pg_advisory_unlock($1)")
                    .bind(key).execute(&mut *conn).await.map_err(db("migrate"))?;
            }
            res
        })
    }
}
