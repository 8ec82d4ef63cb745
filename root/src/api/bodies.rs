//! The operator REST family's request and answer bodies, typed once: the handlers build
//! them and `mcp-root admin` reads them back, so the two cannot drift apart. Answers are
//! tolerant of fields they do not know (a CLI one build older keeps working); requests deny
//! them (a misspelt field is a clear 400, not a silent default).
//!
//! A request body is also what an action's audit event records, every field named (an
//! absent option as `null`).
//!
//! What a body passes through without interpreting stays JSON: a descriptor, a signed run
//! profile (re-serializing it must not change a byte of meaning), an approval's arguments
//! and effect.

use mcp_shared::event::OperationalEvent;
use mcp_shared::lease::SessionLease;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::hubs::link::Pressure;
use crate::hubs::skill::SkillView;
use crate::store::ApprovalStatus;

/// An answer to an audited operator action: what it returns and the audit event it is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Audited<T> {
    #[serde(flatten)]
    pub item: T,
    pub event_id: String,
}

/// Every refusal of the REST family: `{"error": {...}}` with the status.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorAnswer {
    pub error: ErrorDetail,
    /// The audit event that records the refused request (an operator action), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
}

/// What went wrong, in the governed calls' error vocabulary.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: mcp_shared::error::ErrorCode,
    pub message: String,
    pub retryable: bool,
}

// ---- leases (`/v1/root/mcp/sessions`) ----

/// `POST /v1/root/mcp/sessions`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewLeaseRequest {
    pub target_id: String,
    pub capability_profile: String,
    pub ttl_sec: u64,
    #[serde(default)]
    pub audience: Option<String>,
    #[serde(default)]
    pub subnet_id: Option<String>,
    #[serde(default)]
    pub zone: Option<String>,
}

/// `GET /v1/root/mcp/sessions/{id}/delegation`: where a lease's authority came from and
/// what it handed on. It works only while every ancestor works.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DelegationView {
    pub lease: SessionLease,
    /// The OAuth grant at the top of the chain, when the chain came from a sign-in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantView>,
    /// The leases it came from, its parent first.
    pub ancestors: Vec<SessionLease>,
    /// The leases it handed on and theirs, each under its parent (`depth` 1: its children).
    pub descendants: Vec<DescendantView>,
}

/// A lease below another in the delegation graph.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DescendantView {
    pub depth: usize,
    pub lease: SessionLease,
}

/// An OAuth grant: an operator's approval of one client's sign-in.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GrantView {
    pub grant_id: String,
    pub client_id: String,
    /// `operator:<name>`, who approved.
    pub approved_by: String,
    /// RFC 3339: when the approval ends (no token of the grant outlives it).
    pub expires_at: String,
    /// RFC 3339, when the grant ended (revoked, its operator revoked, a token reused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
}

/// A lease as issued (created or rotated): its bearer, shown in this answer only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IssuedLeaseBody {
    pub session_id: String,
    pub token: String,
    /// RFC 3339.
    pub deadline_at: String,
    pub lease: SessionLease,
}

/// `GET /v1/root/mcp/sessions`: newest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeaseList {
    pub sessions: Vec<SessionLease>,
}

/// `POST /v1/root/mcp/sessions/{id}/run-profile`; no body asks for the defaults.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunProfileRequest {
    /// Seconds the run lives (1..=600, never past the lease's deadline).
    #[serde(default)]
    pub ttl_sec: Option<u64>,
    /// Only these of the lease's visible tools (default: all of them).
    #[serde(default)]
    pub tools: Option<Vec<String>>,
}

/// A run profile and its run credential: the bearer is here only, never in the document.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IssuedRunProfile {
    /// The signed document, as root signed it.
    pub run_profile: Value,
    pub session_id: String,
    pub token_ref: String,
    pub token: String,
    /// RFC 3339.
    pub expires_at: String,
}

