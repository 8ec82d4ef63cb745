//! `ApiError`: what a REST endpoint answers when it refuses or fails (status, normalized
//! error body, the audit event that records it), and the status each error code maps to.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use mcp_shared::error::ErrorCode;

use crate::net::answer::{Challenge, Refused};
use crate::ops::error::Refusal;

/// An error answered by a REST endpoint: the status plus a normalized error body.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: ErrorCode,
    message: String,
    /// The audit event that records the refused request (an operator action), if any.
    event_id: Option<String>,
    /// Seconds the client should wait before trying again (`Retry-After`).
    retry_after: Option<u64>,
    /// A `401`'s challenge other than the bearer one (DPoP's), and root's DPoP nonce.
    challenge: Option<Box<Challenge>>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            event_id: None,
            retry_after: None,
            challenge: None,
        }
    }

    /// The `401`, with `challenge` for `WWW-Authenticate` and root's DPoP `nonce` to sign with.
    pub(crate) fn with_challenge(
        mut self,
        challenge: axum::http::HeaderValue,
        nonce: Option<String>,
    ) -> ApiError {
        self.challenge = Some(Box::new(Challenge {
            www_authenticate: challenge,
            dpop_nonce: nonce.and_then(|n| axum::http::HeaderValue::from_str(&n).ok()),
        }));
        self
    }

    /// The refusal, telling the client how many seconds to wait (`Retry-After`).
    pub(crate) fn retry_after(mut self, secs: u64) -> ApiError {
        self.retry_after = Some(secs);
        self
    }

    /// The refusal as a tool error (for the audit event that records it).
    pub(crate) fn tool_error(&self) -> mcp_shared::ToolError {
        mcp_shared::ToolError::new(self.code, self.message.clone())
    }

    /// The refusal, naming the audit event that records it.
    pub(crate) fn with_event(mut self, event_id: String) -> ApiError {
        self.event_id = Some(event_id);
        self
    }
    pub(crate) fn not_found(what: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, what)
    }
    pub(crate) fn bad_request(what: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidArguments, what)
    }
    /// A tool error as a REST error (its status from [`status_of`]).
    pub(crate) fn of_tool(e: &mcp_shared::ToolError) -> ApiError {
        ApiError::new(status_of(e.code), e.code, e.message.clone())
    }
    pub(crate) fn internal(e: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %e, "internal error on a REST endpoint");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            "internal error; see the root's log",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        Refused {
            status: self.status,
            code: self.code,
            message: self.message,
            event_id: self.event_id,
            retry_after: self.retry_after,
            challenge: self.challenge,
        }
        .into_response()
    }
}

impl crate::ops::audited::Outcome for ApiError {
    fn tool_error(&self) -> mcp_shared::ToolError {
        ApiError::tool_error(self)
    }
    fn with_event(self, event_id: String) -> ApiError {
        ApiError::with_event(self, event_id)
    }
}

/// A service's refusal answers with the status its code maps to ([`status_of`]), naming its
/// event, and `Retry-After` when it says when to retry.
impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> ApiError {
        let retry = retry_after(&r.error);
        let mut e = ApiError::of_tool(&r.error);
        e.event_id = r.event_id;
        e.retry_after = retry;
        e
    }
}

/// `Retry-After` (whole seconds, rounded up) for a tool error that says when to retry
/// (`rate_limited`'s `retry_after_ms`).
pub(crate) fn retry_after(e: &mcp_shared::error::ToolError) -> Option<u64> {
    let ms = e.details.as_ref()?.get("retry_after_ms")?.as_u64()?;
    (e.code == ErrorCode::RateLimited).then(|| ms.div_ceil(1000).max(1))
}

/// The HTTP status a tool error maps to on REST `/call`.
pub(crate) fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorCode::Forbidden
        | ErrorCode::RoleRequired
        | ErrorCode::CapabilityNotGranted
        | ErrorCode::EnvironmentForbidden => StatusCode::FORBIDDEN,
        ErrorCode::ForbiddenDestructive | ErrorCode::SkillDisabled => StatusCode::FORBIDDEN,
        ErrorCode::TargetCordoned | ErrorCode::TargetRetired | ErrorCode::TargetNarrowed => {
            StatusCode::FORBIDDEN
        }
        ErrorCode::UnknownTool | ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::InvalidArguments => StatusCode::BAD_REQUEST,
        ErrorCode::ConfirmationRequired => StatusCode::PRECONDITION_REQUIRED,
        ErrorCode::IdempotencyConflict | ErrorCode::IdempotencyInProgress | ErrorCode::Conflict => {
            StatusCode::CONFLICT
        }
        ErrorCode::ApprovalPending => StatusCode::ACCEPTED,
        ErrorCode::Busy | ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
        ErrorCode::TargetOffline
        | ErrorCode::DescriptorUnavailable
        | ErrorCode::AuditUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        // The target refused what root forwarded, or its adapter broke: a gateway failure.
        ErrorCode::SignatureInvalid
        | ErrorCode::DeadlineExpired
        | ErrorCode::ReplayRejected
        | ErrorCode::ClockSkew
        | ErrorCode::AdapterFailed => StatusCode::BAD_GATEWAY,
        // 499: the client closed the request (nginx's convention; REST clients see it only
        // in the audit trail, since they cannot cancel).
        ErrorCode::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
