//! `mcp-root skills sync`: installs a root's platform skill catalog into a repository, as the
//! skill catalog ADR (`../shared/seeds/002_…`) prescribes for its SDK client.
//!
//! Discovery, exactly in the ADR's order: initialize with this binary's version; follow
//! `resources/list` pagination and index the resources by URI; ignore everything but the exact
//! ontology URI and the skill prefix; read the ontology first and take its `skill_resources`
//! as the desired set; require the listed skills to be exactly that set; read only those;
//! validate the whole catalog ([`validate`]) before touching the disk. Then sort by name and
//! URI, stage the namespace next to it, and swap it in (an atomic exchange where the platform
//! has one, otherwise rename-aside with rollback). Any failure leaves `DEST/NAMESPACE` and its
//! sentinel byte for byte as they were. The client keeps only protocol constants
//! ([`crate::skill_catalog`]): no list of concrete skills, no fixed count.
//!
//! Transport: the rmcp client (Streamable HTTP) over a reqwest client configured with the
//! per-request budget (5 s to connect, 120 s to read, 125 s in all; each MCP request is also
//! bounded by the total budget as a whole, renewal and resend included). rmcp has no hook for
//! re-reading a bearer, so [`RenewingHttp`] wraps reqwest's `StreamableHttpClient`: on a 401
//! it re-reads the token source once and resends once; a second 401 fails the sync. An
//! `https://` root is verified with the system's roots plus `--ca-file`'s CA bundle (rustls,
//! aws-lc-rs) and never left for plain HTTP; a certificate it does not accept fails the sync
//! with [`SyncError::Tls`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use base64::Engine;
use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ReadResourceRequestParams};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use serde::Serialize;
use serde_json::{Value, json};

use crate::skill_catalog::{self as rules, ResourceMeta};

mod catalog;
mod client;
mod install;
#[cfg(test)]
mod tests;

pub use catalog::*;
use catalog::{listed_of, read_of};
pub use client::RenewingHttp;
use client::{TokenState, bounded};
pub use install::sentinel_bytes;

/// Default owned namespace below `--dest`.
pub const DEFAULT_NAMESPACE: &str = "mcp_root_platform";
/// The sentinel file inside the namespace: the installed catalog revision.
pub const SENTINEL: &str = ".mcp-root-catalog.json";

#[derive(clap::Args, Debug, Clone)]
pub struct SyncArgs {
    /// The root's MCP endpoint, e.g. http://127.0.0.1:8700/mcp.
    #[arg(long)]
    pub url: String,
    /// Environment variable that holds the lease bearer (re-read once on a 401).
    #[arg(
        long,
        required_unless_present = "token_file",
        conflicts_with = "token_file"
    )]
    pub token_env: Option<String>,
    /// File that holds the lease bearer (re-read once on a 401).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Directory holding the namespaces, e.g. .agents/skills.
    #[arg(long)]
    pub dest: PathBuf,
    /// The owned namespace below DEST (snake_case); replaced whole.
    #[arg(long, default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// URI scheme of the catalog (the root's `skill_catalog.scheme`).
    #[arg(long, default_value = rules::DEFAULT_SCHEME)]
    pub scheme: String,
    /// Discover and validate, print what would change, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
    /// PEM CA bundle added to the trust store, for a root whose certificate a private CA
    /// issued; needs an https:// URL.
    #[arg(long, env = "MCP_ROOT_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// Per-request connect budget in milliseconds (tests shorten it).
    #[arg(long, hide = true, default_value_t = 5_000)]
    pub connect_timeout_ms: u64,
    /// Per-request read budget in milliseconds.
    #[arg(long, hide = true, default_value_t = 120_000)]
    pub read_timeout_ms: u64,
    /// Per-request total budget in milliseconds.
    #[arg(long, hide = true, default_value_t = 125_000)]
    pub total_timeout_ms: u64,
}

/// Where the bearer comes from; read at start and once more after a 401.
#[derive(Debug, Clone)]
pub enum TokenSource {
    Env(String),
    File(PathBuf),
}

