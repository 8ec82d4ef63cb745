//! Static configuration of the root daemon: loaded once from an optional TOML file, overridden
//! by command-line flags, passed explicitly. Every field has a default, so `mcp-root serve`
//! works with no file at all.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

mod audit;
mod error;
mod operators;
mod rates;
pub mod reference;

pub use audit::{
    AuditConfig, CheckpointConfig, Durability, HttpShape, SinkConfig, SinkFormat, SinkKind,
    SinkPolicy, WitnessConfig, WitnessPeerConfig,
};
pub use error::{ConfigError, ConfigTextError};
pub use operators::{OidcConfig, OperatorsConfig, Person, RoleRule};
pub use rates::{ProfileRates, Rate, RatesConfig, RawRate};

#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RootConfig {
    /// Address the HTTP server binds (`127.0.0.1:0` picks a free port).
    pub listen: SocketAddr,
    /// Directory for the embedded database and the admin token.
    pub data_dir: PathBuf,
    /// `sqlite:PATH` or `postgres://...`; default `sqlite:<data_dir>/root.db`.
    pub database_url: Option<String>,
    /// The zone this root governs.
    pub zone: String,
    /// Hostnames (optionally `host:port`) accepted in `Host`; loopback by default. A public
    /// root must list its public names here (DNS-rebinding protection).
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted in `Origin` (`scheme://host[:port]`); origins whose host is
    /// in `allowed_hosts` are always accepted.
    pub allowed_origins: Vec<String>,
    /// Tool contract directory; the contracts built into the binary when unset.
    pub contracts_dir: Option<PathBuf>,
    /// Descriptor directory; the descriptors built into the binary when unset.
    pub descriptors_dir: Option<PathBuf>,
    /// Capability profile file; the profiles built into the binary when unset.
    pub profiles_file: Option<PathBuf>,
    /// Destructive-action rules; the rules built into the binary when unset.
    pub destructive_file: Option<PathBuf>,
    /// Where the admin token lives; default `<data_dir>/admin.token`.
    pub admin_token_file: Option<PathBuf>,
    /// Where the root master key lives (encrypts hub signing keys at rest); default
    /// `<data_dir>/secrets.key`. Replicas sharing one database share this file.
    pub master_key_file: Option<PathBuf>,
    /// Serve HTTPS/WSS with this certificate (`[tls]`); plain HTTP without it.
    pub tls: Option<TlsConfig>,
    /// Allow plain HTTP on a non-loopback address (`--insecure-http`); warned at every start.
    pub insecure_http: bool,
    pub limits: Limits,
    /// `[rates]`: calls per second per lease, owner, tool and operator.
    pub rates: RatesConfig,
    pub redaction: RedactionConfig,
    pub skill_catalog: SkillCatalogConfig,
    pub console: ConsoleConfig,
    pub telemetry: TelemetryConfig,
    pub replica: ReplicaConfig,
    pub storage: StorageConfig,
    pub mcp: McpConfig,
    pub oauth: OauthConfig,
    pub audit: AuditConfig,
    pub witness: WitnessConfig,
    /// `[operators]`: sign-in with the organization's OpenID provider, and its role mapping.
    pub operators: OperatorsConfig,
    /// The protocol features root announces to hubs, when not all it understands (never from
    /// a file: a test's root of an earlier build).
    #[serde(skip)]
    pub protocol_features: Option<Vec<String>>,
}

/// `[mcp]`: how the MCP endpoint serves requests.
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// Retired: root's own transport (`mcp::transport`) answers every request one way.
    /// Accepted, and ignored with a warning, so configurations that set it still load.
    pub direct_reads: Option<bool>,
    /// How long an MCP session (revisions before 2026-07-28) lives without a message while
    /// nothing is in flight, in seconds; then it ends and its client must open a new one.
    pub session_idle_sec: u64,
    /// How long root keeps a task (a call run past its request) after it was created, in
    /// seconds: its owner can read how it ended until then.
    pub task_ttl_sec: u64,
    /// How often a client should poll a task, in milliseconds (told to it with each task).
    pub task_poll_interval_ms: u64,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            direct_reads: None,
            session_idle_sec: 300,
            task_ttl_sec: 86_400,
            task_poll_interval_ms: 1_000,
        }
    }
}

