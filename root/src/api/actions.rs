//! Seed 003's assistant action surface, as the seed writes it: `POST
//! /api/ai-workspace/assistant/v1/actions` with `{"phase": "preview" | "execute", "input":
//! {"actionId": …, the action's arguments, "confirmationToken", "idempotencyKey"}}` under a
//! lease bearer (a run profile's run credential: its `assistantActions.endpoint` names this
//! path). Each request is one governed call, with the same policy, validation, routing and
//! audit as `/mcp` and `/v1/root/mcp/call`. The answer is in the seed's terms: a preview's
//! expected effect and confirmation token, an execute's result, a refusal's code and
//! message, and a forbidden action's safe alternatives.
//!
//! A read action only executes. A write previews first; its execute needs the preview's
//! `confirmationToken` and an `idempotencyKey` (a preview may carry the key, which it does
//! not use). The control fields have one spelling here, the seed's: their snake_case forms
//! inside `input` are refused by name.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use mcp_shared::contract::RoutingClass;
use mcp_shared::error::ToolError;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::api::error::{ApiError, status_of};
use crate::api::principal::LeaseAuth;
use crate::app::App;
use crate::call;
use crate::call::writes::Preview;

/// The path, relative to root's URL, that run profiles name as `assistantActions.endpoint`.
pub(crate) const ACTIONS_ENDPOINT: &str = "/api/ai-workspace/assistant/v1/actions";

/// An action call, in the seed's words.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ActionRequest {
    pub(crate) phase: ActionPhase,
    /// `actionId`, the action's arguments, and the write controls.
    pub(crate) input: Map<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ActionPhase {
    Preview,
    Execute,
}

/// A successful action call.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ActionAnswer {
    pub(crate) phase: ActionPhase,
    pub(crate) action_id: String,
    /// A preview's human-readable expected effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expected_effect: Option<Value>,
    /// A preview's token, which the execute presents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) confirmation_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) confirmation_expires_at: Option<String>,
    /// An execute's result (for a write: its phase, replay flag and the adapter's answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<Value>,
    /// What happened or what to do next, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) summary: Option<String>,
    pub(crate) event_id: String,
    pub(crate) trace_id: String,
    /// What root redacted from this answer (count and paths, never values).
    #[serde(default)]
    pub(crate) redactions: mcp_shared::event::RedactionSummary,
}

/// A refused or failed action call.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ActionRefusal {
    pub(crate) error: ActionError,
    pub(crate) action_id: String,
    pub(crate) event_id: String,
    pub(crate) trace_id: String,
    /// What root redacted from this answer (count and paths, never values).
    #[serde(default)]
    pub(crate) redactions: mcp_shared::event::RedactionSummary,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ActionError {
    pub(crate) code: mcp_shared::error::ErrorCode,
    pub(crate) message: String,
    pub(crate) retryable: bool,
    /// For a forbidden (destructive) action: what to do instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) safe_alternatives: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) details: Option<Value>,
}

/// `POST /api/ai-workspace/assistant/v1/actions`.
pub(crate) async fn post(
    State(app): State<Arc<App>>,
    LeaseAuth(lease): LeaseAuth,
    headers: HeaderMap,
    body: Result<Json<ActionRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = body.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let (action_id, arguments) = arguments_of(&app, request.phase, request.input)?;
    let ctx = crate::api::rest_call::rest_context(lease, &headers);
    let outcome = call::call(&app, ctx, &action_id, arguments).await;
    if let Some(e) = outcome.unaudited_error() {
        return Err(ApiError::of_tool(e));
    }
    let r = outcome.response;
    match (r.result, r.error) {
        (Some(value), None) => {
            let mut answer = answer(request.phase, action_id, value, r.event_id, r.trace_id);
            answer.redactions = r.redactions;
            Ok(Json(answer).into_response())
        }
        (_, error) => {
            let e = error.unwrap_or_else(|| {
                ToolError::new(mcp_shared::error::ErrorCode::Internal, "no result")
            });
            let refusal = ActionRefusal {
                error: ActionError {
                    code: e.code,
                    retryable: e.retryable,
                    safe_alternatives: e
                        .details
                        .as_ref()
                        .and_then(|d| d.get("alternatives"))
                        .cloned(),
                    details: e.details.clone(),
                    message: e.message,
                },
                action_id,
                event_id: r.event_id,
                trace_id: r.trace_id,
                redactions: r.redactions,
            };
            Ok((status_of(refusal.error.code), Json(refusal)).into_response())
        }
    }
}

