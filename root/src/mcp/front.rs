//! What a request body must be before `/mcp` ([`crate::mcp::transport`]) or a REST handler
//! reads it, refused with the precise status and an error in the shape of the endpoint (a
//! JSON-RPC error on `/mcp`, `{"error": {code, message}}` on the REST family). On `/mcp`, in
//! order, each with its status and JSON-RPC error (`id` null, as JSON-RPC requires when the
//! request's id cannot be known):
//! 1. `Accept` lists `application/json` and `text/event-stream`: else `406`, -32600;
//! 2. `Content-Type` is `application/json`: else `415`, -32600;
//! 3. the body fits `limits.max_body_bytes`: else `413`, -32600;
//! 4. UTF-8, at most [`MAX_DEPTH`] levels of nesting, JSON syntax: else `400`, -32700;
//! 5. one JSON-RPC 2.0 message object, not a batch (array): else `400`, -32600.
//!
//! A message that still does not decode as an MCP client message is answered `400`, -32602
//! with the request's id. rmcp decodes a request whose params do not fit its method as a
//! custom request, which reaches [`unmatched_request`]: -32602 for a known method with params
//! that do not fit it, -32601 for an unknown one.
//!
//! [`rest_guard`] does steps 2–4 for the REST family (syntax and fields are the handler's
//! typed extractor's, answered 400 `invalid_arguments`), and [`shape_refusals`] gives the
//! body limit's own `413` (sent before any handler when `Content-Length` is too large) the
//! endpoint's shape.
//!
//! Batches: MCP 2025-03-26 let clients send JSON-RPC batches (arrays) and required servers to
//! accept them; 2025-06-18 removed batching, and 2025-11-25 and 2026-07-28 have none. Root
//! serves no batches on any revision and says so; a 2025-03-26 client sends its messages one
//! per POST.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Value, json};

use crate::app::App;
use crate::mcp::error::McpError;
use crate::net::answer::Refused;
use mcp_shared::error::ErrorCode;
use rmcp::model::ErrorCode as RpcCode;

/// Deepest nesting of arrays and objects accepted in a request body (serde_json stops at 128;
/// no MCP message needs more than a handful).
pub(crate) const MAX_DEPTH: usize = 64;

/// Why the front refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontError {
    #[error("Not Acceptable: the client must accept both application/json and text/event-stream")]
    NotAcceptable,
    #[error("Unsupported Media Type: Content-Type must be application/json, not {0}")]
    UnsupportedMediaType(String),
    #[error("Payload Too Large: the request body exceeds {0} bytes")]
    TooLarge(usize),
    #[error("Bad Request: the request body could not be read: {0}")]
    Unreadable(String),
    /// The body sent nothing for `limits.body_read_timeout_ms` (see `listener`).
    #[error("Request Timeout: the request body sent nothing for {0} ms")]
    Stalled(u128),
    #[error("Parse error: the body is not valid UTF-8 (invalid byte at offset {0})")]
    NotUtf8(usize),
    #[error("Parse error: JSON nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// A string holds U+0000 (`\u0000`), which no identifier, argument or audit field may.
    #[error("Invalid Request: the body holds a NUL character (\\u0000) at byte {0}")]
    Nul(usize),
    /// The path or query holds a NUL character (`%00`).
    #[error("Bad Request: the request's path or query holds a NUL character (%00)")]
    NulInUri,
    #[error("Parse error: {0}")]
    Syntax(String),
    #[error(
        "Invalid Request: JSON-RPC batches (arrays) are not supported; MCP removed batching in \
         revision 2025-06-18, send one message per POST"
    )]
    Batch,
    #[error("Invalid Request: {0}")]
    NotAMessage(String),
    #[error("Invalid params for `{method}`: {detail}")]
    InvalidParams { method: String, detail: String },
}

impl FrontError {
    pub fn status(&self) -> StatusCode {
        match self {
            FrontError::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
            FrontError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            FrontError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            FrontError::Stalled(_) => StatusCode::REQUEST_TIMEOUT,
            FrontError::Unreadable(_)
            | FrontError::NotUtf8(_)
            | FrontError::TooDeep
            | FrontError::Nul(_)
            | FrontError::NulInUri
            | FrontError::Syntax(_)
            | FrontError::Batch
            | FrontError::NotAMessage(_)
            | FrontError::InvalidParams { .. } => StatusCode::BAD_REQUEST,
        }
    }

