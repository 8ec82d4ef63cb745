//! The hub's static configuration: a TOML file (`deny_unknown_fields`) plus command-line
//! overrides, validated once into [`HubConfig`].
//!
//! Every field of the file is optional so that a hub can start from flags alone; what is
//! still missing after the merge is reported in one error that names every missing field.
//! That is why the top level is declared twice: [`HubFile`] as written, [`HubConfig`] as
//! resolved and validated. Each section is declared once, in a file of its own:
//! [`transport`] (root URLs, `[reconnect]`), [`skill`] (`[skill]`, `[[skill.allowed_tests]]`),
//! [`health`] (`[[skill.healthchecks]]`, a service's `health`), [`commands`]
//! (`[[skill.commands]]`), [`services`] (`[[services]]`, `allowed_roots`), [`profiling`],
//! [`deploy`], [`logs`] (`[[log_sources]]`, `[redaction]`), [`nlu`]; `[tls]` is
//! [`crate::link::tls`]. [`HubConfig::validate`] runs the sections' checks in a fixed order.

mod commands;
mod deploy;
mod error;
mod health;
mod logs;
mod nlu;
mod paths;
mod profiling;
mod services;
mod skill;
mod transport;
mod validate;

#[cfg(test)]
mod config_tests;

use std::path::{Path, PathBuf};

use mcp_shared::target::WriteScope;
use serde::Deserialize;

pub use crate::skill::adapters::decl::Provided;

pub use crate::link::tls::HubTlsConfig;
pub use commands::{CommandAdapterConfig, MAX_COMMAND_TIMEOUT_MS, valid_tool_id};
pub use deploy::{DEPLOY_MIRROR_DIR, DeployConfig};
pub use error::HubConfigError;
pub use health::{HealthcheckConfig, ServiceHealthConfig};
pub use logs::{
    HUB_STREAM, LogSourceConfig, MAX_LOG_SOURCE_NAME, RedactionConfig, TelemetryConfig,
    valid_log_source_name,
};
pub use nlu::NluConfig;
use paths::{absolute, has_parent_component, resolved};
pub use profiling::{MAX_ARTIFACT_INLINE_BYTES, MAX_CONCURRENT_SESSIONS, ProfilingConfig};
pub use services::{
    HeapFormat, HeapProfilesConfig, MAX_SERVICE_NAME, MAX_SNAPSHOT_BYTES,
    MAX_SNAPSHOTS_PER_SESSION, MAX_STOP_TIMEOUT_MS, MIN_LOG_MAX_BYTES, SERVICES_DIR, ServiceConfig,
    valid_service_name,
};
pub use skill::{AllowedTestConfig, MAX_TEST_NAME, SkillConfig};
pub use transport::{CONNECT_PATH, ReconnectConfig, connect_url_of};

fn default_token_reload_interval_ms() -> u64 {
    2_000
}

