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

/// A resource as `resources/list` showed it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub uri: String,
    pub name: String,
    pub mime_type: Option<String>,
    pub size: Option<u64>,
    pub meta: Option<Value>,
}

/// A resource as `resources/read` returned it (text, or decoded blob bytes).
#[derive(Debug, Clone)]
pub struct Read {
    pub uri: String,
    pub mime_type: Option<String>,
    pub bytes: Vec<u8>,
    pub meta: Option<Value>,
}

/// One validated skill, ready to install.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ValidSkill {
    pub name: String,
    pub uri: String,
    /// Below the namespace, e.g. `ops/hub_diagnostics/SKILL.md`.
    pub path: String,
    pub content_sha256: String,
    pub size: u64,
    #[serde(skip)]
    pub text: String,
}

/// A validated catalog, sorted by name and URI.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ValidCatalog {
    pub owner_application: String,
    pub manifest_version: u64,
    pub manifest_sha256: String,
    pub skills: Vec<ValidSkill>,
}

/// Steps 2–3 and 6 of discovery: index the listed resources by URI, keep only the ontology
/// and the skill prefix (duplicates there are refused), and require the ontology.
pub fn select(
    scheme: &str,
    listed: Vec<Listed>,
) -> Result<(Listed, BTreeMap<String, Listed>), CatalogError> {
    let ontology_uri = rules::ontology_uri(scheme);
    let prefix = rules::skill_prefix(scheme);
    let mut ontology = None;
    let mut skills = BTreeMap::new();
    for r in listed {
        if r.uri == ontology_uri {
            if ontology.is_some() {
                return Err(CatalogError::DuplicateUri(r.uri));
            }
            ontology = Some(r);
        } else if r.uri.starts_with(&prefix) {
            if skills.contains_key(&r.uri) {
                return Err(CatalogError::DuplicateUri(r.uri));
            }
            skills.insert(r.uri.clone(), r);
        }
    }
    let ontology = ontology.ok_or(CatalogError::MissingOntology(ontology_uri))?;
    Ok((ontology, skills))
}

/// Step 5: the ontology's declared skills `(name, uri)`, sorted by name and URI; the version
/// is checked first, so an unsupported catalog fails with a compatibility error.
pub fn declared(
    scheme: &str,
    listed: &Listed,
    read: &Read,
) -> Result<Vec<(String, String)>, CatalogError> {
    let uri = listed.uri.clone();
    let bad = |why: String| CatalogError::Ontology {
        uri: uri.clone(),
        why,
    };
    let meta = parse_meta(&uri, "read", read.meta.as_ref())?;
    if !rules::SUPPORTED_MANIFEST_VERSIONS.contains(&meta.manifest_version) {
        return Err(CatalogError::UnsupportedVersion {
            found: meta.manifest_version,
            supported: rules::SUPPORTED_MANIFEST_VERSIONS.to_vec(),
        });
    }
    let text = std::str::from_utf8(&read.bytes).map_err(|_| bad("not UTF-8".into()))?;
    let v: Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let list = v
        .as_object()
        .ok_or_else(|| bad("must be a JSON object".into()))?
        .get("skill_resources")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("needs a `skill_resources` array".into()))?;
    let prefix = rules::skill_prefix(scheme);
    let mut names = BTreeSet::new();
    let mut uris = BTreeSet::new();
    let mut out = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let name = item.get("name").and_then(Value::as_str);
        let suri = item.get("uri").and_then(Value::as_str);
        let (Some(name), Some(suri)) = (name, suri) else {
            return Err(bad(format!(
                "skill_resources[{i}] needs string `name` and `uri`"
            )));
        };
        let kebab = suri.strip_prefix(&prefix).ok_or_else(|| {
            bad(format!(
                "skill `{name}`: URI `{suri}` is not under {prefix}"
            ))
        })?;
        let snake =
            rules::kebab_to_snake(kebab).map_err(|e| bad(format!("skill URI `{suri}`: {e}")))?;
        if !rules::is_snake(name) || snake != name {
            return Err(bad(format!(
                "skill `{name}`: the name must be the snake_case of the URI identity `{kebab}`"
            )));
        }
        if !names.insert(name.to_string()) {
            return Err(bad(format!("duplicate skill name `{name}`")));
        }
        if !uris.insert(suri.to_string()) {
            return Err(bad(format!("duplicate skill URI `{suri}`")));
        }
        out.push((name.to_string(), suri.to_string()));
    }
    out.sort();
    Ok(out)
}

