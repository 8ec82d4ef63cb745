//! What a fleet run reports: its counts by status, its outcomes grouped (identical results
//! or errors together, with how many and which targets), and a line per target. Inline
//! output is bounded; each target's full result is its own request.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{RunState, Status};
use crate::store::{FleetRunRow, FleetTargetRow};

/// Most bytes of a group's sample output shown inline.
pub(crate) const SAMPLE_BYTES: usize = 2048;
/// Most target ids a group names inline.
pub(crate) const GROUP_TARGETS: usize = 20;

/// A run as `GET /v1/root/fleet/runs/{id}` answers it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RunReport {
    pub(crate) run_id: String,
    pub(crate) state: String,
    pub(crate) created_by: String,
    pub(crate) created_at: String,
    pub(crate) finished_at: Option<String>,
    pub(crate) selector: String,
    pub(crate) tool_id: String,
    pub(crate) arguments: Value,
    pub(crate) plan: Value,
    pub(crate) set_hash: String,
    /// A write run's capability profile (its targets' leases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) capability_profile: Option<String>,
    /// A previewed run's confirmation deadline (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) confirmation_expires_at: Option<String>,
    /// Every event of the run (its own and each target's call) carries it.
    pub(crate) trace_id: String,
    pub(crate) total: usize,
    /// Targets by status (every status, zeros included).
    pub(crate) counts: BTreeMap<String, usize>,
    /// Targets that count against the error budget, and the budget.
    pub(crate) errors: usize,
    pub(crate) error_budget: usize,
    /// One line: "500 targets: 480 succeeded, 12 failed, ...".
    pub(crate) summary: String,
    pub(crate) groups: Vec<Group>,
    pub(crate) targets: Vec<TargetLine>,
}

/// Targets whose outcomes are identical.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Group {
    pub(crate) status: Status,
    pub(crate) code: Option<String>,
    pub(crate) count: usize,
    /// The first [`GROUP_TARGETS`] of them.
    pub(crate) targets: Vec<String>,
    /// The outcome, cut at [`SAMPLE_BYTES`].
    pub(crate) sample: String,
    pub(crate) truncated: bool,
}

/// One target's part, without its output.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TargetLine {
    pub(crate) target_id: String,
    pub(crate) status: Status,
    pub(crate) code: Option<String>,
    pub(crate) event_id: Option<String>,
    pub(crate) started_at: Option<String>,
    pub(crate) finished_at: Option<String>,
}

fn time(ms: i64) -> String {
    mcp_shared::time::format(mcp_shared::time::from_unix_ms(ms))
}

/// A run's state as reports and lists show it: a preview whose confirmation deadline has
/// passed is `expired` (stored `previewed`: it can only be cancelled, and its token is
/// refused).
pub(crate) fn shown_state(run: &FleetRunRow, now_ms: i64) -> &'static str {
    match run.confirm_by_ms {
        Some(by) if run.state == RunState::Previewed && by < now_ms => "expired",
        _ => run.state.as_str(),
    }
}

/// The report of run `run_id`, as stored now (`None`: no such run).
pub(crate) async fn load(
    app: &crate::app::App,
    run_id: &str,
) -> Result<Option<RunReport>, crate::store::Error> {
    let Some(run) = app.store.fleet_run(run_id).await? else {
        return Ok(None);
    };
    let targets = app.store.fleet_targets(run_id).await?;
    Ok(Some(report(&run, &targets)))
}

/// One target's part of run `run_id`, with its full result (or error) and its preview
/// (`None`: the run has no such target).
pub(crate) async fn load_target(
    app: &crate::app::App,
    run_id: &str,
    target_id: &str,
) -> Result<Option<Value>, crate::store::Error> {
    let targets = app.store.fleet_targets(run_id).await?;
    let Some(t) = targets.into_iter().find(|t| t.target_id == target_id) else {
        return Ok(None);
    };
    let parse = |v: Option<&str>| {
        v.and_then(|r| serde_json::from_str::<Value>(r).ok())
            .unwrap_or(Value::Null)
    };
    let (result, preview) = (parse(t.result.as_deref()), parse(t.preview.as_deref()));
    Ok(Some(serde_json::json!({
        "run_id": run_id,
        "target_id": t.target_id,
        "status": t.status,
        "code": t.code,
        "event_id": t.event_id,
        "result": result,
        "preview": preview,
    })))
}

