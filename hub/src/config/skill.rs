//! `[skill]`: settings of `infra_access_skill` (adapter concurrency and restart budget) and
//! `[[skill.allowed_tests]]`, the tests `hub.run_allowed_tests` may run. Its other lists are
//! in [`super::health`] and [`super::commands`].

use std::path::PathBuf;

use serde::Deserialize;

use super::commands::CommandAdapterConfig;
use super::health::HealthcheckConfig;

fn default_adapter_concurrency() -> usize {
    4
}

fn default_test_timeout_ms() -> u64 {
    60_000
}

/// Longest allowed-test name (the tool contract's `maxLength`).
pub const MAX_TEST_NAME: usize = 200;

/// One test `hub.run_allowed_tests` may run: a fixed program run as an argv vector (never
/// through a shell), killed (with its process group) after `timeout_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AllowedTestConfig {
    /// The name `hub.run_allowed_tests` asks for.
    pub name: String,
    /// The program and its arguments, run in a process group of its own (no shell).
    pub argv: Vec<String>,
    /// Working directory (under the state directory or a declared root); default `state_dir`.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Longest a run may take, in milliseconds; past it its group is killed.
    #[serde(default = "default_test_timeout_ms")]
    pub timeout_ms: u64,
    /// Variables set for the test on top of the hub's own environment.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// A run's progress, read from its output: each line matching this pattern is one test
    /// done (e.g. `^test .* \.\.\. (ok|FAILED|ignored)$`). Only the count leaves the hub.
    #[serde(default)]
    pub progress_line: Option<String>,
    /// A line matching this pattern says how many tests there are: its first capture group
    /// (e.g. `^running (\d+) tests?$`; several such lines add up).
    #[serde(default)]
    pub progress_total: Option<String>,
}

impl AllowedTestConfig {
    /// A test run as `argv`, with the defaults for everything else.
    pub fn new(name: impl Into<String>, argv: Vec<String>) -> AllowedTestConfig {
        AllowedTestConfig {
            name: name.into(),
            argv,
            cwd: None,
            timeout_ms: default_test_timeout_ms(),
            env: Default::default(),
            progress_line: None,
            progress_total: None,
        }
    }
}

/// `infra_access_skill` settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillConfig {
    /// Health checks `hub.run_healthchecks` runs (HTTP, TCP or a command).
    #[serde(default)]
    pub healthchecks: Vec<HealthcheckConfig>,
    /// Tests `hub.run_allowed_tests` may run, by name; nothing else can be run.
    #[serde(default)]
    pub allowed_tests: Vec<AllowedTestConfig>,
    /// Command adapters: read tools served by a declared program, one per tool id.
    #[serde(default)]
    pub commands: Vec<CommandAdapterConfig>,
    /// Calls one adapter runs at once; more are refused with `busy`.
    #[serde(default = "default_adapter_concurrency")]
    pub adapter_concurrency: usize,
    /// Restarts of one adapter allowed within `adapter_restart_window_ms`; one more failure
    /// makes it unavailable: its tool is withdrawn from the published surface until the skill
    /// is enabled again (or the hub restarts).
    #[serde(default = "default_adapter_max_restarts")]
    pub adapter_max_restarts: u32,
    /// The window `adapter_max_restarts` counts in, in milliseconds.
    #[serde(default = "default_adapter_restart_window_ms")]
    pub adapter_restart_window_ms: u64,
    /// TEST ONLY: moves the hub's clock this many milliseconds ahead of the system clock
    /// (negative: behind), so tests can prove clock-skew handling. Never set on a real target.
    #[serde(default)]
    pub test_clock_offset_ms: i64,
}

fn default_adapter_max_restarts() -> u32 {
    5
}

fn default_adapter_restart_window_ms() -> u64 {
    60_000
}

impl Default for SkillConfig {
    fn default() -> Self {
        SkillConfig {
            healthchecks: Vec::new(),
            allowed_tests: Vec::new(),
            commands: Vec::new(),
            adapter_concurrency: default_adapter_concurrency(),
            adapter_max_restarts: default_adapter_max_restarts(),
            adapter_restart_window_ms: default_adapter_restart_window_ms(),
            test_clock_offset_ms: 0,
        }
    }
}
