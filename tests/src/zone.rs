//! One replica zone on a PostgreSQL schema of its own (`MCP_TEST_DATABASE_URL`; a test says
//! SKIPPED without it): the schema, the files every replica shares (admin token, master
//! key), and its replicas, in-process ([`crate::TestRoot`]) or as `mcp-root serve` processes
//! ([`ReplicaProcess`]).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use mcp_root::config::RootConfig;
use sqlx::Connection;

use crate::TestRoot;
use crate::process::Proc;

/// How long a replica may take to start.
const START: Duration = Duration::from_secs(30);

/// Creates `schema` on the database at `base`; the URL whose search path is that schema.
pub(crate) async fn create_schema(base: &str, schema: &str) -> anyhow::Result<String> {
    let mut conn = sqlx::PgConnection::connect(base).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut conn)
        .await?;
    let sep = if base.contains('?') { '&' } else { '?' };
    Ok(format!("{base}{sep}options=-c%20search_path%3D{schema}"))
}

/// A schema of its own on the test database, so runs never see each other's rows.
pub struct PgSchema {
    base: String,
    /// The schema's name.
    pub schema: String,
    /// The database URL whose search path is the schema.
    pub url: String,
}

impl PgSchema {
    /// A new schema; `None` (after saying `SKIPPED <test>`) without `MCP_TEST_DATABASE_URL`.
    pub async fn create(test: &str) -> Option<PgSchema> {
        let Ok(base) = std::env::var("MCP_TEST_DATABASE_URL") else {
            eprintln!("SKIPPED {test}: MCP_TEST_DATABASE_URL is not set");
            return None;
        };
        let schema = format!("t_{}", uuid::Uuid::now_v7().simple());
        let url = create_schema(&base, &schema)
            .await
            .expect("a schema on MCP_TEST_DATABASE_URL");
        Some(PgSchema { base, schema, url })
    }

    /// Runs `sql` in the schema on a connection of the test's own: the rows it changed.
    pub async fn exec(&self, sql: &str) -> u64 {
        let mut conn = sqlx::PgConnection::connect(&self.url)
            .await
            .expect("a connection to the schema");
        sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .rows_affected()
    }

    /// The one number `sql` selects in the schema.
    pub async fn count(&self, sql: &str) -> i64 {
        let mut conn = sqlx::PgConnection::connect(&self.url)
            .await
            .expect("a connection to the schema");
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Drops the schema with all it holds.
    pub async fn drop_schema(self) {
        let mut conn = sqlx::PgConnection::connect(&self.base)
            .await
            .expect("a connection to the database");
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA {} CASCADE",
            self.schema
        )))
        .execute(&mut conn)
        .await
        .expect("the schema dropped");
    }
}

/// The replicas of zone `name` on one schema, sharing the admin token and master key in
/// `<dir>/shared` (the first replica creates them); process replicas keep their config, data
/// and log under `dir`.
pub struct Zone {
    pub db: PgSchema,
    pub name: &'static str,
    pub dir: tempfile::TempDir,
}

impl Zone {
    /// Zone `name` on a new schema; `None` (after saying `SKIPPED <the test>`) without
    /// `MCP_TEST_DATABASE_URL`.
    pub async fn create(name: &'static str) -> Option<Zone> {
        let test = std::thread::current()
            .name()
            .unwrap_or("a zone test")
            .to_owned();
        let db = PgSchema::create(&test).await?;
        crate::init_crypto();
        let dir = tempfile::tempdir().expect("the zone's directory");
        std::fs::create_dir_all(dir.path().join("shared")).expect("the shared directory");
        Some(Zone { db, name, dir })
    }

    /// Stops `replicas` in order, then drops the zone's schema.
    pub async fn stop(self, replicas: impl IntoIterator<Item = TestRoot>) {
        for r in replicas {
            r.stop().await;
        }
        self.db.drop_schema().await;
    }

    /// Where the shared admin token and master key live.
    pub fn shared(&self) -> PathBuf {
        self.dir.path().join("shared")
    }

    /// The zone's admin token (once a replica created it).
    pub fn admin_token(&self) -> String {
        std::fs::read_to_string(self.shared().join("admin.token"))
            .expect("the zone's admin token")
            .trim()
            .to_owned()
    }

