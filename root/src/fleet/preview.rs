//! Fleet writes before they run: the preview and the one confirmation.
//!
//! - **Preview** resolves and freezes the set, stores the run `previewed`, and runs each
//!   target's dry run (under the plan's window, through the governed call path under the
//!   run's own lease for it, `fleet::authority`). A target whose dry run answered takes part
//!   (`pending`, with its expected effect); one that cannot (offline, cordoned, refused by
//!   policy, its check failed) is `excluded`, with the code of why. It answers one
//!   confirmation token, bound to the run: its set's hash, tool, arguments' hash, operator
//!   and deadline (`limits.confirmation_ttl_sec`); only its hash is stored.
//! - **Confirm** redeems the token once, for the operator it was issued to, before its
//!   deadline, for the same tool and arguments, when the selector still names the same set
//!   ("the set changed since the preview: preview again" otherwise). The run then starts;
//!   each target's execute is confirmed with the effect its preview showed, so an adapter
//!   whose world moved since refuses with `conflict`.

use std::sync::Arc;

use futures::StreamExt;
use mcp_shared::contract::RoutingClass;
use mcp_shared::error::ErrorCode;
use mcp_shared::time::{format, from_unix_ms, now, unix_ms};
use serde_json::{Value, json};

use super::execute::{self, call_under};
use super::plan::Plan;
use super::set::{self, TargetSet};
use super::{RunState, Status, authority};
use crate::app::App;
use crate::call::writes::{CONFIRMATION_PREFIX, args_hash};
use crate::catalog::ContractEntry;
use crate::fleet::FleetRunRequest;
use crate::hubs::selector::Selector;
use crate::operators::OperatorId;
use crate::ops::error::Refusal;
use crate::store::FleetRunRow;

/// A previewed run: the run as stored, and its confirmation token (shown once).
pub(crate) struct Previewed {
    pub(crate) run: FleetRunRow,
    pub(crate) confirmation_token: String,
}

fn confirmation_required(why: impl Into<String>) -> Refusal {
    Refusal::new(ErrorCode::ConfirmationRequired, why)
}

/// The contract of a tool a fleet may write with: an operational write with a preview, not
/// one that only proposes or waits for an operator's approval per call.
pub(crate) fn write_contract(app: &App, tool_id: &str) -> Result<Arc<ContractEntry>, Refusal> {
    let Some(entry) = app.catalog.contracts.get(tool_id).cloned() else {
        return Err(Refusal::new(
            ErrorCode::UnknownTool,
            format!("no tool `{tool_id}`"),
        ));
    };
    let c = &entry.contract;
    if c.routing != RoutingClass::OperationalWrite {
        return Err(Refusal::bad_request(format!(
            "`{tool_id}` is not an operational write with a preview: a fleet runs reads, or writes that preview"
        )));
    }
    if c.proposes.is_some() || c.requires_approval {
        return Err(Refusal::bad_request(format!(
            "`{tool_id}` needs an operator's approval of each call: it does not run on a fleet"
        )));
    }
    Ok(entry)
}

/// The capability profile a write run's leases get: the one asked for, which must grant the
/// tool, or else the narrowest that does.
fn profile_for(
    app: &App,
    c: &mcp_shared::ToolContract,
    asked: Option<&str>,
) -> Result<String, Refusal> {
    let grants = |p: &mcp_shared::profile::CapabilityProfile| {
        p.capabilities.contains(&c.required_capability)
    };
    let refused = |why: String| Refusal::new(ErrorCode::CapabilityNotGranted, why);
    match asked {
        Some(name) => match app.catalog.profiles.get(name) {
            None => Err(Refusal::bad_request(format!(
                "no capability profile `{name}`"
            ))),
            Some(p) if grants(p) => Ok(name.to_owned()),
            Some(_) => Err(refused(format!(
                "capability profile `{name}` does not grant `{}`",
                c.tool_id
            ))),
        },
        None => app
            .catalog
            .profiles
            .profiles
            .iter()
            .filter(|p| grants(p))
            .min_by_key(|p| p.capabilities.len())
            .map(|p| p.name.clone())
            .ok_or_else(|| refused(format!("no capability profile grants `{}`", c.tool_id))),
    }
}

