//! `hub.deploy_ref` and `hub.rollback_last_test_deploy`: move the hub's deployed working tree
//! (`[deploy]`) to an allowed ref, or back to the commit before the last deploy, then restart
//! the configured services.
//!
//! Layout on disk: `<state_dir>/deploy-mirror.git` is a bare mirror of `deploy.repository`
//! (created on first use; every deploy preview and execute fetches its branches and tags into
//! it, pruning what is gone); the worktree is a `git worktree` of that mirror, created on the
//! first deploy and always checked out detached at a commit; `<state_dir>/deploys.json` is the
//! history ([`crate::deploys`]).
//!
//! - `dry_run` (root's preview and dry run): validates the ref ([`crate::refs`]), fetches,
//!   resolves it and answers the expected effect: current and target position, commits that
//!   arrive and leave (up to [`MAX_COMMITS`] each, with a `truncated` flag), whether it is a
//!   fast-forward, tracked files changed locally in the worktree, services to restart. It
//!   changes nothing but the mirror.
//! - execute: the same checks (the ref is resolved again), refuses with `conflict` when the
//!   preview the caller confirmed (root's `confirmed_effect`) named another current or target
//!   commit (the branch moved, or another deploy landed, since: what was confirmed is what
//!   runs, or nothing), refuses while tracked files in the worktree have local changes, checks
//!   out the commit, records the deploy, restarts the services and answers the result. A
//!   repeated idempotency key returns the recorded result and runs nothing.
//!
//! One deploy operation runs at a time on a hub; git runs as argv with `deploy.timeout_ms`
//! (bounded by the call's deadline) and is killed with its process group when it is over.
//! Commit subjects, author names, git's error output and the repository URL are redacted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use serde_json::{Value, json};

use crate::adapters::{AdapterKind, CallInput};
use crate::config::DeployConfig;
use crate::context::HubContext;
use crate::deploys::{DeployKind, DeployRecord};
use crate::git::{Git, GitError};
use crate::refs::Wanted;

/// Commits listed in each direction.
pub const MAX_COMMITS: usize = 50;
/// Changed paths listed.
pub const MAX_LOCAL_CHANGES: usize = 20;
/// Time kept back from the call's deadline to record the outcome and restart services.
const RECORD_MARGIN: Duration = Duration::from_millis(1500);

fn deploy_tool() -> &'static str {
    AdapterKind::DeployRef.decl().tool_id
}

fn rollback_tool() -> &'static str {
    AdapterKind::RollbackLastTestDeploy.decl().tool_id
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::InvalidArguments, message)
}

fn refused(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::EnvironmentForbidden, message)
}

fn config(ctx: &HubContext) -> Result<&DeployConfig, ToolError> {
    ctx.config.deploy.as_ref().ok_or_else(|| {
        refused("this hub has no deploy target: its configuration has no [deploy] section")
    })
}

/// The ref from `{"ref": "..."}` (nothing else is accepted).
fn ref_argument(arguments: &Value) -> Result<&str, ToolError> {
    let Value::Object(map) = arguments else {
        return Err(invalid("arguments must be an object {\"ref\": \"<ref>\"}"));
    };
    if let Some(k) = map.keys().find(|k| *k != "ref") {
        return Err(invalid(format!(
            "unknown argument `{k}`; this tool takes only `ref`"
        )));
    }
    map.get("ref")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("`ref` (a string) is required"))
}

fn no_arguments(arguments: &Value) -> Result<(), ToolError> {
    match arguments {
        Value::Null => Ok(()),
        Value::Object(m) if m.is_empty() => Ok(()),
        Value::Object(m) => Err(invalid(format!(
            "unknown argument `{}`; this tool takes no arguments besides root's control fields",
            m.keys().next().map_or("", String::as_str)
        ))),
        _ => Err(invalid("arguments must be an object")),
    }
}

/// A commit and the ref it came from, if known.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Position {
    ref_name: Option<String>,
    resolved_ref: Option<String>,
    commit: String,
}

