//! The fault battery: what root and hubs do when a part fails underneath them, with real
//! processes wherever the fault needs one (SIGKILL, a restart, a full disk).
//!
//! - The audit store failing (a full disk on a tmpfs of its own; skipped, saying so, where
//!   this process may not mount one): every call is refused with `audit_unavailable` rather
//!   than run unrecorded, `/readyz` and the log say so, and root recovers by itself when space
//!   returns, recording the outage in the trail.
//! - Slow and stalled clients (partial request heads, stalled bodies, clients that never read)
//!   against small connection limits: each is ended by its bound while others are served.
//! - A hub process SIGKILLed with calls in flight (`target_offline` at once, audited, back
//!   after a restart; a read whose contract retries is answered by the restarted hub within
//!   its deadline, its event listing the failed attempts); a network cut between hub and root through a proxy the test pauses
//!   (calls end at their deadline, root drops the silent hub and withdraws its tools, the hub
//!   comes back by itself); an idle hub keeps its connection.
//! - Root SIGKILLed under load and restarted on the same data (SQLite; PostgreSQL with
//!   `MCP_TEST_DATABASE_URL`): every answered call's event, the lease, a pending approval and
//!   its confirmation survive, hubs reconnect by themselves, calls in flight fail at once.
//! - Adapters that hang, flood their output or panic: deadlines, process-group kills, output
//!   caps, supervised restarts within a budget and the capability withdrawn past it.
//! - Hub clocks off by 20 s either way (absorbed) and by 5 minutes (refused with
//!   `clock_skew`, audited).
//!
//! - Actors that panic, on root and on the hub: `actors.rs`.
//!
//! Every wait is bounded by a generous deadline; no assertion depends on how fast a busy
//! machine is.

use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::listed_tools;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcp_tests::admin::Admin;
use mcp_tests::hub_process::HubProcess;
use mcp_tests::ports;
use mcp_tests::process::Proc;
use mcp_tests::{TestHub, eventually, mcp_client, workspace_bin};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

/// How long any single wait in these tests may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

/// One `mcp-root serve` process with its config, data directory and log file.
pub(crate) struct RootProc {
    pub(crate) base: String,
    admin: Admin,
    http: reqwest::Client,
    pub(crate) proc: Proc,
}

impl RootProc {
    /// Starts `mcp-root serve` on `127.0.0.1:port` with `data` and `extra` TOML appended to
    /// its config, and waits until it answers `/healthz`. Port 0 lets root choose (the address
    /// it announces is read back); a root started again on the same data is given the port it
    /// had ([`RootProc::port`]), so its hubs find it again.
    pub(crate) async fn start(
        dir: &Path,
        name: &str,
        port: u16,
        data: &Path,
        extra: &str,
    ) -> RootProc {
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "listen = \"127.0.0.1:{port}\"\ndata_dir = \"{}\"\n{extra}\n",
                data.display()
            ),
        )
        .unwrap();
        let log = dir.join(format!("{name}.log"));
        let mut proc = Proc::spawn(
            &format!("mcp-root {name}"),
            Command::new(workspace_bin("mcp-root").unwrap())
                .args(["serve", "--config"])
                .arg(&config)
                .env("RUST_LOG", "info"),
            log,
        );
        let base = if port == 0 {
            ports::announced_root_url(&mut proc, PATIENCE).await
        } else {
            format!("http://127.0.0.1:{port}")
        };
        let http = mcp_tests::http_client();
        let start = Instant::now();
        while http.get(format!("{base}/healthz")).send().await.is_err() {
            assert!(
                start.elapsed() < PATIENCE,
                "root did not start:\n{}",
                proc.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let token = std::fs::read_to_string(data.join("admin.token"))
            .unwrap()
            .trim()
            .to_owned();
        RootProc {
            admin: Admin::new(http.clone(), &base, token),
            base,
            http,
            proc,
        }
    }

    /// The port it listens on.
    pub(crate) fn port(&self) -> u16 {
        ports::port_of(&self.base)
    }

    fn log_text(&self) -> String {
        self.proc.log_text()
    }

    pub(crate) async fn admin_get(&self, path: &str) -> Value {
        self.admin.get(path).await.unwrap()
    }

    async fn admin_post(&self, path: &str, body: Value) -> Value {
        self.admin.post(path, body).await.unwrap()
    }

    /// Enrols `target` (environment `test`); the hub token.
    pub(crate) async fn enroll(&self, target: &str) -> String {
        let v = self
            .admin_post(
                "/v1/root/hubs",
                json!({"target_id": target, "environment": "test", "subnet_id": "subnet-a"}),
            )
            .await;
        v["token"].as_str().unwrap().to_owned()
    }

    /// A lease on `target` with `profile`: `(session id, bearer)`.
    pub(crate) async fn lease(&self, target: &str, profile: &str) -> (String, String) {
        let v = self
            .admin_post(
                "/v1/root/mcp/sessions",
                json!({"target_id": target, "capability_profile": profile, "ttl_sec": 3600}),
            )
            .await;
        (
            v["session_id"].as_str().unwrap().to_owned(),
            v["token"].as_str().unwrap().to_owned(),
        )
    }

    /// REST `/call`: `(status, Retry-After, body)`.
    async fn call(&self, bearer: &str, tool: &str, args: Value) -> (u16, Option<String>, Value) {
        let res = self
            .http
            .post(format!("{}/v1/root/mcp/call", self.base))
            .bearer_auth(bearer)
            .json(&json!({"tool_id": tool, "arguments": args}))
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let retry = res
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        (status, retry, res.json().await.unwrap())
    }

    /// Every audit event of `actor` (`lease:<id>`, `operator`, `root`), oldest first.
    async fn audit_of(&self, actor: &str) -> Vec<Value> {
        let mut events = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut path = format!("/v1/root/mcp/audit?actor={actor}&order=asc&limit=1000");
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let page = self.admin_get(&path).await;
            events.extend(items(&page["events"]).iter().cloned());
            match page["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return events,
            }
        }
    }

    /// `GET /readyz`: `(status, body)`.
    async fn readyz(&self) -> (u16, String) {
        let res = self
            .http
            .get(format!("{}/readyz", self.base))
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.text().await.unwrap())
    }
}

