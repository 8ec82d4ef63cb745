//! Root's listener: accepts TCP connections (plain HTTP, or TLS through [`crate::net::tls`]) and
//! serves the router on each with hyper's HTTP/1.1 connection (with upgrades), bounded so
//! that slow or stalled clients cannot hold root by luck, and so that a fleet of hubs cannot
//! lock agents and operators out:
//! - `limits.max_connections`: client connections served at once (a hub's socket counts here
//!   only until its upgrade; hub links have their own budget, `limits.max_hub_links`, kept by
//!   `api::hub_link::door`). Past it root still reads up to [`OVERFLOW_CONNECTIONS`] more:
//!   probes (`/healthz`, `/readyz`, `/metrics`) are answered, any other request waits a
//!   moment for a client place and is then served, or gets `503` with `Retry-After`. Past
//!   those too, new connections wait in the kernel's backlog (the bound on descriptors);
//! - `limits.header_read_timeout_ms`: a connection must finish each request head within it
//!   (from its accept, or a later request's first byte), and `limits.keep_alive_timeout_ms`
//!   ends a keep-alive connection idle between requests ([`crate::net::keepalive`]); a TLS
//!   handshake has its own 10 s;
//! - `limits.body_read_timeout_ms`: a request body that sends nothing for that long fails
//!   (the front answers `408 Request Timeout`, then the connection closes);
//! - `limits.write_stall_timeout_ms`: a write that makes no progress for that long (a client
//!   that never reads its responses or its event stream) ends the connection.
//!
//! Upgraded connections (hub WebSockets) keep the write-stall bound; long MCP event streams
//! are bounded only by the client reading them. Each bound is counted in
//! `mcp_root_connection_timeouts_total{kind}`, refusals at a full budget in
//! `mcp_root_connections_refused_total{kind}`, open sockets in `mcp_root_connections_open`.
//! At start root raises its open-file limit to the hard limit and warns when that is below
//! what its budgets need ([`open_files`]).

use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use axum::response::IntoResponse;
use hyper::body::{Body, Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use mcp_shared::error::ErrorCode;

use crate::net::answer::Refused;
use crate::net::keepalive::{Exchanges, Timed};
use crate::net::tls::{TlsPeer, TlsState};
use crate::telemetry::metrics::ConnMetrics;

/// Time a new TLS connection has to finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections read past the client budget, one request each (see the module header).
const OVERFLOW_CONNECTIONS: usize = 64;
/// Time an overflow connection has to send its request head.
const OVERFLOW_HEADER_READ: Duration = Duration::from_secs(2);
/// How long a request on an overflow connection may wait for a client place.
const OVERFLOW_WAIT: Duration = Duration::from_secs(2);
/// Overflow requests waiting for a client place at once; the others are answered at once.
const OVERFLOW_WAITERS: usize = OVERFLOW_CONNECTIONS / 2;
/// What an overflow connection is served; everything else is answered `503`.
const PROBES: [&str; 3] = ["/healthz", "/readyz", "/metrics"];
/// Descriptors root needs besides its connections (store, logs, TLS files, the runtime).
const OTHER_FILES: u64 = 1024;

/// The bounds every connection is served with (from `[limits]`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnLimits {
    pub(crate) max_connections: usize,
    pub(crate) max_hub_links: usize,
    pub(crate) header_read: Duration,
    pub(crate) keep_alive: Duration,
    pub(crate) body_read: Duration,
    pub(crate) write_stall: Duration,
}

impl ConnLimits {
    pub(crate) fn from_config(l: &crate::config::Limits) -> ConnLimits {
        ConnLimits {
            max_connections: l.max_connections,
            max_hub_links: l.max_hub_links,
            header_read: Duration::from_millis(l.header_read_timeout_ms),
            keep_alive: Duration::from_millis(l.keep_alive_timeout_ms),
            body_read: Duration::from_millis(l.body_read_timeout_ms),
            write_stall: Duration::from_millis(l.write_stall_timeout_ms),
        }
    }
}

