//! Rates: how many calls per second a lease, an owner, an owner on one tool and an operator
//! may make, as `[rates]` configures them per capability profile (a lease may carry its own
//! per-lease rate). Past a rate the call is refused at once with `rate_limited` and the time
//! until it would be allowed (`retry_after_ms`; REST answers 429 with `Retry-After`), and
//! counted per profile and scope in `/metrics`.
//!
//! Each distinct rate has one keyed GCRA limiter (`governor`), whose keys are the leases,
//! owners and operators it applies to, so a rate costs one map lookup per call and nothing
//! when none is configured. A call checks its scopes from the narrowest (the owner on the
//! tool, the lease, the owner) and stops at the first that refuses, so a call refused for
//! one tool spends nothing of the lease's or the owner's rate; the scopes before the one
//! that refused have counted it (GCRA has no look without taking).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::time::Duration;

use dashmap::DashMap;
use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use mcp_shared::error::{ErrorCode, ToolError};
use serde_json::json;

use crate::config::{ConfigError, Rate, RatesConfig, RawRate};

/// What applies to the calls of one capability profile.
#[derive(Debug, Default, Clone)]
struct ProfileRates {
    per_lease: Option<Rate>,
    per_owner: Option<Rate>,
    tools: HashMap<String, Rate>,
}

/// A call refused past a rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limited {
    /// `lease`, `owner`, `tool` or `operator`.
    pub(crate) scope: &'static str,
    pub(crate) rate: Rate,
    /// How long until the call would be allowed.
    pub(crate) retry_after: Duration,
}

impl Limited {
    /// Whole milliseconds, at least 1.
    pub(crate) fn retry_after_ms(&self) -> u64 {
        (self.retry_after.as_millis() as u64).max(1)
    }

    /// The normalized error: `rate_limited`, with the scope, the rate and `retry_after_ms`.
    pub(crate) fn error(&self) -> ToolError {
        ToolError::new(
            ErrorCode::RateLimited,
            format!(
                "rate limit reached ({} rate {}); retry in {} ms",
                self.scope,
                self.rate,
                self.retry_after_ms()
            ),
        )
        .with_details(json!({
            "scope": self.scope,
            "rate": self.rate.to_string(),
            "retry_after_ms": self.retry_after_ms(),
        }))
    }
}

/// The rates root enforces (see the module's header).
pub(crate) struct Rates {
    profiles: HashMap<String, ProfileRates>,
    /// For profiles without a table of their own.
    defaults: ProfileRates,
    per_operator: Option<Rate>,
    limiters: DashMap<Rate, DefaultKeyedRateLimiter<String>>,
}

impl Rates {
    /// Checks `cfg` against the profiles and tools root knows (an unknown name is refused:
    /// it would limit nothing).
    pub(crate) fn new(
        cfg: &RatesConfig,
        profiles: &[&str],
        tools: &[&str],
    ) -> Result<Rates, ConfigError> {
        let rate = |name: &str, r: &Option<RawRate>| r.as_ref().map(|r| r.rate(name)).transpose();
        let tools_of = |at: &str, t: &std::collections::BTreeMap<String, RawRate>| {
            t.iter()
                .map(|(tool, r)| {
                    if !tools.contains(&tool.as_str()) {
                        return Err(ConfigError::Invalid(format!(
                            "{at}.tools: no tool is named `{tool}`"
                        )));
                    }
                    Ok((tool.clone(), r.rate(&format!("{at}.tools.\"{tool}\""))?))
                })
                .collect::<Result<HashMap<_, _>, _>>()
        };
        let defaults = ProfileRates {
            per_lease: rate("rates.per_lease", &cfg.per_lease)?,
            per_owner: rate("rates.per_owner", &cfg.per_owner)?,
            tools: tools_of("rates", &cfg.tools)?,
        };
        let mut by_profile = HashMap::new();
        for (name, p) in &cfg.profiles {
            let at = format!("rates.profiles.{name}");
            if !profiles.contains(&name.as_str()) {
                return Err(ConfigError::Invalid(format!(
                    "{at}: no capability profile is named `{name}`"
                )));
            }
            let mut tools = defaults.tools.clone();
            tools.extend(tools_of(&at, &p.tools)?);
            let own = ProfileRates {
                per_lease: rate(&format!("{at}.per_lease"), &p.per_lease)?.or(defaults.per_lease),
                per_owner: rate(&format!("{at}.per_owner"), &p.per_owner)?.or(defaults.per_owner),
                tools,
            };
            by_profile.insert(name.clone(), own);
        }
        Ok(Rates {
            profiles: by_profile,
            defaults,
            per_operator: rate("rates.per_operator", &cfg.per_operator)?,
            limiters: DashMap::new(),
        })
    }

    /// Counts a call of `tool` by lease `lease` (of `profile`, with its own rate if it
    /// carries one) and its `owner`; the first scope past its rate refuses it.
    pub(crate) fn check_call(
        &self,
        profile: &str,
        lease: &str,
        lease_rate: Option<Rate>,
        owner: &str,
        tool: &str,
    ) -> Result<(), Limited> {
        let p = self.profiles.get(profile).unwrap_or(&self.defaults);
        if let Some(rate) = p.tools.get(tool) {
            self.check("tool", *rate, format!("tool:{owner}:{tool}"))?;
        }
        if let Some(rate) = lease_rate.or(p.per_lease) {
            self.check("lease", rate, format!("lease:{lease}"))?;
        }
        if let Some(rate) = p.per_owner {
            self.check("owner", rate, format!("owner:{owner}"))?;
        }
        Ok(())
    }

