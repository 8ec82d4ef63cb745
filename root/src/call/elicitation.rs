//! Write confirmation through MCP elicitation: when a client that declared the elicitation
//! capability (form mode) calls a write tool with `phase: "execute"`, an `idempotency_key`
//! and no `confirmation_token`, root runs the preview, asks the person at the client through
//! `elicitation/create` whether to apply the expected effect, and executes with the preview's
//! token when they accept. Declined, cancelled or unanswered: nothing runs and the caller gets
//! `confirmation_required`.
//!
//! Both phases go through the governed call path and are audited (the preview, then the
//! execute). The two-call flow always works too; clients without elicitation get
//! `confirmation_required` as before. A key this lease already used is a replay: no question.
//! On 2026-07-28 the same confirmation runs as a multi-round-trip request (`mcp::confirm`).

use std::time::Duration;

use mcp_shared::contract::RoutingClass;
use mcp_shared::error::{ErrorCode, ToolError, ToolResponse};
use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, RequestContext};
use serde_json::{Value, json};

use crate::app::App;
use crate::call::writes::{Controls, Phase, Preview};
use crate::call::{self, CallContext, Outcome};
use crate::leases::manager::LeaseEntry;
use crate::store::IdempotencyKey;

/// Whether this call should be confirmed through elicitation instead of failing with
/// `confirmation_required`.
/// `form`: whether the client can answer a form elicitation (declared at `initialize` for a
/// session, in each request's `_meta` on 2026-07-28).
pub(crate) async fn applies(
    app: &App,
    form: bool,
    lease: &LeaseEntry,
    tool_id: &str,
    arguments: &Value,
) -> bool {
    let Some(entry) = app.catalog.contracts.get(tool_id) else {
        return false;
    };
    if entry.contract.routing != RoutingClass::OperationalWrite {
        return false;
    }
    // Malformed control fields are refused by the normal path, by name.
    let Some(Ok(controls)) = Controls::read(arguments) else {
        return false;
    };
    let (Phase::Execute, None, false, Some(key)) = (
        &controls.phase,
        &controls.confirmation_token,
        controls.dry_run,
        &controls.idempotency_key,
    ) else {
        return false;
    };
    if !form {
        return false;
    }
    // A used key is answered as a replay by the normal path; nothing to confirm.
    let owner = lease.idempotency_owner();
    let at = IdempotencyKey {
        owner: &owner,
        target_id: &lease.lease().target_id,
        tool_id,
        key,
    };
    !matches!(app.store.get_idempotency(&at).await, Ok(Some(_)))
}

/// Whether a session's client can answer a form elicitation (declared at `initialize`).
pub(crate) fn session_has_form(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

/// What the person is asked about a previewed write.
pub(crate) fn question(tool_id: &str, target: &str, preview: &Preview) -> String {
    let effect = &preview.expected_effect;
    let described = effect["description"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| serde_json::to_string_pretty(effect).unwrap_or_default());
    format!(
        "An agent asks to run `{tool_id}` on `{target}`. Expected effect:\n{described}\n\nApply this change?"
    )
}

/// The preview an execute without a token is asked about: the governed preview call (an
/// audited dry run) of the same arguments and its typed answer; the call's outcome as it is
/// when it did not preview (refused, failed, or not a write).
pub(crate) async fn preview_first(
    app: &App,
    ctx: CallContext,
    tool_id: &str,
    arguments: &Value,
) -> Result<(Outcome, Preview), Outcome> {
    let mut preview_args = arguments.clone();
    if let Some(o) = preview_args.as_object_mut() {
        o.remove("idempotency_key");
        o.insert("phase".into(), json!("preview"));
    }
    let first = call::call(app, ctx, tool_id, preview_args).await;
    let preview = match &first.response.result {
        Some(v) if first.response.ok => serde_json::from_value::<Preview>(v.clone()).ok(),
        _ => None,
    };
    match preview {
        Some(p) => Ok((first, p)),
        None => Err(first),
    }
}

/// Preview, ask, then execute (or not). `new_ctx` builds the governed call's context (one per
/// phase, same trace).
pub(crate) async fn confirm_and_execute(
    app: &App,
    ctx: &RequestContext<RoleServer>,
    new_ctx: impl Fn() -> CallContext,
    tool_id: &str,
    arguments: Value,
) -> Outcome {
    let (first, preview) = match preview_first(app, new_ctx(), tool_id, &arguments).await {
        Ok(previewed) => previewed,
        Err(outcome) => return outcome,
    };
    let target = new_ctx().lease.lease().target_id.clone();
    let message = question(tool_id, &target, &preview);
    let schema = ElicitationSchema::builder()
        .required_bool_property("confirm", |b| b.title("Apply this change"))
        .build_unchecked();
    let ttl = Duration::from_secs(app.config.limits.confirmation_ttl_sec);
    let answer = ctx
        .peer
        .create_elicitation_with_timeout(
            ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema: schema,
            },
            Some(ttl),
        )
        .await;
    let refused = |why: String| Outcome {
        response: ToolResponse {
            ok: false,
            tool_id: tool_id.to_owned(),
            result: None,
            error: Some(
                ToolError::new(ErrorCode::ConfirmationRequired, why)
                    .with_details(json!({ "preview_event_id": first.response.event_id })),
            ),
            event_id: first.response.event_id.clone(),
            trace_id: first.response.trace_id.clone(),
            redactions: Default::default(),
        },
        unknown_tool: false,
        unaudited: false,
        kept: None,
    };
    match answer {
        Ok(r)
            if r.action == ElicitationAction::Accept
                && r.content
                    .as_ref()
                    .and_then(|c| c.get("confirm"))
                    .and_then(Value::as_bool)
                    == Some(true) =>
        {
            let mut exec = arguments;
            if let Some(o) = exec.as_object_mut() {
                o.insert(
                    "confirmation_token".into(),
                    json!(preview.confirmation_token),
                );
            }
            call::call(app, new_ctx(), tool_id, exec).await
        }
        Ok(r) => refused(format!(
            "the change was not confirmed ({}); nothing was changed",
            match r.action {
                ElicitationAction::Accept => "accepted without confirm: true",
                ElicitationAction::Decline => "declined",
                ElicitationAction::Cancel => "cancelled",
                _ => "not accepted",
            }
        )),
        Err(e) => refused(format!(
            "confirmation could not be obtained ({e}); nothing was changed. Call with phase \"preview\" and execute with its confirmation_token instead"
        )),
    }
}
