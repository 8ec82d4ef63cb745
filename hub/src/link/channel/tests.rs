//! WebSocket-level tests of the hub against a minimal in-test root (tokio-tungstenite server).

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use mcp_shared::error::ErrorCode;
use mcp_shared::protocol::{
    CallOutcome, CallRequest, Envelope, HubToRoot, PROTOCOL_VERSION, RootToHub, SkillCommand,
    decode, signing_key,
};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

use super::{Backoff, ChannelError, raw_id};
use crate::HubConfig;

const TOKEN: &str = "mcph_channel_test";

type Ws = WebSocketStream<TcpStream>;

async fn accept(listener: &TcpListener) -> Ws {
    let (tcp, _) = tokio::time::timeout(Duration::from_secs(10), listener.accept())
        .await
        .expect("hub dials within 10 s")
        .expect("accept");
    tokio_tungstenite::accept_async(tcp)
        .await
        .expect("handshake")
}

/// The next frame from the hub that is not a heartbeat.
async fn next(ws: &mut Ws) -> Envelope<HubToRoot> {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a frame within 10 s")
            .expect("stream open")
            .expect("frame");
        if let Message::Text(t) = msg {
            let env = decode::<HubToRoot>(&t).expect("hub frames decode");
            if env.body != HubToRoot::Heartbeat {
                return env;
            }
        }
    }
}

async fn send(ws: &mut Ws, id: &str, body: RootToHub) {
    let env = Envelope {
        v: PROTOCOL_VERSION,
        id: id.into(),
        in_reply_to: None,
        body,
    };
    let text = serde_json::to_string(&env).expect("serialize");
    ws.send(Message::text(text)).await.expect("send");
}

fn call(id: &str, tool: &str, arguments: serde_json::Value, ttl_ms: i64) -> RootToHub {
    let mut call = CallRequest {
        call_id: id.into(),
        trace_id: format!("trace-{id}"),
        session_id: "lease-1".into(),
        tool_id: tool.into(),
        capability: "infra.read.status".into(),
        body: mcp_shared::protocol::CallBody {
            arguments,
            dry_run: false,
            idempotency_key: None,
            confirmed_effect: None,
        },
        expires_at_ms: mcp_shared::time::unix_ms(mcp_shared::time::now()) + ttl_ms,
        traceparent: None,
        signature: String::new(),
    };
    call.sign(&signing_key(TOKEN));
    RootToHub::Call(call)
}

async fn handshake(ws: &mut Ws) -> Envelope<HubToRoot> {
    handshake_with(ws, 200).await
}

/// The handshake with root's heartbeat interval (the hub drops a root silent for three).
async fn handshake_with(ws: &mut Ws, heartbeat_interval_ms: u64) -> Envelope<HubToRoot> {
    let hello = next(ws).await;
    send(
        ws,
        "welcome",
        RootToHub::Welcome {
            target_id: "hub:test-alpha".into(),
            heartbeat_interval_ms,
            root_time_ms: None,
            max_clock_skew_ms: None,
            features: Vec::new(),
            evidence: None,
        },
    )
    .await;
    hello
}

fn outcome(env: &Envelope<HubToRoot>, call_id: &str) -> CallOutcome {
    match &env.body {
        HubToRoot::Result {
            call_id: id,
            outcome,
        } if id == call_id => outcome.clone(),
        other => panic!("expected the result of {call_id}, got {other:?}"),
    }
}

fn error_code(o: &CallOutcome) -> ErrorCode {
    match o {
        CallOutcome::Error { error, .. } => error.code,
        CallOutcome::Ok { .. } => panic!("expected an error, got {o:?}"),
    }
}

/// The first frame: `hello` with the hub's token, protocol, descriptor and skill.
fn assert_hello(hello: HubToRoot) {
    let HubToRoot::Hello {
        token,
        descriptor,
        skills,
        protocol_version,
        features,
    } = hello
    else {
        panic!("first frame must be hello, got {hello:?}");
    };
    assert_eq!(token, TOKEN);
    assert_eq!(protocol_version, PROTOCOL_VERSION);
    assert_eq!(
        features,
        mcp_shared::protocol::announce(None),
        "every feature it understands"
    );
    assert_eq!(descriptor.target_id, "hub:test-alpha");
    assert_eq!(
        descriptor.operational_surface.capabilities.len(),
        crate::skill::adapters::ADAPTERS.len() + 1,
        "the built-in adapters and the embedded fault fixture"
    );
    assert!(skills[0].enabled);
}

