//! Tasks: a governed call that runs past its request (MCP tasks: the
//! `io.modelcontextprotocol/tasks` extension on 2026-07-28, the tasks of 2025-11-25 on
//! sessions; the protocol side is `mcp::tasks`).
//!
//! A task is one governed call. Its checks (contract, policy, arguments, concurrency slots)
//! run once, when it is created ([`start`]): a call they refuse is answered at once, as
//! without a task. An admitted call becomes a row in the store (both backends) before the
//! client hears of it, then runs in the background (a tokio task), detached from the request: a client
//! that goes away does not stop it. Its progress (the hub adapter's steps and counts) becomes
//! the row's status message and, for a client that asked, progress notifications. When it
//! ends, its event is committed as any call's is, and then the row records how it ended.
//!
//! Any replica answers for a task (the row is in the shared database); the owner is the
//! lease lineage that created it, so a rotated bearer of the same lease keeps its tasks, and
//! any other lease is told there is no such task. Cancelling ends the row at once and stops
//! the call where it runs: here, or on the replica running it, through the change feed.
//!
//! A root that stops waits a moment for its tasks; what is still running then is stopped
//! with the process. On start-up, root ends the tasks it was running when it stopped as
//! `failed`, committing their events then (a task's row keeps the admitted event for this),
//! and the replicas do the same for a replica that is gone.

use std::sync::Arc;
use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError, ToolResponse};
use mcp_shared::event::{EventStatus, OperationalEvent};
use mcp_shared::time::{now, unix_ms};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::call::{self, Admission, CallContext, Outcome};
use crate::hubs::router::{Progress, ProgressSink};
use crate::leases::manager::LeaseEntry;
use crate::store::{TaskRow, TaskState};

/// How long a stopping root waits for its tasks to end.
const DRAIN: Duration = Duration::from_secs(10);
/// A running task's status message is written at most this often.
const MESSAGE_EVERY: Duration = Duration::from_millis(500);
/// Tasks per `tasks/list` page.
pub(crate) const PAGE: i64 = 50;
/// The replica name of a task run by a root on SQLite (one replica).
const LOCAL: &str = "local";

/// What [`start`] did with a call.
pub(crate) enum Started {
    /// The call runs as this task.
    Task(Box<TaskRow>),
    /// The call's checks refused it (or no task could be recorded): its outcome, answered as
    /// a call without a task would be.
    Refused(Box<Outcome>),
}

