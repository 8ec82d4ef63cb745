//! Tests of the skill: every adapter answers, calls carry their flags, the lifecycle persists,
//! failed adapters restart within their budget, limits, uninstall and the owner's switch.

use std::collections::HashMap;
use std::path::Path;

use super::*;
use crate::config::HubConfig;
use crate::skill::adapters::{ADAPTERS, AdapterKind};
use mcp_shared::protocol::CallBody;

fn ctx(dir: &Path, concurrency: usize) -> Arc<HubContext> {
    let mut config = HubConfig::new("hub:test-alpha", "test", "ws://127.0.0.1:1", "t", dir);
    config.skill.adapter_concurrency = concurrency;
    crate::skill::adapters::serve_everything(&mut config);
    let fault = [crate::skill::test_fault::FAULT.decl];
    Arc::new(HubContext::with_embedded(config, &fault).expect("context"))
}

fn soon(ms: u64) -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_millis(ms)
}

const STATUS: AdapterDecl = AdapterKind::Status.decl();
const FAULT: AdapterDecl = crate::skill::test_fault::FAULT.decl;

#[tokio::test]
async fn every_adapter_answers_with_real_figures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ctx(dir.path(), 4);
    let (skill, _) = SkillHandle::start(ctx.clone(), crate::skill::test_fault::embedded())
        .await
        .expect("skill");
    let mut answers = HashMap::new();
    for decl in ADAPTERS {
        // Writes and the reads that name an object need arguments, the NLU tools need
        // `[nlu]` content; their own tests cover them.
        if decl.writes
            || ["hub.memory.get_session", "hub.memory.get_artifact"].contains(&decl.tool_id)
            || decl.tool_id.starts_with("nlu_authoring.")
        {
            continue;
        }
        let v = skill
            .execute("c", decl, serde_json::json!({}), soon(5_000))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", decl.tool_id));
        answers.insert(decl.tool_id, v);
    }
    let status = &answers["hub.get_status"];
    assert_eq!(status["target_id"], "hub:test-alpha");
    assert_eq!(
        status["skills"][0]["published"].as_array().map(Vec::len),
        Some(ADAPTERS.len() + 1),
        "the built-in adapters and the embedded fault fixture"
    );
    let runtime = &answers["hub.get_runtime_summary"];
    assert!(runtime["memory"]["total_bytes"].as_u64().expect("u64") > 0);
    let surface = &answers["hub.get_operational_surface"];
    assert_eq!(surface["adapters"][1]["concurrency_limit"], 4);
    let listed: Vec<(&str, &str, bool)> = surface["adapters"]
        .as_array()
        .expect("adapters")
        .iter()
        .filter_map(|a| {
            Some((
                a["tool_id"].as_str()?,
                a["name"].as_str()?,
                a["writes"] == true,
            ))
        })
        .collect();
    assert!(
        listed.contains(&(
            "hub.run_allowed_tests",
            "infra_access_skill.allowed_tests",
            true
        )),
        "{listed:?}"
    );
    assert!(
        listed.contains(&(
            "hub.get_test_results",
            "infra_access_skill.test_results",
            false
        )),
        "{listed:?}"
    );
    assert_eq!(
        answers["hub.get_test_results"]["results"],
        serde_json::json!([])
    );
    assert_eq!(surface["enabled"], true);
    let health = &answers["hub.run_healthchecks"];
    assert_eq!(health["status"], "healthy");
    skill.stop().await;
}

#[tokio::test]
async fn the_adapter_sees_the_calls_dry_run_flag_and_idempotency_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mark = dir.path().join("ran");
    let mut config = HubConfig::new("hub:t", "test", "ws://127.0.0.1:1", "t", dir.path());
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
    let ctx = Arc::new(HubContext::new(config).expect("context"));
    let (skill, _) = SkillHandle::start(ctx, crate::skill::test_fault::embedded())
        .await
        .expect("skill");
    let decl = AdapterKind::AllowedTests.decl();
    let input = |dry_run: bool, key: &str| CallInput {
        call_id: format!("{dry_run}-{key}"),
        body: CallBody {
            arguments: serde_json::json!({"name": "mark"}),
            dry_run,
            idempotency_key: Some(key.to_owned()),
            confirmed_effect: None,
        },
        deadline: soon(5_000),
        progress: Default::default(),
        span: tracing::Span::none(),
    };
    let effect = skill
        .execute_call(decl, input(true, "k"))
        .await
        .expect("dry");
    assert_eq!(effect["action"], "run_allowed_test");
    assert!(!mark.exists(), "nothing ran");
    let first = skill
        .execute_call(decl, input(false, "k"))
        .await
        .expect("run");
    let again = skill
        .execute_call(decl, input(false, "k"))
        .await
        .expect("replay");
    assert_eq!(first, again);
    let ran = std::fs::read_to_string(&mark).expect("ran once");
    assert_eq!(ran.lines().count(), 1);
    skill.stop().await;
}

