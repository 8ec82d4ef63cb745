//! Whether the audit trail can be written right now, and what root does while it cannot.
//!
//! Every call is audited before it is answered, so a trail that cannot be written (disk full,
//! database read-only or gone) must stop calls, not just hide their results:
//! - A batch the audit writer cannot commit (after its retries), or an append the writer does
//!   not answer within its deadline, marks the trail unavailable: logged once at `error` with
//!   the cause, `/readyz` answers 503 `audit_unavailable`, and the gauge
//!   `mcp_root_audit_available` drops to 0.
//! - While it is unavailable every call is refused before policy, validation or routing with
//!   `audit_unavailable` (REST: 503; MCP: JSON-RPC error -32603 whose `data.code` says so); it
//!   leaves no event (there is nowhere to write one) and is counted.
//! - [`watch`] then tries once a second to append one event, `admin.audit.outage` (actor
//!   `root`, status `error`), which records the outage itself: since when, the cause, how many
//!   calls were refused. The first append that commits ends the outage (logged at `info`), so
//!   the trail names its own gap and calls run again with no operator action.
//!
//! A call already executing when the trail fails gets `audit_unavailable` and its result is
//! withheld (no answer without its event). A write cannot take effect unrecorded that way
//! either: its execute consumes its confirmation token in the same store before it runs.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::event::{Actor, Decision, EventStatus, OperationalEvent, PolicyDecision, Surface};
use mcp_shared::time::{OffsetDateTime, format, now};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// How often [`watch`] tries to write the outage record while the trail is unavailable.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// `tool_id` of the event that records an outage of the trail.
pub(crate) const OUTAGE_EVENT: &str = "admin.audit.outage";

#[derive(Debug, Clone)]
struct Outage {
    since: OffsetDateTime,
    cause: String,
    refused: u64,
}

/// The audit trail's availability, shared by the audit writer, the call path, `/readyz` and
/// [`watch`].
#[derive(Debug, Default)]
pub struct AuditHealth {
    down: AtomicBool,
    outage: Mutex<Option<Outage>>,
    wake: tokio::sync::Notify,
    /// `fail_closed` export sinks too far behind, with `(lag, max_lag)` (`audit::sinks`):
    /// new calls are refused while any is.
    blocking: Mutex<std::collections::BTreeMap<String, (u64, u64)>>,
    blocked: AtomicBool,
}

