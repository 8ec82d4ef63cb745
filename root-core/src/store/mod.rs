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
    #[error("migrating the database failed: {0}")]
    Migrate(#[source] sqlx::migrate::MigrateError),
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

/// How a transaction that writes begins on each backend.
trait WriteBegin: sqlx::Database {
    const BEGIN_WRITE: &'static str;
}

impl WriteBegin for sqlx::Sqlite {
    /// Takes SQLite's write lock up front. A deferred transaction that reads before it
    /// writes cannot wait for the lock: when another connection wrote meanwhile, its upgrade
    /// fails at once with "database is locked" (the busy timeout does not apply).
    const BEGIN_WRITE: &'static str = "BEGIN IMMEDIATE";
}

impl WriteBegin for sqlx::Postgres {
    const BEGIN_WRITE: &'static str = "BEGIN";
}

/// Begins a transaction that will write (see [`WriteBegin`]).
async fn begin_write<DB: WriteBegin>(
    pool: &sqlx::Pool<DB>,
) -> std::result::Result<sqlx::Transaction<'static, DB>, sqlx::Error> {
    pool.begin_with(DB::BEGIN_WRITE).await
}

mod audit;
mod checkpoints;
mod descriptors;
mod evidence;
mod fleet;
mod leases;
mod migrations;
mod oauth;
mod operators;
mod retained;
mod targets;
mod tasks;
#[cfg(test)]
mod tests;
mod witness;
mod writes;
mod zone;

pub use audit::*;
pub use checkpoints::*;
pub use descriptors::*;
pub use evidence::*;
pub use fleet::*;
pub use leases::*;
pub use oauth::*;
pub use operators::*;
pub use retained::*;
pub use targets::*;
pub use tasks::*;
pub use witness::*;
pub use writes::*;
pub use zone::*;

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
pub(crate) struct SqliteFile {
    pub(crate) path: std::path::PathBuf,
    pub(crate) synchronous: crate::config::SqliteSync,
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
    pub(crate) fn sqlite_file(&self) -> Option<&SqliteFile> {
        self.sqlite_file.as_ref()
    }

    /// Which backend this store runs on: `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self.pool {
            Pool::Sqlite(_) => "sqlite",
            Pool::Postgres(_) => "postgres",
        }
    }

    /// Cheap liveness check for `/readyz`.
    pub async fn ping(&self) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query("SELECT 1").execute(pool).await.map_err(db("ping"))?;
            Ok(())
        })
    }
}
