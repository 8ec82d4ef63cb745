//! Operators' fleet runs (`/v1/root/fleet/runs`): start one (a read on every target a selector
//! names, under a plan), list them, report one with its outcomes grouped and a line per
//! target, read one target's full result, and pause, resume or cancel one. Starting and each
//! command are one audit event naming the operator (`admin.fleet.run`, `admin.fleet.pause`,
//! `admin.fleet.resume`, `admin.fleet.cancel`), refusals included; the run's event shares its
//! trace with every target's call. The runs themselves are `crate::fleet`.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use mcp_shared::error::ErrorCode;
use mcp_shared::time::{now, unix_ms};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::api::audited::{Asked, audited, audited_in};
use crate::api::bodies::{Audited, FleetRunRequest, FleetRunSummary, FleetRuns};
use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::fleet::report::{RunReport, report};
use crate::fleet::{execute, state};
use crate::hubs::selector::Selector;
use crate::store::FleetRunRow;

/// Most targets one run reaches.
pub(crate) const MAX_TARGETS: usize = 20_000;

/// `POST /v1/root/fleet/runs`: `{"selector", "tool_id", "arguments", "plan"}`; the run as it
/// started (its targets frozen and hashed). Reads only, for now.
pub(crate) async fn start(
    State(app): State<Arc<App>>,
    op: Operator,
    body: Result<Json<FleetRunRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<Audited<RunReport>>), ApiError> {
    let parsed = body.map(|Json(b)| b).map_err(|e| e.body_text());
    let trace_id = uuid::Uuid::now_v7().simple().to_string();
    let asked = Asked {
        tool_id: "admin.fleet.run",
        target_id: None,
        adapter: Some("root.fleet".into()),
        request: match &parsed {
            Ok(b) => json!(b),
            Err(why) => json!({ "invalid_body": why }),
        },
    };
    let (run, event_id) = audited_in(&app, &op, asked, Some(trace_id.clone()), async {
        let req = parsed.map_err(ApiError::bad_request)?;
        let run = create(&app, &op, req, trace_id.clone()).await?;
        let summary = format!(
            "fleet run {}: `{}` on {} targets of `{}` (set {})",
            run.0.run_id,
            run.0.tool_id,
            run.1,
            run.0.selector,
            &run.0.set_hash[..12]
        );
        Ok((run.0, summary))
    })
    .await?;
    execute::spawn(app.clone(), run.run_id.clone());
    let targets = app
        .store
        .fleet_targets(&run.run_id)
        .await
        .map_err(ApiError::internal)?;
    Ok((
        StatusCode::CREATED,
        Json(Audited {
            item: report(&run, &targets),
            event_id,
        }),
    ))
}

/// Checks a run request, resolves and freezes its targets, and stores the run.
async fn create(
    app: &App,
    op: &Operator,
    req: FleetRunRequest,
    trace_id: String,
) -> Result<(FleetRunRow, usize), ApiError> {
    let selector = Selector::parse(&req.selector)
        .map_err(|e| ApiError::bad_request(format!("selector: {e}")))?;
    let Some(entry) = app.catalog.contracts.get(&req.tool_id) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::UnknownTool,
            format!("no tool `{}`", req.tool_id),
        ));
    };
    if !crate::api::inspect::is_read(&entry.contract) {
        return Err(ApiError::bad_request(format!(
            "`{}` is not a read: fleet runs serve reads for now (writes on a fleet, with a preview per target and one confirmation, are not served yet)",
            req.tool_id
        )));
    }
    let plan = req.plan.unwrap_or_default();
    plan.check()
        .map_err(|e| ApiError::bad_request(format!("plan: {e}")))?;
    let arguments = req.arguments.unwrap_or_else(|| json!({}));
    if !arguments.is_object() {
        return Err(ApiError::bad_request("arguments must be a JSON object"));
    }
    let mut targets: Vec<String> = app
        .hubs
        .enrolments
        .iter()
        .filter(|e| {
            let status = app.hubs.status(e.key());
            selector.matches(&crate::api::targets::subject(e, status))
        })
        .map(|e| e.key().clone())
        .collect();
    targets.sort();
    if targets.is_empty() {
        return Err(ApiError::bad_request(format!(
            "selector `{selector}` names no enrolled target"
        )));
    }
    if targets.len() > MAX_TARGETS {
        return Err(ApiError::bad_request(format!(
            "selector `{selector}` names {} targets; a run reaches at most {MAX_TARGETS}",
            targets.len()
        )));
    }
    let set_hash = hex::encode(Sha256::digest(targets.join("\n").as_bytes()));
    let run = FleetRunRow {
        run_id: uuid::Uuid::now_v7().to_string(),
        trace_id,
        created_by: op.actor_id(),
        created_at_ms: unix_ms(now()),
        selector: selector.as_str().to_owned(),
        tool_id: req.tool_id,
        arguments: arguments.to_string(),
        plan: serde_json::to_string(&plan).map_err(ApiError::internal)?,
        set_hash,
        state: state::RUNNING.into(),
        finished_at_ms: None,
        driver: crate::fleet::execute::driver(app),
    };
    app.store
        .insert_fleet_run(&run, &targets)
        .await
        .map_err(ApiError::internal)?;
    Ok((run, targets.len()))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunsQuery {
    limit: Option<i64>,
}

