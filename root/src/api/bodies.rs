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
    pub(crate) event_id: String,
}

pub(crate) use crate::net::answer::ErrorAnswer;

// ---- leases (`/v1/root/mcp/sessions`) ----

/// `POST /v1/root/mcp/sessions`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewLeaseRequest {
    /// The target; empty for a fleet lease (`selector`).
    #[serde(default)]
    pub target_id: String,
    /// A fleet lease's selector, instead of a target: its `target_id` becomes
    /// `fleet:<selector>` (see `mcp_shared::lease::FLEET_TARGET_PREFIX`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    pub capability_profile: String,
    pub ttl_sec: u64,
    #[serde(default)]
    pub audience: Option<String>,
    #[serde(default)]
    pub subnet_id: Option<String>,
    #[serde(default)]
    pub zone: Option<String>,
    /// The lease's own calls-per-second rate (`20`, `"20/s"`, `"30/min"`), over its
    /// profile's per-lease rate (`[rates]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<crate::config::RawRate>,
}

/// `GET /v1/root/mcp/sessions/{id}/delegation`: where a lease's authority came from and
/// what it handed on. It works only while every ancestor works.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct DelegationView {
    pub(crate) lease: SessionLease,
    /// The OAuth grant at the top of the chain, when the chain came from a sign-in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) grant: Option<GrantView>,
    /// The leases it came from, its parent first.
    pub(crate) ancestors: Vec<SessionLease>,
    /// The leases it handed on and theirs, each under its parent (`depth` 1: its children).
    pub(crate) descendants: Vec<DescendantView>,
}

/// A lease below another in the delegation graph.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct DescendantView {
    pub(crate) depth: usize,
    pub(crate) lease: SessionLease,
}

/// An OAuth grant: an operator's approval of one client's sign-in.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct GrantView {
    pub(crate) grant_id: String,
    pub(crate) client_id: String,
    /// `operator:<name>`, who approved.
    pub(crate) approved_by: String,
    /// RFC 3339: when the approval ends (no token of the grant outlives it).
    pub(crate) expires_at: String,
    /// RFC 3339, when the grant ended (revoked, its operator revoked, a token reused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ended_at: Option<String>,
}

/// A lease as issued (created or rotated): its bearer, shown in this answer only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IssuedLeaseBody {
    pub(crate) session_id: String,
    pub token: String,
    /// RFC 3339.
    pub deadline_at: String,
    pub(crate) lease: SessionLease,
}

/// `GET /v1/root/mcp/sessions`: a page of leases, newest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct LeaseList {
    pub(crate) sessions: Vec<SessionLease>,
    /// Leases matching the filters (on every page).
    pub(crate) total: usize,
    /// Those by status as of now (`active`, `expired`, `revoked`).
    pub(crate) by_status: std::collections::BTreeMap<String, usize>,
    /// The cursor of the next page, if there is one.
    pub(crate) next_cursor: Option<String>,
}

/// `POST /v1/root/mcp/sessions/{id}/run-profile`; no body asks for the defaults.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunProfileRequest {
    /// Seconds the run lives (1..=600, never past the lease's deadline).
    #[serde(default)]
    pub(crate) ttl_sec: Option<u64>,
    /// Only these of the lease's visible tools (default: all of them).
    #[serde(default)]
    pub(crate) tools: Option<Vec<String>>,
}

/// A run profile and its run credential: the bearer is here only, never in the document.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct IssuedRunProfile {
    /// The signed document, as root signed it.
    pub(crate) run_profile: Value,
    pub(crate) session_id: String,
    pub(crate) token_ref: String,
    pub(crate) token: String,
    /// RFC 3339.
    pub(crate) expires_at: String,
}

/// `POST /v1/root/mcp/run-profiles/verify`: valid (with the run it names), or the reason
/// and message why not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ProfileVerdict {
    pub(crate) valid: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) owner: Option<String>,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) key_id: Option<String>,
    /// `malformed`, `tampered`, `unsigned`, `unknown_key`, `expired`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) message: Option<String>,
}

impl ProfileVerdict {
    /// An invalid document: the reason's code and what it means.
    pub(crate) fn invalid(reason: &str, message: String) -> ProfileVerdict {
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
pub(crate) struct NewOperatorRequest {
    pub(crate) name: String,
    /// The roles they hold (default `viewer` only); no more than the caller holds.
    #[serde(default = "viewer")]
    pub(crate) roles: Vec<crate::roles::Role>,
    /// The capability profiles they may issue leases for (`*`: all; default none); no more
    /// than the caller may.
    #[serde(default)]
    pub(crate) profiles: Vec<String>,
}

fn viewer() -> Vec<crate::roles::Role> {
    vec![crate::roles::Role::Viewer]
}

/// A new operator and their credential, shown in this answer only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct NewOperator {
    pub(crate) name: String,
    pub(crate) token: String,
    pub(crate) roles: Vec<crate::roles::Role>,
    pub(crate) profiles: Vec<String>,
    /// RFC 3339.
    pub(crate) created_at: String,
    pub(crate) created_by: String,
}

/// Whether an operator's credential works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OperatorStatus {
    Active,
    Revoked,
}