/// Step 6: the listed skills are exactly the declared ones.
pub fn match_declared(
    declared: &[(String, String)],
    listed: &BTreeMap<String, Listed>,
) -> Result<(), CatalogError> {
    let want: BTreeSet<&str> = declared.iter().map(|(_, u)| u.as_str()).collect();
    if let Some(extra) = listed.keys().find(|u| !want.contains(u.as_str())) {
        return Err(CatalogError::Undeclared(extra.clone()));
    }
    if let Some(missing) = want.iter().find(|u| !listed.contains_key(**u)) {
        return Err(CatalogError::Missing((*missing).to_string()));
    }
    Ok(())
}

fn parse_meta(uri: &str, which: &str, meta: Option<&Value>) -> Result<ResourceMeta, CatalogError> {
    let v = meta
        .and_then(|m| m.get(rules::META_KEY))
        .ok_or_else(|| CatalogError::Resource {
            uri: uri.to_string(),
            why: format!("{which} result has no `_meta.{}`", rules::META_KEY),
        })?;
    serde_json::from_value(v.clone()).map_err(|e| CatalogError::Resource {
        uri: uri.to_string(),
        why: format!("{which} metadata: {e}"),
    })
}

/// Step 8: validates the selected catalog whole. `skills` pairs each declared skill's list
/// entry with its read result, in declared order.
pub fn validate(
    scheme: &str,
    ontology: (&Listed, &Read),
    declared: &[(String, String)],
    skills: &[(Listed, Read)],
) -> Result<ValidCatalog, CatalogError> {
    let (o_list, o_read) = ontology;
    let o_meta = check_resource(o_list, o_read, rules::ONTOLOGY_MIME)?;
    if o_meta.owner_application != rules::OWNER_APPLICATION {
        return Err(CatalogError::Resource {
            uri: o_list.uri.clone(),
            why: format!(
                "owner application `{}` is not `{}`",
                o_meta.owner_application,
                rules::OWNER_APPLICATION
            ),
        });
    }
    rules::check_bundle_path(&o_meta.path).map_err(|e| CatalogError::Resource {
        uri: o_list.uri.clone(),
        why: e.to_string(),
    })?;
    let mut out = Vec::new();
    let mut dirs: Vec<(String, String)> = Vec::new();
    let mut paths = BTreeSet::new();
    for (name, uri) in declared {
        let Some((listed, read)) = skills.iter().find(|(l, _)| &l.uri == uri) else {
            return Err(CatalogError::Missing(uri.clone()));
        };
        let bad = |why: String| CatalogError::Resource {
            uri: uri.clone(),
            why,
        };
        let meta = check_resource(listed, read, rules::SKILL_MIME)?;
        for (field, found, expected) in [
            (
                "owner_application",
                &meta.owner_application,
                &o_meta.owner_application,
            ),
            (
                "manifest_sha256",
                &meta.manifest_sha256,
                &o_meta.manifest_sha256,
            ),
        ] {
            if found != expected {
                return Err(CatalogError::Mixed {
                    uri: uri.clone(),
                    field,
                    found: found.clone(),
                    expected: expected.clone(),
                });
            }
        }
        if meta.manifest_version != o_meta.manifest_version {
            return Err(CatalogError::Mixed {
                uri: uri.clone(),
                field: "manifest_version",
                found: meta.manifest_version.to_string(),
                expected: o_meta.manifest_version.to_string(),
            });
        }
        if meta.owner_application != rules::OWNER_APPLICATION {
            return Err(bad(format!(
                "owner application `{}` is not `{}`",
                meta.owner_application,
                rules::OWNER_APPLICATION
            )));
        }
        if &listed.name != name {
            return Err(bad(format!(
                "listed name `{}` is not `{name}`",
                listed.name
            )));
        }
        let install = rules::check_skill_path(&meta.path).map_err(|e| bad(e.to_string()))?;
        let text = String::from_utf8(read.bytes.clone())
            .map_err(|_| bad("content is not UTF-8".into()))?;
        let kebab = uri
            .strip_prefix(&rules::skill_prefix(scheme))
            .unwrap_or_default();
        let fm = rules::parse_front_matter(&text).map_err(|e| bad(e.to_string()))?;
        if fm.name != kebab {
            return Err(bad(format!(
                "front matter name `{}` does not match the URI identity `{kebab}`",
                fm.name
            )));
        }
        if !paths.insert(install.to_ascii_lowercase()) {
            return Err(CatalogError::Collision {
                first: uri.clone(),
                second: uri.clone(),
                path: install,
            });
        }
        dirs.push((rules::skill_dir(&install).to_string(), uri.clone()));
        out.push(ValidSkill {
            name: name.clone(),
            uri: uri.clone(),
            path: install,
            content_sha256: meta.content_sha256.clone(),
            size: meta.size,
            text,
        });
    }
    // Unique destinations: no two skills in the same (or a nested) directory, ignoring case.
    let mut sorted: Vec<(String, String)> = dirs
        .into_iter()
        .map(|(d, u)| (d.to_ascii_lowercase(), u))
        .collect();
    sorted.sort();
    for w in sorted.windows(2) {
        if w[0].0 == w[1].0 || w[1].0.starts_with(&format!("{}/", w[0].0)) {
            return Err(CatalogError::Collision {
                first: w[0].1.clone(),
                second: w[1].1.clone(),
                path: w[1].0.clone(),
            });
        }
    }
    out.sort_by(|a, b| (&a.name, &a.uri).cmp(&(&b.name, &b.uri)));
    Ok(ValidCatalog {
        owner_application: o_meta.owner_application,
        manifest_version: o_meta.manifest_version,
        manifest_sha256: o_meta.manifest_sha256,
        skills: out,
    })
}