/// `[storage]`: how the embedded database commits (PostgreSQL commits as it is configured).
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// SQLite's `synchronous` in WAL mode. `full` (default): every commit, and so every
    /// answered call's audit event, is on disk before the answer (`fsync` per audit batch).
    /// `normal`: commits survive root being killed, not the machine losing power (the last
    /// transactions before a power loss may roll back); measured faster in BENCHMARKS.md.
    pub sqlite_synchronous: SqliteSync,
}

/// SQLite commit durability, see [`StorageConfig::sqlite_synchronous`].
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SqliteSync {
    #[default]
    Full,
    Normal,
}

/// `[replica]`: this process as one replica of the zone. Replicas are on when the database is
/// PostgreSQL (any number of `mcp-root serve` with the same `database_url` and `zone`, and
/// the same master key and admin token files); on SQLite root is the single replica and this
/// section is not used.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ReplicaConfig {
    /// This replica's id: 1..64 characters of `[A-Za-z0-9_-]`. Default: the id kept in
    /// `<data_dir>/replica.id`, created on first start.
    pub id: Option<String>,
    /// Where the other replicas reach this one (`http(s)://host:port`, no path): forwarded
    /// calls and skill commands arrive there. Default: the bound listen address, which must
    /// then be a specific IP (not 0.0.0.0 or ::).
    pub advertise_url: Option<String>,
    /// PEM CA bundle that verifies the other replicas' `https` addresses; default: the
    /// system's roots.
    pub ca_file: Option<PathBuf>,
    /// Forward to replicas that advertise a plain `http://` address although this replica
    /// serves `[tls]`. Off by default: a TLS replica refuses to send a forwarded call (its
    /// arguments, results and replica credential) unencrypted, and the caller is told why.
    pub insecure_http_peers: bool,
}

/// Whether `id` is a valid replica id.
pub fn valid_replica_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// `[tls]`: root's certificate, reloaded on SIGHUP and when the files change.
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain, end-entity certificate first.
    pub cert_file: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1); must be mode 0600.
    pub key_file: PathBuf,
    /// PEM CA bundle for hub client certificates: with it, the hub connect path
    /// (`/v1/root/hubs/connect`) requires a client certificate issued by this CA, in addition
    /// to the hub token. Other clients may present one (it is then verified) but need not.
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
    /// With `client_ca_file`: a hub's client certificate must also name the target its hub
    /// token is enrolled for, as the URI subject alternative name `mcp-hub:<target_id>`; a
    /// hub presenting another target's certificate is refused at `hello`.
    #[serde(default)]
    pub bind_client_cert_to_target: bool,
    /// How often the files are checked for change, in seconds; 0 = only on SIGHUP.
    #[serde(default = "default_tls_reload_interval")]
    pub reload_interval_sec: u64,
}

fn default_tls_reload_interval() -> u64 {
    30
}

/// `[telemetry]`: OpenTelemetry traces (see [`mcp_shared::otel`]); off unless an endpoint is
/// set here or in the standard `OTEL_EXPORTER_OTLP_ENDPOINT`.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP endpoint's base URL (`/v1/traces` is appended), e.g.
    /// `http://127.0.0.1:4318`.
    pub otlp_endpoint: Option<String>,
}

/// The operator web console at `/ui`.
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleConfig {
    /// Serve the console (its login and files); the REST family is there either way.
    pub enabled: bool,
    /// How long a console login lasts, in seconds.
    pub session_ttl_sec: u64,
    /// Always mark the console cookie `Secure` (it is whenever the login came over `https`).
    pub secure_cookie: bool,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            enabled: true,
            session_ttl_sec: 8 * 3600,
            secure_cookie: false,
        }
    }
}

