//! `hub.get_logs`: log reads that say where they come from (seed "WebUI and Observability
//! Model"): `root_local` reads root's own log ring, the lines about the lease's target only;
//! `subnet_active` fans the call out to every hub of the lease's subnet in its target's
//! environment ([`Reach`]) and aggregates their answers.
//!
//! Every answer carries a health summary of the read: `healthy` (all of the path answered),
//! `partial` (some hubs missing, named in `missing`) or `degraded` (nothing of the subnet
//! answered); `missing_reasons` says why each missing target is (a target of another
//! environment, or a cordoned, retired or narrowed one, is never asked). Hubs redact before lines leave them; root redacts again
//! before answering.

use futures::future::join_all;
use mcp_shared::error::ToolError;
use mcp_shared::event::{OperationalEvent, Redaction};
use mcp_shared::target::TargetStatus;
use serde_json::{Value, json};

use super::input::{arg_str, arg_u64};
use super::reach::Reach;
use crate::app::App;
use crate::call::context::CallContext;
use crate::call::route::route_to;
use crate::catalog::ContractEntry;
use crate::hubs::lifecycle;
use mcp_shared::protocol::CallBody;
use mcp_shared::protocol::CallOutcome;

/// Lines per stream a read may ask for.
const MAX_LINES: u64 = 1_000;

/// The path the redactor names while a stream's lines are redacted (rewritten per stream by
/// [`per_stream`]).
const STREAM_LINES: &str = "lines";

/// What was redacted in the lines of entry `index` (`found` by root, and `by_hub` values
/// its hub redacted before they left it), once per rule with its count (`pattern:bearer*3`,
/// `hub*2`): the event and the answer's summary name the stream's lines, not each line.
fn per_stream(index: usize, found: &[Redaction], by_hub: u64) -> Vec<Redaction> {
    let mut counts: std::collections::BTreeMap<&str, u64> = Default::default();
    for r in found {
        *counts.entry(r.rule.as_str()).or_default() += 1;
    }
    if by_hub > 0 {
        counts.insert("hub", by_hub);
    }
    counts
        .into_iter()
        .map(|(rule, n)| Redaction {
            path: format!("result.entries[{index}].lines"),
            rule: if n == 1 {
                rule.to_owned()
            } else {
                format!("{rule}*{n}")
            },
        })
        .collect()
}

pub(crate) async fn run(
    app: &App,
    ctx: &CallContext,
    entry: &ContractEntry,
    input: &CallBody,
    event: &mut OperationalEvent,
) -> Result<Value, ToolError> {
    let source = arg_str(input, "source").unwrap_or("subnet_active");
    if source == "root_local" {
        return Ok(root_local(app, &ctx.lease.lease().target_id, input, event));
    }
    subnet_active(app, ctx, entry, input, event).await
}

/// Root's own log lines about the lease's target (its hub's connection, its calls), never
/// another target's or root's whole log: a lease reads what concerns it.
fn root_local(app: &App, target_id: &str, input: &CallBody, event: &mut OperationalEvent) -> Value {
    let lines = arg_u64(input, "lines", 100, 1, MAX_LINES) as usize;
    // Filter after redaction, so `contains` cannot probe for a secret.
    let contains = arg_str(input, "contains");
    let mut redactions = Vec::new();
    let (lines, truncated) = crate::telemetry::logging::RING.tail_for(target_id, lines, |l| {
        let mut found = Vec::new();
        let line = app.audit.redactor.redact_text(STREAM_LINES, l, &mut found);
        if contains.is_some_and(|c| !line.contains(c)) {
            return None;
        }
        redactions.extend(found);
        Some(line.chars().take(2_048).collect())
    });
    let n = redactions.len();
    event.redactions.extend(per_stream(0, &redactions, 0));
    json!({
        "source": "root_local",
        "health": "healthy",
        "missing": [],
        "missing_reasons": [],
        "entries": [{
            "target_id": format!("root:{}", app.config.zone),
            "stream": "root",
            "lines": lines,
            "truncated": truncated,
            "redactions": n,
        }],
        "summary": format!(
            "{} lines of root's own log about `{target_id}` (zone {})",
            lines.len(),
            app.config.zone
        ),
    })
}

/// One stream a hub answered, as root answers it: named for the hub that read it, its lines
/// redacted again, its `redactions` the hub's and root's together, both recorded.
fn stream_entry(
    app: &App,
    target_id: &str,
    mut e: Value,
    index: usize,
    event: &mut OperationalEvent,
) -> Value {
    // A hub speaks only for itself.
    e["target_id"] = json!(target_id);
    let by_hub = e["redactions"].as_u64().unwrap_or(0);
    let mut found = Vec::new();
    if let Some(lines) = e["lines"].as_array_mut() {
        for l in lines.iter_mut() {
            if let Some(s) = l.as_str() {
                *l = json!(app.audit.redactor.redact_text(STREAM_LINES, s, &mut found));
            }
        }
    }
    event.redactions.extend(per_stream(index, &found, by_hub));
    e["redactions"] = json!(by_hub.saturating_add(found.len() as u64));
    e
}

