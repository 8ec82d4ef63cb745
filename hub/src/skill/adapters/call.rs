//! One call as an adapter receives it ([`CallInput`]: the signed call's body, shared with
//! root, plus its id, deadline, progress and span), where it reports progress
//! ([`Progress`]), and what it answers ([`AdapterReply`]).

use std::sync::Arc;

use mcp_shared::error::ToolError;
use mcp_shared::protocol::CallBody;
use serde_json::Value;

/// One call as an adapter receives it.
#[derive(Debug, Clone)]
pub struct CallInput {
    pub call_id: String,
    /// The signed `CallRequest`'s body: the arguments (root has stripped its own control
    /// fields), the dry-run flag, the idempotency key and a write's confirmed effect.
    pub body: CallBody,
    /// When the call must be answered; the adapter task is stopped then.
    pub deadline: tokio::time::Instant,
    /// Where the adapter reports how far it has got.
    pub progress: Progress,
    /// The call's span (root's trace continued, OpenTelemetry on): the adapter's run is its
    /// child.
    pub span: tracing::Span,
}

/// Where an adapter reports how far a call has got (deploy steps, tests run): `progress`
/// frames to root, best effort (one the connection cannot queue at once is dropped). The
/// message says counts and step names, never output.
#[derive(Clone, Default)]
pub struct Progress(Option<Arc<Report>>);

/// What a [`Progress`] reports to: `(done, total, message)`.
type Report = dyn Fn(f64, Option<f64>, String) + Send + Sync;

impl Progress {
    /// Progress reported to `report(done, total, message)`.
    pub fn new(report: impl Fn(f64, Option<f64>, String) + Send + Sync + 'static) -> Progress {
        Progress(Some(Arc::new(report)))
    }

    /// Reports `done` (of `total`, when known); `done` only grows.
    pub fn report(&self, done: f64, total: Option<f64>, message: impl Into<String>) {
        if let Some(report) = &self.0 {
            report(done, total, message.into());
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Progress(reported)"
        } else {
            "Progress(none)"
        })
    }
}

impl CallInput {
    /// A call that is not a dry run and carries no idempotency key.
    pub fn new(call_id: &str, arguments: Value, deadline: tokio::time::Instant) -> CallInput {
        CallInput {
            call_id: call_id.to_owned(),
            body: CallBody::run(arguments),
            deadline,
            progress: Progress::default(),
            span: tracing::Span::none(),
        }
    }
}

/// What an adapter replies to a call.
pub type AdapterReply = Result<Value, ToolError>;
