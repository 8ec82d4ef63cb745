//! Issuing a lease, and what follows leases' end. Issuing is the one path every issuer takes
//! (an operator's request, the console inspector's reader lease, a minted access token, a
//! run credential, a fleet run's per-target lease): the lease manager creates it, then the
//! other replicas of the zone are told, so the lease is known on every replica however it
//! was issued. An operator's own leases (the console inspector's reads, a fleet run's targets)
//! are issued as an audited operator action ([`issue_to_operator`]). Ended leases ([`ended`]) are forgotten here and announced to the zone.

use std::sync::Arc;
use std::time::Duration;

use mcp_shared::contract::SideEffectClass;
use serde_json::json;

use crate::app::App;
use crate::leases::manager::{
    self as lease_manager, IssuedLease, LeaseEntry, LeaseError, NewLease,
};
use crate::operators::OperatorId;
use crate::ops::audited::{Asked, audited};
use crate::ops::error::Refusal;

/// Why a lease was not issued.
#[derive(Debug, thiserror::Error)]
pub(crate) enum IssueError {
    /// The lease manager did not answer (it is restarting, or overloaded).
    #[error("the lease manager did not answer: {0}")]
    Unreachable(String),
    /// The lease manager refused it (a parent that ended, a chain too long, the store).
    #[error(transparent)]
    Refused(#[from] LeaseError),
}

/// A lease manager's refusal in the governed calls' words.
impl From<LeaseError> for Refusal {
    fn from(e: LeaseError) -> Refusal {
        use mcp_shared::error::ErrorCode;
        match e {
            LeaseError::NotFound(id) => Refusal::not_found(format!("no lease `{id}`")),
            e @ LeaseError::NotActive(..) => {
                Refusal::new(ErrorCode::InvalidArguments, e.to_string())
            }
            e @ (LeaseError::ExceedsParent { .. } | LeaseError::ChainTooLong(_)) => {
                Refusal::new(ErrorCode::CapabilityNotGranted, e.to_string())
            }
            LeaseError::Store(e) => Refusal::internal(e),
        }
    }
}

impl From<IssueError> for Refusal {
    fn from(e: IssueError) -> Refusal {
        match e {
            IssueError::Refused(e) => e.into(),
            e @ IssueError::Unreachable(_) => Refusal::internal(e),
        }
    }
}

/// A capability profile this root's catalog does not hold (any more: a run or lease kept
/// from before its configuration changed).
pub(crate) fn unknown_profile(name: &str) -> Refusal {
    Refusal::new(
        mcp_shared::error::ErrorCode::CapabilityNotGranted,
        format!("capability profile `{name}` is not one of this root's"),
    )
}

/// Issues `new` and tells the other replicas.
pub(crate) async fn issue(app: &App, new: NewLease) -> Result<IssuedLease, IssueError> {
    let issued = ractor::call_t!(
        app.actors.leases.load(),
        lease_manager::Msg::Create,
        crate::actors::RPC_TIMEOUT_MS,
        Box::new(new)
    )
    .map_err(|e| IssueError::Unreachable(e.to_string()))??;
    crate::replica::lease_changed(app, &issued.lease.session_id, false).await;
    Ok(issued)
}

/// The narrowest profile granting `capability` whose tools are all reads.
pub(crate) fn read_profile(app: &App, capability: &str) -> Option<String> {
    app.catalog
        .profiles
        .profiles
        .iter()
        .filter(|p| p.capabilities.iter().any(|c| c == capability))
        .filter(|p| {
            app.effective_tools(p, false).iter().all(|t| {
                app.catalog
                    .contracts
                    .get(t)
                    .is_some_and(|c| c.contract.side_effect == SideEffectClass::Read)
            })
        })
        .min_by_key(|p| p.capabilities.len())
        .map(|p| p.name.clone())
}

/// A lease root issues to an operator for its own calls on a target (see [`issue_to_operator`]).
pub(crate) struct ToOperator<'a> {
    pub(crate) target_id: &'a str,
    pub(crate) profile: &'a str,
    pub(crate) audience: &'a str,
    pub(crate) ttl: Duration,
    /// The lineage it joins (its idempotency owner); `None` starts its own.
    pub(crate) lineage: Option<String>,
    /// The trace its event joins; `None`: a trace of its own.
    pub(crate) trace_id: Option<String>,
    /// What it is for, in the event's request and summary.
    pub(crate) purpose: &'a str,
}

