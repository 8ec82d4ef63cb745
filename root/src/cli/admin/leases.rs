//! `mcp-root admin lease …`: issue, list, show, revoke, rotate leases; run profiles.

use std::process::ExitCode;

use anyhow::Context;
use mcp_shared::lease::SessionLease;
use serde_json::{Value, json};

use super::client::{AdminClient, lines_or, page_footer, page_query, print, segment};
use super::commands::LeaseCommand;
use crate::api::bodies::{
    Audited, DelegationView, IssuedLeaseBody, IssuedRunProfile, LeaseList, NewLeaseRequest,
    ProfileVerdict, RunProfileRequest,
};

/// Runs one lease command.
pub(super) async fn run(c: &AdminClient, cmd: LeaseCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        LeaseCommand::Create {
            target,
            selector,
            profile,
            ttl,
            audience,
            subnet,
            zone,
            rate,
            json,
        } => {
            let ask = NewLeaseRequest {
                target_id: target.unwrap_or_default(),
                selector,
                capability_profile: profile,
                ttl_sec: ttl,
                audience,
                subnet_id: subnet,
                zone,
                rate: rate.map(crate::config::RawRate::Text),
            };
            let issued: Audited<IssuedLeaseBody> = c.post("/v1/root/mcp/sessions", &ask).await?;
            print(json, &issued, |i| issued_text(&i.item));
        }
        LeaseCommand::List {
            status,
            target,
            subnet,
            profile,
            page,
            json,
        } => {
            let filters = vec![
                ("status", status),
                ("target_id", target),
                ("subnet_id", subnet),
                ("capability_profile", profile),
            ];
            let path = "/v1/root/mcp/sessions";
            let mut list: LeaseList = c
                .get_query(path, &page_query(filters.clone(), &page, None))
                .await?;
            while page.all
                && let Some(next) = list.next_cursor.take()
            {
                let more: LeaseList = c
                    .get_query(path, &page_query(filters.clone(), &page, Some(next)))
                    .await?;
                list.sessions.extend(more.sessions);
                list.next_cursor = more.next_cursor;
            }
            print(json, &list, |l| {
                let footer = page_footer(
                    l.sessions.len(),
                    l.total,
                    &l.by_status,
                    l.next_cursor.as_deref(),
                );
                let lines = lines_or(l.sessions.iter().map(lease_line).collect(), "no leases");
                format!("{lines}\n{footer}")
            });
        }
        LeaseCommand::Get { session_id, json } => {
            let lease: SessionLease = c
                .get(&format!("/v1/root/mcp/sessions/{}", segment(&session_id)?))
                .await?;
            print(json, &lease, lease_line);
        }
        LeaseCommand::Show { session_id, json } => {
            let view: DelegationView = c
                .get(&format!(
                    "/v1/root/mcp/sessions/{}/delegation",
                    segment(&session_id)?
                ))
                .await?;
            print(json, &view, delegation_text);
        }
        LeaseCommand::Revoke { session_id, json } => {
            let revoked: Audited<SessionLease> = c
                .post(
                    &format!("/v1/root/mcp/sessions/{}/revoke", segment(&session_id)?),
                    &json!({}),
                )
                .await?;
            print(json, &revoked, |r| lease_line(&r.item));
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
            let ask = RunProfileRequest {
                ttl_sec,
                tools: (!tools.is_empty()).then_some(tools),
            };
            let issued: Audited<IssuedRunProfile> = c
                .post(
                    &format!(
                        "/v1/root/mcp/sessions/{}/run-profile",
                        segment(&session_id)?
                    ),
                    &ask,
                )
                .await?;
            let run = &issued.item;
            let document = serde_json::to_string_pretty(&run.run_profile)?;
            match &output {
                Some(path) => std::fs::write(path, format!("{document}\n"))
                    .with_context(|| format!("writing {}", path.display()))?,
                None => println!("{document}"),
            }
            match &token_file {
                Some(path) => {
                    crate::secrets::write_private_file(path, &format!("{}\n", run.token))?
                }
                None => eprintln!(
                    "run credential {}: {}  (shown once)",
                    run.token_ref, run.token
                ),
            }
            eprintln!(
                "run credential {} until {} (event {})",
                run.token_ref, run.expires_at, issued.event_id
            );
        }
        LeaseCommand::Rotate { session_id, json } => {
            let issued: Audited<IssuedLeaseBody> = c
                .post(
                    &format!("/v1/root/mcp/sessions/{}/rotate", segment(&session_id)?),
                    &json!({}),
                )
                .await?;
            print(json, &issued, |i| {
                format!("old lease {session_id} revoked\n{}", issued_text(&i.item))
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
    let verdict = match serde_json::from_str::<Value>(&text) {
        Ok(document) => {
            c.post::<_, ProfileVerdict>("/v1/root/mcp/run-profiles/verify", &document)
                .await?
        }
        Err(e) => ProfileVerdict::invalid("malformed", format!("not JSON: {e}")),
    };
    print(json_out, &verdict, |v| {
        let or = |s: &Option<String>| s.clone().unwrap_or_default();
        if v.valid {
            format!(
                "valid: run {} of {}, expires at {} (key {})",
                or(&v.run_id),
                or(&v.owner),
                or(&v.expires_at),
                or(&v.key_id)
            )
        } else {
            format!(
                "invalid ({}): {}",
                v.reason.as_deref().unwrap_or("unknown"),
                or(&v.message)
            )
        }
    });
    Ok(if verdict.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(4)
    })
}

fn issued_text(i: &IssuedLeaseBody) -> String {
    format!(
        "session_id: {}\ntoken:      {}  (shown once)\ndeadline:   {}",
        i.session_id, i.token, i.deadline_at
    )
}

/// A lease's place in the delegation graph: where its authority came from, top first, then
/// the lease, then what it handed on, indented under their parents.
fn delegation_text(v: &DelegationView) -> String {
    let mut out = Vec::new();
    if let Some(g) = &v.grant {
        out.push(format!(
            "OAuth grant {} (client {}) approved by {} until {}{}",
            g.grant_id,
            g.client_id,
            g.approved_by,
            g.expires_at,
            g.ended_at
                .as_ref()
                .map_or_else(String::new, |at| format!(", ended {at}"))
        ));
    }
    let top = v.ancestors.last().unwrap_or(&v.lease);
    if let Some(by) = &top.issued_by {
        out.push(format!("issued by {by}"));
    }
    for (depth, l) in v.ancestors.iter().rev().enumerate() {
        out.push(format!("{}{}", "  ".repeat(depth), node(l)));
    }
    let depth = v.ancestors.len();
    out.push(format!(
        "{}{}  <- this lease",
        "  ".repeat(depth),
        node(&v.lease)
    ));
    for d in &v.descendants {
        out.push(format!(
            "{}{}",
            "  ".repeat(depth + d.depth),
            node(&d.lease)
        ));
    }
    out.join("\n")
}

/// One lease of a delegation tree: id, kind, status, profile and deadline.
fn node(l: &SessionLease) -> String {
    format!(
        "{} {:6} {:8} {} until {}",
        l.session_id,
        l.kind.as_str(),
        l.status.as_str(),
        l.capability_profile,
        mcp_shared::time::format(l.deadline_at)
    )
}

fn lease_line(l: &SessionLease) -> String {
    format!(
        "{}  {:8}  target={}  profile={}  deadline={}  uses={}  last_used={}",
        l.session_id,
        l.status.as_str(),
        l.target_id,
        l.capability_profile,
        mcp_shared::time::format(l.deadline_at),
        l.use_count,
        l.last_used_at
            .map_or_else(|| "never".into(), mcp_shared::time::format),
    )
}
