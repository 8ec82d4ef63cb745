//! `mcp-root admin hub …` and `admin skill …`: enrol targets, rotate their keys, list them;
//! switch a target's `infra_access_skill`.

use serde_json::{Value, json};

use super::{AdminClient, print};
use super::{HubCommand, SkillCmd};

/// Runs one hub command.
pub async fn run(c: &AdminClient, cmd: HubCommand) -> anyhow::Result<()> {
    match cmd {
        HubCommand::Enroll {
            target,
            environment,
            subnet,
            zone,
            json,
        } => {
            let mut body = json!({ "target_id": target, "environment": environment });
            for (k, v) in [("subnet_id", subnet), ("zone", zone)] {
                if let Some(v) = v {
                    body[k] = json!(v);
                }
            }
            let v = c.post("/v1/root/hubs", body).await?;
            print(json, &v, |v| {
                format!(
                    "target_id: {}\ntoken:     {}  (shown once; give it to the hub as its token file)",
                    v["target_id"].as_str().unwrap_or(""),
                    v["token"].as_str().unwrap_or("")
                )
            });
        }
        HubCommand::RotateKey {
            target,
            grace_sec,
            token_file,
            json,
        } => {
            let body = match grace_sec {
                Some(g) => json!({ "grace_sec": g }),
                None => json!({}),
            };
            let mut v = c
                .post(&format!("/v1/root/hubs/{target}/rotate-key"), body)
                .await?;
            if let Some(path) = &token_file {
                let token = v["token"].as_str().unwrap_or_default().to_owned();
                crate::secrets::write_private_file(path, &format!("{token}\n"))?;
                v["token"] = json!(format!("written to {}", path.display()));
            }
            print(json, &v, |v| {
                format!(
                    "target_id: {}\ntoken:     {}  (shown once; replace the hub's token file with it)\nprevious token and key valid until {}",
                    v["target_id"].as_str().unwrap_or(""),
                    v["token"].as_str().unwrap_or(""),
                    v["previous_valid_until"].as_str().unwrap_or("")
                )
            });
        }
        HubCommand::List { json } => {
            let v = c.get("/v1/root/hubs").await?;
            print(json, &v, |v| {
                let lines: Vec<String> = v["targets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| {
                        format!(
                            "{}  {:8}  env={}  last_seen={}  published={}",
                            t["target_id"].as_str().unwrap_or(""),
                            t["status"].as_str().unwrap_or(""),
                            t["environment"].as_str().unwrap_or(""),
                            t["last_seen_at"].as_str().unwrap_or("never"),
                            t["published_capabilities"]
                                .as_array()
                                .map(|a| a.len())
                                .unwrap_or(0)
                        )
                    })
                    .collect();
                if lines.is_empty() {
                    "no targets".into()
                } else {
                    lines.join("\n")
                }
            });
        }
    }
    Ok(())
}

/// Runs one skill command.
pub async fn skill(c: &AdminClient, command: SkillCmd) -> anyhow::Result<()> {
    let (verb, a) = match command {
        SkillCmd::Install(a) => ("install", a),
        SkillCmd::Enable(a) => ("enable", a),
        SkillCmd::Disable(a) => ("disable", a),
        SkillCmd::Uninstall(a) => ("uninstall", a),
        SkillCmd::Status(a) => ("status", a),
    };
    let v = c
        .post(
            &format!("/v1/root/hubs/{}/skills/{}/{verb}", a.target, a.skill),
            json!({}),
        )
        .await?;
    print(a.json, &v, skill_text);
    Ok(())
}

/// A target's skill as the admin CLI prints it.
fn skill_text(v: &Value) -> String {
    let s = &v["skill"];
    let d = &s["desired"];
    let word = |b: &Value, yes: &'static str, no: &'static str| if b == true { yes } else { no };
    let mut out = format!(
        "{} on {}: {} and {} by root ({}), {}",
        s["skill"].as_str().unwrap_or(""),
        v["target_id"].as_str().unwrap_or(""),
        word(&d["installed"], "installed", "uninstalled"),
        word(&d["enabled"], "enabled", "disabled"),
        d["changed_by"].as_str().unwrap_or("never changed"),
        word(&s["open"], "callable", "not callable"),
    );
    if let Some(why) = s["closed_because"].as_str() {
        out.push_str(&format!(": {why}"));
    }
    match s["hub"].as_object() {
        Some(h) => out.push_str(&format!(
            "\nhub reports: version {}, {} published of {} tools{}",
            h.get("version").and_then(Value::as_str).unwrap_or("?"),
            h.get("published")
                .and_then(Value::as_array)
                .map_or(0, Vec::len),
            h.get("adapters")
                .and_then(Value::as_array)
                .map_or(0, Vec::len),
            if s["owner_disabled"] == true {
                ", switched off by the hub's owner"
            } else {
                ""
            },
        )),
        None => out.push_str("\nthe hub has never connected"),
    }
    if let Some(p) = s["hub_push"].as_str() {
        out.push_str(&format!("\n{p}"));
    }
    out
}