/// Why a task cannot be read or cancelled.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TaskError {
    /// Unknown, or another lease's (said the same way, so ids reveal nothing).
    #[error("no task `{0}` for this lease")]
    NotFound(String),
    #[error("task `{0}` has expired")]
    Expired(String),
    /// A cancel of a task that had already ended.
    #[error("task `{0}` has already ended ({1})")]
    Ended(String, &'static str),
    #[error("the cursor `{0}` is not one this server gave")]
    Cursor(String),
    #[error("tasks are unavailable: {0}")]
    Store(#[from] crate::store::Error),
}

fn replica(app: &App) -> String {
    app.zone
        .as_ref()
        .map_or_else(|| LOCAL.to_owned(), |z| z.replica_id.clone())
}

/// A new task id: random (a task's owner is checked too, but ids are not to be guessed).
pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Starts `tool_id` as task `task_id` ([`new_id`]): its checks now, its work in the
/// background. `notify`, when given, also receives the call's progress (a session's client
/// that gave a progress token).
pub(crate) async fn start(
    app: &Arc<App>,
    mut ctx: CallContext,
    task_id: &str,
    tool_id: &str,
    arguments: Value,
    notify: Option<ProgressSink>,
) -> Started {
    let task_id = task_id.to_owned();
    let cancel = CancellationToken::new();
    ctx.cancel = Some(cancel.clone());
    let (sink, progress) = call::progress_channel();
    ctx.progress = Some(sink);
    let lease = ctx.lease.clone();
    let admitted = match call::admit(app, ctx, tool_id, arguments).await {
        Admission::Admitted(a) => a,
        Admission::Refused(outcome) => return Started::Refused(outcome),
    };
    let at = unix_ms(now());
    let event = admitted.pending_event(app);
    let row = TaskRow {
        task_id: task_id.clone(),
        owner: lease.task_owner(),
        session_id: lease.session_id().to_owned(),
        target_id: lease.lease().target_id.clone(),
        tool_id: tool_id.to_owned(),
        replica: replica(app),
        state: TaskState::Working,
        status_message: Some(format!("`{tool_id}` is running")),
        outcome: None,
        event: serde_json::to_string(&event).unwrap_or_default(),
        event_id: event.event_id.clone(),
        created_at_ms: at,
        updated_at_ms: at,
        expires_at_ms: at + (app.config.mcp.task_ttl_sec * 1000) as i64,
    };
    // The client hears of the task only once a `tasks/get` anywhere would find it.
    if let Err(e) = app.store.insert_task(&row).await {
        tracing::error!(error = %e, tool = tool_id, "a task could not be recorded; the call is refused");
        let refusal = ToolError::new(
            ErrorCode::Internal,
            format!(
                "`{tool_id}` could not be started as a task (tasks cannot be recorded right now); nothing ran"
            ),
        );
        return Started::Refused(Box::new(admitted.refuse(app, refusal).await));
    }
    app.tasks.started(&task_id, cancel);
    tokio::spawn(follow(app.clone(), task_id.clone(), progress, notify));
    let runner = tokio::spawn(run(app.clone(), admitted, task_id.clone()));
    app.tasks.runs_in(&task_id, runner.abort_handle());
    Started::Task(Box::new(row))
}

/// Runs an admitted call to its end and records how it ended.
async fn run(app: Arc<App>, admitted: Box<call::Admitted>, task_id: String) {
    let outcome = admitted.run(&app).await.with_result();
    let (state, message) = ending(&outcome);
    let response = serde_json::to_value(&outcome.response).unwrap_or_default();
    for attempt in 1..=5u64 {
        let at = unix_ms(now());
        let ended = app
            .store
            .end_task(&task_id, None, state, &message, Some(&response), at)
            .await;
        let kept = match ended {
            // Cancelled meanwhile: it stays cancelled, with what its call answered.
            Ok(false) => app.store.set_task_outcome(&task_id, &response).await,
            Ok(true) => Ok(()),
            Err(e) => Err(e),
        };
        match kept {
            Ok(()) => break,
            Err(e) => {
                tracing::warn!(error = %e, task = %task_id, attempt, "a task's end could not be recorded; retrying");
                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
            }
        }
    }
    app.tasks.ended(&task_id);
}

/// How a call that ran as a task ended: `completed` with its result (a tool error
/// included), or `failed` when it left no audit event (nothing may be answered then).
fn ending(outcome: &Outcome) -> (TaskState, String) {
    let r = &outcome.response;
    match (&r.error, outcome.unaudited) {
        (Some(e), true) => (TaskState::Failed, e.message.clone()),
        (Some(e), false) => (
            TaskState::Completed,
            format!("ended with {}: {}", e.code, e.message),
        ),
        (None, _) => {
            // A result that sums itself up (a fleet run's report, a write's execute of one)
            // says so in the task's last status.
            let summary = r.result.as_ref().and_then(|v| {
                v["summary"]
                    .as_str()
                    .or_else(|| v["result"]["summary"].as_str())
            });
            let message = match summary {
                Some(s) => format!("`{}` completed: {s}", r.tool_id),
                None => format!("`{}` completed", r.tool_id),
            };
            (TaskState::Completed, message)
        }
    }
}

/// A task's progress in words.
fn in_words(p: &Progress) -> String {
    match (&p.message, p.total) {
        (Some(m), _) => m.clone(),
        (None, Some(total)) => format!("{} of {total}", p.progress),
        (None, None) => format!("{} done", p.progress),
    }
}

/// Follows a task's progress until its call ends: the row's status message (at most every
/// [`MESSAGE_EVERY`], the last one always) and the client's notifications, if asked for.
async fn follow(
    app: Arc<App>,
    task_id: String,
    mut progress: mpsc::Receiver<Progress>,
    notify: Option<ProgressSink>,
) {
    let mut written = tokio::time::Instant::now() - MESSAGE_EVERY;
    let mut pending: Option<String> = None;
    loop {
        let next = tokio::select! {
            p = progress.recv() => p,
            () = tokio::time::sleep_until(written + MESSAGE_EVERY), if pending.is_some() => {
                if let Some(m) = pending.take() {
                    write_message(&app, &task_id, &m).await;
                    written = tokio::time::Instant::now();
                }
                continue;
            }
        };
        let Some(p) = next else { break };
        let p = call::redacted(&app, p);
        if let Some(n) = &notify {
            n.report(p.clone());
        }
        pending = Some(in_words(&p));
        if written.elapsed() >= MESSAGE_EVERY
            && let Some(m) = pending.take()
        {
            write_message(&app, &task_id, &m).await;
            written = tokio::time::Instant::now();
        }
    }
    if let Some(m) = pending {
        write_message(&app, &task_id, &m).await;
    }
}

async fn write_message(app: &App, task_id: &str, message: &str) {
    if let Err(e) = app
        .store
        .set_task_message(task_id, message, unix_ms(now()))
        .await
    {
        tracing::debug!(error = %e, task = %task_id, "a task's progress could not be recorded");
    }
}

/// The lease's task `task_id`.
pub(crate) async fn get(
    app: &App,
    lease: &LeaseEntry,
    task_id: &str,
) -> Result<TaskRow, TaskError> {
    let row = app
        .store
        .task(task_id)
        .await?
        .filter(|t| t.owner == lease.task_owner())
        .ok_or_else(|| TaskError::NotFound(task_id.to_owned()))?;
    if row.expires_at_ms < unix_ms(now()) {
        return Err(TaskError::Expired(task_id.to_owned()));
    }
    Ok(row)
}

/// A page of the lease's tasks, newest first, and the cursor of the next page.
pub(crate) async fn list(
    app: &App,
    lease: &LeaseEntry,
    cursor: Option<&str>,
) -> Result<(Vec<TaskRow>, Option<String>), TaskError> {
    let after = match cursor {
        None => None,
        Some(c) => Some(
            c.strip_prefix("t:")
                .and_then(|rest| rest.split_once(':'))
                .and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id)))
                .ok_or_else(|| TaskError::Cursor(c.to_owned()))?,
        ),
    };
    let owner = lease.task_owner();
    let mut rows = app.store.list_tasks(&owner, after, PAGE + 1).await?;
    let now_ms = unix_ms(now());
    let next = (rows.len() as i64 > PAGE).then(|| {
        rows.truncate(PAGE as usize);
        rows.last()
            .map(|t| format!("t:{}:{}", t.created_at_ms, t.task_id))
            .unwrap_or_default()
    });
    rows.retain(|t| t.expires_at_ms >= now_ms);
    Ok((rows, next))
}

