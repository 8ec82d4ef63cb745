//! Operators' commands on a target's lifecycle (`/v1/root/hubs/{target_id}/…`): its labels,
//! its state (cordon, uncordon, retire) and per-target narrowing. Each is stored, in force on
//! every replica when the answer comes, and one audit event naming the operator
//! (`admin.hub.label`, `admin.hub.cordon`, `admin.hub.uncordon`, `admin.hub.retire`,
//! `admin.hub.narrow`, `admin.hub.move`), refusals included. The rules they feed are
//! `hubs::lifecycle`.
//!
//! Authority ends with its source: retiring a target, or moving it to another environment or
//! subnet, ends every lease bound to it (with their descendants); the operator issues new
//! ones for what the target is now.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use mcp_shared::error::ErrorCode;
use serde_json::{Value, json};

use crate::api::audited::audited;
use crate::api::bodies::{
    Audited, LabelsRequest, LifecycleRequest, NarrowingRequest, PlacementRequest, TargetStanding,
};
use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::hubs::Enrolment;
use crate::hubs::lifecycle::{self, Labels, Lifecycle, Narrowing, State as LifeState};
use crate::ops::audited::Asked;
use crate::store::TargetColumn;

/// Longest reason an operator gives for a lifecycle change.
const MAX_REASON: usize = 500;

/// A lifecycle command by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    Cordon,
    Uncordon,
    Retire,
}

impl Command {
    fn of(name: &str) -> Option<Command> {
        Some(match name {
            "cordon" => Command::Cordon,
            "uncordon" => Command::Uncordon,
            "retire" => Command::Retire,
            _ => return None,
        })
    }

    fn audit_id(name: &str) -> &'static str {
        match Command::of(name) {
            Some(Command::Cordon) => "admin.hub.cordon",
            Some(Command::Uncordon) => "admin.hub.uncordon",
            Some(Command::Retire) => "admin.hub.retire",
            None => "admin.hub.lifecycle",
        }
    }

    /// The state after this command from `from`, or why it cannot be applied.
    fn next(self, target_id: &str, from: LifeState) -> Result<LifeState, ApiError> {
        let conflict = |why: String| ApiError::new(StatusCode::CONFLICT, ErrorCode::Conflict, why);
        match (self, from) {
            (_, LifeState::Retired) => Err(conflict(format!(
                "target `{target_id}` is retired; a retired target stays retired"
            ))),
            (Command::Cordon, LifeState::Cordoned) => Err(conflict(format!(
                "target `{target_id}` is already cordoned"
            ))),
            (Command::Uncordon, LifeState::Active) => {
                Err(conflict(format!("target `{target_id}` is not cordoned")))
            }
            (Command::Cordon, _) => Ok(LifeState::Cordoned),
            (Command::Uncordon, _) => Ok(LifeState::Active),
            (Command::Retire, _) => Ok(LifeState::Retired),
        }
    }
}

/// `POST /v1/root/hubs/{target_id}/lifecycle/{command}` (`cordon`, `uncordon`, `retire`;
/// body `{"reason": "…"}`, optional). Cordoned: no new calls, calls in flight finish.
/// Retired: its hub's connection is closed and its token refused for good, leases on it
/// refused, its history kept; the id is never enrolled again.
pub(crate) async fn command(
    State(app): State<Arc<App>>,
    op: Operator,
    Path((target_id, name)): Path<(String, String)>,
    body: Result<Option<Json<LifecycleRequest>>, JsonRejection>,
) -> Result<Json<Audited<TargetStanding>>, ApiError> {
    apply(app, op, target_id, name, body).await
}

/// `POST /v1/root/hubs/{target_id}/lifecycle/retire`: [`command`]'s `retire`, a route of its
/// own since it needs `admin` (retirement ends a target for good), not `operator`.
pub(crate) async fn retire(
    State(app): State<Arc<App>>,
    op: Operator,
    Path(target_id): Path<String>,
    body: Result<Option<Json<LifecycleRequest>>, JsonRejection>,
) -> Result<Json<Audited<TargetStanding>>, ApiError> {
    apply(app, op, target_id, "retire".into(), body).await
}