/// The report of a run with its targets.
pub(crate) fn report(run: &FleetRunRow, targets: &[FleetTargetRow]) -> RunReport {
    let plan: super::plan::Plan = serde_json::from_str(&run.plan).unwrap_or_default();
    let taking_part = targets
        .iter()
        .filter(|t| t.status != Status::Excluded)
        .count();
    let (_, _, budget) = plan.resolve(taking_part);
    let mut counts: BTreeMap<String, usize> =
        Status::ALL.iter().map(|s| (s.to_string(), 0)).collect();
    for t in targets {
        *counts.entry(t.status.to_string()).or_default() += 1;
    }
    let errors = targets.iter().filter(|t| t.status.is_error()).count();
    let parts: Vec<String> = Status::ALL
        .iter()
        .filter(|s| counts.get(s.as_str()).copied().unwrap_or(0) > 0)
        .map(|s| format!("{} {s}", counts[s.as_str()]))
        .collect();
    let summary = format!(
        "{} targets: {}",
        targets.len(),
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    );
    RunReport {
        run_id: run.run_id.clone(),
        state: shown_state(run, mcp_shared::time::unix_ms(mcp_shared::time::now())).to_owned(),
        created_by: run.created_by.clone(),
        created_at: time(run.created_at_ms),
        finished_at: run.finished_at_ms.map(time),
        selector: run.selector.clone(),
        tool_id: run.tool_id.clone(),
        arguments: serde_json::from_str(&run.arguments).unwrap_or(Value::Null),
        plan: serde_json::to_value(&plan).unwrap_or(Value::Null),
        set_hash: run.set_hash.clone(),
        capability_profile: run.profile.clone(),
        confirmation_expires_at: (run.state == RunState::Previewed)
            .then_some(run.confirm_by_ms)
            .flatten()
            .map(time),
        trace_id: run.trace_id.clone(),
        total: targets.len(),
        counts,
        errors,
        error_budget: budget,
        summary,
        groups: groups(targets),
        targets: targets
            .iter()
            .map(|t| TargetLine {
                target_id: t.target_id.clone(),
                status: t.status,
                code: t.code.clone(),
                event_id: t.event_id.clone(),
                started_at: t.started_at_ms.map(time),
                finished_at: t.finished_at_ms.map(time),
            })
            .collect(),
    }
}

/// Targets grouped by identical outcome (status, code and output: a write's target before it
/// ran, by its preview), largest first.
fn groups(targets: &[FleetTargetRow]) -> Vec<Group> {
    let mut by: BTreeMap<(Status, Option<String>, [u8; 32]), Group> = BTreeMap::new();
    for t in targets {
        let (result, previewed) = match (&t.result, &t.preview) {
            (Some(r), _) => (r, false),
            (None, Some(p)) => (p, true),
            (None, None) => continue,
        };
        // Errors group by code and message; results by their whole value; previews by the
        // expected effect.
        let key_text = match serde_json::from_str::<Value>(result) {
            Ok(v) if previewed => match v.get("error") {
                Some(e) => e["message"].as_str().unwrap_or_default().to_owned(),
                None => v["expected_effect"].to_string(),
            },
            Ok(v) if t.code.is_some() => v["message"].as_str().unwrap_or(result).to_owned(),
            _ => result.clone(),
        };
        let digest: [u8; 32] = Sha256::digest(key_text.as_bytes()).into();
        let g = by
            .entry((t.status, t.code.clone(), digest))
            .or_insert_with(|| {
                let truncated = key_text.len() > SAMPLE_BYTES;
                let mut cut = SAMPLE_BYTES.min(key_text.len());
                while !key_text.is_char_boundary(cut) {
                    cut -= 1;
                }
                Group {
                    status: t.status,
                    code: t.code.clone(),
                    count: 0,
                    targets: Vec::new(),
                    sample: key_text[..cut].to_owned(),
                    truncated,
                }
            });
        g.count += 1;
        if g.targets.len() < GROUP_TARGETS {
            g.targets.push(t.target_id.clone());
        }
    }
    let mut groups: Vec<Group> = by.into_values().collect();
    groups.sort_by(|a, b| (b.count.cmp(&a.count)).then(a.status.as_str().cmp(b.status.as_str())));
    groups
}
