//! The tasks of MCP 2025-11-25, on sessions of that revision: the client asks for a task with
//! `params.task` on `tools/call` (for a tool whose `tools/list` entry says
//! `execution.taskSupport`), polls `tasks/get`, reads the outcome with `tasks/result`
//! (which waits until the task has ended), lists with `tasks/list` and cancels with
//! `tasks/cancel`; progress of a call that gave a progress token arrives as
//! `notifications/progress` on the session's stream for as long as the task runs.
//!
//! rmcp 3.11 models only the 2026-07-28 extension, whose `tasks/get` and `tasks/cancel` have
//! other shapes, so root's transport hands these messages of a 2025-11-25 session here
//! instead of to rmcp's service, and adds the `tasks` capability to the session's
//! `initialize` answer and `execution.taskSupport` to its `tools/list` answers.

use std::sync::Arc;
use std::time::Duration;

use mcp_shared::contract::TaskSupport;
use mcp_shared::event::Surface;
use mcp_shared::time::{format, from_unix_ms};
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, ClientRequest, JsonRpcNotification, JsonRpcVersion2_0,
    ProgressNotification, ProtocolVersion, ServerJsonRpcMessage, ServerNotification,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::App;
use crate::call::tasks::Started;
use crate::call::{self, CallContext};
use crate::hubs::router::ProgressSink;
use crate::leases::manager::LeaseEntry;
use crate::mcp::transport::wire::Routes;
use crate::store::{TaskRow, TaskState};

/// The revision whose tasks these are.
pub(crate) const REVISION: ProtocolVersion = ProtocolVersion::V_2025_11_25;
/// `_meta` key tying a message to its task.
pub(crate) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// How often `tasks/result` looks whether its task has ended.
const RESULT_POLL: Duration = Duration::from_millis(200);

/// The methods of a 2025-11-25 session that root answers here.
pub(crate) fn handles(request: &ClientRequest, body: &[u8]) -> bool {
    match request {
        ClientRequest::GetTaskRequest(_) | ClientRequest::CancelTaskRequest(_) => true,
        ClientRequest::CustomRequest(r) => {
            matches!(r.method.as_str(), "tasks/result" | "tasks/list")
        }
        ClientRequest::CallToolRequest(_) => task_param(body).is_some(),
        _ => false,
    }
}

/// `params.task` of a `tools/call` body (rmcp's model drops it), if present.
fn task_param(body: &[u8]) -> Option<Value> {
    #[derive(Deserialize)]
    struct Body {
        params: Option<Params>,
    }
    #[derive(Deserialize)]
    struct Params {
        task: Option<Value>,
    }
    // Most calls carry no task: look for the word before parsing the body again.
    body.windows(6).position(|w| w == b"\"task\"")?;
    serde_json::from_slice::<Body>(body)
        .ok()?
        .params?
        .task
        .filter(|t| !t.is_null())
}

/// The session's `initialize` answer, given the `tasks` capability when it negotiated this
/// revision (`true` then).
pub(crate) fn patch_initialize(answer: &mut Value) -> bool {
    let Some(result) = answer.get_mut("result") else {
        return false;
    };
    if result.get("protocolVersion").and_then(Value::as_str) != Some(REVISION.as_str()) {
        return false;
    }
    if let Some(caps) = result
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    {
        caps.insert(
            "tasks".into(),
            json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } }),
        );
        return true;
    }
    false
}

/// A `tools/list` answer with `execution.taskSupport` on each tool that may run as a task.
pub(crate) fn patch_tools(app: &App, answer: &mut Value) {
    let Some(tools) = answer
        .pointer_mut("/result/tools")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for tool in tools {
        let optional = tool
            .get("name")
            .and_then(Value::as_str)
            .and_then(|n| app.catalog.contracts.get(n))
            .is_some_and(|e| e.contract.task_support == TaskSupport::Optional);
        if optional && let Some(t) = tool.as_object_mut() {
            t.insert("execution".into(), json!({ "taskSupport": "optional" }));
        }
    }
}

/// What a task-augmented call needs from the transport besides the request.
pub(crate) struct Caller {
    pub(crate) lease: Arc<LeaseEntry>,
    pub(crate) request_id: String,
    pub(crate) traceparent: Option<String>,
    /// The progress token the call gave, if it did: the task's progress goes to the
    /// session's stream under it for as long as the task runs.
    pub(crate) progress_token: Option<rmcp::model::ProgressToken>,
    pub(crate) stream: Arc<Routes>,
}

