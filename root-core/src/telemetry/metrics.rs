//! Prometheus metrics, served as text at `/metrics` (prefix `mcp_root_`): calls and latency
//! by tool and status, denials and errors by code, per target (connection state, reconnects,
//! calls in flight, routed latency), leases by profile, audit commits and their latency, and
//! whether the audit trail can be written. Labels are bounded: tool ids of loaded contracts
//! (`unknown` otherwise), error codes, enrolled targets, configured profiles; never a lease,
//! call or event id. `config/grafana/` and `config/prometheus/` are built on these names
//! (a test checks that every metric they name exists).

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
pub(crate) struct KindLabel {
    pub(crate) kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabel {
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetLabel {
    pub target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProfileLabel {
    pub profile: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RateLabels {
    /// The caller's capability profile (`operator` for an operator's requests).
    pub profile: String,
    /// `lease`, `owner`, `tool` or `operator`.
    pub scope: String,
}

/// Per managed target: one series each per enrolled target.
pub struct TargetMetrics {
    /// 1 while the target's hub is connected (to this replica or another of its zone); set
    /// from the target directory at each scrape.
    pub connected: Family<TargetLabel, Gauge>,
    /// Connections of a target after its first one since this root started.
    reconnects: Family<TargetLabel, Counter>,
    seen: dashmap::DashSet<String>,
    /// Routed calls waiting for their hub's answer.
    inflight: Family<TargetLabel, Gauge>,
    /// From handing a call to the hub's link to its answer (or its end).
    latency: Family<TargetLabel, Histogram, fn() -> Histogram>,
}

impl TargetMetrics {
    /// A hub of `target` connected here.
    pub fn connected_now(&self, target: &str) {
        if !self.seen.insert(target.to_owned()) {
            self.reconnects
                .get_or_create(&TargetLabel {
                    target: target.into(),
                })
                .inc();
        }
    }

    /// A call routed to `target` starts: in flight until the guard is dropped, which also
    /// observes its latency.
    pub fn routing(&self, target: &str) -> Routing {
        let label = TargetLabel {
            target: target.into(),
        };
        let inflight = self.inflight.get_or_create(&label).clone();
        inflight.inc();
        Routing {
            inflight,
            latency: self.latency.get_or_create(&label).clone(),
            started: std::time::Instant::now(),
        }
    }
}

/// A routed call in flight (see [`TargetMetrics::routing`]).
pub struct Routing {
    inflight: Gauge,
    latency: Histogram,
    started: std::time::Instant,
}

impl Drop for Routing {
    fn drop(&mut self) {
        self.inflight.dec();
        self.latency.observe(self.started.elapsed().as_secs_f64());
    }
}

/// The listener's connection counters (shared with every connection it serves).
#[derive(Debug, Default)]
pub struct ConnMetrics {
    pub open: Gauge,
    timeouts: Family<KindLabel, Counter>,
    refused: Family<KindLabel, Counter>,
}

impl ConnMetrics {
    /// A connection bound fired: `header`, `body`, `write_stall` or `handshake`.
    pub fn timeout(&self, kind: &str) {
        self.timeouts
            .get_or_create(&KindLabel { kind: kind.into() })
            .inc();
    }

    /// A request refused at a full budget: `connections` (client connections) or
    /// `hub_links`.
    pub fn refused(&self, kind: &str) {
        self.refused
            .get_or_create(&KindLabel { kind: kind.into() })
            .inc();
    }
}

/// A latency histogram of the buckets every latency metric here uses.
pub(crate) fn latency_histogram() -> Histogram {
    // 100 µs .. ~3.3 s
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

pub struct Metrics {
    registry: Registry,
    pub calls: Family<CallLabels, Counter>,
    pub latency: Family<ToolLabel, Histogram, fn() -> Histogram>,
    pub denials: Family<ReasonLabel, Counter>,
    /// Calls and operator requests refused past a rate, by profile and scope.
    pub rate_limited: Family<RateLabels, Counter>,
    /// Calls that ended in an error (not a denial), by error code.
    pub errors: Family<CodeLabel, Counter>,
    pub active_leases: Gauge,
    /// Active leases by capability profile (set at each scrape).
    pub leases: Family<ProfileLabel, Gauge>,
    pub targets: TargetMetrics,
    pub connected_targets: Gauge,
    pub unauthenticated: Counter,
    /// 401s not recorded as their own audit event (past the per-address limit); the next
    /// event of that address counts them.
    pub unauthenticated_unrecorded: Counter,
    /// 1 while the audit trail can be written, 0 while calls are refused for it.
    pub audit_available: Gauge,
    /// Audit batches committed and the rows they held: their ratio is the group-commit batch
    /// size (calls share a commit when they end while the previous one is being written).
    pub audit_commits: Counter,
    pub audit_rows: Counter,
    /// How long a batch took to commit durably (retries included).
    pub audit_commit_latency: Histogram,
    /// Hub upgrade requests refused before the upgrade, by reason (`missing`, `unknown`,
    /// `throttled`).
    pub hub_door_refusals: Family<ReasonLabel, Counter>,
    /// OAuth client registrations by outcome: `registered`, `rate_limited` (429),
    /// `evicted` (never-used registrations dropped for new ones), `full` (503).
    pub oauth_registrations: Family<OutcomeLabel, Counter>,
    pub connections: std::sync::Arc<ConnMetrics>,
    /// Each export sink (`audit::sinks`): events behind the trail's head, delivered, failed
    /// sends, and whether it blocks calls (`fail_closed`, too far behind).
    pub sink_lag: Family<SinkLabel, Gauge>,
    pub sink_delivered: Family<SinkLabel, Counter>,
    pub sink_errors: Family<SinkLabel, Counter>,
    pub sink_blocking: Family<SinkLabel, Gauge>,
    /// Each witness (`audit::witness::submit`): the largest checkpoint it cosigned, and 1 while
    /// it says it saw another history of the trail.
    pub witness_cosigned: Family<WitnessLabel, Gauge>,
    pub witness_alarm: Family<WitnessLabel, Gauge>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WitnessLabel {
    pub witness: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SinkLabel {
    pub sink: String,
}

impl Metrics {
    /// A call or an operator's request refused past a rate (`scope`: lease, owner, tool,
    /// operator).
    pub fn rate_limited(&self, profile: &str, scope: &str) {
        self.rate_limited
            .get_or_create(&RateLabels {
                profile: profile.into(),
                scope: scope.into(),
            })
            .inc();
    }

    fn sink(name: &str) -> SinkLabel {
        SinkLabel {
            sink: name.to_owned(),
        }
    }

    pub fn sink_lag(&self, name: &str, lag: u64) {
        self.sink_lag
            .get_or_create(&Self::sink(name))
            .set(i64::try_from(lag).unwrap_or(i64::MAX));
    }

    pub fn sink_delivered(&self, name: &str, n: u64) {
        self.sink_delivered
            .get_or_create(&Self::sink(name))
            .inc_by(n);
    }

    pub fn sink_error(&self, name: &str) {
        self.sink_errors.get_or_create(&Self::sink(name)).inc();
    }

    /// Sink `name`'s `(lag, delivered, errors, blocking)` as this replica counts them.
    pub fn sink_counts(&self, name: &str) -> (u64, u64, u64, bool) {
        let l = Self::sink(name);
        (
            self.sink_lag.get_or_create(&l).get().max(0) as u64,
            self.sink_delivered.get_or_create(&l).get(),
            self.sink_errors.get_or_create(&l).get(),
            self.sink_blocking.get_or_create(&l).get() != 0,
        )
    }

    /// Witness `name` cosigned up to `size`; `alarm` while it says it saw another history.
    pub fn witness(&self, name: &str, size: u64, alarm: bool) {
        let l = WitnessLabel {
            witness: name.to_owned(),
        };
        self.witness_cosigned
            .get_or_create(&l)
            .set(i64::try_from(size).unwrap_or(i64::MAX));
        self.witness_alarm.get_or_create(&l).set(i64::from(alarm));
    }

    pub fn sink_blocking(&self, name: &str, blocking: bool) {
        self.sink_blocking
            .get_or_create(&Self::sink(name))
            .set(i64::from(blocking));
    }
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
        let unauthenticated_unrecorded = Counter::default();
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
        let rate_limited = Family::<RateLabels, Counter>::default();
        registry.register(
            "rate_limited",
            "Calls and operator requests refused past a rate, by capability profile and scope",
            rate_limited.clone(),
        );
        let errors = Family::<CodeLabel, Counter>::default();
        registry.register(
            "call_errors",
            "Calls that failed (not denied), by error code",
            errors.clone(),
        );
        let leases = Family::<ProfileLabel, Gauge>::default();
        registry.register(
            "leases",
            "MCP session leases active now, by capability profile",
            leases.clone(),
        );
        let targets = TargetMetrics {
            connected: Family::default(),
            reconnects: Family::default(),
            seen: Default::default(),
            inflight: Family::default(),
            latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
        };
        registry.register(
            "target_connected",
            "1 while the target's hub is connected to the zone, 0 while it is offline",
            targets.connected.clone(),
        );
        registry.register(
            "target_reconnects",
            "Connections of a target's hub after its first since this root started",
            targets.reconnects.clone(),
        );
        registry.register(
            "target_inflight_calls",
            "Calls routed to the target waiting for its answer",
            targets.inflight.clone(),
        );
        registry.register(
            "target_routed_latency_seconds",
            "Routed call latency per target, from the hub link to its answer",
            targets.latency.clone(),
        );
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
            "unauthenticated_unrecorded",
            "Requests refused with 401 past the per-address audit limit (counted in the address's next event)",
            unauthenticated_unrecorded.clone(),
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
        let audit_commit_latency = latency_histogram();
        registry.register(
            "audit_commit_latency_seconds",
            "Time to commit one audit batch durably (retries included)",
            audit_commit_latency.clone(),
        );
        let hub_door_refusals = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "hub_door_refusals",
            "Hub WebSocket upgrades refused before the upgrade: missing (no hub token), \
             unknown (a token no enrolment has), throttled (too many refusals from the address)",
            hub_door_refusals.clone(),
        );
        let oauth_registrations = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "oauth_registrations",
            "OAuth client registrations: registered, rate_limited (429, too many from one \
             address), evicted (registrations that never signed in, dropped for new ones), full \
             (503, every registration kept has signed in)",
            oauth_registrations.clone(),
        );
        let connections = std::sync::Arc::new(ConnMetrics::default());
        registry.register(
            "connections_open",
            "Sockets being served: client connections (at most limits.max_connections, plus \
             a few read past it for probes) and hub links (at most limits.max_hub_links)",
            connections.open.clone(),
        );
        registry.register(
            "connections_refused",
            "Requests refused with 503 at a full budget: connections (client connections past \
             limits.max_connections; probes are still answered), hub_links (hubs past \
             limits.max_hub_links)",
            connections.refused.clone(),
        );
        registry.register(
            "connection_timeouts",
            "Connections ended by a bound: header (request head), body (request body stalled), \
             write_stall (the client read nothing), handshake (TLS)",
            connections.timeouts.clone(),
        );
        let sink_lag = Family::<SinkLabel, Gauge>::default();
        registry.register(
            "audit_sink_lag_events",
            "Events of the audit trail an export sink has not delivered yet",
            sink_lag.clone(),
        );
        let sink_delivered = Family::<SinkLabel, Counter>::default();
        registry.register(
            "audit_sink_delivered",
            "Events an export sink delivered (at least once; a redelivery counts again)",
            sink_delivered.clone(),
        );
        let sink_errors = Family::<SinkLabel, Counter>::default();
        registry.register(
            "audit_sink_errors",
            "Failed sends to an export sink (each retried)",
            sink_errors.clone(),
        );
        let sink_blocking = Family::<SinkLabel, Gauge>::default();
        registry.register(
            "audit_sink_blocking",
            "1 while a fail_closed export sink is past max_lag and new calls are refused",
            sink_blocking.clone(),
        );
        let witness_cosigned = Family::<WitnessLabel, Gauge>::default();
        registry.register(
            "audit_witness_cosigned_size",
            "The largest checkpoint (tree size) a witness has cosigned",
            witness_cosigned.clone(),
        );
        let witness_alarm = Family::<WitnessLabel, Gauge>::default();
        registry.register(
            "audit_witness_alarm",
            "1 while a witness refuses this trail's checkpoints because it saw another history",
            witness_alarm.clone(),
        );
        Metrics {
            registry,
            witness_cosigned,
            witness_alarm,
            sink_lag,
            sink_delivered,
            sink_errors,
            sink_blocking,
            calls,
            latency,
            denials,
            rate_limited,
            errors,
            active_leases,
            leases,
            targets,
            connected_targets,
            unauthenticated,
            unauthenticated_unrecorded,
            audit_available,
            audit_commits,
            audit_rows,
            audit_commit_latency,
            hub_door_refusals,
            oauth_registrations,
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
