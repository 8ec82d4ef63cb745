//! The operator's lease endpoints (`/v1/root/mcp/sessions`): issue, list, show, revoke and
//! rotate MCP Session Leases. Issuing, revoking and rotating are operator actions, each one
//! audit event naming the operator (`admin.lease.create|revoke|rotate`, refusals included);
//! a bearer is in the answer that hands it out and never in the trail.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use mcp_shared::error::ErrorCode;
use mcp_shared::lease::{FLEET_TARGET_PREFIX, LeaseStatus, SessionLease};
use ractor::call_t;
use serde_json::json;

use crate::actors::RPC_TIMEOUT_MS;
use crate::api::audited::{ActionBody, audited};
use crate::api::bodies::{
    Audited, DelegationView, DescendantView, GrantView, IssuedLeaseBody, LeaseList, NewLeaseRequest,
};
use crate::api::error::ApiError;
use crate::api::paging;
use crate::api::principal::Operator;
use crate::app::App;
use crate::leases::manager::{
    self as lease_manager, Ended, IssuedLease, LeaseError, NewLease, Revoked, Source,
};
use crate::ops::audited::Asked;
use crate::ops::error::Refusal;

pub(crate) fn lease_error(e: LeaseError) -> ApiError {
    match e {
        // A lease that ended conflicts with the request rather than being malformed.
        e @ LeaseError::NotActive(..) => ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::InvalidArguments,
            e.to_string(),
        ),
        e => Refusal::from(e).into(),
    }
}

fn issued_body(i: IssuedLease, event_id: String) -> Audited<IssuedLeaseBody> {
    Audited {
        item: IssuedLeaseBody {
            session_id: i.lease.session_id.clone(),
            token: i.token,
            deadline_at: mcp_shared::time::format(i.lease.deadline_at),
            lease: i.lease,
        },
        event_id,
    }
}

/// An issued lease in the trail's words: never its bearer.
fn issued_summary(verb: &str, i: &IssuedLease) -> String {
    format!(
        "{verb} lease {} for `{}` ({}) until {}",
        i.lease.session_id,
        i.lease.target_id,
        i.lease.capability_profile,
        mcp_shared::time::format(i.lease.deadline_at)
    )
}

/// `POST /v1/root/mcp/sessions`: a new lease; its bearer is shown once, in this answer.
pub(crate) async fn create(
    State(app): State<Arc<App>>,
    op: Operator,
    body: ActionBody<NewLeaseRequest>,
) -> Result<(StatusCode, Json<Audited<IssuedLeaseBody>>), ApiError> {
    let asked = Asked {
        tool_id: "admin.lease.create",
        target_id: body.get().map(|req| req.target_id.clone()),
        adapter: Some("root.lease_manager".into()),
        request: body.request(json!({}), |req| json!(req)),
    };
    let (issued, event_id) = audited(&app, &op, asked, async {
        let req = body.parsed()?;
        if !op.grant.may_issue(&req.capability_profile) {
            return Err(Refusal::profile_not_held(&req.capability_profile, &op.grant).into());
        }
        let source = Source::Issued {
            by: Some(op.actor_id()),
            grant: None,
            holder: None,
        };
        let issued = issue(&app, req, None, source).await?;
        let summary = issued_summary("issued", &issued);
        Ok((issued, summary))
    })
    .await?;
    Ok((StatusCode::CREATED, Json(issued_body(issued, event_id))))
}

/// Validates a lease request and issues the lease (in `lineage`, the rotation chain of an
/// earlier lease, when given: an OAuth refresh), with its authority from `source`.
pub(crate) async fn issue(
    app: &App,
    req: NewLeaseRequest,
    lineage: Option<String>,
    source: Source,
) -> Result<IssuedLease, ApiError> {
    let new = checked(app, req, lineage, source)?;
    create_lease(app, new).await
}

