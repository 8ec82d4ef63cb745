//! The hub's static configuration: a TOML file (`deny_unknown_fields`) plus command-line
//! overrides, validated once into [`HubConfig`].
//!
//! Every field of the file is optional so that a hub can start from flags alone; what is
//! still missing after the merge is reported in one error that names every missing field.

use std::path::{Path, PathBuf};

use mcp_shared::target::WriteScope;
use serde::Deserialize;

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

/// `infra_access_skill` settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillConfig {
    #[serde(default)]
    pub healthchecks: Vec<HealthcheckConfig>,
    /// Tests `hub.run_allowed_tests` may run, by name; nothing else can be run.
    #[serde(default)]
    pub allowed_tests: Vec<AllowedTestConfig>,
    /// Calls one adapter runs at once; more are refused with `busy`.
    #[serde(default = "default_adapter_concurrency")]
    pub adapter_concurrency: usize,
    /// TEST ONLY: lets `hub.get_status` take `{"fault": "panic" | "hang"}` so tests can prove
    /// panic containment and deadlines. Never set on a real target.
    #[serde(default)]
    pub test_faults: bool,
}

impl Default for SkillConfig {
    fn default() -> Self {
        SkillConfig {
            healthchecks: Vec::new(),
            allowed_tests: Vec::new(),
            adapter_concurrency: default_adapter_concurrency(),
            test_faults: false,
        }
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
    pub token: Option<String>,
    pub token_file: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub write_scope: Option<WriteScope>,
    #[serde(default)]
    pub reconnect: ReconnectConfig,
    #[serde(default)]
    pub skill: SkillConfig,
}

impl HubFile {
    /// Reads and parses a configuration file.
    pub fn load(path: &Path) -> Result<HubFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source: Box::new(source),
        })
    }

    /// Applies command-line overrides (a flag wins over the file).
    pub fn apply(&mut self, o: &Overrides) {
        fn set<T: Clone>(slot: &mut Option<T>, v: &Option<T>) {
            if let Some(v) = v {
                *slot = Some(v.clone());
            }
        }
        set(&mut self.root_url, &o.root_url);
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
        let root_url = non_empty(self.root_url);
        if target_id.is_none() {
            missing.push("target_id (--target)");
        }
        if environment.is_none() {
            missing.push("environment (--environment)");
        }
        if root_url.is_none() {
            missing.push("root_url (--root-url)");
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
        let token = match (self.token, self.token_file) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::Invalid(
                    "set token or token_file, not both".into(),
                ));
            }
            (Some(t), None) => t,
            (None, Some(path)) => std::fs::read_to_string(&path)
                .map_err(|source| ConfigError::Read { path, source })?
                .trim()
                .to_owned(),
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
            token,
            state_dir,
            write_scope: self.write_scope.unwrap_or(WriteScope::None),
            reconnect: self.reconnect,
            skill: self.skill,
        };
        config.validate()?;
        Ok(config)
    }
}

/// Command-line overrides of [`HubFile`] fields.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Overrides {
    /// Root's http(s) or ws(s) URL.
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
    /// Root's base URL (http, https, ws or wss).
    pub root_url: String,
    /// The enrolment token; sent in `hello` and the source of the call-signing key.
    pub token: String,
    pub state_dir: PathBuf,
    pub write_scope: WriteScope,
    pub reconnect: ReconnectConfig,
    pub skill: SkillConfig,
}

impl std::fmt::Debug for HubConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubConfig")
            .field("target_id", &self.target_id)
            .field("environment", &self.environment)
            .field("subnet", &self.subnet)
            .field("zone", &self.zone)
            .field("root_url", &self.root_url)
            .field("token", &"<redacted>")
            .field("state_dir", &self.state_dir)
            .field("write_scope", &self.write_scope)
            .field("reconnect", &self.reconnect)
            .field("skill", &self.skill)
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
            token: token.into(),
            state_dir: state_dir.into(),
            write_scope: WriteScope::None,
            reconnect: ReconnectConfig::default(),
            skill: SkillConfig::default(),
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
        self.connect_url()?;
        if self.skill.adapter_concurrency == 0 {
            return Err(ConfigError::Invalid(
                "skill.adapter_concurrency must be at least 1".into(),
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
        }
        Ok(())
    }

    /// The WebSocket URL the hub dials: `root_url` with http→ws, https→wss, plus
    /// [`CONNECT_PATH`].
    pub fn connect_url(&self) -> Result<String, ConfigError> {
        let url = self.root_url.trim().trim_end_matches('/');
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
        assert!(!file.skill.test_faults);
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
}
