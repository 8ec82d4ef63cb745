//! What a caller may know: the foundation, contracts and descriptors, each filtered by what
//! the caller's lease may call (the operator reads all).

use crate::api::error::ApiError;
use crate::api::principal::Auth;
use crate::app::App;
use crate::app::Principal;
use axum::Json;
use axum::extract::Path;
use axum::extract::State;
use axum::http::StatusCode;
use mcp_shared::error::ErrorCode;
use serde_json::Value;
use serde_json::json;
use std::sync::Arc;

use crate::api::bodies::{DescriptorList, DescriptorSummary};

/// The routes `/foundation` lists, as the router serves them: the route table is the code's,
/// so `api::router` sets it once, and no request pays for it.
pub(crate) static SERVED: std::sync::OnceLock<Vec<crate::api::endpoint::Endpoint>> =
    std::sync::OnceLock::new();

pub(super) async fn foundation(
    State(app): State<Arc<App>>,
    auth: Auth,
) -> Result<Json<Value>, ApiError> {
    let profiles = app.catalog.profiles.clone();
    let zone_view = crate::api::replicas::view_for(&app, &auth).await?;
    let mut planes: Vec<&str> = profiles.profiles.iter().map(|p| p.plane.as_str()).collect();
    planes.sort();
    planes.dedup();
    Ok(Json(json!({
        "name": "mcp-root",
        "version": env!("CARGO_PKG_VERSION"),
        "zone": app.config.zone,
        "mcp_endpoint": "/mcp",
        "protocol_versions": crate::mcp::SUPPORTED_VERSIONS.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
        "planes": planes,
        "capability_profiles": profiles.profiles,
        "surface_classes": {
            "routing": ["descriptive_cached", "operational_read", "operational_write"],
            "side_effect": ["read", "write", "destructive"],
        },
        "error_codes": mcp_shared::error::ErrorCode::ALL.map(|c| c.as_str()),
        "endpoints": foundation_endpoints(&app, SERVED.get().map_or(&[], Vec::as_slice)),
        "limits": {
            "max_lease_ttl_sec": app.config.limits.max_lease_ttl_sec,
            "per_lease_in_flight": app.config.limits.per_lease_in_flight,
            "per_target_in_flight": app.config.limits.per_target_in_flight,
            "confirmation_ttl_sec": app.config.limits.confirmation_ttl_sec,
            "approval_ttl_sec": app.config.limits.approval_ttl_sec,
            "max_body_bytes": app.config.limits.max_body_bytes,
        },
        "tools": app.catalog.contracts.all().len(),
        "skill_catalog": {
            "ontology": crate::skill_catalog::ontology_uri(&app.config.skill_catalog.scheme),
            "skills": crate::skill_catalog::skill_prefix(&app.config.skill_catalog.scheme),
        },
        "replicas": zone_view,
    })))
}

/// The paths `/foundation` lists: `/mcp`, then every route of the REST family, the console
/// and (when it is on) OAuth as the router serves them, once each; replicas' internal routes
/// left out.
fn foundation_endpoints(app: &App, routes: &[crate::api::endpoint::Endpoint]) -> Vec<&'static str> {
    let oauth: Vec<&str> = crate::api::oauth::endpoints()
        .iter()
        .map(|e| e.path)
        .collect();
    let mut paths = vec!["/mcp"];
    for e in routes {
        let served = app.config.oauth.discovery || !oauth.contains(&e.path);
        if served && e.access != crate::api::endpoint::Access::Replica && !paths.contains(&e.path) {
            paths.push(e.path);
        }
    }
    paths
}

pub(super) async fn visible_ids(app: &App, p: &Principal) -> Result<Option<Vec<String>>, ApiError> {
    match p {
        Principal::Operator(_) => Ok(None),
        Principal::Lease(l) => {
            let v = app.visible_tools(l).await.map_err(ApiError::internal)?;
            Ok(Some(v.iter().map(|c| c.contract.tool_id.clone()).collect()))
        }
    }
}

pub(super) async fn list_contracts(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
) -> Result<Json<Value>, ApiError> {
    let visible = visible_ids(&app, &p).await?;
    let contracts: Vec<_> = app
        .catalog
        .contracts
        .all()
        .iter()
        .filter(|c| {
            visible
                .as_ref()
                .is_none_or(|v| v.contains(&c.contract.tool_id))
        })
        .map(|c| &c.contract)
        .collect();
    Ok(Json(json!({ "contracts": contracts })))
}

pub(super) async fn get_contract(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    Path(tool_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let visible = visible_ids(&app, &p).await?;
    match app.catalog.contracts.get(&tool_id) {
        Some(c) if visible.as_ref().is_none_or(|v| v.contains(&tool_id)) => Ok(Json(
            serde_json::to_value(&c.contract).map_err(ApiError::internal)?,
        )),
        _ => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::UnknownTool,
            format!("no tool `{tool_id}` visible to this bearer"),
        )),
    }
}

pub(super) async fn descriptors_for(
    app: &App,
    p: &Principal,
) -> Result<
    (
        Arc<crate::descriptors::DescriptorSet>,
        Vec<Arc<mcp_shared::descriptor::Descriptor>>,
    ),
    ApiError,
> {
    let visible = match p {
        Principal::Operator(_) => None,
        Principal::Lease(l) => Some(app.visible_tools(l).await.map_err(ApiError::internal)?),
    };
    let set = app.descriptors.snapshot();
    let readable = app.readable_in(&set, visible.as_deref());
    Ok((set, readable))
}

/// A descriptor's JSON with what root says about it now: `freshness` and `expires_at`.
pub(super) fn served_json(app: &App, d: &mcp_shared::descriptor::Descriptor) -> Value {
    let mut v = serde_json::to_value(d).unwrap_or(Value::Null);
    if let (Value::Object(m), Value::Object(extra)) =
        (&mut v, crate::descriptors::served_state(d, app.clock.now()))
    {
        m.extend(extra);
    }
    v
}

/// A served descriptor without its content, with its state as of now.
pub(super) fn summary(app: &App, d: &mcp_shared::descriptor::Descriptor) -> DescriptorSummary {
    DescriptorSummary {
        header: d.freshness.clone(),
        class: d.class.clone(),
        title: d.title.clone(),
        freshness: d.freshness.state_at(app.clock.now()).as_str().into(),
        expires_at: mcp_shared::time::format(d.freshness.expires_at()),
    }
}

pub(super) async fn list_descriptors(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
) -> Result<Json<DescriptorList>, ApiError> {
    let (set, readable) = descriptors_for(&app, &p).await?;
    Ok(Json(DescriptorList {
        set: set.origin.clone(),
        descriptors: readable.iter().map(|d| summary(&app, d)).collect(),
        skill_catalog: None,
    }))
}

pub(super) async fn get_descriptor(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    descriptors_for(&app, &p)
        .await?
        .1
        .into_iter()
        .find(|d| d.freshness.descriptor_id == id)
        .map(|d| Json(served_json(&app, &d)))
        .ok_or_else(|| ApiError::not_found(format!("no descriptor `{id}` readable by this bearer")))
}
