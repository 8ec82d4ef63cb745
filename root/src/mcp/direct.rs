//! The direct path for reads: a well-formed `tools/call` of a read tool is answered here,
//! without rmcp's per-request machinery. On the stateless 2026-07-28 revision rmcp builds a
//! peer, a one-shot transport and a spawned serve loop for every POST, decodes the body
//! through its untagged message enum and serializes it back to a JSON tree to check the
//! `Mcp-*` headers (together about a quarter of root's CPU on a routed read); on a session
//! (earlier revisions) it hands the request to the session's worker task, which runs it on a
//! task of its own and streams the answer back as a one-event SSE stream kept for resumption.
//!
//! The path is an optimization for a strict subset of requests, never a different answer: it
//! takes a request only when every check rmcp would make provably passes, and hands anything
//! else to rmcp unchanged (same bytes), which answers it as before, errors included. Taken
//! only when all of these hold:
//! - stateless: `POST` with exactly one `MCP-Protocol-Version: 2026-07-28`, one
//!   `Mcp-Method: tools/call` and one `Mcp-Name`; no `Mcp-Session-Id`, no `Origin`, no
//!   `Mcp-Param-*` header, and a `Host` that rmcp's allow-list accepts (an exact host and
//!   port match here); a body of exactly `jsonrpc`, `id`, `method: "tools/call"` and rmcp's
//!   own `CallToolRequestParams`, whose `name` equals `Mcp-Name`, with no input responses or
//!   request state (the multi-round-trip flow), and whose `_meta` names 2026-07-28 with
//!   every key that revision requires;
//! - on a session (descriptive tools only: a routed call can run long enough to be
//!   cancelled with `notifications/cancelled`, which only rmcp's session worker sees):
//!   `POST` with exactly one `MCP-Protocol-Version` naming 2025-03-26, 2025-06-18 or
//!   2025-11-25 (rmcp checks no `Mcp-Method`/`Mcp-Name` header on those) and one
//!   `Mcp-Session-Id` of a session rmcp holds and this lease opened; no `Origin`, an
//!   allowed `Host`; the same body without input responses or request state and without a
//!   revision in `_meta` (one there makes rmcp judge the request by it). The answer is a
//!   JSON body (the transport lets a server answer a POST with JSON or with an SSE stream;
//!   clients accept both) with status `200`, as rmcp's stream would carry it. The call
//!   resets the session's idle timer (`mcp.session_idle_sec`) as one through rmcp would;
//! - either way: a lease bearer (resolved by the auth middleware) and a known tool that is
//!   not a write (writes may confirm through elicitation, which needs rmcp's peer).
//!
//! The answer is built as rmcp builds it: [`crate::mcp::answer_call`] (the same function
//! rmcp's handler calls), the result shaped for the peer's revision as rmcp's handler shapes
//! it ([`ResultShape`]), rmcp's `ServerJsonRpcMessage` serialized as the JSON body with
//! rmcp's status mapping; a descriptive answer kept by its descriptor set is written around
//! that set's own serialization of it in that shape (the same bytes).
//! The call is polled by the request itself; a client that disconnects cancels it, and it
//! then finishes on a task of its own (the governed call records the cancellation), so its
//! audit event is written whether or not anyone waits for the answer.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use dashmap::DashMap;
use mcp_shared::contract::RoutingClass;
use rmcp::model::{
    CallToolRequestParams, ErrorCode, ErrorData, JsonRpcError, JsonRpcResponse, JsonRpcVersion2_0,
    MetaObject, ProtocolVersion, RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::common::server_side_http::SessionId;
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use serde::Deserialize;

use crate::app::{App, Principal};
use crate::descriptors::DescriptiveAnswer;
use crate::mcp::{McpAnswer, ResultShape, ToolCall, answer_call, kept_result_open};

/// The only revision served here: the one without sessions.
const VERSION: &str = "2026-07-28";

/// The request body the direct path accepts; anything else (another shape, an unknown
/// member) fails to decode and goes to rmcp.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DirectCall {
    #[allow(dead_code)] // its decoding checks `"2.0"`
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    method: String,
    params: CallToolRequestParams,
}

