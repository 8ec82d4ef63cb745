//! The hub's own log as `hub.get_logs` serves it (stream `hub`): the last [`CAPACITY`]
//! formatted lines of the hub's tracing output, kept in memory (nothing on disk).
//!
//! `mcp-hub run` installs a second `fmt` layer (no colours) whose writer is [`global`]; every
//! [`crate::context::HubContext`] shares that ring. A hub started in-process by a program that
//! installs no such layer (the tests) has an empty `hub` stream. Lines are stored as written
//! and redacted when they are read, like every other stream.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

/// Lines kept.
pub(crate) const CAPACITY: usize = 1000;
/// Longest line kept (longer lines are cut at a character boundary).
pub(crate) const MAX_LINE: usize = 4096;

/// A bounded ring of log lines.
#[derive(Debug, Default)]
pub(crate) struct LogRing {
    inner: Mutex<Ring>,
}

#[derive(Debug, Default)]
struct Ring {
    lines: VecDeque<String>,
    /// Lines pushed out since the start.
    dropped: u64,
}

/// What a reader sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// Oldest first.
    pub lines: Vec<String>,
    /// Whether older lines were pushed out.
    pub dropped: bool,
}

impl LogRing {
    /// Appends one line (without its newline).
    pub(crate) fn push(&self, line: &str) {
        let mut end = line.len().min(MAX_LINE);
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        let mut ring = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if ring.lines.len() == CAPACITY {
            ring.lines.pop_front();
            ring.dropped += 1;
        }
        ring.lines.push_back(line[..end].to_owned());
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        let ring = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        Snapshot {
            lines: ring.lines.iter().cloned().collect(),
            dropped: ring.dropped > 0,
        }
    }
}

static GLOBAL: LazyLock<Arc<LogRing>> = LazyLock::new(|| Arc::new(LogRing::default()));

/// The process's ring (what the `hub` stream shows).
pub(crate) fn global() -> Arc<LogRing> {
    GLOBAL.clone()
}

/// `MakeWriter` for a `fmt` layer: each event's text is split into lines and pushed.
#[derive(Debug, Clone)]
pub(crate) struct RingWriter {
    ring: Arc<LogRing>,
    buf: Vec<u8>,
}

impl RingWriter {
    pub(crate) fn new(ring: Arc<LogRing>) -> RingWriter {
        RingWriter {
            ring,
            buf: Vec::new(),
        }
    }

    fn flush_lines(&mut self, all: bool) {
        while let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=i).collect();
            self.ring
                .push(String::from_utf8_lossy(&line[..line.len() - 1]).as_ref());
        }
        if all && !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            self.ring.push(String::from_utf8_lossy(&rest).as_ref());
        }
    }
}

impl Write for RingWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        self.flush_lines(false);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.flush_lines(true);
        Ok(())
    }
}

impl Drop for RingWriter {
    fn drop(&mut self) {
        self.flush_lines(true);
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RingWriter {
    type Writer = RingWriter;

    fn make_writer(&'a self) -> RingWriter {
        RingWriter::new(self.ring.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines() {
        let ring = Arc::new(LogRing::default());
        {
            let mut w = RingWriter::new(ring.clone());
            for i in 0..CAPACITY + 5 {
                writeln!(w, "line {i}").expect("write");
            }
            write!(w, "partial").expect("write");
        }
        let snap = ring.snapshot();
        assert_eq!(snap.lines.len(), CAPACITY);
        assert!(snap.dropped);
        assert_eq!(snap.lines[0], "line 6");
        assert_eq!(snap.lines[CAPACITY - 1], "partial");
        ring.push(&"é".repeat(MAX_LINE));
        let last = ring.snapshot().lines.pop().expect("line");
        assert!(last.len() <= MAX_LINE && last.starts_with('é'));
    }

    #[test]
    fn a_fmt_layer_writes_into_the_ring() {
        use tracing_subscriber::layer::SubscriberExt;
        let ring = Arc::new(LogRing::default());
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(RingWriter::new(ring.clone())),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target_id = "hub:x", "hello from the hub");
        });
        let snap = ring.snapshot();
        assert_eq!(snap.lines.len(), 1, "{snap:?}");
        assert!(snap.lines[0].contains("hello from the hub"), "{snap:?}");
        assert!(snap.lines[0].contains("target_id=\"hub:x\""), "{snap:?}");
    }
}