/// `POST /v1/root/mcp/run-profiles/verify`: valid (with the run it names), or the reason
/// and message why not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileVerdict {
    pub valid: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// `malformed`, `tampered`, `unsigned`, `unknown_key`, `expired`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl ProfileVerdict {
    /// An invalid document: the reason's code and what it means.
    pub fn invalid(reason: &str, message: String) -> ProfileVerdict {
        ProfileVerdict {
            valid: false,
            run_id: None,
            owner: None,
            expires_at: None,
            key_id: None,
            reason: Some(reason.into()),
            message: Some(message),
        }
    }
}

// ---- operators (`/v1/root/operators`) ----

/// `POST /v1/root/operators`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewOperatorRequest {
    pub name: String,
}

/// A new operator and their credential, shown in this answer only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewOperator {
    pub name: String,
    pub token: String,
    /// RFC 3339.
    pub created_at: String,
    pub created_by: String,
}

/// Whether an operator's credential works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OperatorStatus {
    Active,
    Revoked,
}

/// An operator as listed; the bootstrap `admin` names its credential instead of times.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OperatorView {
    pub name: String,
    pub status: OperatorStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_by: Option<String>,
}

/// `GET /v1/root/operators`: the bootstrap `admin` first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OperatorList {
    pub operators: Vec<OperatorView>,
}

/// `POST /v1/root/operators/{name}/revoke` (an empty body is `{}`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevokeOperatorRequest {
    /// Also end every lease the operator issued (with their descendants); without it they
    /// keep their own deadlines. The OAuth sign-ins the operator approved end either way.
    #[serde(default)]
    pub cascade: bool,
}

/// `POST /v1/root/operators/{name}/revoke`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RevokedOperator {
    pub name: String,
    pub status: OperatorStatus,
    /// What ended with the operator.
    #[serde(default)]
    pub ended: EndedWithOperator,
}

/// What a revoked operator's authority took with it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedWithOperator {
    /// Whether the leases the operator issued were ended too (`cascade`).
    pub cascade: bool,
    /// OAuth grants (sign-ins) the operator approved that were live.
    pub grants: usize,
    /// Leases that stopped working: the grants' access tokens, and with `cascade` every
    /// lease the operator issued.
    pub leases: usize,
    /// Leases those had handed on (minted leases, run credentials, theirs).
    pub descendants: usize,
}

// ---- approvals (`/v1/root/mcp/approvals`) ----

/// An approval as the REST family shows it (status freshness-normalized).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApprovalView {
    pub approval_id: String,
    pub status: ApprovalStatus,
    pub tool_id: String,
    pub target_id: String,
    pub session_id: String,
    pub arguments: Value,
    /// The expected effect (for an NLU change, its diff).
    pub effect: Value,
    pub requested_at: String,
    pub expires_at: String,
    pub decided_at: Option<String>,
    pub reason: Option<String>,
    pub preview_event_id: String,
    pub applied_event_id: Option<String>,
}

/// `GET /v1/root/mcp/approvals`: newest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApprovalList {
    pub approvals: Vec<ApprovalView>,
}

/// `POST /v1/root/mcp/approvals/{id}/approve|reject` (the body is optional).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The approval after the decision.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Decided {
    pub approval: ApprovalView,
}

// ---- audit (`/v1/root/mcp/audit`) ----

/// One event of the trail with its place in the chain.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditEntry {
    #[serde(flatten)]
    pub event: OperationalEvent,
    pub seq: i64,
    pub hash: String,
    /// Only when one event is asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev_hash: Option<String>,
    /// The replica that committed it (replicated zones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_id: Option<String>,
}

/// `GET /v1/root/mcp/audit`: a page of events and the cursor of the next one. An export
/// reads the events as JSON (`AuditPage<Value>`), so a field this build does not know is
/// exported all the same.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditPage<E = AuditEntry> {
    pub events: Vec<E>,
    pub next_cursor: Option<String>,
}