/// The session layer's live sessions, for calls made on a session (revisions before
/// 2026-07-28): such a call is taken only on a session rmcp holds, and resets that session's
/// idle timer as a call through the session would.
pub struct Sessions {
    manager: Arc<LocalSessionManager>,
    /// When a call taken here last reset each session's idle timer.
    kept_alive: DashMap<String, Instant>,
    /// How often a session used only here has its idle timer reset: well inside the timeout.
    keep_alive_every: Duration,
    /// The sessions' idle timeout; entries older than it are of sessions that ended (or that
    /// rmcp keeps alive by other requests) and are dropped now and then.
    idle: Duration,
    resets: std::sync::atomic::AtomicU64,
}

/// Every this many idle-timer resets, [`Sessions`] forgets sessions not seen for a timeout.
const PRUNE_EVERY: u64 = 256;

impl Sessions {
    pub fn new(manager: Arc<LocalSessionManager>) -> Sessions {
        let idle = manager
            .session_config
            .keep_alive
            .unwrap_or(SessionConfig::DEFAULT_KEEP_ALIVE);
        Sessions {
            manager,
            kept_alive: DashMap::new(),
            keep_alive_every: idle / 5,
            idle,
            resets: Default::default(),
        }
    }

    /// Whether rmcp holds session `id` (not ended, timed out or never opened); if so, its
    /// idle timer is reset unless a call taken here did so a short while ago.
    async fn live(&self, id: &str) -> bool {
        let session = self
            .manager
            .sessions
            .read()
            .await
            .get(&SessionId::from(id))
            .cloned();
        let Some(session) = session else {
            self.kept_alive.remove(id);
            return false;
        };
        let now = Instant::now();
        let due = self
            .kept_alive
            .get(id)
            .is_none_or(|at| now.duration_since(*at) >= self.keep_alive_every);
        if due {
            self.kept_alive.insert(id.to_owned(), now);
            let resets = self
                .resets
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if resets % PRUNE_EVERY == PRUNE_EVERY - 1 {
                self.kept_alive
                    .retain(|_, at| now.duration_since(*at) < self.idle);
            }
            // Any event resets the session worker's idle timer; closing a request channel
            // that was never opened (rmcp numbers them from 0) changes nothing else.
            tokio::spawn(async move {
                let _ = session.close_request_wise_channel(u64::MAX).await;
            });
        }
        true
    }
}

/// Which of the two shapes a qualifying request has.
enum Route {
    /// 2026-07-28, stateless: the tool named by `Mcp-Name`.
    Stateless(String),
    /// An earlier revision on the session with this id.
    Session(String),
}

/// Answers `req` if it belongs to the direct path; otherwise gives it back, unchanged, for
/// rmcp.
pub async fn serve(app: &Arc<App>, sessions: &Sessions, req: Request) -> Result<Response, Request> {
    if !app.config.mcp.direct_reads || req.method() != Method::POST {
        return Err(req);
    }
    let route = match eligible_headers(req.headers()) {
        Some(name) => Route::Stateless(name.to_owned()),
        None => match session_headers(req.headers()) {
            Some(id) => Route::Session(id.to_owned()),
            None => return Err(req),
        },
    };
    let lease = match req.extensions().get::<Principal>() {
        Some(Principal::Lease(l)) => l.clone(),
        _ => return Err(req),
    };
    let shape = match &route {
        Route::Stateless(name) if !readable(app, name) => return Err(req),
        Route::Stateless(_) => ResultShape::Current,
        // Only a session this lease opened (the auth middleware refuses others).
        Route::Session(id)
            if app
                .mcp
                .sessions
                .get(id)
                .is_none_or(|owner| owner.value() != lease.session_id()) =>
        {
            return Err(req);
        }
        Route::Session(_) => ResultShape::Legacy,
    };
    let (parts, body) = req.into_parts();
    // The front guard has read and bounded the body already: this takes its one buffer.
    let bytes = match axum::body::to_bytes(body, app.config.limits.max_body_bytes).await {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(error = %e, "direct path: the checked body could not be re-read");
            return Ok(StatusCode::INTERNAL_SERVER_ERROR.into_response());
        }
    };
    let qualifying = match serde_json::from_slice::<DirectCall>(&bytes) {
        Ok(c) => match &route {
            Route::Stateless(name) => eligible_call(&c, name).then_some(c),
            // Last, as it resets the session's idle timer: a session rmcp still holds.
            Route::Session(id) => (eligible_session_call(&c)
                && descriptive(app, &c.params.name)
                && sessions.live(id).await)
                .then_some(c),
        },
        Err(_) => None,
    };
    let Some(call) = qualifying else {
        return Err(Request::from_parts(parts, Body::from(bytes)));
    };
    app.metrics.direct_calls.inc();
    let traceparent = parts
        .headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let DirectCall { id, params, .. } = call;
    let cancel = tokio_util::sync::CancellationToken::new();
    let call = {
        let (app, cancel) = (app.clone(), cancel.clone());
        let request_id = id.to_string();
        async move {
            let call = ToolCall {
                lease,
                request_id,
                traceparent: traceparent.as_deref(),
                cancel,
            };
            answer_call(&app, call, params, None).await
        }
    };
    // Polled here; if this future is dropped first (the client went away), the call is
    // cancelled and finishes on a task of its own, writing its audit event.
    let answered = Detached::new(
        futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(call)),
        cancel,
    )
    .await;
    let message = match answered {
        Ok(Ok(answer)) => {
            if let McpAnswer::Kept { answer, meta } = &answer
                && let Some(body) = kept_body(&id, answer, meta, shape)
            {
                return Ok(json_body(StatusCode::OK, body));
            }
            let mut result = ServerResult::from(answer.into_response());
            shape.apply(&mut result);
            ServerJsonRpcMessage::Response(JsonRpcResponse {
                jsonrpc: JsonRpcVersion2_0,
                id,
                result,
            })
        }
        Ok(Err(mut error)) => {
            shape.apply_to_error(&mut error);
            ServerJsonRpcMessage::Error(JsonRpcError::new(Some(id), error))
        }
        Err(_) => {
            tracing::error!("direct path: the call panicked");
            ServerJsonRpcMessage::Error(JsonRpcError::new(
                Some(id),
                ErrorData::internal_error("the call failed", None),
            ))
        }
    };
    Ok(json_response(&message, shape))
}