    /// Replicas `ids` running in this process, started in order (the first creates the
    /// shared files).
    pub async fn replicas<const N: usize>(&self, ids: [&str; N]) -> [TestRoot; N] {
        let mut started = Vec::new();
        for id in ids {
            started.push(self.replica(id).await);
        }
        started.try_into().unwrap_or_else(|_| unreachable!())
    }

    /// A replica `id` running in this process.
    pub async fn replica(&self, id: &str) -> TestRoot {
        self.replica_with(id, |_| {}).await
    }

    /// [`Zone::replica`] with the rest of its configuration set by `f`.
    pub async fn replica_with(&self, id: &str, f: impl FnOnce(&mut RootConfig)) -> TestRoot {
        TestRoot::start_with(|c| {
            c.database_url = Some(self.db.url.clone());
            c.zone = self.name.into();
            c.admin_token_file = Some(self.shared().join("admin.token"));
            c.master_key_file = Some(self.shared().join("secrets.key"));
            c.replica.id = Some(id.to_owned());
            f(c);
        })
        .await
        .unwrap_or_else(|e| panic!("replica {id}: {e:#}"))
    }

    /// Writes replica `id`'s configuration file (with `extra` TOML before `[replica]`) for
    /// `mcp-root serve`: its path.
    pub fn config(&self, id: &str, extra: &str) -> PathBuf {
        let config = self.dir.path().join(format!("{id}.toml"));
        std::fs::write(
            &config,
            format!(
                "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\ndatabase_url = \"{}\"\n\
                 zone = \"{}\"\nadmin_token_file = \"{}\"\nmaster_key_file = \"{}\"\n\
                 {extra}\n[audit]\nbreakglass_window_sec = 3600\n[replica]\nid = \"{id}\"\n",
                self.dir.path().join(id).display(),
                self.db.url,
                self.name,
                self.shared().join("admin.token").display(),
                self.shared().join("secrets.key").display(),
            ),
        )
        .expect("the replica's config");
        config
    }

    /// Replica `id` as an `mcp-root serve` process, once it is ready.
    pub async fn serve(&self, id: &str) -> ReplicaProcess {
        self.serve_with(id, "").await
    }

    /// [`Zone::serve`] with `extra` TOML in its configuration.
    pub async fn serve_with(&self, id: &str, extra: &str) -> ReplicaProcess {
        let config = self.config(id, extra);
        let log = self.dir.path().join(format!("{id}.log"));
        // A failing test shows what each replica logged, and whether it was still running
        // (the guard prints it).
        let mut proc = Proc::spawn(
            &format!("replica {id}"),
            Command::new(crate::workspace_bin("mcp-root").expect("mcp-root"))
                .args(["serve", "--config"])
                .arg(&config)
                .env("RUST_LOG", "info"),
            log.clone(),
        );
        let base = crate::ports::announced_root_url(&mut proc, START).await;
        let r = ReplicaProcess {
            id: id.to_owned(),
            base,
            log,
            proc,
        };
        ready(&r.base, || format!("replica {id}:\n{}", r.log_text())).await;
        r
    }
}

/// The hubs the zone view (`/v1/root/replicas`) says `replica` holds.
pub fn hubs_of(view: &serde_json::Value, replica: &str) -> Vec<String> {
    view["replicas"]
        .as_array()
        .expect("replicas in the zone view")
        .iter()
        .find(|r| r["replica_id"] == replica)
        .map(|r| {
            crate::items(&r["hubs"])
                .iter()
                .filter_map(|h| h.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until the root at `base` answers `/readyz`; after 30 s fails saying `what()` did not
/// start.
pub async fn ready(base: &str, what: impl Fn() -> String) {
    let http = crate::http_client();
    let start = Instant::now();
    while http
        .get(format!("{base}/readyz"))
        .send()
        .await
        .map_or(true, |r| !r.status().is_success())
    {
        assert!(start.elapsed() < START, "{} did not start", what());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A replica as an `mcp-root serve` process (SIGKILLed when dropped, see [`Proc`]).
pub struct ReplicaProcess {
    pub id: String,
    /// `http://127.0.0.1:PORT`, as it announced it.
    pub base: String,
    pub log: PathBuf,
    pub proc: Proc,
}

impl ReplicaProcess {
    /// What it has logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends `sig` (`-STOP`, `-CONT`, ...) to it.
    pub fn signal(&self, sig: &str) {
        assert!(self.proc.signal(sig), "kill {sig}");
    }
}
