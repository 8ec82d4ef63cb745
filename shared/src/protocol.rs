//! The versioned root↔hub protocol: what travels over the hub's WebSocket to root.
//!
//! Every frame is one JSON [`Envelope`] with the protocol version, a message id, and either a
//! [`RootToHub`] or a [`HubToRoot`] body. Both enums are closed: an unknown `type` fails to
//! decode and is answered with [`HubToRoot::ProtocolError`] / [`RootToHub::ProtocolError`],
//! never a crash.
//!
//! Upgrades need no flag day: root and hubs of different builds talk as long as they share
//! the protocol version. Each side announces the optional parts it understands ([`feature`])
//! in `hello` and `welcome`, and a sender includes an optional field only for a peer that
//! announced it; a reader ignores fields it does not know (a newer peer's), so an unknown
//! optional field is never fatal. A peer that announces nothing understands this protocol as
//! the first build with features spoke it. A signed field joins the signature only when it
//! is present, so a hub that does not know it verifies the same bytes.

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::ToolError;
use crate::profiling::{EvidenceCursor, EvidenceRecord};
use crate::target::ManagedTargetDescriptor;

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest frame either side accepts, in bytes.
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;

/// The optional parts of the protocol, by the names peers announce them with.
pub mod feature {
    /// `progress` frames may carry `total` (root reads it).
    pub const PROGRESS_TOTAL: &str = "progress.total";
    /// A `call` may carry `traceparent` (the hub continues root's trace).
    pub const CALL_TRACEPARENT: &str = "call.traceparent";
    /// A hub sends `evidence` frames (its ProfileOps records) and root tells it, in
    /// `welcome.evidence`, how far it holds them.
    pub const EVIDENCE: &str = "evidence";
}

/// Every feature this build understands, announced in its `hello` or `welcome`.
pub const FEATURES: &[&str] = &[
    feature::PROGRESS_TOTAL,
    feature::CALL_TRACEPARENT,
    feature::EVIDENCE,
];

/// When a hub sends its heartbeat. Root beats every hub of a fleet from one task, in one
/// burst per interval; a hub answers root's beat (unless it sent one within half an
/// interval), so the fleet's heartbeats reach root in that burst instead of one at a time
/// spread over the interval, each waking root on its own (root's CPU with a fleet idle).
/// The hub's own timer sends one only when root's did not come within the interval (an
/// earlier root, or one too busy to beat).
#[derive(Debug, Clone)]
pub struct HeartbeatPace {
    interval: std::time::Duration,
    last: std::time::Instant,
}

impl HeartbeatPace {
    /// A pace for `interval`, as if a heartbeat had just gone out.
    pub fn new(interval: std::time::Duration) -> HeartbeatPace {
        HeartbeatPace {
            interval,
            last: std::time::Instant::now(),
        }
    }

    /// Root's heartbeat arrived: whether to answer it now.
    pub fn answer_root(&mut self) -> bool {
        self.due(self.interval / 2)
    }

    /// The hub's timer fired (every interval): whether to send one of its own.
    pub fn on_tick(&mut self) -> bool {
        // A little slack: a timer firing a hair before a full interval still sends.
        self.due(self.interval.mul_f64(0.9))
    }

    fn due(&mut self, after: std::time::Duration) -> bool {
        let due = self.last.elapsed() >= after;
        if due {
            self.last = std::time::Instant::now();
        }
        due
    }
}

/// What a peer announced it understands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features(Vec<String>);

impl Features {
    /// The features a peer announced (unknown names are kept and never matter).
    pub fn announced(names: &[String]) -> Features {
        Features(names.to_vec())
    }

    /// Whether the peer understands `feature`.
    pub fn has(&self, feature: &str) -> bool {
        self.0.iter().any(|f| f == feature)
    }
}

