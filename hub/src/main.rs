//! `mcp-hub` binary: parses the command line and hands over to [`mcp_hub::run`].

use clap::Parser;

fn main() -> std::process::ExitCode {
    match mcp_hub::run(mcp_hub::Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
