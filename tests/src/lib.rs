//! Test support shared by the integration suite and the `mcp-load` generator: start a real
//! root on `127.0.0.1:0`, issue leases over its REST API, and connect real MCP clients.
//!
//! # Layout
//! - This file: [`TestRoot`] and [`TestHub`], root and hub in-process on `127.0.0.1:0`; MCP
//!   clients; the binaries and client installs the tests run.
//! - [`ports`]: ports for daemons started as processes (read back where the daemon announces
//!   them; [`ports::free_port`] where a number must be written down first).
//! - [`process`]: [`process::Proc`], the one guard for a child process.
//! - [`admin`]: [`admin::Admin`], the one admin client for root's REST API.
//! - [`hub_process`]: [`hub_process::HubProcess`], the one starter for `mcp-hub run`.
//! - [`faults`], [`git`], [`hubsim`], [`oauth`], [`soak`]: fixtures and drivers.

pub mod admin;
pub mod faults;
pub mod git;
pub mod heap;
pub mod hub_process;
pub mod hubsim;
pub mod oauth;
pub mod ports;
pub mod process;
pub mod root_process;
pub mod soak;

use std::path::PathBuf;

use anyhow::Context;
use mcp_root::RootHandle;
use mcp_root::config::RootConfig;
use rmcp::ServiceExt;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

/// Installs the one rustls crypto provider (aws-lc-rs); idempotent.
pub fn init_crypto() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// An HTTP client for talking to roots in tests. Root ends a keep-alive connection that stays
/// idle for its header timer (`header_read_timeout_ms`, 10 s by default), and a request sent
/// on it as it closes fails (`IncompleteMessage`); reqwest keeps idle connections for 90 s,
/// so this client drops them after 5 s, as a client configured for root would.
pub fn http_client() -> reqwest::Client {
    init_crypto();
    reqwest::Client::builder()
        .pool_idle_timeout(std::time::Duration::from_secs(5))
        .build()
        .expect("an HTTP client")
}

/// A root daemon running in-process on a free loopback port, with its own data directory.
pub struct TestRoot {
    pub handle: Option<RootHandle>,
    pub dir: tempfile::TempDir,
    pub http: reqwest::Client,
}

/// File in a test root's data directory naming the PostgreSQL URL (schema) it runs on, so a
/// root restarted on the same data directory finds its data again.
const SUITE_PG_URL_FILE: &str = "test-postgres.url";

/// With `MCP_TEST_ALL_ON_POSTGRES` set, every [`TestRoot`] that does not choose its own
/// database runs on a PostgreSQL schema of its own under `MCP_TEST_DATABASE_URL` instead of
/// the SQLite default: the whole suite on the second backend. Schemas of earlier runs (named
/// `tall_<unix seconds>_…`) older than an hour are dropped on the way.
async fn suite_postgres_url(data_dir: &std::path::Path) -> anyhow::Result<Option<String>> {
    use sqlx::Connection;
    if std::env::var_os("MCP_TEST_ALL_ON_POSTGRES").is_none() {
        return Ok(None);
    }
    let kept = data_dir.join(SUITE_PG_URL_FILE);
    if let Ok(url) = std::fs::read_to_string(&kept) {
        return Ok(Some(url.trim().to_owned()));
    }
    let base = std::env::var("MCP_TEST_DATABASE_URL")
        .context("MCP_TEST_ALL_ON_POSTGRES needs MCP_TEST_DATABASE_URL")?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let mut conn = sqlx::PgConnection::connect(&base).await?;
    static SWEPT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SWEPT.swap(true, std::sync::atomic::Ordering::AcqRel) {
        let old: Vec<String> = sqlx::query_scalar(
            "SELECT nspname::TEXT FROM pg_namespace WHERE nspname LIKE 'tall\\_%'",
        )
        .fetch_all(&mut conn)
        .await?;
        for schema in old {
            let at: u64 = schema
                .split('_')
                .nth(1)
                .and_then(|t| t.parse().ok())
                .unwrap_or(now);
            if at + 3600 < now {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP SCHEMA IF EXISTS {schema} CASCADE"
                )))
                .execute(&mut conn)
                .await?;
            }
        }
    }
    let simple = uuid::Uuid::now_v7().simple().to_string();
    let schema = format!("tall_{now}_{}", &simple[simple.len() - 12..]);
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut conn)
        .await?;
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    std::fs::create_dir_all(data_dir)?;
    std::fs::write(&kept, &url)?;
    Ok(Some(url))
}

