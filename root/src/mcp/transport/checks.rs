//! What a message must say about its revision before root hands it to the service: the
//! `MCP-Protocol-Version` header, a request's own revision in `_meta` (2026-07-28), and the
//! standard headers of 2026-07-28 (`Mcp-Method`, `Mcp-Name`) that must agree with the body.
//! Each refusal has the status and JSON-RPC error the Streamable HTTP transport specifies.

use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorCode, GetMeta, ProtocolVersion, RequestId,
    ServerJsonRpcMessage,
};
use rmcp::transport::common::http_header::{
    BASE64_HEADER_PREFIX, BASE64_HEADER_SUFFIX, HEADER_MCP_METHOD, HEADER_MCP_NAME,
    HEADER_MCP_PROTOCOL_VERSION,
};
use serde_json::Value;

use crate::mcp::error::McpError;

/// A `400` Header Mismatch (-32020) with `why`.
fn mismatch(why: String) -> McpError {
    McpError::bad_request(ErrorCode::HEADER_MISMATCH, why)
}

/// The request id of a message, when it is a request.
pub(crate) fn request_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        ClientJsonRpcMessage::Request(r) => Some(r.id.clone()),
        _ => None,
    }
}

fn header_version(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(HEADER_MCP_PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
}

fn own_version(message: &ClientJsonRpcMessage) -> Option<ProtocolVersion> {
    match message {
        ClientJsonRpcMessage::Request(r) => r.request.get_meta().protocol_version(),
        _ => None,
    }
}

/// The `MCP-Protocol-Version` header, when present, is readable and names a revision MCP
/// knows (an unknown one passes when the request names its own revision in `_meta`).
pub(crate) fn version_header(
    headers: &HeaderMap,
    id: Option<RequestId>,
    allow_unknown: bool,
) -> Result<(), McpError> {
    let Some(value) = headers.get(HEADER_MCP_PROTOCOL_VERSION) else {
        return Ok(());
    };
    let Ok(version) = value.to_str() else {
        return Err(McpError::transport(
            StatusCode::BAD_REQUEST,
            "Bad Request: Invalid MCP-Protocol-Version header encoding",
        )
        .answering(id.as_ref()));
    };
    let known = ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .any(|v| v.as_str() == version);
    if !allow_unknown && !known {
        return Err(McpError::transport(
            StatusCode::BAD_REQUEST,
            format!("Bad Request: Unsupported MCP-Protocol-Version: {version}"),
        )
        .answering(id.as_ref()));
    }
    Ok(())
}

/// An `initialize` whose `MCP-Protocol-Version` header (if any) names another revision than
/// its params.
fn header_matches_initialize(
    headers: &HeaderMap,
    body_version: &str,
    id: &RequestId,
) -> Result<(), McpError> {
    let Some(value) = headers.get(HEADER_MCP_PROTOCOL_VERSION) else {
        return Ok(());
    };
    let Ok(header) = value.to_str() else {
        return Err(McpError::bad_request(
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: MCP-Protocol-Version header is not valid UTF-8",
        )
        .answering(Some(id)));
    };
    if header != body_version {
        return Err(McpError::bad_request(
            ErrorCode::INVALID_REQUEST,
            format!(
                "Invalid Request: MCP-Protocol-Version header ({header}) does not match \
                 initialize params.protocolVersion ({body_version})"
            ),
        )
        .answering(Some(id)));
    }
    Ok(())
}

/// A request's revision in `_meta` agrees with the header; a request on 2026-07-28 (by its
/// header) or a `server/discover` carries every `_meta` key that revision requires.
pub(crate) fn version_meta(
    headers: &HeaderMap,
    message: &ClientJsonRpcMessage,
) -> Result<(), McpError> {
    let ClientJsonRpcMessage::Request(request) = message else {
        return Ok(());
    };
    if matches!(&request.request, ClientRequest::InitializeRequest(_)) {
        return Ok(());
    }
    let id = Some(&request.id);
    let discover = matches!(&request.request, ClientRequest::DiscoverRequest(_));
    let meta = request.request.get_meta();
    let header = header_version(headers);
    let Some(own) = meta.protocol_version() else {
        let required =
            discover || header.is_some_and(|v| v >= ProtocolVersion::V_2026_07_28.as_str());
        if required {
            let missing = meta.missing_required_keys(&ProtocolVersion::V_2026_07_28);
            return Err(McpError::bad_request(
                ErrorCode::INVALID_PARAMS,
                format!(
                    "Invalid params: request _meta is missing or has malformed required fields: {}",
                    missing.join(", ")
                ),
            )
            .answering(id));
        }
        return Ok(());
    };
    let mismatch = |why: String| mismatch(why).answering(id);
    match header {
        None => Err(mismatch(
            "request _meta protocolVersion requires MCP-Protocol-Version header".into(),
        )),
        Some(h) if h != own.as_str() => Err(mismatch(format!(
            "MCP-Protocol-Version header ({h}) does not match request _meta protocolVersion ({own})"
        ))),
        Some(_) => Ok(()),
    }
}

/// Whether a message belongs to the revisions with sessions (an `initialize`, or a request
/// without a complete 2026-07-28 `_meta` on a revision that has the handshake), after the
/// header checks every message gets.
pub(crate) fn uses_session(
    headers: &HeaderMap,
    message: &ClientJsonRpcMessage,
) -> Result<bool, McpError> {
    let id = request_id(message);
    let own = own_version(message);
    version_header(headers, id.clone(), own.is_some())?;
    if let ClientJsonRpcMessage::Request(r) = message
        && let ClientRequest::InitializeRequest(init) = &r.request
    {
        header_matches_initialize(headers, init.params.protocol_version.as_str(), &r.id)?;
    }
    version_meta(headers, message)?;
    if let ClientJsonRpcMessage::Request(r) = message {
        if matches!(&r.request, ClientRequest::InitializeRequest(_)) {
            return Ok(true);
        }
        if r.request
            .get_meta()
            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty()
        {
            return Ok(false);
        }
    }
    let version = own.or_else(|| {
        header_version(headers)
            .and_then(|s| serde_json::from_value(Value::String(s.to_owned())).ok())
    });
    Ok(version.is_none_or(|v| v.has_initialize()))
}

/// Whether the headers alone (a `GET` or `DELETE`) belong to a revision with sessions.
pub(crate) fn headers_use_session(headers: &HeaderMap) -> Result<bool, McpError> {
    version_header(headers, None, false)?;
    let version: Option<ProtocolVersion> = header_version(headers)
        .and_then(|s| serde_json::from_value(Value::String(s.to_owned())).ok());
    Ok(version.is_none_or(|v| v.has_initialize()))
}

/// Why a standard header has no usable single value.
#[derive(Debug, thiserror::Error)]
enum HeaderError {
    #[error("duplicate {0} header")]
    Duplicate(&'static str),
    #[error("{0} header contains invalid characters")]
    Invalid(&'static str),
}

/// The sole value of a header, or why there is none usable.
fn single<'a>(headers: &'a HeaderMap, name: &'static str) -> Result<Option<&'a str>, HeaderError> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(HeaderError::Duplicate(name));
    }
    value
        .to_str()
        .map(Some)
        .map_err(|_| HeaderError::Invalid(name))
}

/// A header value in the standard headers' encoding (plain, or `=?base64?…?=`).
fn decode(value: &str) -> Option<String> {
    match value
        .strip_prefix(BASE64_HEADER_PREFIX)
        .and_then(|v| v.strip_suffix(BASE64_HEADER_SUFFIX))
    {
        Some(inner) => base64::engine::general_purpose::STANDARD
            .decode(inner)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
        None => Some(value.to_owned()),
    }
}

/// The value `Mcp-Name` must repeat, by method: a name, a URI or a task id.
fn name_of(request: &ClientRequest) -> Option<&str> {
    match request {
        ClientRequest::CallToolRequest(r) => Some(&r.params.name),
        ClientRequest::GetPromptRequest(r) => Some(&r.params.name),
        ClientRequest::ReadResourceRequest(r) => Some(&r.params.uri),
        ClientRequest::SubscribeRequest(r) => Some(&r.params.uri),
        ClientRequest::UnsubscribeRequest(r) => Some(&r.params.uri),
        ClientRequest::GetTaskRequest(r) => Some(&r.params.task_id),
        ClientRequest::UpdateTaskRequest(r) => Some(&r.params.task_id),
        ClientRequest::CancelTaskRequest(r) => Some(&r.params.task_id),
        _ => None,
    }
}

/// On 2026-07-28 (by the header), `Mcp-Method` and `Mcp-Name` are present and agree with the
/// body; an `initialize` may omit them but must not contradict itself. Root's tools declare
/// no `Mcp-Param-*` headers, so none is checked.
pub(crate) fn standard_headers(
    headers: &HeaderMap,
    message: &ClientJsonRpcMessage,
) -> Result<(), McpError> {
    let required =
        header_version(headers).is_some_and(|v| v >= ProtocolVersion::STANDARD_HEADERS.as_str());
    if !required {
        return Ok(());
    }
    let (method, name, id) = match message {
        ClientJsonRpcMessage::Request(r) => (
            std::borrow::Cow::Borrowed(r.request.method()),
            name_of(&r.request),
            Some(r.id.clone()),
        ),
        ClientJsonRpcMessage::Notification(n) => {
            let method = serde_json::to_value(n)
                .ok()
                .and_then(|v| v.get("method")?.as_str().map(str::to_owned))
                .unwrap_or_default();
            (std::borrow::Cow::Owned(method), None, None)
        }
        _ => return Ok(()),
    };
    let mismatch = |why: String| mismatch(why).answering(id.as_ref());
    if method == "initialize" {
        let mut values = headers.get_all(HEADER_MCP_METHOD).iter();
        let Some(first) = values.next() else {
            return Ok(());
        };
        if values.next().is_some() {
            return Err(mismatch(
                "multiple Mcp-Method header values supplied; initialize requires exactly one"
                    .into(),
            ));
        }
        if first.as_bytes() != b"initialize" {
            return Err(mismatch(format!(
                "Mcp-Method header `{}` does not match body method `initialize`",
                String::from_utf8_lossy(first.as_bytes())
            )));
        }
        return Ok(());
    }
    match single(headers, HEADER_MCP_METHOD).map_err(|e| mismatch(e.to_string()))? {
        None => return Err(mismatch("missing required Mcp-Method header".into())),
        Some(v) if v != method => {
            return Err(mismatch(format!(
                "Mcp-Method header `{v}` does not match body method `{method}`"
            )));
        }
        Some(_) => {}
    }
    if let Some(expected) = name {
        let raw = single(headers, HEADER_MCP_NAME)
            .map_err(|e| mismatch(e.to_string()))?
            .ok_or_else(|| mismatch(format!("missing required Mcp-Name header for `{method}`")))?;
        let decoded =
            decode(raw).ok_or_else(|| mismatch("Mcp-Name header is not valid Base64".into()))?;
        if decoded != expected {
            return Err(mismatch(format!(
                "Mcp-Name header `{decoded}` does not match body value `{expected}`"
            )));
        }
    }
    Ok(())
}

/// The status of a stateless request's only message: the transport's errors about the
/// request itself are `400`, an unknown method `404`, everything else `200`.
pub(crate) fn stateless_status(message: &ServerJsonRpcMessage, meta_malformed: bool) -> StatusCode {
    let ServerJsonRpcMessage::Error(e) = message else {
        return StatusCode::OK;
    };
    match e.error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::INVALID_PARAMS if meta_malformed => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn call(name: &str) -> ClientJsonRpcMessage {
        serde_json::from_value(
            json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": { "name": name } }),
        )
        .expect("a tools/call")
    }

    #[test]
    fn standard_headers_agree_with_the_body_on_2026_07_28() {
        let good = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "hub.get_status"),
        ];
        assert_eq!(
            standard_headers(&headers(&good), &call("hub.get_status")),
            Ok(())
        );
        let other = standard_headers(&headers(&good), &call("hub.get_logs"));
        let other = other.expect_err("another name");
        assert_eq!(other.code(), ErrorCode::HEADER_MISMATCH);
        assert_eq!(
            other.body()["id"],
            json!(7),
            "the refusal answers the request"
        );
        let encoded = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?aHViLmdldF9zdGF0dXM=?="),
        ];
        assert_eq!(
            standard_headers(&headers(&encoded), &call("hub.get_status")),
            Ok(())
        );
        let missing = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
        ];
        assert!(standard_headers(&headers(&missing), &call("hub.get_status")).is_err());
        let twice = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "hub.get_status"),
        ];
        assert!(standard_headers(&headers(&twice), &call("hub.get_status")).is_err());
        // Earlier revisions have no standard headers: nothing to agree with.
        let old = [
            ("mcp-protocol-version", "2025-11-25"),
            ("mcp-method", "tools/list"),
        ];
        assert_eq!(standard_headers(&headers(&old), &call("x")), Ok(()));
    }

    #[test]
    fn unknown_and_unreadable_revisions_are_refused() {
        let h = headers(&[("mcp-protocol-version", "1999-01-01")]);
        assert_eq!(
            version_header(&h, None, false).map_err(|r| r.message().to_owned()),
            Err("Bad Request: Unsupported MCP-Protocol-Version: 1999-01-01".to_string())
        );
        assert_eq!(version_header(&h, None, true), Ok(()));
        assert_eq!(version_header(&HeaderMap::new(), None, false), Ok(()));
    }

    #[test]
    fn revisions_with_the_handshake_use_sessions() {
        assert_eq!(headers_use_session(&HeaderMap::new()), Ok(true));
        let h = headers(&[("mcp-protocol-version", "2025-11-25")]);
        assert_eq!(headers_use_session(&h), Ok(true));
        let h = headers(&[("mcp-protocol-version", "2026-07-28")]);
        assert_eq!(headers_use_session(&h), Ok(false));
    }
}
