//! Unit tests of `hub.run_allowed_tests`: runs, output tails, timeouts, idempotency keys.

use std::path::Path;

use super::*;
use crate::config::HubConfig;
use crate::skill::adapters::AdapterKind;

fn soon(ms: u64) -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_millis(ms)
}

fn sh(name: &str, script: &str, timeout_ms: u64) -> AllowedTestConfig {
    AllowedTestConfig {
        name: name.into(),
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: None,
        timeout_ms,
        env: Default::default(),
        progress_line: None,
        progress_total: None,
    }
}

/// A hub whose allowed tests append a line to `<dir>/ran` each time they run.
fn ctx(dir: &Path) -> Arc<HubContext> {
    let mark = dir.join("ran");
    let mark = mark.display();
    let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", dir);
    let mut pass = sh(
        "pass",
        &format!("echo run >> '{mark}'; echo all good"),
        5_000,
    );
    pass.cwd = Some(dir.to_owned());
    pass.env.insert("GREETING".into(), "hello".into());
    config.skill.allowed_tests = vec![
        pass,
        sh(
            "fail",
            &format!("echo run >> '{mark}'; echo broken >&2; exit 3"),
            5_000,
        ),
        sh("slow", "echo started; sleep 30; echo never", 300),
        sh(
            "leaky",
            "echo token=mcpl_AAAAAAAAAAAAAAAAAAAA; echo url=https://ci:hunter2@git.local/x; \
             echo key=AKIAABCDEFGHIJKLMNOP; echo \"auth: Bearer $GREETING.xyz\"; \
             printf -- '-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBg\\n-----END PRIVATE KEY-----\\n'",
            5_000,
        ),
    ];
    config.skill.allowed_tests[3]
        .env
        .insert("GREETING".into(), "s3cr3tt0ken".into());
    Arc::new(HubContext::new(config).expect("context"))
}

fn lines(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("ran"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

async fn call(
    ctx: &Arc<HubContext>,
    name: &str,
    dry_run: bool,
    key: Option<&str>,
) -> Result<Value, ToolError> {
    let mut input = CallInput::new("c", json!({ "name": name }), soon(10_000));
    input.body.dry_run = dry_run;
    input.body.idempotency_key = key.map(str::to_owned);
    AdapterKind::AllowedTests.run(ctx.clone(), input).await
}

async fn results(ctx: &Arc<HubContext>, arguments: Value) -> Result<Value, ToolError> {
    let input = CallInput::new("r", arguments, soon(5_000));
    AdapterKind::TestResults.run(ctx.clone(), input).await
}

#[tokio::test]
async fn a_dry_run_runs_nothing_and_describes_the_effect() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ctx(dir.path());
    let effect = call(&ctx, "pass", true, Some("k1")).await.expect("dry run");
    assert_eq!(lines(dir.path()), 0, "a dry run must not run the test");
    assert_eq!(effect["action"], "run_allowed_test");
    assert_eq!(effect["test"], "pass");
    assert_eq!(effect["argv"][0], "sh");
    assert_eq!(effect["cwd"], dir.path().display().to_string());
    assert_eq!(effect["timeout_ms"], 5_000);
    assert_eq!(effect["last_result"], Value::Null);
    assert!(
        !dir.path()
            .join(crate::store::results::RESULTS_FILE)
            .exists()
    );

    let run = call(&ctx, "pass", false, None).await.expect("runs");
    let effect = call(&ctx, "pass", true, None).await.expect("dry run");
    assert_eq!(effect["last_result"], run, "the last recorded result");
    assert_eq!(lines(dir.path()), 1);

    let err = call(&ctx, "rm-rf", true, None).await.expect_err("unknown");
    assert_eq!(err.code, ErrorCode::InvalidArguments);
    for name in ["`pass`", "`fail`", "`slow`", "`leaky`"] {
        assert!(err.message.contains(name), "{err}");
    }
    let input = CallInput::new("c", json!({"name": "pass", "argv": ["id"]}), soon(1_000));
    let err = AdapterKind::AllowedTests
        .run(ctx.clone(), input)
        .await
        .expect_err("only a name");
    assert_eq!(err.code, ErrorCode::InvalidArguments);
    assert_eq!(lines(dir.path()), 1);
}

#[tokio::test]
async fn execute_records_passing_and_failing_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ctx(dir.path());
    let ok = call(&ctx, "pass", false, None).await.expect("runs");
    assert_eq!(lines(dir.path()), 1);
    assert_eq!(ok["test"], "pass");
    assert_eq!(ok["passed"], true);
    assert_eq!(ok["exit_code"], 0);
    assert_eq!(ok["timed_out"], false);
    assert_eq!(ok["output_tail"], "all good\n");
    assert_eq!(ok["redactions"], 0);
    uuid::Uuid::parse_str(ok["run_id"].as_str().expect("run_id")).expect("a uuid");
    mcp_shared::time::parse(ok["started_at"].as_str().expect("started_at")).expect("rfc3339");

    let bad = call(&ctx, "fail", false, None).await.expect("runs");
    assert_eq!(lines(dir.path()), 2);
    assert_eq!(bad["passed"], false);
    assert_eq!(bad["exit_code"], 3);
    assert_eq!(bad["timed_out"], false);
    assert_eq!(bad["output_tail"], "broken\n");

    // Recorded on disk: a fresh store (a restarted hub) sees both.
    let store = crate::store::results::TestResults::new(dir.path());
    let recorded = store.recent(None, 10).expect("recent");
    assert_eq!(recorded.len(), 2);
    assert_eq!(serde_json::to_value(&recorded[0]).expect("json"), bad);
    assert_eq!(serde_json::to_value(&recorded[1]).expect("json"), ok);
}

