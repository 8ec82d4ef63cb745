//! The ProfileOps tools' (`hub.memory.*`) real answers checked against their tool contracts
//! (schemas/tools/), on a hub with two managed services.

use std::sync::Arc;

use mcp_shared::error::ErrorCode;
use serde_json::json;

use super::contract_tests::{assert_valid, contract, soon, validator};
use super::*;
use crate::config::HubConfig;
use crate::context::HubContext;
use mcp_shared::error::ToolError;
use serde_json::Value;

/// The ProfileOps tests' hub: `app` (with a profiling argv) and `plain` (without) under the
/// service supervisor, and ProfileOps started.
struct Memory {
    ctx: Arc<HubContext>,
}

impl Memory {
    /// Starts the services and ProfileOps of a hub whose state is in `dir`.
    async fn start(dir: &std::path::Path) -> Memory {
        use crate::config::ServiceConfig;
        let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", dir);
        let mut app = ServiceConfig::new("app", vec!["sleep".into(), "30".into()]);
        app.profiling_argv = Some(vec!["sleep".into(), "31".into()]);
        config.services = vec![
            app,
            ServiceConfig::new("plain", vec!["sleep".into(), "30".into()]),
        ];
        config.profiling.artifact_inline_max_bytes = 1024;
        let ctx = Arc::new(HubContext::new(config).expect("context"));
        ctx.machine.services.start().await.expect("services");
        ctx.machine
            .profiles
            .start(ctx.machine.services.clone())
            .await
            .expect("profiles");
        Memory { ctx }
    }

    /// Runs `kind` on `args`, as a dry run or not, with an idempotency key or not.
    async fn run(
        &self,
        kind: AdapterKind,
        args: Value,
        dry_run: bool,
        key: Option<&str>,
    ) -> Result<Value, ToolError> {
        let mut input = CallInput::new("c", args, soon());
        input.body.dry_run = dry_run;
        input.body.idempotency_key = key.map(str::to_owned);
        kind.run(self.ctx.clone(), input).await
    }

    /// `hub.memory.get_artifact` with `args`.
    async fn get(&self, args: Value) -> Result<Value, ToolError> {
        self.run(AdapterKind::MemoryGetArtifact, args, false, None)
            .await
    }

    /// `hub.memory.get_session` of `id`.
    async fn session_of(&self, id: &str) -> Value {
        let input = CallInput::new("g", json!({"session_id": id}), soon());
        AdapterKind::MemoryGetSession
            .run(self.ctx.clone(), input)
            .await
            .expect("session")
    }
}

fn check_read(tool: &str, answer: &Value) {
    assert_valid(tool, &contract(tool).output_schema, answer);
}

fn check_effect(tool: &str, effect: &Value) {
    assert_valid(
        &format!("{tool} preview"),
        &contract(tool).output_schema,
        &json!({"phase": "preview", "expected_effect": effect, "confirmation_token": "t",
                "confirmation_expires_at": "2026-01-01T00:00:00Z"}),
    );
}

fn check_result(tool: &str, result: &Value) {
    assert_valid(
        &format!("{tool} execute"),
        &contract(tool).output_schema,
        &json!({"phase": "execute", "result": result, "replay": false, "idempotency_key": "k"}),
    );
}

/// `hub.memory.start_profile` inputs: bounds and shapes, refused by the contract and the hub.
async fn start_profile_inputs_are_bounded(m: &Memory) {
    let start_in = validator(&contract("hub.memory.start_profile").input_schema);
    assert!(start_in.is_valid(&json!({"service": "app", "interval_ms": 100, "duration_sec": 1})));
    for bad in [
        json!({"service": "app", "interval_ms": 99, "duration_sec": 1}),
        json!({"service": "app", "interval_ms": 100, "duration_sec": 3601}),
        json!({"service": "app", "interval_ms": 100, "duration_sec": 1, "mode": "x"}),
        json!({"service": "app", "interval_ms": 100}),
    ] {
        assert!(!start_in.is_valid(&bad), "{bad}");
        let err = m
            .run(AdapterKind::MemoryStartProfile, bad.clone(), true, None)
            .await
            .expect_err("refused by the hub too");
        assert_eq!(err.code, ErrorCode::InvalidArguments, "{bad}");
    }
}

