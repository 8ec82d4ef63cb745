//! Root's own log: tracing output to stderr, plus a bounded in-memory ring of the last lines
//! that `hub.get_logs` with `source: "root_local"` reads (seed "WebUI and Observability
//! Model": log reads say whether they come from the root-hosting machine or the subnet).
//!
//! The ring holds at most [`RING_LINES`] formatted lines (no ANSI colours); older lines are
//! dropped and counted. It is process-wide, like the tracing subscriber that fills it. Each
//! line keeps the managed target it concerns: the event's `target_id` field, else that of
//! the innermost span that records one. A lease reads only its own target's lines
//! ([`LogRing::tail_for`]); lines about no target (root's start, other subsystems) are for
//! operators' own log, never a lease's.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// Lines the ring keeps.
pub(crate) const RING_LINES: usize = 4_000;

/// The field that names the managed target a log line concerns.
pub(crate) const TARGET_FIELD: &str = "target_id";

/// The process's log ring.
pub static RING: LazyLock<LogRing> = LazyLock::new(LogRing::default);

/// One formatted line and the managed target it concerns, if any.
struct Line {
    target_id: Option<String>,
    text: String,
}

/// A bounded ring of formatted log lines.
#[derive(Default)]
pub struct LogRing {
    lines: Mutex<VecDeque<Line>>,
    dropped: AtomicU64,
}

impl LogRing {
    fn push(&self, target_id: Option<String>, text: &str) {
        let Ok(mut lines) = self.lines.lock() else {
            return;
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if lines.len() == RING_LINES {
                lines.pop_front();
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            lines.push_back(Line {
                target_id: target_id.clone(),
                text: line.to_owned(),
            });
        }
    }

    /// The last `n` lines that `keep` maps to `Some` (after its rewrite, e.g. redaction and
    /// a filter), oldest first, and whether more matched than were returned. Every line, of
    /// every target: for root's own use (tests, operators), never for a lease.
    pub fn tail(&self, n: usize, keep: impl FnMut(&str) -> Option<String>) -> (Vec<String>, bool) {
        self.tail_where(n, |_| true, keep)
    }

    /// [`LogRing::tail`] over the lines that concern `target_id` only.
    pub fn tail_for(
        &self,
        target_id: &str,
        n: usize,
        keep: impl FnMut(&str) -> Option<String>,
    ) -> (Vec<String>, bool) {
        self.tail_where(n, |t| t == Some(target_id), keep)
    }

    fn tail_where(
        &self,
        n: usize,
        concerns: impl Fn(Option<&str>) -> bool,
        mut keep: impl FnMut(&str) -> Option<String>,
    ) -> (Vec<String>, bool) {
        let Ok(lines) = self.lines.lock() else {
            return (Vec::new(), false);
        };
        let mut out: Vec<String> = Vec::with_capacity(n.min(lines.len()));
        let mut truncated = false;
        for line in lines.iter().rev() {
            if !concerns(line.target_id.as_deref()) {
                continue;
            }
            let Some(line) = keep(&line.text) else {
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
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Formats an event's fields as the fmt layer does (`message`, then ` name=value`), and
/// picks out [`TARGET_FIELD`].
#[derive(Default)]
struct Fields {
    message: String,
    rest: String,
    target_id: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == TARGET_FIELD {
            self.target_id = Some(value.to_owned());
        }
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.rest, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
            return;
        }
        let text = format!("{value:?}");
        if field.name() == TARGET_FIELD {
            self.target_id = Some(text.trim_matches('"').to_owned());
        }
        let _ = write!(self.rest, " {}={text}", field.name());
    }
}

/// A span's [`TARGET_FIELD`], kept in its extensions.
struct SpanTarget(String);

/// The tracing layer that fills [`RING`].
pub(crate) struct RingLayer;

impl<S> tracing_subscriber::Layer<S> for RingLayer
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let (Some(t), Some(span)) = (fields.target_id, ctx.span(id)) {
            span.extensions_mut().insert(SpanTarget(t));
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let target_id = fields.target_id.or_else(|| {
            ctx.event_scope(event)?
                .find_map(|span| span.extensions().get::<SpanTarget>().map(|t| t.0.clone()))
        });
        let meta = event.metadata();
        let at = mcp_shared::time::format(mcp_shared::time::now());
        let text = format!(
            "{at} {:>5} {}: {}{}",
            meta.level(),
            meta.target(),
            fields.message,
            fields.rest
        );
        RING.push(target_id, &text);
    }
}

/// The payload-logging caps as a filter layer.
pub(crate) type PayloadCaps =
    tracing_subscriber::filter::FilterFn<fn(&tracing::Metadata<'_>) -> bool>;

/// The payload-logging caps ([`mcp_shared::logging`]) as a global filter: it only ever
/// removes events (tungstenite above `debug`, rmcp above `info`), whatever the other filter
/// enables.
pub(crate) fn payload_caps() -> PayloadCaps {
    tracing_subscriber::filter::filter_fn(mcp_shared::logging::metadata_within_payload_caps)
}

/// Installs the process's subscriber: `RUST_LOG` if set and valid, else `default_filter`,
/// under [`payload_caps`], over the ring, and over stderr when `stderr` is set. Does nothing
/// if one is installed.
pub fn init(default_filter: &str, stderr: bool) {
    init_with(default_filter, stderr, None);
}

/// [`init`], with OpenTelemetry's spans exported through `otel` (and enabled in the filter).
pub fn init_with(default_filter: &str, stderr: bool, otel: Option<&mcp_shared::otel::Otel>) {
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| default_filter.into());
    if otel.is_some()
        && let Ok(directive) = mcp_shared::otel::Otel::directive().parse()
    {
        filter = filter.add_directive(directive);
    }
    let err = stderr.then(|| tracing_subscriber::fmt::layer().with_writer(std::io::stderr));
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(payload_caps())
        .with(RingLayer)
        .with(err)
        .with(otel.map(|o| o.layer()))
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
            ring.push(None, &format!("line {i}\n"));
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

    #[test]
    fn a_targets_lines_are_the_ones_that_name_it_or_run_in_its_span() {
        let subscriber = tracing_subscriber::registry().with(RingLayer);
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target_id = "hub:ring-a", "alpha connected");
            tracing::info!(target_id = %"hub:ring-b", "beta connected");
            tracing::info!("no target at all ring-test");
            let span = tracing::info_span!("call", target_id = "hub:ring-a");
            span.in_scope(|| tracing::warn!(session = "s1", "slow call ring-test"));
        });
        let mine = |t| {
            RING.tail_for(t, 100, |l| l.contains("ring").then(|| l.to_owned()))
                .0
        };
        let a = mine("hub:ring-a");
        assert_eq!(a.len(), 2, "{a:?}");
        assert!(a[0].contains("INFO") && a[0].contains("alpha connected target_id=hub:ring-a"));
        assert!(a[1].contains("WARN") && a[1].contains("slow call ring-test session=s1"));
        let b = mine("hub:ring-b");
        assert_eq!(b.len(), 1, "{b:?}");
        assert!(b[0].contains("beta connected"));
        let all = RING
            .tail(100, |l| l.contains("ring-test").then(|| l.to_owned()))
            .0;
        assert_eq!(all.len(), 2, "{all:?}");
    }
}
