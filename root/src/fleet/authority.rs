//! The lease each target's call in a fleet run goes under, for the run's [`Caller`]:
//! - an operator's run: a lease root issues to the operator for this run and target. A
//!   read's has the narrowest read-only capability profile that grants the tool (as the
//!   console's reads); a write's, the run's capability profile. Each issue is an
//!   `admin.lease.create` event in the run's trace.
//! - an agent's run, started under a fleet lease: a child of that lease for the target
//!   (`LeaseKind::Fleet`), with its capability profile and never past its deadline; revoking
//!   the fleet lease ends every one of them, and the run is cancelled ([`held`]).
//!
//! Its lineage is the run (`fleet_<run_id>`), and a write's [`idempotency_key`] names the
//! confirmed write, so it names one execution per target across retries, resumes, restarts
//! and a second run of the same confirmation: root's claim answers a replay, and the hub's
//! own ledger (which outlives root's) never runs it twice. The run's leases are revoked when it ends: the run's authority ends with it.
//!
//! Policy judges each call under its lease as it would any client's: a fleet run reaches only
//! targets where one call under that profile would be allowed.

use std::sync::Arc;
use std::time::Duration;

use mcp_shared::time::now;
use ractor::call_t;

use crate::actors::RPC_TIMEOUT_MS;
use crate::app::App;
use crate::leases::manager::{self as lease_manager, LeaseEntry};
use crate::operators::OperatorId;
use crate::ops::error::Refusal;
use crate::roles::Role;
use crate::store::FleetRunRow;
use mcp_shared::error::ErrorCode;

