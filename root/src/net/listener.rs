//! Root's listener: accepts TCP connections (plain HTTP, or TLS through [`crate::net::tls`]) and
//! serves the router on each with hyper's HTTP/1.1 connection (with upgrades), bounded so
//! that slow or stalled clients cannot hold root by luck:
//! - `limits.max_connections`: at most that many connections are served at once; past it
//!   root stops accepting and new connections wait in the kernel's backlog until a slot frees
//!   (nothing is refused, nothing grows without bound);
//! - `limits.header_read_timeout_ms`: a connection must finish each request head within it,
//!   which also ends idle keep-alive connections (hyper's HTTP/1 header timer); a TLS
//!   handshake has its own 10 s;
//! - `limits.body_read_timeout_ms`: a request body that sends nothing for that long fails
//!   (the front answers `408 Request Timeout`, then the connection closes);
//! - `limits.write_stall_timeout_ms`: a write that makes no progress for that long (a client
//!   that never reads its responses or its event stream) ends the connection.
//!
//! Upgraded connections (hub WebSockets) keep the slot and the write-stall bound; long MCP
//! event streams are bounded only by the client reading them. Each bound is counted in
//! `mcp_root_connection_timeouts_total{kind}`, open connections in
//! `mcp_root_connections_open`.

use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::net::tls::{TlsPeer, TlsState};
use crate::telemetry::metrics::ConnMetrics;

/// Time a new TLS connection has to finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The bounds every connection is served with (from `[limits]`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnLimits {
    pub(crate) max_connections: usize,
    pub(crate) header_read: Duration,
    pub(crate) body_read: Duration,
    pub(crate) write_stall: Duration,
}

impl ConnLimits {
    pub(crate) fn from_config(l: &crate::config::Limits) -> ConnLimits {
        ConnLimits {
            max_connections: l.max_connections,
            header_read: Duration::from_millis(l.header_read_timeout_ms),
            body_read: Duration::from_millis(l.body_read_timeout_ms),
            write_stall: Duration::from_millis(l.write_stall_timeout_ms),
        }
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
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let tracker = tokio_util::task::TaskTracker::new();
    loop {
        // A free slot first: at the limit, connections wait in the backlog, unaccepted.
        let slot = tokio::select! {
            () = stop.cancelled() => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(s) => s,
                Err(_) => break,
            },
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
        // The slot goes with the socket: an upgraded connection (a hub's WebSocket) keeps it
        // until the socket closes.
        let io = StallGuard::new(tcp, limits.write_stall, metrics.clone(), slot);
        let router = router.clone();
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
                        connection(stream, remote, Some(peer), router, limits, &metrics, stop)
                            .await;
                    }
                }
                None => connection(io, remote, None, router, limits, &metrics, stop).await,
            }
        });
    }
    tracker.close();
    tracker.wait().await;
    Ok(())
}

async fn connection<I>(
    io: I,
    remote: SocketAddr,
    peer: Option<TlsPeer>,
    router: axum::Router,
    limits: ConnLimits,
    metrics: &Arc<ConnMetrics>,
    stop: CancellationToken,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let body_metrics = metrics.clone();
    let svc = router.map_request(move |req: http::Request<hyper::body::Incoming>| {
        let (mut parts, body) = req.into_parts();
        parts.extensions.insert(axum::extract::ConnectInfo(remote));
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
    // HTTP/1.1 only (TLS offers `http/1.1` alone), so no protocol sniffing: the header timer
    // runs from the first byte the connection waits for.
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read);
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
                    if e.is_timeout() {
                        metrics.timeout("header");
                        tracing::debug!(%remote, "request head not received in time; connection closed");
                    } else {
                        tracing::trace!(%remote, error = %e, "connection ended with an error");
                    }
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
/// connection's slot (and counts as open) until it is dropped.
struct StallGuard<T> {
    inner: T,
    limit: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
    metrics: Arc<ConnMetrics>,
    _slot: OwnedSemaphorePermit,
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
        slot: OwnedSemaphorePermit,
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