/// A call polled by the request that made it, which goes on as a task of its own (after its
/// cancellation token fires) if the request is dropped before the call has finished: the
/// governed call then records its cancellation and its audit event, as under rmcp (whose
/// stateless transport spawns every request; this costs a task only when a client leaves).
struct Detached<T: Send + 'static> {
    call: Option<Pin<Box<dyn Future<Output = T> + Send>>>,
    cancel: tokio_util::sync::CancellationToken,
}

impl<T: Send + 'static> Detached<T> {
    fn new(
        call: impl Future<Output = T> + Send + 'static,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Self {
        Detached {
            call: Some(Box::pin(call)),
            cancel,
        }
    }
}

impl<T: Send + 'static> Future for Detached<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let Some(call) = self.call.as_mut() else {
            return Poll::Pending; // polled after completion: never again
        };
        let done = call.as_mut().poll(cx);
        if done.is_ready() {
            self.call = None;
        }
        done
    }
}

impl<T: Send + 'static> Drop for Detached<T> {
    fn drop(&mut self) {
        let Some(call) = self.call.take() else {
            return;
        };
        self.cancel.cancel();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    call.await;
                });
            }
            Err(_) => tracing::error!("direct path: a call dropped outside the runtime"),
        }
    }
}

/// The `Mcp-Name` of a request whose headers qualify for the direct path.
fn eligible_headers(headers: &HeaderMap) -> Option<&str> {
    if one(headers, "mcp-protocol-version")? != VERSION
        || one(headers, "mcp-method")? != "tools/call"
        || headers.contains_key("mcp-session-id")
        || headers.contains_key(header::ORIGIN)
        || headers.keys().any(|k| k.as_str().starts_with("mcp-param-"))
    {
        return None;
    }
    one(headers, "mcp-name")
}

/// The revisions with sessions that root serves ([`crate::mcp::SUPPORTED_VERSIONS`] before
/// 2026-07-28); rmcp checks none of the `Mcp-Method`, `Mcp-Name` or `Mcp-Param-*` headers
/// on them.
const SESSION_VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];

/// The `Mcp-Session-Id` of a request whose headers qualify for the direct path on a session.
fn session_headers(headers: &HeaderMap) -> Option<&str> {
    let version = one(headers, "mcp-protocol-version")?;
    if !SESSION_VERSIONS.contains(&version) || headers.contains_key(header::ORIGIN) {
        return None;
    }
    one(headers, "mcp-session-id").filter(|id| !id.is_empty())
}

/// A tool the direct path answers: known, and not a write (writes may confirm through
/// elicitation, which needs rmcp's peer).
fn readable(app: &App, name: &str) -> bool {
    app.catalog
        .contracts
        .get(name)
        .is_some_and(|e| e.contract.routing != RoutingClass::OperationalWrite)
}