/// Validates a lease request: the lease it asks for, or the precise refusal (nothing is
/// issued; an OAuth approval checks its grant so before the client ever asks for a token).
pub(crate) fn checked(
    app: &App,
    req: NewLeaseRequest,
    lineage: Option<String>,
    source: Source,
) -> Result<NewLease, ApiError> {
    let mut req = req;
    if let Some(selector) = req.selector.take() {
        if !req.target_id.is_empty() {
            return Err(ApiError::bad_request(
                "give target_id (one target) or selector (a fleet lease), not both",
            ));
        }
        req.target_id = format!("{FLEET_TARGET_PREFIX}{selector}");
    }
    if let Some(selector) = req.target_id.strip_prefix(FLEET_TARGET_PREFIX) {
        return checked_fleet(app, req.clone(), selector, lineage, source);
    }
    if req.target_id.trim().is_empty() || req.target_id.len() > 200 {
        return Err(ApiError::bad_request("target_id must be 1..200 characters"));
    }
    let (profile, ttl) = checked_grant(app, &req)?;
    let rate = checked_rate(&req)?;
    let effective_tools = app.effective_tools(profile, false);
    // A lease binds its target's subnet: an enrolled target's subnet is the default, and
    // another one is refused.
    let (enrolled_subnet, retired) = app
        .hubs
        .enrolments
        .get(&req.target_id)
        .map_or((None, false), |e| {
            (Some(e.row.subnet_id.clone()), e.retired())
        });
    if retired {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::TargetRetired,
            format!(
                "target `{}` is retired: no lease is issued for it",
                req.target_id
            ),
        ));
    }
    let subnet_id = match (req.subnet_id, enrolled_subnet) {
        (Some(asked), Some(enrolled)) if asked != enrolled => {
            return Err(ApiError::bad_request(format!(
                "target `{}` is enrolled in subnet `{enrolled}`, not `{asked}`",
                req.target_id
            )));
        }
        (_, Some(enrolled)) => enrolled,
        (Some(asked), None) => asked,
        (None, None) => "default".into(),
    };
    Ok(NewLease {
        subnet_id,
        zone: req.zone.unwrap_or_else(|| app.config.zone.clone()),
        audience: req.audience.unwrap_or_else(|| "mcp-client".into()),
        target_id: req.target_id,
        capability_profile: req.capability_profile,
        effective_tools,
        ttl,
        lineage,
        source,
        rate,
    })
}

/// A lease request's own rate, checked and written as `<calls>/<unit>`.
fn checked_rate(req: &NewLeaseRequest) -> Result<Option<String>, ApiError> {
    req.rate
        .as_ref()
        .map(|r| r.rate("rate").map(|r| r.to_string()))
        .transpose()
        .map_err(|e| match e {
            crate::config::ConfigError::Invalid(why) => ApiError::bad_request(why),
            other => ApiError::bad_request(other.to_string()),
        })
}

/// A lease request's capability profile and lifetime, checked.
fn checked_grant<'a>(
    app: &'a App,
    req: &NewLeaseRequest,
) -> Result<(&'a mcp_shared::profile::CapabilityProfile, Duration), ApiError> {
    if req.ttl_sec == 0 || req.ttl_sec > app.config.limits.max_lease_ttl_sec {
        return Err(ApiError::bad_request(format!(
            "ttl_sec must be between 1 and {}",
            app.config.limits.max_lease_ttl_sec
        )));
    }
    let Some(profile) = app.catalog.profiles.get(&req.capability_profile) else {
        let names: Vec<_> = app
            .catalog
            .profiles
            .profiles
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        return Err(ApiError::bad_request(format!(
            "unknown capability profile `{}` (known: {})",
            req.capability_profile,
            names.join(", ")
        )));
    };
    Ok((profile, Duration::from_secs(req.ttl_sec)))
}

/// Issues `new` (`ops::leases`).
async fn create_lease(app: &App, new: NewLease) -> Result<IssuedLease, ApiError> {
    Ok(crate::ops::leases::issue(app, new).await?)
}

impl From<crate::ops::leases::IssueError> for ApiError {
    fn from(e: crate::ops::leases::IssueError) -> ApiError {
        match e {
            crate::ops::leases::IssueError::Refused(e) => lease_error(e),
            e @ crate::ops::leases::IssueError::Unreachable(_) => ApiError::internal(e),
        }
    }
}

/// The subnet of a fleet lease: whichever its selector names.
pub(crate) const FLEET_SUBNET: &str = "*";

