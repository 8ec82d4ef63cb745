//! Root's own log: tracing output to stderr, plus a bounded in-memory ring of the last lines
//! that `hub.get_logs` with `source: "root_local"` reads (seed "WebUI and Observability
//! Model": log reads say whether they come from the root-hosting machine or the subnet).
//!
//! The ring holds at most [`RING_LINES`] formatted lines (no ANSI colours); older lines are
//! dropped and counted. It is process-wide, like the tracing subscriber that fills it.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Lines the ring keeps.
pub const RING_LINES: usize = 4_000;

/// The process's log ring.
pub static RING: LazyLock<LogRing> = LazyLock::new(LogRing::default);

/// A bounded ring of formatted log lines.
#[derive(Default)]
pub struct LogRing {
    lines: Mutex<VecDeque<String>>,
    dropped: AtomicU64,
}

impl LogRing {
    fn push(&self, text: &str) {
        let Ok(mut lines) = self.lines.lock() else {
            return;
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if lines.len() == RING_LINES {
                lines.pop_front();
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            lines.push_back(line.to_owned());
        }
    }

    /// The last `n` lines that `keep` maps to `Some` (after its rewrite, e.g. redaction and
    /// a filter), oldest first, and whether more matched than were returned.
    pub fn tail(
        &self,
        n: usize,
        mut keep: impl FnMut(&str) -> Option<String>,
    ) -> (Vec<String>, bool) {
        let Ok(lines) = self.lines.lock() else {
            return (Vec::new(), false);
        };
        let mut out: Vec<String> = Vec::with_capacity(n.min(lines.len()));
        let mut truncated = false;
        for line in lines.iter().rev() {
            let Some(line) = keep(line) else {
                continue;
            };
            if out.len() == n {
                truncated = true;
                break;
            }
            out.push(line);
        }
        out.reverse();
        (out, truncated)
    }

    /// Lines dropped since the process started (the ring was full).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Writes each formatted event into [`RING`].
#[derive(Clone, Copy, Default)]
pub struct RingWriter;

impl Write for RingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        RING.push(&String::from_utf8_lossy(buf));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RingWriter {
    type Writer = RingWriter;
    fn make_writer(&'a self) -> RingWriter {
        RingWriter
    }
}

/// Log targets capped below the level at which they print message payloads, whatever
/// `RUST_LOG` says: tungstenite traces every WebSocket frame (a hub's `hello` carries its
/// token) and rmcp debug-logs every JSON-RPC request and result (confirmation tokens, issued
/// bearers). Secrets never reach a log, at any level.
pub const PAYLOAD_LOGGING_CAPS: &[&str] =
    &["tungstenite=debug", "tokio_tungstenite=debug", "rmcp=info"];

/// `filter` with [`PAYLOAD_LOGGING_CAPS`] applied on top.
pub fn cap_payload_logging(
    mut filter: tracing_subscriber::EnvFilter,
) -> tracing_subscriber::EnvFilter {
    for cap in PAYLOAD_LOGGING_CAPS {
        if let Ok(directive) = cap.parse() {
            filter = filter.add_directive(directive);
        }
    }
    filter
}

/// Installs the process's subscriber: `filter` (an `EnvFilter` directive, `RUST_LOG` wins,
/// [`PAYLOAD_LOGGING_CAPS`] win over both) over the ring, and over stderr when `stderr` is
/// set. Does nothing if one is installed.
pub fn init(default_filter: &str, stderr: bool) {
    let filter = cap_payload_logging(
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| default_filter.into()),
    );
    let ring = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(RingWriter);
    let err = stderr.then(|| tracing_subscriber::fmt::layer().with_writer(std::io::stderr));
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(ring)
        .with(err)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_newest_lines_and_filters() {
        let ring = LogRing::default();
        for i in 0..(RING_LINES + 10) {
            ring.push(&format!("line {i}\n"));
        }
        assert_eq!(ring.dropped(), 10);
        let (tail, truncated) = ring.tail(3, |l| Some(l.to_owned()));
        assert_eq!(
            tail,
            [
                format!("line {}", RING_LINES + 7),
                format!("line {}", RING_LINES + 8),
                format!("line {}", RING_LINES + 9)
            ]
        );
        assert!(truncated);
        let (hits, truncated) = ring.tail(100, |l| (l == "line 1000").then(|| l.to_owned()));
        assert_eq!(hits, ["line 1000"]);
        assert!(!truncated);
    }
}
