//! What the replicas of one zone share besides calls, on one PostgreSQL schema
//! (`MCP_TEST_DATABASE_URL`; each test says SKIPPED without it):
//!
//! - two descriptor publishes through two replicas at once end with one set, the later
//!   revision, served by every replica; a replica that was stopped while its change left the
//!   feed catches up with the set anyway;
//! - the audit stream of one replica carries the events committed on another, also when the
//!   notification of an append is lost;
//! - a console login on one replica works on every replica, a logout on any ends it on all,
//!   a session the zone dropped is refused everywhere within the fallback;
//! - an MCP session id a replica does not know is answered 404, and an rmcp client sent to
//!   another replica by a load balancer re-initializes there;
//! - a hub ownership row that was lost is claimed again, and one left behind by a failed
//!   release goes away, within a heartbeat;
//! - a target labelled, narrowed, cordoned or retired through one replica is so on every
//!   replica when the command answers (a retired target's hub is disconnected from the
//!   replica that holds it, and the leases on it end everywhere).
//!
//! - one replica ships each audit sink (no event twice while both run); when it stops,
//!   another takes the sink over from its cursor.
//!
//! Where a test needs a failure PostgreSQL will not produce on request (a lost
//! notification, a pruned change, a lost ownership row), it changes the rows the way that
//! failure would leave them, with its own connection, and says so.

use mcp_tests::refusal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mcp_tests::zone::{Zone, hubs_of};
use mcp_tests::{TestRoot, mcp_client, until};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

/// How long a condition may take before the test fails.
const WAIT: Duration = Duration::from_secs(30);

// ---- descriptor sets --------------------------------------------------------------------------

/// The built descriptor set with `architecture.overview`'s summary set to `summary` (so each
/// variant has its own set hash).
fn descriptor_set(summary: &str) -> Vec<Value> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let built = mcp_root::descriptors::build::build(
        &root.join("config/descriptor-source"),
        &mcp_root::descriptors::build::BuildOptions::default(),
    )
    .expect("config/descriptor-source builds");
    let mut set: Vec<Value> = built
        .iter()
        .map(|d| serde_json::to_value(d).unwrap())
        .collect();
    let d = set
        .iter_mut()
        .find(|d| d["descriptor_id"] == "architecture.overview")
        .unwrap();
    d["content"]["summary"] = json!(summary);
    d["content_hash"] = json!(mcp_shared::descriptor::content_hash(&d["content"]));
    set
}