/// The checks every selected resource passes: metadata on both sides and equal, the MIME
/// type, the read URI, and the actual hash and size of the bytes.
fn check_resource(listed: &Listed, read: &Read, mime: &str) -> Result<ResourceMeta, CatalogError> {
    let uri = &listed.uri;
    let bad = |why: String| CatalogError::Resource {
        uri: uri.clone(),
        why,
    };
    let list_meta = parse_meta(uri, "list", listed.meta.as_ref())?;
    let read_meta = parse_meta(uri, "read", read.meta.as_ref())?;
    if !rules::SUPPORTED_MANIFEST_VERSIONS.contains(&list_meta.manifest_version) {
        return Err(CatalogError::UnsupportedVersion {
            found: list_meta.manifest_version,
            supported: rules::SUPPORTED_MANIFEST_VERSIONS.to_vec(),
        });
    }
    if list_meta != read_meta {
        return Err(bad("list and read metadata differ".into()));
    }
    if read.uri != *uri {
        return Err(bad(format!("read returned URI `{}`", read.uri)));
    }
    for (which, m) in [
        ("list", listed.mime_type.as_deref()),
        ("read", read.mime_type.as_deref()),
        ("metadata", Some(read_meta.mime_type.as_str())),
    ] {
        if m != Some(mime) {
            return Err(bad(format!("{which} MIME type {m:?} is not {mime}")));
        }
    }
    if let Some(size) = listed.size
        && size != read_meta.size
    {
        return Err(bad(format!(
            "listed size {size} is not the metadata size {}",
            read_meta.size
        )));
    }
    if std::str::from_utf8(&read.bytes).is_err() {
        return Err(bad("content is not UTF-8".into()));
    }
    if read.bytes.len() as u64 != read_meta.size {
        return Err(bad(format!(
            "content is {} bytes, the metadata says {}",
            read.bytes.len(),
            read_meta.size
        )));
    }
    let actual = rules::sha256_hex(&read.bytes);
    if actual != read_meta.content_sha256 {
        return Err(bad(format!(
            "content SHA-256 {actual} is not the metadata's {}",
            read_meta.content_sha256
        )));
    }
    Ok(read_meta)
}

