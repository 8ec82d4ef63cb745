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

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ReadResourceRequestParams};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::skill_catalog::{self as rules};

pub mod catalog;
mod client;
mod install;
pub(crate) mod options;
#[cfg(test)]
mod tests;

pub use catalog::*;
use catalog::{listed_of, read_of};
pub use client::RenewingHttp;
use client::{TokenState, bounded};
pub use options::*;

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
            .ok_or_else(|| SkillCatalogError::Missing(uri.clone()))?;
        pairs.push((listed, read(uri.clone()).await?));
    }
    Ok(validate(scheme, (&ontology, &o_read), &declared, &pairs)?)
}

/// `mcp-root skills sync`.
pub(crate) async fn main(args: SyncArgs) -> anyhow::Result<ExitCode> {
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
