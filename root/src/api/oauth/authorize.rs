//! The authorization endpoint and the operator's decision. `GET /oauth/authorize` checks the
//! client's request (registered client and redirect URI first: a request failing those is
//! answered here, never redirected), seals it and sends the browser to the console's MCP
//! Server dialog (`/ui/#/sessions?authorize=<sealed>`), where a signed-in operator reads it
//! (`describe`), then approves with a target, a capability profile and a lifetime, or
//! denies. Either is an operator action (one audit event) answered with the URL the browser
//! goes back to: the client's redirect URI with a single-use code, or `access_denied`.

use super::documents::Documents;
use super::protocol::OauthError;
use super::protocol::Urls;
use super::protocol::{credential, no_store, parameters};
use crate::app::App;
use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::HeaderValue;
use axum::http::StatusCode;
use axum::http::header;
use axum::response::IntoResponse;
use axum::response::Response;
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;

use super::register::{Client, client};
use crate::api::audited::{ActionBody, audited};
use crate::api::error::ApiError;
use crate::api::error::status_of;
use crate::api::principal::Operator;
use crate::ops::audited::Asked;
use axum::extract::RawQuery;
use axum::extract::rejection::JsonRejection;
use mcp_shared::error::ErrorCode;
use mcp_shared::time::{now, unix_ms};
use serde::Deserialize;

pub(super) const REQUEST_PATH: &str = "/oauth/authorize/request";
pub(super) const APPROVE_PATH: &str = "/oauth/authorize/approve";
pub(super) const DENY_PATH: &str = "/oauth/authorize/deny";

const SEAL_PURPOSE: &str = "oauth authorization request v1";
const SEAL_PREFIX: &str = "oar1.";
const MAX_SEALED_LEN: usize = 16 * 1024;
/// Longest `state` and `scope` accepted from a client.
const MAX_PARAM_LEN: usize = 1024;

/// A checked authorization request awaiting the operator (sealed: the console carries it).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pending {
    client_id: String,
    redirect_uri: String,
    state: Option<String>,
    code_challenge: String,
    resource: String,
    /// The capability profile the client asked for, if its scope named one.
    profile: Option<String>,
    issuer: String,
    expires_at_ms: i64,
}

/// `url` with `pairs` added to its query.
fn with_query(url: &str, pairs: &[(&str, &str)]) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            {
                let mut q = u.query_pairs_mut();
                for (k, v) in pairs {
                    q.append_pair(k, v);
                }
            }
            u.to_string()
        }
        Err(_) => url.to_owned(),
    }
}

fn found(location: &str) -> Response {
    let mut res = StatusCode::FOUND.into_response();
    if let Ok(v) = HeaderValue::from_str(location) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    no_store(&mut res);
    res
}

