//! A routed call: sent to the target's link (here or on the replica holding the hub),
//! retried once where the contract allows, cancelled on the hub if the caller goes away; the
//! hub's progress reports go to the caller's sink (`progress_channel`), redacted by root.

use mcp_shared::protocol::CallBody;
use std::sync::Arc;
use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::event::OperationalEvent;
use mcp_shared::protocol::CallOutcome;
use mcp_shared::time::now;
use tracing::Instrument;

use crate::app::App;
use crate::call::context::CallContext;
use crate::catalog::ContractEntry;
use crate::hubs::router;

/// [`route_to`] under the contract's retry policy, all inside the tool's deadline: a failure
/// the policy names (`target_offline`, `busy`) is tried again after its backoff while the
/// lease is usable and the target's skill is on, each attempt a new signed call with the same
/// arguments (and idempotency key); the failed attempts are recorded in the event. A write is
/// retried only for a dry run or an execute that carries an idempotency key.
pub(crate) async fn route_retrying(
    app: &App,
    ctx: &CallContext,
    entry: &ContractEntry,
    target_id: &str,
    input: CallBody,
    event: &mut OperationalEvent,
) -> CallOutcome {
    let c = &entry.contract;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(c.timeout_ms);
    let safe = c.side_effect == mcp_shared::contract::SideEffectClass::Read
        || input.dry_run
        || input.idempotency_key.is_some();
    let policy = c.retry.as_ref().filter(|_| safe);
    let mut attempt = 1u32;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let outcome = route_for(app, ctx, entry, target_id, input.clone(), left).await;
        let Some(p) = policy else {
            return outcome;
        };
        let CallOutcome::Error { error: e, .. } = &outcome else {
            return outcome;
        };
        let wait = Duration::from_millis(p.backoff_ms.saturating_mul(1 << (attempt - 1).min(16)));
        let retry = p.on.contains(&e.code)
            && attempt < p.attempts
            && tokio::time::Instant::now() + wait < deadline
            && ctx.lease.is_usable()
            && app.hubs.skill_open(target_id);
        if !retry {
            return outcome;
        }
        event.retried.push(mcp_shared::event::RetriedAttempt {
            attempt,
            code: e.code,
            message: e.message.clone(),
        });
        let cancelled = async {
            match &ctx.cancel {
                Some(ct) => ct.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = cancelled => return CallOutcome::Error {
                adapter: outcome.into_parts().0,
                error: ToolError::new(ErrorCode::Cancelled, format!("the client cancelled `{}` between attempts", c.tool_id)),
            },
        }
        attempt += 1;
    }
}

/// Routes an operational call to `target_id` and waits for its result until the tool's
/// deadline; past it the hub is told to cancel and the caller gets `timeout`. When another
/// replica of the zone holds the target's hub, the call is forwarded to it (same deadline,
/// same cancellation; the audit event stays here).
pub(crate) async fn route_to(
    app: &App,
    ctx: &CallContext,
    entry: &ContractEntry,
    target_id: &str,
    input: CallBody,
) -> CallOutcome {
    let timeout = Duration::from_millis(entry.contract.timeout_ms);
    route_for(app, ctx, entry, target_id, input, timeout).await
}

/// [`route_to`] with `timeout` left of the call's deadline.
pub(super) async fn route_for(
    app: &App,
    ctx: &CallContext,
    entry: &ContractEntry,
    target_id: &str,
    body: CallBody,
    timeout: Duration,
) -> CallOutcome {
    let c = &entry.contract;
    let lease = ctx.lease.lease();
    // The route's span: the hub's spans attach to it (its traceparent rides in the call).
    let span = mcp_shared::otel_span!("route", target = %target_id);
    let traceparent = mcp_shared::otel::traceparent_of(&span);
    let routed = router::RoutedCall {
        call_id: uuid::Uuid::now_v7().to_string(),
        target_id: target_id.to_owned(),
        session_id: lease.session_id.clone(),
        tool_id: c.tool_id.clone(),
        capability: c.required_capability.clone(),
        body,
        trace_id: ctx.trace_id.clone(),
        expires_at_ms: mcp_shared::time::unix_ms(now()) + timeout.as_millis() as i64,
        progress: ctx.progress.clone(),
        traceparent,
    };
    async move {
        if let Some(zone) = &app.zone
            && !app.hubs.connected(target_id)
            && let Some(owner) = zone.owner_of(target_id).await
        {
            return crate::replica::forward::route(
                zone,
                &owner,
                routed,
                timeout,
                ctx.cancel.as_ref(),
            )
            .await;
        }
        route_local(app, routed, timeout, ctx.cancel.as_ref()).await
    }
    .instrument(span)
    .await
}