#[tokio::test]
async fn lifecycle_persists_across_a_restart_of_the_skill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (skill, _) = SkillHandle::start(ctx(dir.path(), 4), crate::skill::test_fault::embedded())
        .await
        .expect("skill");
    let state = skill
        .command(SKILL, SkillCommand::Disable)
        .await
        .expect("disable");
    assert!(!state.enabled);
    assert!(state.published.is_empty());
    let err = skill
        .execute("c1", STATUS, Value::Null, soon(1_000))
        .await
        .expect_err("disabled");
    assert_eq!(err.code, ErrorCode::SkillDisabled);
    skill.stop().await;

    let ctx2 = ctx(dir.path(), 4);
    let (skill, _) = SkillHandle::start(ctx2.clone(), crate::skill::test_fault::embedded())
        .await
        .expect("restarted skill");
    let state = skill
        .command(SKILL, SkillCommand::Status)
        .await
        .expect("status");
    assert!(state.installed && !state.enabled, "{state:?}");
    assert!(!ctx2.descriptor().operational_surface.enabled);
    let state = skill
        .command(SKILL, SkillCommand::Enable)
        .await
        .expect("enable");
    assert_eq!(state.published.len(), ADAPTERS.len() + 1);
    assert_eq!(
        ctx2.descriptor().operational_surface.capabilities.len(),
        ADAPTERS.len() + 1
    );
    let other = skill
        .command("other_skill", SkillCommand::Enable)
        .await
        .expect("other");
    assert!(!other.installed);
    skill.stop().await;
    assert!(load_lifecycle(dir.path()).expect("load").enabled);
}

#[tokio::test]
async fn a_panicking_adapter_fails_the_call_and_is_restarted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (skill, _) = SkillHandle::start(ctx(dir.path(), 4), crate::skill::test_fault::embedded())
        .await
        .expect("skill");
    for i in 0..3 {
        let err = skill
            .execute(
                &format!("p{i}"),
                FAULT,
                serde_json::json!({"fault": "panic"}),
                soon(5_000),
            )
            .await
            .expect_err("panics");
        assert_eq!(err.code, ErrorCode::AdapterFailed, "{err}");
        let v = skill
            .execute(&format!("ok{i}"), FAULT, serde_json::json!({}), soon(5_000))
            .await
            .expect("the next call succeeds");
        assert_eq!(v["ok"], true);
    }
    skill.stop().await;
}

#[tokio::test]
async fn over_the_limit_is_busy_and_a_hang_times_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (skill, _) = SkillHandle::start(ctx(dir.path(), 1), crate::skill::test_fault::embedded())
        .await
        .expect("skill");
    let hung = {
        let skill = skill.clone();
        tokio::spawn(async move {
            skill
                .execute("h", FAULT, serde_json::json!({"fault": "hang"}), soon(700))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    let err = skill
        .execute("b", FAULT, serde_json::json!({}), soon(5_000))
        .await
        .expect_err("busy");
    assert_eq!(err.code, ErrorCode::Busy);
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "busy is immediate"
    );
    let err = hung.await.expect("join").expect_err("hang");
    assert_eq!(err.code, ErrorCode::Timeout);
    // The slot is free again.
    skill
        .execute("after", FAULT, serde_json::json!({}), soon(5_000))
        .await
        .expect("runs after the timeout");
    skill.stop().await;
}

#[tokio::test]
async fn uninstall_and_the_owners_switch_withdraw_everything_and_persist() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ctx(dir.path(), 4);
    let (skill, _) = SkillHandle::start(ctx.clone(), crate::skill::test_fault::embedded())
        .await
        .expect("skill");
    let state = skill
        .command(SKILL, SkillCommand::Uninstall)
        .await
        .expect("uninstall");
    assert!(!state.installed && state.published.is_empty(), "{state:?}");
    assert_eq!(
        state.adapters.len(),
        ADAPTERS.len() + 1,
        "its adapter set stays known"
    );
    let err = skill
        .execute("u", STATUS, Value::Null, soon(1_000))
        .await
        .expect_err("uninstalled");
    assert_eq!(err.code, ErrorCode::SkillDisabled);
    assert!(!load_lifecycle(dir.path()).expect("load").installed);
    skill
        .command(SKILL, SkillCommand::Install)
        .await
        .expect("install");

    // The owner's switch: off wins over root's enabled state, and is kept in its file.
    save_owner_switch(dir.path(), false).expect("save");
    assert!(!load_owner_switch(dir.path()).expect("load"));
    skill.owner_switch(false);
    let state = skill
        .command(SKILL, SkillCommand::Enable)
        .await
        .expect("enable");
    assert!(state.owner_disabled && state.enabled && state.published.is_empty());
    assert!(!ctx.descriptor().operational_surface.enabled);
    skill.stop().await;
    // A restarted skill starts switched off by its owner.
    let ctx2 = super::skill_tests::ctx(dir.path(), 4);
    let (skill, _) = SkillHandle::start(ctx2.clone(), crate::skill::test_fault::embedded())
        .await
        .expect("restarted");
    assert!(!ctx2.lifecycle().owner_enabled);
    skill.owner_switch(true);
    let state = skill
        .command(SKILL, SkillCommand::Status)
        .await
        .expect("status");
    assert!(
        !state.owner_disabled && !state.published.is_empty(),
        "{state:?}"
    );
    skill.stop().await;
}

#[tokio::test]
async fn hub_get_status_takes_no_arguments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = HubConfig::new("hub:x", "test", "ws://127.0.0.1:1", "t", dir.path());
    let ctx = Arc::new(HubContext::new(config).expect("context"));
    let (skill, _) = SkillHandle::start(ctx, crate::skill::test_fault::embedded())
        .await
        .expect("skill");
    let err = skill
        .execute(
            "f",
            STATUS,
            serde_json::json!({"fault": "panic"}),
            soon(5_000),
        )
        .await
        .expect_err("refused");
    assert_eq!(err.code, ErrorCode::InvalidArguments);
    skill.stop().await;
}