/// Checks a fleet lease: bound to the targets `selector` names (its `target_id` is
/// `fleet:<selector>`, its subnet `*`), with the fleet tools of its profile only. The
/// selector must name at least one enrolled target now; each run resolves it again.
fn checked_fleet(
    app: &App,
    req: NewLeaseRequest,
    selector: &str,
    lineage: Option<String>,
    source: Source,
) -> Result<NewLease, ApiError> {
    let selector = crate::hubs::selector::Selector::parse(selector)
        .map_err(|e| ApiError::bad_request(format!("selector: {e}")))?;
    if req.subnet_id.as_deref().is_some_and(|s| s != FLEET_SUBNET) {
        return Err(ApiError::bad_request(
            "a fleet lease takes no subnet_id: name the subnet in its selector (subnet=...)",
        ));
    }
    crate::fleet::set::resolve(app, &selector)?;
    let (profile, ttl) = checked_grant(app, &req)?;
    let rate = checked_rate(&req)?;
    let effective_tools = app.effective_tools(profile, true);
    if effective_tools.is_empty() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::CapabilityNotGranted,
            format!(
                "capability profile `{}` grants no fleet tool: a fleet lease needs infra.fleet.read or infra.fleet.write",
                req.capability_profile
            ),
        ));
    }
    Ok(NewLease {
        subnet_id: FLEET_SUBNET.into(),
        zone: req.zone.unwrap_or_else(|| app.config.zone.clone()),
        audience: req.audience.unwrap_or_else(|| "mcp-client".into()),
        target_id: format!("{FLEET_TARGET_PREFIX}{selector}"),
        capability_profile: req.capability_profile,
        effective_tools,
        ttl,
        lineage,
        source,
        rate,
    })
}

/// `GET /v1/root/mcp/sessions`: the filters of a page of leases.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LeaseQuery {
    /// `active`, `expired` or `revoked`, as of now.
    status: Option<String>,
    target_id: Option<String>,
    subnet_id: Option<String>,
    capability_profile: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

impl LeaseQuery {
    fn admits(&self, l: &SessionLease) -> bool {
        paging::admits(&self.status, l.status.as_str())
            && paging::admits(&self.target_id, &l.target_id)
            && paging::admits(&self.subnet_id, &l.subnet_id)
            && paging::admits(&self.capability_profile, &l.capability_profile)
    }
}

/// A lease's place in the list (newest first, then by id) as a cursor key.
fn lease_key(l: &SessionLease) -> String {
    format!("{}:{}", l.created_at.unix_timestamp_nanos(), l.session_id)
}

/// The place a cursor key names: creation time (nanoseconds) and lease id.
fn place(key: &str) -> Result<(i128, String), ApiError> {
    key.split_once(':')
        .and_then(|(n, id)| Some((n.parse::<i128>().ok()?, id.to_owned())))
        .ok_or_else(|| {
            ApiError::bad_request("invalid cursor (take next_cursor from a page of this list)")
        })
}

/// Whether `l` comes after the lease at `(nanos, id)` (newest first, then by id).
fn follows((nanos, id): &(i128, String), l: &SessionLease) -> bool {
    let at = l.created_at.unix_timestamp_nanos();
    at < *nanos || (at == *nanos && l.session_id.as_str() > id.as_str())
}

/// `GET /v1/root/mcp/sessions`: a page of leases, newest first, freshness-normalized,
/// filtered (status, target, subnet, profile); how many match, by status; and the cursor of
/// the next page.
pub(crate) async fn list(
    State(app): State<Arc<App>>,
    _op: Operator,
    q: Result<Query<LeaseQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<LeaseList>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if let Some(s) = &q.status
        && !["active", "expired", "revoked"].contains(&s.as_str())
    {
        return Err(ApiError::bad_request(format!(
            "status must be active, expired or revoked, not `{s}`"
        )));
    }
    let limit = paging::limit(q.limit)?;
    let after = q
        .cursor
        .as_deref()
        .map(|c| place(&paging::after("l", c)?))
        .transpose()?;
    let matched: Vec<SessionLease> = app
        .leases
        .list()
        .into_iter()
        .filter(|l| q.admits(l))
        .collect();
    let by_status = paging::by_status(&matched, |l| l.status.as_str());
    let total = matched.len();
    let (sessions, next_cursor) = paging::page(matched, "l", after, limit, lease_key, follows);
    Ok(Json(LeaseList {
        sessions,
        total,
        by_status,
        next_cursor,
    }))
}

/// `GET /v1/root/mcp/sessions/{id}`.
pub(crate) async fn get(
    State(app): State<Arc<App>>,
    _op: Operator,
    Path(id): Path<String>,
) -> Result<Json<SessionLease>, ApiError> {
    app.leases
        .get(&id)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no lease `{id}`")))
}

