//! The demo's small fleet: three more test hubs (`hub:test-web-1` to `-3`, label
//! `role=web`) connected in-process beside the demo hub, each with one allowed test, `smoke`,
//! which appends a line to `runs.log` in its state directory, so fleet runs (a read on
//! `label:role=web`, a write's preview and confirmed run) have a fleet to go through. Their
//! tokens and configurations live under `<data>/demo-fleet/`, so a second `demo` reuses the
//! enrolments.

use std::path::Path;

use anyhow::Context;
use mcp_root::api::bodies::{Audited, EnrollRequest, Enrolled};
use mcp_root::cli::AdminClient;
use mcp_root::secrets::write_private_file;

/// The fleet's targets.
pub(crate) const TARGETS: [&str; 3] = ["hub:test-web-1", "hub:test-web-2", "hub:test-web-3"];
/// The selector naming them.
pub(crate) const SELECTOR: &str = "label:role=web";
/// Their allowed test.
pub(crate) const TEST: &str = "smoke";

/// Enrols (once) and starts the fleet's hubs; the ones that connected. A hub that cannot
/// start is reported and left out.
pub(crate) async fn start(
    client: &AdminClient,
    data_dir: &Path,
    root_url: &str,
    zone: &str,
) -> Vec<mcp_hub::HubHandle> {
    let mut hubs = Vec::new();
    for target in TARGETS {
        match one(client, data_dir, root_url, zone, target).await {
            Ok(h) => hubs.push(h),
            Err(e) => eprintln!("warning: no demo fleet hub `{target}`: {e:#}"),
        }
    }
    hubs
}

async fn one(
    client: &AdminClient,
    data_dir: &Path,
    root_url: &str,
    zone: &str,
    target: &str,
) -> anyhow::Result<mcp_hub::HubHandle> {
    let dir = std::path::absolute(data_dir)?.join("demo-fleet");
    let name = target.trim_start_matches("hub:");
    let token = dir.join(format!("{name}.token"));
    let state = dir.join(name);
    std::fs::create_dir_all(&state)?;
    if !token.exists() {
        let request = EnrollRequest {
            target_id: target.into(),
            environment: "test".into(),
            subnet_id: Some("demo-subnet".into()),
            zone: None,
            labels: Some([("role".to_string(), "web".to_string())].into()),
        };
        let enrolled = client
            .post::<_, Audited<Enrolled>>("/v1/root/hubs", &request)
            .await?;
        write_private_file(&token, &enrolled.item.token)?;
    }
    let q = |s: &str| toml::Value::String(s.to_owned()).to_string();
    let log = state.join("runs.log");
    let text = format!(
        "# Written by `mcp-root demo` at every start: a demo fleet hub.\n\
         target_id = {target}\nenvironment = \"test\"\nsubnet = \"demo-subnet\"\nzone = {zone}\n\
         root_url = {root}\ntoken_file = {token}\nstate_dir = {state}\nwrite_scope = \"test-only\"\n\n\
         [[skill.allowed_tests]]\nname = \"{TEST}\"\n\
         argv = [\"sh\", \"-c\", {script}]\ntimeout_ms = 10000\n",
        target = q(target),
        zone = q(zone),
        root = q(root_url),
        token = q(&token.to_string_lossy()),
        state = q(&state.to_string_lossy()),
        script = q(&format!("date >> '{}'; echo smoke ok", log.display())),
    );
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(&config, text).with_context(|| format!("writing {}", config.display()))?;
    let cfg = mcp_hub::config::HubConfig::load(Some(&config), &Default::default())
        .with_context(|| format!("the demo fleet hub's {}", config.display()))?;
    let hub = mcp_hub::start(cfg).await?;
    hub.wait_connected(std::time::Duration::from_secs(10))
        .await
        .with_context(|| format!("`{target}` did not connect"))?;
    Ok(hub)
}
