//! `mcp-root admin approvals …`: list, show, approve and reject write approvals.

use super::client::{AdminClient, lines_or, print, segment};
use super::commands::ApprovalsCommand;
use crate::api::bodies::{ApprovalList, ApprovalView, Audited, Decided, DecisionRequest};

/// Runs one approvals command.
pub(super) async fn run(c: &AdminClient, cmd: ApprovalsCommand) -> anyhow::Result<()> {
    match cmd {
        ApprovalsCommand::List { status, json } => {
            let list: ApprovalList = c
                .get_query("/v1/root/mcp/approvals", &[("status", status)])
                .await?;
            print(json, &list, |l| {
                lines_or(
                    l.approvals.iter().map(approval_line).collect(),
                    "no approvals",
                )
            });
        }
        ApprovalsCommand::Show { approval_id, json } => {
            let a: ApprovalView = c
                .get(&format!(
                    "/v1/root/mcp/approvals/{}",
                    segment(&approval_id)?
                ))
                .await?;
            print(json, &a, |a| {
                format!(
                    "{}\narguments: {}\neffect:\n{}",
                    approval_line(a),
                    a.arguments,
                    serde_json::to_string_pretty(&a.effect).unwrap_or_default()
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
    let decided: Audited<Decided> = c
        .post(
            &format!(
                "/v1/root/mcp/approvals/{}/{}",
                segment(approval_id)?,
                segment(verb)?
            ),
            &DecisionRequest { reason },
        )
        .await?;
    print(json_out, &decided, |d| {
        format!(
            "{} (audit event {})",
            approval_line(&d.item.approval),
            d.event_id
        )
    });
    Ok(())
}

fn approval_line(a: &ApprovalView) -> String {
    format!(
        "{}  {:8}  {}  target={}  requested={}  expires={}",
        a.approval_id,
        a.status.as_str(),
        a.tool_id,
        a.target_id,
        a.requested_at,
        a.expires_at,
    )
}
