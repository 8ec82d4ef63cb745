//! Where an operational call runs: on root when its contract names an `executor` (root is
//! the source of truth), otherwise routed to the lease's target, or answered from the
//! evidence an offline target's hub published; the result redacted before it leaves root.

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::event::OperationalEvent;
use mcp_shared::protocol::CallBody;
use serde_json::Value;

use crate::app::App;
use crate::call::context::CallContext;
use crate::call::route::route_retrying;
use crate::catalog::ContractEntry;

/// Runs an operational call where its contract says: on root when it names an `executor`
/// (root is the source of truth, e.g. leases), otherwise on the lease's target; its result
/// redacted (the contract's rules and root's own, but what the tool issues).
pub(crate) async fn dispatch(
    app: &App,
    ctx: &CallContext,
    entry: &ContractEntry,
    input: CallBody,
    event: &mut OperationalEvent,
) -> Result<Value, ToolError> {
    let result = match &entry.contract.executor {
        Some(name) => {
            event.execution_adapter = Some(name.clone());
            crate::call::executors::run(app, ctx, entry, name, input, event).await
        }
        None => routed(app, ctx, entry, input, event).await,
    };
    // Redaction in depth: whatever the adapter redacted, root applies the contract's rules and
    // its own before a result leaves it.
    result.map(|mut value| {
        app.audit.redactor.redact_result(
            &mut value,
            &entry.contract.redaction,
            &entry.redaction_patterns,
            &mut event.redactions,
        );
        value
    })
}

/// A routed call: to the lease's target, or, for a read with an `offline` adapter while the
/// target is offline (before routing, or found so by the route), answered on root from the
/// evidence its hub published.
async fn routed(
    app: &App,
    ctx: &CallContext,
    entry: &ContractEntry,
    input: CallBody,
    event: &mut OperationalEvent,
) -> Result<Value, ToolError> {
    let target = ctx.lease.lease().target_id.clone();
    let offline = entry.contract.offline.as_deref();
    let answer_on_root = |event: &mut OperationalEvent, name: &str| {
        event.execution_adapter = Some(name.to_owned());
    };
    if let Some(name) = offline
        && app
            .hubs
            .targets
            .get(&target)
            .is_some_and(|d| d.status == mcp_shared::target::TargetStatus::Offline)
    {
        answer_on_root(event, name);
        return crate::call::executors::evidence::run(app, ctx, name, &input).await;
    }
    let kept = offline.map(|_| input.clone());
    let (adapter, result) = route_retrying(app, ctx, entry, &target, input, event)
        .await
        .into_parts();
    event.execution_adapter = Some(adapter.unwrap_or_else(|| "root.router".into()));
    match (result, offline, kept) {
        (Err(e), Some(name), Some(input)) if e.code == ErrorCode::TargetOffline => {
            answer_on_root(event, name);
            crate::call::executors::evidence::run(app, ctx, name, &input).await
        }
        (result, ..) => result,
    }
}
