//! The command line: `mcp-hub run` (dial root and serve), `mcp-hub skill status` (the local
//! lifecycle view, read from the state directory without contacting root) and `mcp-hub skill
//! enable|disable` (the hub owner's own switch, which a running hub picks up).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::config::{HubConfig, HubFile, Overrides};

#[derive(Parser, Debug)]
#[command(
    name = "mcp-hub",
    version,
    about = "Hub daemon for a managed target of the Root MCP gateway"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Dial root and serve this target's operational surface (until Ctrl-C or SIGTERM).
    Run {
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        overrides: Overrides,
    },
    /// Skill lifecycle on this hub.
    Skill {
        #[command(subcommand)]
        command: SkillCmd,
    },
    /// Heap snapshots, offline.
    Heap {
        #[command(subcommand)]
        command: HeapCmd,
    },
}

#[derive(Subcommand, Debug)]
pub enum HeapCmd {
    /// Sum up the heap snapshots in a directory as a profiling session does: each read,
    /// checked and redacted, the first and the last diffed into the allocation sites that
    /// grew most. Prints the summary as JSON (the `heap` of `hub.memory.get_session`).
    Summarize {
        /// Where the snapshots are: pprof files (`heap.<pid>.<n>.pb.gz`, ...), or heaptrack
        /// raw traces (`heaptrack.<pid>.raw`).
        dir: PathBuf,
        /// `pprof` or `heaptrack`.
        #[arg(long, default_value = "pprof")]
        format: String,
        /// Only the snapshots process PID wrote.
        #[arg(long)]
        pid: Option<u32>,
    },
}

