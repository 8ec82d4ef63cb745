//! Every adapter's real answers checked against its tool contract (schemas/tools/).

use std::sync::Arc;

use mcp_shared::error::ErrorCode;
use mcp_shared::{SideEffectClass, ToolContract};
use serde_json::json;

use super::*;
use crate::config::{AllowedTestConfig, HealthcheckConfig, HubConfig};
use crate::context::HubContext;

pub(super) fn contract(tool: &str) -> ToolContract {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../schemas/tools")
        .join(format!("{tool}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

pub(super) fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
        .expect("schema compiles")
}

pub(super) fn assert_valid(what: &str, schema: &Value, instance: &Value) {
    let v = validator(schema);
    let errors: Vec<String> = v
        .iter_errors(instance)
        .map(|e| format!("  at `{}`: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what}: {instance}\n{}",
        errors.join("\n")
    );
}

/// Every adapter's real answer matches its contract's output schema, and every contract
/// matches the adapter's declaration.
#[tokio::test]
async fn answers_match_the_tool_contracts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let open = listener.local_addr().expect("addr").to_string();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").to_string()
    };
    for (subnet, zone, checks) in [
        (None, None, vec![]),
        (
            Some("subnet-1".to_owned()),
            Some("eu".to_owned()),
            vec![
                HealthcheckConfig::Tcp {
                    name: "open".into(),
                    address: open.clone(),
                    timeout_ms: 1_000,
                },
                HealthcheckConfig::Http {
                    name: "closed".into(),
                    url: format!("http://{closed}/healthz"),
                    expect_status: 200,
                    timeout_ms: 1_000,
                },
                HealthcheckConfig::Command {
                    name: "true".into(),
                    argv: vec!["true".into()],
                    cwd: None,
                    timeout_ms: 1_000,
                },
                HealthcheckConfig::Command {
                    name: "slow".into(),
                    argv: vec!["sleep".into(), "5".into()],
                    cwd: None,
                    timeout_ms: 200,
                },
            ],
        ),
    ] {
        let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", dir.path());
        config.subnet = subnet;
        config.zone = zone;
        config.skill.healthchecks = checks;
        let ctx = Arc::new(HubContext::new(config).expect("context"));
        ctx.connection
            .connected_since
            .store(Some(Arc::new(mcp_shared::time::now())));
        for kind in KINDS {
            let decl = kind.decl();
            let c = contract(decl.tool_id);
            assert_eq!(c.tool_id, decl.tool_id);
            assert_eq!(c.side_effect == SideEffectClass::Read, !decl.writes);
            if matches!(
                kind,
                AdapterKind::AllowedTests
                    | AdapterKind::DeployRef
                    | AdapterKind::RollbackLastTestDeploy
                    | AdapterKind::RestartService
                    | AdapterKind::MemoryGetSession
                    | AdapterKind::MemoryGetArtifact
                    | AdapterKind::MemoryStartProfile
                    | AdapterKind::MemoryStopProfile
                    | AdapterKind::MemoryRetryProfile
                    | AdapterKind::MemoryPublishProfile
                    | AdapterKind::NluGetContext
                    | AdapterKind::NluListTemplates
                    | AdapterKind::NluCheckPhrase
                    | AdapterKind::NluProposeChange
                    | AdapterKind::NluApplyChange
            ) {
                // Writes with arguments and state; see `test_tool_answers_match_their_contracts`,
                // `deploy_tool_answers_match_their_contracts`,
                // `service_tool_answers_match_their_contracts`,
                // `profile_tool_answers_match_their_contracts` and (NLU content, which
                // these configurations lack) `nlu_authoring::tests`.
                continue;
            }
            assert_valid(
                &format!("{} input", decl.tool_id),
                &c.input_schema,
                &json!({}),
            );
            let answer = kind
                .run(ctx.clone(), CallInput::new("c", json!({}), soon()))
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", decl.tool_id));
            assert_valid(
                &format!("{} output", decl.tool_id),
                &c.output_schema,
                &answer,
            );
            if decl.tool_id == "hub.run_healthchecks" && !ctx.config.skill.healthchecks.is_empty() {
                assert_eq!(answer["status"], "degraded");
                let ok: Vec<bool> = answer["checks"]
                    .as_array()
                    .expect("checks")
                    .iter()
                    .map(|c| c["ok"] == true)
                    .collect();
                assert_eq!(ok, [true, false, true, false], "{answer}");
                assert!(answer["checks"][3]["latency_ms"].as_u64().expect("ms") < 2_000);
            }
        }
    }
    // Test fault injection is in no contract: hub.get_status takes no arguments.
    let c = contract("hub.get_status");
    assert!(validator(&c.input_schema).is_valid(&json!({})));
    assert!(!validator(&c.input_schema).is_valid(&json!({"fault": "hang"})));
}

fn soon() -> tokio::time::Instant {
    tokio::time::Instant::now() + std::time::Duration::from_secs(10)
}

/// The deploy tools: dry-run effects and execute results (first deploy, fast-forward,
/// rollback) fit root's write envelope, and their inputs are what root accepts.
#[tokio::test]
async fn deploy_tool_answers_match_their_contracts() {
    use super::deploy::deploy_tests::{call, config, fixture_repo};
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, _) = fixture_repo(dir.path());
    let ctx = Arc::new(HubContext::new(config(dir.path(), &src)).expect("context"));
    let deploy = contract("hub.deploy_ref");
    let rollback = contract("hub.rollback_last_test_deploy");
    let deploy_input = validator(&deploy.input_schema);
    for ok in [
        json!({"ref": "v1"}),
        json!({"ref": "release/1.0", "phase": "preview"}),
        json!({"ref": "v1", "phase": "execute", "confirmation_token": "c", "idempotency_key": "k"}),
        json!({"ref": "v1", "dry_run": true}),
    ] {
        assert!(deploy_input.is_valid(&ok), "{ok}");
    }
    for bad in [
        json!({}),
        json!({"ref": ""}),
        json!({"ref": "main;rm"}),
        json!({"ref": "v1 v2"}),
        json!({"ref": "v1", "worktree": "/"}),
    ] {
        assert!(!deploy_input.is_valid(&bad), "{bad}");
    }
    let rollback_input = validator(&rollback.input_schema);
    assert!(rollback_input.is_valid(&json!({})));
    assert!(
        rollback_input.is_valid(
            &json!({"phase": "execute", "confirmation_token": "c", "idempotency_key": "k"})
        )
    );
    assert!(!rollback_input.is_valid(&json!({"ref": "v1"})));

    let check = |c: &ToolContract, effect: Option<&Value>, result: Option<&Value>| {
        if let Some(effect) = effect {
            for phase in ["dry_run", "preview"] {
                assert_valid(
                    &format!("{} {phase}", c.tool_id),
                    &c.output_schema,
                    &json!({"phase": phase, "expected_effect": effect, "confirmation_token": "t",
                            "confirmation_expires_at": "2026-01-01T00:00:00Z", "summary": "s"}),
                );
            }
        }
        if let Some(result) = result {
            assert_valid(
                &format!("{} execute", c.tool_id),
                &c.output_schema,
                &json!({"phase": "execute", "result": result, "replay": false, "idempotency_key": "k"}),
            );
        }
    };
    let kind = AdapterKind::DeployRef;
    for r in ["v1", "main"] {
        let effect = call(&ctx, kind, json!({"ref": r}), true, None)
            .await
            .expect("dry run");
        let result = call(&ctx, kind, json!({"ref": r}), false, Some(r))
            .await
            .expect("deploys");
        check(&deploy, Some(&effect), Some(&result));
    }
    let kind = AdapterKind::RollbackLastTestDeploy;
    let effect = call(&ctx, kind, json!({}), true, None)
        .await
        .expect("dry run");
    let result = call(&ctx, kind, json!({}), false, Some("r"))
        .await
        .expect("rolls back");
    check(&rollback, Some(&effect), Some(&result));
    assert!(
        !validator(&rollback.output_schema).is_valid(
            &json!({"phase": "execute", "result": {"action": "rollback_last_test_deploy"}})
        ),
        "a result must be complete"
    );
}

