//! The audit trail: one hash-chained event per call and per operator action. [`Trail`] is
//! what the request path appends through; [`verify`] walks the chain; [`record`] writes an
//! event that is not a tool call (an operator's action, a hub's report). [`tree`] is the
//! trail's Merkle tree and [`checkpoint`] its signed checkpoints, what the trail's integrity
//! can be checked against outside root, and [`witness`] has others cosign them; [`sinks`]
//! ship it to where auditors look.

pub mod breakglass;
pub mod checkpoint;
pub(crate) mod committer;
pub mod export;
pub mod failure;
pub mod flusher;
pub mod health;
pub mod redaction;
pub mod refusals;
pub mod sinks;
pub mod tree;
pub mod witness;
pub mod writer;

use std::sync::Arc;

use arc_swap::ArcSwap;
use ractor::ActorRef;
use serde::{Deserialize, Serialize};

use crate::audit::redaction::Redactor;

use crate::audit::writer::{GENESIS_HASH, chain_hash};
use crate::store::Store;

/// Appending to the trail: the audit writer (swapped by the supervisor when it restarts),
/// its commit thread on SQLite, the trail's health, the committed head and the redactor
/// every event passes before it is stored.
pub struct Trail {
    pub writer: Arc<ArcSwap<ActorRef<writer::Msg>>>,
    /// Events go to it directly on embedded SQLite (see [`writer::append`]).
    pub commit_thread: writer::CommitThread,
    /// Whether the trail can be written; calls are refused while it cannot.
    pub health: Arc<health::AuditHealth>,
    /// The newest committed sequence number (the audit live stream waits on it).
    pub head: Arc<tokio::sync::watch::Sender<i64>>,
    /// How far the trail is on disk: what checkpoints and sinks may cover.
    pub flushed: Arc<flusher::Flushed>,
    /// When a call without a side effect is answered (`[audit] reads`).
    pub reads: crate::config::Durability,
    /// Governed calls not yet at their append (the writer's group-commit hint).
    pub running: Arc<writer::RunningCalls>,
    pub redactor: Redactor,
}

impl Trail {
    /// Appends the event of something with an effect (a write, an operator's action, a
    /// change of leases or keys) and waits until it is on disk; its sequence number.
    pub async fn append(
        &self,
        event: mcp_shared::event::OperationalEvent,
    ) -> Result<i64, writer::AppendError> {
        let flushed = crate::config::Durability::Flushed;
        writer::append(&self.writer.load(), &self.commit_thread, event, flushed).await
    }

    /// Keeps trying to record the trail's outage while it is unavailable (see
    /// [`health::watch`]), until `stop`.
    pub async fn watch_health(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let append = |mut event: mcp_shared::event::OperationalEvent| {
            let trail = self.clone();
            async move {
                let r = &mut event.redactions;
                trail
                    .redactor
                    .redact("request", &mut event.request, &[], &[], r);
                trail.append(event).await
            }
        };
        health::watch(self.health.clone(), append, stop).await;
    }

    /// Appends the event of a call without a side effect (a read, a listing, a preview) and
    /// waits as `[audit] reads` says: until it is committed (`written`) or on disk.
    pub async fn append_read(
        &self,
        event: mcp_shared::event::OperationalEvent,
    ) -> Result<i64, writer::AppendError> {
        writer::append(&self.writer.load(), &self.commit_thread, event, self.reads).await
    }
}

/// The first link that does not hold.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BrokenLink {
    pub seq: i64,
    pub event_id: Option<String>,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verification {
    pub ok: bool,
    pub checked: u64,
    pub head_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_broken: Option<BrokenLink>,
}

/// Walks the whole chain, oldest first, and names the first broken link.
pub async fn verify(store: &Store) -> Result<Verification, crate::store::Error> {
    let (mut last_seq, mut prev) = (0i64, GENESIS_HASH.to_string());
    let mut checked = 0u64;
    loop {
        let page = store.audit_chain_page(last_seq, 1000).await?;
        if page.is_empty() {
            break;
        }
        for (seq, json, prev_hash, hash) in page {
            let event_id = serde_json::from_str::<serde_json::Value>(&json)
                .ok()
                .and_then(|v| v.get("event_id").and_then(|e| e.as_str()).map(String::from));
            let broken = |reason: String| Verification {
                ok: false,
                checked,
                head_hash: prev.clone(),
                first_broken: Some(BrokenLink {
                    seq,
                    event_id: event_id.clone(),
                    reason,
                }),
            };
            if seq != last_seq + 1 {
                return Ok(broken(format!(
                    "sequence gap: expected {} but found {seq}",
                    last_seq + 1
                )));
            }
            if prev_hash != prev {
                return Ok(broken(
                    "prev_hash does not match the previous event's hash".into(),
                ));
            }
            if chain_hash(&prev_hash, &json) != hash {
                return Ok(broken(
                    "stored event does not match its hash (modified after it was written)".into(),
                ));
            }
            checked += 1;
            last_seq = seq;
            prev = hash;
        }
    }
    Ok(Verification {
        ok: true,
        checked,
        head_hash: prev,
        first_broken: None,
    })
}

