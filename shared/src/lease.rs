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
    /// Set on a run credential (issued with a run profile): the lease it was issued under. A
    /// run credential may call only its `effective_tools`, never outlives its parent, and is
    /// revoked with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
}

impl SessionLease {
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
