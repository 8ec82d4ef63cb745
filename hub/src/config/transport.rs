//! How the hub reaches root: the root URLs (`root_url`, `root_urls`), the WebSocket URL dialed
//! for each, the plaintext check, and `[reconnect]` backoff.

use serde::Deserialize;

use super::{ConfigError, HubConfig};

/// Path on root that hubs dial.
pub const CONNECT_PATH: &str = "/v1/root/hubs/connect";

/// Reconnect backoff: exponential from `initial_ms` to `max_ms`, jittered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReconnectConfig {
    pub initial_ms: u64,
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
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.initial_ms == 0 || self.max_ms < self.initial_ms {
            return Err(ConfigError::Invalid(
                "reconnect needs 0 < initial_ms <= max_ms".into(),
            ));
        }
        Ok(())
    }
}

impl HubConfig {
    /// Refuses a plaintext root URL (`http://`, `ws://`) to a non-loopback host unless
    /// `insecure_plaintext` is set (checked when the hub starts), for every root URL.
    pub fn check_transport(&self) -> Result<(), ConfigError> {
        for url in self.root_url_list() {
            self.check_one_transport(url)?;
        }
        Ok(())
    }

    /// The root URLs in the order the hub tries them.
    pub fn root_url_list(&self) -> Vec<&str> {
        if self.root_urls.is_empty() {
            vec![self.root_url.as_str()]
        } else {
            self.root_urls.iter().map(String::as_str).collect()
        }
    }

    /// The WebSocket URL of every root, in the order tried.
    pub fn connect_urls(&self) -> Result<Vec<String>, ConfigError> {
        self.root_url_list()
            .into_iter()
            .map(connect_url_of)
            .collect()
    }

    fn check_one_transport(&self, root_url: &str) -> Result<(), ConfigError> {
        let url = connect_url_of(root_url)?;
        let Some(rest) = url.strip_prefix("ws://") else {
            return Ok(());
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
        let host = match authority.rsplit_once('@') {
            Some((_, h)) => h,
            None => authority,
        };
        let host = if host.starts_with('[') {
            host.split_inclusive(']').next().unwrap_or(host)
        } else {
            host.split(':').next().unwrap_or(host)
        };
        if !self.insecure_plaintext && !crate::link::tls::is_loopback_host(host) {
            return Err(ConfigError::Invalid(format!(
                "root_url `{root_url}` is plaintext to non-loopback host `{host}`: use https:// or \
                 wss://, or set insecure_plaintext = true to send the hub token unencrypted"
            )));
        }
        Ok(())
    }

    /// The WebSocket URL the hub dials: `root_url` with http→ws, https→wss, plus
    /// [`CONNECT_PATH`].
    pub fn connect_url(&self) -> Result<String, ConfigError> {
        connect_url_of(&self.root_url)
    }
}

/// The WebSocket URL for one root base URL (see [`HubConfig::connect_url`]).
pub fn connect_url_of(root_url: &str) -> Result<String, ConfigError> {
    let url = root_url.trim().trim_end_matches('/');
    let (scheme, rest) = url.split_once("://").ok_or_else(|| {
        ConfigError::Invalid(format!(
            "root_url `{url}` has no scheme (http, https, ws, wss)"
        ))
    })?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "http" | "ws" => "ws",
        "https" | "wss" => "wss",
        other => {
            return Err(ConfigError::Invalid(format!(
                "root_url scheme `{other}` is not http, https, ws or wss"
            )));
        }
    };
    if rest.is_empty() {
        return Err(ConfigError::Invalid(format!(
            "root_url `{url}` has no host"
        )));
    }
    Ok(format!("{scheme}://{rest}{CONNECT_PATH}"))
}