/// A tool the direct path answers on a session: one answered from the descriptor cache. A
/// call routed to a hub can run for a while, and on a session a client may cancel it with
/// `notifications/cancelled`, which goes to rmcp's session worker; those calls stay there.
fn descriptive(app: &App, name: &str) -> bool {
    app.catalog
        .contracts
        .get(name)
        .is_some_and(|e| e.contract.routing == RoutingClass::DescriptiveCached)
}

/// The header's value when it is present exactly once and is visible ASCII.
fn one<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    first.to_str().ok()
}

/// Whether a decoded body is one the direct path answers exactly as rmcp would.
fn eligible_call(call: &DirectCall, name: &str) -> bool {
    let p = &call.params;
    let Some(meta) = &p.meta else {
        return false;
    };
    let v2026 = ProtocolVersion::V_2026_07_28;
    call.method == "tools/call"
        && p.name == name
        && p.input_responses.is_none()
        && p.request_state.is_none()
        && meta.protocol_version().as_ref() == Some(&v2026)
        && meta.missing_required_keys(&v2026).is_empty()
        && crate::mcp::SUPPORTED_VERSIONS.contains(&v2026)
}

/// Whether a body sent on a session is one the direct path answers exactly as rmcp's session
/// would: a plain `tools/call` without a request-level revision (`_meta` naming one makes
/// rmcp judge the request by it) and without the multi-round-trip members.
fn eligible_session_call(call: &DirectCall) -> bool {
    let p = &call.params;
    call.method == "tools/call"
        && p.input_responses.is_none()
        && p.request_state.is_none()
        && p.meta
            .as_ref()
            .is_none_or(|m| m.protocol_version().is_none())
}