async fn publish(http: &reqwest::Client, base: &str, admin: &str, set: &[Value]) -> (u16, Value) {
    let res = http
        .post(format!("{base}/v1/root/mcp/descriptors"))
        .bearer_auth(admin)
        .json(&json!({ "descriptors": set }))
        .send()
        .await
        .unwrap();
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

/// The served set's origin (`revision`, `set_hash`) on `base`.
async fn served(http: &reqwest::Client, base: &str, admin: &str) -> Value {
    let v: Value =
        mcp_tests::get_json(http, format!("{base}/v1/root/mcp/descriptors"), admin).await;
    v["set"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_publishes_through_two_replicas_end_with_one_set_served_everywhere() {
    let Some(zone) = Zone::create("zone-rs").await else {
        return;
    };
    let a = zone.serve("r-a").await;
    let b = zone.serve("r-b").await;
    let c = zone.serve("r-c").await;
    let admin = zone.admin_token();
    let http = mcp_tests::http_client();

    // Rounds of two publishes of different sets at the same moment, through A and B: both
    // are taken (one after the other, two revisions), and every replica serves the later
    // revision, never the other set or a mix of the two.
    for round in 0..4 {
        let via_a = descriptor_set(&format!("round {round}, published through A"));
        let via_b = descriptor_set(&format!("round {round}, published through B"));
        let ((sa, va), (sb, vb)) = tokio::join!(
            publish(&http, &a.base, &admin, &via_a),
            publish(&http, &b.base, &admin, &via_b)
        );
        let logs = || [&a, &b].map(|p| p.log_text()).join("\n---\n");
        assert_eq!(sa, 200, "round {round} through A: {va}\n{}", logs());
        assert_eq!(sb, 200, "round {round} through B: {vb}\n{}", logs());
        let (ra, rb) = (
            va["set"]["revision"].as_i64().unwrap(),
            vb["set"]["revision"].as_i64().unwrap(),
        );
        assert_ne!(ra, rb, "round {round}: two publishes, two revisions");
        assert_ne!(va["set"]["set_hash"], vb["set"]["set_hash"]);
        let later = if ra > rb { &va["set"] } else { &vb["set"] };
        // Each publish returns once every live replica serves it (or after the
        // acknowledgement budget, on a slow machine): the later one is what stays.
        for p in [&a, &b, &c] {
            until(
                &format!("round {round}: {} serves the later set", p.base),
                || async {
                    let set = served(&http, &p.base, &admin).await;
                    set["revision"] == later["revision"] && set["set_hash"] == later["set_hash"]
                },
            )
            .await;
        }
    }

    // C stops; a set published through A and the change naming it leave the feed before C
    // applies them (as the feed's pruning does to a replica stalled past the retention),
    // another change follows. C, resumed, sees the gap in the change ids and reloads.
    c.signal("-STOP");
    let latest = descriptor_set("published while C was stopped");
    let (s, v) = publish(&http, &a.base, &admin, &latest).await;
    assert_eq!(s, 200, "{v}");
    let revision = v["set"]["revision"].as_i64().unwrap();
    let (s, lease) = {
        let res = http
            .post(format!("{}/v1/root/mcp/sessions", a.base))
            .bearer_auth(&admin)
            .json(&json!({"target_id": "hub:rs-any", "capability_profile": "AdaOSDevRead", "ttl_sec": 600}))
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json::<Value>().await.unwrap())
    };
    assert_eq!(s, 201, "{lease}");
    let pruned = zone
        .db
        .exec(&format!(
            "DELETE FROM zone_changes WHERE kind = 'descriptors' AND item = '{revision}'"
        ))
        .await;
    assert_eq!(pruned, 1);
    c.signal("-CONT");
    let start = Instant::now();
    while served(&http, &c.base, &admin).await["revision"] != revision {
        assert!(
            start.elapsed() < WAIT,
            "C never served the set published while it was stopped:\n{}",
            c.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        served(&http, &c.base, &admin).await["set_hash"],
        v["set"]["set_hash"]
    );
    let log = c.log_text();
    assert!(
        log.contains("changes left the feed before this replica applied them"),
        "C says why it reloaded:\n{log}"
    );

    drop((a, b, c));
    zone.db.drop_schema().await;
}

// ---- audit stream -----------------------------------------------------------------------------

/// Reads `stream` until it has sent an event whose SSE id is `seq` (or fails after [`WAIT`]).
async fn stream_until_seq(stream: &mut reqwest::Response, seen: &mut String, seq: i64) {
    let deadline = Instant::now() + WAIT;
    let has = |seen: &str| {
        seen.lines()
            .filter_map(|l| l.strip_prefix("id:"))
            .any(|id| id.trim() == seq.to_string())
    };
    while !has(seen) {
        let chunk = tokio::time::timeout_at(deadline.into(), stream.chunk())
            .await
            .unwrap_or_else(|_| panic!("event {seq} never arrived on the stream:\n{seen}"))
            .unwrap()
            .expect("the stream stays open");
        seen.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_stream_of_one_replica_carries_events_committed_on_another() {
    let Some(zone) = Zone::create("zone-rs").await else {
        return;
    };
    let [a, b] = zone.replicas(["r-a", "r-b"]).await;
    let mut stream = a
        .get_as(
            a.admin_token(),
            "/v1/root/mcp/audit/stream?tool_id=sdk.get_metadata",
        )
        .await;
    assert_eq!(stream.status(), 200);

    // A call on B: its event is committed by B's audit writer and arrives on A's stream.
    let token = b.bearer("hub:rs-any", "AdaOSDevRead").await;
    let (s, body) = b.call(&token, "sdk.get_metadata", json!({})).await;
    assert_eq!(s, 200, "{body}");
    let event_id = body["event_id"].as_str().unwrap().to_owned();
    let row = b.trace_of(&body, "").await;
    let seq = row[0]["seq"].as_i64().unwrap();
    assert_eq!(row[0]["replica_id"], "r-b", "{row:?}");
    let mut seen = String::new();
    stream_until_seq(&mut stream, &mut seen, seq).await;
    assert!(seen.contains(&event_id), "{seen}");

    // An append whose notification is lost: a row committed without NOTIFY (a copy of the
    // last one under the next seq, as another replica's append would leave it). A's
    // fallback reads the head and the stream delivers it.
    let copied = zone
        .db
        .exec(
            "INSERT INTO audit_events (seq, event_id, trace_id, target_id, tool_id, status, actor,
                 started_at, event, prev_hash, hash, replica_id)
             SELECT seq + 1, event_id || '-unannounced', trace_id, target_id, tool_id, status,
                 actor, started_at, event, hash, hash, 'r-elsewhere'
             FROM audit_events ORDER BY seq DESC LIMIT 1",
        )
        .await;
    assert_eq!(copied, 1);
    stream_until_seq(&mut stream, &mut seen, seq + 1).await;

    drop(stream);
    zone.stop([a, b]).await;
}

// ---- console logins ---------------------------------------------------------------------------

/// `GET /ui/api/session` on `root` with `cookie`: the status.
async fn console_session(root: &TestRoot, cookie: &str) -> u16 {
    root.http
        .get(root.url("/ui/api/session"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_login_works_on_every_replica_and_a_logout_ends_it_everywhere() {
    let Some(zone) = Zone::create("zone-rs").await else {
        return;
    };
    let [a, b, c] = zone.replicas(["r-a", "r-b", "r-c"]).await;

    // Logged in on A: the same cookie reads and acts on B and C.
    let (cookie, csrf) = a.console_login().await;
    for r in [&a, &b, &c] {
        assert_eq!(console_session(r, &cookie).await, 200);
    }
    let res = b
        .http
        .get(b.url("/v1/root/replicas"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = c
        .http
        .post(c.url("/v1/root/hubs"))
        .header("cookie", &cookie)
        .header("x-mcp-console-csrf", &csrf)
        .header("origin", c.handle().base_url())
        .json(
            &json!({"target_id": "hub:rs-console", "environment": "test", "subnet_id": "subnet-a"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "an operator action through C");

    // Logged out through B: refused on A and C at the next request.
    let res = b
        .http
        .post(b.url("/ui/api/logout"))
        .header("cookie", &cookie)
        .header("x-mcp-console-csrf", &csrf)
        .header("origin", b.handle().base_url())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    for r in [&a, &b, &c] {
        assert_eq!(console_session(r, &cookie).await, 401);
    }
    let res = a
        .http
        .get(a.url("/v1/root/replicas"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);

    // A session the zone dropped without a change reaching the replicas (its row deleted,
    // as an eviction whose notice was lost leaves it) is refused by a replica that had it
    // cached, within the fallback.
    let (cookie, _) = c.console_login().await;
    assert_eq!(console_session(&a, &cookie).await, 200);
    let id = cookie.split('.').nth(1).unwrap().to_owned();
    let gone = zone
        .db
        .exec(&format!(
            "DELETE FROM console_sessions WHERE session_id = '{id}'"
        ))
        .await;
    assert_eq!(gone, 1);
    until("A refuses the dropped console session", || async {
        console_session(&a, &cookie).await == 401
    })
    .await;

    zone.stop([a, b, c]).await;
}

// ---- MCP transport sessions -------------------------------------------------------------------

/// A TCP load balancer in front of replicas: each new connection goes to the current
/// upstream; sending another upstream cuts the open connections (the replica they went to
/// is gone for the client).
async fn balancer(first: SocketAddr) -> (SocketAddr, tokio::sync::watch::Sender<SocketAddr>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::watch::channel(first);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let mut rx = rx.clone();
            let upstream = *rx.borrow_and_update();
            tokio::spawn(async move {
                let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await else {
                    return;
                };
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    _ = rx.changed() => {}
                }
            });
        }
    });
    (addr, tx)
}

/// A raw Streamable HTTP POST to `/mcp` of `root`: `(status, session id header, body)`.
async fn mcp_post(
    root: &TestRoot,
    bearer: &str,
    session: Option<&str>,
    body: Value,
) -> (u16, Option<String>, String) {
    let mut req = root
        .http
        .post(root.mcp_url())
        .bearer_auth(bearer)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .json(&body);
    if let Some(sid) = session {
        req = req
            .header("mcp-session-id", sid)
            .header("mcp-protocol-version", "2025-06-18");
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let sid = res
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, sid, res.text().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_session_unknown_on_a_replica_is_404_and_the_client_reinitializes_there() {
    let Some(zone) = Zone::create("zone-rs").await else {
        return;
    };
    let [a, b] = zone.replicas(["r-a", "r-b"]).await;
    let token = a.bearer("hub:rs-any", "AdaOSDevRead").await;

    // A session opened on A, with raw requests.
    let (s, sid, body) = mcp_post(
        &a,
        &token,
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let sid = sid.expect("a session-based revision gets a session id");
    let (s, _, _) = mcp_post(
        &a,
        &token,
        Some(&sid),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(s, 202);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (s, _, body) = mcp_post(&a, &token, Some(&sid), list.clone()).await;
    assert_eq!(s, 200, "{body}");
    assert!(body.contains("sdk.get_metadata"), "{body}");

    // The same session id on B (same zone, same lease): 404, which tells a client that
    // follows the specification to initialize a new session.
    let (s, _, body) = mcp_post(&b, &token, Some(&sid), list.clone()).await;
    assert_eq!(s, 404, "{body}");
    let res = b
        .http
        .get(b.mcp_url())
        .bearer_auth(&token)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404, "the GET stream of an unknown session");
    // A session id nobody issued: 404 on A as well.
    let (s, _, _) = mcp_post(&a, &token, Some("no-such-session"), list).await;
    assert_eq!(s, 404);

    // The rmcp client behind a load balancer: initialized on A, moved to B by the balancer
    // (A's connections cut); its next request meets the 404, it re-initializes on B, and
    // the request succeeds there.
    let (lb, upstream) = balancer(a.handle().addr).await;
    let client = mcp_client(&format!("http://{lb}/mcp"), &token)
        .await
        .unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "sdk.get_metadata"));
    let sessions_on_b = b.handle().mcp_sessions();
    upstream.send(b.handle().addr).unwrap();
    let res = client
        .call_tool(CallToolRequestParams::new("sdk.get_metadata"))
        .await
        .unwrap();
    assert_ne!(res.is_error, Some(true), "{res:?}");
    assert_eq!(
        b.handle().mcp_sessions(),
        sessions_on_b + 1,
        "the client opened a session on B"
    );
    let trace = serde_json::to_value(&res).unwrap()["_meta"]["trace_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let row = a
        .admin_get(&format!("/v1/root/mcp/audit?trace_id={trace}"))
        .await;
    assert_eq!(row["events"][0]["replica_id"], "r-b", "{row}");
    drop(client);

    zone.stop([a, b]).await;
}

// ---- hub ownership ----------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_and_left_behind_hub_ownership_rows_heal_within_a_heartbeat() {
    let Some(zone) = Zone::create("zone-rs").await else {
        return;
    };
    let [a, b] = zone.replicas(["r-a", "r-b"]).await;
    let hub = a.start_hub("hub:rs-owned", "").await.unwrap();
    a.enroll("hub:rs-ghost", "test").await.unwrap();
    let view = || async { b.admin_get("/v1/root/replicas").await };
    until("A holds hub:rs-owned in the zone view", || async {
        hubs_of(&view().await, "r-a") == ["hub:rs-owned"]
    })
    .await;

    // The row of a connection A holds is lost (a claim that failed, or another replica's
    // stale claim whose release removed it): A's heartbeat claims it again.
    let lost = zone
        .db
        .exec("DELETE FROM hub_ownership WHERE target_id = 'hub:rs-owned'")
        .await;
    assert_eq!(lost, 1);
    until("A holds hub:rs-owned again", || async {
        hubs_of(&view().await, "r-a") == ["hub:rs-owned"]
    })
    .await;
    let token = b.bearer("hub:rs-owned", "InfraOpsRead").await;
    let (s, body) = b.call(&token, "hub.get_status", json!({})).await;
    assert_eq!(s, 200, "forwarded B → A: {body}");

    // A row A left behind for a connection it no longer holds (a release that failed):
    // A's heartbeat drops it instead of keeping it alive.
    let ghost = zone
        .db
        .exec(
            "INSERT INTO hub_ownership (target_id, replica_id, connection_id, connected_at, heartbeat_at)
             VALUES ('hub:rs-ghost', 'r-a', 'a-connection-that-ended',
                 (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT,
                 (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT)",
        )
        .await;
    assert_eq!(ghost, 1);
    until("the row left behind is gone", || async {
        hubs_of(&view().await, "r-a") == ["hub:rs-owned"]
    })
    .await;
    // B's directory, kept from the zone's ownership, says nobody holds it.
    until("hub:rs-ghost offline on B", || async {
        b.admin_get("/v1/root/hubs").await["targets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["target_id"] == "hub:rs-ghost" && t["status"] == "offline")
    })
    .await;

    hub.stop().await;
    zone.stop([a, b]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_labelled_cordoned_or_retired_on_one_replica_is_so_on_every_replica() {
    let Some(zone) = Zone::create("zone-rs").await else {
        return;
    };
    let [a, b] = zone.replicas(["r-a", "r-b"]).await;
    let hub = a.start_hub("hub:rs-life", "").await.unwrap();
    let token = b.bearer("hub:rs-life", "InfraOpsRead").await;
    let call = |root: &'static str| {
        let (a, b, token) = (&a, &b, token.clone());
        async move {
            let r = if root == "a" { a } else { b };
            r.call(&token, "hub.get_status", json!({})).await
        }
    };
    until("B forwards to A's hub", || async {
        call("b").await.0 == 200
    })
    .await;

    b.admin_post(
        "/v1/root/hubs/hub:rs-life/labels",
        json!({ "set": { "role": "web" } }),
    )
    .await;
    let listed = a
        .admin_get("/v1/root/hubs?selector=label%3Arole%3Dweb")
        .await;
    assert_eq!(
        listed["total"], 1,
        "A selects by B's label at once: {listed}"
    );

    // In force on the other replica when the command answers: no waiting here.
    b.admin_post("/v1/root/hubs/hub:rs-life/lifecycle/cordon", json!({}))
        .await;
    let (s, body) = call("a").await;
    assert_eq!(refusal(s, &body), (403, "target_cordoned"), "{body}");
    a.admin_post("/v1/root/hubs/hub:rs-life/lifecycle/uncordon", json!({}))
        .await;
    assert_eq!(call("b").await.0, 200);
    a.admin_post(
        "/v1/root/hubs/hub:rs-life/narrowing",
        json!({ "deny": ["hub.get_status"] }),
    )
    .await;
    let (s, body) = call("b").await;
    assert_eq!(refusal(s, &body), (403, "target_narrowed"), "{body}");

    // Retired through B: A, which holds the hub, disconnects it; the lease ended everywhere.
    b.admin_post("/v1/root/hubs/hub:rs-life/lifecycle/retire", json!({}))
        .await;
    assert_eq!(
        call("a").await.0,
        401,
        "the lease on the retired target ended on A too"
    );
    until("A disconnected the retired target's hub", || async {
        a.admin_get("/v1/root/hubs/hub:rs-life").await["status"] == "offline"
            && b.admin_get("/v1/root/hubs/hub:rs-life").await["status"] == "offline"
    })
    .await;
    hub.stop().await;
    zone.stop([a, b]).await;
}

/// A fleet run outlives the replica driving it: started through A on hubs B holds, with a
/// pause after its canary; A stops during the pause, and B takes the run over and finishes
/// it, each target called once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_run_of_a_replica_that_is_gone_is_taken_over_by_another() {
    let Some(zone) = Zone::create("zone-rs").await else {
        return;
    };
    let [a, b] = zone.replicas(["r-a", "r-b"]).await;
    let hubs = [
        b.start_hub("f-1", "").await.unwrap(),
        b.start_hub("f-2", "").await.unwrap(),
    ];
    until("A sees both hubs online", || async {
        a.admin_get("/v1/root/hubs?selector=id%3Df-*,status%3Donline")
            .await["total"]
            == 2
    })
    .await;
    let started = a
        .admin_post(
            "/v1/root/fleet/runs",
            json!({ "selector": "id=f-*", "tool_id": "hub.get_status",
                    "plan": { "canary": 1, "pause_after_canary_ms": 4000 } }),
        )
        .await;
    let path = format!(
        "/v1/root/fleet/runs/{}",
        started["run_id"].as_str().unwrap()
    );
    until("the canary finished on A", || async {
        a.admin_get(&path).await["counts"]["succeeded"] == 1
    })
    .await;
    a.stop().await;
    let r = mcp_tests::eventually("B finishes the run", || async {
        let r = b.admin_get(&path).await;
        (r["state"] == "completed").then_some(r)
    })
    .await;
    assert_eq!(r["counts"]["succeeded"], 2, "{r}");
    let events = b.trace_of(&r, "tool_id=hub.get_status&limit=100").await;
    let mut reached: Vec<&str> = events
        .iter()
        .map(|e| e["target_id"].as_str().unwrap())
        .collect();
    reached.sort();
    assert_eq!(reached, ["f-1", "f-2"], "each target once: {events:?}");
    for hub in hubs {
        hub.stop().await;
    }
    zone.stop([b]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_ships_each_sink_and_another_takes_over_when_it_stops() {
    use crate::governance::sinks::{receivers, trail_ids};
    use std::collections::{BTreeMap, BTreeSet};
    let Some(zone) = Zone::create("zone-rs").await else {
        return;
    };
    let (sink, got) = receivers(None).await;
    let audit: toml::Value = toml::from_str(&format!(
        "[[audit.sinks]]\nname = \"siem\"\nkind = \"http\"\nendpoint = \"{sink}/ingest\"\nbatch = 4\n"
    ))
    .unwrap();
    let a = zone
        .replica_with("r-a", |c| {
            c.audit.sinks = audit["audit"]["sinks"].clone().try_into().unwrap()
        })
        .await;
    a.issue_sessions("s-a", 3).await;
    until("A ships", || async { !got.http.lock().unwrap().is_empty() }).await;
    let b = zone
        .replica_with("r-b", |c| {
            c.audit.sinks = audit["audit"]["sinks"].clone().try_into().unwrap()
        })
        .await;
    a.issue_sessions("s-b", 15).await;
    b.issue_sessions("s-c", 15).await;
    let delivered = |got: &crate::governance::sinks::Received| {
        let mut n: BTreeMap<String, usize> = BTreeMap::new();
        for (id, _) in got.http.lock().unwrap().iter() {
            *n.entry(id.clone()).or_default() += 1;
        }
        n
    };
    let all: BTreeSet<String> = trail_ids(&b.url(""), &b.admin_token())
        .await
        .into_iter()
        .collect();
    assert!(all.len() >= 33, "{}", all.len());
    mcp_tests::eventually("every event delivered", || async {
        let n = delivered(&got);
        all.iter().all(|id| n.contains_key(id)).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let twice: Vec<_> = delivered(&got)
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(
        twice.is_empty(),
        "one shipper for the zone, yet sent twice: {twice:?}"
    );
    // A stops: B takes the sink over from the cursor.
    a.stop().await;
    b.issue_sessions("s-d", 10).await;
    let all: BTreeSet<String> = trail_ids(&b.url(""), &b.admin_token())
        .await
        .into_iter()
        .collect();
    mcp_tests::eventually("B ships what A left", || async {
        let n = delivered(&got);
        all.iter().all(|id| n.contains_key(id)).then_some(())
    })
    .await;
    zone.stop([b]).await;
}
