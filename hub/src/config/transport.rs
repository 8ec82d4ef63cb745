//! How the hub reaches root: the root URLs (`root_url`, `root_urls`), the WebSocket URL dialed
//! for each, the plaintext check, and `[reconnect]` backoff.

use super::error::HubConfigError;
use serde::Deserialize;

/// Path on root that hubs dial.
pub const CONNECT_PATH: &str = "/v1/root/hubs/connect";

/// Reconnect backoff: exponential from `initial_ms` to `max_ms`, jittered.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields, default)]
pub struct ReconnectConfig {
    /// The first wait after a failed dial, in milliseconds.
    pub initial_ms: u64,
    /// The longest wait between dials, in milliseconds.
    pub max_ms: u64,
}

impl Default for ReconnectConfig {
    fn default() -> Self {
        ReconnectConfig {
            initial_ms: 200,
            max_ms: 10_000,
        }
    }
}

impl ReconnectConfig {
    pub(super) fn validate(&self) -> Result<(), HubConfigError> {
        if self.initial_ms == 0 || self.max_ms < self.initial_ms {
            return Err(HubConfigError::Invalid(
                "reconnect needs 0 < initial_ms <= max_ms".into(),
            ));
        }
        Ok(())
    }
}

/// The WebSocket URL for one root base URL (see [`HubConfig::connect_url`]).
pub fn connect_url_of(root_url: &str) -> Result<String, HubConfigError> {
    let url = root_url.trim().trim_end_matches('/');
    let (scheme, rest) = url.split_once("://").ok_or_else(|| {
        HubConfigError::Invalid(format!(
            "root_url `{url}` has no scheme (http, https, ws, wss)"
        ))
    })?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "http" | "ws" => "ws",
        "https" | "wss" => "wss",
        other => {
            return Err(HubConfigError::Invalid(format!(
                "root_url scheme `{other}` is not http, https, ws or wss"
            )));
        }
    };
    if rest.is_empty() {
        return Err(HubConfigError::Invalid(format!(
            "root_url `{url}` has no host"
        )));
    }
    Ok(format!("{scheme}://{rest}{CONNECT_PATH}"))
}
