//! Several roots for one zone on one PostgreSQL database (`MCP_TEST_DATABASE_URL`; skipped,
//! and said so, without): real `mcp-root serve` and `mcp-hub run` processes, hubs spread over
//! the replicas, forwarding, failover after SIGKILL, revocation and surface changes seen by
//! every replica at once, one audit chain for the zone. Plus the replica channel's refusals
//! (in-process) and the single-replica view on SQLite.

use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::run_ok;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use mcp_root::replica::credential;
use mcp_shared::replica::{REPLICA_PROTOCOL_VERSION, ReplicaAnswer, ReplicaCall, ReplicaEnvelope};
use mcp_tests::admin::Admin;
use mcp_tests::hub_process::HubProcess;
use mcp_tests::process::Proc;
use mcp_tests::zone::{PgSchema, Zone, hubs_of};
use mcp_tests::{TestRoot, mcp_client, until, workspace_bin};
use serde_json::{Value, json};

/// A replica of the test zone.
type Replica = mcp_tests::zone::ReplicaProcess;

/// One `mcp-hub run` process dialing `root_urls` in order.
fn start_hub(dir: &Path, target: &str, token: &str, root_urls: &[&str]) -> Proc {
    start_hub_with(dir, target, token, root_urls, "")
}

/// [`start_hub`] with `extra` at the top of the hub's configuration.
fn start_hub_with(dir: &Path, target: &str, token: &str, root_urls: &[&str], extra: &str) -> Proc {
    HubProcess::new(dir, target, token, root_urls)
        .extra(extra)
        .spawn()
}

/// The client side of the test: every call it makes is counted (each is one audit event),
/// REST calls carry a trace id of their own.
struct Client {
    http: reqwest::Client,
    admin: String,
    calls: u64,
    traces: Vec<(String, String)>,
}

impl Client {
    async fn admin_get(&self, base: &str, path: &str) -> Value {
        self.admin_at(base).get(path).await.unwrap()
    }

    async fn admin_post(&self, base: &str, path: &str, body: Value) -> (u16, Value) {
        self.admin_at(base).post_status(path, body).await.unwrap()
    }

    /// The admin client for replica `base`.
    fn admin_at(&self, base: &str) -> Admin {
        Admin::new(self.http.clone(), base, &self.admin)
    }

    async fn lease(&self, base: &str, target: &str, profile: &str) -> (String, String) {
        let (s, v) = self
            .admin_post(
                base,
                "/v1/root/mcp/sessions",
                json!({"target_id": target, "capability_profile": profile, "ttl_sec": 600}),
            )
            .await;
        assert_eq!(s, 201, "{v}");
        (
            v["session_id"].as_str().unwrap().to_owned(),
            v["token"].as_str().unwrap().to_owned(),
        )
    }

    /// REST `/call` on `replica`; a 401 is not counted here (refused before any lease is
    /// known: its event is an `auth.refuse`, counted apart).
    async fn call(&mut self, replica: &Replica, bearer: &str, tool: &str) -> (u16, Value) {
        let trace = uuid::Uuid::now_v7().simple().to_string();
        let res = self
            .http
            .post(format!("{}/v1/root/mcp/call", replica.base))
            .bearer_auth(bearer)
            .header("traceparent", format!("00-{trace}-0000000000000001-01"))
            .json(&json!({"tool_id": tool, "arguments": {}}))
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        if status != 401 {
            self.calls += 1;
            self.traces.push((trace, replica.id.clone()));
        }
        (status, res.json().await.unwrap_or(Value::Null))
    }
}

fn health_of(view: &Value, replica: &str) -> String {
    items(&view["replicas"])
        .iter()
        .find(|r| r["replica_id"] == replica)
        .map(|r| r["health"].as_str().unwrap_or("").to_owned())
        .unwrap_or_default()
}