#[derive(Subcommand, Debug)]
pub enum SkillCmd {
    /// Print the local view of infra_access_skill: root's directions as last received
    /// (<state_dir>/skills.json) and the owner's switch (<state_dir>/skill-owner.json).
    Status {
        #[command(flatten)]
        at: SkillAt,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Switch infra_access_skill off on this hub, as its owner: it publishes nothing,
    /// whatever root directs, until switched on again. A running hub picks it up within a
    /// second and tells root, which shows it and cannot override it.
    Disable {
        #[command(flatten)]
        at: SkillAt,
    },
    /// Switch infra_access_skill on again on this hub (root's own state still applies).
    Enable {
        #[command(flatten)]
        at: SkillAt,
    },
}

/// Which hub a `skill` command is about: its configuration (for the state directory).
#[derive(clap::Args, Debug)]
pub struct SkillAt {
    #[arg(long)]
    config: Option<PathBuf>,
    #[command(flatten)]
    overrides: Overrides,
}

impl SkillAt {
    /// The hub's configuration file (not validated: only its state and adapters are read).
    fn file(&self) -> anyhow::Result<HubFile> {
        let mut file = match self.config.as_deref() {
            Some(p) => HubFile::load(p)?,
            None => HubFile::default(),
        };
        file.apply(&self.overrides);
        Ok(file)
    }
}

fn state_dir(file: &HubFile) -> anyhow::Result<PathBuf> {
    file.state_dir
        .clone()
        .context("missing configuration: state_dir (--state-dir or state_dir in the config file)")
}

/// Entry point of the binary: parses, runs, maps the outcome to an exit code.
pub fn main() -> std::process::ExitCode {
    main_with(&[])
}

/// [`main`] for a program that embeds the hub with adapters of its own
/// ([`crate::skill::adapters::EmbeddedAdapter`]).
pub fn main_with(
    embedded: &[&'static crate::skill::adapters::EmbeddedAdapter],
) -> std::process::ExitCode {
    crate::link::tls::install_crypto_provider();
    match run_with(Cli::parse(), embedded) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Runs the parsed command; the error explains what is missing.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    run_with(cli, &[])
}

/// [`run`] with the embedding program's adapters.
pub fn run_with(
    cli: Cli,
    embedded: &[&'static crate::skill::adapters::EmbeddedAdapter],
) -> anyhow::Result<()> {
    match cli.command {
        Command::Run { config, overrides } => {
            let config = HubConfig::load(config.as_deref(), &overrides)?;
            let otel = start_otel(&config);
            init_tracing(otel.as_ref());
            let rt = tokio::runtime::Runtime::new().context("tokio runtime")?;
            let served = rt.block_on(serve(config, embedded));
            if let Some(otel) = otel {
                otel.shutdown();
            }
            served
        }
        Command::Skill { command } => skill(command),
        Command::Heap { command } => heap(command),
    }
}

/// `mcp-hub heap summarize DIR`.
fn heap(command: HeapCmd) -> anyhow::Result<()> {
    let HeapCmd::Summarize { dir, format, pid } = command;
    let format = match format.as_str() {
        "pprof" => crate::config::HeapFormat::Pprof,
        "heaptrack" => crate::config::HeapFormat::Heaptrack,
        other => anyhow::bail!("--format must be pprof or heaptrack, not `{other}`"),
    };
    let cfg = crate::config::HeapProfilesConfig {
        dir,
        format,
        max_bytes: crate::config::MAX_SNAPSHOT_BYTES,
        keep: 2,
        keep_paths: Vec::new(),
    };
    let scratch = tempfile::tempdir().context("a scratch directory")?;
    let summary = crate::profiles::heap::collect::summarize_dir(cfg, pid, scratch.path())?;
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}

/// `mcp-hub skill status|enable|disable`: the local view, and the owner's switch.
fn skill(command: SkillCmd) -> anyhow::Result<()> {
    let (at, json) = match &command {
        SkillCmd::Status { at, json } => (at, *json),
        SkillCmd::Disable { at } | SkillCmd::Enable { at } => (at, false),
    };
    let file = at.file()?;
    let state_dir = state_dir(&file)?;
    match command {
        SkillCmd::Disable { .. } => {
            crate::skill::save_owner_switch(&state_dir, false)?;
            println!("infra_access_skill switched off on this hub by its owner");
        }
        SkillCmd::Enable { .. } => {
            crate::skill::save_owner_switch(&state_dir, true)?;
            println!("infra_access_skill switched on on this hub by its owner");
        }
        SkillCmd::Status { .. } => {}
    }
    let mut lifecycle = crate::skill::load_lifecycle(&state_dir)?;
    lifecycle.owner_enabled = crate::skill::load_owner_switch(&state_dir)?;
    // The built-in adapters and the configured command adapters, as the running hub.
    let decls: Vec<crate::skill::adapters::AdapterDecl> =
        crate::skill::adapters::served(file.provided())
            .map(|k| k.decl())
            .chain(file.skill.commands.iter().map(|c| c.decl()))
            .collect();
    let state = lifecycle.skill_state_with(&decls);
    if json {
        println!("{}", serde_json::to_string_pretty(&state)?);
        return Ok(());
    }
    println!(
        "{} {}: {} and {} as root directs; {} by the hub's owner",
        state.skill,
        state.version.as_deref().unwrap_or("?"),
        if state.installed {
            "installed"
        } else {
            "not installed"
        },
        if state.enabled { "enabled" } else { "disabled" },
        if state.owner_disabled {
            "switched off"
        } else {
            "switched on"
        },
    );
    if state.published.is_empty() {
        println!("publishes nothing");
    } else {
        println!("publishes: {}", state.published.join(", "));
    }
    Ok(())
}

/// Logs to stderr and, without colours, into the ring that `hub.get_logs` serves as stream
/// `hub` ([`crate::store::hublog`]).
/// The OpenTelemetry exporter, when `[telemetry]` or the `OTEL_*` variables configure one.
fn start_otel(config: &HubConfig) -> Option<mcp_shared::otel::Otel> {
    // The exporter's HTTP client is built now, on the process's TLS provider.
    crate::link::tls::install_crypto_provider();
    let endpoint = mcp_shared::otel::endpoint(config.telemetry.otlp_endpoint.as_deref())?;
    match mcp_shared::otel::Otel::start(&endpoint, "mcp-hub") {
        Ok(otel) => Some(otel),
        Err(e) => {
            eprintln!("warning: no traces are exported: {e}");
            None
        }
    }
}

fn init_tracing(otel: Option<&mcp_shared::otel::Otel>) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    if otel.is_some()
        && let Ok(directive) = mcp_shared::otel::Otel::directive().parse()
    {
        filter = filter.add_directive(directive);
    }
    // Whatever RUST_LOG says: tungstenite traces every frame, and the `hello` frame carries
    // the hub token. The caps only remove lines. Secrets never reach a log.
    let caps =
        tracing_subscriber::filter::filter_fn(mcp_shared::logging::metadata_within_payload_caps);
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(caps)
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(crate::store::hublog::RingWriter::new(
                    crate::store::hublog::global(),
                )),
        )
        .with(otel.map(|o| o.layer()))
        .try_init();
}

async fn serve(
    config: HubConfig,
    embedded: &[&'static crate::skill::adapters::EmbeddedAdapter],
) -> anyhow::Result<()> {
    tracing::info!(target_id = %config.target_id, root = %config.root_url, "mcp-hub starting");
    let hub = crate::start_with(config, embedded).await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("Ctrl-C handler")?,
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
    hub.shutdown().await;
    Ok(())
}