/// `features` as this build announces them, limited to `only` when given (a test's older
/// peer).
pub fn announce(only: Option<&[String]>) -> Vec<String> {
    FEATURES
        .iter()
        .filter(|f| only.is_none_or(|o| o.iter().any(|x| x == *f)))
        .map(|f| (*f).to_owned())
        .collect()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope<B> {
    pub v: u32,
    /// Unique per sender; replies name it in `in_reply_to`.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
    pub body: B,
}

/// The body of one governed call: what the caller asked of a tool, as every side sees it.
/// Root's adapters run it ([`CallBody`] alone), root routes it (`RoutedCall`: the body plus
/// its target and progress sink), the wire carries it signed ([`CallRequest`]: the body plus
/// the call's identity, deadline and signature) and the hub's adapters run it (`CallInput`:
/// the body plus a deadline, progress and span).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallBody {
    /// The tool's arguments, root's own control fields stripped.
    pub arguments: Value,
    /// Describe the effect, change nothing (a write's preview, or `dry_run: true`).
    pub dry_run: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// A write's execute: the `expected_effect` its confirmation token was issued for (the
    /// dry run the caller previewed and confirmed). An adapter whose world can move between
    /// preview and execute (a branch to deploy) refuses with `conflict` when the confirmed
    /// effect no longer holds, rather than running something the caller never saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed_effect: Option<Value>,
}

impl CallBody {
    /// A read: no dry run, no idempotency key, nothing confirmed.
    pub fn run(arguments: Value) -> CallBody {
        CallBody {
            arguments,
            dry_run: false,
            idempotency_key: None,
            confirmed_effect: None,
        }
    }

    /// A dry run (a write's preview or `dry_run: true`).
    pub fn dry_run(arguments: Value) -> CallBody {
        CallBody {
            dry_run: true,
            ..CallBody::run(arguments)
        }
    }
}

/// A call that root routes to a hub, signed by root so the hub can re-check it. On the wire
/// the body's fields sit beside the others (`arguments`, `dry_run`, ... at the top level).
///
/// The hub trusts none of it without [`verify_call`]: the signature covers every field but
/// `traceparent`, the arguments and a confirmed effect through their SHA-256. The hub checks
/// the environment against its own configuration, never a claim from root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRequest {
    /// Unique per call; the hub refuses a call id it has seen (replay protection).
    pub call_id: String,
    pub trace_id: String,
    /// The lease the call was made under.
    pub session_id: String,
    pub tool_id: String,
    pub capability: String,
    #[serde(flatten)]
    pub body: CallBody,
    /// Unix milliseconds after which the hub must refuse (and stop) the call.
    pub expires_at_ms: i64,
    /// The W3C `traceparent` of root's span routing the call, for a hub that announced
    /// [`feature::CALL_TRACEPARENT`]: where the hub's spans attach. Not signed (it grants
    /// nothing; the event's `trace_id` is signed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// Hex HMAC-SHA256 with the hub's signing key over [`CallRequest::signing_input`].
    pub signature: String,
}

type HmacSha256 = Hmac<Sha256>;

/// Context string of the per-hub call-signing key.
const SIGNING_KEY_CONTEXT: &[u8] = b"mcp-root/call-signing/v1";

/// The per-hub signing key, derived from the hub's enrolment token. Root stores it at
/// enrolment (it keeps only a hash of the token); the hub derives it from its token file.
pub fn signing_key(hub_token: &str) -> [u8; 32] {
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(hub_token.as_bytes())
        .expect("HMAC takes keys of any length");
    mac.update(SIGNING_KEY_CONTEXT);
    mac.finalize().into_bytes().into()
}

impl CallRequest {
    /// The bytes the signature covers: canonical JSON of every field but the signature, with
    /// the arguments (and a confirmed effect) replaced by their SHA-256. Written field by
    /// field in canonical (sorted) key order rather than through a JSON tree; the golden test
    /// `signing_input_bytes_are_stable` pins the bytes, which hubs of other builds verify.
    pub fn signing_input(&self) -> Vec<u8> {
        use crate::canonical::write_str;
        fn key(out: &mut Vec<u8>, k: &str) {
            out.push(if out.is_empty() { b'{' } else { b',' });
            write_str(k, out);
            out.push(b':');
        }
        let digest = |v: &Value| hex::encode(Sha256::digest(crate::canonical::to_vec(v)));
        let mut out = Vec::with_capacity(400);
        key(&mut out, "arguments_sha256");
        write_str(&digest(&self.body.arguments), &mut out);
        key(&mut out, "call_id");
        write_str(&self.call_id, &mut out);
        key(&mut out, "capability");
        write_str(&self.capability, &mut out);
        if let Some(effect) = &self.body.confirmed_effect {
            key(&mut out, "confirmed_effect_sha256");
            write_str(&digest(effect), &mut out);
        }
        key(&mut out, "dry_run");
        out.extend_from_slice(if self.body.dry_run { b"true" } else { b"false" });
        key(&mut out, "expires_at_ms");
        out.extend_from_slice(self.expires_at_ms.to_string().as_bytes());
        key(&mut out, "idempotency_key");
        match &self.body.idempotency_key {
            Some(k) => write_str(k, &mut out),
            None => out.extend_from_slice(b"null"),
        }
        key(&mut out, "session_id");
        write_str(&self.session_id, &mut out);
        key(&mut out, "tool_id");
        write_str(&self.tool_id, &mut out);
        key(&mut out, "trace_id");
        write_str(&self.trace_id, &mut out);
        out.push(b'}');
        out
    }

