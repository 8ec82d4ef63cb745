//! Operator approvals of writes whose contract says `requires_approval` (the NLU authoring
//! plane's `apply_change`): the REST family `/v1/root/mcp/approvals` (list, show, approve,
//! reject; operator only) that `mcp-root admin approvals` and the web console use.
//!
//! An approval is opened by the write's preview (`writes.rs`) with the expected effect (for
//! an NLU change, its diff) and lives `limits.approval_ttl_sec`. Deciding it is an audited
//! admin event (`admin.approval.approve` / `admin.approval.reject`) that carries the decision
//! and the effect. Only a pending, unexpired approval can be decided; only an approved one
//! lets its execute run, once; a rejected or expired one never applies.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use mcp_shared::error::ErrorCode;
use mcp_shared::time::{format, from_unix_ms, now, unix_ms};
use serde::Deserialize;
use serde_json::json;

use crate::api::bodies::{ApprovalList, ApprovalView, Audited, Decided, DecisionRequest};
use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::store::{ApprovalRow, ApprovalStatus};

/// Whether the write waiting for approval was asked under a lease `op` issued (at the top of
/// its chain): separation of duties. The bootstrap admin token (break-glass, every use
/// audited) is not bound by it.
async fn own_request(app: &App, op: &Operator, session_id: &str) -> Result<bool, ApiError> {
    if op.name() == crate::operators::ADMIN {
        return Ok(false);
    }
    let chain = app
        .store
        .lease_chain(session_id)
        .await
        .map_err(ApiError::internal)?;
    let me = op.actor_id();
    Ok(chain
        .iter()
        .any(|row| row.lease.issued_by.as_deref() == Some(me.as_str())))
}

/// An approval as the REST family shows it (status freshness-normalized).
pub(crate) fn view(a: &ApprovalRow) -> ApprovalView {
    let now_ms = unix_ms(now());
    ApprovalView {
        approval_id: a.approval_id.clone(),
        status: a.status_at(now_ms),
        tool_id: a.tool_id.clone(),
        target_id: a.target_id.clone(),
        session_id: a.session_id.clone(),
        arguments: a.arguments.clone(),
        effect: a.effect.clone(),
        requested_at: format(from_unix_ms(a.requested_at_ms)),
        expires_at: format(from_unix_ms(a.expires_at_ms)),
        decided_at: a.decided_at_ms.map(|ms| format(from_unix_ms(ms))),
        reason: a.reason.clone(),
        preview_event_id: a.preview_event_id.clone(),
        applied_event_id: a.applied_event_id.clone(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// `pending` (default), `approved`, `rejected`, `applied`, `failed`, `expired` or `all`.
    status: Option<String>,
    limit: Option<i64>,
}

/// `GET /v1/root/mcp/approvals?status=pending|…|all&limit=N`.
pub(crate) async fn list(
    State(app): State<Arc<App>>,
    _op: Operator,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<ApprovalList>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let want = q.status.unwrap_or_else(|| "pending".into());
    // `None`: all of them.
    let want = match (want.as_str(), ApprovalStatus::named(&want)) {
        ("all", _) => None,
        (_, Some(status)) => Some(status),
        (_, None) => {
            let known: Vec<&str> = ApprovalStatus::ALL.iter().map(|s| s.as_str()).collect();
            return Err(ApiError::bad_request(format!(
                "status must be one of {}, all",
                known.join(", ")
            )));
        }
    };
    let limit = q.limit.unwrap_or(100).clamp(1, 1_000);
    // `expired` is derived from pending/approved rows; filter after normalizing.
    let rows = app
        .store
        .list_approvals(None, 1_000)
        .await
        .map_err(ApiError::internal)?;
    let now_ms = unix_ms(now());
    let approvals = rows
        .iter()
        .filter(|a| want.is_none_or(|w| a.status_at(now_ms) == w))
        .take(limit as usize)
        .map(view)
        .collect();
    Ok(Json(ApprovalList { approvals }))
}

/// `GET /v1/root/mcp/approvals/{id}`.
pub(crate) async fn show(
    State(app): State<Arc<App>>,
    _op: Operator,
    Path(id): Path<String>,
) -> Result<Json<ApprovalView>, ApiError> {
    app.store
        .get_approval(Some(&id), None)
        .await
        .map_err(ApiError::internal)?
        .map(|a| Json(view(&a)))
        .ok_or_else(|| ApiError::not_found(format!("no approval `{id}`")))
}

/// `POST /v1/root/mcp/approvals/{id}/approve|reject` with an optional `{"reason": "…"}`:
/// one audit event naming the operator, with the effect approved or rejected (a refusal
/// too: an unknown approval, one already decided or expired).
pub(crate) async fn decide(
    State(app): State<Arc<App>>,
    op: Operator,
    Path((id, decision)): Path<(String, String)>,
    body: Option<Json<DecisionRequest>>,
) -> Result<(StatusCode, Json<Audited<Decided>>), ApiError> {
    let reason = body.and_then(|Json(b)| b.reason);
    let before = app
        .store
        .get_approval(Some(&id), None)
        .await
        .map_err(ApiError::internal)?;
    let asked = crate::ops::audited::Asked {
        tool_id: match decision.as_str() {
            "approve" => "admin.approval.approve",
            "reject" => "admin.approval.reject",
            _ => "admin.approval.unknown",
        },
        target_id: before.as_ref().map(|b| b.target_id.clone()),
        adapter: Some("root.approvals".into()),
        request: json!({
            "approval_id": id,
            "decision": decision,
            "reason": reason,
            "tool_id": before.as_ref().map(|b| &b.tool_id),
            "effect": before.as_ref().map(|b| &b.effect),
            "preview_event_id": before.as_ref().map(|b| &b.preview_event_id),
        }),
    };
    let (after, event_id) = crate::api::audited::audited(&app, &op, asked, async {
        let to = match decision.as_str() {
            "approve" => ApprovalStatus::Approved,
            "reject" => ApprovalStatus::Rejected,
            other => {
                return Err(ApiError::bad_request(format!(
                    "decision must be approve or reject, not `{other}`"
                )));
            }
        };
        if reason.as_ref().is_some_and(|r| r.len() > 1_000) {
            return Err(ApiError::bad_request("reason must be at most 1000 bytes"));
        }
        let Some(before) = before else {
            return Err(ApiError::not_found(format!("no approval `{id}`")));
        };
        if to == ApprovalStatus::Approved && own_request(&app, &op, &before.session_id).await? {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::Forbidden,
                format!(
                    "{} issued the lease that asked for this write: an approver never approves their own request (another approver decides)",
                    op.actor_id()
                ),
            ));
        }
        let changed = app
            .store
            .transition_approval(
                &id,
                ApprovalStatus::Pending,
                to,
                unix_ms(now()),
                reason.as_deref(),
                None,
            )
            .await
            .map_err(ApiError::internal)?;
        if !changed {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::Conflict,
                format!(
                    "approval {id} is {} and can no longer be decided",
                    before.status_at(unix_ms(now()))
                ),
            ));
        }
        let summary = format!("{} {to} by {}", before.tool_id, op.actor_id());
        let after = app
            .store
            .get_approval(Some(&id), None)
            .await
            .map_err(ApiError::internal)?
            .unwrap_or(before);
        Ok((after, summary))
    })
    .await?;
    Ok((
        StatusCode::OK,
        Json(Audited {
            item: Decided {
                approval: view(&after),
            },
            event_id,
        }),
    ))
}
