//! A fleet run's rollout plan: how many canaries go first, how many targets run at once
//! (`max_concurrency`) and how many may fail before no new target starts (`max_errors`),
//! each a count or a percentage of the run's targets, and a pause after the canaries.

use serde::{Deserialize, Serialize};

/// Most canaries a plan names.
pub(crate) const MAX_CANARY: usize = 100;
/// Most targets a run calls at once.
pub(crate) const MAX_WINDOW: u64 = 1000;
/// Longest pause after the canaries.
pub(crate) const MAX_PAUSE_MS: u64 = 600_000;

/// A number of targets, or a percentage of the run's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Amount {
    Count(u64),
    Percent(u8),
}

impl Amount {
    /// The count this amount is out of `total` targets: a percentage rounded up for a window
    /// (`at_least_one`), down for an error budget.
    pub(crate) fn of(self, total: usize, at_least_one: bool) -> usize {
        let n = match self {
            Amount::Count(n) => usize::try_from(n).unwrap_or(usize::MAX),
            Amount::Percent(p) if at_least_one => (total * p as usize).div_ceil(100),
            Amount::Percent(p) => total * p as usize / 100,
        };
        if at_least_one { n.max(1) } else { n }
    }
}

impl Serialize for Amount {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Amount::Count(n) => s.serialize_u64(*n),
            Amount::Percent(p) => s.serialize_str(&format!("{p}%")),
        }
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Amount, D::Error> {
        use serde::de::Error;
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Number(n) => n
                .as_u64()
                .map(Amount::Count)
                .ok_or_else(|| D::Error::custom(format!("`{n}` is not a count of targets"))),
            serde_json::Value::String(s) => match s.strip_suffix('%') {
                Some(p) => match p.trim().parse::<u8>() {
                    Ok(p) if (1..=100).contains(&p) => Ok(Amount::Percent(p)),
                    _ => Err(D::Error::custom(format!(
                        "`{s}` is not a percentage from 1% to 100%"
                    ))),
                },
                None => s.trim().parse::<u64>().map(Amount::Count).map_err(|_| {
                    D::Error::custom(format!(
                        "`{s}` is neither a count nor a percentage like 20%"
                    ))
                }),
            },
            other => Err(D::Error::custom(format!(
                "`{other}` is neither a count nor a percentage like \"20%\""
            ))),
        }
    }
}

/// How a run goes through its targets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Plan {
    /// Targets run first, on their own; the rest start only once they finished.
    #[serde(default)]
    pub(crate) canary: usize,
    /// Targets running at once after the canaries (a sliding window).
    #[serde(default = "default_window")]
    pub(crate) max_concurrency: Amount,
    /// Targets that may fail (failed, undeliverable, refused) before no new one starts;
    /// the ones running then finish.
    #[serde(default = "no_errors")]
    pub(crate) max_errors: Amount,
    /// A pause after the canaries finished, before the others start.
    #[serde(default)]
    pub(crate) pause_after_canary_ms: u64,
}

fn default_window() -> Amount {
    Amount::Count(10)
}

fn no_errors() -> Amount {
    Amount::Count(0)
}

impl Default for Plan {
    fn default() -> Plan {
        Plan {
            canary: 0,
            max_concurrency: default_window(),
            max_errors: no_errors(),
            pause_after_canary_ms: 0,
        }
    }
}

/// Why a plan is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PlanError {
    #[error("canary must be at most {MAX_CANARY}, not {0}")]
    Canary(usize),
    #[error("max_concurrency must be 1..{MAX_WINDOW} targets or 1%..100%, not {0}")]
    Window(u64),
    #[error("pause_after_canary_ms must be at most {MAX_PAUSE_MS} (10 minutes), not {0}")]
    Pause(u64),
}

impl Plan {
    pub(crate) fn check(&self) -> Result<(), PlanError> {
        if self.canary > MAX_CANARY {
            return Err(PlanError::Canary(self.canary));
        }
        if let Amount::Count(n) = self.max_concurrency
            && !(1..=MAX_WINDOW).contains(&n)
        {
            return Err(PlanError::Window(n));
        }
        if self.pause_after_canary_ms > MAX_PAUSE_MS {
            return Err(PlanError::Pause(self.pause_after_canary_ms));
        }
        Ok(())
    }

    /// The plan as it applies to `total` targets: canaries, window and error budget.
    pub(crate) fn resolve(&self, total: usize) -> (usize, usize, usize) {
        (
            self.canary.min(total),
            self.max_concurrency.of(total, true),
            self.max_errors.of(total, false),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_as_counts_or_percentages() {
        let plan: Plan = serde_json::from_value(serde_json::json!({
            "canary": 1, "max_concurrency": "10%", "max_errors": 2
        }))
        .unwrap();
        assert_eq!(plan.resolve(500), (1, 50, 2));
        assert_eq!(plan.resolve(5), (1, 1, 2));
        let pct: Plan = serde_json::from_value(serde_json::json!({ "max_errors": "2%" })).unwrap();
        assert_eq!(pct.resolve(500), (0, 10, 10));
        assert_eq!(pct.resolve(10), (0, 10, 0));
        for bad in [
            serde_json::json!({ "max_errors": "0%" }),
            serde_json::json!({ "max_errors": "101%" }),
            serde_json::json!({ "max_errors": -1 }),
            serde_json::json!({ "max_errors": "lots" }),
            serde_json::json!({ "window": 5 }),
        ] {
            assert!(
                serde_json::from_value::<Plan>(bad.clone()).is_err(),
                "{bad}"
            );
        }
        let big = Plan {
            max_concurrency: Amount::Count(0),
            ..Plan::default()
        };
        assert_eq!(big.check(), Err(PlanError::Window(0)));
        assert_eq!(
            serde_json::to_value(Plan {
                max_errors: Amount::Percent(3),
                ..Plan::default()
            })
            .unwrap()["max_errors"],
            "3%"
        );
    }
}
