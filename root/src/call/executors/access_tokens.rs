//! `hub.list_access_tokens`, `hub.issue_access_token`, `hub.revoke_access_token`: MCP session
//! leases for the caller's own target, managed through root's lease manager (root stays the
//! source of truth; the hub never sees a bearer).
//!
//! Bounds: a lease can only issue a lease for its own target, subnet and zone, with a profile
//! whose capabilities its own profile already holds, that ends no later than its own deadline.
//! The lease it issues is its child (`minted`): it works only while the caller's lease and
//! every ancestor of it do, and ends with any of them. It can revoke only leases of its own
//! target, and their descendants end with them. A bearer is shown once, in the execute result;
//! the idempotency record keeps the result with the bearer redacted, so a replay cannot show it
//! again.

use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::lease::SessionLease;
use mcp_shared::time::{format, now};
use ractor::call_t;
use serde_json::{Value, json};

use super::input::{arg_str, arg_u64, internal};
use crate::actors::RPC_TIMEOUT_MS;
use crate::app::App;
use crate::call::context::CallContext;
use crate::leases::manager::{self as lease_manager, LeaseError, NewLease, Source};
use mcp_shared::protocol::CallBody;

/// Default audience of an issued lease.
const DEFAULT_AUDIENCE: &str = "mcp-client";

fn token_row(l: &SessionLease, caller: &str) -> Value {
    let l = l.clone().normalized(now());
    json!({
        "session_id": l.session_id,
        "audience": l.audience,
        "capability_profile": l.capability_profile,
        "created_at": format(l.created_at),
        "deadline_at": format(l.deadline_at),
        "last_used_at": l.last_used_at.map(format),
        "use_count": l.use_count,
        "status": l.status,
        "is_caller": l.session_id == caller,
    })
}

/// `hub.list_access_tokens {include_inactive?, limit?}`: the target's leases, newest first,
/// with expired ones shown as expired; never a bearer.
pub(crate) fn list(app: &App, ctx: &CallContext, input: &CallBody) -> Result<Value, ToolError> {
    let caller = ctx.lease.lease();
    let include_inactive = input
        .arguments
        .get("include_inactive")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let limit = arg_u64(input, "limit", 100, 1, 500) as usize;
    let mut leases: Vec<SessionLease> = app
        .leases
        .list()
        .into_iter()
        .filter(|l| l.target_id == caller.target_id)
        .map(|l| l.normalized(now()))
        .filter(|l| include_inactive || l.status == mcp_shared::lease::LeaseStatus::Active)
        .collect();
    leases.sort_by_key(|l| std::cmp::Reverse(l.created_at));
    let total = leases.len();
    leases.truncate(limit);
    Ok(json!({
        "target_id": caller.target_id,
        "tokens": leases.iter().map(|l| token_row(l, &caller.session_id)).collect::<Vec<_>>(),
        "total": total,
    }))
}