/// A connection's place in root's client budget, in each of its requests' extensions. A
/// hub's socket gives it back once upgraded ([`ConnSlot::release`]); it then counts among
/// the hub links instead.
pub(crate) struct ConnSlot(std::sync::Mutex<Option<OwnedSemaphorePermit>>);

impl ConnSlot {
    /// Gives the connection's place back to the client budget.
    pub(crate) fn release(&self) {
        if let Ok(mut place) = self.0.lock() {
            place.take();
        }
    }

    /// Holds `place` instead (an overflow connection that got a client place).
    fn replace(&self, place: OwnedSemaphorePermit) {
        if let Ok(mut held) = self.0.lock() {
            *held = Some(place);
        }
    }
}

/// The two budgets a new connection may take a place in.
struct Budgets {
    clients: Arc<Semaphore>,
    overflow: Arc<Semaphore>,
}

impl Budgets {
    /// A place for the next connection: a client place if one is free, else an overflow
    /// place (`true`), else the first of either to free up.
    async fn place(&self) -> (OwnedSemaphorePermit, bool) {
        if let Ok(p) = self.clients.clone().try_acquire_owned() {
            return (p, false);
        }
        if let Ok(p) = self.overflow.clone().try_acquire_owned() {
            return (p, true);
        }
        loop {
            tokio::select! {
                Ok(p) = self.clients.clone().acquire_owned() => return (p, false),
                Ok(p) = self.overflow.clone().acquire_owned() => return (p, true),
                else => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
}

/// The router for overflow connections: probes are answered; any other request waits up
/// to [`OVERFLOW_WAIT`] for a client place (at most [`OVERFLOW_WAITERS`] at once) and is
/// served in it, or is answered `503` with `Retry-After`. Unless it got a client place, the
/// connection closes after its answer.
fn overflow_router(
    router: axum::Router,
    budgets: &Budgets,
    limits: ConnLimits,
    metrics: Arc<ConnMetrics>,
) -> axum::Router {
    let clients = budgets.clients.clone();
    let waiters = Arc::new(Semaphore::new(OVERFLOW_WAITERS));
    router.layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let (clients, waiters, metrics) = (clients.clone(), waiters.clone(), metrics.clone());
            async move {
                let place = if PROBES.contains(&req.uri().path()) {
                    None
                } else if let Ok(_waiting) = waiters.try_acquire_owned() {
                    tokio::time::timeout(OVERFLOW_WAIT, clients.acquire_owned())
                        .await
                        .ok()
                        .and_then(Result::ok)
                } else {
                    None
                };
                if let Some(place) = place {
                    if let Some(slot) = req.extensions().get::<Arc<ConnSlot>>() {
                        slot.replace(place);
                    }
                    return next.run(req).await;
                }
                let mut answer = if PROBES.contains(&req.uri().path()) {
                    next.run(req).await
                } else {
                    metrics.refused("connections");
                    let mut refused = Refused::new(
                        http::StatusCode::SERVICE_UNAVAILABLE,
                        ErrorCode::Busy,
                        format!(
                            "root serves its maximum of {} client connections \
                             (limits.max_connections); retry after 1 s",
                            limits.max_connections
                        ),
                    );
                    refused.retry_after = Some(1);
                    refused.into_response()
                };
                answer.headers_mut().insert(
                    http::header::CONNECTION,
                    http::HeaderValue::from_static("close"),
                );
                answer
            }
        },
    ))
}

