//! The schema, as sqlx migrations (`sqlx::migrate::Migrator`), version `n` being
//! `MIGRATIONS[n - 1]`; both backends accept this SQL, and sqlx records each version it applies
//! in `_sqlx_migrations`. A database an earlier root migrated with its own runner (versions in
//! `schema_migrations`) is bridged once: those versions are marked applied, not run again.

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

use super::*;

/// The migrations, oldest first. Append only: an applied migration's SQL never changes (sqlx
/// refuses a database whose applied migrations no longer match their checksums).
pub(super) const MIGRATIONS: &[&str] = &[
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
    // OAuth sign-in (api::oauth): registered clients, and one grant per operator approval
    // (its single-use code, its current refresh token and the lease its tokens are now;
    // hashes only). A refresh token that was replaced is kept as spent, so its reuse is seen.
    "CREATE TABLE IF NOT EXISTS oauth_clients (
        client_id TEXT PRIMARY KEY,
        metadata TEXT NOT NULL,
        created_at BIGINT NOT NULL
    )",
    "CREATE TABLE IF NOT EXISTS oauth_grants (
        grant_id TEXT PRIMARY KEY,
        client_id TEXT NOT NULL,
        operator TEXT NOT NULL,
        target_id TEXT NOT NULL,
        capability_profile TEXT NOT NULL,
        resource TEXT NOT NULL,
        redirect_uri TEXT NOT NULL,
        code_challenge TEXT NOT NULL,
        code_hash TEXT NOT NULL UNIQUE,
        code_expires_at BIGINT NOT NULL,
        code_used_at BIGINT,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        session_id TEXT,
        refresh_hash TEXT UNIQUE,
        ended_at BIGINT
    )",
    "CREATE INDEX IF NOT EXISTS oauth_grants_session ON oauth_grants (session_id)",
    "CREATE TABLE IF NOT EXISTS oauth_spent_refresh (
        token_hash TEXT PRIMARY KEY,
        grant_id TEXT NOT NULL,
        spent_at BIGINT NOT NULL
    )",
    // MCP tasks (call::tasks): a governed call that outlasts its request, its state and
    // outcome kept for its owner (a lease lineage) on every replica and across restarts.
    "CREATE TABLE IF NOT EXISTS tasks (
        task_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        session_id TEXT NOT NULL,
        target_id TEXT NOT NULL,
        tool_id TEXT NOT NULL,
        replica TEXT NOT NULL,
        status TEXT NOT NULL,
        status_message TEXT,
        outcome TEXT,
        event TEXT NOT NULL,
        event_id TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL
    )",
    "CREATE INDEX IF NOT EXISTS tasks_owner ON tasks (owner, created_at)",
    "CREATE INDEX IF NOT EXISTS tasks_status ON tasks (status, replica)",
    // ProfileOps evidence hubs publish (hubs::evidence): each record as the hub last sent it
    // (an artifact's bytes beside it when small), and how far root holds each hub's log.
    "CREATE TABLE IF NOT EXISTS evidence (
        target_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        item_id TEXT NOT NULL,
        service TEXT NOT NULL,
        record TEXT NOT NULL,
        content TEXT,
        received_at BIGINT NOT NULL,
        PRIMARY KEY (target_id, kind, item_id)
    )",
    "CREATE TABLE IF NOT EXISTS evidence_cursors (
        target_id TEXT PRIMARY KEY,
        epoch TEXT NOT NULL,
        seq BIGINT NOT NULL,
        synced_at BIGINT NOT NULL
    )",
    // The delegation graph (leases::manager): what a lease is (`issued`, `minted` by another
    // lease, a `run` credential), the operator at the top of its chain, the OAuth grant it is
    // an access token of, and the owner of its idempotency keys (the lineage at the top of
    // its chain). Rows from before: a parent meant a run credential, whose keys now belong
    // to its parent's lineage; an OAuth lease is found by its grant.
    "ALTER TABLE leases ADD COLUMN kind TEXT",
    "ALTER TABLE leases ADD COLUMN issued_by TEXT",
    "ALTER TABLE leases ADD COLUMN grant_id TEXT",
    "ALTER TABLE leases ADD COLUMN owner TEXT",
    "UPDATE leases SET kind = CASE WHEN parent_id IS NULL THEN 'issued' ELSE 'run' END,
        owner = COALESCE((SELECT COALESCE(p.lineage, p.session_id) FROM leases p
                          WHERE p.session_id = leases.parent_id),
                         lineage, session_id)
     WHERE kind IS NULL",
    "UPDATE leases SET
        grant_id = (SELECT g.grant_id FROM oauth_grants g WHERE g.session_id = leases.session_id),
        issued_by = (SELECT 'operator:' || g.operator FROM oauth_grants g
                     WHERE g.session_id = leases.session_id)
     WHERE grant_id IS NULL
       AND EXISTS (SELECT 1 FROM oauth_grants g WHERE g.session_id = leases.session_id)",
    "CREATE INDEX IF NOT EXISTS leases_grant ON leases (grant_id)",
    "CREATE INDEX IF NOT EXISTS leases_issued_by ON leases (issued_by)",
    // A target's labels, lifecycle state and per-target narrowing, as operators set them
    // (JSON each; NULL: no labels, active, nothing denied). See `hubs::lifecycle`.
    "ALTER TABLE targets ADD COLUMN labels TEXT",
    "ALTER TABLE targets ADD COLUMN lifecycle TEXT",
    "ALTER TABLE targets ADD COLUMN narrowing TEXT",
    // Leases bound to a target end with it (retired or moved).
    "CREATE INDEX IF NOT EXISTS leases_target ON leases (target_id)",
    // Fleet runs and each target's part in them (see `store::fleet`).
    "CREATE TABLE IF NOT EXISTS fleet_runs (
        run_id TEXT PRIMARY KEY,
        trace_id TEXT NOT NULL,
        created_by TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        selector TEXT NOT NULL,
        tool_id TEXT NOT NULL,
        arguments TEXT NOT NULL,
        plan TEXT NOT NULL,
        set_hash TEXT NOT NULL,
        state TEXT NOT NULL,
        finished_at BIGINT,
        driver TEXT NOT NULL
    )",
    "CREATE INDEX IF NOT EXISTS fleet_runs_state ON fleet_runs (state)",
    "CREATE TABLE IF NOT EXISTS fleet_targets (
        run_id TEXT NOT NULL,
        ordinal BIGINT NOT NULL,
        target_id TEXT NOT NULL,
        status TEXT NOT NULL,
        code TEXT,
        result TEXT,
        event_id TEXT,
        started_at BIGINT,
        finished_at BIGINT,
        PRIMARY KEY (run_id, target_id)
    )",
    // Fleet writes: the capability profile a write run's targets run under, its confirmation
    // (hash and deadline) while previewed, and each target's preview (its expected effect, or
    // why it cannot take part).
    "ALTER TABLE fleet_runs ADD COLUMN profile TEXT",
    "ALTER TABLE fleet_runs ADD COLUMN confirmation_hash TEXT",
    "ALTER TABLE fleet_runs ADD COLUMN confirm_by BIGINT",
    "ALTER TABLE fleet_targets ADD COLUMN preview TEXT",
    "CREATE INDEX IF NOT EXISTS fleet_runs_confirmation ON fleet_runs (confirmation_hash)",
    "CREATE TABLE IF NOT EXISTS audit_tree (
        idx BIGINT PRIMARY KEY,
        hash TEXT NOT NULL
    )",
    "CREATE TABLE IF NOT EXISTS audit_checkpoints (
        tree_size BIGINT PRIMARY KEY,
        root_hash TEXT NOT NULL,
        note TEXT NOT NULL,
        created_at BIGINT NOT NULL
    )",
    "CREATE TABLE IF NOT EXISTS audit_sink_cursors (
        name TEXT PRIMARY KEY,
        seq BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    )",
    // Witnesses: the latest checkpoint this root cosigned of each log it witnesses, and the
    // cosignatures witnesses gave this zone's checkpoints (one signature line each).
    "CREATE TABLE IF NOT EXISTS witness_state (
        origin TEXT PRIMARY KEY,
        tree_size BIGINT NOT NULL,
        root_hash TEXT NOT NULL,
        note TEXT NOT NULL,
        updated_at BIGINT NOT NULL
    )",
    "CREATE TABLE IF NOT EXISTS audit_cosignatures (
        tree_size BIGINT NOT NULL,
        witness TEXT NOT NULL,
        line TEXT NOT NULL,
        cosigned_at BIGINT NOT NULL,
        PRIMARY KEY (tree_size, witness)
    )",
    // Idempotency keys are claimed before their execution runs (`store::writes`): a claim's
    // state, who holds it, until when, and what it runs (a fleet write's run).
    "ALTER TABLE idempotency_keys ADD COLUMN state TEXT NOT NULL DEFAULT 'done'",
    "ALTER TABLE idempotency_keys ADD COLUMN claimed_by TEXT",
    "ALTER TABLE idempotency_keys ADD COLUMN expires_at BIGINT",
    "ALTER TABLE idempotency_keys ADD COLUMN detail TEXT",
    // A confirmed fleet write's identity, which its targets' idempotency keys derive from.
    "ALTER TABLE fleet_runs ADD COLUMN write_key TEXT",
    // A fleet run's arguments as they run when redaction changed the shown ones (encrypted).
    "ALTER TABLE fleet_runs ADD COLUMN arguments_sealed TEXT",
    // A lease's own calls-per-second rate (`[rates]`), over its profile's.
    "ALTER TABLE leases ADD COLUMN rate TEXT",
    // An operator's roles and the profiles they may issue (`roles::Grant`); NULL roles: an
    // operator from before roles, who holds them all.
    "ALTER TABLE operators ADD COLUMN roles TEXT",
    "ALTER TABLE operators ADD COLUMN profiles TEXT",
    // People signed in through the organization's OpenID provider (`operators` rows named
    // `oidc:<issuer>#<sub>`): their email, their refresh token (encrypted under the master
    // key) and when a replica next checks them against the provider.
    "CREATE TABLE IF NOT EXISTS oidc_identities (
        name TEXT PRIMARY KEY,
        email TEXT,
        refresh_token TEXT,
        signed_in_at BIGINT NOT NULL,
        next_check BIGINT NOT NULL
    )",
    // Sign-ins between two requests of a CLI, so that any replica answers the next one: a
    // CLI's one-time code (`code`, with its PKCE challenge and who signed in) and a device
    // grant in progress (`device`, who signed in once the provider said so). By token hash.
    "CREATE TABLE IF NOT EXISTS oidc_pending (
        id_hash TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        challenge TEXT,
        outcome TEXT,
        expires_at BIGINT NOT NULL
    )",
    // Tokens bound to their holder's key (RFC 9449): the key's thumbprint on a lease, and on
    // the OAuth grant its refresh tokens belong to.
    "ALTER TABLE leases ADD COLUMN dpop_jkt TEXT",
    "ALTER TABLE oauth_grants ADD COLUMN dpop_jkt TEXT",
];

