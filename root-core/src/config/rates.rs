//! `[rates]`: how many calls per second a lease, an owner, a tool and an operator may make
//! (GCRA, enforced in `call::rates`), as defaults for every capability profile with a table
//! per profile over them; a lease may carry its own rate (set when it is issued).
//!
//! A rate is a whole number of calls per second (`20`), or per unit (`"20/s"`, `"30/min"`,
//! `"500/h"`); the same number of calls may come at once (the burst), then one per period.
//! Absent: no limit.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::error::ConfigError;

/// `[rates]`.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RatesConfig {
    /// Calls of one lease, across tools.
    pub per_lease: Option<RawRate>,
    /// Calls of one owner (a lease with every lease it minted, its run credentials and a
    /// fleet lease's per-target children), across tools and targets.
    pub per_owner: Option<RawRate>,
    /// Calls of one owner to one tool, by tool id.
    pub tools: BTreeMap<String, RawRate>,
    /// Requests of one operator on the admin routes and the console.
    pub per_operator: Option<RawRate>,
    /// `[rates.profiles.<name>]`: a capability profile's own rates over the defaults above.
    pub profiles: BTreeMap<String, ProfileRates>,
}

/// `[rates.profiles.<name>]`: what is set here replaces the default of the same name; a
/// profile's `tools` table adds to (and for the same tool replaces) the defaults'.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ProfileRates {
    /// Calls of one lease of this profile, across tools.
    pub per_lease: Option<RawRate>,
    /// Calls of one owner of this profile's leases, across tools and targets.
    pub per_owner: Option<RawRate>,
    /// Calls of one owner to one tool, by tool id.
    pub tools: BTreeMap<String, RawRate>,
}

/// A rate as written in the configuration, checked by [`RawRate::rate`].
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(untagged)]
#[schemars(title = "rate (`20`, `\"20/s\"`, `\"30/min\"`, `\"500/h\"`)")]
pub enum RawRate {
    Count(i64),
    Fraction(f64),
    Text(String),
}

/// A checked rate: `calls` per `per`, all of them at once at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    pub calls: u32,
    pub per: Duration,
}

/// The most calls a rate may allow per unit: above it, a limit would limit nothing.
const MAX_CALLS: i64 = 1_000_000;

impl Rate {
    /// The spacing of calls once the burst is spent.
    pub fn period(&self) -> Duration {
        self.per / self.calls
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "min",
            _ => "h",
        };
        write!(f, "{}/{unit}", self.calls)
    }
}

impl RawRate {
    /// The rate, or why `name` holds none.
    pub fn rate(&self, name: &str) -> Result<Rate, ConfigError> {
        let bad = |why: String| ConfigError::Invalid(format!("{name}: {why}"));
        let (count, per) = match self {
            RawRate::Count(n) => (*n, Duration::from_secs(1)),
            RawRate::Fraction(x) => {
                return Err(bad(format!(
                    "{x} is not a whole number of calls; write a slower rate per minute or hour \
                     (\"30/min\", \"500/h\")"
                )));
            }
            RawRate::Text(t) => {
                let (n, unit) = t.trim().split_once('/').ok_or_else(|| {
                    bad(format!(
                        "`{t}` is not a rate (write \"20/s\", \"30/min\" or \"500/h\")"
                    ))
                })?;
                let n: i64 = n.trim().parse().map_err(|_| {
                    bad(format!(
                        "`{t}`: `{}` is not a whole number of calls",
                        n.trim()
                    ))
                })?;
                let per = match unit.trim() {
                    "s" => Duration::from_secs(1),
                    "min" => Duration::from_secs(60),
                    "h" => Duration::from_secs(3600),
                    other => {
                        return Err(bad(format!("`{t}`: unknown unit `{other}` (s, min or h)")));
                    }
                };
                (n, per)
            }
        };
        if !(1..=MAX_CALLS).contains(&count) {
            return Err(bad(format!(
                "{count} calls: a rate must allow between 1 and {MAX_CALLS} calls per unit"
            )));
        }
        Ok(Rate {
            calls: count as u32,
            per,
        })
    }
}

impl RatesConfig {
    /// Checks every rate (names each bad one); profile and tool names are checked against
    /// the catalog when root starts.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let check = |name: String, r: &Option<RawRate>| match r {
            Some(r) => r.rate(&name).map(drop),
            None => Ok(()),
        };
        check("rates.per_lease".into(), &self.per_lease)?;
        check("rates.per_owner".into(), &self.per_owner)?;
        check("rates.per_operator".into(), &self.per_operator)?;
        for (tool, r) in &self.tools {
            r.rate(&format!("rates.tools.\"{tool}\""))?;
        }
        for (profile, p) in &self.profiles {
            let at = format!("rates.profiles.{profile}");
            check(format!("{at}.per_lease"), &p.per_lease)?;
            check(format!("{at}.per_owner"), &p.per_owner)?;
            for (tool, r) in &p.tools {
                r.rate(&format!("{at}.tools.\"{tool}\""))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(toml_text: &str) -> Result<(), String> {
        let cfg: RatesConfig = toml::from_str(toml_text).map_err(|e| e.to_string())?;
        cfg.validate().map_err(|e| e.to_string())
    }

    #[test]
    fn rates_are_whole_calls_per_unit() {
        let r = |v: RawRate| v.rate("x").unwrap();
        assert_eq!(r(RawRate::Count(20)).period(), Duration::from_millis(50));
        let per_min = r(RawRate::Text("30/min".into()));
        assert_eq!(per_min.period(), Duration::from_secs(2));
        assert_eq!(per_min.to_string(), "30/min");
        assert_eq!(r(RawRate::Text(" 500 / h ".into())).calls, 500);
    }

    #[test]
    fn a_bad_rate_is_refused_with_its_setting_named() {
        for (text, want) in [
            ("per_lease = 0", "rates.per_lease: 0 calls"),
            ("per_owner = -5", "rates.per_owner: -5 calls"),
            ("per_lease = 10000000", "rates.per_lease: 10000000 calls"),
            (
                "per_lease = 0.5",
                "rates.per_lease: 0.5 is not a whole number",
            ),
            (
                "per_lease = \"fast\"",
                "rates.per_lease: `fast` is not a rate",
            ),
            (
                "per_operator = \"x/s\"",
                "rates.per_operator: `x/s`: `x` is not",
            ),
            ("per_lease = \"5/day\"", "unknown unit `day`"),
            (
                "[tools]\n\"hub.get_logs\" = 0",
                "rates.tools.\"hub.get_logs\": 0 calls",
            ),
            (
                "[profiles.InfraOpsRead]\nper_owner = \"0/min\"",
                "rates.profiles.InfraOpsRead.per_owner: 0 calls",
            ),
        ] {
            let err = rates(text).expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
        }
        rates("per_lease = 20\nper_owner = \"50/s\"\n[profiles.P.tools]\n\"t\" = \"1/h\"").unwrap();
    }
}
