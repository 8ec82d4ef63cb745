//! Driving a fleet run (by one replica: a replica gone is replaced by another, which takes
//! the run over, `replica::feed`): canaries first (all of them, then an optional pause), then a sliding
//! window of `max_concurrency` targets; once more targets failed than `max_errors` allows, no
//! new one starts and the ones running finish. Pause, resume and cancel are the run's stored
//! state, read before targets start (this replica's commands wake the task at once). Each
//! target's outcome is stored as it finishes, so a restart goes on where the run was; a target
//! left `running` by a crash runs again: a read simply, a write with the same idempotency
//! key (`fleet::authority`), so it is answered by its first execution if it had one. A write's
//! targets that could not take part at the preview (`excluded`) do not run and do not count
//! in the plan's percentages.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::event::Surface;
use mcp_shared::time::{now, unix_ms};
use serde_json::{Value, json};

use super::plan::Plan;
use super::{RunState, Status, authority};
use crate::app::App;
use crate::call::{self, CallContext};
use crate::store::{FleetRunRow, FleetTargetRow};

/// How often a run's task reads its state when nothing wakes it (another replica's command).
const RECHECK: Duration = Duration::from_secs(1);
/// A target answering `busy` is asked again after [`BUSY_WAIT`], at most this many times.
const BUSY_RETRIES: u32 = 300;
const BUSY_WAIT: Duration = Duration::from_secs(1);
/// How long a call admitted before a restart waits for its target's hub to be back before
/// it is sent again (its hub was serving it; reconnecting takes its backoff).
const RESUME_WAIT: Duration = Duration::from_secs(60);
/// A call cut off by its hub's link dropping is sent again until [`RESUME_WAIT`] has passed:
/// the first after [`CUT_OFF_PAUSE`], each next after twice as long, at most
/// [`CUT_OFF_PAUSE_MAX`]. (The replica holding the hub may be restarting: until it serves
/// again, another replica still sees the hub connected there, and its forward fails; a
/// restart under load takes seconds.)
const CUT_OFF_PAUSE: Duration = Duration::from_millis(200);
const CUT_OFF_PAUSE_MAX: Duration = Duration::from_secs(2);

/// Starts driving `run_id` on its own task, unless a task of this replica drives it already
/// (claimed here, before the task runs, so a start and a resume never both drive it).
pub(crate) fn spawn(app: Arc<App>, run_id: String) {
    let Some(wake) = app.fleet.claim(&run_id) else {
        return;
    };
    tokio::spawn(async move {
        drive(&app, &run_id, &wake).await;
        app.fleet.finished(&run_id);
    });
}

/// What the run's stored state allows now.
enum Allowed {
    Start,
    Wait,
    End(RunState),
    /// Another replica drives it now (it took this one for gone): this task leaves it.
    Lost,
}

async fn allowed(app: &App, run: &FleetRunRow) -> Allowed {
    let stored = match app.store.fleet_run(&run.run_id).await {
        Ok(Some(r)) if r.driver != driver(app) => return Allowed::Lost,
        Ok(Some(r)) => r.state,
        Ok(None) => return Allowed::End(RunState::Cancelled),
        Err(e) => {
            tracing::warn!(run_id = %run.run_id, error = %e, "cannot read the fleet run's state; waiting");
            return Allowed::Wait;
        }
    };
    // Authority ends with its source: a run stops with its operator's credential, or its
    // fleet lease.
    if !authority::held(app, run).await {
        tracing::warn!(run_id = %run.run_id, by = %run.created_by, "the fleet run's authority ended; cancelling it");
        let _ = app
            .store
            .set_fleet_run_state(
                &run.run_id,
                &[RunState::Running, RunState::Paused],
                RunState::Cancelled,
                Some(unix_ms(now())),
            )
            .await;
        // As a cancel command does: what had not started never will.
        let _ = app
            .store
            .settle_fleet_targets(&run.run_id, Status::Cancelled, false)
            .await;
        return Allowed::End(RunState::Cancelled);
    }
    match stored {
        RunState::Running => Allowed::Start,
        RunState::Paused => Allowed::Wait,
        RunState::Cancelled => Allowed::End(RunState::Cancelled),
        _ => Allowed::End(RunState::Completed),
    }
}

