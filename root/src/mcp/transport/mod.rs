//! Root's Streamable HTTP server: the one front door of `/mcp`, over rmcp's model types and
//! its service layer ([`RootMcp`] as an rmcp `ServerHandler`), without rmcp's HTTP transport.
//!
//! A POST is read and checked once (`front`: media types, size, UTF-8, depth, one JSON-RPC
//! message), decoded into rmcp's `ClientJsonRpcMessage`, checked for its revision
//! ([`checks`]) and handed over a [`wire`] to an rmcp service:
//! - revisions with the handshake (2025-03-26 .. 2025-11-25): `initialize` opens a session,
//!   one rmcp service per session, answered with `Mcp-Session-Id`; later messages name it.
//!   A session ends on `DELETE`, when root stops, or after `mcp.session_idle_sec` without a
//!   message while nothing is in flight;
//! - 2026-07-28 (stateless, every request carrying its revision in `_meta`): one rmcp
//!   service for all of them; request ids are renumbered on the way in so clients cannot
//!   collide, and a client that goes away before its answer cancels the request (the
//!   governed call records the cancellation and writes its audit event).
//!
//! An answer is a JSON body unless the handler sends something before it (an elicitation,
//! progress): then the POST's answer is an SSE stream carrying those messages and, last, the
//! answer. `GET` opens a session's standalone SSE stream (`notifications/tools/list_changed`),
//! replacing an earlier one. Bearer admission and the Host/Origin rule are middleware in
//! front of this (`api`).

pub(crate) mod checks;
pub(crate) mod wire;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use dashmap::DashMap;
use futures::Stream;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientCapabilities, ClientJsonRpcMessage,
    ClientNotification, ClientRequest, CustomResult, ErrorCode, GetExtensions, GetMeta,
    Implementation, InitializeRequestParams, JsonRpcError, JsonRpcNotification, JsonRpcResponse,
    JsonRpcVersion2_0, NumberOrString, ProgressToken, ProtocolVersion, RequestId,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use tokio_util::sync::CancellationToken;

use self::wire::{Answer, Inlet};
use crate::app::{App, Principal};
use crate::mcp::bindings::Bindings;
use crate::mcp::error::McpError;
use crate::mcp::front::{self, FrontError};
use crate::mcp::kept::Kept;
use crate::mcp::{RootMcp, tasks};

/// SSE comment lines keeping idle streams open through proxies.
const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The `/mcp` endpoint's state.
pub(crate) struct Door {
    app: Arc<App>,
    handler: RootMcp,
    /// Live sessions by `Mcp-Session-Id`.
    sessions: Arc<DashMap<String, Session>>,
    /// The service answering stateless (2026-07-28) requests.
    stateless: Inlet,
    /// Ids given to stateless requests on their way in.
    next_id: AtomicI64,
    shutdown: CancellationToken,
}

#[derive(Clone)]
struct Session {
    inlet: Inlet,
    ends: CancellationToken,
    /// The session negotiated 2025-11-25: its task messages are answered here
    /// (`mcp::tasks::legacy`), and its `tools/list` answers name which tools run as tasks.
    legacy_tasks: Arc<AtomicBool>,
}

/// What the door adds to an answer that rmcp's model cannot carry (2025-11-25 tasks).
type Patch = Arc<dyn Fn(&mut serde_json::Value) + Send + Sync>;

/// Which service a request goes to, which decides its ids, status and cancellation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    Session,
    Stateless { meta_malformed: bool },
}

impl Door {
    /// The door, with its stateless service running until `shutdown`.
    pub(crate) fn start(app: Arc<App>, shutdown: &CancellationToken) -> Arc<Door> {
        let bindings = Arc::new(Bindings::default());
        tokio::spawn(
            bindings
                .clone()
                .announce_changes(app.hubs.surface.subscribe(), shutdown.child_token()),
        );
        let handler = RootMcp::new(app.clone(), bindings);
        let (stateless, outlet) = wire::wire(None);
        let peer =
            InitializeRequestParams::new(ClientCapabilities::default(), Implementation::default())
                .with_protocol_version(ProtocolVersion::V_2026_07_28);
        let running = rmcp::service::serve_directly_with_ct(
            handler.clone(),
            outlet,
            Some(peer),
            shutdown.child_token(),
        );
        tokio::spawn(async move {
            let _ = running.waiting().await;
        });
        Arc::new(Door {
            app,
            handler,
            sessions: Arc::new(DashMap::new()),
            stateless,
            next_id: AtomicI64::new(1),
            shutdown: shutdown.clone(),
        })
    }