/// `hub.issue_access_token {capability_profile, ttl_sec, audience?}`.
pub(crate) async fn issue(
    app: &App,
    ctx: &CallContext,
    input: &CallBody,
) -> Result<Value, ToolError> {
    let caller = ctx.lease.lease();
    // A run credential stays within its run profile: a lease it issued would not.
    if caller.is_run() {
        return Err(ToolError::new(
            ErrorCode::Forbidden,
            format!(
                "a run credential cannot issue access tokens; the lease it was issued under \
                 (`{}`) can",
                caller.parent_session_id.as_deref().unwrap_or("its parent")
            ),
        ));
    }
    let profile_name = arg_str(input, "capability_profile").unwrap_or_default();
    let Some(profile) = app.catalog.profiles.get(profile_name) else {
        let names: Vec<&str> = app
            .catalog
            .profiles
            .profiles
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        return Err(ToolError::new(
            ErrorCode::InvalidArguments,
            format!(
                "unknown capability profile `{profile_name}` (known: {})",
                names.join(", ")
            ),
        ));
    };
    // No escalation: the new lease holds nothing the caller's profile does not.
    let own = app
        .catalog
        .profiles
        .get(&caller.capability_profile)
        .map(|p| p.capabilities.clone())
        .unwrap_or_default();
    let wider: Vec<&String> = profile
        .capabilities
        .iter()
        .filter(|c| !own.contains(c))
        .collect();
    if !wider.is_empty() {
        return Err(ToolError::new(
            ErrorCode::CapabilityNotGranted,
            format!(
                "profile `{profile_name}` grants capabilities your lease does not hold: {}",
                wider
                    .iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let max = app.config.limits.max_lease_ttl_sec;
    let ttl_sec = input
        .arguments
        .get("ttl_sec")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if ttl_sec == 0 || ttl_sec > max {
        return Err(ToolError::new(
            ErrorCode::InvalidArguments,
            format!("ttl_sec must be between 1 and {max}"),
        ));
    }
    let deadline = now() + time::Duration::seconds(ttl_sec as i64);
    if deadline > caller.deadline_at {
        return Err(ToolError::new(
            ErrorCode::InvalidArguments,
            format!(
                "a lease issued by this one cannot outlive it: your deadline is {}",
                format(caller.deadline_at)
            ),
        ));
    }
    let audience = arg_str(input, "audience")
        .unwrap_or(DEFAULT_AUDIENCE)
        .to_owned();
    let effective_tools = app.effective_tools(profile, false);
    if input.dry_run {
        return Ok(json!({
            "action": "issue_access_token",
            "target_id": caller.target_id,
            "subnet_id": caller.subnet_id,
            "zone": caller.zone,
            "capability_profile": profile_name,
            "audience": audience,
            "ttl_sec": ttl_sec,
            "tools": effective_tools,
            "description": format!(
                "Will issue an MCP session lease for `{}` with profile `{profile_name}` for {ttl_sec} s; its bearer is shown once.",
                caller.target_id
            ),
        }));
    }
    let new = NewLease {
        target_id: caller.target_id.clone(),
        subnet_id: caller.subnet_id.clone(),
        zone: caller.zone.clone(),
        audience,
        capability_profile: profile_name.to_owned(),
        effective_tools,
        ttl: Duration::from_secs(ttl_sec),
        lineage: None,
        source: Source::Minted {
            parent: caller.session_id.clone(),
        },
        // A child carries its parent's own rate (its owner's is shared anyway).
        rate: caller.rate.clone(),
    };
    let issued = crate::ops::leases::issue(app, new)
        .await
        .map_err(|e| match e {
            IssueError::Refused(e) => lease_error(e),
            e @ IssueError::Unreachable(_) => internal("the lease manager", e),
        })?;
    Ok(json!({
        "session_id": issued.lease.session_id,
        "token": issued.token,
        "deadline_at": format(issued.lease.deadline_at),
        "capability_profile": issued.lease.capability_profile,
        "audience": issued.lease.audience,
        "parent_session_id": caller.session_id,
        "note": "The bearer is shown once; a replay of this call returns it redacted. It works only while the lease that issued it does.",
    }))
}

/// `hub.revoke_access_token {session_id}`: only a lease of the caller's target.
pub(crate) async fn revoke(
    app: &App,
    ctx: &CallContext,
    input: &CallBody,
) -> Result<Value, ToolError> {
    let caller = ctx.lease.lease();
    let session_id = arg_str(input, "session_id").unwrap_or_default();
    let lease = app
        .leases
        .get(session_id)
        .filter(|l| l.target_id == caller.target_id)
        .ok_or_else(|| {
            ToolError::new(
                ErrorCode::NotFound,
                format!("no lease `{session_id}` for target `{}`", caller.target_id),
            )
        })?
        .normalized(now());
    if input.dry_run {
        return Ok(json!({
            "action": "revoke_access_token",
            "lease": token_row(&lease, &caller.session_id),
            "description": if lease.session_id == caller.session_id {
                format!("Will revoke lease `{session_id}`, the one making this call: it stops working at once.")
            } else {
                format!("Will revoke lease `{session_id}` ({}): its bearer stops working at once.", lease.capability_profile)
            },
        }));
    }
    let revoked = call_t!(
        app.actors.leases.load(),
        lease_manager::Msg::Revoke,
        RPC_TIMEOUT_MS,
        session_id.to_owned()
    )
    .map_err(|e| internal("the lease manager", e))?
    .map_err(lease_error)?;
    // The OAuth sign-in whose token this was ends with it (no refresh issues another).
    let now_ms = mcp_shared::time::unix_ms(now());
    app.store
        .end_grants_of_lease(session_id, now_ms)
        .await
        .map_err(|e| internal("the grant store", e))?;
    // In force on every live replica before the call answers (its descendants too).
    crate::ops::leases::ended(
        app,
        std::slice::from_ref(&session_id.to_owned()),
        &revoked.descendants,
    )
    .await;
    Ok(json!({
        "revoked": token_row(&revoked.lease, &caller.session_id),
        "descendants_revoked": revoked.descendants.len(),
    }))
}

use crate::ops::leases::IssueError;

fn lease_error(e: LeaseError) -> ToolError {
    match e {
        LeaseError::NotFound(id) => ToolError::new(ErrorCode::NotFound, format!("no lease `{id}`")),
        e @ LeaseError::NotActive(..) => ToolError::new(ErrorCode::InvalidArguments, e.to_string()),
        e @ (LeaseError::ExceedsParent { .. } | LeaseError::ChainTooLong(_)) => {
            ToolError::new(ErrorCode::CapabilityNotGranted, e.to_string())
        }
        LeaseError::Store(e) => internal("the lease store", e),
    }
}