/// A complete session on `app`: dry run, start, replay, one session per service, no
/// publish while running; returns its id and its completed `get_session` answer.
async fn a_complete_session(m: &Memory) -> (String, Value) {
    let args = json!({"service": "app", "interval_ms": 100, "duration_sec": 1});
    let effect = m
        .run(AdapterKind::MemoryStartProfile, args.clone(), true, None)
        .await
        .expect("dry run");
    check_effect("hub.memory.start_profile", &effect);
    assert_eq!(
        (
            effect["will_restart"].clone(),
            effect["expected_samples"].clone()
        ),
        (json!(false), json!(11))
    );
    let started = m
        .run(
            AdapterKind::MemoryStartProfile,
            args.clone(),
            false,
            Some("s1"),
        )
        .await
        .expect("start");
    check_result("hub.memory.start_profile", &started);
    let a = started["session"]["session_id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(
        m.run(
            AdapterKind::MemoryStartProfile,
            args.clone(),
            false,
            Some("s1")
        )
        .await
        .expect("replay"),
        started,
        "a replayed key starts nothing"
    );
    let err = m
        .run(AdapterKind::MemoryStartProfile, args.clone(), false, None)
        .await
        .expect_err("one session per service");
    assert_eq!(err.code, ErrorCode::Busy);
    let err = m
        .run(
            AdapterKind::MemoryPublishProfile,
            json!({"session_id": a}),
            false,
            None,
        )
        .await
        .expect_err("still running");
    assert_eq!(err.code, ErrorCode::Busy);
    let live = m.session_of(&a).await;
    check_read("hub.memory.get_session", &live);
    let mut done = live;
    for _ in 0..400 {
        if done["session"]["state"] == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        done = m.session_of(&a).await;
    }
    check_read("hub.memory.get_session", &done);
    assert_eq!(done["session"]["state"], "completed", "{done}");
    assert!(done["session"]["samples"].as_u64().expect("samples") >= 2);
    assert!(
        !done["recent_samples"]
            .as_array()
            .expect("samples")
            .is_empty()
    );
    (a, done)
}

/// The artifact of session `a` is over the inline limit: chunked, and the chunks reassemble
/// to its SHA-256; bad offsets and ids are refused. Returns the artifact's id and its
/// `get_artifact` answer.
async fn its_artifact_comes_in_chunks(m: &Memory, a: &str, done: &Value) -> (String, Value) {
    use base64::Engine;
    use sha2::Digest;
    let artifact_id = done["session"]["artifact_id"]
        .as_str()
        .expect("artifact")
        .to_owned();
    let contract_answer = m
        .get(json!({"artifact_id": artifact_id}))
        .await
        .expect("artifact");
    check_read("hub.memory.get_artifact", &contract_answer);
    assert_eq!(contract_answer["delivery"], "chunked", "{contract_answer}");
    let (size, chunk) = (
        contract_answer["size_bytes"].as_u64().expect("size"),
        contract_answer["chunk_bytes"].as_u64().expect("chunk"),
    );
    assert!(size > 1024 && chunk == 1024);
    let mut whole = Vec::new();
    for i in 0..contract_answer["chunks"].as_u64().expect("chunks") {
        let part = m
            .get(json!({"artifact_id": artifact_id, "offset": i * chunk}))
            .await
            .expect("chunk");
        check_read("hub.memory.get_artifact", &part);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(part["data_base64"].as_str().expect("data"))
            .expect("base64");
        assert_eq!(
            hex::encode(sha2::Sha256::digest(&bytes)),
            part["chunk_sha256"]
        );
        assert_eq!(part["eof"], (i + 1) * chunk >= size);
        whole.extend(bytes);
    }
    assert_eq!(whole.len() as u64, size);
    assert_eq!(
        hex::encode(sha2::Sha256::digest(&whole)),
        contract_answer["sha256"]
    );
    let parsed: Value = serde_json::from_slice(&whole).expect("the artifact is JSON");
    assert_eq!(parsed["session_id"], a);
    for bad in [
        json!({"artifact_id": artifact_id, "offset": size}),
        json!({"artifact_id": artifact_id, "offset": 0, "length": 1025}),
        json!({"artifact_id": "not-a-uuid"}),
    ] {
        assert_eq!(
            m.get(bad.clone()).await.expect_err("refused").code,
            ErrorCode::InvalidArguments,
            "{bad}"
        );
    }
    let missing = uuid::Uuid::now_v7().to_string();
    assert_eq!(
        m.get(json!({"artifact_id": missing}))
            .await
            .expect_err("unknown")
            .code,
        ErrorCode::NotFound
    );
    (artifact_id, contract_answer)
}