/// Raises the soft open-file limit to the hard one (as Go's runtime does) and warns when
/// the hard one is below what the budgets may open.
pub(crate) fn open_files(limits: &ConnLimits) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let needed =
        (limits.max_connections + limits.max_hub_links + OVERFLOW_CONNECTIONS) as u64 + OTHER_FILES;
    let mut rlimit = getrlimit(Resource::Nofile);
    if rlimit.current != rlimit.maximum {
        rlimit.current = rlimit.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, rlimit) {
            tracing::debug!(error = %e, "could not raise the open-file limit");
        }
    }
    let current = getrlimit(Resource::Nofile).current;
    if let Some(current) = current.filter(|c| *c < needed) {
        tracing::warn!(
            open_files = current,
            needed,
            "the open-file limit is below what limits.max_connections and limits.max_hub_links \
             may open; raise it (systemd: LimitNOFILE=, as the packaged unit sets) or lower them"
        );
    }
}

/// Serves `router` on `listener` (over TLS with `tls`) until `stop`, then lets open
/// connections finish their requests (the caller bounds the wait).
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<Arc<TlsState>>,
    router: axum::Router,
    limits: ConnLimits,
    metrics: Arc<ConnMetrics>,
    stop: CancellationToken,
) -> std::io::Result<()> {
    open_files(&limits);
    let budgets = Budgets {
        clients: Arc::new(Semaphore::new(limits.max_connections.max(1))),
        overflow: Arc::new(Semaphore::new(OVERFLOW_CONNECTIONS)),
    };
    let overflow = overflow_router(router.clone(), &budgets, limits, metrics.clone());
    let tracker = tokio_util::task::TaskTracker::new();
    loop {
        // A place first: with both budgets full, connections wait in the backlog, unaccepted.
        let (place, overflowed) = tokio::select! {
            () = stop.cancelled() => break,
            place = budgets.place() => place,
        };
        let (tcp, remote) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: wait a little instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        // The place goes with the socket until it closes, or until a hub's upgrade gives it
        // back.
        let slot = Arc::new(ConnSlot(std::sync::Mutex::new(Some(place))));
        let io = StallGuard::new(tcp, limits.write_stall, metrics.clone(), slot.clone());
        let served = Served {
            router: if overflowed {
                overflow.clone()
            } else {
                router.clone()
            },
            overflowed,
            slot,
        };
        let stop = stop.clone();
        let tls = tls.clone();
        let metrics = metrics.clone();
        tracker.spawn(async move {
            match tls {
                Some(tls) => {
                    let stream =
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor().accept(io))
                            .await
                        {
                            Ok(Ok(s)) => Some(s),
                            Ok(Err(e)) => {
                                tracing::debug!(%remote, error = %e, "TLS handshake failed");
                                None
                            }
                            Err(_) => {
                                tracing::debug!(%remote, "TLS handshake timed out");
                                metrics.timeout("handshake");
                                None
                            }
                        };
                    if let Some(stream) = stream {
                        let peer = TlsPeer {
                            client_certificate: stream
                                .get_ref()
                                .1
                                .peer_certificates()
                                .and_then(|c| c.first())
                                .map(|c| c.clone().into_owned()),
                        };
                        connection(stream, remote, Some(peer), served, limits, &metrics, stop)
                            .await;
                    }
                }
                None => connection(io, remote, None, served, limits, &metrics, stop).await,
            }
        });
    }
    tracker.close();
    tracker.wait().await;
    Ok(())
}

/// What one connection is served: the router (probes only past the client budget) and its
/// place in the budget.
struct Served {
    router: axum::Router,
    overflowed: bool,
    slot: Arc<ConnSlot>,
}

