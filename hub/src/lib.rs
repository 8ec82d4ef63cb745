//! `mcp-hub`: the daemon that runs on a managed target, dials root over WebSocket and hosts
//! `infra_access_skill` with its execution adapters.
//!
//! This stage holds the command line and configuration only; the root channel, the skill and
//! its adapters arrive with the hub-and-routing work. `mcp-hub run` says so and exits non-zero
//! rather than pretending to serve.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

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
    /// Dial root and serve this target's operational surface.
    Run {
        #[arg(long)]
        config: Option<PathBuf>,
        /// Root's http(s) or ws(s) URL.
        #[arg(long)]
        root_url: Option<String>,
        #[arg(long)]
        token_file: Option<PathBuf>,
        #[arg(long)]
        target: Option<String>,
        #[arg(long)]
        environment: Option<String>,
    },
}

/// Runs the parsed command; the error explains what is missing.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run { .. } => anyhow::bail!(
            "the root channel is not implemented in this build of mcp-hub (protocol v{} types exist in mcp-shared)",
            mcp_shared::protocol::PROTOCOL_VERSION
        ),
    }
}
