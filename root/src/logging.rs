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

/// The payload-logging caps as a filter layer.
pub type PayloadCaps = tracing_subscriber::filter::FilterFn<fn(&tracing::Metadata<'_>) -> bool>;

/// The payload-logging caps ([`mcp_shared::logging`]) as a global filter: it only ever
/// removes events (tungstenite above `debug`, rmcp above `info`), whatever the other filter
/// enables.
pub fn payload_caps() -> PayloadCaps {
    tracing_subscriber::filter::filter_fn(mcp_shared::logging::metadata_within_payload_caps)
}

/// Installs the process's subscriber: `RUST_LOG` if set and valid, else `default_filter`,
/// under [`payload_caps`], over the ring, and over stderr when `stderr` is set. Does nothing
/// if one is installed.
pub fn init(default_filter: &str, stderr: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| default_filter.into());
    let ring = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(RingWriter);
    let err = stderr.then(|| tracing_subscriber::fmt::layer().with_writer(std::io::stderr));
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(payload_caps())
        .with(ring)
        .with(err)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// What a subscriber filtered as [`init`]'s is lets through, for a filter directive.
    fn logged(directive: &str) -> Vec<String> {
        #[derive(Clone, Default)]
        struct Lines(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Lines {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().expect("lines").extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new(directive))
            .with(payload_caps())
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(move || writer.clone()),
            );
        tracing::subscriber::with_default(subscriber, || {
            tracing::trace!(target: "tungstenite::protocol", "tungstenite trace");
            tracing::debug!(target: "tungstenite::protocol", "tungstenite debug");
            tracing::debug!(target: "rmcp::service", "rmcp debug");
            tracing::info!(target: "rmcp::service", "rmcp info");
            tracing::debug!(target: "mcp_root::hubs", "root debug");
            tracing::info!(target: "mcp_root::hubs", "root info");
        });
        let text = String::from_utf8(lines.0.lock().expect("lines").clone()).unwrap_or_default();
        let mut seen: Vec<String> = [
            "tungstenite trace",
            "tungstenite debug",
            "rmcp debug",
            "rmcp info",
            "root debug",
            "root info",
        ]
        .iter()
        .filter(|m| text.contains(*m))
        .map(|m| m.to_string())
        .collect();
        seen.sort();
        seen
    }

    /// The caps remove payload-printing levels at any verbosity and enable nothing at `info`
    /// (they used to be `EnvFilter` directives, which turned tungstenite's debug lines on).
    #[test]
    fn payload_caps_only_ever_remove_lines() {
        assert_eq!(logged("info"), ["rmcp info", "root info"]);
        assert_eq!(
            logged("trace"),
            ["rmcp info", "root debug", "root info", "tungstenite debug"]
        );
    }

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
