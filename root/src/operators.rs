//! Operators: who acts on root's operator endpoints (the REST family's admin side, the
//! `mcp-root admin` CLI, the console). Each has a credential of their own
//! (`mcp-root admin operator add NAME` shows it once; root keeps its SHA-256), and every
//! operator action is one audit event naming the operator (`operator:<name>`), so "who
//! issued this bearer?" has an answer.
//!
//! The bootstrap credential, `<data_dir>/admin.token`, is operator [`ADMIN`]; it cannot be
//! revoked through the API (replace the file). Names are never reused, so an actor in the
//! trail always means one operator. A revoked operator's credential and console sessions
//! stop working at once, on every replica (the change feed, kind `operator`).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use dashmap::DashMap;
use mcp_shared::error::ErrorCode;
use mcp_shared::time::{format, from_unix_ms, now, unix_ms};
use serde_json::json;

use crate::api::audited::{Asked, audited};
use crate::api::bodies::{
    Audited, EndedWithOperator, NewOperator, NewOperatorRequest, OperatorList, OperatorStatus,
    OperatorView, RevokeOperatorRequest, RevokedOperator,
};
use crate::api::{ApiError, Operator};
use crate::app::App;
use crate::store::OperatorRow;

/// The operator the bootstrap admin token (`<data_dir>/admin.token`) stands for.
pub const ADMIN: &str = "admin";
/// Prefix of named operators' credentials (the redactor knows it).
pub const OPERATOR_TOKEN_PREFIX: &str = "mcpo_";

/// An authenticated operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorId {
    name: Arc<str>,
}

impl OperatorId {
    /// The operator of the bootstrap admin token.
    pub fn admin() -> OperatorId {
        OperatorId::named(ADMIN)
    }

    pub fn named(name: &str) -> OperatorId {
        OperatorId { name: name.into() }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The actor id events and records name: `operator:<name>`.
    pub fn actor_id(&self) -> String {
        format!("operator:{}", self.name)
    }
}

/// The active named operators by credential hash (the bootstrap `admin` is checked apart).
#[derive(Default)]
pub struct Registry {
    by_hash: DashMap<String, OperatorId>,
}

impl Registry {
    /// The active operator a credential belongs to.
    pub fn authenticate(&self, token: &str) -> Option<OperatorId> {
        if !token.starts_with(OPERATOR_TOKEN_PREFIX) {
            return None;
        }
        self.by_hash
            .get(&crate::auth::token_hash(token))
            .map(|o| o.clone())
    }

    /// Whether `name` is an operator who may act now (the bootstrap `admin`, or a named
    /// operator not revoked).
    pub fn is_active(&self, name: &str) -> bool {
        name == ADMIN || self.by_hash.iter().any(|o| o.value().name() == name)
    }

    /// Replaces the registry with the active operators of `rows`.
    pub fn load(&self, rows: &[OperatorRow]) {
        self.by_hash.retain(|hash, _| {
            rows.iter()
                .any(|r| r.revoked_at_ms.is_none() && &r.token_hash == hash)
        });
        for r in rows.iter().filter(|r| r.revoked_at_ms.is_none()) {
            self.by_hash
                .entry(r.token_hash.clone())
                .or_insert_with(|| OperatorId::named(&r.name));
        }
    }
}

/// Reads the operators from the store (at start, on a change of the feed, and on every
/// fallback tick with replicas).
pub async fn reload(app: &App) -> Result<(), crate::store::Error> {
    let rows = app.store.load_operators().await?;
    app.operators.load(&rows);
    Ok(())
}

/// Whether `name` may name an operator: 1 to 64 of `[a-z0-9._-]`, starting with a letter or
/// digit.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
}

/// `POST /v1/root/operators` `{"name": …}`: a new operator and their credential, shown once
/// in this answer (never in the trail). Audited as `admin.operator.add`.
pub async fn add(
    State(app): State<Arc<App>>,
    op: Operator,
    body: Result<Json<NewOperatorRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<(StatusCode, Json<Audited<NewOperator>>), ApiError> {
    let parsed = body.map(|Json(b)| b.name).map_err(|e| e.body_text());
    let request = match &parsed {
        Ok(name) => json!({ "name": name }),
        Err(why) => json!({ "invalid_body": why }),
    };
    let asked = Asked {
        tool_id: "admin.operator.add",
        target_id: None,
        adapter: Some("root.operators".into()),
        request,
    };
    let ((row, token), event_id) = audited(&app, &op, asked, async {
        let name = parsed.map_err(ApiError::bad_request)?;
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
        let row = OperatorRow {
            name: name.clone(),
            token_hash: crate::auth::token_hash(&token),
            created_at_ms: unix_ms(now()),
            created_by: op.actor_id(),
            revoked_at_ms: None,
            revoked_by: None,
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
        Ok(((row, token), summary))
    })
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(Audited {
            item: NewOperator {
                name: row.name,
                token,
                created_at: format(from_unix_ms(row.created_at_ms)),
                created_by: row.created_by,
            },
            event_id,
        }),
    ))
}