/// The configuration file as written; everything optional.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HubFile {
    /// The target this hub serves (`hub:<name>`), as enrolled on root.
    pub target_id: Option<String>,
    /// Its environment (`test`, `staging`, `production`…), as enrolled.
    pub environment: Option<String>,
    /// Its subnet (default `default`).
    pub subnet: Option<String>,
    /// Its zone (default: root's).
    pub zone: Option<String>,
    /// The root to dial (`https://…` or, on loopback, `http://…`).
    pub root_url: Option<String>,
    /// Several roots of one zone (replicas), tried in order; the hub moves to the next when a
    /// connection fails or ends. `root_url`, when also set, is tried first.
    #[serde(default)]
    pub root_urls: Vec<String>,
    /// The hub token `admin hub enroll` printed (prefer `token_file`).
    pub token: Option<String>,
    /// A file holding the hub token, readable by the hub's user only (mode 0600).
    pub token_file: Option<PathBuf>,
    /// Where the hub keeps its state: the write ledger, test results, deploys, profiles.
    pub state_dir: Option<PathBuf>,
    /// Where writes may happen here: `none` or `test-only` (the hub's own final word).
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
    /// `[telemetry]`: OpenTelemetry traces (off unless an endpoint is set here or in
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`).
    #[serde(default)]
    pub telemetry: TelemetryConfig,
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

/// What a configuration with these sections gives the built-in adapters to serve.
fn provided(skill: &SkillConfig, services: &[ServiceConfig], deploy: bool, nlu: bool) -> Provided {
    Provided {
        healthchecks: !skill.healthchecks.is_empty() || services.iter().any(|s| s.health.is_some()),
        allowed_tests: !skill.allowed_tests.is_empty(),
        services: !services.is_empty(),
        deploy,
        nlu,
    }
}

impl HubConfig {
    /// What this configuration gives the built-in adapters to serve.
    pub fn provided(&self) -> Provided {
        provided(
            &self.skill,
            &self.services,
            self.deploy.is_some(),
            self.nlu.is_some(),
        )
    }
}

/// The reference page of the hub's configuration file (`docs/hub-configuration.md`),
/// generated from [`HubFile`] and its doc comments (`mcp_shared::reference`).
pub fn reference() -> String {
    let schema = serde_json::to_value(schemars::schema_for!(HubFile)).unwrap_or_default();
    mcp_shared::reference::render(
        &schema,
        "Hub configuration reference",
        "Every key of the hub's configuration file (`mcp-hub run --config hub.toml`; flags and \
         `MCP_HUB_*` variables override the top-level ones), with its type, default and \
         meaning. Generated from the configuration types (`mcp_hub::config::reference`); a \
         test keeps this page equal to them (`MCP_UPDATE_DOCS=1 cargo test -p mcp-tests --test \
         integration -- ops::docs` writes it again). An unknown key stops the hub at start.",
    )
}

impl HubFile {
    /// What this configuration gives the built-in adapters to serve.
    pub fn provided(&self) -> Provided {
        provided(
            &self.skill,
            &self.services,
            self.deploy.is_some(),
            self.nlu.is_some(),
        )
    }

    /// Reads and parses a configuration file.
    pub fn load(path: &Path) -> Result<HubFile, HubConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| HubConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let file: HubFile = toml::from_str(&text).map_err(|source| HubConfigError::Parse {
            path: path.to_owned(),
            source: Box::new(source),
        })?;
        // A file with an inline token is a secret file.
        if file.token.is_some() {
            crate::link::tls::check_private_file(path)?;
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
    pub fn resolve(self) -> Result<HubConfig, HubConfigError> {
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
            return Err(HubConfigError::Missing(missing));
        };
        if !missing.is_empty() {
            return Err(HubConfigError::Missing(missing));
        }
        let token_file = self.token_file.clone();
        let token = match (self.token, self.token_file) {
            (Some(_), Some(_)) => {
                return Err(HubConfigError::Invalid(
                    "set token or token_file, not both".into(),
                ));
            }
            (Some(t), None) => t,
            (None, Some(path)) => read_token_file(&path)?,
            (None, None) => return Err(HubConfigError::Missing(vec!["token"])),
        };
        if token.is_empty() {
            return Err(HubConfigError::Invalid("the hub token is empty".into()));
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
            telemetry: self.telemetry,
            nlu: self.nlu,
            token_file,
            tls: self.tls,
            insecure_plaintext: self.insecure_plaintext,
            token_reload_interval_ms: self
                .token_reload_interval_ms
                .unwrap_or_else(default_token_reload_interval_ms),
            protocol_features: None,
        };
        config.validate()?;
        Ok(config)
    }
}

/// Reads a hub token file (refused when group or others may read it), trimmed.
pub fn read_token_file(path: &Path) -> Result<String, HubConfigError> {
    crate::link::tls::check_private_file(path)?;
    Ok(std::fs::read_to_string(path)
        .map_err(|source| HubConfigError::Read {
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
    pub telemetry: TelemetryConfig,
    pub nlu: Option<NluConfig>,
    /// Where the token came from, if a file: watched for a new token (key rotation).
    pub token_file: Option<PathBuf>,
    pub tls: HubTlsConfig,
    pub insecure_plaintext: bool,
    pub token_reload_interval_ms: u64,
    /// The protocol features this hub announces, when not all it understands (never from a
    /// file: a test's hub of an earlier build).
    pub protocol_features: Option<Vec<String>>,
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
            .field("protocol_features", &self.protocol_features)
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
            telemetry: TelemetryConfig::default(),
            nlu: None,
            token_file: None,
            tls: HubTlsConfig::default(),
            insecure_plaintext: false,
            token_reload_interval_ms: default_token_reload_interval_ms(),
            protocol_features: None,
        }
    }

    /// Loads `path` (if any), applies `overrides` and validates.
    pub fn load(path: Option<&Path>, overrides: &Overrides) -> Result<HubConfig, HubConfigError> {
        let mut file = match path {
            Some(p) => HubFile::load(p)?,
            None => HubFile::default(),
        };
        file.apply(overrides);
        file.resolve()
    }

    /// Checks values that parse but cannot work (the sections in a fixed order: the first
    /// problem found is the one reported).
    pub fn validate(&self) -> Result<(), HubConfigError> {
        self.connect_urls()?;
        crate::link::tls::validate(&self.tls)?;
        self.validate_adapter_limits()?;
        self.reconnect.validate()?;
        self.validate_healthchecks()?;
        self.validate_allowed_tests()?;
        self.validate_services()?;
        self.validate_commands()?;
        self.profiling.validate()?;
        self.validate_deploy()?;
        self.validate_log_sources()?;
        self.validate_nlu()
    }

    /// `path`, or `state_dir/path` when it is relative.
    pub fn under_state_dir(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_owned()
        } else {
            self.state_dir.join(path)
        }
    }

    /// `path` must be absolute (or start with a relative state directory), free of `..`, and
    /// lie under the state directory or a declared root — and, when it exists, so must the
    /// path it resolves to (symbolic links cannot lead out).
    fn check_confined(&self, what: &str, path: &Path) -> Result<(), HubConfigError> {
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
            return Err(HubConfigError::Invalid(format!(
                "{what} `{}` must not contain `..`",
                path.display()
            )));
        }
        if !path.is_absolute() && !path.starts_with(&self.state_dir) {
            return Err(HubConfigError::Invalid(format!(
                "{what} `{}` must be an absolute path",
                path.display()
            )));
        }
        let full = absolute(path);
        if !roots.iter().any(|r| full.starts_with(r)) {
            return Err(HubConfigError::Invalid(format!(
                "{what} `{}` lies outside the state directory and the declared roots ({}); add a root to allowed_roots",
                path.display(),
                shown()
            )));
        }
        // What exists must not lead elsewhere through a symbolic link.
        let real = resolved(&full);
        if !roots.iter().any(|r| real.starts_with(resolved(r))) {
            return Err(HubConfigError::Invalid(format!(
                "{what} `{}` resolves to `{}`, outside the state directory and the declared roots ({})",
                path.display(),
                real.display(),
                shown()
            )));
        }
        Ok(())
    }
}