/// An operator as listed; the bootstrap `admin` names its credential instead of times.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct OperatorView {
    pub(crate) name: String,
    pub(crate) status: OperatorStatus,
    pub(crate) roles: Vec<crate::roles::Role>,
    /// The capability profiles they may issue leases for (`*`: all).
    pub(crate) profiles: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) credential: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) created_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) created_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) revoked_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) revoked_by: Option<String>,
}

/// `GET /v1/root/operators`: the bootstrap `admin` first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct OperatorList {
    pub(crate) operators: Vec<OperatorView>,
}

/// `POST /v1/root/operators/{name}/revoke` (an empty body is `{}`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RevokeOperatorRequest {
    /// Also end every lease the operator issued (with their descendants); without it they
    /// keep their own deadlines. The OAuth sign-ins the operator approved end either way.
    #[serde(default)]
    pub(crate) cascade: bool,
}

/// `POST /v1/root/operators/{name}/revoke`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RevokedOperator {
    pub(crate) name: String,
    pub(crate) status: OperatorStatus,
    /// What ended with the operator.
    #[serde(default)]
    pub(crate) ended: EndedWithOperator,
}

/// What a revoked operator's authority took with it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EndedWithOperator {
    /// Whether the leases the operator issued were ended too (`cascade`).
    pub(crate) cascade: bool,
    /// OAuth grants (sign-ins) the operator approved that were live.
    pub(crate) grants: usize,
    /// Leases that stopped working: the grants' access tokens, and with `cascade` every
    /// lease the operator issued.
    pub(crate) leases: usize,
    /// Leases those had handed on (minted leases, run credentials, theirs).
    pub(crate) descendants: usize,
}

// ---- approvals (`/v1/root/mcp/approvals`) ----

/// An approval as the REST family shows it (status freshness-normalized).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ApprovalView {
    pub(crate) approval_id: String,
    pub(crate) status: ApprovalStatus,
    pub(crate) tool_id: String,
    pub(crate) target_id: String,
    pub(crate) session_id: String,
    pub(crate) arguments: Value,
    /// The expected effect (for an NLU change, its diff).
    pub(crate) effect: Value,
    pub(crate) requested_at: String,
    pub(crate) expires_at: String,
    pub(crate) decided_at: Option<String>,
    pub(crate) reason: Option<String>,
    pub(crate) preview_event_id: String,
    pub(crate) applied_event_id: Option<String>,
}

/// `GET /v1/root/mcp/approvals`: newest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ApprovalList {
    pub(crate) approvals: Vec<ApprovalView>,
}

/// `POST /v1/root/mcp/approvals/{id}/approve|reject` (the body is optional).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecisionRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
}

/// The approval after the decision.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Decided {
    pub(crate) approval: ApprovalView,
}

// ---- audit (`/v1/root/mcp/audit`) ----

/// One event of the trail with its place in the chain.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct AuditEntry {
    #[serde(flatten)]
    pub(crate) event: OperationalEvent,
    pub(crate) seq: i64,
    pub(crate) hash: String,
    /// Only when one event is asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) prev_hash: Option<String>,
    /// The replica that committed it (replicated zones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) replica_id: Option<String>,
}

/// `GET /v1/root/mcp/audit`: a page of events and the cursor of the next one. An export
/// reads the events as JSON (`AuditPage<Value>`), so a field this build does not know is
/// exported all the same.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct AuditPage<E = AuditEntry> {
    pub(crate) events: Vec<E>,
    pub(crate) next_cursor: Option<String>,
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
    /// Its labels (`{"role": "web"}`), see `hubs::lifecycle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<crate::hubs::lifecycle::Labels>,
}

/// An enrolled target and its hub token, shown in this answer only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Enrolled {
    pub(crate) target_id: String,
    pub(crate) environment: String,
    pub(crate) subnet_id: String,
    pub(crate) zone: String,
    pub token: String,
}

/// `POST /v1/root/hubs/{target_id}/rotate-key` (the body is optional).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RotateKeyRequest {
    /// How long the previous token and key keep working, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) grace_sec: Option<u64>,
}

/// A new hub token (shown in this answer only) and until when the previous one works.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct KeyRotated {
    pub(crate) target_id: String,
    pub(crate) token: String,
    /// RFC 3339.
    pub(crate) previous_valid_until: String,
    pub(crate) grace_sec: u64,
}

/// A target as listed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TargetView {
    pub(crate) target_id: String,
    pub(crate) environment: String,
    pub(crate) subnet_id: String,
    pub(crate) zone: String,
    pub(crate) status: mcp_shared::target::TargetStatus,
    pub(crate) enrolled_at: String,
    pub(crate) last_seen_at: Option<String>,
    /// The live descriptor, or the last one stored.
    pub(crate) descriptor: Option<Value>,
    /// What the hub last reported of its skills.
    pub(crate) skills: Value,
    /// Root's desired state of the target's skill and the hub's report.
    pub(crate) skill: Option<SkillView>,
    /// The capabilities the hub publishes (none while offline).
    pub(crate) published_capabilities: Vec<Value>,
    pub(crate) pressure: Option<Pressure>,
    pub(crate) labels: crate::hubs::lifecycle::Labels,
    pub(crate) lifecycle: crate::hubs::lifecycle::Lifecycle,
    pub(crate) narrowing: crate::hubs::lifecycle::Narrowing,
}