/// Previews a write on a fleet (see the module's header).
pub(crate) async fn preview(
    app: &App,
    created_by: String,
    req: FleetRunRequest,
    trace_id: String,
) -> Result<Previewed, Refusal> {
    if req.confirmation_token.is_some() {
        return Err(Refusal::bad_request(
            "a preview takes no confirmation_token: it issues one",
        ));
    }
    let selector = Selector::parse(&req.selector)
        .map_err(|e| Refusal::bad_request(format!("selector: {e}")))?;
    let entry = write_contract(app, &req.tool_id)?;
    let profile = profile_for(app, &entry.contract, req.capability_profile.as_deref())?;
    let plan = req.plan.unwrap_or_default();
    plan.check()
        .map_err(|e| Refusal::bad_request(format!("plan: {e}")))?;
    let arguments = req.arguments.unwrap_or_else(|| json!({}));
    if !arguments.is_object() {
        return Err(Refusal::bad_request("arguments must be a JSON object"));
    }
    let TargetSet { targets, hash } = set::resolve(app, &selector)?;
    let token = crate::auth::new_token(CONFIRMATION_PREFIX);
    let ttl_ms =
        i64::try_from(app.config.limits.confirmation_ttl_sec).unwrap_or(i64::MAX / 2) * 1000;
    let created = unix_ms(now());
    let run_id = uuid::Uuid::now_v7().to_string();
    let stored = super::arguments::stored(app, &req.tool_id, &run_id, &arguments)?;
    let run = FleetRunRow {
        run_id,
        trace_id,
        created_by,
        created_at_ms: created,
        selector: selector.as_str().to_owned(),
        tool_id: req.tool_id,
        arguments: stored.shown,
        arguments_sealed: stored.sealed,
        plan: serde_json::to_string(&plan).map_err(Refusal::internal)?,
        set_hash: hash,
        state: RunState::Previewed,
        finished_at_ms: None,
        driver: execute::driver(app),
        profile: Some(profile),
        confirmation_hash: Some(crate::auth::token_hash(&token)),
        confirm_by_ms: None,
        write_key: None,
    };
    app.store
        .insert_fleet_run(&run, &targets)
        .await
        .map_err(Refusal::internal)?;
    let (_, window, _) = plan.resolve(targets.len());
    // Each target's dry run and its record together, all polled by one stream: nothing else
    // awaits the store meanwhile (see `fleet::execute` for the deadlock that avoids).
    let failed = std::sync::Mutex::new(None);
    let (r, e, a, failed_ref) = (&run, &entry, &arguments, &failed);
    futures::stream::iter(targets)
        .for_each_concurrent(window.max(1), move |t| async move {
            let (taking_part, code, preview) = dry_run(app, r, e, a, &t).await;
            let s = if taking_part {
                Status::Pending
            } else {
                Status::Excluded
            };
            if let Err(e) = app
                .store
                .set_fleet_target_preview(&r.run_id, &t, s, code.as_deref(), &preview.to_string())
                .await
            {
                *failed_ref.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            }
        })
        .await;
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(Refusal::internal(e));
    }
    // The deadline runs from when the operator can read the previews.
    let confirm_by = unix_ms(now()) + ttl_ms;
    app.store
        .set_fleet_confirm_by(&run.run_id, confirm_by)
        .await
        .map_err(Refusal::internal)?;
    let run = FleetRunRow {
        confirm_by_ms: Some(confirm_by),
        ..run
    };
    Ok(Previewed {
        run,
        confirmation_token: token,
    })
}

/// One target's dry run: whether it takes part, the code of why not, and its preview.
async fn dry_run(
    app: &App,
    run: &FleetRunRow,
    entry: &ContractEntry,
    arguments: &Value,
    target_id: &str,
) -> (bool, Option<String>, Value) {
    let mut args = arguments.clone();
    args["dry_run"] = json!(true);
    let lease = match authority::lease_for(app, run, target_id, &entry.contract).await {
        Ok(l) => l,
        Err(e) => {
            let e = e.tool_error();
            return (false, Some(e.code.as_str().into()), json!({ "error": e }));
        }
    };
    let (answer, event_id) = call_under(app, run, lease, target_id, args, "preview", false).await;
    match answer {
        Ok(result) => (
            true,
            None,
            json!({ "expected_effect": result["expected_effect"], "event_id": event_id }),
        ),
        Err(e) => (
            false,
            Some(e.code.as_str().into()),
            json!({ "error": e, "event_id": event_id }),
        ),
    }
}

/// Redeems a write run's confirmation (see the module's header): the run, now `running`.
pub(crate) async fn confirm(
    app: &App,
    op: &OperatorId,
    req: &FleetRunRequest,
    token: &str,
) -> Result<FleetRunRow, Refusal> {
    let hash = crate::auth::token_hash(token);
    let Some(run) = app
        .store
        .fleet_run_by_confirmation(&hash)
        .await
        .map_err(Refusal::internal)?
    else {
        return Err(confirmation_required(USED));
    };
    redeem(app, &op.actor_id(), req, run, &hash, &hash).await
}