/// A signed call runs on its adapter.
async fn signed_call_runs(ws: &mut Ws) {
    send(ws, "f1", call("c1", "hub.get_status", json!({}), 5_000)).await;
    let res = next(ws).await;
    assert_eq!(res.in_reply_to.as_deref(), Some("f1"));
    match outcome(&res, "c1") {
        CallOutcome::Ok { adapter, result } => {
            assert_eq!(adapter, "infra_access_skill.status");
            assert_eq!(result["connected"], true);
            assert!(result["connected_since"].is_string());
        }
        o => panic!("{o:?}"),
    }
}

/// A replayed call, a forged one and a garbage frame are refused.
async fn replay_forgery_and_garbage_are_refused(ws: &mut Ws) {
    send(ws, "f2", call("c1", "hub.get_status", json!({}), 5_000)).await;
    assert_eq!(
        error_code(&outcome(&next(ws).await, "c1")),
        ErrorCode::ReplayRejected
    );
    let RootToHub::Call(mut forged) = call("c2", "hub.get_status", json!({}), 5_000) else {
        unreachable!()
    };
    forged.tool_id = "hub.get_runtime_summary".into();
    send(ws, "f3", RootToHub::Call(forged)).await;
    assert_eq!(
        error_code(&outcome(&next(ws).await, "c2")),
        ErrorCode::SignatureInvalid
    );
    ws.send(Message::text(
        r#"{"v":1,"id":"junk","body":{"type":"launch"}}"#,
    ))
    .await
    .expect("send junk");
    let err = next(ws).await;
    assert!(
        matches!(err.body, HubToRoot::ProtocolError { .. }),
        "{err:?}"
    );
    assert_eq!(err.in_reply_to.as_deref(), Some("junk"));
}

/// Many calls in flight at once; a hung one is cancelled and answers nothing.
async fn many_calls_in_flight(ws: &mut Ws) {
    send(
        ws,
        "f4",
        call(
            "hang",
            crate::skill::test_fault::TOOL,
            json!({"fault": "hang"}),
            30_000,
        ),
    )
    .await;
    for i in 0..3 {
        send(
            ws,
            &format!("g{i}"),
            call(
                &format!("g{i}"),
                "hub.get_runtime_summary",
                json!({}),
                5_000,
            ),
        )
        .await;
    }
    for _ in 0..3 {
        let env = next(ws).await;
        assert!(
            matches!(
                &env.body,
                HubToRoot::Result {
                    outcome: CallOutcome::Ok { .. },
                    ..
                }
            ),
            "{env:?}"
        );
    }
    send(
        ws,
        "f5",
        RootToHub::Cancel {
            call_id: "hang".into(),
        },
    )
    .await;
}

/// Disable: surface change, then the reply; calls are refused. Enable publishes again.
async fn disable_then_enable(ws: &mut Ws) {
    send(
        ws,
        "cmd1",
        RootToHub::SkillCommand {
            skill: "infra_access_skill".into(),
            command: SkillCommand::Disable,
        },
    )
    .await;
    let changed = next(ws).await;
    match &changed.body {
        HubToRoot::SurfaceChanged { descriptor, .. } => {
            assert!(!descriptor.operational_surface.enabled);
            assert!(descriptor.operational_surface.capabilities.is_empty());
        }
        other => panic!("expected surface_changed, got {other:?}"),
    }
    let reply = next(ws).await;
    assert_eq!(reply.in_reply_to.as_deref(), Some("cmd1"));
    assert!(matches!(&reply.body, HubToRoot::SkillState(s) if !s.enabled));
    send(ws, "f6", call("c3", "hub.get_status", json!({}), 5_000)).await;
    assert_eq!(
        error_code(&outcome(&next(ws).await, "c3")),
        ErrorCode::SkillDisabled
    );
    send(
        ws,
        "cmd2",
        RootToHub::SkillCommand {
            skill: "infra_access_skill".into(),
            command: SkillCommand::Enable,
        },
    )
    .await;
    assert!(matches!(
        next(ws).await.body,
        HubToRoot::SurfaceChanged { .. }
    ));
    assert!(matches!(next(ws).await.body, HubToRoot::SkillState(s) if s.enabled));
}