/// Cancels the lease's task: it is `cancelled` when this returns, and its call is stopped
/// where it runs (its event then records the cancellation).
pub(crate) async fn cancel(
    app: &App,
    lease: &LeaseEntry,
    task_id: &str,
) -> Result<TaskRow, TaskError> {
    let row = get(app, lease, task_id).await?;
    let message = "cancelled by the client; the target was told to stop";
    let at = unix_ms(now());
    let cancelled = app
        .store
        .end_task(
            task_id,
            Some(&row.owner),
            TaskState::Cancelled,
            message,
            None,
            at,
        )
        .await?;
    if !cancelled {
        let now = get(app, lease, task_id).await?;
        return Err(TaskError::Ended(task_id.to_owned(), now.state.as_str()));
    }
    if !app.tasks.stop(task_id)
        && let Some(zone) = &app.zone
    {
        zone.changed(crate::replica::zone::ChangeKind::Task, task_id, false)
            .await;
    }
    tracing::info!(task = %task_id, tool = %row.tool_id, session = %lease.session_id(), "task cancelled by its client");
    Ok(TaskRow {
        state: TaskState::Cancelled,
        status_message: Some(message.to_owned()),
        updated_at_ms: at,
        ..row
    })
}

/// A stopping root: waits up to [`DRAIN`] for its tasks, then stops what still runs (the
/// hub is told to stop it); those are ended when a root starts again ([`recover`]).
pub(crate) async fn drain(app: &App) {
    let left = app.tasks.drain(DRAIN).await;
    if left > 0 {
        tracing::warn!(
            tasks = left,
            "tasks still running as root stops; they are ended as failed when root starts again"
        );
    }
}

