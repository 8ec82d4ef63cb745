//! The operator's target endpoints (`/v1/root/hubs`): enrol a managed target (its hub token
//! shown once), list the targets, rotate a hub's key. Enrolment and rotation are operator
//! actions, each one audit event naming the operator (`admin.hub.enroll`,
//! `admin.hub.rotate_key`, refusals included); a hub token never reaches the trail.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use mcp_shared::error::ErrorCode;
use mcp_shared::protocol;
use mcp_shared::target::TargetStatus;
use mcp_shared::time::{now, unix_ms};
use serde_json::{Value, json};

use crate::api::audited::{ActionBody, audited};
use crate::api::bodies::{
    Audited, EnrollRequest, Enrolled, KeyRotated, RotateKeyRequest, TargetList, TargetView,
};
use crate::api::error::ApiError;
use crate::api::paging;
use crate::api::principal::Operator;
use crate::app::App;
use crate::hubs::router;
use crate::hubs::selector::{SKILL_STATES, Selector, skill_is};
use crate::hubs::{Enrolment, HUB_TOKEN_PREFIX, PreviousHubKey};
use crate::ops::audited::Asked;
use crate::store::{PreviousKey, TargetRow};

/// Longest grace period of a key rotation (a week).
pub(crate) const MAX_ROTATION_GRACE_SEC: u64 = 7 * 24 * 3600;
/// Grace period of a key rotation when the operator names none.
pub(crate) const DEFAULT_ROTATION_GRACE_SEC: u64 = 600;

pub(crate) fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._:-".contains(c))
}

/// `POST /v1/root/hubs`: enrols a target; its hub token is shown once, in this answer.
pub(crate) async fn enroll(
    State(app): State<Arc<App>>,
    op: Operator,
    body: ActionBody<EnrollRequest>,
) -> Result<(StatusCode, Json<Audited<Enrolled>>), ApiError> {
    let asked = Asked {
        tool_id: "admin.hub.enroll",
        target_id: body.get().map(|req| req.target_id.clone()),
        adapter: Some("root.hubs".into()),
        request: body.request(json!({}), |req| json!(req)),
    };
    let ((row, token), event_id) = audited(&app, &op, asked, async {
        let req = body.parsed()?;
        let enrolled = enrol(&app, req).await?;
        let summary = format!(
            "enrolled `{}` ({}, subnet {}); its hub token was shown once",
            enrolled.0.target_id, enrolled.0.environment, enrolled.0.subnet_id
        );
        Ok((enrolled, summary))
    })
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(Audited {
            item: Enrolled {
                target_id: row.target_id,
                environment: row.environment,
                subnet_id: row.subnet_id,
                zone: row.zone,
                token,
            },
            event_id,
        }),
    ))
}

/// Validates an enrolment, stores it and makes it known here and on every replica; the row
/// and the new hub token.
async fn enrol(app: &App, req: EnrollRequest) -> Result<(TargetRow, String), ApiError> {
    if !valid_id(&req.target_id) || !valid_id(&req.environment) {
        return Err(ApiError::bad_request(
            "target_id and environment must be 1..200 characters of [A-Za-z0-9._:-]",
        ));
    }
    if let Some(prefix) = mcp_shared::lease::reserved_prefix(&req.target_id) {
        return Err(ApiError::bad_request(format!(
            "target_id `{}` starts with `{prefix}`, which root reserves (`fleet:` names a fleet lease's selector, `mcp-hub:` a hub's identity); enrol it under another id",
            req.target_id
        )));
    }
    let labels = req.labels.unwrap_or_default();
    crate::hubs::lifecycle::check_labels(&labels)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let token = crate::auth::new_token(HUB_TOKEN_PREFIX);
    let signing_key = protocol::signing_key(&token);
    let sealed = app
        .master_key
        .seal_signing_key(&req.target_id, &signing_key)
        .map_err(ApiError::internal)?;
    let row = TargetRow {
        target_id: req.target_id.clone(),
        environment: req.environment,
        subnet_id: req.subnet_id.unwrap_or_else(|| "default".into()),
        zone: req.zone.unwrap_or_else(|| app.config.zone.clone()),
        token_hash: crate::auth::token_hash(&token),
        signing_key: sealed,
        enrolled_at_ms: unix_ms(now()),
        last_seen_at_ms: None,
        descriptor: None,
        skills: None,
        skill_desired: None,
        labels: (!labels.is_empty()).then(|| json!(labels).to_string()),
        lifecycle: None,
        narrowing: None,
    };
    let inserted = app
        .store
        .insert_target(&row)
        .await
        .map_err(ApiError::internal)?;
    if !inserted {
        let retired = app
            .hubs
            .enrolments
            .get(&req.target_id)
            .is_some_and(|e| e.retired());
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::Conflict,
            if retired {
                format!(
                    "target `{}` was retired; a retired id is never enrolled again",
                    req.target_id
                )
            } else {
                format!("target `{}` is already enrolled", req.target_id)
            },
        ));
    }
    let e = Enrolment::with_keys(row.clone(), signing_key, None);
    app.hubs
        .targets
        .entry(row.target_id.clone())
        .or_insert_with(|| e.offline_descriptor());
    app.hubs.enrolments.insert(row.target_id.clone(), e);
    crate::replica::target_changed(app, &row.target_id, true).await;
    Ok((row, token))
}

