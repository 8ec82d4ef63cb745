//! Fleet runs for agents: the fleet tools `root.run_fleet_read`, `root.run_fleet_write` and
//! `root.get_fleet_run` (root adapters `root.fleet.{read,write,get}`, reached from the call
//! path through `call::executors::fleet::FleetTools`), callable only under a fleet lease (one bound to a selector,
//! `mcp_shared::lease::FLEET_TARGET_PREFIX`). One tool the lease's capability profile grants
//! runs on every target of the selector as a fleet run (`crate::fleet`) that the lease
//! started (`created_by` `lease:<session id>`). Each target's call goes under a lease the
//! fleet lease hands on for it (`fleet::authority`), with the same profile, so a fleet run
//! reaches only what a single-target lease of that profile could; revoking the fleet lease
//! ends them and cancels its runs.
//!
//! A read runs at once. A write goes through the write flow every write tool does
//! (`call::writes`): its preview is the fleet preview (the run stored `previewed`, each
//! target's dry run), whose run id rides in the expected effect root keeps with its own
//! confirmation token; the client's confirmation (the token, an elicitation or a
//! multi-round-trip answer) redeems that token, and the execute starts the previewed run,
//! once per idempotency key. Either call answers the run's report when it ends, reporting
//! progress as targets finish (as a task, for a client that takes one); a cancelled call
//! cancels its run: targets not started are `cancelled`, the ones running finish.

use std::sync::Arc;
use std::time::Duration;

use mcp_shared::contract::RoutingClass;
use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::CallBody;
use serde::Deserialize;
use serde_json::{Value, json};

use super::plan::Plan;
use super::report::{self, RunReport};
use super::{RunState, Status, authority, execute, preview};
use crate::app::App;
use crate::call::context::CallContext;
use crate::call::executors::fleet::FleetTools;
use crate::catalog::ContractEntry;
use crate::fleet::FleetRunRequest;
use crate::hubs::router::Progress;
use crate::hubs::selector::Selector;

/// How often at most a call following its run reads the run's progress (it reads it when the
/// run changes here).
const FOLLOW_EVERY: Duration = Duration::from_millis(250);
/// How often a follower reads a run no change of this replica's told it about (another
/// replica drives it).
const FOLLOW_ELSEWHERE: Duration = Duration::from_secs(2);
/// Most outcome groups a write's preview shows in its expected effect.
const EFFECT_GROUPS: usize = 10;
/// Most excluded targets a write's preview names in its expected effect.
const EFFECT_EXCLUDED: usize = 20;

/// The fleet tools' adapters, for the call path, on the app that holds them.
pub(crate) struct AgentTools(pub(crate) std::sync::Weak<App>);

impl FleetTools for AgentTools {
    fn run<'a>(
        &'a self,
        ctx: &'a CallContext,
        name: &'a str,
        input: &'a CallBody,
    ) -> futures::future::BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let Some(app) = self.0.upgrade() else {
                return Err(ToolError::new(ErrorCode::Internal, "root is stopping"));
            };
            let app = &*app;
            match name {
                "root.fleet.read" => read(app, ctx, input).await,
                "root.fleet.write" => write(app, ctx, input).await,
                "root.fleet.get" => get(app, ctx, input).await,
                other => Err(ToolError::new(
                    ErrorCode::Internal,
                    format!("no fleet adapter `{other}`"),
                )),
            }
        })
    }
}

/// A fleet tool's domain arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Ask {
    tool: String,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    plan: Option<Plan>,
}

fn invalid(why: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::InvalidArguments, why)
}

fn internal(e: crate::store::Error) -> ToolError {
    tracing::error!(error = %e, "store failure in a fleet tool");
    ToolError::new(ErrorCode::Internal, "fleet runs are unavailable right now")
}

