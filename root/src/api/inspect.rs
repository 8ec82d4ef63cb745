//! Operator reads of a target's tools: `POST /v1/root/hubs/{target_id}/read` with
//! `{"tool_id": …, "arguments": {…}}`, for data only a tool provides (health checks, runtime
//! summary, ProfileOps sessions and incidents) in the console's target inspector.
//!
//! The read runs through the one governed call path (`call::call`) under a short-lived lease
//! root issues to the operator: audience [`AUDIENCE`], the narrowest read-only capability
//! profile that grants the tool, [`READER_TTL`]. So policy, limits, redaction and the audit
//! trail apply as to any client, the event names the operator as its actor with that lease as
//! its session, and the lease is listed with the others (its issue is an operator event).
//! Its bearer never leaves root (only the lease entry is kept).
//!
//! Invariant: only `read` tools can be called this way; writes need a client's lease and the
//! preview/confirmation flow.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use mcp_shared::contract::{RoutingClass, SideEffectClass};
use mcp_shared::error::ErrorCode;
use mcp_shared::event::Surface;
use mcp_shared::time::now;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::call::{self, CallContext};
use crate::leases::manager::LeaseEntry;

/// Audience of the leases operator reads run under.
pub(crate) const AUDIENCE: &str = "operator-console";
/// Lifetime of such a lease; a new one is issued when less than [`READER_RENEW`] is left.
pub(crate) const READER_TTL: Duration = Duration::from_secs(600);
const READER_RENEW: Duration = Duration::from_secs(60);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadBody {
    tool_id: String,
    #[serde(default)]
    arguments: Option<Value>,
}

/// The reader lease for `(target, profile)`, issued when missing or about to end.
async fn reader_lease(
    app: &App,
    op: &Operator,
    target_id: &str,
    profile_name: &str,
) -> Result<Arc<LeaseEntry>, ApiError> {
    let key = (target_id.to_string(), profile_name.to_string());
    let usable = || {
        let renew_at = now() + READER_RENEW;
        app.logins
            .readers
            .get(&key)
            .filter(|l| l.is_usable() && l.lease().deadline_at > renew_at)
            .map(|l| l.clone())
    };
    if let Some(l) = usable() {
        return Ok(l);
    }
    // One issuer at a time; a read that waited finds the lease the one before it issued.
    let _issuing = app.logins.issuing.lock().await;
    if let Some(l) = usable() {
        return Ok(l);
    }
    let entry = crate::ops::leases::issue_to_operator(
        app,
        op,
        &crate::ops::leases::ToOperator {
            target_id,
            profile: profile_name,
            audience: AUDIENCE,
            ttl: READER_TTL,
            lineage: None,
            trace_id: None,
            purpose: "the operator's reads",
        },
    )
    .await?;
    app.logins.readers.insert(key, entry.clone());
    Ok(entry)
}

/// The reader lease an operator's read of `contract` on `target_id` runs under (issued when
/// missing or about to end), touched; refused when the target is not enrolled or no
/// read-only profile grants the tool.
async fn reader_for(
    app: &App,
    op: &Operator,
    target_id: &str,
    contract: &mcp_shared::ToolContract,
) -> Result<Arc<LeaseEntry>, ApiError> {
    if !app.hubs.enrolments.contains_key(target_id) {
        return Err(ApiError::not_found(format!(
            "target `{target_id}` is not enrolled"
        )));
    }
    let Some(profile) = crate::ops::leases::read_profile(app, &contract.required_capability) else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::CapabilityNotGranted,
            format!(
                "no read-only capability profile grants `{}`",
                contract.required_capability
            ),
        ));
    };
    let lease = reader_lease(app, op, target_id, &profile).await?;
    lease.touch();
    Ok(lease)
}

/// Whether an operator may run `contract` as a read (reader leases run only reads).
pub(crate) fn is_read(contract: &mcp_shared::ToolContract) -> bool {
    contract.side_effect == SideEffectClass::Read
        && contract.routing != RoutingClass::OperationalWrite
}

/// `POST /v1/root/hubs/{target_id}/read`.
pub(crate) async fn operator_read(
    State(app): State<Arc<App>>,
    op: Operator,
    Path(target_id): Path<String>,
    headers: HeaderMap,
    body: Result<Json<ReadBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let Some(entry) = app.catalog.contracts.get(&body.tool_id).cloned() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::UnknownTool,
            format!("no tool `{}`", body.tool_id),
        ));
    };
    let c = &entry.contract;
    if !is_read(c) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            format!(
                "`{}` is not a read; writes run under a client's lease with preview and confirmation",
                c.tool_id
            ),
        ));
    }
    let lease = reader_for(&app, &op, &target_id, c).await?;
    let trace = call::trace(headers.get("traceparent").and_then(|v| v.to_str().ok()));
    let ctx = CallContext {
        surface: Surface::Rest,
        lease,
        trace_id: trace.id,
        span: trace.span,
        request_id: uuid::Uuid::now_v7().to_string(),
        cancel: None,
        operator: Some(op.id.clone()),
        confirmation: None,
        progress: None,
        resumed: false,
    };
    let outcome = call::call(
        &app,
        ctx,
        &body.tool_id,
        body.arguments.unwrap_or_else(|| json!({})),
    )
    .await;
    if let Some(e) = outcome.unaudited_error() {
        return Err(ApiError::of_tool(e));
    }
    let status = outcome
        .response
        .error
        .as_ref()
        .map(|e| crate::api::error::status_of(e.code))
        .unwrap_or(StatusCode::OK);
    Ok((status, Json(outcome.response)).into_response())
}