/// `[oauth]`: root as its own OAuth 2.1 authorization server, so an MCP client can sign in
/// (an operator approves in the console) instead of being handed a pasted lease bearer.
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct OauthConfig {
    /// Advertise OAuth and serve its endpoints: protected-resource and authorization-server
    /// metadata, `resource_metadata` in `WWW-Authenticate`, `/oauth/*`. Off by default: some
    /// clients stop sending a configured `Authorization` header once a server answers OAuth
    /// discovery (see the README's table), so turning it on is the operator's choice.
    pub discovery: bool,
    /// The URL clients reach root at (`https://host[:port]`, no path): the issuer, and the
    /// MCP URL `<public_url>/mcp` every token is bound to. Default: the request's scheme and
    /// `Host` (which the Host guard has checked against `allowed_hosts`).
    pub public_url: Option<String>,
    /// How long one access token (a lease) lives, in seconds; a refresh issues the next one
    /// while the operator's approval lasts.
    pub access_ttl_sec: u64,
    /// How long an authorization code may be exchanged, in seconds.
    pub code_ttl_sec: u64,
    /// How long the console has to approve a sign-in, in seconds.
    pub approval_ttl_sec: u64,
    /// Dynamically registered clients kept at most (registration is unauthenticated). When
    /// full, a registration drops the oldest client that never signed in.
    pub max_clients: u64,
    /// Registrations one client address (an IPv4 address, an IPv6 /64) may make per hour,
    /// and at most that many at once; past it `/oauth/register` answers `429` with
    /// `Retry-After`. Per replica.
    pub registrations_per_hour: u32,
    /// PEM CA bundle that verifies the `https` servers of client ID metadata documents (a
    /// client whose `client_id` is the URL of its metadata); default: the system's roots.
    pub client_metadata_ca_file: Option<PathBuf>,
    /// Fetch client metadata documents from loopback and private addresses too. Off by
    /// default: anyone can make root fetch a `client_id` URL, which must not reach inside.
    pub client_metadata_private_hosts: bool,
    /// Tokens bound to their holder (RFC 9449): `allow` issues a DPoP-bound token to a client
    /// that presents a DPoP proof and a bearer token to one that does not; `require` refuses
    /// a token request without a proof, and an unbound OAuth token or CLI credential at every
    /// request. Leases operators issue by hand stay bearer tokens either way.
    pub dpop: DpopMode,
    /// Ask DPoP clients for a nonce root issued (`use_dpop_nonce`, `DPoP-Nonce`): a proof is
    /// then good for at most 10 minutes however its client set `iat`. Costs each new client one
    /// more round trip.
    pub dpop_nonce: bool,
}

/// `[oauth] dpop`: whether bearer tokens are still accepted.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DpopMode {
    /// DPoP-bound tokens to clients that ask for them, bearer tokens to the others.
    #[default]
    Allow,
    /// DPoP-bound tokens only.
    Require,
}

impl Default for OauthConfig {
    fn default() -> Self {
        OauthConfig {
            discovery: false,
            public_url: None,
            access_ttl_sec: 3600,
            code_ttl_sec: 60,
            approval_ttl_sec: 600,
            max_clients: 1000,
            registrations_per_hour: 20,
            client_metadata_ca_file: None,
            client_metadata_private_hosts: false,
            dpop: DpopMode::Allow,
            dpop_nonce: false,
        }
    }
}

