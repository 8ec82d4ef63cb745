//! `mcp-root skills sync`: installs the platform skill catalog into a repository.

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct SyncArgs {}

pub async fn main(_args: SyncArgs) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::SUCCESS)
}