/// Heartbeats flow.
async fn heartbeat_arrives(ws: &mut Ws) {
    let beat = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Some(Ok(Message::Text(t))) = ws.next().await
                && decode::<HubToRoot>(&t).map(|e| e.body) == Ok(HubToRoot::Heartbeat)
            {
                return;
            }
        }
    })
    .await;
    assert!(beat.is_ok(), "no heartbeat from the hub");
}

#[tokio::test]
async fn hub_serves_root_over_websocket_and_reconnects() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = HubConfig::new(
        "hub:test-alpha",
        "test",
        format!("http://{addr}"),
        TOKEN,
        dir.path(),
    );
    config.reconnect.initial_ms = 50;
    config.reconnect.max_ms = 200;
    crate::skill::adapters::serve_everything(&mut config);
    let hub = crate::start_with(config, &[&crate::skill::test_fault::FAULT])
        .await
        .expect("hub starts");

    let mut ws = accept(&listener).await;
    let hello = handshake(&mut ws).await;
    assert_hello(hello.body);
    hub.wait_connected(Duration::from_secs(5))
        .await
        .expect("welcomed");
    assert!(hub.is_connected());

    signed_call_runs(&mut ws).await;
    replay_forgery_and_garbage_are_refused(&mut ws).await;
    many_calls_in_flight(&mut ws).await;
    disable_then_enable(&mut ws).await;

    // Root goes away: the hub reconnects and introduces itself again.
    drop(ws);
    let mut ws = accept(&listener).await;
    let hello = handshake(&mut ws).await;
    assert!(matches!(hello.body, HubToRoot::Hello { .. }));
    hub.wait_connected(Duration::from_secs(5))
        .await
        .expect("welcomed again");
    // The replay cache survives the reconnect.
    send(
        &mut ws,
        "f7",
        call("c1", "hub.get_status", json!({}), 5_000),
    )
    .await;
    assert_eq!(
        error_code(&outcome(&next(&mut ws).await, "c1")),
        ErrorCode::ReplayRejected
    );

    heartbeat_arrives(&mut ws).await;

    hub.shutdown().await;
}

