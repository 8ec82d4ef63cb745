//! Checking signed-in people against the provider: every `check_interval_sec` each one's
//! refresh token is used. The provider refusing it (the person disabled or removed, the
//! grant revoked) revokes the operator, which ends their console sessions, CLI credentials
//! and what their authority held, on every replica; a new ID token's groups re-map their
//! roles. Each identity is claimed by one replica per check (`store::due_oidc_identities`).
//!
//! A provider that does not answer changes nothing: the identity is tried again at its next
//! check (an outage of the provider does not lock every operator out).

use std::sync::Arc;
use std::time::Duration;

use mcp_shared::time::{now, unix_ms};
use openidconnect::{OAuth2TokenResponse, RefreshToken};
use serde_json::json;

use super::provider::{Oidc, OidcError};
use crate::app::App;
use crate::operators::OperatorId;

/// The actor of what the checks do.
const ACTOR: &str = "root:oidc-check";

/// Runs the checks until root stops: a pass every tenth of the interval (at least every
/// 30 s, at most every second), each checking the identities due.
pub(crate) async fn run(app: Arc<App>, oidc: Arc<Oidc>) {
    let every = Duration::from_secs(oidc.config.check_interval_sec)
        .div_f64(10.0)
        .clamp(Duration::from_secs(1), Duration::from_secs(30));
    loop {
        tokio::select! {
            () = app.shutdown.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        if let Err(e) = pass(&app, &oidc).await {
            tracing::warn!(error = %e, "cannot check signed-in operators against the identity provider");
        }
    }
}

/// Checks every identity due now.
async fn pass(app: &App, oidc: &Oidc) -> Result<(), crate::store::Error> {
    let now_ms = unix_ms(now());
    let next = now_ms + oidc.config.check_interval_sec as i64 * 1000;
    for who in app.store.due_oidc_identities(now_ms, next).await? {
        let operator = OperatorId::named(&who.name);
        match one(app, oidc, &who).await {
            Ok(()) => {}
            Err(OidcError::Unreachable(why) | OidcError::Discovery { why, .. }) => {
                tracing::warn!(operator = %who.name, %why, "the identity provider did not answer a check; tried again at the next");
            }
            Err(why) => end(app, &operator, &why).await,
        }
    }
    Ok(())
}

/// One identity's check: its refresh token used; a new ID token re-maps its roles.
async fn one(app: &App, oidc: &Oidc, who: &crate::store::OidcIdentity) -> Result<(), OidcError> {
    let refresh = who
        .refresh_token
        .as_deref()
        .and_then(|sealed| app.master_key.decrypt(&who.name, sealed))
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| {
            OidcError::Provider(
                "the provider gave no refresh token to check this person with".into(),
            )
        })?;
    let (client, _) = oidc.client(None, false).await?;
    let token = client
        .exchange_refresh_token(&RefreshToken::new(refresh))
        .map_err(|e| OidcError::Internal(e.to_string()))?
        .request_async(&oidc.http())
        .await
        .map_err(super::flow::token_error)?;
    let grant = if token.extra_fields().id_token().is_some() {
        let (operator, email, grant) = super::flow::person(oidc, &token, None).await?;
        if operator.name() != who.name {
            return Err(OidcError::IdToken(format!(
                "the refreshed ID token names `{}`, not `{}`",
                operator.name(),
                who.name
            )));
        }
        Some(grant.ok_or(OidcError::NoRole {
            who: email.unwrap_or_else(|| who.name.clone()),
        })?)
    } else {
        None
    };
    let rotated = match token.refresh_token() {
        Some(r) => Some(
            app.master_key
                .encrypt(&who.name, r.secret().as_bytes())
                .map_err(|e| OidcError::Internal(e.to_string()))?,
        ),
        None => None,
    };
    let held = app.operators.grant(&who.name);
    let grant = grant.or_else(|| held.as_deref().cloned());
    let Some(grant) = grant else {
        return Ok(());
    };
    let (roles, profiles) = grant.to_stored();
    app.store
        .checked_oidc(&who.name, rotated.as_deref(), &roles, &profiles)
        .await
        .map_err(|e| OidcError::Internal(e.to_string()))?;
    if held.as_deref() != Some(&grant) {
        tracing::info!(operator = %who.name, roles = %roles, "a signed-in operator's roles changed at the provider");
        crate::ops::operators::changed(app, &who.name)
            .await
            .map_err(|e| OidcError::Internal(e.tool_error().message))?;
    }
    Ok(())
}

/// The provider refused `operator`: revoked (sessions, CLI credentials and the OAuth
/// sign-ins they approved end on every replica), one audited operator action by root.
async fn end(app: &App, operator: &OperatorId, why: &OidcError) {
    tracing::warn!(operator = %operator.name(), %why, "the identity provider refused a signed-in operator; revoking them");
    let started_at = now();
    let outcome = crate::ops::operators::revoke(app, operator.name(), ACTOR, false).await;
    let action = crate::audit::Recorded {
        surface: mcp_shared::event::Surface::Admin,
        actor: ACTOR.to_owned(),
        tool_id: "admin.operator.revoke".into(),
        target_id: None,
        adapter: Some("root.oidc".into()),
        started_at,
        request: json!({ "name": operator.name(), "cascade": false, "why": why.to_string() }),
        trace_id: None,
    };
    let recorded = match &outcome {
        Ok(e) => {
            let summary = format!(
                "operator `{}` revoked: the identity provider refused them ({why}); ended {} OAuth grants they approved and {} leases",
                operator.name(),
                e.grants,
                e.leases
            );
            crate::ops::audited::record(app, action, Ok(summary)).await
        }
        Err(r) => crate::ops::audited::record(app, action, Err(&r.tool_error())).await,
    };
    if let Err(e) = recorded {
        tracing::error!(operator = %operator.name(), error = ?e.tool_error(), "cannot record a revocation by the identity provider's check");
    }
}
