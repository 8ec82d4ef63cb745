//! The versioned root↔hub protocol: what travels over the hub's WebSocket to root.
//!
//! Every frame is one JSON [`Envelope`] with the protocol version, a message id, and either a
//! [`RootToHub`] or a [`HubToRoot`] body. Both enums are closed: an unknown `type` fails to
//! decode and is answered with [`HubToRoot::ProtocolError`] / [`RootToHub::ProtocolError`],
//! never a crash.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ToolError;
use crate::target::ManagedTargetDescriptor;

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest frame either side accepts, in bytes.
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope<B> {
    pub v: u32,
    /// Unique per sender; replies name it in `in_reply_to`.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
    pub body: B,
}

/// A call that root routes to a hub, signed by root so the hub can re-check it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallRequest {
    pub call_id: String,
    pub trace_id: String,
    pub tool_id: String,
    pub capability: String,
    pub arguments: Value,
    pub session_id: String,
    pub environment: String,
    pub dry_run: bool,
    /// Unix milliseconds after which the hub must refuse the call.
    pub expires_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// HMAC-SHA256 over the canonical JSON of the other fields, hex.
    pub signature: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
#[allow(
    clippy::large_enum_variant,
    reason = "one frame at a time; boxing `Call` would only add an allocation per call"
)]
pub enum RootToHub {
    Welcome {
        target_id: String,
        heartbeat_interval_ms: u64,
    },
    Call(CallRequest),
    Cancel {
        call_id: String,
    },
    SkillCommand {
        skill: String,
        command: SkillCommand,
    },
    Heartbeat,
    ProtocolError {
        message: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkillCommand {
    Enable,
    Disable,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum HubToRoot {
    Hello {
        protocol_version: u32,
        token: String,
        descriptor: ManagedTargetDescriptor,
    },
    Progress {
        call_id: String,
        progress: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    Result {
        call_id: String,
        outcome: CallOutcome,
    },
    SurfaceChanged {
        descriptor: ManagedTargetDescriptor,
    },
    Heartbeat,
    ProtocolError {
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum CallOutcome {
    Ok {
        adapter: String,
        result: Value,
    },
    Error {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        adapter: Option<String>,
        error: ToolError,
    },
}

/// Decodes one frame; the error names what was wrong for the peer's protocol error.
pub fn decode<B: for<'de> Deserialize<'de>>(frame: &str) -> Result<Envelope<B>, String> {
    if frame.len() > MAX_FRAME_BYTES {
        return Err(format!(
            "frame of {} bytes exceeds the limit of {MAX_FRAME_BYTES}",
            frame.len()
        ));
    }
    let env: Envelope<B> =
        serde_json::from_str(frame).map_err(|e| format!("malformed frame: {e}"))?;
    if env.v != PROTOCOL_VERSION {
        return Err(format!(
            "unsupported protocol version {} (this side speaks {PROTOCOL_VERSION})",
            env.v
        ));
    }
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_message_type_is_a_decode_error() {
        let err = decode::<HubToRoot>(r#"{"v":1,"id":"x","body":{"type":"launch_missiles"}}"#)
            .expect_err("unknown type must not decode");
        assert!(err.contains("malformed frame"), "{err}");
    }

    #[test]
    fn wrong_version_is_named() {
        let err = decode::<HubToRoot>(r#"{"v":9,"id":"x","body":{"type":"heartbeat"}}"#)
            .expect_err("version 9 must not decode");
        assert!(err.contains("unsupported protocol version 9"), "{err}");
    }

    #[test]
    fn heartbeat_round_trips() {
        let env = Envelope {
            v: PROTOCOL_VERSION,
            id: "1".into(),
            in_reply_to: None,
            body: HubToRoot::Heartbeat,
        };
        let s = serde_json::to_string(&env).expect("envelope serializes");
        assert_eq!(decode::<HubToRoot>(&s).expect("heartbeat decodes"), env);
    }
}