/// The report of run `run_id`.
async fn loaded(app: &App, run_id: &str) -> Result<RunReport, ToolError> {
    report::load(app, run_id)
        .await
        .map_err(internal)?
        .ok_or_else(|| ToolError::new(ErrorCode::NotFound, format!("no fleet run `{run_id}`")))
}

fn read_ask(input: &CallBody) -> Result<Ask, ToolError> {
    serde_json::from_value(input.arguments.clone()).map_err(|e| invalid(e.to_string()))
}

/// The fleet lease's selector and its `created_by` for runs.
fn fleet_of(ctx: &CallContext) -> Result<(Selector, String), ToolError> {
    let lease = ctx.lease.lease();
    let text = lease.fleet_selector().ok_or_else(|| {
        ToolError::new(
            ErrorCode::CapabilityNotGranted,
            "a fleet tool needs a fleet lease",
        )
    })?;
    let selector = Selector::parse(text).map_err(|e| invalid(format!("selector: {e}")))?;
    Ok((selector, authority::lease_caller(&lease.session_id)))
}

/// The contract of the tool a fleet tool runs: one the lease's profile grants, of the
/// routing class asked for (a read for the read tool, a write for the write tool).
fn inner(
    app: &App,
    ctx: &CallContext,
    tool_id: &str,
    routing: RoutingClass,
) -> Result<Arc<ContractEntry>, ToolError> {
    let entry =
        app.catalog.contracts.get(tool_id).cloned().ok_or_else(|| {
            ToolError::new(ErrorCode::UnknownTool, format!("no tool `{tool_id}`"))
        })?;
    let c = &entry.contract;
    if c.fleet {
        return Err(invalid(format!("`{tool_id}` is a fleet tool itself")));
    }
    if c.routing != routing {
        return Err(invalid(match routing {
            RoutingClass::OperationalRead => format!(
                "`{tool_id}` is not an operational read: a fleet reads with root.run_fleet_read (routed reads) and writes with root.run_fleet_write"
            ),
            _ => format!(
                "`{tool_id}` is not an operational write: run reads with root.run_fleet_read"
            ),
        }));
    }
    let profile = &ctx.lease.lease().capability_profile;
    let granted = app
        .catalog
        .profiles
        .get(profile)
        .is_some_and(|p| p.capabilities.contains(&c.required_capability));
    if !granted {
        return Err(ToolError::new(
            ErrorCode::CapabilityNotGranted,
            format!(
                "profile `{profile}` does not grant `{}`, which `{tool_id}` requires",
                c.required_capability
            ),
        ));
    }
    Ok(entry)
}

/// `root.fleet.read`: starts a read run and follows it to its end.
async fn read(app: &App, ctx: &CallContext, input: &CallBody) -> Result<Value, ToolError> {
    let ask = read_ask(input)?;
    let (selector, created_by) = fleet_of(ctx)?;
    inner(app, ctx, &ask.tool, RoutingClass::OperationalRead)?;
    let run = crate::fleet::read::start(
        app,
        crate::fleet::read::ReadRun {
            created_by,
            selector: &selector,
            tool_id: ask.tool,
            arguments: ask.arguments,
            plan: ask.plan,
            trace_id: ctx.trace_id.clone(),
        },
    )
    .await?;
    drive(app, &run.run_id)?;
    follow(app, ctx, &run.run_id).await
}