impl Position {
    fn brief(&self) -> Value {
        json!({"ref": self.ref_name, "commit": self.commit})
    }

    fn full(&self) -> Value {
        json!({"ref": self.ref_name, "resolved_ref": self.resolved_ref, "commit": self.commit})
    }
}

/// What is at the worktree path.
enum Worktree {
    /// Nothing (or an empty directory): the first deploy creates it.
    Missing,
    /// A worktree of the mirror at `head`.
    Ours { head: String },
}

/// The git side of one operation.
struct Ops<'a> {
    ctx: &'a HubContext,
    deploy: &'a DeployConfig,
    git: Git,
    mirror: PathBuf,
    worktree: PathBuf,
}

impl<'a> Ops<'a> {
    fn new(ctx: &'a HubContext, deploy: &'a DeployConfig, input: &CallInput) -> Ops<'a> {
        let budget = tokio::time::Instant::now() + Duration::from_millis(deploy.timeout_ms);
        let call = input
            .deadline
            .checked_sub(RECORD_MARGIN)
            .unwrap_or(input.deadline);
        Ops {
            ctx,
            deploy,
            git: Git {
                program: deploy.git.clone(),
                deadline: budget.min(call),
            },
            mirror: ctx.config.deploy_mirror(),
            worktree: ctx
                .config
                .deploy_worktree()
                .unwrap_or_else(|| ctx.config.state_dir.join("worktree")),
        }
    }

    fn redact(&self, text: &str) -> String {
        crate::redact::redact_with(text, &self.ctx.redaction).0
    }

    /// A git failure as the caller sees it (git's output redacted).
    fn failed(&self, what: &str, e: GitError) -> ToolError {
        match e {
            GitError::Timeout => ToolError::new(
                ErrorCode::Timeout,
                format!(
                    "{what}: git did not finish within deploy.timeout_ms ({} ms) or the call's deadline",
                    self.deploy.timeout_ms
                ),
            ),
            GitError::Spawn(e) => ToolError::new(
                ErrorCode::AdapterFailed,
                format!("{what}: cannot run `{}`: {e}", self.deploy.git),
            ),
            e @ GitError::Failed { .. } => ToolError::new(
                ErrorCode::AdapterFailed,
                format!("{what}: {}", self.redact(&e.to_string())),
            ),
        }
    }

    fn mirror_arg(&self) -> String {
        format!("--git-dir={}", self.mirror.display())
    }

    async fn in_mirror(&self, what: &str, args: &[&str]) -> Result<String, ToolError> {
        let mut all = vec![self.mirror_arg()];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        self.git
            .run(None, &all)
            .await
            .map_err(|e| self.failed(what, e))
    }

    /// Creates the mirror if needed.
    async fn ensure_mirror(&self) -> Result<(), ToolError> {
        if self.mirror.join("HEAD").exists() {
            return Ok(());
        }
        let path = self.mirror.display().to_string();
        self.git
            .run(None, &["init", "--bare", "--quiet", "--", &path])
            .await
            .map_err(|e| self.failed("creating the deploy mirror", e))?;
        Ok(())
    }

    /// Fetches branches and tags of the repository into the mirror.
    async fn fetch(&self) -> Result<(), ToolError> {
        self.ensure_mirror().await?;
        self.in_mirror(
            "fetching the repository",
            &[
                "fetch",
                "--quiet",
                "--prune",
                "--force",
                "--no-write-fetch-head",
                "--end-of-options",
                self.deploy.repository.as_str(),
                "+refs/heads/*:refs/heads/*",
                "+refs/tags/*:refs/tags/*",
            ],
        )
        .await
        .map(drop)
    }

    /// The commit `rev` names in the mirror, if it names one.
    async fn commit_of(&self, rev: &str) -> Result<Option<String>, ToolError> {
        let spec = format!("{rev}^{{commit}}");
        let args = [
            self.mirror_arg(),
            "rev-parse".into(),
            "--verify".into(),
            "--quiet".into(),
            "--end-of-options".into(),
            spec,
        ];
        match self.git.run_status(None, &args).await {
            Ok((Some(0), out, _)) => Ok(Some(out.trim().to_owned())),
            Ok((Some(1), _, _)) => Ok(None),
            Ok((code, _, stderr)) => {
                Err(self.failed("resolving a ref", GitError::Failed { code, stderr }))
            }
            Err(e) => Err(self.failed("resolving a ref", e)),
        }
    }

    /// Resolves a validated request: a tag, else a branch; or a commit that must exist.
    async fn resolve(&self, wanted: &Wanted) -> Result<Position, ToolError> {
        match wanted {
            Wanted::Name(name) => {
                for prefix in ["refs/tags/", "refs/heads/"] {
                    let full = format!("{prefix}{name}");
                    if let Some(commit) = self.commit_of(&full).await? {
                        return Ok(Position {
                            ref_name: Some(name.clone()),
                            resolved_ref: Some(full),
                            commit,
                        });
                    }
                }
                Err(invalid(format!(
                    "ref `{name}` is allowed, but the repository has no tag or branch of that name"
                )))
            }
            Wanted::Commit(sha) => match self.commit_of(sha).await? {
                Some(commit) => Ok(Position {
                    ref_name: Some(sha.clone()),
                    resolved_ref: None,
                    commit,
                }),
                None => Err(invalid(format!(
                    "commit `{sha}` is not in the repository's branches or tags"
                ))),
            },
        }
    }

    /// What is at the worktree path; a directory that is not a worktree of the mirror is
    /// refused (it is never overwritten).
    async fn worktree(&self) -> Result<Worktree, ToolError> {
        let empty = match std::fs::read_dir(&self.worktree) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => {
                return Err(ToolError::new(
                    ErrorCode::Internal,
                    format!("cannot read the worktree {}: {e}", self.worktree.display()),
                ));
            }
            Ok(mut entries) => entries.next().is_none(),
        };
        if empty {
            return Ok(Worktree::Missing);
        }
        let foreign = || {
            refused(format!(
                "{} exists and is not a worktree of this hub's deploy mirror; move it away or configure another deploy.worktree",
                self.worktree.display()
            ))
        };
        if !self.worktree.join(".git").exists() {
            return Err(foreign());
        }
        let out = self
            .git
            .run(
                Some(&self.worktree),
                &[
                    "rev-parse",
                    "--path-format=absolute",
                    "--git-common-dir",
                    "--show-toplevel",
                ],
            )
            .await
            .map_err(|e| self.failed("reading the worktree", e))?;
        let mut lines = out.lines();
        let same = |a: Option<&str>, b: &Path| {
            a.and_then(|a| std::fs::canonicalize(a).ok())
                .zip(std::fs::canonicalize(b).ok())
                .is_some_and(|(a, b)| a == b)
        };
        if !same(lines.next(), &self.mirror) || !same(lines.next(), &self.worktree) {
            return Err(foreign());
        }
        let head = self
            .git
            .run(Some(&self.worktree), &["rev-parse", "--verify", "HEAD"])
            .await
            .map_err(|e| self.failed("reading the worktree's HEAD", e))?;
        Ok(Worktree::Ours {
            head: head.trim().to_owned(),
        })
    }

    /// Tracked files with local changes in the worktree (at most [`MAX_LOCAL_CHANGES`]).
    async fn local_changes(&self) -> Result<Vec<String>, ToolError> {
        let out = self
            .git
            .run(
                Some(&self.worktree),
                &["status", "--porcelain=v1", "--untracked-files=no"],
            )
            .await
            .map_err(|e| self.failed("checking the worktree for local changes", e))?;
        Ok(out
            .lines()
            .filter(|l| l.len() > 3)
            .take(MAX_LOCAL_CHANGES)
            .map(|l| l[3..].to_owned())
            .collect())
    }

    /// Commits of `range` (git log arguments), newest first, at most [`MAX_COMMITS`], and
    /// whether there were more.
    async fn commits(&self, range: &[&str]) -> Result<(Vec<Value>, bool), ToolError> {
        let max = format!("--max-count={}", MAX_COMMITS + 1);
        let mut args = vec![
            "log",
            "--no-decorate",
            "--no-color",
            "--format=%H%x1f%s%x1f%an%x1e",
            &max,
        ];
        args.extend_from_slice(range);
        args.push("--");
        let out = self.in_mirror("listing commits", &args).await?;
        let mut commits: Vec<Value> = out
            .split('\x1e')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| {
                let mut f = r.split('\x1f');
                let sha = f.next().unwrap_or_default();
                let subject = self.redact(f.next().unwrap_or_default());
                let author = self.redact(f.next().unwrap_or_default());
                json!({"sha": sha, "subject": subject, "author": author})
            })
            .collect();
        let truncated = commits.len() > MAX_COMMITS;
        commits.truncate(MAX_COMMITS);
        Ok((commits, truncated))
    }

    /// Whether `a` is an ancestor of (or equal to) `b`.
    async fn is_ancestor(&self, a: &str, b: &str) -> Result<bool, ToolError> {
        let args = [
            self.mirror_arg(),
            "merge-base".into(),
            "--is-ancestor".into(),
            a.to_owned(),
            b.to_owned(),
        ];
        match self.git.run_status(None, &args).await {
            Ok((Some(0), _, _)) => Ok(true),
            Ok((Some(1), _, _)) => Ok(false),
            Ok((code, _, stderr)) => {
                Err(self.failed("comparing commits", GitError::Failed { code, stderr }))
            }
            Err(e) => Err(self.failed("comparing commits", e)),
        }
    }

    /// Where the worktree is now: its HEAD, with the ref of the newest history entry that
    /// checked out that commit (when that entry is the newest).
    async fn current(&self, state: &Worktree) -> Result<Option<Position>, ToolError> {
        let Worktree::Ours { head } = state else {
            return Ok(None);
        };
        let last = self.ctx.deploys.last()?;
        let (ref_name, resolved_ref) = match last {
            Some(e) if &e.commit == head => (e.ref_name, e.resolved_ref),
            _ => (None, None),
        };
        Ok(Some(Position {
            ref_name,
            resolved_ref,
            commit: head.clone(),
        }))
    }

    /// The expected effect of moving from `current` to `target`.
    async fn effect(
        &self,
        action: &str,
        state: &Worktree,
        current: Option<&Position>,
        target: &Position,
    ) -> Result<serde_json::Map<String, Value>, ToolError> {
        let (arrive, leave, fast_forward) = match current {
            None => (
                self.commits(&[target.commit.as_str()]).await?,
                (vec![], false),
                true,
            ),
            Some(cur) => {
                let arrive = format!("{}..{}", cur.commit, target.commit);
                let leave = format!("{}..{}", target.commit, cur.commit);
                (
                    self.commits(&[arrive.as_str()]).await?,
                    self.commits(&[leave.as_str()]).await?,
                    self.is_ancestor(&cur.commit, &target.commit).await?,
                )
            }
        };
        let local_changes = match state {
            Worktree::Ours { .. } => self.local_changes().await?,
            Worktree::Missing => Vec::new(),
        };
        let mut effect = serde_json::Map::new();
        effect.insert("action".into(), json!(action));
        effect.insert(
            "worktree".into(),
            json!(self.worktree.display().to_string()),
        );
        effect.insert(
            "current".into(),
            current.map_or(Value::Null, Position::brief),
        );
        effect.insert("target".into(), target.full());
        effect.insert(
            "up_to_date".into(),
            json!(current.is_some_and(|c| c.commit == target.commit)),
        );
        effect.insert("fast_forward".into(), json!(fast_forward));
        effect.insert("commits".into(), json!(arrive.0));
        effect.insert("commits_truncated".into(), json!(arrive.1));
        effect.insert("commits_removed".into(), json!(leave.0));
        effect.insert("commits_removed_truncated".into(), json!(leave.1));
        effect.insert("local_changes".into(), json!(local_changes));
        effect.insert(
            "restart_services".into(),
            json!(self.deploy.restart_services),
        );
        Ok(effect)
    }

    /// Checks out `commit` in the worktree (creating it on the first deploy).
    async fn checkout(&self, state: &Worktree, commit: &str) -> Result<(), ToolError> {
        match state {
            Worktree::Missing => {
                // A worktree whose directory was removed is still registered: forget it.
                self.in_mirror("pruning stale worktrees", &["worktree", "prune"])
                    .await?;
                if let Some(parent) = self.worktree.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| {
                        ToolError::new(
                            ErrorCode::Internal,
                            format!("cannot create {}: {e}", parent.display()),
                        )
                    })?;
                }
                let path = self.worktree.display().to_string();
                self.in_mirror(
                    "creating the worktree",
                    &[
                        "worktree", "add", "--detach", "--quiet", "--", &path, commit,
                    ],
                )
                .await
                .map(drop)
            }
            Worktree::Ours { .. } => self
                .git
                .run(
                    Some(&self.worktree),
                    &["checkout", "--quiet", "--detach", commit, "--"],
                )
                .await
                .map(drop)
                .map_err(|e| self.failed("checking out", e)),
        }
    }
}

