//! Tests of the deploy tools against real git repositories (fixtures made with `git`).

use std::path::PathBuf;
use std::sync::Arc;

use super::*;
use crate::config::HubConfig;
use crate::skill::adapters::AdapterKind;

/// Runs git for a test (with an identity); panics with git's output on failure.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository `src` under `dir` with three commits of `app.txt` ("one", "two",
/// "three"): tags `v1`, `v2` on the first two, branch `main` at the third. Returns its
/// path and the three commit ids.
pub(crate) fn fixture_repo(dir: &Path) -> (PathBuf, [String; 3]) {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).expect("src");
    git(&src, &["init", "-q", "-b", "main"]);
    let mut shas = Vec::new();
    for (i, word) in ["one", "two", "three"].iter().enumerate() {
        std::fs::write(src.join("app.txt"), format!("{word}\n")).expect("write");
        git(&src, &["add", "app.txt"]);
        git(&src, &["commit", "-q", "-m", &format!("commit {word}")]);
        shas.push(git(&src, &["rev-parse", "HEAD"]));
        if i < 2 {
            git(&src, &["tag", &format!("v{}", i + 1)]);
        }
    }
    (src, [shas[0].clone(), shas[1].clone(), shas[2].clone()])
}

pub(crate) fn config(dir: &Path, src: &Path) -> HubConfig {
    let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", dir.join("state"));
    config.deploy = Some(DeployConfig {
        repository: src.display().to_string(),
        worktree: "deploy/app".into(),
        allowed_refs: vec!["main".into(), "v*".into()],
        allow_commits: false,
        restart_services: Vec::new(),
        git: "git".into(),
        timeout_ms: 60_000,
    });
    config.validate().expect("valid");
    config
}

pub(crate) async fn call(
    ctx: &Arc<HubContext>,
    kind: AdapterKind,
    arguments: Value,
    dry_run: bool,
    key: Option<&str>,
) -> Result<Value, ToolError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut input = CallInput::new("d", arguments, deadline);
    input.body.dry_run = dry_run;
    input.body.idempotency_key = key.map(str::to_owned);
    kind.run(ctx.clone(), input).await
}

fn head(ctx: &HubContext) -> String {
    git(
        &ctx.config.deploy_worktree().expect("worktree"),
        &["rev-parse", "HEAD"],
    )
}

fn content(ctx: &HubContext) -> String {
    std::fs::read_to_string(ctx.config.deploy_worktree().expect("wt").join("app.txt"))
        .expect("app.txt")
}

/// Executes `kind` with the effect a preview answered as the confirmed one.
async fn execute_confirmed(
    ctx: &Arc<HubContext>,
    kind: AdapterKind,
    arguments: Value,
    confirmed: &Value,
    key: &str,
) -> Result<Value, ToolError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut input = CallInput::new("d", arguments, deadline);
    input.body.idempotency_key = Some(key.to_owned());
    input.body.confirmed_effect = Some(confirmed.clone());
    kind.run(ctx.clone(), input).await
}

#[tokio::test]
async fn an_execute_runs_what_was_confirmed_or_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, [c1, _, c3]) = fixture_repo(dir.path());
    let ctx = Arc::new(HubContext::new(config(dir.path(), &src)).expect("context"));
    let deploy = AdapterKind::DeployRef;
    call(&ctx, deploy, json!({"ref": "v1"}), false, Some("k1"))
        .await
        .expect("deploys v1");

    // Previewed `main` at c3; then `main` moves on before the execute.
    let preview = call(&ctx, deploy, json!({"ref": "main"}), true, None)
        .await
        .expect("dry run");
    assert_eq!(preview["target"]["commit"], c3.as_str());
    std::fs::write(src.join("app.txt"), "four\n").expect("write");
    git(&src, &["commit", "-qam", "commit four"]);
    let c4 = git(&src, &["rev-parse", "HEAD"]);
    let err = execute_confirmed(&ctx, deploy, json!({"ref": "main"}), &preview, "k2")
        .await
        .expect_err("main moved");
    assert_eq!(err.code, ErrorCode::Conflict, "{err}");
    assert!(
        err.message.contains("`main` moved since the preview")
            && err.message.contains(&c3)
            && err.message.contains(&c4),
        "{err}"
    );
    assert_eq!(head(&ctx), c1, "nothing was deployed");

    // Another deploy landed after the preview: the worktree moved.
    let preview = call(&ctx, deploy, json!({"ref": "main"}), true, None)
        .await
        .expect("dry run");
    call(&ctx, deploy, json!({"ref": "v2"}), false, Some("k3"))
        .await
        .expect("deploys v2");
    let err = execute_confirmed(&ctx, deploy, json!({"ref": "main"}), &preview, "k4")
        .await
        .expect_err("worktree moved");
    assert_eq!(err.code, ErrorCode::Conflict, "{err}");
    assert!(err.message.contains("deployed worktree moved"), "{err}");

    // Previewed again, the confirmed effect holds and the execute runs it.
    let preview = call(&ctx, deploy, json!({"ref": "main"}), true, None)
        .await
        .expect("dry run");
    let done = execute_confirmed(&ctx, deploy, json!({"ref": "main"}), &preview, "k5")
        .await
        .expect("deploys main");
    assert_eq!(done["deployed"]["commit"], c4.as_str());
    assert_eq!(content(&ctx), "four\n");

    // A rollback confirmed before another deploy landed is refused too.
    let preview = call(
        &ctx,
        AdapterKind::RollbackLastTestDeploy,
        json!({}),
        true,
        None,
    )
    .await
    .expect("dry run");
    call(&ctx, deploy, json!({"ref": "v1"}), false, Some("k6"))
        .await
        .expect("deploys v1");
    let err = execute_confirmed(
        &ctx,
        AdapterKind::RollbackLastTestDeploy,
        json!({}),
        &preview,
        "k7",
    )
    .await
    .expect_err("moved");
    assert_eq!(err.code, ErrorCode::Conflict, "{err}");
    assert_eq!(head(&ctx), c1);
}

