//! Operators' fleet runs (`/v1/root/fleet/runs`): preview a write on every target a selector
//! names (`/v1/root/fleet/previews`, one confirmation token), start one (a read at once, a
//! write with its preview's token), list them, report one with its outcomes grouped and a line per
//! target, read one target's full result, and pause, resume or cancel one. Starting and each
//! command are one audit event naming the operator (`admin.fleet.preview`, `admin.fleet.run`, `admin.fleet.pause`,
//! `admin.fleet.resume`, `admin.fleet.cancel`), refusals included; the run's event shares its
//! trace with every target's call. The runs themselves are `crate::fleet`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use mcp_shared::error::ErrorCode;
use mcp_shared::time::{now, unix_ms};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::audited::{ActionBody, audited, audited_in};
use crate::api::bodies::{Audited, FleetPreview, FleetRunRequest, FleetRunSummary, FleetRuns};
use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::fleet::report::RunReport;
use crate::fleet::{RunState, Status, execute, preview};
use crate::hubs::selector::Selector;
use crate::ops::audited::Asked;
use crate::store::FleetRunRow;

/// `POST /v1/root/fleet/runs`: `{"selector", "tool_id", "arguments", "plan"}`; the run as it
/// started. A read starts at once (its targets frozen and hashed); a write needs the
/// `confirmation_token` of its preview (`POST /v1/root/fleet/previews`) and the same selector,
/// tool and arguments, and starts the previewed run.
pub(crate) async fn start(
    State(app): State<Arc<App>>,
    op: Operator,
    body: ActionBody<FleetRunRequest>,
) -> Result<(StatusCode, Json<Audited<RunReport>>), ApiError> {
    // A confirmed write joins its preview's trace.
    let previewed = match body.get().and_then(|b| b.confirmation_token.as_deref()) {
        Some(t) => app
            .store
            .fleet_run_by_confirmation(&crate::auth::token_hash(t))
            .await
            .ok()
            .flatten(),
        None => None,
    };
    let trace_id = previewed.as_ref().map_or_else(
        || uuid::Uuid::now_v7().simple().to_string(),
        |r| r.trace_id.clone(),
    );
    let asked = Asked {
        tool_id: "admin.fleet.run",
        target_id: None,
        adapter: Some("root.fleet".into()),
        // The token is a bearer: the event names its hash.
        request: body.request(json!({}), |b| {
            let mut r = json!(FleetRunRequest {
                confirmation_token: None,
                ..b.clone()
            });
            if let Some(t) = &b.confirmation_token {
                r["confirmation"] = json!(format!("sha256:{}", &crate::auth::token_hash(t)[..16]));
            }
            r
        }),
    };
    let (run, event_id) = audited_in(&app, &op, asked, Some(trace_id.clone()), async {
        let req = body.parsed()?;
        let (run, what) = match req.confirmation_token.as_deref() {
            Some(token) => {
                let run = preview::confirm(&app, &op, &req, token).await?;
                let what = format!("confirmed preview, set {}", &run.set_hash[..12]);
                (run, what)
            }
            None => {
                let run = create(&app, &op, req, trace_id.clone()).await?;
                let what = format!("set {}", &run.set_hash[..12]);
                (run, what)
            }
        };
        let summary = format!(
            "fleet run {}: `{}` on `{}` ({what})",
            run.run_id, run.tool_id, run.selector
        );
        Ok((run, summary))
    })
    .await?;
    execute::spawn(app.clone(), run.run_id.clone());
    Ok((
        StatusCode::CREATED,
        Json(Audited {
            item: load(&app, &run.run_id).await?,
            event_id,
        }),
    ))
}

/// Checks a read run's request, resolves and freezes its targets, and stores the run.
async fn create(
    app: &App,
    op: &Operator,
    req: FleetRunRequest,
    trace_id: String,
) -> Result<FleetRunRow, ApiError> {
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
        preview::write_contract(app, &req.tool_id)?;
        return Err(ApiError::new(
            StatusCode::PRECONDITION_REQUIRED,
            ErrorCode::ConfirmationRequired,
            format!(
                "`{}` is not a read: preview it on the fleet first (POST /v1/root/fleet/previews, `admin fleet preview`) and run it with the preview's confirmation_token",
                req.tool_id
            ),
        ));
    }
    if req.capability_profile.is_some() {
        return Err(ApiError::bad_request(
            "capability_profile is for writes: a read runs under the operator's read-only profile",
        ));
    }
    let run = crate::fleet::read::start(
        app,
        crate::fleet::read::ReadRun {
            created_by: op.actor_id(),
            selector: &selector,
            tool_id: req.tool_id,
            arguments: req.arguments,
            plan: req.plan,
            trace_id,
        },
    )
    .await?;
    Ok(run)
}

