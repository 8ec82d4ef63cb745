//! The MCP Session Lease (seed "MCP Session Lease"): what a bearer resolves to.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseStatus {
    Active,
    Expired,
    Revoked,
}

impl LeaseStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseStatus::Active => "active",
            LeaseStatus::Expired => "expired",
            LeaseStatus::Revoked => "revoked",
        }
    }
}

/// How a lease came to be: its place in the delegation graph. An `issued` lease is the top of
/// its chain (an operator issued it, or approved the OAuth sign-in it came from); a `minted`
/// lease and a `run` credential were handed on by another lease (`parent_session_id`), never
/// exceed it, and stop working when it does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseKind {
    /// Issued by an operator (REST, CLI, console) or an OAuth sign-in an operator approved.
    #[default]
    Issued,
    /// Minted by another lease with `hub.issue_access_token`.
    Minted,
    /// A run credential, issued under a lease with a run profile.
    Run,
    /// One target's lease under a fleet lease, issued by root for one fleet run's target:
    /// the fleet lease's capability profile on one target of its selector.
    Fleet,
}

impl LeaseKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseKind::Issued => "issued",
            LeaseKind::Minted => "minted",
            LeaseKind::Run => "run",
            LeaseKind::Fleet => "fleet",
        }
    }
}

/// The `target_id` of a fleet lease starts with this, followed by its selector
/// (`fleet:env=test,label:role=web`): a lease bound to the targets a selector names, which
/// calls only fleet tools and reaches each target through a lease of its own
/// ([`LeaseKind::Fleet`]). No target id starts so, so a fleet lease reaches no target directly.
pub const FLEET_TARGET_PREFIX: &str = "fleet:";

/// Prefixes no enrolled target's id may start with, because the product gives them a meaning
/// of its own: a fleet lease's target ([`FLEET_TARGET_PREFIX`]), and a hub's identity URI
/// (`mcp-hub:`, its TLS client certificate's SAN).
pub const RESERVED_TARGET_PREFIXES: [&str; 2] = [FLEET_TARGET_PREFIX, "mcp-hub:"];

/// The reserved prefix `target_id` starts with, if any (compared without case: `FLEET:` is
/// refused too).
pub fn reserved_prefix(target_id: &str) -> Option<&'static str> {
    RESERVED_TARGET_PREFIXES.into_iter().find(|p| {
        target_id
            .get(..p.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(p))
    })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionLease {
    pub session_id: String,
    pub audience: String,
    pub target_id: String,
    pub subnet_id: String,
    pub zone: String,
    pub capability_profile: String,
    /// Tools this lease may call, resolved from the profile when the lease was created.
    pub effective_tools: Vec<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub deadline_at: OffsetDateTime,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub last_used_at: Option<OffsetDateTime>,
    pub use_count: u64,
    pub status: LeaseStatus,
    /// Set on a minted lease and a run credential: the lease that handed its authority on. It
    /// never outlives that lease, holds no capability it lacks, and works only while it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    #[serde(default)]
    pub kind: LeaseKind,
    /// Who issued the top of the chain: `operator:<name>`, the operator who issued this lease
    /// or approved the OAuth sign-in it came from (absent on minted leases and run
    /// credentials, whose issuer is their parent, and on leases older than the record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_by: Option<String>,
    /// The OAuth grant (an operator's approval of a client's sign-in) this lease is an access
    /// token of: it ends when the grant does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
    /// The lease's own calls-per-second rate (`"20/s"`, `"30/min"`), over its capability
    /// profile's per-lease rate (`[rates]`), set by whoever issued it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
    /// The RFC 7638 thumbprint of the key this lease's token is bound to (RFC 9449, the
    /// token's `cnf.jkt`): it works only as `Authorization: DPoP` with a proof that key
    /// signed. Absent: a bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop_jkt: Option<String>,
}

impl SessionLease {
    /// A fleet lease's selector (see [`FLEET_TARGET_PREFIX`]).
    pub fn fleet_selector(&self) -> Option<&str> {
        self.target_id.strip_prefix(FLEET_TARGET_PREFIX)
    }

    /// Whether this is a run credential (bound to exactly its run profile's actions).
    pub fn is_run(&self) -> bool {
        self.kind == LeaseKind::Run
    }

    /// The status as of `now`: an active lease past its deadline is `expired`.
    pub fn status_at(&self, now: OffsetDateTime) -> LeaseStatus {
        match self.status {
            LeaseStatus::Active if now >= self.deadline_at => LeaseStatus::Expired,
            s => s,
        }
    }

    /// A copy with the status freshness-normalized as of `now`.
    pub fn normalized(mut self, now: OffsetDateTime) -> Self {
        self.status = self.status_at(now);
        self
    }
}
