//! The wire between root's HTTP front door and one rmcp service: an [`rmcp::transport::Transport`]
//! whose inbound side is a channel the door writes client messages into, and whose outbound
//! side routes each server message to the HTTP response waiting for it.
//!
//! Routing of what the service sends:
//! - a response or error goes to the POST whose request it answers, and ends that answer;
//! - a request the handler makes while answering one (elicitation) carries rmcp's
//!   [`OriginatingRequestId`] and rides that request's answer (which becomes an SSE stream);
//! - a progress notification rides the answer of the request that gave its progress token;
//! - anything else (`notifications/tools/list_changed`, log messages) goes to the session's
//!   standalone stream (`GET /mcp`) when one is open, and is dropped otherwise.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use dashmap::DashMap;
use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, GetExtensions, ProgressToken, RequestId, ServerJsonRpcMessage,
    ServerNotification,
};
use rmcp::service::OriginatingRequestId;
use tokio::sync::mpsc;

/// Messages of one answer in flight: the terminal one last.
pub(crate) type Answer = mpsc::UnboundedReceiver<ServerJsonRpcMessage>;

/// Where the service's messages go.
#[derive(Default)]
pub(crate) struct Routes {
    /// Client request id (as the service sees it) → the answer waiting for it.
    waiting: DashMap<RequestId, mpsc::UnboundedSender<ServerJsonRpcMessage>>,
    /// Progress token (as the service sees it) → the request that gave it, and the token as
    /// its client gave it.
    progress: DashMap<ProgressToken, (RequestId, ProgressToken)>,
    /// The session's standalone stream, while a `GET /mcp` holds it.
    standalone: Mutex<Option<mpsc::UnboundedSender<ServerJsonRpcMessage>>>,
    /// Requests in flight (for the idle timer: a session answering a call is not idle).
    in_flight: AtomicUsize,
    /// When the door last answered a message of the session itself (2025-11-25 tasks): that
    /// is use too.
    touched: Mutex<Option<std::time::Instant>>,
}

impl Routes {
    /// Registers a request before it is handed to the service; its messages arrive on the
    /// returned receiver. `progress`: its progress token as the client gave it and as the
    /// service sees it.
    pub(crate) fn expect(
        &self,
        id: RequestId,
        progress: Option<(ProgressToken, ProgressToken)>,
    ) -> Answer {
        let (tx, rx) = mpsc::unbounded_channel();
        self.waiting.insert(id.clone(), tx);
        if let Some((client, ours)) = progress {
            self.progress.insert(ours, (id, client));
        }
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        rx
    }

