//! The tool contract: what every MCP-exposed tool publishes (seed "Tool Contract Model").
//!
//! Contracts are data. Root loads one JSON file per tool into its contract registry; adding a
//! tool means adding a file (and, for hub tools, an adapter), never editing the router.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Whether a tool reads, writes, or destroys. Destructive tools are never callable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideEffectClass {
    Read,
    Write,
    Destructive,
}

/// Which of the seed's three routing classes a tool belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoutingClass {
    /// Answered on root from the descriptor cache, never from a target.
    DescriptiveCached,
    /// Routed live to the managed target's published operational surface.
    OperationalRead,
    /// Routed to the target as a bounded write (preview, confirmation, idempotency).
    OperationalWrite,
}

/// Whether a call of the tool may run as an MCP task (the `io.modelcontextprotocol/tasks`
/// extension on 2026-07-28, the tasks of 2025-11-25 on sessions): work that can outlast a
/// request, kept by root until the client polls its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskSupport {
    /// Always answered within the request.
    #[default]
    Forbidden,
    /// A client that supports tasks gets one; others get the answer within the request.
    Optional,
}

impl TaskSupport {
    pub fn is_forbidden(&self) -> bool {
        *self == TaskSupport::Forbidden
    }
}

/// Contract stability, as published to agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stability {
    Stable,
    Experimental,
    Internal,
}

/// Hints the policy engine turns into limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConcurrencyHint {
    /// Calls of this tool in flight at once for one lease.
    pub per_lease: u32,
    /// Calls of this tool in flight at once against one target.
    pub per_target: u32,
}

/// What must never be stored or returned verbatim.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedactionRules {
    /// Argument or result field names whose values are replaced: in requests and results
    /// before audit, and in results before they are answered.
    #[serde(default)]
    pub fields: Vec<String>,
    /// Regular expressions whose matches are replaced in strings, where `fields` apply.
    #[serde(default)]
    pub patterns: Vec<String>,
    /// Top-level result fields that hold a secret the tool issues (a new bearer): answered
    /// once to the caller, redacted everywhere else (audit, replays).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub issued: Vec<String>,
}

/// How root retries a routed call that failed on the way to or on the target (seed "Required
/// Controls": per-tool retry policy), inside the call's deadline: a read on the listed codes;
/// a write only for a dry run or an execute that carries an idempotency key (the target's
/// ledger answers a repeated key with its first result, so nothing runs twice).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 to 5).
    pub attempts: u32,
    /// The wait before the second attempt, doubled before each further one.
    pub backoff_ms: u64,
    /// The error codes retried: `target_offline` (no connection, or it ended during the
    /// call: a hub restarting, the replica holding it gone) and `busy`.
    pub on: Vec<crate::error::ErrorCode>,
}

/// How a descriptive tool is answered from a cached descriptor, without per-tool code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DescriptorProjection {
    /// The descriptor that answers this tool.
    pub descriptor_id: String,
    /// JSON pointer into the descriptor content; empty means the whole content.
    #[serde(default)]
    pub pointer: String,
    /// When set, the value at `pointer` is an array and one element is selected: the one
    /// whose `key` field equals the argument named `argument`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<Selector>,
}

/// Selects one element of an array by a key field that an argument names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selector {
    pub argument: String,
    pub key: String,
}

/// What root keeps of a tool's successful result, so that later reads need no hub round trip
/// (for example the memory-profile summary that `hub.memory.publish_profile` publishes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retention {
    /// The collection the value is kept in (per target), e.g. `memory_profiles`.
    pub collection: String,
    /// JSON pointer into the result: the value root keeps.
    pub pointer: String,
    /// Field of that value that identifies it; a newer value with the same key replaces it.
    pub key: String,
}

/// One tool's contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolContract {
    pub tool_id: String,
    pub title: String,
    pub summary: String,
    pub input_schema: Value,
    pub output_schema: Value,
    pub side_effect: SideEffectClass,
    pub routing: RoutingClass,
    pub required_capability: String,
    /// Target environments where the tool may run; `"*"` means any.
    pub allowed_environments: Vec<String>,
    pub timeout_ms: u64,
    pub concurrency: ConcurrencyHint,
    #[serde(default)]
    pub redaction: RedactionRules,
    pub stability: Stability,
    pub plane: String,
    /// Present for `descriptive_cached` tools: where root finds the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptor: Option<DescriptorProjection>,
    /// Present for operational tools that root executes itself (root is their source of
    /// truth, e.g. the access-token tools over root's leases): the name of root's adapter.
    /// Absent: the call is routed to the lease's target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<String>,
    /// On a routed read: the name of root's adapter that answers while the lease's target is
    /// offline, from the evidence the hub published to root (seed "ProfileOps": reads split
    /// by evidence source). Absent: such a call is refused with `target_offline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline: Option<String>,
    /// The skill of the lease's target that publishes this tool, for a tool root executes
    /// (`executor`) on a target's behalf: like every routed tool, it is callable only while
    /// that skill is installed and enabled on the target (root's desired state, and not
    /// switched off by the hub's owner). Routed tools are published by the target's skill
    /// without saying so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// Present when root keeps part of a successful result (see [`Retention`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain: Option<Retention>,
    /// Present on a write tool that is the preview of another write tool (e.g.
    /// `nlu_authoring.propose_change` proposes `nlu_authoring.apply_change`): calling it only
    /// previews (it never executes), and its confirmation token, bound to the arguments it was
    /// called with, is for the named tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposes: Option<String>,
    /// How root retries this tool's routed calls (absent: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
    /// A write that an operator must approve before it executes: the preview opens an
    /// approval, and an execute before the approval is decided answers `approval_pending`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requires_approval: bool,
    /// Whether a call may run as an MCP task (absent: never).
    #[serde(default, skip_serializing_if = "TaskSupport::is_forbidden")]
    pub task_support: TaskSupport,
    /// A fleet tool: callable only under a fleet lease (one bound to a selector), which
    /// calls nothing else; root runs it over the selector's targets, each through a lease of
    /// its own (`executor` names the adapter).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fleet: bool,
}

impl ToolContract {
    /// Whether the tool may run against a target in `environment`.
    pub fn allows_environment(&self, environment: &str) -> bool {
        self.allowed_environments
            .iter()
            .any(|e| e == "*" || e == environment)
    }
}
