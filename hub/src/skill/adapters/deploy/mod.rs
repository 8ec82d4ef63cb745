//! `hub.deploy_ref` and `hub.rollback_last_test_deploy`: move the hub's deployed working tree
//! (`[deploy]`) to an allowed ref, or back to the commit before the last deploy, then restart
//! the configured services.
//!
//! Layout on disk: `<state_dir>/deploy-mirror.git` is a bare mirror of `deploy.repository`
//! (created on first use; every deploy preview and execute fetches its branches and tags into
//! it, pruning what is gone); the worktree is a `git worktree` of that mirror, created on the
//! first deploy and always checked out detached at a commit; `<state_dir>/deploys.json` is the
//! history ([`crate::machine::deploys`]).
//!
//! - `dry_run` (root's preview and dry run): validates the ref ([`crate::machine::refs`]), fetches,
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
//! An execute reports its steps as progress (fetch, resolve, check out, each service
//! restart), so a client following it as a task sees where it is.
//!
//! One deploy operation runs at a time on a hub; git runs as argv with `deploy.timeout_ms`
//! (bounded by the call's deadline) and is killed with its process group when it is over.
//! Commit subjects, author names, git's error output and the repository URL are redacted.

use std::path::Path;
use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use serde::Deserialize;
use serde_json::{Value, json};

use super::args::{Arguments, parse};
use crate::config::DeployConfig;
use crate::context::HubContext;
use crate::machine::deploys::{DeployKind, DeployRecord};
use crate::skill::adapters::call::{CallInput, Progress};
use crate::skill::adapters::decl::Builtin;

mod ops;

use ops::{Ops, Position, Worktree};

/// Commits listed in each direction.
pub(crate) const MAX_COMMITS: usize = 50;
/// Changed paths listed.
pub(crate) const MAX_LOCAL_CHANGES: usize = 20;
/// Time kept back from the call's deadline to record the outcome and restart services.
const RECORD_MARGIN: Duration = Duration::from_millis(1500);

fn deploy_tool() -> &'static str {
    Builtin::DeployRef.decl().tool_id
}

fn rollback_tool() -> &'static str {
    Builtin::RollbackLastTestDeploy.decl().tool_id
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

/// The arguments of `hub.deploy_ref`: `{"ref": "<ref>"}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefArgs {
    #[serde(rename = "ref")]
    ref_name: String,
}

impl Arguments for RefArgs {
    fn rule(_field: &str) -> String {
        "`ref` (a string) is required".into()
    }

    fn not_an_object() -> String {
        "arguments must be an object {\"ref\": \"<ref>\"}".into()
    }
}

/// The ref from `{"ref": "..."}` (nothing else is accepted).
fn ref_argument(arguments: &Value) -> Result<String, ToolError> {
    parse::<RefArgs>(arguments).map(|a| a.ref_name)
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

/// The steps of an execute, reported as progress when each starts (a dry run reports none).
struct Steps {
    progress: Progress,
    total: usize,
    started: usize,
}

impl Steps {
    fn new(input: &CallInput, total: usize) -> Steps {
        Steps {
            progress: if input.body.dry_run {
                Progress::default()
            } else {
                input.progress.clone()
            },
            total,
            started: 0,
        }
    }

    /// Step `what` starts.
    fn next(&mut self, what: &str) {
        let done = self.started;
        self.started += 1;
        self.progress.report(
            done as f64,
            Some(self.total as f64),
            format!("step {} of {}: {what}", self.started, self.total),
        );
    }
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

pub(crate) async fn deploy_ref(ctx: &HubContext, input: CallInput) -> Result<Value, ToolError> {
    let deploy = config(ctx)?;
    let requested = ref_argument(&input.body.arguments)?;
    let requested = requested.as_str();
    let wanted = crate::machine::refs::check_requested(
        requested,
        &deploy.allowed_refs,
        deploy.allow_commits,
    )
    .map_err(|e| invalid(e.to_string()))?;
    let _op = ctx.stores.deploys.exclusive(input.deadline).await?;
    let tool = deploy_tool();
    if !input.body.dry_run
        && let Some(key) = &input.body.idempotency_key
        && let Some(first) = ctx.stores.deploys.replay(tool, key)?
    {
        return replayed(first, tool, key, Some(requested));
    }
    let ops = Ops::new(ctx, deploy, &input);
    let mut steps = Steps::new(&input, 3 + deploy.restart_services.len());
    steps.next("fetching the repository");
    ops.fetch().await?;
    steps.next(&format!("resolving `{requested}`"));
    let target = ops.resolve(&wanted).await?;
    let state = ops.worktree().await?;
    let current = ops.current(&state).await?;
    let mut effect = ops
        .effect(tool_action(tool), &state, current.as_ref(), &target)
        .await?;
    if input.body.dry_run {
        effect.insert("repository".into(), json!(ops.redact(&deploy.repository)));
        return Ok(Value::Object(effect));
    }
    check_confirmed(
        input.body.confirmed_effect.as_ref(),
        current.as_ref(),
        &target,
    )?;
    let changes: Vec<String> =
        serde_json::from_value(effect["local_changes"].clone()).unwrap_or_default();
    if !changes.is_empty() {
        return Err(dirty(&ops.worktree, &changes));
    }
    finish(
        &ops,
        &input,
        &mut steps,
        DeployKind::Deploy,
        tool,
        &state,
        current,
        target,
        None,
    )
    .await
}

pub(crate) async fn rollback(ctx: &HubContext, input: CallInput) -> Result<Value, ToolError> {
    let deploy = config(ctx)?;
    no_arguments(&input.body.arguments)?;
    let _op = ctx.stores.deploys.exclusive(input.deadline).await?;
    let tool = rollback_tool();
    if !input.body.dry_run
        && let Some(key) = &input.body.idempotency_key
        && let Some(first) = ctx.stores.deploys.replay(tool, key)?
    {
        return replayed(first, tool, key, None);
    }
    let Some(point) = ctx.stores.deploys.rollback_point()? else {
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
    let mut steps = Steps::new(&input, 2 + deploy.restart_services.len());
    steps.next("finding the commit before the last deploy");
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
    if input.body.dry_run {
        effect.insert("undoes".into(), undoes);
        return Ok(Value::Object(effect));
    }
    check_confirmed(
        input.body.confirmed_effect.as_ref(),
        current.as_ref(),
        &target,
    )?;
    let changes: Vec<String> =
        serde_json::from_value(effect["local_changes"].clone()).unwrap_or_default();
    if !changes.is_empty() {
        return Err(dirty(&ops.worktree, &changes));
    }
    finish(
        &ops,
        &input,
        &mut steps,
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
    steps: &mut Steps,
    kind: DeployKind,
    tool: &str,
    state: &Worktree,
    current: Option<Position>,
    target: Position,
    undoes: Option<Value>,
) -> Result<Value, ToolError> {
    steps.next(&format!("checking out {}", target.commit));
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
        idempotency_key: input.body.idempotency_key.clone(),
        result: result.clone(),
    };
    ops.ctx.stores.deploys.record(&record).map_err(|e| {
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
    result["services"] = Value::Array(
        restart_services(ops.ctx, &ops.deploy.restart_services, restart_by, steps).await,
    );
    ops.ctx.stores.deploys.set_result(&deploy_id, &result).map_err(|e| {
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
    steps: &mut Steps,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        steps.next(&format!("restarting service `{name}`"));
        let outcome = ctx
            .machine
            .services
            .restart(name, crate::machine::services::Mode::Normal, deadline)
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
pub(crate) mod deploy_tests;
