//! The hub's static configuration: a TOML file (`deny_unknown_fields`) plus command-line
//! overrides, validated once into [`HubConfig`].
//!
//! Every field of the file is optional so that a hub can start from flags alone; what is
//! still missing after the merge is reported in one error that names every missing field.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use mcp_shared::target::WriteScope;
use serde::Deserialize;

pub use crate::tls::HubTlsConfig;

/// Path on root that hubs dial.
pub const CONNECT_PATH: &str = "/v1/root/hubs/connect";

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("missing configuration: {} (set them in the config file or with flags)", .0.join(", "))]
    Missing(Vec<&'static str>),
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
}

fn default_token_reload_interval_ms() -> u64 {
    2_000
}

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

fn default_expect_status() -> u16 {
    200
}

fn default_check_timeout_ms() -> u64 {
    2_000
}

/// One configured health check, run by `hub.run_healthchecks`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowedTestConfig {
    pub name: String,
    pub argv: Vec<String>,
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default = "default_test_timeout_ms")]
    pub timeout_ms: u64,
    /// Variables set for the test on top of the hub's own environment.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
}

/// Longest time a command adapter may run (ten minutes; tool contracts bound it further).
pub const MAX_COMMAND_TIMEOUT_MS: u64 = 600_000;

fn default_command_timeout_ms() -> u64 {
    10_000
}

/// A command adapter (`[[skill.commands]]`, see [`crate::adapters::command`]): the read tool
/// `tool_id` is served by running `argv` (never through a shell) with the call's arguments as
/// one line of JSON on stdin; its stdout (one JSON object) is the result. The hub gives the
/// tool no meaning: root publishes it only with a contract of that id.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandAdapterConfig {
    /// Dotted lowercase tool id, e.g. `acme.inventory.count`.
    pub tool_id: String,
    /// The program and its arguments; a program given as a path must lie under the state
    /// directory or a declared root (a bare name is looked up in `PATH`).
    pub argv: Vec<String>,
    /// Working directory (under the state directory or a declared root); default `state_dir`.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default = "default_command_timeout_ms")]
    pub timeout_ms: u64,
    /// Variables set for the program on top of the hub's own environment.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
}

/// Whether `id` is a dotted lowercase tool id (`[a-z][a-z0-9_]*` segments, at least two).
pub fn valid_tool_id(id: &str) -> bool {
    let segments: Vec<&str> = id.split('.').collect();
    id.len() <= 200
        && segments.len() >= 2
        && segments.iter().all(|s| {
            s.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
}

/// `infra_access_skill` settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillConfig {
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

/// A managed service's health check: like [`HealthcheckConfig`] without a name (the check is
/// named after the service).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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

/// One `[[services]]` entry: a long-running program the hub starts, supervises and restarts on
/// request (`hub.restart_service`), with its stdout and stderr in a size-capped log file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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

/// Largest `artifact_inline_max_bytes` (an answer must fit in one 1 MiB protocol frame).
pub const MAX_ARTIFACT_INLINE_BYTES: u64 = 512 * 1024;
/// Largest `max_concurrent_sessions`.
pub const MAX_CONCURRENT_SESSIONS: usize = 64;

/// `[profiling]`: ProfileOps policy on this hub (the hub is the profiling authority).
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
}

impl Default for ProfilingConfig {
    fn default() -> Self {
        ProfilingConfig {
            growth_threshold_bytes: default_growth_threshold_bytes(),
            growth_threshold_percent: default_growth_threshold_percent(),
            max_concurrent_sessions: default_max_concurrent_sessions(),
            artifact_inline_max_bytes: default_artifact_inline_max_bytes(),
        }
    }
}

impl ProfilingConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(format!("profiling: {m}")));
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
        Ok(())
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

fn default_git() -> String {
    "git".to_owned()
}

fn default_deploy_timeout_ms() -> u64 {
    120_000
}

/// Longest name of a log source.
pub const MAX_LOG_SOURCE_NAME: usize = 64;
/// The stream name of the hub's own log in `hub.get_logs` (no service or log source may use it).
pub const HUB_STREAM: &str = "hub";
/// Directory under `state_dir` of the deploy mirror (a bare repository).
pub const DEPLOY_MIRROR_DIR: &str = "deploy-mirror.git";

/// `[deploy]`: the one deploy target of this hub, for `hub.deploy_ref` and
/// `hub.rollback_last_test_deploy`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeployConfig {
    /// Where commits come from: an absolute path of a local git repository, or a URL
    /// (`https://`, `ssh://`, `file://`, `git://`, `user@host:path`). Fetched into a bare
    /// mirror at `<state_dir>/deploy-mirror.git`.
    pub repository: String,
    /// The deployed working tree (a `git worktree` of the mirror, checked out detached);
    /// a relative path is taken under `state_dir`. Must lie under `state_dir` or a declared
    /// root.
    pub worktree: PathBuf,
    /// Refs a caller may deploy: names or patterns where `*` matches any run of characters
    /// (`main`, `release/*`, `v*`); resolved as a tag, else a branch.
    pub allowed_refs: Vec<String>,
    /// Whether a full 40-hex commit id may be deployed.
    #[serde(default)]
    pub allow_commits: bool,
    /// Managed services (`[[services]]`) restarted after a deploy or rollback, in this order.
    #[serde(default)]
    pub restart_services: Vec<String>,
    /// argv0 of git.
    #[serde(default = "default_git")]
    pub git: String,
    /// Budget of one deploy operation's git commands (fetch, resolve, checkout); keep it
    /// under the tools' call timeout.
    #[serde(default = "default_deploy_timeout_ms")]
    pub timeout_ms: u64,
}

/// One `[[log_sources]]` entry: a log file `hub.get_logs` may tail (stream `name`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSourceConfig {
    /// `[A-Za-z0-9][A-Za-z0-9_.-]{0,63}`, unique among log sources and services, not `hub`.
    pub name: String,
    /// A relative path is taken under `state_dir`. Must lie under `state_dir` or a declared
    /// root, also once symbolic links are followed (checked again at every read).
    pub path: PathBuf,
}

/// `[redaction]`: patterns redacted on the hub on top of the built-in ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
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

/// `[nlu]`: the NLU content the `nlu_authoring.*` tools serve (entities, intents, templates;
/// see [`crate::nlu`]). Each path is a JSON file; a relative path is taken under `state_dir`;
/// every path must lie under `state_dir` or a declared root.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NluConfig {
    /// The named-entity registry (`{"entities": [...]}`).
    pub entities: PathBuf,
    /// The intents (`{"intents": [...]}`).
    pub intents: PathBuf,
    /// Template files (`{"templates": [...]}`), or directories whose `*.json` files (directly
    /// inside, in name order) are template files; one path or a list.
    #[serde(deserialize_with = "one_or_many")]
    pub templates: Vec<PathBuf>,
}

/// A path or a list of paths.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(PathBuf),
        Many(Vec<PathBuf>),
    }
    match OneOrMany::deserialize(d) {
        Ok(OneOrMany::One(p)) => Ok(vec![p]),
        Ok(OneOrMany::Many(v)) => Ok(v),
        Err(_) => Err(serde::de::Error::custom(
            "templates must be a path or a list of paths",
        )),
    }
}

