//! Descriptive artifacts with the seed's freshness and provenance fields.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::contract::Stability;

/// The freshness and provenance header every descriptor (and every answer built from one)
/// carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Freshness {
    pub descriptor_id: String,
    pub source_kind: String,
    pub source_ref: String,
    #[serde(with = "time::serde::rfc3339")]
    pub generated_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub fresh_until: OffsetDateTime,
    pub cache_ttl_sec: u64,
    pub stability: Stability,
    /// `sha256:` followed by the hex digest of the canonical JSON of `content`.
    pub content_hash: String,
}

/// One cached descriptor: a class of descriptive information with its freshness header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Descriptor {
    #[serde(flatten)]
    pub freshness: Freshness,
    /// Descriptor class, e.g. `sdk_export_metadata` or `schema_registry`.
    pub class: String,
    pub title: String,
    pub content: Value,
}

/// How far an answer built from a descriptor can be trusted, at the instant it is served.
///
/// A descriptor is `fresh` until `fresh_until`; then `stale` (still served, flagged) for one
/// more `cache_ttl_sec`; after that (`expires_at`) `expired`: root still serves it, flagged,
/// so the development surface never goes dark because CI stopped publishing, but an agent
/// should treat it as a hint and prefer a live source or ask for a rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FreshnessState {
    Fresh,
    Stale,
    Expired,
}

impl FreshnessState {
    pub fn as_str(self) -> &'static str {
        match self {
            FreshnessState::Fresh => "fresh",
            FreshnessState::Stale => "stale",
            FreshnessState::Expired => "expired",
        }
    }
}

impl Freshness {
    /// When the descriptor stops being `stale` and becomes `expired`: one more
    /// `cache_ttl_sec` past `fresh_until`.
    pub fn expires_at(&self) -> OffsetDateTime {
        let ttl = time::Duration::seconds(i64::try_from(self.cache_ttl_sec).unwrap_or(i64::MAX));
        self.fresh_until.checked_add(ttl).unwrap_or_else(|| {
            time::PrimitiveDateTime::new(time::Date::MAX, time::Time::MIDNIGHT).assume_utc()
        })
    }

    /// The descriptor's freshness at `now`.
    pub fn state_at(&self, now: OffsetDateTime) -> FreshnessState {
        if now <= self.fresh_until {
            FreshnessState::Fresh
        } else if u64::try_from((now - self.fresh_until).whole_seconds())
            .is_ok_and(|past| past <= self.cache_ttl_sec)
        {
            FreshnessState::Stale
        } else {
            FreshnessState::Expired
        }
    }
}

/// The hash every descriptor publishes: SHA-256 over the canonical JSON of `content`.
pub fn content_hash(content: &Value) -> String {
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(crate::canonical::to_vec(content)))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(ttl: u64) -> Freshness {
        let generated_at = crate::time::parse("2026-01-01T00:00:00Z").expect("valid time");
        Freshness {
            descriptor_id: "x".into(),
            source_kind: "repository".into(),
            source_ref: "x".into(),
            generated_at,
            fresh_until: generated_at + time::Duration::seconds(ttl as i64),
            cache_ttl_sec: ttl,
            stability: Stability::Stable,
            content_hash: content_hash(&Value::Null),
        }
    }

    #[test]
    fn fresh_then_stale_then_expired() {
        let h = header(100);
        let at = |s: i64| h.generated_at + time::Duration::seconds(s);
        assert_eq!(h.state_at(at(0)), FreshnessState::Fresh);
        assert_eq!(h.state_at(at(100)), FreshnessState::Fresh);
        assert_eq!(h.state_at(at(101)), FreshnessState::Stale);
        assert_eq!(h.state_at(at(200)), FreshnessState::Stale);
        assert_eq!(h.state_at(at(201)), FreshnessState::Expired);
        // A huge TTL saturates instead of overflowing.
        let mut big = header(100);
        big.cache_ttl_sec = u64::MAX;
        assert_eq!(big.state_at(at(1_000_000)), FreshnessState::Stale);
    }
}
