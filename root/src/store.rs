//! Persistent storage of every table: leases, the hash-chained audit trail, writes' confirmations
//! and idempotency records, approvals, targets and their keys, descriptor sets, operators.
//!
//! One [`Store`] over an enum of pools chosen by URL scheme (`sqlite:` or `postgres://`).
//! Every query is written once with `$n` placeholders and runtime `sqlx::query`, and runs on
//! either backend through the [`on_pool!`] dispatch, so the build needs no database and both
//! backends share one schema. Timestamps are unix milliseconds (`BIGINT`); JSON is `TEXT`.

use std::str::FromStr;
use std::time::Duration;

use mcp_shared::event::OperationalEvent;
use mcp_shared::lease::{LeaseStatus, SessionLease};
use mcp_shared::time::{from_unix_ms, unix_ms};
use sqlx::Row;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

/// Storage failures, with the operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unsupported database url `{0}` (expected sqlite:PATH or postgres://...)")]
    UnsupportedUrl(String),
    #[error(
        "database url `{0}` is an in-memory SQLite database: the audit trail must outlive root, give a file (sqlite:PATH)"
    )]
    InMemory(String),
    #[error("database error during {op}: {source}")]
    Db {
        op: &'static str,
        #[source]
        source: sqlx::Error,
    },
    #[error("stored row is corrupt during {op}: {detail}")]
    Corrupt { op: &'static str, detail: String },
    #[error(
        "{0} needs PostgreSQL: replicas share one PostgreSQL database (SQLite is single-replica)"
    )]
    NotShared(&'static str),
}

type Result<T> = std::result::Result<T, Error>;

fn db(op: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
    move |source| Error::Db { op, source }
}

#[derive(Clone)]
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs the same code against whichever pool is configured.
macro_rules! on_pool {
    ($store:expr, $pool:ident => $body:expr) => {
        match &$store.pool {
            Pool::Sqlite($pool) => $body,
            Pool::Postgres($pool) => $body,
        }
    };
}

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

/// The database clock in unix milliseconds (PostgreSQL): replica heartbeats and their expiry
/// are judged by one clock, whatever the replicas' clocks say.
const PG_NOW_MS: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";

/// What a PostgreSQL database (and schema) shared by replicas is known by: the names of its
/// notification channels and the keys of its advisory locks. Channels and advisory locks are
/// per database, not per schema, so they are derived from the database and schema names;
/// two zones in two schemas of one database never see each other's notifications.
#[derive(Debug, Clone)]
pub struct SharedNames {
    /// `LISTEN` channel of the change feed.
    pub changes_channel: String,
    /// `LISTEN` channel announcing committed audit rows (payload: the newest seq).
    pub audit_channel: String,
    audit_lock: i64,
    changes_lock: i64,
    descriptors_lock: i64,
}

impl SharedNames {
    fn derive(database: &str, schema: &str) -> SharedNames {
        use sha2::{Digest, Sha256};
        let h = Sha256::digest(format!("mcp-root\n{database}\n{schema}").as_bytes());
        let tag = hex::encode(&h[..8]);
        let key = |salt: u8| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[8..16]);
            b[0] ^= salt;
            i64::from_be_bytes(b)
        };
        SharedNames {
            changes_channel: format!("mcp_root_changes_{tag}"),
            audit_channel: format!("mcp_root_audit_{tag}"),
            audit_lock: key(0xA5),
            changes_lock: key(0x5A),
            descriptors_lock: key(0x3C),
        }
    }
}

/// A registered replica (the zone view).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRow {
    pub replica_id: String,
    pub zone: String,
    pub advertise_url: String,
    pub instance_id: String,
    pub version: String,
    pub started_at_ms: i64,
    pub heartbeat_at_ms: i64,
    /// Milliseconds since the last heartbeat, by the database's clock.
    pub heartbeat_age_ms: i64,
    /// The newest change of the feed the replica has applied.
    pub applied_change: i64,
}

/// Which replica holds a hub's connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnershipRow {
    pub target_id: String,
    pub replica_id: String,
    pub connection_id: String,
    pub connected_at_ms: i64,
    pub heartbeat_age_ms: i64,
    /// The owner's advertised internal address.
    pub advertise_url: String,
}

/// A zone-wide lock on PostgreSQL (see [`Store::lock_descriptor_publish`]): a transaction
/// holding an advisory lock until it ends.
pub struct ZoneLock(sqlx::Transaction<'static, sqlx::Postgres>);

impl ZoneLock {
    /// Releases the lock (ends its transaction).
    pub async fn release(self) -> Result<()> {
        self.0.commit().await.map_err(db("release zone lock"))
    }
}

/// One entry of the change feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRow {
    pub change_id: i64,
    pub kind: String,
    pub item: String,
    pub origin: String,
}

/// A named operator as stored (the credential's hash only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorRow {
    pub name: String,
    pub token_hash: String,
    pub created_at_ms: i64,
    pub created_by: String,
    pub revoked_at_ms: Option<i64>,
    pub revoked_by: Option<String>,
}

/// A single-use confirmation token issued by a write preview, as stored (hash only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmationRow {
    pub token_hash: String,
    pub session_id: String,
    pub tool_id: String,
    pub target_id: String,
    pub args_hash: String,
    pub expires_at_ms: i64,
    /// The domain arguments, kept for tokens issued by a proposing tool.
    pub arguments: Option<String>,
    /// The preview's expected effect (JSON): what the caller confirmed.
    pub effect: Option<String>,
}

/// An operator approval of a write (a contract's `requires_approval`), as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRow {
    pub approval_id: String,
    /// Hash of the confirmation token the approval belongs to.
    pub token_hash: String,
    pub session_id: String,
    pub target_id: String,
    pub tool_id: String,
    pub arguments: serde_json::Value,
    /// The preview's expected effect (for an NLU change: its diff).
    pub effect: serde_json::Value,
    /// `pending`, `approved`, `rejected` or `applied` (an `expired` status is derived).
    pub status: String,
    pub requested_at_ms: i64,
    pub expires_at_ms: i64,
    pub decided_at_ms: Option<i64>,
    pub reason: Option<String>,
    pub preview_event_id: String,
    pub applied_event_id: Option<String>,
}

impl ApprovalRow {
    /// The status as of `now_ms`: an undecided or unapplied approval past its expiry is
    /// `expired`.
    pub fn status_at(&self, now_ms: i64) -> &str {
        match self.status.as_str() {
            "pending" | "approved" if now_ms >= self.expires_at_ms => "expired",
            s => s,
        }
    }
}

const APPROVAL_COLUMNS: &str = "approval_id, token_hash, session_id, target_id, tool_id, arguments, effect, status, requested_at, expires_at, decided_at, reason, preview_event_id, applied_event_id";

/// Reads an [`ApprovalRow`] from a row of either backend (expanded inside `on_pool!`).
macro_rules! approval_from_row {
    ($r:expr, $op:expr) => {{
        let r = $r;
        let op = $op;
        let json = |col: &str| -> Result<serde_json::Value> {
            let text: String = r.try_get(col).map_err(db(op))?;
            serde_json::from_str(&text).map_err(|e| Error::Corrupt {
                op,
                detail: format!("{col}: {e}"),
            })
        };
        Ok::<ApprovalRow, Error>(ApprovalRow {
            approval_id: r.try_get("approval_id").map_err(db(op))?,
            token_hash: r.try_get("token_hash").map_err(db(op))?,
            session_id: r.try_get("session_id").map_err(db(op))?,
            target_id: r.try_get("target_id").map_err(db(op))?,
            tool_id: r.try_get("tool_id").map_err(db(op))?,
            arguments: json("arguments")?,
            effect: json("effect")?,
            status: r.try_get("status").map_err(db(op))?,
            requested_at_ms: r.try_get("requested_at").map_err(db(op))?,
            expires_at_ms: r.try_get("expires_at").map_err(db(op))?,
            decided_at_ms: r.try_get("decided_at").map_err(db(op))?,
            reason: r.try_get("reason").map_err(db(op))?,
            preview_event_id: r.try_get("preview_event_id").map_err(db(op))?,
            applied_event_id: r.try_get("applied_event_id").map_err(db(op))?,
        })
    }};
}

/// Where an idempotency record lives: the key as its owner (`lease:<lineage>`) used it for a
/// tool on a target. Another owner's identical key is another record.
#[derive(Debug, Clone, Copy)]
pub struct IdempotencyKey<'a> {
    pub owner: &'a str,
    pub target_id: &'a str,
    pub tool_id: &'a str,
    pub key: &'a str,
}

/// The first result of a write executed under an idempotency key.
#[derive(Debug, Clone)]
pub struct IdempotencyRow {
    pub args_hash: String,
    pub result: String,
    pub event_id: String,
}

/// A value root kept from a tool's result (a contract's `retain`), e.g. a published
/// memory-profile summary.
#[derive(Debug, Clone, PartialEq)]
pub struct RetainedRow {
    pub target_id: String,
    pub collection: String,
    pub item_key: String,
    pub body: serde_json::Value,
    pub retained_at_ms: i64,
    /// The audit event of the call that produced it.
    pub event_id: String,
}

/// A published descriptor set as stored (the newest revision is the one served).
#[derive(Debug, Clone)]
pub struct DescriptorSetRow {
    pub revision: i64,
    pub set_hash: String,
    pub published_at_ms: i64,
    /// The descriptors as a JSON array.
    pub body: String,
}