/// Drives the run until it ends (completed, stopped by its error budget, or cancelled).
async fn drive(app: &Arc<App>, run_id: &str, wake: &tokio::sync::Notify) {
    let (run, rows) = match (
        app.store.fleet_run(run_id).await,
        app.store.fleet_targets(run_id).await,
    ) {
        (Ok(Some(run)), Ok(rows)) => (run, rows),
        (run, rows) => {
            tracing::error!(%run_id, run = ?run.err(), rows = ?rows.err(), "cannot load the fleet run to drive it");
            return;
        }
    };
    let plan: Plan = serde_json::from_str(&run.plan).unwrap_or_default();
    let arguments = match super::arguments::opened(app, &run) {
        Ok(a) => a,
        Err(e) => {
            // Nothing can run without them: the run ends, what had not started never will.
            tracing::error!(%run_id, error = ?e.tool_error(), "cannot open the fleet run's arguments; cancelling it");
            finish(app, &run, RunState::Cancelled).await;
            return;
        }
    };
    // Excluded at the preview: never took part. A target excluded at its turn (an
    // operator's cordon since) took its place in the plan, as it did before a restart.
    let taking_part: Vec<&FleetTargetRow> = rows
        .iter()
        .filter(|t| t.status != Status::Excluded || t.started_at_ms.is_some())
        .collect();
    let (canary, window, budget) = plan.resolve(taking_part.len());
    // Canaries are the first targets taking part (an excluded one keeps its place).
    let canary_ordinal = taking_part.get(canary).map_or(i64::MAX, |t| t.ordinal);
    let mut errors = rows.iter().filter(|t| t.status.is_error()).count();
    // Targets left `running` by a stop were admitted at their turn: they are finished (sent
    // again under their key), whatever changed since; the pending ones take their turns.
    let (resumed, pending): (Vec<FleetTargetRow>, Vec<FleetTargetRow>) = rows
        .into_iter()
        .filter(|t| t.status == Status::Pending || t.status == Status::Running)
        .partition(|t| t.status == Status::Running);
    let mut queue: VecDeque<FleetTargetRow> = pending.into();
    // Canaries already done before a restart: no second pause.
    let mut pause_until = None;
    let mut paused_after_canary = queue.front().is_none_or(|t| t.ordinal >= canary_ordinal);
    // Each target's call is a task of its own: it goes on while this loop awaits the store
    // (polled only from here, a call holding a store connection would wait for this loop,
    // and this loop for a connection: with more targets in flight than the pool holds, every
    // connection was held so, until the pool's timeout, 30 s).
    let mut running = tokio::task::JoinSet::new();
    let run = Arc::new(run);
    let arguments = Arc::new(arguments);
    let mut canaries = std::collections::HashSet::new();
    for t in resumed {
        let is_canary = t.ordinal < canary_ordinal;
        let (app, run, arguments) = (app.clone(), run.clone(), arguments.clone());
        let task = running.spawn(async move { one(&app, &run, &arguments, t, true).await });
        if is_canary {
            canaries.insert(task.id());
        }
    }
    // Once the run must end, it stays so: the calls in flight finish, and the stored state is
    // not read (and the cancel not written) again at every wake-up, which each such write
    // caused on a zone (a loop of store writes, ms apart, while a call in flight finished).
    let mut ending = None;
    let end = loop {
        let allowed = match ending {
            Some(s) => Allowed::End(s),
            None => allowed(app, &run).await,
        };
        if let Allowed::End(s) = allowed {
            ending = Some(s);
        }
        if let Allowed::Lost = allowed {
            tracing::warn!(%run_id, "another replica took the fleet run over; leaving it");
            // Calls in flight finish (a write stopped midway would be half done).
            running.detach_all();
            return;
        }
        if let Allowed::End(s) = allowed
            && running.is_empty()
        {
            break s;
        }
        if matches!(allowed, Allowed::Start) && errors <= budget {
            while let Some(next) = queue.front() {
                let is_canary = next.ordinal < canary_ordinal;
                if !is_canary {
                    if !canaries.is_empty() {
                        break;
                    }
                    if !paused_after_canary {
                        paused_after_canary = true;
                        if plan.pause_after_canary_ms > 0 {
                            pause_until = Some(
                                tokio::time::Instant::now()
                                    + Duration::from_millis(plan.pause_after_canary_ms),
                            );
                        }
                    }
                    if pause_until.is_some_and(|u| tokio::time::Instant::now() < u) {
                        break;
                    }
                }
                let limit = if is_canary { canary } else { window };
                if running.len() >= limit {
                    break;
                }
                let Some(t) = queue.pop_front() else { break };
                // A target outside the run's authority, or one an operator took out, is
                // settled here, in order (its call refused, and audited as any refusal):
                // a refusal spends the budget before the next target can start.
                if objects(app, &run, &t) {
                    let row = one(app, &run, &arguments, t, false).await;
                    errors += usize::from(row.status.is_error());
                    if errors > budget {
                        break;
                    }
                    continue;
                }
                let (app, run, arguments) = (app.clone(), run.clone(), arguments.clone());
                let task =
                    running.spawn(async move { one(&app, &run, &arguments, t, false).await });
                if is_canary {
                    canaries.insert(task.id());
                }
            }
        }
        if running.is_empty() {
            if queue.is_empty() {
                break RunState::Completed;
            }
            if errors > budget {
                break RunState::Stopped;
            }
        }
        let pause = pause_until.unwrap_or_else(|| tokio::time::Instant::now() + RECHECK);
        tokio::select! {
            // Root is stopping: the run stays as stored, for the next start to take up.
            () = app.shutdown.cancelled() => {
                tracing::info!(%run_id, "root is stopping; the fleet run goes on at the next start");
                // Calls in flight are not cancelled on their hubs (see `call::route`).
                running.detach_all();
                return;
            }
            Some(joined) = running.join_next_with_id() => {
                let (id, failed) = match joined {
                    Ok((id, row)) => (id, row.status.is_error()),
                    Err(e) => {
                        // Its target stays `running` in the store, for a restart to run again.
                        tracing::error!(%run_id, error = %e, "a fleet target's task failed");
                        (e.id(), true)
                    }
                };
                canaries.remove(&id);
                errors += usize::from(failed);
            }
            () = wake.notified() => {}
            () = tokio::time::sleep_until(pause.min(tokio::time::Instant::now() + RECHECK)) => {}
        }
    };
    finish(app, &run, end).await;
}