    /// Sets `signature` for `key`.
    pub fn sign(&mut self, key: &[u8; 32]) {
        let mut mac =
            <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
        mac.update(&self.signing_input());
        self.signature = hex::encode(mac.finalize().into_bytes());
    }
}

/// Whether `call` carries a valid signature for `key` (constant-time comparison).
pub fn verify_call(call: &CallRequest, key: &[u8; 32]) -> bool {
    let Ok(sig) = hex::decode(&call.signature) else {
        return false;
    };
    let mut mac =
        <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(&call.signing_input());
    mac.verify_slice(&sig).is_ok()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(
    clippy::large_enum_variant,
    reason = "one frame at a time; boxing `Call` would only add an allocation per call"
)]
pub enum RootToHub {
    /// Answer to `hello`: the hub is registered.
    Welcome {
        target_id: String,
        heartbeat_interval_ms: u64,
        /// Root's wall clock (unix ms) when it sent this: the hub measures its clock's offset
        /// from root's, judges call deadlines in root's time, and refuses calls with
        /// `clock_skew` while the offset exceeds `max_clock_skew_ms`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        root_time_ms: Option<i64>,
        /// The largest clock offset root accepts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_clock_skew_ms: Option<u64>,
        /// What root understands ([`feature`]); sent only to a hub that announced its own
        /// (a hub of an earlier build would not know the field).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        features: Vec<String>,
        /// How far root holds the hub's evidence log (only to a hub that announced
        /// [`feature::EVIDENCE`]): the hub sends what changed after it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evidence: Option<EvidenceCursor>,
    },
    Call(CallRequest),
    /// Stop a call (deadline passed on root, or the client cancelled).
    Cancel {
        call_id: String,
    },
    /// An operator command for a skill; answered with `skill_state`.
    SkillCommand {
        skill: String,
        command: SkillCommand,
    },
    Heartbeat,
    ProtocolError {
        message: String,
    },
}

/// An operator's lifecycle command for a skill (seed "infra_access_skill": install, enable,
/// disable, uninstall), or a request for its state. Root's desired state is pushed to a hub
/// with these whenever it changes and when the hub (re)connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkillCommand {
    Install,
    Enable,
    Disable,
    Uninstall,
    Status,
}

impl SkillCommand {
    pub fn as_str(self) -> &'static str {
        match self {
            SkillCommand::Install => "install",
            SkillCommand::Enable => "enable",
            SkillCommand::Disable => "disable",
            SkillCommand::Uninstall => "uninstall",
            SkillCommand::Status => "status",
        }
    }
}

