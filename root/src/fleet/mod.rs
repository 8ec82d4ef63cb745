//! Fleet runs: one governed tool on every target a selector names, under a rollout plan
//! (canaries, a sliding window, an error budget), durable and reported per target.
//!
//! A run freezes its target set when it starts (the ids in order, and their hash), stores
//! itself and each target's part (`store::fleet`), and is driven by one task on the replica
//! that started it ([`execute`]); a restarted root takes up every run left `running` or
//! `paused`. Each target's call goes through the one governed call path under the operator's
//! reader lease for that target (`api::inspect`), so policy, limits, redaction and the audit
//! trail apply to it as to any call: a cordoned target is refused, an offline one is
//! `undeliverable`, never silently missing. The run's own event (`admin.fleet.run`) and every
//! target's call event share the run's trace id (`audit export --trace`, the console).
//!
//! This step serves reads (health checks, status, logs across a fleet). Writes on a fleet
//! (a preview per target, one confirmation bound to the set, execute with per-target
//! idempotency keys) are not served yet and are refused saying so.

pub(crate) mod execute;
pub(crate) mod plan;
pub(crate) mod report;
pub(crate) mod runs;

/// A run's state, as stored.
pub(crate) mod state {
    pub(crate) const RUNNING: &str = "running";
    pub(crate) const PAUSED: &str = "paused";
    pub(crate) const CANCELLED: &str = "cancelled";
    pub(crate) const STOPPED: &str = "stopped";
    pub(crate) const COMPLETED: &str = "completed";
}

/// A target's part, as stored.
pub(crate) mod status {
    pub(crate) const PENDING: &str = "pending";
    pub(crate) const RUNNING: &str = "running";
    pub(crate) const SUCCEEDED: &str = "succeeded";
    pub(crate) const FAILED: &str = "failed";
    pub(crate) const UNDELIVERABLE: &str = "undeliverable";
    pub(crate) const REFUSED: &str = "refused";
    pub(crate) const SKIPPED: &str = "skipped";
    pub(crate) const CANCELLED: &str = "cancelled";

    /// Every status, in the order reports list them.
    pub(crate) const ALL: [&str; 8] = [
        SUCCEEDED,
        FAILED,
        UNDELIVERABLE,
        REFUSED,
        RUNNING,
        PENDING,
        SKIPPED,
        CANCELLED,
    ];

    /// Whether a target in this status counts against the run's error budget.
    pub(crate) fn is_error(status: &str) -> bool {
        matches!(status, FAILED | UNDELIVERABLE | REFUSED)
    }
}