/// A signed `hub.run_allowed_tests` call over the socket: the hub honours the call's own
/// `dry_run` flag and idempotency key (both covered by root's signature), and refuses the
/// write without `write_scope = "test-only"`.
#[tokio::test]
async fn allowed_tests_take_dry_run_and_idempotency_key_from_the_signed_call() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let dir = tempfile::tempdir().expect("tempdir");
    let mark = dir.path().join("ran");
    let mut config = HubConfig::new(
        "hub:test-alpha",
        "test",
        format!("http://{addr}"),
        TOKEN,
        dir.path(),
    );
    config.write_scope = mcp_shared::target::WriteScope::TestOnly;
    config.skill.allowed_tests = vec![crate::config::AllowedTestConfig {
        name: "mark".into(),
        argv: vec![
            "sh".into(),
            "-c".into(),
            format!("echo x >> '{}'", mark.display()),
        ],
        cwd: None,
        timeout_ms: 5_000,
        env: Default::default(),
        progress_line: None,
        progress_total: None,
    }];
    let hub = crate::start(config).await.expect("hub starts");
    let mut ws = accept(&listener).await;
    handshake(&mut ws).await;

    let write = |id: &str, dry_run: bool, key: Option<&str>| {
        let RootToHub::Call(mut c) =
            call(id, "hub.run_allowed_tests", json!({"name": "mark"}), 10_000)
        else {
            unreachable!()
        };
        c.capability = "infra.write.tests".into();
        c.body.dry_run = dry_run;
        c.body.idempotency_key = key.map(str::to_owned);
        c.sign(&signing_key(TOKEN));
        RootToHub::Call(c)
    };
    let ok = |o: CallOutcome| match o {
        CallOutcome::Ok { adapter, result } => {
            assert_eq!(adapter, "infra_access_skill.allowed_tests");
            result
        }
        o => panic!("{o:?}"),
    };

    send(&mut ws, "d", write("dry", true, Some("k1"))).await;
    let effect = ok(outcome(&next(&mut ws).await, "dry"));
    assert_eq!(effect["action"], "run_allowed_test");
    assert!(!mark.exists(), "a dry run runs nothing");

    send(&mut ws, "e1", write("run1", false, Some("k1"))).await;
    let first = ok(outcome(&next(&mut ws).await, "run1"));
    assert_eq!(first["passed"], true);
    send(&mut ws, "e2", write("run2", false, Some("k1"))).await;
    let again = ok(outcome(&next(&mut ws).await, "run2"));
    assert_eq!(again["run_id"], first["run_id"]);
    let lines = std::fs::read_to_string(&mark).expect("ran").lines().count();
    assert_eq!(lines, 1, "the repeated key ran nothing");

    send(
        &mut ws,
        "r",
        call(
            "read",
            "hub.get_test_results",
            json!({"name": "mark"}),
            5_000,
        ),
    )
    .await;
    let read = ok_any(outcome(&next(&mut ws).await, "read"));
    assert_eq!(read["results"][0], first);
    hub.shutdown().await;

    // Without the test-only write scope the gate refuses before the adapter runs (a test
    // that would fail the run if it ran).
    let mut config = HubConfig::new(
        "hub:test-alpha",
        "test",
        format!("http://{addr}"),
        TOKEN,
        dir.path(),
    );
    config.skill.allowed_tests = vec![crate::config::AllowedTestConfig::new(
        "mark",
        vec!["false".into()],
    )];
    let hub = crate::start(config).await.expect("hub starts");
    let mut ws = accept(&listener).await;
    handshake(&mut ws).await;
    send(&mut ws, "e3", write("run3", false, None)).await;
    assert_eq!(
        error_code(&outcome(&next(&mut ws).await, "run3")),
        ErrorCode::EnvironmentForbidden
    );
    hub.shutdown().await;
}

fn ok_any(o: CallOutcome) -> serde_json::Value {
    match o {
        CallOutcome::Ok { result, .. } => result,
        o => panic!("{o:?}"),
    }
}

/// Protocol features: a root of an earlier build refuses a hello that announces them; the hub
/// greets it without from then on, and sends it no field it did not announce (`total` in
/// progress). A root that announces `progress.total` gets it.
#[tokio::test]
async fn features_follow_what_root_announced() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = HubConfig::new(
        "hub:test-alpha",
        "test",
        format!("http://{addr}"),
        TOKEN,
        dir.path(),
    );
    config.write_scope = mcp_shared::target::WriteScope::TestOnly;
    config.reconnect.initial_ms = 50;
    config.reconnect.max_ms = 200;
    config.skill.allowed_tests = vec![crate::config::AllowedTestConfig {
        timeout_ms: 5_000,
        progress_line: Some("^ok$".into()),
        progress_total: Some("^of (\\d+)$".into()),
        ..crate::config::AllowedTestConfig::new(
            "count",
            vec![
                "sh".into(),
                "-c".into(),
                "echo of 2; echo ok; echo ok".into(),
            ],
        )
    }];
    let hub = crate::start(config).await.expect("hub starts");

    // A root of an earlier build: `features` is a field it does not know.
    let mut ws = accept(&listener).await;
    let HubToRoot::Hello { features, .. } = next(&mut ws).await.body else {
        panic!("hello first")
    };
    assert!(
        features.contains(&"progress.total".to_owned()),
        "{features:?}"
    );
    send(
        &mut ws,
        "refused",
        RootToHub::ProtocolError {
            message: "malformed frame: unknown field `features`, expected one of `protocol_version`, `token`, `descriptor`, `skills`".into(),
        },
    )
    .await;
    drop(ws);
    let mut ws = accept(&listener).await;
    let HubToRoot::Hello { features, .. } = handshake(&mut ws).await.body else {
        panic!("hello first")
    };
    assert!(features.is_empty(), "greeted as it knows: {features:?}");
    hub.wait_connected(Duration::from_secs(5))
        .await
        .expect("welcomed");
    let progress = run_counting_test(&mut ws, "c-old").await;
    assert!(!progress.is_empty());
    assert!(
        progress.iter().all(|(_, total)| total.is_none()),
        "no `total` for a root that did not announce it: {progress:?}"
    );

    // A root that announces `progress.total` (to a hub that announced features).
    drop(ws);
    let mut ws = accept(&listener).await;
    let _ = next(&mut ws).await;
    send(
        &mut ws,
        "welcome",
        RootToHub::Welcome {
            target_id: "hub:test-alpha".into(),
            heartbeat_interval_ms: 200,
            root_time_ms: None,
            max_clock_skew_ms: None,
            features: vec!["progress.total".into()],
            evidence: None,
        },
    )
    .await;
    hub.wait_connected(Duration::from_secs(5))
        .await
        .expect("welcomed");
    let progress = run_counting_test(&mut ws, "c-new").await;
    assert!(
        progress
            .iter()
            .any(|(done, total)| *total == Some(2.0) && *done >= 1.0),
        "{progress:?}"
    );
    hub.shutdown().await;
}

