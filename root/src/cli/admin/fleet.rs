//! `mcp-root admin fleet …`: preview a write on a fleet, start a fleet run and follow it with a
//! progress line, list runs,
//! report one, read one target's full result, pause, resume or cancel one.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use super::client::{AdminClient, lines_or, print, segment};
use super::commands::{FleetCommand, FleetRunArgs};
use crate::api::bodies::{Audited, FleetPreview, FleetRuns};
use crate::fleet::report::RunReport;

/// Runs one fleet command; a run that ended with failures exits 1 with `--wait`.
pub(super) async fn run(c: &AdminClient, cmd: FleetCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        FleetCommand::Preview { run, json } => {
            let p: Audited<FleetPreview> = c
                .post("/v1/root/fleet/previews", &body(&run, None)?)
                .await?;
            print(json, &p, |p| {
                format!(
                    "{}\nconfirmation token (shown once): {}\n{}",
                    report_text(&p.item.report),
                    p.item.confirmation_token,
                    p.item.summary
                )
            });
        }
        FleetCommand::Run {
            run,
            confirm,
            wait,
            json,
        } => {
            let body = body(&run, confirm.as_deref())?;
            let started: Audited<RunReport> = c.post("/v1/root/fleet/runs", &body).await?;
            if !wait {
                print(json, &started, |a| report_text(&a.item));
                return Ok(ExitCode::SUCCESS);
            }
            let id = started.item.run_id.clone();
            eprintln!(
                "fleet run {id}: {} on {} targets",
                started.item.tool_id, started.item.total
            );
            let done = follow(c, &id).await?;
            print(json, &done, report_text);
            let failed = done.errors > 0 || done.state != "completed";
            return Ok(if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            });
        }
        FleetCommand::List { json } => {
            let runs: FleetRuns = c.get("/v1/root/fleet/runs").await?;
            print(json, &runs, |r| {
                lines_or(
                    r.runs
                        .iter()
                        .map(|r| {
                            format!(
                                "{}  {:9}  {}  {}  `{}`  by {}",
                                r.run_id,
                                r.state,
                                r.created_at,
                                r.tool_id,
                                r.selector,
                                r.created_by
                            )
                        })
                        .collect(),
                    "no fleet runs",
                )
            });
        }
        FleetCommand::Status { run, json } => {
            let r: RunReport = c
                .get(&format!("/v1/root/fleet/runs/{}", segment(&run)?))
                .await?;
            print(json, &r, report_text);
        }
        FleetCommand::Target { run, target } => {
            let t: Value = c
                .get(&format!(
                    "/v1/root/fleet/runs/{}/targets/{}",
                    segment(&run)?,
                    segment(&target)?
                ))
                .await?;
            println!("{}", serde_json::to_string_pretty(&t)?);
        }
        FleetCommand::Pause { run } => command(c, &run, "pause").await?,
        FleetCommand::Resume { run } => command(c, &run, "resume").await?,
        FleetCommand::Cancel { run } => command(c, &run, "cancel").await?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The request body of a preview or a run.
fn body(run: &FleetRunArgs, confirm: Option<&str>) -> anyhow::Result<Value> {
    let arguments: Value = match &run.arguments {
        Some(a) => serde_json::from_str(a).context("--arguments is not JSON")?,
        None => json!({}),
    };
    let amount = |s: &str| -> Value { s.parse::<u64>().map_or_else(|_| json!(s), |n| json!(n)) };
    let mut body = json!({
        "selector": run.selector,
        "tool_id": run.tool,
        "arguments": arguments,
    });
    // Only what was given: root fills in the rest, and a confirmed write runs the plan it
    // was previewed with (one given with `--confirm` must be that one).
    let mut plan = serde_json::Map::new();
    if let Some(n) = run.canary {
        plan.insert("canary".into(), json!(n));
    }
    if let Some(s) = &run.max_concurrency {
        plan.insert("max_concurrency".into(), amount(s));
    }
    if let Some(s) = &run.max_errors {
        plan.insert("max_errors".into(), amount(s));
    }
    if let Some(ms) = run.pause_after_canary_ms {
        plan.insert("pause_after_canary_ms".into(), json!(ms));
    }
    if !plan.is_empty() {
        body["plan"] = Value::Object(plan);
    }
    if let Some(p) = &run.capability_profile {
        body["capability_profile"] = json!(p);
    }
    if let Some(t) = confirm {
        body["confirmation_token"] = json!(t);
    }
    Ok(body)
}

async fn command(c: &AdminClient, run: &str, verb: &str) -> anyhow::Result<()> {
    let r: Audited<RunReport> = c
        .post(
            &format!("/v1/root/fleet/runs/{}/{}", segment(run)?, segment(verb)?),
            &json!({}),
        )
        .await?;
    println!("{} (event {})", report_text(&r.item), r.event_id);
    Ok(())
}

/// Polls the run until it ends, drawing a progress line on stderr.
async fn follow(c: &AdminClient, id: &str) -> anyhow::Result<RunReport> {
    loop {
        let r: RunReport = c
            .get(&format!("/v1/root/fleet/runs/{}", segment(id)?))
            .await?;
        let done = r.total
            - r.counts.get("pending").copied().unwrap_or(0)
            - r.counts.get("running").copied().unwrap_or(0);
        let width = 30;
        let filled = (done * width).checked_div(r.total).unwrap_or(width);
        eprint!(
            "\r[{}{}] {done}/{} done, {} errors (budget {}), {}   ",
            "#".repeat(filled),
            ".".repeat(width - filled),
            r.total,
            r.errors,
            r.error_budget,
            r.state
        );
        let _ = std::io::stderr().flush();
        if !matches!(r.state.as_str(), "running" | "paused") {
            eprintln!();
            return Ok(r);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// A run as the admin CLI prints it: what, state, the summary, the groups, the targets that
/// did not succeed.
fn report_text(r: &RunReport) -> String {
    let mut out = format!(
        "fleet run {} ({}): `{}` on `{}` by {}\n{}; errors {} of budget {}; trace {}",
        r.run_id,
        r.state,
        r.tool_id,
        r.selector,
        r.created_by,
        r.summary,
        r.errors,
        r.error_budget,
        r.trace_id
    );
    for g in &r.groups {
        let more = g.count.saturating_sub(g.targets.len());
        out.push_str(&format!(
            "\n  {} x {}{}: {}{}",
            g.count,
            g.status,
            g.code
                .as_deref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default(),
            g.targets.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    out
}
