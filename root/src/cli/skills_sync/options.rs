//! What a sync is given (arguments, token source, budgets, options) and what it answers (its
//! report, its errors).

use super::catalog::ValidCatalog;
use crate::skill_catalog as rules;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// Default owned namespace below `--dest`.
pub(crate) const DEFAULT_NAMESPACE: &str = "mcp_root_platform";
/// The sentinel file inside the namespace: the installed catalog revision.
pub const SENTINEL: &str = ".mcp-root-catalog.json";

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct SyncArgs {
    /// The root's MCP endpoint, e.g. http://127.0.0.1:8700/mcp.
    #[arg(long)]
    pub(crate) url: String,
    /// Environment variable that holds the lease bearer (re-read once on a 401).
    #[arg(
        long,
        required_unless_present = "token_file",
        conflicts_with = "token_file"
    )]
    pub(crate) token_env: Option<String>,
    /// File that holds the lease bearer (re-read once on a 401).
    #[arg(long)]
    pub(crate) token_file: Option<PathBuf>,
    /// Directory holding the namespaces, e.g. .agents/skills.
    #[arg(long)]
    pub(crate) dest: PathBuf,
    /// The owned namespace below DEST (snake_case); replaced whole.
    #[arg(long, default_value = DEFAULT_NAMESPACE)]
    pub(crate) namespace: String,
    /// URI scheme of the catalog (the root's `skill_catalog.scheme`).
    #[arg(long, default_value = rules::DEFAULT_SCHEME)]
    pub(crate) scheme: String,
    /// Discover and validate, print what would change, write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[arg(long)]
    pub(crate) json: bool,
    /// PEM CA bundle added to the trust store, for a root whose certificate a private CA
    /// issued; needs an https:// URL.
    #[arg(long, env = "MCP_ROOT_CA_FILE")]
    pub(crate) ca_file: Option<PathBuf>,
    /// Per-request connect budget in milliseconds (tests shorten it).
    #[arg(long, hide = true, default_value_t = 5_000)]
    pub(crate) connect_timeout_ms: u64,
    /// Per-request read budget in milliseconds.
    #[arg(long, hide = true, default_value_t = 120_000)]
    pub(crate) read_timeout_ms: u64,
    /// Per-request total budget in milliseconds.
    #[arg(long, hide = true, default_value_t = 125_000)]
    pub(crate) total_timeout_ms: u64,
}

/// Where the bearer comes from; read at start and once more after a 401.
#[derive(Debug, Clone)]
pub enum TokenSource {
    Env(String),
    File(PathBuf),
}

impl TokenSource {
    pub(super) fn read(&self) -> Result<String, SyncError> {
        let raw = match self {
            TokenSource::Env(var) => std::env::var(var)
                .map_err(|_| SyncError::Token(format!("environment variable {var} is not set")))?,
            TokenSource::File(path) => std::fs::read_to_string(path).map_err(|e| {
                SyncError::Token(format!("cannot read token file {}: {e}", path.display()))
            })?,
        };
        let token = raw.trim().to_string();
        if token.is_empty() {
            return Err(SyncError::Token("the token source is empty".into()));
        }
        Ok(token)
    }
}

/// The per-request time budget.
#[derive(Debug, Clone, Copy)]
pub struct Budgets {
    pub connect: Duration,
    pub read: Duration,
    pub total: Duration,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            connect: Duration::from_secs(5),
            read: Duration::from_secs(120),
            total: Duration::from_secs(125),
        }
    }
}

/// Everything a sync needs.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    pub url: String,
    pub token: TokenSource,
    pub dest: PathBuf,
    pub namespace: String,
    pub scheme: String,
    pub dry_run: bool,
    pub budgets: Budgets,
    /// PEM CA bundle trusted in addition to the system's roots (`--ca-file`).
    pub ca_file: Option<PathBuf>,
}

/// Why a catalog was refused. Each variant names the resource and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillCatalogError {
    #[error("the server lists no ontology resource `{0}`")]
    MissingOntology(String),
    #[error("`{0}` is listed twice")]
    DuplicateUri(String),
    #[error("`{uri}`: {why}")]
    Ontology { uri: String, why: String },
    #[error(
        "unsupported catalog manifest version {found} (this client supports {supported:?}); update mcp-root"
    )]
    UnsupportedVersion { found: u64, supported: Vec<u64> },
    #[error("`{0}` is listed under the skill prefix but not declared by the ontology")]
    Undeclared(String),
    #[error("`{0}` is declared by the ontology but not listed")]
    Missing(String),
    #[error("`{uri}`: {why}")]
    Resource { uri: String, why: String },
    #[error("manifest revisions differ: `{uri}` says {field} `{found}`, the ontology `{expected}`")]
    Mixed {
        uri: String,
        field: &'static str,
        found: String,
        expected: String,
    },
    #[error("`{first}` and `{second}` resolve to the same or nested destination `{path}`")]
    Collision {
        first: String,
        second: String,
        path: String,
    },
}

/// Why a sync failed; nothing was installed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("bad arguments: {0}")]
    Args(String),
    #[error("token: {0}")]
    Token(String),
    #[error("{request}: no answer within the {budget_ms} ms request budget")]
    Timeout { request: String, budget_ms: u128 },
    #[error("{request}: the server refused the token (401), also after re-reading it once")]
    Unauthorized { request: String },
    #[error(
        "{request}: the root's TLS certificate was not accepted ({detail}); give --ca-file the \
         PEM bundle of the CA that issued it"
    )]
    Tls { request: String, detail: String },
    #[error("{request}: {reason}")]
    Request { request: String, reason: String },
    #[error("catalog refused, nothing installed: {0}")]
    Catalog(#[from] SkillCatalogError),
    #[error("cannot install into {path}: {reason}")]
    Install { path: String, reason: InstallError },
}

/// Why the namespace could not be read, staged or swapped in (the old tree is left as it was,
/// unless a rollback failed too, which names where it is).
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("exists and is not a directory (or is a symbolic link)")]
    NotADirectory,
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("moving the old tree aside: {0}")]
    MoveAside(std::io::Error),
    #[error("swapping in the new tree: {0}; rolled back")]
    RolledBack(std::io::Error),
    #[error(
        "swapping in the new tree: {swap}; rollback failed too ({rollback}); the old tree is at {}",
        .backup.display()
    )]
    RollbackFailed {
        swap: std::io::Error,
        rollback: std::io::Error,
        backup: std::path::PathBuf,
    },
}

/// What a sync did (or, dry, would do).
#[derive(Debug, Clone, Serialize)]
pub struct SyncReport {
    pub(crate) namespace: String,
    pub dry_run: bool,
    /// False when the namespace already held exactly this catalog.
    pub changed: bool,
    pub catalog: ValidCatalog,
    /// Files below the namespace that the new catalog no longer has.
    pub(crate) removed: Vec<String>,
    /// How many times the token was re-read after a 401.
    pub renewals: u32,
}
