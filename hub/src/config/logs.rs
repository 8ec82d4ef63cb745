//! `[[log_sources]]`, the log files `hub.get_logs` may tail, and `[redaction]`, the patterns
//! redacted on the hub on top of the built-in ones.

use std::path::PathBuf;

use serde::Deserialize;

/// Longest name of a log source.
pub const MAX_LOG_SOURCE_NAME: usize = 64;
/// The stream name of the hub's own log in `hub.get_logs` (no service or log source may use it).
pub const HUB_STREAM: &str = "hub";

/// One `[[log_sources]]` entry: a log file `hub.get_logs` may tail (stream `name`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogSourceConfig {
    /// `[A-Za-z0-9][A-Za-z0-9_.-]{0,63}`, unique among log sources and services, not `hub`.
    pub name: String,
    /// A relative path is taken under `state_dir`. Must lie under `state_dir` or a declared
    /// root, also once symbolic links are followed (checked again at every read).
    pub path: PathBuf,
}

/// `[telemetry]`: OpenTelemetry traces (see [`mcp_shared::otel`]): the hub's spans of each
/// call, continuing root's trace.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP endpoint's base URL (`/v1/traces` is appended).
    #[serde(default)]
    pub otlp_endpoint: Option<String>,
}

/// `[redaction]`: patterns redacted on the hub on top of the built-in ones.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct RedactionConfig {
    /// Regular expressions (Rust `regex` syntax); every match becomes `[REDACTED]`.
    #[serde(default)]
    pub patterns: Vec<String>,
}

/// Whether `name` matches `[A-Za-z0-9][A-Za-z0-9_.-]{0,63}`.
pub fn valid_log_source_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.len() <= MAX_LOG_SOURCE_NAME
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}
