//! `mcp-root admin descriptors …` and `admin replicas list`: publish and list the served
//! descriptor set; the zone's replicas.

use serde_json::{Value, json};

use super::AdminDescriptorsCommand;
use super::{AdminClient, print};

/// Runs one descriptors command.
pub async fn run(c: &AdminClient, cmd: AdminDescriptorsCommand) -> anyhow::Result<()> {
    match cmd {
        AdminDescriptorsCommand::Publish { artifact_dir, json } => {
            let items = crate::cli::read_artifacts(&artifact_dir)?;
            let (names, descriptors): (Vec<String>, Vec<Value>) = items.into_iter().unzip();
            let v = c
                .post(
                    "/v1/root/mcp/descriptors",
                    json!({ "descriptors": descriptors, "names": names }),
                )
                .await?;
            print(json, &v, |v| {
                let set = &v["set"];
                let mut out = format!(
                    "published descriptor set revision {} ({} descriptors, {})",
                    set["revision"],
                    v["descriptors"].as_array().map(Vec::len).unwrap_or(0),
                    set["set_hash"].as_str().unwrap_or("")
                );
                if let Some(c) = v["skill_catalog"].as_object() {
                    out.push_str(&format!(
                        "\nskill catalog: {} skills, revision {}",
                        c["skills"],
                        c["manifest_sha256"].as_str().unwrap_or("")
                    ));
                }
                out
            });
        }
        AdminDescriptorsCommand::List { json } => {
            let v = c.get("/v1/root/mcp/descriptors").await?;
            print(json, &v, |v| {
                let set = &v["set"];
                let mut lines = vec![format!(
                    "set: {} revision={} {}",
                    set["source"].as_str().unwrap_or(""),
                    set["revision"],
                    set["set_hash"].as_str().unwrap_or("")
                )];
                lines.extend(v["descriptors"].as_array().into_iter().flatten().map(|d| {
                    format!(
                        "{:24} {:8} fresh_until={}  {}",
                        d["descriptor_id"].as_str().unwrap_or(""),
                        d["freshness"].as_str().unwrap_or(""),
                        d["fresh_until"].as_str().unwrap_or(""),
                        d["class"].as_str().unwrap_or("")
                    )
                }));
                lines.join("\n")
            });
        }
    }
    Ok(())
}

/// `admin replicas list`.
pub async fn replicas(c: &AdminClient, json: bool) -> anyhow::Result<()> {
    let v = c.get("/v1/root/replicas").await?;
    print(json, &v, |v| {
        let mut lines = vec![format!(
            "zone {} ({}, {}):",
            v["zone"].as_str().unwrap_or("?"),
            v["mode"].as_str().unwrap_or("?"),
            v["backend"].as_str().unwrap_or("?")
        )];
        for r in v["replicas"].as_array().into_iter().flatten() {
            let hubs: Vec<&str> = r["hubs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            lines.push(format!(
                "{}{:<24} {:<5} heartbeat {:>6} ms ago  {}  hubs: {}",
                if r["self"] == true { "* " } else { "  " },
                r["replica_id"].as_str().unwrap_or("?"),
                r["health"].as_str().unwrap_or("?"),
                r["heartbeat_age_ms"],
                r["advertise_url"].as_str().unwrap_or(""),
                if hubs.is_empty() {
                    "-".to_string()
                } else {
                    hubs.join(", ")
                }
            ));
        }
        lines.join("\n")
    });
    Ok(())
}
