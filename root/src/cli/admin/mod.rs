//! `mcp-root admin …`: a client of a running root's REST family, one file per area.

mod approvals;
mod audit;
pub(crate) mod client;
mod commands;
mod descriptors;
mod fleet;
mod hubs;
mod leases;
mod operators;

use std::process::ExitCode;

use anyhow::Context;

pub use client::AdminClient;
pub(crate) use commands::*;

/// Runs one admin command against the root at `--root-url`.
pub(crate) async fn run(args: AdminArgs) -> anyhow::Result<ExitCode> {
    let signed_in = || {
        let file = args
            .credential_file
            .clone()
            .or_else(super::login::default_file)?;
        super::login::kept_for(&file, &args.root_url)
    };
    // A credential from `mcp-root login`, with the key it is bound to (DPoP).
    let (token, holder) = match args.admin_token.clone() {
        Some(t) => (t, None),
        None => match signed_in() {
            Some(k) => {
                let holder = k
                    .dpop_key
                    .as_deref()
                    .map(crate::dpop::holder::Holder::open)
                    .transpose()
                    .context("the kept credential's key")?;
                (k.credential, holder)
            }
            None => (read_admin_token(&args.data_dir)?, None),
        },
    };
    let c = AdminClient::with_ca(args.root_url, token, args.ca_file.as_deref())?.holding(holder);
    match args.command {
        AdminCommand::Lease(cmd) => return leases::run(&c, cmd).await,
        AdminCommand::Operator(cmd) => operators::run(&c, cmd).await?,
        AdminCommand::Hub(cmd) => hubs::run(&c, cmd).await?,
        AdminCommand::Skill { command } => hubs::skill(&c, command).await?,
        AdminCommand::Approvals(cmd) => approvals::run(&c, cmd).await?,
        AdminCommand::Descriptors(cmd) => descriptors::run(&c, cmd).await?,
        AdminCommand::Replicas(ReplicasCommand::List { json }) => {
            descriptors::replicas(&c, json).await?
        }
        AdminCommand::Audit(cmd) => return audit::run(&c, cmd).await,
        AdminCommand::Fleet(cmd) => return fleet::run(&c, cmd).await,
    }
    Ok(ExitCode::SUCCESS)
}

/// The bootstrap admin token root keeps in its data directory (break-glass).
fn read_admin_token(data_dir: &std::path::Path) -> anyhow::Result<String> {
    let path = data_dir.join("admin.token");
    std::fs::read_to_string(&path)
        .map(|s| s.trim().to_string())
        .with_context(|| {
            format!(
                "no --admin-token or MCP_ROOT_ADMIN_TOKEN, no credential from `mcp-root login`, and cannot read {}",
                path.display()
            )
        })
}