#[tokio::test]
async fn a_timeout_kills_the_process_group_and_is_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ctx(dir.path());
    let started = Instant::now();
    let run = call(&ctx, "slow", false, None).await.expect("runs");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "killed at its timeout, not after `sleep 30`: {:?}",
        started.elapsed()
    );
    assert_eq!(run["timed_out"], true);
    assert_eq!(run["passed"], false);
    assert_eq!(run["exit_code"], Value::Null);
    assert_eq!(run["output_tail"], "started\n");
    assert!(run["duration_ms"].as_u64().expect("ms") >= 300);
    let last = ctx.stores.test_results.last("slow").expect("store");
    assert_eq!(serde_json::to_value(last).expect("json"), run);
}

#[tokio::test]
async fn a_call_deadline_shorter_than_the_timeout_still_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", dir.path());
    config.skill.allowed_tests = vec![sh("long", "sleep 30", 60_000)];
    let ctx = Arc::new(HubContext::new(config).expect("context"));
    let input = CallInput::new("c", json!({"name": "long"}), soon(1_500));
    let run = AdapterKind::AllowedTests
        .run(ctx.clone(), input)
        .await
        .expect("answered before the deadline");
    assert_eq!(run["timed_out"], true);
    assert!(
        ctx.stores
            .test_results
            .last("long")
            .expect("store")
            .is_some()
    );
}

#[tokio::test]
async fn an_idempotency_key_returns_the_first_result_without_running_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ctx(dir.path());
    let first = call(&ctx, "pass", false, Some("key-1"))
        .await
        .expect("runs");
    let again = call(&ctx, "pass", false, Some("key-1"))
        .await
        .expect("replay");
    assert_eq!(again, first, "same result, same run_id");
    assert_eq!(lines(dir.path()), 1, "ran once");
    // Survives a restart of the hub (the keys are in the state dir).
    let ctx2 = self::ctx(dir.path());
    let third = call(&ctx2, "pass", false, Some("key-1"))
        .await
        .expect("replay");
    assert_eq!(third, first);
    assert_eq!(lines(dir.path()), 1);
    // Another key runs; the same key for another test is refused.
    let other = call(&ctx2, "pass", false, Some("key-2"))
        .await
        .expect("runs");
    assert_ne!(other["run_id"], first["run_id"]);
    assert_eq!(lines(dir.path()), 2);
    let err = call(&ctx2, "fail", false, Some("key-1"))
        .await
        .expect_err("key names another test");
    assert_eq!(err.code, ErrorCode::InvalidArguments);
    assert_eq!(lines(dir.path()), 2);
    // The replayed key is recorded once: results hold the two real runs.
    assert_eq!(
        ctx2.stores
            .test_results
            .recent(Some("pass"), 50)
            .expect("recent")
            .len(),
        2
    );
}

