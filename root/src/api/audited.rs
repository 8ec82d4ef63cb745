//! Operator actions in the audit trail: [`audited`] runs one and records it as one event
//! naming the operator, whatever its outcome; the REST handlers answer only after it is
//! committed.

use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::audit::Recorded;

/// An operator action to record in the trail (surface `admin`).
pub(crate) struct AdminAction<'a> {
    /// `admin.<area>.<verb>`, e.g. `admin.skill.disable`.
    pub(crate) tool_id: String,
    pub(crate) target_id: Option<&'a str>,
    pub(crate) adapter: Option<String>,
    pub(crate) started_at: time::OffsetDateTime,
    /// What the operator asked for; redacted before it is stored.
    pub(crate) request: serde_json::Value,
    /// The trace the event joins (`None`: its own).
    pub(crate) trace_id: Option<String>,
}

/// Records an operator action and its outcome as one audit event naming the operator; see
/// [`record`].
pub(crate) async fn record_admin(
    app: &App,
    op: &Operator,
    action: AdminAction<'_>,
    outcome: Result<String, &mcp_shared::ToolError>,
) -> Result<String, ApiError> {
    let action = Recorded {
        surface: mcp_shared::event::Surface::Admin,
        actor: op.actor_id(),
        tool_id: action.tool_id,
        target_id: action.target_id,
        adapter: action.adapter,
        started_at: action.started_at,
        request: action.request,
        trace_id: action.trace_id,
    };
    record(app, action, outcome).await
}

/// What an operator asked for, for [`audited`].
pub(crate) struct Asked {
    /// `admin.<area>.<verb>`.
    pub(crate) tool_id: &'static str,
    pub(crate) target_id: Option<String>,
    pub(crate) adapter: Option<String>,
    /// What the operator asked for (never a secret it is handed); redacted before storing.
    pub(crate) request: serde_json::Value,
}

/// Runs an operator action and records it as one audit event naming the operator, whatever
/// its outcome: the summary it returns, or the refusal (whose answer then names the event).
/// Returns the action's value and the event id.
pub(crate) async fn audited<T>(
    app: &App,
    op: &Operator,
    asked: Asked,
    run: impl std::future::Future<Output = Result<(T, String), ApiError>>,
) -> Result<(T, String), ApiError> {
    audited_in(app, op, asked, None, run).await
}

/// [`audited`], the event joining trace `trace_id` (a fleet run's: its targets' calls
/// share it).
pub(crate) async fn audited_in<T>(
    app: &App,
    op: &Operator,
    asked: Asked,
    trace_id: Option<String>,
    run: impl std::future::Future<Output = Result<(T, String), ApiError>>,
) -> Result<(T, String), ApiError> {
    let started_at = mcp_shared::time::now();
    let outcome = run.await;
    let action = AdminAction {
        tool_id: asked.tool_id.to_owned(),
        target_id: asked.target_id.as_deref(),
        adapter: asked.adapter,
        started_at,
        request: asked.request,
        trace_id,
    };
    match outcome {
        Ok((value, summary)) => {
            let event_id = record_admin(app, op, action, Ok(summary)).await?;
            Ok((value, event_id))
        }
        Err(refusal) => {
            let event_id = record_admin(app, op, action, Err(&refusal.tool_error())).await?;
            Err(refusal.with_event(event_id))
        }
    }
}

/// [`crate::audit::record`] for a handler: a trail that cannot be written answers as the
/// refusal calls get while it is unavailable.
pub(crate) async fn record(
    app: &App,
    action: Recorded<'_>,
    outcome: Result<String, &mcp_shared::ToolError>,
) -> Result<String, ApiError> {
    crate::audit::record(&app.audit, action, outcome)
        .await
        .map_err(|e| ApiError::of_tool(&e))
}
