//! The audit trail over REST: query, one event, verification.

use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::store::AuditFilter;
use axum::Json;
use axum::extract::Path;
use axum::extract::Query;
use axum::extract::State;
use serde::Deserialize;
use std::sync::Arc;

use crate::api::bodies::{AuditEntry, AuditPage};
use crate::audit::Verification;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AuditQuery {
    target_id: Option<String>,
    tool_id: Option<String>,
    status: Option<String>,
    trace_id: Option<String>,
    /// `operator` or `lease:<session id>`.
    actor: Option<String>,
    /// RFC 3339.
    since: Option<String>,
    until: Option<String>,
    limit: Option<i64>,
    /// Opaque cursor from a previous page.
    cursor: Option<String>,
    /// `asc` for oldest first (exports).
    order: Option<String>,
}

pub(super) fn parse_time(name: &str, v: &Option<String>) -> Result<Option<i64>, ApiError> {
    v.as_deref()
        .map(|s| {
            mcp_shared::time::parse(s)
                .map(mcp_shared::time::unix_ms)
                .map_err(|e| ApiError::bad_request(format!("{name} must be RFC 3339: {e}")))
        })
        .transpose()
}

pub(super) async fn query_audit(
    State(app): State<Arc<App>>,
    _op: Operator,
    q: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<AuditPage>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let ascending = match q.order.as_deref() {
        None | Some("desc") => false,
        Some("asc") => true,
        Some(o) => {
            return Err(ApiError::bad_request(format!(
                "order must be asc or desc, not `{o}`"
            )));
        }
    };
    if let Some(s) = &q.status
        && !["ok", "error", "denied"].contains(&s.as_str())
    {
        return Err(ApiError::bad_request(format!(
            "status must be ok, error or denied, not `{s}`"
        )));
    }
    let cursor = q
        .cursor
        .as_deref()
        .map(|c| {
            c.strip_prefix("s:")
                .and_then(|n| n.parse::<i64>().ok())
                .ok_or_else(|| ApiError::bad_request("invalid cursor"))
        })
        .transpose()?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request("limit must be between 1 and 1000"));
    }
    let filter = AuditFilter {
        target_id: q.target_id,
        tool_id: q.tool_id,
        status: q.status,
        trace_id: q.trace_id,
        actor: q.actor,
        event_id: None,
        since_ms: parse_time("since", &q.since)?,
        until_ms: parse_time("until", &q.until)?,
        before_seq: if ascending { None } else { cursor },
        after_seq: if ascending { cursor } else { None },
        limit,
        ascending,
    };
    let rows = app
        .store
        .query_audit(&filter)
        .await
        .map_err(ApiError::internal)?;
    let next = (rows.len() as i64 == limit)
        .then(|| rows.last().map(|r| format!("s:{}", r.seq)))
        .flatten();
    let events = rows
        .into_iter()
        .map(|r| AuditEntry {
            event: r.event,
            seq: r.seq,
            hash: r.hash,
            prev_hash: None,
            replica_id: r.replica_id,
        })
        .collect();
    Ok(Json(AuditPage {
        events,
        next_cursor: next,
    }))
}

pub(super) async fn get_audit_event(
    State(app): State<Arc<App>>,
    _op: Operator,
    Path(event_id): Path<String>,
) -> Result<Json<AuditEntry>, ApiError> {
    let filter = AuditFilter {
        event_id: Some(event_id.clone()),
        limit: 1,
        ..Default::default()
    };
    let rows = app
        .store
        .query_audit(&filter)
        .await
        .map_err(ApiError::internal)?;
    let r = rows
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::not_found(format!("no audit event `{event_id}`")))?;
    Ok(Json(AuditEntry {
        event: r.event,
        seq: r.seq,
        hash: r.hash,
        prev_hash: Some(r.prev_hash),
        replica_id: r.replica_id,
    }))
}

pub(super) async fn verify_audit(
    State(app): State<Arc<App>>,
    _op: Operator,
) -> Result<Json<Verification>, ApiError> {
    crate::audit::verify(&app.store)
        .await
        .map(Json)
        .map_err(ApiError::internal)
}