// ---- transport ------------------------------------------------------------------------------

/// Renewal state shared by every request of one sync.
struct TokenState {
    source: TokenSource,
    current: std::sync::Mutex<String>,
    renewals: AtomicU32,
    /// Set when a resend after renewal was refused with 401 too.
    refused: std::sync::atomic::AtomicBool,
}

impl TokenState {
    fn current(&self) -> String {
        self.current.lock().map(|t| t.clone()).unwrap_or_default()
    }

    fn renew(&self) -> Result<String, String> {
        let token = self.source.read().map_err(|e| e.to_string())?;
        if let Ok(mut t) = self.current.lock() {
            *t = token.clone();
        }
        self.renewals.fetch_add(1, Ordering::Relaxed);
        Ok(token)
    }
}

/// reqwest's Streamable HTTP client with one token renewal and one resend per request on 401.
#[derive(Clone)]
pub struct RenewingHttp {
    http: reqwest::Client,
    token: Arc<TokenState>,
}

fn is_unauthorized(e: &StreamableHttpError<reqwest::Error>) -> bool {
    match e {
        StreamableHttpError::AuthRequired(_) => true,
        StreamableHttpError::UnexpectedServerResponse(m) => m.starts_with("HTTP 401"),
        StreamableHttpError::Client(e) => e.status() == Some(reqwest::StatusCode::UNAUTHORIZED),
        _ => false,
    }
}

impl StreamableHttpClient for RenewingHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let first = self
            .http
            .post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                Some(self.token.current()),
                custom_headers.clone(),
                limits,
            )
            .await;
        match first {
            Err(e) if is_unauthorized(&e) => {
                let token = self.token.renew().map_err(|why| {
                    StreamableHttpError::UnexpectedServerResponse(
                        format!("HTTP 401 and the token could not be renewed: {why}").into(),
                    )
                })?;
                let second = self
                    .http
                    .post_message_with_response_limits(
                        uri,
                        message,
                        session_id,
                        Some(token),
                        custom_headers,
                        limits,
                    )
                    .await;
                if second.as_ref().err().is_some_and(is_unauthorized) {
                    self.token.refused.store(true, Ordering::Relaxed);
                }
                second
            }
            other => other,
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.http
            .delete_session(uri, session_id, Some(self.token.current()), custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<
        futures::stream::BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>,
        StreamableHttpError<Self::Error>,
    > {
        self.http
            .get_stream(
                uri,
                session_id,
                last_event_id,
                Some(self.token.current()),
                custom_headers,
            )
            .await
    }
}

/// Whether `e` or anything in its source chain is a timeout (reqwest's connect, read or total
/// budget).
fn is_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err
            .downcast_ref::<reqwest::Error>()
            .is_some_and(reqwest::Error::is_timeout)
            || err
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        cur = err.source();
    }
    // Some layers keep only the text of the error they wrap.
    let text = format!("{e:?}");
    text.contains("TimedOut") || text.contains("timed out")
}

/// Runs one MCP request under the total budget.
async fn bounded<T, E: std::error::Error + 'static>(
    budgets: &Budgets,
    request: &str,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, SyncError> {
    let timeout = || SyncError::Timeout {
        request: request.to_string(),
        budget_ms: budgets.total.as_millis(),
    };
    match tokio::time::timeout(budgets.total, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) if is_timeout(&e) => Err(timeout()),
        Ok(Err(e)) => Err(match crate::net::tls_client::tls_failure(&e) {
            Some(detail) => SyncError::Tls {
                request: request.to_string(),
                detail,
            },
            None => SyncError::Request {
                request: request.to_string(),
                reason: e.to_string(),
            },
        }),
        Err(_) => Err(timeout()),
    }
}

fn listed_of(r: &rmcp::model::Resource) -> Listed {
    Listed {
        uri: r.uri.clone(),
        name: r.name.clone(),
        mime_type: r.mime_type.clone(),
        size: r.size,
        meta: r.meta.as_ref().map(|m| Value::Object(m.0.clone())),
    }
}