async fn apply(
    app: Arc<App>,
    op: Operator,
    target_id: String,
    name: String,
    body: Result<Option<Json<LifecycleRequest>>, JsonRejection>,
) -> Result<Json<Audited<TargetStanding>>, ApiError> {
    let parsed = body
        .map(|b| b.and_then(|Json(b)| b.reason))
        .map_err(|e| e.body_text());
    let asked = Asked {
        tool_id: Command::audit_id(&name),
        target_id: Some(target_id.clone()),
        adapter: Some("root.hubs".into()),
        request: match &parsed {
            Ok(reason) => json!({ "target_id": target_id, "command": name, "reason": reason }),
            Err(why) => json!({ "target_id": target_id, "command": name, "invalid_body": why }),
        },
    };
    let (standing, event_id) = audited(&app, &op, asked, async {
        let reason = parsed.map_err(ApiError::bad_request)?;
        let command = Command::of(&name).ok_or_else(|| {
            ApiError::bad_request(format!(
                "command must be cordon, uncordon or retire, not `{name}`"
            ))
        })?;
        if command == Command::Retire && !op.grant.holds(crate::roles::Role::Admin) {
            return Err(crate::ops::error::Refusal::role_required(
                crate::roles::Role::Admin,
                &op.grant,
            )
            .into());
        }
        if reason
            .as_ref()
            .is_some_and(|r| r.chars().count() > MAX_REASON)
        {
            return Err(ApiError::bad_request(format!(
                "reason must be at most {MAX_REASON} characters"
            )));
        }
        let e = change(&app, &target_id, |e| {
            let state = command.next(&target_id, e.lifecycle.state)?;
            let lifecycle = Lifecycle {
                state,
                changed_by: Some(op.actor_id()),
                changed_at: Some(mcp_shared::time::format(mcp_shared::time::now())),
                reason: reason.clone(),
            };
            Ok(Change::Lifecycle(lifecycle))
        })
        .await?;
        let mut summary = format!("`{target_id}` is now {}", e.lifecycle.state.as_str());
        let mut standing = standing_of(&e);
        if command == Command::Retire {
            app.hubs.drop_link(&target_id, "target retired");
            let ended = end_leases(&app, &target_id).await?;
            summary.push_str(&format!("; {ended} leases on it ended"));
            standing.leases_ended = Some(ended);
        }
        Ok((standing, summary))
    })
    .await?;
    Ok(Json(Audited {
        item: standing,
        event_id,
    }))
}

/// `POST /v1/root/hubs/{target_id}/labels`: `{"set": {key: value}, "remove": [key]}`; the
/// target's labels after the change.
pub(crate) async fn labels(
    State(app): State<Arc<App>>,
    op: Operator,
    Path(target_id): Path<String>,
    body: Result<Json<LabelsRequest>, JsonRejection>,
) -> Result<Json<Audited<TargetStanding>>, ApiError> {
    let parsed = body.map(|Json(b)| b).map_err(|e| e.body_text());
    let asked = Asked {
        tool_id: "admin.hub.label",
        target_id: Some(target_id.clone()),
        adapter: Some("root.hubs".into()),
        request: match &parsed {
            Ok(b) => json!({ "target_id": target_id, "set": b.set, "remove": b.remove }),
            Err(why) => json!({ "target_id": target_id, "invalid_body": why }),
        },
    };
    let (standing, event_id) = audited(&app, &op, asked, async {
        let req = parsed.map_err(ApiError::bad_request)?;
        if req.set.is_empty() && req.remove.is_empty() {
            return Err(ApiError::bad_request(
                "name labels to set (`set`) or remove (`remove`)",
            ));
        }
        if let Some(both) = req.remove.iter().find(|k| req.set.contains_key(*k)) {
            return Err(ApiError::bad_request(format!(
                "label `{both}` is both set and removed"
            )));
        }
        let e = change(&app, &target_id, |e| {
            let mut labels = e.labels.clone();
            for key in &req.remove {
                labels.remove(key);
            }
            labels.extend(req.set.clone());
            lifecycle::check_labels(&labels).map_err(|e| ApiError::bad_request(e.to_string()))?;
            Ok(Change::Labels(labels))
        })
        .await?;
        let summary = format!("labels of `{target_id}`: {}", describe_labels(&e.labels));
        Ok((standing_of(&e), summary))
    })
    .await?;
    Ok(Json(Audited {
        item: standing,
        event_id,
    }))
}

