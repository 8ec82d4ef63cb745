//! The one shape of a JSON-RPC error that root answers on `/mcp` outside the MCP service:
//! the HTTP status, rmcp's error object (code, message, data) and the id of the request it
//! answers (`null` when the request's id could not be read, as JSON-RPC requires). The front's
//! refusals ([`FrontError`](crate::mcp::front::FrontError)), the revision checks
//! ([`checks`](crate::mcp::transport::checks)), unknown sessions and the Host/Origin rule
//! all become an [`McpError`], whose status and body are built here and nowhere else. Errors
//! the service answers itself are rmcp's `ErrorData` inside the service's own response.

use std::borrow::Cow;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rmcp::ErrorData;
use rmcp::model::{ErrorCode, RequestId};
use serde_json::{Value, json};

/// A JSON-RPC error with its HTTP status and the id of the request it answers.
#[derive(Debug, Clone, PartialEq)]
pub struct McpError {
    status: StatusCode,
    error: ErrorData,
    id: Value,
}

impl McpError {
    /// An error of `status` with `code` and `message`, answering no readable request id.
    pub(crate) fn new(
        status: StatusCode,
        code: ErrorCode,
        message: impl Into<Cow<'static, str>>,
    ) -> Self {
        McpError {
            status,
            error: ErrorData::new(code, message, None),
            id: Value::Null,
        }
    }

    /// A `400` with `code`: the request itself is wrong.
    pub(crate) fn bad_request(code: ErrorCode, message: impl Into<Cow<'static, str>>) -> Self {
        McpError::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// A refusal of the transport (no session, unknown session, root stopping): `status`
    /// with an Invalid Request error.
    pub(crate) fn transport(status: StatusCode, message: impl Into<Cow<'static, str>>) -> Self {
        McpError::new(status, ErrorCode::INVALID_REQUEST, message)
    }

    /// A session root does not hold, or holds for another lease: the two are answered alike,
    /// so a bearer cannot learn which sessions exist.
    pub(crate) fn session_not_found() -> Self {
        McpError::transport(StatusCode::NOT_FOUND, "Not Found: Session not found")
    }

    /// The same error answering request `id`.
    pub(crate) fn answering(mut self, id: Option<&RequestId>) -> Self {
        self.id = id.map_or(Value::Null, |id| json!(id));
        self
    }

    /// The same error answering an id read from the raw body (it may not fit rmcp's
    /// `RequestId`, e.g. an integer beyond `i64`; it is echoed as the client sent it).
    pub(crate) fn answering_raw(mut self, id: Option<Value>) -> Self {
        self.id = id.unwrap_or(Value::Null);
        self
    }

    #[cfg(test)]
    pub(crate) fn code(&self) -> ErrorCode {
        self.error.code
    }

    #[cfg(test)]
    pub(crate) fn message(&self) -> &str {
        &self.error.message
    }

    /// The JSON-RPC error response.
    pub fn body(&self) -> Value {
        json!({ "jsonrpc": "2.0", "id": self.id, "error": self.error })
    }
}

impl IntoResponse for McpError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_carries_the_code_the_message_and_the_id_asked() {
        let e = McpError::bad_request(ErrorCode::HEADER_MISMATCH, "headers disagree")
            .answering(Some(&RequestId::Number(7)));
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            e.body(),
            json!({"jsonrpc": "2.0", "id": 7,
                   "error": {"code": -32020, "message": "headers disagree"}})
        );
        let raw =
            McpError::transport(StatusCode::NOT_FOUND, "gone").answering_raw(Some(json!(u64::MAX)));
        assert_eq!(raw.body()["id"], json!(u64::MAX));
        assert_eq!(McpError::session_not_found().body()["id"], Value::Null);
    }
}