impl TestRoot {
    /// Starts a root with default config, tweaked by `f`.
    pub async fn start_with(f: impl FnOnce(&mut RootConfig)) -> anyhow::Result<TestRoot> {
        init_crypto();
        // Root's log ring (read by `hub.get_logs` with source `root_local`), without stderr.
        mcp_root::telemetry::logging::init("info", false);
        let dir = tempfile::tempdir()?;
        let mut cfg = RootConfig {
            listen: "127.0.0.1:0".parse()?,
            data_dir: dir.path().join("data"),
            ..Default::default()
        };
        // Tests notice a silently lost hub within seconds (a zone's default is 30 s).
        cfg.limits.heartbeat_interval_ms = 5_000;
        f(&mut cfg);
        if cfg.database_url.is_none() {
            cfg.database_url = suite_postgres_url(&cfg.data_dir).await?;
        }
        let handle = mcp_root::run(cfg).await?;
        // A run "in the future" (`.ci/run` does one): no test may depend on today's date being
        // before the committed descriptors' `fresh_until`; a test about freshness sets the
        // descriptor clock itself.
        if let Some(days) = std::env::var("MCP_TEST_DESCRIPTOR_CLOCK_DAYS")
            .ok()
            .and_then(|d| d.parse::<u64>().ok())
        {
            handle
                .app
                .clock
                .advance(std::time::Duration::from_secs(days * 86_400));
        }
        Ok(TestRoot {
            handle: Some(handle),
            dir,
            http: crate::http_client(),
        })
    }

    pub async fn start() -> anyhow::Result<TestRoot> {
        Self::start_with(|_| {}).await
    }

    /// Pins `cfg` to the embedded SQLite database in its data directory (for tests about the
    /// SQLite file itself, which `MCP_TEST_ALL_ON_POSTGRES` must not move).
    pub fn on_sqlite(cfg: &mut RootConfig) {
        cfg.database_url = Some(format!("sqlite:{}", cfg.data_dir.join("root.db").display()));
    }