/// `EnvironmentForbidden` naming the locally changed files.
/// `conflict` when the effect the caller confirmed (the preview's `current` and `target`
/// commits) is not the one this execute would have: nothing runs, the caller previews again.
fn check_confirmed(
    confirmed: Option<&Value>,
    current: Option<&Position>,
    target: &Position,
) -> Result<(), ToolError> {
    let Some(confirmed) = confirmed else {
        return Ok(());
    };
    let was_target = confirmed.pointer("/target/commit").and_then(Value::as_str);
    let was_current = confirmed.pointer("/current/commit").and_then(Value::as_str);
    let now_current = current.map(|c| c.commit.as_str());
    let moved = |what: &str, was: Option<&str>, now: Option<&str>| {
        ToolError::new(
            ErrorCode::Conflict,
            format!(
                "{what} moved since the preview (confirmed {}, now {}); nothing was changed: preview again",
                was.unwrap_or("none"),
                now.unwrap_or("none"),
            ),
        )
        .with_details(json!({"confirmed": was, "now": now}))
    };
    if was_target.is_some_and(|c| c != target.commit) {
        let what = match &target.ref_name {
            Some(r) => format!("`{r}`"),
            None => "the target commit".to_owned(),
        };
        return Err(moved(&what, was_target, Some(&target.commit)));
    }
    if confirmed.get("current").is_some() && was_current != now_current {
        return Err(moved("the deployed worktree", was_current, now_current));
    }
    Ok(())
}

