//! `[[services]]`: the managed services the hub starts and supervises, and `allowed_roots`,
//! the declared directories their paths (and other configured paths) may lie under.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::health::ServiceHealthConfig;

fn default_true() -> bool {
    true
}

fn default_log_max_bytes() -> u64 {
    1024 * 1024
}

fn default_stop_timeout_ms() -> u64 {
    5_000
}

/// Longest service name (the pattern `[a-z0-9][a-z0-9_.-]{0,63}`).
pub const MAX_SERVICE_NAME: usize = 64;
/// Smallest `log_max_bytes` accepted (a smaller cap would rotate on nearly every write).
pub const MIN_LOG_MAX_BYTES: u64 = 1024;
/// Longest `stop_timeout_ms` accepted (ten minutes).
pub const MAX_STOP_TIMEOUT_MS: u64 = 600_000;
/// Directory under `state_dir` of the default service log files.
pub const SERVICES_DIR: &str = "services";

/// Default most bytes of one heap snapshot file.
fn default_snapshot_max_bytes() -> u64 {
    64 * 1024 * 1024
}

/// Largest `heap_profiles.max_bytes` accepted.
pub const MAX_SNAPSHOT_BYTES: u64 = 256 * 1024 * 1024;

/// `heap_profiles` of a service: the directory its profiling mode writes heap snapshots to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeapProfilesConfig {
    /// Absolute; under the state directory or a declared root. Snapshots are the files
    /// written there while a session runs.
    pub dir: PathBuf,
    /// `pprof` (profile.proto, gzipped or not: jemalloc through jemalloc_pprof, Go, agents),
    /// or `heaptrack` (the hub preloads heaptrack's recorder into the profiling argv).
    #[serde(default)]
    pub format: HeapFormat,
    /// A larger snapshot file is refused (the session says which).
    #[serde(default = "default_snapshot_max_bytes")]
    pub max_bytes: u64,
    /// Snapshots a session keeps as artifacts: the first and the newest (older ones between
    /// are dropped as new ones come).
    #[serde(default = "default_snapshots_per_session")]
    pub keep: u32,
    /// Absolute paths in a kept snapshot (mapping and source file names) are cut to their
    /// file name unless they start with one of these prefixes (system libraries by default).
    #[serde(default = "default_keep_paths")]
    pub keep_paths: Vec<String>,
}

fn default_snapshots_per_session() -> u32 {
    16
}

fn default_keep_paths() -> Vec<String> {
    ["/usr/lib/", "/lib/", "/lib64/", "/usr/lib64/"]
        .map(String::from)
        .to_vec()
}

/// Most snapshots a session may keep (`heap_profiles.keep`).
pub const MAX_SNAPSHOTS_PER_SESSION: u32 = 256;

/// The format of a service's heap snapshots.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum HeapFormat {
    #[default]
    Pprof,
    /// heaptrack's recorder preloaded into the profiling argv (native programs as built);
    /// the hub takes a snapshot of its trace every few seconds.
    Heaptrack,
}

impl HeapFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            HeapFormat::Pprof => "pprof",
            HeapFormat::Heaptrack => "heaptrack",
        }
    }
}

/// One `[[services]]` entry: a long-running program the hub starts, supervises and restarts on
/// request (`hub.restart_service`), with its stdout and stderr in a size-capped log file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    /// `[a-z0-9][a-z0-9_.-]{0,63}`, unique.
    pub name: String,
    /// Run without a shell, in its own process group.
    pub argv: Vec<String>,
    /// Working directory; must lie under the state directory or a declared root.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Variables set on top of the hub's own environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Default `<state_dir>/services/<name>.log`; must lie under the state directory or a
    /// declared root.
    #[serde(default)]
    pub log_file: Option<PathBuf>,
    /// Past this size the log is moved to `<log_file>.1` (replacing it) and started afresh, so
    /// at most twice this is on disk.
    #[serde(default = "default_log_max_bytes")]
    pub log_max_bytes: u64,
    /// Started when the hub starts (otherwise only by an explicit restart).
    #[serde(default = "default_true")]
    pub autostart: bool,
    /// Checked by `hub.run_healthchecks` under the service's name.
    #[serde(default)]
    pub health: Option<ServiceHealthConfig>,
    /// The argv of the service's profiling mode (ProfileOps restarts it into this).
    #[serde(default)]
    pub profiling_argv: Option<Vec<String>>,
    /// Where (and in what format) the service writes heap snapshots when profiled: a
    /// session diffs the ones written while it ran (`profiles::heap`).
    #[serde(default)]
    pub heap_profiles: Option<HeapProfilesConfig>,
    /// How long a stop waits after SIGTERM to the process group before SIGKILL.
    #[serde(default = "default_stop_timeout_ms")]
    pub stop_timeout_ms: u64,
}

impl ServiceConfig {
    /// A service with defaults for everything but its name and argv.
    pub fn new(name: impl Into<String>, argv: Vec<String>) -> ServiceConfig {
        ServiceConfig {
            name: name.into(),
            argv,
            cwd: None,
            env: BTreeMap::new(),
            log_file: None,
            log_max_bytes: default_log_max_bytes(),
            autostart: true,
            health: None,
            profiling_argv: None,
            heap_profiles: None,
            stop_timeout_ms: default_stop_timeout_ms(),
        }
    }

    /// Where its output goes: `log_file`, or `<state_dir>/services/<name>.log`.
    pub fn log_path(&self, state_dir: &Path) -> PathBuf {
        self.log_file.clone().unwrap_or_else(|| {
            state_dir
                .join(SERVICES_DIR)
                .join(format!("{}.log", self.name))
        })
    }
}

/// Whether `name` matches `[a-z0-9][a-z0-9_.-]{0,63}`.
pub fn valid_service_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.len() <= MAX_SERVICE_NAME
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c))
}
