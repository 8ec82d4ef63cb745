//! Prometheus metrics: calls by tool and status, call latency, denials by reason, active
//! leases, connected targets and whether the audit trail can be written. Served as text at
//! `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    pub tool: String,
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolLabel {
    pub tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

/// The listener's connection counters (shared with every connection it serves).
#[derive(Debug, Default)]
pub struct ConnMetrics {
    pub open: Gauge,
    timeouts: Family<KindLabel, Counter>,
}

impl ConnMetrics {
    /// A connection bound fired: `header`, `body`, `write_stall` or `handshake`.
    pub fn timeout(&self, kind: &str) {
        self.timeouts
            .get_or_create(&KindLabel { kind: kind.into() })
            .inc();
    }
}

fn latency_histogram() -> Histogram {
    // 100 µs .. ~3.3 s
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

pub struct Metrics {
    registry: Registry,
    pub calls: Family<CallLabels, Counter>,
    pub latency: Family<ToolLabel, Histogram, fn() -> Histogram>,
    pub denials: Family<ReasonLabel, Counter>,
    pub active_leases: Gauge,
    pub connected_targets: Gauge,
    pub unauthenticated: Counter,
    /// 1 while the audit trail can be written, 0 while calls are refused for it.
    pub audit_available: Gauge,
    /// Audit batches committed and the rows they held: their ratio is the group-commit batch
    /// size (calls share a commit when they end while the previous one is being written).
    pub audit_commits: Counter,
    pub audit_rows: Counter,
    /// Hub upgrade requests refused before the upgrade, by reason (`missing`, `unknown`,
    /// `throttled`).
    pub hub_door_refusals: Family<ReasonLabel, Counter>,
    pub connections: std::sync::Arc<ConnMetrics>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("mcp_root");
        let calls = Family::<CallLabels, Counter>::default();
        let latency = Family::<ToolLabel, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let denials = Family::<ReasonLabel, Counter>::default();
        let active_leases = Gauge::default();
        let connected_targets = Gauge::default();
        let unauthenticated = Counter::default();
        let audit_available = Gauge::default();
        audit_available.set(1);
        registry.register(
            "calls",
            "Tool calls by tool and status (ok, error, denied)",
            calls.clone(),
        );
        registry.register(
            "call_latency_seconds",
            "Tool call latency, including the durable audit write",
            latency.clone(),
        );
        registry.register("denials", "Denied calls by reason code", denials.clone());
        registry.register(
            "active_leases",
            "MCP session leases active now",
            active_leases.clone(),
        );
        registry.register(
            "connected_targets",
            "Managed targets with a live router session",
            connected_targets.clone(),
        );
        registry.register(
            "unauthenticated_requests",
            "Requests refused with 401",
            unauthenticated.clone(),
        );
        registry.register(
            "audit_available",
            "1 while the audit trail can be written; 0 while every call is refused for it",
            audit_available.clone(),
        );
        let audit_commits = Counter::default();
        let audit_rows = Counter::default();
        registry.register(
            "audit_commits",
            "Audit batches committed (one transaction each)",
            audit_commits.clone(),
        );
        registry.register(
            "audit_rows",
            "Audit events committed; divided by audit_commits, the mean batch size",
            audit_rows.clone(),
        );
        let hub_door_refusals = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "hub_door_refusals",
            "Hub WebSocket upgrades refused before the upgrade: missing (no hub token), \
             unknown (a token no enrolment has), throttled (too many refusals from the address)",
            hub_door_refusals.clone(),
        );
        let connections = std::sync::Arc::new(ConnMetrics::default());
        registry.register(
            "connections_open",
            "Connections being served (at most limits.max_connections)",
            connections.open.clone(),
        );
        registry.register(
            "connection_timeouts",
            "Connections ended by a bound: header (request head), body (request body stalled), \
             write_stall (the client read nothing), handshake (TLS)",
            connections.timeouts.clone(),
        );
        Metrics {
            registry,
            calls,
            latency,
            denials,
            active_leases,
            connected_targets,
            unauthenticated,
            audit_available,
            audit_commits,
            audit_rows,
            hub_door_refusals,
            connections,
        }
    }
}

impl Metrics {
    /// The exposition text.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
