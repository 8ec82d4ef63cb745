//! `mcp-root demo`: root on the embedded SQLite store with a test hub connected in-process,
//! leases created and client configuration printed. The hub ([`hub`]) serves every part of
//! the product: a managed service ([`app`]) with health checks, an allowed test, releases to
//! deploy, ProfileOps and NLU content, writes allowed (a `test` target, `test-only` scope).
//! Three more test hubs make a small fleet ([`fleet`]) for fleet runs. Everything lives
//! under the data directory. Compiled into the binary only (the `demo`
//! feature, on by default), so that the library never depends on the hub's crate.

pub(crate) mod app;
mod fleet;
mod hub;

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use mcp_root::api::bodies::{Audited, EnrollRequest, Enrolled, IssuedLeaseBody, NewLeaseRequest};
use mcp_root::cli::{AdminClient, ServeArgs, shutdown_signal};
use mcp_root::secrets::write_private_file;

/// The demo's one target.
const TARGET: &str = "hub:test-alpha";

/// The binary's [`mcp_root::cli::Demo`].
pub fn run(args: ServeArgs) -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<ExitCode>>>> {
    Box::pin(demo(args))
}

async fn demo(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let mut handle = mcp_root::run(args.load()?).await?;
    let base = handle.base_url();
    let client = AdminClient::new(base.clone(), handle.admin_token().to_string())?;
    let data_dir = handle.app.config.data_dir.clone();

    // The demo hub's token lives beside root's data so a second `demo` reuses the enrolment.
    let token_path = data_dir.join("demo-hub.token");
    let hub = if enrol(&client, &token_path).await {
        let parts = hub::prepare(
            &data_dir,
            &base,
            &handle.app.config.zone,
            TARGET,
            &token_path,
        )?;
        let cfg = mcp_hub::config::HubConfig::load(Some(&parts.config), &Default::default())
            .with_context(|| format!("the demo hub's {}", parts.config.display()))?;
        let hub = mcp_hub::start(cfg).await?;
        hub.wait_connected(std::time::Duration::from_secs(10))
            .await
            .context("the demo hub did not connect")?;
        Some((hub, parts))
    } else {
        None
    };

    let web = fleet::start(&client, &data_dir, &base, &handle.app.config.zone).await;

    let bearers = Bearers {
        ops: lease(&client, "InfraOpsRead").await?,
        control: lease(&client, "InfraOpsControl").await?,
        profile: lease(&client, "ProfileOpsControl").await?,
        nlu: lease(&client, "NLUTeacherAuthor").await?,
        dev: lease(&client, "AdaOSDevRead").await?,
    };
    welcome(
        &handle.mcp_url(),
        &base,
        &data_dir,
        &bearers,
        hub.as_ref().map(|(_, parts)| parts),
    );
    roles_to_try(&client, &data_dir).await;
    if !web.is_empty() {
        let agent = fleet_lease(&client).await?;
        fleet_walk_through(&base, &data_dir, web.len(), &agent);
    }
    println!("Press Ctrl-C to stop.");
    let _ = std::io::stdout().flush();
    tokio::select! {
        r = handle.wait() => r?,
        _ = shutdown_signal() => {
            if let Some((h, _)) = hub {
                h.shutdown().await;
            }
            for h in web {
                h.shutdown().await;
            }
            handle.shutdown().await;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Two named operators to try roles with (their credentials kept beside root's data, so a
/// second `demo` shows the same ones): a viewer, and an operator who hands out the
/// InfraOps profiles only.
async fn roles_to_try(client: &AdminClient, data_dir: &Path) {
    let tries = [
        (
            "demo-viewer",
            "Viewer:",
            &["viewer"][..],
            &[][..],
            "sees the console's pages a viewer may; every action refused",
        ),
        (
            "demo-operator",
            "Operator:",
            &["operator"][..],
            &["InfraOpsRead", "InfraOpsControl"][..],
            "issues InfraOps leases, runs fleets, cordons; no audit trail, no approvals",
        ),
    ];
    println!("Roles to try (console login, or mcp-root admin --admin-token):\n");
    for (name, label, roles, profiles, what) in tries {
        let path = data_dir.join(format!("{name}.token"));
        let token = match std::fs::read_to_string(&path) {
            Ok(t) => Some(t.trim().to_owned()),
            Err(_) => {
                let ask = serde_json::json!({ "name": name, "roles": roles, "profiles": profiles });
                let added = client
                    .post::<_, serde_json::Value>("/v1/root/operators", &ask)
                    .await;
                match added
                    .ok()
                    .and_then(|a| a["token"].as_str().map(str::to_owned))
                {
                    Some(t) if write_private_file(&path, &format!("{t}\n")).is_ok() => Some(t),
                    _ => None,
                }
            }
        };
        match token {
            Some(t) => println!("  {label:<11} {t}\n              ({what})"),
            None => println!("  {label:<11} operator {name} exists without its token file here"),
        }
    }
    println!();
}

/// Enrols the demo target once (its token kept in `token_path`); whether a hub can connect.
async fn enrol(client: &AdminClient, token_path: &Path) -> bool {
    if token_path.exists() {
        return true;
    }
    let request = EnrollRequest {
        target_id: TARGET.into(),
        environment: "test".into(),
        subnet_id: Some("demo-subnet".into()),
        zone: None,
        labels: Some([("role".to_string(), "demo".to_string())].into()),
    };
    let enrolled = client
        .post::<_, Audited<Enrolled>>("/v1/root/hubs", &request)
        .await
        .and_then(|e| write_private_file(token_path, &e.item.token).map_err(Into::into));
    match enrolled {
        Ok(()) => true,
        Err(e) => {
            eprintln!(
                "warning: no demo hub: {e:#} (its token file {} is gone)",
                token_path.display()
            );
            false
        }
    }
}

/// An agent's fleet lease on the demo's fleet (InfraOpsControl).
async fn fleet_lease(client: &AdminClient) -> anyhow::Result<IssuedLeaseBody> {
    issue(
        client,
        String::new(),
        Some(fleet::SELECTOR.into()),
        "InfraOpsControl",
    )
    .await
}

async fn lease(client: &AdminClient, profile: &str) -> anyhow::Result<IssuedLeaseBody> {
    issue(client, TARGET.into(), None, profile).await
}

/// A lease of eight hours on `target_id`, or on `selector` (a fleet lease).
async fn issue(
    client: &AdminClient,
    target_id: String,
    selector: Option<String>,
    profile: &str,
) -> anyhow::Result<IssuedLeaseBody> {
    let ask = NewLeaseRequest {
        target_id,
        selector,
        capability_profile: profile.into(),
        ttl_sec: 8 * 3600,
        audience: None,
        subnet_id: None,
        zone: None,
        rate: None,
    };
    let issued = client
        .post::<_, Audited<IssuedLeaseBody>>("/v1/root/mcp/sessions", &ask)
        .await?;
    Ok(issued.item)
}

/// The demo's leases, one per kind of work.
struct Bearers {
    ops: IssuedLeaseBody,
    control: IssuedLeaseBody,
    profile: IssuedLeaseBody,
    nlu: IssuedLeaseBody,
    dev: IssuedLeaseBody,
}

fn welcome(url: &str, base: &str, data_dir: &Path, b: &Bearers, hub: Option<&hub::DemoHub>) {
    let token = &b.ops.token;
    match hub {
        Some(parts) => println!(
            "Root MCP gateway demo: root on the embedded SQLite store, test hub `{TARGET}` connected\n\
             (its configuration: {}; managed service `{}`, allowed test `{}`{}).\n",
            parts.config.display(),
            hub::SERVICE,
            hub::TEST,
            if parts.deploys {
                ", releases v1 and v2 to deploy"
            } else {
                ""
            },
        ),
        None => println!("Root MCP gateway demo: root on the embedded SQLite store, no hub.\n"),
    }
    println!("  MCP URL:    {url}");
    println!("  Bearer:     {token}");
    println!(
        "              (profile InfraOpsRead on {TARGET}: hub.get_status, hub.run_healthchecks, hub.get_logs, ...; until {})",
        b.ops.deadline_at
    );
    println!("  Control bearer: {}", b.control.token);
    println!(
        "              (InfraOpsControl: also the test-only writes: restart, allowed tests, deploy, rollback)"
    );
    println!("  Profile bearer: {}", b.profile.token);
    println!("              (ProfileOpsControl: hub.memory.* on the managed service)");
    println!("  NLU bearer: {}", b.nlu.token);
    println!("              (NLUTeacherAuthor: nlu_authoring.* on the sample content)");
    println!("  Dev bearer: {}", b.dev.token);
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
    walk_through(base, token, &b.control.token);
}

/// A fleet read and a fleet write (preview, then the run it confirms) on the demo's fleet.
fn fleet_walk_through(base: &str, data_dir: &Path, hubs: usize, agent: &IssuedLeaseBody) {
    let admin = format!(
        "mcp-root admin --root-url {base} --data-dir {}",
        data_dir.display()
    );
    let on = format!("--selector '{}'", fleet::SELECTOR);
    let write = format!(
        "{on} --tool hub.run_allowed_tests --arguments '{{\"name\":\"{}\"}}'",
        fleet::TEST
    );
    println!(
        "A fleet of {hubs} more test hubs ({}, label role=web): a read on all of them, one canary first;\n\
         a write's preview on each, then the run its one confirmation starts:\n",
        fleet::TARGETS.join(", ")
    );
    println!("  {admin} fleet run {on} --tool hub.get_status --canary 1 --wait");
    println!("  {admin} fleet preview {write}");
    println!("  {admin} fleet run {write} --confirm <the preview's token> --wait\n");
    println!("  Fleet bearer: {}", agent.token);
    println!(
        "              (an agent's fleet lease on `{}`, InfraOpsControl: root.run_fleet_read, root.run_fleet_write, root.get_fleet_run)\n",
        fleet::SELECTOR
    );
}

/// Three calls with curl: a read, a write's preview, and its execute.
fn walk_through(base: &str, read: &str, control: &str) {
    let call = |bearer: &str, body: &str| {
        format!(
            "curl -s {base}/v1/root/mcp/call -H 'Authorization: Bearer {bearer}' -H 'Content-Type: application/json' -d '{body}'"
        )
    };
    let service = hub::SERVICE;
    println!(
        "Try it with curl (a read; a write's preview, which answers a confirmation_token; its execute):\n"
    );
    println!("  {}", call(read, r#"{"tool_id":"hub.run_healthchecks"}"#));
    println!(
        "  {}",
        call(
            control,
            &format!(
                r#"{{"tool_id":"hub.restart_service","arguments":{{"service":"{service}"}}}}"#
            )
        )
    );
    println!(
        "  {}\n",
        call(
            control,
            &format!(
                r#"{{"tool_id":"hub.restart_service","arguments":{{"service":"{service}","phase":"execute","confirmation_token":"<from the preview>","idempotency_key":"demo-1"}}}}"#
            )
        )
    );
}
