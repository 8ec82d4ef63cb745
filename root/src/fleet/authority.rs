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

use crate::actors::RPC_TIMEOUT_MS;
use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::leases::manager::{self as lease_manager, LeaseEntry};
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
    let purpose = format!("fleet run {}", run.run_id);
    let l = crate::api::inspect::issue(
        app,
        &op,
        &crate::api::inspect::Issue {
            target_id,
            profile: &profile,
            audience: AUDIENCE,
            ttl: TTL,
            lineage: Some(lineage(&run.run_id)),
            trace_id: Some(run.trace_id.clone()),
            purpose: &purpose,
        },
    )
    .await?;
    app.fleet.keep_lease(key, l.clone());
    Ok(l)
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