// ---- targets (`/v1/root/hubs`) ----

/// `POST /v1/root/hubs`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnrollRequest {
    pub target_id: String,
    pub environment: String,
    #[serde(default)]
    pub subnet_id: Option<String>,
    #[serde(default)]
    pub zone: Option<String>,
}

/// An enrolled target and its hub token, shown in this answer only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Enrolled {
    pub target_id: String,
    pub environment: String,
    pub subnet_id: String,
    pub zone: String,
    pub token: String,
}

/// `POST /v1/root/hubs/{target_id}/rotate-key` (the body is optional).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotateKeyRequest {
    /// How long the previous token and key keep working, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_sec: Option<u64>,
}

/// A new hub token (shown in this answer only) and until when the previous one works.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KeyRotated {
    pub target_id: String,
    pub token: String,
    /// RFC 3339.
    pub previous_valid_until: String,
    pub grace_sec: u64,
}

/// A target as listed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetView {
    pub target_id: String,
    pub environment: String,
    pub subnet_id: String,
    pub zone: String,
    pub status: mcp_shared::target::TargetStatus,
    pub enrolled_at: String,
    pub last_seen_at: Option<String>,
    /// The live descriptor, or the last one stored.
    pub descriptor: Option<Value>,
    /// What the hub last reported of its skills.
    pub skills: Value,
    /// Root's desired state of the target's skill and the hub's report.
    pub skill: Option<SkillView>,
    /// The capabilities the hub publishes (none while offline).
    pub published_capabilities: Vec<Value>,
    pub pressure: Option<Pressure>,
}

/// `GET /v1/root/hubs`: by target id.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetList {
    pub targets: Vec<TargetView>,
}

/// `POST /v1/root/hubs/{target}/skills/{skill}/{command}`: the skill after the command.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SkillAnswer {
    pub target_id: String,
    pub skill: SkillView,
}

// ---- descriptors (`/v1/root/mcp/descriptors`) ----

/// `POST /v1/root/mcp/descriptors`: a whole set; items are named `descriptors[i]` (or by
/// `names[i]`) in errors.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishRequest {
    pub descriptors: Vec<Value>,
    /// Optional labels for the items (the CLI sends file names).
    #[serde(default)]
    pub names: Vec<String>,
}

/// A served descriptor without its content: header, class, title and state as of now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DescriptorSummary {
    #[serde(flatten)]
    pub header: mcp_shared::descriptor::Freshness,
    pub class: String,
    pub title: String,
    /// `fresh`, `stale` or `expired`.
    pub freshness: String,
    /// RFC 3339.
    pub expires_at: String,
}

/// The platform skill catalog a published set carries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CatalogSummary {
    pub ontology: String,
    pub skills: usize,
    pub manifest_sha256: String,
}

/// `GET /v1/root/mcp/descriptors`, and the answer to a publish (with the catalog).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DescriptorList {
    pub set: crate::descriptors::SetOrigin,
    pub descriptors: Vec<DescriptorSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill_catalog: Option<CatalogSummary>,
}

// ---- replicas (`/v1/root/replicas`) ----

/// Whether a replica's heartbeat is recent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    Up,
    Down,
}

/// One replica of the zone.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplicaView {
    pub replica_id: String,
    #[serde(rename = "self")]
    pub this: bool,
    pub health: Health,
    pub heartbeat_age_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_at: Option<String>,
    pub started_at: String,
    pub version: String,
    pub changes_behind: i64,
    /// The targets whose hubs it holds.
    pub hubs: Vec<String>,
    /// Its internal address (operators only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertise_url: Option<String>,
}

/// `GET /v1/root/replicas`: the zone's replicas, their health and hubs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ZoneView {
    /// `single` (SQLite) or `replicated` (PostgreSQL).
    pub mode: String,
    pub backend: String,
    pub zone: String,
    #[serde(rename = "self")]
    pub this: String,
    pub replicas: Vec<ReplicaView>,
}