fn read_of(uri: &str, res: rmcp::model::ReadResourceResult) -> Result<Read, CatalogError> {
    let bad = |why: &str| CatalogError::Resource {
        uri: uri.to_string(),
        why: why.to_string(),
    };
    let [content] = res.contents.as_slice() else {
        return Err(bad("read must return exactly one content item"));
    };
    Ok(match content {
        rmcp::model::ResourceContents::TextResourceContents {
            uri,
            mime_type,
            text,
            meta,
        } => Read {
            uri: uri.clone(),
            mime_type: mime_type.clone(),
            bytes: text.clone().into_bytes(),
            meta: meta.as_ref().map(|m| Value::Object(m.0.clone())),
        },
        rmcp::model::ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            meta,
        } => Read {
            uri: uri.clone(),
            mime_type: mime_type.clone(),
            bytes: base64::engine::general_purpose::STANDARD
                .decode(blob)
                .map_err(|_| bad("blob is not base64"))?,
            meta: meta.as_ref().map(|m| Value::Object(m.0.clone())),
        },
        _ => return Err(bad("unknown content kind")),
    })
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
    let report = install(opts, catalog, token.renewals.load(Ordering::Relaxed))?;
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

// ---- installation ---------------------------------------------------------------------------

/// The sentinel's bytes: the catalog revision and what was installed, deterministic.
pub fn sentinel_bytes(namespace: &str, c: &ValidCatalog) -> Vec<u8> {
    let v = json!({
        "format": "mcp-root-skills-sentinel/1",
        "namespace": namespace,
        "owner_application": c.owner_application,
        "manifest_version": c.manifest_version,
        "manifest_sha256": c.manifest_sha256,
        "skills": c.skills,
    });
    let mut bytes = serde_json::to_vec_pretty(&v).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// Every regular file below `dir` as relative path → bytes (an absent dir is empty).
fn read_tree(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let mut out = BTreeMap::new();
    if !dir.exists() {
        return Ok(out);
    }
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, rel)) = stack.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| e.to_string())? {
            let entry = entry.map_err(|e| e.to_string())?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let kind = entry.file_type().map_err(|e| e.to_string())?;
            if kind.is_dir() {
                stack.push((entry.path(), child));
            } else {
                let bytes = if kind.is_file() {
                    std::fs::read(entry.path()).map_err(|e| e.to_string())?
                } else {
                    Vec::new()
                };
                out.insert(child, bytes);
            }
        }
    }
    Ok(out)
}

fn install(
    opts: &SyncOptions,
    catalog: ValidCatalog,
    renewals: u32,
) -> Result<SyncReport, SyncError> {
    let ns_dir = opts.dest.join(&opts.namespace);
    let ierr = |path: &Path, reason: String| SyncError::Install {
        path: path.display().to_string(),
        reason,
    };
    if let Ok(m) = std::fs::symlink_metadata(&ns_dir)
        && !m.is_dir()
    {
        return Err(ierr(
            &ns_dir,
            "exists and is not a directory (or is a symbolic link)".into(),
        ));
    }
    let mut want: BTreeMap<String, Vec<u8>> = catalog
        .skills
        .iter()
        .map(|s| (s.path.clone(), s.text.clone().into_bytes()))
        .collect();
    want.insert(
        SENTINEL.to_string(),
        sentinel_bytes(&opts.namespace, &catalog),
    );
    let have = read_tree(&ns_dir).map_err(|e| ierr(&ns_dir, e))?;
    let removed: Vec<String> = have
        .keys()
        .filter(|k| !want.contains_key(*k))
        .cloned()
        .collect();
    let changed = have != want;
    let report = SyncReport {
        namespace: opts.namespace.clone(),
        dry_run: opts.dry_run,
        changed,
        catalog,
        removed,
        renewals,
    };
    if opts.dry_run || !changed {
        return Ok(report);
    }
    std::fs::create_dir_all(&opts.dest).map_err(|e| ierr(&opts.dest, e.to_string()))?;
    let tag = format!("{}-{}", std::process::id(), uuid::Uuid::now_v7().simple());
    let staging = opts.dest.join(format!(".{}.staging-{tag}", opts.namespace));
    let staged = (|| -> Result<(), String> {
        for (rel, bytes) in &want {
            let path = staging.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
            }
            let mut f = std::fs::File::create(&path).map_err(|e| e.to_string())?;
            std::io::Write::write_all(&mut f, bytes).map_err(|e| e.to_string())?;
            f.sync_all().map_err(|e| e.to_string())?;
        }
        Ok(())
    })();
    if let Err(e) = staged {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(ierr(&staging, e));
    }
    if let Err(e) = swap_in(&staging, &ns_dir, &tag) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(ierr(&ns_dir, e));
    }
    Ok(report)
}

