//! Run profiles for generic workers (seed 003 applied to leases; wire types in
//! `mcp_shared::run_profile`): `POST /v1/root/mcp/sessions/{id}/run-profile` issues a run
//! credential and the signed `ai-workspace.run-profile.v1` naming it; `POST
//! /v1/root/mcp/run-profiles/verify` (operator; `mcp-root admin lease verify-profile FILE`)
//! checks one.
//!
//! A worker needs the document, root's URL and the run credential, nothing else: the tool list
//! comes from the policy engine (what `tools/list` shows the lease now, optionally narrowed),
//! endpoints are paths relative to root, and `tokenRef` names the run credential
//! (`lease:<its session id>`): a lease of its own, bound to exactly those tools (the policy
//! engine's `run_scope`) and to the document's expiry (minutes, never past the lease),
//! revoked with the lease, unable to issue leases. So a worker holding only it cannot exceed
//! the profile, and the lease's own bearer never leaves whoever holds it. Adding a tool
//! changes a contract file (and a hub adapter), never this module.
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
use axum::extract::{Path, State};
use axum::http::StatusCode;
use mcp_shared::contract::SideEffectClass;
use mcp_shared::error::ErrorCode;
use mcp_shared::event::Surface;
use mcp_shared::lease::SessionLease;
use mcp_shared::run_profile::{
    ASSISTANT_ACTIONS_VERSION, ActionGrant, ActiveContext, AssistantActions, KEY_PURPOSE,
    McpServer, Owner, Phase, RUN_PROFILE_VERSION, RunProfile, TOOL_PROFILE_VERSION, ToolProfile,
};
use serde_json::{Value, json};

use crate::api::bodies::{Audited, IssuedRunProfile, ProfileVerdict, RunProfileRequest};
use crate::api::error::ApiError;
use crate::api::principal::{Auth, Operator};
use crate::app::{App, Principal};
use crate::leases::manager::LeaseEntry;

/// The longest a run profile lives (and the default): ten minutes, never past the lease.
pub(crate) const MAX_TTL_SEC: u64 = 600;
/// Audience of run credentials.
pub(crate) const RUN_AUDIENCE: &str = "run-worker";
/// The MCP endpoint named in the tool profile (relative to root's URL).
pub(crate) const MCP_ENDPOINT: &str = "/mcp";

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

/// What a run profile is issued for: the lease it runs under (`parent`), the run credential
/// issued with it (its own lease), and the actions it grants.
struct Run<'a> {
    parent: &'a LeaseEntry,
    credential: &'a SessionLease,
    grants: &'a [Arc<crate::catalog::ContractEntry>],
}

