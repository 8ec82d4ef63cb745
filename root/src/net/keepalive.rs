//! Keep-alive without a race: a connection's request-head timer and its idle timer, apart.
//!
//! hyper's HTTP/1 header timer starts as soon as a connection waits for its next request, so
//! it would also end every keep-alive connection idle for that long (10 s), and a client
//! whose pool keeps idle connections longer (reqwest and Go keep them 90 s) sends requests on
//! connections root is closing, and gets no answer. As nginx keeps `client_header_timeout`
//! and `keepalive_timeout` apart, root times:
//! - the **request head** (`limits.header_read_timeout_ms`): from a connection's accept until
//!   its first request's head is read, and from the first byte of each later request until its
//!   head is read; past it the connection ends (`timeouts_total{kind="header"}`);
//! - the **idle wait** (`limits.keep_alive_timeout_ms`, 120 s: longer than common client
//!   pools, so they drop a connection before root does): from the end of a response until the
//!   next request's first byte; past it the connection ends quietly, as at an end of stream
//!   (`timeouts_total{kind="idle"}`).
//!
//! [`Timed`] is the connection's socket with both timers, in its read path; [`Exchanges`]
//! tells it whether a request is being served (from its head being read until its response
//! body is dropped, see [`Exchanges::serve`]), while which neither timer runs, and whether the
//! connection was upgraded (a hub's WebSocket), after which neither runs again.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use crate::telemetry::metrics::ConnMetrics;

/// What a connection is serving: requests between their head and the end of their response,
/// and whether it was upgraded.
#[derive(Debug, Default)]
pub(crate) struct Exchanges {
    serving: AtomicUsize,
    /// Requests whose head was read, ever: a request served between two reads ended the
    /// wait the timer was timing.
    served: AtomicUsize,
    upgraded: AtomicBool,
}

impl Exchanges {
    /// A request whose head was read: served until the returned guard is dropped (with the
    /// response's body, see [`Served`]).
    pub(crate) fn serve(self: &Arc<Self>) -> Serving {
        self.serving.fetch_add(1, Ordering::Relaxed);
        self.served.fetch_add(1, Ordering::Relaxed);
        Serving(self.clone())
    }

    fn quiet(&self) -> bool {
        self.serving.load(Ordering::Relaxed) == 0 && !self.upgraded.load(Ordering::Relaxed)
    }
}

/// One request being served (see [`Exchanges::serve`]).
pub(crate) struct Serving(Arc<Exchanges>);

impl Serving {
    /// The response, whose body ends the request's service when hyper drops it; a `101`
    /// upgrades the connection.
    pub(crate) fn answer(self, res: axum::response::Response) -> http::Response<Served> {
        if res.status() == http::StatusCode::SWITCHING_PROTOCOLS {
            self.0.upgraded.store(true, Ordering::Relaxed);
        }
        res.map(|inner| Served {
            inner,
            _serving: self,
        })
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.serving.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A response body that ends its request's service when dropped.
pub(crate) struct Served {
    inner: axum::body::Body,
    _serving: Serving,
}

impl Body for Served {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Which timer runs while the connection waits for bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// For the rest of a request head (or a new connection's first request).
    Head,
    /// For the next request, after a response.
    Idle,
}

/// A connection's socket with its request-head and idle timers (see the module's header).
pub(crate) struct Timed<T> {
    inner: T,
    exchanges: Arc<Exchanges>,
    head: Duration,
    idle: Duration,
    timer: Option<(Wait, Pin<Box<Sleep>>)>,
    /// `Exchanges::served` when the timer was last looked at.
    seen: usize,
    metrics: Arc<ConnMetrics>,
}

impl<T> Timed<T> {
    /// A new connection: its first request head is timed from now.
    pub(crate) fn new(
        inner: T,
        exchanges: Arc<Exchanges>,
        head: Duration,
        idle: Duration,
        metrics: Arc<ConnMetrics>,
    ) -> Timed<T> {
        Timed {
            inner,
            exchanges,
            head,
            idle,
            timer: Some((Wait::Head, Box::pin(tokio::time::sleep(head)))),
            seen: 0,
            metrics,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Timed<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let res = Pin::new(&mut this.inner).poll_read(cx, buf);
        let served = this.exchanges.served.load(Ordering::Relaxed);
        if served != this.seen {
            // A request was served since: whatever the timer timed is over.
            this.seen = served;
            this.timer = None;
        }
        if !this.exchanges.quiet() {
            this.timer = None;
            return res;
        }
        match res {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                // A request's first bytes: its head is timed from now.
                if !matches!(this.timer, Some((Wait::Head, _))) {
                    this.timer = Some((Wait::Head, Box::pin(tokio::time::sleep(this.head))));
                }
                return Poll::Ready(Ok(()));
            }
            Poll::Ready(other) => return Poll::Ready(other),
            Poll::Pending => {}
        }
        let idle = this.idle;
        let (wait, sleep) = this
            .timer
            .get_or_insert_with(|| (Wait::Idle, Box::pin(tokio::time::sleep(idle))));
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let wait = *wait;
        this.timer = None;
        match wait {
            Wait::Head => {
                this.metrics.timeout("header");
                Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "no complete request head within {} ms",
                        this.head.as_millis()
                    ),
                )))
            }
            Wait::Idle => {
                // Ends like a client closing its idle connection.
                this.metrics.timeout("idle");
                Poll::Ready(Ok(()))
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Timed<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
