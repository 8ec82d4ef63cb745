//! Write confirmation on MCP 2026-07-28 by multi-round-trip requests (SEP-2322), where a
//! server may not send requests of its own: a write called with `phase: "execute"`, an
//! `idempotency_key` and no `confirmation_token`, by a client that declares form
//! elicitation in the request's `_meta`, runs its preview (an audited call) and answers an
//! `InputRequiredResult`: an elicitation asking the person to confirm the expected effect,
//! and a `requestState` that is the confirmation. The client's retry of the same call
//! carries the answer and the state; it is the execute (an audited call), run only when the
//! person confirmed, and at most once: the state holds the preview's single-use token.
//!
//! The state is `mrs1.<payload>.<mac>`: the payload names the token, the lease, the tool,
//! the SHA-256 of the domain arguments and an expiry, under an HMAC with a key derived from
//! root's master key (so every replica of the zone opens it). A state that does not verify,
//! or that another lease, tool or argument set presents, is refused by name and audited like
//! any refused call; the token it holds is only ever redeemed by the write path, which
//! checks its binding again.

use mcp_shared::error::{ErrorCode, ToolError};
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, InputRequest, InputRequests, InputRequiredResult,
};
use rmcp::service::RequestContext;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::app::App;
use crate::call::context::Confirmation;
use crate::call::writes::{Controls, args_hash};
use crate::call::{CallContext, Outcome};
use crate::leases::manager::LeaseEntry;

/// The key of the one input request: the person's answer.
const INPUT_KEY: &str = "confirm";
const STATE_PREFIX: &str = "mrs1.";
const KEY_PURPOSE: &str = "mcp request state v1";
/// Longest `requestState` root reads (its own are shorter: the question it keeps is cut to
/// [`MAX_KEPT_QUESTION`]).
const MAX_STATE_LEN: usize = 16 * 1024;
/// Longest question kept in a state, to be asked again (a long effect is cut).
const MAX_KEPT_QUESTION: usize = 4 * 1024;

/// What a `requestState` holds (integrity-protected, readable by the client, which must not
/// look: nothing in it is secret from the lease that asked).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct State {
    /// The preview's confirmation token.
    token: String,
    /// The lease that previewed (a run credential's lineage is its own lease).
    session_id: String,
    tool_id: String,
    /// SHA-256 of the domain arguments the preview ran with.
    args_hash: String,
    /// Unix milliseconds after which the state is refused.
    expires_at_ms: i64,
    /// The question asked (cut to [`MAX_KEPT_QUESTION`]), asked again when a retry carries
    /// no answer.
    message: String,
}

/// What the retry of a call that carries a `requestState` comes to.
pub(crate) enum Retry {
    /// The governed execute, with this answer in its context.
    Answered(Confirmation),
    /// No answer to the question: ask again, with the same state.
    AskAgain(InputRequiredResult),
}