/// What a migration does, from its SQL (sqlx records it beside the version).
fn describe(sql: &str) -> String {
    let words: Vec<String> = sql
        .split_whitespace()
        .map(|w| w.trim_end_matches('(').to_ascii_lowercase())
        .filter(|w| !matches!(w.as_str(), "if" | "not" | "exists" | ""))
        .take(6)
        .collect();
    match words
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["alter", "table", t, "add", "column", c, ..] => format!("add column {t}.{c}"),
        ["insert", "into", t, ..] => format!("fill {t}"),
        [verb, kind, name, ..] => format!("{verb} {kind} {name}"),
        other => other.join(" "),
    }
}

/// The schema as sqlx's migrator applies it, version `n` being `MIGRATIONS[n - 1]`.
pub(super) fn migrator() -> Migrator {
    let migrations = MIGRATIONS
        .iter()
        .enumerate()
        .map(|(i, sql)| {
            Migration::new(
                i as i64 + 1,
                Cow::Owned(describe(sql)),
                MigrationType::Simple,
                sql.into_sql_str(),
                false,
            )
        })
        .collect();
    Migrator::with_migrations(migrations)
}

/// The table the runner before sqlx's kept its applied versions in.
const LEGACY_TABLE: &str = "schema_migrations";
/// sqlx's migrations table (its default name).
const SQLX_TABLE: &str = "_sqlx_migrations";