/// The JSON body and status rmcp gives a request's only message: on the 2026-07-28 path its
/// status follows the error; on a session rmcp streams every answer with `200`.
fn json_response(message: &ServerJsonRpcMessage, shape: ResultShape) -> Response {
    let status = match message {
        _ if shape == ResultShape::Legacy => StatusCode::OK,
        ServerJsonRpcMessage::Error(e) => match e.error.code {
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
            ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        },
        _ => StatusCode::OK,
    };
    match serde_json::to_vec(message) {
        Ok(body) => json_body(status, body),
        Err(e) => {
            tracing::error!(error = %e, "direct path: the answer could not be serialized");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

fn json_body(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body),
    )
        .into_response()
}

/// The JSON-RPC response to a call answered by a kept descriptive answer, written around the
/// answer's kept serialization ([`kept_result_open`]): the bytes rmcp writes for the same
/// answer as [`McpAnswer::into_response`] (a unit test compares them), without serializing the
/// value again. `None`: the answer has no kept serialization.
fn kept_body(
    id: &RequestId,
    answer: &DescriptiveAnswer,
    meta: &MetaObject,
    shape: ResultShape,
) -> Option<Vec<u8>> {
    let open = kept_result_open(answer, shape)?;
    let mut body = Vec::with_capacity(open.len() + 192);
    body.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    serde_json::to_writer(&mut body, id).ok()?;
    body.extend_from_slice(br#","result":"#);
    body.extend_from_slice(open.as_bytes());
    body.extend_from_slice(br#","_meta":"#);
    serde_json::to_writer(&mut body, meta).ok()?;
    body.extend_from_slice(b"}}");
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    /// A kept answer written around its kept serialization is byte for byte what rmcp writes
    /// for the same answer (including text that needs escaping and a string request id), for
    /// a 2026-07-28 peer and for one on an earlier revision.
    #[test]
    fn a_kept_answer_is_written_as_rmcp_writes_it() {
        let value = serde_json::json!({
            "data": [{ "name": "a \"quoted\" \\ name\n\u{7}", "emoji": "\u{1F600}", "n": 1.5 }],
            "descriptor": { "descriptor_id": "d" },
            "stale": false,
        });
        let answer = || {
            let text = serde_json::to_string(&value).unwrap_or_default();
            Arc::new(DescriptiveAnswer {
                value: value.clone(),
                text: text.into(),
                mcp_result_open: Default::default(),
                mcp_result_open_legacy: Default::default(),
            })
        };
        let meta: MetaObject = serde_json::from_value(serde_json::json!({
            "event_id": "0192f0c4-0000-7000-8000-000000000001",
            "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        }))
        .unwrap_or_default();
        let kept = answer();
        let ids = [RequestId::Number(7), RequestId::String("call \"7\"".into())];
        for (id, shape) in ids.into_iter().flat_map(|id| {
            [
                (id.clone(), ResultShape::Current),
                (id, ResultShape::Legacy),
            ]
        }) {
            let ours = kept_body(&id, &kept, &meta, shape);
            let mut result = ServerResult::from(
                McpAnswer::Kept {
                    answer: answer(),
                    meta: meta.clone(),
                }
                .into_response(),
            );
            // What rmcp's handler does by the peer's revision.
            if shape == ResultShape::Current {
                result.fill_missing_cache_hints();
            } else {
                result.strip_result_type_for_legacy_peer();
                result.strip_non_object_output_for_legacy_peer();
            }
            let rmcp = serde_json::to_vec(&ServerJsonRpcMessage::Response(JsonRpcResponse {
                jsonrpc: JsonRpcVersion2_0,
                id,
                result,
            }))
            .ok();
            assert!(ours.is_some());
            assert_eq!(
                ours.as_deref().map(String::from_utf8_lossy),
                rmcp.as_deref().map(String::from_utf8_lossy)
            );
        }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    const GOOD: &[(&str, &str)] = &[
        ("host", "127.0.0.1:8700"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "hub.get_status"),
    ];

    #[test]
    fn qualifying_headers_name_the_tool() {
        assert_eq!(eligible_headers(&headers(GOOD)), Some("hub.get_status"));
    }

    #[test]
    fn anything_rmcp_would_judge_differently_goes_to_rmcp() {
        // Host is the guard's, in front of every surface (`api::guard`), and no longer a
        // question here; `protocol.rs` sends the direct path a foreign Host.
        let with = |extra: (&'static str, &'static str)| {
            let mut h = headers(GOOD);
            h.append(extra.0, HeaderValue::from_static(extra.1));
            eligible_headers(&h).map(str::to_owned)
        };
        let none: Option<String> = None;
        assert_eq!(with(("mcp-session-id", "s1")), none);
        assert_eq!(with(("origin", "http://127.0.0.1")), none);
        assert_eq!(with(("mcp-param-region", "eu")), none);
        assert_eq!(with(("mcp-method", "tools/call")), none, "a duplicate");
        assert_eq!(with(("mcp-name", "hub.get_status")), none, "a duplicate");
        let without = |name: &str| {
            let mut h = headers(GOOD);
            h.remove(name);
            eligible_headers(&h).map(str::to_owned)
        };
        for name in ["mcp-protocol-version", "mcp-method", "mcp-name"] {
            assert_eq!(without(name), none, "{name} missing");
        }
        let mut old = headers(GOOD);
        old.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2025-11-25"),
        );
        assert_eq!(eligible_headers(&old), None);
        let mut list = headers(GOOD);
        list.insert("mcp-method", HeaderValue::from_static("tools/list"));
        assert_eq!(eligible_headers(&list), None);
    }

    const ON_SESSION: &[(&str, &str)] = &[
        ("host", "127.0.0.1:4100"),
        ("mcp-protocol-version", "2025-11-25"),
        ("mcp-session-id", "0b1c2d"),
    ];

    #[test]
    fn a_call_on_a_session_qualifies_by_its_revision_and_session() {
        let check = |edit: &dyn Fn(&mut HeaderMap)| {
            let mut h = headers(ON_SESSION);
            edit(&mut h);
            session_headers(&h).map(str::to_owned)
        };
        assert_eq!(check(&|_| {}), Some("0b1c2d".to_string()));
        for version in ["2025-03-26", "2025-06-18"] {
            assert!(
                check(&|h| {
                    h.insert("mcp-protocol-version", HeaderValue::from_static(version));
                })
                .is_some()
            );
        }
        // rmcp checks no Mcp-Method or Mcp-Name on these revisions: they do not matter.
        assert!(
            check(&|h| {
                h.insert("mcp-method", HeaderValue::from_static("tools/list"));
            })
            .is_some()
        );
        type Edit<'a> = &'a dyn Fn(&mut HeaderMap);
        let refused: [(&str, Edit); 6] = [
            ("no revision", &|h| {
                h.remove("mcp-protocol-version");
            }),
            ("2024-11-05, which root does not serve", &|h| {
                h.insert(
                    "mcp-protocol-version",
                    HeaderValue::from_static("2024-11-05"),
                );
            }),
            ("2026-07-28, which has no sessions", &|h| {
                h.insert(
                    "mcp-protocol-version",
                    HeaderValue::from_static("2026-07-28"),
                );
            }),
            ("two session ids", &|h| {
                h.append("mcp-session-id", HeaderValue::from_static("0b1c2d"));
            }),
            ("an empty session id", &|h| {
                h.insert("mcp-session-id", HeaderValue::from_static(""));
            }),
            ("an origin", &|h| {
                h.insert("origin", HeaderValue::from_static("http://127.0.0.1"));
            }),
        ];
        for (why, edit) in refused {
            assert_eq!(check(edit), None, "{why}");
        }
    }

    #[test]
    fn a_session_call_qualifies_without_a_revision_of_its_own() {
        let ok = |params: serde_json::Value| {
            decode(serde_json::json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params }))
                .is_some_and(|c| eligible_session_call(&c))
        };
        assert!(ok(serde_json::json!({ "name": "hub.get_status" })));
        assert!(ok(
            serde_json::json!({ "name": "hub.get_status", "arguments": {}, "_meta": { "progressToken": 1 } })
        ));
        assert!(
            !ok(serde_json::json!({ "name": "hub.get_status", "_meta": meta() })),
            "a revision in _meta"
        );
        assert!(!ok(
            serde_json::json!({ "name": "hub.get_status", "requestState": "s" })
        ));
        assert!(!ok(
            serde_json::json!({ "name": "hub.get_status", "inputResponses": {} })
        ));
        assert!(
            decode(serde_json::json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": { "name": "x" } }))
                .is_none_or(|c| !eligible_session_call(&c))
        );
    }

    #[tokio::test]
    async fn a_call_dropped_unfinished_is_cancelled_and_finishes_on_its_own_task() {
        let cancel = tokio_util::sync::CancellationToken::new();
        let (done, finished) = tokio::sync::oneshot::channel();
        let seen = cancel.clone();
        let mut call = Detached::new(
            async move {
                seen.cancelled().await;
                let _ = done.send("recorded after the cancellation");
            },
            cancel.clone(),
        );
        assert!(futures::poll!(&mut call).is_pending());
        drop(call);
        assert!(cancel.is_cancelled());
        assert_eq!(finished.await, Ok("recorded after the cancellation"));
    }

    #[tokio::test]
    async fn a_finished_call_is_answered_and_not_cancelled() {
        let cancel = tokio_util::sync::CancellationToken::new();
        assert_eq!(Detached::new(async { 7 }, cancel.clone()).await, 7);
        assert!(!cancel.is_cancelled());
    }

    fn decode(body: serde_json::Value) -> Option<DirectCall> {
        serde_json::from_value(body).ok()
    }

    fn meta() -> serde_json::Value {
        serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "t", "version": "1" },
            "io.modelcontextprotocol/clientCapabilities": {}
        })
    }

    #[test]
    fn only_complete_self_contained_calls_qualify() {
        let ok = |params: serde_json::Value| {
            decode(serde_json::json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params }))
                .is_some_and(|c| eligible_call(&c, "hub.get_status"))
        };
        assert!(ok(
            serde_json::json!({ "name": "hub.get_status", "arguments": {}, "_meta": meta() })
        ));
        assert!(
            !ok(serde_json::json!({ "name": "hub.get_logs", "_meta": meta() })),
            "name differs from Mcp-Name"
        );
        assert!(
            !ok(serde_json::json!({ "name": "hub.get_status" })),
            "no _meta"
        );
        let mut partial = meta();
        partial
            .as_object_mut()
            .unwrap()
            .remove("io.modelcontextprotocol/clientCapabilities");
        assert!(!ok(
            serde_json::json!({ "name": "hub.get_status", "_meta": partial })
        ));
        let mut older = meta();
        older["io.modelcontextprotocol/protocolVersion"] = "2025-11-25".into();
        assert!(!ok(
            serde_json::json!({ "name": "hub.get_status", "_meta": older })
        ));
        assert!(!ok(
            serde_json::json!({ "name": "hub.get_status", "_meta": meta(), "requestState": "s" })
        ));
        assert!(
            decode(serde_json::json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": { "name": "x", "_meta": meta() }, "extra": 1 }))
                .is_none(),
            "an unknown member"
        );
        assert!(
            decode(serde_json::json!({ "jsonrpc": "1.0", "id": 7, "method": "tools/call", "params": { "name": "x" } }))
                .is_none()
        );
    }
}