/// Runs the allowed test `count` as `call_id`; the `(progress, total)` of its progress frames.
async fn run_counting_test(ws: &mut Ws, call_id: &str) -> Vec<(f64, Option<f64>)> {
    let RootToHub::Call(mut c) = call(
        call_id,
        "hub.run_allowed_tests",
        json!({"name": "count"}),
        10_000,
    ) else {
        unreachable!()
    };
    c.capability = "infra.write.tests".into();
    c.sign(&signing_key(TOKEN));
    send(ws, call_id, RootToHub::Call(c)).await;
    let mut progress = Vec::new();
    loop {
        match next(ws).await.body {
            HubToRoot::Progress {
                progress: p, total, ..
            } => progress.push((p, total)),
            HubToRoot::Result { outcome, .. } => {
                assert_eq!(ok_any(outcome)["passed"], true);
                return progress;
            }
            _ => {}
        }
    }
}

// The backoff and the id of an undecodable frame.

#[test]
fn backoff_grows_with_jitter_and_resets() {
    let mut b = Backoff::new(200, 10_000);
    let first = b.next_delay();
    assert!(first >= Duration::from_millis(100) && first <= Duration::from_millis(200));
    for _ in 0..20 {
        let d = b.next_delay();
        assert!(d <= Duration::from_millis(10_000));
    }
    let late = b.next_delay();
    assert!(late >= Duration::from_millis(5_000), "{late:?}");
    b.reset();
    assert!(b.next_delay() <= Duration::from_millis(200));
}

#[test]
fn a_busy_root_is_waited_on_at_least_as_long_as_it_asked_with_jitter() {
    let mut b = Backoff::new(200, 10_000);
    let asked = Duration::from_secs(5);
    let delays: Vec<Duration> = (0..50).map(|_| b.delay_after(asked)).collect();
    assert!(
        delays
            .iter()
            .all(|d| *d >= asked && *d <= asked.mul_f64(1.5).max(Duration::from_secs(10)))
    );
    // Spread, not one instant for every hub refused together.
    let distinct: std::collections::HashSet<u128> =
        delays[..5].iter().map(|d| d.as_millis()).collect();
    assert!(distinct.len() > 1, "{delays:?}");
}

#[test]
fn a_503_or_429_upgrade_answer_is_busy_with_its_retry_after() {
    use tokio_tungstenite::tungstenite::{Error, http::Response};
    let answer = |status: u16, retry: Option<&str>| {
        let mut r = Response::builder().status(status);
        if let Some(v) = retry {
            r = r.header("retry-after", v);
        }
        ChannelError::of_upgrade(
            "ws://root/v1/root/hubs/connect",
            Error::Http(Box::new(r.body(None).unwrap())),
        )
    };
    assert_eq!(
        answer(503, Some("5")).retry_after(),
        Some(Duration::from_secs(5))
    );
    assert_eq!(
        answer(429, Some("10")).retry_after(),
        Some(Duration::from_secs(10))
    );
    assert_eq!(
        answer(503, Some("86400")).retry_after(),
        Some(Duration::from_secs(300))
    );
    assert!(matches!(
        answer(503, Some("soon")),
        ChannelError::Busy {
            retry_after: None,
            ..
        }
    ));
    assert!(matches!(answer(401, None), ChannelError::Connect { .. }));
}

