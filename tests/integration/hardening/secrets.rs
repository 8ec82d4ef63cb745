//! Secrets (issue 9): hub key rotation end to end, signing keys encrypted at rest (and rows
//! written in clear migrated), and the issued-secrets sweep: a full scenario over TLS with root
//! and hub as processes logging at `trace`, after which every log line, every audit row, the
//! metrics and the raw bytes of every data file are searched for every secret the run issued.

use mcp_tests::items;
use mcp_tests::run_ok;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use mcp_shared::protocol::{Envelope, HubToRoot, PROTOCOL_VERSION, RootToHub};
use mcp_shared::target::{
    ManagedTargetDescriptor, OperationalSurface, TargetPolicy, TargetStatus, Transport, WriteScope,
};
use mcp_tests::ports;
use mcp_tests::process::Proc;
use mcp_tests::{TestRoot, private_file, workspace_bin};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::hardening::tls::{Pki, https_client, tls_config, wait_for_log};

/// Opens the hub door with `token` and says `hello` for `target_id` but the wrong
/// environment: root refuses the upgrade (401) when it does not accept the token, and names
/// the environment when it does (so the probe never attaches as the target's hub).
async fn token_accepted(root: &TestRoot, target_id: &str, token: &str) -> bool {
    let mut ws = match mcp_tests::dial_hub_door(&root.handle().base_url(), Some(token)).await {
        Ok(ws) => ws,
        Err(tokio_tungstenite::tungstenite::Error::Http(res)) => {
            assert_eq!(res.status(), 401);
            return false;
        }
        Err(e) => panic!("the door neither admitted nor refused the probe: {e}"),
    };
    let hello = Envelope {
        v: PROTOCOL_VERSION,
        id: "probe".into(),
        in_reply_to: None,
        body: HubToRoot::Hello {
            protocol_version: PROTOCOL_VERSION,
            token: token.to_owned(),
            descriptor: ManagedTargetDescriptor {
                target_id: target_id.to_owned(),
                kind: "hub".into(),
                environment: "probe-environment".into(),
                status: TargetStatus::Online,
                transport: Transport {
                    channel: "hub_root_protocol".into(),
                },
                operational_surface: OperationalSurface {
                    published_by: "none".into(),
                    enabled: false,
                    capabilities: Vec::new(),
                },
                policy: TargetPolicy {
                    write_scope: WriteScope::None,
                },
            },
            skills: Vec::new(),
            features: Vec::new(),
        },
    };
    ws.send(tokio_tungstenite::tungstenite::Message::text(
        serde_json::to_string(&hello).unwrap(),
    ))
    .await
    .unwrap();
    loop {
        let msg = ws.next().await.unwrap().unwrap();
        let tokio_tungstenite::tungstenite::Message::Text(text) = msg else {
            continue;
        };
        let env: Envelope<RootToHub> = serde_json::from_str(&text).unwrap();
        let RootToHub::ProtocolError { message } = env.body else {
            panic!("the probe must be refused: {text}");
        };
        if message.contains("unknown hub token") {
            return false;
        }
        assert!(message.contains("probe-environment"), "{message}");
        return true;
    }
}

/// Starts an in-process hub reading its token from `token_file` (checked every 100 ms).
async fn hub_with_token_file(
    root: &TestRoot,
    target: &str,
    dir: &Path,
    token_file: &Path,
) -> mcp_hub::HubHandle {
    let path = dir.join("hub.toml");
    std::fs::write(
        &path,
        format!(
            "target_id = \"{target}\"\nenvironment = \"test\"\nsubnet = \"subnet-a\"\nroot_url = \"{}\"\ntoken_file = \"{}\"\nstate_dir = \"{}\"\ntoken_reload_interval_ms = 100\n[reconnect]\ninitial_ms = 50\nmax_ms = 200\n",
            root.handle().base_url(),
            token_file.display(),
            dir.join("state").display()
        ),
    )
    .unwrap();
    let cfg = mcp_hub::config::HubFile::load(&path)
        .unwrap()
        .resolve()
        .unwrap();
    let hub = mcp_hub::start(cfg).await.unwrap();
    hub.wait_connected(Duration::from_secs(10)).await.unwrap();
    hub
}