/// `POST /v1/root/hubs/{target_id}/labels`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LabelsRequest {
    /// Labels to add or change.
    #[serde(default)]
    pub(crate) set: crate::hubs::lifecycle::Labels,
    /// Label keys to remove (a key the target lacks is fine).
    #[serde(default)]
    pub(crate) remove: Vec<String>,
}

/// `POST /v1/root/hubs/{target_id}/lifecycle/{command}` (the body is optional).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LifecycleRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
}

/// `POST /v1/root/hubs/{target_id}/narrowing`: what operators deny on this target (the
/// whole of it: `{}` denies nothing).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NarrowingRequest {
    /// Deny every write (reads go on).
    #[serde(default)]
    pub(crate) read_only: bool,
    /// Tools denied by id.
    #[serde(default)]
    pub(crate) deny: Vec<String>,
}

/// A target's labels, lifecycle and narrowing, after an operator's change.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TargetStanding {
    pub(crate) target_id: String,
    pub(crate) environment: String,
    pub(crate) subnet_id: String,
    pub(crate) labels: crate::hubs::lifecycle::Labels,
    pub(crate) lifecycle: crate::hubs::lifecycle::Lifecycle,
    pub(crate) narrowing: crate::hubs::lifecycle::Narrowing,
    /// Leases bound to the target that the change ended (a retire or a move).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) leases_ended: Option<usize>,
}

/// `POST /v1/root/hubs/{target_id}/placement`: where the target moves (either or both).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlacementRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) environment: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) subnet_id: Option<String>,
}

/// `GET /v1/root/hubs`: a page of targets by target id.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TargetList {
    pub(crate) targets: Vec<TargetView>,
    /// Targets matching the filters (on every page).
    pub(crate) total: usize,
    /// Those by status (`online`, `degraded`, `offline`; a status none has is absent).
    pub(crate) by_status: std::collections::BTreeMap<String, usize>,
    /// The cursor of the next page, if there is one.
    pub(crate) next_cursor: Option<String>,
}

/// `POST /v1/root/hubs/{target}/skills/{skill}/{command}`: the skill after the command.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SkillAnswer {
    pub(crate) target_id: String,
    pub(crate) skill: SkillView,
}

// ---- descriptors (`/v1/root/mcp/descriptors`) ----

/// `POST /v1/root/mcp/descriptors`: a whole set; items are named `descriptors[i]` (or by
/// `names[i]`) in errors.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PublishRequest {
    pub(crate) descriptors: Vec<Value>,
    /// Optional labels for the items (the CLI sends file names).
    #[serde(default)]
    pub(crate) names: Vec<String>,
}

/// A served descriptor without its content: header, class, title and state as of now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct DescriptorSummary {
    #[serde(flatten)]
    pub(crate) header: mcp_shared::descriptor::Freshness,
    pub(crate) class: String,
    pub(crate) title: String,
    /// `fresh`, `stale` or `expired`.
    pub(crate) freshness: String,
    /// RFC 3339.
    pub(crate) expires_at: String,
}

/// The platform skill catalog a published set carries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CatalogSummary {
    pub(crate) ontology: String,
    pub(crate) skills: usize,
    pub(crate) manifest_sha256: String,
}

/// `GET /v1/root/mcp/descriptors`, and the answer to a publish (with the catalog).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct DescriptorList {
    pub(crate) set: crate::descriptors::SetOrigin,
    pub(crate) descriptors: Vec<DescriptorSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) skill_catalog: Option<CatalogSummary>,
}

// ---- replicas (`/v1/root/replicas`) ----

pub(crate) use crate::replica::view::{Health, ZoneView};

// ---- fleet runs (`/v1/root/fleet/runs`) ----

pub(crate) use crate::fleet::FleetRunRequest;

/// `POST /v1/root/fleet/previews`: the previewed run and its one confirmation token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FleetPreview {
    pub(crate) report: crate::fleet::report::RunReport,
    /// Shown once; only its hash is kept.
    pub(crate) confirmation_token: String,
    /// RFC 3339.
    pub(crate) confirmation_expires_at: String,
    /// What to do next, in words.
    pub(crate) summary: String,
}

/// `GET /v1/root/fleet/runs`: the newest runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FleetRuns {
    pub(crate) runs: Vec<FleetRunSummary>,
}

/// A run as listed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FleetRunSummary {
    pub(crate) run_id: String,
    pub(crate) state: String,
    pub(crate) created_by: String,
    pub(crate) created_at: String,
    pub(crate) selector: String,
    pub(crate) tool_id: String,
}