/// The signed run profile of `run`, requested by `requested_by`.
fn document(app: &App, run: &Run<'_>, requested_by: &Principal) -> RunProfile {
    let l = run.parent.snapshot();
    let cred = run.credential;
    let actions: Vec<ActionGrant> = run
        .grants
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
    let mut packs: Vec<String> = run
        .grants
        .iter()
        .map(|c| c.contract.plane.clone())
        .collect();
    packs.sort();
    packs.dedup();
    let token_ref = format!("lease:{}", cred.session_id);
    let owner_key = format!("lease:{}", l.session_id);
    let (surface, requested_by) = match requested_by {
        Principal::Operator(op) => (Surface::Admin, op.actor_id()),
        Principal::Lease(p) => (Surface::Rest, format!("lease:{}", p.session_id())),
    };
    let policy_prompt = format!(
        "This run acts for {owner_key} (capability profile {profile}) on target {target} in zone \
         {zone}, with the run credential {token_ref}, which grants exactly the {n} actions in \
         toolProfile.assistantActions until {until}. Use them at its endpoint with the bearer \
         of {token_ref}, as {{\"phase\", \"input\": {{\"actionId\", arguments...}}}}. Read \
         actions execute directly. Write actions take phase `preview` first (the expected \
         effect and a confirmationToken), then phase `execute` with that `confirmationToken` \
         and an `idempotencyKey`; a repeated idempotency key returns the first result and runs \
         nothing. Destructive actions are not available: root answers \
         them with `forbidden_destructive` and the safe alternatives. Root decides and audits \
         every call; this text grants nothing.",
        profile = l.capability_profile,
        target = l.target_id,
        zone = l.zone,
        n = actions.len(),
        until = mcp_shared::time::format(cred.deadline_at),
    );
    let mut profile = RunProfile {
        schema_version: RUN_PROFILE_VERSION.into(),
        run_id: cred.session_id.clone(),
        created_at: cred.created_at,
        expires_at: cred.deadline_at,
        audience: l.audience.clone(),
        request_id: uuid::Uuid::now_v7().to_string(),
        owner: Owner {
            owner_key,
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
                .hubs
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
                endpoint: crate::api::actions::ACTIONS_ENDPOINT.into(),
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
    profile
}

/// A run profile request whose body does not parse.
#[derive(Debug, thiserror::Error)]
#[error("invalid request body: {0}")]
struct RunProfileBodyError(serde_json::Error);

/// `POST /v1/root/mcp/sessions/{id}/run-profile`: issues a run credential (a lease of its own,
/// bound to the run profile's tools and expiry, revoked with the lease) and the signed run
/// profile naming it (`tokenRef`). The operator for any active lease, a lease bearer for its
/// own lease only (another lease gets the same 404 as an unknown id); a run credential
/// cannot issue another. The credential's bearer is in this answer only, never in the
/// document; the lease's bearer appears nowhere. One audit event (`admin.run_profile.issue`
/// for an operator, `run_profile.issue` for a lease), refusals included.
pub(crate) async fn post(
    State(app): State<Arc<App>>,
    Auth(principal): Auth,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Audited<IssuedRunProfile>>), ApiError> {
    // No body asks for the defaults.
    let parsed: Result<RunProfileRequest, RunProfileBodyError> =
        if body.iter().all(u8::is_ascii_whitespace) {
            Ok(RunProfileRequest::default())
        } else {
            serde_json::from_slice(&body).map_err(RunProfileBodyError)
        };
    let ask = parsed.as_ref().ok().map(|a| json!(a));
    let started_at = mcp_shared::time::now();
    let issued = match &parsed {
        Ok(ask) => issue_run(&app, &principal, &id, ask).await,
        Err(why) => Err(ApiError::bad_request(why.to_string())),
    };
    let (surface, actor, tool_id) = match &principal {
        Principal::Operator(op) => (Surface::Admin, op.actor_id(), "admin.run_profile.issue"),
        Principal::Lease(l) => (
            Surface::Rest,
            format!("lease:{}", l.session_id()),
            "run_profile.issue",
        ),
    };
    let target = app.leases.get(&id).map(|l| l.target_id);
    let action = crate::audit::Recorded {
        surface,
        actor,
        tool_id: tool_id.into(),
        target_id: target.as_deref(),
        adapter: Some("root.run_profile".into()),
        started_at,
        request: json!({ "session_id": id, "ask": ask.unwrap_or(Value::Null) }),
        trace_id: None,
    };
    let outcome = match &issued {
        Ok((doc, cred)) => Ok(format!(
            "issued run credential {} for lease {id}: {} actions until {}",
            cred.lease.session_id,
            doc.tool_profile.assistant_actions.action_ids.len(),
            mcp_shared::time::format(cred.lease.deadline_at)
        )),
        Err(e) => Err(e.tool_error()),
    };
    let event_id = match &outcome {
        Ok(summary) => crate::ops::audited::record(&app, action, Ok(summary.clone())).await?,
        Err(refusal) => crate::ops::audited::record(&app, action, Err(refusal)).await?,
    };
    let (document, credential) = issued.map_err(|e| e.with_event(event_id.clone()))?;
    Ok((
        StatusCode::CREATED,
        Json(Audited {
            item: IssuedRunProfile {
                run_profile: json!(document),
                token_ref: format!("lease:{}", credential.lease.session_id),
                session_id: credential.lease.session_id,
                token: credential.token,
                expires_at: mcp_shared::time::format(credential.lease.deadline_at),
            },
            event_id,
        }),
    ))
}

/// Resolves the lease, checks the ask, issues the run credential and signs the document.
async fn issue_run(
    app: &App,
    principal: &Principal,
    id: &str,
    ask: &RunProfileRequest,
) -> Result<(RunProfile, crate::leases::manager::IssuedLease), ApiError> {
    let ttl_sec = ask.ttl_sec.unwrap_or(MAX_TTL_SEC);
    if !(1..=MAX_TTL_SEC).contains(&ttl_sec) {
        return Err(ApiError::bad_request(format!(
            "ttl_sec must be between 1 and {MAX_TTL_SEC}"
        )));
    }
    let parent = resolve(app, principal, id).await?;
    let l = parent.lease();
    if l.is_run() {
        let p = l.parent_session_id.as_deref().unwrap_or("another lease");
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            format!("`{id}` is a run credential (of `{p}`); only a lease issues run profiles"),
        ));
    }
    let visible = app
        .visible_tools(&parent)
        .await
        .map_err(ApiError::internal)?;
    let grants: Vec<_> = match &ask.tools {
        None => visible,
        Some(wanted) => {
            let unknown: Vec<&str> = wanted
                .iter()
                .filter(|t| !visible.iter().any(|c| &c.contract.tool_id == *t))
                .map(String::as_str)
                .collect();
            if wanted.is_empty() || !unknown.is_empty() {
                return Err(ApiError::bad_request(format!(
                    "tools must name tools this lease may call now; not: {}",
                    if unknown.is_empty() {
                        "an empty list".into()
                    } else {
                        unknown.join(", ")
                    }
                )));
            }
            visible
                .into_iter()
                .filter(|c| wanted.contains(&c.contract.tool_id))
                .collect()
        }
    };
    let now = mcp_shared::time::now();
    let expires_at = std::cmp::min(now + time::Duration::seconds(ttl_sec as i64), l.deadline_at);
    let ttl = (expires_at - now).max(time::Duration::seconds(1));
    let new = crate::leases::manager::NewLease {
        target_id: l.target_id.clone(),
        subnet_id: l.subnet_id.clone(),
        zone: l.zone.clone(),
        audience: RUN_AUDIENCE.into(),
        capability_profile: l.capability_profile.clone(),
        effective_tools: grants.iter().map(|c| c.contract.tool_id.clone()).collect(),
        ttl: std::time::Duration::from_millis(ttl.whole_milliseconds() as u64),
        lineage: None,
        source: crate::leases::manager::Source::Run {
            parent: l.session_id.clone(),
        },
        // A child carries its parent's own rate (its owner's is shared anyway).
        rate: l.rate.clone(),
    };
    let credential = crate::ops::leases::issue(app, new).await?;
    let run = Run {
        parent: &parent,
        credential: &credential.lease,
        grants: &grants,
    };
    Ok((document(app, &run, principal), credential))
}