/// The allowed-test tools: the hub's dry-run effect and run result fit root's write
/// envelope (`expected_effect`, `result`), and recorded results fit `hub.get_test_results`.
#[tokio::test]
async fn test_tool_answers_match_their_contracts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", dir.path());
    config.skill.allowed_tests = vec![
        AllowedTestConfig {
            name: "ok".into(),
            argv: vec!["echo".into(), "Bearer abcdefgh12345".into()],
            cwd: Some(dir.path().to_owned()),
            timeout_ms: 5_000,
            env: Default::default(),
            progress_line: None,
            progress_total: None,
        },
        AllowedTestConfig {
            name: "slow".into(),
            argv: vec!["sleep".into(), "5".into()],
            cwd: None,
            timeout_ms: 100,
            env: Default::default(),
            progress_line: None,
            progress_total: None,
        },
    ];
    let ctx = Arc::new(HubContext::new(config).expect("context"));
    let run_contract = contract("hub.run_allowed_tests");
    let envelope = &run_contract.output_schema;
    let input = validator(&run_contract.input_schema);
    for ok in [
        json!({"name": "ok"}),
        json!({"name": "ok", "phase": "preview"}),
        json!({"name": "ok", "phase": "execute", "confirmation_token": "c", "idempotency_key": "k"}),
        json!({"name": "ok", "dry_run": true}),
    ] {
        assert!(input.is_valid(&ok), "{ok}");
    }
    for bad in [
        json!({}),
        json!({"name": ""}),
        json!({"name": "ok", "argv": ["x"]}),
    ] {
        assert!(!input.is_valid(&bad), "{bad}");
    }
    let call = |name: &str, dry_run: bool| {
        let mut input = CallInput::new("c", json!({ "name": name }), soon());
        input.dry_run = dry_run;
        AdapterKind::AllowedTests.run(ctx.clone(), input)
    };
    let effect = call("ok", true).await.expect("dry run");
    assert_valid(
        "dry run",
        envelope,
        &json!({"phase": "dry_run", "expected_effect": effect}),
    );
    let mut results = Vec::new();
    for name in ["ok", "slow"] {
        let result = call(name, false).await.expect("runs");
        assert_valid(
            "execute",
            envelope,
            &json!({"phase": "execute", "result": result, "replay": false, "idempotency_key": "k", "summary": "s"}),
        );
        results.push(result);
    }
    assert_eq!(results[0]["redactions"], 1);
    assert_eq!(results[1]["timed_out"], true);
    let effect = call("ok", true).await.expect("dry run");
    assert_eq!(effect["last_result"], results[0]);
    assert_valid(
        "preview",
        envelope,
        &json!({"phase": "preview", "expected_effect": effect, "confirmation_token": "t",
                "confirmation_expires_at": "2026-01-01T00:00:00Z"}),
    );
    assert!(!validator(envelope).is_valid(&json!({"expected_effect": effect})));

    let read_contract = contract("hub.get_test_results");
    let answer = AdapterKind::TestResults
        .run(
            ctx.clone(),
            CallInput::new("r", json!({"limit": 50}), soon()),
        )
        .await
        .expect("results");
    assert_eq!(answer["results"].as_array().map(Vec::len), Some(2));
    assert_valid("results", &read_contract.output_schema, &answer);
    let input = validator(&read_contract.input_schema);
    assert!(input.is_valid(&json!({"name": "ok", "limit": 1})));
    assert!(!input.is_valid(&json!({"limit": 51})));
    assert!(!input.is_valid(&json!({"limit": 0})));
}