/// `GET /v1/root/mcp/sessions/{id}/delegation`: the lease, where its authority came from
/// (its ancestors and the OAuth grant at the top), and every lease below it, from the store
/// (every replica's), each status as it stands (a lease under an ended one reads revoked).
pub(crate) async fn delegation(
    State(app): State<Arc<App>>,
    _op: Operator,
    Path(id): Path<String>,
) -> Result<Json<DelegationView>, ApiError> {
    let mut chain = app
        .store
        .lease_chain(&id)
        .await
        .map_err(ApiError::internal)?;
    let entry = app
        .leases
        .upsert_chain(chain.clone())
        .ok_or_else(|| ApiError::not_found(format!("no lease `{id}`")))?;
    chain.pop();
    let now = mcp_shared::time::now();
    let as_stands = |row: crate::store::LeaseRow| match app.leases.entry(&row.lease.session_id) {
        Some(e) => e.snapshot(),
        None => row.lease.normalized(now),
    };
    let ancestors: Vec<SessionLease> = chain.into_iter().rev().map(as_stands).collect();
    let rows = app
        .store
        .lease_descendants(&id)
        .await
        .map_err(ApiError::internal)?;
    let descendants = in_tree_order(&id, rows)
        .into_iter()
        .map(|(depth, row)| {
            let mut lease = as_stands(row);
            // Below an ended lease nothing works, whatever its row says.
            if entry.snapshot().status != LeaseStatus::Active && lease.status == LeaseStatus::Active
            {
                lease.status = LeaseStatus::Revoked;
            }
            DescendantView { depth, lease }
        })
        .collect();
    let top = ancestors
        .last()
        .cloned()
        .unwrap_or_else(|| entry.snapshot());
    let grant = match &top.grant_id {
        Some(g) => app
            .store
            .grant(g)
            .await
            .map_err(ApiError::internal)?
            .map(|g| GrantView {
                grant_id: g.grant_id,
                client_id: g.client_id,
                approved_by: crate::operators::OperatorId::named(&g.operator).actor_id(),
                expires_at: mcp_shared::time::format(mcp_shared::time::from_unix_ms(
                    g.expires_at_ms,
                )),
                ended_at: g
                    .ended_at_ms
                    .map(|ms| mcp_shared::time::format(mcp_shared::time::from_unix_ms(ms))),
            }),
        None => None,
    };
    Ok(Json(DelegationView {
        lease: entry.snapshot(),
        grant,
        ancestors,
        descendants,
    }))
}

/// `rows` (descendants of `top`, oldest first) as a tree read top-down: each lease right
/// after its parent, with its depth below `top`.
fn in_tree_order(
    top: &str,
    rows: Vec<crate::store::LeaseRow>,
) -> Vec<(usize, crate::store::LeaseRow)> {
    fn below(
        parent: &str,
        depth: usize,
        rows: &[crate::store::LeaseRow],
        out: &mut Vec<(usize, crate::store::LeaseRow)>,
    ) {
        for row in rows
            .iter()
            .filter(|r| r.lease.parent_session_id.as_deref() == Some(parent))
        {
            out.push((depth, row.clone()));
            if depth < crate::store::MAX_CHAIN {
                below(&row.lease.session_id, depth + 1, rows, out);
            }
        }
    }
    let mut out = Vec::new();
    below(top, 1, &rows, &mut out);
    out
}

/// `POST /v1/root/mcp/sessions/{id}/revoke`: refused on every live replica when it returns.
pub(crate) async fn revoke(
    State(app): State<Arc<App>>,
    op: Operator,
    Path(id): Path<String>,
) -> Result<Json<Audited<SessionLease>>, ApiError> {
    let asked = Asked {
        tool_id: "admin.lease.revoke",
        target_id: app.leases.get(&id).map(|l| l.target_id),
        adapter: Some("root.lease_manager".into()),
        request: json!({ "session_id": id }),
    };
    let (lease, event_id) = audited(&app, &op, asked, async {
        let revoked = end(&app, &id).await?;
        let summary = format!(
            "revoked lease {id} and its {}",
            descendants_phrase(&revoked.descendants)
        );
        Ok((revoked.lease, summary))
    })
    .await?;
    Ok(Json(Audited {
        item: lease,
        event_id,
    }))
}