/// An enrolled managed target as stored.
#[derive(Debug, Clone)]
pub struct TargetRow {
    pub target_id: String,
    pub environment: String,
    pub subnet_id: String,
    pub zone: String,
    pub token_hash: String,
    /// Hex of the per-hub call-signing key (derived from the hub token at enrolment).
    pub signing_key: String,
    pub enrolled_at_ms: i64,
    pub last_seen_at_ms: Option<i64>,
    /// The last descriptor the hub registered (JSON), if it ever connected.
    pub descriptor: Option<String>,
    /// The last skill states the hub reported (JSON).
    pub skills: Option<String>,
    /// Root's desired state of the target's skill (JSON of `hubs::skill::Desired`; `None`:
    /// installed and enabled).
    pub skill_desired: Option<String>,
}

/// A target's previous hub token and signing key, valid until `expires_at_ms` (key rotation).
#[derive(Debug, Clone)]
pub struct PreviousKey {
    pub token_hash: String,
    /// Stored form (encrypted, see `secrets`).
    pub signing_key: String,
    pub expires_at_ms: i64,
}

/// One audit row as stored: the event plus its place in the hash chain.
#[derive(Debug, Clone)]
pub struct AuditRow {
    pub seq: i64,
    pub event: OperationalEvent,
    /// The event exactly as stored (what the hash covers).
    pub event_json: String,
    pub prev_hash: String,
    pub hash: String,
    /// The replica that wrote the row (PostgreSQL with replicas; not covered by the hash).
    pub replica_id: Option<String>,
}

/// One event to append to the trail: the columns the trail is indexed by and the event's
/// canonical JSON (what the chain hash covers), taken from the event once.
#[derive(Debug, Clone)]
pub struct AuditEntry {
    pub event_id: String,
    pub trace_id: String,
    pub target_id: Option<String>,
    pub tool_id: String,
    pub status: &'static str,
    pub actor: String,
    pub started_at_ms: i64,
    pub event_json: String,
}

/// Where an [`AuditEntry`] lands in the hash chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainLink {
    pub seq: i64,
    pub prev_hash: String,
    pub hash: String,
}

/// Filters for the audit query; all optional, newest first, `before_seq` pages backwards.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub target_id: Option<String>,
    pub tool_id: Option<String>,
    pub status: Option<String>,
    pub trace_id: Option<String>,
    /// The stored actor id: `operator` or `lease:<session id>`.
    pub actor: Option<String>,
    pub event_id: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub before_seq: Option<i64>,
    pub after_seq: Option<i64>,
    pub limit: i64,
    /// Oldest first instead of newest first (exports).
    pub ascending: bool,
}

/// A stored lease and the hash of its bearer.
#[derive(Debug, Clone)]
pub struct LeaseRow {
    pub lease: SessionLease,
    pub token_hash: String,
    /// The lease this one descends from by rotation (its own session id when it was not
    /// rotated from another): what owns its idempotency keys.
    pub lineage: String,
}

const LEASE_COLUMNS: &str = "session_id, token_hash, audience, target_id, subnet_id, zone, capability_profile, effective_tools, created_at, deadline_at, last_used_at, use_count, status, lineage, parent_id";

/// Reads a [`LeaseRow`] from a row of either backend (expanded inside `on_pool!`).
macro_rules! lease_from_row {
    ($r:expr, $op:expr) => {{
        let r = $r;
        let op: &'static str = $op;
        (|| -> Result<LeaseRow> {
            let get_s = |c: &str| r.try_get::<String, _>(c).map_err(db(op));
            let get_i = |c: &str| r.try_get::<i64, _>(c).map_err(db(op));
            let status = match get_s("status")?.as_str() {
                "active" => LeaseStatus::Active,
                "expired" => LeaseStatus::Expired,
                "revoked" => LeaseStatus::Revoked,
                other => {
                    return Err(Error::Corrupt {
                        op,
                        detail: format!("status `{other}`"),
                    });
                }
            };
            let tools: Vec<String> =
                serde_json::from_str(&get_s("effective_tools")?).map_err(|e| Error::Corrupt {
                    op,
                    detail: e.to_string(),
                })?;
            let session_id = get_s("session_id")?;
            Ok(LeaseRow {
                token_hash: get_s("token_hash")?,
                lineage: r
                    .try_get::<Option<String>, _>("lineage")
                    .map_err(db(op))?
                    .unwrap_or_else(|| session_id.clone()),
                lease: SessionLease {
                    session_id,
                    audience: get_s("audience")?,
                    target_id: get_s("target_id")?,
                    subnet_id: get_s("subnet_id")?,
                    zone: get_s("zone")?,
                    capability_profile: get_s("capability_profile")?,
                    effective_tools: tools,
                    created_at: from_unix_ms(get_i("created_at")?),
                    deadline_at: from_unix_ms(get_i("deadline_at")?),
                    last_used_at: r
                        .try_get::<Option<i64>, _>("last_used_at")
                        .map_err(db(op))?
                        .map(from_unix_ms),
                    use_count: get_i("use_count")?.max(0) as u64,
                    status,
                    parent_session_id: r
                        .try_get::<Option<String>, _>("parent_id")
                        .map_err(db(op))?,
                },
            })
        })()
    }};
}

/// Whether a SQLite connection goes back to its pool. SQLite rolls a transaction back by
/// itself on some errors (a full disk, I/O errors); sqlx then still counts it open, its
/// ROLLBACK fails, and every later BEGIN on that connection would fail too. Such a connection
/// is closed, never reused. sqlx counts a transaction open until a queued rollback has run,
/// so a connection it counts closed is reused at once; one it counts open is pinged first
/// (which runs the queued rollback) and asked again.
async fn reusable(conn: &mut sqlx::SqliteConnection) -> std::result::Result<bool, sqlx::Error> {
    if !sqlx::Connection::is_in_transaction(&*conn) {
        return Ok(true);
    }
    sqlx::Connection::ping(&mut *conn).await?;
    Ok(!sqlx::Connection::is_in_transaction(&*conn))
}

/// Where an embedded SQLite store lives and how durably it commits.
#[derive(Debug, Clone)]
pub struct SqliteFile {
    pub path: std::path::PathBuf,
    pub synchronous: crate::config::SqliteSync,
}

#[derive(Clone)]
pub struct Store {
    pool: Pool,
    /// SQLite only: the database file and its durability, for the audit writer's commit
    /// thread, which appends on a connection of its own (see
    /// `audit::committer`).
    sqlite_file: Option<SqliteFile>,
    /// PostgreSQL only: channel names and lock keys of this database and schema.
    shared: Option<std::sync::Arc<SharedNames>>,
}

impl Store {
    /// Opens (creating if needed) the database at `url` and applies migrations, with the
    /// default storage settings.
    pub async fn open(url: &str) -> Result<Store> {
        Store::open_with(url, &crate::config::StorageConfig::default()).await
    }

    /// [`Store::open`] with `[storage]` settings.
    pub async fn open_with(url: &str, storage: &crate::config::StorageConfig) -> Result<Store> {
        let mut sqlite_file = None;
        let pool = if let Some(path) = url.strip_prefix("sqlite:") {
            if path == ":memory:" || path.contains("mode=memory") {
                return Err(Error::InMemory(url.to_string()));
            }
            let opts = SqliteConnectOptions::from_str(&format!("sqlite:{path}"))
                .map_err(db("open sqlite"))?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(match storage.sqlite_synchronous {
                    crate::config::SqliteSync::Full => SqliteSynchronous::Full,
                    crate::config::SqliteSync::Normal => SqliteSynchronous::Normal,
                })
                .busy_timeout(Duration::from_secs(5))
                // Statement journals (a multi-row insert keeps one in case a row fails) in
                // memory instead of a temporary file per statement.
                .pragma("temp_store", "memory");
            sqlite_file = Some(SqliteFile {
                path: opts.get_filename().to_path_buf(),
                synchronous: storage.sqlite_synchronous,
            });
            // No `ping` before each acquire (sqlx's default, a round trip to the connection's
            // worker thread): a SQLite connection is a file handle, not a peer that can hang
            // up, and one left unusable by an error is closed on release (`reusable`).
            Pool::Sqlite(
                SqlitePoolOptions::new()
                    .max_connections(4)
                    .test_before_acquire(false)
                    .after_release(|conn, _| Box::pin(reusable(conn)))
                    .connect_with(opts)
                    .await
                    .map_err(db("open sqlite"))?,
            )
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Pool::Postgres(
                PgPoolOptions::new()
                    .max_connections(8)
                    .acquire_timeout(Duration::from_secs(5))
                    .connect(url)
                    .await
                    .map_err(db("open postgres"))?,
            )
        } else {
            return Err(Error::UnsupportedUrl(url.to_string()));
        };
        let shared = match &pool {
            Pool::Sqlite(_) => None,
            Pool::Postgres(pg) => {
                let row = sqlx::query("SELECT current_database()::TEXT, current_schema()::TEXT")
                    .fetch_one(pg)
                    .await
                    .map_err(db("open postgres"))?;
                let database: String = row.try_get(0).map_err(db("open postgres"))?;
                let schema: Option<String> = row.try_get(1).map_err(db("open postgres"))?;
                Some(std::sync::Arc::new(SharedNames::derive(
                    &database,
                    schema.as_deref().unwrap_or("public"),
                )))
            }
        };
        let store = Store {
            pool,
            sqlite_file,
            shared,
        };
        store.migrate().await?;
        Ok(store)
    }

