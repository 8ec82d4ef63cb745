//! What a governed call carries besides its tool and arguments: where it came from, its lease,
//! its trace, its cancellation, the operator it is made for, a write's confirmation answered
//! by the client's retry, and where its progress goes.

use std::sync::Arc;

use mcp_shared::error::ToolError;
use mcp_shared::event::Surface;

use crate::hubs::router;
use crate::leases::manager::LeaseEntry;

/// Where a call came from and how to trace it.
pub(crate) struct CallContext {
    pub(crate) surface: Surface,
    pub(crate) lease: Arc<LeaseEntry>,
    /// The event's `trace_id`: the trace of [`CallContext::span`] (see [`trace`]).
    pub(crate) trace_id: String,
    /// The call's span, exported while OpenTelemetry is on ([`tracing::Span::none`] otherwise);
    /// policy, validation, route and audit commit are its children.
    pub(crate) span: tracing::Span,
    pub(crate) request_id: String,
    /// Cancelled when the client cancels the request (MCP `notifications/cancelled`).
    pub(crate) cancel: Option<tokio_util::sync::CancellationToken>,
    /// The operator a call is made for (an operator read under root's reader lease): the
    /// event names them as its actor, with the lease as its session.
    pub(crate) operator: Option<crate::operators::OperatorId>,
    /// A write's confirmation, answered by the client's retry (MCP multi-round-trip
    /// requests); refused for any other tool.
    pub(crate) confirmation: Option<Confirmation>,
    /// Where a routed call's progress goes (the client's progress notifications, a task's
    /// status); `None`: nowhere.
    pub(crate) progress: Option<router::ProgressSink>,
    /// A fleet target's call admitted before root restarted, sent again under its
    /// idempotency key to finish it (`policy::Grant::admitted`).
    pub(crate) resumed: bool,
}

/// A confirmation the client answered by retrying the call (MCP 2026-07-28 multi-round-trip
/// requests, `mcp::confirm`): the retry is the execute, and the answer stands in for the
/// `confirmation_token` argument.
#[derive(Debug, Clone)]
pub(crate) enum Confirmation {
    /// The person confirmed: the execute redeems the preview's token.
    Confirmed(String),
    /// Not confirmed (declined, cancelled, or accepted without confirming, `why`): the token
    /// is spent and nothing runs.
    Refused { token: String, why: String },
    /// The retry's state did not verify (forged, expired, issued for another request).
    Invalid(ToolError),
}

/// A call's trace: its span and the trace id its event records.
pub(crate) struct Trace {
    pub(crate) id: String,
    pub(crate) span: tracing::Span,
}

/// The trace of a call made with `traceparent` (W3C, from the request's headers or `_meta`):
/// with OpenTelemetry on, a span continuing it (or starting a trace) whose trace id is the
/// event's; off, the trace id alone ([`trace_id_from`]) and no span.
pub(crate) fn trace(traceparent: Option<&str>) -> Trace {
    if !mcp_shared::otel::on() {
        return Trace {
            id: trace_id_from(traceparent),
            span: tracing::Span::none(),
        };
    }
    let span = mcp_shared::otel_span!(
        "governed call",
        otel.kind = "server",
        tool = tracing::field::Empty
    );
    mcp_shared::otel::continue_from(&span, traceparent);
    let id = mcp_shared::otel::trace_id_of(&span).unwrap_or_else(|| trace_id_from(traceparent));
    Trace { id, span }
}

/// A new trace id, or the one from a W3C `traceparent` header.
pub(crate) fn trace_id_from(traceparent: Option<&str>) -> String {
    traceparent
        .and_then(|tp| {
            let parts: Vec<&str> = tp.split('-').collect();
            (parts.len() == 4
                && parts[1].len() == 32
                && parts[1].chars().all(|c| c.is_ascii_hexdigit()))
            .then(|| parts[1].to_ascii_lowercase())
        })
        .unwrap_or_else(|| uuid::Uuid::now_v7().simple().to_string())
}