/// Settles what did not run and stores the run's final state.
async fn finish(app: &App, run: &FleetRunRow, end: RunState) {
    let leftover = match end {
        RunState::Cancelled => Some(Status::Cancelled),
        RunState::Stopped => Some(Status::Skipped),
        _ => None,
    };
    if let Some(s) = leftover
        && let Err(e) = app.store.settle_fleet_targets(&run.run_id, s, false).await
    {
        tracing::error!(run_id = %run.run_id, error = %e, "cannot settle the fleet run's targets");
    }
    let from = [RunState::Running, RunState::Paused, RunState::Cancelled];
    if let Err(e) = app
        .store
        .set_fleet_run_state(&run.run_id, &from, end, Some(unix_ms(now())))
        .await
    {
        tracing::error!(run_id = %run.run_id, error = %e, "cannot store the fleet run's end");
    }
    authority::end(app, &run.run_id).await;
    app.fleet.changed(&run.run_id);
    tracing::info!(run_id = %run.run_id, state = %end, "fleet run ended");
}

/// Whether the run's authority or an operator's state refuses `t` at its turn, before
/// any call: it left the run's selector, or it is cordoned, retired or narrowed. Its call
/// is then refused at once, without reaching a hub: the driver settles it in order.
fn objects(app: &App, run: &FleetRunRow, t: &FleetTargetRow) -> bool {
    if super::set::within(app, &run.selector, &t.target_id).is_err() {
        return true;
    }
    let Some(entry) = app.catalog.contracts.get(&run.tool_id) else {
        return true;
    };
    app.hubs.enrolments.get(&t.target_id).is_some_and(|e| {
        crate::hubs::lifecycle::objection(
            &e.lifecycle,
            &e.narrowing,
            &run.tool_id,
            entry.contract.side_effect,
        )
        .is_some()
    })
}