fn dirty(worktree: &Path, changes: &[String]) -> ToolError {
    refused(format!(
        "the worktree {} has local changes to tracked files ({}); nothing was changed",
        worktree.display(),
        changes.join(", ")
    ))
    .with_details(json!({"local_changes": changes}))
}

/// The recorded result for a repeated idempotency key of `tool`.
fn replayed(
    record: DeployRecord,
    tool: &str,
    key: &str,
    ref_name: Option<&str>,
) -> Result<Value, ToolError> {
    if let Some(wanted) = ref_name
        && record.ref_name.as_deref() != Some(wanted)
    {
        return Err(invalid(format!(
            "idempotency key `{key}` was already used to deploy `{}`, not `{wanted}`",
            record.ref_name.as_deref().unwrap_or("a commit")
        )));
    }
    tracing::info!(tool, key, deploy_id = %record.deploy_id, "deploy replayed by idempotency key");
    Ok(record.result)
}

pub async fn deploy_ref(ctx: &HubContext, input: CallInput) -> Result<Value, ToolError> {
    let deploy = config(ctx)?;
    let requested = ref_argument(&input.arguments)?;
    let wanted =
        crate::refs::check_requested(requested, &deploy.allowed_refs, deploy.allow_commits)
            .map_err(invalid)?;
    let _op = ctx.deploys.exclusive(input.deadline).await?;
    let tool = deploy_tool();
    if !input.dry_run
        && let Some(key) = &input.idempotency_key
        && let Some(first) = ctx.deploys.replay(tool, key)?
    {
        return replayed(first, tool, key, Some(requested));
    }
    let ops = Ops::new(ctx, deploy, &input);
    ops.fetch().await?;
    let target = ops.resolve(&wanted).await?;
    let state = ops.worktree().await?;
    let current = ops.current(&state).await?;
    let mut effect = ops
        .effect(tool_action(tool), &state, current.as_ref(), &target)
        .await?;
    if input.dry_run {
        effect.insert("repository".into(), json!(ops.redact(&deploy.repository)));
        return Ok(Value::Object(effect));
    }
    check_confirmed(input.confirmed_effect.as_ref(), current.as_ref(), &target)?;
    let changes: Vec<String> =
        serde_json::from_value(effect["local_changes"].clone()).unwrap_or_default();
    if !changes.is_empty() {
        return Err(dirty(&ops.worktree, &changes));
    }
    finish(
        &ops,
        &input,
        DeployKind::Deploy,
        tool,
        &state,
        current,
        target,
        None,
    )
    .await
}