    pub fn handle(&self) -> &RootHandle {
        self.handle.as_ref().expect("root is running")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.handle().base_url())
    }

    pub fn mcp_url(&self) -> String {
        self.handle().mcp_url()
    }

    pub fn admin_token(&self) -> String {
        self.handle().admin_token().to_string()
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Issues `n` sessions (leases on targets `hub:<prefix>-<i>`, `InfraOpsRead`), each one
    /// audited event: trail for tests of what is done with the trail.
    pub async fn issue_sessions(&self, prefix: &str, n: usize) {
        for i in 0..n {
            self.admin_post(
                "/v1/root/mcp/sessions",
                serde_json::json!({ "target_id": format!("hub:{prefix}-{i}"), "capability_profile": "InfraOpsRead", "ttl_sec": 600 }),
            )
            .await
            .expect("a session");
        }
    }

    /// Creates a lease over REST; returns `(session_id, token)`.
    pub async fn lease(
        &self,
        target: &str,
        profile: &str,
        ttl_sec: u64,
    ) -> anyhow::Result<(String, String)> {
        let v = self
            .admin_post(
                "/v1/root/mcp/sessions",
                json!({ "target_id": target, "capability_profile": profile, "ttl_sec": ttl_sec }),
            )
            .await?;
        Ok((
            v["session_id"].as_str().context("session_id")?.to_string(),
            v["token"].as_str().context("token")?.to_string(),
        ))
    }

    /// The admin client for this root.
    pub fn admin(&self) -> admin::Admin {
        admin::Admin::new(
            self.http.clone(),
            self.handle().base_url(),
            self.admin_token(),
        )
    }

    /// GET with the admin bearer ([`admin::Admin::get`]).
    pub async fn admin_get(&self, path: &str) -> anyhow::Result<Value> {
        self.admin().get(path).await
    }

    /// Root's Prometheus exposition text (`/metrics`, with the admin bearer).
    pub async fn metrics_text(&self) -> anyhow::Result<String> {
        let res = self
            .http
            .get(self.url("/metrics"))
            .bearer_auth(self.admin_token())
            .send()
            .await?;
        anyhow::ensure!(res.status().is_success(), "GET /metrics: {}", res.status());
        Ok(res.text().await?)
    }

    /// One series of root's metrics, named with its labels as exposed (e.g.
    /// `mcp_root_calls_total{tool="x",status="ok"}`); `None` when root exposes no such series.
    pub async fn metric(&self, series: &str) -> anyhow::Result<Option<u64>> {
        let text = self.metrics_text().await?;
        let prefix = format!("{series} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .map(|v| v.trim().parse::<u64>())
            .transpose()
            .with_context(|| format!("the value of {series}"))
    }

    /// POST with the admin bearer ([`admin::Admin::post`]).
    pub async fn admin_post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.admin().post(path, body).await
    }

    /// REST `/call` with a lease bearer: `(status, body)`.
    pub async fn rest_call(
        &self,
        token: &str,
        tool: &str,
        args: Value,
    ) -> anyhow::Result<(u16, Value)> {
        let res = self
            .http
            .post(self.url("/v1/root/mcp/call"))
            .bearer_auth(token)
            .json(&json!({ "tool_id": tool, "arguments": args }))
            .send()
            .await?;
        Ok((res.status().as_u16(), res.json().await?))
    }

    /// A write's preview over REST `/call`: its confirmation token.
    pub async fn preview(&self, token: &str, tool: &str, args: Value) -> anyhow::Result<String> {
        let (status, body) = self.rest_call(token, tool, args).await?;
        anyhow::ensure!(status == 200, "preview of {tool}: {status} {body}");
        Ok(body["result"]["confirmation_token"]
            .as_str()
            .with_context(|| format!("a confirmation token in {body}"))?
            .to_owned())
    }

    /// A write's execute over REST `/call` with `confirmation` (if any) and idempotency key
    /// `key`: `(status, body)`.
    pub async fn execute(
        &self,
        token: &str,
        tool: &str,
        args: Value,
        confirmation: Option<&str>,
        key: &str,
    ) -> anyhow::Result<(u16, Value)> {
        let mut args = args;
        args["phase"] = json!("execute");
        args["idempotency_key"] = json!(key);
        if let Some(c) = confirmation {
            args["confirmation_token"] = json!(c);
        }
        self.rest_call(token, tool, args).await
    }

    /// A write's preview, then its execute with the preview's confirmation and idempotency
    /// key `key`: the execute's `(status, body)`.
    pub async fn write(
        &self,
        token: &str,
        tool: &str,
        args: Value,
        key: &str,
    ) -> anyhow::Result<(u16, Value)> {
        let confirmation = self.preview(token, tool, args.clone()).await?;
        self.execute(token, tool, args, Some(&confirmation), key)
            .await
    }

    pub async fn stop(mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown().await;
        }
    }

    /// Stops root and starts it again on the same data directory and database.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        let h = self.handle.take().context("root is running")?;
        let cfg = h.app.config.clone();
        h.shutdown().await;
        self.handle = Some(mcp_root::run(cfg).await?);
        Ok(())
    }
}

/// Makes a secret file the test wrote readable by its owner only (mode 0600), as root and hubs
/// require of every secret file they read.
pub fn private_file(path: &std::path::Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

/// An rmcp client connected to `url` with `token` as its bearer.
pub async fn mcp_client(
    url: &str,
    token: &str,
) -> anyhow::Result<RunningService<rmcp::RoleClient, ()>> {
    init_crypto();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string())
            .auth_header(token.to_string()),
    );
    Ok(().serve(transport).await?)
}

/// How long [`eventually`] and [`until`] wait (long enough for a hub to restart or a
/// replica to learn a change; a passing test never waits it out).
pub const PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// Polls `f` every 50 ms until it gives a value, for at most [`PATIENCE`]; panics naming
/// `what` if it never does.
pub async fn eventually<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// [`eventually`] for a condition.
pub async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    eventually(what, async || check().await.then_some(())).await
}

/// The names of the tools `client` lists (every page).
pub async fn listed_tools(client: &RunningService<rmcp::RoleClient, ()>) -> Vec<String> {
    client
        .list_all_tools()
        .await
        .expect("tools/list")
        .iter()
        .map(|t| t.name.to_string())
        .collect()
}

/// An MCP client on the stateless lifecycle of protocol 2026-07-28: `server/discover`, then
/// self-contained requests without a transport session.
pub async fn mcp_client_stateless(
    url: &str,
    token: &str,
) -> anyhow::Result<RunningService<rmcp::RoleClient, ()>> {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    init_crypto();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string())
            .auth_header(token.to_string()),
    );
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    Ok(().serve_with_lifecycle(transport, lifecycle).await?)
}

