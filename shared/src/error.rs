//! Normalized error codes and the normalized tool response (seed "normalized response model").

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Every reason a call can fail, as agents and operators see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// No bearer, or one that is unknown, expired or revoked.
    Unauthenticated,
    /// The caller is authenticated but is not an operator.
    Forbidden,
    /// The operator does not hold the role this route needs (or hands out more than they
    /// hold): the message names the role.
    RoleRequired,
    /// No tool has this id.
    UnknownTool,
    /// The lease's capability profile does not grant the tool's capability.
    CapabilityNotGranted,
    /// The target's environment or write scope does not allow the tool.
    EnvironmentForbidden,
    /// Arguments do not match the tool's input schema.
    InvalidArguments,
    /// The lease's target is not connected.
    TargetOffline,
    /// The tool did not finish within its timeout.
    Timeout,
    /// A concurrency limit is reached; retry later.
    Busy,
    /// The skill that publishes the tool is disabled on the target.
    SkillDisabled,
    /// A write needs a confirmation token from its preview first.
    ConfirmationRequired,
    /// Destructive actions are never tools.
    ForbiddenDestructive,
    /// The descriptor that answers the tool is missing.
    DescriptorUnavailable,
    /// The target refused a routed call whose signature did not verify.
    SignatureInvalid,
    /// The target refused a routed call past its deadline.
    DeadlineExpired,
    /// The target refused a routed call id it had already seen.
    ReplayRejected,
    /// The execution adapter failed (panicked or crashed) while running the call.
    AdapterFailed,
    /// The client cancelled the call (MCP `notifications/cancelled`); the target was told to stop.
    Cancelled,
    /// An idempotency key was reused with different arguments.
    IdempotencyConflict,
    /// The idempotency key's first execution is still running (another caller, or the fleet
    /// run it started): send the same execute again for its result; the details name what
    /// to follow.
    IdempotencyInProgress,
    /// The named object (a lease, a session, an artifact, a deploy to roll back) does not exist
    /// in the caller's scope.
    NotFound,
    /// The object changed since the caller read it (a stale fingerprint or base version):
    /// read it again and redo the change on top of the current version.
    Conflict,
    /// The write needs an operator's approval, which is pending: the answer names the
    /// approval id; retry the same execute after it was approved.
    ApprovalPending,
    /// The audit trail cannot be written right now: root refuses every call until it can, so
    /// nothing runs that could not be recorded (retry later; `/readyz` says when it is back).
    AuditUnavailable,
    /// The target's clock differs from root's by more than root allows: the hub refuses
    /// calls (the message says by how much) until its clock is fixed and it reconnects.
    ClockSkew,
    /// The target is cordoned by an operator: no new calls (calls in flight finish).
    TargetCordoned,
    /// The target is retired: its hub credentials are revoked and it takes no calls again.
    TargetRetired,
    /// An operator denied this tool on this target (per-target narrowing, e.g. read-only).
    TargetNarrowed,
    /// A rate (`[rates]`: per lease, owner, tool or operator) is spent: retry after the
    /// details' `retry_after_ms`.
    RateLimited,
    /// Something went wrong on our side; details are in the server log.
    Internal,
}

impl ErrorCode {
    /// Every code, in declaration order (`shared/tests/schemas.rs` keeps it whole).
    pub const ALL: [ErrorCode; 31] = [
        ErrorCode::Unauthenticated,
        ErrorCode::Forbidden,
        ErrorCode::RoleRequired,
        ErrorCode::UnknownTool,
        ErrorCode::CapabilityNotGranted,
        ErrorCode::EnvironmentForbidden,
        ErrorCode::InvalidArguments,
        ErrorCode::TargetOffline,
        ErrorCode::Timeout,
        ErrorCode::Busy,
        ErrorCode::SkillDisabled,
        ErrorCode::ConfirmationRequired,
        ErrorCode::ForbiddenDestructive,
        ErrorCode::DescriptorUnavailable,
        ErrorCode::SignatureInvalid,
        ErrorCode::DeadlineExpired,
        ErrorCode::ReplayRejected,
        ErrorCode::AdapterFailed,
        ErrorCode::Cancelled,
        ErrorCode::IdempotencyConflict,
        ErrorCode::IdempotencyInProgress,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::ApprovalPending,
        ErrorCode::AuditUnavailable,
        ErrorCode::ClockSkew,
        ErrorCode::TargetCordoned,
        ErrorCode::TargetRetired,
        ErrorCode::TargetNarrowed,
        ErrorCode::RateLimited,
        ErrorCode::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::RoleRequired => "role_required",
            ErrorCode::UnknownTool => "unknown_tool",
            ErrorCode::CapabilityNotGranted => "capability_not_granted",
            ErrorCode::EnvironmentForbidden => "environment_forbidden",
            ErrorCode::InvalidArguments => "invalid_arguments",
            ErrorCode::TargetOffline => "target_offline",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Busy => "busy",
            ErrorCode::SkillDisabled => "skill_disabled",
            ErrorCode::ConfirmationRequired => "confirmation_required",
            ErrorCode::ForbiddenDestructive => "forbidden_destructive",
            ErrorCode::DescriptorUnavailable => "descriptor_unavailable",
            ErrorCode::SignatureInvalid => "signature_invalid",
            ErrorCode::DeadlineExpired => "deadline_expired",
            ErrorCode::ReplayRejected => "replay_rejected",
            ErrorCode::AdapterFailed => "adapter_failed",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::IdempotencyConflict => "idempotency_conflict",
            ErrorCode::IdempotencyInProgress => "idempotency_in_progress",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::ApprovalPending => "approval_pending",
            ErrorCode::AuditUnavailable => "audit_unavailable",
            ErrorCode::ClockSkew => "clock_skew",
            ErrorCode::TargetCordoned => "target_cordoned",
            ErrorCode::TargetRetired => "target_retired",
            ErrorCode::TargetNarrowed => "target_narrowed",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Internal => "internal",
        }
    }

    /// Whether retrying the same call later may succeed.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::Busy
                | ErrorCode::RateLimited
                | ErrorCode::IdempotencyInProgress
                | ErrorCode::Timeout
                | ErrorCode::TargetOffline
                | ErrorCode::AdapterFailed
                | ErrorCode::AuditUnavailable
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A normalized error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
// Read tolerantly: it travels in `result` frames (see `protocol`), where a newer hub may add
// fields.
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
    pub retryable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            retryable: code.retryable(),
            details: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ToolError {}

/// What REST `/call` returns and what MCP `structuredContent` mirrors: the result or the
/// error, always linked to the audit event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResponse {
    pub ok: bool,
    pub tool_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    pub event_id: String,
    pub trace_id: String,
    /// What root redacted from this answer (count and paths, never values).
    #[serde(default)]
    pub redactions: crate::event::RedactionSummary,
}