async fn status_ok(root: &TestRoot, bearer: &str) -> bool {
    let (s, b) = root.call(bearer, "hub.get_status", json!({})).await;
    s == 200 && b["error"].is_null()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_is_picked_up_from_the_token_file() {
    let root = TestRoot::start().await.unwrap();
    let target = "hub:rotate-file";
    let first = root.enroll(target, "test").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("hub.token");
    std::fs::write(&token_file, format!("{first}\n")).unwrap();
    private_file(&token_file).unwrap();
    let hub = hub_with_token_file(&root, target, dir.path(), &token_file).await;
    let bearer = root.bearer(target, "InfraOpsRead").await;
    assert!(status_ok(&root, &bearer).await);

    // The operator rotates with the CLI, writing the new token straight into the hub's file.
    let out = run_ok(
        Command::new(workspace_bin("mcp-root").unwrap())
            .args(["admin", "--root-url", &root.handle().base_url()])
            .args(["--admin-token", &root.admin_token()])
            .args([
                "hub",
                "rotate-key",
                "--target",
                target,
                "--grace-sec",
                "3600",
            ])
            .arg("--token-file")
            .arg(&token_file)
            .arg("--json"),
    );
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let second = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_owned();
    assert!(second.starts_with("mcph_") && second != first);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(&second),
        "written, not printed"
    );
    assert!(printed["previous_valid_until"].is_string(), "{printed}");
    // The rotation is audited, without the token.
    let ev = root
        .audit_event(printed["event_id"].as_str().unwrap())
        .await;
    assert_eq!(ev["tool_id"], "admin.hub.rotate_key");
    assert!(!ev.to_string().contains(&second) && !ev.to_string().contains(&first));

    // The hub reconnects with the new token; calls are signed with the new key and run.
    wait_for_log(&["reconnecting with the new hub token"]).await;
    mcp_tests::until("the hub back online with the new token", async || {
        hub.is_connected() && status_ok(&root, &bearer).await
    })
    .await;
    // During the grace period both tokens are accepted; a forged one never.
    assert!(token_accepted(&root, target, &second).await);
    assert!(token_accepted(&root, target, &first).await);
    assert!(!token_accepted(&root, target, "mcph_forged").await);

    // A second rotation with no grace: the first token is gone, the second too.
    let v = root
        .admin_post(
            &format!("/v1/root/hubs/{target}/rotate-key"),
            json!({ "grace_sec": 0 }),
        )
        .await;
    let third = v["token"].as_str().unwrap().to_owned();
    assert!(!token_accepted(&root, target, &first).await);
    assert!(!token_accepted(&root, target, &second).await);
    assert!(token_accepted(&root, target, &third).await);
    // The hub's connection (second token) is dropped; given the third it comes back.
    std::fs::write(&token_file, format!("{third}\n")).unwrap();
    mcp_tests::until("the hub online with the third token", async || {
        hub.is_connected() && status_ok(&root, &bearer).await
    })
    .await;
    // The grace survives a restart of root (previous keys are stored, encrypted).
    hub.shutdown().await;
    root.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_on_a_rotated_out_token_works_until_the_grace_ends() {
    let root = TestRoot::start().await.unwrap();
    let target = "hub:rotate-stale";
    let hub = root.start_hub(target, "").await.unwrap();
    let bearer = root.bearer(target, "InfraOpsRead").await;
    // Rotated, but this hub keeps its (inline) token: during the grace its connection stays
    // and root signs its calls with the key of that connection's token, which the hub checks.
    let v = root
        .admin_post(
            &format!("/v1/root/hubs/{target}/rotate-key"),
            json!({ "grace_sec": 3600 }),
        )
        .await;
    assert_eq!(v["grace_sec"], 3600);
    assert!(status_ok(&root, &bearer).await);
    assert!(hub.handle().is_connected());
    // Rotated again, no grace: the old token is no longer valid; the connection is dropped at
    // its next frame and the hub cannot come back with it.
    root.admin_post(
        &format!("/v1/root/hubs/{target}/rotate-key"),
        json!({ "grace_sec": 0 }),
    )
    .await;
    wait_for_log(&[target, "grace period ended; dropping the connection"]).await;
    mcp_tests::until("the target offline", async || {
        let list = root.admin_get("/v1/root/hubs").await;
        list["targets"][0]["status"] == "offline"
    })
    .await;
    let (s, b) = root.call(&bearer, "hub.get_status", json!({})).await;
    assert_eq!(b["error"]["code"], "target_offline", "{s} {b}");
    assert!(!token_accepted(&root, target, &hub.token).await);
    hub.stop().await;
    root.stop().await;
}

/// Every file under `dir` (recursively), skipping `skip`.
fn files(dir: &Path, skip: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if skip.contains(&p) {
            continue;
        }
        if p.is_dir() {
            out.extend(files(&p, skip));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_keys_are_encrypted_at_rest_and_clear_rows_are_migrated() {
    // Reads and rewrites the SQLite file itself.
    let mut root = TestRoot::start_with(TestRoot::on_sqlite).await.unwrap();
    let target = "hub:at-rest";
    let token = root.enroll(target, "test").await.unwrap();
    let key_hex = hex::encode(mcp_shared::protocol::signing_key(&token));
    let data = root.data_dir();
    let db_url = format!("sqlite:{}", data.join("root.db").display());
    let master = std::fs::read_to_string(data.join("secrets.key")).unwrap();
    root.handle.take().unwrap().shutdown().await;
    let raw = |data: &Path| -> Vec<u8> {
        files(data, &[data.join("secrets.key")])
            .into_iter()
            // A SQLite side file may go away as the pool closes.
            .filter_map(|p| std::fs::read(p).ok())
            .flatten()
            .collect()
    };
    let contains =
        |hay: &[u8], needle: &str| hay.windows(needle.len()).any(|w| w == needle.as_bytes());
    let bytes = raw(&data);
    assert!(
        !contains(&bytes, &key_hex),
        "the signing key is not stored in clear"
    );
    assert!(!contains(&bytes, master.trim()));

    // A row written in clear by an older root is encrypted at the next start.
    {
        let pool = sqlx::SqlitePool::connect(&db_url).await.unwrap();
        sqlx::query("UPDATE targets SET signing_key = $1 WHERE target_id = $2")
            .bind(&key_hex)
            .bind(target)
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
    }
    let root = TestRoot::start_with(|c| {
        c.data_dir = data.clone();
        TestRoot::on_sqlite(c);
    })
    .await
    .unwrap();
    let pool = sqlx::SqlitePool::connect(&db_url).await.unwrap();
    let stored: String = sqlx::query_scalar("SELECT signing_key FROM targets WHERE target_id = $1")
        .bind(target)
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    assert!(stored.starts_with("enc:v1:"), "{stored}");
    // And the hub still connects and its calls verify.
    let hub = mcp_tests::TestHub::start(&root.handle().base_url(), target, &token, "")
        .await
        .unwrap();
    let bearer = root.bearer(target, "InfraOpsRead").await;
    assert!(status_ok(&root, &bearer).await);
    hub.stop().await;
    root.stop().await;

    // A master key replaced by another makes start-up stop, naming the file.
    std::fs::remove_file(data.join("secrets.key")).unwrap();
    let err = mcp_tests::refusal_to_start("127.0.0.1:0", &data).await;
    assert!(
        err.contains("secrets.key") && err.contains("restore"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_issued_secret_reaches_a_log_an_audit_row_or_a_data_file() {
    mcp_tests::init_crypto();
    let pki = Pki::new("sweep");
    let server = pki.server("root");
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("root-data");
    let tls = tls_config(&server, None, 0);
    let root_toml = work.path().join("root.toml");
    std::fs::write(
        &root_toml,
        format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n[oauth]\ndiscovery = true\n[tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\nreload_interval_sec = 0\n",
            data.display(),
            tls.cert_file.display(),
            tls.key_file.display()
        ),
    )
    .unwrap();
    let root_log = work.path().join("root.log");
    let mut root = Proc::adopt(
        "mcp-root",
        Command::new(workspace_bin("mcp-root").unwrap())
            .args(["serve", "--config"])
            .arg(&root_toml)
            .env("RUST_LOG", "trace")
            .stdout(std::fs::File::create(work.path().join("root.out")).unwrap())
            .stderr(std::fs::File::create(&root_log).unwrap())
            .spawn()
            .unwrap(),
        Some(root_log.clone()),
    );
    let base = ports::announced_root_url(&mut root, Duration::from_secs(60)).await;
    assert!(base.starts_with("https://127.0.0.1:"), "{base}");
    let http = https_client(&pki.ca_file());
    mcp_tests::until("root to serve https", async || {
        http.get(format!("{base}/healthz")).send().await.is_ok()
    })
    .await;
    let admin = std::fs::read_to_string(data.join("admin.token"))
        .unwrap()
        .trim()
        .to_owned();
    let post = async |path: &str, bearer: &str, body: Value| -> Value {
        let res = http
            .post(format!("{base}{path}"))
            .bearer_auth(bearer)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success(), "{path}: {}", res.status());
        res.json().await.unwrap()
    };

    // Enrol a hub and run it as a process over WSS, its token in a file.
    let target = "hub:sweep";
    let enrolled = post(
        "/v1/root/hubs",
        &admin,
        json!({ "target_id": target, "environment": "test", "subnet_id": "subnet-a" }),
    )
    .await;
    let hub_token = enrolled["token"].as_str().unwrap().to_owned();
    let hub_dir = work.path().join("hub");
    std::fs::create_dir_all(&hub_dir).unwrap();
    let token_file = hub_dir.join("hub.token");
    std::fs::write(&token_file, format!("{hub_token}\n")).unwrap();
    private_file(&token_file).unwrap();
    let hub_toml = hub_dir.join("hub.toml");
    std::fs::write(
        &hub_toml,
        format!(
            "target_id = \"{target}\"\nenvironment = \"test\"\nsubnet = \"subnet-a\"\nroot_url = \"{base}\"\ntoken_file = \"{}\"\nstate_dir = \"{}\"\nwrite_scope = \"test-only\"\ntoken_reload_interval_ms = 100\n[tls]\nca_file = \"{}\"\npins = [\"{}\"]\n[reconnect]\ninitial_ms = 50\nmax_ms = 500\n[[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"true\"]\n",
            token_file.display(),
            hub_dir.join("state").display(),
            pki.ca_file().display(),
            server.pin
        ),
    )
    .unwrap();
    let hub_log = work.path().join("hub.log");
    let mut hub = Proc::spawn(
        "mcp-hub",
        Command::new(workspace_bin("mcp-hub").unwrap())
            .args(["run", "--config"])
            .arg(&hub_toml)
            .env("RUST_LOG", "trace"),
        &hub_log,
    );
    let online = async || {
        let res = http
            .get(format!("{base}/v1/root/hubs"))
            .bearer_auth(&admin)
            .send()
            .await
            .unwrap();
        let v: Value = res.json().await.unwrap();
        v["targets"][0]["status"] == "online"
    };
    mcp_tests::until("the hub online", online).await;

    // Leases created and used over MCP (HTTPS), a write previewed and executed.
    let lease = post(
        "/v1/root/mcp/sessions",
        &admin,
        json!({ "target_id": target, "capability_profile": "InfraOpsControl", "ttl_sec": 600 }),
    )
    .await;
    let session_id = lease["session_id"].as_str().unwrap().to_owned();
    let bearer = lease["token"].as_str().unwrap().to_owned();
    let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
        https_client(&pki.ca_file()),
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            format!("{base}/mcp"),
        )
        .auth_header(bearer.clone()),
    );
    let client = rmcp::ServiceExt::serve((), transport).await.unwrap();
    let call = async |name: &str, args: Value| {
        let res = client
            .call_tool(
                CallToolRequestParams::new(name.to_owned())
                    .with_arguments(args.as_object().cloned().unwrap()),
            )
            .await
            .unwrap();
        assert_ne!(res.is_error, Some(true), "{name}: {res:?}");
        res.structured_content.unwrap()
    };
    call("hub.get_status", json!({})).await;
    let preview = call("hub.run_allowed_tests", json!({ "name": "smoke" })).await;
    let confirmation = preview["confirmation_token"].as_str().unwrap().to_owned();
    let executed = call(
        "hub.run_allowed_tests",
        json!({ "name": "smoke", "phase": "execute", "confirmation_token": confirmation,
                "idempotency_key": "sweep-1" }),
    )
    .await;
    assert_eq!(executed["replay"], false, "{executed}");

    // A lease rotated, the new bearer used.
    let rotated = post(
        &format!("/v1/root/mcp/sessions/{session_id}/rotate"),
        &admin,
        json!({}),
    )
    .await;
    let rotated_bearer = rotated["token"].as_str().unwrap().to_owned();
    let res = http
        .post(format!("{base}/v1/root/mcp/call"))
        .bearer_auth(&rotated_bearer)
        .json(&json!({ "tool_id": "hub.get_status" }))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success());
    // The hub's key rotated with the CLI over HTTPS (token written to the hub's file); the hub
    // picks it up and calls run with the new key.
    let out = run_ok(
        Command::new(workspace_bin("mcp-root").unwrap())
            .args(["admin", "--root-url", &base, "--ca-file"])
            .arg(pki.ca_file())
            .env("MCP_ROOT_ADMIN_TOKEN", &admin)
            .args(["hub", "rotate-key", "--target", target, "--grace-sec", "60"])
            .arg("--token-file")
            .arg(&token_file),
    );
    let new_hub_token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_owned();
    assert_ne!(new_hub_token, hub_token);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = std::fs::read_to_string(&hub_log).unwrap_or_default();
        if log.matches("welcomed by root").count() >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "the hub never reconnected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    mcp_tests::until("a call through the new key", async || {
        let res = http
            .post(format!("{base}/v1/root/mcp/call"))
            .bearer_auth(&rotated_bearer)
            .json(&json!({ "tool_id": "hub.get_status" }))
            .send()
            .await
            .unwrap();
        res.status().is_success()
    })
    .await;

    // An OAuth sign-in: code, access token, refresh, the refreshed tokens used.
    let oauth = oauth_sign_in(&pki.ca_file(), &base, &admin, target).await;

    // What an operator or a scraper reads.
    let audit = mcp_tests::get_text(
        &http,
        format!("{base}/v1/root/mcp/audit?limit=1000"),
        &admin,
    )
    .await;
    assert!(audit.contains("admin.hub.rotate_key") && audit.contains("hub.run_allowed_tests"));
    let metrics = mcp_tests::get_text(&http, format!("{base}/metrics"), &admin).await;
    // The web console, as its pages use it: login (the admin token in the body), the session
    // cookie on every page's API answer, state changes with the CSRF token, a lease issued
    // in the MCP Server dialog, logout. Each answer is kept for the sweep.
    let console = run_console(&http, &base, &admin, target).await;
    drop(client);
    // SIGTERM and wait, so that everything they log is written.
    hub.terminate_blocking(Duration::from_secs(20));
    root.terminate_blocking(Duration::from_secs(20));

    let master = std::fs::read_to_string(data.join("secrets.key"))
        .unwrap()
        .trim()
        .to_owned();
    let secrets: Vec<(&str, String)> = vec![
        ("admin token", admin.clone()),
        ("master key", master),
        ("hub token", hub_token.clone()),
        ("rotated hub token", new_hub_token.clone()),
        (
            "signing key",
            hex::encode(mcp_shared::protocol::signing_key(&hub_token)),
        ),
        (
            "rotated signing key",
            hex::encode(mcp_shared::protocol::signing_key(&new_hub_token)),
        ),
        ("lease bearer", bearer.clone()),
        ("rotated lease bearer", rotated_bearer.clone()),
        ("confirmation token", confirmation.clone()),
        ("console cookie", console.cookie.clone()),
        (
            "console cookie's MAC",
            console.cookie.rsplit('.').next().unwrap().to_owned(),
        ),
        ("console CSRF token", console.csrf.clone()),
        ("console-issued lease bearer", console.lease_bearer.clone()),
        ("OAuth authorization code", oauth.code.clone()),
        ("OAuth access token", oauth.access.clone()),
        ("OAuth refresh token", oauth.refresh.clone()),
        (
            "refreshed OAuth access token",
            oauth.refreshed_access.clone(),
        ),
        (
            "refreshed OAuth refresh token",
            oauth.refreshed_refresh.clone(),
        ),
    ];
    // Answers that hand a secret out by design (the page needs it), checked for every other.
    let issued_in = |secret: &str, haystack: &str| match secret {
        "console CSRF token" => {
            haystack == "console POST /ui/api/login" || haystack == "console GET /ui/api/session"
        }
        "console-issued lease bearer" => haystack == "console POST /v1/root/mcp/sessions",
        _ => false,
    };
    let root_text = std::fs::read_to_string(&root_log).unwrap();
    let hub_text = std::fs::read_to_string(&hub_log).unwrap();
    // The sweep is not vacuous: both logs are at trace level and saw the whole scenario.
    assert!(root_text.contains("TRACE") && root_text.contains("hub key rotated"));
    assert!(hub_text.contains("TRACE") && hub_text.contains("reconnecting with the new hub token"));
    let mut haystacks: Vec<(String, Vec<u8>)> = vec![
        ("root log".into(), root_text.into_bytes()),
        ("hub log".into(), hub_text.into_bytes()),
        ("audit rows".into(), audit.into_bytes()),
        ("metrics".into(), metrics.into_bytes()),
        (
            "root stdout".into(),
            std::fs::read(work.path().join("root.out")).unwrap(),
        ),
        (
            "rotate-key output".into(),
            [out.stdout, out.stderr].concat(),
        ),
    ];
    // Not vacuous: the console's answers hold the scenario's events, the stream included.
    let answer = |name: &str| {
        String::from_utf8_lossy(&console.answers.iter().rfind(|(n, _)| n == name).unwrap().1)
            .into_owned()
    };
    assert!(answer("console GET /v1/root/mcp/audit?limit=1000").contains("admin.skill.disable"));
    assert!(answer("console GET /v1/root/mcp/audit/stream").contains("admin.hub.rotate_key"));
    assert!(console.answers.len() >= 15, "{}", console.answers.len());
    haystacks.extend(console.answers);
    // Every data file but the secret files themselves (raw bytes: the database, its WAL, the
    // hub's state).
    for p in files(&data, &[data.join("admin.token"), data.join("secrets.key")])
        .into_iter()
        .chain(files(&hub_dir, std::slice::from_ref(&token_file)))
    {
        if let Ok(bytes) = std::fs::read(&p) {
            haystacks.push((p.display().to_string(), bytes));
        }
    }
    let mut leaks = Vec::new();
    for (what, secret) in &secrets {
        assert!(secret.len() >= 20, "{what} is a real secret");
        for (name, hay) in &haystacks {
            if issued_in(what, name) {
                assert!(
                    hay.windows(secret.len()).any(|w| w == secret.as_bytes()),
                    "{name} hands out the {what}"
                );
                continue;
            }
            if hay.windows(secret.len()).any(|w| w == secret.as_bytes()) {
                // Where: the line, with the secret itself masked.
                let line = String::from_utf8_lossy(hay)
                    .lines()
                    .find(|l| l.contains(secret.as_str()))
                    .map(|l| {
                        l.replace(secret.as_str(), "<SECRET>")
                            .chars()
                            .take(400)
                            .collect::<String>()
                    })
                    .unwrap_or_default();
                leaks.push(format!("{what} in {name}: {line}"));
            }
        }
    }
    assert!(leaks.is_empty(), "secrets leaked: {leaks:#?}");
}

