//! `mcp-root admin audit …`: tail, export (`--verifiable`: the chain as hashed), verify the
//! audit trail; the zone's log key, its checkpoints, and an event's inclusion proof.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};

use super::client::{AdminClient, lines_or, print, segment};
use super::commands::AuditCommand;
use crate::api::bodies::{AuditEntry, AuditPage};
use crate::api::checkpoints::{ChainPage, Checkpoints, InclusionBody, LogKeyBody};
use crate::audit::Verification;

/// Runs one audit command; exit 3 when the chain is broken.
pub(super) async fn run(c: &AdminClient, cmd: AuditCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        AuditCommand::Tail { limit, json } => {
            let page: AuditPage = c
                .get_query("/v1/root/mcp/audit", &[("limit", limit.to_string())])
                .await?;
            print(json, &page, |p| {
                lines_or(p.events.iter().rev().map(event_line).collect(), "no events")
            });
        }
        AuditCommand::Export {
            output,
            verifiable: true,
            json,
            ..
        } => export_chain(c, output, json).await?,
        AuditCommand::Key { json } => {
            let k: LogKeyBody = c.get("/v1/root/mcp/audit/key").await?;
            print(json, &k, |k| k.verifier_key.clone());
        }
        AuditCommand::Checkpoints { limit, json } => {
            let q = [("limit", limit.to_string())];
            let list: Checkpoints = c.get_query("/v1/root/mcp/audit/checkpoints", &q).await?;
            print(json, &list, |l| {
                lines_or(
                    l.checkpoints
                        .iter()
                        .map(|cp| {
                            format!(
                                "size {:>8}  root {}  {}",
                                cp.tree_size, cp.root_hash, cp.created_at
                            )
                        })
                        .collect(),
                    "no checkpoint yet",
                )
            });
        }
        AuditCommand::Prove {
            event_id,
            size,
            json,
        } => {
            let key: LogKeyBody = c.get("/v1/root/mcp/audit/key").await?;
            let q: Vec<(&str, String)> =
                size.map(|s| ("size", s.to_string())).into_iter().collect();
            let p: InclusionBody = c
                .get_query(
                    &format!("/v1/root/mcp/audit/proof/{}", segment(&event_id)?),
                    &q,
                )
                .await?;
            check_inclusion(&p, &key.verifier_key)?;
            print(json, &p, |p| {
                format!(
                    "event {} (seq {}) is in the checkpoint of tree size {} (root {}): proof of {} hashes verified with {}",
                    p.event_id,
                    p.seq,
                    p.checkpoint.tree_size,
                    p.checkpoint.root_hash,
                    p.proof.len(),
                    key.verifier_key
                )
            });
        }
        AuditCommand::Export {
            since,
            trace,
            run,
            output,
            json,
            ..
        } => {
            // A fleet run's events are its trace.
            let trace = match run {
                Some(id) => {
                    let r: crate::fleet::report::RunReport = c
                        .get(&format!("/v1/root/fleet/runs/{}", segment(&id)?))
                        .await?;
                    Some(r.trace_id)
                }
                None => trace,
            };
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
                if let Some(t) = &trace {
                    q.push(("trace_id", t.clone()));
                }
                if let Some(cur) = &cursor {
                    q.push(("cursor", cur.clone()));
                }
                // The events as root wrote them, fields this build does not know included.
                let page: AuditPage<Value> = c.get_query("/v1/root/mcp/audit", &q).await?;
                for e in &page.events {
                    writeln!(out, "{}", serde_json::to_string(e)?)?;
                    n += 1;
                }
                match page.next_cursor {
                    Some(next) => cursor = Some(next),
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
            let v: Verification = c.get("/v1/root/mcp/audit/verify").await?;
            print(json, &v, |v| match &v.first_broken {
                Some(b) if !v.ok => format!(
                    "audit chain BROKEN at seq {} (event {}): {}",
                    b.seq,
                    b.event_id.as_deref().unwrap_or("?"),
                    b.reason
                ),
                None if !v.ok => "audit chain BROKEN".into(),
                _ => format!(
                    "audit chain intact: {} events, head {}",
                    v.checked, v.head_hash
                ),
            });
            if !v.ok {
                return Ok(ExitCode::from(3));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn event_line(entry: &AuditEntry) -> String {
    let e = &entry.event;
    format!(
        "#{} {}  {:7} {:28} target={} actor={} event={}{}",
        entry.seq,
        mcp_shared::time::format(e.started_at),
        e.status.as_str(),
        e.tool_id,
        e.target_id.as_deref().unwrap_or("-"),
        e.actor.id,
        e.event_id,
        e.error
            .as_ref()
            .map(|err| format!(" error={}", err.code.as_str()))
            .unwrap_or_default(),
    )
}

/// `audit export --verifiable`: the chain as it was hashed, one row per line.
async fn export_chain(c: &AdminClient, output: Option<PathBuf>, json: bool) -> anyhow::Result<()> {
    let mut out: Box<dyn Write> = match &output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        )),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut after = 0i64;
    let mut n = 0u64;
    loop {
        let q = [
            ("after_seq", after.to_string()),
            ("limit", "5000".to_string()),
        ];
        let page: ChainPage = c.get_query("/v1/root/mcp/audit/chain", &q).await?;
        for row in &page.events {
            writeln!(out, "{}", serde_json::to_string(row)?)?;
            n += 1;
        }
        match page.next_after_seq {
            Some(next) => after = next,
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
    Ok(())
}

/// Checks an inclusion proof as an auditor would: the checkpoint's signature with the log's
/// key, then the proof of the event's leaf against the checkpoint's root.
fn check_inclusion(p: &InclusionBody, verifier_key: &str) -> anyhow::Result<()> {
    let cp = crate::audit::checkpoint::open(&p.checkpoint.note, verifier_key)?;
    let proof = p
        .proof
        .iter()
        .map(|h| crate::audit::tree::parse_hash(h).context("a proof hash is not 32 bytes of hex"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let leaf = crate::audit::tree::leaf_hash(&p.chain_hash)
        .context("the event's chain hash is not 32 bytes of hex")?;
    tlog_tiles::check_record(&proof, cp.size(), *cp.hash(), p.leaf_index, leaf)
        .context("the inclusion proof does not verify against the checkpoint")?;
    Ok(())
}
