//! The operator endpoints (`/v1/root/operators`): add, list and revoke named operators, each
//! one audited operator action. Who operators are is `operators` (the registry below).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use mcp_shared::error::ErrorCode;
use mcp_shared::time::{format, from_unix_ms, now, unix_ms};
use serde_json::json;

use crate::api::audited::{ActionBody, audited};
use crate::api::bodies::{
    Audited, EndedWithOperator, NewOperator, NewOperatorRequest, OperatorList, OperatorStatus,
    OperatorView, RevokeOperatorRequest, RevokedOperator,
};
use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::operators::{ADMIN, OPERATOR_TOKEN_PREFIX, valid_name};
use crate::ops::audited::Asked;
use crate::roles::Grant;
use crate::store::OperatorRow;

/// `POST /v1/root/operators` `{"name": …}`: a new operator and their credential, shown once
/// in this answer (never in the trail). Audited as `admin.operator.add`.
pub(crate) async fn add(
    State(app): State<Arc<App>>,
    op: Operator,
    body: ActionBody<NewOperatorRequest>,
) -> Result<(StatusCode, Json<Audited<NewOperator>>), ApiError> {
    let asked = Asked {
        tool_id: "admin.operator.add",
        target_id: None,
        adapter: Some("root.operators".into()),
        request: body.request(
            json!({}),
            |b| json!({ "name": b.name, "roles": b.roles, "profiles": b.profiles }),
        ),
    };
    let ((row, token, grant), event_id) = audited(&app, &op, asked, async {
        let asked = body.parsed()?;
        let name = asked.name;
        let grant = Grant::new(asked.roles, &asked.profiles)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        if !op.grant.covers(&grant) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::RoleRequired,
                "an operator gives no more than they hold: these roles or profiles are not all theirs",
            ));
        }
        if !valid_name(&name) {
            return Err(ApiError::bad_request(
                "name must be 1 to 64 of [a-z0-9._-], starting with a letter or digit",
            ));
        }
        if name == ADMIN {
            return Err(conflict(format!(
                "`{ADMIN}` is the bootstrap operator (the admin token file)"
            )));
        }
        let token = crate::auth::new_token(OPERATOR_TOKEN_PREFIX);
        let (roles, profiles) = grant.to_stored();
        let row = OperatorRow {
            name: name.clone(),
            token_hash: crate::auth::token_hash(&token),
            created_at_ms: unix_ms(now()),
            created_by: op.actor_id(),
            revoked_at_ms: None,
            revoked_by: None,
            roles: Some(roles),
            profiles: Some(profiles),
        };
        if !app
            .store
            .insert_operator(&row)
            .await
            .map_err(ApiError::internal)?
        {
            return Err(conflict(format!(
                "an operator named `{name}` exists or existed; names are never reused"
            )));
        }
        changed(&app, &name).await?;
        let summary = format!("operator `{name}` added");
        Ok(((row, token, grant), summary))
    })
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(Audited {
            item: NewOperator {
                name: row.name,
                token,
                roles: grant.roles(),
                profiles: grant.profile_names(),
                created_at: format(from_unix_ms(row.created_at_ms)),
                created_by: row.created_by,
            },
            event_id,
        }),
    ))
}

/// `GET /v1/root/operators`: every operator (the bootstrap `admin` first), active or revoked.
pub(crate) async fn list(
    State(app): State<Arc<App>>,
    _op: Operator,
) -> Result<Json<OperatorList>, ApiError> {
    let rows = app
        .store
        .load_operators()
        .await
        .map_err(ApiError::internal)?;
    let time = |ms: i64| format(from_unix_ms(ms));
    let mut operators = vec![OperatorView {
        name: ADMIN.into(),
        status: OperatorStatus::Active,
        roles: Grant::full().roles(),
        profiles: Grant::full().profile_names(),
        credential: Some("the admin token file (bootstrap)".into()),
        created_at: None,
        created_by: None,
        revoked_at: None,
        revoked_by: None,
    }];
    operators.extend(rows.into_iter().map(|r| {
        let grant = r.grant();
        OperatorView {
            name: r.name,
            roles: grant.roles(),
            profiles: grant.profile_names(),
            status: match r.revoked_at_ms {
                Some(_) => OperatorStatus::Revoked,
                None => OperatorStatus::Active,
            },
            credential: None,
            created_at: Some(time(r.created_at_ms)),
            created_by: Some(r.created_by),
            revoked_at: r.revoked_at_ms.map(time),
            revoked_by: r.revoked_by,
        }
    }));
    Ok(Json(OperatorList { operators }))
}

