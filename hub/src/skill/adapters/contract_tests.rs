//! Every adapter's real answers checked against its tool contract (schemas/tools/).

use std::sync::Arc;

use mcp_shared::{SideEffectClass, ToolContract};
use serde_json::json;

use super::*;
use crate::config::{AllowedTestConfig, HealthcheckConfig, HubConfig};
use crate::context::HubContext;
use serde_json::Value;

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

pub(super) fn soon() -> tokio::time::Instant {
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
        input.body.dry_run = dry_run;
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
        input.body.dry_run = dry_run;
        input.body.idempotency_key = Some("k".into());
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
