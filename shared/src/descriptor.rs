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

/// The hash every descriptor publishes: SHA-256 over the canonical JSON of `content`.
pub fn content_hash(content: &Value) -> String {
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(crate::canonical::to_vec(content)))
    )
}