/// Runs one target's call and stores its outcome (`resumed`: a call admitted before a
/// restart, finished under its key).
async fn one(
    app: &Arc<App>,
    run: &FleetRunRow,
    arguments: &Value,
    mut t: FleetTargetRow,
    resumed: bool,
) -> FleetTargetRow {
    t.status = Status::Running;
    t.started_at_ms = Some(unix_ms(now()));
    // Only a target still to run starts: a cancel settles the pending ones at once.
    match app
        .store
        .start_fleet_target(
            &run.run_id,
            &t.target_id,
            t.started_at_ms.unwrap_or_default(),
        )
        .await
    {
        Ok(true) => app.fleet.changed(&run.run_id),
        Ok(false) => {
            t.status = Status::Cancelled;
            return t;
        }
        Err(e) => {
            tracing::error!(run_id = %run.run_id, target_id = %t.target_id, error = %e, "cannot start a fleet target; left pending");
            t.status = Status::Pending;
            return t;
        }
    }
    let Some((s, code, result, event_id)) = answered(app, run, arguments, &t, resumed).await else {
        return unanswered(app, run, t).await;
    };
    if s != Status::Succeeded && app.shutdown.is_cancelled() {
        // Failed because root is stopping (its trail closes): left `running`, so the next
        // start runs it again rather than counting root's own stop against the target.
        return t;
    }
    t.status = s;
    t.code = code;
    t.result = Some(result.to_string());
    t.event_id = event_id;
    t.finished_at_ms = Some(unix_ms(now()));
    store(app, run, &t).await;
    t
}

/// A target's status, error code, result (or error) and event.
type Outcome = (Status, Option<String>, Value, Option<String>);

/// Sends `t`'s call until it is answered: again while its hub answers `busy` (the key's first
/// execution still runs, as after a resume), and again once its hub is back when its link
/// dropped during the call (a hub connected at its turn may have run it; its first execution
/// answers under the same key). `None`: the run's authority ended before an answer came, and
/// nothing more may be sent under it.
async fn answered(
    app: &Arc<App>,
    run: &FleetRunRow,
    arguments: &Value,
    t: &FleetTargetRow,
    resumed: bool,
) -> Option<Outcome> {
    if resumed && !(authority::held(app, run).await && hub_back(app, run, &t.target_id).await) {
        return None;
    }
    let online = || app.hubs.status(&t.target_id) != mcp_shared::target::TargetStatus::Offline;
    let mut connected = online();
    let (mut cut_off, mut busy) = (None, 0);
    loop {
        let outcome = call_target(app, run, arguments, t, resumed || cut_off.is_some()).await;
        let code = outcome.1.as_deref();
        let stopping = app.shutdown.is_cancelled();
        let (since, pause) = cut_off.unwrap_or((tokio::time::Instant::now(), CUT_OFF_PAUSE));
        if code == Some(ErrorCode::TargetOffline.as_str())
            && connected
            && since.elapsed() < RESUME_WAIT
            && !stopping
        {
            if !hub_back(app, run, &t.target_id).await {
                return None;
            }
            // A replica that just took the hub back (or restarted) answers for it a moment
            // later: 200, 400, 800 ms, ... 2 s.
            tokio::time::sleep(pause).await;
            cut_off = Some((since, (pause * 2).min(CUT_OFF_PAUSE_MAX)));
            connected = online();
        } else if code == Some(ErrorCode::Busy.as_str()) && busy < BUSY_RETRIES && !stopping {
            busy += 1;
            tokio::time::sleep(BUSY_WAIT).await;
        } else {
            return Some(outcome);
        }
        // Each ask is a new call: none under an authority that ended meanwhile.
        if !authority::held(app, run).await {
            return None;
        }
    }
}