impl OauthConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if !(60..=24 * 3600).contains(&self.access_ttl_sec) {
            return Err(ConfigError::Invalid(
                "oauth.access_ttl_sec must be between 60 and 86400 (a day)".into(),
            ));
        }
        if !(10..=600).contains(&self.code_ttl_sec) {
            return Err(ConfigError::Invalid(
                "oauth.code_ttl_sec must be between 10 and 600".into(),
            ));
        }
        if !(60..=3600).contains(&self.approval_ttl_sec) {
            return Err(ConfigError::Invalid(
                "oauth.approval_ttl_sec must be between 60 and 3600".into(),
            ));
        }
        if self.max_clients == 0 {
            return Err(ConfigError::Invalid(
                "oauth.max_clients must be at least 1".into(),
            ));
        }
        if !(1..=10_000).contains(&self.registrations_per_hour) {
            return Err(ConfigError::Invalid(
                "oauth.registrations_per_hour must be between 1 and 10000".into(),
            ));
        }
        if let Some(url) = &self.public_url {
            let ok = url::Url::parse(url).is_ok_and(|u| {
                matches!(u.scheme(), "http" | "https")
                    && u.host().is_some()
                    && u.path() == "/"
                    && u.query().is_none()
                    && u.fragment().is_none()
                    && !url.ends_with('/')
            });
            if !ok {
                return Err(ConfigError::Invalid(format!(
                    "oauth.public_url `{url}` must be http(s)://host[:port] with no path"
                )));
            }
        }
        Ok(())
    }
}

/// The platform skill catalog served as MCP resources.
#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SkillCatalogConfig {
    /// URI scheme of the catalog resources: `<scheme>://platform/ontology` and
    /// `<scheme>://platform/skills/<name>`.
    pub scheme: String,
}