    /// Counts a request of operator `name` on the admin routes or the console.
    pub(crate) fn check_operator(&self, name: &str) -> Result<(), Limited> {
        match self.per_operator {
            Some(rate) => self.check("operator", rate, format!("operator:{name}")),
            None => Ok(()),
        }
    }

    fn check(&self, scope: &'static str, rate: Rate, key: String) -> Result<(), Limited> {
        let limiter = self.limiters.entry(rate).or_insert_with(|| {
            let burst = NonZeroU32::new(rate.calls).unwrap_or(NonZeroU32::MIN);
            let quota = Quota::with_period(rate.period())
                .unwrap_or_else(|| Quota::per_second(burst))
                .allow_burst(burst);
            RateLimiter::keyed(quota)
        });
        limiter.check_key(&key).map_err(|not_until| Limited {
            scope,
            rate,
            retry_after: not_until.wait_time_from(limiter.clock().now()),
        })
    }

    /// Forgets keys whose limiter state is back to full (run by the janitor).
    pub(crate) fn sweep(&self) {
        for limiter in self.limiters.iter() {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(toml_text: &str) -> Result<Rates, String> {
        let cfg: RatesConfig = toml::from_str(toml_text).map_err(|e| e.to_string())?;
        Rates::new(&cfg, &["P", "Q"], &["t.read", "t.write"]).map_err(|e| e.to_string())
    }

    #[test]
    fn a_profile_table_replaces_the_defaults_and_a_lease_rate_replaces_both() {
        let r = rates(
            "per_lease = 2\n[profiles.P]\nper_lease = 1\n[profiles.P.tools]\n\"t.write\" = \"1/min\"",
        )
        .unwrap();
        // P: one call per second per lease.
        assert!(r.check_call("P", "a", None, "o1", "t.read").is_ok());
        let refused = r.check_call("P", "a", None, "o1", "t.read").unwrap_err();
        assert_eq!(refused.scope, "lease");
        assert!(
            refused.retry_after > Duration::ZERO && refused.retry_after <= Duration::from_secs(1)
        );
        assert_eq!(refused.error().code, ErrorCode::RateLimited);
        assert_eq!(
            refused.error().details.unwrap()["retry_after_ms"],
            refused.retry_after_ms()
        );
        // Q has the defaults: two at once.
        assert!(r.check_call("Q", "b", None, "o2", "t.read").is_ok());
        assert!(r.check_call("Q", "b", None, "o2", "t.read").is_ok());
        assert!(r.check_call("Q", "b", None, "o2", "t.read").is_err());
        // A lease's own rate.
        let five = Rate {
            calls: 5,
            per: Duration::from_secs(1),
        };
        for _ in 0..5 {
            assert!(r.check_call("P", "c", Some(five), "o3", "t.read").is_ok());
        }
        assert!(r.check_call("P", "c", Some(five), "o3", "t.read").is_err());
        // A tool's rate is per owner: another owner has its own.
        assert!(r.check_call("P", "d", None, "o4", "t.write").is_ok());
        let tool = r.check_call("P", "e", None, "o4", "t.write").unwrap_err();
        assert_eq!(tool.scope, "tool");
        assert!(tool.retry_after > Duration::from_secs(50), "{tool:?}");
        assert!(r.check_call("P", "f", None, "o5", "t.write").is_ok());
    }

    #[test]
    fn an_owner_rate_is_shared_by_every_lease_of_the_chain() {
        let r = rates("per_owner = 2\nper_lease = 100").unwrap();
        assert!(r.check_call("P", "parent", None, "chain", "t.read").is_ok());
        assert!(r.check_call("P", "minted", None, "chain", "t.read").is_ok());
        let refused = r
            .check_call("P", "parent", None, "chain", "t.read")
            .unwrap_err();
        assert_eq!(refused.scope, "owner");
        assert!(
            r.check_call("P", "other", None, "another", "t.read")
                .is_ok()
        );
    }

    #[test]
    fn unknown_profiles_and_tools_are_refused_by_name() {
        let err = rates("[profiles.Nope]\nper_lease = 1").err().unwrap();
        assert!(
            err.contains("rates.profiles.Nope: no capability profile"),
            "{err}"
        );
        let err = rates("[tools]\n\"t.nope\" = 1").err().unwrap();
        assert!(
            err.contains("rates.tools: no tool is named `t.nope`"),
            "{err}"
        );
        let err = rates("[profiles.P.tools]\n\"t.nope\" = 1").err().unwrap();
        assert!(err.contains("rates.profiles.P.tools: no tool"), "{err}");
    }

    #[test]
    fn no_rate_configured_limits_nothing() {
        let r = rates("").unwrap();
        for _ in 0..10_000 {
            assert!(r.check_call("P", "a", None, "o", "t.read").is_ok());
            assert!(r.check_operator("admin").is_ok());
        }
    }
}