fn tool_names(tools: &[rmcp::model::Tool]) -> Vec<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_forward_fail_over_revoke_at_once_and_keep_one_audit_chain() {
    let Some(zone) = Zone::create("zone-r8").await else {
        return;
    };
    // A first: it creates the admin token and master key the others share.
    let a = zone.serve("r-a").await;
    let mut b = zone.serve("r-b").await;
    let c = zone.serve("r-c").await;
    let admin = zone.admin_token();
    let mut client = Client {
        http: mcp_tests::http_client(),
        admin,
        calls: 0,
        traces: Vec::new(),
    };

    let view = client.admin_get(&a.base, "/v1/root/replicas").await;
    assert_eq!(view["mode"], "replicated", "{view}");
    for id in ["r-a", "r-b", "r-c"] {
        assert_eq!(health_of(&view, id), "up", "{view}");
    }

    // Two hubs enrolled through A, spread over B and C (each with A as its fallback).
    let mut tokens = Vec::new();
    for target in ["hub:r8-one", "hub:r8-two"] {
        let (s, v) = client
            .admin_post(
                &a.base,
                "/v1/root/hubs",
                json!({"target_id": target, "environment": "test", "subnet_id": "subnet-a"}),
            )
            .await;
        assert_eq!(s, 201, "{v}");
        tokens.push(v["token"].as_str().unwrap().to_owned());
    }
    let _hub_one = start_hub(
        zone.dir.path(),
        "hub:r8-one",
        &tokens[0],
        &[b.base.as_str(), a.base.as_str()],
    );
    let _hub_two = start_hub(
        zone.dir.path(),
        "hub:r8-two",
        &tokens[1],
        &[c.base.as_str(), a.base.as_str()],
    );
    until("hub one on B and hub two on C in A's zone view", || async {
        let v = client.admin_get(&a.base, "/v1/root/replicas").await;
        hubs_of(&v, "r-b") == ["hub:r8-one"] && hubs_of(&v, "r-c") == ["hub:r8-two"]
    })
    .await;

    // A client on A calls the hub B holds: forwarded A → B, answered by hub one.
    // Each replica learns of the other replicas' hubs through the change feed: wait until every
    // directory has both online (a call before that is refused as `target_offline`, retryable,
    // which is not what this test is about).
    let (_, one) = client.lease(&a.base, "hub:r8-one", "InfraOpsRead").await;
    until("both hubs online on every replica", || async {
        for base in [&a.base, &b.base, &c.base] {
            let v = client.admin_get(base, "/v1/root/hubs").await;
            let online = |id: &str| {
                items(&v["targets"])
                    .iter()
                    .any(|t| t["target_id"] == id && t["status"] == "online")
            };
            if !(online("hub:r8-one") && online("hub:r8-two")) {
                return false;
            }
        }
        true
    })
    .await;
    let (s, body) = client.call(&a, &one, "hub.get_status").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["result"]["target_id"], "hub:r8-one", "{body}");
    // The same over MCP on A, and on C (a lease issued by A, first seen by C).
    let mcp_a = mcp_client(&format!("{}/mcp", a.base), &one).await.unwrap();
    mcp_tests::hub_status(&mcp_a).await;
    client.calls += 1;
    let (s, body) = client.call(&c, &one, "hub.get_status").await;
    assert_eq!(s, 200, "C forwards to B: {body}");

    // A lease issued by B works on A (forwarded A → C for hub two) and on B itself.
    let (two_id, two) = client.lease(&b.base, "hub:r8-two", "InfraOpsRead").await;
    let (s, body) = client.call(&a, &two, "hub.get_status").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["result"]["target_id"], "hub:r8-two");
    let (s, _) = client.call(&b, &two, "hub.get_status").await;
    assert_eq!(s, 200);

    // Revoked on A: refused on B (which had it active) and C at once.
    let (s, v) = client
        .admin_post(
            &a.base,
            &format!("/v1/root/mcp/sessions/{two_id}/revoke"),
            json!({}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(client.call(&b, &two, "hub.get_status").await.0, 401);
    assert_eq!(client.call(&c, &two, "sdk.get_metadata").await.0, 401);
    // Revoking again through C: it is no longer active anywhere.
    let (s, v) = client
        .admin_post(
            &c.base,
            &format!("/v1/root/mcp/sessions/{two_id}/revoke"),
            json!({}),
        )
        .await;
    assert_eq!(s, 409, "{v}");

    // A skill disabled through B (hub two is on C) disappears from tools/list on A at once.
    let (_, three) = client.lease(&a.base, "hub:r8-two", "InfraOpsRead").await;
    let mcp_three = mcp_client(&format!("{}/mcp", a.base), &three)
        .await
        .unwrap();
    let listed = tool_names(&mcp_three.list_all_tools().await.unwrap());
    assert!(listed.contains(&"hub.get_status".to_owned()), "{listed:?}");
    let (s, v) = client
        .admin_post(
            &b.base,
            "/v1/root/hubs/hub:r8-two/skills/infra_access_skill/disable",
            json!({}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["skill"]["desired"]["enabled"], false, "{v}");
    assert_eq!(v["skill"]["hub"]["enabled"], false, "the hub followed: {v}");
    let listed = tool_names(&mcp_three.list_all_tools().await.unwrap());
    assert!(!listed.contains(&"hub.get_status".to_owned()), "{listed:?}");
    let (s, body) = client.call(&a, &three, "hub.get_status").await;
    assert_eq!(s, 403, "{body}");
    assert_eq!(body["error"]["code"], "skill_disabled");
    let (s, v) = client
        .admin_post(
            &c.base,
            "/v1/root/hubs/hub:r8-two/skills/infra_access_skill/enable",
            json!({}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let listed = tool_names(&mcp_three.list_all_tools().await.unwrap());
    assert!(listed.contains(&"hub.get_status".to_owned()), "{listed:?}");

    // SIGKILL B: hub one fails over to A, and calls through A and C succeed again. The first
    // call, made as B dies, is answered all the same: its forward to B fails and hub.get_status's
    // retry policy routes it again, inside its deadline, to the replica the hub moved to.
    b.proc.kill();
    let (s, body) = client.call(&a, &one, "hub.get_status").await;
    assert_eq!(
        s,
        200,
        "retried onto the new owner: {body}\n--- A\n{}",
        a.log_text()
    );
    assert_eq!(body["result"]["target_id"], "hub:r8-one");
    let start = Instant::now();
    loop {
        let (s, body) = client.call(&a, &one, "hub.get_status").await;
        if s == 200 {
            assert_eq!(body["result"]["target_id"], "hub:r8-one");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "hub one never came back through A: {body}\n--- A\n{}",
            a.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let start = Instant::now();
    loop {
        let (s, body) = client.call(&c, &one, "hub.get_status").await;
        if s == 200 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "hub one never came back through C: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    until("B down and hub one on A in the zone view", || async {
        let v = client.admin_get(&c.base, "/v1/root/replicas").await;
        health_of(&v, "r-b") == "down"
            && hubs_of(&v, "r-a") == ["hub:r8-one"]
            && hubs_of(&v, "r-c") == ["hub:r8-two"]
    })
    .await;
    // The zone view through the admin CLI and in foundation.
    let out = run_ok(
        Command::new(workspace_bin("mcp-root").unwrap())
            .args([
                "admin",
                "--root-url",
                &c.base,
                "--admin-token",
                &client.admin,
            ])
            .args(["replicas", "list", "--json"]),
    );
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(items(&cli["replicas"]).len(), 3, "{cli}");
    assert_eq!(cli["self"], "r-c");
    let foundation = client.admin_get(&a.base, "/v1/root/mcp/foundation").await;
    assert_eq!(foundation["replicas"]["self"], "r-a", "{foundation}");

    // One chain for the zone: it verifies, and holds exactly one event per call, written by
    // the replica the client called.
    drop(mcp_a);
    drop(mcp_three);
    let verify = client.admin_get(&c.base, "/v1/root/mcp/audit/verify").await;
    assert_eq!(verify["ok"], true, "{verify}");
    // The operator's actions (enrolments, leases, the revocations — the refused one too —,
    // skill commands) are events of the same chain, each on the replica it was sent to.
    let ops = client
        .admin_get(
            &a.base,
            "/v1/root/mcp/audit?actor=operator:admin&limit=1000",
        )
        .await;
    let ops = items(&ops["events"]);
    let revokes: Vec<(&str, &str)> = ops
        .iter()
        .filter(|e| e["tool_id"] == "admin.lease.revoke")
        .map(|e| {
            (
                e["status"].as_str().unwrap(),
                e["replica_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(revokes, [("error", "r-c"), ("ok", "r-a")], "{ops:#?}");
    assert!(
        ops.iter().any(|e| e["tool_id"] == "admin.skill.disable"),
        "{ops:#?}"
    );
    // And each bearer refused once revoked (on whichever replica refused it).
    let refused = client
        .admin_get(&a.base, "/v1/root/mcp/audit?tool_id=auth.refuse&limit=1000")
        .await;
    let refused = items(&refused["events"]).len() as u64;
    assert!(refused > 0, "the revoked bearers' refusals are events");
    assert_eq!(
        verify["checked"].as_u64(),
        Some(client.calls + ops.len() as u64 + refused),
        "{verify}"
    );
    for (trace, replica) in &client.traces {
        let v = client
            .admin_get(&a.base, &format!("/v1/root/mcp/audit?trace_id={trace}"))
            .await;
        let events = items(&v["events"]);
        assert_eq!(events.len(), 1, "trace {trace}: {v}");
        assert_eq!(events[0]["replica_id"], *replica, "{v}");
    }
    let writers: std::collections::BTreeSet<String> = client
        .admin_get(&a.base, "/v1/root/mcp/audit?limit=1000")
        .await["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["replica_id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        writers.into_iter().collect::<Vec<_>>(),
        ["r-a", "r-b", "r-c"]
    );
    // `audit export` (oldest first, the zone's commit order) has every event once.
    let out = run_ok(
        Command::new(workspace_bin("mcp-root").unwrap())
            .args([
                "admin",
                "--root-url",
                &a.base,
                "--admin-token",
                &client.admin,
            ])
            .args(["audit", "export"]),
    );
    let seqs: Vec<i64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(
        seqs,
        (1..=verify["checked"].as_i64().unwrap()).collect::<Vec<_>>()
    );

    drop((a, b, c));
    zone.db.drop_schema().await;
}

/// The replica channel refuses what it must, precisely: no credential, a forged one, an
/// expired one, one minted for another replica or another body; a valid one is served.
#[tokio::test]
async fn the_replica_channel_refuses_forged_expired_and_misdirected_credentials() {
    let test = "the_replica_channel_refuses_forged_expired_and_misdirected_credentials";
    let Some(db) = PgSchema::create(test).await else {
        return;
    };
    let root = TestRoot::start_with(|c| c.database_url = Some(db.url.clone()))
        .await
        .unwrap();
    let zone = root
        .handle()
        .app
        .zone
        .clone()
        .expect("replicas on PostgreSQL");
    let me = zone.replica_id.clone();
    let (master, _) =
        mcp_root::secrets::MasterKey::load_or_create(&root.data_dir().join("secrets.key")).unwrap();
    let key = master.derive_key(credential::KEY_PURPOSE);
    let now_ms = mcp_shared::time::unix_ms(mcp_shared::time::now());
    let body = serde_json::to_vec(&ReplicaEnvelope {
        v: REPLICA_PROTOCOL_VERSION,
        body: ReplicaCall::Cancel {
            target_id: "hub:nowhere".into(),
            call_id: "c-1".into(),
        },
    })
    .unwrap();
    let post = |auth: Option<String>, body: Vec<u8>| {
        let mut req = root
            .http
            .post(root.url("/v1/root/internal/route"))
            .header("content-type", "application/json")
            .body(body);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        async move {
            let res = req.send().await.unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    };
    let refused = |(status, v): (u16, Value), why: &str| {
        assert_eq!(status, 401, "{v}");
        assert_eq!(v["error"]["code"], "unauthenticated", "{v}");
        let msg = error_message(&v).to_owned();
        assert!(msg.contains(why), "`{msg}` should say `{why}`");
    };
    refused(post(None, body.clone()).await, "missing replica credential");
    refused(
        post(Some(root.admin_token()), body.clone()).await,
        "no scheme",
    );
    let forged = format!(
        "Replica v1.r-x.{me}.{}.{}",
        now_ms + 60_000,
        "ab".repeat(32)
    );
    refused(
        post(Some(forged), body.clone()).await,
        "signature does not verify",
    );
    let other_zone = credential::mint(&[9; 32], "r-x", &me, now_ms + 60_000, &body);
    refused(
        post(Some(format!("Replica {other_zone}")), body.clone()).await,
        "signature does not verify",
    );
    let expired = credential::mint(&key, "r-x", &me, now_ms - 1_000, &body);
    refused(
        post(Some(format!("Replica {expired}")), body.clone()).await,
        "expired",
    );
    let elsewhere = credential::mint(&key, "r-x", "r-other", now_ms + 60_000, &body);
    refused(
        post(Some(format!("Replica {elsewhere}")), body.clone()).await,
        "is for replica `r-other`",
    );
    let good = credential::mint(&key, "r-x", &me, now_ms + 60_000, &body);
    refused(
        post(Some(format!("Replica {good}")), b"{}".to_vec()).await,
        "signature does not verify",
    );
    let (s, v) = post(Some(format!("Replica {good}")), body.clone()).await;
    assert_eq!(s, 200, "{v}");
    let answer: ReplicaEnvelope<ReplicaAnswer> = serde_json::from_value(v).unwrap();
    assert_eq!(answer.body, ReplicaAnswer::Cancelled);
    // Each credential is good once.
    refused(
        post(Some(format!("Replica {good}")), body.clone()).await,
        "already used",
    );
    // A route for a hub this replica does not hold is refused, never re-forwarded.
    let route = serde_json::to_vec(&ReplicaEnvelope {
        v: REPLICA_PROTOCOL_VERSION,
        body: ReplicaCall::Route {
            target_id: "hub:nowhere".into(),
            call_id: "c-2".into(),
            trace_id: "t".into(),
            session_id: "s".into(),
            tool_id: "hub.get_status".into(),
            capability: "hub.get_status".into(),
            body: mcp_shared::protocol::CallBody {
                arguments: json!({}),
                dry_run: false,
                idempotency_key: None,
                confirmed_effect: None,
            },
            remaining_ms: 1_000,
        },
    })
    .unwrap();
    let cred = credential::mint(&key, "r-x", &me, now_ms + 60_000, &route);
    let (s, v) = post(Some(format!("Replica {cred}")), route).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["body"]["type"], "refused", "{v}");
    assert_eq!(v["body"]["error"]["code"], "target_offline", "{v}");
    // Nothing of this is an audit event but the refused credentials (auth.refuse, naming
    // the address, never the credential).
    let verify = root.admin_get("/v1/root/mcp/audit/verify").await;
    let trail = root.trail("limit=100").await;
    assert!(
        trail.iter().all(|e| e["tool_id"] == "auth.refuse"),
        "{trail:#?}"
    );
    assert_eq!(verify["checked"], trail.len(), "{verify}");
    root.stop().await;
    db.drop_schema().await;
}

/// On SQLite root is the zone's only replica: the zone view says so and the replica channel
/// is off.
#[tokio::test]
async fn on_sqlite_root_is_the_single_replica() {
    let root = TestRoot::start_with(TestRoot::on_sqlite).await.unwrap();
    assert!(root.handle().app.zone.is_none());
    let view = root.admin_get("/v1/root/replicas").await;
    assert_eq!(view["mode"], "single", "{view}");
    assert_eq!(items(&view["replicas"]).len(), 1);
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let foundation: Value =
        mcp_tests::get_json(&root.http, root.url("/v1/root/mcp/foundation"), &token).await;
    assert_eq!(foundation["replicas"]["mode"], "single", "{foundation}");
    assert!(foundation["replicas"]["replicas"][0]["advertise_url"].is_null());
    let res = root
        .http
        .post(root.url("/v1/root/internal/route"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 404);
    root.stop().await;
}

/// An OAuth sign-in spans the zone: registered on one replica, authorized on another,
/// approved on the first, exchanged and refreshed on either; the token calls on both, and
/// revoking its lease on one ends the sign-in on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oauth_sign_in_spans_the_replicas() {
    let Some(zone) = Zone::create("zone-r8").await else {
        return;
    };
    let oauth = "[oauth]\ndiscovery = true\npublic_url = \"http://zone-r8.example\"\n";
    let a = zone.serve_with("r-a", oauth).await;
    let b = zone.serve_with("r-b", oauth).await;
    let admin = zone.admin_token();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let redirect = "http://127.0.0.1:47888/cb";
    let client: Value = http
        .post(format!("{}/oauth/register", a.base))
        .json(&json!({"client_name": "zone", "redirect_uris": [redirect]}))
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
    let query = mcp_tests::oauth::authorize_query(
        client_id,
        redirect,
        &challenge,
        &[("resource", "http://zone-r8.example/mcp")],
    );
    let res = http
        .get(format!("{}/oauth/authorize?{query}", b.base))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 302, "{}", b.log_text());
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    let sealed = mcp_tests::oauth::sealed_request(&location).unwrap();
    let decided: Value = http
        .post(format!("{}/oauth/authorize/approve", a.base))
        .bearer_auth(&admin)
        .json(&json!({"request": sealed, "target_id": "hub:r8-oauth", "capability_profile": "InfraOpsRead", "ttl_sec": 600}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let q = mcp_tests::oauth::query_of(decided["redirect"].as_str().unwrap());
    assert_eq!(q["iss"], "http://zone-r8.example");
    let token = async |base: &str, pairs: &[(&str, &str)]| -> (u16, Value) {
        let res = http
            .post(format!("{base}/oauth/token"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(mcp_tests::oauth::form(pairs))
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    };
    let (status, first) = token(
        &b.base,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", client_id),
            ("code", &q["code"]),
            ("redirect_uri", redirect),
            ("code_verifier", &verifier),
            ("resource", "http://zone-r8.example/mcp"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{first}");
    let tools_list = async |base: &str, bearer: &str| -> u16 {
        http.post(format!("{base}/mcp"))
            .bearer_auth(bearer)
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "replica-test", "version": "1"}}}}),
            )
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/list")
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    let access = first["access_token"].as_str().unwrap();
    assert_eq!(tools_list(&a.base, access).await, 200);
    assert_eq!(tools_list(&b.base, access).await, 200);
    let (status, second) = token(
        &a.base,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", client_id),
            ("refresh_token", first["refresh_token"].as_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(status, 200, "{second}");
    let access = second["access_token"].as_str().unwrap();
    assert_eq!(tools_list(&b.base, access).await, 200);
    // The operator revokes the lease on B: the refresh is refused on A.
    let leases: Value =
        mcp_tests::get_json(&http, format!("{}/v1/root/mcp/sessions", b.base), &admin).await;
    let live = items(&leases["sessions"])
        .iter()
        .find(|l| l["status"] == "active")
        .unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let res = http
        .post(format!("{}/v1/root/mcp/sessions/{live}/revoke", b.base))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success());
    assert_eq!(tools_list(&a.base, access).await, 401);
    let (status, body) = token(
        &a.base,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", client_id),
            ("refresh_token", second["refresh_token"].as_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
}

#[tokio::test]
async fn a_task_is_read_and_cancelled_through_the_other_replica() {
    use crate::mcp::tasks::{connect_to, get, poll_until, start_task, terminal};
    use rmcp::model::{CancelTaskParams, TaskPayload, TaskStatus};
    let Some(zone) = Zone::create("zone-r8").await else {
        return;
    };
    let a = zone.serve("r-a").await;
    let b = zone.serve("r-b").await;
    let client = Client {
        http: mcp_tests::http_client(),
        admin: zone.admin_token(),
        calls: 0,
        traces: Vec::new(),
    };
    let target = "hub:r8-tasks";
    let (s, v) = client
        .admin_post(
            &a.base,
            "/v1/root/hubs",
            json!({"target_id": target, "environment": "test", "subnet_id": "subnet-a"}),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let tests = "write_scope = \"test-only\"\n\
                 [[skill.allowed_tests]]\nname = \"quick\"\nargv = [\"true\"]\n\
                 [[skill.allowed_tests]]\nname = \"slow\"\nargv = [\"sleep\", \"30\"]\ntimeout_ms = 60000\n";
    let _hub = start_hub_with(
        zone.dir.path(),
        target,
        v["token"].as_str().unwrap(),
        &[&a.base],
        tests,
    );
    until("the hub online on r-a", || async {
        let view = client.admin_get(&a.base, "/v1/root/replicas").await;
        hubs_of(&view, "r-a").iter().any(|h| h == target)
    })
    .await;
    let (_, bearer) = client.lease(&a.base, target, "InfraOpsControl").await;
    let on_a = connect_to(&format!("{}/mcp", a.base), &bearer, true).await;
    let on_b = connect_to(&format!("{}/mcp", b.base), &bearer, true).await;

    // Run on r-a (it holds the hub), read through r-b.
    let quick = start_task(
        &on_a,
        "hub.run_allowed_tests",
        json!({"name": "quick"}),
        "k-q",
    )
    .await;
    let (done, _) = poll_until(&on_b, &quick.task.task_id, terminal).await;
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("{done:?}")
    };
    assert_eq!(
        result["structuredContent"]["result"]["passed"], true,
        "{result:?}"
    );

    // Cancelled through r-b: r-a stops the call, the hub stops the test.
    let slow = start_task(
        &on_a,
        "hub.run_allowed_tests",
        json!({"name": "slow"}),
        "k-s",
    )
    .await;
    let id = slow.task.task_id.clone();
    assert_eq!(get(&on_b, &id).await.task.status(), TaskStatus::Working);
    on_b.peer()
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    assert_eq!(get(&on_a, &id).await.task.status(), TaskStatus::Cancelled);
    until("the cancelled call's event", || async {
        let audit = client
            .admin_get(&b.base, "/v1/root/mcp/audit?tool_id=hub.run_allowed_tests")
            .await;
        items(&audit["events"]).iter().any(|e| {
            e["error"]["code"] == "cancelled" && e["replica_id"].as_str().is_none_or(|r| r == "r-a")
        })
    })
    .await;
    let reader = client.lease(&b.base, target, "InfraOpsRead").await.1;
    until("the hub's record of the stopped test", || async {
        let res: Value = client
            .http
            .post(format!("{}/v1/root/mcp/call", b.base))
            .bearer_auth(&reader)
            .json(&json!({"tool_id": "hub.get_activity_log", "arguments": {}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        res["result"]["entries"].as_array().is_some_and(|entries| {
            entries.iter().any(|e| {
                e["tool_id"] == "hub.run_allowed_tests"
                    && e["dry_run"] == false
                    && e["error_code"] == "cancelled"
            })
        })
    })
    .await;
    drop((a, b));
    zone.db.drop_schema().await;
}