/// `GET /v1/root/operators`: every operator (the bootstrap `admin` first), active or revoked.
pub async fn list(
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
        credential: Some("the admin token file (bootstrap)".into()),
        created_at: None,
        created_by: None,
        revoked_at: None,
        revoked_by: None,
    }];
    operators.extend(rows.into_iter().map(|r| OperatorView {
        name: r.name,
        status: match r.revoked_at_ms {
            Some(_) => OperatorStatus::Revoked,
            None => OperatorStatus::Active,
        },
        credential: None,
        created_at: Some(time(r.created_at_ms)),
        created_by: Some(r.created_by),
        revoked_at: r.revoked_at_ms.map(time),
        revoked_by: r.revoked_by,
    }));
    Ok(Json(OperatorList { operators }))
}

/// `POST /v1/root/operators/{name}/revoke` `{"cascade": bool}`: the operator's credential
/// and console sessions stop working at once, on every replica, and so do the OAuth sign-ins
/// they approved (a token never outlives the operator's approval, nor the operator). The
/// leases they issued keep their own deadlines unless `cascade` ends them too, with their
/// descendants. Audited as `admin.operator.revoke`, one event counting what ended.
pub async fn revoke(
    State(app): State<Arc<App>>,
    op: Operator,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Audited<RevokedOperator>>, ApiError> {
    let parsed: Result<RevokeOperatorRequest, String> = if body.iter().all(u8::is_ascii_whitespace)
    {
        Ok(RevokeOperatorRequest::default())
    } else {
        match serde_json::from_slice::<serde_json::Value>(&body) {
            Ok(v) if v.is_object() => {
                serde_json::from_value(v).map_err(|e| format!("invalid body: {e}"))
            }
            Ok(_) => Err("the body must be a JSON object, e.g. {\"cascade\": true}".to_owned()),
            Err(e) => Err(format!("invalid body: {e}")),
        }
    };
    let request = match &parsed {
        Ok(r) => json!({ "name": name, "cascade": r.cascade }),
        Err(why) => json!({ "name": name, "invalid_body": why }),
    };
    let asked = Asked {
        tool_id: "admin.operator.revoke",
        target_id: None,
        adapter: Some("root.operators".into()),
        request,
    };
    let (ended, event_id) = audited(&app, &op, asked, async {
        let cascade = parsed.map_err(ApiError::bad_request)?.cascade;
        if name == ADMIN {
            return Err(conflict(format!(
                "`{ADMIN}` is the bootstrap operator: replace the admin token file to change it"
            )));
        }
        let revoked = app
            .store
            .revoke_operator(&name, unix_ms(now()), &op.actor_id())
            .await
            .map_err(ApiError::internal)?;
        if !revoked {
            return Err(ApiError::not_found(format!("no active operator `{name}`")));
        }
        changed(&app, &name).await?;
        app.api
            .console
            .end_operator(&app, &name)
            .await
            .map_err(ApiError::internal)?;
        let ended = end_authority(&app, &name, cascade).await?;
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

/// Ends what a revoked operator's authority held: the OAuth grants they approved with their
/// leases, and (`cascade`) every lease they issued; each with its descendants.
async fn end_authority(
    app: &App,
    name: &str,
    cascade: bool,
) -> Result<EndedWithOperator, ApiError> {
    use crate::leases::manager::Ending;
    let grants = app
        .store
        .end_grants_of_operator(name, unix_ms(now()))
        .await
        .map_err(ApiError::internal)?;
    let mut ended = EndedWithOperator {
        cascade,
        grants: grants.len(),
        ..EndedWithOperator::default()
    };
    for g in &grants {
        let e = crate::api::leases::end_all(app, Ending::Grant(g.grant_id.clone())).await?;
        ended.leases += e.leases.len();
        ended.descendants += e.descendants.len();
    }
    if cascade {
        let actor = OperatorId::named(name).actor_id();
        let e = crate::api::leases::end_all(app, Ending::IssuedBy(actor)).await?;
        ended.leases += e.leases.len();
        ended.descendants += e.descendants.len();
    }
    Ok(ended)
}

fn conflict(message: String) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, ErrorCode::Conflict, message)
}

/// The operators changed: reloaded here, and on every live replica before this returns.
async fn changed(app: &App, name: &str) -> Result<(), ApiError> {
    reload(app).await.map_err(ApiError::internal)?;
    if let Some(zone) = &app.zone {
        zone.changed(crate::replica::kind::OPERATOR, name, true)
            .await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_lowercase_words() {
        for ok in ["ann", "ops-bot.2", "9lives", "a_b"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in [
            "",
            "Ann",
            "-x",
            ".x",
            "a b",
            "a/b",
            &"x".repeat(65),
            "ann:1",
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_registry_knows_active_operators_only() {
        let token = crate::auth::new_token(OPERATOR_TOKEN_PREFIX);
        let row = |revoked: bool| OperatorRow {
            name: "ann".into(),
            token_hash: crate::auth::token_hash(&token),
            created_at_ms: 1,
            created_by: "operator:admin".into(),
            revoked_at_ms: revoked.then_some(2),
            revoked_by: None,
        };
        let r = Registry::default();
        r.load(&[row(false)]);
        assert_eq!(r.authenticate(&token), Some(OperatorId::named("ann")));
        assert_eq!(r.authenticate("mcpo_other"), None);
        assert_eq!(r.authenticate("mcpl_not_an_operator"), None);
        r.load(&[row(true)]);
        assert_eq!(r.authenticate(&token), None);
    }
}
