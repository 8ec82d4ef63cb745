//! The fleet model's vocabulary: its targets (simulated hubs whose calls wait on command),
//! the selectors and plans runs use, and the steps a fleet history is made of (kept in
//! `model/fleet-histories.json` in their JSON form).

use serde::{Deserialize, Serialize};

/// How many simulated targets the fleet world enrols (`fl-00000` …), all in `test`.
pub const SIMS: usize = 6;

/// The read fleet runs make, and the write (the simulator's test run).
pub const READ: &str = "hub.get_status";
pub const WRITE: &str = "hub.run_allowed_tests";

/// Target `t`'s id.
pub fn sim_id(t: usize) -> String {
    format!("fl-{t:05}")
}

/// A run's selector: every simulated target, those still in `test`, or those not labelled
/// `out`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sel {
    All,
    Test,
    NotOut,
}

impl Sel {
    pub fn selector(self) -> &'static str {
        match self {
            Sel::All => "id=fl-*",
            Sel::Test => "id=fl-*,env=test",
            Sel::NotOut => "id=fl-*,!label:out",
        }
    }
}

/// A count of targets, or a percentage of a run's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Amount {
    Count(u8),
    Percent(u8),
}

impl Amount {
    pub fn json(self) -> serde_json::Value {
        match self {
            Amount::Count(n) => serde_json::json!(n),
            Amount::Percent(p) => serde_json::json!(format!("{p}%")),
        }
    }
}

/// A rollout plan: canaries, window, error budget, and a short pause after the canaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub canary: u8,
    pub window: Amount,
    pub budget: Amount,
    pub pause: bool,
}

impl Plan {
    pub fn json(self) -> serde_json::Value {
        let mut plan = serde_json::json!({
            "canary": self.canary,
            "max_concurrency": self.window.json(),
            "max_errors": self.budget.json(),
        });
        if self.pause {
            plan["pause_after_canary_ms"] = serde_json::json!(PAUSE_MS);
        }
        plan
    }
}

/// The pause after the canaries a plan with `pause` names.
pub const PAUSE_MS: u64 = 300;

/// Who starts a run: the bootstrap admin, a named operator `op<n>`, or an agent holding a
/// fleet lease on the run's selector that operator `by` issued (the admin when `None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Who {
    Admin,
    Operator(u8),
    Agent { by: Option<u8> },
}

/// One step of a fleet history. Runs go one at a time: a run starts when none is open.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum FleetStep {
    /// A fleet read, or a write (previewed, then confirmed), by `who` over `selector` with
    /// `plan`.
    Start {
        write: bool,
        who: Who,
        selector: Sel,
        plan: Plan,
    },
    /// The hub of the `nth` target running (mod how many run) lets its calls go: answered, or
    /// failed.
    Settle {
        nth: u8,
        fail: bool,
    },
    Cordon {
        target: usize,
        on: bool,
    },
    /// Retired for good (its hub's connection closed).
    Retire {
        target: usize,
    },
    /// Moved to `production` (its hub, configured for `test`, is refused from then on).
    Move {
        target: usize,
    },
    /// Labelled `out` (or the label removed).
    Label {
        target: usize,
        out: bool,
    },
    /// Narrowed: both tools denied (or the narrowing cleared).
    Narrow {
        target: usize,
        on: bool,
    },
    AddOperator {
        name: u8,
    },
    /// With `cascade`, every lease the operator issued ends too (an agent's fleet lease).
    RevokeOperator {
        name: u8,
        cascade: bool,
    },
    /// The open run's fleet lease revoked (an agent's run).
    RevokeLease,
    Pause,
    Resume,
    Cancel,
    /// A root replica SIGKILLed and started again on its data.
    RestartRoot {
        replica: u8,
    },
}

/// How many named operators fleet histories use.
pub const OPERATORS: u8 = 2;