/// `GET /oauth/authorize`.
pub(super) async fn authorize(
    State(app): State<Arc<App>>,
    State(documents): State<Arc<Documents>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, OauthError> {
    let p = parameters(query.as_deref().unwrap_or("").as_bytes())?;
    let get = |k: &str| p.get(k).map(String::as_str).unwrap_or("");
    let Some(client) = client(&app, &documents, get("client_id")).await? else {
        return Err(OauthError::invalid_client(
            "client_id is missing or not registered here (register at /oauth/register)",
        ));
    };
    let redirect_uri = get("redirect_uri");
    if let Some(why) = super::register::malformed_redirect(redirect_uri) {
        return Err(OauthError::invalid_request(why));
    }
    if !client.redirects_to(redirect_uri) {
        return Err(OauthError::invalid_request(
            "redirect_uri is missing or not one the client registered",
        ));
    }
    let urls = Urls::of(&app, &headers);
    let state = p.get("state").cloned();
    let back = |error: &str, why: &str| {
        let mut pairs = vec![("error", error), ("error_description", why)];
        if let Some(s) = &state {
            pairs.push(("state", s));
        }
        pairs.push(("iss", &urls.issuer));
        Ok(found(&with_query(redirect_uri, &pairs)))
    };
    match check(&app, &p, &urls, &client) {
        Err(e) => back(e.code(), &e.to_string()),
        Ok(_) if !app.config.console.enabled => back(
            "temporarily_unavailable",
            "sign-in is approved in root's console, which is off here",
        ),
        Ok(profile) => {
            let pending = Pending {
                client_id: client.client_id,
                redirect_uri: redirect_uri.to_owned(),
                state,
                code_challenge: get("code_challenge").to_owned(),
                resource: urls.mcp(),
                profile,
                issuer: urls.issuer,
                expires_at_ms: unix_ms(now()) + app.config.oauth.approval_ttl_sec as i64 * 1000,
            };
            let sealed = app.master_key.seal(SEAL_PURPOSE, SEAL_PREFIX, &pending);
            Ok(found(&format!("/ui/#/sessions?authorize={sealed}")))
        }
    }
}

/// Why an authorization request for a known client and redirect is sent back refused: the
/// message is the `error_description`, [`AuthorizeError::code`] the `error`.
#[derive(Debug, thiserror::Error)]
enum AuthorizeError {
    #[error("response_type must be `code`")]
    ResponseType,
    #[error("the client did not register the authorization_code grant")]
    NoCodeGrant,
    #[error("PKCE is required: code_challenge_method must be S256")]
    NoPkce,
    #[error("code_challenge must be the 43-character base64url SHA-256 of the verifier")]
    Challenge,
    #[error("resource must be this root's MCP URL, {mcp}")]
    Resource { mcp: String },
    #[error("state and scope are at most {MAX_PARAM_LEN} bytes")]
    TooLong,
    #[error("scope `{0}` is not a capability profile of this root")]
    Scope(String),
}

impl AuthorizeError {
    /// The OAuth `error` code (RFC 6749 §4.1.2.1, RFC 8707).
    fn code(&self) -> &'static str {
        match self {
            AuthorizeError::ResponseType => "unsupported_response_type",
            AuthorizeError::NoCodeGrant => "unauthorized_client",
            AuthorizeError::NoPkce | AuthorizeError::Challenge | AuthorizeError::TooLong => {
                "invalid_request"
            }
            AuthorizeError::Resource { .. } => "invalid_target",
            AuthorizeError::Scope(_) => "invalid_scope",
        }
    }
}

/// The rest of the request, for a known client and redirect: an error to send back, or the
/// capability profile the scope asked for.
fn check(
    app: &App,
    p: &std::collections::HashMap<String, String>,
    urls: &Urls,
    client: &Client,
) -> Result<Option<String>, AuthorizeError> {
    let get = |k: &str| p.get(k).map(String::as_str).unwrap_or("");
    if get("response_type") != "code" {
        return Err(AuthorizeError::ResponseType);
    }
    if !client.grant_types.iter().any(|g| g == "authorization_code") {
        return Err(AuthorizeError::NoCodeGrant);
    }
    if get("code_challenge_method") != "S256" {
        return Err(AuthorizeError::NoPkce);
    }
    let challenge = get("code_challenge");
    let well_formed = challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !well_formed {
        return Err(AuthorizeError::Challenge);
    }
    if let Some(r) = p.get("resource")
        && r.trim_end_matches('/') != urls.mcp()
    {
        return Err(AuthorizeError::Resource { mcp: urls.mcp() });
    }
    if p.get("state").is_some_and(|s| s.len() > MAX_PARAM_LEN)
        || p.get("scope").is_some_and(|s| s.len() > MAX_PARAM_LEN)
    {
        return Err(AuthorizeError::TooLong);
    }
    // Scopes are capability profiles; a client may name several (clients ask for what the
    // challenge or the metadata lists), the operator grants one. `offline_access` (asked by
    // clients that want a refresh token) is granted anyway.
    let asked: Vec<&str> = get("scope")
        .split_whitespace()
        .filter(|s| *s != "offline_access")
        .collect();
    let known = |s: &str| app.catalog.profiles.get(s).is_some();
    if let Some(unknown) = asked.iter().find(|s| !known(s)) {
        return Err(AuthorizeError::Scope(unknown.to_string()));
    }
    Ok(match asked.as_slice() {
        [one] => Some(one.to_string()),
        _ => None,
    })
}

