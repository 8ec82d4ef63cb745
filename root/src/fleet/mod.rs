//! Fleet runs: one governed tool on every target a selector names, under a rollout plan
//! (canaries, a sliding window, an error budget), durable and reported per target.
//!
//! A run freezes its target set when it starts (the ids in order, and their hash), stores
//! itself and each target's part (`store::fleet`), and is driven by one task on the replica
//! that started it ([`execute`]); a restarted root takes up every run left `running` or
//! `paused`. Each target's call goes through the one governed call path under a lease the run
//! issues for that target ([`authority`]), so policy, limits, redaction and the audit trail
//! apply to it as to any call: a cordoned target is `excluded` with its reason, an offline
//! one is `undeliverable`, never silently missing. The run's authority is its selector at
//! the time of each call: a target that left it since the set was frozen is `refused`. The run's own event (`admin.fleet.run`), its
//! leases' and every target's call event share the run's trace id (`audit export --run`).
//!
//! Reads start at once. Writes go preview → one confirmation → execute ([`preview`]): the
//! preview freezes the set, runs each target's dry run and answers one confirmation token
//! bound to the set's hash, the tool, the arguments' hash, the operator and a deadline; the
//! execute redeems it once, refused if the set changed since. Each target's write carries the
//! per-target idempotency key [`authority::idempotency_key`], which names the confirmed write,
//! so neither a resume nor a second run of one confirmation executes a target twice.

pub(crate) mod agents;
pub(crate) mod arguments;
pub(crate) mod authority;
pub(crate) mod execute;
pub(crate) mod plan;
pub(crate) mod preview;
pub(crate) mod read;
pub(crate) mod report;
pub(crate) mod runs;
pub(crate) mod set;

/// A run's state, as stored.
pub(crate) mod state {
    /// A write run awaiting its confirmation.
    pub(crate) const PREVIEWED: &str = "previewed";
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
    /// A target that does not take part (the code says why): a write's that could not at its
    /// preview, or one an operator cordoned, retired or narrowed by the time its turn came
    /// (a deliberate state, not an error).
    pub(crate) const EXCLUDED: &str = "excluded";

    /// Every status, in the order reports list them.
    pub(crate) const ALL: [&str; 9] = [
        SUCCEEDED,
        FAILED,
        UNDELIVERABLE,
        REFUSED,
        RUNNING,
        PENDING,
        SKIPPED,
        CANCELLED,
        EXCLUDED,
    ];

    /// Whether a target in this status counts against the run's error budget.
    pub(crate) fn is_error(status: &str) -> bool {
        matches!(status, FAILED | UNDELIVERABLE | REFUSED)
    }
}