    /// The channel names and lock keys replicas share (PostgreSQL); `None` on SQLite, where
    /// replica features are off.
    pub fn shared(&self) -> Option<&SharedNames> {
        self.shared.as_deref()
    }

    /// The SQLite database file and its durability; `None` on PostgreSQL.
    pub fn sqlite_file(&self) -> Option<&SqliteFile> {
        self.sqlite_file.as_ref()
    }

    /// Which backend this store runs on: `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self.pool {
            Pool::Sqlite(_) => "sqlite",
            Pool::Postgres(_) => "postgres",
        }
    }

    async fn migrate(&self) -> Result<()> {
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

    /// Cheap liveness check for `/readyz`.
    pub async fn ping(&self) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query("SELECT 1").execute(pool).await.map_err(db("ping"))?;
            Ok(())
        })
    }

    // ---- leases -------------------------------------------------------------------------

    pub async fn insert_lease(
        &self,
        lease: &SessionLease,
        token_hash: &str,
        lineage: &str,
    ) -> Result<()> {
        let tools = serde_json::to_string(&lease.effective_tools).unwrap_or_else(|_| "[]".into());
        on_pool!(self, pool => {
            sqlx::query(
                "INSERT INTO leases (session_id, token_hash, audience, target_id, subnet_id, zone,
                    capability_profile, effective_tools, created_at, deadline_at, last_used_at,
                    use_count, status, lineage, parent_id)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
            )
            .bind(&lease.session_id)
            .bind(token_hash)
            .bind(&lease.audience)
            .bind(&lease.target_id)
            .bind(&lease.subnet_id)
            .bind(&lease.zone)
            .bind(&lease.capability_profile)
            .bind(&tools)
            .bind(unix_ms(lease.created_at))
            .bind(unix_ms(lease.deadline_at))
            .bind(lease.last_used_at.map(unix_ms))
            .bind(lease.use_count as i64)
            .bind(lease.status.as_str())
            .bind(lineage)
            .bind(&lease.parent_session_id)
            .execute(pool)
            .await
            .map_err(db("insert lease"))?;
            Ok(())
        })
    }

    pub async fn load_leases(&self) -> Result<Vec<LeaseRow>> {
        on_pool!(self, pool => {
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {LEASE_COLUMNS} FROM leases ORDER BY created_at"
            )))
            .fetch_all(pool)
            .await
            .map_err(db("load leases"))?;
            rows.iter().map(|r| lease_from_row!(r, "load leases")).collect()
        })
    }

    /// One lease by the hash of its bearer (a replica authenticating a lease another replica
    /// issued).
    pub async fn lease_by_hash(&self, token_hash: &str) -> Result<Option<LeaseRow>> {
        self.lease_where("token_hash", token_hash).await
    }

    /// One lease by its session id.
    pub async fn lease_by_id(&self, session_id: &str) -> Result<Option<LeaseRow>> {
        self.lease_where("session_id", session_id).await
    }

    async fn lease_where(&self, col: &'static str, value: &str) -> Result<Option<LeaseRow>> {
        on_pool!(self, pool => {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {LEASE_COLUMNS} FROM leases WHERE {col} = $1"
            )))
            .bind(value)
            .fetch_optional(pool)
            .await
            .map_err(db("load lease"))?;
            row.map(|r| lease_from_row!(&r, "load lease")).transpose()
        })
    }

    /// Ids of revoked leases whose deadline has not passed (the replicas' fallback re-reads
    /// them, so a missed notification never keeps a revoked bearer working).
    pub async fn revoked_unexpired_leases(&self, now_ms: i64) -> Result<Vec<String>> {
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT session_id FROM leases WHERE status = 'revoked' AND deadline_at > $1",
            )
            .bind(now_ms)
            .fetch_all(pool)
            .await
            .map_err(db("revoked leases"))?;
            rows.iter()
                .map(|r| r.try_get::<String, _>(0).map_err(db("revoked leases")))
                .collect()
        })
    }

    /// Revokes a lease that is still active; `Ok(false)` when it was not (another replica
    /// revoked or rotated it first).
    pub async fn revoke_lease_if_active(&self, session_id: &str) -> Result<bool> {
        on_pool!(self, pool => {
            let res = sqlx::query(
                "UPDATE leases SET status = 'revoked' WHERE session_id = $1 AND status = 'active'",
            )
            .bind(session_id)
            .execute(pool)
            .await
            .map_err(db("revoke lease"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    /// Revokes the active run credentials issued under `parent`; their session ids.
    pub async fn revoke_children(&self, parent: &str) -> Result<Vec<String>> {
        let op = "revoke run credentials";
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "UPDATE leases SET status = 'revoked' WHERE parent_id = $1 AND status = 'active'
                 RETURNING session_id",
            )
            .bind(parent)
            .fetch_all(pool)
            .await
            .map_err(db(op))?;
            rows.iter()
                .map(|r| r.try_get::<String, _>(0).map_err(db(op)))
                .collect()
        })
    }

    pub async fn set_lease_status(&self, session_id: &str, status: LeaseStatus) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query("UPDATE leases SET status = $1 WHERE session_id = $2")
                .bind(status.as_str())
                .bind(session_id)
                .execute(pool)
                .await
                .map_err(db("update lease status"))?;
            Ok(())
        })
    }

    /// Adds usage to many leases in one transaction: `(session id, last used ms, uses since
    /// the last flush)`. Increments, so replicas that serve one lease add up rather than
    /// overwrite each other.
    pub async fn record_lease_usage(&self, usage: &[(String, i64, u64)]) -> Result<()> {
        if usage.is_empty() {
            return Ok(());
        }
        on_pool!(self, pool => {
            let mut tx = pool.begin().await.map_err(db("record lease usage"))?;
            for (session_id, last_used_ms, uses) in usage {
                sqlx::query(
                    "UPDATE leases SET
                        last_used_at = CASE WHEN last_used_at IS NULL OR last_used_at < $1
                                            THEN $1 ELSE last_used_at END,
                        use_count = use_count + $2
                     WHERE session_id = $3",
                )
                .bind(*last_used_ms)
                .bind(*uses as i64)
                .bind(session_id)
                .execute(&mut *tx)
                .await
                .map_err(db("record lease usage"))?;
            }
            tx.commit().await.map_err(db("record lease usage"))?;
            Ok(())
        })
    }

    // ---- operators ----------------------------------------------------------------------

    /// Adds an operator; `Ok(false)` when the name is taken (active or revoked: names are
    /// never reused, so the trail's actors stay unambiguous).
    pub async fn insert_operator(&self, o: &OperatorRow) -> Result<bool> {
        on_pool!(self, pool => {
            let res = sqlx::query(
                "INSERT INTO operators (name, token_hash, created_at, created_by)
                 VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING",
            )
            .bind(&o.name)
            .bind(&o.token_hash)
            .bind(o.created_at_ms)
            .bind(&o.created_by)
            .execute(pool)
            .await
            .map_err(db("insert operator"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    /// Every operator, oldest first.
    pub async fn load_operators(&self) -> Result<Vec<OperatorRow>> {
        let op = "load operators";
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT name, token_hash, created_at, created_by, revoked_at, revoked_by
                 FROM operators ORDER BY created_at, name",
            )
            .fetch_all(pool)
            .await
            .map_err(db(op))?;
            rows.iter().map(|r| -> Result<OperatorRow> {
                Ok(OperatorRow {
                    name: r.try_get("name").map_err(db(op))?,
                    token_hash: r.try_get("token_hash").map_err(db(op))?,
                    created_at_ms: r.try_get("created_at").map_err(db(op))?,
                    created_by: r.try_get("created_by").map_err(db(op))?,
                    revoked_at_ms: r.try_get("revoked_at").map_err(db(op))?,
                    revoked_by: r.try_get("revoked_by").map_err(db(op))?,
                })
            }).collect()
        })
    }

    /// Revokes an active operator; `Ok(false)` when there is none of that name.
    pub async fn revoke_operator(&self, name: &str, at_ms: i64, by: &str) -> Result<bool> {
        on_pool!(self, pool => {
            let res = sqlx::query(
                "UPDATE operators SET revoked_at = $1, revoked_by = $2
                 WHERE name = $3 AND revoked_at IS NULL",
            )
            .bind(at_ms)
            .bind(by)
            .bind(name)
            .execute(pool)
            .await
            .map_err(db("revoke operator"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    // ---- targets ------------------------------------------------------------------------

    /// Enrols a target; `Ok(false)` when the target id is already enrolled.
    pub async fn insert_target(&self, t: &TargetRow) -> Result<bool> {
        on_pool!(self, pool => {
            let res = sqlx::query(
                "INSERT INTO targets (target_id, environment, subnet_id, zone, token_hash, signing_key,
                    enrolled_at, last_seen_at, descriptor, skills, skill_desired)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                 ON CONFLICT (target_id) DO NOTHING",
            )
            .bind(&t.target_id)
            .bind(&t.environment)
            .bind(&t.subnet_id)
            .bind(&t.zone)
            .bind(&t.token_hash)
            .bind(&t.signing_key)
            .bind(t.enrolled_at_ms)
            .bind(t.last_seen_at_ms)
            .bind(&t.descriptor)
            .bind(&t.skills)
            .bind(&t.skill_desired)
            .execute(pool)
            .await
            .map_err(db("insert target"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    pub async fn load_targets(&self) -> Result<Vec<TargetRow>> {
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT target_id, environment, subnet_id, zone, token_hash, signing_key, enrolled_at,
                    last_seen_at, descriptor, skills, skill_desired FROM targets ORDER BY target_id",
            )
            .fetch_all(pool)
            .await
            .map_err(db("load targets"))?;
            rows.iter().map(|r| -> Result<TargetRow> {
                let op = "load targets";
                Ok(TargetRow {
                    target_id: r.try_get("target_id").map_err(db(op))?,
                    environment: r.try_get("environment").map_err(db(op))?,
                    subnet_id: r.try_get("subnet_id").map_err(db(op))?,
                    zone: r.try_get("zone").map_err(db(op))?,
                    token_hash: r.try_get("token_hash").map_err(db(op))?,
                    signing_key: r.try_get("signing_key").map_err(db(op))?,
                    enrolled_at_ms: r.try_get("enrolled_at").map_err(db(op))?,
                    last_seen_at_ms: r.try_get("last_seen_at").map_err(db(op))?,
                    descriptor: r.try_get("descriptor").map_err(db(op))?,
                    skills: r.try_get("skills").map_err(db(op))?,
                    skill_desired: r.try_get("skill_desired").map_err(db(op))?,
                })
            }).collect()
        })
    }

    /// Stores root's desired state of a target's skill; `Ok(false)` when the target is not
    /// enrolled.
    pub async fn set_skill_desired(&self, target_id: &str, desired: &str) -> Result<bool> {
        on_pool!(self, pool => {
            let res = sqlx::query("UPDATE targets SET skill_desired = $1 WHERE target_id = $2")
                .bind(desired)
                .bind(target_id)
                .execute(pool)
                .await
                .map_err(db("set skill desired state"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    /// Replaces a target's stored signing key (encryption of rows written in clear).
    pub async fn set_target_signing_key(&self, target_id: &str, signing_key: &str) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query("UPDATE targets SET signing_key = $1 WHERE target_id = $2")
                .bind(signing_key)
                .bind(target_id)
                .execute(pool)
                .await
                .map_err(db("update target signing key"))?;
            Ok(())
        })
    }

    /// Key rotation: the new token hash and signing key become current, the current ones
    /// previous (valid until `previous.expires_at_ms`), only if the current token hash is still
    /// `expected_hash` (two rotations at once: one wins). `Ok(false)` when nothing changed.
    pub async fn rotate_target_key(
        &self,
        target_id: &str,
        expected_hash: &str,
        token_hash: &str,
        signing_key: &str,
        previous: &PreviousKey,
    ) -> Result<bool> {
        on_pool!(self, pool => {
            let res = sqlx::query(
                "UPDATE targets SET token_hash = $1, signing_key = $2, prev_token_hash = $3,
                    prev_signing_key = $4, prev_expires_at = $5
                 WHERE target_id = $6 AND token_hash = $7",
            )
            .bind(token_hash)
            .bind(signing_key)
            .bind(&previous.token_hash)
            .bind(&previous.signing_key)
            .bind(previous.expires_at_ms)
            .bind(target_id)
            .bind(expected_hash)
            .execute(pool)
            .await
            .map_err(db("rotate target key"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    /// Replaces a target's stored previous signing key (encryption of rows written in clear).
    pub async fn set_previous_signing_key(&self, target_id: &str, signing_key: &str) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query("UPDATE targets SET prev_signing_key = $1 WHERE target_id = $2")
                .bind(signing_key)
                .bind(target_id)
                .execute(pool)
                .await
                .map_err(db("update previous signing key"))?;
            Ok(())
        })
    }

    /// Previous keys of rotated targets, by target id.
    pub async fn load_previous_keys(&self) -> Result<Vec<(String, PreviousKey)>> {
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT target_id, prev_token_hash, prev_signing_key, prev_expires_at FROM targets
                 WHERE prev_token_hash IS NOT NULL ORDER BY target_id",
            )
            .fetch_all(pool)
            .await
            .map_err(db("load previous keys"))?;
            rows.iter().map(|r| -> Result<(String, PreviousKey)> {
                let op = "load previous keys";
                Ok((
                    r.try_get("target_id").map_err(db(op))?,
                    PreviousKey {
                        token_hash: r.try_get("prev_token_hash").map_err(db(op))?,
                        signing_key: r
                            .try_get::<Option<String>, _>("prev_signing_key")
                            .map_err(db(op))?
                            .unwrap_or_default(),
                        expires_at_ms: r
                            .try_get::<Option<i64>, _>("prev_expires_at")
                            .map_err(db(op))?
                            .unwrap_or(0),
                    },
                ))
            }).collect()
        })
    }

    /// Records what a connected hub registered and when it was last heard from.
    pub async fn update_target_seen(
        &self,
        target_id: &str,
        last_seen_ms: i64,
        descriptor: Option<&str>,
        skills: Option<&str>,
    ) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(
                "UPDATE targets SET last_seen_at = $1, descriptor = COALESCE($2, descriptor),
                    skills = COALESCE($3, skills) WHERE target_id = $4",
            )
            .bind(last_seen_ms)
            .bind(descriptor)
            .bind(skills)
            .bind(target_id)
            .execute(pool)
            .await
            .map_err(db("update target"))?;
            Ok(())
        })
    }

    /// Records when each of several connected hubs was last heard from, in one transaction
    /// (one commit for the whole fleet); a time older than the stored one is not written.
    pub async fn update_targets_seen(&self, seen: &[(String, i64)]) -> Result<()> {
        if seen.is_empty() {
            return Ok(());
        }
        let op = "update targets seen";
        on_pool!(self, pool => {
            let mut tx = pool.begin().await.map_err(db(op))?;
            for (target_id, ms) in seen {
                sqlx::query(
                    "UPDATE targets SET last_seen_at = $1
                     WHERE target_id = $2 AND (last_seen_at IS NULL OR last_seen_at < $1)",
                )
                .bind(ms)
                .bind(target_id)
                .execute(&mut *tx)
                .await
                .map_err(db(op))?;
            }
            tx.commit().await.map_err(db(op))?;
            Ok(())
        })
    }

    // ---- safe writes --------------------------------------------------------------------

    pub async fn insert_confirmation(&self, c: &ConfirmationRow) -> Result<()> {
        let op = "insert confirmation";
        on_pool!(self, pool => {
            // One transaction (one commit) for the token and the sweep.
            let mut tx = pool.begin().await.map_err(db(op))?;
            sqlx::query(
                "INSERT INTO confirmations (token_hash, session_id, tool_id, target_id, args_hash, expires_at, arguments, effect)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(&c.token_hash)
            .bind(&c.session_id)
            .bind(&c.tool_id)
            .bind(&c.target_id)
            .bind(&c.args_hash)
            .bind(c.expires_at_ms)
            .bind(&c.arguments)
            .bind(&c.effect)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
            // Tokens expired a day ago are useless; drop them on the way (an index range).
            sqlx::query("DELETE FROM confirmations WHERE expires_at < $1")
                .bind(c.expires_at_ms - 24 * 3600 * 1000)
                .execute(&mut *tx)
                .await
                .map_err(db(op))?;
            tx.commit().await.map_err(db(op))?;
            Ok(())
        })
    }

    /// Removes and returns a confirmation: a token can be consumed once, whatever follows.
    pub async fn consume_confirmation(&self, token_hash: &str) -> Result<Option<ConfirmationRow>> {
        on_pool!(self, pool => {
            let row = sqlx::query(
                "DELETE FROM confirmations WHERE token_hash = $1
                 RETURNING token_hash, session_id, tool_id, target_id, args_hash, expires_at, arguments, effect",
            )
            .bind(token_hash)
            .fetch_optional(pool)
            .await
            .map_err(db("consume confirmation"))?;
            let op = "consume confirmation";
            row.map(|r| -> Result<ConfirmationRow> {
                Ok(ConfirmationRow {
                    token_hash: r.try_get("token_hash").map_err(db(op))?,
                    session_id: r.try_get("session_id").map_err(db(op))?,
                    tool_id: r.try_get("tool_id").map_err(db(op))?,
                    target_id: r.try_get("target_id").map_err(db(op))?,
                    args_hash: r.try_get("args_hash").map_err(db(op))?,
                    expires_at_ms: r.try_get("expires_at").map_err(db(op))?,
                    arguments: r.try_get("arguments").map_err(db(op))?,
                    effect: r.try_get("effect").map_err(db(op))?,
                })
            })
            .transpose()
        })
    }

    pub async fn get_idempotency(&self, at: &IdempotencyKey<'_>) -> Result<Option<IdempotencyRow>> {
        on_pool!(self, pool => {
            let row = sqlx::query(
                "SELECT args_hash, result, event_id FROM idempotency_keys
                 WHERE owner = $1 AND target_id = $2 AND tool_id = $3 AND idem_key = $4",
            )
            .bind(at.owner)
            .bind(at.target_id)
            .bind(at.tool_id)
            .bind(at.key)
            .fetch_optional(pool)
            .await
            .map_err(db("get idempotency"))?;
            let op = "get idempotency";
            row.map(|r| -> Result<IdempotencyRow> {
                Ok(IdempotencyRow {
                    args_hash: r.try_get("args_hash").map_err(db(op))?,
                    result: r.try_get("result").map_err(db(op))?,
                    event_id: r.try_get("event_id").map_err(db(op))?,
                })
            })
            .transpose()
        })
    }

    /// Records the first result under a key; a second record for the same key is ignored.
    pub async fn put_idempotency(
        &self,
        at: &IdempotencyKey<'_>,
        row: &IdempotencyRow,
        created_at_ms: i64,
    ) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(
                "INSERT INTO idempotency_keys (owner, target_id, tool_id, idem_key, args_hash, result, event_id, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING",
            )
            .bind(at.owner)
            .bind(at.target_id)
            .bind(at.tool_id)
            .bind(at.key)
            .bind(&row.args_hash)
            .bind(&row.result)
            .bind(&row.event_id)
            .bind(created_at_ms)
            .execute(pool)
            .await
            .map_err(db("put idempotency"))?;
            Ok(())
        })
    }

    // ---- descriptor sets ------------------------------------------------------------------

    /// Stores a published descriptor set as the next revision; returns the revision. Older
    /// revisions beyond the newest ten are dropped.
    pub async fn put_descriptor_set(
        &self,
        set_hash: &str,
        published_at_ms: i64,
        body: &str,
    ) -> Result<i64> {
        let op = "put descriptor set";
        on_pool!(self, pool => {
            let mut tx = pool.begin().await.map_err(db(op))?;
            let revision: i64 = sqlx::query("SELECT COALESCE(MAX(revision), 0) + 1 FROM descriptor_sets")
                .fetch_one(&mut *tx)
                .await
                .map_err(db(op))?
                .try_get(0)
                .map_err(db(op))?;
            sqlx::query(
                "INSERT INTO descriptor_sets (revision, set_hash, published_at, descriptors) VALUES ($1, $2, $3, $4)",
            )
            .bind(revision)
            .bind(set_hash)
            .bind(published_at_ms)
            .bind(body)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
            sqlx::query("DELETE FROM descriptor_sets WHERE revision <= $1")
                .bind(revision - 10)
                .execute(&mut *tx)
                .await
                .map_err(db(op))?;
            tx.commit().await.map_err(db(op))?;
            Ok(revision)
        })
    }

    /// Withdraws a stored revision (a publish the cache could not take).
    pub async fn delete_descriptor_set(&self, revision: i64) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query("DELETE FROM descriptor_sets WHERE revision = $1")
                .bind(revision)
                .execute(pool)
                .await
                .map_err(db("delete descriptor set"))?;
            Ok(())
        })
    }

    /// The newest published descriptor set, if any.
    pub async fn latest_descriptor_set(&self) -> Result<Option<DescriptorSetRow>> {
        let op = "load descriptor set";
        on_pool!(self, pool => {
            let row = sqlx::query(
                "SELECT revision, set_hash, published_at, descriptors FROM descriptor_sets ORDER BY revision DESC LIMIT 1",
            )
            .fetch_optional(pool)
            .await
            .map_err(db(op))?;
            row.map(|r| -> Result<DescriptorSetRow> {
                Ok(DescriptorSetRow {
                    revision: r.try_get(0).map_err(db(op))?,
                    set_hash: r.try_get(1).map_err(db(op))?,
                    published_at_ms: r.try_get(2).map_err(db(op))?,
                    body: r.try_get(3).map_err(db(op))?,
                })
            })
            .transpose()
        })
    }

    // ---- approvals --------------------------------------------------------------------------

    pub async fn insert_approval(&self, a: &ApprovalRow) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO approvals ({APPROVAL_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
            )))
            .bind(&a.approval_id)
            .bind(&a.token_hash)
            .bind(&a.session_id)
            .bind(&a.target_id)
            .bind(&a.tool_id)
            .bind(a.arguments.to_string())
            .bind(a.effect.to_string())
            .bind(&a.status)
            .bind(a.requested_at_ms)
            .bind(a.expires_at_ms)
            .bind(a.decided_at_ms)
            .bind(&a.reason)
            .bind(&a.preview_event_id)
            .bind(&a.applied_event_id)
            .execute(pool)
            .await
            .map_err(db("insert approval"))?;
            Ok(())
        })
    }

    /// One approval by id, or by the hash of its confirmation token.
    pub async fn get_approval(
        &self,
        id: Option<&str>,
        token_hash: Option<&str>,
    ) -> Result<Option<ApprovalRow>> {
        let (col, value) = match (id, token_hash) {
            (Some(id), _) => ("approval_id", id),
            (None, Some(h)) => ("token_hash", h),
            (None, None) => return Ok(None),
        };
        on_pool!(self, pool => {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE {col} = $1"
            )))
            .bind(value)
            .fetch_optional(pool)
            .await
            .map_err(db("get approval"))?;
            row.map(|r| approval_from_row!(&r, "get approval")).transpose()
        })
    }

    /// Approvals newest first, optionally only those with a stored `status`.
    pub async fn list_approvals(
        &self,
        status: Option<&str>,
        limit: i64,
    ) -> Result<Vec<ApprovalRow>> {
        on_pool!(self, pool => {
            let rows = match status {
                Some(s) => sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE status = $1 ORDER BY requested_at DESC LIMIT $2"
                )))
                .bind(s)
                .bind(limit.clamp(1, 1_000))
                .fetch_all(pool)
                .await,
                None => sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals ORDER BY requested_at DESC LIMIT $1"
                )))
                .bind(limit.clamp(1, 1_000))
                .fetch_all(pool)
                .await,
            }
            .map_err(db("list approvals"))?;
            rows.iter().map(|r| approval_from_row!(r, "list approvals")).collect()
        })
    }

    /// Moves an approval from `from` to `to` (with the decision's time and reason, or the
    /// applying event); false when it was not in `from` or has expired (nothing changes).
    pub async fn transition_approval(
        &self,
        id: &str,
        from: &str,
        to: &str,
        now_ms: i64,
        reason: Option<&str>,
        applied_event_id: Option<&str>,
    ) -> Result<bool> {
        on_pool!(self, pool => {
            let done = sqlx::query(
                "UPDATE approvals SET status = $1,
                     decided_at = CASE WHEN $2 = 'applied' THEN decided_at ELSE $3 END,
                     reason = COALESCE($4, reason),
                     applied_event_id = COALESCE($5, applied_event_id)
                 WHERE approval_id = $6 AND status = $7 AND expires_at > $3",
            )
            .bind(to)
            .bind(to)
            .bind(now_ms)
            .bind(reason)
            .bind(applied_event_id)
            .bind(id)
            .bind(from)
            .execute(pool)
            .await
            .map_err(db("transition approval"))?;
            Ok(done.rows_affected() == 1)
        })
    }

    // ---- retained results -----------------------------------------------------------------

    /// Keeps (or replaces) one retained value.
    pub async fn put_retained(&self, r: &RetainedRow) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(
                "INSERT INTO retained (target_id, collection, item_key, body, retained_at, event_id)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (target_id, collection, item_key)
                 DO UPDATE SET body = excluded.body, retained_at = excluded.retained_at,
                               event_id = excluded.event_id",
            )
            .bind(&r.target_id)
            .bind(&r.collection)
            .bind(&r.item_key)
            .bind(r.body.to_string())
            .bind(r.retained_at_ms)
            .bind(&r.event_id)
            .execute(pool)
            .await
            .map_err(db("put retained"))?;
            Ok(())
        })
    }

    /// Retained values of one collection for the given targets, newest first.
    pub async fn list_retained(
        &self,
        collection: &str,
        target_ids: &[String],
        limit: i64,
    ) -> Result<Vec<RetainedRow>> {
        let op = "list retained";
        let mut out = Vec::new();
        for target_id in target_ids {
            let rows = on_pool!(self, pool => {
                sqlx::query(
                    "SELECT target_id, collection, item_key, body, retained_at, event_id
                     FROM retained WHERE collection = $1 AND target_id = $2
                     ORDER BY retained_at DESC LIMIT $3",
                )
                .bind(collection)
                .bind(target_id)
                .bind(limit.clamp(1, 10_000))
                .fetch_all(pool)
                .await
                .map_err(db(op))?
                .into_iter()
                .map(|r| -> Result<RetainedRow> {
                    let body: String = r.try_get(3).map_err(db(op))?;
                    Ok(RetainedRow {
                        target_id: r.try_get(0).map_err(db(op))?,
                        collection: r.try_get(1).map_err(db(op))?,
                        item_key: r.try_get(2).map_err(db(op))?,
                        body: serde_json::from_str(&body).map_err(|e| Error::Corrupt {
                            op,
                            detail: e.to_string(),
                        })?,
                        retained_at_ms: r.try_get(4).map_err(db(op))?,
                        event_id: r.try_get(5).map_err(db(op))?,
                    })
                })
                .collect::<Result<Vec<_>>>()?
            });
            out.extend(rows);
        }
        out.sort_by_key(|r| std::cmp::Reverse(r.retained_at_ms));
        out.truncate(limit.clamp(1, 10_000) as usize);
        Ok(out)
    }

    // ---- audit --------------------------------------------------------------------------

    /// The last row of the chain: `(seq, hash)`, or `None` for an empty trail.
    pub async fn audit_head(&self) -> Result<Option<(i64, String)>> {
        on_pool!(self, pool => {
            let row = sqlx::query("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1")
                .fetch_optional(pool)
                .await
                .map_err(db("audit head"))?;
            match row {
                None => Ok(None),
                Some(r) => Ok(Some((
                    r.try_get::<i64, _>(0).map_err(db("audit head"))?,
                    r.try_get::<String, _>(1).map_err(db("audit head"))?,
                ))),
            }
        })
    }

    /// Appends a batch to the hash chain in one transaction: `chain` gets the head the batch
    /// follows (`(seq, hash)`, `(0, "")` for an empty trail) and returns one link per entry,
    /// in order; they are written as multi-row inserts (one statement per
    /// [`AUDIT_ROWS_PER_INSERT`] rows). On PostgreSQL the head is read under a
    /// transaction-scoped advisory lock, so appends from every replica of the zone form one
    /// chain in commit order, and the commit announces the new head on the audit channel (the
    /// live streams of the other replicas wake on it). Returns the links as written.
    ///
    /// Root's audit writer appends this way on PostgreSQL; on SQLite it appends from its
    /// commit thread (`audit::committer`), and this serves everyone else.
    pub async fn append_audit_chained(
        &self,
        entries: &[AuditEntry],
        replica_id: Option<&str>,
        chain: impl FnOnce(i64, String) -> Vec<ChainLink>,
    ) -> Result<Vec<ChainLink>> {
        let shared = self.shared.clone();
        let op = "append audit";
        // SQLite: take the write lock up front (the head is read, then rows are written; a
        // deferred transaction could find its snapshot outdated by another write meanwhile).
        let begin = if shared.is_some() {
            "BEGIN"
        } else {
            "BEGIN IMMEDIATE"
        };
        let sqlite = matches!(self.pool, Pool::Sqlite(_));
        on_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await.map_err(db(op))?;
            if let Some(n) = &shared {
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(n.audit_lock)
                    .execute(&mut *tx)
                    .await
                    .map_err(db(op))?;
            }
            let head = sqlx::query("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1")
                .fetch_optional(&mut *tx)
                .await
                .map_err(db(op))?;
            let (seq, hash) = match head {
                None => (0, String::new()),
                Some(r) => (
                    r.try_get::<i64, _>(0).map_err(db(op))?,
                    r.try_get::<String, _>(1).map_err(db(op))?,
                ),
            };
            let links = chain(seq, hash);
            check_links(op, entries, &links)?;
            for (chunk, chunk_links) in entries
                .chunks(AUDIT_ROWS_PER_INSERT)
                .zip(links.chunks(AUDIT_ROWS_PER_INSERT))
            {
                // Only generated placeholders are spliced in; every value is bound.
                let mut sql = String::new();
                audit_insert_sql(&mut sql, chunk.len(), sqlite);
                bind_audit_rows(sqlx::query(sqlx::AssertSqlSafe(sql)), chunk, chunk_links, replica_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(db(op))?;
            }
            if let (Some(n), Some(last)) = (&shared, links.last()) {
                sqlx::query("SELECT pg_notify($1, $2)")
                    .bind(&n.audit_channel)
                    .bind(last.seq.to_string())
                    .execute(&mut *tx)
                    .await
                    .map_err(db(op))?;
            }
            tx.commit().await.map_err(db(op))?;
            Ok(links)
        })
    }

    /// Queries the trail. Rows whose stored JSON no longer parses are returned as errors, so a
    /// tampered row is reported rather than skipped.
    pub async fn query_audit(&self, f: &AuditFilter) -> Result<Vec<AuditRow>> {
        let mut sql = String::from(
            "SELECT seq, event, prev_hash, hash, replica_id FROM audit_events WHERE 1 = 1",
        );
        let mut args: Vec<Arg> = Vec::new();
        let mut push = |sql: &mut String, clause: &str, arg: Arg| {
            args.push(arg);
            sql.push_str(&clause.replace('?', &format!("${}", args.len())));
        };
        if let Some(v) = &f.target_id {
            push(&mut sql, " AND target_id = ?", Arg::S(v.clone()));
        }
        if let Some(v) = &f.tool_id {
            push(&mut sql, " AND tool_id = ?", Arg::S(v.clone()));
        }
        if let Some(v) = &f.status {
            push(&mut sql, " AND status = ?", Arg::S(v.clone()));
        }
        if let Some(v) = &f.trace_id {
            push(&mut sql, " AND trace_id = ?", Arg::S(v.clone()));
        }
        if let Some(v) = &f.actor {
            push(&mut sql, " AND actor = ?", Arg::S(v.clone()));
        }
        if let Some(v) = &f.event_id {
            push(&mut sql, " AND event_id = ?", Arg::S(v.clone()));
        }
        if let Some(v) = f.since_ms {
            push(&mut sql, " AND started_at >= ?", Arg::I(v));
        }
        if let Some(v) = f.until_ms {
            push(&mut sql, " AND started_at < ?", Arg::I(v));
        }
        if let Some(v) = f.before_seq {
            push(&mut sql, " AND seq < ?", Arg::I(v));
        }
        if let Some(v) = f.after_seq {
            push(&mut sql, " AND seq > ?", Arg::I(v));
        }
        sql.push_str(if f.ascending {
            " ORDER BY seq ASC"
        } else {
            " ORDER BY seq DESC"
        });
        push(&mut sql, " LIMIT ?", Arg::I(f.limit.clamp(1, 10_000)));
        on_pool!(self, pool => {
            // `sql` is assembled only from the constant clauses above; values are bound.
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.clone()));
            for a in &args {
                q = match a {
                    Arg::S(s) => q.bind(s.clone()),
                    Arg::I(i) => q.bind(*i),
                };
            }
            let rows = q.fetch_all(pool).await.map_err(db("query audit"))?;
            rows.iter().map(|r| -> Result<AuditRow> {
                let seq: i64 = r.try_get(0).map_err(db("query audit"))?;
                let event_json: String = r.try_get(1).map_err(db("query audit"))?;
                let event = serde_json::from_str(&event_json).map_err(|e| Error::Corrupt {
                    op: "query audit",
                    detail: format!("event at seq {seq}: {e}"),
                })?;
                Ok(AuditRow {
                    seq,
                    event,
                    event_json,
                    prev_hash: r.try_get(2).map_err(db("query audit"))?,
                    hash: r.try_get(3).map_err(db("query audit"))?,
                    replica_id: r.try_get(4).map_err(db("query audit"))?,
                })
            }).collect()
        })
    }

    /// Raw chain rows `(seq, event_json, prev_hash, hash)` after `after_seq`, oldest first, for
    /// verification (no parsing, so a tampered row cannot hide behind a parse error).
    pub async fn audit_chain_page(
        &self,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<(i64, String, String, String)>> {
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT seq, event, prev_hash, hash FROM audit_events WHERE seq > $1 ORDER BY seq ASC LIMIT $2",
            )
            .bind(after_seq)
            .bind(limit)
            .fetch_all(pool)
            .await
            .map_err(db("audit chain"))?;
            rows.iter().map(|r| Ok((
                r.try_get::<i64, _>(0).map_err(db("audit chain"))?,
                r.try_get::<String, _>(1).map_err(db("audit chain"))?,
                r.try_get::<String, _>(2).map_err(db("audit chain"))?,
                r.try_get::<String, _>(3).map_err(db("audit chain"))?,
            ))).collect()
        })
    }
}