/// `root.fleet.write`: a preview (the write flow's dry run) or the execute of a previewed
/// run (the write flow redeemed the client's confirmation).
async fn write(app: &App, ctx: &CallContext, input: &CallBody) -> Result<Value, ToolError> {
    let (_, created_by) = fleet_of(ctx)?;
    if input.dry_run {
        return preview_run(app, ctx, input, created_by).await;
    }
    let run_id = input
        .confirmed_effect
        .as_ref()
        .and_then(|e| e["run_id"].as_str())
        .ok_or_else(|| {
            ToolError::new(
                ErrorCode::ConfirmationRequired,
                "preview the fleet write first and execute with its confirmation_token",
            )
        })?;
    let key = input.idempotency_key.as_deref().ok_or_else(|| {
        ToolError::new(
            ErrorCode::InvalidArguments,
            "a fleet write executes with an idempotency_key",
        )
    })?;
    // The same execute sent again (its idempotency claim taken over after a crash) follows
    // the run it started; anything else starts the previewed run, once.
    let started = app.store.fleet_run(run_id).await.map_err(internal)?;
    let run = match started {
        Some(r)
            if r.state != RunState::Previewed
                && r.created_by == created_by
                && r.write_key.as_deref() == Some(key) =>
        {
            r
        }
        _ => preview::confirm_previewed(app, &created_by, run_id, key).await?,
    };
    drive(app, &run.run_id)?;
    follow(app, ctx, &run.run_id).await
}

/// The fleet preview, as the expected effect the write flow keeps with its token.
async fn preview_run(
    app: &App,
    ctx: &CallContext,
    input: &CallBody,
    created_by: String,
) -> Result<Value, ToolError> {
    let ask = read_ask(input)?;
    let (selector, _) = fleet_of(ctx)?;
    inner(app, ctx, &ask.tool, RoutingClass::OperationalWrite)?;
    preview::write_contract(app, &ask.tool)?;
    let req = FleetRunRequest {
        selector: selector.as_str().to_owned(),
        tool_id: ask.tool,
        arguments: ask.arguments,
        plan: ask.plan,
        capability_profile: Some(ctx.lease.lease().capability_profile.clone()),
        confirmation_token: None,
    };
    let previewed = preview::preview(app, created_by, req, ctx.trace_id.clone()).await?;
    let r = loaded(app, &previewed.run.run_id).await?;
    Ok(effect(&r))
}

/// A previewed run as an expected effect: what the person confirms, and the run the execute
/// starts.
fn effect(r: &RunReport) -> Value {
    let taking_part = r.counts.get(Status::Pending.as_str()).copied().unwrap_or(0);
    let excluded: Vec<Value> = r
        .targets
        .iter()
        .filter(|t| t.status == Status::Excluded)
        .take(EFFECT_EXCLUDED)
        .map(|t| json!({ "target_id": t.target_id, "code": t.code }))
        .collect();
    let plan = &r.plan;
    let mut description = format!(
        "Run `{}` with {} on {taking_part} of the {} targets of `{}` (set {}); {} cannot take part.\nPlan: canary {}, then {} at once; no new target once more than {} failed.",
        r.tool_id,
        r.arguments,
        r.total,
        r.selector,
        &r.set_hash[..12.min(r.set_hash.len())],
        r.total - taking_part,
        plan["canary"],
        plan["max_concurrency"],
        plan["max_errors"],
    );
    if let Some(g) = r.groups.iter().find(|g| g.status == Status::Pending) {
        let mut sample = g.sample.clone();
        if sample.len() > 600 {
            let mut cut = 600;
            while !sample.is_char_boundary(cut) {
                cut -= 1;
            }
            sample.truncate(cut);
            sample.push('…');
        }
        description.push_str(&format!("\nExpected on {} of them: {sample}", g.count));
    }
    json!({
        "description": description,
        "run_id": r.run_id,
        "selector": r.selector,
        "set_hash": r.set_hash,
        "tool": r.tool_id,
        "plan": r.plan,
        "total": r.total,
        "taking_part": taking_part,
        "excluded": excluded,
        "groups": r.groups.iter().take(EFFECT_GROUPS).collect::<Vec<_>>(),
        "confirmation_expires_at": r.confirmation_expires_at,
    })
}

/// Has this replica drive the run.
fn drive(app: &App, run_id: &str) -> Result<(), ToolError> {
    let shared = app
        .shared()
        .ok_or_else(|| ToolError::new(ErrorCode::Internal, "root is stopping"))?;
    execute::spawn(shared, run_id.to_owned());
    Ok(())
}