#[tokio::test]
async fn deploy_preview_rollback_and_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, [c1, c2, c3]) = fixture_repo(dir.path());
    let ctx = Arc::new(HubContext::new(config(dir.path(), &src)).expect("context"));
    let deploy = AdapterKind::DeployRef;
    let rollback = AdapterKind::RollbackLastTestDeploy;

    // Nothing deployed: nothing to roll back.
    let err = call(&ctx, rollback, json!({}), true, None)
        .await
        .expect_err("nothing yet");
    assert_eq!(err.code, ErrorCode::NotFound, "{err}");

    let effect = call(&ctx, deploy, json!({"ref": "v1"}), true, None)
        .await
        .expect("dry run");
    assert_eq!(effect["current"], Value::Null);
    assert_eq!(effect["target"]["commit"], c1.as_str());
    assert_eq!(effect["target"]["resolved_ref"], "refs/tags/v1");
    assert_eq!(effect["commits"].as_array().map(Vec::len), Some(1));
    assert!(
        !ctx.config.deploy_worktree().expect("wt").exists(),
        "a dry run creates no worktree"
    );

    let first = call(&ctx, deploy, json!({"ref": "v1"}), false, Some("k1"))
        .await
        .expect("deploys");
    assert_eq!(first["previous"], Value::Null);
    assert_eq!(first["deployed"]["commit"], c1.as_str());
    assert_eq!(
        (head(&ctx), content(&ctx)),
        (c1.clone(), "one\n".to_owned())
    );

    let effect = call(&ctx, deploy, json!({"ref": "main"}), true, None)
        .await
        .expect("dry run");
    assert_eq!(effect["current"], json!({"ref": "v1", "commit": c1}));
    assert_eq!(effect["target"]["resolved_ref"], "refs/heads/main");
    let arriving: Vec<&Value> = effect["commits"]
        .as_array()
        .expect("commits")
        .iter()
        .map(|c| &c["sha"])
        .collect();
    assert_eq!(arriving, [&json!(c3), &json!(c2)], "newest first");
    assert_eq!(effect["commits"][0]["subject"], "commit three");
    assert_eq!(effect["commits"][0]["author"], "t");
    assert_eq!(effect["fast_forward"], true);
    assert_eq!(effect["commits_removed"], json!([]));

    let second = call(&ctx, deploy, json!({"ref": "v2"}), false, Some("k2"))
        .await
        .expect("deploys");
    assert_eq!(second["previous"], json!({"ref": "v1", "commit": c1}));
    assert_eq!(content(&ctx), "two\n");

    // A repeated key answers the first result and deploys nothing.
    let again = call(&ctx, deploy, json!({"ref": "v2"}), false, Some("k2"))
        .await
        .expect("replay");
    assert_eq!(again, second);
    let err = call(&ctx, deploy, json!({"ref": "v1"}), false, Some("k2"))
        .await
        .expect_err("same key, other ref");
    assert_eq!(err.code, ErrorCode::InvalidArguments);
    assert_eq!(ctx.stores.deploys.entries().expect("history").len(), 2);

    let effect = call(&ctx, rollback, json!({}), true, None)
        .await
        .expect("dry run");
    assert_eq!(effect["current"], json!({"ref": "v2", "commit": c2}));
    assert_eq!(effect["target"]["commit"], c1.as_str());
    assert_eq!(effect["target"]["ref"], "v1");
    assert_eq!(effect["undoes"]["deploy_id"], second["deploy_id"]);
    assert_eq!(effect["fast_forward"], false);
    assert_eq!(effect["commits_removed"][0]["sha"], c2.as_str());
    let back = call(&ctx, rollback, json!({}), false, Some("r1"))
        .await
        .expect("rolls back");
    assert_eq!(back["deployed"]["commit"], c1.as_str());
    assert_eq!(back["undid"]["deploy_id"], second["deploy_id"]);
    assert_eq!(
        (head(&ctx), content(&ctx)),
        (c1.clone(), "one\n".to_owned())
    );
    let same = call(&ctx, rollback, json!({}), false, Some("r1"))
        .await
        .expect("replay");
    assert_eq!(same, back);
    let err = call(&ctx, rollback, json!({}), false, Some("r2"))
        .await
        .expect_err("v1 was the first deploy");
    assert_eq!(err.code, ErrorCode::NotFound);
    assert!(err.message.contains("first"), "{err}");
    let history = ctx.stores.deploys.entries().expect("history");
    let kinds: Vec<DeployKind> = history.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [DeployKind::Deploy, DeployKind::Deploy, DeployKind::Rollback]
    );
    assert_eq!(history[2].previous_commit.as_deref(), Some(c2.as_str()));
    assert_eq!(history[2].idempotency_key.as_deref(), Some("r1"));
}