/// Rows per multi-row audit insert (12 parameters each; well under SQLite's and PostgreSQL's
/// parameter limits).
pub const AUDIT_ROWS_PER_INSERT: usize = 64;

/// One audit row, in [`audit_insert_sql`]'s column order with SQLite's placeholders (the
/// audit writer's commit thread prepares it once and runs it per row).
pub const AUDIT_INSERT_ONE_SQL: &str = "INSERT INTO audit_events (seq, event_id, trace_id, target_id, tool_id, status, actor, started_at, event, prev_hash, hash, replica_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

/// Appends the multi-row insert of `n` audit rows to `sql`. `anonymous`: SQLite's `?`
/// placeholders instead of `$N`; sqlx binds a named parameter by asking SQLite for its name,
/// a linear search of the statement's names, so `$N` costs time quadratic in the row count
/// (PostgreSQL needs `$N`).
fn audit_insert_sql(sql: &mut String, n: usize, anonymous: bool) {
    use std::fmt::Write;
    sql.push_str(
        "INSERT INTO audit_events (seq, event_id, trace_id, target_id, tool_id, status, actor, started_at, event, prev_hash, hash, replica_id) VALUES ",
    );
    for r in 0..n {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for c in 0..12 {
            if c > 0 {
                sql.push_str(", ");
            }
            if anonymous {
                sql.push('?');
            } else {
                let _ = write!(sql, "${}", r * 12 + c + 1);
            }
        }
        sql.push(')');
    }
}

