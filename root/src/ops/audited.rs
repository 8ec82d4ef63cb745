//! Operator actions in the audit trail: [`audited`] runs one and records it as one event
//! naming the operator, whatever its outcome; its caller answers only after the event is
//! flushed. One helper for every audited operator command, whichever door it came through
//! (a REST handler's `ApiError`, a service's [`Refusal`]: any [`Outcome`]).

use mcp_shared::ToolError;

use crate::app::App;
use crate::audit::Recorded;
use crate::operators::OperatorId;
use crate::ops::error::Refusal;

/// An error an audited action may end with: it is recorded as the event's tool error, and
/// the answer names that event.
pub(crate) trait Outcome: From<Refusal> {
    fn tool_error(&self) -> ToolError;
    fn with_event(self, event_id: String) -> Self;
}

impl Outcome for Refusal {
    fn tool_error(&self) -> ToolError {
        Refusal::tool_error(self)
    }
    fn with_event(self, event_id: String) -> Self {
        Refusal::with_event(self, event_id)
    }
}

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
    op: &OperatorId,
    action: AdminAction<'_>,
    outcome: Result<String, &mcp_shared::ToolError>,
) -> Result<String, Refusal> {
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
/// The event joins trace `trace_id` (a fleet run's: its targets' calls share it; `None`: its
/// own).
pub(crate) async fn audited<T, E: Outcome>(
    app: &App,
    op: &OperatorId,
    asked: Asked,
    trace_id: Option<String>,
    run: impl std::future::Future<Output = Result<(T, String), E>>,
) -> Result<(T, String), E> {
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

/// [`crate::audit::record`] for an operation: a trail that cannot be written answers as the
/// refusal calls get while it is unavailable.
pub(crate) async fn record(
    app: &App,
    action: Recorded<'_>,
    outcome: Result<String, &mcp_shared::ToolError>,
) -> Result<String, Refusal> {
    crate::audit::record(&app.audit, action, outcome)
        .await
        .map_err(Refusal::from)
}