/// `POST /v1/root/hubs/{target_id}/narrowing`: `{"read_only": bool, "deny": [tool id]}`
/// replaces what operators deny on this target (`{}` denies nothing again).
pub(crate) async fn narrowing(
    State(app): State<Arc<App>>,
    op: Operator,
    Path(target_id): Path<String>,
    body: Result<Json<NarrowingRequest>, JsonRejection>,
) -> Result<Json<Audited<TargetStanding>>, ApiError> {
    let parsed = body.map(|Json(b)| b).map_err(|e| e.body_text());
    let asked = Asked {
        tool_id: "admin.hub.narrow",
        target_id: Some(target_id.clone()),
        adapter: Some("root.hubs".into()),
        request: match &parsed {
            Ok(b) => json!({ "target_id": target_id, "read_only": b.read_only, "deny": b.deny }),
            Err(why) => json!({ "target_id": target_id, "invalid_body": why }),
        },
    };
    let (standing, event_id) = audited(&app, &op, asked, async {
        let req = parsed.map_err(ApiError::bad_request)?;
        let mut deny = req.deny;
        deny.sort();
        deny.dedup();
        if let Some(unknown) = deny.iter().find(|t| app.catalog.contracts.get(t).is_none()) {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownTool,
                format!("no tool `{unknown}` to deny"),
            ));
        }
        let narrowing = Narrowing {
            read_only: req.read_only,
            deny,
        };
        let e = change(&app, &target_id, |_| {
            Ok(Change::Narrowing(narrowing.clone()))
        })
        .await?;
        let summary = format!("`{target_id}`: {}", describe_narrowing(&e.narrowing));
        Ok((standing_of(&e), summary))
    })
    .await?;
    Ok(Json(Audited {
        item: standing,
        event_id,
    }))
}

/// `POST /v1/root/hubs/{target_id}/placement`: `{"environment": …, "subnet_id": …}` (either
/// or both) moves the target. Policy judges its calls by the new environment at once; every
/// lease bound to it ends; a connected hub is disconnected when its environment changed (its
/// own configuration must name the new one before root takes it back).
pub(crate) async fn placement(
    State(app): State<Arc<App>>,
    op: Operator,
    Path(target_id): Path<String>,
    body: Result<Json<PlacementRequest>, JsonRejection>,
) -> Result<Json<Audited<TargetStanding>>, ApiError> {
    let parsed = body.map(|Json(b)| b).map_err(|e| e.body_text());
    let asked = Asked {
        tool_id: "admin.hub.move",
        target_id: Some(target_id.clone()),
        adapter: Some("root.hubs".into()),
        request: match &parsed {
            Ok(b) => {
                json!({ "target_id": target_id, "environment": b.environment, "subnet_id": b.subnet_id })
            }
            Err(why) => json!({ "target_id": target_id, "invalid_body": why }),
        },
    };
    let (standing, event_id) = audited(&app, &op, asked, async {
        let req = parsed.map_err(ApiError::bad_request)?;
        for value in [&req.environment, &req.subnet_id].into_iter().flatten() {
            if !crate::api::targets::valid_id(value) {
                return Err(ApiError::bad_request(
                    "environment and subnet_id must be 1..200 characters of [A-Za-z0-9._:-]",
                ));
            }
        }
        let mut from = (String::new(), String::new());
        let e = change(&app, &target_id, |e| {
            if e.retired() {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    ErrorCode::Conflict,
                    format!("target `{target_id}` is retired; a retired target stays retired"),
                ));
            }
            from = (e.row.environment.clone(), e.row.subnet_id.clone());
            let to = (
                req.environment.clone().unwrap_or_else(|| from.0.clone()),
                req.subnet_id.clone().unwrap_or_else(|| from.1.clone()),
            );
            if to == from {
                return Err(ApiError::bad_request(format!(
                    "target `{target_id}` is in environment `{}` and subnet `{}` already: name another",
                    from.0, from.1
                )));
            }
            Ok(Change::Placement {
                environment: to.0,
                subnet_id: to.1,
            })
        })
        .await?;
        if e.row.environment != from.0 {
            app.hubs.drop_link(&target_id, "target moved to another environment");
        }
        let ended = end_leases(&app, &target_id).await?;
        let summary = format!(
            "`{target_id}` moved from {}/{} to {}/{}; {ended} leases on it ended",
            from.0, from.1, e.row.environment, e.row.subnet_id
        );
        let mut standing = standing_of(&e);
        standing.leases_ended = Some(ended);
        Ok((standing, summary))
    })
    .await?;
    Ok(Json(Audited {
        item: standing,
        event_id,
    }))
}

/// Ends every lease bound to `target_id` (and their descendants), on every replica; how many
/// were bound to it.
async fn end_leases(app: &App, target_id: &str) -> Result<usize, ApiError> {
    let ended = crate::api::leases::end_all(
        app,
        crate::leases::manager::Ending::Target(target_id.to_owned()),
    )
    .await?;
    Ok(ended.leases.len())
}