/// A call admitted before its run's authority ended, cut off (by a restart, or its hub's
/// link) before its answer: nothing may be sent under the ended authority to learn it, so
/// the target is `failed` (`cancelled`) with what root does not know.
async fn unanswered(app: &App, run: &FleetRunRow, mut t: FleetTargetRow) -> FleetTargetRow {
    let why = ToolError::new(
        ErrorCode::Cancelled,
        format!(
            "the run's authority ended while `{}` ran on `{}`, and its answer was cut off: whether it ran is in the hub's activity log, not here",
            run.tool_id, t.target_id
        ),
    );
    t.status = Status::Failed;
    t.code = Some(why.code.as_str().into());
    t.result = Some(json!(why).to_string());
    t.finished_at_ms = Some(unix_ms(now()));
    store(app, run, &t).await;
    t
}

/// Waits (at most [`RESUME_WAIT`], or until root stops) for `target_id`'s hub to be
/// connected: a call cut off by a restart is sent again once its hub is back, not reported
/// undeliverable because its hub was still in its reconnect backoff. `false`: the run's
/// authority ended meanwhile (checked every half second), so nothing may be sent under it.
async fn hub_back(app: &App, run: &FleetRunRow, target_id: &str) -> bool {
    let deadline = tokio::time::Instant::now() + RESUME_WAIT;
    let mut checked = tokio::time::Instant::now();
    while app.hubs.status(target_id) == mcp_shared::target::TargetStatus::Offline
        && tokio::time::Instant::now() < deadline
        && !app.shutdown.is_cancelled()
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if checked.elapsed() >= Duration::from_millis(500) {
            if !authority::held(app, run).await {
                return false;
            }
            checked = tokio::time::Instant::now();
        }
    }
    true
}

async fn store(app: &App, run: &FleetRunRow, t: &FleetTargetRow) {
    if let Err(e) = app.store.set_fleet_target(&run.run_id, t).await {
        tracing::error!(run_id = %run.run_id, target_id = %t.target_id, error = %e, "cannot record a fleet target");
    }
    app.fleet.changed(&run.run_id);
}

/// One target's governed call: a read as asked; a write executed with a confirmation root
/// issues for the effect the target's preview showed (the operator confirmed the set) and the
/// run's idempotency key. Its status, error code, result (or error) and event.
async fn call_target(
    app: &Arc<App>,
    run: &FleetRunRow,
    arguments: &Value,
    t: &FleetTargetRow,
    resumed: bool,
) -> Outcome {
    let failed = |e: ToolError| {
        let s = if e.code == ErrorCode::NotFound {
            Status::Refused
        } else {
            Status::Failed
        };
        (s, Some(e.code.as_str().into()), json!(e), None)
    };
    let Some(entry) = app.catalog.contracts.get(&run.tool_id).cloned() else {
        return failed(ToolError::new(
            ErrorCode::UnknownTool,
            format!("no tool `{}` any more", run.tool_id),
        ));
    };
    // The run's authority is its selector now, not the set it froze: a target that left it
    // (moved to another environment, relabelled) is refused, never called. A call admitted
    // before a restart was within it at its turn.
    if !resumed && let Err(why) = super::set::within(app, &run.selector, &t.target_id) {
        return (
            Status::Refused,
            Some(ErrorCode::CapabilityNotGranted.as_str().into()),
            json!(ToolError::new(
                ErrorCode::CapabilityNotGranted,
                why.to_string()
            )),
            None,
        );
    }
    let lease = match authority::lease_for(app, run, &t.target_id, &entry.contract).await {
        Ok(l) => l,
        Err(e) => return failed(e.tool_error()),
    };
    let mut args = arguments.clone();
    if run.profile.is_some() {
        let effect = t
            .preview
            .as_deref()
            .and_then(|p| serde_json::from_str::<Value>(p).ok())
            .map(|p| p["expected_effect"].clone());
        let token = match crate::call::writes::confirmation_for(
            app,
            lease.lease(),
            &run.tool_id,
            arguments,
            effect.as_ref(),
        )
        .await
        {
            Ok(t) => t,
            Err(e) => return failed(e),
        };
        args["phase"] = json!("execute");
        args["confirmation_token"] = json!(token);
        args["idempotency_key"] = json!(authority::idempotency_key(run));
    }
    let (answer, event) = call_under(app, run, lease, &t.target_id, args, "call", resumed).await;
    match answer {
        Ok(result) => (Status::Succeeded, None, result, event),
        Err(e) => {
            let s = match e.code {
                ErrorCode::TargetOffline => Status::Undeliverable,
                // An operator's deliberate state is not an error: excluded with its reason,
                // as a write's preview excludes it.
                ErrorCode::TargetCordoned
                | ErrorCode::TargetRetired
                | ErrorCode::TargetNarrowed => Status::Excluded,
                ErrorCode::SkillDisabled
                | ErrorCode::EnvironmentForbidden
                | ErrorCode::CapabilityNotGranted => Status::Refused,
                _ => Status::Failed,
            };
            (s, Some(e.code.as_str().into()), json!(e), event)
        }
    }
}