async fn connection<I>(
    io: I,
    remote: SocketAddr,
    peer: Option<TlsPeer>,
    served: Served,
    limits: ConnLimits,
    metrics: &Arc<ConnMetrics>,
    stop: CancellationToken,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let body_metrics = metrics.clone();
    let Served {
        router,
        overflowed,
        slot,
    } = served;
    let routed = router.map_request(move |req: http::Request<hyper::body::Incoming>| {
        let (mut parts, body) = req.into_parts();
        parts.extensions.insert(axum::extract::ConnectInfo(remote));
        parts.extensions.insert(slot.clone());
        if let Some(peer) = &peer {
            parts.extensions.insert(peer.clone());
        }
        let body = StallBody {
            inner: body,
            timeout: limits.body_read,
            sleep: None,
            metrics: body_metrics.clone(),
        };
        http::Request::from_parts(parts, axum::body::Body::new(body))
    });
    // Each request is served from its head until its response body is dropped.
    let exchanges = Arc::new(Exchanges::default());
    let serving = exchanges.clone();
    let svc = tower::service_fn(move |req| {
        let served = serving.serve();
        let call = routed.clone().oneshot(req);
        async move { call.await.map(|res| served.answer(res)) }
    });
    // HTTP/1.1 only (TLS offers `http/1.1` alone), so no protocol sniffing. The request-head
    // and idle timers are root's own, in the read path (hyper's header timer would also time
    // the idle wait).
    let head = if overflowed {
        // A request head promptly: the place is for probes while the budget is full.
        limits.header_read.min(OVERFLOW_HEADER_READ)
    } else {
        limits.header_read
    };
    let io = Timed::new(io, exchanges, head, limits.keep_alive, metrics.clone());
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new());
    builder.header_read_timeout(None);
    let mut conn = pin!(
        builder
            .serve_connection(TokioIo::new(io), TowerToHyperService::new(svc))
            .with_upgrades()
    );
    let mut draining = false;
    loop {
        tokio::select! {
            res = conn.as_mut() => {
                if let Err(e) = res {
                    // A request head not received in time is one (counted by `Timed`).
                    tracing::trace!(%remote, error = %e, "connection ended with an error");
                }
                return;
            }
            () = stop.cancelled(), if !draining => {
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// A connection's socket with a bound on how long a write may make no progress; it holds the
/// connection's place (and counts as open) until it is dropped.
struct StallGuard<T> {
    inner: T,
    limit: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
    metrics: Arc<ConnMetrics>,
    _slot: Arc<ConnSlot>,
}

impl<T> Drop for StallGuard<T> {
    fn drop(&mut self) {
        self.metrics.open.dec();
    }
}

impl<T> StallGuard<T> {
    fn new(
        inner: T,
        limit: Duration,
        metrics: Arc<ConnMetrics>,
        slot: Arc<ConnSlot>,
    ) -> StallGuard<T> {
        metrics.open.inc();
        StallGuard {
            inner,
            limit,
            stalled: None,
            metrics,
            _slot: slot,
        }
    }

    /// After a write-side poll: progress clears the timer, `Pending` starts it (once) and
    /// fails the write when it has run out.
    fn check<R>(
        &mut self,
        cx: &mut Context<'_>,
        res: Poll<std::io::Result<R>>,
    ) -> Poll<std::io::Result<R>> {
        if res.is_ready() {
            self.stalled = None;
            return res;
        }
        let limit = self.limit;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if timer.as_mut().poll(cx).is_ready() {
            self.stalled = None;
            self.metrics.timeout("write_stall");
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the client read nothing for {} ms", limit.as_millis()),
            )));
        }
        Poll::Pending
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StallGuard<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StallGuard<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.check(cx, res)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.check(cx, res)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_flush(cx);
        this.check(cx, res)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.check(cx, res)
    }
}

/// Why a request body failed: it sent nothing for the body read timeout.
#[derive(Debug, thiserror::Error)]
#[error("the request body sent nothing for {0} ms")]
pub(crate) struct BodyStalled(pub(crate) u128);

/// A request body with a bound on how long it may send nothing.
struct StallBody {
    inner: hyper::body::Incoming,
    timeout: Duration,
    sleep: Option<Pin<Box<Sleep>>>,
    metrics: Arc<ConnMetrics>,
}

impl Body for StallBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.sleep = None;
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                let timeout = this.timeout;
                let sleep = this
                    .sleep
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                if sleep.as_mut().poll(cx).is_ready() {
                    this.sleep = None;
                    this.metrics.timeout("body");
                    return Poll::Ready(Some(Err(Box::new(BodyStalled(timeout.as_millis())))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