/// The configuration file as written; everything optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HubFile {
    pub target_id: Option<String>,
    pub environment: Option<String>,
    pub subnet: Option<String>,
    pub zone: Option<String>,
    pub root_url: Option<String>,
    /// Several roots of one zone (replicas), tried in order; the hub moves to the next when a
    /// connection fails or ends. `root_url`, when also set, is tried first.
    #[serde(default)]
    pub root_urls: Vec<String>,
    pub token: Option<String>,
    pub token_file: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub write_scope: Option<WriteScope>,
    #[serde(default)]
    pub reconnect: ReconnectConfig,
    #[serde(default)]
    pub skill: SkillConfig,
    /// Declared roots: directories besides `state_dir` under which service and allowed-test
    /// working directories and service log files may lie.
    #[serde(default)]
    pub allowed_roots: Vec<PathBuf>,
    /// Managed services (`[[services]]`).
    #[serde(default)]
    pub services: Vec<ServiceConfig>,
    /// ProfileOps policy (`[profiling]`).
    #[serde(default)]
    pub profiling: ProfilingConfig,
    /// The deploy target (`[deploy]`); without it the deploy tools refuse.
    #[serde(default)]
    pub deploy: Option<DeployConfig>,
    /// Log files `hub.get_logs` may tail (`[[log_sources]]`).
    #[serde(default)]
    pub log_sources: Vec<LogSourceConfig>,
    #[serde(default)]
    pub redaction: RedactionConfig,
    /// NLU content (`[nlu]`); without it the `nlu_authoring.*` tools refuse.
    #[serde(default)]
    pub nlu: Option<NluConfig>,
    /// `[tls]`: how the hub verifies root on `wss://`, and its client certificate.
    #[serde(default)]
    pub tls: HubTlsConfig,
    /// Allow a plaintext (`http://`, `ws://`) root URL whose host is not loopback: the hub
    /// token and every call then cross the network unencrypted.
    #[serde(default)]
    pub insecure_plaintext: bool,
    /// How often `token_file` is checked for a new token (key rotation), in milliseconds;
    /// 0 = never (default 2000).
    #[serde(default)]
    pub token_reload_interval_ms: Option<u64>,
}

impl HubFile {
    /// Reads and parses a configuration file.
    pub fn load(path: &Path) -> Result<HubFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let file: HubFile = toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source: Box::new(source),
        })?;
        // A file with an inline token is a secret file.
        if file.token.is_some() {
            crate::tls::check_private_file(path)?;
        }
        Ok(file)
    }

    /// Applies command-line overrides (a flag wins over the file).
    pub fn apply(&mut self, o: &Overrides) {
        fn set<T: Clone>(slot: &mut Option<T>, v: &Option<T>) {
            if let Some(v) = v {
                *slot = Some(v.clone());
            }
        }
        if let Some(urls) = &o.root_url {
            // A flag wins over the file: `--root-url A,B` lists replicas in the order tried.
            self.root_url = None;
            self.root_urls = urls.split(',').map(|u| u.trim().to_owned()).collect();
        }
        if o.token_file.is_some() {
            self.token = None;
            self.token_file.clone_from(&o.token_file);
        }
        set(&mut self.target_id, &o.target);
        set(&mut self.environment, &o.environment);
        set(&mut self.subnet, &o.subnet);
        set(&mut self.zone, &o.zone);
        set(&mut self.state_dir, &o.state_dir);
    }

    /// Validates the merged settings into a [`HubConfig`], reading the token file.
    pub fn resolve(self) -> Result<HubConfig, ConfigError> {
        let mut missing = Vec::new();
        let non_empty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
        let target_id = non_empty(self.target_id);
        let environment = non_empty(self.environment);
        // `root_url` first, then `root_urls`, each once.
        let mut root_urls: Vec<String> = Vec::new();
        for url in non_empty(self.root_url).into_iter().chain(self.root_urls) {
            let url = url.trim().to_owned();
            if !url.is_empty() && !root_urls.contains(&url) {
                root_urls.push(url);
            }
        }
        let root_url = root_urls.first().cloned();
        if target_id.is_none() {
            missing.push("target_id (--target)");
        }
        if environment.is_none() {
            missing.push("environment (--environment)");
        }
        if root_url.is_none() {
            missing.push("root_url or root_urls (--root-url)");
        }
        if self.token.is_none() && self.token_file.is_none() {
            missing.push("token or token_file (--token-file)");
        }
        if self.state_dir.is_none() {
            missing.push("state_dir (--state-dir)");
        }
        let (Some(target_id), Some(environment), Some(root_url), Some(state_dir)) =
            (target_id, environment, root_url, self.state_dir)
        else {
            return Err(ConfigError::Missing(missing));
        };
        if !missing.is_empty() {
            return Err(ConfigError::Missing(missing));
        }
        let token_file = self.token_file.clone();
        let token = match (self.token, self.token_file) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::Invalid(
                    "set token or token_file, not both".into(),
                ));
            }
            (Some(t), None) => t,
            (None, Some(path)) => read_token_file(&path)?,
            (None, None) => return Err(ConfigError::Missing(vec!["token"])),
        };
        if token.is_empty() {
            return Err(ConfigError::Invalid("the hub token is empty".into()));
        }
        let config = HubConfig {
            target_id,
            environment,
            subnet: non_empty(self.subnet),
            zone: non_empty(self.zone),
            root_url,
            root_urls,
            token,
            state_dir,
            write_scope: self.write_scope.unwrap_or(WriteScope::None),
            reconnect: self.reconnect,
            skill: self.skill,
            allowed_roots: self.allowed_roots,
            services: self.services,
            profiling: self.profiling,
            deploy: self.deploy,
            log_sources: self.log_sources,
            redaction: self.redaction,
            nlu: self.nlu,
            token_file,
            tls: self.tls,
            insecure_plaintext: self.insecure_plaintext,
            token_reload_interval_ms: self
                .token_reload_interval_ms
                .unwrap_or_else(default_token_reload_interval_ms),
            embedded: Vec::new(),
        };
        config.validate()?;
        Ok(config)
    }
}

/// Reads a hub token file (refused when group or others may read it), trimmed.
pub fn read_token_file(path: &Path) -> Result<String, ConfigError> {
    crate::tls::check_private_file(path)?;
    Ok(std::fs::read_to_string(path)
        .map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?
        .trim()
        .to_owned())
}

/// Command-line overrides of [`HubFile`] fields.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Overrides {
    /// Root's http(s) or ws(s) URL; several replicas of one zone as a comma-separated list,
    /// tried in order.
    #[arg(long)]
    pub root_url: Option<String>,
    /// File holding the hub's enrolment token.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Managed target id, e.g. hub:test-alpha.
    #[arg(long)]
    pub target: Option<String>,
    /// Environment classification, e.g. test.
    #[arg(long)]
    pub environment: Option<String>,
    #[arg(long)]
    pub subnet: Option<String>,
    #[arg(long)]
    pub zone: Option<String>,
    /// Directory for the hub's persistent state (skill lifecycle).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
}

