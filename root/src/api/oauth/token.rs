//! The token endpoint: an authorization code (with its PKCE verifier) or a refresh token in,
//! a lease bearer out. Every lease it issues is an operator action of the approving
//! operator (`admin.lease.create` for a code, `admin.lease.refresh` for a refresh), naming
//! the client; a reused code or refresh token ends its grant and revokes the lease it holds.

use super::documents::Documents;
use super::protocol::OauthError;
use super::protocol::Urls;
use super::protocol::{credential, no_store, parameters, pkce_matches};
use crate::app::App;
use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::http::header;
use axum::response::IntoResponse;
use axum::response::Response;
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;

use super::register::client;
use crate::api::audited::audited;
use crate::api::bodies::NewLeaseRequest;
use crate::api::error::ApiError;
use crate::leases::manager::IssuedLease;
use crate::ops::audited::Asked;
use crate::store::{GrantRow, RefreshClaim};
use axum::body::Bytes;
use mcp_shared::time::{now, unix_ms};

/// What the token endpoint answers (RFC 6749 §5.1).
#[derive(Debug, Serialize)]
struct Tokens {
    access_token: String,
    token_type: &'static str,
    expires_in: i64,
    refresh_token: String,
    scope: String,
}

/// A form body's parameters (it must be a form), each at most once.
fn form(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<std::collections::HashMap<String, String>, OauthError> {
    let form_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            v.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !form_type {
        return Err(OauthError::invalid_request(
            "the token request must be application/x-www-form-urlencoded",
        ));
    }
    parameters(body)
}

/// `POST /oauth/token`.
pub(super) async fn token(
    State(app): State<Arc<App>>,
    State(documents): State<Arc<Documents>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OauthError> {
    let p = form(&headers, &body)?;
    let get = |k: &str| p.get(k).map(String::as_str).unwrap_or("");
    let Some(client) = client(&app, &documents, get("client_id")).await? else {
        return Err(OauthError::invalid_client(
            "client_id is missing or not registered here",
        ));
    };
    let urls = Urls::of(&app, &headers);
    if let Some(r) = p.get("resource")
        && r.trim_end_matches('/') != urls.mcp()
    {
        return Err(OauthError::new(
            "invalid_target",
            format!("resource must be this root's MCP URL, {}", urls.mcp()),
        ));
    }
    if !client.grant_types.iter().any(|g| g == get("grant_type")) {
        return Err(OauthError::new(
            "unsupported_grant_type",
            "grant_type must be authorization_code or refresh_token (as the client registered)",
        ));
    }
    // The key the client proved it holds (DPoP), which its tokens are then bound to.
    let holder = app
        .dpop
        .holder(&headers, urls.at("/oauth/token"), app.config.oauth.dpop)
        .map_err(|e| OauthError::dpop(&app, e))?;
    let tokens = match get("grant_type") {
        "authorization_code" => exchange(&app, &client.client_id, &p, holder).await?,
        _ => refresh(&app, &client.client_id, get("refresh_token"), holder).await?,
    };
    let mut res = Json(tokens).into_response();
    no_store(&mut res);
    Ok(res)
}

/// `POST /oauth/revoke` (RFC 7009): a client ends its sign-in by revoking its access or
/// refresh token; the grant ends and its lease is revoked (audited). An unknown token is
/// answered 200 like a revoked one; a token of another client is refused.
pub(super) async fn revoke(
    State(app): State<Arc<App>>,
    State(documents): State<Arc<Documents>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OauthError> {
    let p = form(&headers, &body)?;
    let get = |k: &str| p.get(k).map(String::as_str).unwrap_or("");
    let Some(client) = client(&app, &documents, get("client_id")).await? else {
        return Err(OauthError::invalid_client(
            "client_id is missing or not registered here",
        ));
    };
    let presented = get("token");
    if presented.is_empty() {
        return Err(OauthError::invalid_request("token is missing"));
    }
    let hash = crate::auth::token_hash(presented);
    // An access token is a lease bearer: its lease, here or (issued on another replica)
    // in the store.
    let session_id = match app.leases.by_hash(&hash) {
        Some(l) => Some(l.session_id().to_owned()),
        None => app
            .store
            .lease_by_hash(&hash)
            .await
            .map_err(OauthError::server_error)?
            .map(|row| row.lease.session_id),
    };
    let grant = app
        .store
        .live_grant_of(&hash, session_id.as_deref())
        .await
        .map_err(OauthError::server_error)?;
    if let Some(g) = grant {
        if g.client_id != client.client_id {
            return Err(OauthError::new(
                "unauthorized_client",
                "the token was not issued to this client",
            ));
        }
        end_grant(&app, &g, "the client revoked its token").await;
    }
    let mut res = StatusCode::OK.into_response();
    no_store(&mut res);
    Ok(res)
}

/// An authorization code for the grant's first lease.
async fn exchange(
    app: &App,
    client_id: &str,
    p: &std::collections::HashMap<String, String>,
    holder: Option<String>,
) -> Result<Tokens, OauthError> {
    let get = |k: &str| p.get(k).map(String::as_str).unwrap_or("");
    let now_ms = unix_ms(now());
    let code_hash = crate::auth::token_hash(get("code"));
    let grant = match app
        .store
        .claim_code(&code_hash, now_ms)
        .await
        .map_err(OauthError::server_error)?
    {
        Ok(Some(g)) => g,
        Ok(None) => return Err(OauthError::invalid_grant("unknown authorization code")),
        Err(used) => {
            end_grant(app, &used, "its authorization code was presented again").await;
            return Err(OauthError::invalid_grant(
                "the authorization code was used before; the tokens issued for it are revoked",
            ));
        }
    };
    if grant.client_id != client_id {
        return Err(OauthError::invalid_grant(
            "the code was issued to another client",
        ));
    }
    if now_ms >= grant.code_expires_at_ms {
        return Err(OauthError::invalid_grant("the authorization code expired"));
    }
    if get("redirect_uri") != grant.redirect_uri {
        return Err(OauthError::invalid_grant(
            "redirect_uri differs from the authorization request's",
        ));
    }
    if !pkce_matches(get("code_verifier"), &grant.code_challenge) {
        return Err(OauthError::invalid_grant(
            "code_verifier does not match the code_challenge (PKCE S256)",
        ));
    }
    let refresh_token = credential("mcpr_");
    let issued = issue(app, &grant, None, "admin.lease.create", holder.clone()).await?;
    app.store
        .set_grant_tokens(
            &grant.grant_id,
            &issued.lease.session_id,
            Some(&crate::auth::token_hash(&refresh_token)),
            holder.as_deref(),
        )
        .await
        .map_err(OauthError::server_error)?;
    Ok(answer(issued, refresh_token, &grant))
}

/// A refresh token for the grant's next lease (the token rotates).
async fn refresh(
    app: &App,
    client_id: &str,
    presented: &str,
    holder: Option<String>,
) -> Result<Tokens, OauthError> {
    let now_ms = unix_ms(now());
    let refresh_token = credential("mcpr_");
    let claim = app
        .store
        .claim_refresh(
            &crate::auth::token_hash(presented),
            &crate::auth::token_hash(&refresh_token),
            holder.as_deref(),
            now_ms,
        )
        .await
        .map_err(OauthError::server_error)?;
    let grant = match claim {
        RefreshClaim::Claimed(g) => *g,
        RefreshClaim::Unknown => return Err(OauthError::invalid_grant("unknown refresh token")),
        // RFC 9449 §5: a bound refresh token works only with a proof of its key.
        RefreshClaim::OtherHolder => {
            let e = match holder {
                Some(_) => crate::dpop::DpopError::OtherKey,
                None => crate::dpop::DpopError::Downgrade,
            };
            return Err(OauthError::invalid_grant(format!(
                "the refresh token is bound to its client's DPoP key: {e}"
            )));
        }
        RefreshClaim::Ended => {
            return Err(OauthError::invalid_grant(
                "this sign-in has ended (its lease was revoked, its approval ran out, or a \
                 token was reused); sign in again",
            ));
        }
        RefreshClaim::Spent { grant_id } => {
            if let Ok(Some(g)) = app.store.end_grant(&grant_id, now_ms).await {
                revoke_current(app, &g, "its refresh token was presented again").await;
            }
            return Err(OauthError::invalid_grant(
                "the refresh token was used before; the grant is ended and its lease revoked",
            ));
        }
    };
    if grant.client_id != client_id {
        end_grant(
            app,
            &grant,
            "its refresh token was presented by another client",
        )
        .await;
        return Err(OauthError::invalid_grant(
            "the refresh token was issued to another client; the grant is ended",
        ));
    }
    let current = match grant.session_id.as_deref() {
        Some(id) => lease_entry(app, id).await,
        None => None,
    };
    if current
        .as_ref()
        .is_some_and(|l| l.snapshot().status == mcp_shared::lease::LeaseStatus::Revoked)
    {
        end_grant(app, &grant, "its lease was revoked").await;
        return Err(OauthError::invalid_grant(
            "the lease of this sign-in was revoked; sign in again",
        ));
    }
    let lineage = current.as_ref().map(|l| l.lineage().to_owned());
    let holder = grant.dpop_jkt.clone().or(holder);
    let issued = issue(app, &grant, lineage, "admin.lease.refresh", holder).await?;
    app.store
        .set_grant_tokens(&grant.grant_id, &issued.lease.session_id, None, None)
        .await
        .map_err(OauthError::server_error)?;
    // One live lease per sign-in: the one the client just replaced ends (when it has not
    // expired already, which is when clients refresh).
    if let Some(old) = current.filter(|l| l.is_usable()) {
        let _ = crate::api::leases::end(app, old.session_id()).await;
    }
    Ok(answer(issued, refresh_token, &grant))
}

/// Lease `id` as this replica knows it, or as the store holds it (another replica issued
/// it and this one has not seen it yet).
async fn lease_entry(
    app: &App,
    id: &str,
) -> Option<std::sync::Arc<crate::leases::manager::LeaseEntry>> {
    if let Some(e) = app.leases.entry(id) {
        return Some(e);
    }
    match app.store.lease_chain(id).await {
        Ok(chain) => app.leases.upsert_chain(chain),
        Err(e) => {
            tracing::warn!(error = %e, session_id = %id, "a lease could not be read");
            None
        }
    }
}

fn answer(issued: IssuedLease, refresh_token: String, grant: &GrantRow) -> Tokens {
    let expires_in = (issued.lease.deadline_at - now()).whole_seconds().max(1);
    Tokens {
        token_type: match issued.lease.dpop_jkt {
            Some(_) => "DPoP",
            None => "Bearer",
        },
        access_token: issued.token,
        expires_in,
        refresh_token,
        scope: grant.capability_profile.clone(),
    }
}

/// Issues the grant's next lease, audited as the approving operator's action through the
/// client; refused once the approval or the operator has ended.
async fn issue(
    app: &App,
    grant: &GrantRow,
    lineage: Option<String>,
    tool_id: &'static str,
    holder: Option<String>,
) -> Result<IssuedLease, OauthError> {
    let now_ms = unix_ms(now());
    let left_sec = (grant.expires_at_ms - now_ms) / 1000;
    if left_sec < 1 {
        end_grant(app, grant, "the operator's approval ended").await;
        return Err(OauthError::invalid_grant(
            "the operator's approval of this sign-in has ended; sign in again",
        ));
    }
    if !app.operators.is_active(&grant.operator) {
        end_grant(app, grant, "the operator who approved it was revoked").await;
        return Err(OauthError::invalid_grant(
            "the operator who approved this sign-in was revoked; sign in again",
        ));
    }
    // The approver must still hold what they approved (a role or profile taken away ends it).
    let still = app.operators.grant(&grant.operator).is_some_and(|g| {
        g.holds(crate::roles::Role::Approver) && g.may_issue(&grant.capability_profile)
    });
    if !still {
        end_grant(
            app,
            grant,
            "the operator who approved it no longer holds its profile",
        )
        .await;
        return Err(OauthError::invalid_grant(
            "the operator who approved this sign-in no longer holds what it grants; sign in again",
        ));
    }
    let ttl_sec = (app.config.oauth.access_ttl_sec as i64).min(left_sec) as u64;
    let op = crate::operators::OperatorId::named(&grant.operator);
    let asked = Asked {
        tool_id,
        target_id: Some(grant.target_id.clone()),
        adapter: Some("root.oauth".into()),
        request: json!({
            "target_id": grant.target_id,
            "capability_profile": grant.capability_profile,
            "ttl_sec": ttl_sec,
            "oauth_client": grant.client_id,
            "grant_id": grant.grant_id,
            "dpop_jkt": holder,
        }),
    };
    let req = NewLeaseRequest {
        target_id: grant.target_id.clone(),
        selector: None,
        capability_profile: grant.capability_profile.clone(),
        ttl_sec,
        audience: Some(format!("oauth:{}", grant.client_id)),
        subnet_id: None,
        zone: None,
        rate: None,
    };
    let source = crate::leases::manager::Source::Issued {
        by: Some(op.actor_id()),
        grant: Some(grant.grant_id.clone()),
        holder,
    };
    let issued = audited(app, &op, asked, async {
        let issued = crate::api::leases::issue(app, req, lineage, source).await?;
        let summary = format!(
            "issued lease {} for `{}` ({}) until {} through OAuth client {} (grant {})",
            issued.lease.session_id,
            issued.lease.target_id,
            issued.lease.capability_profile,
            mcp_shared::time::format(issued.lease.deadline_at),
            grant.client_id,
            grant.grant_id
        );
        Ok((issued, summary))
    })
    .await;
    match issued {
        Ok((issued, _)) => Ok(issued),
        Err(e) => Err(refused(e)),
    }
}

/// A refused lease issue as the client sees it (the event records the detail): every
/// refusal of the grant's lease is its OAuth error (RFC 6749 §5.2), never a `500`. The
/// approval checked the grant, but the world may have moved since (the target retired, the
/// catalog changed).
fn refused(e: ApiError) -> OauthError {
    use mcp_shared::error::ErrorCode;
    let t = e.tool_error();
    match t.code {
        // The profile is the grant's scope.
        ErrorCode::CapabilityNotGranted | ErrorCode::UnknownTool => {
            OauthError::new("invalid_scope", t.message)
        }
        ErrorCode::AuditUnavailable => OauthError::temporarily_unavailable(t.message),
        ErrorCode::Internal => OauthError::server_error(t.message),
        _ => OauthError::invalid_grant(t.message),
    }
}

/// Ends a grant and revokes the lease it holds.
async fn end_grant(app: &App, grant: &GrantRow, why: &str) {
    let now_ms = unix_ms(now());
    match app.store.end_grant(&grant.grant_id, now_ms).await {
        Ok(Some(g)) => revoke_current(app, &g, why).await,
        Ok(None) => {}
        Err(e) => {
            tracing::error!(error = %e, grant_id = %grant.grant_id, "an OAuth grant could not be ended")
        }
    }
}

/// Revokes the leases an ended grant holds and everything they handed on; when that ended
/// anything, it is one audit event of the approving operator's.
pub(crate) async fn revoke_current(app: &App, grant: &GrantRow, why: &str) {
    let ending = crate::leases::manager::Ending::Grant(grant.grant_id.clone());
    let ended = match crate::api::leases::end_all(app, ending).await {
        Ok(ended) if ended.count() > 0 => ended,
        Ok(_) => return,
        Err(e) => {
            tracing::error!(error = ?e.tool_error(), grant_id = %grant.grant_id, "an ended OAuth grant's leases could not be revoked");
            return;
        }
    };
    tracing::warn!(grant_id = %grant.grant_id, %why, "OAuth grant ended; its leases are revoked");
    let op = crate::operators::OperatorId::named(&grant.operator);
    let asked = Asked {
        tool_id: "admin.lease.revoke",
        target_id: Some(grant.target_id.clone()),
        adapter: Some("root.oauth".into()),
        request: json!({ "session_id": grant.session_id, "oauth_client": grant.client_id, "grant_id": grant.grant_id }),
    };
    let summary = format!(
        "revoked lease {} and its {}: OAuth grant {} ended ({why})",
        ended.leases.join(", "),
        crate::api::leases::descendants_phrase(&ended.descendants),
        grant.grant_id
    );
    let _ = audited(app, &op, asked, async { Ok(((), summary)) }).await;
}
