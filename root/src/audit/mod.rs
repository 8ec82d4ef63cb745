//! Audit trail reads: verification of the hash chain.

pub mod committer;
pub mod health;
pub mod writer;

use serde::Serialize;

use crate::audit::writer::{GENESIS_HASH, chain_hash};
use crate::store::Store;

/// The first link that does not hold.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct BrokenLink {
    pub seq: i64,
    pub event_id: Option<String>,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    pub ok: bool,
    pub checked: u64,
    pub head_hash: String,
    #[serde(skip_serializing_if = "Option::is_none")]
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
}

/// An operator action to record in the trail (surface `admin`).
pub struct AdminAction<'a> {
    /// `admin.<area>.<verb>`, e.g. `admin.skill.disable`.
    pub tool_id: String,
    pub target_id: Option<&'a str>,
    pub adapter: Option<String>,
    pub started_at: time::OffsetDateTime,
    /// What the operator asked for; redacted before it is stored.
    pub request: serde_json::Value,
}

/// Records an operator action and its outcome as one audit event naming the operator; see
/// [`record`].
pub async fn record_admin(
    app: &crate::app::App,
    op: &crate::api::Operator,
    action: AdminAction<'_>,
    outcome: Result<String, &mcp_shared::ToolError>,
) -> Result<String, crate::api::ApiError> {
    let action = Recorded {
        surface: mcp_shared::event::Surface::Admin,
        actor: op.actor_id(),
        tool_id: action.tool_id,
        target_id: action.target_id,
        adapter: action.adapter,
        started_at: action.started_at,
        request: action.request,
    };
    record(app, action, outcome).await
}

/// What an operator asked for, for [`audited`].
pub struct Asked {
    /// `admin.<area>.<verb>`.
    pub tool_id: &'static str,
    pub target_id: Option<String>,
    pub adapter: Option<String>,
    /// What the operator asked for (never a secret it is handed); redacted before storing.
    pub request: serde_json::Value,
}

/// Runs an operator action and records it as one audit event naming the operator, whatever
/// its outcome: the summary it returns, or the refusal (whose answer then names the event).
/// Returns the action's value and the event id.
pub async fn audited<T>(
    app: &crate::app::App,
    op: &crate::api::Operator,
    asked: Asked,
    run: impl std::future::Future<Output = Result<(T, String), crate::api::ApiError>>,
) -> Result<(T, String), crate::api::ApiError> {
    let started_at = mcp_shared::time::now();
    let outcome = run.await;
    let action = AdminAction {
        tool_id: asked.tool_id.to_owned(),
        target_id: asked.target_id.as_deref(),
        adapter: asked.adapter,
        started_at,
        request: asked.request,
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

/// Records an action and its outcome (a summary, or the error) as one audit event, redacted,
/// and waits until it is committed; returns its event id. The answer to whoever asked is sent
/// only after this, like a tool call's.
pub async fn record(
    app: &crate::app::App,
    action: Recorded<'_>,
    outcome: Result<String, &mcp_shared::ToolError>,
) -> Result<String, crate::api::ApiError> {
    use mcp_shared::event::{Actor, Decision, EventStatus, OperationalEvent, PolicyDecision};
    let mut request = action.request;
    let mut redactions = Vec::new();
    app.redactor
        .redact("request", &mut request, &[], &[], &mut redactions);
    let check = match action.surface {
        mcp_shared::event::Surface::Hub => "hub",
        _ => "operator",
    };
    let event = OperationalEvent {
        event_id: uuid::Uuid::now_v7().to_string(),
        trace_id: uuid::Uuid::now_v7().simple().to_string(),
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
            decision: Decision::Allow,
            reason: None,
            checks: vec![check.into()],
        },
        execution_adapter: action.adapter,
        dry_run: false,
        status: if outcome.is_ok() {
            EventStatus::Ok
        } else {
            EventStatus::Error
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
    match crate::audit::writer::append(&app.actors.audit.load(), &app.audit_commit_thread, event)
        .await
    {
        Ok(_) => Ok(event_id),
        Err(e) => {
            tracing::error!(error = %e, %event_id, "action not recorded");
            Err(crate::api::ApiError::of_tool(&app.audit_health.withheld()))
        }
    }
}