impl TokenSource {
    fn read(&self) -> Result<String, SyncError> {
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
pub enum CatalogError {
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
    Catalog(#[from] CatalogError),
    #[error("cannot install into {path}: {reason}")]
    Install { path: String, reason: String },
}

/// What a sync did (or, dry, would do).
#[derive(Debug, Clone, Serialize)]
pub struct SyncReport {
    pub namespace: String,
    pub dry_run: bool,
    /// False when the namespace already held exactly this catalog.
    pub changed: bool,
    pub catalog: ValidCatalog,
    /// Files below the namespace that the new catalog no longer has.
    pub removed: Vec<String>,
    /// How many times the token was re-read after a 401.
    pub renewals: u32,
}

/// Discovers, validates and installs the catalog.
pub async fn sync(opts: &SyncOptions) -> Result<SyncReport, SyncError> {
    if !rules::is_snake(&opts.namespace) {
        return Err(SyncError::Args(format!(
            "--namespace `{}` must be snake_case",
            opts.namespace
        )));
    }
    rules::check_scheme(&opts.scheme).map_err(|e| SyncError::Args(e.to_string()))?;
    // reqwest is built without a default TLS provider; install the process's one (a no-op
    // when the binary or another caller already did).
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let token = Arc::new(TokenState {
        current: std::sync::Mutex::new(opts.token.read()?),
        source: opts.token.clone(),
        renewals: AtomicU32::new(0),
        refused: Default::default(),
    });
    let https = opts.url.starts_with("https://");
    // An https root is never left for plain HTTP (not even by a redirect).
    let mut http = reqwest::Client::builder()
        .connect_timeout(opts.budgets.connect)
        .read_timeout(opts.budgets.read)
        .timeout(opts.budgets.total)
        .pool_max_idle_per_host(0)
        .https_only(https);
    if let Some(path) = &opts.ca_file {
        if !https {
            return Err(SyncError::Args(format!(
                "--ca-file needs an https:// --url, not `{}`: the bearer is never sent in \
                 plaintext to a root that is meant to be verified",
                opts.url
            )));
        }
        let certs = crate::net::tls_client::load_ca_bundle(path)
            .map_err(|e| SyncError::Args(format!("--ca-file: {e}")))?;
        http = http.tls_certs_merge(certs);
    }
    let http = http
        .build()
        .map_err(|e| SyncError::Args(format!("HTTP client: {e}")))?;
    let client = RenewingHttp {
        http,
        token: token.clone(),
    };
    let transport = StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(opts.url.clone()),
    );
    let info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("mcp-root skills sync", env!("CARGO_PKG_VERSION")),
    );
    let budgets = opts.budgets;
    // A request that failed because the renewed token was refused too says so.
    let refused = |e: SyncError| match e {
        SyncError::Request { request, .. } if token.refused.load(Ordering::Relaxed) => {
            SyncError::Unauthorized { request }
        }
        other => other,
    };
    let service = bounded(&budgets, "initialize", info.serve(transport))
        .await
        .map_err(refused)?;
    let result = discover(&service, &budgets, &opts.scheme).await;
    let _ = tokio::time::timeout(budgets.connect, service.cancel()).await;
    let catalog = result.map_err(refused)?;
    let report = install::install(opts, catalog, token.renewals.load(Ordering::Relaxed))?;
    Ok(report)
}

async fn discover(
    service: &rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>,
    budgets: &Budgets,
    scheme: &str,
) -> Result<ValidCatalog, SyncError> {
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        pages += 1;
        if pages > 10_000 {
            return Err(SyncError::Request {
                request: "resources/list".into(),
                reason: "more than 10000 pages".into(),
            });
        }
        let params = cursor
            .clone()
            .map(|c| rmcp::model::PaginatedRequestParams::default().with_cursor(Some(c)));
        let page = bounded(budgets, "resources/list", service.list_resources(params)).await?;
        listed.extend(page.resources.iter().map(listed_of));
        match page.next_cursor {
            Some(next) if !next.is_empty() => {
                if cursor.as_deref() == Some(next.as_str()) {
                    return Err(SyncError::Request {
                        request: "resources/list".into(),
                        reason: "the server repeated a cursor".into(),
                    });
                }
                cursor = Some(next);
            }
            _ => break,
        }
    }
    let (ontology, skills) = select(scheme, listed)?;
    let read = |uri: String| async move {
        let res = bounded(
            budgets,
            &format!("resources/read {uri}"),
            service.read_resource(ReadResourceRequestParams::new(uri.clone())),
        )
        .await?;
        Ok::<Read, SyncError>(read_of(&uri, res)?)
    };
    let o_read = read(ontology.uri.clone()).await?;
    let declared = declared(scheme, &ontology, &o_read)?;
    match_declared(&declared, &skills)?;
    let mut pairs = Vec::new();
    for (_, uri) in &declared {
        let listed = skills
            .get(uri)
            .cloned()
            .ok_or_else(|| CatalogError::Missing(uri.clone()))?;
        pairs.push((listed, read(uri.clone()).await?));
    }
    Ok(validate(scheme, (&ontology, &o_read), &declared, &pairs)?)
}

/// `mcp-root skills sync`.
pub async fn main(args: SyncArgs) -> anyhow::Result<ExitCode> {
    let token = match (&args.token_env, &args.token_file) {
        (Some(var), _) => TokenSource::Env(var.clone()),
        (None, Some(f)) => TokenSource::File(f.clone()),
        (None, None) => anyhow::bail!("--token-env VAR or --token-file FILE is required"),
    };
    let opts = SyncOptions {
        url: args.url.clone(),
        token,
        dest: args.dest.clone(),
        namespace: args.namespace.clone(),
        scheme: args.scheme.clone(),
        dry_run: args.dry_run,
        budgets: Budgets {
            connect: Duration::from_millis(args.connect_timeout_ms),
            read: Duration::from_millis(args.read_timeout_ms),
            total: Duration::from_millis(args.total_timeout_ms),
        },
        ca_file: args.ca_file.clone(),
    };
    let report = sync(&opts).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let verb = match (report.dry_run, report.changed) {
            (true, true) => "would install",
            (true, false) | (false, false) => "up to date:",
            (false, true) => "installed",
        };
        println!(
            "{verb} {} skills into {} (catalog revision {})",
            report.catalog.skills.len(),
            args.dest.join(&report.namespace).display(),
            report.catalog.manifest_sha256
        );
        for s in &report.catalog.skills {
            println!("  {}  {}  {}", s.name, s.path, s.uri);
        }
        for r in &report.removed {
            println!(
                "  {} {r}",
                if report.dry_run {
                    "would remove"
                } else {
                    "removed"
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