/// An event root records besides tool calls: who (an operator, a managed target's hub) did
/// what, to which target.
pub struct Recorded<'a> {
    pub surface: mcp_shared::event::Surface,
    /// `operator:<name>`, `target:<target id>`.
    pub actor: String,
    /// `admin.<area>.<verb>` for operators (e.g. `admin.skill.disable`), `target.<area>.<verb>`
    /// for what a hub did.
    pub tool_id: String,
    pub target_id: Option<&'a str>,
    pub adapter: Option<String>,
    pub started_at: time::OffsetDateTime,
    /// What was asked for; redacted before it is stored.
    pub request: serde_json::Value,
    /// The trace the event joins (a fleet run's events share one); a new one when `None`.
    pub trace_id: Option<String>,
}

/// Records an action and its outcome (a summary, or the error) as one audit event, redacted,
/// and waits until it is committed; returns its event id. The answer to whoever asked is sent
/// only after this, like a tool call's.
pub async fn record(
    trail: &Trail,
    action: Recorded<'_>,
    outcome: Result<String, &mcp_shared::ToolError>,
) -> Result<String, mcp_shared::ToolError> {
    append(trail, action, outcome, None).await
}

/// Records a request refused before anything ran (a credential root does not know) as one
/// `denied` event whose policy check is `check`, and waits like [`record`].
pub async fn record_denied(
    trail: &Trail,
    action: Recorded<'_>,
    error: &mcp_shared::ToolError,
    check: &str,
) -> Result<String, mcp_shared::ToolError> {
    append(trail, action, Err(error), Some(check)).await
}

/// [`record`], or with `denied_by` a refusal by that check.
async fn append(
    trail: &Trail,
    action: Recorded<'_>,
    outcome: Result<String, &mcp_shared::ToolError>,
    denied_by: Option<&str>,
) -> Result<String, mcp_shared::ToolError> {
    use mcp_shared::event::{Actor, Decision, EventStatus, OperationalEvent, PolicyDecision};
    let mut request = action.request;
    let mut redactions = Vec::new();
    trail
        .redactor
        .redact("request", &mut request, &[], &[], &mut redactions);
    let check = match (denied_by, action.surface) {
        (Some(check), _) => check,
        (None, mcp_shared::event::Surface::Hub) => "hub",
        (None, _) => "operator",
    };
    let event = OperationalEvent {
        event_id: uuid::Uuid::now_v7().to_string(),
        trace_id: action
            .trace_id
            .unwrap_or_else(|| uuid::Uuid::now_v7().simple().to_string()),
        request_id: uuid::Uuid::now_v7().to_string(),
        surface: action.surface,
        actor: Actor {
            id: action.actor,
            session_id: None,
            audience: None,
            capability_profile: None,
        },
        target_id: action.target_id.map(str::to_owned),
        tool_id: action.tool_id,
        capability: None,
        policy_decision: PolicyDecision {
            decision: if denied_by.is_some() {
                Decision::Deny
            } else {
                Decision::Allow
            },
            reason: denied_by.and(outcome.as_ref().err()).map(|e| e.code),
            checks: vec![check.into()],
        },
        execution_adapter: action.adapter,
        dry_run: false,
        status: match (&outcome, denied_by) {
            (Ok(_), _) => EventStatus::Ok,
            (Err(_), Some(_)) => EventStatus::Denied,
            (Err(_), None) => EventStatus::Error,
        },
        started_at: action.started_at,
        finished_at: mcp_shared::time::now(),
        request,
        result_summary: outcome.as_ref().ok().cloned(),
        error: outcome.err().cloned(),
        redactions,
        retried: Vec::new(),
    };
    let event_id = event.event_id.clone();
    match trail.append(event).await {
        Ok(_) => Ok(event_id),
        Err(e) => {
            tracing::error!(error = %e, %event_id, "action not recorded");
            Err(trail.health.withheld())
        }
    }
}