/// `GET /v1/root/hubs`: the filters of a page of targets.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TargetQuery {
    environment: Option<String>,
    subnet_id: Option<String>,
    zone: Option<String>,
    /// `online`, `degraded` or `offline`.
    status: Option<String>,
    /// The skill as root governs it: `enabled` (callable), `closed` (not callable, for any
    /// reason), `disabled`, `uninstalled` or `owner_disabled` (switched off on the hub).
    skill: Option<String>,
    /// Part of the target id.
    q: Option<String>,
    /// `active`, `cordoned` or `retired`.
    lifecycle: Option<String>,
    /// A label the target has (`role`) or has with a value (`role=web`).
    label: Option<String>,
    /// A selector (`env=test,label:role=web`; see `hubs::selector`).
    selector: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

/// A target query with its label and selector read.
struct Filters {
    q: TargetQuery,
    selector: Option<Selector>,
}

impl TargetQuery {
    fn checked(self) -> Result<Filters, ApiError> {
        if let Some(s) = &self.status
            && !["online", "degraded", "offline"].contains(&s.as_str())
        {
            return Err(ApiError::bad_request(format!(
                "status must be online, degraded or offline, not `{s}`"
            )));
        }
        if let Some(s) = &self.skill
            && !SKILL_STATES.contains(&s.as_str())
        {
            return Err(ApiError::bad_request(format!(
                "skill must be one of {}, not `{s}`",
                SKILL_STATES.join(", ")
            )));
        }
        if let Some(s) = &self.lifecycle
            && crate::hubs::lifecycle::State::parse(s).is_none()
        {
            return Err(ApiError::bad_request(format!(
                "lifecycle must be active, cordoned or retired, not `{s}`"
            )));
        }
        // `label=k` and `label=k=v` are the selector terms `label:k` and `label:k=v`.
        let terms: Vec<String> = self
            .label
            .iter()
            .map(|l| format!("label:{l}"))
            .chain(self.selector.clone())
            .collect();
        let selector = match terms.is_empty() {
            true => None,
            false => Some(Selector::parse(&terms.join(",")).map_err(|e| {
                ApiError::bad_request(match &self.label {
                    Some(_) => format!("label filter or selector: {e}"),
                    None => format!("selector: {e}"),
                })
            })?),
        };
        Ok(Filters { q: self, selector })
    }
}

impl Filters {
    /// Whether an enrolled target with this status passes every filter named.
    fn admits(&self, e: &Enrolment, status: TargetStatus) -> bool {
        let q = &self.q;
        paging::admits(&q.environment, &e.row.environment)
            && paging::admits(&q.subnet_id, &e.row.subnet_id)
            && paging::admits(&q.zone, &e.row.zone)
            && paging::admits(&q.status, status.as_str())
            && paging::admits(&q.lifecycle, e.lifecycle.state.as_str())
            && q.q.as_deref().is_none_or(|q| e.row.target_id.contains(q))
            && q.skill
                .as_deref()
                .is_none_or(|want| skill_is(&e.skill, want))
            && self
                .selector
                .as_ref()
                .is_none_or(|s| s.matches(&e.subject(status)))
    }
}