    /// Answers one request to `/mcp`. A session is continued only with the bearer of the
    /// lease that opened it.
    pub(crate) async fn serve(self: &Arc<Self>, req: Request) -> Response {
        let lease = match req.extensions().get::<Principal>() {
            Some(Principal::Lease(l)) => Some(l.session_id().to_string()),
            _ => None,
        };
        let asker = lease.as_deref();
        let result = match *req.method() {
            Method::POST => self.post(req, asker).await,
            Method::GET => self.get(req, asker),
            Method::DELETE => self.delete(req, asker),
            _ => Ok(method_not_allowed()),
        };
        let res = result.unwrap_or_else(IntoResponse::into_response);
        if let (Some(lease), Some(sid)) = (&lease, session_id(res.headers())) {
            self.handler.bindings.bind(sid, lease);
        }
        res
    }

    /// How many sessions are bound to the lease that opened them.
    pub(crate) fn bound_sessions(&self) -> usize {
        self.handler.bindings.sessions.len()
    }

    /// Forgets the sessions of leases that can no longer authenticate.
    pub(crate) fn forget_leases(&self, dead: &[String]) {
        self.handler.bindings.forget_leases(dead);
    }

    async fn post(
        self: &Arc<Self>,
        req: Request,
        asker: Option<&str>,
    ) -> Result<Response, McpError> {
        front::check_headers(req.headers())?;
        let (parts, body) = req.into_parts();
        let limit = self.app.config.limits.max_body_bytes;
        let bytes = front::read_body(body, limit).await?;
        let message = decode(&bytes).map_err(|(e, id)| McpError::from(e).answering_raw(id))?;
        let session = checks::uses_session(&parts.headers, &message)?;
        checks::standard_headers(&parts.headers, &message)?;
        if !session {
            let meta_malformed = match &message {
                ClientJsonRpcMessage::Request(r) => !r
                    .request
                    .get_meta()
                    .missing_required_keys(&ProtocolVersion::V_2026_07_28)
                    .is_empty(),
                _ => false,
            };
            let lifecycle = Lifecycle::Stateless { meta_malformed };
            return Ok(self
                .exchange(&self.stateless, message, parts, lifecycle, None)
                .await);
        }
        let id = checks::request_id(&message);
        match session_id(&parts.headers) {
            Some(sid) => {
                let session = self
                    .session(sid, asker)
                    .map_err(|e| e.answering(id.as_ref()))?;
                if session.legacy_tasks.load(Ordering::Acquire) {
                    return Ok(self.legacy_tasks(&session, message, parts, &bytes).await);
                }
                Ok(self
                    .exchange(&session.inlet, message, parts, Lifecycle::Session, None)
                    .await)
            }
            // (A `server/discover` never gets here: with a complete `_meta` it is stateless,
            // without one `checks` refused it.)
            None => match &message {
                ClientJsonRpcMessage::Request(r)
                    if matches!(r.request, ClientRequest::InitializeRequest(_)) =>
                {
                    Ok(self.open(message, parts).await)
                }
                _ => Err(session_required().answering(id.as_ref())),
            },
        }
    }

    /// The session `sid`, when `asker` (the bearer's lease, if it is one) may continue it: a
    /// session bound to another lease is answered as if it did not exist.
    fn session(&self, sid: &str, asker: Option<&str>) -> Result<Session, McpError> {
        if asker.is_some_and(|lease| !self.handler.bindings.continues(sid, lease)) {
            return Err(McpError::session_not_found());
        }
        self.sessions
            .get(sid)
            .map(|s| s.value().clone())
            .ok_or_else(McpError::session_not_found)
    }

