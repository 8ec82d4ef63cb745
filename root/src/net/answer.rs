//! The error body every HTTP refusal of root carries (`{"error": {...}}`, with `event_id` when
//! an audit event records it), and the response around it: what `api/`'s handlers answer and
//! what the edge (the listener, the MCP front, replica forwarding) answers itself.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcp_shared::error::ErrorCode;
use serde::{Deserialize, Serialize};

/// Every refusal of the REST family: `{"error": {...}}` with the status.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ErrorAnswer {
    pub(crate) error: ErrorDetail,
    /// The audit event that records the refused request (an operator action), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) event_id: Option<String>,
}

/// What went wrong, in the governed calls' error vocabulary.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ErrorDetail {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
    pub(crate) retryable: bool,
}

/// A refusal as an HTTP response.
pub(crate) struct Refused {
    pub(crate) status: StatusCode,
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
    pub(crate) event_id: Option<String>,
    /// Seconds the client should wait before trying again (`Retry-After`; `audit_unavailable`
    /// always says 1).
    pub(crate) retry_after: Option<u64>,
    /// A `401`'s own challenge (DPoP's) instead of the bearer one.
    pub(crate) challenge: Option<Box<Challenge>>,
}

/// A `401`'s challenge other than `Bearer error="invalid_token"`.
#[derive(Debug, Clone)]
pub(crate) struct Challenge {
    pub(crate) www_authenticate: HeaderValue,
    /// Root's DPoP nonce (`DPoP-Nonce`), when the challenge asks for it.
    pub(crate) dpop_nonce: Option<HeaderValue>,
}

impl Refused {
    pub(crate) fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Refused {
        Refused {
            status,
            code,
            message: message.into(),
            event_id: None,
            retry_after: None,
            challenge: None,
        }
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let body = Json(ErrorAnswer {
            error: ErrorDetail {
                code: self.code,
                retryable: self.code.retryable(),
                message: self.message,
            },
            event_id: self.event_id,
        });
        let mut res = (self.status, body).into_response();
        let retry_after = self
            .retry_after
            .or((self.code == ErrorCode::AuditUnavailable).then_some(1));
        if let Some(secs) = retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        match self.challenge {
            Some(c) => {
                res.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, c.www_authenticate);
                if let Some(n) = c.dpop_nonce {
                    res.headers_mut().insert(crate::dpop::NONCE_HEADER, n);
                }
            }
            None if self.status == StatusCode::UNAUTHORIZED => {
                res.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer error=\"invalid_token\""),
                );
            }
            None => {}
        }
        res
    }
}