impl Default for SkillCatalogConfig {
    fn default() -> Self {
        SkillCatalogConfig {
            scheme: crate::skill_catalog::DEFAULT_SCHEME.into(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body accepted on any endpoint, in bytes.
    pub max_body_bytes: usize,
    /// Longest lease a client may be issued, in seconds.
    pub max_lease_ttl_sec: u64,
    /// Calls in flight at once for one lease, across all tools.
    pub per_lease_in_flight: u32,
    /// Calls in flight at once against one target, across all tools.
    pub per_target_in_flight: u32,
    /// Calls in flight at once for one owner (a lease and every lease it minted, its run
    /// credentials and a fleet lease's per-target children), across all tools and targets.
    pub per_owner_in_flight: u32,
    /// Most audit events written in one transaction.
    pub audit_batch_max: usize,
    /// Group commit delay: while other calls are still running when an event is appended,
    /// the audit writer waits up to this long (milliseconds) before committing, so their
    /// events share the commit (its `fsync`); the batch is committed at once when it reaches
    /// `audit_batch_max` (on SQLite also once no call is running), and a call alone never
    /// waits.
    /// 0 (default): every batch is committed as soon as the writer is free (events that
    /// arrive during a commit still share the next one). A delay saves commits on slow disks
    /// at the price of latency; on this project's benchmark machine it cut root CPU per
    /// routed call by about a tenth and calls/s at concurrency 16 by as much (BENCHMARKS.md).
    pub audit_commit_delay_ms: u64,
    /// How long a write preview's confirmation token stays valid, in seconds.
    pub confirmation_ttl_sec: u64,
    /// How long a write that needs an operator's approval may wait for the decision (and then
    /// for its execute), in seconds; its confirmation token lives as long.
    pub approval_ttl_sec: u64,
    /// Resources per `resources/list` page.
    pub resources_page_size: usize,
    /// Client connections served at once (MCP, REST, console; event streams included; a
    /// hub's socket only until its upgrade). Past it probes (`/healthz`, `/readyz`,
    /// `/metrics`) are still answered and other requests get `503` with `Retry-After`.
    pub max_connections: usize,
    /// Hub links (WebSockets) served at once, apart from client connections; past it a hub
    /// is answered `503` with `Retry-After` and dials again later. Each link is an open file:
    /// root needs an open-file limit above `max_hub_links + max_connections` (the packaged
    /// systemd unit sets `LimitNOFILE=65536`; root raises its soft limit to the hard one).
    pub max_hub_links: usize,
    /// Heartbeat interval announced to hubs, in milliseconds (100..=600000): each side sends
    /// one per interval (a hub in answer to root's) and drops a peer silent for three; a hub
    /// heard from last more than two intervals ago shows `degraded`. Heartbeats are most of
    /// root's work with a fleet connected and idle (BENCHMARKS.md: 15,000 hubs cost 3.9% of
    /// a core at 30 s, 7.2% at 15 s); a shorter interval notices a silently lost hub (or a
    /// hub a silently lost root) sooner. A closed connection is noticed at once whatever it is.
    pub heartbeat_interval_ms: u64,
    /// Time a connection has to send each request head, in milliseconds: from its accept
    /// for its first request, from the first byte of each later one.
    pub header_read_timeout_ms: u64,
    /// Longest a keep-alive connection may wait for its next request before root ends it, in
    /// milliseconds. Longer than common client pools keep idle connections (reqwest and Go:
    /// 90 s), so that clients drop them first and never send a request on a connection root
    /// is closing.
    pub keep_alive_timeout_ms: u64,
    /// Longest a request body may send nothing before the request fails, in milliseconds.
    pub body_read_timeout_ms: u64,
    /// Longest a response write may make no progress (a client that does not read) before
    /// the connection ends, in milliseconds.
    pub write_stall_timeout_ms: u64,
    /// Largest difference between a hub's clock and root's, in milliseconds: announced in
    /// `welcome`; a hub whose clock is further off refuses calls with `clock_skew`.
    pub max_hub_clock_skew_ms: u64,
    /// Hub upgrades an address may have refused (no token, an unknown one) within 10 s;
    /// past it the address is answered 429 without a token lookup until the 10 s end.
    pub hub_door_max_failures: u32,
}

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RedactionConfig {
    /// Extra regular expressions whose matches are redacted before audit.
    pub patterns: Vec<String>,
    /// Extra field names whose values are redacted before audit.
    pub fields: Vec<String>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 1024 * 1024,
            max_lease_ttl_sec: 30 * 24 * 3600,
            per_lease_in_flight: 64,
            per_target_in_flight: 256,
            per_owner_in_flight: 256,
            audit_batch_max: 512,
            audit_commit_delay_ms: 0,
            confirmation_ttl_sec: 120,
            approval_ttl_sec: 3600,
            resources_page_size: 50,
            max_connections: 8192,
            max_hub_links: 20_000,
            heartbeat_interval_ms: 30_000,
            header_read_timeout_ms: 10_000,
            keep_alive_timeout_ms: 120_000,
            body_read_timeout_ms: 30_000,
            write_stall_timeout_ms: 30_000,
            max_hub_clock_skew_ms: 30_000,
            hub_door_max_failures: 30,
        }
    }
}

impl Default for RootConfig {
    fn default() -> Self {
        RootConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8700)),
            data_dir: PathBuf::from("./data"),
            database_url: None,
            zone: "zone-local".into(),
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            allowed_origins: Vec::new(),
            contracts_dir: None,
            descriptors_dir: None,
            profiles_file: None,
            destructive_file: None,
            admin_token_file: None,
            master_key_file: None,
            tls: None,
            insecure_http: false,
            limits: Limits::default(),
            rates: RatesConfig::default(),
            redaction: RedactionConfig::default(),
            skill_catalog: SkillCatalogConfig::default(),
            console: ConsoleConfig::default(),
            telemetry: TelemetryConfig::default(),
            oauth: OauthConfig::default(),
            replica: ReplicaConfig::default(),
            storage: StorageConfig::default(),
            mcp: McpConfig::default(),
            audit: AuditConfig::default(),
            witness: WitnessConfig::default(),
            operators: OperatorsConfig::default(),
            protocol_features: None,
        }
    }
}