/// Binds the columns of `entries` at `links`, in [`audit_insert_sql`]'s order.
fn bind_audit_rows<'q, DB: sqlx::Database>(
    mut q: sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments>,
    entries: &'q [AuditEntry],
    links: &'q [ChainLink],
    replica_id: Option<&'q str>,
) -> sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments>
where
    i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<&'q str>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    for (e, link) in entries.iter().zip(links) {
        q = q
            .bind(link.seq)
            .bind(e.event_id.as_str())
            .bind(e.trace_id.as_str())
            .bind(e.target_id.as_deref())
            .bind(e.tool_id.as_str())
            .bind(e.status)
            .bind(e.actor.as_str())
            .bind(e.started_at_ms)
            .bind(e.event_json.as_str())
            .bind(link.prev_hash.as_str())
            .bind(link.hash.as_str())
            .bind(replica_id);
    }
    q
}

/// One chain link per entry, or the trail would be written wrong.
fn check_links(op: &'static str, entries: &[AuditEntry], links: &[ChainLink]) -> Result<()> {
    if links.len() != entries.len() {
        return Err(Error::Corrupt {
            op,
            detail: format!("{} chain links for {} entries", links.len(), entries.len()),
        });
    }
    Ok(())
}

enum Arg {
    S(String),
    I(i64),
}