/// The idempotency key of each target's write in `run` (its owner, target and tool scope it
/// further): it names the confirmed write, not only the run: the confirmation that started it
/// (`write_key`), the set's hash, the tool, the arguments and the plan. Two runs of one
/// confirmed write (an agent's second preview executed with the same key) send the same key,
/// so neither root's claim nor the target's ledger runs a target twice.
pub(crate) fn idempotency_key(run: &FleetRunRow) -> String {
    use sha2::{Digest, Sha256};
    let Some(write_key) = &run.write_key else {
        // A run confirmed before writes had an identity.
        return format!("fleet-run-{}", run.run_id);
    };
    let mut h = Sha256::new();
    for part in [
        write_key.as_str(),
        &run.set_hash,
        &run.tool_id,
        &run.arguments,
        &run.plan,
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    format!("fleet-write-{}", hex::encode(&h.finalize()[..16]))
}
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

/// Who a run acts for (its `created_by`).
pub(crate) enum Caller {
    /// `operator:<name>`.
    Operator(OperatorId),
    /// `lease:<session id>`: an agent's fleet lease.
    Lease(String),
}

/// The `created_by` of a run an agent starts under fleet lease `session_id`.
pub(crate) fn lease_caller(session_id: &str) -> String {
    format!("lease:{session_id}")
}

/// Who `run` acts for.
pub(crate) fn caller(run: &FleetRunRow) -> Caller {
    match run.created_by.strip_prefix("lease:") {
        Some(id) => Caller::Lease(id.to_owned()),
        None => {
            let name = run.created_by.strip_prefix("operator:").unwrap_or("admin");
            Caller::Operator(OperatorId::named(name))
        }
    }
}

/// Whether the authority `run` acts under still holds: its operator's credential, or its
/// fleet lease and every lease above it (another replica's revocation included).
pub(crate) async fn held(app: &App, run: &FleetRunRow) -> bool {
    match caller(run) {
        // Still an operator who holds `operator`, and may still hand out a write's profile.
        Caller::Operator(op) => app.operators.grant(op.name()).is_some_and(|g| {
            g.holds(Role::Operator) && run.profile.as_deref().is_none_or(|p| g.may_issue(p))
        }),
        Caller::Lease(id) => app
            .store
            .chain_active(&id, mcp_shared::time::unix_ms(now()))
            .await
            .unwrap_or(true),
    }
}

/// The lease `target_id`'s call in `run` goes under (see the module's header).
pub(crate) async fn lease_for(
    app: &App,
    run: &FleetRunRow,
    target_id: &str,
    contract: &mcp_shared::ToolContract,
) -> Result<Arc<LeaseEntry>, Refusal> {
    let key = (run.run_id.clone(), target_id.to_owned());
    let renew_at = now() + RENEW;
    if let Some(l) = app.fleet.lease(&key)
        && l.is_usable()
        && l.lease().deadline_at > renew_at
    {
        l.touch();
        return Ok(l);
    }
    let l = match caller(run) {
        Caller::Operator(op) => operator_lease(app, run, &op, target_id, contract).await?,
        Caller::Lease(parent) => fleet_target_lease(app, run, &parent, target_id).await?,
    };
    app.fleet.keep_lease(key, l.clone());
    Ok(l)
}

/// An operator's run: a lease issued to the operator (see the module's header).
async fn operator_lease(
    app: &App,
    run: &FleetRunRow,
    op: &OperatorId,
    target_id: &str,
    contract: &mcp_shared::ToolContract,
) -> Result<Arc<LeaseEntry>, Refusal> {
    let grant = app.operators.grant(op.name()).ok_or_else(|| {
        Refusal::new(ErrorCode::Unauthenticated, "the run's operator was revoked")
    })?;
    if !grant.holds(Role::Operator) {
        return Err(Refusal::role_required(Role::Operator, &grant));
    }
    let profile = match &run.profile {
        // A write's profile: one its operator may hand out.
        Some(p) if !grant.may_issue(p) => return Err(Refusal::profile_not_held(p, &grant)),
        Some(p) => p.clone(),
        None => crate::ops::leases::read_profile(app, &contract.required_capability).ok_or_else(
            || {
                Refusal::new(
                    mcp_shared::error::ErrorCode::CapabilityNotGranted,
                    format!(
                        "no read-only capability profile grants `{}`",
                        contract.required_capability
                    ),
                )
            },
        )?,
    };
    let purpose = format!("fleet run {}", run.run_id);
    crate::ops::leases::issue_to_operator(
        app,
        op,
        &crate::ops::leases::ToOperator {
            target_id,
            profile: &profile,
            audience: AUDIENCE,
            ttl: TTL,
            lineage: Some(lineage(&run.run_id)),
            trace_id: Some(run.trace_id.clone()),
            purpose: &purpose,
        },
    )
    .await
}

/// An agent's run: a child of its fleet lease `parent` for `target_id`, with the fleet
/// lease's capability profile. The target is one of the run's set, which the fleet lease's
/// selector named when the run started.
async fn fleet_target_lease(
    app: &App,
    run: &FleetRunRow,
    parent: &str,
    target_id: &str,
) -> Result<Arc<LeaseEntry>, Refusal> {
    let fleet = match app.leases.entry(parent) {
        Some(e) => e,
        None => {
            let chain = app
                .store
                .lease_chain(parent)
                .await
                .map_err(Refusal::internal)?;
            app.leases
                .upsert_chain(chain)
                .ok_or_else(|| Refusal::not_found(format!("no lease `{parent}`")))?
        }
    };
    let l = fleet.lease();
    if l.fleet_selector() != Some(run.selector.as_str()) {
        return Err(Refusal::new(
            mcp_shared::error::ErrorCode::CapabilityNotGranted,
            format!(
                "lease `{parent}` is not the fleet lease of `{}`",
                run.selector
            ),
        ));
    }
    let profile = app
        .catalog
        .profiles
        .get(&l.capability_profile)
        .ok_or_else(|| crate::ops::leases::unknown_profile(&l.capability_profile))?;
    let subnet_id = app
        .hubs
        .enrolments
        .get(target_id)
        .map_or_else(|| "default".to_owned(), |e| e.row.subnet_id.clone());
    let new = lease_manager::NewLease {
        target_id: target_id.to_owned(),
        subnet_id,
        zone: l.zone.clone(),
        audience: AUDIENCE.to_owned(),
        capability_profile: l.capability_profile.clone(),
        effective_tools: app.effective_tools(profile, false),
        ttl: TTL,
        lineage: Some(lineage(&run.run_id)),
        source: lease_manager::Source::Fleet {
            parent: parent.to_owned(),
        },
        // A child carries its parent's own rate (its owner's is shared anyway).
        rate: l.rate.clone(),
    };
    let issued = crate::ops::leases::issue(app, new).await?;
    let id = issued.lease.session_id.clone();
    app.leases
        .entry(&id)
        .ok_or_else(|| Refusal::internal(format!("lease `{id}` vanished")))
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