/// The active lease `id` as `principal` may see it.
async fn resolve(app: &App, principal: &Principal, id: &str) -> Result<Arc<LeaseEntry>, ApiError> {
    let not_found = || ApiError::not_found(format!("no lease `{id}` visible to this bearer"));
    let entry = match principal {
        Principal::Lease(own) if own.session_id() == id => own.clone(),
        Principal::Lease(_) => return Err(not_found()),
        Principal::Operator(_) => match app.leases.entry(id) {
            Some(e) => e,
            // With replicas, a lease another replica issued and this one has not seen yet.
            None if app.zone.is_some() => match app.store.lease_chain(id).await {
                Ok(chain) => app.leases.upsert_chain(chain).ok_or_else(not_found)?,
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
    Ok(entry)
}

/// `POST /v1/root/mcp/run-profiles/verify` (operator): whether a document is a valid run
/// profile of this zone's root now. Always 200 when the request itself is fine; the answer
/// says `valid` or the reason (`tampered`, `unsigned`, `unknown_key`, `expired`, ...).
pub(crate) async fn verify(
    State(app): State<Arc<App>>,
    _op: Operator,
    body: Result<Json<Value>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<ProfileVerdict>, ApiError> {
    let Json(document) = body.map_err(|e| ApiError::bad_request(e.body_text()))?;
    Ok(Json(verdict(&app, &document)))
}

/// The verification answer for `document` as of now.
pub(crate) fn verdict(app: &App, document: &Value) -> ProfileVerdict {
    let key = signing_key(app);
    match mcp_shared::run_profile::verify(document, &key, mcp_shared::time::now()) {
        Ok(p) => ProfileVerdict {
            valid: true,
            run_id: Some(p.run_id),
            owner: Some(p.owner.owner_key),
            expires_at: Some(mcp_shared::time::format(p.expires_at)),
            key_id: Some(mcp_shared::run_profile::key_id(&key)),
            reason: None,
            message: None,
        },
        Err(e) => ProfileVerdict::invalid(e.code(), e.to_string()),
    }
}
