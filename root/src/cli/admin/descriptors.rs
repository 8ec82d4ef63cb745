//! `mcp-root admin descriptors …` and `admin replicas list`: publish and list the served
//! descriptor set; the zone's replicas.

use anyhow::Context;
use serde_json::Value;

use super::client::{AdminClient, print};
use super::commands::AdminDescriptorsCommand;
use crate::api::bodies::{
    Audited, DescriptorList, DescriptorSummary, Health, PublishRequest, ZoneView,
};
use crate::descriptors::SetOrigin;

/// Runs one descriptors command.
pub(super) async fn run(c: &AdminClient, cmd: AdminDescriptorsCommand) -> anyhow::Result<()> {
    match cmd {
        AdminDescriptorsCommand::Publish { artifact_dir, json } => {
            let (names, descriptors) = read_artifacts(&artifact_dir)?.into_iter().unzip();
            let published: Audited<DescriptorList> = c
                .post(
                    "/v1/root/mcp/descriptors",
                    &PublishRequest { descriptors, names },
                )
                .await?;
            print(json, &published, |p| {
                let list = &p.item;
                let mut out = format!(
                    "published descriptor set revision {} ({} descriptors, {})",
                    revision(&list.set),
                    list.descriptors.len(),
                    list.set.set_hash
                );
                if let Some(c) = &list.skill_catalog {
                    out.push_str(&format!(
                        "\nskill catalog: {} skills, revision {}",
                        c.skills, c.manifest_sha256
                    ));
                }
                out
            });
        }
        AdminDescriptorsCommand::List { json } => {
            let list: DescriptorList = c.get("/v1/root/mcp/descriptors").await?;
            print(json, &list, |l| {
                let mut lines = vec![format!(
                    "set: {} revision={} {}",
                    l.set.source.as_str(),
                    revision(&l.set),
                    l.set.set_hash
                )];
                lines.extend(l.descriptors.iter().map(descriptor_line));
                lines.join("\n")
            });
        }
    }
    Ok(())
}

/// A set's store revision as printed (`null` for a set that was never published).
fn revision(set: &SetOrigin) -> String {
    set.revision
        .map_or_else(|| "null".into(), |r| r.to_string())
}

fn descriptor_line(d: &DescriptorSummary) -> String {
    format!(
        "{:24} {:8} fresh_until={}  {}",
        d.header.descriptor_id,
        d.freshness,
        mcp_shared::time::format(d.header.fresh_until),
        d.class
    )
}

/// `admin replicas list`.
pub(crate) async fn replicas(c: &AdminClient, json: bool) -> anyhow::Result<()> {
    let zone: ZoneView = c.get("/v1/root/replicas").await?;
    print(json, &zone, |z| {
        let mut lines = vec![format!("zone {} ({}, {}):", z.zone, z.mode, z.backend)];
        for r in &z.replicas {
            lines.push(format!(
                "{}{:<24} {:<5} heartbeat {:>6} ms ago  {}  hubs: {}",
                if r.this { "* " } else { "  " },
                r.replica_id,
                match r.health {
                    Health::Up => "up",
                    Health::Down => "down",
                },
                r.heartbeat_age_ms,
                r.advertise_url.as_deref().unwrap_or(""),
                if r.hubs.is_empty() {
                    "-".to_string()
                } else {
                    r.hubs.join(", ")
                }
            ));
        }
        lines.join("\n")
    });
    Ok(())
}

/// Reads an artifact directory: `(file name, JSON)` of every `*.json`, sorted by name.
fn read_artifacts(dir: &std::path::Path) -> anyhow::Result<Vec<(String, Value)>> {
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
