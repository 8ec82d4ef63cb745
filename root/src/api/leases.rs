//! The operator's lease endpoints (`/v1/root/mcp/sessions`): issue, list, show, revoke and
//! rotate MCP Session Leases. Issuing, revoking and rotating are operator actions, each one
//! audit event naming the operator (`admin.lease.create|revoke|rotate`, refusals included);
//! a bearer is in the answer that hands it out and never in the trail.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use mcp_shared::error::ErrorCode;
use mcp_shared::lease::SessionLease;
use ractor::call_t;
use serde_json::json;

use crate::actors::RPC_TIMEOUT_MS;
use crate::api::audited::{Asked, audited};
use crate::api::bodies::{Audited, IssuedLeaseBody, LeaseList, NewLeaseRequest};
use crate::api::{ApiError, Operator};
use crate::app::App;
use crate::leases::manager::{self as lease_manager, IssuedLease, LeaseError, NewLease};

fn lease_error(e: LeaseError) -> ApiError {
    match e {
        LeaseError::NotFound(id) => ApiError::not_found(format!("no lease `{id}`")),
        e @ LeaseError::NotActive(..) => ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::InvalidArguments,
            e.to_string(),
        ),
        LeaseError::Store(e) => ApiError::internal(e),
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
pub async fn create(
    State(app): State<Arc<App>>,
    op: Operator,
    body: Result<Json<NewLeaseRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<(StatusCode, Json<Audited<IssuedLeaseBody>>), ApiError> {
    let parsed = body.map(|Json(b)| b).map_err(|e| e.body_text());
    let (target_id, request) = match &parsed {
        Ok(req) => (Some(req.target_id.clone()), json!(req)),
        Err(why) => (None, json!({ "invalid_body": why })),
    };
    let asked = Asked {
        tool_id: "admin.lease.create",
        target_id,
        adapter: Some("root.lease_manager".into()),
        request,
    };
    let (issued, event_id) = audited(&app, &op, asked, async {
        let req = parsed.map_err(ApiError::bad_request)?;
        let issued = issue(&app, req, None).await?;
        let summary = issued_summary("issued", &issued);
        Ok((issued, summary))
    })
    .await?;
    Ok((StatusCode::CREATED, Json(issued_body(issued, event_id))))
}

/// Validates a lease request and issues the lease (in `lineage`, the rotation chain of an
/// earlier lease, when given: an OAuth refresh).
pub(crate) async fn issue(
    app: &App,
    req: NewLeaseRequest,
    lineage: Option<String>,
) -> Result<IssuedLease, ApiError> {
    if req.target_id.trim().is_empty() || req.target_id.len() > 200 {
        return Err(ApiError::bad_request("target_id must be 1..200 characters"));
    }
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
    let effective_tools = app.effective_tools(profile);
    // A lease binds its target's subnet: an enrolled target's subnet is the default, and
    // another one is refused.
    let enrolled_subnet = app
        .hubs
        .enrolments
        .get(&req.target_id)
        .map(|e| e.row.subnet_id.clone());
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
    let new = NewLease {
        subnet_id,
        zone: req.zone.unwrap_or_else(|| app.config.zone.clone()),
        audience: req.audience.unwrap_or_else(|| "mcp-client".into()),
        target_id: req.target_id,
        capability_profile: req.capability_profile,
        effective_tools,
        ttl: Duration::from_secs(req.ttl_sec),
        lineage,
        parent: None,
    };
    let issued = call_t!(
        app.actors.leases.load(),
        lease_manager::Msg::Create,
        RPC_TIMEOUT_MS,
        new
    )
    .map_err(ApiError::internal)?
    .map_err(lease_error)?;
    crate::replica::lease_changed(app, &issued.lease.session_id, false).await;
    Ok(issued)
}

/// `GET /v1/root/mcp/sessions`: every lease, newest first, freshness-normalized.
pub async fn list(State(app): State<Arc<App>>, _op: Operator) -> Json<LeaseList> {
    Json(LeaseList {
        sessions: app.leases.list(),
    })
}

/// `GET /v1/root/mcp/sessions/{id}`.
pub async fn get(
    State(app): State<Arc<App>>,
    _op: Operator,
    Path(id): Path<String>,
) -> Result<Json<SessionLease>, ApiError> {
    app.leases
        .get(&id)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no lease `{id}`")))
}

/// `POST /v1/root/mcp/sessions/{id}/revoke`: refused on every live replica when it returns.
pub async fn revoke(
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
        let summary = match revoked.children.len() {
            0 => format!("revoked lease {id}"),
            n => format!("revoked lease {id} and its {n} run credentials"),
        };
        Ok((revoked.lease, summary))
    })
    .await?;
    Ok(Json(Audited {
        item: lease,
        event_id,
    }))
}

/// Revokes lease `id` with its run credentials and the OAuth grant its bearer came from (no
/// refresh issues another), and returns once every live replica refuses them.
pub(crate) async fn end(app: &App, id: &str) -> Result<lease_manager::Revoked, ApiError> {
    let revoked = call_t!(
        app.actors.leases.load(),
        lease_manager::Msg::Revoke,
        RPC_TIMEOUT_MS,
        id.to_owned()
    )
    .map_err(ApiError::internal)?
    .map_err(lease_error)?;
    app.limits.forget_prefix(&format!("lease:{id}"));
    let now_ms = mcp_shared::time::unix_ms(mcp_shared::time::now());
    app.store
        .end_grants_of_lease(id, now_ms)
        .await
        .map_err(ApiError::internal)?;
    crate::replica::lease_changed(app, id, true).await;
    for child in &revoked.children {
        crate::replica::lease_changed(app, child, true).await;
    }
    Ok(revoked)
}

/// `POST /v1/root/mcp/sessions/{id}/rotate`: a new bearer for the same binding (and
/// deadline); the old one is refused on every live replica when it returns.
pub async fn rotate(
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
        let issued = call_t!(
            app.actors.leases.load(),
            lease_manager::Msg::Rotate,
            RPC_TIMEOUT_MS,
            id.clone()
        )
        .map_err(ApiError::internal)?
        .map_err(lease_error)?;
        app.limits.forget_prefix(&format!("lease:{id}"));
        crate::replica::lease_changed(&app, &issued.lease.session_id, false).await;
        crate::replica::lease_changed(&app, &id, true).await;
        for child in &issued.revoked {
            crate::replica::lease_changed(&app, child, true).await;
        }
        let summary = issued_summary(&format!("rotated lease {id} into"), &issued);
        Ok((issued, summary))
    })
    .await?;
    Ok(Json(issued_body(issued, event_id)))
}