#[tokio::test]
async fn a_concurrent_call_with_the_same_key_is_busy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", dir.path());
    config.skill.allowed_tests = vec![sh("nap", "sleep 1", 5_000)];
    let ctx = Arc::new(HubContext::new(config).expect("context"));
    let first = {
        let ctx = ctx.clone();
        tokio::spawn(async move { call(&ctx, "nap", false, Some("k")).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let err = call(&ctx, "nap", false, Some("k"))
        .await
        .expect_err("in flight");
    assert_eq!(err.code, ErrorCode::Busy);
    let first = first.await.expect("join").expect("runs");
    assert_eq!(
        call(&ctx, "nap", false, Some("k")).await.expect("replay"),
        first
    );
}

#[tokio::test]
async fn secrets_printed_by_a_test_are_redacted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ctx(dir.path());
    let run = call(&ctx, "leaky", false, None).await.expect("runs");
    let tail = run["output_tail"].as_str().expect("tail");
    for secret in ["mcpl_AAAA", "hunter2", "AKIAABCD", "s3cr3tt0ken", "MIIEvQ"] {
        assert!(!tail.contains(secret), "{secret} leaked: {tail}");
    }
    assert!(
        tail.contains("url=https://ci:[REDACTED]@git.local/x"),
        "{tail}"
    );
    assert!(tail.contains("auth: Bearer [REDACTED]"), "{tail}");
    assert_eq!(run["redactions"], 5, "{tail}");
    let on_disk = std::fs::read_to_string(dir.path().join(crate::store::results::RESULTS_FILE))
        .expect("file");
    assert!(!on_disk.contains("hunter2") && !on_disk.contains("s3cr3tt0ken"));
}

#[tokio::test]
async fn configured_redaction_patterns_apply_to_test_output_and_previews() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", dir.path());
    config.redaction.patterns = vec!["session=[0-9a-f]+".into()];
    config.skill.allowed_tests = vec![sh(
        "sess",
        "echo session=deadbeef01; echo plain line",
        5_000,
    )];
    let ctx = Arc::new(HubContext::new(config).expect("context"));
    let preview = call(&ctx, "sess", true, None).await.expect("preview");
    assert!(
        !preview["argv"].to_string().contains("deadbeef01"),
        "{preview}"
    );
    let run = call(&ctx, "sess", false, None).await.expect("runs");
    let tail = run["output_tail"].as_str().expect("tail");
    assert!(!tail.contains("deadbeef01"), "{tail}");
    assert!(
        tail.contains("[REDACTED]") && tail.contains("plain line"),
        "{tail}"
    );
    assert_eq!(run["redactions"], 1, "{tail}");
}

#[test]
fn the_tail_is_the_last_4_kib_and_drops_a_cut_first_line() {
    let mut tail = Tail::default();
    tail.bytes
        .extend(format!("AKIAABCDEFGHIJKLMNOP\n{}\nend", "x".repeat(10_000)).bytes());
    let (text, n) = redacted_tail(&tail, &[]);
    assert_eq!(n, 1);
    assert!(
        text.len() <= TAIL_BYTES && text.ends_with("x\nend"),
        "{}",
        text.len()
    );
    tail.cut = true;
    tail.bytes = "mcpl_tail_of_a_token\nkept".bytes().collect();
    assert_eq!(redacted_tail(&tail, &[]), ("kept".to_owned(), 0));
}

#[tokio::test]
async fn get_test_results_is_newest_first_with_a_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ctx(dir.path());
    let empty = results(&ctx, json!({})).await.expect("empty");
    assert_eq!(empty, json!({"results": []}));
    let mut ids = Vec::new();
    for name in ["pass", "fail", "pass", "fail", "pass"] {
        let run = call(&ctx, name, false, None).await.expect("runs");
        ids.push(run["run_id"].clone());
    }
    let all = results(&ctx, json!({})).await.expect("all");
    let got: Vec<&Value> = all["results"]
        .as_array()
        .expect("array")
        .iter()
        .map(|r| &r["run_id"])
        .collect();
    assert_eq!(got, ids.iter().rev().collect::<Vec<_>>(), "newest first");
    let two = results(&ctx, json!({"name": "pass", "limit": 2}))
        .await
        .expect("two");
    let two = two["results"].as_array().expect("array");
    assert_eq!(two.len(), 2);
    assert_eq!(two[0]["run_id"], ids[4]);
    assert_eq!(two[1]["run_id"], ids[2]);
    assert!(two.iter().all(|r| r["test"] == "pass"));
    let slow = results(&ctx, json!({"name": "slow"}))
        .await
        .expect("none yet");
    assert_eq!(slow, json!({"results": []}));
    for bad in [
        json!({"limit": 0}),
        json!({"limit": 51}),
        json!({"name": 3}),
        json!({"other": 1}),
        json!({"name": "nope"}),
    ] {
        let err = results(&ctx, bad.clone()).await.expect_err("refused");
        assert_eq!(err.code, ErrorCode::InvalidArguments, "{bad}");
    }
}