/// Replicas of one zone on PostgreSQL: the registry, hub ownership and the change feed.
/// Heartbeats and their ages are taken from the database's clock. Each method refuses on
/// SQLite, where replica features are off.
impl Store {
    fn pg(&self, op: &'static str) -> Result<(&PgPool, &SharedNames)> {
        match (&self.pool, &self.shared) {
            (Pool::Postgres(pg), Some(n)) => Ok((pg, n)),
            _ => Err(Error::NotShared(op)),
        }
    }

    /// Registers (or re-registers after a restart) this replica; `Ok(false)` when a live
    /// replica with the same id but another instance holds the row (two processes configured
    /// with one `replica.id`).
    pub async fn register_replica(&self, r: &ReplicaRow, expiry_ms: i64) -> Result<bool> {
        let op = "register replica";
        let (pg, _) = self.pg(op)?;
        let res = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO replicas (replica_id, zone, advertise_url, instance_id, version,
                 started_at, heartbeat_at, applied_change)
             VALUES ($1, $2, $3, $4, $5, {PG_NOW_MS}, {PG_NOW_MS}, $6)
             ON CONFLICT (replica_id) DO UPDATE SET zone = excluded.zone,
                 advertise_url = excluded.advertise_url, instance_id = excluded.instance_id,
                 version = excluded.version, started_at = excluded.started_at,
                 heartbeat_at = excluded.heartbeat_at, applied_change = excluded.applied_change
             WHERE replicas.instance_id = excluded.instance_id
                OR replicas.heartbeat_at < {PG_NOW_MS} - $7"
        )))
        .bind(&r.replica_id)
        .bind(&r.zone)
        .bind(&r.advertise_url)
        .bind(&r.instance_id)
        .bind(&r.version)
        .bind(r.applied_change)
        .bind(expiry_ms)
        .execute(pg)
        .await
        .map_err(db(op))?;
        Ok(res.rows_affected() == 1)
    }

    /// One heartbeat: this replica's row and the hub ownerships of the connections it
    /// holds (`held`: target id, connection id). Rows of this replica for connections it no
    /// longer holds are dropped (a release that failed), and a held connection whose row is
    /// missing is claimed again unless another replica holds the target (a claim that failed,
    /// or a stale claim whose release removed it). `Ok(false)` when the row is no longer this
    /// instance's (another process took the id over); ownership is then left alone.
    pub async fn heartbeat_replica(
        &self,
        replica_id: &str,
        instance_id: &str,
        held: &[(String, String)],
    ) -> Result<bool> {
        let op = "replica heartbeat";
        let (pg, _) = self.pg(op)?;
        let (targets, connections): (Vec<String>, Vec<String>) = held.iter().cloned().unzip();
        let mut tx = pg.begin().await.map_err(db(op))?;
        let res = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE replicas SET heartbeat_at = {PG_NOW_MS} WHERE replica_id = $1 AND instance_id = $2"
        )))
        .bind(replica_id)
        .bind(instance_id)
        .execute(&mut *tx)
        .await
        .map_err(db(op))?;
        if res.rows_affected() != 1 {
            tx.commit().await.map_err(db(op))?;
            return Ok(false);
        }
        sqlx::query(
            "DELETE FROM hub_ownership WHERE replica_id = $1 AND NOT (connection_id = ANY($2))",
        )
        .bind(replica_id)
        .bind(&connections)
        .execute(&mut *tx)
        .await
        .map_err(db(op))?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE hub_ownership SET heartbeat_at = {PG_NOW_MS}
             WHERE replica_id = $1 AND connection_id = ANY($2)"
        )))
        .bind(replica_id)
        .bind(&connections)
        .execute(&mut *tx)
        .await
        .map_err(db(op))?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO hub_ownership (target_id, replica_id, connection_id, connected_at, heartbeat_at)
             SELECT h.target_id, $1, h.connection_id, {PG_NOW_MS}, {PG_NOW_MS}
             FROM UNNEST($2::TEXT[], $3::TEXT[]) AS h(target_id, connection_id)
             ON CONFLICT (target_id) DO NOTHING"
        )))
        .bind(replica_id)
        .bind(&targets)
        .bind(&connections)
        .execute(&mut *tx)
        .await
        .map_err(db(op))?;
        tx.commit().await.map_err(db(op))?;
        Ok(true)
    }

    /// Removes this replica from the registry with the hubs it held (clean shutdown).
    pub async fn unregister_replica(&self, replica_id: &str, instance_id: &str) -> Result<()> {
        let op = "unregister replica";
        let (pg, _) = self.pg(op)?;
        let mut tx = pg.begin().await.map_err(db(op))?;
        sqlx::query("DELETE FROM hub_ownership WHERE replica_id = $1")
            .bind(replica_id)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        sqlx::query("DELETE FROM replicas WHERE replica_id = $1 AND instance_id = $2")
            .bind(replica_id)
            .bind(instance_id)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        tx.commit().await.map_err(db(op))?;
        Ok(())
    }

    /// Every registered replica, with the age of its heartbeat; rows silent for longer than
    /// `forget_ms` are dropped on the way.
    pub async fn list_replicas(&self, forget_ms: i64) -> Result<Vec<ReplicaRow>> {
        let op = "list replicas";
        let (pg, _) = self.pg(op)?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM replicas WHERE heartbeat_at < {PG_NOW_MS} - $1"
        )))
        .bind(forget_ms)
        .execute(pg)
        .await
        .map_err(db(op))?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT replica_id, zone, advertise_url, instance_id, version, started_at,
                 heartbeat_at, {PG_NOW_MS} - heartbeat_at AS age, applied_change
             FROM replicas ORDER BY replica_id"
        )))
        .fetch_all(pg)
        .await
        .map_err(db(op))?;
        rows.iter()
            .map(|r| {
                Ok(ReplicaRow {
                    replica_id: r.try_get(0).map_err(db(op))?,
                    zone: r.try_get(1).map_err(db(op))?,
                    advertise_url: r.try_get(2).map_err(db(op))?,
                    instance_id: r.try_get(3).map_err(db(op))?,
                    version: r.try_get(4).map_err(db(op))?,
                    started_at_ms: r.try_get(5).map_err(db(op))?,
                    heartbeat_at_ms: r.try_get(6).map_err(db(op))?,
                    heartbeat_age_ms: r.try_get(7).map_err(db(op))?,
                    applied_change: r.try_get(8).map_err(db(op))?,
                })
            })
            .collect()
    }

    /// Records that `replica_id` has applied the change feed up to `change_id`.
    pub async fn set_applied_change(&self, replica_id: &str, change_id: i64) -> Result<()> {
        let op = "record applied change";
        let (pg, _) = self.pg(op)?;
        sqlx::query(
            "UPDATE replicas SET applied_change = $1 WHERE replica_id = $2 AND applied_change < $1",
        )
        .bind(change_id)
        .bind(replica_id)
        .execute(pg)
        .await
        .map_err(db(op))?;
        Ok(())
    }

    /// Live replicas other than `me` that have not yet applied `change_id`.
    pub async fn replicas_behind(
        &self,
        me: &str,
        change_id: i64,
        expiry_ms: i64,
    ) -> Result<Vec<String>> {
        let op = "replicas behind";
        let (pg, _) = self.pg(op)?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT replica_id FROM replicas
             WHERE replica_id <> $1 AND applied_change < $2 AND heartbeat_at >= {PG_NOW_MS} - $3"
        )))
        .bind(me)
        .bind(change_id)
        .bind(expiry_ms)
        .fetch_all(pg)
        .await
        .map_err(db(op))?;
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).map_err(db(op)))
            .collect()
    }

    /// Records that `replica_id` holds `target_id`'s hub connection now (replacing whoever
    /// held it: the hub has one connection, and the newest is the live one).
    pub async fn claim_hub(
        &self,
        target_id: &str,
        replica_id: &str,
        connection_id: &str,
    ) -> Result<()> {
        let op = "claim hub";
        let (pg, _) = self.pg(op)?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO hub_ownership (target_id, replica_id, connection_id, connected_at, heartbeat_at)
             VALUES ($1, $2, $3, {PG_NOW_MS}, {PG_NOW_MS})
             ON CONFLICT (target_id) DO UPDATE SET replica_id = excluded.replica_id,
                 connection_id = excluded.connection_id, connected_at = excluded.connected_at,
                 heartbeat_at = excluded.heartbeat_at"
        )))
        .bind(target_id)
        .bind(replica_id)
        .bind(connection_id)
        .execute(pg)
        .await
        .map_err(db(op))?;
        Ok(())
    }

    /// Forgets a hub connection that ended, if it is still the recorded one.
    pub async fn release_hub(&self, target_id: &str, connection_id: &str) -> Result<()> {
        let op = "release hub";
        let (pg, _) = self.pg(op)?;
        sqlx::query("DELETE FROM hub_ownership WHERE target_id = $1 AND connection_id = $2")
            .bind(target_id)
            .bind(connection_id)
            .execute(pg)
            .await
            .map_err(db(op))?;
        Ok(())
    }

    /// Hub ownerships whose record and owner both heartbeat within `expiry_ms`, with the
    /// owner's address; `target_id` narrows to one target.
    pub async fn live_owners(
        &self,
        target_id: Option<&str>,
        expiry_ms: i64,
    ) -> Result<Vec<OwnershipRow>> {
        let op = "hub owners";
        let (pg, _) = self.pg(op)?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT o.target_id, o.replica_id, o.connection_id, o.connected_at,
                 {PG_NOW_MS} - o.heartbeat_at AS age, r.advertise_url
             FROM hub_ownership o JOIN replicas r ON r.replica_id = o.replica_id
             WHERE o.heartbeat_at >= {PG_NOW_MS} - $1 AND r.heartbeat_at >= {PG_NOW_MS} - $1
               AND ($2::TEXT IS NULL OR o.target_id = $2)
             ORDER BY o.target_id"
        )))
        .bind(expiry_ms)
        .bind(target_id)
        .fetch_all(pg)
        .await
        .map_err(db(op))?;
        rows.iter()
            .map(|r| {
                Ok(OwnershipRow {
                    target_id: r.try_get(0).map_err(db(op))?,
                    replica_id: r.try_get(1).map_err(db(op))?,
                    connection_id: r.try_get(2).map_err(db(op))?,
                    connected_at_ms: r.try_get(3).map_err(db(op))?,
                    heartbeat_age_ms: r.try_get(4).map_err(db(op))?,
                    advertise_url: r.try_get(5).map_err(db(op))?,
                })
            })
            .collect()
    }

    /// Appends a change to the feed and announces it on the changes channel, in one
    /// transaction. Appends are serialized by an advisory lock, so change ids commit in
    /// order: a replica that has applied id N has seen every change up to N.
    pub async fn publish_change(&self, kind: &str, item: &str, origin: &str) -> Result<i64> {
        let op = "publish change";
        let (pg, n) = self.pg(op)?;
        let mut tx = pg.begin().await.map_err(db(op))?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(n.changes_lock)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        let id: i64 = sqlx::query("SELECT COALESCE(MAX(change_id), 0) + 1 FROM zone_changes")
            .fetch_one(&mut *tx)
            .await
            .map_err(db(op))?
            .try_get(0)
            .map_err(db(op))?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO zone_changes (change_id, kind, item, origin, at) VALUES ($1, $2, $3, $4, {PG_NOW_MS})"
        )))
        .bind(id)
        .bind(kind)
        .bind(item)
        .bind(origin)
        .execute(&mut *tx)
        .await
        .map_err(db(op))?;
        let payload = serde_json::json!({ "id": id, "kind": kind, "item": item, "origin": origin });
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(&n.changes_channel)
            .bind(payload.to_string())
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        tx.commit().await.map_err(db(op))?;
        Ok(id)
    }

    /// Changes after `after`, oldest first (the fallback for lost notifications).
    pub async fn changes_after(&self, after: i64, limit: i64) -> Result<Vec<ChangeRow>> {
        let op = "read changes";
        let (pg, _) = self.pg(op)?;
        let rows = sqlx::query(
            "SELECT change_id, kind, item, origin FROM zone_changes WHERE change_id > $1
             ORDER BY change_id LIMIT $2",
        )
        .bind(after)
        .bind(limit)
        .fetch_all(pg)
        .await
        .map_err(db(op))?;
        rows.iter()
            .map(|r| {
                Ok(ChangeRow {
                    change_id: r.try_get(0).map_err(db(op))?,
                    kind: r.try_get(1).map_err(db(op))?,
                    item: r.try_get(2).map_err(db(op))?,
                    origin: r.try_get(3).map_err(db(op))?,
                })
            })
            .collect()
    }

    /// The newest change id (0 for none).
    pub async fn last_change(&self) -> Result<i64> {
        let op = "read changes";
        let (pg, _) = self.pg(op)?;
        sqlx::query("SELECT COALESCE(MAX(change_id), 0) FROM zone_changes")
            .fetch_one(pg)
            .await
            .map_err(db(op))?
            .try_get(0)
            .map_err(db(op))
    }

    /// Takes the zone's descriptor-publish lock: a transaction-scoped advisory lock, held
    /// until [`ZoneLock::release`] (or the guard is dropped, which rolls back and releases
    /// it). Publishes on every replica of the zone run one at a time under it, so revisions
    /// are stored and served in one order. Waits at most 30 s for another publish.
    pub async fn lock_descriptor_publish(&self) -> Result<ZoneLock> {
        let op = "descriptor publish lock";
        let (pg, n) = self.pg(op)?;
        let mut tx = pg.begin().await.map_err(db(op))?;
        sqlx::query("SET LOCAL lock_timeout = '30s'")
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(n.descriptors_lock)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        Ok(ZoneLock(tx))
    }

    /// Records a console session opened on `replica_id` and keeps the newest `max` of the
    /// zone (expired ones go first); returns the ids dropped to make room.
    #[allow(clippy::too_many_arguments, reason = "one row's columns")]
    pub async fn open_console_session(
        &self,
        session_id: &str,
        now_ms: i64,
        expires_ms: i64,
        replica_id: &str,
        operator: &str,
        max: i64,
    ) -> Result<Vec<String>> {
        let op = "open console session";
        let (pg, _) = self.pg(op)?;
        let mut tx = pg.begin().await.map_err(db(op))?;
        sqlx::query("DELETE FROM console_sessions WHERE expires_at <= $1")
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        sqlx::query(
            "INSERT INTO console_sessions (session_id, expires_at, created_at, replica_id, operator)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(session_id)
        .bind(expires_ms)
        .bind(now_ms)
        .bind(replica_id)
        .bind(operator)
        .execute(&mut *tx)
        .await
        .map_err(db(op))?;
        let dropped = sqlx::query(
            "DELETE FROM console_sessions WHERE session_id IN (
                 SELECT session_id FROM console_sessions
                 ORDER BY expires_at DESC, session_id DESC OFFSET $1)
             RETURNING session_id",
        )
        .bind(max)
        .fetch_all(&mut *tx)
        .await
        .map_err(db(op))?;
        tx.commit().await.map_err(db(op))?;
        dropped
            .iter()
            .map(|r| r.try_get::<String, _>(0).map_err(db(op)))
            .collect()
    }

    /// The expiry and operator of a console session the zone still holds, if it has not
    /// passed `now_ms` (sessions from before named operators are `admin`'s).
    pub async fn console_session(
        &self,
        session_id: &str,
        now_ms: i64,
    ) -> Result<Option<(i64, String)>> {
        let op = "read console session";
        let (pg, _) = self.pg(op)?;
        sqlx::query(
            "SELECT expires_at, COALESCE(operator, 'admin') FROM console_sessions
             WHERE session_id = $1 AND expires_at > $2",
        )
        .bind(session_id)
        .bind(now_ms)
        .fetch_optional(pg)
        .await
        .map_err(db(op))?
        .map(|r| -> Result<(i64, String)> {
            Ok((
                r.try_get::<i64, _>(0).map_err(db(op))?,
                r.try_get::<String, _>(1).map_err(db(op))?,
            ))
        })
        .transpose()
    }

    /// Ends every console session of `operator` for the whole zone (the operator was
    /// revoked); the ids ended.
    pub async fn end_operator_console_sessions(&self, operator: &str) -> Result<Vec<String>> {
        let op = "end operator console sessions";
        let (pg, _) = self.pg(op)?;
        let rows =
            sqlx::query("DELETE FROM console_sessions WHERE operator = $1 RETURNING session_id")
                .bind(operator)
                .fetch_all(pg)
                .await
                .map_err(db(op))?;
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).map_err(db(op)))
            .collect()
    }

    /// Which of `ids` are console sessions the zone still holds unexpired.
    pub async fn live_console_sessions(&self, ids: &[String], now_ms: i64) -> Result<Vec<String>> {
        let op = "read console sessions";
        let (pg, _) = self.pg(op)?;
        let rows = sqlx::query(
            "SELECT session_id FROM console_sessions WHERE session_id = ANY($1) AND expires_at > $2",
        )
        .bind(ids)
        .bind(now_ms)
        .fetch_all(pg)
        .await
        .map_err(db(op))?;
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).map_err(db(op)))
            .collect()
    }

    /// Ends a console session for the whole zone (logout).
    pub async fn end_console_session(&self, session_id: &str) -> Result<()> {
        let op = "end console session";
        let (pg, _) = self.pg(op)?;
        sqlx::query("DELETE FROM console_sessions WHERE session_id = $1")
            .bind(session_id)
            .execute(pg)
            .await
            .map_err(db(op))?;
        Ok(())
    }

    /// Drops changes older than `keep_ms`, always keeping the newest (ids continue from it).
    pub async fn prune_changes(&self, keep_ms: i64) -> Result<()> {
        let op = "prune changes";
        let (pg, _) = self.pg(op)?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM zone_changes WHERE at < {PG_NOW_MS} - $1
               AND change_id < (SELECT MAX(change_id) FROM zone_changes)"
        )))
        .bind(keep_ms)
        .execute(pg)
        .await
        .map_err(db(op))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
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
}
