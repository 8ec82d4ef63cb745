//! The operational event (seed "Operational Event Model"): one per handled call, allowed or
//! denied. Shared by MCP responses, the audit trail and the web views.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

use crate::error::ErrorCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Deny,
}

/// The policy engine's verdict and its reason code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyDecision {
    pub decision: Decision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<ErrorCode>,
    /// Which rules were evaluated, in order, e.g. `capability_grant`, `environment_guard`.
    pub checks: Vec<String>,
}

/// Which surface a call came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Surface {
    Mcp,
    Rest,
    Admin,
    /// Something a managed target's hub did that root records (a skill update it published).
    Hub,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventStatus {
    /// Allowed and completed.
    Ok,
    /// Allowed but failed while executing.
    Error,
    /// Refused before execution.
    Denied,
}

impl EventStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EventStatus::Ok => "ok",
            EventStatus::Error => "error",
            EventStatus::Denied => "denied",
        }
    }
}

/// Who acted: resolved by root from the lease, never from client headers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Actor {
    /// `lease:<session_id>`, `operator`, or `anonymous` when no lease resolved.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability_profile: Option<String>,
}

/// One field or pattern that was redacted before the event was stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Redaction {
    /// Where in the event: e.g. `request.arguments.token`, `result.entries[0].lines[3]`.
    pub path: String,
    /// Which rule matched: `field:token`, `pattern:bearer`, ...; `hub` for values the
    /// target's hub redacted there before they left it. A rule that matched `n` times at one
    /// path (the lines of a log stream) is written once as `<rule>*<n>`.
    pub rule: String,
}

/// What was redacted from an answer before it was given: how many values, and where (paths
/// into the answer: `result…`, the tool's result, or `error.message`); never a value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedactionSummary {
    pub count: u64,
    /// Each place redacted once, in order (at most [`RedactionSummary::MAX_PATHS`]; `count`
    /// counts them all).
    pub paths: Vec<String>,
}

impl RedactionSummary {
    /// Paths listed at most.
    pub const MAX_PATHS: usize = 50;

    /// The summary of what `redactions` (an event's) took out of the answer: those under
    /// `result` or `error`, not the request's.
    pub fn of(redactions: &[Redaction]) -> RedactionSummary {
        let mut summary = RedactionSummary::default();
        for r in redactions {
            let in_answer = ["result", "error"].iter().any(|top| {
                r.path
                    .strip_prefix(top)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
            });
            if !in_answer {
                continue;
            }
            summary.count += r
                .rule
                .rsplit_once('*')
                .and_then(|(_, n)| n.parse().ok())
                .unwrap_or(1);
            if summary.paths.len() < Self::MAX_PATHS && !summary.paths.contains(&r.path) {
                summary.paths.push(r.path.clone());
            }
        }
        summary
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperationalEvent {
    pub event_id: String,
    pub trace_id: String,
    pub request_id: String,
    pub surface: Surface,
    pub actor: Actor,
    pub target_id: Option<String>,
    pub tool_id: String,
    pub capability: Option<String>,
    pub policy_decision: PolicyDecision,
    pub execution_adapter: Option<String>,
    pub dry_run: bool,
    pub status: EventStatus,
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub finished_at: OffsetDateTime,
    /// Redacted copy of the request envelope (tool id and arguments).
    pub request: Value,
    pub result_summary: Option<String>,
    pub error: Option<crate::error::ToolError>,
    pub redactions: Vec<Redaction>,
    /// The attempts that failed before the last one, when root retried the call under its
    /// contract's retry policy (empty: it ran once).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retried: Vec<RetriedAttempt>,
}

/// One failed attempt of a call root retried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetriedAttempt {
    /// 1 for the first attempt.
    pub attempt: u32,
    pub code: crate::error::ErrorCode,
    pub message: String,
}
