//! Tasks as MCP speaks them (the runner is `call::tasks`).
//!
//! - 2026-07-28, the `io.modelcontextprotocol/tasks` extension (SEP-2663): root decides. A
//!   `tools/call` whose request declares the extension, of a tool whose contract has
//!   `task_support = "optional"`, that would run (a write's execute, not its preview or dry
//!   run) is answered with a `CreateTaskResult`; `tasks/get` answers the task with its result
//!   or error inline, `tasks/cancel` cancels it, and `tasks/update` has nothing to take (root
//!   asks a write's confirmation before the task, by a multi-round-trip request).
//! - 2025-11-25 on sessions: the client decides, with `params.task` on `tools/call`, and reads
//!   the result with `tasks/result`. rmcp's model has no types for this revision's tasks, so
//!   root's transport answers those messages itself ([`legacy`]) and adds the task fields to
//!   the answers of `initialize` and `tools/list` of such sessions.
//!
//! A task's completed result is the tool result its call would have answered; a task that
//! failed (its call left no audit event, or its root stopped under it) carries a JSON-RPC
//! error. Task ids of another lease, unknown and expired ones are `-32602`.

pub(crate) mod legacy;

use std::sync::Arc;

use mcp_shared::contract::TaskSupport;
use mcp_shared::error::ToolResponse;
use mcp_shared::time::{format, from_unix_ms};
use rmcp::model::{
    CallToolResponse, CallToolResult, CreateTaskResult, DetailedTask, GetTaskResult, JsonObject,
    MetaObject, ProtocolVersion, Task, TaskPayload, TaskStatus,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use crate::app::App;
use crate::call::tasks::{Started, TaskError};
use crate::call::writes::{Controls, Phase};
use crate::call::{self, CallContext};
use crate::store::{TaskRow, TaskState};

/// The JSON-RPC error code of a task that failed: root's own failure (`-32603`).
const FAILED: i32 = -32603;

/// Whether a 2026-07-28 `tools/call` runs as a task: the request declares the extension,
/// the contract allows it, and the call runs work (a write's execute, not a preview).
pub(crate) fn wanted(
    app: &App,
    ctx: &RequestContext<RoleServer>,
    tool_id: &str,
    args: &Value,
) -> bool {
    let modern = ctx
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
    let declared = ctx
        .client_capabilities()
        .is_some_and(|c| c.supports_tasks());
    modern && declared && runs_as_task(app, tool_id, args)
}

/// Whether a call of `tool_id` with `args` may run as a task: the contract allows it, and
/// for a write, the call executes (a preview or dry run answers at once).
pub(crate) fn runs_as_task(app: &App, tool_id: &str, args: &Value) -> bool {
    let Some(entry) = app.catalog.contracts.get(tool_id) else {
        return false;
    };
    let c = &entry.contract;
    if c.task_support == TaskSupport::Forbidden {
        return false;
    }
    if c.routing != mcp_shared::contract::RoutingClass::OperationalWrite {
        return true;
    }
    matches!(
        Controls::read(args),
        Some(Ok(Controls {
            phase: Phase::Execute,
            dry_run: false,
            ..
        }))
    )
}

/// Starts the call as a task: its `CreateTaskResult`, or the answer of a call its checks
/// refused.
pub(crate) async fn create(
    app: &Arc<App>,
    ctx: CallContext,
    tool_id: &str,
    arguments: Value,
) -> Result<CallToolResponse, ErrorData> {
    let task_id = call::tasks::new_id();
    match call::tasks::start(app, ctx, &task_id, tool_id, arguments, None).await {
        Started::Task(row) => {
            let meta = MetaObject(
                json!({ "trace_id": trace_of(&row) })
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            );
            Ok(CallToolResponse::Task(
                CreateTaskResult::new(task_of(app, &row)).with_meta(meta),
            ))
        }
        Started::Refused(outcome) => super::tool_answer(*outcome, tool_id),
    }
}

/// The trace id of a task's call (from its admitted event).
fn trace_of(row: &TaskRow) -> String {
    serde_json::from_str::<Value>(&row.event)
        .ok()
        .and_then(|e| e.get("trace_id").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default()
}

fn status_of(state: TaskState) -> TaskStatus {
    match state {
        TaskState::Working => TaskStatus::Working,
        TaskState::Completed => TaskStatus::Completed,
        TaskState::Failed => TaskStatus::Failed,
        TaskState::Cancelled => TaskStatus::Cancelled,
    }
}

/// A task's state as the extension carries it.
pub(crate) fn task_of(app: &App, row: &TaskRow) -> Task {
    let mut task = Task::new(
        row.task_id.clone(),
        status_of(row.state),
        format(from_unix_ms(row.created_at_ms)),
        format(from_unix_ms(row.updated_at_ms)),
    )
    .with_ttl_ms(app.config.mcp.task_ttl_sec * 1000)
    .with_poll_interval_ms(app.config.mcp.task_poll_interval_ms);
    if let Some(m) = &row.status_message {
        task = task.with_status_message(m.clone());
    }
    task
}

/// The response a task's call answered, as stored.
fn response_of(row: &TaskRow) -> Option<ToolResponse> {
    row.outcome
        .as_ref()
        .and_then(|o| serde_json::from_value(o.clone()).ok())
}

/// The tool result of a completed task.
pub(crate) fn result_of(row: &TaskRow) -> Option<CallToolResult> {
    response_of(row).map(super::tool_result)
}

/// The JSON-RPC error of a task that failed (or, for 2025-11-25's `tasks/result`, was
/// cancelled): root's failure, with the tool error's code and the trace in `data`.
pub(crate) fn error_of(row: &TaskRow) -> ErrorData {
    let response = response_of(row);
    let error = response.as_ref().and_then(|r| r.error.clone());
    let message = match (row.state, &error) {
        (TaskState::Cancelled, _) => format!("task `{}` was cancelled", row.task_id),
        (_, Some(e)) => e.message.clone(),
        (_, None) => row
            .status_message
            .clone()
            .unwrap_or_else(|| "the task failed".into()),
    };
    ErrorData::new(
        rmcp::model::ErrorCode(FAILED),
        message,
        Some(json!({
            "code": error.map(|e| e.code),
            "event_id": response.as_ref().map(|r| r.event_id.clone()),
            "trace_id": response.map(|r| r.trace_id).unwrap_or_else(|| trace_of(row)),
        })),
    )
}

fn object(v: Value) -> JsonObject {
    v.as_object().cloned().unwrap_or_default()
}

/// `tasks/get` of the extension: the task with its result or error inline.
pub(crate) fn detailed(app: &App, row: &TaskRow) -> GetTaskResult {
    let payload = match row.state {
        TaskState::Working => TaskPayload::Working,
        TaskState::Cancelled => TaskPayload::Cancelled,
        TaskState::Completed => match result_of(row) {
            Some(r) => TaskPayload::Completed {
                result: object(serde_json::to_value(r).unwrap_or_default()),
            },
            None => TaskPayload::Failed {
                error: object(serde_json::to_value(error_of(row)).unwrap_or_default()),
            },
        },
        TaskState::Failed => TaskPayload::Failed {
            error: object(serde_json::to_value(error_of(row)).unwrap_or_default()),
        },
    };
    GetTaskResult::new(DetailedTask::new(task_of(app, row), payload))
}

/// A task error as JSON-RPC says it: the client named no task of its own (`-32602`), or root
/// could not read its tasks.
pub(crate) fn task_error(e: TaskError) -> ErrorData {
    match e {
        TaskError::Store(e) => {
            tracing::error!(error = %e, "tasks unavailable");
            ErrorData::internal_error("tasks are unavailable right now; retry later", None)
        }
        e @ TaskError::Ended(..) => ErrorData::invalid_params(format!("Cannot cancel: {e}"), None),
        other => ErrorData::invalid_params(format!("Failed to retrieve task: {other}"), None),
    }
}
