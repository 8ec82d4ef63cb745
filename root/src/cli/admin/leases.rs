//! `mcp-root admin lease …`: issue, list, show, revoke, rotate leases; run profiles.

use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};

use super::LeaseCommand;
use super::{AdminClient, print};

/// Runs one lease command.
pub async fn run(c: &AdminClient, cmd: LeaseCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        LeaseCommand::Create {
            target,
            profile,
            ttl,
            audience,
            subnet,
            zone,
            json,
        } => {
            let mut body =
                json!({ "target_id": target, "capability_profile": profile, "ttl_sec": ttl });
            for (k, v) in [
                ("audience", audience),
                ("subnet_id", subnet),
                ("zone", zone),
            ] {
                if let Some(v) = v {
                    body[k] = json!(v);
                }
            }
            let v = c.post("/v1/root/mcp/sessions", body).await?;
            print(json, &v, |v| {
                format!(
                    "session_id: {}\ntoken:      {}  (shown once)\ndeadline:   {}",
                    v["session_id"].as_str().unwrap_or(""),
                    v["token"].as_str().unwrap_or(""),
                    v["deadline_at"].as_str().unwrap_or("")
                )
            });
        }
        LeaseCommand::List { json } => {
            let v = c.get("/v1/root/mcp/sessions").await?;
            print(json, &v, |v| {
                let lines: Vec<String> = v["sessions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(lease_line)
                    .collect();
                if lines.is_empty() {
                    "no leases".into()
                } else {
                    lines.join("\n")
                }
            });
        }
        LeaseCommand::Get { session_id, json } => {
            let v = c
                .get(&format!("/v1/root/mcp/sessions/{session_id}"))
                .await?;
            print(json, &v, lease_line);
        }
        LeaseCommand::Revoke { session_id, json } => {
            let v = c
                .post(
                    &format!("/v1/root/mcp/sessions/{session_id}/revoke"),
                    json!({}),
                )
                .await?;
            print(json, &v, lease_line);
        }
        LeaseCommand::VerifyProfile { file, json } => {
            return verify_profile(c, &file, json).await;
        }
        LeaseCommand::RunProfile {
            session_id,
            ttl_sec,
            tools,
            output,
            token_file,
        } => {
            let mut body = json!({});
            if let Some(t) = ttl_sec {
                body["ttl_sec"] = json!(t);
            }
            if !tools.is_empty() {
                body["tools"] = json!(tools);
            }
            let v = c
                .post(
                    &format!("/v1/root/mcp/sessions/{session_id}/run-profile"),
                    body,
                )
                .await?;
            let document = serde_json::to_string_pretty(&v["run_profile"])?;
            match &output {
                Some(path) => std::fs::write(path, format!("{document}\n"))
                    .with_context(|| format!("writing {}", path.display()))?,
                None => println!("{document}"),
            }
            let token = v["token"].as_str().unwrap_or_default();
            match &token_file {
                Some(path) => crate::secrets::write_private_file(path, &format!("{token}\n"))?,
                None => eprintln!(
                    "run credential {}: {token}  (shown once)",
                    v["token_ref"].as_str().unwrap_or("")
                ),
            }
            eprintln!(
                "run credential {} until {} (event {})",
                v["token_ref"].as_str().unwrap_or(""),
                v["expires_at"].as_str().unwrap_or(""),
                v["event_id"].as_str().unwrap_or("")
            );
        }
        LeaseCommand::Rotate { session_id, json } => {
            let v = c
                .post(
                    &format!("/v1/root/mcp/sessions/{session_id}/rotate"),
                    json!({}),
                )
                .await?;
            print(json, &v, |v| {
                format!(
                    "old lease {session_id} revoked\nsession_id: {}\ntoken:      {}  (shown once)\ndeadline:   {}",
                    v["session_id"].as_str().unwrap_or(""),
                    v["token"].as_str().unwrap_or(""),
                    v["deadline_at"].as_str().unwrap_or("")
                )
            });
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `admin lease verify-profile FILE`: root judges the document as it is in the file (not
/// re-serialized), so any changed byte of meaning reads as tampered. Exit 4 when invalid.
async fn verify_profile(
    c: &AdminClient,
    file: &std::path::Path,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let text = if file == std::path::Path::new("-") {
        std::io::read_to_string(std::io::stdin()).context("cannot read standard input")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?
    };
    let v = match serde_json::from_str::<Value>(&text) {
        Ok(document) => c.post("/v1/root/mcp/run-profiles/verify", document).await?,
        Err(e) => {
            json!({ "valid": false, "reason": "malformed", "message": format!("not JSON: {e}") })
        }
    };
    let valid = v["valid"] == true;
    print(json_out, &v, |v| {
        if valid {
            format!(
                "valid: run {} of {}, expires at {} (key {})",
                v["run_id"].as_str().unwrap_or(""),
                v["owner"].as_str().unwrap_or(""),
                v["expires_at"].as_str().unwrap_or(""),
                v["key_id"].as_str().unwrap_or("")
            )
        } else {
            format!(
                "invalid ({}): {}",
                v["reason"].as_str().unwrap_or("unknown"),
                v["message"].as_str().unwrap_or("")
            )
        }
    });
    Ok(if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(4)
    })
}

fn lease_line(l: &Value) -> String {
    format!(
        "{}  {:8}  target={}  profile={}  deadline={}  uses={}  last_used={}",
        l["session_id"].as_str().unwrap_or(""),
        l["status"].as_str().unwrap_or(""),
        l["target_id"].as_str().unwrap_or(""),
        l["capability_profile"].as_str().unwrap_or(""),
        l["deadline_at"].as_str().unwrap_or(""),
        l["use_count"],
        l["last_used_at"].as_str().unwrap_or("never"),
    )
}