/// `POST /v1/root/fleet/previews`: `{"selector", "tool_id", "arguments", "plan",
/// "capability_profile"}` for a write; the previewed run (each target's expected effect, or
/// why it cannot take part) and its one confirmation token (shown once) with its deadline.
pub(crate) async fn preview(
    State(app): State<Arc<App>>,
    op: Operator,
    body: ActionBody<FleetRunRequest>,
) -> Result<(StatusCode, Json<Audited<FleetPreview>>), ApiError> {
    let trace_id = uuid::Uuid::now_v7().simple().to_string();
    let asked = Asked {
        tool_id: "admin.fleet.preview",
        target_id: None,
        adapter: Some("root.fleet".into()),
        request: body.request(json!({}), |b| json!(b)),
    };
    let (previewed, event_id) = audited_in(&app, &op, asked, Some(trace_id.clone()), async {
        let req = body.parsed()?;
        let p = preview::preview(&app, op.actor_id(), req, trace_id.clone()).await?;
        let summary = format!(
            "fleet preview {}: `{}` on `{}` (set {})",
            p.run.run_id,
            p.run.tool_id,
            p.run.selector,
            &p.run.set_hash[..12]
        );
        Ok((p, summary))
    })
    .await?;
    let report = load(&app, &previewed.run.run_id).await?;
    let expires = report.confirmation_expires_at.clone().unwrap_or_default();
    let taking_part = report
        .counts
        .get(Status::Pending.as_str())
        .copied()
        .unwrap_or(0);
    let summary = format!(
        "Nothing was changed. {taking_part} of {} targets take part. To run it, start the run with the same selector, tool and arguments and this confirmation_token before {expires} (`admin fleet run … --confirm TOKEN`).",
        report.total
    );
    Ok((
        StatusCode::CREATED,
        Json(Audited {
            item: FleetPreview {
                report,
                confirmation_token: previewed.confirmation_token,
                confirmation_expires_at: expires,
                summary,
            },
            event_id,
        }),
    ))
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
    let now_ms = unix_ms(now());
    Ok(Json(FleetRuns {
        runs: runs
            .into_iter()
            .map(|r| FleetRunSummary {
                created_at: time(r.created_at_ms),
                state: crate::fleet::report::shown_state(&r, now_ms).to_owned(),
                run_id: r.run_id,
                created_by: r.created_by,
                selector: r.selector,
                tool_id: r.tool_id,
            })
            .collect(),
    }))
}

/// The report of run `run_id`.
async fn load(app: &App, run_id: &str) -> Result<RunReport, ApiError> {
    crate::fleet::report::load(app, run_id)
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::not_found(format!("no fleet run `{run_id}`")))
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
    crate::fleet::report::load_target(&app, &run_id, &target_id)
        .await
        .map_err(ApiError::internal)?
        .map(Json)
        .ok_or_else(|| {
            ApiError::not_found(format!("fleet run `{run_id}` has no target `{target_id}`"))
        })
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
        let (from, to): (&[RunState], RunState) = match name.as_str() {
            "pause" => (&[RunState::Running], RunState::Paused),
            "resume" => (&[RunState::Paused], RunState::Running),
            "cancel" => (
                &[RunState::Previewed, RunState::Running, RunState::Paused],
                RunState::Cancelled,
            ),
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
                        RunState::Paused => "paused",
                        RunState::Running => "resumed",
                        _ => "cancelled",
                    }
                ),
            ));
        }
        // Cancelled: what had not started is cancelled now, so the run reads as it ended
        // (a target its driver was about to start finds it so and does not run).
        if to == RunState::Cancelled {
            app.store
                .settle_fleet_targets(&run_id, crate::fleet::Status::Cancelled, false)
                .await
                .map_err(ApiError::internal)?;
        }
        app.fleet.wake(&run_id);
        // A dropped preview's leases end now (a running run's end with it).
        if before.state == RunState::Previewed.as_str() {
            crate::fleet::authority::end(&app, &run_id).await;
        }
        // A run of this replica's that no task drives (a restart found it paused and it
        // ended) is taken up again when resumed.
        let ours = app
            .store
            .fleet_run(&run_id)
            .await
            .ok()
            .flatten()
            .is_some_and(|r| r.driver == crate::fleet::execute::driver(&app));
        if to == RunState::Running && ours && !app.fleet.driving(&run_id) {
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
