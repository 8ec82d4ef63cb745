//! Health checks: `[[skill.healthchecks]]` (run by `hub.run_healthchecks`) and a managed
//! service's `health` (the same check, named after the service).

use std::path::PathBuf;

use serde::Deserialize;

fn default_expect_status() -> u16 {
    200
}

fn default_check_timeout_ms() -> u64 {
    2_000
}

/// One configured health check, run by `hub.run_healthchecks`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum HealthcheckConfig {
    /// HTTP GET; healthy when the status equals `expect_status`.
    Http {
        name: String,
        url: String,
        #[serde(default = "default_expect_status")]
        expect_status: u16,
        #[serde(default = "default_check_timeout_ms")]
        timeout_ms: u64,
    },
    /// TCP connect to `host:port`.
    Tcp {
        name: String,
        address: String,
        #[serde(default = "default_check_timeout_ms")]
        timeout_ms: u64,
    },
    /// A program run as an argv vector (no shell); healthy when it exits with status 0.
    Command {
        name: String,
        argv: Vec<String>,
        #[serde(default)]
        cwd: Option<PathBuf>,
        #[serde(default = "default_check_timeout_ms")]
        timeout_ms: u64,
    },
}

impl HealthcheckConfig {
    pub fn name(&self) -> &str {
        match self {
            HealthcheckConfig::Http { name, .. }
            | HealthcheckConfig::Tcp { name, .. }
            | HealthcheckConfig::Command { name, .. } => name,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            HealthcheckConfig::Http { .. } => "http",
            HealthcheckConfig::Tcp { .. } => "tcp",
            HealthcheckConfig::Command { .. } => "command",
        }
    }

    pub fn timeout_ms(&self) -> u64 {
        match self {
            HealthcheckConfig::Http { timeout_ms, .. }
            | HealthcheckConfig::Tcp { timeout_ms, .. }
            | HealthcheckConfig::Command { timeout_ms, .. } => *timeout_ms,
        }
    }
}

/// A managed service's health check: like [`HealthcheckConfig`] without a name (the check is
/// named after the service).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ServiceHealthConfig {
    Http {
        url: String,
        #[serde(default = "default_expect_status")]
        expect_status: u16,
        #[serde(default = "default_check_timeout_ms")]
        timeout_ms: u64,
    },
    Tcp {
        address: String,
        #[serde(default = "default_check_timeout_ms")]
        timeout_ms: u64,
    },
    Command {
        argv: Vec<String>,
        #[serde(default)]
        cwd: Option<PathBuf>,
        #[serde(default = "default_check_timeout_ms")]
        timeout_ms: u64,
    },
}

impl ServiceHealthConfig {
    /// The check as `hub.run_healthchecks` runs it, named `name`.
    pub fn check(&self, name: &str) -> HealthcheckConfig {
        let name = name.to_owned();
        match self.clone() {
            ServiceHealthConfig::Http {
                url,
                expect_status,
                timeout_ms,
            } => HealthcheckConfig::Http {
                name,
                url,
                expect_status,
                timeout_ms,
            },
            ServiceHealthConfig::Tcp {
                address,
                timeout_ms,
            } => HealthcheckConfig::Tcp {
                name,
                address,
                timeout_ms,
            },
            ServiceHealthConfig::Command {
                argv,
                cwd,
                timeout_ms,
            } => HealthcheckConfig::Command {
                name,
                argv,
                cwd,
                timeout_ms,
            },
        }
    }
}
