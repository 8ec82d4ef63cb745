//! The hub's frames to root: fresh frame ids, envelopes, and encoding that turns a result
//! too large for a frame into an `internal` error; and the id of a frame that did not decode.

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::{CallOutcome, Envelope, HubToRoot, MAX_FRAME_BYTES, PROTOCOL_VERSION};

fn frame_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

pub(super) fn envelope(body: HubToRoot, in_reply_to: Option<String>) -> Envelope<HubToRoot> {
    Envelope {
        v: PROTOCOL_VERSION,
        id: frame_id(),
        in_reply_to,
        body,
    }
}

/// Serializes a frame; a result too large for a frame becomes an `internal` error result.
pub(super) fn encode(env: &Envelope<HubToRoot>) -> Option<String> {
    let text = match serde_json::to_string(env) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(error = %e, "cannot serialize a frame");
            return None;
        }
    };
    if text.len() <= MAX_FRAME_BYTES {
        return Some(text);
    }
    let HubToRoot::Result { call_id, outcome } = &env.body else {
        tracing::error!(bytes = text.len(), "frame exceeds the limit; dropped");
        return None;
    };
    let adapter = match outcome {
        CallOutcome::Ok { adapter, .. } => Some(adapter.clone()),
        CallOutcome::Error { adapter, .. } => adapter.clone(),
    };
    let small = Envelope {
        body: HubToRoot::Result {
            call_id: call_id.clone(),
            outcome: CallOutcome::Error {
                adapter,
                error: ToolError::new(
                    ErrorCode::Internal,
                    format!("the result exceeds the frame limit of {MAX_FRAME_BYTES} bytes"),
                ),
            },
        },
        ..env.clone()
    };
    serde_json::to_string(&small).ok()
}

/// The `id` of a frame that did not decode, if it has one, for `in_reply_to`.
pub(super) fn raw_id(text: &str) -> Option<String> {
    if text.len() > MAX_FRAME_BYTES {
        return None;
    }
    serde_json::from_str::<serde_json::Value>(text)
        .ok()?
        .get("id")?
        .as_str()
        .map(str::to_owned)
}