/// What the console part of the sweep issued and every answer it got.
struct ConsoleRun {
    /// The session cookie's value (`v1.<id>.<expiry>.<mac>`).
    cookie: String,
    csrf: String,
    /// The bearer the MCP Server dialog's lease came with.
    lease_bearer: String,
    /// `console <METHOD> <path>` → the answer's headers (but `Set-Cookie`) and body.
    answers: Vec<(String, Vec<u8>)>,
}

/// Drives the console's API the way its pages do (`root/ui/js/pages/*`), over HTTPS.
/// The credentials of one OAuth sign-in (see [`oauth_sign_in`]).
struct OauthRun {
    code: String,
    access: String,
    refresh: String,
    refreshed_access: String,
    refreshed_refresh: String,
}

/// Signs a client in with OAuth over HTTPS (the admin approves), exchanges the code,
/// refreshes once, and calls with both access tokens.
async fn oauth_sign_in(ca: &Path, base: &str, admin: &str, target: &str) -> OauthRun {
    let pem = std::fs::read(ca).unwrap();
    let http = reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(&pem).unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let redirect = "http://127.0.0.1:47555/cb";
    let client: Value = http
        .post(format!("{base}/oauth/register"))
        .json(&json!({"client_name": "sweep", "redirect_uris": [redirect]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let client_id = client["client_id"].as_str().unwrap();
    let mcp_tests::oauth::Pkce {
        verifier,
        challenge,
    } = mcp_tests::oauth::pkce();
    let query = mcp_tests::oauth::authorize_query(client_id, redirect, &challenge, &[]);
    let res = http
        .get(format!("{base}/oauth/authorize?{query}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 302);
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    let sealed = mcp_tests::oauth::sealed_request(&location).unwrap();
    let decided: Value = http
        .post(format!("{base}/oauth/authorize/approve"))
        .bearer_auth(admin)
        .json(&json!({"request": sealed, "target_id": target, "capability_profile": "InfraOpsRead", "ttl_sec": 600}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let code = mcp_tests::oauth::query_of(decided["redirect"].as_str().unwrap())["code"].clone();
    let token = async |pairs: &[(&str, &str)]| -> Value {
        let res = http
            .post(format!("{base}/oauth/token"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(mcp_tests::oauth::form(pairs))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        res.json().await.unwrap()
    };
    let first = token(&[
        ("grant_type", "authorization_code"),
        ("client_id", client_id),
        ("code", &code),
        ("redirect_uri", redirect),
        ("code_verifier", &verifier),
    ])
    .await;
    let refresh = first["refresh_token"].as_str().unwrap().to_owned();
    let second = token(&[
        ("grant_type", "refresh_token"),
        ("client_id", client_id),
        ("refresh_token", &refresh),
    ])
    .await;
    let run = OauthRun {
        code,
        access: first["access_token"].as_str().unwrap().to_owned(),
        refresh,
        refreshed_access: second["access_token"].as_str().unwrap().to_owned(),
        refreshed_refresh: second["refresh_token"].as_str().unwrap().to_owned(),
    };
    // The refresh replaced the first lease (revoked); the second calls.
    for (bearer, status) in [(&run.access, 401), (&run.refreshed_access, 200)] {
        let res = http
            .post(format!("{base}/v1/root/mcp/call"))
            .bearer_auth(bearer)
            .json(&json!({ "tool_id": "hub.get_status" }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), status);
    }
    run
}

async fn run_console(http: &reqwest::Client, base: &str, admin: &str, target: &str) -> ConsoleRun {
    let mut answers = Vec::new();
    let keep =
        async |answers: &mut Vec<(String, Vec<u8>)>, name: String, res: reqwest::Response| {
            assert!(res.status().is_success(), "{name}: {}", res.status());
            let mut kept = Vec::new();
            for (k, v) in res.headers() {
                if k != "set-cookie" {
                    kept.extend_from_slice(format!("{k}: ").as_bytes());
                    kept.extend_from_slice(v.as_bytes());
                    kept.push(b'\n');
                }
            }
            let body = res.bytes().await.unwrap();
            kept.extend_from_slice(&body);
            answers.push((name, kept));
            serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null)
        };
    let res = http
        .post(format!("{base}/ui/api/login"))
        .header("origin", base)
        .json(&json!({ "token": admin }))
        .send()
        .await
        .unwrap();
    let set_cookie = res.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        set_cookie.contains("HttpOnly") && set_cookie.contains("Secure"),
        "{set_cookie}"
    );
    let pair = set_cookie.split(';').next().unwrap().to_owned();
    let cookie = pair.split_once('=').unwrap().1.to_owned();
    let login = keep(&mut answers, "console POST /ui/api/login".into(), res).await;
    let csrf = login["csrf_token"].as_str().unwrap().to_owned();

    let get = async |answers: &mut Vec<(String, Vec<u8>)>, path: &str| {
        let res = http
            .get(format!("{base}{path}"))
            .header("cookie", &pair)
            .send()
            .await
            .unwrap();
        keep(answers, format!("console GET {path}"), res).await
    };
    let post = async |answers: &mut Vec<(String, Vec<u8>)>, path: &str, body: Value| {
        let res = http
            .post(format!("{base}{path}"))
            .header("cookie", &pair)
            .header("origin", base)
            .header("x-mcp-console-csrf", &csrf)
            .json(&body)
            .send()
            .await
            .unwrap();
        keep(answers, format!("console POST {path}"), res).await
    };
    get(&mut answers, "/ui/api/session").await;
    // Overview, targets, sessions, policy, approvals, requests, failures, usage, integrity.
    for path in [
        "/v1/root/mcp/foundation",
        "/v1/root/hubs",
        "/v1/root/mcp/sessions",
        "/v1/root/mcp/contracts",
        "/v1/root/mcp/approvals?status=all&limit=30",
        "/v1/root/mcp/approvals?status=pending",
        "/v1/root/mcp/audit?limit=1000",
        "/v1/root/mcp/audit?status=error&limit=50",
        "/v1/root/mcp/audit?status=denied&limit=50",
        &format!("/v1/root/mcp/audit?target_id={target}&limit=25"),
        "/v1/root/mcp/audit/usage",
        "/v1/root/mcp/audit/verify",
        "/v1/root/replicas",
    ] {
        get(&mut answers, path).await;
    }
    // The event detail of every event (the requests page opens them one by one).
    let events = get(&mut answers, "/v1/root/mcp/audit?limit=1000&order=asc").await;
    for e in items(&events["events"]) {
        let id = e["event_id"].as_str().unwrap();
        get(&mut answers, &format!("/v1/root/mcp/audit/{id}")).await;
    }
    // The live request log: the stream from the start, read until it has every event.
    let mut stream = http
        .get(format!("{base}/v1/root/mcp/audit/stream?after_seq=0"))
        .header("cookie", &pair)
        .send()
        .await
        .unwrap();
    assert!(stream.status().is_success());
    let last = items(&events["events"]).last().unwrap()["event_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut streamed = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !String::from_utf8_lossy(&streamed).contains(&last) {
        assert!(
            Instant::now() < deadline,
            "the audit stream never sent {last}"
        );
        match tokio::time::timeout(Duration::from_secs(1), stream.chunk()).await {
            Ok(Ok(Some(c))) => streamed.extend_from_slice(&c),
            Ok(other) => panic!("the audit stream ended: {other:?}"),
            Err(_) => {}
        }
    }
    drop(stream);
    answers.push(("console GET /v1/root/mcp/audit/stream".into(), streamed));
    // The target inspector's operator read, a skill disabled and enabled again.
    post(
        &mut answers,
        &format!("/v1/root/hubs/{target}/read"),
        json!({ "tool_id": "hub.get_status" }),
    )
    .await;
    for verb in ["disable", "enable"] {
        post(
            &mut answers,
            &format!("/v1/root/hubs/{target}/skills/infra_access_skill/{verb}"),
            json!({}),
        )
        .await;
    }
    // The MCP Server dialog: a lease (its bearer shown once), then revoked from the list.
    let lease = post(
        &mut answers,
        "/v1/root/mcp/sessions",
        json!({ "target_id": target, "capability_profile": "InfraOpsRead", "ttl_sec": 600 }),
    )
    .await;
    let lease_bearer = lease["token"].as_str().unwrap().to_owned();
    let lease_id = lease["session_id"].as_str().unwrap().to_owned();
    let res = http
        .post(format!("{base}/v1/root/mcp/call"))
        .bearer_auth(&lease_bearer)
        .json(&json!({ "tool_id": "hub.get_status" }))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success());
    get(&mut answers, "/v1/root/mcp/sessions").await;
    post(
        &mut answers,
        &format!("/v1/root/mcp/sessions/{lease_id}/revoke"),
        json!({}),
    )
    .await;
    get(&mut answers, "/v1/root/mcp/audit?limit=1000").await;
    post(&mut answers, "/ui/api/logout", json!({})).await;
    ConsoleRun {
        cookie,
        csrf,
        lease_bearer,
        answers,
    }
}