/// Puts `staging` at `target`: an atomic exchange where the kernel offers one, else the old
/// tree is renamed aside, the new one renamed in, and the old one renamed back on failure.
fn swap_in(staging: &Path, target: &Path, tag: &str) -> Result<(), String> {
    if !target.exists() {
        return std::fs::rename(staging, target).map_err(|e| e.to_string());
    }
    #[cfg(target_os = "linux")]
    {
        if rustix::fs::renameat_with(
            rustix::fs::CWD,
            staging,
            rustix::fs::CWD,
            target,
            rustix::fs::RenameFlags::EXCHANGE,
        )
        .is_ok()
        {
            // `staging` now holds the old tree.
            let _ = std::fs::remove_dir_all(staging);
            return Ok(());
        }
    }
    let parent = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let backup = parent.join(format!(".{name}.backup-{tag}"));
    std::fs::rename(target, &backup).map_err(|e| format!("moving the old tree aside: {e}"))?;
    if let Err(e) = std::fs::rename(staging, target) {
        return match std::fs::rename(&backup, target) {
            Ok(()) => Err(format!("swapping in the new tree: {e}; rolled back")),
            Err(back) => Err(format!(
                "swapping in the new tree: {e}; rollback failed too ({back}); the old tree is at {}",
                backup.display()
            )),
        };
    }
    let _ = std::fs::remove_dir_all(&backup);
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SCHEME: &str = "mcp-root";

    fn meta(path: &str, bytes: &[u8], mime: &str) -> Value {
        json!({ rules::META_KEY: {
            "owner_application": rules::OWNER_APPLICATION,
            "manifest_version": 1,
            "manifest_sha256": "ab",
            "path": path,
            "content_sha256": rules::sha256_hex(bytes),
            "mime_type": mime,
            "size": bytes.len(),
        }})
    }

    /// A one-skill catalog whose skill has URI identity `kebab`, listed name `name` and bundle
    /// path `path`, run through the whole client-side validation.
    fn check(
        kebab: &str,
        name: &str,
        path: &str,
        text: &str,
    ) -> Result<ValidCatalog, CatalogError> {
        let uri = rules::skill_uri(SCHEME, kebab);
        let ontology = serde_json::to_vec(&json!({
            "skill_resources": [{ "name": name, "uri": uri }],
        }))
        .unwrap_or_default();
        let o_meta = meta(rules::ONTOLOGY_PATH, &ontology, rules::ONTOLOGY_MIME);
        let o_list = Listed {
            uri: rules::ontology_uri(SCHEME),
            name: "ontology".into(),
            mime_type: Some(rules::ONTOLOGY_MIME.into()),
            size: Some(ontology.len() as u64),
            meta: Some(o_meta.clone()),
        };
        let o_read = Read {
            uri: o_list.uri.clone(),
            mime_type: o_list.mime_type.clone(),
            bytes: ontology,
            meta: Some(o_meta),
        };
        let s_meta = meta(path, text.as_bytes(), rules::SKILL_MIME);
        let listed = Listed {
            uri: uri.clone(),
            name: name.to_string(),
            mime_type: Some(rules::SKILL_MIME.into()),
            size: Some(text.len() as u64),
            meta: Some(s_meta.clone()),
        };
        let read = Read {
            uri: uri.clone(),
            mime_type: Some(rules::SKILL_MIME.into()),
            bytes: text.as_bytes().to_vec(),
            meta: Some(s_meta),
        };
        let (ontology, skills) = select(SCHEME, vec![o_list, listed])?;
        let declared = declared(SCHEME, &ontology, &o_read)?;
        match_declared(&declared, &skills)?;
        validate(
            SCHEME,
            (&ontology, &o_read),
            &declared,
            &[(skills[&uri].clone(), read)],
        )
    }

    fn front(kebab: &str) -> String {
        format!("---\nname: {kebab}\ndescription: d\n---\nbody\n")
    }

    #[test]
    fn a_valid_catalog_passes() {
        let c = check("a-b", "a_b", "skills/x/a_b/SKILL.md", &front("a-b")).unwrap();
        assert_eq!(c.skills[0].path, "x/a_b/SKILL.md");
    }

    /// What an accepted install path must be: relative, `/`-separated normal components.
    fn safe(path: &str) -> bool {
        !path.starts_with('/')
            && !path.contains('\\')
            && std::path::Path::new(path)
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)))
            && !path
                .split('/')
                .any(|p| p.is_empty() || p == "." || p == "..")
    }

    /// `PROPTEST_CASES` when set (CI bounds every property test with it), else `default`.
    fn cases(default: u32) -> ProptestConfig {
        let n = std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default);
        ProptestConfig::with_cases(n)
    }

    /// Resource metadata: well-formed for `bytes` at `path` (so validation gets past the
    /// hashes), or any JSON under the key, or none at all.
    fn meta_for(bytes: &[u8], path: &str, mime: &str, shape: u8, junk: &Value) -> Option<Value> {
        match shape % 4 {
            0 | 1 => Some(meta(path, bytes, mime)),
            2 => Some(json!({ rules::META_KEY: junk })),
            _ => None,
        }
    }

    /// A listing with `n` resources of arbitrary URIs, names, MIME types, metadata and bytes
    /// (the ontology's bytes are arbitrary JSON or arbitrary bytes), run through the whole
    /// client-side validation in the ADR's order, as `discover` runs it.
    #[allow(clippy::type_complexity)]
    fn run_listing(
        resources: &[(String, String, String, Vec<u8>, u8)],
        ontology: &Value,
        ontology_raw: Option<&[u8]>,
        junk: &Value,
    ) -> Result<ValidCatalog, CatalogError> {
        let o_uri = rules::ontology_uri(SCHEME);
        let mut listed = Vec::new();
        let mut reads = BTreeMap::new();
        for (uri, name, mime, bytes, shape) in resources {
            let (uri, bytes) = if uri == "ontology" {
                let b = ontology_raw
                    .map(<[u8]>::to_vec)
                    .unwrap_or_else(|| serde_json::to_vec(ontology).unwrap_or_default());
                (o_uri.clone(), b)
            } else {
                (uri.clone(), bytes.clone())
            };
            let path = format!("skills/{name}/SKILL.md");
            let m = meta_for(&bytes, &path, mime, *shape, junk);
            listed.push(Listed {
                uri: uri.clone(),
                name: name.clone(),
                mime_type: Some(mime.clone()),
                size: (shape % 2 == 0).then_some(bytes.len() as u64),
                meta: m.clone(),
            });
            reads.insert(
                uri.clone(),
                Read {
                    uri,
                    mime_type: Some(mime.clone()),
                    bytes,
                    meta: m,
                },
            );
        }
        let (ontology, skills) = select(SCHEME, listed)?;
        let o_read = reads
            .get(&ontology.uri)
            .cloned()
            .ok_or_else(|| CatalogError::Missing(ontology.uri.clone()))?;
        let declared = declared(SCHEME, &ontology, &o_read)?;
        match_declared(&declared, &skills)?;
        let mut pairs = Vec::new();
        for (_, uri) in &declared {
            let listed = skills
                .get(uri)
                .cloned()
                .ok_or_else(|| CatalogError::Missing(uri.clone()))?;
            let read = reads
                .get(uri)
                .cloned()
                .ok_or_else(|| CatalogError::Missing(uri.clone()))?;
            pairs.push((listed, read));
        }
        validate(SCHEME, (&ontology, &o_read), &declared, &pairs)
    }

    /// Arbitrary JSON, a few levels deep.
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            ".{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z_]{1,10}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// One listed resource: URI (the ontology, a skill URI, or anything), name, MIME type,
    /// bytes (a plausible SKILL.md or anything) and a shape selector for its metadata.
    fn resource() -> impl Strategy<Value = (String, String, String, Vec<u8>, u8)> {
        let kebab = "[a-z][a-z0-9-]{0,8}";
        (
            prop_oneof![
                Just("ontology".to_string()),
                kebab.prop_map(|k| rules::skill_uri(SCHEME, &k)),
                ".{0,24}",
            ],
            "[a-z][a-z0-9_]{0,8}",
            prop_oneof![
                Just(rules::SKILL_MIME.to_string()),
                Just(rules::ONTOLOGY_MIME.to_string()),
                "[a-z/]{0,12}",
            ],
            prop_oneof![
                kebab.prop_map(|k| front(&k).into_bytes()),
                prop::collection::vec(any::<u8>(), 0..64),
            ],
            any::<u8>(),
        )
    }

    proptest! {
        #![proptest_config(cases(512))]

        #[test]
        fn arbitrary_listings_never_panic_and_what_passes_is_safe(
            resources in prop::collection::vec(resource(), 0..5),
            skill_refs in prop::collection::vec(("[a-z][a-z0-9_-]{0,8}", "[a-z][a-z0-9-]{0,8}"), 0..4),
            extra in json_value(),
            raw in proptest::option::of(prop::collection::vec(any::<u8>(), 0..64)),
            junk in json_value(),
        ) {
            // The ontology declares some of the skill URIs the listing may hold.
            let ontology = json!({
                "skill_resources": skill_refs.iter().map(|(name, kebab)| json!({
                    "name": name, "uri": rules::skill_uri(SCHEME, kebab)
                })).collect::<Vec<_>>(),
                "extra": extra,
            });
            if let Ok(c) = run_listing(&resources, &ontology, raw.as_deref(), &junk) {
                prop_assert!(c.skills.iter().all(|s| safe(&s.path)), "{c:?}");
                for s in &c.skills {
                    let kebab = s.uri.strip_prefix(&rules::skill_prefix(SCHEME)).unwrap_or_default();
                    prop_assert_eq!(&kebab.replace('-', "_"), &s.name);
                    prop_assert_eq!(rules::sha256_hex(s.text.as_bytes()), s.content_sha256.clone());
                }
            }
        }

        #[test]
        fn paths_never_escape(path in "(/|\\.\\./|\\./|skills/|[a-z_]{1,6}/|\\\\|:|//){0,6}(SKILL\\.md|SKILL\\.markdown|x)?") {
            if let Ok(install) = rules::check_skill_path(&path) {
                prop_assert!(safe(&install), "accepted {path} -> {install}");
            }
            let text = front("a-b");
            if let Ok(c) = check("a-b", "a_b", &path, &text) {
                prop_assert!(c.skills.iter().all(|s| safe(&s.path)), "accepted {path}");
            }
        }

        #[test]
        fn arbitrary_strings_never_panic(path in any::<String>(), name in any::<String>(), kebab in any::<String>(), text in any::<String>()) {
            let _ = rules::check_bundle_path(&path);
            let _ = rules::parse_front_matter(&text);
            if let Ok(c) = check(&kebab, &name, &path, &text) {
                prop_assert!(c.skills.iter().all(|s| safe(&s.path)));
                prop_assert!(rules::is_kebab(&kebab) && rules::is_snake(&name));
            }
        }

        #[test]
        fn names_follow_the_uri(kebab in "[a-z][a-z0-9-]{0,20}", name in "[a-z][a-z0-9_]{0,20}") {
            let path = format!("skills/{name}/SKILL.md");
            if check(&kebab, &name, &path, &front(&kebab)).is_ok() {
                prop_assert_eq!(kebab.replace('-', "_"), name);
            }
        }
    }
}