async fn subnet_active(
    app: &App,
    ctx: &CallContext,
    entry: &ContractEntry,
    input: &CallBody,
    event: &mut OperationalEvent,
) -> Result<Value, ToolError> {
    let lease = ctx.lease.lease();
    let tool = &entry.contract.tool_id;
    // Targets of another environment than the lease's target are never asked.
    let reach = Reach::of(app, lease);
    let mut missing: Vec<(String, String)> = reach.excluded.clone();
    let mut members = reach.members.clone();
    members.extend(reach.excluded.iter().map(|(t, _)| t.clone()));
    members.sort();
    // Which targets in reach can answer: online, publishing the tool through an enabled
    // skill, in an environment the tool allows.
    let mut reachable = Vec::new();
    for t in &reach.members {
        // A cordoned, retired or narrowed target is never called, by a fan-out either.
        let objection = app.hubs.enrolments.get(t).and_then(|e| {
            lifecycle::objection(&e.lifecycle, &e.narrowing, tool, entry.contract.side_effect)
        });
        if let Some(code) = objection {
            missing.push((t.clone(), code.as_str().replace('_', " ")));
            continue;
        }
        match app.hubs.targets.get(t) {
            Some(_) if !app.hubs.skill_open(t) => {
                missing.push((t.clone(), "skill switched off".into()));
            }
            Some(d) if d.status == TargetStatus::Offline => {
                missing.push((t.clone(), "offline".into()));
            }
            Some(d) if !entry.contract.allows_environment(&d.environment) => {
                missing.push((t.clone(), format!("environment `{}`", d.environment)));
            }
            Some(d)
                if !d.operational_surface.enabled
                    || !d.operational_surface.capabilities.iter().any(|c| c == tool) =>
            {
                missing.push((t.clone(), "does not publish hub.get_logs".into()));
            }
            Some(_) => reachable.push(t.clone()),
            None => missing.push((t.clone(), "never connected".into())),
        }
    }
    let mut arguments = input.arguments.clone();
    if let Some(o) = arguments.as_object_mut() {
        o.insert("source".into(), json!("subnet_active"));
    }
    let answers = join_all(
        reachable
            .iter()
            .map(|t| route_to(app, ctx, entry, t, CallBody::run(arguments.clone()))),
    )
    .await;
    let mut entries = Vec::new();
    let mut notes = Vec::new();
    let mut adapters = Vec::new();
    for (t, (adapter, result)) in reachable
        .iter()
        .zip(answers.into_iter().map(CallOutcome::into_parts))
    {
        if let Some(a) = adapter {
            adapters.push(a);
        }
        match result {
            Ok(v) => {
                // Each hub's own summary names what it could not read.
                if let Some(note) = v["summary"].as_str() {
                    notes.push(app.audit.redactor.redact_text(
                        "result.summary",
                        note,
                        &mut event.redactions,
                    ));
                }
                for e in v["entries"].as_array().cloned().unwrap_or_default() {
                    let index = entries.len();
                    entries.push(stream_entry(app, t, e, index, event));
                }
            }
            Err(e) => missing.push((t.clone(), format!("{}: {}", e.code, e.message))),
        }
    }
    if !adapters.is_empty() {
        adapters.sort();
        adapters.dedup();
        event.execution_adapter = Some(format!("root.logs -> {}", adapters.join(", ")));
    }
    let answered = members.len() - missing.len();
    let health = if members.is_empty() || answered == 0 {
        "degraded"
    } else if missing.is_empty() {
        "healthy"
    } else {
        "partial"
    };
    let summary = if members.is_empty() {
        format!("subnet `{}` has no enrolled hub", lease.subnet_id)
    } else if missing.is_empty() {
        format!(
            "all {} hubs of subnet `{}` answered",
            members.len(),
            lease.subnet_id
        )
    } else {
        format!(
            "{answered} of {} hubs of subnet `{}` answered; missing: {}",
            members.len(),
            lease.subnet_id,
            missing
                .iter()
                .map(|(t, why)| format!("{t} ({why})"))
                .collect::<Vec<_>>()
                .join("; ")
        )
    };
    let summary = if notes.is_empty() {
        summary
    } else {
        format!("{summary}. {}", notes.join(". "))
    };
    missing.sort();
    Ok(json!({
        "source": "subnet_active",
        "health": health,
        "missing": missing.iter().map(|(t, _)| t).collect::<Vec<_>>(),
        "missing_reasons": missing
            .iter()
            .map(|(t, why)| json!({ "target_id": t, "reason": why }))
            .collect::<Vec<_>>(),
        "entries": entries,
        "summary": summary,
    }))
}
