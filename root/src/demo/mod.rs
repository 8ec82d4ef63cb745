//! `mcp-root demo`: root on the embedded SQLite store with a test hub connected in-process,
//! leases created and client configuration printed. Compiled into the binary only (the
//! `demo` feature, on by default), so that the library never depends on the hub's crate.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use mcp_root::api::bodies::{Audited, EnrollRequest, Enrolled, IssuedLeaseBody, NewLeaseRequest};
use mcp_root::cli::{AdminClient, ServeArgs, shutdown_signal};
use mcp_root::secrets::write_private_file;

/// The binary's [`mcp_root::cli::Demo`].
pub fn run(args: ServeArgs) -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<ExitCode>>>> {
    Box::pin(demo(args))
}

async fn demo(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let mut handle = mcp_root::run(args.load()?).await?;
    let base = handle.base_url();
    let client = AdminClient::new(base.clone(), handle.admin_token().to_string())?;
    let data_dir = handle.app.config.data_dir.clone();
    let target = "hub:test-alpha";

    // The demo hub's token lives beside root's data so a second `demo` reuses the enrolment.
    let token_path = data_dir.join("demo-hub.token");
    let hub_token = match std::fs::read_to_string(&token_path) {
        Ok(t) => Some(t.trim().to_string()),
        Err(_) => match client
            .post::<_, Audited<Enrolled>>(
                "/v1/root/hubs",
                &EnrollRequest {
                    target_id: target.into(),
                    environment: "test".into(),
                    subnet_id: Some("demo-subnet".into()),
                    zone: None,
                },
            )
            .await
        {
            Ok(enrolled) => {
                let t = enrolled.item.token;
                write_private_file(&token_path, &t)?;
                Some(t)
            }
            Err(e) => {
                eprintln!(
                    "warning: no demo hub: {e:#} (its token file {} is gone)",
                    token_path.display()
                );
                None
            }
        },
    };
    let hub = match hub_token {
        Some(token) => {
            let mut cfg = mcp_hub::config::HubConfig::new(
                target,
                "test",
                base.clone(),
                token,
                data_dir.join("demo-hub"),
            );
            cfg.subnet = Some("demo-subnet".into());
            cfg.zone = Some(handle.app.config.zone.clone());
            let hub = mcp_hub::start(cfg).await?;
            hub.wait_connected(std::time::Duration::from_secs(10))
                .await
                .context("the demo hub did not connect")?;
            Some(hub)
        }
        None => None,
    };

    let lease = |profile: &str| {
        let ask = NewLeaseRequest {
            target_id: target.into(),
            capability_profile: profile.into(),
            ttl_sec: 8 * 3600,
            audience: None,
            subnet_id: None,
            zone: None,
        };
        let client = &client;
        async move {
            client
                .post::<_, Audited<IssuedLeaseBody>>("/v1/root/mcp/sessions", &ask)
                .await
                .map(|issued| issued.item)
        }
    };
    let ops = lease("InfraOpsRead").await?;
    let dev = lease("AdaOSDevRead").await?;
    let url = handle.mcp_url();
    let token = &ops.token;
    let dev_token = &dev.token;
    println!(
        "Root MCP gateway demo: root on the embedded SQLite store, test hub `{target}` connected.\n"
    );
    println!("  MCP URL:    {url}");
    println!("  Bearer:     {token}");
    println!(
        "              (profile InfraOpsRead on {target}: hub.get_status, hub.get_runtime_summary, ...; until {})",
        ops.deadline_at
    );
    println!("  Dev bearer: {dev_token}");
    println!("              (profile AdaOSDevRead: sdk.* descriptive tools)");
    println!(
        "  Admin:      mcp-root admin --root-url {base} --data-dir {} hub list",
        data_dir.display()
    );
    println!(
        "  Console:    {base}/ui/  (log in with the admin token in {})\n",
        data_dir.join("admin.token").display()
    );
    println!("Codex (~/.codex/config.toml):\n");
    println!(
        "  [mcp_servers.root]\n  url = \"{url}\"\n  bearer_token_env_var = \"ROOT_MCP_TOKEN\"\n"
    );
    println!("  then: export ROOT_MCP_TOKEN={token}\n");
    println!("Claude Code:\n");
    println!(
        "  claude mcp add --transport http root {url} --header \"Authorization: Bearer {token}\"\n"
    );
    println!("Platform skills for your repository (any lease's bearer):\n");
    println!(
        "  mcp-root skills sync --url {url} --token-env ROOT_MCP_TOKEN --dest .agents/skills\n"
    );
    println!("Try it with curl:\n");
    println!(
        "  curl -s {base}/v1/root/mcp/call -H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' -d '{{\"tool_id\":\"hub.get_status\"}}'\n"
    );
    println!("Press Ctrl-C to stop.");
    let _ = std::io::stdout().flush();
    tokio::select! {
        r = handle.wait() => r?,
        _ = shutdown_signal() => {
            if let Some(h) = hub {
                h.shutdown().await;
            }
            handle.shutdown().await;
        }
    }
    Ok(ExitCode::SUCCESS)
}