impl Store {
    /// Applies the migrations this database lacks, one replica at a time on PostgreSQL (a
    /// session advisory lock on the connection that migrates). A database the runner before
    /// sqlx's migrated is bridged first: the versions `schema_migrations` lists are marked
    /// applied in sqlx's table without running them again (`Migrator::skip`), once; the old
    /// table stays as it was, so a root one build older still starts on the database.
    pub(super) async fn migrate(&self) -> Result<()> {
        let lock = self.shared.as_ref().map(|n| n.changes_lock ^ 0x4d49_4752);
        let tables = match self.pool {
            Pool::Sqlite(_) => {
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ($1, $2)"
            }
            Pool::Postgres(_) => {
                "SELECT table_name::TEXT FROM information_schema.tables
                 WHERE table_schema = current_schema() AND table_name IN ($1, $2)"
            }
        };
        let migrator = migrator();
        on_pool!(self, pool => {
            let mut conn = pool.acquire().await.map_err(db("migrate"))?;
            if let Some(key) = lock {
                sqlx::query("SELECT pg_advisory_lock($1)")
                    .bind(key).execute(&mut *conn).await.map_err(db("migrate"))?;
            }
            let res = async {
                let present: Vec<String> = sqlx::query_scalar(tables)
                    .bind(LEGACY_TABLE)
                    .bind(SQLX_TABLE)
                    .fetch_all(&mut *conn)
                    .await
                    .map_err(db("migrate"))?;
                if present.iter().any(|t| t == LEGACY_TABLE) && !present.iter().any(|t| t == SQLX_TABLE) {
                    let versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM schema_migrations ORDER BY version")
                        .fetch_all(&mut *conn)
                        .await
                        .map_err(db("migrate"))?;
                    let applied = legacy_applied(&versions)?;
                    if applied > 0 {
                        migrator.skip(&mut *conn, Some(applied)).await.map_err(Error::Migrate)?;
                        tracing::info!(applied, "migrations of the earlier runner recorded for sqlx's migrator");
                    }
                }
                migrator.run(&mut *conn).await.map_err(Error::Migrate)
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

/// The newest version the earlier runner applied: it applied them in order, once each, so
/// the versions are 1..=n; anything else is a database this root cannot vouch for.
fn legacy_applied(versions: &[i64]) -> Result<i64> {
    let n = versions.len() as i64;
    let in_order = versions.iter().zip(1..).all(|(v, want)| *v == want);
    if !in_order || n > MIGRATIONS.len() as i64 {
        return Err(Error::Corrupt {
            op: "migrate",
            detail: format!(
                "schema_migrations lists versions {versions:?}; expected 1..=n with n at most {}",
                MIGRATIONS.len()
            ),
        });
    }
    Ok(n)
}
