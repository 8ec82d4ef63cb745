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
//! - [`zone`]: [`zone::Zone`], the one replica-zone harness on a PostgreSQL schema.
//! - [`faults`], [`git`], [`hubsim`], [`oauth`], [`soak`]: fixtures and drivers.

pub mod admin;
pub mod circles;
pub mod dpop;
pub mod faults;
pub mod git;
pub mod heap;
pub mod hub_process;
pub mod hubsim;
pub mod oauth;
pub mod oidc;
pub mod ports;
pub mod process;
pub mod root_process;
pub mod soak;
pub mod witness;
pub mod zone;

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
    let url = zone::create_schema(&base, &schema).await?;
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
        // Every test uses the admin token: its uses are gathered into the trail once an hour
        // here, so a test's count of events is its own (governance::roles tests them).
        cfg.audit.breakglass_window_sec = Some(3600);
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

    /// A root on a fixed free port, so that its hubs dial it again where they did after a
    /// [`TestRoot::restart`].
    pub async fn start_restartable() -> anyhow::Result<TestRoot> {
        let port = ports::free_port();
        Self::start_with(|c| c.listen = ([127, 0, 0, 1], port).into()).await
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
            self.admin().post(
                "/v1/root/mcp/sessions",
                serde_json::json!({ "target_id": format!("hub:{prefix}-{i}"), "capability_profile": "InfraOpsRead", "ttl_sec": 600 }),
            )
            .await
            .expect("a session");
        }
    }

    /// A 600 s lease on `target` with `profile`, issued over REST: `(session_id, bearer)`
    /// (panics if root refuses).
    pub async fn lease(&self, target: &str, profile: &str) -> (String, String) {
        self.lease_for(target, profile, 600).await
    }

    /// [`TestRoot::lease`] for `ttl_sec` seconds.
    pub async fn lease_for(&self, target: &str, profile: &str, ttl_sec: u64) -> (String, String) {
        let v = self
            .admin()
            .post(
                "/v1/root/mcp/sessions",
                json!({ "target_id": target, "capability_profile": profile, "ttl_sec": ttl_sec }),
            )
            .await
            .unwrap_or_else(|e| panic!("a {profile} lease on {target}: {e:#}"));
        let field = |k: &str| {
            v[k].as_str()
                .unwrap_or_else(|| panic!("{k} in {v}"))
                .to_owned()
        };
        (field("session_id"), field("token"))
    }

    /// A 600 s fleet lease on the targets `selector` names, with `profile`: root's answer
    /// (`session_id`, `token`, `lease`); panics if root refuses.
    pub async fn fleet_lease(&self, selector: &str, profile: &str) -> Value {
        self.admin()
            .post(
                "/v1/root/mcp/sessions",
                json!({ "selector": selector, "capability_profile": profile, "ttl_sec": 600 }),
            )
            .await
            .unwrap_or_else(|e| panic!("a {profile} lease on {selector}: {e:#}"))
    }

    /// An operator's `action` on lease `id` (`revoke`, `rotate`, `run-profile`) with no
    /// arguments: root's answer; panics if root refuses.
    pub async fn on_lease(&self, id: &str, action: &str) -> Value {
        self.admin()
            .post(&format!("/v1/root/mcp/sessions/{id}/{action}"), json!({}))
            .await
            .unwrap_or_else(|e| panic!("{action} of lease {id}: {e:#}"))
    }

    /// Adds operator `name` holding `roles` (`viewer`, `auditor`, `approver`, `operator`,
    /// `admin`) who may issue leases of `profiles` (`*`: all): their bearer.
    pub async fn add_operator(&self, name: &str, roles: &[&str], profiles: &[&str]) -> String {
        let added = self
            .admin_post(
                "/v1/root/operators",
                json!({ "name": name, "roles": roles, "profiles": profiles }),
            )
            .await;
        added["token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token in {added}"))
            .to_owned()
    }

    /// The bearer of a [`TestRoot::lease`].
    pub async fn bearer(&self, target: &str, profile: &str) -> String {
        self.lease(target, profile).await.1
    }

    /// GET `path` with `bearer`: root's response, whatever its status.
    pub async fn get_as(&self, bearer: impl std::fmt::Display, path: &str) -> reqwest::Response {
        self.http
            .get(self.url(path))
            .bearer_auth(bearer)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }

    /// POST `body` (as JSON) to `path` with `bearer`: root's response, whatever its status.
    pub async fn post_as(
        &self,
        bearer: impl std::fmt::Display,
        path: &str,
        body: &impl serde::Serialize,
    ) -> reqwest::Response {
        self.http
            .post(self.url(path))
            .bearer_auth(bearer)
            .json(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"))
    }

    /// The audited event `event_id` of root's trail.
    pub async fn audit_event(&self, event_id: &str) -> Value {
        self.admin()
            .get(&format!("/v1/root/mcp/audit/{event_id}"))
            .await
            .unwrap_or_else(|e| panic!("audit event {event_id}: {e:#}"))
    }

    /// The trail's events that `query` selects (`/v1/root/mcp/audit?<query>`).
    pub async fn trail(&self, query: &str) -> Vec<Value> {
        let page = self
            .admin()
            .get(&format!("/v1/root/mcp/audit?{query}"))
            .await
            .unwrap_or_else(|e| panic!("the trail for {query}: {e:#}"));
        page["events"]
            .as_array()
            .unwrap_or_else(|| panic!("events in {page}"))
            .clone()
    }

    /// The trail's events in the trace `answer` names (its `trace_id`), selected further by
    /// `query` (`tool_id=...&limit=...`).
    pub async fn trace_of(&self, answer: &Value, query: &str) -> Vec<Value> {
        let trace = answer["trace_id"]
            .as_str()
            .unwrap_or_else(|| panic!("a trace_id in {answer}"));
        self.trail(&format!("trace_id={trace}&{query}")).await
    }

    /// Fleet run `run_id`'s report once it has ended (neither running nor paused).
    pub async fn fleet_run_ended(&self, run_id: &str) -> Value {
        let path = format!("/v1/root/fleet/runs/{run_id}");
        eventually("the fleet run ends", async || {
            let r = self.admin_get(&path).await;
            let state = r["state"]
                .as_str()
                .unwrap_or_else(|| panic!("a state in {r}"));
            (!["running", "paused"].contains(&state)).then_some(r)
        })
        .await
    }

    /// Logs in to the console with the admin token, as its page does: the `name=value` cookie
    /// pair and the CSRF token.
    pub async fn console_login(&self) -> (String, String) {
        self.console_login_as(&self.admin_token()).await
    }

    /// [`TestRoot::console_login`] with `token` (an operator's).
    pub async fn console_login_as(&self, token: &str) -> (String, String) {
        let res = self
            .http
            .post(self.url("/ui/api/login"))
            .header("origin", self.handle().base_url())
            .json(&json!({ "token": token }))
            .send()
            .await
            .expect("POST /ui/api/login");
        assert_eq!(res.status(), 200, "a console login");
        let cookie = res.headers()["set-cookie"]
            .to_str()
            .expect("a cookie")
            .split(';')
            .next()
            .unwrap_or_default()
            .to_owned();
        let body: Value = res.json().await.expect("the login's JSON answer");
        let csrf = body["csrf_token"].as_str().expect("a CSRF token");
        (cookie, csrf.to_owned())
    }

    /// The admin client for this root.
    pub fn admin(&self) -> admin::Admin {
        admin::Admin::new(
            self.http.clone(),
            self.handle().base_url(),
            self.admin_token(),
        )
    }

    /// GET `path` with the admin bearer: its JSON body; panics unless root answers with a
    /// success ([`admin::Admin::get`] gives the error instead).
    pub async fn admin_get(&self, path: &str) -> Value {
        self.admin()
            .get(path)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
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

    /// POST `body` to `path` with the admin bearer: root's JSON answer; panics unless it is a
    /// success ([`admin::Admin::post`] gives the error instead).
    pub async fn admin_post(&self, path: &str, body: Value) -> Value {
        self.admin()
            .post(path, body)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// REST `/call` of `tool` with a lease bearer: `(status, body)` whatever the status
    /// (panics only if root does not answer with JSON).
    pub async fn call(&self, token: &str, tool: &str, args: Value) -> (u16, Value) {
        self.call_later(token, tool, args).await
    }

    /// [`TestRoot::call`] as a future that owns what it needs, to spawn or join while the test
    /// goes on.
    pub fn call_later(
        &self,
        token: &str,
        tool: &str,
        args: Value,
    ) -> impl std::future::Future<Output = (u16, Value)> + Send + use<> {
        let (http, url) = (self.http.clone(), self.url("/v1/root/mcp/call"));
        let (token, tool) = (token.to_owned(), tool.to_owned());
        async move {
            let res = http
                .post(url)
                .bearer_auth(&token)
                .json(&json!({ "tool_id": tool, "arguments": args }))
                .send()
                .await
                .unwrap_or_else(|e| panic!("POST /call {tool}: {e}"));
            let status = res.status().as_u16();
            let body = res
                .json()
                .await
                .unwrap_or_else(|e| panic!("POST /call {tool}: {status} without JSON: {e}"));
            (status, body)
        }
    }

    /// A write's preview over REST `/call`: its confirmation token.
    pub async fn preview(&self, token: &str, tool: &str, args: Value) -> anyhow::Result<String> {
        let (status, body) = self.call(token, tool, args).await;
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
        Ok(self
            .execute_later(token, tool, args, confirmation, key)
            .await)
    }

    /// [`TestRoot::execute`] as a future that owns what it needs (see
    /// [`TestRoot::call_later`]).
    pub fn execute_later(
        &self,
        token: &str,
        tool: &str,
        args: Value,
        confirmation: Option<&str>,
        key: &str,
    ) -> impl std::future::Future<Output = (u16, Value)> + Send + use<> {
        let mut args = args;
        args["phase"] = json!("execute");
        args["idempotency_key"] = json!(key);
        if let Some(c) = confirmation {
            args["confirmation_token"] = json!(c);
        }
        self.call_later(token, tool, args)
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

    /// A write's preview, done now, and its execute (idempotency key `key`) as a future that
    /// owns what it needs, to spawn while the test goes on.
    pub async fn write_later(
        &self,
        token: &str,
        tool: &str,
        args: Value,
        key: &str,
    ) -> impl std::future::Future<Output = (u16, Value)> + Send + use<> {
        let confirmation = self
            .preview(token, tool, args.clone())
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        self.execute_later(token, tool, args, Some(&confirmation), key)
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

/// GET `url` with `bearer`: its JSON body, whatever the status.
pub async fn get_json(
    http: &reqwest::Client,
    url: impl reqwest::IntoUrl,
    bearer: impl std::fmt::Display,
) -> Value {
    get(http, url, bearer)
        .await
        .json()
        .await
        .expect("a JSON body")
}

/// GET `url` with `bearer`: its body as text, whatever the status.
pub async fn get_text(
    http: &reqwest::Client,
    url: impl reqwest::IntoUrl,
    bearer: impl std::fmt::Display,
) -> String {
    get(http, url, bearer).await.text().await.expect("a body")
}

async fn get(
    http: &reqwest::Client,
    url: impl reqwest::IntoUrl,
    bearer: impl std::fmt::Display,
) -> reqwest::Response {
    let url = url.into_url().expect("a URL");
    http.get(url.clone())
        .bearer_auth(bearer)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
}

/// How many lines the file at `path` holds (0 when there is none): the runs an allowed test
/// counted by appending a line each time it ran.
pub fn runs(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// Hub TOML for allowed test `smoke`, which appends a line to `counter` after `sleep` seconds
/// (and, first, one to `counter`'s `.started` sibling): its runs, counted ([`runs`]).
pub fn counted_test(counter: &std::path::Path, sleep: u32) -> String {
    format!(
        "[[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"sh\", \"-c\", \"echo start >> {0}.started; sleep {sleep}; echo run >> {0}\"]\ntimeout_ms = 20000\n",
        counter.display()
    )
}

/// Every file below `dir`, at any depth (none when `dir` does not exist).
pub fn files_under(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Copies the tree at `from` into the directory `to`.
pub fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).expect("a directory to copy") {
        let entry = entry.expect("a directory entry");
        let dest = to.join(entry.file_name());
        if entry.path().is_dir() {
            std::fs::create_dir_all(&dest).expect("a directory in the copy");
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).expect("a file copied");
        }
    }
}

/// The items of the JSON array `v`; panics, showing `v`, if it is no array.
pub fn items(v: &Value) -> &Vec<Value> {
    v.as_array().unwrap_or_else(|| panic!("an array, not {v}"))
}

/// An answer's status and error code (`""` when it carries no error), to compare with a
/// refusal's: `assert_eq!(refusal(s, &b), (403, "capability_not_granted"), "{b}")`.
pub fn refusal(status: u16, body: &Value) -> (u16, &str) {
    (status, body["error"]["code"].as_str().unwrap_or_default())
}

/// Why root refuses to start on `listen` with data directory `data` (the rest defaults): its
/// error in full; panics if it starts.
pub async fn refusal_to_start(listen: &str, data: &std::path::Path) -> String {
    let cfg = RootConfig {
        listen: listen.parse().expect("a socket address"),
        data_dir: data.to_owned(),
        ..Default::default()
    };
    format!("{:#}", mcp_root::run(cfg).await.err().expect("refused"))
}

/// The message of an error answer (`{"error": {"message": ...}}`); panics without one.
pub fn error_message(body: &Value) -> &str {
    body["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("an error message in {body}"))
}

/// Runs `cmd` to its end; its output, or a panic with its stderr unless it succeeded.
pub fn run_ok(cmd: &mut std::process::Command) -> std::process::Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// An rmcp client connected to `url` with `token` as its bearer.
pub async fn mcp_client(
    url: &str,
    token: &str,
) -> anyhow::Result<RunningService<rmcp::RoleClient, ()>> {
    Ok(().serve(mcp_transport(url, token)).await?)
}

/// The streamable HTTP transport to `url` with `token` as its bearer.
fn mcp_transport(url: &str, token: &str) -> StreamableHttpClientTransport<reqwest::Client> {
    init_crypto();
    StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_string())
            .auth_header(token.to_string()),
    )
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

/// `hub.get_status` called through `client`: its structured result; panics on an error
/// result.
pub async fn hub_status(client: &RunningService<rmcp::RoleClient, ()>) -> Value {
    let res = client
        .call_tool(rmcp::model::CallToolRequestParams::new("hub.get_status"))
        .await
        .expect("hub.get_status");
    assert_ne!(res.is_error, Some(true), "{res:?}");
    res.structured_content.expect("a structured result")
}

/// An MCP client on the stateless lifecycle of protocol 2026-07-28: `server/discover`, then
/// self-contained requests without a transport session.
pub async fn mcp_client_stateless(
    url: &str,
    token: &str,
) -> anyhow::Result<RunningService<rmcp::RoleClient, ()>> {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    let transport = mcp_transport(url, token);
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
    client_install(
        "MCP_TEST_PYTHON",
        "py/bin/python",
        "python3 -m venv target/py && target/py/bin/pip install mcp==2.3.0",
    )
}

/// The Claude Code CLI: `MCP_TEST_CLAUDE`, or the one `.ci/run` installs from npm into
/// `target/npm`.
pub fn claude_code() -> anyhow::Result<PathBuf> {
    client_install(
        "MCP_TEST_CLAUDE",
        "npm/node_modules/.bin/claude",
        "npm install --prefix target/npm @anthropic-ai/claude-code@2.1.197",
    )
}

/// A client of another implementation: the path `env` names, or `path` under the target
/// directory, where `.ci/run` puts it with `install`.
fn client_install(env: &str, path: &str, install: &str) -> anyhow::Result<PathBuf> {
    if let Ok(p) = std::env::var(env) {
        return Ok(PathBuf::from(p));
    }
    let at = target_dir()?.join(path);
    anyhow::ensure!(
        at.exists(),
        "{} is missing: run `{install}` (as .ci/run does) or set {env}",
        at.display()
    );
    Ok(at)
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

/// `req` as a WebSocket upgrade request (the headers a hub's dial sends, with a fixed key).
pub fn websocket_upgrade(req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    req.header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
}

/// The next message on the WebSocket `ws`; panics if none comes `within`, the socket ended or
/// failed.
pub async fn next_frame<S>(
    ws: &mut S,
    within: std::time::Duration,
) -> tokio_tungstenite::tungstenite::Message
where
    S: futures::Stream<
            Item = Result<
                tokio_tungstenite::tungstenite::Message,
                tokio_tungstenite::tungstenite::Error,
            >,
        > + Unpin,
{
    use futures::StreamExt;
    tokio::time::timeout(within, ws.next())
        .await
        .expect("a message in time")
        .expect("the socket is open")
        .expect("a message")
}

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
            .admin().post("/v1/root/hubs", json!({ "target_id": target_id, "environment": environment, "subnet_id": "subnet-a" }))
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

    /// A hub for `target` whose configuration `config` writes given a run counter (`runs.txt`
    /// in a directory of its own): the directory (the counter lives as long as it does), the
    /// counter and the hub.
    pub async fn start_counting_hub(
        &self,
        target: &str,
        config: impl FnOnce(&std::path::Path) -> String,
    ) -> (tempfile::TempDir, PathBuf, TestHub) {
        let dir = tempfile::tempdir().expect("a directory for the counter");
        let counter = dir.path().join("runs.txt");
        let hub = self
            .start_hub(target, &config(&counter))
            .await
            .unwrap_or_else(|e| panic!("hub {target}: {e:#}"));
        (dir, counter, hub)
    }

    /// Hubs `ids`, each serving a [`counted_test`] of `sleep` seconds: the directory of their
    /// counters (`<id>.txt`), and the hubs.
    pub async fn start_counted_hubs(
        &self,
        ids: &[&str],
        sleep: u32,
    ) -> (tempfile::TempDir, Vec<TestHub>) {
        let dir = tempfile::tempdir().expect("a directory for the counters");
        let mut hubs = Vec::new();
        for id in ids {
            let counter = dir.path().join(format!("{id}.txt"));
            let hub = self.start_hub(id, &counted_test(&counter, sleep)).await;
            hubs.push(hub.unwrap_or_else(|e| panic!("hub {id}: {e:#}")));
        }
        (dir, hubs)
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