/// Routes a call through this replica's router (its hub session, or `target_offline`) and
/// waits until `timeout`; past it, or when `cancel` fires, the hub is told to stop.
pub(crate) async fn route_local(
    app: &App,
    routed: router::RoutedCall,
    timeout: Duration,
    cancel: Option<&tokio_util::sync::CancellationToken>,
) -> CallOutcome {
    let call_id = routed.call_id.clone();
    let target_id = routed.target_id.clone();
    let tool_id = routed.tool_id.clone();
    // Dropped before the answer (the caller went away, e.g. a forwarding replica gave up):
    // the hub is told to stop.
    let mut guard = CancelOnDrop {
        sessions: Some(app.hubs.links.clone()),
        target_id: target_id.clone(),
        call_id: call_id.clone(),
        stopping: app.shutdown.clone(),
    };
    let _routing = app.metrics.targets.routing(&target_id);
    let (tx, pending) = ractor::concurrency::oneshot();
    router::route(&app.hubs.links, routed, tx.into());
    let cancelled = async {
        match cancel {
            Some(ct) => ct.cancelled().await,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        r = tokio::time::timeout(timeout, pending) => r,
        () = cancelled => {
            return CallOutcome::failed(ToolError::new(ErrorCode::Cancelled, format!("the client cancelled `{tool_id}`; the target was told to stop")));
        }
    };
    let answer = match outcome {
        Ok(Ok(answer)) => answer,
        // The session went away with the call (connection closed): the target is offline.
        Ok(Err(_closed)) => CallOutcome::failed(ToolError::new(
            ErrorCode::TargetOffline,
            format!("target `{target_id}` disconnected during the call"),
        )),
        Err(_elapsed) => {
            return CallOutcome::failed(ToolError::new(
                ErrorCode::Timeout,
                format!(
                    "`{tool_id}` did not answer within {} ms; the target was told to cancel",
                    timeout.as_millis()
                ),
            ));
        }
    };
    // Answered (or the session is gone): nothing left to cancel on the hub.
    guard.sessions = None;
    answer
}

/// Tells the target's session to cancel a call unless disarmed (`sessions` taken) first, or
/// dropped because root is stopping: nobody asked that call to stop (a write under an
/// idempotency key then finishes on its hub and answers the retry after root's restart).
struct CancelOnDrop {
    sessions: Option<Arc<router::Links>>,
    target_id: String,
    call_id: String,
    stopping: tokio_util::sync::CancellationToken,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.stopping.is_cancelled() {
            return;
        }
        if let Some(sessions) = self.sessions.take() {
            router::cancel(
                &sessions,
                &self.target_id,
                std::mem::take(&mut self.call_id),
            );
        }
    }
}

/// Progress reports queued per call; more are dropped (progress is best effort).
const PROGRESS_QUEUE: usize = 64;

/// A progress sink whose reports arrive, in order, on the returned receiver (a report the
/// queue cannot take at once is dropped).
pub(crate) fn progress_channel() -> (
    router::ProgressSink,
    tokio::sync::mpsc::Receiver<router::Progress>,
) {
    let (tx, rx) = tokio::sync::mpsc::channel(PROGRESS_QUEUE);
    (
        router::ProgressSink::new(move |p| {
            let _ = tx.try_send(p);
        }),
        rx,
    )
}

/// `p` with root's redaction applied to its message (a hub redacts too; root does again).
pub(crate) fn redacted(app: &App, mut p: router::Progress) -> router::Progress {
    if let Some(m) = &p.message {
        p.message = Some(
            app.audit
                .redactor
                .redact_text("progress", m, &mut Vec::new()),
        );
    }
    p
}