/// The run's tool called on `target_id` under `lease`, through the one governed call path,
/// in the run's trace (`step` names the call among the target's: `preview` or `call`): its
/// result or error, and its event (none for a call refused before it was audited).
pub(super) async fn call_under(
    app: &App,
    run: &FleetRunRow,
    lease: Arc<crate::leases::manager::LeaseEntry>,
    target_id: &str,
    arguments: Value,
    step: &str,
    resumed: bool,
) -> (Result<Value, ToolError>, Option<String>) {
    // An operator's run is the operator's action; an agent's, its fleet lease's calls.
    let (surface, operator) = match authority::caller(run) {
        authority::Caller::Operator(op) => (Surface::Admin, Some(op)),
        authority::Caller::Lease(_) => (Surface::Mcp, None),
    };
    let ctx = CallContext {
        surface,
        lease,
        trace_id: run.trace_id.clone(),
        span: tracing::Span::none(),
        request_id: format!("{}/{target_id}/{step}", run.run_id),
        cancel: None,
        operator,
        confirmation: None,
        progress: None,
        resumed,
    };
    let outcome = call::call(app, ctx, &run.tool_id, arguments).await;
    let r = outcome.response;
    let event = (!outcome.unaudited).then_some(r.event_id);
    match r.error {
        None => (Ok(r.result.unwrap_or(Value::Null)), event),
        Some(e) => (Err(e), event),
    }
}

/// The replica id runs are driven under (`single` on SQLite).
pub(crate) fn driver(app: &crate::app::App) -> String {
    app.replica_id().to_owned()
}

/// Takes up the runs this replica (by its id) left unfinished, at start-up: after a grace
/// of one heartbeat interval (at most 10 s), so the hubs root was serving are back before
/// their targets' turns come (a target still offline then is `undeliverable`).
pub(crate) async fn resume_unfinished(app: Arc<crate::app::App>) {
    let app = &app;
    let grace = app.hubs.heartbeat.min(std::time::Duration::from_secs(10));
    // Runs started by this process are driven already.
    let before = unix_ms(app.started_at);
    match app.store.unfinished_fleet_runs(&driver(app), before).await {
        Ok(runs) if runs.is_empty() => return,
        Ok(_) => tokio::time::sleep(grace).await,
        Err(_) => {}
    }
    match app.store.unfinished_fleet_runs(&driver(app), before).await {
        Ok(runs) => {
            for run_id in runs {
                tracing::info!(%run_id, "taking up an unfinished fleet run");
                spawn(app.clone(), run_id);
            }
        }
        Err(e) => tracing::error!(error = %e, "cannot read the unfinished fleet runs"),
    }
}