    /// The JSON-RPC error code.
    pub fn code(&self) -> RpcCode {
        match self {
            FrontError::NotUtf8(_) | FrontError::TooDeep | FrontError::Syntax(_) => {
                RpcCode::PARSE_ERROR
            }
            FrontError::InvalidParams { .. } => RpcCode::INVALID_PARAMS,
            FrontError::NotAcceptable
            | FrontError::UnsupportedMediaType(_)
            | FrontError::TooLarge(_)
            | FrontError::Unreadable(_)
            | FrontError::Stalled(_)
            | FrontError::Batch
            | FrontError::Nul(_)
            | FrontError::NulInUri
            | FrontError::NotAMessage(_) => RpcCode::INVALID_REQUEST,
        }
    }
}

impl From<FrontError> for McpError {
    fn from(e: FrontError) -> McpError {
        McpError::new(e.status(), e.code(), e.to_string())
    }
}

/// What the front learned of an accepted message: its id and method, for later errors.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Probe {
    pub id: Option<Value>,
    pub method: Option<String>,
}

/// Accepted media types of an `Accept` header list, without parameters; `q=0` excludes.
pub(crate) fn accepts(headers: &HeaderMap, wanted: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|entry| {
            let mut parts = entry.split(';');
            let essence = parts.next().unwrap_or("").trim();
            // Only an explicit zero weight excludes; a malformed one is ignored (as rmcp does).
            let excluded = parts.any(|p| {
                p.split_once('=').is_some_and(|(k, v)| {
                    k.trim().eq_ignore_ascii_case("q")
                        && v.trim().parse::<f32>().is_ok_and(|q| q == 0.0)
                })
            });
            !excluded && essence.eq_ignore_ascii_case(wanted)
        })
}

/// Steps 1 and 2: the `Accept` and `Content-Type` a POST needs.
pub(crate) fn check_headers(headers: &HeaderMap) -> Result<(), FrontError> {
    if !(accepts(headers, "application/json") && accepts(headers, "text/event-stream")) {
        return Err(FrontError::NotAcceptable);
    }
    check_content_type(headers.get(header::CONTENT_TYPE))
}

/// `Content-Type` is `application/json` (parameters such as `charset` allowed).
fn check_content_type(ct: Option<&axum::http::HeaderValue>) -> Result<(), FrontError> {
    let ct = ct.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let essence = ct
        .as_deref()
        .map(|c| c.split(';').next().unwrap_or("").trim());
    match essence {
        Some(e) if e.eq_ignore_ascii_case("application/json") => Ok(()),
        Some(_) => Err(FrontError::UnsupportedMediaType(format!(
            "`{}`",
            ct.unwrap_or_default().chars().take(100).collect::<String>()
        ))),
        None => Err(FrontError::UnsupportedMediaType("none".into())),
    }
}