pub async fn rollback(ctx: &HubContext, input: CallInput) -> Result<Value, ToolError> {
    let deploy = config(ctx)?;
    no_arguments(&input.arguments)?;
    let _op = ctx.deploys.exclusive(input.deadline).await?;
    let tool = rollback_tool();
    if !input.dry_run
        && let Some(key) = &input.idempotency_key
        && let Some(first) = ctx.deploys.replay(tool, key)?
    {
        return replayed(first, tool, key, None);
    }
    let Some(point) = ctx.deploys.rollback_point()? else {
        return Err(ToolError::new(
            ErrorCode::NotFound,
            "nothing to roll back: no deploy is recorded on this hub",
        ));
    };
    let Some(previous) = point.previous_commit.clone() else {
        return Err(ToolError::new(
            ErrorCode::NotFound,
            format!(
                "nothing to roll back: the last deploy ({} at {}, {}) was the first on this worktree, so there is no previous commit",
                point.ref_name.as_deref().unwrap_or("a commit"),
                point.commit,
                point.at
            ),
        ));
    };
    let ops = Ops::new(ctx, deploy, &input);
    ops.ensure_mirror().await?;
    if ops.commit_of(&previous).await?.is_none() {
        ops.fetch().await?;
    }
    let Some(commit) = ops.commit_of(&previous).await? else {
        return Err(ToolError::new(
            ErrorCode::NotFound,
            format!("the commit to roll back to ({previous}) is no longer in the repository"),
        ));
    };
    let target = Position {
        ref_name: point.previous_ref.clone(),
        resolved_ref: None,
        commit,
    };
    let undoes = json!({
        "deploy_id": point.deploy_id,
        "ref": point.ref_name,
        "commit": point.commit,
        "deployed_at": point.at,
    });
    let state = ops.worktree().await?;
    let current = ops.current(&state).await?;
    let mut effect = ops
        .effect(tool_action(tool), &state, current.as_ref(), &target)
        .await?;
    if input.dry_run {
        effect.insert("undoes".into(), undoes);
        return Ok(Value::Object(effect));
    }
    check_confirmed(input.confirmed_effect.as_ref(), current.as_ref(), &target)?;
    let changes: Vec<String> =
        serde_json::from_value(effect["local_changes"].clone()).unwrap_or_default();
    if !changes.is_empty() {
        return Err(dirty(&ops.worktree, &changes));
    }
    finish(
        &ops,
        &input,
        DeployKind::Rollback,
        tool,
        &state,
        current,
        target,
        Some(undoes),
    )
    .await
}

