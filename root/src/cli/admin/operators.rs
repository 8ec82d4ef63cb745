//! `mcp-root admin operator …`: add, list and revoke named operators.

use super::client::{AdminClient, print, segment};
use super::commands::OperatorCommand;
use crate::api::bodies::{
    Audited, NewOperator, NewOperatorRequest, OperatorList, OperatorStatus, OperatorView,
    RevokeOperatorRequest, RevokedOperator,
};

/// `mcp-root admin operator add|list|revoke`.
pub(super) async fn run(c: &AdminClient, cmd: OperatorCommand) -> anyhow::Result<()> {
    match cmd {
        OperatorCommand::Add {
            name,
            roles,
            profiles,
            token_file,
            json,
        } => {
            let roles = if roles.is_empty() {
                vec![crate::roles::Role::Viewer]
            } else {
                roles
            };
            let asked = NewOperatorRequest {
                name,
                roles,
                profiles,
            };
            let mut added: Audited<NewOperator> = c.post("/v1/root/operators", &asked).await?;
            if let Some(path) = &token_file {
                crate::secrets::write_private_file(path, &format!("{}\n", added.item.token))?;
                added.item.token = format!("written to {}", path.display());
            }
            print(json, &added, |a| {
                format!(
                    "operator: {}\nroles:    {}\nprofiles: {}\ntoken:    {}  (shown once)",
                    a.item.name,
                    role_names(&a.item.roles),
                    a.item.profiles.join(", "),
                    a.item.token
                )
            });
        }
        OperatorCommand::List { json } => {
            let list: OperatorList = c.get("/v1/root/operators").await?;
            print(json, &list, |l| {
                let lines: Vec<String> = l.operators.iter().map(operator_line).collect();
                lines.join("\n")
            });
        }
        OperatorCommand::Revoke {
            name,
            cascade,
            json,
        } => {
            let revoked: Audited<RevokedOperator> = c
                .post(
                    &format!("/v1/root/operators/{}/revoke", segment(&name)?),
                    &RevokeOperatorRequest { cascade },
                )
                .await?;
            print(json, &revoked, |r| {
                let e = &r.item.ended;
                format!(
                    "operator {} revoked\nended: {} OAuth grants, {} leases, {} descendants{}",
                    r.item.name,
                    e.grants,
                    e.leases,
                    e.descendants,
                    if e.cascade {
                        ""
                    } else {
                        " (leases they issued keep their deadlines; --cascade ends them)"
                    }
                )
            });
        }
    }
    Ok(())
}

/// `operator, auditor`.
fn role_names(roles: &[crate::roles::Role]) -> String {
    let names: Vec<&str> = roles.iter().map(|r| r.as_str()).collect();
    names.join(", ")
}

fn operator_line(o: &OperatorView) -> String {
    let or_dash = |s: &Option<String>| s.as_deref().unwrap_or("-").to_owned();
    format!(
        "{:<24} {:<8} {:<28} profiles {:<24} added {} by {}{}",
        o.name,
        match o.status {
            OperatorStatus::Active => "active",
            OperatorStatus::Revoked => "revoked",
        },
        role_names(&o.roles),
        match o.profiles.join(",") {
            p if p.is_empty() => "-".to_owned(),
            p => p,
        },
        or_dash(&o.created_at),
        or_dash(&o.created_by),
        o.revoked_at
            .as_ref()
            .map(|at| format!(", revoked {at} by {}", or_dash(&o.revoked_by)))
            .unwrap_or_default()
    )
}
