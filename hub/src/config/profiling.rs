//! `[profiling]`: ProfileOps policy on this hub (incident thresholds, concurrent sessions,
//! artifact delivery size, the artifacts that go to root as evidence).

use serde::Deserialize;

use super::error::HubConfigError;

fn default_growth_threshold_bytes() -> u64 {
    64 * 1024 * 1024
}

fn default_growth_threshold_percent() -> f64 {
    50.0
}

fn default_max_concurrent_sessions() -> usize {
    2
}

fn default_artifact_inline_max_bytes() -> u64 {
    256 * 1024
}

fn default_heap_snapshots_max_bytes() -> u64 {
    1024 * 1024 * 1024
}

fn default_evidence_artifact_max_bytes() -> u64 {
    mcp_shared::profiling::EVIDENCE_CONTENT_MAX_BYTES
}

/// Largest `artifact_inline_max_bytes` (an answer must fit in one 1 MiB protocol frame).
pub const MAX_ARTIFACT_INLINE_BYTES: u64 = 512 * 1024;
/// Largest `max_concurrent_sessions`.
pub const MAX_CONCURRENT_SESSIONS: usize = 64;

/// `[profiling]`: ProfileOps policy on this hub (the hub is the profiling authority).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfilingConfig {
    /// An incident is raised when a session's RSS grew by at least this many bytes ...
    #[serde(default = "default_growth_threshold_bytes")]
    pub growth_threshold_bytes: u64,
    /// ... or by at least this percentage of its first sample.
    #[serde(default = "default_growth_threshold_percent")]
    pub growth_threshold_percent: f64,
    /// Sessions sampling at once; more are refused with `busy`.
    #[serde(default = "default_max_concurrent_sessions")]
    pub max_concurrent_sessions: usize,
    /// Artifacts up to this size are returned inline by `hub.memory.get_artifact`; larger ones
    /// (and chunks of any) are delivered in chunks of at most this size (at least 1 KiB).
    #[serde(default = "default_artifact_inline_max_bytes")]
    pub artifact_inline_max_bytes: u64,
    /// Artifacts up to this size go to root with their record (root keeps them and serves
    /// them while the hub is offline); larger ones stay here only. 0 sends none; at most
    /// 256 KiB (the largest root keeps).
    #[serde(default = "default_evidence_artifact_max_bytes")]
    pub evidence_artifact_max_bytes: u64,
    /// Heap snapshots kept as artifacts take at most this many bytes on the hub in all;
    /// past it the oldest finished sessions' snapshots are dropped first.
    #[serde(default = "default_heap_snapshots_max_bytes")]
    pub heap_snapshots_max_bytes: u64,
}

impl Default for ProfilingConfig {
    fn default() -> Self {
        ProfilingConfig {
            growth_threshold_bytes: default_growth_threshold_bytes(),
            growth_threshold_percent: default_growth_threshold_percent(),
            max_concurrent_sessions: default_max_concurrent_sessions(),
            artifact_inline_max_bytes: default_artifact_inline_max_bytes(),
            evidence_artifact_max_bytes: default_evidence_artifact_max_bytes(),
            heap_snapshots_max_bytes: default_heap_snapshots_max_bytes(),
        }
    }
}

impl ProfilingConfig {
    pub(super) fn validate(&self) -> Result<(), HubConfigError> {
        let bad = |m: String| Err(HubConfigError::Invalid(format!("profiling: {m}")));
        if self.growth_threshold_bytes == 0 {
            return bad("growth_threshold_bytes must be at least 1".into());
        }
        if !(self.growth_threshold_percent.is_finite() && self.growth_threshold_percent > 0.0) {
            return bad("growth_threshold_percent must be a number above 0".into());
        }
        if !(1..=MAX_CONCURRENT_SESSIONS).contains(&self.max_concurrent_sessions) {
            return bad(format!(
                "max_concurrent_sessions must be between 1 and {MAX_CONCURRENT_SESSIONS}"
            ));
        }
        if !(1..=MAX_ARTIFACT_INLINE_BYTES).contains(&self.artifact_inline_max_bytes) {
            return bad(format!(
                "artifact_inline_max_bytes must be between 1 and {MAX_ARTIFACT_INLINE_BYTES}"
            ));
        }
        let most = mcp_shared::profiling::EVIDENCE_CONTENT_MAX_BYTES;
        if self.evidence_artifact_max_bytes > most {
            return bad(format!(
                "evidence_artifact_max_bytes must be at most {most} (the largest artifact root keeps)"
            ));
        }
        Ok(())
    }
}