/// `action` of a tool's effect and result.
fn tool_action(tool: &str) -> &'static str {
    if tool == rollback_tool() {
        "rollback_last_test_deploy"
    } else {
        "deploy_ref"
    }
}

/// Checks out, records, restarts the services, records their outcome; the result.
#[allow(clippy::too_many_arguments)]
async fn finish(
    ops: &Ops<'_>,
    input: &CallInput,
    kind: DeployKind,
    tool: &str,
    state: &Worktree,
    current: Option<Position>,
    target: Position,
    undoes: Option<Value>,
) -> Result<Value, ToolError> {
    ops.checkout(state, &target.commit).await?;
    let deploy_id = uuid::Uuid::now_v7().to_string();
    let at = mcp_shared::time::format(mcp_shared::time::now());
    let mut result = json!({
        "action": tool_action(tool),
        "deploy_id": deploy_id,
        "previous": current.as_ref().map_or(Value::Null, Position::brief),
        "deployed": target.full(),
        "deployed_at": at,
        "worktree": ops.worktree.display().to_string(),
        "services": [],
    });
    if let Some(undoes) = undoes {
        result["undid"] = undoes;
    }
    let record = DeployRecord {
        deploy_id: deploy_id.clone(),
        kind,
        tool: tool.to_owned(),
        ref_name: target.ref_name.clone(),
        resolved_ref: target.resolved_ref.clone(),
        previous_commit: current.as_ref().map(|c| c.commit.clone()),
        previous_ref: current.as_ref().and_then(|c| c.ref_name.clone()),
        commit: target.commit.clone(),
        at,
        idempotency_key: input.idempotency_key.clone(),
        result: result.clone(),
    };
    ops.ctx.deploys.record(&record).map_err(|e| {
        ToolError::new(
            ErrorCode::Internal,
            format!(
                "{} is checked out in {} but the deploy was not recorded: {}",
                target.commit,
                ops.worktree.display(),
                e.message
            ),
        )
    })?;
    tracing::info!(
        tool,
        %deploy_id,
        commit = %target.commit,
        r#ref = target.ref_name.as_deref().unwrap_or(""),
        previous = current.as_ref().map_or("", |c| c.commit.as_str()),
        "deployed"
    );
    // Restarts may use the margin kept back from git, not the call's last moment.
    let restart_by = input
        .deadline
        .checked_sub(Duration::from_millis(250))
        .unwrap_or(input.deadline);
    result["services"] =
        Value::Array(restart_services(ops.ctx, &ops.deploy.restart_services, restart_by).await);
    ops.ctx.deploys.set_result(&deploy_id, &result).map_err(|e| {
        ToolError::new(
            ErrorCode::Internal,
            format!(
                "deploy {deploy_id} is recorded but the outcome of its service restarts is not: {}",
                e.message
            ),
        )
    })?;
    Ok(result)
}