/// A tmpfs of a fixed size mounted for one test; unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a `size` tmpfs on `at`; `None` where this process may not mount (no root or
    /// CAP_SYS_ADMIN, or no `mount` binary).
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).ok()?;
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Moves everything in the SQLite WAL of `db` into the database and truncates the WAL to
/// nothing (best effort: a checkpoint that cannot finish leaves it as it was).
async fn checkpoint_truncate(db: &Path) {
    use sqlx::Connection;
    let Ok(mut conn) = sqlx::SqliteConnection::connect(&format!("sqlite:{}", db.display())).await
    else {
        return;
    };
    let _ = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut conn)
        .await;
    let _ = conn.close().await;
}

/// Writes `path` until the file system is full.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let block = vec![0x5au8; 64 * 1024];
    loop {
        match f.write(&block) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    let _ = f.sync_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_stops_every_call_until_the_audit_trail_can_be_written_again() {
    mcp_tests::init_crypto();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let Some(_disk) = Tmpfs::mount(&data, "16m") else {
        eprintln!(
            "SKIPPED a_full_disk_stops_every_call_until_the_audit_trail_can_be_written_again: \
             cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)"
        );
        return;
    };
    // SQLite whatever MCP_TEST_ALL_ON_POSTGRES says: the fault is this file system.
    let root = RootProc::start(dir.path(), "root", 0, &data, "").await;
    let target = "hub:faults-disk";
    let hub_token = root.enroll(target).await;
    let hub = TestHub::start(&root.base, target, &hub_token, "")
        .await
        .unwrap();
    let (session, bearer) = root.lease(target, "InfraOpsRead").await;

    // Every call answered with a result names its committed event.
    let mut answered: Vec<String> = Vec::new();
    for _ in 0..3 {
        let (status, _, body) = root.call(&bearer, "hub.get_status", json!({})).await;
        assert_eq!(status, 200, "{body}");
        answered.push(body["event_id"].as_str().unwrap().to_owned());
    }

    // The disk fills up. SQLite would go on writing into the space its WAL already has until
    // a commit needs more; the WAL is emptied first so that the next commit needs space.
    // Either way the call whose event cannot be committed is withheld.
    checkpoint_truncate(&data.join("root.db")).await;
    let filler = data.join("filler");
    fill(&filler);
    let mut withheld = 0u64;
    let mut refused = 0u64;
    let first_failure = loop {
        assert!(answered.len() < 900, "the full disk never failed a commit");
        let (status, retry, body) = root.call(&bearer, "hub.get_status", json!({})).await;
        if status == 200 {
            answered.push(body["event_id"].as_str().unwrap().to_owned());
            continue;
        }
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["code"], "audit_unavailable", "{body}");
        assert_eq!(body["error"]["retryable"], true, "{body}");
        assert_eq!(retry.as_deref(), Some("1"));
        assert!(body.get("event_id").is_none(), "no event to name: {body}");
        break error_message(&body).to_owned();
    };
    if first_failure.contains("withheld") {
        withheld += 1;
    } else {
        assert!(first_failure.contains("refuses calls"), "{first_failure}");
        refused += 1;
    }

    // From now on nothing runs: refused before policy, over REST and over MCP.
    for _ in 0..5 {
        let (status, retry, body) = root.call(&bearer, "hub.get_status", json!({})).await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["code"], "audit_unavailable", "{body}");
        let message = error_message(&body);
        assert!(
            message.contains("root refuses calls until it can, so nothing runs unrecorded"),
            "{message}"
        );
        assert_eq!(retry.as_deref(), Some("1"));
        refused += 1;
    }
    let client = mcp_client(&format!("{}/mcp", root.base), &bearer)
        .await
        .unwrap();
    let err = client
        .call_tool(CallToolRequestParams::new("hub.get_status"))
        .await
        .expect_err("refused as a JSON-RPC error: there is no event to name");
    let rmcp::service::ServiceError::McpError(data) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(
        data.code,
        rmcp::model::ErrorCode::INTERNAL_ERROR,
        "{data:?}"
    );
    let detail = data.data.as_ref().unwrap();
    assert_eq!(detail["code"], "audit_unavailable", "{data:?}");
    assert_eq!(detail["retryable"], true);
    refused += 1;

    // Said on /readyz (without the cause: it is public) and in the log (with it).
    let (status, body) = root.readyz().await;
    assert_eq!(status, 503, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], "audit_unavailable", "{body}");
    let log = root.log_text();
    assert!(
        log.contains("the audit trail cannot be written; refusing every call until it can"),
        "{log}"
    );
    assert!(log.contains("full"), "the log names the cause: {log}");

    // Space returns: root notices by itself and records the outage.
    std::fs::remove_file(&filler).unwrap();
    let start = Instant::now();
    while root.readyz().await.0 != 200 {
        assert!(
            start.elapsed() < PATIENCE,
            "/readyz did not recover:\n{}",
            root.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..3 {
        let (status, _, body) = root.call(&bearer, "hub.get_status", json!({})).await;
        assert_eq!(status, 200, "{body}");
        answered.push(body["event_id"].as_str().unwrap().to_owned());
    }
    assert!(
        root.log_text()
            .contains("the audit trail is writable again; calls are accepted"),
        "{}",
        root.log_text()
    );

    // The hub ran exactly the calls whose events were committed (plus a withheld one, whose
    // result never left root); the refused ones never reached it.
    // (`retained` counts every call the hub finished, up to 1000.)
    let (status, _, activity) = root
        .call(&bearer, "hub.get_activity_log", json!({"limit": 1}))
        .await;
    assert_eq!(status, 200, "{activity}");
    let ran = activity["result"]["retained"].as_u64().unwrap();
    assert_eq!(
        ran,
        answered.len() as u64 + withheld,
        "the hub ran the answered calls and the withheld one only: {activity}"
    );

    // The trail holds one event per answered call, in one verified chain, plus the outage.
    answered.push(activity["event_id"].as_str().unwrap().to_owned());
    let events = root.audit_of(&format!("lease:{session}")).await;
    let ids: Vec<&str> = events
        .iter()
        .map(|e| e["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, answered, "one event per answered call, in order");
    let outage = root.audit_of("root").await;
    assert_eq!(outage.len(), 1, "{outage:?}");
    assert_eq!(outage[0]["tool_id"], "admin.audit.outage");
    assert_eq!(outage[0]["status"], "error");
    assert_eq!(outage[0]["error"]["code"], "audit_unavailable");
    assert_eq!(outage[0]["request"]["refused_calls"], refused, "{outage:?}");
    let verify = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(verify["ok"], true, "{verify}");

    hub.stop().await;
}

/// Reads from `s` until the peer closes it (EOF or reset); `false` if it stays open past
/// [`PATIENCE`].
async fn closed_by_peer(s: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 64 * 1024];
    let end = tokio::time::timeout(PATIENCE, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    end.is_ok()
}

/// Everything the peer sends until it closes the connection (`None`: it never closed).
async fn answer_then_close(s: &mut tokio::net::TcpStream) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut all = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    tokio::time::timeout(PATIENCE, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .ok()?;
    Some(String::from_utf8_lossy(&all).into_owned())
}

/// `mcp_root_connection_timeouts_total{kind}` from root's metrics.
pub(crate) async fn timeouts(root: &mcp_tests::TestRoot, kind: &str) -> u64 {
    root.metric(&format!(
        "mcp_root_connection_timeouts_total{{kind=\"{kind}\"}}"
    ))
    .await
    .unwrap()
    .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_clients_are_bounded_by_limits_and_others_are_still_served() {
    use tokio::io::AsyncWriteExt;
    const MAX: usize = 24;
    let root = mcp_tests::TestRoot::start_with(|c| {
        c.limits.max_connections = MAX;
        c.limits.header_read_timeout_ms = 1_000;
        c.limits.body_read_timeout_ms = 1_000;
        c.limits.write_stall_timeout_ms = 1_000;
    })
    .await
    .unwrap();
    let hub = root.start_hub("hub:faults-slow", "").await.unwrap();
    let bearer = root.bearer("hub:faults-slow", "InfraOpsRead").await;
    let addr = root.handle().addr;
    let before = (
        timeouts(&root, "header").await,
        timeouts(&root, "body").await,
        timeouts(&root, "write_stall").await,
    );

    // Every slot taken by clients that never finish a request head, and more waiting behind
    // them, some that send nothing at all.
    let mut slow = Vec::new();
    for i in 0..MAX + 8 {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        if i % 4 != 0 {
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                .await
                .unwrap();
        }
        slow.push(s);
    }
    // A body that stops after a few bytes.
    let mut stalled_body = tokio::net::TcpStream::connect(addr).await.unwrap();
    stalled_body
        .write_all(
            format!(
                "POST /v1/root/mcp/call HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {bearer}\r\n\
                 Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"tool_id\":"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    // A client that asks for large answers and never reads them (a small receive buffer, so
    // root's writes stall soon).
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut deaf = socket.connect(addr).await.unwrap();
    let ask = format!(
        "GET /v1/root/mcp/contracts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n",
        root.admin_token()
    );
    let pipelined = ask.repeat(400);
    let writer = tokio::spawn(async move {
        // Stops when root closes the connection (the write fails) or everything is sent.
        let _ = deaf.write_all(pipelined.as_bytes()).await;
        deaf
    });

    // Others are still served: REST, MCP and a routed call through the hub.
    let served = tokio::time::timeout(PATIENCE, async {
        let (status, body) = root.call(&bearer, "hub.get_status", json!({})).await;
        assert_eq!(status, 200, "{body}");
        let client = mcp_client(&root.mcp_url(), &bearer).await.unwrap();
        mcp_tests::hub_status(&client).await;
    })
    .await;
    assert!(served.is_ok(), "a well-behaved client was not served");

    // Each stalled connection was ended by root, by its bound.
    for s in &mut slow {
        assert!(
            closed_by_peer(s).await,
            "a stalled head was never timed out"
        );
    }
    let answer = answer_then_close(&mut stalled_body)
        .await
        .expect("a stalled body was never timed out");
    assert!(
        answer.starts_with("HTTP/1.1 408") && answer.contains("sent nothing for 1000 ms"),
        "a stalled body is told why: {answer}"
    );
    // Root gives up on the client that reads nothing (counted), then closes its connection.
    eventually(
        "root to give up writing to a client that never reads",
        async || (timeouts(&root, "write_stall").await > before.2).then_some(()),
    )
    .await;
    let mut deaf = tokio::time::timeout(PATIENCE, writer)
        .await
        .expect("root stopped taking the unread requests")
        .unwrap();
    assert!(
        closed_by_peer(&mut deaf).await,
        "a client that never reads kept its connection"
    );
    let after = (
        timeouts(&root, "header").await,
        timeouts(&root, "body").await,
        timeouts(&root, "write_stall").await,
    );
    assert!(
        after.0 >= before.0 + (MAX + 8) as u64,
        "every stalled head counted: {before:?} → {after:?}"
    );
    assert!(after.1 > before.1, "the stalled body counted: {after:?}");
    assert!(after.2 > before.2, "the stalled write counted: {after:?}");
    // The hub's WebSocket lived through all of it.
    assert!(hub.handle().is_connected());
    hub.stop().await;
    root.stop().await;
}

/// One `mcp-hub run` process for `target`, dialing `root_url`, with `extra` TOML at the top of
/// its config (state in `dir/<name>-state`, log in `dir/<name>.log`). Started again with the
/// same arguments it is the same hub (same state directory and token).
fn start_hub(dir: &Path, target: &str, token: &str, root_url: &str, extra: &str) -> Proc {
    HubProcess::new(dir, target, token, &[root_url])
        .write_scope("test-only")
        .extra(extra)
        .spawn()
}

/// [`start_hub`] running `mcp-hub-faults`: the hub with the fault fixture
/// (`mcp_tests::faults`) embedded, for a root that loads its contract.
fn start_fault_hub(dir: &Path, target: &str, token: &str, root_url: &str, extra: &str) -> Proc {
    HubProcess::new(dir, target, token, &[root_url])
        .bin("mcp-hub-faults")
        .write_scope("test-only")
        .extra(extra)
        .spawn()
}

/// `target` as root's hub list shows it.
async fn hub_entry(http: &reqwest::Client, base: &str, admin: &str, target: &str) -> Value {
    let list: Value = mcp_tests::get_json(http, format!("{base}/v1/root/hubs"), admin).await;
    items(&list["targets"])
        .iter()
        .find(|t| t["target_id"] == target)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Waits until `target` is online (connected, publishing) in root's hub list.
async fn wait_online(http: &reqwest::Client, base: &str, admin: &str, target: &str) {
    eventually(&format!("{target} to be online"), async || {
        (hub_entry(http, base, admin, target).await["status"] == "online").then_some(())
    })
    .await;
}

/// Waits until root has `n` calls sent to `target` and not yet answered.
async fn wait_pending(http: &reqwest::Client, base: &str, admin: &str, target: &str, n: u64) {
    eventually(&format!("{n} calls pending on {target}"), async || {
        let e = hub_entry(http, base, admin, target).await;
        (e["pressure"]["pending_calls"].as_u64() == Some(n)).then_some(())
    })
    .await;
}

/// An MCP tool call's structured answer: the result, or `{"error": …}` for a tool error; with
/// the event id from `_meta`.
async fn mcp_call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &str,
    args: Value,
) -> (Value, String) {
    let res = client
        .call_tool(
            CallToolRequestParams::new(tool.to_owned())
                .with_arguments(args.as_object().cloned().unwrap()),
        )
        .await
        .unwrap();
    let event_id = res
        .meta
        .as_ref()
        .and_then(|m| m.get("event_id"))
        .and_then(Value::as_str)
        .unwrap()
        .to_owned();
    (res.structured_content.unwrap_or(Value::Null), event_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_killed_mid_call_fails_its_calls_with_target_offline_and_comes_back() {
    let root = mcp_tests::TestRoot::start_with(mcp_tests::faults::with_contract)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = "hub:faults-kill";
    let token = root.enroll(target, "test").await.unwrap();
    let base = root.handle().base_url();
    let admin = root.admin_token();
    let extra = "";
    let mut hub = start_fault_hub(dir.path(), target, &token, &base, extra);
    wait_online(&root.http, &base, &admin, target).await;
    let bearer = root.bearer(target, "InfraOpsRead").await;
    let client = mcp_client(&root.mcp_url(), &bearer).await.unwrap();

    // Two calls the hub holds (REST and MCP), then SIGKILL.
    let rest =
        tokio::spawn(root.call_later(&bearer, mcp_tests::faults::TOOL, json!({"fault": "hang"})));
    let mcp = mcp_call(&client, mcp_tests::faults::TOOL, json!({"fault": "hang"}));
    let kill = async {
        wait_pending(&root.http, &base, &admin, target, 2).await;
        hub.kill();
    };
    let ((answer, mcp_event), ()) = tokio::join!(mcp, kill);
    let (status, body) = rest.await.unwrap();

    // Both end at once with target_offline (not at their 5 s deadline, not hanging).
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "target_offline", "{body}");
    assert_eq!(body["error"]["retryable"], true);
    assert!(
        error_message(&body).contains("connection to target `hub:faults-kill` ended"),
        "{body}"
    );
    assert_eq!(answer["error"]["code"], "target_offline", "{answer}");
    // Each is audited with that outcome.
    for event_id in [body["event_id"].as_str().unwrap(), mcp_event.as_str()] {
        let ev = root.audit_event(event_id).await;
        assert_eq!(ev["status"], "error", "{ev}");
        assert_eq!(ev["error"]["code"], "target_offline", "{ev}");
        assert_eq!(ev["policy_decision"]["decision"], "allow", "{ev}");
    }
    // While it is gone: offline, its tools withdrawn, a call refused at once.
    eventually("the hub to be offline", async || {
        (hub_entry(&root.http, &base, &admin, target).await["status"] == "offline").then_some(())
    })
    .await;
    assert!(
        !listed_tools(&client)
            .await
            .contains(&"hub.get_status".to_owned())
    );
    let (status, body) = root.call(&bearer, "hub.get_status", json!({})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (503, &json!("target_offline")),
        "{body}"
    );

    // The same hub started again: back online, calls succeed on the same lease.
    let _hub = start_fault_hub(dir.path(), target, &token, &base, extra);
    wait_online(&root.http, &base, &admin, target).await;
    let (status, body) = root.call(&bearer, "hub.get_status", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (answer, _) = mcp_call(&client, "hub.get_status", json!({})).await;
    assert_eq!(answer["target_id"], target, "{answer}");
    let verify = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(verify["ok"], true, "{verify}");
    root.stop().await;
}

/// A read whose contract retries on `target_offline`, held by a hub that is SIGKILLed and
/// started again: root tries again within the call's deadline and the restarted hub answers;
/// the caller sees one success, and its one event lists the failed attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_under_a_killed_hub_is_retried_and_answered_when_the_hub_is_back() {
    let root = mcp_tests::TestRoot::start_with(mcp_tests::faults::with_retrying_contract)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = "hub:faults-retry";
    let token = root.enroll(target, "test").await.unwrap();
    let base = root.handle().base_url();
    let admin = root.admin_token();
    let mut hub = start_fault_hub(dir.path(), target, &token, &base, "");
    wait_online(&root.http, &base, &admin, target).await;
    let bearer = root.bearer(target, "InfraOpsRead").await;
    let call = tokio::spawn(root.call_later(
        &bearer,
        mcp_tests::faults::TOOL,
        json!({"fault": "hang_once"}),
    ));
    wait_pending(&root.http, &base, &admin, target, 1).await;
    // Root has sent the call; killed before its adapter ran, the restarted hub would hang on
    // the retry instead. The adapter's marker says it is hanging now.
    let marker = dir
        .path()
        .join(format!("{}-state", target.replace(':', "_")))
        .join("test-fault-hung");
    let started = Instant::now();
    while !marker.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the adapter never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    hub.kill();
    let _hub = start_fault_hub(dir.path(), target, &token, &base, "");
    let (status, body) = call.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"], json!({"ok": true}), "{body}");
    let event = root.audit_event(body["event_id"].as_str().unwrap()).await;
    assert_eq!(event["status"], "ok", "{event}");
    let retried = items(&event["retried"]);
    assert!(!retried.is_empty(), "{event}");
    assert!(
        retried.iter().all(|r| r["code"] == "target_offline"),
        "{event}"
    );
    assert_eq!(retried[0]["attempt"], 1, "{event}");
    let verify = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(verify["ok"], true, "{verify}");
    root.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_hub_keeps_its_connection_past_the_silence_limit() {
    // Both sides drop a peer silent for three heartbeat intervals (15 s in tests); an idle connection
    // must not look silent: root sends heartbeats too.
    let root = mcp_tests::TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:faults-idle", "").await.unwrap();
    let bearer = root.bearer("hub:faults-idle", "InfraOpsRead").await;
    let since = |body: Value| body["result"]["connected_since"].clone();
    let (_, first) = root.call(&bearer, "hub.get_status", json!({})).await;
    assert!(since(first.clone()).is_string(), "{first}");
    tokio::time::sleep(root.handle().app.hubs.heartbeat * 4).await;
    let (_, later) = root.call(&bearer, "hub.get_status", json!({})).await;
    assert_eq!(since(later), since(first), "the hub reconnected while idle");
    hub.stop().await;
    root.stop().await;
}

/// The error code of a REST answer, `ok` without one.
fn body_code(body: &Value) -> String {
    body["error"]["code"].as_str().unwrap_or("ok").to_owned()
}

/// A TCP proxy the test can cut and restore: while cut no byte moves either way on any
/// connection, old or new (packets vanish and nobody is told, as in a network partition).
struct Proxy {
    addr: std::net::SocketAddr,
    open: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: std::net::SocketAddr) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (open, rx) = tokio::sync::watch::channel(true);
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((down, _)) = listener.accept().await {
                let mut rx = rx.clone();
                conns.spawn(async move {
                    if !wait_open(&mut rx).await {
                        return;
                    }
                    let Ok(up) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (dr, dw) = down.into_split();
                    let (ur, uw) = up.into_split();
                    tokio::join!(pipe(dr, uw, rx.clone()), pipe(ur, dw, rx));
                });
            }
        });
        Proxy { addr, open, task }
    }

    fn cut(&self) {
        self.open.send_replace(false);
    }

    fn restore(&self) {
        self.open.send_replace(true);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits while the proxy is cut; `false` once the proxy is gone.
async fn wait_open(rx: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    while !*rx.borrow_and_update() {
        if rx.changed().await.is_err() {
            return false;
        }
    }
    true
}

/// Copies `from` to `to` while the proxy is open.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut open: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if !wait_open(&mut open).await {
            return;
        }
        let n = tokio::select! {
            n = from.read(&mut buf) => n,
            // Cut meanwhile: stop reading (a pending read is cancel-safe).
            _ = open.changed() => continue,
        };
        let n = match n {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        if !wait_open(&mut open).await || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_cut_between_hub_and_root_times_calls_out_and_heals_when_restored() {
    let root = mcp_tests::TestRoot::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = "hub:faults-net";
    let token = root.enroll(target, "test").await.unwrap();
    let base = root.handle().base_url();
    let admin = root.admin_token();
    let proxy = Proxy::start(root.handle().addr).await;
    // A health check that takes a moment, so a call is in flight when the network goes.
    let extra = "[[skill.healthchecks]]\nname = \"slow\"\nkind = \"command\"\n\
                 argv = [\"sleep\", \"2\"]\ntimeout_ms = 10000\n";
    let _hub = start_hub(
        dir.path(),
        target,
        &token,
        &format!("http://{}", proxy.addr),
        extra,
    );
    wait_online(&root.http, &base, &admin, target).await;
    let (session, bearer) = root.lease(target, "InfraOpsRead").await;
    let client = mcp_client(&root.mcp_url(), &bearer).await.unwrap();
    assert!(
        listed_tools(&client)
            .await
            .contains(&"hub.run_healthchecks".to_owned())
    );
    let (status, body) = root.call(&bearer, "hub.run_healthchecks", json!({})).await;
    assert_eq!(status, 200, "{body}");

    // The network goes while a call is in flight; another call starts during the cut.
    let started = Instant::now();
    let in_flight = {
        let (http, url, bearer) = (
            root.http.clone(),
            root.url("/v1/root/mcp/call"),
            bearer.clone(),
        );
        tokio::spawn(async move {
            let res = http
                .post(url)
                .bearer_auth(bearer)
                .json(&json!({"tool_id": "hub.run_healthchecks", "arguments": {}}))
                .send()
                .await
                .unwrap();
            (
                res.status().as_u16(),
                res.json::<Value>().await.unwrap(),
                started.elapsed(),
            )
        })
    };
    wait_pending(&root.http, &base, &admin, target, 1).await;
    proxy.cut();
    let during = Instant::now();
    let (status, body) = root.call(&bearer, "hub.get_status", json!({})).await;
    // Root still believes the hub is there: the call is routed and ends at its 5 s deadline.
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["code"], "timeout", "{body}");
    assert!(
        during.elapsed() < Duration::from_secs(5 + 20),
        "within its deadline: {:?}",
        during.elapsed()
    );
    let (status, in_flight_answer, took) = in_flight.await.unwrap();
    let body = &in_flight_answer;
    // The in-flight one ends at its own 15 s deadline, or earlier with target_offline when
    // root gives up on the silent hub first.
    assert!(
        matches!(
            (status, body["error"]["code"].as_str()),
            (504, Some("timeout")) | (503, Some("target_offline"))
        ),
        "{status} {body}"
    );
    assert!(
        took < Duration::from_secs(15 + 20),
        "within its deadline: {took:?}"
    );

    // Root drops the silent hub: offline in the list, its tools gone from tools/list, calls
    // refused at once.
    eventually("root to drop the silent hub", async || {
        (hub_entry(&root.http, &base, &admin, target).await["status"] == "offline").then_some(())
    })
    .await;
    let tools = listed_tools(&client).await;
    assert!(
        !tools.contains(&"hub.get_status".to_owned())
            && !tools.contains(&"hub.run_healthchecks".to_owned()),
        "the hub's tools are withdrawn during the gap: {tools:?}"
    );
    let (status, body) = root.call(&bearer, "hub.get_status", json!({})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (503, &json!("target_offline")),
        "{body}"
    );

    // Restored: the hub reconnects by itself, its tools return, calls succeed.
    proxy.restore();
    wait_online(&root.http, &base, &admin, target).await;
    eventually("hub tools back in tools/list", async || {
        listed_tools(&client)
            .await
            .contains(&"hub.get_status".to_owned())
            .then_some(())
    })
    .await;
    let (status, body) = root.call(&bearer, "hub.get_status", json!({})).await;
    assert_eq!(status, 200, "{body}");

    // Every call is in the trail with the outcome its caller saw.
    let events = root
        .trail(&format!("actor=lease:{session}&order=asc&limit=100"))
        .await;
    let mut outcomes: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["tool_id"].as_str().unwrap().to_owned(),
                e["error"]["code"].as_str().unwrap_or("ok").to_owned(),
            )
        })
        .collect();
    outcomes.sort();
    let in_flight_code = body_code(&in_flight_answer);
    let mut expected: Vec<(String, String)> = [
        ("hub.run_healthchecks", "ok"),
        ("hub.run_healthchecks", in_flight_code.as_str()),
        ("hub.get_status", "timeout"),
        ("hub.get_status", "target_offline"),
        ("hub.get_status", "ok"),
    ]
    .iter()
    .map(|(t, c)| ((*t).to_owned(), (*c).to_owned()))
    .collect();
    expected.sort();
    assert_eq!(outcomes, expected);
    root.stop().await;
}

/// Does not resume a broken response stream: the client's call fails as soon as the stream
/// does.
#[derive(Debug)]
struct NoResume;

impl rmcp::transport::common::client_side_sse::SseRetryPolicy for NoResume {
    fn retry(&self, _current_times: usize) -> Option<Duration> {
        None
    }
}

/// An rmcp client that gives up on a broken response stream at once (the default keeps
/// resuming it, with backoff, for as long as it takes).
async fn mcp_client_without_resumption(
    url: &str,
    bearer: &str,
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned())
        .auth_header(bearer.to_owned());
    config.retry_config = std::sync::Arc::new(NoResume);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

/// What a client saw of one call made while root was being killed: answered (with its event),
/// or ended by the connection.
enum Seen {
    Answered(String),
    Cut,
}

/// Calls `hub.get_status` over REST in a loop until `stop`; what each call saw.
async fn keep_calling(
    base: String,
    bearer: String,
    stop: tokio::sync::watch::Receiver<bool>,
    answers: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> Vec<Seen> {
    let http = mcp_tests::http_client();
    let mut seen = Vec::new();
    while !*stop.borrow() {
        let res = http
            .post(format!("{base}/v1/root/mcp/call"))
            .bearer_auth(&bearer)
            .json(&json!({"tool_id": "hub.get_status", "arguments": {}}))
            .timeout(PATIENCE)
            .send()
            .await;
        // Any answer with a body names its event (a refusal too, e.g. `target_offline`).
        let body = match res {
            Ok(r) => r.json::<Value>().await.ok(),
            Err(_) => None,
        };
        match body.and_then(|b| b["event_id"].as_str().map(str::to_owned)) {
            Some(id) => {
                seen.push(Seen::Answered(id));
                answers.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            None => {
                seen.push(Seen::Cut);
                // Root is down: stop hammering the closed port.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    seen
}

/// Root SIGKILLed under load and started again on the same data: every call a client saw
/// answered has its event, leases and pending approvals survive, hubs come back by themselves,
/// and calls in flight end at once with the connection.
async fn root_killed_and_restarted(database_url: Option<&str>) {
    mcp_tests::init_crypto();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("root-data");
    let contracts = mcp_tests::faults::contracts_dir(&dir.path().join("contracts")).unwrap();
    let extra = format!(
        "contracts_dir = \"{}\"\n{}",
        contracts.display(),
        database_url
            .map(|u| format!("database_url = \"{u}\""))
            .unwrap_or_default()
    );
    let mut root = RootProc::start(dir.path(), "root", 0, &data, &extra).await;
    let port = root.port();
    let (ops, nlu) = ("hub:faults-ops", "hub:faults-nlu");
    let ops_token = root.enroll(ops).await;
    let nlu_token = root.enroll(nlu).await;
    let _ops_hub = start_fault_hub(dir.path(), ops, &ops_token, &root.base, "");
    let _nlu_hub = start_hub(
        dir.path(),
        nlu,
        &nlu_token,
        &root.base,
        &mcp_tests::nlu_hub_toml().unwrap(),
    );
    wait_online(&root.http, &root.base, &root.admin.token, ops).await;
    wait_online(&root.http, &root.base, &root.admin.token, nlu).await;
    let (session, bearer) = root.lease(ops, "InfraOpsRead").await;
    let (_, author) = root.lease(nlu, "NLUTeacherAuthor").await;

    // A pending approval: a proposed NLU change waiting for an operator.
    let writer = mcp_client(&format!("{}/mcp", root.base), &author)
        .await
        .unwrap();
    let (templates, _) = mcp_call(&writer, "nlu_authoring.list_templates", json!({})).await;
    let template = &templates["templates"][0];
    let (proposal, _) = mcp_call(
        &writer,
        "nlu_authoring.propose_change",
        json!({
            "template_id": template["template_id"],
            "base_fingerprint": template["fingerprint"],
            "add_examples": ["a phrase that survives a crash"],
        }),
    )
    .await;
    let approval_id = proposal["approval"]["approval_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{proposal}"))
        .to_owned();
    let confirmation = proposal["confirmation_token"].as_str().unwrap().to_owned();

    // Load from two clients, one call the hub holds, then SIGKILL.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let answers = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let loaders: Vec<_> = (0..2)
        .map(|_| {
            tokio::spawn(keep_calling(
                root.base.clone(),
                bearer.clone(),
                stop_rx.clone(),
                answers.clone(),
            ))
        })
        .collect();
    // The kill must land under load: wait until the loaders have been answered.
    eventually("the loaders to be answered", async || {
        (answers.load(std::sync::atomic::Ordering::Relaxed) >= 4).then_some(())
    })
    .await;
    let hanging = {
        let (http, url, bearer) = (
            root.http.clone(),
            format!("{}/v1/root/mcp/call", root.base),
            bearer.clone(),
        );
        tokio::spawn(async move {
            http.post(url)
                .bearer_auth(bearer)
                .json(&json!({"tool_id": mcp_tests::faults::TOOL, "arguments": {"fault": "hang"}}))
                .timeout(PATIENCE)
                .send()
                .await
        })
    };
    let mcp_hanging = {
        let client = mcp_client_without_resumption(&format!("{}/mcp", root.base), &bearer).await;
        tokio::spawn(async move {
            let res = client
                .call_tool(
                    CallToolRequestParams::new(mcp_tests::faults::TOOL)
                        .with_arguments(json!({"fault": "hang"}).as_object().cloned().unwrap()),
                )
                .await;
            (res, client)
        })
    };
    eventually("both hanging calls to reach the hub", async || {
        let e = hub_entry(&root.http, &root.base, &root.admin.token, ops).await;
        (e["pressure"]["pending_calls"].as_u64() == Some(2)).then_some(())
    })
    .await;
    root.proc.kill();
    // The calls in flight end with the connection, at once (not at their deadline).
    let cut = tokio::time::timeout(PATIENCE, hanging)
        .await
        .expect("the REST call in flight ended")
        .unwrap();
    assert!(cut.is_err(), "no answer from a killed root: {cut:?}");

    let (mcp_cut, _client) = tokio::time::timeout(PATIENCE, mcp_hanging)
        .await
        .expect("the MCP call in flight ended")
        .unwrap();
    assert!(
        matches!(
            mcp_cut,
            Err(rmcp::service::ServiceError::TransportSend(_)
                | rmcp::service::ServiceError::TransportClosed)
        ),
        "the MCP client is told its transport failed: {mcp_cut:?}"
    );
    stop_tx.send_replace(true);

    // Started again on the same data and port.
    let root2 = RootProc::start(dir.path(), "root", port, &data, &extra).await;
    let mut answered = Vec::new();
    let mut cuts = 0;
    for l in loaders {
        for s in l.await.unwrap() {
            match s {
                Seen::Answered(id) => answered.push(id),
                Seen::Cut => cuts += 1,
            }
        }
    }
    assert!(
        !answered.is_empty() && cuts > 0,
        "the kill happened under load"
    );

    // Hubs come back by themselves; the lease still works.
    wait_online(&root2.http, &root2.base, &root2.admin.token, ops).await;
    wait_online(&root2.http, &root2.base, &root2.admin.token, nlu).await;
    let (status, _, body) = root2.call(&bearer, "hub.get_status", json!({})).await;
    assert_eq!(status, 200, "{body}");
    answered.push(body["event_id"].as_str().unwrap().to_owned());

    // Every call a client saw answered is in the trail; the trail holds at most the calls
    // whose answer the kill cut off besides; one verified chain.
    let events = root2.audit_of(&format!("lease:{session}")).await;
    let stored: std::collections::HashSet<&str> = events
        .iter()
        .map(|e| e["event_id"].as_str().unwrap())
        .collect();
    for id in &answered {
        assert!(
            stored.contains(id.as_str()),
            "answered call {id} lost its event"
        );
    }
    assert!(
        stored.len() <= answered.len() + cuts + 2,
        "{} events for {} answered calls and {cuts} cut off",
        stored.len(),
        answered.len()
    );
    let verify = root2.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(verify["ok"], true, "{verify}");

    // The pending approval survived; approved now, its execute applies the change once.
    let pending = root2.admin_get("/v1/root/mcp/approvals").await;
    assert!(
        items(&pending["approvals"])
            .iter()
            .any(|a| a["approval_id"] == approval_id.as_str() && a["status"] == "pending"),
        "{pending}"
    );
    root2
        .admin_post(
            &format!("/v1/root/mcp/approvals/{approval_id}/approve"),
            json!({"reason": "after the crash"}),
        )
        .await;
    let writer = mcp_client(&format!("{}/mcp", root2.base), &author)
        .await
        .unwrap();
    let (applied, _) = mcp_call(
        &writer,
        "nlu_authoring.apply_change",
        json!({"phase": "execute", "confirmation_token": confirmation, "idempotency_key": "after-crash"}),
    )
    .await;
    assert_eq!(applied["phase"], "execute", "{applied}");
    assert_eq!(applied["approval_id"], approval_id.as_str(), "{applied}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_killed_and_restarted_on_sqlite_loses_nothing_it_acknowledged() {
    root_killed_and_restarted(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_killed_and_restarted_on_postgres_loses_nothing_it_acknowledged() {
    use sqlx::Connection;
    let Ok(base) = std::env::var("MCP_TEST_DATABASE_URL") else {
        eprintln!(
            "SKIPPED root_killed_and_restarted_on_postgres_loses_nothing_it_acknowledged: \
             MCP_TEST_DATABASE_URL is not set"
        );
        return;
    };
    let schema = format!("faults_{}", uuid::Uuid::now_v7().simple());
    let mut conn = sqlx::PgConnection::connect(&base).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut conn)
        .await
        .unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    root_killed_and_restarted(Some(&url)).await;
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&mut conn)
        .await
        .unwrap();
}

/// `VmHWM` (peak resident memory) of process `pid`, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Processes whose command line contains every one of `words`, in order (NUL-separated
/// arguments).
fn processes_running(words: &[&str]) -> Vec<u32> {
    let needle = words.join("\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
        })
        .collect()
}

/// Preview then execute `tool` over REST; the execute's `(status, body)`.
async fn rest_write(
    root: &mcp_tests::TestRoot,
    bearer: &str,
    tool: &str,
    args: Value,
    key: &str,
) -> (u16, Value) {
    let (status, preview) = root.call(bearer, tool, args.clone()).await;
    assert_eq!(status, 200, "{preview}");
    let mut exec = args;
    exec["phase"] = json!("execute");
    exec["confirmation_token"] = preview["result"]["confirmation_token"].clone();
    exec["idempotency_key"] = json!(key);
    root.call(bearer, tool, exec).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adapters_that_panic_hang_or_flood_are_contained_by_the_hub() {
    let root = mcp_tests::TestRoot::start_with(mcp_tests::faults::with_contract)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = "hub:faults-adapters";
    let token = root.enroll(target, "test").await.unwrap();
    let base = root.handle().base_url();
    let admin = root.admin_token();
    // A unique sleep duration marks the grandchild of the hanging check.
    let marker = "1000.424242";
    let flood = 512 * 1024 * 1024;
    let extra = format!(
        "[skill]\nadapter_max_restarts = 2\n\
         [[skill.healthchecks]]\nname = \"flood\"\nkind = \"command\"\n\
         argv = [\"head\", \"-c\", \"{flood}\", \"/dev/zero\"]\ntimeout_ms = 14000\n\
         [[skill.healthchecks]]\nname = \"hang\"\nkind = \"command\"\n\
         argv = [\"sh\", \"-c\", \"sleep {marker}; echo done\"]\ntimeout_ms = 1000\n\
         [[skill.allowed_tests]]\nname = \"flood\"\n\
         argv = [\"sh\", \"-c\", \"yes faults | head -c {flood}\"]\ntimeout_ms = 60000\n\
         [[skill.allowed_tests]]\nname = \"hang\"\nargv = [\"sleep\", \"{marker}\"]\n\
         timeout_ms = 1000\n"
    );
    let hub = start_fault_hub(dir.path(), target, &token, &base, &extra);
    let hub_pid = hub.id();
    wait_online(&root.http, &base, &admin, target).await;
    let reader = root.bearer(target, "InfraOpsRead").await;
    let control = root.bearer(target, "InfraOpsControl").await;
    let client = mcp_client(&root.mcp_url(), &reader).await.unwrap();

    // Hangs end at their deadline; floods are read and dropped, not kept.
    let (status, body) = root.call(&reader, "hub.run_healthchecks", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let checks = items(&body["result"]["checks"]);
    let check = |name: &str| checks.iter().find(|c| c["name"] == name).unwrap().clone();
    assert_eq!(check("flood")["ok"], true, "{body}");
    assert_eq!(check("hang")["ok"], false, "{body}");
    assert_eq!(
        check("hang")["detail"],
        "no answer within 1000 ms",
        "{body}"
    );
    assert_eq!(body["result"]["status"], "degraded");
    let (status, body) = rest_write(
        &root,
        &control,
        "hub.run_allowed_tests",
        json!({"name": "flood"}),
        "flood-1",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let run = &body["result"]["result"];
    assert_eq!(run["passed"], true, "{body}");
    let tail = run["output_tail"].as_str().unwrap();
    assert!(
        tail.len() <= 4096 && tail.contains("faults\nfaults"),
        "{}",
        tail.len()
    );
    let (status, body) = rest_write(
        &root,
        &control,
        "hub.run_allowed_tests",
        json!({"name": "hang"}),
        "hang-1",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let run = &body["result"]["result"];
    assert_eq!(
        (run["timed_out"].clone(), run["passed"].clone()),
        (json!(true), json!(false)),
        "{body}"
    );
    // Nothing the hanging check or test started is left running, children of children
    // included (each runs in a process group killed whole).
    eventually("the hanging processes to be gone", async || {
        processes_running(&["sleep", marker])
            .is_empty()
            .then_some(())
    })
    .await;
    // Two floods of 512 MiB went through the hub; its memory never held them.
    let peak = peak_rss_kib(hub_pid);
    assert!(
        peak < 256 * 1024,
        "the hub's peak resident memory was {peak} KiB"
    );

    // A hanging adapter call times out and the adapter serves the next one.
    let (status, body) = root
        .call(&reader, mcp_tests::faults::TOOL, json!({"fault": "hang"}))
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (504, &json!("timeout")),
        "{body}"
    );
    let (status, body) = root.call(&reader, mcp_tests::faults::TOOL, json!({})).await;
    assert_eq!(status, 200, "{body}");

    // A panicking adapter is restarted by its supervisor, within its budget (2 restarts).
    for _ in 0..2 {
        let (status, body) = root
            .call(&reader, mcp_tests::faults::TOOL, json!({"fault": "panic"}))
            .await;
        assert_eq!(status, 502, "{body}");
        assert_eq!(body["error"]["code"], "adapter_failed", "{body}");
        assert!(error_message(&body).contains("it was restarted"), "{body}");
        let (status, body) = root.call(&reader, mcp_tests::faults::TOOL, json!({})).await;
        assert_eq!(status, 200, "the restarted adapter answers: {body}");
    }
    // Past the budget the adapter stays down and its capability is reported unavailable.
    let (status, body) = root
        .call(&reader, mcp_tests::faults::TOOL, json!({"fault": "panic"}))
        .await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "adapter_failed", "{body}");
    let message = error_message(&body);
    assert!(
        message.contains("failed 3 times within 60 s")
            && message.contains("unavailable until skill `infra_access_skill` is enabled again"),
        "{message}"
    );
    eventually("hub.get_status to leave tools/list", async || {
        (!listed_tools(&client)
            .await
            .contains(&mcp_tests::faults::TOOL.to_owned()))
        .then_some(())
    })
    .await;
    let entry = hub_entry(&root.http, &base, &admin, target).await;
    let published = items(&entry["published_capabilities"]);
    assert!(
        !published.contains(&json!(mcp_tests::faults::TOOL)),
        "{entry}"
    );
    assert!(
        published.contains(&json!("hub.get_runtime_summary")),
        "{entry}"
    );
    let (status, body) = root.call(&reader, mcp_tests::faults::TOOL, json!({})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (403, &json!("skill_disabled")),
        "{body}"
    );
    // The other adapters serve on.
    let (status, body) = root
        .call(&reader, "hub.get_runtime_summary", json!({}))
        .await;
    assert_eq!(status, 200, "{body}");

    // The operator enables the skill again: the adapter gets a new budget.
    root.admin_post(
        &format!("/v1/root/hubs/{target}/skills/infra_access_skill/enable"),
        json!({}),
    )
    .await;
    eventually("hub.get_status back in tools/list", async || {
        listed_tools(&client)
            .await
            .contains(&mcp_tests::faults::TOOL.to_owned())
            .then_some(())
    })
    .await;
    let (status, body) = root.call(&reader, mcp_tests::faults::TOOL, json!({})).await;
    assert_eq!(status, 200, "{body}");
    drop(hub);
    root.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_clock_skew_within_the_window_is_absorbed_and_beyond_it_refused() {
    let root = mcp_tests::TestRoot::start_with(|c| c.limits.max_hub_clock_skew_ms = 60_000)
        .await
        .unwrap();
    let skewed = |ms: i64| format!("[skill]\ntest_clock_offset_ms = {ms}\n");
    // 20 s is four times hub.get_status's 5 s deadline: judged by the hub's own clock, every
    // call would have expired (ahead) or run past root's deadline (behind).
    for (target, offset) in [("hub:faults-ahead", 20_000), ("hub:faults-behind", -20_000)] {
        let hub = root.start_hub(target, &skewed(offset)).await.unwrap();
        let bearer = root.bearer(target, "InfraOpsRead").await;
        let (status, body) = root.call(&bearer, "hub.get_status", json!({})).await;
        assert_eq!(status, 200, "{target}: {body}");
        assert_eq!(body["result"]["target_id"], target);
        hub.stop().await;
    }
    for (target, offset, said) in [
        ("hub:faults-far-ahead", 300_000, "300.0 s ahead of root's"),
        ("hub:faults-far-behind", -300_000, "300.0 s behind root's"),
    ] {
        let hub = root.start_hub(target, &skewed(offset)).await.unwrap();
        let (session, bearer) = root.lease(target, "InfraOpsRead").await;
        let (status, body) = root.call(&bearer, "hub.get_status", json!({})).await;
        assert_eq!(status, 502, "{target}: {body}");
        assert_eq!(body["error"]["code"], "clock_skew", "{body}");
        let message = error_message(&body);
        assert!(
            message.contains(said) && message.contains("root accepts at most 60.0 s"),
            "{message}"
        );
        // Audited with that outcome; nothing ran on the hub.
        let ev = root.audit_event(body["event_id"].as_str().unwrap()).await;
        assert_eq!(ev["status"], "error", "{ev}");
        assert_eq!(ev["error"]["code"], "clock_skew", "{ev}");
        assert_eq!(ev["actor"]["session_id"], session.as_str());
        // The hub's gate refused it: no adapter of the hub ran.
        assert_eq!(ev["execution_adapter"], "root.router", "{ev}");
        // Every call is refused, whatever the tool.
        let (status, body) = root.call(&bearer, "hub.get_activity_log", json!({})).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (502, &json!("clock_skew")),
            "{body}"
        );
        hub.stop().await;
    }
    root.stop().await;
}