/// Publish: the summary root keeps.
async fn publish_keeps_the_summary(m: &Memory, a: &str, artifact_id: &str, artifact: &Value) {
    let effect = m
        .run(
            AdapterKind::MemoryPublishProfile,
            json!({"session_id": a}),
            true,
            None,
        )
        .await
        .expect("dry run");
    check_effect("hub.memory.publish_profile", &effect);
    let published = m
        .run(
            AdapterKind::MemoryPublishProfile,
            json!({"session_id": a}),
            false,
            Some("p1"),
        )
        .await
        .expect("publish");
    check_result("hub.memory.publish_profile", &published);
    let summary = &published["published_summary"];
    assert_eq!(summary["session_id"], a);
    assert_eq!(summary["artifact"]["artifact_id"], artifact_id);
    assert_eq!(summary["artifact"]["sha256"], artifact["sha256"]);
    assert!(m.session_of(a).await["session"]["published_at"].is_string());
}

/// Retry (same parameters), stop early: a small artifact comes inline.
async fn retry_then_stop_early(m: &Memory, a: &str) {
    let effect = m
        .run(
            AdapterKind::MemoryRetryProfile,
            json!({"session_id": a}),
            true,
            None,
        )
        .await
        .expect("dry run");
    check_effect("hub.memory.retry_profile", &effect);
    let retried = m
        .run(
            AdapterKind::MemoryRetryProfile,
            json!({"session_id": a}),
            false,
            None,
        )
        .await
        .expect("retry");
    check_result("hub.memory.retry_profile", &retried);
    assert_eq!(retried["session"]["retry_of"], a);
    let b = retried["session"]["session_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let effect = m
        .run(
            AdapterKind::MemoryStopProfile,
            json!({"session_id": b}),
            true,
            None,
        )
        .await
        .expect("dry run");
    check_effect("hub.memory.stop_profile", &effect);
    assert_eq!(effect["running"], true);
    let stopped = m
        .run(
            AdapterKind::MemoryStopProfile,
            json!({"session_id": b}),
            false,
            None,
        )
        .await
        .expect("stop");
    check_result("hub.memory.stop_profile", &stopped);
    assert_eq!(
        (
            stopped["stopped"].clone(),
            stopped["session"]["state"].clone()
        ),
        (json!(true), json!("stopped"))
    );
    let again = m
        .run(
            AdapterKind::MemoryStopProfile,
            json!({"session_id": b}),
            false,
            None,
        )
        .await
        .expect("stop again");
    assert_eq!(again["stopped"], false);
    let small = m
        .get(json!({"artifact_id": stopped["session"]["artifact_id"]}))
        .await
        .expect("inline");
    check_read("hub.memory.get_artifact", &small);
    assert_eq!(small["delivery"], "inline", "{small}");
    assert_eq!(small["artifact"]["session_id"], b);
}

/// Profiling mode restarts the service into its profiling argv, and stopping it restores the
/// normal argv; a service without one is refused. Returns the profiling session running at
/// the end.
async fn profiling_mode_restarts_the_service(m: &Memory) -> Value {
    let before = m.ctx.machine.services.get("app").expect("app").pid;
    let start_profiling = || {
        m.run(
            AdapterKind::MemoryStartProfile,
            json!({"service": "app", "interval_ms": 100, "duration_sec": 60, "mode": "profiling"}),
            false,
            None,
        )
    };
    let prof = start_profiling().await.expect("profiling mode");
    let now = m.ctx.machine.services.get("app").expect("app");
    assert_eq!(now.mode, crate::machine::services::Mode::Profiling);
    assert_ne!(now.pid, before);
    assert_eq!(prof["session"]["mode"], "profiling");
    // Stopped, the session returns the service to its normal argv, before ProfileOps takes
    // another message (so before this next session starts, in profiling mode again).
    let stop = m
        .run(
            AdapterKind::MemoryStopProfile,
            json!({"session_id": prof["session"]["session_id"]}),
            true,
            None,
        )
        .await
        .expect("stop preview");
    assert!(
        stop["description"]
            .as_str()
            .is_some_and(|d| d.ends_with("then restart `app` in its normal argv")),
        "{stop}"
    );
    m.run(
        AdapterKind::MemoryStopProfile,
        json!({"session_id": prof["session"]["session_id"]}),
        false,
        None,
    )
    .await
    .expect("stop profiling session");
    let mut restored = None;
    for _ in 0..400 {
        let s = m.ctx.machine.services.get("app").expect("app");
        if s.mode == crate::machine::services::Mode::Normal && s.pid.is_some() && s.pid != now.pid {
            restored = Some(s);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(restored.is_some(), "app not back in its normal argv");
    let prof = start_profiling().await.expect("profiling mode again");
    assert_eq!(
        m.ctx.machine.services.get("app").expect("app").mode,
        crate::machine::services::Mode::Profiling
    );
    let err = m
        .run(
            AdapterKind::MemoryStartProfile,
            json!({"service": "plain", "interval_ms": 100, "duration_sec": 1, "mode": "profiling"}),
            true,
            None,
        )
        .await
        .expect_err("no profiling argv");
    assert!(err.message.contains("profiling_argv"), "{err}");
    prof
}

/// Reads, with one session running and two stopped.
async fn memory_reads(m: &Memory) {
    for (kind, tool) in [
        (AdapterKind::MemoryStatus, "hub.memory.get_status"),
        (AdapterKind::MemoryListSessions, "hub.memory.list_sessions"),
        (
            AdapterKind::MemoryListIncidents,
            "hub.memory.list_incidents",
        ),
        (
            AdapterKind::MemoryListArtifacts,
            "hub.memory.list_artifacts",
        ),
    ] {
        let answer = m.run(kind, json!({}), false, None).await.expect(tool);
        check_read(tool, &answer);
    }
    let status = m
        .run(AdapterKind::MemoryStatus, json!({}), false, None)
        .await
        .expect("status");
    assert_eq!(status["running_sessions"].as_array().map(Vec::len), Some(1));
    let listed = m
        .run(
            AdapterKind::MemoryListSessions,
            json!({"service": "app", "state": "stopped", "limit": 5}),
            false,
            None,
        )
        .await
        .expect("list");
    // The session stopped earlier and the profiling-mode one.
    assert_eq!(listed["sessions"].as_array().map(Vec::len), Some(2));
    let artifacts = m
        .run(
            AdapterKind::MemoryListArtifacts,
            json!({"limit": 1}),
            false,
            None,
        )
        .await
        .expect("artifacts");
    assert_eq!(artifacts["artifacts"].as_array().map(Vec::len), Some(1));
}

/// ProfileOps: every `hub.memory.*` answer (reads, dry-run effects, execute results)
/// fits its contract, and the flows behind them work: sessions complete and stop,
/// artifacts come inline or in chunks that reassemble to their SHA-256, retries and
/// profiling mode restart as configured, publish needs a finished session, idempotency
/// keys replay, and a session running when the hub stops ends `interrupted`.
#[tokio::test]
async fn profile_tool_answers_match_their_contracts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = Memory::start(dir.path()).await;
    start_profile_inputs_are_bounded(&m).await;
    let (a, done) = a_complete_session(&m).await;
    let (artifact_id, artifact) = its_artifact_comes_in_chunks(&m, &a, &done).await;
    publish_keeps_the_summary(&m, &a, &artifact_id, &artifact).await;
    retry_then_stop_early(&m, &a).await;
    let prof = profiling_mode_restarts_the_service(&m).await;
    memory_reads(&m).await;

    // The hub stops with a session running: it ends interrupted, kept on disk.
    let c = prof["session"]["session_id"]
        .as_str()
        .expect("id")
        .to_owned();
    for _ in 0..400 {
        if m.session_of(&c).await["session"]["samples"].as_u64() > Some(0) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    m.ctx.machine.profiles.stop().await;
    m.ctx.machine.services.stop().await;
    let config = m.ctx.config.clone();
    let fresh = crate::profiles::Profiles::new(&config);
    let (session, samples) = fresh.session(&c).await.expect("kept");
    assert_eq!(session.state, crate::profiles::SessionState::Interrupted);
    assert!(session.artifact_id.is_some() && !samples.is_empty());
}