/// The validated hub configuration.
#[derive(Clone)]
pub struct HubConfig {
    pub target_id: String,
    pub environment: String,
    pub subnet: Option<String>,
    pub zone: Option<String>,
    /// Root's base URL (http, https, ws or wss): the first of [`HubConfig::root_urls`].
    pub root_url: String,
    /// Every root URL of the zone, in the order tried (replicas; empty means `root_url` only).
    pub root_urls: Vec<String>,
    /// The enrolment token; sent in `hello` and the source of the call-signing key.
    pub token: String,
    pub state_dir: PathBuf,
    pub write_scope: WriteScope,
    pub reconnect: ReconnectConfig,
    pub skill: SkillConfig,
    /// Declared roots (see [`HubFile::allowed_roots`]).
    pub allowed_roots: Vec<PathBuf>,
    pub services: Vec<ServiceConfig>,
    pub profiling: ProfilingConfig,
    pub deploy: Option<DeployConfig>,
    pub log_sources: Vec<LogSourceConfig>,
    pub redaction: RedactionConfig,
    pub nlu: Option<NluConfig>,
    /// Where the token came from, if a file: watched for a new token (key rotation).
    pub token_file: Option<PathBuf>,
    pub tls: HubTlsConfig,
    pub insecure_plaintext: bool,
    pub token_reload_interval_ms: u64,
    /// Adapters of the program embedding the hub library (never from a file; `mcp-hub` has
    /// none): served after the built-in and command adapters.
    pub embedded: Vec<&'static crate::adapters::EmbeddedAdapter>,
}

impl std::fmt::Debug for HubConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubConfig")
            .field("target_id", &self.target_id)
            .field("environment", &self.environment)
            .field("subnet", &self.subnet)
            .field("zone", &self.zone)
            .field("root_url", &self.root_url)
            .field("root_urls", &self.root_urls)
            .field("token", &"<redacted>")
            .field("state_dir", &self.state_dir)
            .field("write_scope", &self.write_scope)
            .field("reconnect", &self.reconnect)
            .field("skill", &self.skill)
            .field("allowed_roots", &self.allowed_roots)
            .field("services", &self.services)
            .field("profiling", &self.profiling)
            .field("deploy", &self.deploy)
            .field("log_sources", &self.log_sources)
            .field("redaction", &self.redaction)
            .field("nlu", &self.nlu)
            .field("token_file", &self.token_file)
            .field("tls", &self.tls)
            .field("insecure_plaintext", &self.insecure_plaintext)
            .field("token_reload_interval_ms", &self.token_reload_interval_ms)
            .field("embedded", &self.embedded)
            .finish()
    }
}

impl HubConfig {
    /// A configuration with defaults for everything but the essentials.
    pub fn new(
        target_id: impl Into<String>,
        environment: impl Into<String>,
        root_url: impl Into<String>,
        token: impl Into<String>,
        state_dir: impl Into<PathBuf>,
    ) -> HubConfig {
        HubConfig {
            target_id: target_id.into(),
            environment: environment.into(),
            subnet: None,
            zone: None,
            root_url: root_url.into(),
            root_urls: Vec::new(),
            token: token.into(),
            state_dir: state_dir.into(),
            write_scope: WriteScope::None,
            reconnect: ReconnectConfig::default(),
            skill: SkillConfig::default(),
            allowed_roots: Vec::new(),
            services: Vec::new(),
            profiling: ProfilingConfig::default(),
            deploy: None,
            log_sources: Vec::new(),
            redaction: RedactionConfig::default(),
            nlu: None,
            token_file: None,
            tls: HubTlsConfig::default(),
            insecure_plaintext: false,
            token_reload_interval_ms: default_token_reload_interval_ms(),
            embedded: Vec::new(),
        }
    }

    /// Loads `path` (if any), applies `overrides` and validates.
    pub fn load(path: Option<&Path>, overrides: &Overrides) -> Result<HubConfig, ConfigError> {
        let mut file = match path {
            Some(p) => HubFile::load(p)?,
            None => HubFile::default(),
        };
        file.apply(overrides);
        file.resolve()
    }

    /// Checks values that parse but cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.connect_urls()?;
        crate::tls::validate(&self.tls)?;
        if self.skill.adapter_concurrency == 0 {
            return Err(ConfigError::Invalid(
                "skill.adapter_concurrency must be at least 1".into(),
            ));
        }
        if !(1_000..=86_400_000).contains(&self.skill.adapter_restart_window_ms) {
            return Err(ConfigError::Invalid(
                "skill.adapter_restart_window_ms must be between 1000 and 86400000 (a day)".into(),
            ));
        }
        if self.reconnect.initial_ms == 0 || self.reconnect.max_ms < self.reconnect.initial_ms {
            return Err(ConfigError::Invalid(
                "reconnect needs 0 < initial_ms <= max_ms".into(),
            ));
        }
        let mut names = std::collections::BTreeSet::new();
        for check in &self.skill.healthchecks {
            if !names.insert(check.name()) {
                return Err(ConfigError::Invalid(format!(
                    "two health checks are named `{}`",
                    check.name()
                )));
            }
            if let HealthcheckConfig::Command { argv, .. } = check
                && argv.is_empty()
            {
                return Err(ConfigError::Invalid(format!(
                    "health check `{}` has an empty argv",
                    check.name()
                )));
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for test in &self.skill.allowed_tests {
            let name = test.name.as_str();
            if name.trim().is_empty() || name.chars().count() > MAX_TEST_NAME {
                return Err(ConfigError::Invalid(format!(
                    "allowed test name `{name}` must have 1 to {MAX_TEST_NAME} characters"
                )));
            }
            if !names.insert(name) {
                return Err(ConfigError::Invalid(format!(
                    "two allowed tests are named `{name}`"
                )));
            }
            if test.argv.first().is_none_or(|p| p.is_empty()) {
                return Err(ConfigError::Invalid(format!(
                    "allowed test `{name}` has an empty argv"
                )));
            }
            if test.timeout_ms == 0 {
                return Err(ConfigError::Invalid(format!(
                    "allowed test `{name}` needs timeout_ms of at least 1"
                )));
            }
            if let Some(cwd) = &test.cwd {
                self.check_confined(&format!("allowed test `{name}`: cwd"), cwd)?;
            }
        }
        self.validate_services()?;
        self.validate_commands()?;
        self.profiling.validate()?;
        self.validate_deploy()?;
        self.validate_log_sources()?;
        self.validate_nlu()
    }

    /// The `[nlu]` paths as the hub reads them (relative ones under `state_dir`).
    pub fn nlu_paths(&self) -> Option<NluConfig> {
        self.nlu.as_ref().map(|n| NluConfig {
            entities: self.under_state_dir(&n.entities),
            intents: self.under_state_dir(&n.intents),
            templates: n
                .templates
                .iter()
                .map(|p| self.under_state_dir(p))
                .collect(),
        })
    }

    /// Checks `[nlu]`: template paths given, every path confined.
    fn validate_nlu(&self) -> Result<(), ConfigError> {
        let Some(nlu) = self.nlu_paths() else {
            return Ok(());
        };
        if nlu.templates.is_empty() {
            return Err(ConfigError::Invalid(
                "nlu: templates names no file or directory".into(),
            ));
        }
        self.check_confined("nlu: entities", &nlu.entities)?;
        self.check_confined("nlu: intents", &nlu.intents)?;
        for path in &nlu.templates {
            self.check_confined("nlu: templates", path)?;
        }
        Ok(())
    }

    /// `path`, or `state_dir/path` when it is relative.
    pub fn under_state_dir(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_owned()
        } else {
            self.state_dir.join(path)
        }
    }

    /// The bare mirror the deploy adapters fetch into.
    pub fn deploy_mirror(&self) -> PathBuf {
        self.state_dir.join(DEPLOY_MIRROR_DIR)
    }