const USED: &str = "the confirmation token is unknown or was already used; preview again";

/// Starts the previewed run `run_id` that `created_by` (an agent's fleet lease) confirmed
/// through the write flow, which redeemed the token root issued for its preview (the run's
/// own confirmation is never shown to an agent), executed under idempotency key `key` (as
/// its owner's: the confirmed write's identity): the run, now `running`.
pub(crate) async fn confirm_previewed(
    app: &App,
    created_by: &str,
    run_id: &str,
    key: &str,
) -> Result<FleetRunRow, Refusal> {
    let Some(run) = app
        .store
        .fleet_run(run_id)
        .await
        .map_err(Refusal::internal)?
    else {
        return Err(Refusal::not_found(format!("no fleet run `{run_id}`")));
    };
    let Some(hash) = run.confirmation_hash.clone() else {
        return Err(confirmation_required(USED));
    };
    let req = FleetRunRequest {
        selector: run.selector.clone(),
        tool_id: run.tool_id.clone(),
        arguments: Some(super::arguments::opened(app, &run)?),
        plan: None,
        capability_profile: None,
        confirmation_token: None,
    };
    redeem(app, created_by, &req, run, &hash, key).await
}

/// Redeems `run`'s confirmation (its hash `hash`) for `created_by` and `req`; the run, once
/// running, is the confirmed write `write_key` (see [`FleetRunRow::write_key`]).
async fn redeem(
    app: &App,
    created_by: &str,
    req: &FleetRunRequest,
    run: FleetRunRow,
    hash: &str,
    write_key: &str,
) -> Result<FleetRunRow, Refusal> {
    if run.created_by != created_by {
        return Err(Refusal::new(
            ErrorCode::Forbidden,
            format!(
                "the confirmation token was issued to {}, not to you",
                run.created_by
            ),
        ));
    }
    if run.state != RunState::Previewed {
        return Err(confirmation_required(USED));
    }
    let deadline = run.confirm_by_ms.unwrap_or(0);
    if deadline < unix_ms(now()) {
        return Err(confirmation_required(format!(
            "the confirmation token expired at {}; preview again",
            format(from_unix_ms(deadline))
        )));
    }
    if req.tool_id != run.tool_id {
        return Err(confirmation_required(format!(
            "the confirmation token was issued for `{}`, not `{}`; preview this one",
            run.tool_id, req.tool_id
        )));
    }
    let stored = super::arguments::opened(app, &run)?;
    let asked = req.arguments.clone().unwrap_or_else(|| json!({}));
    if args_hash(&asked) != args_hash(&stored) {
        return Err(confirmation_required(
            "the confirmation token was issued for other arguments; preview these",
        ));
    }
    let selector = Selector::parse(&req.selector)
        .map_err(|e| Refusal::bad_request(format!("selector: {e}")))?;
    let now_set = set::resolve(app, &selector)?;
    if now_set.hash != run.set_hash {
        let then: Vec<String> = app
            .store
            .fleet_targets(&run.run_id)
            .await
            .map_err(Refusal::internal)?
            .into_iter()
            .map(|t| t.target_id)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let why = if selector.as_str() == run.selector {
            format!(
                "the set `{selector}` names changed since the preview ({}); preview again",
                set::difference(&then, &now_set.targets)
            )
        } else {
            format!(
                "the confirmation token was issued for the set `{}` names, not `{selector}`'s ({}); preview this one",
                run.selector,
                set::difference(&then, &now_set.targets)
            )
        };
        return Err(Refusal::new(ErrorCode::Conflict, why));
    }
    // The plan is part of what was confirmed: none at execute means the previewed one.
    if let Some(asked) = &req.plan {
        let previewed: Plan = serde_json::from_str(&run.plan).map_err(Refusal::internal)?;
        if *asked != previewed {
            return Err(confirmation_required(format!(
                "the confirmation token was issued for the plan {}, not {}; send no plan to run the previewed one, or preview this one",
                run.plan,
                serde_json::to_string(asked).map_err(Refusal::internal)?
            )));
        }
    }
    let driver = execute::driver(app);
    if !app
        .store
        .confirm_fleet_run(&run.run_id, hash, write_key, &driver)
        .await
        .map_err(Refusal::internal)?
    {
        return Err(confirmation_required(USED));
    }
    Ok(FleetRunRow {
        state: RunState::Running,
        confirmation_hash: None,
        write_key: Some(write_key.to_owned()),
        driver,
        ..run
    })
}
