//! Run profiles for generic workers (seed 003 applied to leases; wire types in
//! `mcp_shared::run_profile`): `GET /v1/root/mcp/sessions/{id}/run-profile` derives an
//! `ai-workspace.run-profile.v1` from a lease and signs it; `POST
//! /v1/root/mcp/run-profiles/verify` (operator; `mcp-root admin lease verify-profile FILE`)
//! checks one.
//!
//! A worker needs this document and root's URL, nothing else: the tool list comes from the
//! policy engine (the lease's capability profile and the target's current surface, exactly
//! what `tools/list` shows the lease), endpoints are paths relative to root, and the token is a
//! reference (`lease:<session id>`) to the bearer the worker was handed with the lease. Adding
//! a tool changes a contract file (and a hub adapter), never this module.
//!
//! The signing key is derived from root's master key (`MasterKey::derive_key(KEY_PURPOSE)`):
//! kept like root's other secrets (the 0600 master key file), never stored or shown, and the
//! same on every replica of a zone (they share the master key), so any replica verifies what
//! another issued.
//!
//! Invariant: the document holds no bearer, hub token, admin token, key or internal URL; the
//! owner comes from the lease root resolved, never from request headers.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use mcp_shared::contract::SideEffectClass;
use mcp_shared::error::ErrorCode;
use mcp_shared::event::Surface;
use mcp_shared::run_profile::{
    ASSISTANT_ACTIONS_VERSION, ActionGrant, ActiveContext, AssistantActions, KEY_PURPOSE,
    McpServer, Owner, Phase, RUN_PROFILE_VERSION, RunProfile, TOOL_PROFILE_VERSION, ToolProfile,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::actors::lease_manager::LeaseEntry;
use crate::app::{App, Principal};
use crate::http::{ApiError, Auth, Operator};

/// The longest a run profile lives (and the default): ten minutes, never past the lease.
pub const MAX_TTL_SEC: u64 = 600;
/// The call endpoint named in the tool profile (relative to root's URL).
pub const CALL_ENDPOINT: &str = "/v1/root/mcp/call";
/// The MCP endpoint named in the tool profile (relative to root's URL).
pub const MCP_ENDPOINT: &str = "/mcp";

/// The key run profiles are signed with on this root (and every replica of its zone).
pub fn signing_key(app: &App) -> [u8; 32] {
    app.master_key.derive_key(KEY_PURPOSE)
}

/// The phases of an action, from its contract alone.
fn phases_of(c: &mcp_shared::ToolContract) -> Vec<Phase> {
    match c.side_effect {
        SideEffectClass::Read => vec![Phase::Execute],
        _ if c.proposes.is_some() => vec![Phase::Preview],
        _ => vec![Phase::Preview, Phase::Execute],
    }
}

/// The signed run profile of `lease` as of now, requested by `requested_by`.
pub async fn issue(
    app: &App,
    lease: &LeaseEntry,
    requested_by: &Principal,
    ttl_sec: u64,
) -> Result<RunProfile, ApiError> {
    let l = lease.snapshot();
    let visible = app.visible_tools(lease).await.map_err(ApiError::internal)?;
    let actions: Vec<ActionGrant> = visible
        .iter()
        .map(|c| ActionGrant {
            action_id: c.contract.tool_id.clone(),
            side_effect: c.contract.side_effect,
            phases: phases_of(&c.contract),
        })
        .collect();
    let mut action_ids: Vec<String> = actions.iter().map(|a| a.action_id.clone()).collect();
    action_ids.sort();
    let mut phases: Vec<Phase> = actions.iter().flat_map(|a| a.phases.clone()).collect();
    phases.sort();
    phases.dedup();
    let mut packs: Vec<String> = visible.iter().map(|c| c.contract.plane.clone()).collect();
    packs.sort();
    packs.dedup();
    let token_ref = format!("lease:{}", l.session_id);
    let created_at = mcp_shared::time::now();
    let expires_at = std::cmp::min(
        created_at + time::Duration::seconds(ttl_sec as i64),
        l.deadline_at,
    );
    let (surface, requested_by) = match requested_by {
        Principal::Operator(op) => (Surface::Admin, op.actor_id()),
        Principal::Lease(p) => (Surface::Rest, format!("lease:{}", p.session_id())),
    };
    let policy_prompt = format!(
        "This run acts as {token_ref} (capability profile {profile}) on target {target} in zone \
         {zone}. Use only the {n} actions in toolProfile.assistantActions, at its endpoint, with \
         the bearer of {token_ref}. Read actions execute directly. Write actions take phase \
         `preview` first (the expected effect and a confirmation token), then phase `execute` \
         with that `confirmation_token` and an `idempotency_key`; a repeated idempotency key \
         returns the first result and runs nothing. Destructive actions are not available: root \
         answers them with `forbidden_destructive` and the safe alternatives. Root decides and \
         audits every call; this text grants nothing.",
        profile = l.capability_profile,
        target = l.target_id,
        zone = l.zone,
        n = actions.len(),
    );
    let mut profile = RunProfile {
        schema_version: RUN_PROFILE_VERSION.into(),
        run_id: l.session_id.clone(),
        created_at,
        expires_at,
        audience: l.audience.clone(),
        request_id: uuid::Uuid::now_v7().to_string(),
        owner: Owner {
            owner_key: token_ref.clone(),
            session_id: l.session_id.clone(),
            role: l.capability_profile.clone(),
            groups: vec![
                format!("zone:{}", l.zone),
                format!("subnet:{}", l.subnet_id),
                format!("target:{}", l.target_id),
            ],
            requested_by,
        },
        source_surface: surface,
        active_context: ActiveContext {
            environment: app
                .enrolments
                .get(&l.target_id)
                .map(|e| e.row.environment.clone()),
            target_id: l.target_id.clone(),
            subnet_id: l.subnet_id.clone(),
            zone: l.zone.clone(),
            lease_deadline_at: l.deadline_at,
        },
        tool_profile: ToolProfile {
            schema_version: TOOL_PROFILE_VERSION.into(),
            enabled_tool_packs: packs,
            mcp_servers: vec![McpServer {
                name: "root".into(),
                transport: "streamable-http".into(),
                endpoint: MCP_ENDPOINT.into(),
                token_ref: token_ref.clone(),
            }],
            assistant_actions: AssistantActions {
                schema_version: ASSISTANT_ACTIONS_VERSION.into(),
                endpoint: CALL_ENDPOINT.into(),
                action_ids,
                phases,
                actions,
                token_ref,
            },
        },
        policy_prompt,
        integrity: None,
    };
    profile.seal(&signing_key(app));
    Ok(profile)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunProfileQuery {
    /// Seconds the document lives, 1..=600 (default 600; never past the lease's deadline).
    ttl_sec: Option<u64>,
}

/// `GET /v1/root/mcp/sessions/{id}/run-profile`: the operator for any active lease, a lease
/// bearer for its own lease only; any other lease gets the same 404 as an unknown id, so the
/// answer reveals nothing about leases the caller does not hold.
pub async fn get(
    State(app): State<Arc<App>>,
    Auth(principal): Auth,
    Path(id): Path<String>,
    query: Result<Query<RunProfileQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<RunProfile>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let ttl_sec = q.ttl_sec.unwrap_or(MAX_TTL_SEC);
    if !(1..=MAX_TTL_SEC).contains(&ttl_sec) {
        return Err(ApiError::bad_request(format!(
            "ttl_sec must be between 1 and {MAX_TTL_SEC}"
        )));
    }
    let not_found = || ApiError::not_found(format!("no lease `{id}` visible to this bearer"));
    let entry = match &principal {
        Principal::Lease(own) if own.session_id() == id => own.clone(),
        Principal::Lease(_) => return Err(not_found()),
        Principal::Operator(_) => match app.leases.entry(&id) {
            Some(e) => e,
            // With replicas, a lease another replica issued and this one has not seen yet.
            None if app.zone.is_some() => match app.store.lease_by_id(&id).await {
                Ok(Some(row)) => app.leases.upsert(row),
                Ok(None) => return Err(not_found()),
                Err(e) => return Err(ApiError::internal(e)),
            },
            None => return Err(not_found()),
        },
    };
    if !entry.is_usable() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::Conflict,
            format!(
                "lease `{id}` is {}; run profiles are issued for active leases only",
                entry.snapshot().status.as_str()
            ),
        ));
    }
    Ok(Json(issue(&app, &entry, &principal, ttl_sec).await?))
}

/// `POST /v1/root/mcp/run-profiles/verify` (operator): whether a document is a valid run
/// profile of this zone's root now. Always 200 when the request itself is fine; the answer
/// says `valid` or the reason (`tampered`, `unsigned`, `unknown_key`, `expired`, ...).
pub async fn verify(
    State(app): State<Arc<App>>,
    _op: Operator,
    body: Result<Json<Value>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(document) = body.map_err(|e| ApiError::bad_request(e.body_text()))?;
    Ok(Json(verdict(&app, &document)))
}

/// The verification answer for `document` as of now.
pub fn verdict(app: &App, document: &Value) -> Value {
    let key = signing_key(app);
    match mcp_shared::run_profile::verify(document, &key, mcp_shared::time::now()) {
        Ok(p) => json!({
            "valid": true,
            "run_id": p.run_id,
            "owner": p.owner.owner_key,
            "expires_at": mcp_shared::time::format(p.expires_at),
            "key_id": mcp_shared::run_profile::key_id(&key),
        }),
        Err(e) => json!({
            "valid": false,
            "reason": e.code(),
            "message": e.to_string(),
        }),
    }
}