/// `GET /v1/root/hubs`: a page of enrolled targets by target id, filtered (environment,
/// subnet, zone, status, skill state, part of the id), each with its status, descriptor,
/// skill (root's desired state and the hub's report) and published capabilities; how many
/// match, by status; and the cursor of the next page. Filtering runs on root's memory; only
/// the page's rows are read from the store.
pub(crate) async fn list(
    State(app): State<Arc<App>>,
    _op: Operator,
    q: Result<Query<TargetQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<TargetList>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let q = q.checked()?;
    let limit = paging::limit(q.q.limit)?;
    let after =
        q.q.cursor
            .as_deref()
            .map(|c| paging::after("t", c))
            .transpose()?;
    let mut matched: Vec<(String, TargetStatus)> = app
        .hubs
        .enrolments
        .iter()
        .filter_map(|e| {
            let status = app.hubs.status(e.key());
            q.admits(&e, status).then(|| (e.key().clone(), status))
        })
        .collect();
    matched.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let by_status = paging::by_status(&matched, |(_, s)| s.as_str());
    let total = matched.len();
    let (page, next_cursor) = paging::page(
        matched,
        "t",
        after,
        limit,
        |(id, _)| id.clone(),
        |a: &String, (id, _)| id > a,
    );
    let ids: Vec<String> = page.into_iter().map(|(id, _)| id).collect();
    let mut rows = app
        .store
        .load_targets_of(&ids)
        .await
        .map_err(ApiError::internal)?;
    rows.sort_by(|a, b| a.target_id.cmp(&b.target_id));
    let pressure = router::pressure(&app.hubs.links, &ids).await;
    let targets = rows
        .into_iter()
        .map(|r| target_view(&app, r, &pressure))
        .collect();
    Ok(Json(TargetList {
        targets,
        total,
        by_status,
        next_cursor,
    }))
}

/// `GET /v1/root/hubs/{target_id}`: one target as the list shows it.
pub(crate) async fn show(
    State(app): State<Arc<App>>,
    _op: Operator,
    Path(target_id): Path<String>,
) -> Result<Json<TargetView>, ApiError> {
    let ids = [target_id];
    let row = app
        .store
        .load_targets_of(&ids)
        .await
        .map_err(ApiError::internal)?
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::not_found(format!("no target `{}` is enrolled", ids[0])))?;
    let pressure = router::pressure(&app.hubs.links, &ids).await;
    Ok(Json(target_view(&app, row, &pressure)))
}

/// A target as operators see it, from its stored row and root's live view.
fn target_view(
    app: &App,
    r: TargetRow,
    pressure: &std::collections::HashMap<String, crate::hubs::link::Pressure>,
) -> TargetView {
    let time = |ms| mcp_shared::time::format(mcp_shared::time::from_unix_ms(ms));
    let live = app.hubs.targets.get(&r.target_id).map(|d| d.clone());
    let status = app.hubs.status(&r.target_id);
    let descriptor: Option<Value> = live.map(|d| json!(d)).or_else(|| {
        r.descriptor
            .as_deref()
            .and_then(|d| serde_json::from_str(d).ok())
    });
    let published_capabilities = descriptor
        .as_ref()
        .filter(|_| status != TargetStatus::Offline)
        .and_then(|d| d["operational_surface"]["capabilities"].as_array().cloned())
        .unwrap_or_default();
    let (labels, lifecycle, narrowing) = app
        .hubs
        .enrolments
        .get(&r.target_id)
        .map(|e| (e.labels.clone(), e.lifecycle.clone(), e.narrowing.clone()))
        .unwrap_or_default();
    TargetView {
        labels,
        lifecycle,
        narrowing,
        skills: r
            .skills
            .as_deref()
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or(json!([])),
        skill: app
            .hubs
            .enrolments
            .get(&r.target_id)
            .map(|e| e.skill.view()),
        pressure: pressure.get(&r.target_id).cloned(),
        enrolled_at: time(r.enrolled_at_ms),
        last_seen_at: r.last_seen_at_ms.map(time),
        target_id: r.target_id,
        environment: r.environment,
        subnet_id: r.subnet_id,
        zone: r.zone,
        status,
        descriptor,
        published_capabilities,
    }
}

