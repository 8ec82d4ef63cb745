//! The lease each target's call in a fleet run goes under: one root issues to the run's
//! operator for this run and target. A read's has the narrowest read-only capability profile
//! that grants the tool (as the console's reads); a write's, the run's capability profile.
//! Its lineage is the run (`fleet_<run_id>`), so every lease the run issues for a target owns
//! the same idempotency keys, and a write's [`IDEMPOTENCY_KEY`] names one execution per
//! target across retries, resumes and restarts: root's ledger answers a replay, and the hub's
//! own ledger (which outlives root's) never runs it twice. Each issue is an
//! `admin.lease.create` event in the run's trace, and the run's leases are revoked when it
//! ends: the run's authority is its own and ends with it.
//!
//! Policy judges each call under its lease as it would any client's: a fleet run reaches only
//! targets where one call under that profile would be allowed.

use std::sync::Arc;
use std::time::Duration;

use mcp_shared::time::now;
use ractor::call_t;
use serde_json::json;

use crate::actors::RPC_TIMEOUT_MS;
use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::leases::manager::{self as lease_manager, LeaseEntry, NewLease, Source};
use crate::store::FleetRunRow;

/// The idempotency key of each target's write (scoped to the run's lineage, the target and
/// the tool, so one key per target and run).
pub(crate) const IDEMPOTENCY_KEY: &str = "fleet-run";
/// Audience of a run's leases.
pub(crate) const AUDIENCE: &str = "fleet-run";
/// Lifetime of a run's lease; a new one (same lineage) is issued when less than
/// [`RENEW`] is left.
const TTL: Duration = Duration::from_secs(900);
const RENEW: Duration = Duration::from_secs(120);

/// The lineage of a run's leases: their idempotency owner.
pub(crate) fn lineage(run_id: &str) -> String {
    format!("fleet_{run_id}")
}

/// The operator a run acts for.
pub(crate) fn operator(run: &FleetRunRow) -> Operator {
    let name = run.created_by.strip_prefix("operator:").unwrap_or("admin");
    Operator(crate::operators::OperatorId::named(name))
}

/// The lease `target_id`'s call in `run` goes under (see the module's header).
pub(crate) async fn lease_for(
    app: &App,
    run: &FleetRunRow,
    target_id: &str,
    contract: &mcp_shared::ToolContract,
) -> Result<Arc<LeaseEntry>, ApiError> {
    let op = operator(run);
    let profile = match &run.profile {
        Some(p) => p.clone(),
        None => crate::api::inspect::read_profile(app, &contract.required_capability).ok_or_else(
            || {
                ApiError::new(
                    axum::http::StatusCode::FORBIDDEN,
                    mcp_shared::error::ErrorCode::CapabilityNotGranted,
                    format!(
                        "no read-only capability profile grants `{}`",
                        contract.required_capability
                    ),
                )
            },
        )?,
    };
    let key = (run.run_id.clone(), target_id.to_owned());
    let renew_at = now() + RENEW;
    if let Some(l) = app.fleet.lease(&key)
        && l.is_usable()
        && l.lease().deadline_at > renew_at
    {
        l.touch();
        return Ok(l);
    }
    let l = issue(app, &op, run, target_id, &profile).await?;
    app.fleet.keep_lease(key, l.clone());
    Ok(l)
}

async fn issue(
    app: &App,
    op: &Operator,
    run: &FleetRunRow,
    target_id: &str,
    profile_name: &str,
) -> Result<Arc<LeaseEntry>, ApiError> {
    let profile = app
        .catalog
        .profiles
        .get(profile_name)
        .ok_or_else(|| ApiError::internal(format!("profile {profile_name} vanished")))?;
    let Some(subnet_id) = app
        .hubs
        .enrolments
        .get(target_id)
        .map(|e| e.row.subnet_id.clone())
    else {
        return Err(ApiError::not_found(format!(
            "target `{target_id}` is not enrolled"
        )));
    };
    let new = NewLease {
        target_id: target_id.to_owned(),
        subnet_id,
        zone: app.config.zone.clone(),
        audience: AUDIENCE.into(),
        capability_profile: profile_name.to_owned(),
        effective_tools: app.effective_tools(profile),
        ttl: TTL,
        lineage: Some(lineage(&run.run_id)),
        source: Source::Issued {
            by: Some(op.actor_id()),
            grant: None,
        },
    };
    let asked = crate::api::audited::Asked {
        tool_id: "admin.lease.create",
        target_id: Some(target_id.to_owned()),
        adapter: Some("root.lease_manager".into()),
        request: json!({
            "target_id": target_id,
            "capability_profile": profile_name,
            "audience": AUDIENCE,
            "ttl_sec": TTL.as_secs(),
            "fleet_run": run.run_id,
        }),
    };
    let trace = Some(run.trace_id.clone());
    let (issued, _) = crate::api::audited::audited_in(app, op, asked, trace, async {
        let issued = call_t!(
            app.actors.leases.load(),
            lease_manager::Msg::Create,
            RPC_TIMEOUT_MS,
            new
        )
        .map_err(ApiError::internal)?
        .map_err(|e| ApiError::internal(format!("issuing the fleet run's lease: {e}")))?;
        let summary = format!(
            "issued lease {} for fleet run {} on `{target_id}` ({profile_name})",
            issued.lease.session_id, run.run_id
        );
        Ok((issued, summary))
    })
    .await?;
    app.leases
        .authenticate(&issued.token)
        .ok_or_else(|| ApiError::internal("a new fleet lease does not authenticate"))
}

/// Revokes the leases this replica issued for `run_id` (the run ended, or was only
/// previewed and dropped).
pub(crate) async fn end(app: &App, run_id: &str) {
    for lease in app.fleet.take_leases(run_id) {
        let id = lease.session_id().to_owned();
        match call_t!(
            app.actors.leases.load(),
            lease_manager::Msg::Revoke,
            RPC_TIMEOUT_MS,
            id.clone()
        ) {
            Ok(
                Ok(_)
                | Err(
                    lease_manager::LeaseError::NotFound(_)
                    | lease_manager::LeaseError::NotActive(..),
                ),
            ) => {}
            Ok(Err(e)) => {
                tracing::warn!(%run_id, session_id = %id, error = %e, "cannot end a fleet run's lease")
            }
            Err(e) => {
                tracing::warn!(%run_id, session_id = %id, error = %e, "cannot end a fleet run's lease")
            }
        }
    }
}