/// The path of a workspace binary (`mcp-root`, `mcp-hub`, `mcp-fixture-service`), brought up
/// to date on first use in each test process.
///
/// `cargo test --workspace` does not build other packages' binaries before running this
/// crate's tests: on a fresh clone the binary may be missing, and in a reused target directory
/// it may be stale (built from older sources: a hub that cannot decode today's frames). So the
/// first use of each binary in a process runs `cargo build` for it with the same cargo and
/// target directory (a no-op when it is up to date).
pub fn workspace_bin(name: &str) -> anyhow::Result<PathBuf> {
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut dir = std::env::current_exe()?;
    dir.pop();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let bin = dir.join(name);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == name) {
        // This package's own binaries; the others are named after their package.
        let package = match name {
            "mcp-load" | "mcp-fixture-service" | "mcp-hubsim" | "mcp-hub-faults" => "mcp-tests",
            other => other,
        };
        let profile_release = dir.ends_with("release");
        let target_dir = dir.parent().context("target dir")?.to_path_buf();
        let mut cmd = std::process::Command::new(env!("CARGO"));
        cmd.args(["build", "-q", "-p", package, "--bin", name])
            .env("CARGO_TARGET_DIR", &target_dir);
        if profile_release {
            cmd.arg("--release");
        }
        let status = cmd.status().context("running cargo build")?;
        anyhow::ensure!(status.success(), "cargo build -p {package} failed");
        built.push(name.to_owned());
    }
    anyhow::ensure!(bin.exists(), "{} is missing after the build", bin.display());
    Ok(bin)
}

/// The cargo target directory this test binary runs from (where `.ci/run` puts the client
/// installs: `py/`, `npm/`).
fn target_dir() -> anyhow::Result<PathBuf> {
    let mut dir = std::env::current_exe()?;
    dir.pop();
    if dir.ends_with("deps") {
        dir.pop();
    }
    Ok(dir.parent().context("target dir")?.to_owned())
}

/// The Python interpreter of the venv holding the MCP Python SDK (`mcp` 2.3, a client of
/// another implementation): `MCP_TEST_PYTHON`, or `<target>/py/bin/python`, which `.ci/run`
/// creates (`python3 -m venv target/py && target/py/bin/pip install mcp==2.3.0`).
pub fn python_sdk() -> anyhow::Result<PathBuf> {
    if let Ok(p) = std::env::var("MCP_TEST_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    let python = target_dir()?.join("py/bin/python");
    anyhow::ensure!(
        python.exists(),
        "{} is missing: run `python3 -m venv target/py && target/py/bin/pip install mcp==2.3.0` \
         (as .ci/run does) or set MCP_TEST_PYTHON",
        python.display()
    );
    Ok(python)
}

/// The Claude Code CLI: `MCP_TEST_CLAUDE`, or the one `.ci/run` installs from npm into
/// `target/npm`.
pub fn claude_code() -> anyhow::Result<PathBuf> {
    if let Ok(p) = std::env::var("MCP_TEST_CLAUDE") {
        return Ok(PathBuf::from(p));
    }
    let claude = target_dir()?.join("npm/node_modules/.bin/claude");
    anyhow::ensure!(
        claude.exists(),
        "{} is missing: run `npm install --prefix target/npm @anthropic-ai/claude-code@2.1.197` \
         (as .ci/run does) or set MCP_TEST_CLAUDE",
        claude.display()
    );
    Ok(claude)
}

/// A client script of `tests/clients/` run with the Python SDK: its last stdout line as JSON.
pub async fn run_python_client(script: &str, args: &[&str]) -> anyhow::Result<serde_json::Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("clients")
        .join(script);
    let out = tokio::process::Command::new(python_sdk()?)
        .arg(&path)
        .args(args)
        .output()
        .await
        .context("running the Python client")?;
    last_json_line(script, &out)
}

/// Where the npm clients are installed (`node_modules/` inside): `MCP_TEST_NPM`, or
/// `<target>/npm`, where `.ci/run` installs Claude Code and the MCP TypeScript SDK.
pub fn npm_prefix() -> anyhow::Result<PathBuf> {
    if let Ok(p) = std::env::var("MCP_TEST_NPM") {
        return Ok(PathBuf::from(p));
    }
    let prefix = target_dir()?.join("npm");
    anyhow::ensure!(
        prefix
            .join("node_modules/@modelcontextprotocol/sdk/package.json")
            .exists(),
        "{} has no MCP TypeScript SDK: run `npm install --prefix target/npm \
         @modelcontextprotocol/sdk@1.32.2` (as .ci/run does) or set MCP_TEST_NPM",
        prefix.display()
    );
    Ok(prefix)
}