/// Restarts `names` in order through the service supervisor; one outcome each (a failure is
/// reported, not fatal: the new commit is checked out and recorded either way).
async fn restart_services(
    ctx: &HubContext,
    names: &[String],
    deadline: tokio::time::Instant,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let outcome = ctx
            .services
            .restart(name, crate::services::Mode::Normal, deadline)
            .await;
        out.push(match outcome {
            Ok(r) => {
                tracing::info!(service = %name, pid = r.new_pid, "service restarted after a deploy");
                json!({"name": name, "restarted": true, "pid": r.new_pid, "error": null})
            }
            Err(e) => {
                tracing::warn!(service = %name, error = %e, "service not restarted after a deploy");
                json!({"name": name, "restarted": false, "pid": null, "error": e.to_string()})
            }
        });
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::HubConfig;

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
        input.dry_run = dry_run;
        input.idempotency_key = key.map(str::to_owned);
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
        input.idempotency_key = Some(key.to_owned());
        input.confirmed_effect = Some(confirmed.clone());
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
        assert_eq!(ctx.deploys.entries().expect("history").len(), 2);

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
        let history = ctx.deploys.entries().expect("history");
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
        assert!(ctx.deploys.entries().expect("history").is_empty());
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
        ctx.services.start().await.expect("services start");
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
                ctx.services.get("app").expect("app").pid.map(u64::from),
                Some(pid)
            );
            pids.push(pid);
            // The recorded result carries the restarts (a replay shows them).
            let last = ctx.deploys.last().expect("history").expect("entry");
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
        ctx.services.stop().await;
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
}