/// Issues a lease to the operator `op` for its own calls (the console's reads, a fleet run's
/// targets): one `admin.lease.create` event naming the operator; the bearer never leaves
/// root (only the lease entry is kept). Refused when the target is not enrolled.
pub(crate) async fn issue_to_operator(
    app: &App,
    op: &OperatorId,
    l: &ToOperator<'_>,
) -> Result<Arc<LeaseEntry>, Refusal> {
    let (target_id, profile_name) = (l.target_id, l.profile);
    let profile = app
        .catalog
        .profiles
        .get(profile_name)
        .ok_or_else(|| unknown_profile(profile_name))?;
    let Some(subnet_id) = app
        .hubs
        .enrolments
        .get(target_id)
        .map(|e| e.row.subnet_id.clone())
    else {
        return Err(Refusal::not_found(format!(
            "target `{target_id}` is not enrolled"
        )));
    };
    let new = NewLease {
        target_id: target_id.to_owned(),
        subnet_id,
        zone: app.config.zone.clone(),
        audience: l.audience.into(),
        capability_profile: profile_name.to_owned(),
        effective_tools: app.effective_tools(profile, false),
        ttl: l.ttl,
        lineage: l.lineage.clone(),
        source: crate::leases::manager::Source::Issued {
            by: Some(op.actor_id()),
            grant: None,
            holder: None,
        },
        rate: None,
    };
    let asked = Asked {
        tool_id: "admin.lease.create",
        target_id: Some(target_id.to_owned()),
        adapter: Some("root.lease_manager".into()),
        request: json!({
            "target_id": target_id,
            "capability_profile": profile_name,
            "audience": l.audience,
            "ttl_sec": l.ttl.as_secs(),
            "for": l.purpose,
        }),
    };
    let (issued, _) = audited(app, op, asked, l.trace_id.clone(), async {
        let issued = issue(app, new)
            .await
            .map_err(|e| Refusal::internal(format!("issuing a lease for {}: {e}", l.purpose)))?;
        let summary = format!(
            "issued lease {} for {} on `{target_id}` ({profile_name})",
            issued.lease.session_id, l.purpose
        );
        Ok::<_, Refusal>((issued, summary))
    })
    .await?;
    app.leases
        .authenticate(&issued.token)
        .ok_or_else(|| Refusal::internal("a newly issued lease does not authenticate"))
}

/// Forgets the per-lease bookkeeping of ended leases and tells the other replicas. Telling
/// them the tops of the ended subtrees is enough: their descendants' entries refuse through
/// their ancestors (and the store holds every one revoked).
pub(crate) async fn ended(
    app: &App,
    tops: &[String],
    descendants: &[(String, mcp_shared::lease::LeaseKind)],
) {
    for id in tops.iter().chain(descendants.iter().map(|(id, _)| id)) {
        app.limits.forget_prefix(&format!("lease:{id}"));
    }
    futures::future::join_all(
        tops.iter()
            .map(|id| crate::replica::lease_changed(app, id, true)),
    )
    .await;
}

/// Why leases could not be ended.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EndError {
    #[error(transparent)]
    Lease(#[from] LeaseError),
    #[error("the lease manager did not answer: {0}")]
    Internal(String),
}

impl From<EndError> for Refusal {
    fn from(e: EndError) -> Refusal {
        match e {
            EndError::Lease(e) => Refusal::from(e),
            EndError::Internal(e) => Refusal::internal(e),
        }
    }
}

/// Revokes every active lease of `ending` with its descendants, and returns once every live
/// replica refuses them.
pub(crate) async fn end_all(
    app: &App,
    ending: crate::leases::manager::Ending,
) -> Result<crate::leases::manager::Ended, EndError> {
    let done = ractor::call_t!(
        app.actors.leases.load(),
        crate::leases::manager::Msg::End,
        crate::actors::RPC_TIMEOUT_MS,
        ending
    )
    .map_err(|e| EndError::Internal(e.to_string()))??;
    ended(app, &done.leases, &done.descendants).await;
    Ok(done)
}