/// Whether `ctx`'s client declared form elicitation in this request's `_meta`.
pub(crate) fn declares_form_elicitation(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// The first round: the preview, then the question. A preview that fails (or a write that
/// has nothing to confirm) is answered as it is.
pub(crate) async fn ask(
    app: &App,
    new_ctx: impl Fn() -> CallContext,
    tool_id: &str,
    arguments: Value,
) -> Result<InputRequiredResult, Outcome> {
    let domain_hash = domain_hash(&arguments);
    let ctx = new_ctx();
    let lease = ctx.lease.lease().clone();
    let (first, preview) =
        crate::call::elicitation::preview_first(app, ctx, tool_id, &arguments).await?;
    let (Some(args_hash), Ok(expires)) = (
        domain_hash,
        mcp_shared::time::parse(&preview.confirmation_expires_at),
    ) else {
        return Err(first);
    };
    let question = crate::call::elicitation::question(tool_id, &lease.target_id, &preview);
    let mut message = question.clone();
    if message.len() > MAX_KEPT_QUESTION {
        let mut cut = MAX_KEPT_QUESTION;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push_str("\n…\n\nApply this change?");
    }
    let state = State {
        token: preview.confirmation_token,
        session_id: lease.session_id,
        tool_id: tool_id.to_owned(),
        args_hash,
        expires_at_ms: mcp_shared::time::unix_ms(expires),
        message,
    };
    Ok(input_required(app, &state, &question))
}

/// A retry that carries `state`: opens it against this call and reads the person's answer.
pub(crate) fn retry(
    app: &App,
    lease: &LeaseEntry,
    request: &CallToolRequestParams,
    arguments: &Value,
    state: &str,
) -> Retry {
    let state = match open(app, state, lease, &request.name, arguments) {
        Ok(s) => s,
        Err(e) => return Retry::Answered(Confirmation::Invalid(e)),
    };
    let Some(answer) = request
        .input_responses
        .as_ref()
        .and_then(|r| r.get(INPUT_KEY))
    else {
        return Retry::AskAgain(input_required(app, &state, &state.message));
    };
    let refused = |why: &str| Confirmation::Refused {
        token: state.token.clone(),
        why: why.into(),
    };
    Retry::Answered(
        match serde_json::from_value::<ElicitResult>(answer.clone()) {
            Ok(r) if r.action == ElicitationAction::Accept => {
                if r.content.as_ref().and_then(|c| c.get("confirm")) == Some(&json!(true)) {
                    Confirmation::Confirmed(state.token.clone())
                } else {
                    refused("accepted without confirm: true")
                }
            }
            Ok(r) if r.action == ElicitationAction::Decline => refused("declined"),
            Ok(_) => refused("cancelled"),
            Err(e) => Confirmation::Invalid(ToolError::new(
                ErrorCode::InvalidArguments,
                format!("inputResponses.{INPUT_KEY} is not an elicitation result: {e}"),
            )),
        },
    )
}

/// The question and the state, as MCP carries them.
fn input_required(app: &App, state: &State, message: &str) -> InputRequiredResult {
    let schema = ElicitationSchema::builder()
        .required_bool_property("confirm", |b| b.title("Apply this change"))
        .build_unchecked();
    let question = ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message.to_owned(),
        requested_schema: schema,
    });
    let requests: InputRequests =
        [(INPUT_KEY.to_owned(), InputRequest::Elicitation(question))].into();
    InputRequiredResult::new(Some(requests), Some(seal(app, state)))
}

/// The digest of a call's domain arguments (its control fields taken out); `None` when the
/// arguments are not an object or their control fields are malformed.
fn domain_hash(arguments: &Value) -> Option<String> {
    let mut domain = arguments.as_object()?.clone();
    Controls::take(&mut domain).ok()?;
    Some(args_hash(&Value::Object(domain)))
}

fn seal(app: &App, state: &State) -> String {
    app.master_key.seal(KEY_PURPOSE, STATE_PREFIX, state)
}

/// The state, if it is root's, unexpired, and issued for this lease, tool and arguments.
fn open(
    app: &App,
    text: &str,
    lease: &LeaseEntry,
    tool_id: &str,
    arguments: &Value,
) -> Result<State, ToolError> {
    let invalid = |why: &str| {
        ToolError::new(
            ErrorCode::InvalidArguments,
            format!("requestState refused: {why}"),
        )
    };
    let state: State = app
        .master_key
        .open(KEY_PURPOSE, STATE_PREFIX, text, MAX_STATE_LEN)
        .map_err(|e| match e {
            crate::secrets::SealError::NotOurs => invalid("not a request state of this root"),
            e => invalid(&e.to_string()),
        })?;
    if state.session_id != lease.lease().session_id {
        return Err(invalid("it was issued to another lease"));
    }
    if state.tool_id != tool_id || domain_hash(arguments).as_ref() != Some(&state.args_hash) {
        return Err(invalid(
            "it was issued for another call (the tool or its arguments differ)",
        ));
    }
    if mcp_shared::time::unix_ms(mcp_shared::time::now()) >= state.expires_at_ms {
        return Err(ToolError::new(
            ErrorCode::ConfirmationRequired,
            "requestState expired: call again to be asked again",
        ));
    }
    Ok(state)
}
