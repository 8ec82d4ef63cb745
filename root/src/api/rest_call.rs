//! `POST /v1/root/mcp/call`: the governed call over REST.

use axum::response::IntoResponse;

use crate::api::error::ApiError;
use crate::api::error::{retry_after, status_of};
use crate::api::oauth;
use crate::api::principal::LeaseAuth;
use crate::app::App;
use crate::call;
use crate::call::CallContext;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;
use mcp_shared::error::ErrorCode;
use mcp_shared::event::Surface;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CallBody {
    tool_id: String,
    #[serde(default)]
    arguments: Option<Value>,
}

pub(super) async fn rest_call(
    State(app): State<Arc<App>>,
    LeaseAuth(lease): LeaseAuth,
    headers: HeaderMap,
    body: Result<Json<CallBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let ctx = rest_context(lease, &headers);
    let arguments = body.arguments.unwrap_or_else(|| json!({}));
    let outcome = call::call(&app, ctx, &body.tool_id, arguments).await;
    if let Some(e) = outcome.unaudited_error() {
        return Err(ApiError::of_tool(e));
    }
    let status = outcome
        .response
        .error
        .as_ref()
        .map(|e| status_of(e.code))
        .unwrap_or(StatusCode::OK);
    let needs_scope = outcome
        .response
        .error
        .as_ref()
        .is_some_and(|e| e.code == ErrorCode::CapabilityNotGranted);
    let retry_after = outcome.response.error.as_ref().and_then(retry_after);
    let mut res = (status, Json(outcome.response)).into_response();
    if let Some(secs) = retry_after {
        res.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    // An OAuth client learns which scope (capability profile) would allow the call.
    if needs_scope && let Some(c) = oauth::insufficient_scope(&app, &headers, &body.tool_id) {
        res.headers_mut().insert(header::WWW_AUTHENTICATE, c);
    }
    Ok(res)
}

/// The context of a governed call made over REST under `lease` (`/call`, the action
/// endpoint): a trace continued from the request's `traceparent`.
pub(crate) fn rest_context(
    lease: Arc<crate::leases::manager::LeaseEntry>,
    headers: &HeaderMap,
) -> CallContext {
    let trace = call::trace(headers.get("traceparent").and_then(|v| v.to_str().ok()));
    CallContext {
        surface: Surface::Rest,
        lease,
        trace_id: trace.id,
        span: trace.span,
        request_id: uuid::Uuid::now_v7().to_string(),
        cancel: None,
        operator: None,
        confirmation: None,
        progress: None,
        resumed: false,
    }
}