/// The governed call's tool and arguments: `input` without `actionId`, with the write
/// controls in the call path's spelling.
fn arguments_of(
    app: &App,
    phase: ActionPhase,
    mut input: Map<String, Value>,
) -> Result<(String, Value), ApiError> {
    let action_id = match input.remove("actionId") {
        Some(Value::String(id)) if !id.is_empty() && id.len() <= 200 => id,
        Some(_) => {
            return Err(ApiError::bad_request(
                "input.actionId must be 1..200 characters",
            ));
        }
        None => return Err(ApiError::bad_request("input.actionId is required")),
    };
    for name in ["phase", "confirmation_token", "idempotency_key", "dry_run"] {
        if input.contains_key(name) {
            return Err(ApiError::bad_request(format!(
                "input.{name}: this surface takes the phase beside input and the controls as \
                 confirmationToken and idempotencyKey"
            )));
        }
    }
    let mut text = |name: &str| match input.remove(name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::bad_request(format!(
            "input.{name} must be a string"
        ))),
    };
    let token = text("confirmationToken")?;
    let key = text("idempotencyKey")?;
    // A name that is no tool goes to the call path as it is, which refuses it (a destructive
    // one with its safe alternatives) and audits the refusal.
    let Some(routing) = app
        .catalog
        .contracts
        .get(&action_id)
        .map(|e| e.contract.routing)
    else {
        return Ok((action_id, Value::Object(input)));
    };
    match (routing == RoutingClass::OperationalWrite, phase) {
        (true, ActionPhase::Preview) if token.is_some() => {
            return Err(ApiError::bad_request(
                "a preview takes no confirmationToken: it issues one",
            ));
        }
        (true, ActionPhase::Preview) => {
            input.insert("phase".into(), json!("preview"));
        }
        (true, ActionPhase::Execute) => {
            input.insert("phase".into(), json!("execute"));
            for (name, v) in [("confirmation_token", token), ("idempotency_key", key)] {
                if let Some(v) = v {
                    input.insert(name.into(), json!(v));
                }
            }
        }
        (false, ActionPhase::Preview) => {
            return Err(ApiError::bad_request(format!(
                "`{action_id}` is a read action: it has no preview; execute it"
            )));
        }
        (false, ActionPhase::Execute) if token.is_some() || key.is_some() => {
            return Err(ApiError::bad_request(format!(
                "`{action_id}` is a read action: it takes no confirmationToken or idempotencyKey"
            )));
        }
        (false, ActionPhase::Execute) => {}
    }
    Ok((action_id, Value::Object(input)))
}

/// A successful call in the seed's terms.
fn answer(
    phase: ActionPhase,
    action_id: String,
    value: Value,
    event_id: String,
    trace_id: String,
) -> ActionAnswer {
    let preview = (phase == ActionPhase::Preview)
        .then(|| serde_json::from_value::<Preview>(value.clone()).ok())
        .flatten();
    match preview {
        Some(p) => ActionAnswer {
            phase,
            action_id,
            expected_effect: Some(p.expected_effect),
            confirmation_token: Some(p.confirmation_token),
            confirmation_expires_at: Some(p.confirmation_expires_at),
            result: p.approval.map(|a| json!({ "approval": a })),
            summary: Some(p.summary),
            event_id,
            trace_id,
            redactions: Default::default(),
        },
        None => ActionAnswer {
            phase,
            action_id,
            expected_effect: None,
            confirmation_token: None,
            confirmation_expires_at: None,
            summary: value["summary"].as_str().map(str::to_owned),
            result: Some(value),
            event_id,
            trace_id,
            redactions: Default::default(),
        },
    }
}