#[tokio::test]
async fn forged_refs_never_reach_git() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, _) = fixture_repo(dir.path());
    let ctx = Arc::new(HubContext::new(config(dir.path(), &src)).expect("context"));
    for (bad, why) in [
        (json!({"ref": "-x"}), "must not start with `-`"),
        (
            json!({"ref": "--upload-pack=touch x"}),
            "must not start with `-`",
        ),
        (json!({"ref": "../x"}), "`..`"),
        (json!({"ref": "main;rm"}), "contains ';'"),
        (json!({"ref": "v1^{tree}"}), "contains '^'"),
        (json!({"ref": "feature/x"}), "allowed refs: `main`, `v*`"),
        (json!({"ref": c40()}), "allow_commits"),
        (json!({"ref": "v9"}), "no tag or branch"),
        (json!({"ref": "v1", "path": "/"}), "unknown argument `path`"),
        (json!({}), "`ref` (a string) is required"),
    ] {
        for dry_run in [true, false] {
            let err = call(
                &ctx,
                AdapterKind::DeployRef,
                bad.clone(),
                dry_run,
                Some("k"),
            )
            .await
            .expect_err("refused");
            assert_eq!(err.code, ErrorCode::InvalidArguments, "{bad}");
            assert!(err.message.contains(why), "{bad}: {err}");
        }
    }
    assert!(!ctx.config.deploy_worktree().expect("wt").exists());
    assert!(ctx.stores.deploys.entries().expect("history").is_empty());
    let err = call(
        &ctx,
        AdapterKind::RollbackLastTestDeploy,
        json!({"ref": "v1"}),
        true,
        None,
    )
    .await
    .expect_err("no arguments");
    assert_eq!(err.code, ErrorCode::InvalidArguments);
}

fn c40() -> String {
    "0123456789abcdef0123456789abcdef01234567".to_owned()
}

