//! One call from root: the gate, then the skill, with progress frames on the way and the
//! result frame at the end; every call the hub handles is recorded in its activity log when
//! it finishes ([`execute`]), a call cut off as `cancelled`.

use std::sync::Arc;
use std::time::Duration;

use mcp_shared::error::ErrorCode;
use mcp_shared::protocol::{CallOutcome, CallRequest, Envelope, HubToRoot, feature};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::Channel;
use super::frames::envelope;
use crate::context::HubContext;
use crate::skill::CancelOnDrop;
use crate::skill::adapters::CallInput;
use crate::store::activity::{ActivityEntry, ActivityStatus, bounded_id};

/// Runs one call: the gate, then the skill; queues the result frame.
pub(super) async fn run_call(
    ch: Channel,
    call: CallRequest,
    frame_id: String,
    out: mpsc::Sender<Envelope<HubToRoot>>,
) -> String {
    let call_id = call.call_id.clone();
    let progress = {
        let (out, call_id) = (out.clone(), call_id.clone());
        let ctx = ch.ctx.clone();
        crate::skill::adapters::Progress::new(move |progress, total, message| {
            // `total` only for a root that reads it.
            let total = total.filter(|_| {
                ctx.connection
                    .root_features
                    .load()
                    .has(feature::PROGRESS_TOTAL)
            });
            let body = HubToRoot::Progress {
                call_id: call_id.clone(),
                progress,
                total,
                message: Some(message),
            };
            // Best effort: a full queue drops a progress frame, never a result.
            let _ = out.try_send(envelope(body, None));
        })
    };
    // Root's trace continued (OpenTelemetry on, and a root that sent its route's traceparent).
    let span = mcp_shared::otel_span!("hub call", otel.kind = "server", tool = %call.tool_id);
    mcp_shared::otel::continue_from(&span, call.traceparent.as_deref());
    let outcome = execute(&ch, call, progress).instrument(span).await;
    if let CallOutcome::Error { error, .. } = &outcome {
        tracing::info!(%call_id, code = %error.code, message = %error.message, "call refused or failed");
    }
    let frame = envelope(
        HubToRoot::Result {
            call_id: call_id.clone(),
            outcome,
        },
        Some(frame_id),
    );
    let _ = out.send(frame).await;
    call_id
}

/// Records one call in the hub's activity log when it finishes: with its outcome, or (if the
/// call's task is dropped first, i.e. cancelled or cut off by a dropped connection) as an
/// `error` with code `cancelled`.
struct ActivityRecorder {
    ctx: Arc<HubContext>,
    entry: Option<ActivityEntry>,
    started: std::time::Instant,
}

impl ActivityRecorder {
    fn start(ctx: &Arc<HubContext>, call: &CallRequest) -> ActivityRecorder {
        ActivityRecorder {
            ctx: ctx.clone(),
            entry: Some(ActivityEntry {
                call_id: bounded_id(&call.call_id),
                trace_id: bounded_id(&call.trace_id),
                tool_id: bounded_id(&call.tool_id),
                adapter: None,
                status: ActivityStatus::Error,
                error_code: Some(ErrorCode::Cancelled),
                dry_run: call.body.dry_run,
                started_at: mcp_shared::time::now(),
                duration_ms: 0,
            }),
            started: std::time::Instant::now(),
        }
    }

    /// Records the outcome: `ok`, `refused` (the gate answered: no adapter) or `error`.
    fn finish(mut self, outcome: &CallOutcome) {
        if let Some(entry) = self.entry.as_mut() {
            match outcome {
                CallOutcome::Ok { adapter, .. } => {
                    entry.adapter = Some(adapter.clone());
                    entry.status = ActivityStatus::Ok;
                    entry.error_code = None;
                }
                CallOutcome::Error { adapter, error } => {
                    entry.adapter = adapter.clone();
                    entry.status = if adapter.is_some() {
                        ActivityStatus::Error
                    } else {
                        ActivityStatus::Refused
                    };
                    entry.error_code = Some(error.code);
                }
            }
        }
    }
}

impl Drop for ActivityRecorder {
    fn drop(&mut self) {
        if let Some(mut entry) = self.entry.take() {
            entry.duration_ms =
                u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.ctx.stores.activity.record(entry);
        }
    }
}

/// Final enforcement, then the adapter; the call is recorded in the activity log when it
/// finishes (the one place every call handled by the hub ends).
pub(crate) async fn execute(
    ch: &Channel,
    call: CallRequest,
    progress: crate::skill::adapters::Progress,
) -> CallOutcome {
    let recorder = ActivityRecorder::start(&ch.ctx, &call);
    let outcome = gate_and_run(ch, call, progress).await;
    recorder.finish(&outcome);
    outcome
}

async fn gate_and_run(
    ch: &Channel,
    call: CallRequest,
    progress: crate::skill::adapters::Progress,
) -> CallOutcome {
    // Deadlines are root's: judged in root's time (the hub's clock plus the offset measured
    // at welcome).
    let now_ms = ch.ctx.connection.clock.root_now_ms();
    let decl = match ch
        .gate
        .check_clocked(&call, &ch.ctx.connection.clock, ch.ctx.published())
    {
        Ok(d) => d,
        Err(error) => {
            return CallOutcome::Error {
                adapter: None,
                error,
            };
        }
    };
    let remaining = Duration::from_millis(u64::try_from(call.expires_at_ms - now_ms).unwrap_or(0));
    let deadline = tokio::time::Instant::now() + remaining;
    let guard = CancelOnDrop::new(&ch.skill, &call.call_id);
    // The adapter sees the signed call's body: arguments, dry-run flag, idempotency key.
    let input = CallInput {
        call_id: call.call_id.clone(),
        body: call.body,
        deadline,
        progress,
        span: tracing::Span::current(),
    };
    let res = ch.skill.execute_call(decl, input).await;
    guard.disarm();
    match res {
        Ok(result) => CallOutcome::Ok {
            adapter: decl.name.to_owned(),
            result,
        },
        Err(error) => CallOutcome::Error {
            adapter: Some(decl.name.to_owned()),
            error,
        },
    }
}