/// Runs `tests/clients/<script>` (a Node.js client on the MCP TypeScript SDK) with the npm
/// prefix and `args`; its last line of output, as JSON.
pub async fn run_node_client(script: &str, args: &[&str]) -> anyhow::Result<serde_json::Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("clients")
        .join(script);
    let out = tokio::process::Command::new("node")
        .arg(&path)
        .arg(npm_prefix()?)
        .args(args)
        .output()
        .await
        .context("running the Node.js client")?;
    last_json_line(script, &out)
}

/// The last line a client printed, as JSON; its whole output when it failed.
fn last_json_line(script: &str, out: &std::process::Output) -> anyhow::Result<serde_json::Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "{script} failed ({}): {}{}",
        out.status,
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).with_context(|| format!("{script} printed no JSON line: {stdout}"))
}

/// A WebSocket to root's hub door.
pub type HubSocket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Dials root's hub door (`/v1/root/hubs/connect` under `base_url`, `http` or `https`) as a
/// hub does, with `token` in the upgrade request when given; a refusal before the upgrade is
/// `tungstenite::Error::Http` with root's response.
pub async fn dial_hub_door(
    base_url: &str,
    token: Option<&str>,
) -> Result<HubSocket, tokio_tungstenite::tungstenite::Error> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let url = format!(
        "{}/v1/root/hubs/connect",
        base_url
            .replacen("https://", "wss://", 1)
            .replacen("http://", "ws://", 1)
    );
    let request = match token {
        Some(t) => mcp_hub::upgrade_request(&url, t).map_err(|e| {
            tokio_tungstenite::tungstenite::Error::Url(
                tokio_tungstenite::tungstenite::error::UrlError::UnableToConnect(e.to_string()),
            )
        })?,
        None => url.into_client_request()?,
    };
    Ok(tokio_tungstenite::connect_async(request).await?.0)
}

/// Hub TOML giving every built-in adapter something to serve (a hub publishes only those):
/// the shipped NLU content, a health check, a managed service that is never started and a
/// deploy repository that is never fetched. For the top of a hub's `extra` (it sets
/// `allowed_roots`); more tables may follow.
pub fn serving_everything_toml() -> anyhow::Result<String> {
    Ok(format!(
        "{}\n[[skill.healthchecks]]\nname = \"discard-port\"\nkind = \"tcp\"\naddress = \"127.0.0.1:9\"\n\n\
         [[services]]\nname = \"idle\"\nargv = [\"sleep\", \"3600\"]\nautostart = false\n\n\
         [deploy]\nrepository = \"https://deploy.invalid/app.git\"\nworktree = \"deploy/app\"\nallowed_refs = [\"main\"]\n",
        nlu_hub_toml()?
    ))
}

/// Hub TOML serving the shipped NLU example content (`config/nlu/`, English and Russian):
/// `allowed_roots` plus `[nlu]`, for the top of a hub's `extra` configuration. The configured
/// files are only read; applied changes go to the hub's state dir.
pub fn nlu_hub_toml() -> anyhow::Result<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../config/nlu")
        .canonicalize()
        .context("config/nlu")?;
    let d = dir.display();
    Ok(format!(
        "allowed_roots = [\"{d}\"]\n[nlu]\nentities = \"{d}/entities.json\"\nintents = \"{d}/intents.json\"\ntemplates = [\"{d}/templates\"]\n"
    ))
}

/// An enrolled hub running in-process against a [`TestRoot`].
pub struct TestHub {
    pub handle: Option<mcp_hub::HubHandle>,
    pub state_dir: tempfile::TempDir,
    pub token: String,
    pub target_id: String,
}

impl TestRoot {
    /// Enrols `target_id` in `environment`; returns the hub token.
    pub async fn enroll(&self, target_id: &str, environment: &str) -> anyhow::Result<String> {
        let v = self
            .admin_post("/v1/root/hubs", json!({ "target_id": target_id, "environment": environment, "subnet_id": "subnet-a" }))
            .await?;
        Ok(v["token"].as_str().context("token")?.to_string())
    }

    /// Enrols `target_id` (environment `test`) and starts a hub for it in-process with
    /// `extra` TOML appended to its config; waits until it is connected. (A hub as a separate
    /// `mcp-hub run` process: [`hub_process::HubProcess`].)
    pub async fn start_hub(&self, target_id: &str, extra: &str) -> anyhow::Result<TestHub> {
        let token = self.enroll(target_id, "test").await?;
        let hub = TestHub::start(&self.handle().base_url(), target_id, &token, extra).await?;
        Ok(hub)
    }