impl AuditHealth {
    pub fn is_available(&self) -> bool {
        !self.down.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Outage>> {
        self.outage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The trail could not be written: `cause` says why (kept for the log and the outage
    /// record, never shown to callers).
    pub fn mark_unavailable(&self, cause: &str) {
        let mut outage = self.lock();
        if outage.is_some() {
            return;
        }
        *outage = Some(Outage {
            since: now(),
            cause: cause.to_owned(),
            refused: 0,
        });
        self.down.store(true, Ordering::Release);
        tracing::error!(%cause, "the audit trail cannot be written; refusing every call until it can");
        self.wake.notify_one();
    }

    /// Sink `name` is too far behind and blocks calls (`Some((lag, max_lag))`), or not.
    pub fn sink_behind(&self, name: &str, blocking: Option<(u64, u64)>) {
        let mut b = self
            .blocking
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match blocking {
            Some(lag) => {
                if b.insert(name.to_owned(), lag).is_none() {
                    tracing::error!(
                        sink = name,
                        lag = lag.0,
                        max_lag = lag.1,
                        "audit sink is behind (fail_closed): refusing new calls until it catches up"
                    );
                }
            }
            None => {
                if b.remove(name).is_some() {
                    tracing::info!(sink = name, "audit sink caught up: calls run again");
                }
            }
        }
        self.blocked.store(!b.is_empty(), Ordering::Release);
    }

    /// The refusal a call gets while a `fail_closed` sink is too far behind, if one is.
    pub fn sink_refusal(&self) -> Option<ToolError> {
        if !self.blocked.load(Ordering::Acquire) {
            return None;
        }
        let b = self
            .blocking
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (name, (lag, max)) = b.iter().next()?;
        Some(ToolError::new(
            ErrorCode::AuditUnavailable,
            format!(
                "audit sink `{name}` is {lag} events behind (fail_closed, at most {max}); root \
                 refuses new calls until it catches up (retry later)"
            ),
        ))
    }

    /// Since when the trail has been unavailable, if it is.
    pub fn unavailable_since(&self) -> Option<OffsetDateTime> {
        self.lock().as_ref().map(|o| o.since)
    }

    /// The refusal a call gets while the trail is unavailable (counted in the outage).
    pub fn refusal(&self) -> ToolError {
        let since = {
            let mut outage = self.lock();
            match outage.as_mut() {
                Some(o) => {
                    o.refused += 1;
                    format!(" since {}", format(o.since))
                }
                None => String::new(),
            }
        };
        ToolError::new(
            ErrorCode::AuditUnavailable,
            format!(
                "the audit trail cannot be written{since}; root refuses calls until it can, so \
                 nothing runs unrecorded (retry later)"
            ),
        )
    }

    /// The answer a call gets when its own event could not be committed.
    pub fn withheld(&self) -> ToolError {
        ToolError::new(
            ErrorCode::AuditUnavailable,
            "the audit trail cannot be written; the call's result is withheld and root refuses \
             calls until the trail is back (retry later)",
        )
    }

    /// Ends the outage that `recorded` describes, unless another one began meanwhile.
    fn recovered(&self, since: OffsetDateTime) -> bool {
        let mut outage = self.lock();
        if outage.as_ref().is_some_and(|o| o.since == since) {
            *outage = None;
            self.down.store(false, Ordering::Release);
            return true;
        }
        false
    }
}

/// The event that records an outage: appended by [`watch`], its commit ends the outage.
fn outage_event(o: &Outage) -> OperationalEvent {
    let at = now();
    let seconds = (at - o.since).as_seconds_f64();
    OperationalEvent {
        event_id: uuid::Uuid::now_v7().to_string(),
        trace_id: uuid::Uuid::now_v7().simple().to_string(),
        request_id: uuid::Uuid::now_v7().to_string(),
        surface: Surface::Admin,
        actor: Actor {
            id: "root".into(),
            session_id: None,
            audience: None,
            capability_profile: None,
        },
        target_id: None,
        tool_id: OUTAGE_EVENT.into(),
        capability: None,
        policy_decision: PolicyDecision {
            decision: Decision::Allow,
            reason: None,
            checks: vec!["audit_probe".into()],
        },
        execution_adapter: Some("root.audit_writer".into()),
        dry_run: false,
        status: EventStatus::Error,
        started_at: o.since,
        finished_at: at,
        request: json!({
            "unavailable_since": format(o.since),
            "recovered_at": format(at),
            "refused_calls": o.refused,
            "cause": o.cause,
        }),
        result_summary: None,
        error: Some(ToolError::new(
            ErrorCode::AuditUnavailable,
            format!(
                "the audit trail could not be written for {seconds:.1} s; {} calls were refused \
                 meanwhile and left no other event",
                o.refused
            ),
        )),
        redactions: Vec::new(),
        retried: Vec::new(),
    }
}

/// While the trail is unavailable, tries every [`PROBE_INTERVAL`] to append the outage's
/// record with `append` (the trail's, redacting it); the first that commits makes the trail
/// available again.
pub(crate) async fn watch<A, F>(health: Arc<AuditHealth>, append: A, stop: CancellationToken)
where
    A: Fn(OperationalEvent) -> F,
    F: std::future::Future<Output = Result<i64, super::failure::AppendError>>,
{
    loop {
        if health.is_available() {
            tokio::select! {
                () = stop.cancelled() => return,
                () = health.wake.notified() => {}
            }
            continue;
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(PROBE_INTERVAL) => {}
        }
        let Some(outage) = health.lock().clone() else {
            continue;
        };
        match append(outage_event(&outage)).await {
            Ok(seq) => {
                if health.recovered(outage.since) {
                    tracing::info!(
                        seq,
                        refused = outage.refused,
                        since = %format(outage.since),
                        "the audit trail is writable again; calls are accepted (outage recorded as {OUTAGE_EVENT})"
                    );
                }
            }
            Err(e) => tracing::debug!(error = %e, "audit trail still unavailable"),
        }
    }
}