/// Answers one of [`handles`]'s messages: the result's JSON, or the error.
pub(crate) async fn answer(
    app: &Arc<App>,
    caller: Caller,
    request: ClientRequest,
) -> Result<Value, ErrorData> {
    let lease = caller.lease.clone();
    match request {
        ClientRequest::CallToolRequest(r) => create(app, caller, r.params).await,
        ClientRequest::GetTaskRequest(r) => {
            let row = call::tasks::get(app, &lease, &r.params.task_id)
                .await
                .map_err(super::task_error)?;
            Ok(task_of(app, &row))
        }
        ClientRequest::CancelTaskRequest(r) => {
            let row = call::tasks::cancel(app, &lease, &r.params.task_id)
                .await
                .map_err(super::task_error)?;
            Ok(task_of(app, &row))
        }
        ClientRequest::CustomRequest(r) if r.method == "tasks/list" => {
            let cursor = r
                .params
                .as_ref()
                .and_then(|p| p.get("cursor"))
                .and_then(Value::as_str);
            let (rows, next) = call::tasks::list(app, &lease, cursor)
                .await
                .map_err(super::task_error)?;
            let tasks: Vec<Value> = rows.iter().map(|t| task_of(app, t)).collect();
            let mut answer = json!({ "tasks": tasks });
            if let Some(next) = next {
                answer["nextCursor"] = json!(next);
            }
            Ok(answer)
        }
        ClientRequest::CustomRequest(r) => {
            let task_id = r
                .params
                .as_ref()
                .and_then(|p| p.get("taskId"))
                .and_then(Value::as_str)
                .ok_or_else(|| ErrorData::invalid_params("`taskId` (a string) is required", None))?
                .to_owned();
            result(app, &lease, &task_id).await
        }
        _ => Err(ErrorData::internal_error(
            "not a message of a 2025-11-25 task",
            None,
        )),
    }
}

/// A task-augmented `tools/call`: its `CreateTaskResult`, or the answer of a call its checks
/// refused (a tool that may not run as a task is `-32601`, as the revision says).
async fn create(
    app: &Arc<App>,
    caller: Caller,
    params: CallToolRequestParams,
) -> Result<Value, ErrorData> {
    let tool_id = params.name.to_string();
    let allowed = app
        .catalog
        .contracts
        .get(&tool_id)
        .is_some_and(|e| e.contract.task_support == TaskSupport::Optional);
    if !allowed {
        return Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!("`{tool_id}` does not run as a task (its execution.taskSupport is forbidden)"),
            None,
        ));
    }
    let trace = call::trace(caller.traceparent.as_deref());
    let ctx = CallContext {
        surface: Surface::Mcp,
        lease: caller.lease,
        trace_id: trace.id,
        span: trace.span,
        request_id: caller.request_id,
        cancel: None,
        operator: None,
        confirmation: None,
        progress: None,
        resumed: false,
    };
    let arguments = Value::Object(params.arguments.unwrap_or_default());
    let task_id = call::tasks::new_id();
    let notify = caller.progress_token.map(|token| {
        let (stream, meta) = (caller.stream, related(&task_id));
        ProgressSink::new(move |p| {
            let param = crate::mcp::progress_param(token.clone(), p, Some(meta.clone()));
            stream.notify(ServerJsonRpcMessage::Notification(JsonRpcNotification {
                jsonrpc: JsonRpcVersion2_0,
                notification: ServerNotification::ProgressNotification(ProgressNotification::new(
                    param,
                )),
            }));
        })
    });
    match call::tasks::start(app, ctx, &task_id, &tool_id, arguments, notify).await {
        Started::Task(row) => Ok(json!({ "task": task_of(app, &row) })),
        Started::Refused(outcome) => {
            let answer = match crate::mcp::tool_answer(*outcome, &tool_id)? {
                rmcp::model::CallToolResponse::Complete(r) => serde_json::to_value(r),
                other => serde_json::to_value(rmcp::model::ServerResult::from(other)),
            };
            answer.map_err(|e| ErrorData::internal_error(e.to_string(), None))
        }
    }
}

/// `tasks/result`: once the task has ended, what its call answered (with the task named in
/// `_meta`), or its error.
async fn result(app: &Arc<App>, lease: &LeaseEntry, task_id: &str) -> Result<Value, ErrorData> {
    loop {
        let row = call::tasks::get(app, lease, task_id)
            .await
            .map_err(super::task_error)?;
        match row.state {
            TaskState::Working => tokio::time::sleep(RESULT_POLL).await,
            TaskState::Completed => {
                let Some(result) = super::result_of(&row) else {
                    return Err(super::error_of(&row));
                };
                let mut v = serde_json::to_value(result)
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                v["_meta"][RELATED_TASK] = json!({ "taskId": task_id });
                return Ok(v);
            }
            TaskState::Failed | TaskState::Cancelled => return Err(super::error_of(&row)),
        }
    }
}

/// A task as 2025-11-25 carries it.
pub(crate) fn task_of(app: &App, row: &TaskRow) -> Value {
    let mut task = json!({
        "taskId": row.task_id,
        "status": row.state.as_str(),
        "createdAt": format(from_unix_ms(row.created_at_ms)),
        "lastUpdatedAt": format(from_unix_ms(row.updated_at_ms)),
        "ttl": app.config.mcp.task_ttl_sec * 1000,
        "pollInterval": app.config.mcp.task_poll_interval_ms,
    });
    if let Some(m) = &row.status_message {
        task["statusMessage"] = json!(m);
    }
    task
}

/// The `_meta` of a message about task `task_id`.
fn related(task_id: &str) -> rmcp::model::NotificationMetaObject {
    let mut meta = rmcp::model::NotificationMetaObject::default();
    meta.0
        .insert(RELATED_TASK.into(), json!({ "taskId": task_id }));
    meta
}