/// An operator revocation whose body does not parse.
#[derive(Debug, thiserror::Error)]
enum RevokeBodyError {
    #[error("invalid body: {0}")]
    Json(serde_json::Error),
    #[error("the body must be a JSON object, e.g. {{\"cascade\": true}}")]
    NotAnObject,
}

/// `POST /v1/root/operators/{name}/revoke` `{"cascade": bool}`: the operator's credential
/// and console sessions stop working at once, on every replica, and so do the OAuth sign-ins
/// they approved (a token never outlives the operator's approval, nor the operator). The
/// leases they issued keep their own deadlines unless `cascade` ends them too, with their
/// descendants. Audited as `admin.operator.revoke`, one event counting what ended.
pub(crate) async fn revoke(
    State(app): State<Arc<App>>,
    op: Operator,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Audited<RevokedOperator>>, ApiError> {
    let parsed: Result<RevokeOperatorRequest, RevokeBodyError> =
        if body.iter().all(u8::is_ascii_whitespace) {
            Ok(RevokeOperatorRequest::default())
        } else {
            match serde_json::from_slice::<serde_json::Value>(&body) {
                Ok(v) if v.is_object() => serde_json::from_value(v).map_err(RevokeBodyError::Json),
                Ok(_) => Err(RevokeBodyError::NotAnObject),
                Err(e) => Err(RevokeBodyError::Json(e)),
            }
        };
    let request = match &parsed {
        Ok(r) => json!({ "name": name, "cascade": r.cascade }),
        Err(why) => json!({ "name": name, "invalid_body": why.to_string() }),
    };
    let asked = Asked {
        tool_id: "admin.operator.revoke",
        target_id: None,
        adapter: Some("root.operators".into()),
        request,
    };
    let (ended, event_id) = audited(&app, &op, asked, async {
        let cascade = parsed
            .map_err(|why| ApiError::bad_request(why.to_string()))?
            .cascade;
        let ended = crate::ops::operators::revoke(&app, &name, &op.actor_id(), cascade).await?;
        let ended = EndedWithOperator {
            cascade,
            grants: ended.grants,
            leases: ended.leases,
            descendants: ended.descendants,
        };
        let summary = format!(
            "operator `{name}` revoked; ended {} OAuth grants they approved, {} leases{} and {}",
            ended.grants,
            ended.leases,
            if cascade {
                " (their sign-ins' and every lease they issued)"
            } else {
                " (their sign-ins'; leases they issued keep their deadlines)"
            },
            if ended.descendants == 1 {
                "1 descendant".to_owned()
            } else {
                format!("{} descendants", ended.descendants)
            }
        );
        Ok((ended, summary))
    })
    .await?;
    Ok(Json(Audited {
        item: RevokedOperator {
            name,
            status: OperatorStatus::Revoked,
            ended,
        },
        event_id,
    }))
}

fn conflict(message: String) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, ErrorCode::Conflict, message)
}

/// `GET /v1/root/operators/breakglass`: the bootstrap admin token's last use on this
/// replica and how often it was used since root started (each use is in the trail,
/// `admin.breakglass.use`, gathered per address and minute).
pub(crate) async fn breakglass(
    State(app): State<Arc<App>>,
    _op: Operator,
) -> Json<serde_json::Value> {
    let last = app.breakglass.last();
    Json(json!({
        "uses_since_start": app.breakglass.uses.load(std::sync::atomic::Ordering::Relaxed),
        "started_at": format(app.started_at),
        "last_used_at": last.as_ref().map(|l| format(l.at)),
        "last_address": last.as_ref().and_then(|l| l.address.map(|a| a.to_string())),
        "last_request": last.as_ref().map(|l| l.request.clone()),
    }))
}

/// The operators changed: reloaded here, and on every live replica before this returns.
async fn changed(app: &App, name: &str) -> Result<(), ApiError> {
    Ok(crate::ops::operators::changed(app, name).await?)
}