/// One pass over a JSON text: nesting deeper than `limit` (counted outside strings), or a
/// string holding U+0000 (JSON can write it only as the escape `\u0000`; `\\u0000` is a
/// backslash and text).
fn check_structure(text: &[u8], limit: usize) -> Result<(), FrontError> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, &b) in text.iter().enumerate() {
        if in_string {
            match b {
                b'u' if escaped && text.get(i + 1..i + 5) == Some(b"0000") => {
                    return Err(FrontError::Nul(i - 1));
                }
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Err(FrontError::TooDeep);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Middleware on every route: a path or query holding a NUL character (`%00`) is refused
/// (`400`, in `/mcp`'s shape there) before any handler reads it, since no identifier may hold
/// one and PostgreSQL refuses it in a query.
pub(crate) async fn refuse_nul_uri(req: Request, next: Next) -> Response {
    let has = |s: &str| s.as_bytes().windows(3).any(|w| w == b"%00");
    if !has(req.uri().path()) && !req.uri().query().is_some_and(has) {
        return next.run(req).await;
    }
    if req.uri().path() == "/mcp" {
        McpError::from(FrontError::NulInUri).into_response()
    } else {
        rest_error(&FrontError::NulInUri)
    }
}

/// The top level of a body: a message object's members of interest, or another JSON kind.
enum Top {
    Object(Members),
    Array,
    Other(&'static str),
}

#[derive(Default)]
struct Members {
    jsonrpc: Option<Value>,
    id: Option<Value>,
    method: Option<Value>,
    params: Option<&'static str>,
    result: bool,
    error: bool,
    duplicate: Option<&'static str>,
}

/// The JSON kind of a value, its content skipped.
struct Kind(&'static str);

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Kind, D::Error> {
        d.deserialize_any(KindVisitor)
    }
}

struct KindVisitor;

impl<'de> Visitor<'de> for KindVisitor {
    type Value = Kind;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Kind, E> {
        Ok(Kind("boolean"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Kind, E> {
        Ok(Kind("number"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Kind, E> {
        Ok(Kind("number"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Kind, E> {
        Ok(Kind("number"))
    }
    fn visit_str<E>(self, _: &str) -> Result<Kind, E> {
        Ok(Kind("string"))
    }
    fn visit_unit<E>(self) -> Result<Kind, E> {
        Ok(Kind("null"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Kind, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Kind("array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Kind, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Kind("object"))
    }
}

impl<'de> Deserialize<'de> for Top {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Top, D::Error> {
        d.deserialize_any(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON-RPC message")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Top, E> {
        Ok(Top::Other("boolean"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Top, E> {
        Ok(Top::Other("number"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Top, E> {
        Ok(Top::Other("number"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Top, E> {
        Ok(Top::Other("number"))
    }
    fn visit_str<E>(self, _: &str) -> Result<Top, E> {
        Ok(Top::Other("string"))
    }
    fn visit_unit<E>(self) -> Result<Top, E> {
        Ok(Top::Other("null"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Top, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Top::Array)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let mut m = Members::default();
        fn seen(name: &'static str, present: bool, m: &mut Members) {
            if present && m.duplicate.is_none() {
                m.duplicate = Some(name);
            }
        }
        while let Some(key) = map.next_key::<String>()? {
            match key.as_ref() {
                "jsonrpc" => {
                    seen("jsonrpc", m.jsonrpc.is_some(), &mut m);
                    m.jsonrpc = Some(map.next_value()?);
                }
                "id" => {
                    seen("id", m.id.is_some(), &mut m);
                    m.id = Some(map.next_value()?);
                }
                "method" => {
                    seen("method", m.method.is_some(), &mut m);
                    m.method = Some(map.next_value()?);
                }
                "params" => {
                    seen("params", m.params.is_some(), &mut m);
                    m.params = Some(map.next_value::<Kind>()?.0);
                }
                "result" => {
                    seen("result", m.result, &mut m);
                    map.next_value::<IgnoredAny>()?;
                    m.result = true;
                }
                "error" => {
                    seen("error", m.error, &mut m);
                    map.next_value::<IgnoredAny>()?;
                    m.error = true;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Top::Object(m))
    }
}

/// Steps 4 and 5: the body is one well-formed JSON-RPC 2.0 message. Never panics, for any
/// bytes (property-tested and fuzzed).
pub fn check_body(body: &[u8]) -> Result<Probe, FrontError> {
    let text = check_text(body)?;
    let top: Top = serde_json::from_str(text).map_err(|e| {
        if e.is_eof() && text.trim().is_empty() {
            FrontError::Syntax("the body is empty".into())
        } else {
            FrontError::Syntax(e.to_string())
        }
    })?;
    let m = match top {
        Top::Object(m) => m,
        Top::Array => return Err(FrontError::Batch),
        Top::Other(kind) => {
            return Err(FrontError::NotAMessage(format!(
                "the body must be one JSON-RPC message object, not a {kind}"
            )));
        }
    };
    let bad = |why: &str| Err(FrontError::NotAMessage(why.to_string()));
    if let Some(name) = m.duplicate {
        return bad(&format!("member `{name}` appears twice"));
    }
    match &m.jsonrpc {
        Some(Value::String(v)) if v == "2.0" => {}
        Some(_) => return bad("`jsonrpc` must be \"2.0\""),
        None => return bad("missing `jsonrpc`: \"2.0\""),
    }
    let method = match m.method {
        None => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return bad("`method` must be a string"),
    };
    // MCP: "Requests MUST include a string or integer ID ... the ID MUST NOT be null".
    let id = match m.id {
        None => None,
        Some(v @ Value::String(_)) => Some(v),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(Value::Number(n)),
        Some(Value::Null) if method.is_none() => None,
        Some(_) => return bad("`id` must be a string or an integer"),
    };
    if let Some(kind) = m.params
        && kind != "object"
        && kind != "array"
    {
        return bad(&format!("`params` must be an object, not a {kind}"));
    }
    match (method.is_some(), m.result, m.error) {
        (true, false, false) | (false, true, false) | (false, false, true) => {}
        (true, _, _) => return bad("a request or notification has no `result` or `error`"),
        (false, true, true) => return bad("a response has `result` or `error`, not both"),
        (false, false, false) => {
            return bad(
                "a message needs `method` (a request with `id`, or a notification) or \
                 `result`/`error` (a response)",
            );
        }
    }
    Ok(Probe { id, method })
}

/// Whether a body read failed on the size limit (tower-http's and axum's limits both report
/// http-body-util's `LengthLimitError`, "length limit exceeded").
fn over_limit(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err.to_string().contains("length limit exceeded") {
            return true;
        }
        cur = err.source();
    }
    false
}

/// The body checks shared by both doors: UTF-8 and nesting depth (no parse, so no recursion).
pub(crate) fn check_text(body: &[u8]) -> Result<&str, FrontError> {
    let text = std::str::from_utf8(body).map_err(|e| FrontError::NotUtf8(e.valid_up_to()))?;
    check_structure(body, MAX_DEPTH)?;
    Ok(text)
}

/// Reads a body up to `limit` bytes; over it, [`FrontError::TooLarge`].
pub(crate) async fn read_body(body: Body, limit: usize) -> Result<Bytes, FrontError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        if over_limit(&e) {
            FrontError::TooLarge(limit)
        } else if let Some(stalled) = stalled(&e) {
            FrontError::Stalled(stalled.0)
        } else {
            FrontError::Unreadable(e.to_string())
        }
    })
}

/// The listener's [`BodyStalled`](crate::net::listener::BodyStalled) in an error's chain.
fn stalled<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a crate::net::listener::BodyStalled> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(s) = err.downcast_ref::<crate::net::listener::BodyStalled>() {
            return Some(s);
        }
        cur = err.source();
    }
    None
}

/// A front refusal in the REST family's shape (`invalid_arguments`, the front's status).
fn rest_error(e: &FrontError) -> Response {
    let message = match e {
        FrontError::UnsupportedMediaType(found) => {
            format!("Content-Type must be application/json, not {found}")
        }
        FrontError::TooLarge(limit) => format!("the request body exceeds {limit} bytes"),
        FrontError::NotUtf8(at) => {
            format!("the body is not valid UTF-8 (invalid byte at offset {at})")
        }
        FrontError::TooDeep => format!("JSON nested deeper than {MAX_DEPTH} levels"),
        FrontError::Nul(at) => format!("the body holds a NUL character (\\u0000) at byte {at}"),
        FrontError::NulInUri => "the request's path or query holds a NUL character (%00)".into(),
        other => other.to_string(),
    };
    let code = match e {
        FrontError::Stalled(_) => ErrorCode::Timeout,
        _ => ErrorCode::InvalidArguments,
    };
    Refused::new(e.status(), code, message).into_response()
}

/// Middleware on the REST family: a request with a body must say `Content-Type:
/// application/json` (`415`), fit the limit (`413`), be UTF-8 and nest at most [`MAX_DEPTH`]
/// levels (`400`). Bodiless requests (revoke, rotate, skill commands), the replica channel
/// (its body is authenticated byte for byte, see `replica::forward`) and the witness's
/// `add-checkpoint` (a text protocol, `audit::witness`) pass untouched.
pub(crate) async fn rest_guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let checked = matches!(*req.method(), Method::POST | Method::PUT | Method::PATCH)
        && req.uri().path() != crate::replica::forward::ROUTE_PATH
        && req.uri().path() != crate::audit::witness::ADD_CHECKPOINT;
    if !checked {
        return next.run(req).await;
    }
    let limit = app.config.limits.max_body_bytes;
    let (parts, body) = req.into_parts();
    let bytes = match read_body(body, limit).await {
        Ok(b) => b,
        Err(e) => return rest_error(&e),
    };
    if !bytes.is_empty() {
        let ct = parts.headers.get(header::CONTENT_TYPE);
        if let Err(e) = check_content_type(ct) {
            return rest_error(&e);
        }
        if let Err(e) = check_text(&bytes) {
            return rest_error(&e);
        }
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Outermost middleware: the body limit layer's plain-text `413` (it answers before any
/// handler when `Content-Length` exceeds the limit) in the shape of the endpoint asked.
pub(crate) async fn shape_refusals(
    State(app): State<Arc<App>>,
    req: Request,
    next: Next,
) -> Response {
    let mcp = req.uri().path() == "/mcp";
    let res = next.run(req).await;
    let plain = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|ct| ct.starts_with("text/plain"));
    if res.status() != StatusCode::PAYLOAD_TOO_LARGE || !plain {
        return res;
    }
    let e = FrontError::TooLarge(app.config.limits.max_body_bytes);
    if mcp {
        McpError::from(e).into_response()
    } else {
        rest_error(&e)
    }
}

/// The answer to a request rmcp could not match to a method it serves: rmcp hands a request
/// whose params do not fit its method to the handler as a custom request, so a known method
/// here means invalid params (-32602, with what did not fit), any other method is unknown
/// (-32601, naming it).
// `logging/setLevel` is deprecated by SEP-2577 but still served (see `mcp.rs`).
#[allow(deprecated)]
pub(crate) fn unmatched_request(method: &str, params: Option<&Value>) -> rmcp::ErrorData {
    use rmcp::model as m;
    fn misfit<P: serde::de::DeserializeOwned>(params: Option<&Value>) -> Option<String> {
        let p = params.cloned().unwrap_or_else(|| json!({}));
        serde_json::from_value::<P>(p).err().map(|e| e.to_string())
    }
    let detail = match method {
        "initialize" => misfit::<m::InitializeRequestParams>(params),
        "tools/call" => misfit::<m::CallToolRequestParams>(params),
        "resources/read" => misfit::<m::ReadResourceRequestParams>(params),
        "resources/subscribe" => misfit::<m::SubscribeRequestParams>(params),
        "resources/unsubscribe" => misfit::<m::UnsubscribeRequestParams>(params),
        "prompts/get" => misfit::<m::GetPromptRequestParams>(params),
        "completion/complete" => misfit::<m::CompleteRequestParams>(params),
        "logging/setLevel" => misfit::<m::SetLevelRequestParams>(params),
        "tasks/get" => misfit::<m::GetTaskParams>(params),
        "tasks/update" => misfit::<m::UpdateTaskParams>(params),
        "tasks/cancel" => misfit::<m::CancelTaskParams>(params),
        "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list" => {
            misfit::<Option<m::PaginatedRequestParams>>(params)
        }
        "ping" | "server/discover" => None,
        _ => {
            return rmcp::ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("Method not found: `{method}`"),
                Some(json!({ "method": method })),
            );
        }
    };
    rmcp::ErrorData::invalid_params(
        format!(
            "Invalid params for `{method}`: {}",
            detail.unwrap_or_else(|| "they do not fit the method".into())
        ),
        Some(json!({ "method": method })),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use proptest::prelude::*;

    fn code(body: &str) -> RpcCode {
        check_body(body.as_bytes()).expect_err("refused").code()
    }

    #[test]
    fn messages_pass_and_name_their_id_and_method() {
        let p = check_body(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#)
            .expect("a request");
        assert_eq!(p.id, Some(json!(7)));
        assert_eq!(p.method.as_deref(), Some("tools/call"));
        let p = check_body(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .expect("a notification");
        assert_eq!(p.id, None);
        check_body(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#).expect("a response");
        check_body(br#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}"#)
            .expect("an error without an id");
    }

    #[test]
    fn each_defect_has_its_code() {
        assert_eq!(code("{not json"), RpcCode::PARSE_ERROR);
        assert_eq!(code(""), RpcCode::PARSE_ERROR);
        assert_eq!(
            code(&format!("{}{}", "[".repeat(65), "]".repeat(65))),
            RpcCode::PARSE_ERROR
        );
        assert_eq!(
            check_body(b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}").expect_err("utf-8"),
            FrontError::NotUtf8(27)
        );
        assert_eq!(
            code(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
            RpcCode::INVALID_REQUEST
        );
        assert_eq!(check_body(b"[]").expect_err("batch"), FrontError::Batch);
        for bad in [
            "42",
            r#""str""#,
            r#"{"id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":5}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
        ] {
            assert_eq!(code(bad), RpcCode::INVALID_REQUEST, "{bad}");
        }
    }

    #[test]
    fn nesting_inside_strings_does_not_count() {
        let s = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"a":"{}\"{}"}}}}"#,
            "[".repeat(500),
            "{".repeat(500)
        );
        check_body(s.as_bytes()).expect("brackets in strings are text");
    }

    #[test]
    fn a_hundred_thousand_levels_are_refused_without_recursion() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(check_body(deep.as_bytes()), Err(FrontError::TooDeep));
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"a":{}1{}}}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(check_body(deep.as_bytes()), Err(FrontError::TooDeep));
    }

    #[test]
    fn unmatched_requests_are_unknown_methods_or_invalid_params() {
        let e = unmatched_request("foo/bar", None);
        assert_eq!(e.code, rmcp::model::ErrorCode::METHOD_NOT_FOUND);
        assert_eq!(e.message, "Method not found: `foo/bar`");
        let e = unmatched_request("tools/call", Some(&json!({})));
        assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(e.message.contains("missing field `name`"), "{}", e.message);
        let e = unmatched_request("tools/call", Some(&json!({"name": "x", "arguments": [1]})));
        assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(
            e.message.starts_with("Invalid params for `tools/call`: "),
            "{}",
            e.message
        );
    }

    #[test]
    fn headers_are_checked_like_rmcp() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        assert_eq!(check_headers(&h), Err(FrontError::NotAcceptable));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream;q=0"),
        );
        assert_eq!(check_headers(&h), Err(FrontError::NotAcceptable));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("Application/JSON;q=0.5, text/event-stream"),
        );
        assert_eq!(check_headers(&h), Ok(()));
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert_eq!(
            check_headers(&h),
            Err(FrontError::UnsupportedMediaType("`text/plain`".into()))
        );
        h.remove(header::CONTENT_TYPE);
        assert_eq!(
            check_headers(&h),
            Err(FrontError::UnsupportedMediaType("none".into()))
        );
    }

    /// Bounded by `PROPTEST_CASES` in CI (see `.ci/run`); 256 cases by default.
    fn config() -> ProptestConfig {
        ProptestConfig::default()
    }

    /// Arbitrary JSON values, nested a few levels.
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|f| json!(f)),
            ".{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("jsonrpc".to_string()),
                        Just("id".to_string()),
                        Just("method".to_string()),
                        Just("params".to_string()),
                        Just("result".to_string()),
                        Just("error".to_string()),
                        "[a-z]{1,6}",
                    ],
                    inner,
                    0..6
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    #[test]
    fn a_nul_escape_is_refused_and_an_escaped_backslash_before_u0000_is_text() {
        let nul = br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"b\u0000"}}"#;
        assert_eq!(check_body(nul), Err(FrontError::Nul(53)));
        let text = br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"b\\u0000"}}"#;
        assert!(check_body(text).is_ok());
        let key = br#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"\u0000":1}}"#;
        assert!(matches!(check_body(key), Err(FrontError::Nul(_))));
    }

    /// Whether a string of `v` (a key or a value) holds U+0000.
    fn holds_nul(v: &Value) -> bool {
        match v {
            Value::String(s) => s.contains('\0'),
            Value::Array(a) => a.iter().any(holds_nul),
            Value::Object(m) => m.iter().any(|(k, v)| k.contains('\0') || holds_nul(v)),
            _ => false,
        }
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            match check_body(&bytes) {
                Ok(_) => prop_assert!(serde_json::from_slice::<Value>(&bytes).is_ok()),
                Err(e) => {
                    prop_assert!(e.status().is_client_error());
                    prop_assert!([RpcCode::PARSE_ERROR, RpcCode::INVALID_REQUEST].contains(&e.code()));
                    let body = McpError::from(e).body();
                    prop_assert_eq!(&body["jsonrpc"], "2.0");
                }
            }
        }

        #[test]
        fn arbitrary_json_is_a_message_or_a_precise_error(v in json_value()) {
            let text = serde_json::to_vec(&v).unwrap_or_default();
            match check_body(&text) {
                Ok(p) => {
                    let m = v.as_object();
                    prop_assert!(m.is_some());
                    prop_assert_eq!(m.and_then(|m| m.get("jsonrpc")), Some(&json!("2.0")));
                    prop_assert_eq!(p.method.as_deref(), v.get("method").and_then(Value::as_str));
                }
                Err(e) => {
                    // Well-formed JSON is never a parse error; a string holding NUL is refused
                    // wherever it is; otherwise an array is always a batch.
                    prop_assert_eq!(e.code(), RpcCode::INVALID_REQUEST);
                    let nul = holds_nul(&v);
                    prop_assert_eq!(nul, matches!(e, FrontError::Nul(_)));
                    if !nul {
                        prop_assert_eq!(v.is_array(), e == FrontError::Batch);
                    }
                }
            }
        }

        #[test]
        fn real_messages_always_pass(id in any::<i64>(), method in "[a-z/_]{1,20}", params in json_value()) {
            prop_assume!(!holds_nul(&params));
            let params = if params.is_object() { params } else { json!({ "v": params }) };
            let req = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
            let p = check_body(&serde_json::to_vec(&req).unwrap_or_default());
            prop_assert_eq!(p, Ok(Probe { id: Some(json!(id)), method: Some(method) }));
        }
    }
}
