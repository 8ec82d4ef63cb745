//! `mcp-root admin operator …`: add, list and revoke named operators.

use serde_json::json;

use super::OperatorCommand;
use super::{AdminClient, print};

/// `mcp-root admin operator add|list|revoke`.
pub async fn run(c: &AdminClient, cmd: OperatorCommand) -> anyhow::Result<()> {
    match cmd {
        OperatorCommand::Add {
            name,
            token_file,
            json,
        } => {
            let mut v = c
                .post("/v1/root/operators", json!({ "name": name }))
                .await?;
            if let Some(path) = &token_file {
                let token = v["token"].as_str().unwrap_or_default().to_owned();
                crate::secrets::write_private_file(path, &format!("{token}\n"))?;
                v["token"] = json!(format!("written to {}", path.display()));
            }
            print(json, &v, |v| {
                format!(
                    "operator: {}\ntoken:    {}  (shown once)",
                    v["name"].as_str().unwrap_or(""),
                    v["token"].as_str().unwrap_or("")
                )
            });
        }
        OperatorCommand::List { json } => {
            let v = c.get("/v1/root/operators").await?;
            print(json, &v, |v| {
                v["operators"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|o| {
                        let by = |k: &str| o[k].as_str().unwrap_or("-").to_owned();
                        format!(
                            "{:<24} {:<8} added {} by {}{}",
                            o["name"].as_str().unwrap_or(""),
                            o["status"].as_str().unwrap_or(""),
                            by("created_at"),
                            by("created_by"),
                            o["revoked_at"]
                                .as_str()
                                .map(|at| format!(", revoked {at} by {}", by("revoked_by")))
                                .unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
        OperatorCommand::Revoke { name, json } => {
            let v = c
                .post(&format!("/v1/root/operators/{name}/revoke"), json!({}))
                .await?;
            print(json, &v, |v| {
                format!("operator {} revoked", v["name"].as_str().unwrap_or(""))
            });
        }
    }
    Ok(())
}
