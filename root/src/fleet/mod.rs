//! Fleet runs: one governed tool on every target a selector names, under a rollout plan
//! (canaries, a sliding window, an error budget), durable and reported per target.
//!
//! A run freezes its target set when it starts (the ids in order, and their hash), stores
//! itself and each target's part (`store::fleet`), and is driven by one task on the replica
//! that started it ([`execute`]); a restarted root takes up every run left `running` or
//! `paused`. Each target's call goes through the one governed call path under a lease the run
//! issues for that target ([`authority`]), so policy, limits, redaction and the audit trail
//! apply to it as to any call: a cordoned target is `excluded` with its reason, an offline
//! one is `undeliverable`, never silently missing. The run's authority is its selector at
//! the time of each call: a target that left it since the set was frozen is `refused`. The run's own event (`admin.fleet.run`), its
//! leases' and every target's call event share the run's trace id (`audit export --run`).
//!
//! Reads start at once. Writes go preview → one confirmation → execute ([`preview`]): the
//! preview freezes the set, runs each target's dry run and answers one confirmation token
//! bound to the set's hash, the tool, the arguments' hash, the operator and a deadline; the
//! execute redeems it once, refused if the set changed since. Each target's write carries the
//! per-target idempotency key [`authority::idempotency_key`], which names the confirmed write,
//! so neither a resume nor a second run of one confirmation executes a target twice.

pub(crate) mod agents;
pub(crate) mod arguments;
pub(crate) mod authority;
pub(crate) mod execute;
pub(crate) mod plan;
pub(crate) mod preview;
pub(crate) mod read;
pub(crate) mod report;
pub(crate) mod runs;
pub(crate) mod set;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A run's state and a target's part in it, as stored and shown.
pub(crate) use crate::store::{FleetRunState as RunState, FleetTargetStatus as Status};

/// What starts or previews a run (`POST /v1/root/fleet/runs`, `…/previews`; an agent's fleet
/// tool).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FleetRunRequest {
    /// Which targets (see `hubs::selector`).
    pub(crate) selector: String,
    pub(crate) tool_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) arguments: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) plan: Option<plan::Plan>,
    /// A write's capability profile (the narrowest granting the tool when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) capability_profile: Option<String>,
    /// A write's: the token its preview issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) confirmation_token: Option<String>,
}
