//! Command line: `serve`, `demo`, and `admin` (a client of a running root over HTTP).
//!
//! Exit codes: 0 success, 1 failure, 2 usage error, 3 audit chain broken, 4 run profile
//! invalid.

pub(crate) mod admin;
pub(crate) mod login;
pub mod skills_sync;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};

use crate::config::RootConfig;
use admin::AdminArgs;
pub use admin::AdminClient;

#[derive(Parser, Debug)]
#[command(
    name = "mcp-root",
    version,
    about = "Root MCP gateway: governed, audited MCP tools for one zone"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The command line as clap defines it (its subcommands and flags), for docs and
/// completions.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Run the root daemon.
    Serve(ServeArgs),
    /// Run root on the embedded default, create a lease, and print ready-to-paste client config.
    Demo(ServeArgs),
    /// Operator commands against a running root.
    Admin(AdminArgs),
    /// Sign in with your identity provider (`[operators.oidc]` on root) and keep a
    /// short-lived root credential for `admin` commands.
    Login(login::LoginArgs),
    /// The audit trail, offline: no database and no running root.
    #[command(subcommand)]
    Audit(AuditOffline),
    /// The descriptor build pipeline (runs offline, e.g. in CI).
    #[command(subcommand)]
    Descriptors(DescriptorsCommand),
    /// The platform skill catalog client.
    #[command(subcommand)]
    Skills(SkillsCommand),
}

#[derive(Subcommand, Debug)]
pub(crate) enum DescriptorsCommand {
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
pub(crate) enum AuditOffline {
    /// Check an export (`admin audit export --verifiable`) against a signed checkpoint:
    /// names the first event that does not match. Exit 3 when it does not verify.
    VerifyExport {
        /// The export, one event per line.
        file: PathBuf,
        /// A file holding the checkpoint's signed note (`admin audit checkpoints --json`
        /// shows each one's `note`).
        #[arg(long)]
        checkpoint: PathBuf,
        /// The log's verifier key (`admin audit key`).
        #[arg(long)]
        key: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum SkillsCommand {
    /// Install the platform skill catalog of a root into DEST/NAMESPACE (validated whole,
    /// staged, swapped in atomically; any failure leaves the installed tree unchanged).
    Sync(skills_sync::SyncArgs),
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// TOML config file (every field optional).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Listen address, e.g. 127.0.0.1:8700.
    #[arg(long)]
    pub(crate) listen: Option<SocketAddr>,
    /// Data directory (embedded database, admin token).
    #[arg(long)]
    pub(crate) data_dir: Option<PathBuf>,
    /// Database URL: sqlite:PATH or postgres://...
    #[arg(long, env = "MCP_ROOT_DATABASE_URL")]
    pub(crate) database_url: Option<String>,
    /// Allow plain HTTP on a non-loopback address (warned at every start); prefer [tls].
    #[arg(long)]
    pub(crate) insecure_http: bool,
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
        Command::Skills(_) | Command::Descriptors(_) | Command::Audit(_) => "warn",
        // rmcp logs the start and end of every stateless request's service at info (three
        // lines per call, with the client's whole handshake in one): warnings only, unless
        // RUST_LOG asks for more.
        _ => "info,rmcp::service=warn",
    };
    let otel = start_otel(&cli.command);
    crate::telemetry::logging::init_with(level, true, otel.as_ref());
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match rt.block_on(dispatch(cli, demo)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    };
    if let Some(otel) = otel {
        otel.shutdown();
    }
    code
}

/// The daemon commands' OpenTelemetry exporter, when configured (`[telemetry]` or the
/// `OTEL_*` variables); a configuration that does not load is reported by the command itself.
fn start_otel(command: &Command) -> Option<mcp_shared::otel::Otel> {
    let (Command::Serve(args) | Command::Demo(args)) = command else {
        return None;
    };
    let configured = args.load().ok().and_then(|c| c.telemetry.otlp_endpoint);
    let endpoint = mcp_shared::otel::endpoint(configured.as_deref())?;
    match mcp_shared::otel::Otel::start(&endpoint, "mcp-root") {
        Ok(otel) => Some(otel),
        Err(e) => {
            eprintln!("warning: no traces are exported: {e}");
            None
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
        Command::Admin(args) => admin::run(args).await,
        Command::Login(args) => login::run(args).await,
        Command::Descriptors(cmd) => descriptors(cmd),
        Command::Audit(cmd) => audit_offline(cmd),
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

fn audit_offline(cmd: AuditOffline) -> anyhow::Result<ExitCode> {
    let AuditOffline::VerifyExport {
        file,
        checkpoint,
        key,
        json,
    } = cmd;
    let note = std::fs::read_to_string(&checkpoint)
        .with_context(|| format!("cannot read the checkpoint {}", checkpoint.display()))?;
    let export = std::fs::File::open(&file)
        .with_context(|| format!("cannot read the export {}", file.display()))?;
    let started = std::time::Instant::now();
    let outcome = crate::audit::export::verify(std::io::BufReader::new(export), &note, key.trim());
    let ms = started.elapsed().as_millis();
    match outcome {
        Ok(v) => {
            if json {
                println!(
                    "{}",
                    serde_json::json!({ "ok": true, "verified": v, "ms": ms })
                );
            } else {
                println!(
                    "export verified: {} events; the first {} match the checkpoint's root {} ({ms} ms)",
                    v.events, v.checkpoint_size, v.checkpoint_root
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if json {
                println!(
                    "{}",
                    serde_json::json!({ "ok": false, "error": e.to_string() })
                );
            } else {
                println!("export does NOT verify: {e}");
            }
            Ok(ExitCode::from(3))
        }
    }
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