    /// [`TestRoot::start_hub`] with the fault fixture ([`faults`]) embedded in the hub (the
    /// root must load its contract: [`faults::with_contract`]).
    pub async fn start_fault_hub(&self, target_id: &str, extra: &str) -> anyhow::Result<TestHub> {
        let token = self.enroll(target_id, "test").await?;
        TestHub::start_embedded(
            &self.handle().base_url(),
            target_id,
            &token,
            extra,
            &[&faults::FAULT],
        )
        .await
    }
}

impl TestHub {
    /// Starts a hub with a config file written from these values plus `extra` TOML, placed at
    /// the top level (before `[reconnect]`), so `extra` may set top-level keys such as
    /// `allowed_roots` before its own tables.
    pub async fn start(
        root_url: &str,
        target_id: &str,
        token: &str,
        extra: &str,
    ) -> anyhow::Result<TestHub> {
        Self::start_embedded(root_url, target_id, token, extra, &[]).await
    }

    /// [`TestHub::start`] with adapters embedded in the hub (see [`faults`]).
    pub async fn start_embedded(
        root_url: &str,
        target_id: &str,
        token: &str,
        extra: &str,
        embedded: &[&'static mcp_hub::EmbeddedAdapter],
    ) -> anyhow::Result<TestHub> {
        Self::start_full(root_url, target_id, token, extra, embedded, |_| {}).await
    }

    /// [`TestHub::start`] with its resolved configuration changed by `f` (what no file sets:
    /// the protocol features it announces).
    pub async fn start_with(
        root_url: &str,
        target_id: &str,
        token: &str,
        extra: &str,
        f: impl FnOnce(&mut mcp_hub::HubConfig),
    ) -> anyhow::Result<TestHub> {
        Self::start_full(root_url, target_id, token, extra, &[], f).await
    }

    /// [`TestHub::start`] without waiting for the connection (a hub root may refuse for a
    /// while); [`mcp_hub::HubHandle::wait_connected`] waits for it.
    pub async fn launch(
        root_url: &str,
        target_id: &str,
        token: &str,
        extra: &str,
    ) -> anyhow::Result<TestHub> {
        Self::launch_full(root_url, target_id, token, extra, &[], |_| {}).await
    }

    async fn start_full(
        root_url: &str,
        target_id: &str,
        token: &str,
        extra: &str,
        embedded: &[&'static mcp_hub::EmbeddedAdapter],
        f: impl FnOnce(&mut mcp_hub::HubConfig),
    ) -> anyhow::Result<TestHub> {
        let hub = Self::launch_full(root_url, target_id, token, extra, embedded, f).await?;
        hub.handle()
            .wait_connected(std::time::Duration::from_secs(10))
            .await?;
        Ok(hub)
    }

    async fn launch_full(
        root_url: &str,
        target_id: &str,
        token: &str,
        extra: &str,
        embedded: &[&'static mcp_hub::EmbeddedAdapter],
        f: impl FnOnce(&mut mcp_hub::HubConfig),
    ) -> anyhow::Result<TestHub> {
        let state_dir = tempfile::tempdir()?;
        let path = state_dir.path().join("hub.toml");
        std::fs::write(
            &path,
            format!(
                "target_id = \"{target_id}\"\nenvironment = \"test\"\nsubnet = \"subnet-a\"\nzone = \"zone-local\"\nroot_url = \"{root_url}\"\ntoken = \"{token}\"\nstate_dir = \"{}\"\nwrite_scope = \"test-only\"\n{extra}\n[reconnect]\ninitial_ms = 50\nmax_ms = 500\n",
                state_dir.path().join("state").display()
            ),
        )?;
        // The file holds the hub token: the hub refuses it unless it is private.
        private_file(&path)?;
        let mut cfg = mcp_hub::config::HubFile::load(&path)?.resolve()?;
        f(&mut cfg);
        let handle = mcp_hub::start_with(cfg, embedded).await?;
        Ok(TestHub {
            handle: Some(handle),
            state_dir,
            token: token.to_string(),
            target_id: target_id.to_string(),
        })
    }

    pub fn handle(&self) -> &mcp_hub::HubHandle {
        self.handle.as_ref().expect("hub is running")
    }

    pub async fn stop(mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown().await;
        }
    }
}