#[tokio::test]
async fn commits_local_changes_and_a_foreign_worktree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, [c1, _, c3]) = fixture_repo(dir.path());
    let mut config = config(dir.path(), &src);
    if let Some(d) = config.deploy.as_mut() {
        d.allow_commits = true;
    }
    let ctx = Arc::new(HubContext::new(config).expect("context"));
    let done = call(
        &ctx,
        AdapterKind::DeployRef,
        json!({"ref": c1}),
        false,
        None,
    )
    .await
    .expect("a commit id, allowed");
    assert_eq!(
        done["deployed"],
        json!({"ref": c1, "resolved_ref": null, "commit": c1})
    );
    let err = call(
        &ctx,
        AdapterKind::DeployRef,
        json!({"ref": c40()}),
        true,
        None,
    )
    .await
    .expect_err("not in the repository");
    assert!(err.message.contains("not in the repository"), "{err}");

    // A tracked file changed in the worktree blocks the deploy; the preview shows it.
    let wt = ctx.config.deploy_worktree().expect("wt");
    std::fs::write(wt.join("app.txt"), "edited\n").expect("edit");
    let effect = call(
        &ctx,
        AdapterKind::DeployRef,
        json!({"ref": "main"}),
        true,
        None,
    )
    .await
    .expect("dry run");
    assert_eq!(effect["local_changes"], json!(["app.txt"]));
    let err = call(
        &ctx,
        AdapterKind::DeployRef,
        json!({"ref": "main"}),
        false,
        None,
    )
    .await
    .expect_err("dirty");
    assert_eq!(err.code, ErrorCode::EnvironmentForbidden);
    assert!(err.message.contains("app.txt"), "{err}");
    assert_eq!(head(&ctx), c1);
    git(&wt, &["checkout", "--", "app.txt"]);
    call(
        &ctx,
        AdapterKind::DeployRef,
        json!({"ref": "main"}),
        false,
        None,
    )
    .await
    .expect("clean again");
    assert_eq!(head(&ctx), c3);

    // A directory that is not our worktree is never overwritten.
    let other = tempfile::tempdir().expect("tempdir");
    let (src2, _) = fixture_repo(other.path());
    let foreign = Arc::new(
        HubContext::new(config_with_worktree(other.path(), &src2, &src)).expect("context"),
    );
    let err = call(
        &foreign,
        AdapterKind::DeployRef,
        json!({"ref": "v1"}),
        false,
        None,
    )
    .await
    .expect_err("foreign");
    assert_eq!(err.code, ErrorCode::EnvironmentForbidden);
    assert!(err.message.contains("not a worktree"), "{err}");

    // No [deploy]: refused.
    let bare = HubConfig::new("hub:x", "test", "ws://x", "t", dir.path().join("s2"));
    let bare = Arc::new(HubContext::new(bare).expect("context"));
    let err = call(
        &bare,
        AdapterKind::DeployRef,
        json!({"ref": "v1"}),
        true,
        None,
    )
    .await
    .expect_err("no deploy");
    assert_eq!(err.code, ErrorCode::EnvironmentForbidden);
    assert!(err.message.contains("[deploy]"), "{err}");
}

#[tokio::test]
async fn a_deploy_restarts_the_configured_services() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, [c1, ..]) = fixture_repo(dir.path());
    let mut config = config(dir.path(), &src);
    config.services = vec![crate::config::ServiceConfig::new(
        "app",
        vec!["sleep".into(), "3600".into()],
    )];
    if let Some(d) = config.deploy.as_mut() {
        d.restart_services = vec!["app".into()];
    }
    config.validate().expect("valid");
    let ctx = Arc::new(HubContext::new(config).expect("context"));
    ctx.machine.services.start().await.expect("services start");
    let effect = call(
        &ctx,
        AdapterKind::DeployRef,
        json!({"ref": "v1"}),
        true,
        None,
    )
    .await
    .expect("dry run");
    assert_eq!(effect["restart_services"], json!(["app"]));
    let mut pids = Vec::new();
    for r in ["v1", "v2"] {
        let done = call(&ctx, AdapterKind::DeployRef, json!({"ref": r}), false, None)
            .await
            .expect("deploys");
        let service = &done["services"][0];
        assert_eq!(service["name"], "app");
        assert_eq!(service["restarted"], true, "{done}");
        assert_eq!(service["error"], Value::Null);
        let pid = service["pid"].as_u64().expect("pid");
        assert_eq!(
            ctx.machine
                .services
                .get("app")
                .expect("app")
                .pid
                .map(u64::from),
            Some(pid)
        );
        pids.push(pid);
        // The recorded result carries the restarts (a replay shows them).
        let last = ctx.stores.deploys.last().expect("history").expect("entry");
        assert_eq!(last.result, done);
    }
    assert_ne!(pids[0], pids[1], "a new process each time");
    let back = call(
        &ctx,
        AdapterKind::RollbackLastTestDeploy,
        json!({}),
        false,
        None,
    )
    .await
    .expect("rolls back");
    assert_eq!(back["deployed"]["commit"], c1.as_str());
    assert_eq!(back["services"][0]["restarted"], true);
    ctx.machine.services.stop().await;
}

/// A config whose worktree is an existing repository (`existing`) under a declared root.
fn config_with_worktree(dir: &Path, src: &Path, existing: &Path) -> HubConfig {
    let mut config = config(dir, src);
    config.allowed_roots = vec![existing.parent().expect("parent").to_owned()];
    if let Some(d) = config.deploy.as_mut() {
        d.worktree = existing.to_owned();
    }
    config.validate().expect("valid");
    config
}