#[test]
fn raw_id_is_read_from_undecodable_frames() {
    assert_eq!(
        raw_id(r#"{"v":1,"id":"f1","body":{"type":"launch"}}"#).as_deref(),
        Some("f1")
    );
    assert_eq!(raw_id("not json"), None);
}

/// The result of `call_id`, skipping other frames (a cancelled call's late result).
async fn result_of(ws: &mut Ws, call_id: &str) -> CallOutcome {
    loop {
        let env = next(ws).await;
        if let HubToRoot::Result {
            call_id: id,
            outcome,
        } = &env.body
            && id == call_id
        {
            return outcome.clone();
        }
    }
}

/// A write under an idempotency key cut off by a dropped connection is not stopped: it
/// finishes and records its result, and the retry under its key, on the next connection,
/// gets that result (`busy` while it runs) without starting it again.
#[tokio::test]
async fn a_keyed_write_cut_off_by_a_dropped_connection_finishes_and_answers_its_retry() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let dir = tempfile::tempdir().expect("tempdir");
    let (started, ran) = (dir.path().join("started"), dir.path().join("ran"));
    let mut config = HubConfig::new(
        "hub:test-alpha",
        "test",
        format!("http://{addr}"),
        TOKEN,
        dir.path(),
    );
    config.write_scope = mcp_shared::target::WriteScope::TestOnly;
    config.skill.allowed_tests = vec![crate::config::AllowedTestConfig {
        name: "slow".into(),
        argv: vec![
            "sh".into(),
            "-c".into(),
            format!(
                "echo x >> '{}'; sleep 1; echo x >> '{}'",
                started.display(),
                ran.display()
            ),
        ],
        cwd: None,
        timeout_ms: 10_000,
        env: Default::default(),
        progress_line: None,
        progress_total: None,
    }];
    let hub = crate::start(config).await.expect("hub starts");
    // A heartbeat the waits below never outlast (this root answers none).
    let mut ws = accept(&listener).await;
    handshake_with(&mut ws, 5_000).await;
    let write = |id: &str, key: &str| {
        let RootToHub::Call(mut c) =
            call(id, "hub.run_allowed_tests", json!({"name": "slow"}), 20_000)
        else {
            unreachable!()
        };
        c.capability = "infra.write.tests".into();
        c.body.idempotency_key = Some(key.to_owned());
        c.sign(&signing_key(TOKEN));
        RootToHub::Call(c)
    };
    let lines = |p: &std::path::Path| {
        std::fs::read_to_string(p)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    // Retries under `key` until the first execution's result answers one.
    async fn retried(ws: &mut Ws, key: &str, write: impl Fn(&str, &str) -> RootToHub) -> Value {
        for attempt in 0..50 {
            let id = format!("{key}-retry-{attempt}");
            send(ws, &id, write(&id, key)).await;
            match result_of(ws, &id).await {
                CallOutcome::Ok { result, .. } => return result,
                CallOutcome::Error { error, .. } => {
                    assert_eq!(error.code, ErrorCode::Busy, "{error:?}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        panic!("no answer for {key}");
    }

    // A retry while it runs is `busy`, then answered with the first execution's result.
    send(&mut ws, "w1", write("run1", "k1")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let first = retried(&mut ws, "k1", write).await;
    assert_eq!((lines(&started), lines(&ran)), (1, 1), "{first}");

    // Cut off: the connection drops while it runs; the hub dials again.
    send(&mut ws, "w2", write("run2", "k2")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(ws);
    let mut ws = accept(&listener).await;
    handshake_with(&mut ws, 5_000).await;
    let second = retried(&mut ws, "k2", write).await;
    assert_ne!(second["run_id"], first["run_id"]);
    assert_eq!(
        (lines(&started), lines(&ran)),
        (2, 2),
        "each key started once and finished"
    );
    hub.shutdown().await;
}
