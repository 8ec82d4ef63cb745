//! The internal channel between the root replicas of one zone.
//!
//! Several `mcp-root serve` processes may share one PostgreSQL database and zone. A hub holds
//! one connection, to one of them (the owner). A routed call, a cancel or an operator's skill
//! command that lands on another replica is forwarded to the owner as one
//! [`ReplicaEnvelope`]`<`[`ReplicaCall`]`>` in the body of `POST /v1/root/internal/route`,
//! authenticated with a replica credential; the owner answers with a
//! [`ReplicaEnvelope`]`<`[`ReplicaAnswer`]`>`. Policy, argument validation, limits and the
//! audit event stay with the replica the client called; the owner only signs the call for its
//! hub and relays the outcome.

use serde::{Deserialize, Serialize};

use crate::error::ToolError;
use crate::protocol::{CallBody, CallOutcome, SkillCommand, SkillState};

/// The replica channel version this build speaks.
pub const REPLICA_PROTOCOL_VERSION: u32 = 1;

/// One message between replicas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaEnvelope<B> {
    pub v: u32,
    pub body: B,
}

/// What a replica asks the owner of a target's hub connection to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ReplicaCall {
    /// Route a call that the forwarding replica has already allowed, validated, counted
    /// against its limits and will audit.
    Route {
        target_id: String,
        /// Unique per call; the owner signs the hub call with it (the hub refuses a call id
        /// it has seen, so a replayed forward runs nothing).
        call_id: String,
        trace_id: String,
        /// The lease the call was made under.
        session_id: String,
        tool_id: String,
        capability: String,
        /// The call's body, its fields beside the others on the wire.
        #[serde(flatten)]
        body: CallBody,
        /// Milliseconds left of the call's deadline when it was forwarded; the owner counts
        /// its own deadline from it (no clock comparison between replicas).
        remaining_ms: u64,
    },
    /// Stop a forwarded call (its deadline passed on the forwarding replica, or the client
    /// cancelled).
    Cancel { target_id: String, call_id: String },
    /// An operator's skill command for the target's hub.
    Skill {
        target_id: String,
        skill: String,
        command: SkillCommand,
    },
}

/// The owner's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ReplicaAnswer {
    /// How a routed call ended on the hub (or on the owner: offline, timeout).
    Routed { outcome: CallOutcome },
    /// The cancel was passed on (or the call had already ended).
    Cancelled,
    /// The skill's state after the command.
    SkillState { state: SkillState },
    /// The command could not be carried out (the hub is not held here, it did not answer).
    Refused { error: ToolError },
}