/// Ends as `failed`, each with its event committed now, the working tasks whose root stopped
/// under them: this replica's own at start-up (`live` is `None`), or, on a zone, those of the
/// replicas not in `live`.
pub(crate) async fn recover(app: &App, live: Option<&[String]>) {
    let mine = replica(app);
    let rows = match app
        .store
        .working_tasks(live.is_none().then_some(mine.as_str()))
        .await
    {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the working tasks");
            return;
        }
    };
    for row in rows {
        let stopped = match live {
            None => !app.tasks.contains(&row.task_id),
            Some(live) => !live.contains(&row.replica),
        };
        if stopped {
            let why = if row.replica == mine {
                "root stopped while the task ran".to_owned()
            } else {
                format!("replica `{}` stopped while the task ran", row.replica)
            };
            orphaned(app, row, &why).await;
        }
    }
}

/// Ends a task whose root stopped under it: first the row (only one replica wins it), then
/// its event, saying the outcome on the target is unknown.
async fn orphaned(app: &App, row: TaskRow, why: &str) {
    let error = ToolError::new(
        ErrorCode::Internal,
        format!(
            "{why}; whether `{}` finished on the target is unknown: check the target before running it again",
            row.tool_id
        ),
    );
    let event = serde_json::from_str::<OperationalEvent>(&row.event)
        .inspect_err(|e| {
            tracing::error!(error = %e, task = %row.task_id, "a task's stored event does not decode; ending it without one");
        })
        .ok();
    let response = event.as_ref().map(|event| ToolResponse {
        ok: false,
        tool_id: row.tool_id.clone(),
        result: None,
        error: Some(error.clone()),
        event_id: row.event_id.clone(),
        trace_id: event.trace_id.clone(),
        redactions: Default::default(),
    });
    let outcome = response.and_then(|r| serde_json::to_value(r).ok());
    let at = unix_ms(now());
    let state = TaskState::Failed;
    match app
        .store
        .end_task(
            &row.task_id,
            None,
            state,
            &error.message,
            outcome.as_ref(),
            at,
        )
        .await
    {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => {
            tracing::warn!(error = %e, task = %row.task_id, "cannot end a task whose root stopped; retrying later");
            return;
        }
    }
    let Some(mut event) = event else { return };
    event.status = EventStatus::Error;
    event.error = Some(error);
    event.finished_at = now();
    if let Err(e) = app.audit.append(event).await {
        tracing::error!(error = %e, task = %row.task_id, "the event of a task whose root stopped could not be committed");
    } else {
        tracing::warn!(task = %row.task_id, tool = %row.tool_id, "a task whose root stopped under it was ended as failed");
    }
}

/// Forgets tasks past their time to live.
pub(crate) async fn sweep(app: &App) {
    match app.store.delete_expired_tasks(unix_ms(now())).await {
        Ok(0) => {}
        Ok(n) => tracing::debug!(count = n, "expired tasks forgotten"),
        Err(e) => tracing::debug!(error = %e, "cannot forget expired tasks"),
    }
}