    /// Forgets a request whose answer nobody reads any more (it stays in flight in the
    /// service until it finishes; its answer is then dropped).
    pub(crate) fn abandon(&self, id: &RequestId) {
        if self.waiting.remove(id).is_some() {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        self.forget_progress(id);
    }

    /// Drops the progress tokens of a request that is answered or abandoned.
    fn forget_progress(&self, id: &RequestId) {
        if !self.progress.is_empty() {
            self.progress.retain(|_, (r, _)| r != id);
        }
    }

    /// Opens the standalone stream, replacing (and so ending) an earlier one.
    pub(crate) fn open_standalone(&self) -> Answer {
        let (tx, rx) = mpsc::unbounded_channel();
        *self.slot() = Some(tx);
        rx
    }

    pub(crate) fn close_standalone(&self) {
        self.slot().take();
    }

    /// The standalone stream's slot (a poisoned lock only means a panic elsewhere while it
    /// was held; the slot is still a plain `Option`).
    fn slot(&self) -> MutexGuard<'_, Option<mpsc::UnboundedSender<ServerJsonRpcMessage>>> {
        self.standalone
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) > 0
    }

    /// The session was used by a message the door answered itself.
    pub(crate) fn touch(&self) {
        *self.touched.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(std::time::Instant::now());
    }

    /// Whether the session was touched within `idle`.
    fn touched_within(&self, idle: Duration) -> bool {
        self.touched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some_and(|at| at.elapsed() < idle)
    }

    /// Sends a server message to the session's standalone stream (dropped when none is open).
    pub(crate) fn notify(&self, message: ServerJsonRpcMessage) {
        self.to_standalone(message);
    }

    fn deliver(&self, mut message: ServerJsonRpcMessage) {
        match &mut message {
            ServerJsonRpcMessage::Response(r) => self.finish(r.id.clone(), message),
            ServerJsonRpcMessage::Error(e) => match e.id.clone() {
                Some(id) => self.finish(id, message),
                None => self.to_standalone(message),
            },
            ServerJsonRpcMessage::Request(r) => {
                let origin = r
                    .request
                    .extensions()
                    .get::<OriginatingRequestId>()
                    .map(|o| o.0.clone());
                self.to_request(origin, message);
            }
            ServerJsonRpcMessage::Notification(n) => {
                let origin = match &mut n.notification {
                    ServerNotification::ProgressNotification(p) => {
                        let found = self.progress.get(&p.params.progress_token);
                        found.map(|r| {
                            let (id, client) = r.value().clone();
                            p.params.progress_token = client;
                            id
                        })
                    }
                    _ => None,
                };
                self.to_request(origin, message);
            }
        }
    }

    fn finish(&self, id: RequestId, message: ServerJsonRpcMessage) {
        if let Some((_, tx)) = self.waiting.remove(&id) {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
            self.forget_progress(&id);
            let _ = tx.send(message);
        } else {
            tracing::debug!(request = %id, "an answer nobody waits for any more was dropped");
        }
    }

    fn to_request(&self, origin: Option<RequestId>, message: ServerJsonRpcMessage) {
        let tx = origin.and_then(|id| self.waiting.get(&id).map(|t| t.value().clone()));
        match tx {
            Some(tx) => {
                let _ = tx.send(message);
            }
            None => self.to_standalone(message),
        }
    }

    fn to_standalone(&self, message: ServerJsonRpcMessage) {
        let mut slot = self.slot();
        if let Some(tx) = slot.as_ref()
            && tx.send(message).is_err()
        {
            *slot = None;
        }
    }
}

/// The door's end of a wire: it writes client messages in.
#[derive(Clone)]
pub(crate) struct Inlet {
    tx: mpsc::UnboundedSender<ClientJsonRpcMessage>,
    pub(crate) routes: Arc<Routes>,
}

impl Inlet {
    /// Hands a message to the service; `false` when the service has ended.
    pub(crate) fn send(&self, message: ClientJsonRpcMessage) -> bool {
        self.tx.send(message).is_ok()
    }
}

/// The service's end of a wire: rmcp's transport.
pub(crate) struct Outlet {
    rx: mpsc::UnboundedReceiver<ClientJsonRpcMessage>,
    routes: Arc<Routes>,
    /// For a session: how long it may receive nothing while nothing is in flight before it
    /// ends (`mcp.session_idle_sec`).
    idle: Option<Duration>,
}

/// A new wire.
pub(crate) fn wire(idle: Option<Duration>) -> (Inlet, Outlet) {
    let (tx, rx) = mpsc::unbounded_channel();
    let routes = Arc::new(Routes::default());
    (
        Inlet {
            tx,
            routes: routes.clone(),
        },
        Outlet { rx, routes, idle },
    )
}

/// The transport never fails: a message for an answer nobody waits for is dropped.
#[derive(Debug, thiserror::Error)]
#[error("the MCP wire is closed")]
pub(crate) struct Closed;

impl rmcp::transport::Transport<RoleServer> for Outlet {
    type Error = Closed;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Closed>> + Send + 'static {
        self.routes.deliver(item);
        std::future::ready(Ok(()))
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        let Some(idle) = self.idle else {
            return self.rx.recv().await;
        };
        loop {
            match tokio::time::timeout(idle, self.rx.recv()).await {
                Ok(message) => return message,
                Err(_) if self.routes.busy() || self.routes.touched_within(idle) => continue,
                Err(_) => {
                    tracing::debug!("an MCP session ended after its idle timeout");
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Closed> {
        self.rx.close();
        Ok(())
    }
}
