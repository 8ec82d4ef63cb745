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

pub mod checks;
pub mod wire;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
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
    ClientNotification, ClientRequest, GetExtensions, GetMeta, Implementation,
    InitializeRequestParams, JsonRpcNotification, JsonRpcVersion2_0, ProtocolVersion, RequestId,
    ServerJsonRpcMessage,
};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use tokio_util::sync::CancellationToken;

use self::checks::Refusal;
use self::wire::{Answer, Inlet};
use crate::app::App;
use crate::mcp::RootMcp;
use crate::mcp::front::{self, FrontError};

/// SSE comment lines keeping idle streams open through proxies.
const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The `/mcp` endpoint's state.
pub struct Door {
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
}

/// Which service a request goes to, which decides its ids, status and cancellation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    Session,
    Stateless { meta_malformed: bool },
}

impl Door {
    /// The door, with its stateless service running until `shutdown`.
    pub fn start(app: Arc<App>, shutdown: &CancellationToken) -> Arc<Door> {
        let handler = RootMcp::new(app.clone());
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

    /// Answers one request to `/mcp`.
    pub async fn serve(self: &Arc<Self>, req: Request) -> Response {
        let result = match *req.method() {
            Method::POST => self.post(req).await,
            Method::GET => self.get(req),
            Method::DELETE => self.delete(req),
            _ => Ok(method_not_allowed()),
        };
        result.unwrap_or_else(refused)
    }

    async fn post(self: &Arc<Self>, req: Request) -> Result<Response, Refusal> {
        if let Err(e) = front::check_headers(req.headers()) {
            return Ok(e.response(None));
        }
        let (parts, body) = req.into_parts();
        let bytes = match front::read_body(body, self.app.config.limits.max_body_bytes).await {
            Ok(b) => b,
            Err(e) => return Ok(e.response(None)),
        };
        let message = match decode(&bytes) {
            Ok(m) => m,
            Err((e, id)) => return Ok(e.response(id.as_ref())),
        };
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
                .exchange(&self.stateless, message, parts, lifecycle)
                .await);
        }
        let id = checks::request_id(&message);
        match session_id(&parts.headers) {
            Some(sid) => {
                let session = self.session(sid, id)?;
                Ok(self
                    .exchange(&session.inlet, message, parts, Lifecycle::Session)
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
                _ => Err(Refusal::transport(
                    StatusCode::BAD_REQUEST,
                    id,
                    "Bad Request: Session ID is required",
                )),
            },
        }
    }

    fn session(&self, sid: &str, id: Option<RequestId>) -> Result<Session, Refusal> {
        self.sessions
            .get(sid)
            .map(|s| s.value().clone())
            .ok_or_else(|| {
                Refusal::transport(StatusCode::NOT_FOUND, id, "Not Found: Session not found")
            })
    }

    /// `initialize` without a session: a new session, its service, and the handshake's answer
    /// with the session's id.
    async fn open(self: &Arc<Self>, message: ClientJsonRpcMessage, parts: Parts) -> Response {
        let sid = uuid::Uuid::new_v4().to_string();
        let idle = Duration::from_secs(self.app.config.mcp.session_idle_sec);
        let (inlet, outlet) = wire::wire(Some(idle));
        let ends = self.shutdown.child_token();
        let session = Session {
            inlet: inlet.clone(),
            ends: ends.clone(),
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
        let mut res = self
            .exchange(&inlet, message, parts, Lifecycle::Session)
            .await;
        if let Ok(v) = HeaderValue::from_str(&sid) {
            res.headers_mut().insert(HEADER_SESSION_ID, v);
        }
        res
    }

    /// Hands one message to a service and answers the POST that carried it.
    async fn exchange(
        &self,
        inlet: &Inlet,
        message: ClientJsonRpcMessage,
        parts: Parts,
        lifecycle: Lifecycle,
    ) -> Response {
        let stateless = lifecycle != Lifecycle::Session;
        match message {
            ClientJsonRpcMessage::Request(mut r) => {
                let asked = r.id.clone();
                if stateless {
                    r.id = RequestId::Number(self.next_id.fetch_add(1, Ordering::Relaxed));
                }
                let id = r.id.clone();
                let progress = r.request.get_meta().get_progress_token();
                r.request.extensions_mut().insert(parts);
                let answer = inlet.routes.expect(id.clone(), progress);
                if !inlet.send(ClientJsonRpcMessage::Request(r)) {
                    inlet.routes.abandon(&id);
                    return refused(Refusal::transport(
                        StatusCode::NOT_FOUND,
                        Some(asked),
                        "Not Found: Session not found",
                    ));
                }
                let pending = Pending {
                    inlet: inlet.clone(),
                    id,
                    cancel_on_drop: stateless,
                    armed: true,
                };
                self.answer(pending, answer, asked, lifecycle).await
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
            _ => refused(Refusal::invalid_request(
                None,
                "stateless server does not accept JSON-RPC responses",
            )),
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
    ) -> Response {
        let first = tokio::select! {
            m = answer.recv() => m,
            _ = self.shutdown.cancelled() => None,
        };
        let Some(first) = first else {
            return refused(Refusal::transport(
                StatusCode::SERVICE_UNAVAILABLE,
                Some(asked),
                "Service Unavailable: root is stopping",
            ));
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
            return json_message(status, &message);
        }
        let stream = futures::stream::unfold(
            (Some(first), answer, pending, asked, false),
            |(first, mut answer, mut pending, asked, done)| async move {
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
                let message = if last {
                    with_id(message, &asked)
                } else {
                    message
                };
                let event = sse_event(&message);
                Some((event, (None, answer, pending, asked, last)))
            },
        );
        sse(stream, self.shutdown.clone())
    }

    /// `GET /mcp`: a session's standalone stream.
    fn get(&self, req: Request) -> Result<Response, Refusal> {
        let headers = req.headers();
        if !front::accepts(headers, "text/event-stream") {
            return Err(Refusal::transport(
                StatusCode::NOT_ACCEPTABLE,
                None,
                "Not Acceptable: Client must accept text/event-stream",
            ));
        }
        if !checks::headers_use_session(headers)? {
            return Ok(method_not_allowed());
        }
        let sid = session_id(headers).ok_or_else(session_required)?;
        let session = self.session(sid, None)?;
        let messages = session.inlet.routes.open_standalone();
        let stream = futures::stream::unfold(messages, |mut messages| async move {
            let message = messages.recv().await?;
            Some((sse_event(&message), messages))
        });
        Ok(sse(stream, session.ends.clone()))
    }

    /// `DELETE /mcp`: ends a session.
    fn delete(&self, req: Request) -> Result<Response, Refusal> {
        let headers = req.headers();
        if !checks::headers_use_session(headers)? {
            return Ok(method_not_allowed());
        }
        let sid = session_id(headers).ok_or_else(session_required)?;
        let (_, session) = self.sessions.remove(sid).ok_or_else(|| {
            Refusal::transport(StatusCode::NOT_FOUND, None, "Not Found: Session not found")
        })?;
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

fn session_required() -> Refusal {
    Refusal::transport(
        StatusCode::BAD_REQUEST,
        None,
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

fn json_message(status: StatusCode, message: &ServerJsonRpcMessage) -> Response {
    match serde_json::to_vec(message) {
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

fn sse_event(message: &ServerJsonRpcMessage) -> Result<Event, Infallible> {
    let data = serde_json::to_string(message).unwrap_or_else(|e| {
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

fn refused(r: Refusal) -> Response {
    (r.status, axum::Json(r.body())).into_response()
}