/// Managed services: the runtime summary's `services`, service health checks and
/// `hub.restart_service` (dry-run effect, result) fit their contracts.
#[tokio::test]
async fn service_tool_answers_match_their_contracts() {
    use crate::config::{ServiceConfig, ServiceHealthConfig};
    let dir = tempfile::tempdir().expect("tempdir");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let open = listener.local_addr().expect("addr").to_string();
    let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", dir.path());
    let mut web = ServiceConfig::new("web", vec!["sleep".into(), "30".into()]);
    web.health = Some(ServiceHealthConfig::Tcp {
        address: open,
        timeout_ms: 1_000,
    });
    let mut quitter = ServiceConfig::new("quitter", vec!["true".into()]);
    quitter.health = Some(ServiceHealthConfig::Command {
        argv: vec!["true".into()],
        cwd: None,
        timeout_ms: 1_000,
    });
    config.services = vec![
        web,
        quitter,
        ServiceConfig::new("broken", vec!["/nonexistent/x".into()]),
    ];
    let ctx = Arc::new(HubContext::new(config).expect("context"));
    ctx.machine.services.start().await.expect("services");
    for _ in 0..400 {
        if ctx.machine.services.get("quitter").expect("known").state
            == crate::machine::services::ServiceState::Exited
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let run = |kind: AdapterKind, args: Value, dry_run: bool| {
        let mut input = CallInput::new("c", args, soon());
        input.dry_run = dry_run;
        input.idempotency_key = Some("k".into());
        kind.run(ctx.clone(), input)
    };

    let c = contract("hub.get_runtime_summary");
    let summary = run(AdapterKind::RuntimeSummary, json!({}), false)
        .await
        .expect("summary");
    assert_valid("runtime summary", &c.output_schema, &summary);
    let states: Vec<&str> = summary["services"]
        .as_array()
        .expect("services")
        .iter()
        .filter_map(|s| s["state"].as_str())
        .collect();
    assert_eq!(states, ["running", "exited", "failed"], "{summary}");

    let c = contract("hub.run_healthchecks");
    let health = run(AdapterKind::Healthchecks, json!({}), false)
        .await
        .expect("health");
    assert_valid("health", &c.output_schema, &health);
    let checks: Vec<(&str, bool)> = health["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| (c["service"].as_str().unwrap_or("-"), c["ok"] == true))
        .collect();
    assert_eq!(checks, [("web", true), ("quitter", false)], "{health}");
    assert!(
        health["checks"][1]["detail"]
            .as_str()
            .expect("detail")
            .contains("not running (state exited, exit status 0"),
        "{health}"
    );

    let c = contract("hub.restart_service");
    let input = validator(&c.input_schema);
    for ok in [
        json!({"service": "web"}),
        json!({"service": "web", "phase": "execute", "confirmation_token": "c", "idempotency_key": "k"}),
        json!({"service": "web", "dry_run": true}),
    ] {
        assert!(input.is_valid(&ok), "{ok}");
    }
    for bad in [
        json!({}),
        json!({"service": "Web"}),
        json!({"service": "web", "argv": []}),
    ] {
        assert!(!input.is_valid(&bad), "{bad}");
    }
    let effect = run(AdapterKind::RestartService, json!({"service": "web"}), true)
        .await
        .expect("dry run");
    assert_valid(
        "preview",
        &c.output_schema,
        &json!({"phase": "preview", "expected_effect": effect, "confirmation_token": "t",
                "confirmation_expires_at": "2026-01-01T00:00:00Z"}),
    );
    let result = run(
        AdapterKind::RestartService,
        json!({"service": "web"}),
        false,
    )
    .await
    .expect("restart");
    assert_valid(
        "execute",
        &c.output_schema,
        &json!({"phase": "execute", "result": result, "replay": false, "idempotency_key": "k"}),
    );
    ctx.machine.services.stop().await;
}

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
        input.dry_run = dry_run;
        input.idempotency_key = key.map(str::to_owned);
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
    let (session, samples) = fresh.session(&c).expect("kept");
    assert_eq!(session.state, crate::profiles::SessionState::Interrupted);
    assert!(session.artifact_id.is_some() && !samples.is_empty());
}