/// `GET /v1/root/fleet/runs`: the newest runs (`limit`, 50 by default, at most 1000).
pub(crate) async fn list(
    State(app): State<Arc<App>>,
    _op: Operator,
    q: Result<Query<RunsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<FleetRuns>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request("limit must be 1..1000"));
    }
    let runs = app
        .store
        .fleet_runs(limit)
        .await
        .map_err(ApiError::internal)?;
    let time = |ms| mcp_shared::time::format(mcp_shared::time::from_unix_ms(ms));
    Ok(Json(FleetRuns {
        runs: runs
            .into_iter()
            .map(|r| FleetRunSummary {
                created_at: time(r.created_at_ms),
                run_id: r.run_id,
                state: r.state,
                created_by: r.created_by,
                selector: r.selector,
                tool_id: r.tool_id,
            })
            .collect(),
    }))
}

async fn load(app: &App, run_id: &str) -> Result<RunReport, ApiError> {
    let run = app
        .store
        .fleet_run(run_id)
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::not_found(format!("no fleet run `{run_id}`")))?;
    let targets = app
        .store
        .fleet_targets(run_id)
        .await
        .map_err(ApiError::internal)?;
    Ok(report(&run, &targets))
}

/// `GET /v1/root/fleet/runs/{run_id}`.
pub(crate) async fn show(
    State(app): State<Arc<App>>,
    _op: Operator,
    Path(run_id): Path<String>,
) -> Result<Json<RunReport>, ApiError> {
    Ok(Json(load(&app, &run_id).await?))
}

/// `GET /v1/root/fleet/runs/{run_id}/targets/{target_id}`: one target's part with its full
/// result (or error).
pub(crate) async fn target(
    State(app): State<Arc<App>>,
    _op: Operator,
    Path((run_id, target_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let targets = app
        .store
        .fleet_targets(&run_id)
        .await
        .map_err(ApiError::internal)?;
    let t = targets
        .into_iter()
        .find(|t| t.target_id == target_id)
        .ok_or_else(|| {
            ApiError::not_found(format!("fleet run `{run_id}` has no target `{target_id}`"))
        })?;
    let result = t
        .result
        .as_deref()
        .and_then(|r| serde_json::from_str::<Value>(r).ok())
        .unwrap_or(Value::Null);
    Ok(Json(json!({
        "run_id": run_id,
        "target_id": t.target_id,
        "status": t.status,
        "code": t.code,
        "event_id": t.event_id,
        "result": result,
    })))
}

/// `POST /v1/root/fleet/runs/{run_id}/{command}`: `pause` (no new target starts; the ones
/// running finish), `resume`, or `cancel` (for good: targets not started are `cancelled`).
pub(crate) async fn command(
    State(app): State<Arc<App>>,
    op: Operator,
    Path((run_id, name)): Path<(String, String)>,
) -> Result<Json<Audited<RunReport>>, ApiError> {
    let tool_id = match name.as_str() {
        "pause" => "admin.fleet.pause",
        "resume" => "admin.fleet.resume",
        "cancel" => "admin.fleet.cancel",
        _ => "admin.fleet.command",
    };
    let trace = app
        .store
        .fleet_run(&run_id)
        .await
        .ok()
        .flatten()
        .map(|r| r.trace_id);
    let asked = Asked {
        tool_id,
        target_id: None,
        adapter: Some("root.fleet".into()),
        request: json!({ "run_id": run_id, "command": name }),
    };
    let run = |app: Arc<App>| async move {
        let (from, to): (&[&str], &str) = match name.as_str() {
            "pause" => (&[state::RUNNING], state::PAUSED),
            "resume" => (&[state::PAUSED], state::RUNNING),
            "cancel" => (&[state::RUNNING, state::PAUSED], state::CANCELLED),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "command must be pause, resume or cancel, not `{name}`"
                )));
            }
        };
        let before = load(&app, &run_id).await?;
        let changed = app
            .store
            .set_fleet_run_state(&run_id, from, to, None)
            .await
            .map_err(ApiError::internal)?;
        if !changed {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::Conflict,
                format!(
                    "fleet run `{run_id}` is {}: it cannot be {}",
                    before.state,
                    match to {
                        state::PAUSED => "paused",
                        state::RUNNING => "resumed",
                        _ => "cancelled",
                    }
                ),
            ));
        }
        app.fleet.wake(&run_id);
        // A run of this replica's that no task drives (a restart found it paused and it
        // ended) is taken up again when resumed.
        let ours = app
            .store
            .fleet_run(&run_id)
            .await
            .ok()
            .flatten()
            .is_some_and(|r| r.driver == crate::fleet::execute::driver(&app));
        if to == state::RUNNING && ours && !app.fleet.driving(&run_id) {
            execute::spawn(app.clone(), run_id.clone());
        }
        let after = load(&app, &run_id).await?;
        let summary = format!("fleet run {run_id}: {} -> {to}", before.state);
        Ok((after, summary))
    };
    let (report, event_id) = match trace {
        Some(t) => audited_in(&app, &op, asked, Some(t), run(app.clone())).await?,
        None => audited(&app, &op, asked, run(app.clone())).await?,
    };
    Ok(Json(Audited {
        item: report,
        event_id,
    }))
}