    /// The deployed working tree, if `[deploy]` is configured.
    pub fn deploy_worktree(&self) -> Option<PathBuf> {
        self.deploy
            .as_ref()
            .map(|d| self.under_state_dir(&d.worktree))
    }

    /// Checks `[deploy]`.
    fn validate_deploy(&self) -> Result<(), ConfigError> {
        let Some(deploy) = &self.deploy else {
            return Ok(());
        };
        let bad = |m: String| Err(ConfigError::Invalid(format!("deploy: {m}")));
        let repo = deploy.repository.as_str();
        if repo.trim().is_empty() {
            return bad("repository is empty".into());
        }
        if repo.starts_with('-') || repo.contains("::") || repo.chars().any(char::is_control) {
            return bad(format!(
                "repository `{}` must not start with `-`, name a `<transport>::` helper or contain control characters",
                repo.escape_debug()
            ));
        }
        let url = repo.contains("://")
            || repo
                .split_once(':')
                .is_some_and(|(host, _)| !host.is_empty() && !host.contains('/'));
        if !url && !Path::new(repo).is_absolute() {
            return bad(format!(
                "repository `{repo}` must be an absolute path or a URL"
            ));
        }
        let worktree = self.under_state_dir(&deploy.worktree);
        self.check_confined("deploy: worktree", &worktree)?;
        let state = absolute(&self.state_dir);
        let full = absolute(&worktree);
        let mirror = absolute(&self.deploy_mirror());
        if state.starts_with(&full) || self.allowed_roots.iter().any(|r| r == &full) {
            return bad(format!(
                "worktree `{}` must lie strictly inside the state directory or a declared root, not contain it",
                worktree.display()
            ));
        }
        if full.starts_with(&mirror) {
            return bad(format!(
                "worktree `{}` must not lie inside the deploy mirror `{}`",
                worktree.display(),
                mirror.display()
            ));
        }
        if deploy.allowed_refs.is_empty() && !deploy.allow_commits {
            return bad(
                "allowed_refs is empty (and allow_commits is false): nothing could be deployed"
                    .into(),
            );
        }
        for pattern in &deploy.allowed_refs {
            if let Err(e) = crate::refs::check_pattern(pattern) {
                return bad(format!("allowed_refs: {e}"));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for name in &deploy.restart_services {
            if !seen.insert(name) {
                return bad(format!("restart_services names `{name}` twice"));
            }
            if !self.services.iter().any(|s| &s.name == name) {
                let known: Vec<String> = self
                    .services
                    .iter()
                    .map(|s| format!("`{}`", s.name))
                    .collect();
                return bad(format!(
                    "restart_services names `{name}`, which is not a [[services]] entry (services: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ));
            }
        }
        if deploy.git.trim().is_empty() {
            return bad("git is empty".into());
        }
        if deploy.timeout_ms == 0 {
            return bad("timeout_ms must be at least 1".into());
        }
        Ok(())
    }

    /// Checks `[[log_sources]]` and `[redaction]`.
    fn validate_log_sources(&self) -> Result<(), ConfigError> {
        if self.services.iter().any(|s| s.name == HUB_STREAM) {
            return Err(ConfigError::Invalid(format!(
                "service name `{HUB_STREAM}` is taken by the hub's own log stream"
            )));
        }
        let mut names: std::collections::BTreeSet<&str> =
            self.services.iter().map(|s| s.name.as_str()).collect();
        for source in &self.log_sources {
            let name = source.name.as_str();
            if !valid_log_source_name(name) {
                return Err(ConfigError::Invalid(format!(
                    "log source name `{name}` must match [A-Za-z0-9][A-Za-z0-9_.-]{{0,63}}"
                )));
            }
            if name == HUB_STREAM {
                return Err(ConfigError::Invalid(format!(
                    "log source name `{HUB_STREAM}` is taken by the hub's own log"
                )));
            }
            if !names.insert(name) {
                return Err(ConfigError::Invalid(format!(
                    "log source `{name}`: a service or another log source has that name"
                )));
            }
            self.check_confined(
                &format!("log source `{name}`: path"),
                &self.under_state_dir(&source.path),
            )?;
        }
        for pattern in &self.redaction.patterns {
            if let Err(e) = regex::Regex::new(pattern) {
                return Err(ConfigError::Invalid(format!(
                    "redaction: pattern `{pattern}` does not compile: {e}"
                )));
            }
        }
        Ok(())
    }

    /// Checks `[[skill.commands]]`: valid and distinct tool ids that no built-in adapter
    /// serves, a program, confined paths, a timeout.
    fn validate_commands(&self) -> Result<(), ConfigError> {
        let mut ids = std::collections::BTreeSet::new();
        for command in &self.skill.commands {
            let id = command.tool_id.as_str();
            let bad = |why: String| ConfigError::Invalid(format!("command adapter `{id}`: {why}"));
            if !valid_tool_id(id) {
                return Err(bad(
                    "tool_id must be dotted lowercase segments [a-z][a-z0-9_]*, e.g. acme.inventory.count".into(),
                ));
            }
            if crate::adapters::AdapterKind::for_tool(id).is_some() {
                return Err(bad("a built-in adapter serves this tool".into()));
            }
            if self.embedded.iter().any(|e| e.decl.tool_id == id) {
                return Err(bad("an embedded adapter serves this tool".into()));
            }
            if !ids.insert(id) {
                return Err(bad("declared twice".into()));
            }
            let Some(program) = command.argv.first().filter(|p| !p.is_empty()) else {
                return Err(bad("empty argv".into()));
            };
            if program.contains('/') {
                self.check_confined(
                    &format!("command adapter `{id}`: program"),
                    Path::new(program),
                )?;
            }
            if let Some(cwd) = &command.cwd {
                self.check_confined(&format!("command adapter `{id}`: cwd"), cwd)?;
            }
            if command.timeout_ms == 0 || command.timeout_ms > MAX_COMMAND_TIMEOUT_MS {
                return Err(bad(format!(
                    "timeout_ms must be between 1 and {MAX_COMMAND_TIMEOUT_MS}"
                )));
            }
            if let Some(key) = command
                .env
                .keys()
                .find(|k| k.is_empty() || k.contains(['=', '\0']))
            {
                return Err(bad(format!(
                    "env name `{key}` is empty or contains `=` or NUL"
                )));
            }
        }
        Ok(())
    }

    /// Checks `[[services]]` and `allowed_roots`.
    fn validate_services(&self) -> Result<(), ConfigError> {
        for root in &self.allowed_roots {
            if !root.is_absolute() || has_parent_component(root) {
                return Err(ConfigError::Invalid(format!(
                    "allowed_roots: `{}` must be an absolute path without `..`",
                    root.display()
                )));
            }
        }
        let mut names = std::collections::BTreeSet::new();
        let mut logs = BTreeMap::new();
        for service in &self.services {
            let name = service.name.as_str();
            if !valid_service_name(name) {
                return Err(ConfigError::Invalid(format!(
                    "service name `{name}` must match [a-z0-9][a-z0-9_.-]{{0,63}}"
                )));
            }
            if !names.insert(name) {
                return Err(ConfigError::Invalid(format!(
                    "two services are named `{name}`"
                )));
            }
            if service.argv.first().is_none_or(|p| p.is_empty()) {
                return Err(ConfigError::Invalid(format!(
                    "service `{name}` has an empty argv"
                )));
            }
            if let Some(argv) = &service.profiling_argv
                && argv.first().is_none_or(|p| p.is_empty())
            {
                return Err(ConfigError::Invalid(format!(
                    "service `{name}` has an empty profiling_argv (leave it out instead)"
                )));
            }
            if let Some(key) = service
                .env
                .keys()
                .find(|k| k.is_empty() || k.contains(['=', '\0']))
            {
                return Err(ConfigError::Invalid(format!(
                    "service `{name}`: env name `{key}` is empty or contains `=` or NUL"
                )));
            }
            if service.log_max_bytes < MIN_LOG_MAX_BYTES {
                return Err(ConfigError::Invalid(format!(
                    "service `{name}`: log_max_bytes must be at least {MIN_LOG_MAX_BYTES}"
                )));
            }
            if service.stop_timeout_ms == 0 || service.stop_timeout_ms > MAX_STOP_TIMEOUT_MS {
                return Err(ConfigError::Invalid(format!(
                    "service `{name}`: stop_timeout_ms must be between 1 and {MAX_STOP_TIMEOUT_MS}"
                )));
            }
            if let Some(ServiceHealthConfig::Command { argv, .. }) = &service.health
                && argv.first().is_none_or(|p| p.is_empty())
            {
                return Err(ConfigError::Invalid(format!(
                    "service `{name}`: the health check has an empty argv"
                )));
            }
            if let Some(cwd) = &service.cwd {
                self.check_confined(&format!("service `{name}`: cwd"), cwd)?;
            }
            let log = service.log_path(&self.state_dir);
            self.check_confined(&format!("service `{name}`: log_file"), &log)?;
            if let Some(other) = logs.insert(absolute(&log), name) {
                return Err(ConfigError::Invalid(format!(
                    "services `{other}` and `{name}` share the log file `{}`",
                    log.display()
                )));
            }
        }
        Ok(())
    }

    /// `path` must be absolute (or start with a relative state directory), free of `..`, and
    /// lie under the state directory or a declared root — and, when it exists, so must the
    /// path it resolves to (symbolic links cannot lead out).
    fn check_confined(&self, what: &str, path: &Path) -> Result<(), ConfigError> {
        let roots: Vec<PathBuf> = std::iter::once(absolute(&self.state_dir))
            .chain(self.allowed_roots.iter().cloned())
            .collect();
        let shown = || {
            let mut listed = vec![format!("state_dir `{}`", self.state_dir.display())];
            listed.extend(
                self.allowed_roots
                    .iter()
                    .map(|r| format!("`{}`", r.display())),
            );
            listed.join(", ")
        };
        if has_parent_component(path) {
            return Err(ConfigError::Invalid(format!(
                "{what} `{}` must not contain `..`",
                path.display()
            )));
        }
        if !path.is_absolute() && !path.starts_with(&self.state_dir) {
            return Err(ConfigError::Invalid(format!(
                "{what} `{}` must be an absolute path",
                path.display()
            )));
        }
        let full = absolute(path);
        if !roots.iter().any(|r| full.starts_with(r)) {
            return Err(ConfigError::Invalid(format!(
                "{what} `{}` lies outside the state directory and the declared roots ({}); add a root to allowed_roots",
                path.display(),
                shown()
            )));
        }
        // What exists must not lead elsewhere through a symbolic link.
        let real = resolved(&full);
        if !roots.iter().any(|r| real.starts_with(resolved(r))) {
            return Err(ConfigError::Invalid(format!(
                "{what} `{}` resolves to `{}`, outside the state directory and the declared roots ({})",
                path.display(),
                real.display(),
                shown()
            )));
        }
        Ok(())
    }

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
        if !self.insecure_plaintext && !crate::tls::is_loopback_host(host) {
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

/// `path` made absolute against the current directory (lexically; nothing is resolved).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// `path` with its longest existing ancestor resolved (symbolic links followed) and the rest
/// appended as written.
fn resolved(path: &Path) -> PathBuf {
    for ancestor in path.ancestors() {
        if let Ok(real) = ancestor.canonicalize() {
            let rest = path.strip_prefix(ancestor).unwrap_or(Path::new(""));
            return real.join(rest);
        }
    }
    path.to_owned()
}

fn has_parent_component(path: &Path) -> bool {
    path.components().any(|c| c == Component::ParentDir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    #[test]
    fn example_config_parses() {
        let path = repo().join("config/hub.example.toml");
        let mut file = HubFile::load(&path).expect("config/hub.example.toml parses");
        assert_eq!(file.skill.healthchecks.len(), 3);
        let tests: Vec<&str> = file
            .skill
            .allowed_tests
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(tests, ["smoke", "always-fails"]);
        assert_eq!(file.skill.allowed_tests[1].timeout_ms, 60_000, "default");
        assert_eq!(file.skill.adapter_concurrency, 4);
        // The example names a token file that does not exist here; give an inline token.
        file.token_file = None;
        file.token = Some("mcph_example".into());
        let config = file.resolve().expect("example resolves");
        assert_eq!(config.environment, "test");
        assert_eq!(config.write_scope, WriteScope::None);
        assert!(config.connect_url().expect("url").ends_with(CONNECT_PATH));
    }

    #[test]
    fn flags_alone_are_enough_and_override_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let token = dir.path().join("token");
        std::fs::write(&token, "mcph_secret\n").expect("write token");
        private(&token);
        let overrides = Overrides {
            root_url: Some("https://root.example:8443/".into()),
            token_file: Some(token.clone()),
            target: Some("hub:test-alpha".into()),
            environment: Some("test".into()),
            subnet: Some("sn-1".into()),
            zone: Some("eu-1".into()),
            state_dir: Some(dir.path().to_owned()),
        };
        let config = HubConfig::load(None, &overrides).expect("flags are enough");
        assert_eq!(config.token, "mcph_secret");
        assert_eq!(
            config.connect_url().expect("url"),
            "wss://root.example:8443/v1/root/hubs/connect"
        );
        assert!(!format!("{config:?}").contains("mcph_secret"));

        let file = dir.path().join("hub.toml");
        std::fs::write(
            &file,
            "target_id = \"hub:from-file\"\nenvironment = \"prod\"\nroot_url = \"http://a\"\n\
             token = \"inline\"\nstate_dir = \"/nowhere\"\n",
        )
        .expect("write config");
        // A config file with an inline token is a secret file.
        #[cfg(unix)]
        {
            let err = HubConfig::load(Some(&file), &overrides).expect_err("0644 inline token");
            assert!(
                err.to_string()
                    .contains(&format!("chmod 600 {}", file.display())),
                "{err}"
            );
        }
        private(&file);
        let config = HubConfig::load(Some(&file), &overrides).expect("merged");
        assert_eq!(config.target_id, "hub:test-alpha");
        assert_eq!(config.environment, "test");
        assert_eq!(
            config.token, "mcph_secret",
            "--token-file replaces the inline token"
        );
        let config = HubConfig::load(Some(&file), &Overrides::default()).expect("file only");
        assert_eq!(
            config.connect_url().expect("url"),
            "ws://a/v1/root/hubs/connect"
        );
    }

    #[test]
    fn several_root_urls_are_tried_in_order_and_each_is_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("hub.toml");
        std::fs::write(
            &file,
            "target_id = \"hub:a\"\nenvironment = \"test\"\nroot_url = \"http://127.0.0.1:1\"\n\
             root_urls = [\"http://127.0.0.1:2\", \"http://127.0.0.1:1\", \"https://root-b.example\"]\n\
             token_file = \"/nowhere\"\nstate_dir = \"/nowhere\"\n",
        )
        .expect("write config");
        let mut f = HubFile::load(&file).expect("parses");
        f.token_file = None;
        f.token = Some("mcph_x".into());
        let config = f.clone().resolve().expect("resolves");
        assert_eq!(config.root_url, "http://127.0.0.1:1", "root_url first");
        assert_eq!(
            config.connect_urls().expect("urls"),
            [
                "ws://127.0.0.1:1/v1/root/hubs/connect",
                "ws://127.0.0.1:2/v1/root/hubs/connect",
                "wss://root-b.example/v1/root/hubs/connect",
            ]
        );
        config.check_transport().expect("loopback and https pass");
        // Every URL is held to the plaintext rule, not only the first.
        let mut plain = f.clone();
        plain.root_urls.push("http://root-c.example".into());
        let err = plain
            .resolve()
            .expect("resolves")
            .check_transport()
            .expect_err("plaintext to a remote replica");
        assert!(err.to_string().contains("root-c.example"), "{err}");
        // Only root_urls, and a comma-separated --root-url that replaces the file's list.
        let mut only = f.clone();
        only.root_url = None;
        assert_eq!(
            only.clone().resolve().expect("resolves").root_url,
            "http://127.0.0.1:2"
        );
        only.apply(&Overrides {
            root_url: Some("http://127.0.0.1:7, http://127.0.0.1:8".into()),
            ..Overrides::default()
        });
        assert_eq!(
            only.resolve().expect("resolves").root_url_list(),
            ["http://127.0.0.1:7", "http://127.0.0.1:8"]
        );
        let mut none = f;
        none.root_url = None;
        none.root_urls.clear();
        assert!(
            none.resolve()
                .expect_err("no root")
                .to_string()
                .contains("root_url or root_urls")
        );
    }

    /// Makes a test's secret file private (mode 0600).
    fn private(path: &Path) {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_token_file_readable_by_others_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let token = dir.path().join("token");
        std::fs::write(&token, "mcph_secret\n").expect("write token");
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let overrides = Overrides {
            root_url: Some("https://root.example".into()),
            token_file: Some(token.clone()),
            target: Some("hub:x".into()),
            environment: Some("test".into()),
            state_dir: Some(dir.path().to_owned()),
            ..Default::default()
        };
        let err = HubConfig::load(None, &overrides).expect_err("0644 token file");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("chmod 600 {}", token.display())),
            "{msg}"
        );
        assert!(!msg.contains("mcph_secret"), "{msg}");
    }

    #[test]
    fn plaintext_is_refused_for_non_loopback_roots() {
        let mut config = HubConfig::new("hub:x", "test", "http://root.example:8700", "t", "/tmp");
        let err = config
            .check_transport()
            .expect_err("plaintext to a remote root");
        assert!(err.to_string().contains("insecure_plaintext"), "{err}");
        config.insecure_plaintext = true;
        config.check_transport().expect("explicitly allowed");
        for url in [
            "http://127.0.0.1:8700",
            "ws://localhost:1/",
            "http://[::1]:8700",
            "https://root.example",
            "wss://10.0.0.1",
        ] {
            let config = HubConfig::new("hub:x", "test", url, "t", "/tmp");
            config.check_transport().expect(url);
        }
    }

    #[test]
    fn missing_essentials_are_named() {
        let err = HubConfig::load(None, &Overrides::default()).expect_err("nothing set");
        let msg = err.to_string();
        for field in ["target_id", "environment", "root_url", "token", "state_dir"] {
            assert!(msg.contains(field), "{msg}");
        }
        let overrides = Overrides {
            target: Some("hub:x".into()),
            ..Default::default()
        };
        let msg = HubConfig::load(None, &overrides)
            .expect_err("still missing")
            .to_string();
        assert!(!msg.contains("target_id"), "{msg}");
    }

    #[test]
    fn unknown_fields_and_bad_urls_are_refused() {
        let err = toml::from_str::<HubFile>("target = \"x\"").expect_err("unknown field");
        assert!(err.to_string().contains("unknown field"), "{err}");
        let err = toml::from_str::<HubFile>(
            "[skill]\n[[skill.healthchecks]]\nname = \"a\"\nkind = \"tcp\"\nurl = \"x\"\n",
        )
        .expect_err("url is not a tcp field");
        assert!(err.to_string().contains("unknown field"), "{err}");
        let mut config = HubConfig::new("hub:x", "test", "ftp://root", "t", "/tmp");
        assert!(config.connect_url().is_err());
        config.root_url = "root:8080".into();
        assert!(config.validate().is_err());
    }

    #[test]
    fn allowed_tests_are_checked() {
        let file: HubFile = toml::from_str(
            "[[skill.allowed_tests]]\nname = \"a\"\nargv = [\"true\"]\n\
             env = { A = \"1\" }\n",
        )
        .expect("parses");
        let test = &file.skill.allowed_tests[0];
        assert_eq!(test.timeout_ms, 60_000);
        assert_eq!(test.env["A"], "1");
        let err = toml::from_str::<HubFile>(
            "[[skill.allowed_tests]]\nname = \"a\"\nargv = [\"true\"]\nshell = \"x\"\n",
        )
        .expect_err("unknown field");
        assert!(err.to_string().contains("unknown field"), "{err}");
        let mut config = HubConfig::new("hub:x", "test", "ws://root", "t", "/tmp");
        config.skill.allowed_tests = vec![test.clone(), test.clone()];
        assert!(config.validate().is_err(), "duplicate names");
        let mut empty = test.clone();
        empty.argv.clear();
        config.skill.allowed_tests = vec![empty];
        assert!(config.validate().is_err(), "empty argv");
        config.skill.allowed_tests = vec![test.clone()];
        config.validate().expect("valid");
    }

    #[test]
    fn deploy_and_log_sources_are_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let apps = dir.path().join("apps");
        let deploy = |extra: &str| {
            format!(
                "[deploy]\nrepository = \"/srv/repo.git\"\nworktree = \"deploy/app\"\n\
                 allowed_refs = [\"main\", \"release/*\", \"v*\"]\n{extra}\n"
            )
        };
        let config = with_services(dir.path(), &deploy("")).expect("valid");
        let d = config.deploy.as_ref().expect("deploy");
        assert_eq!(
            (d.git.as_str(), d.timeout_ms, d.allow_commits),
            ("git", 120_000, false)
        );
        assert!(d.restart_services.is_empty());
        assert_eq!(
            config.deploy_worktree(),
            Some(dir.path().join("state/deploy/app")),
            "relative to the state dir"
        );
        for url in [
            "https://git.example/app.git",
            "ssh://git@git.example/app.git",
            "git@git.example:app.git",
            "file:///srv/repo.git",
        ] {
            let text = deploy("").replace("/srv/repo.git", url);
            with_services(dir.path(), &text).expect(url);
        }
        let err = toml::from_str::<HubFile>(&deploy("branch = \"x\"")).expect_err("unknown field");
        assert!(err.to_string().contains("unknown field"), "{err}");
        for (text, expect) in [
            (
                deploy("").replace("/srv/repo.git", ""),
                "deploy: repository is empty",
            ),
            (
                deploy("").replace("/srv/repo.git", "-oProxyCommand=x"),
                "must not start with `-`",
            ),
            (
                deploy("").replace("/srv/repo.git", "ext::sh -c x"),
                "`<transport>::`",
            ),
            (
                deploy("").replace("/srv/repo.git", "repo"),
                "absolute path or a URL",
            ),
            (
                deploy("").replace("deploy/app", "/elsewhere/app"),
                "deploy: worktree `/elsewhere/app` lies outside",
            ),
            (
                deploy("").replace("deploy/app", "deploy/../../x"),
                "must not contain `..`",
            ),
            (
                deploy("").replace("deploy/app", "deploy-mirror.git/x"),
                "inside the deploy mirror",
            ),
            (
                format!(
                    "allowed_roots = [\"{0}\"]\n{1}",
                    apps.display(),
                    deploy("").replace("deploy/app", &apps.display().to_string())
                ),
                "strictly inside",
            ),
            (
                deploy("").replace("\"main\", ", "\"-*\", "),
                "allowed_refs: a pattern must not start with `-`",
            ),
            (
                deploy("").replace("\"main\", ", "\"ma in\", "),
                "allowed_refs: pattern `ma in` contains ' '",
            ),
            (
                deploy("").replace("[\"main\", \"release/*\", \"v*\"]", "[]"),
                "allowed_refs is empty",
            ),
            (
                deploy("restart_services = [\"web\"]"),
                "restart_services names `web`, which is not a [[services]] entry (services: none)",
            ),
            (deploy("git = \" \""), "deploy: git is empty"),
            (
                deploy("timeout_ms = 0"),
                "deploy: timeout_ms must be at least 1",
            ),
        ] {
            let m = invalid(dir.path(), &text);
            assert!(m.contains(expect), "{text}\n{m}");
        }
        let ok = format!(
            "allowed_roots = [\"{}\"]\n{}[[services]]\nname = \"web\"\nargv = [\"x\"]\n",
            apps.display(),
            deploy(&format!(
                "restart_services = [\"web\"]\nworktree = \"{}/app\"",
                apps.display()
            ))
            .replace("worktree = \"deploy/app\"\n", "")
        );
        let config = with_services(dir.path(), &ok).expect("valid");
        assert_eq!(config.deploy_worktree(), Some(apps.join("app")));
        let m = invalid(
            dir.path(),
            &ok.replace("[\"web\"]\n", "[\"web\", \"web\"]\n"),
        );
        assert!(m.contains("names `web` twice"), "{m}");

        // Log sources: names, collisions, paths; redaction patterns compile.
        let source = |name: &str, path: &str| {
            format!("[[log_sources]]\nname = \"{name}\"\npath = \"{path}\"\n")
        };
        let config = with_services(
            dir.path(),
            &format!(
                "allowed_roots = [\"{0}\"]\n{1}{2}[redaction]\npatterns = [\"session=[0-9a-f]+\"]\n",
                apps.display(),
                source("app", &format!("{}/app.log", apps.display())),
                source("Local_1.x", "logs/local.log")
            ),
        )
        .expect("valid");
        assert_eq!(config.log_sources.len(), 2);
        assert_eq!(config.redaction.patterns.len(), 1);
        for (text, expect) in [
            (source("hub", "a.log"), "log source name `hub` is taken"),
            (source("-a", "a.log"), "log source name `-a` must match"),
            (source("a b", "a.log"), "log source name `a b` must match"),
            (
                format!("{}{}", source("a", "a.log"), source("a", "b.log")),
                "log source `a`: a service or another log source",
            ),
            (
                format!(
                    "[[services]]\nname = \"web\"\nargv = [\"x\"]\n{}",
                    source("web", "w.log")
                ),
                "log source `web`: a service or another log source",
            ),
            (
                source("etc", "/etc/passwd"),
                "log source `etc`: path `/etc/passwd` lies outside",
            ),
            (source("up", "logs/../../x.log"), "must not contain `..`"),
            (
                "[redaction]\npatterns = [\"(\"]\n".to_owned(),
                "redaction: pattern `(` does not compile",
            ),
            (
                "[[services]]\nname = \"hub\"\nargv = [\"x\"]\n".to_owned(),
                "service name `hub` is taken",
            ),
        ] {
            let m = invalid(dir.path(), &text);
            assert!(m.contains(expect), "{text}\n{m}");
        }
        let err = toml::from_str::<HubFile>(
            "[[log_sources]]\nname = \"a\"\npath = \"a\"\nfollow = true\n",
        )
        .expect_err("unknown field");
        assert!(err.to_string().contains("unknown field"), "{err}");
    }

    /// The commented `[[services]]` example of config/hub.example.toml parses once uncommented.
    #[test]
    fn the_commented_service_example_parses() {
        let text =
            std::fs::read_to_string(repo().join("config/hub.example.toml")).expect("example");
        let start = text.find("# [[services]]").expect("a [[services]] example");
        let block: String = text[start..]
            .lines()
            .map_while(|l| l.strip_prefix("# "))
            .map(|l| format!("{l}\n"))
            .collect();
        let file: HubFile = toml::from_str(&block).expect("the example parses");
        let app = &file.services[0];
        assert_eq!(app.name, "app");
        assert!(app.profiling_argv.is_some() && app.health.is_some());
        assert!(text.contains("# allowed_roots = [\"/srv/app\"]"));
        let start = text.find("# [profiling]").expect("a [profiling] example");
        let block: String = text[start..]
            .lines()
            .map_while(|l| l.strip_prefix("# "))
            .map(|l| format!("{l}\n"))
            .collect();
        let file: HubFile = toml::from_str(&block).expect("the example parses");
        assert_eq!(
            file.profiling,
            ProfilingConfig::default(),
            "the example shows the defaults"
        );
    }

    #[test]
    fn profiling_values_are_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (value, expect) in [
            ("growth_threshold_bytes = 0", "growth_threshold_bytes"),
            ("growth_threshold_percent = 0.0", "growth_threshold_percent"),
            ("growth_threshold_percent = nan", "growth_threshold_percent"),
            ("max_concurrent_sessions = 0", "max_concurrent_sessions"),
            ("max_concurrent_sessions = 65", "max_concurrent_sessions"),
            (
                "artifact_inline_max_bytes = 524289",
                "artifact_inline_max_bytes",
            ),
        ] {
            let m = invalid(dir.path(), &format!("[profiling]\n{value}\n"));
            assert!(
                m.starts_with("profiling: ") && m.contains(expect),
                "{value}: {m}"
            );
        }
        let config =
            with_services(dir.path(), "[profiling]\nmax_concurrent_sessions = 4\n").expect("valid");
        assert_eq!(config.profiling.max_concurrent_sessions, 4);
        assert_eq!(config.profiling.artifact_inline_max_bytes, 256 * 1024);
    }

    fn with_services(dir: &Path, toml_text: &str) -> Result<HubConfig, ConfigError> {
        let mut file: HubFile = toml::from_str(toml_text).map_err(|e| ConfigError::Parse {
            path: "test.toml".into(),
            source: Box::new(e),
        })?;
        file.target_id = Some("hub:x".into());
        file.environment = Some("test".into());
        file.root_url = Some("ws://root".into());
        file.token = Some("t".into());
        file.state_dir = Some(dir.join("state"));
        file.resolve()
    }

    fn invalid(dir: &Path, toml_text: &str) -> String {
        match with_services(dir, toml_text) {
            Err(ConfigError::Invalid(m)) => m,
            other => panic!("expected ConfigError::Invalid for {toml_text:?}, got {other:?}"),
        }
    }

    #[test]
    fn services_parse_with_defaults() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("apps");
        let config = with_services(
            dir.path(),
            &format!(
                "allowed_roots = [\"{}\"]\n\
                 [[services]]\nname = \"web-1\"\nargv = [\"sleep\", \"30\"]\n\
                 [[services]]\nname = \"api.v2\"\nargv = [\"x\"]\ncwd = \"{0}/api\"\n\
                 log_file = \"{0}/logs/api.log\"\nlog_max_bytes = 4096\nautostart = false\n\
                 profiling_argv = [\"x\", \"--profile\"]\nstop_timeout_ms = 100\n\
                 env = {{ A = \"1\" }}\n\
                 health = {{ kind = \"http\", url = \"http://127.0.0.1:1/healthz\" }}\n",
                root.display()
            ),
        )
        .expect("valid");
        let web = &config.services[0];
        assert_eq!(web.log_max_bytes, 1024 * 1024);
        assert!(web.autostart);
        assert_eq!(web.stop_timeout_ms, 5_000);
        assert_eq!(web.health, None);
        assert_eq!(
            web.log_path(&config.state_dir),
            dir.path().join("state/services/web-1.log")
        );
        let api = &config.services[1];
        assert!(!api.autostart);
        assert_eq!(api.env["A"], "1");
        assert_eq!(api.log_path(&config.state_dir), root.join("logs/api.log"));
        assert_eq!(
            api.health.as_ref().map(|h| h.check("api.v2")),
            Some(HealthcheckConfig::Http {
                name: "api.v2".into(),
                url: "http://127.0.0.1:1/healthz".into(),
                expect_status: 200,
                timeout_ms: 2_000,
            })
        );
        let err = toml::from_str::<HubFile>(
            "[[services]]\nname = \"a\"\nargv = [\"x\"]\nshell = \"sh\"\n",
        )
        .expect_err("unknown field");
        assert!(err.to_string().contains("unknown field"), "{err}");
    }