/// The sealed request a console call names, if it is root's and unexpired.
fn open(app: &App, sealed: &str) -> Result<Pending, ApiError> {
    let pending: Pending = app
        .master_key
        .open(SEAL_PURPOSE, SEAL_PREFIX, sealed, MAX_SEALED_LEN)
        .map_err(|e| ApiError::bad_request(format!("sign-in request refused: {e}")))?;
    if unix_ms(now()) >= pending.expires_at_ms {
        return Err(ApiError::bad_request(
            "this sign-in request expired: start the sign-in from the client again",
        ));
    }
    Ok(pending)
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Named {
    request: String,
}

/// What the dialog shows about a sign-in request.
#[derive(Debug, Serialize)]
pub(super) struct Described {
    client_id: String,
    client_name: String,
    redirect_uri: String,
    resource: String,
    /// The capability profile the client asked for, if any.
    capability_profile: Option<String>,
    expires_at: String,
}

/// `POST /oauth/authorize/request` `{"request"}`: the sign-in request, for the dialog.
pub(super) async fn describe(
    State(app): State<Arc<App>>,
    State(documents): State<Arc<Documents>>,
    _op: Operator,
    body: Result<Json<Named>, JsonRejection>,
) -> Result<Json<Described>, ApiError> {
    let Json(named) = body.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let pending = open(&app, &named.request)?;
    let client = console_client(&app, &documents, &pending.client_id).await?;
    Ok(Json(Described {
        client_name: client.label(),
        client_id: pending.client_id,
        redirect_uri: pending.redirect_uri,
        resource: pending.resource,
        capability_profile: pending.profile,
        expires_at: mcp_shared::time::format(mcp_shared::time::from_unix_ms(pending.expires_at_ms)),
    }))
}

/// The client of a sign-in request, looked up again for the console: gone is `not_found`; a
/// metadata-document client whose document cannot be fetched or used now fails at its own
/// host (`target_offline`, saying why); only root's own failure (logged) is internal.
async fn console_client(
    app: &App,
    documents: &Documents,
    client_id: &str,
) -> Result<Client, ApiError> {
    match client(app, documents, client_id).await {
        Ok(Some(client)) => Ok(client),
        Ok(None) => Err(ApiError::not_found("the client is no longer registered")),
        Err(e) if e.status == StatusCode::INTERNAL_SERVER_ERROR => {
            Err(ApiError::internal("the client registry cannot be read"))
        }
        Err(e) => {
            let code = ErrorCode::TargetOffline;
            Err(ApiError::new(status_of(code), code, e.description))
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Approval {
    request: String,
    target_id: String,
    capability_profile: String,
    ttl_sec: u64,
}

/// Where the browser goes next.
#[derive(Debug, Serialize)]
pub(super) struct Decided {
    redirect: String,
    event_id: String,
}

/// `POST /oauth/authorize/approve`: a grant with a single-use code for the client.
pub(super) async fn approve(
    State(app): State<Arc<App>>,
    State(documents): State<Arc<Documents>>,
    op: Operator,
    body: ActionBody<Approval>,
) -> Result<Json<Decided>, ApiError> {
    let asked = Asked {
        tool_id: "admin.oauth.approve",
        target_id: body.get().map(|a| a.target_id.clone()),
        adapter: Some("root.oauth".into()),
        request: body.request(json!({}), |a| {
            json!({"target_id": a.target_id, "capability_profile": a.capability_profile, "ttl_sec": a.ttl_sec})
        }),
    };
    let (redirect, event_id) = audited(&app, &op, asked, async {
        let a = body.parsed()?;
        let pending = open(&app, &a.request)?;
        let client = console_client(&app, &documents, &pending.client_id).await?;
        check_grant(&app, &a)?;
        if !op.grant.may_issue(&a.capability_profile) {
            return Err(crate::ops::error::Refusal::profile_not_held(
                &a.capability_profile,
                &op.grant,
            )
            .into());
        }
        let code = credential("mcpg_");
        let now_ms = unix_ms(now());
        let grant = crate::store::GrantRow {
            grant_id: uuid::Uuid::now_v7().to_string(),
            client_id: client.client_id.clone(),
            operator: op.id.name().to_owned(),
            target_id: a.target_id.clone(),
            capability_profile: a.capability_profile.clone(),
            resource: pending.resource.clone(),
            redirect_uri: pending.redirect_uri.clone(),
            code_challenge: pending.code_challenge.clone(),
            code_hash: crate::auth::token_hash(&code),
            code_expires_at_ms: now_ms + app.config.oauth.code_ttl_sec as i64 * 1000,
            code_used_at_ms: None,
            created_at_ms: now_ms,
            expires_at_ms: now_ms + a.ttl_sec as i64 * 1000,
            session_id: None,
            refresh_hash: None,
            ended_at_ms: None,
            dpop_jkt: None,
        };
        app.store
            .insert_oauth_grant(&grant)
            .await
            .map_err(ApiError::internal)?;
        let mut pairs = vec![("code", code.as_str())];
        if let Some(s) = &pending.state {
            pairs.push(("state", s));
        }
        pairs.push(("iss", &pending.issuer));
        let summary = format!(
            "approved the sign-in of OAuth client {} ({}) to `{}` with {} for {} s (grant {})",
            client.label(),
            client.client_id,
            a.target_id,
            a.capability_profile,
            a.ttl_sec,
            grant.grant_id
        );
        Ok((with_query(&pending.redirect_uri, &pairs), summary))
    })
    .await?;
    Ok(Json(Decided { redirect, event_id }))
}

/// What an approval may grant: a known profile, a target, a lifetime within the lease limit.
fn check_grant(app: &App, a: &Approval) -> Result<(), ApiError> {
    if a.target_id.trim().is_empty() || a.target_id.len() > 200 {
        return Err(ApiError::bad_request("target_id must be 1..200 characters"));
    }
    if app.catalog.profiles.get(&a.capability_profile).is_none() {
        return Err(ApiError::bad_request(format!(
            "unknown capability profile `{}`",
            a.capability_profile
        )));
    }
    let max = app.config.limits.max_lease_ttl_sec;
    if a.ttl_sec < 60 || a.ttl_sec > max {
        return Err(ApiError::bad_request(format!(
            "ttl_sec must be between 60 and {max}"
        )));
    }
    // The lease its tokens will be, checked now as the token endpoint will issue it: a
    // retired target, a fleet sign-in whose profile grants no fleet tool, a selector that
    // names nothing are refused to the operator, not to the client later.
    let lease = crate::api::bodies::NewLeaseRequest {
        target_id: a.target_id.clone(),
        selector: None,
        capability_profile: a.capability_profile.clone(),
        ttl_sec: app.config.oauth.access_ttl_sec.min(a.ttl_sec).max(1),
        audience: None,
        subnet_id: None,
        zone: None,
        rate: None,
    };
    let source = crate::leases::manager::Source::Issued {
        by: None,
        grant: None,
        holder: None,
    };
    crate::api::leases::checked(app, lease, None, source).map(|_| ())
}

/// `POST /oauth/authorize/deny`: the client is told `access_denied`.
pub(super) async fn deny(
    State(app): State<Arc<App>>,
    op: Operator,
    body: Result<Json<Named>, JsonRejection>,
) -> Result<Json<Decided>, ApiError> {
    let parsed = body.map(|Json(b)| b).map_err(|e| e.body_text());
    let asked = Asked {
        tool_id: "admin.oauth.deny",
        target_id: None,
        adapter: Some("root.oauth".into()),
        request: json!({}),
    };
    let (redirect, event_id) = audited(&app, &op, asked, async {
        let named = parsed.map_err(ApiError::bad_request)?;
        let pending = open(&app, &named.request)?;
        let mut pairs = vec![
            ("error", "access_denied"),
            ("error_description", "the operator denied the sign-in"),
        ];
        if let Some(s) = &pending.state {
            pairs.push(("state", s));
        }
        pairs.push(("iss", &pending.issuer));
        let summary = format!("denied the sign-in of OAuth client {}", pending.client_id);
        Ok((with_query(&pending.redirect_uri, &pairs), summary))
    })
    .await?;
    Ok(Json(Decided { redirect, event_id }))
}