    /// `initialize` without a session: a new session, its service, and the handshake's answer
    /// with the session's id.
    async fn open(self: &Arc<Self>, message: ClientJsonRpcMessage, parts: Parts) -> Response {
        let sid = uuid::Uuid::new_v4().to_string();
        let idle = Duration::from_secs(self.app.config.mcp.session_idle_sec);
        let (inlet, outlet) = wire::wire(Some(idle));
        let ends = self.shutdown.child_token();
        let legacy_tasks = Arc::new(AtomicBool::new(false));
        let session = Session {
            inlet: inlet.clone(),
            ends: ends.clone(),
            legacy_tasks: legacy_tasks.clone(),
        };
        self.sessions.insert(sid.clone(), session);
        let (sessions, handler, routes, id) = (
            self.sessions.clone(),
            self.handler.clone(),
            inlet.routes.clone(),
            sid.clone(),
        );
        tokio::spawn(async move {
            match rmcp::service::serve_server_with_ct(handler, outlet, ends).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => tracing::debug!(session = %id, error = %e, "an MCP handshake failed"),
            }
            sessions.remove(&id);
            routes.close_standalone();
        });
        let patch: Patch = Arc::new(move |answer| {
            if tasks::legacy::patch_initialize(answer) {
                legacy_tasks.store(true, Ordering::Release);
            }
        });
        let mut res = self
            .exchange(&inlet, message, parts, Lifecycle::Session, Some(patch))
            .await;
        if let Ok(v) = HeaderValue::from_str(&sid) {
            res.headers_mut().insert(HEADER_SESSION_ID, v);
        }
        res
    }

    /// A message of a 2025-11-25 session: its task messages are answered here, the rest by
    /// the session's service (`tools/list` naming the tools that run as tasks).
    async fn legacy_tasks(
        &self,
        session: &Session,
        message: ClientJsonRpcMessage,
        parts: Parts,
        body: &Bytes,
    ) -> Response {
        let ClientJsonRpcMessage::Request(request) = message else {
            return self
                .exchange(&session.inlet, message, parts, Lifecycle::Session, None)
                .await;
        };
        if !tasks::legacy::handles(&request.request, body) {
            let patch: Option<Patch> =
                matches!(request.request, ClientRequest::ListToolsRequest(_)).then(|| {
                    let app = self.app.clone();
                    Arc::new(move |answer: &mut serde_json::Value| {
                        tasks::legacy::patch_tools(&app, answer)
                    }) as Patch
                });
            let message = ClientJsonRpcMessage::Request(request);
            return self
                .exchange(&session.inlet, message, parts, Lifecycle::Session, patch)
                .await;
        }
        session.inlet.routes.touch();
        let Some(Principal::Lease(lease)) = parts.extensions.get::<Principal>().cloned() else {
            return McpError::bad_request(
                ErrorCode::INVALID_REQUEST,
                "this endpoint needs a lease bearer",
            )
            .answering(Some(&request.id))
            .into_response();
        };
        let caller = tasks::legacy::Caller {
            lease,
            request_id: request.id.to_string(),
            traceparent: parts
                .headers
                .get("traceparent")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            progress_token: request.request.get_meta().get_progress_token(),
            stream: session.inlet.routes.clone(),
        };
        let id = request.id.clone();
        let message = match tasks::legacy::answer(&self.app, caller, request.request).await {
            Ok(result) => ServerJsonRpcMessage::Response(JsonRpcResponse {
                jsonrpc: JsonRpcVersion2_0,
                id,
                result: ServerResult::CustomResult(CustomResult(result)),
            }),
            Err(error) => ServerJsonRpcMessage::Error(JsonRpcError {
                jsonrpc: JsonRpcVersion2_0,
                id: Some(id),
                error,
            }),
        };
        json_message(StatusCode::OK, &message, None, &self.handler.kept)
    }

    /// Hands one message to a service and answers the POST that carried it; `patch` adds
    /// to the answer what rmcp's model cannot carry.
    async fn exchange(
        &self,
        inlet: &Inlet,
        message: ClientJsonRpcMessage,
        parts: Parts,
        lifecycle: Lifecycle,
        patch: Option<Patch>,
    ) -> Response {
        let stateless = lifecycle != Lifecycle::Session;
        match message {
            ClientJsonRpcMessage::Request(mut r) => {
                let asked = r.id.clone();
                if stateless {
                    r.id = RequestId::Number(self.next_id.fetch_add(1, Ordering::Relaxed));
                }
                let id = r.id.clone();
                let mut progress = r
                    .request
                    .get_meta()
                    .get_progress_token()
                    .map(|t| (t.clone(), t));
                if stateless && let Some((_, ours)) = progress.as_mut() {
                    // Clients of the shared stateless service may pick the same token: the
                    // service sees one of ours, unique like the id; its notifications leave
                    // with the client's again.
                    *ours = ProgressToken(NumberOrString::String(format!("p{id}").into()));
                    r.request.get_meta_mut().set_progress_token(ours.clone());
                }
                r.request.extensions_mut().insert(parts);
                let answer = inlet.routes.expect(id.clone(), progress);
                if !inlet.send(ClientJsonRpcMessage::Request(r)) {
                    inlet.routes.abandon(&id);
                    return McpError::session_not_found()
                        .answering(Some(&asked))
                        .into_response();
                }
                let pending = Pending {
                    inlet: inlet.clone(),
                    id,
                    cancel_on_drop: stateless,
                    armed: true,
                };
                self.answer(pending, answer, asked, lifecycle, patch).await
            }
            ClientJsonRpcMessage::Notification(mut n) if !stateless => {
                n.notification.extensions_mut().insert(parts);
                inlet.send(ClientJsonRpcMessage::Notification(n));
                StatusCode::ACCEPTED.into_response()
            }
            ClientJsonRpcMessage::Notification(_) => StatusCode::ACCEPTED.into_response(),
            response if !stateless => {
                inlet.send(response);
                StatusCode::ACCEPTED.into_response()
            }
            _ => McpError::bad_request(
                ErrorCode::INVALID_REQUEST,
                "stateless server does not accept JSON-RPC responses",
            )
            .into_response(),
        }
    }

    /// The answer to one request: JSON when the answer comes first, else an SSE stream of
    /// everything the handler sends for it, the answer last.
    async fn answer(
        &self,
        mut pending: Pending,
        mut answer: Answer,
        asked: RequestId,
        lifecycle: Lifecycle,
        patch: Option<Patch>,
    ) -> Response {
        let first = tokio::select! {
            m = answer.recv() => m,
            _ = self.shutdown.cancelled() => None,
        };
        let Some(first) = first else {
            return McpError::transport(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service Unavailable: root is stopping",
            )
            .answering(Some(&asked))
            .into_response();
        };
        if terminal(&first) {
            pending.armed = false;
            let message = with_id(first, &asked);
            let status = match lifecycle {
                Lifecycle::Session => StatusCode::OK,
                Lifecycle::Stateless { meta_malformed } => {
                    checks::stateless_status(&message, meta_malformed)
                }
            };
            return json_message(status, &message, patch.as_ref(), &self.handler.kept);
        }
        let kept = self.handler.kept.clone();
        let stream = futures::stream::unfold(
            (Some(first), answer, pending, asked, false),
            move |(first, mut answer, mut pending, asked, done)| {
                let patch = patch.clone();
                let kept = kept.clone();
                async move {
                    if done {
                        return None;
                    }
                    let message = match first {
                        Some(m) => m,
                        None => answer.recv().await?,
                    };
                    let last = terminal(&message);
                    if last {
                        pending.armed = false;
                    }
                    let (message, patch) = if last {
                        (with_id(message, &asked), patch)
                    } else {
                        (message, None)
                    };
                    let event = sse_event(&message, patch.as_ref(), &kept);
                    Some((event, (None, answer, pending, asked, last)))
                }
            },
        );
        sse(stream, self.shutdown.clone())
    }

    /// `GET /mcp`: a session's standalone stream.
    fn get(&self, req: Request, asker: Option<&str>) -> Result<Response, McpError> {
        let headers = req.headers();
        if !front::accepts(headers, "text/event-stream") {
            return Err(McpError::transport(
                StatusCode::NOT_ACCEPTABLE,
                "Not Acceptable: Client must accept text/event-stream",
            ));
        }
        if !checks::headers_use_session(headers)? {
            return Ok(method_not_allowed());
        }
        let sid = session_id(headers).ok_or_else(session_required)?;
        let session = self.session(sid, asker)?;
        let messages = session.inlet.routes.open_standalone();
        let kept = self.handler.kept.clone();
        let stream = futures::stream::unfold(messages, move |mut messages| {
            let kept = kept.clone();
            async move {
                let message = messages.recv().await?;
                Some((sse_event(&message, None, &kept), messages))
            }
        });
        Ok(sse(stream, session.ends.clone()))
    }

    /// `DELETE /mcp`: ends a session.
    fn delete(&self, req: Request, asker: Option<&str>) -> Result<Response, McpError> {
        let headers = req.headers();
        if !checks::headers_use_session(headers)? {
            return Ok(method_not_allowed());
        }
        let sid = session_id(headers).ok_or_else(session_required)?;
        self.session(sid, asker)?;
        let (_, session) = self
            .sessions
            .remove(sid)
            .ok_or_else(McpError::session_not_found)?;
        session.ends.cancel();
        session.inlet.routes.close_standalone();
        Ok(StatusCode::OK.into_response())
    }
}

