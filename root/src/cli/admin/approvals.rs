//! `mcp-root admin approvals …`: list, show, approve and reject write approvals.

use serde_json::{Value, json};

use super::ApprovalsCommand;
use super::{AdminClient, print};

/// Runs one approvals command.
pub async fn run(c: &AdminClient, cmd: ApprovalsCommand) -> anyhow::Result<()> {
    match cmd {
        ApprovalsCommand::List { status, json } => {
            let v = c
                .get_query("/v1/root/mcp/approvals", &[("status", status)])
                .await?;
            print(json, &v, |v| {
                let rows: Vec<String> = v["approvals"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(approval_line)
                    .collect();
                if rows.is_empty() {
                    "no approvals".into()
                } else {
                    rows.join("\n")
                }
            });
        }
        ApprovalsCommand::Show { approval_id, json } => {
            let v = c
                .get(&format!("/v1/root/mcp/approvals/{approval_id}"))
                .await?;
            print(json, &v, |v| {
                format!(
                    "{}\narguments: {}\neffect:\n{}",
                    approval_line(v),
                    v["arguments"],
                    serde_json::to_string_pretty(&v["effect"]).unwrap_or_default()
                )
            });
        }
        ApprovalsCommand::Approve {
            approval_id,
            reason,
            json,
        } => decide(c, "approve", &approval_id, reason, json).await?,
        ApprovalsCommand::Reject {
            approval_id,
            reason,
            json,
        } => decide(c, "reject", &approval_id, reason, json).await?,
    }
    Ok(())
}

async fn decide(
    c: &AdminClient,
    verb: &str,
    approval_id: &str,
    reason: Option<String>,
    json_out: bool,
) -> anyhow::Result<()> {
    let body = match reason {
        Some(r) => json!({ "reason": r }),
        None => json!({}),
    };
    let v = c
        .post(
            &format!("/v1/root/mcp/approvals/{approval_id}/{verb}"),
            body,
        )
        .await?;
    print(json_out, &v, |v| {
        format!(
            "{} (audit event {})",
            approval_line(&v["approval"]),
            v["event_id"].as_str().unwrap_or("")
        )
    });
    Ok(())
}

fn approval_line(a: &Value) -> String {
    format!(
        "{}  {:8}  {}  target={}  requested={}  expires={}",
        a["approval_id"].as_str().unwrap_or(""),
        a["status"].as_str().unwrap_or(""),
        a["tool_id"].as_str().unwrap_or(""),
        a["target_id"].as_str().unwrap_or(""),
        a["requested_at"].as_str().unwrap_or(""),
        a["expires_at"].as_str().unwrap_or(""),
    )
}