/// A skill's lifecycle state on a hub.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillState {
    pub skill: String,
    /// As root last directed (install / uninstall).
    pub installed: bool,
    /// As root last directed (enable / disable).
    pub enabled: bool,
    /// Tool ids the skill publishes right now (empty unless installed, enabled and not
    /// switched off by the hub's owner).
    pub published: Vec<String>,
    /// The hub's owner switched the skill off on the hub itself (`mcp-hub skill disable`):
    /// nothing is published whatever root directs, until the owner switches it on again.
    #[serde(default, skip_serializing_if = "is_false")]
    pub owner_disabled: bool,
    /// The skill's version (the hub's build) as installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Every tool the installed skill serves, published or not: its adapter set. A change
    /// of this set or of `version` is a skill update, which root records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adapters: Vec<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HubToRoot {
    /// First frame on a new connection: who the hub is and what it publishes.
    Hello {
        protocol_version: u32,
        token: String,
        descriptor: ManagedTargetDescriptor,
        skills: Vec<SkillState>,
        /// What the hub understands ([`feature`]).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        features: Vec<String>,
    },
    /// How far a call's adapter has got (deploy steps, tests run): `progress` only grows,
    /// in the unit of `total` when the adapter knows it.
    Progress {
        call_id: String,
        progress: f64,
        /// Only to a root that announced [`feature::PROGRESS_TOTAL`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    Result {
        call_id: String,
        outcome: CallOutcome,
    },
    /// The published surface changed (skill enabled or disabled).
    SurfaceChanged {
        descriptor: ManagedTargetDescriptor,
        skills: Vec<SkillState>,
    },
    /// Answer to `skill_command` (`in_reply_to` names it).
    SkillState(SkillState),
    /// ProfileOps records that changed on the hub (only to a root that announced
    /// [`feature::EVIDENCE`]).
    Evidence(Evidence),
    Heartbeat,
    ProtocolError {
        message: String,
    },
}

/// A batch of a hub's evidence log: the records that changed after position `after` up to
/// `upto`, in the log `epoch`. Root stores a batch only when it continues what it holds
/// (`after` is its position, or 0 in a new epoch), so a lost batch is sent again from root's
/// position on the next connection, never skipped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub epoch: String,
    pub after: u64,
    pub upto: u64,
    pub records: Vec<EvidenceRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
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

impl CallOutcome {
    /// A call no adapter ran: refused, timed out or lost before a hub answered.
    pub fn failed(error: ToolError) -> CallOutcome {
        CallOutcome::Error {
            adapter: None,
            error,
        }
    }

    /// The adapter that ran the call and what it came to.
    pub fn into_parts(self) -> (Option<String>, Result<Value, ToolError>) {
        match self {
            CallOutcome::Ok { adapter, result } => (Some(adapter), Ok(result)),
            CallOutcome::Error { adapter, error } => (adapter, Err(error)),
        }
    }
}

/// Why a frame was not decoded; its text is what the peer's protocol error says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("frame of {bytes} bytes exceeds the limit of {MAX_FRAME_BYTES}")]
    TooLarge { bytes: usize },
    /// Not JSON, or not a frame of this direction (serde's message, with its position).
    #[error("malformed frame: {0}")]
    Malformed(String),
    #[error("unsupported protocol version {version} (this side speaks {PROTOCOL_VERSION})")]
    Version { version: u32 },
}

/// Decodes one frame; the error names what was wrong for the peer's protocol error.
pub fn decode<B: for<'de> Deserialize<'de>>(frame: &str) -> Result<Envelope<B>, DecodeError> {
    if frame.len() > MAX_FRAME_BYTES {
        return Err(DecodeError::TooLarge { bytes: frame.len() });
    }
    let env: Envelope<B> =
        serde_json::from_str(frame).map_err(|e| DecodeError::Malformed(e.to_string()))?;
    if env.v != PROTOCOL_VERSION {
        return Err(DecodeError::Version { version: env.v });
    }
    Ok(env)
}

/// [`decode`] of a hub's frame, with a fast path for `result` frames (one per routed call).
///
/// serde decodes an internally tagged enum by first buffering the whole body into an
/// intermediate tree, and a result's `outcome` (tagged by `status`) a second time, before the
/// result's own JSON tree is built. The fast path reads a `result` frame straight into plain
/// structs; anything it does not take exactly (another type, a missing or extra field, a
/// `null` where the enum wants a value, a malformed frame) goes through [`decode`], so the
/// answer and every error are [`decode`]'s own (a property test holds the two equal).
pub fn decode_from_hub(frame: &str) -> Result<Envelope<HubToRoot>, DecodeError> {
    if frame.len() <= MAX_FRAME_BYTES
        && let Ok(f) = serde_json::from_str::<fast::ResultFrame>(frame)
        && f.v == PROTOCOL_VERSION
        && f.body.kind == "result"
        && let Some(outcome) = f.body.outcome.into_outcome()
    {
        return Ok(Envelope {
            v: f.v,
            id: f.id,
            in_reply_to: f.in_reply_to,
            body: HubToRoot::Result {
                call_id: f.body.call_id,
                outcome,
            },
        });
    }
    decode(frame)
}

