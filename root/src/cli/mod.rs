//! Command line: `serve`, `demo`, and `admin` (a client of a running root over HTTP).
//!
//! Exit codes: 0 success, 1 failure, 2 usage error, 3 audit chain broken, 4 run profile
//! invalid.

pub mod skills_sync;

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};

use crate::config::RootConfig;

#[derive(Parser, Debug)]
#[command(
    name = "mcp-root",
    version,
    about = "Root MCP gateway: governed, audited MCP tools for one zone"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the root daemon.
    Serve(ServeArgs),
    /// Run root on the embedded default, create a lease, and print ready-to-paste client config.
    Demo(ServeArgs),
    /// Operator commands against a running root.
    Admin(AdminArgs),
    /// The descriptor build pipeline (runs offline, e.g. in CI).
    #[command(subcommand)]
    Descriptors(DescriptorsCommand),
    /// The platform skill catalog client.
    #[command(subcommand)]
    Skills(SkillsCommand),
}

#[derive(Subcommand, Debug)]
pub enum DescriptorsCommand {
    /// Build normalized descriptor artifacts from a source tree (its `sources.toml`).
    Build {
        /// The source tree, e.g. config/descriptor-source.
        source_dir: PathBuf,
        /// Where the artifacts go (`<descriptor_id>.json`; other `*.json` there are removed).
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
        /// Override the manifest's `generated_at`: `now` or an RFC 3339 instant.
        #[arg(long)]
        generated_at: Option<String>,
        /// Write nothing; fail (exit 1) if ARTIFACT_DIR differs from what the build produces.
        #[arg(long)]
        check: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum SkillsCommand {
    /// Install the platform skill catalog of a root into DEST/NAMESPACE (validated whole,
    /// staged, swapped in atomically; any failure leaves the installed tree unchanged).
    Sync(skills_sync::SyncArgs),
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// TOML config file (every field optional).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Listen address, e.g. 127.0.0.1:8700.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Data directory (embedded database, admin token).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Database URL: sqlite:PATH or postgres://...
    #[arg(long, env = "MCP_ROOT_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Allow plain HTTP on a non-loopback address (warned at every start); prefer [tls].
    #[arg(long)]
    pub insecure_http: bool,
}

impl ServeArgs {
    pub fn load(&self) -> anyhow::Result<RootConfig> {
        let mut cfg = match &self.config {
            Some(p) => RootConfig::load(p)?,
            None => RootConfig::default(),
        };
        if let Some(l) = self.listen {
            cfg.listen = l;
        }
        if let Some(d) = &self.data_dir {
            cfg.data_dir = d.clone();
        }
        if let Some(u) = &self.database_url {
            cfg.database_url = Some(u.clone());
        }
        if self.insecure_http {
            cfg.insecure_http = true;
        }
        cfg.validate()?;
        Ok(cfg)
    }
}

#[derive(Args, Debug)]
pub struct AdminArgs {
    /// Root base URL.
    #[arg(long, env = "MCP_ROOT_URL", default_value = "http://127.0.0.1:8700")]
    pub root_url: String,
    /// Admin token; default: read from <data-dir>/admin.token.
    #[arg(long, env = "MCP_ROOT_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Where to find admin.token when no token is given.
    #[arg(long, default_value = "./data")]
    pub data_dir: PathBuf,
    /// PEM CA bundle to verify an https root with (instead of the system's roots).
    #[arg(long, env = "MCP_ROOT_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    #[command(subcommand)]
    pub command: AdminCommand,
}

#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// MCP session leases.
    #[command(subcommand)]
    Lease(LeaseCommand),
    /// The audit trail.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Managed targets and their hubs.
    #[command(subcommand)]
    Hub(HubCommand),
    /// A skill on a target (through root to the hub; audited).
    Skill {
        #[command(subcommand)]
        command: SkillCmd,
    },
    /// The descriptor set root serves.
    #[command(subcommand)]
    Descriptors(AdminDescriptorsCommand),
    /// Operator approvals of writes that need one (NLU changes).
    #[command(subcommand)]
    Approvals(ApprovalsCommand),
    /// The zone's root replicas, their hubs and health.
    #[command(subcommand)]
    Replicas(ReplicasCommand),
    /// Named operators, each with a credential of their own (every operator action is an
    /// audit event naming them; the admin token file is operator `admin`).
    #[command(subcommand)]
    Operator(OperatorCommand),
}

#[derive(Subcommand, Debug)]
pub enum OperatorCommand {
    /// Add an operator; their credential is shown once (or written 0600 to --token-file).
    /// They use it as the admin CLI's --admin-token (MCP_ROOT_ADMIN_TOKEN) or to log in to
    /// the console.
    Add {
        name: String,
        #[arg(long)]
        token_file: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Every operator, active or revoked, with who added and revoked them.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revoke an operator: their credential and console sessions stop working at once.
    Revoke {
        name: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ReplicasCommand {
    /// Every registered replica: health, heartbeat age, the hubs it holds.
    List {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ApprovalsCommand {
    /// Approvals, newest first (default: pending).
    List {
        /// pending, approved, rejected, applied, failed, expired or all.
        #[arg(long, default_value = "pending")]
        status: String,
        #[arg(long)]
        json: bool,
    },
    /// One approval with its arguments and expected effect (the diff).
    Show {
        approval_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Approve: the write's next execute with its confirmation token applies it.
    Approve {
        approval_id: String,
        #[arg(long)]
        reason: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Reject: the write never applies.
    Reject {
        approval_id: String,
        #[arg(long)]
        reason: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

async fn decide(
    c: &AdminClient,
    verb: &str,
    approval_id: &str,
    reason: Option<String>,
    json_out: bool,
) -> anyhow::Result<()> {
    let body = match reason {
        Some(r) => json!({ "reason": r }),
        None => json!({}),
    };
    let v = c
        .post(
            &format!("/v1/root/mcp/approvals/{approval_id}/{verb}"),
            body,
        )
        .await?;
    print(json_out, &v, |v| {
        format!(
            "{} (audit event {})",
            approval_line(&v["approval"]),
            v["event_id"].as_str().unwrap_or("")
        )
    });
    Ok(())
}

fn approval_line(a: &Value) -> String {
    format!(
        "{}  {:8}  {}  target={}  requested={}  expires={}",
        a["approval_id"].as_str().unwrap_or(""),
        a["status"].as_str().unwrap_or(""),
        a["tool_id"].as_str().unwrap_or(""),
        a["target_id"].as_str().unwrap_or(""),
        a["requested_at"].as_str().unwrap_or(""),
        a["expires_at"].as_str().unwrap_or(""),
    )
}

#[derive(Subcommand, Debug)]
pub enum AdminDescriptorsCommand {
    /// Validate an artifact directory as a whole set and serve it instead of the current one
    /// (kept across restarts); a refused set changes nothing.
    Publish {
        /// Directory of `<descriptor_id>.json` artifacts (`mcp-root descriptors build` output).
        artifact_dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// The served descriptors with their freshness, and where the set came from.
    List {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum HubCommand {
    /// Enrol a target; prints the hub token once (root keeps only its hash).
    Enroll {
        #[arg(long)]
        target: String,
        #[arg(long)]
        environment: String,
        #[arg(long)]
        subnet: Option<String>,
        #[arg(long)]
        zone: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Targets with status, last seen, descriptor, skills and published capabilities.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Issue a new hub token and signing key (the token is shown once); the previous ones keep
    /// working for the grace period, then a hub still using them is refused.
    RotateKey {
        #[arg(long)]
        target: String,
        /// Seconds the previous token and key stay valid (default 600, at most a week).
        #[arg(long)]
        grace_sec: Option<u64>,
        /// Write the new token to this file (mode 0600; e.g. the hub's token file, which the
        /// hub watches) instead of printing it.
        #[arg(long)]
        token_file: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
pub struct SkillArgs {
    #[arg(long)]
    pub target: String,
    #[arg(long, default_value = "infra_access_skill")]
    pub skill: String,
    #[arg(long)]
    pub json: bool,
}

/// Root's desired state of a target's skill: in force at root at once (on every replica),
/// stored, and pushed to the hub now or when it reconnects. Each command is audited.
#[derive(Subcommand, Debug)]
pub enum SkillCmd {
    /// Install the skill on the target (its tools become callable once it is enabled too).
    Install(SkillArgs),
    /// Enable the skill: its tools are callable (unless the hub's owner switched it off).
    Enable(SkillArgs),
    /// Disable the skill: every tool of the target's skill answers `skill_disabled`, whether
    /// its hub is connected or not.
    Disable(SkillArgs),
    /// Uninstall the skill from the target: as disabled, until installed again.
    Uninstall(SkillArgs),
    /// Root's desired state, the hub's report (live when connected) and whether it is callable.
    Status(SkillArgs),
}

#[derive(Subcommand, Debug)]
pub enum LeaseCommand {
    /// Create a lease; its bearer is printed once.
    Create {
        #[arg(long)]
        target: String,
        #[arg(long)]
        profile: String,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 3600)]
        ttl: u64,
        #[arg(long)]
        audience: Option<String>,
        #[arg(long)]
        subnet: Option<String>,
        #[arg(long)]
        zone: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// List leases (expired ones show as expired).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show one lease.
    Get {
        session_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Revoke a lease; in force from the next request.
    Revoke {
        session_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Issue a new bearer for a lease and kill the old one.
    Rotate {
        session_id: String,
        #[arg(long)]
        json: bool,
    },
    /// Issue a run profile for a lease: a run credential (bound to the profile's tools and
    /// expiry, revoked with the lease) and the signed document naming it. The document goes
    /// to --output (or standard output), the credential's bearer to --token-file (0600) or
    /// is printed once.
    RunProfile {
        session_id: String,
        /// Seconds the run lives, 1..=600 (never past the lease's deadline).
        #[arg(long)]
        ttl_sec: Option<u64>,
        /// Only these tools (comma-separated) of those the lease may call.
        #[arg(long, value_delimiter = ',')]
        tools: Vec<String>,
        #[arg(long, short)]
        output: Option<PathBuf>,
        #[arg(long)]
        token_file: Option<PathBuf>,
    },
    /// Verify a run profile (`mcp-root admin lease run-profile`) against root's signing key:
    /// prints valid, or invalid with the reason (tampered, unsigned, unknown key, expired,
    /// ...) and exits 4.
    VerifyProfile {
        /// The run profile JSON; `-` reads standard input.
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum AuditCommand {
    /// The newest events.
    Tail {
        #[arg(long, default_value_t = 20)]
        limit: i64,
        #[arg(long)]
        json: bool,
    },
    /// Every event (since T, RFC 3339) as JSON Lines, oldest first.
    Export {
        #[arg(long)]
        since: Option<String>,
        /// Write to this file instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Verify the hash chain; names the first broken link.
    Verify {
        #[arg(long)]
        json: bool,
    },
}

/// `mcp-root demo`, which the binary brings (it starts a hub, and only the binary depends on
/// the hub's crate): the serve arguments in, the exit code out.
pub type Demo = fn(ServeArgs) -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<ExitCode>>>>;

/// Entry point of the binary, with its `demo` when it has one.
pub fn main_with(demo: Option<Demo>) -> ExitCode {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    // The offline and client commands print their own results; only warnings go to stderr.
    let level = match cli.command {
        Command::Skills(_) | Command::Descriptors(_) => "warn",
        // rmcp logs the start and end of every stateless request's service at info (three
        // lines per call, with the client's whole handshake in one): warnings only, unless
        // RUST_LOG asks for more.
        _ => "info,rmcp::service=warn",
    };
    crate::telemetry::logging::init(level, true);
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(dispatch(cli, demo)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(cli: Cli, demo: Option<Demo>) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(args) => {
            let mut handle = crate::run(args.load()?).await?;
            eprintln!(
                "mcp-root listening on {} (MCP endpoint {})",
                handle.base_url(),
                handle.mcp_url()
            );
            tokio::select! {
                r = handle.wait() => r?,
                _ = shutdown_signal() => {
                    eprintln!("shutting down");
                    handle.shutdown().await;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo(args) => match demo {
            Some(demo) => demo(args).await,
            None => bail!("this mcp-root was built without its demo (the `demo` feature)"),
        },
        Command::Admin(args) => admin(args).await,
        Command::Descriptors(cmd) => descriptors(cmd),
        Command::Skills(SkillsCommand::Sync(args)) => skills_sync::main(args).await,
    }
}

/// Until Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

fn descriptors(cmd: DescriptorsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        DescriptorsCommand::Build {
            source_dir,
            output,
            generated_at,
            check,
        } => {
            let generated_at =
                match generated_at.as_deref() {
                    None => None,
                    Some("now") => Some(mcp_shared::time::now()),
                    Some(t) => Some(mcp_shared::time::parse(t).with_context(|| {
                        format!("--generated-at `{t}` must be `now` or RFC 3339")
                    })?),
                };
            let opts = crate::descriptors::build::BuildOptions { generated_at };
            let built = crate::descriptors::build::build(&source_dir, &opts)
                .with_context(|| format!("building {}", source_dir.display()))?;
            if check {
                let diffs = crate::descriptors::build::differences(&output, &built);
                if diffs.is_empty() {
                    println!(
                        "{}: up to date ({} artifacts)",
                        output.display(),
                        built.len()
                    );
                    return Ok(ExitCode::SUCCESS);
                }
                for d in &diffs {
                    eprintln!("{d}");
                }
                eprintln!(
                    "{} differs from the build of {}; run `mcp-root descriptors build {} -o {}`",
                    output.display(),
                    source_dir.display(),
                    source_dir.display(),
                    output.display()
                );
                return Ok(ExitCode::FAILURE);
            }
            let written = crate::descriptors::build::write_artifacts(&output, &built)?;
            for (d, path) in built.iter().zip(&written) {
                println!(
                    "{}  {}  {}",
                    path.display(),
                    d.class,
                    d.freshness.content_hash
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Reads an artifact directory: `(file name, JSON)` of every `*.json`, sorted by name.
pub fn read_artifacts(dir: &std::path::Path) -> anyhow::Result<Vec<(String, Value)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") || !path.is_file() {
            continue;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let v: Value = serde_json::from_str(&text).with_context(|| format!("{name}: not JSON"))?;
        out.push((name, v));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    anyhow::ensure!(!out.is_empty(), "{}: no *.json artifacts", dir.display());
    Ok(out)
}

/// A small HTTP client for the admin API.
pub struct AdminClient {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl AdminClient {
    pub fn new(base: String, token: String) -> anyhow::Result<AdminClient> {
        Self::with_ca(base, token, None)
    }

    /// A client that verifies an https root against `ca_file` (PEM) instead of the system's
    /// roots.
    pub fn with_ca(
        base: String,
        token: String,
        ca_file: Option<&std::path::Path>,
    ) -> anyhow::Result<AdminClient> {
        let mut builder = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30));
        if let Some(path) = ca_file {
            let pem =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .with_context(|| format!("{}: not a PEM certificate bundle", path.display()))?;
            builder = builder.tls_certs_only(certs);
        }
        let http = builder.build()?;
        Ok(AdminClient {
            base: base.trim_end_matches('/').to_string(),
            token,
            http,
        })
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let res = req
            .bearer_auth(&self.token)
            .send()
            .await
            .with_context(|| format!("cannot reach root at {}", self.base))?;
        let status = res.status();
        let body: Value = res.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            let msg = body["error"]["message"]
                .as_str()
                .unwrap_or("no error message");
            bail!("root answered {status}: {msg}");
        }
        Ok(body)
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    pub async fn get_query(&self, path: &str, query: &[(&str, String)]) -> anyhow::Result<Value> {
        self.send(self.http.get(format!("{}{path}", self.base)).query(query))
            .await
    }

    pub async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.send(self.http.post(format!("{}{path}", self.base)).json(&body))
            .await
    }
}

/// `admin lease verify-profile FILE`: root judges the document as it is in the file (not
/// re-serialized), so any changed byte of meaning reads as tampered. Exit 4 when invalid.
async fn verify_profile(
    c: &AdminClient,
    file: &std::path::Path,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let text = if file == std::path::Path::new("-") {
        std::io::read_to_string(std::io::stdin()).context("cannot read standard input")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?
    };
    let v = match serde_json::from_str::<Value>(&text) {
        Ok(document) => c.post("/v1/root/mcp/run-profiles/verify", document).await?,
        Err(e) => {
            json!({ "valid": false, "reason": "malformed", "message": format!("not JSON: {e}") })
        }
    };
    let valid = v["valid"] == true;
    print(json_out, &v, |v| {
        if valid {
            format!(
                "valid: run {} of {}, expires at {} (key {})",
                v["run_id"].as_str().unwrap_or(""),
                v["owner"].as_str().unwrap_or(""),
                v["expires_at"].as_str().unwrap_or(""),
                v["key_id"].as_str().unwrap_or("")
            )
        } else {
            format!(
                "invalid ({}): {}",
                v["reason"].as_str().unwrap_or("unknown"),
                v["message"].as_str().unwrap_or("")
            )
        }
    });
    Ok(if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(4)
    })
}

/// Prints a result; a closed pipe (`… | head`) is not an error worth a panic.
/// `mcp-root admin operator add|list|revoke`.
async fn operator_command(c: &AdminClient, cmd: OperatorCommand) -> anyhow::Result<()> {
    match cmd {
        OperatorCommand::Add {
            name,
            token_file,
            json,
        } => {
            let mut v = c
                .post("/v1/root/operators", json!({ "name": name }))
                .await?;
            if let Some(path) = &token_file {
                let token = v["token"].as_str().unwrap_or_default().to_owned();
                crate::secrets::write_private_file(path, &format!("{token}\n"))?;
                v["token"] = json!(format!("written to {}", path.display()));
            }
            print(json, &v, |v| {
                format!(
                    "operator: {}\ntoken:    {}  (shown once)",
                    v["name"].as_str().unwrap_or(""),
                    v["token"].as_str().unwrap_or("")
                )
            });
        }
        OperatorCommand::List { json } => {
            let v = c.get("/v1/root/operators").await?;
            print(json, &v, |v| {
                v["operators"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|o| {
                        let by = |k: &str| o[k].as_str().unwrap_or("-").to_owned();
                        format!(
                            "{:<24} {:<8} added {} by {}{}",
                            o["name"].as_str().unwrap_or(""),
                            o["status"].as_str().unwrap_or(""),
                            by("created_at"),
                            by("created_by"),
                            o["revoked_at"]
                                .as_str()
                                .map(|at| format!(", revoked {at} by {}", by("revoked_by")))
                                .unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
        OperatorCommand::Revoke { name, json } => {
            let v = c
                .post(&format!("/v1/root/operators/{name}/revoke"), json!({}))
                .await?;
            print(json, &v, |v| {
                format!("operator {} revoked", v["name"].as_str().unwrap_or(""))
            });
        }
    }
    Ok(())
}

/// A target's skill as the admin CLI prints it.
fn skill_text(v: &Value) -> String {
    let s = &v["skill"];
    let d = &s["desired"];
    let word = |b: &Value, yes: &'static str, no: &'static str| if b == true { yes } else { no };
    let mut out = format!(
        "{} on {}: {} and {} by root ({}), {}",
        s["skill"].as_str().unwrap_or(""),
        v["target_id"].as_str().unwrap_or(""),
        word(&d["installed"], "installed", "uninstalled"),
        word(&d["enabled"], "enabled", "disabled"),
        d["changed_by"].as_str().unwrap_or("never changed"),
        word(&s["open"], "callable", "not callable"),
    );
    if let Some(why) = s["closed_because"].as_str() {
        out.push_str(&format!(": {why}"));
    }
    match s["hub"].as_object() {
        Some(h) => out.push_str(&format!(
            "\nhub reports: version {}, {} published of {} tools{}",
            h.get("version").and_then(Value::as_str).unwrap_or("?"),
            h.get("published")
                .and_then(Value::as_array)
                .map_or(0, Vec::len),
            h.get("adapters")
                .and_then(Value::as_array)
                .map_or(0, Vec::len),
            if s["owner_disabled"] == true {
                ", switched off by the hub's owner"
            } else {
                ""
            },
        )),
        None => out.push_str("\nthe hub has never connected"),
    }
    if let Some(p) = s["hub_push"].as_str() {
        out.push_str(&format!("\n{p}"));
    }
    out
}

fn print(json_out: bool, v: &Value, human: impl FnOnce(&Value) -> String) {
    let text = if json_out {
        serde_json::to_string_pretty(v).unwrap_or_default()
    } else {
        human(v)
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}").and_then(|()| out.flush());
}

fn lease_line(l: &Value) -> String {
    format!(
        "{}  {:8}  target={}  profile={}  deadline={}  uses={}  last_used={}",
        l["session_id"].as_str().unwrap_or(""),
        l["status"].as_str().unwrap_or(""),
        l["target_id"].as_str().unwrap_or(""),
        l["capability_profile"].as_str().unwrap_or(""),
        l["deadline_at"].as_str().unwrap_or(""),
        l["use_count"],
        l["last_used_at"].as_str().unwrap_or("never"),
    )
}

fn event_line(e: &Value) -> String {
    format!(
        "#{} {}  {:7} {:28} target={} actor={} event={}{}",
        e["seq"],
        e["started_at"].as_str().unwrap_or(""),
        e["status"].as_str().unwrap_or(""),
        e["tool_id"].as_str().unwrap_or(""),
        e["target_id"].as_str().unwrap_or("-"),
        e["actor"]["id"].as_str().unwrap_or(""),
        e["event_id"].as_str().unwrap_or(""),
        e["error"]["code"]
            .as_str()
            .map(|c| format!(" error={c}"))
            .unwrap_or_default(),
    )
}

async fn admin(args: AdminArgs) -> anyhow::Result<ExitCode> {
    let token = match args.admin_token {
        Some(t) => t,
        None => {
            let path = args.data_dir.join("admin.token");
            std::fs::read_to_string(&path)
                .map(|s| s.trim().to_string())
                .with_context(|| {
                    format!(
                        "no --admin-token or MCP_ROOT_ADMIN_TOKEN, and cannot read {}",
                        path.display()
                    )
                })?
        }
    };
    let c = AdminClient::with_ca(args.root_url, token, args.ca_file.as_deref())?;
    match args.command {
        AdminCommand::Lease(cmd) => match cmd {
            LeaseCommand::Create {
                target,
                profile,
                ttl,
                audience,
                subnet,
                zone,
                json,
            } => {
                let mut body =
                    json!({ "target_id": target, "capability_profile": profile, "ttl_sec": ttl });
                for (k, v) in [
                    ("audience", audience),
                    ("subnet_id", subnet),
                    ("zone", zone),
                ] {
                    if let Some(v) = v {
                        body[k] = json!(v);
                    }
                }
                let v = c.post("/v1/root/mcp/sessions", body).await?;
                print(json, &v, |v| {
                    format!(
                        "session_id: {}\ntoken:      {}  (shown once)\ndeadline:   {}",
                        v["session_id"].as_str().unwrap_or(""),
                        v["token"].as_str().unwrap_or(""),
                        v["deadline_at"].as_str().unwrap_or("")
                    )
                });
            }
            LeaseCommand::List { json } => {
                let v = c.get("/v1/root/mcp/sessions").await?;
                print(json, &v, |v| {
                    let lines: Vec<String> = v["sessions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(lease_line)
                        .collect();
                    if lines.is_empty() {
                        "no leases".into()
                    } else {
                        lines.join("\n")
                    }
                });
            }
            LeaseCommand::Get { session_id, json } => {
                let v = c
                    .get(&format!("/v1/root/mcp/sessions/{session_id}"))
                    .await?;
                print(json, &v, lease_line);
            }
            LeaseCommand::Revoke { session_id, json } => {
                let v = c
                    .post(
                        &format!("/v1/root/mcp/sessions/{session_id}/revoke"),
                        json!({}),
                    )
                    .await?;
                print(json, &v, lease_line);
            }
            LeaseCommand::VerifyProfile { file, json } => {
                return verify_profile(&c, &file, json).await;
            }
            LeaseCommand::RunProfile {
                session_id,
                ttl_sec,
                tools,
                output,
                token_file,
            } => {
                let mut body = json!({});
                if let Some(t) = ttl_sec {
                    body["ttl_sec"] = json!(t);
                }
                if !tools.is_empty() {
                    body["tools"] = json!(tools);
                }
                let v = c
                    .post(
                        &format!("/v1/root/mcp/sessions/{session_id}/run-profile"),
                        body,
                    )
                    .await?;
                let document = serde_json::to_string_pretty(&v["run_profile"])?;
                match &output {
                    Some(path) => std::fs::write(path, format!("{document}\n"))
                        .with_context(|| format!("writing {}", path.display()))?,
                    None => println!("{document}"),
                }
                let token = v["token"].as_str().unwrap_or_default();
                match &token_file {
                    Some(path) => crate::secrets::write_private_file(path, &format!("{token}\n"))?,
                    None => eprintln!(
                        "run credential {}: {token}  (shown once)",
                        v["token_ref"].as_str().unwrap_or("")
                    ),
                }
                eprintln!(
                    "run credential {} until {} (event {})",
                    v["token_ref"].as_str().unwrap_or(""),
                    v["expires_at"].as_str().unwrap_or(""),
                    v["event_id"].as_str().unwrap_or("")
                );
            }
            LeaseCommand::Rotate { session_id, json } => {
                let v = c
                    .post(
                        &format!("/v1/root/mcp/sessions/{session_id}/rotate"),
                        json!({}),
                    )
                    .await?;
                print(json, &v, |v| {
                    format!(
                        "old lease {session_id} revoked\nsession_id: {}\ntoken:      {}  (shown once)\ndeadline:   {}",
                        v["session_id"].as_str().unwrap_or(""),
                        v["token"].as_str().unwrap_or(""),
                        v["deadline_at"].as_str().unwrap_or("")
                    )
                });
            }
        },
        AdminCommand::Operator(cmd) => operator_command(&c, cmd).await?,
        AdminCommand::Hub(cmd) => match cmd {
            HubCommand::Enroll {
                target,
                environment,
                subnet,
                zone,
                json,
            } => {
                let mut body = json!({ "target_id": target, "environment": environment });
                for (k, v) in [("subnet_id", subnet), ("zone", zone)] {
                    if let Some(v) = v {
                        body[k] = json!(v);
                    }
                }
                let v = c.post("/v1/root/hubs", body).await?;
                print(json, &v, |v| {
                    format!(
                        "target_id: {}\ntoken:     {}  (shown once; give it to the hub as its token file)",
                        v["target_id"].as_str().unwrap_or(""),
                        v["token"].as_str().unwrap_or("")
                    )
                });
            }
            HubCommand::RotateKey {
                target,
                grace_sec,
                token_file,
                json,
            } => {
                let body = match grace_sec {
                    Some(g) => json!({ "grace_sec": g }),
                    None => json!({}),
                };
                let mut v = c
                    .post(&format!("/v1/root/hubs/{target}/rotate-key"), body)
                    .await?;
                if let Some(path) = &token_file {
                    let token = v["token"].as_str().unwrap_or_default().to_owned();
                    crate::secrets::write_private_file(path, &format!("{token}\n"))?;
                    v["token"] = json!(format!("written to {}", path.display()));
                }
                print(json, &v, |v| {
                    format!(
                        "target_id: {}\ntoken:     {}  (shown once; replace the hub's token file with it)\nprevious token and key valid until {}",
                        v["target_id"].as_str().unwrap_or(""),
                        v["token"].as_str().unwrap_or(""),
                        v["previous_valid_until"].as_str().unwrap_or("")
                    )
                });
            }
            HubCommand::List { json } => {
                let v = c.get("/v1/root/hubs").await?;
                print(json, &v, |v| {
                    let lines: Vec<String> = v["targets"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|t| {
                            format!(
                                "{}  {:8}  env={}  last_seen={}  published={}",
                                t["target_id"].as_str().unwrap_or(""),
                                t["status"].as_str().unwrap_or(""),
                                t["environment"].as_str().unwrap_or(""),
                                t["last_seen_at"].as_str().unwrap_or("never"),
                                t["published_capabilities"]
                                    .as_array()
                                    .map(|a| a.len())
                                    .unwrap_or(0)
                            )
                        })
                        .collect();
                    if lines.is_empty() {
                        "no targets".into()
                    } else {
                        lines.join("\n")
                    }
                });
            }
        },
        AdminCommand::Skill { command } => {
            let (verb, a) = match command {
                SkillCmd::Install(a) => ("install", a),
                SkillCmd::Enable(a) => ("enable", a),
                SkillCmd::Disable(a) => ("disable", a),
                SkillCmd::Uninstall(a) => ("uninstall", a),
                SkillCmd::Status(a) => ("status", a),
            };
            let v = c
                .post(
                    &format!("/v1/root/hubs/{}/skills/{}/{verb}", a.target, a.skill),
                    json!({}),
                )
                .await?;
            print(a.json, &v, skill_text);
        }
        AdminCommand::Approvals(cmd) => match cmd {
            ApprovalsCommand::List { status, json } => {
                let v = c
                    .get_query("/v1/root/mcp/approvals", &[("status", status)])
                    .await?;
                print(json, &v, |v| {
                    let rows: Vec<String> = v["approvals"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(approval_line)
                        .collect();
                    if rows.is_empty() {
                        "no approvals".into()
                    } else {
                        rows.join("\n")
                    }
                });
            }
            ApprovalsCommand::Show { approval_id, json } => {
                let v = c
                    .get(&format!("/v1/root/mcp/approvals/{approval_id}"))
                    .await?;
                print(json, &v, |v| {
                    format!(
                        "{}\narguments: {}\neffect:\n{}",
                        approval_line(v),
                        v["arguments"],
                        serde_json::to_string_pretty(&v["effect"]).unwrap_or_default()
                    )
                });
            }
            ApprovalsCommand::Approve {
                approval_id,
                reason,
                json,
            } => decide(&c, "approve", &approval_id, reason, json).await?,
            ApprovalsCommand::Reject {
                approval_id,
                reason,
                json,
            } => decide(&c, "reject", &approval_id, reason, json).await?,
        },
        AdminCommand::Descriptors(cmd) => match cmd {
            AdminDescriptorsCommand::Publish { artifact_dir, json } => {
                let items = read_artifacts(&artifact_dir)?;
                let (names, descriptors): (Vec<String>, Vec<Value>) = items.into_iter().unzip();
                let v = c
                    .post(
                        "/v1/root/mcp/descriptors",
                        json!({ "descriptors": descriptors, "names": names }),
                    )
                    .await?;
                print(json, &v, |v| {
                    let set = &v["set"];
                    let mut out = format!(
                        "published descriptor set revision {} ({} descriptors, {})",
                        set["revision"],
                        v["descriptors"].as_array().map(Vec::len).unwrap_or(0),
                        set["set_hash"].as_str().unwrap_or("")
                    );
                    if let Some(c) = v["skill_catalog"].as_object() {
                        out.push_str(&format!(
                            "\nskill catalog: {} skills, revision {}",
                            c["skills"],
                            c["manifest_sha256"].as_str().unwrap_or("")
                        ));
                    }
                    out
                });
            }
            AdminDescriptorsCommand::List { json } => {
                let v = c.get("/v1/root/mcp/descriptors").await?;
                print(json, &v, |v| {
                    let set = &v["set"];
                    let mut lines = vec![format!(
                        "set: {} revision={} {}",
                        set["source"].as_str().unwrap_or(""),
                        set["revision"],
                        set["set_hash"].as_str().unwrap_or("")
                    )];
                    lines.extend(v["descriptors"].as_array().into_iter().flatten().map(|d| {
                        format!(
                            "{:24} {:8} fresh_until={}  {}",
                            d["descriptor_id"].as_str().unwrap_or(""),
                            d["freshness"].as_str().unwrap_or(""),
                            d["fresh_until"].as_str().unwrap_or(""),
                            d["class"].as_str().unwrap_or("")
                        )
                    }));
                    lines.join("\n")
                });
            }
        },
        AdminCommand::Replicas(ReplicasCommand::List { json }) => {
            let v = c.get("/v1/root/replicas").await?;
            print(json, &v, |v| {
                let mut lines = vec![format!(
                    "zone {} ({}, {}):",
                    v["zone"].as_str().unwrap_or("?"),
                    v["mode"].as_str().unwrap_or("?"),
                    v["backend"].as_str().unwrap_or("?")
                )];
                for r in v["replicas"].as_array().into_iter().flatten() {
                    let hubs: Vec<&str> = r["hubs"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    lines.push(format!(
                        "{}{:<24} {:<5} heartbeat {:>6} ms ago  {}  hubs: {}",
                        if r["self"] == true { "* " } else { "  " },
                        r["replica_id"].as_str().unwrap_or("?"),
                        r["health"].as_str().unwrap_or("?"),
                        r["heartbeat_age_ms"],
                        r["advertise_url"].as_str().unwrap_or(""),
                        if hubs.is_empty() {
                            "-".to_string()
                        } else {
                            hubs.join(", ")
                        }
                    ));
                }
                lines.join("\n")
            });
        }
        AdminCommand::Audit(cmd) => match cmd {
            AuditCommand::Tail { limit, json } => {
                let v = c
                    .get_query("/v1/root/mcp/audit", &[("limit", limit.to_string())])
                    .await?;
                print(json, &v, |v| {
                    let mut lines: Vec<String> = v["events"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(event_line)
                        .collect();
                    lines.reverse();
                    if lines.is_empty() {
                        "no events".into()
                    } else {
                        lines.join("\n")
                    }
                });
            }
            AuditCommand::Export {
                since,
                output,
                json,
            } => {
                let mut out: Box<dyn Write> = match &output {
                    Some(p) => Box::new(std::io::BufWriter::new(
                        std::fs::File::create(p)
                            .with_context(|| format!("cannot create {}", p.display()))?,
                    )),
                    None => Box::new(std::io::stdout().lock()),
                };
                let mut cursor: Option<String> = None;
                let mut n = 0u64;
                loop {
                    let mut q = vec![("order", "asc".to_string()), ("limit", "1000".to_string())];
                    if let Some(s) = &since {
                        q.push(("since", s.clone()));
                    }
                    if let Some(cur) = &cursor {
                        q.push(("cursor", cur.clone()));
                    }
                    let v = c.get_query("/v1/root/mcp/audit", &q).await?;
                    for e in v["events"].as_array().into_iter().flatten() {
                        writeln!(out, "{}", serde_json::to_string(e)?)?;
                        n += 1;
                    }
                    match v["next_cursor"].as_str() {
                        Some(next) => cursor = Some(next.to_string()),
                        None => break,
                    }
                }
                out.flush()?;
                if output.is_some() || json {
                    eprintln!(
                        "{}",
                        if json {
                            json!({ "exported": n }).to_string()
                        } else {
                            format!("exported {n} events")
                        }
                    );
                }
            }
            AuditCommand::Verify { json } => {
                let v = c.get("/v1/root/mcp/audit/verify").await?;
                let ok = v["ok"].as_bool().unwrap_or(false);
                print(json, &v, |v| {
                    if ok {
                        format!(
                            "audit chain intact: {} events, head {}",
                            v["checked"],
                            v["head_hash"].as_str().unwrap_or("")
                        )
                    } else {
                        let b = &v["first_broken"];
                        format!(
                            "audit chain BROKEN at seq {} (event {}): {}",
                            b["seq"],
                            b["event_id"].as_str().unwrap_or("?"),
                            b["reason"].as_str().unwrap_or("")
                        )
                    }
                });
                if !ok {
                    return Ok(ExitCode::from(3));
                }
            }
        },
    }
    Ok(ExitCode::SUCCESS)
}