/// Revokes lease `id` with its descendants and the OAuth grant its bearer came from (no
/// refresh issues another), and returns once every live replica refuses them.
pub(crate) async fn end(app: &App, id: &str) -> Result<Revoked, ApiError> {
    let revoked = call_t!(
        app.actors.leases.load(),
        lease_manager::Msg::Revoke,
        RPC_TIMEOUT_MS,
        id.to_owned()
    )
    .map_err(ApiError::internal)?
    .map_err(lease_error)?;
    let now_ms = mcp_shared::time::unix_ms(mcp_shared::time::now());
    app.store
        .end_grants_of_lease(id, now_ms)
        .await
        .map_err(ApiError::internal)?;
    crate::ops::leases::ended(
        app,
        std::slice::from_ref(&id.to_owned()),
        &revoked.descendants,
    )
    .await;
    Ok(revoked)
}

/// Revokes every active lease of `ending` with its descendants (`ops::leases::end_all`).
pub(crate) async fn end_all(app: &App, ending: lease_manager::Ending) -> Result<Ended, ApiError> {
    crate::ops::leases::end_all(app, ending)
        .await
        .map_err(|e| match e {
            crate::ops::leases::EndError::Lease(e) => lease_error(e),
            crate::ops::leases::EndError::Internal(e) => ApiError::internal(e),
        })
}

/// How the trail counts what ended with a lease: `2 descendants (1 minted lease, 1 run
/// credential)`.
pub(crate) fn descendants_phrase(descendants: &[(String, mcp_shared::lease::LeaseKind)]) -> String {
    use mcp_shared::lease::LeaseKind;
    let count = |k: LeaseKind| descendants.iter().filter(|(_, d)| *d == k).count();
    let plural = |n: usize, one: &str, many: &str| match n {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    };
    let parts: Vec<String> = [
        (count(LeaseKind::Minted), "minted lease", "minted leases"),
        (count(LeaseKind::Run), "run credential", "run credentials"),
        (
            count(LeaseKind::Fleet),
            "fleet target lease",
            "fleet target leases",
        ),
    ]
    .into_iter()
    .filter(|(n, ..)| *n > 0)
    .map(|(n, one, many)| plural(n, one, many))
    .collect();
    match descendants.len() {
        0 => "no descendants".to_owned(),
        n => format!(
            "{} ({})",
            plural(n, "descendant", "descendants"),
            parts.join(", ")
        ),
    }
}

/// `POST /v1/root/mcp/sessions/{id}/rotate`: a new bearer for the same binding (and
/// deadline); the old one is refused on every live replica when it returns.
pub(crate) async fn rotate(
    State(app): State<Arc<App>>,
    op: Operator,
    Path(id): Path<String>,
) -> Result<Json<Audited<IssuedLeaseBody>>, ApiError> {
    let asked = Asked {
        tool_id: "admin.lease.rotate",
        target_id: app.leases.get(&id).map(|l| l.target_id),
        adapter: Some("root.lease_manager".into()),
        request: json!({ "session_id": id }),
    };
    let (issued, event_id) = audited(&app, &op, asked, async {
        // A sign-in's access token is replaced by its client's refresh, not by an operator
        // (a bearer the operator saw would not be the client's, and the grant holds one).
        if let Some(l) = app.leases.get(&id)
            && l.status == LeaseStatus::Active
            && let Some(grant) = &l.grant_id
        {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::Conflict,
                format!(
                    "lease `{id}` is an access token of OAuth grant {grant}: its client refreshes \
                     it; revoke it to end the sign-in"
                ),
            ));
        }
        let issued = call_t!(
            app.actors.leases.load(),
            lease_manager::Msg::Rotate,
            RPC_TIMEOUT_MS,
            id.clone()
        )
        .map_err(ApiError::internal)?
        .map_err(lease_error)?;
        crate::replica::lease_changed(&app, &issued.lease.session_id, false).await;
        crate::ops::leases::ended(&app, std::slice::from_ref(&id), &issued.revoked).await;
        let summary = format!(
            "{}; ended with the old lease: {}",
            issued_summary(&format!("rotated lease {id} into"), &issued),
            descendants_phrase(&issued.revoked)
        );
        Ok((issued, summary))
    })
    .await?;
    Ok(Json(issued_body(issued, event_id)))
}