/// `POST /v1/root/hubs/{target_id}/rotate-key`: a new hub token (shown once) and signing key;
/// the previous ones keep working for `grace_sec`, then a hub still using them is refused (and
/// dropped at its next frame). Audited as `admin.hub.rotate_key`, without the token.
pub(crate) async fn rotate_key(
    State(app): State<Arc<App>>,
    op: Operator,
    Path(target_id): Path<String>,
    body: ActionBody<RotateKeyRequest>,
) -> Result<(StatusCode, Json<Audited<KeyRotated>>), ApiError> {
    let asked = Asked {
        tool_id: "admin.hub.rotate_key",
        target_id: Some(target_id.clone()),
        adapter: Some("root.hubs".into()),
        request: body.request(
            json!({ "target_id": target_id }),
            |req| json!({ "grace_sec": req.grace_sec }),
        ),
    };
    let ((token, grace_sec, valid_until), event_id) = audited(&app, &op, asked, async {
        let req = body.parsed()?;
        let grace_sec = req.grace_sec.unwrap_or(DEFAULT_ROTATION_GRACE_SEC);
        let (token, valid_until) = rotate(&app, &target_id, grace_sec).await?;
        let summary = format!(
            "new hub token and signing key issued; the previous ones work until {valid_until}"
        );
        Ok(((token, grace_sec, valid_until), summary))
    })
    .await?;
    Ok((
        StatusCode::OK,
        Json(Audited {
            item: KeyRotated {
                target_id,
                token,
                previous_valid_until: valid_until,
                grace_sec,
            },
            event_id,
        }),
    ))
}

/// Rotates `target_id`'s hub key, the previous one valid for `grace_sec`; the new token and
/// until when the previous works.
async fn rotate(app: &App, target_id: &str, grace_sec: u64) -> Result<(String, String), ApiError> {
    if grace_sec > MAX_ROTATION_GRACE_SEC {
        return Err(ApiError::bad_request(format!(
            "grace_sec must be at most {MAX_ROTATION_GRACE_SEC} (a week)"
        )));
    }
    let Some(current) = app.hubs.enrolments.get(target_id).map(|e| e.clone()) else {
        return Err(ApiError::not_found(format!(
            "target `{target_id}` is not enrolled"
        )));
    };
    // As every other lifecycle command: a retired target's credentials stay revoked.
    if current.retired() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::Conflict,
            format!(
                "target `{target_id}` is retired; a retired target stays retired and gets no new key"
            ),
        ));
    }
    let started_at = now();
    let token = crate::auth::new_token(HUB_TOKEN_PREFIX);
    let token_hash = crate::auth::token_hash(&token);
    let signing_key = protocol::signing_key(&token);
    let sealed = app
        .master_key
        .seal_signing_key(target_id, &signing_key)
        .map_err(ApiError::internal)?;
    let expires_at_ms = unix_ms(started_at).saturating_add((grace_sec as i64).saturating_mul(1000));
    let previous = PreviousKey {
        token_hash: current.row.token_hash.clone(),
        signing_key: current.row.signing_key.clone(),
        expires_at_ms,
    };
    // Store and memory change together with respect to a replica's enrolment reload, which
    // could otherwise put back what it read before this rotation.
    let writes = crate::replica::enrolment_write(app).await;
    let rotated = app
        .store
        .rotate_target_key(
            target_id,
            &current.row.token_hash,
            &token_hash,
            &sealed,
            &previous,
        )
        .await
        .map_err(ApiError::internal)?;
    if !rotated {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::Conflict,
            format!("the key of `{target_id}` changed meanwhile; try again"),
        ));
    }
    if let Some(mut e) = app.hubs.enrolments.get_mut(target_id) {
        e.previous = Some(PreviousHubKey {
            token_hash: current.row.token_hash.clone(),
            signing_key: current.signing_key,
            expires_at_ms,
        });
        e.row.token_hash = token_hash;
        e.row.signing_key = sealed;
        e.signing_key = signing_key;
    }
    // Released before waiting for the change to be applied here (which reloads under it).
    drop(writes);
    crate::replica::target_changed(app, target_id, true).await;
    let valid_until = mcp_shared::time::format(mcp_shared::time::from_unix_ms(expires_at_ms));
    tracing::info!(%target_id, grace_sec, previous_valid_until = %valid_until, "hub key rotated");
    Ok((token, valid_until))
}