impl RootConfig {
    /// Loads a config file; missing fields take their defaults, unknown fields are errors.
    pub fn load(path: &Path) -> Result<RootConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// Parses config text (TOML).
    pub fn parse(text: &str) -> Result<RootConfig, ConfigTextError> {
        let cfg: RootConfig = toml::from_str(text)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks values that parse but make no sense.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.zone.trim().is_empty() {
            return Err(ConfigError::Invalid("zone must not be empty".into()));
        }
        if let Some(oidc) = &self.operators.oidc {
            oidc.validate()?;
        }
        if self.allowed_hosts.is_empty() {
            return Err(ConfigError::Invalid(
                "allowed_hosts must name at least one host".into(),
            ));
        }
        if self.limits.max_body_bytes < 1024 {
            return Err(ConfigError::Invalid(
                "limits.max_body_bytes must be at least 1024".into(),
            ));
        }
        if self.limits.per_lease_in_flight == 0
            || self.limits.per_target_in_flight == 0
            || self.limits.per_owner_in_flight == 0
        {
            return Err(ConfigError::Invalid(
                "in-flight limits must be at least 1".into(),
            ));
        }
        if self.limits.approval_ttl_sec == 0 || self.limits.approval_ttl_sec > 7 * 24 * 3600 {
            return Err(ConfigError::Invalid(
                "limits.approval_ttl_sec must be between 1 and 604800 (a week)".into(),
            ));
        }
        if self.limits.confirmation_ttl_sec == 0 || self.limits.confirmation_ttl_sec > 3600 {
            return Err(ConfigError::Invalid(
                "limits.confirmation_ttl_sec must be between 1 and 3600".into(),
            ));
        }
        if self.console.session_ttl_sec < 60 || self.console.session_ttl_sec > 7 * 24 * 3600 {
            return Err(ConfigError::Invalid(
                "console.session_ttl_sec must be between 60 and 604800 (a week)".into(),
            ));
        }
        if !(1..=86_400).contains(&self.mcp.session_idle_sec) {
            return Err(ConfigError::Invalid(
                "mcp.session_idle_sec must be between 1 and 86400 (a day)".into(),
            ));
        }
        if !(60..=30 * 86_400).contains(&self.mcp.task_ttl_sec) {
            return Err(ConfigError::Invalid(
                "mcp.task_ttl_sec must be between 60 and 2592000 (30 days)".into(),
            ));
        }
        if !(100..=60_000).contains(&self.mcp.task_poll_interval_ms) {
            return Err(ConfigError::Invalid(
                "mcp.task_poll_interval_ms must be between 100 and 60000".into(),
            ));
        }
        self.oauth.validate()?;
        self.audit.validate(&self.witness)?;
        self.rates.validate()?;
        if self.limits.audit_batch_max == 0 {
            return Err(ConfigError::Invalid(
                "limits.audit_batch_max must be at least 1".into(),
            ));
        }
        if self.limits.audit_commit_delay_ms > 100 {
            return Err(ConfigError::Invalid(
                "limits.audit_commit_delay_ms must be at most 100".into(),
            ));
        }
        if self.limits.max_hub_links == 0 {
            return Err(ConfigError::Invalid(
                "limits.max_hub_links must be at least 1".into(),
            ));
        }
        if !(100..=600_000).contains(&self.limits.heartbeat_interval_ms) {
            return Err(ConfigError::Invalid(
                "limits.heartbeat_interval_ms must be between 100 and 600000".into(),
            ));
        }
        if self.limits.max_connections == 0 {
            return Err(ConfigError::Invalid(
                "limits.max_connections must be at least 1".into(),
            ));
        }
        for (name, ms) in [
            ("header_read_timeout_ms", self.limits.header_read_timeout_ms),
            ("keep_alive_timeout_ms", self.limits.keep_alive_timeout_ms),
            ("body_read_timeout_ms", self.limits.body_read_timeout_ms),
            ("write_stall_timeout_ms", self.limits.write_stall_timeout_ms),
        ] {
            if !(100..=3_600_000).contains(&ms) {
                return Err(ConfigError::Invalid(format!(
                    "limits.{name} must be between 100 and 3600000 (an hour)"
                )));
            }
        }
        if self.limits.max_hub_clock_skew_ms > 24 * 3_600_000 {
            return Err(ConfigError::Invalid(
                "limits.max_hub_clock_skew_ms must be at most 86400000 (a day)".into(),
            ));
        }
        if self.limits.resources_page_size == 0 {
            return Err(ConfigError::Invalid(
                "limits.resources_page_size must be at least 1".into(),
            ));
        }
        if let Some(tls) = &self.tls
            && tls.bind_client_cert_to_target
            && tls.client_ca_file.is_none()
        {
            return Err(ConfigError::Invalid(
                "tls.bind_client_cert_to_target needs tls.client_ca_file (hub client \
                 certificates are required only with a client CA)"
                    .into(),
            ));
        }
        if let Some(tls) = &self.tls
            && tls.reload_interval_sec > 24 * 3600
        {
            return Err(ConfigError::Invalid(
                "tls.reload_interval_sec must be at most 86400 (0 = only on SIGHUP)".into(),
            ));
        }
        if let Some(id) = &self.replica.id
            && !valid_replica_id(id)
        {
            return Err(ConfigError::Invalid(format!(
                "replica.id `{id}` must be 1..64 characters of [A-Za-z0-9_-]"
            )));
        }
        if let Some(url) = &self.replica.advertise_url {
            let rest = url
                .strip_prefix("http://")
                .or_else(|| url.strip_prefix("https://"));
            if !rest.is_some_and(|r| !r.is_empty() && !r.trim_end_matches('/').contains('/')) {
                return Err(ConfigError::Invalid(format!(
                    "replica.advertise_url `{url}` must be http(s)://host:port without a path"
                )));
            }
            if self.tls.is_some() && url.starts_with("http://") {
                return Err(ConfigError::Invalid(format!(
                    "replica.advertise_url `{url}` is plain http:// but this root serves [tls] \
                     on its only listener: advertise its https:// address"
                )));
            }
        }
        crate::skill_catalog::check_scheme(&self.skill_catalog.scheme)
            .map_err(|e| ConfigError::Invalid(format!("skill_catalog.scheme: {e}")))?;
        for p in &self.redaction.patterns {
            regex::Regex::new(p)
                .map_err(|e| ConfigError::Invalid(format!("redaction pattern `{p}`: {e}")))?;
        }
        if let Some(url) = &self.database_url
            && !(url.starts_with("sqlite:")
                || url.starts_with("postgres://")
                || url.starts_with("postgresql://"))
        {
            return Err(ConfigError::Invalid(format!(
                "database_url `{url}` must start with sqlite: or postgres://"
            )));
        }
        Ok(())
    }

    pub fn database_url(&self) -> String {
        self.database_url
            .clone()
            .unwrap_or_else(|| format!("sqlite:{}", self.data_dir.join("root.db").display()))
    }

    pub fn master_key_path(&self) -> PathBuf {
        self.master_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("secrets.key"))
    }

    /// Why root must not listen as configured: plain HTTP on a non-loopback address without
    /// `insecure_http`.
    pub fn check_listener(&self) -> Result<(), ConfigError> {
        if self.tls.is_none() && !self.listen.ip().is_loopback() && !self.insecure_http {
            return Err(ConfigError::Invalid(format!(
                "refusing to serve plain HTTP on non-loopback address {}: configure [tls] \
                 (cert_file, key_file), listen on a loopback address, or pass --insecure-http \
                 (insecure_http = true) to accept unencrypted traffic",
                self.listen
            )));
        }
        Ok(())
    }

    pub fn admin_token_path(&self) -> PathBuf {
        self.admin_token_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("admin.token"))
    }
}