/// The plain structs of [`decode_from_hub`]'s fast path: a `result` frame with its tags read
/// as strings and compared, so nothing but the exact wire form is taken.
mod fast {
    use serde::Deserialize;
    use serde_json::Value;

    use super::CallOutcome;
    use crate::error::ToolError;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct ResultFrame {
        pub v: u32,
        pub id: String,
        #[serde(default)]
        pub in_reply_to: Option<String>,
        pub body: ResultBody,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct ResultBody {
        #[serde(rename = "type")]
        pub kind: String,
        pub call_id: String,
        pub outcome: Outcome,
    }

    /// `None` only when the member is absent: a member present as `null` is `Some(Null)` for
    /// a value and a decode error for the others (the full decoder judges those frames).
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct Outcome {
        status: String,
        #[serde(default, deserialize_with = "present")]
        adapter: Option<String>,
        #[serde(default, deserialize_with = "present")]
        result: Option<Value>,
        #[serde(default, deserialize_with = "present")]
        error: Option<ToolError>,
    }

    fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
    where
        D: serde::Deserializer<'de>,
        T: Deserialize<'de>,
    {
        T::deserialize(d).map(Some)
    }

    impl Outcome {
        /// The outcome when its fields are exactly those of one `status`; `None` sends the
        /// frame to the full decoder.
        pub(super) fn into_outcome(self) -> Option<CallOutcome> {
            match (self.status.as_str(), self.adapter, self.result, self.error) {
                ("ok", Some(adapter), Some(result), None) => {
                    Some(CallOutcome::Ok { adapter, result })
                }
                ("error", adapter, None, Some(error)) => {
                    Some(CallOutcome::Error { adapter, error })
                }
                _ => None,
            }
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_hub_answers_roots_heartbeat_and_its_own_timer_sends_only_without_one() {
        use std::time::Duration;
        // Just sent (or just welcomed): neither root's beat nor the timer sends another.
        let mut slow = HeartbeatPace::new(Duration::from_secs(3600));
        assert!(!slow.answer_root());
        assert!(!slow.on_tick());
        // Half an interval on, root's beat is answered, and the timer then stays quiet.
        let mut pace = HeartbeatPace::new(Duration::from_millis(200));
        std::thread::sleep(Duration::from_millis(100));
        assert!(pace.answer_root());
        assert!(
            !pace.answer_root(),
            "one answer per beat, not one per frame"
        );
        assert!(!pace.on_tick(), "root's beat came within the interval");
        // A whole interval without root's beat: the timer sends.
        std::thread::sleep(Duration::from_millis(200));
        assert!(pace.on_tick());
        assert!(!pace.on_tick());
    }

    use super::*;

    #[test]
    fn unknown_message_type_is_a_decode_error() {
        let err = decode::<HubToRoot>(r#"{"v":1,"id":"x","body":{"type":"launch_missiles"}}"#)
            .expect_err("unknown type must not decode");
        assert!(matches!(err, DecodeError::Malformed(_)), "{err}");
        assert!(err.to_string().starts_with("malformed frame: "), "{err}");
    }

    #[test]
    fn wrong_version_is_named() {
        let err = decode::<HubToRoot>(r#"{"v":9,"id":"x","body":{"type":"heartbeat"}}"#)
            .expect_err("version 9 must not decode");
        assert_eq!(err, DecodeError::Version { version: 9 });
        assert!(
            err.to_string().contains("unsupported protocol version 9"),
            "{err}"
        );
    }

    #[test]
    fn signatures_cover_every_field() {
        let key = signing_key("mcph_token");
        let mut call = CallRequest {
            call_id: "c1".into(),
            trace_id: "t1".into(),
            session_id: "s1".into(),
            tool_id: "hub.get_status".into(),
            capability: "infra.read.status".into(),
            body: CallBody {
                arguments: serde_json::json!({"a": 1}),
                dry_run: false,
                idempotency_key: None,
                confirmed_effect: None,
            },
            expires_at_ms: 1,
            traceparent: None,
            signature: String::new(),
        };
        call.sign(&key);
        assert!(verify_call(&call, &key));
        // A confirmed effect added, or changed, after signing does not verify.
        let mut forged = call.clone();
        forged.body.confirmed_effect = Some(serde_json::json!({"target": {"commit": "c0ffee"}}));
        assert!(!verify_call(&forged, &key));
        let mut confirmed = forged.clone();
        confirmed.sign(&key);
        assert!(verify_call(&confirmed, &key));
        confirmed.body.confirmed_effect = Some(serde_json::json!({"target": {"commit": "bad"}}));
        assert!(!verify_call(&confirmed, &key));
        assert!(!verify_call(&call, &signing_key("other")));
        let mut forged = call.clone();
        forged.body.arguments = serde_json::json!({"a": 2});
        assert!(!verify_call(&forged, &key));
        let mut forged = call.clone();
        forged.expires_at_ms = 2;
        assert!(!verify_call(&forged, &key));
        let mut forged = call;
        forged.signature = "zz".into();
        assert!(!verify_call(&forged, &key));
    }

    /// The exact bytes a signature covers. Hubs of an older build verify calls against these
    /// bytes, so any change here is a protocol change (a new `PROTOCOL_VERSION`).
    #[test]
    fn signing_input_bytes_are_stable() {
        let mut call = CallRequest {
            call_id: "c1".into(),
            trace_id: "t\"1".into(),
            session_id: "s1".into(),
            tool_id: "hub.get_status".into(),
            capability: "infra.read.status".into(),
            body: CallBody {
                arguments: serde_json::json!({"a": 1}),
                dry_run: false,
                idempotency_key: None,
                confirmed_effect: None,
            },
            expires_at_ms: -1,
            traceparent: None,
            signature: String::new(),
        };
        assert_eq!(
            String::from_utf8(call.signing_input()).expect("UTF-8"),
            concat!(
                r#"{"arguments_sha256":"015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862","#,
                r#""call_id":"c1","capability":"infra.read.status","dry_run":false,"expires_at_ms":-1,"#,
                r#""idempotency_key":null,"session_id":"s1","tool_id":"hub.get_status","trace_id":"t\"1"}"#
            )
        );
        call.body.dry_run = true;
        call.expires_at_ms = 1_790_000_000_000;
        call.body.idempotency_key = Some("k-1".into());
        call.body.confirmed_effect = Some(serde_json::json!({"target": {"commit": "c0ffee"}}));
        assert_eq!(
            String::from_utf8(call.signing_input()).expect("UTF-8"),
            concat!(
                r#"{"arguments_sha256":"015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862","#,
                r#""call_id":"c1","capability":"infra.read.status","#,
                r#""confirmed_effect_sha256":"ea8a11e016eb17021c451427d8b92d1547c6c703e6d0a165a4b1c8e7e894bb24","#,
                r#""dry_run":true,"expires_at_ms":1790000000000,"idempotency_key":"k-1","#,
                r#""session_id":"s1","tool_id":"hub.get_status","trace_id":"t\"1"}"#
            )
        );
    }

    #[test]
    fn result_frames_as_hubs_send_them_take_the_fast_path() {
        for outcome in [
            CallOutcome::Ok {
                adapter: "hub.status".into(),
                result: serde_json::json!({"services": [{"name": "api", "rss": 1.5}]}),
            },
            CallOutcome::Error {
                adapter: None,
                error: ToolError::new(crate::error::ErrorCode::Timeout, "late"),
            },
        ] {
            let env = Envelope {
                v: PROTOCOL_VERSION,
                id: "f-2".into(),
                in_reply_to: Some("f-1".into()),
                body: HubToRoot::Result {
                    call_id: "c-1".into(),
                    outcome: outcome.clone(),
                },
            };
            let text = serde_json::to_string(&env).expect("serializes");
            let fast = serde_json::from_str::<fast::ResultFrame>(&text).expect("fast path parses");
            assert_eq!(fast.body.outcome.into_outcome(), Some(outcome));
            assert_eq!(decode_from_hub(&text), Ok(env));
        }
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