/// One column's new value.
enum Change {
    Labels(Labels),
    Lifecycle(Lifecycle),
    Narrowing(Narrowing),
    Placement {
        environment: String,
        subnet_id: String,
    },
}

impl Change {
    /// The operator-set column it changes (a move changes the target's own columns).
    fn column(&self) -> Option<TargetColumn> {
        match self {
            Change::Labels(_) => Some(TargetColumn::Labels),
            Change::Lifecycle(_) => Some(TargetColumn::Lifecycle),
            Change::Narrowing(_) => Some(TargetColumn::Narrowing),
            Change::Placement { .. } => None,
        }
    }

    /// That column's stored JSON (`None`: its default).
    fn stored(&self) -> Option<String> {
        let value: Option<Value> = match self {
            Change::Labels(l) => (!l.is_empty()).then(|| json!(l)),
            Change::Lifecycle(l) => Some(json!(l)),
            Change::Narrowing(n) => (!n.is_empty()).then(|| json!(n)),
            Change::Placement { .. } => None,
        };
        value.map(|v| v.to_string())
    }
}

/// Applies an operator's change to an enrolled target: computed from its current enrolment,
/// stored, in memory here, announced to sessions on the target and in force on every live
/// replica when this returns. The enrolment after the change.
async fn change(
    app: &App,
    target_id: &str,
    next: impl FnOnce(&Enrolment) -> Result<Change, ApiError>,
) -> Result<Enrolment, ApiError> {
    // Store and memory change together with respect to a replica's enrolment reload (as a
    // key rotation does), which could otherwise put back what it read before this change.
    let writes = crate::replica::enrolment_write(app).await;
    let current = app
        .hubs
        .enrolments
        .get(target_id)
        .map(|e| e.clone())
        .ok_or_else(|| ApiError::not_found(format!("target `{target_id}` is not enrolled")))?;
    let change = next(&current)?;
    let stored = change.stored();
    let found = match (&change, change.column()) {
        (
            Change::Placement {
                environment,
                subnet_id,
            },
            _,
        ) => {
            app.store
                .set_target_placement(target_id, environment, subnet_id)
                .await
        }
        (_, Some(column)) => {
            app.store
                .set_target_column(target_id, column, stored.as_deref())
                .await
        }
        (_, None) => Ok(true),
    }
    .map_err(ApiError::internal)?;
    if !found {
        return Err(ApiError::not_found(format!(
            "target `{target_id}` is not enrolled"
        )));
    }
    let after = {
        let mut e =
            app.hubs.enrolments.get_mut(target_id).ok_or_else(|| {
                ApiError::not_found(format!("target `{target_id}` is not enrolled"))
            })?;
        match change {
            Change::Labels(l) => {
                e.row.labels = stored;
                e.labels = l;
            }
            Change::Lifecycle(l) => {
                e.row.lifecycle = stored;
                e.lifecycle = l;
            }
            Change::Narrowing(n) => {
                e.row.narrowing = stored;
                e.narrowing = n;
            }
            Change::Placement {
                environment,
                subnet_id,
            } => {
                // Policy reads the environment from the directory: in force at once.
                if let Some(mut d) = app.hubs.targets.get_mut(target_id) {
                    d.environment = environment.clone();
                }
                e.row.environment = environment;
                e.row.subnet_id = subnet_id;
            }
        }
        e.clone()
    };
    drop(writes);
    // Sessions on the target list its tools again (a cordon hides them all).
    app.hubs.surface_changed(target_id);
    crate::replica::target_changed(app, target_id, true).await;
    Ok(after)
}

/// A target's labels, lifecycle and narrowing as answers show them.
pub(crate) fn standing_of(e: &Enrolment) -> TargetStanding {
    TargetStanding {
        target_id: e.row.target_id.clone(),
        environment: e.row.environment.clone(),
        subnet_id: e.row.subnet_id.clone(),
        labels: e.labels.clone(),
        lifecycle: e.lifecycle.clone(),
        narrowing: e.narrowing.clone(),
        leases_ended: None,
    }
}

fn describe_labels(labels: &Labels) -> String {
    if labels.is_empty() {
        return "none".into();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_narrowing(n: &Narrowing) -> String {
    match (n.read_only, n.deny.is_empty()) {
        (false, true) => "nothing denied".into(),
        (true, true) => "read-only".into(),
        (false, false) => format!("denied: {}", n.deny.join(", ")),
        (true, false) => format!("read-only; denied: {}", n.deny.join(", ")),
    }
}