/// A request handed to a service whose answer is still to come: dropped before the answer
/// (the client went away), it stops waiting; a stateless request is also cancelled.
struct Pending {
    inlet: Inlet,
    id: RequestId,
    cancel_on_drop: bool,
    armed: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.inlet.routes.abandon(&self.id);
        if self.cancel_on_drop {
            let cancelled = CancelledNotification::new(CancelledNotificationParam::new(
                Some(self.id.clone()),
                Some("the client went away".into()),
            ));
            self.inlet
                .send(ClientJsonRpcMessage::Notification(JsonRpcNotification {
                    jsonrpc: JsonRpcVersion2_0,
                    notification: ClientNotification::CancelledNotification(cancelled),
                }));
        }
    }
}

/// The body as one client message, or the precise refusal and the request's id, if known.
fn decode(bytes: &Bytes) -> Result<ClientJsonRpcMessage, (FrontError, Option<serde_json::Value>)> {
    let probe = front::check_body(bytes).map_err(|e| (e, None))?;
    serde_json::from_slice(bytes).map_err(|e| {
        let detail = e.to_string();
        let err = match &probe.method {
            Some(method) => FrontError::InvalidParams {
                method: method.clone(),
                detail,
            },
            None => FrontError::NotAMessage(detail),
        };
        (err, probe.id)
    })
}