    #[test]
    fn service_names_are_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        for bad in ["", "Web", "-a", "a b", "a/b", &"a".repeat(65)] {
            let m = invalid(
                dir.path(),
                &format!("[[services]]\nname = \"{bad}\"\nargv = [\"x\"]\n"),
            );
            assert!(
                m.contains(&format!("`{bad}`")) && m.contains("[a-z0-9]"),
                "{m}"
            );
        }
        for good in ["a", "0", "a_b.c-d", &"a".repeat(64)] {
            assert!(valid_service_name(good), "{good}");
        }
        let m = invalid(
            dir.path(),
            "[[services]]\nname = \"a\"\nargv = [\"x\"]\n[[services]]\nname = \"a\"\nargv = [\"y\"]\n",
        );
        assert!(m.contains("two services are named `a`"), "{m}");
    }

    #[test]
    fn service_values_are_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (extra, expect) in [
            ("argv = []", "service `s` has an empty argv"),
            ("argv = [\"\"]", "service `s` has an empty argv"),
            (
                "argv = [\"x\"]\nprofiling_argv = []",
                "empty profiling_argv",
            ),
            (
                "argv = [\"x\"]\nlog_max_bytes = 10",
                "log_max_bytes must be at least 1024",
            ),
            (
                "argv = [\"x\"]\nstop_timeout_ms = 0",
                "stop_timeout_ms must be between 1",
            ),
            (
                "argv = [\"x\"]\nenv = { \"A=B\" = \"1\" }",
                "env name `A=B`",
            ),
            (
                "argv = [\"x\"]\nhealth = { kind = \"command\", argv = [] }",
                "the health check has an empty argv",
            ),
        ] {
            let m = invalid(
                dir.path(),
                &format!("[[services]]\nname = \"s\"\n{extra}\n"),
            );
            assert!(m.contains(expect), "{extra}: {m}");
        }
    }

    #[test]
    fn service_paths_must_lie_under_the_state_dir_or_a_declared_root() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state");
        let root = dir.path().join("apps");
        let outside = dir.path().join("elsewhere");
        let service =
            |extra: &str| format!("[[services]]\nname = \"svc\"\nargv = [\"x\"]\n{extra}\n");
        // Under the state dir or a declared root: fine.
        with_services(
            dir.path(),
            &service(&format!("cwd = \"{}/work\"", state.display())),
        )
        .expect("under the state dir");
        with_services(
            dir.path(),
            &format!(
                "allowed_roots = [\"{}\"]\n{}",
                root.display(),
                service(&format!(
                    "cwd = \"{0}\"\nlog_file = \"{0}/svc.log\"",
                    root.display()
                ))
            ),
        )
        .expect("under a declared root");
        // Elsewhere: refused, naming the service, the field and the path.
        for (field, path) in [
            ("cwd", outside.clone()),
            ("log_file", outside.join("svc.log")),
        ] {
            let m = invalid(
                dir.path(),
                &format!(
                    "allowed_roots = [\"{}\"]\n{}",
                    root.display(),
                    service(&format!("{field} = \"{}\"", path.display()))
                ),
            );
            assert!(
                m.contains(&format!("service `svc`: {field} `{}`", path.display()))
                    && m.contains("outside")
                    && m.contains(&root.display().to_string()),
                "{m}"
            );
        }
        for (path, expect) in [
            (
                format!("{}/../elsewhere", state.display()),
                "must not contain `..`",
            ),
            ("relative/dir".to_owned(), "must be an absolute path"),
        ] {
            let m = invalid(dir.path(), &service(&format!("cwd = \"{path}\"")));
            assert!(
                m.contains("service `svc`: cwd") && m.contains(expect),
                "{m}"
            );
        }
        // A symbolic link under the state dir that leads out is refused too.
        std::fs::create_dir_all(&state).expect("state");
        std::fs::create_dir_all(&outside).expect("outside");
        std::os::unix::fs::symlink(&outside, state.join("link")).expect("symlink");
        let m = invalid(
            dir.path(),
            &service(&format!("log_file = \"{}/link/svc.log\"", state.display())),
        );
        assert!(
            m.contains("service `svc`: log_file") && m.contains("resolves to"),
            "{m}"
        );
        // Roots must be absolute; allowed tests are confined too; logs are not shared.
        let m = invalid(dir.path(), "allowed_roots = [\"apps\"]\n");
        assert!(m.contains("allowed_roots: `apps`"), "{m}");
        let m = invalid(
            dir.path(),
            &format!(
                "[[skill.allowed_tests]]\nname = \"t\"\nargv = [\"true\"]\ncwd = \"{}\"\n",
                outside.display()
            ),
        );
        assert!(
            m.contains("allowed test `t`: cwd") && m.contains("outside"),
            "{m}"
        );
        let log = format!("log_file = \"{}/same.log\"", state.display());
        let m = invalid(
            dir.path(),
            &format!(
                "{}[[services]]\nname = \"other\"\nargv = [\"x\"]\n{log}\n",
                service(&log)
            ),
        );
        assert!(
            m.contains("services `svc` and `other` share the log file"),
            "{m}"
        );
    }
}
