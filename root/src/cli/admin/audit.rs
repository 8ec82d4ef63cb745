//! `mcp-root admin audit …`: tail, export and verify the audit trail.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};

use super::AuditCommand;
use super::{AdminClient, print};

/// Runs one audit command; exit 3 when the chain is broken.
pub async fn run(c: &AdminClient, cmd: AuditCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        AuditCommand::Tail { limit, json } => {
            let v = c
                .get_query("/v1/root/mcp/audit", &[("limit", limit.to_string())])
                .await?;
            print(json, &v, |v| {
                let mut lines: Vec<String> = v["events"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(event_line)
                    .collect();
                lines.reverse();
                if lines.is_empty() {
                    "no events".into()
                } else {
                    lines.join("\n")
                }
            });
        }
        AuditCommand::Export {
            since,
            output,
            json,
        } => {
            let mut out: Box<dyn Write> = match &output {
                Some(p) => Box::new(std::io::BufWriter::new(
                    std::fs::File::create(p)
                        .with_context(|| format!("cannot create {}", p.display()))?,
                )),
                None => Box::new(std::io::stdout().lock()),
            };
            let mut cursor: Option<String> = None;
            let mut n = 0u64;
            loop {
                let mut q = vec![("order", "asc".to_string()), ("limit", "1000".to_string())];
                if let Some(s) = &since {
                    q.push(("since", s.clone()));
                }
                if let Some(cur) = &cursor {
                    q.push(("cursor", cur.clone()));
                }
                let v = c.get_query("/v1/root/mcp/audit", &q).await?;
                for e in v["events"].as_array().into_iter().flatten() {
                    writeln!(out, "{}", serde_json::to_string(e)?)?;
                    n += 1;
                }
                match v["next_cursor"].as_str() {
                    Some(next) => cursor = Some(next.to_string()),
                    None => break,
                }
            }
            out.flush()?;
            if output.is_some() || json {
                eprintln!(
                    "{}",
                    if json {
                        json!({ "exported": n }).to_string()
                    } else {
                        format!("exported {n} events")
                    }
                );
            }
        }
        AuditCommand::Verify { json } => {
            let v = c.get("/v1/root/mcp/audit/verify").await?;
            let ok = v["ok"].as_bool().unwrap_or(false);
            print(json, &v, |v| {
                if ok {
                    format!(
                        "audit chain intact: {} events, head {}",
                        v["checked"],
                        v["head_hash"].as_str().unwrap_or("")
                    )
                } else {
                    let b = &v["first_broken"];
                    format!(
                        "audit chain BROKEN at seq {} (event {}): {}",
                        b["seq"],
                        b["event_id"].as_str().unwrap_or("?"),
                        b["reason"].as_str().unwrap_or("")
                    )
                }
            });
            if !ok {
                return Ok(ExitCode::from(3));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn event_line(e: &Value) -> String {
    format!(
        "#{} {}  {:7} {:28} target={} actor={} event={}{}",
        e["seq"],
        e["started_at"].as_str().unwrap_or(""),
        e["status"].as_str().unwrap_or(""),
        e["tool_id"].as_str().unwrap_or(""),
        e["target_id"].as_str().unwrap_or("-"),
        e["actor"]["id"].as_str().unwrap_or(""),
        e["event_id"].as_str().unwrap_or(""),
        e["error"]["code"]
            .as_str()
            .map(|c| format!(" error={c}"))
            .unwrap_or_default(),
    )
}