fn session_id(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(HEADER_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty())
}

fn session_required() -> McpError {
    McpError::transport(
        StatusCode::BAD_REQUEST,
        "Bad Request: Session ID is required",
    )
}

fn terminal(message: &ServerJsonRpcMessage) -> bool {
    matches!(
        message,
        ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_)
    )
}

/// The answer with the id the client gave its request.
fn with_id(mut message: ServerJsonRpcMessage, id: &RequestId) -> ServerJsonRpcMessage {
    match &mut message {
        ServerJsonRpcMessage::Response(r) => r.id = id.clone(),
        ServerJsonRpcMessage::Error(e) => e.id = Some(id.clone()),
        _ => {}
    }
    message
}

/// A message as JSON text, with `patch` applied.
/// Why an answer could not be written.
#[derive(Debug, thiserror::Error)]
enum EncodeError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Lost(#[from] crate::mcp::kept::StagedLost),
    #[error("the kept answer's placeholders are missing from the message")]
    Placeholders,
}

/// `message` as written: serialized, `patch` applied, a staged descriptive answer written
/// in place of its placeholders ([`crate::mcp::kept`]).
fn encode(
    message: &ServerJsonRpcMessage,
    patch: Option<&Patch>,
    kept: &Kept,
) -> Result<Vec<u8>, EncodeError> {
    let staged = kept.take(message).transpose()?;
    let bytes = match patch {
        None => serde_json::to_vec(message)?,
        Some(patch) => {
            let mut value = serde_json::to_value(message)?;
            patch(&mut value);
            serde_json::to_vec(&value)?
        }
    };
    match staged {
        None => Ok(bytes),
        Some(staged) => crate::mcp::kept::splice(&bytes, &staged).ok_or(EncodeError::Placeholders),
    }
}

fn json_message(
    status: StatusCode,
    message: &ServerJsonRpcMessage,
    patch: Option<&Patch>,
    kept: &Kept,
) -> Response {
    match encode(message, patch, kept) {
        Ok(body) => (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            axum::body::Body::from(body),
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "an MCP answer could not be serialized");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

fn sse_event(
    message: &ServerJsonRpcMessage,
    patch: Option<&Patch>,
    kept: &Kept,
) -> Result<Event, Infallible> {
    let data = encode(message, patch, kept)
        .map(|b| String::from_utf8(b).unwrap_or_default())
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "an MCP message could not be serialized");
            String::new()
        });
    Ok(Event::default().event("message").data(data))
}

/// An SSE response of `events`, ending at `stop`.
fn sse(
    events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
    stop: CancellationToken,
) -> Response {
    use futures::StreamExt;
    let events = events.take_until(stop.cancelled_owned());
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(SSE_KEEP_ALIVE))
        .into_response()
}

fn method_not_allowed() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, "GET, POST, DELETE")],
        "Method Not Allowed",
    )
        .into_response()
}