/// Follows run `run_id` to its end (and the end of its targets running then), reporting progress (targets finished of all taking
/// part) as it changes: its report. A cancelled call cancels the run first.
async fn follow(app: &App, ctx: &CallContext, run_id: &str) -> Result<Value, ToolError> {
    let mut shown = None;
    let mut cancelled = false;
    let mut changes = app.fleet.follow(run_id);
    loop {
        let read_at = tokio::time::Instant::now();
        changes.mark_unchanged();
        let r = loaded(app, run_id).await?;
        let open = r.counts.get(Status::Pending.as_str()).copied().unwrap_or(0)
            + r.counts.get(Status::Running.as_str()).copied().unwrap_or(0);
        // Ended, and the targets running then finished (a cancel lets them).
        if ended(&r.state) && open == 0 {
            return Ok(json!(r));
        }
        let taking_part = r.total
            - r.counts
                .get(Status::Excluded.as_str())
                .copied()
                .unwrap_or(0);
        let done = taking_part.saturating_sub(open);
        if let Some(sink) = &ctx.progress
            && shown != Some(done)
        {
            shown = Some(done);
            sink.report(Progress {
                progress: done as f64,
                total: Some(taking_part as f64),
                message: Some(format!("fleet run {run_id}: {}", r.summary)),
            });
        }
        let stop = async {
            match &ctx.cancel {
                Some(c) if !cancelled => c.cancelled().await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stop => {
                cancelled = true;
                cancel(app, run_id).await?;
            }
            // A change here (at most one report read per FOLLOW_EVERY while targets
            // finish); a run another replica drives is read again every FOLLOW_ELSEWHERE.
            Ok(()) = changes.changed() => {
                tokio::time::sleep_until(read_at + FOLLOW_EVERY).await;
            }
            () = tokio::time::sleep(FOLLOW_ELSEWHERE) => {}
        }
    }
}

/// Whether a run shown in state `s` has ended (an expired preview has not: it can still be
/// cancelled).
fn ended(s: &str) -> bool {
    matches!(
        s.parse(),
        Ok(RunState::Completed | RunState::Stopped | RunState::Cancelled)
    )
}

/// Cancels run `run_id` for good: targets not started are `cancelled` at once.
async fn cancel(app: &App, run_id: &str) -> Result<(), ToolError> {
    app.store
        .set_fleet_run_state(
            run_id,
            &[RunState::Running, RunState::Paused],
            RunState::Cancelled,
            None,
        )
        .await
        .map_err(internal)?;
    app.store
        .settle_fleet_targets(run_id, Status::Cancelled, false)
        .await
        .map_err(internal)?;
    app.fleet.wake(run_id);
    Ok(())
}

/// `root.fleet.get`: the report of a run this fleet lease started, or one target's part.
async fn get(app: &App, ctx: &CallContext, input: &CallBody) -> Result<Value, ToolError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Get {
        run_id: String,
        #[serde(default)]
        target_id: Option<String>,
    }
    let ask: Get =
        serde_json::from_value(input.arguments.clone()).map_err(|e| invalid(e.to_string()))?;
    let (_, created_by) = fleet_of(ctx)?;
    let not_found = || {
        ToolError::new(
            ErrorCode::NotFound,
            format!("this fleet lease started no fleet run `{}`", ask.run_id),
        )
    };
    let run = app
        .store
        .fleet_run(&ask.run_id)
        .await
        .map_err(internal)?
        .ok_or_else(not_found)?;
    if run.created_by != created_by {
        return Err(not_found());
    }
    match ask.target_id {
        Some(t) => report::load_target(app, &ask.run_id, &t)
            .await
            .map_err(internal)?
            .ok_or_else(|| {
                ToolError::new(
                    ErrorCode::NotFound,
                    format!("fleet run `{}` has no target `{t}`", ask.run_id),
                )
            }),
        None => Ok(json!(loaded(app, &ask.run_id).await?)),
    }
}
