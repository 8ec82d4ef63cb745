//! The sign-in routes of `[operators.oidc]` (the flows are `oidc::flow`):
//!
//! - `GET /ui/oidc/start`: to the provider (a console sign-in; with `cli_redirect`,
//!   `cli_challenge` and `cli_state`, one `mcp-root login` started in this browser).
//! - `GET /ui/oidc/callback`: back from the provider: a console session (its cookie, as a
//!   token login's) or a one-time code handed to the CLI's loopback redirect.
//! - `POST /v1/root/mcp/operators/oidc/token`: the CLI's code and PKCE verifier for a
//!   short-lived root credential (`mcpc_…`, a console session presented as a bearer).
//! - `POST /v1/root/mcp/operators/oidc/device` and `…/device/poll`: the device grant.
//!
//! Every sign-in, and every refused one, is one audit event (`admin.operator.signin`); the
//! refused ones are bounded per address as refused credentials are (`api::refused`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, FromRequestParts, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use mcp_shared::time::{format, from_unix_ms, now};
use serde::Deserialize;
use serde_json::json;

use crate::api::endpoint::{Access, Endpoint};
use crate::api::error::ApiError;
use crate::app::App;
use crate::oidc::flow::{self, Callback};
use crate::oidc::state::{CliReturn, SignedIn};
use crate::oidc::{Oidc, OidcError};

/// The cookie a browser sign-in in progress is kept in.
const PENDING_COOKIE: &str = "mcp_oidc";

pub(crate) const START_PATH: &str = "/ui/oidc/start";
pub(crate) const CALLBACK_PATH: &str = "/ui/oidc/callback";
const TOKEN_PATH: &str = "/v1/root/mcp/operators/oidc/token";
const DEVICE_PATH: &str = "/v1/root/mcp/operators/oidc/device";
const DEVICE_POLL_PATH: &str = "/v1/root/mcp/operators/oidc/device/poll";

/// The sign-in routes: open to anyone (they are how an operator gets a credential).
pub(crate) fn endpoints() -> Vec<Endpoint> {
    [
        ("GET", START_PATH),
        ("GET", CALLBACK_PATH),
        ("POST", TOKEN_PATH),
        ("POST", DEVICE_PATH),
        ("POST", DEVICE_POLL_PATH),
    ]
    .into_iter()
    .map(|(method, path)| Endpoint {
        method,
        path,
        access: Access::Public,
    })
    .collect()
}

/// The sign-in routes; none (a 404 for each) while `[operators.oidc]` is not configured.
pub(crate) fn routes(app: Arc<App>) -> Router {
    if app.oidc.is_none() {
        return Router::new();
    }
    Router::new()
        .route(START_PATH, get(start))
        .route(CALLBACK_PATH, get(callback))
        .route(TOKEN_PATH, post(token))
        .route(DEVICE_PATH, post(device))
        .route(DEVICE_POLL_PATH, post(device_poll))
        .with_state(app)
}

fn oidc(app: &App) -> Result<Arc<Oidc>, OidcError> {
    app.oidc.clone().ok_or(OidcError::NotConfigured)
}

/// Where the provider sends the browser back: configured, or this request's own origin.
fn redirect_url(app: &App, o: &Oidc, headers: &HeaderMap) -> Result<String, OidcError> {
    if let Some(r) = &o.config.redirect_url {
        return Ok(r.clone());
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .ok_or_else(|| OidcError::BadRequest("the request names no Host".into()))?;
    let scheme = if app.config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    Ok(format!("{scheme}://{host}{CALLBACK_PATH}"))
}

#[derive(Debug, Default, Deserialize)]
struct StartQuery {
    cli_redirect: Option<String>,
    cli_challenge: Option<String>,
    cli_state: Option<String>,
}

/// `GET /ui/oidc/start`: sends the browser to the provider.
async fn start(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    peer: Peer,
    Query(q): Query<StartQuery>,
) -> Response {
    let run = async {
        let o = oidc(&app)?;
        let cli = match (&q.cli_redirect, &q.cli_challenge, &q.cli_state) {
            (None, None, None) => None,
            (Some(r), Some(c), Some(s)) => Some(CliReturn::checked(r, c, s)?),
            _ => {
                return Err(OidcError::BadRequest(
                    "a CLI sign-in names cli_redirect, cli_challenge and cli_state".into(),
                ));
            }
        };
        let redirect = redirect_url(&app, &o, &headers)?;
        flow::start(&app, &o, &redirect, cli).await
    };
    match run.await {
        Ok(started) => {
            let mut res = Redirect::to(&started.url).into_response();
            if let Some(v) = pending_cookie(&app, &started.cookie, 600) {
                res.headers_mut().insert(header::SET_COOKIE, v);
            }
            res
        }
        Err(e) => refused_page(&app, peer, "start", &e).await,
    }
}

/// The cookie of a browser's sign-in in progress (`max_age` 0: the sign-in is over). Lax:
/// the provider's redirect back is a cross-site navigation, which a Strict cookie misses.
fn pending_cookie(app: &App, value: &str, max_age: u32) -> Option<HeaderValue> {
    let secure = app.config.tls.is_some() || app.config.console.secure_cookie;
    HeaderValue::from_str(&format!(
        "{PENDING_COOKIE}={value}; Path=/ui/oidc; Max-Age={max_age}; HttpOnly; SameSite=Lax{}",
        if secure { "; Secure" } else { "" }
    ))
    .ok()
}

/// `GET /ui/oidc/callback`: the provider's answer, checked; a console session, or the CLI's
/// one-time code.
async fn callback(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    peer: Peer,
    Query(back): Query<Callback>,
) -> Response {
    let pending = crate::api::cookie::named(&headers, PENDING_COOKIE);
    let run = async {
        let o = oidc(&app)?;
        let redirect = redirect_url(&app, &o, &headers)?;
        let signed = flow::finish(&app, &o, &redirect, pending, &back).await?;
        Ok::<_, OidcError>((o, signed))
    };
    let (_, signed) = match run.await {
        Ok(done) => done,
        Err(e) => return refused_page(&app, peer, "callback", &e).await,
    };
    let mut res = match signed.cli.clone() {
        Some(cli) => {
            // The CLI's loopback gets a one-time code; the credential goes to it only for
            // the verifier of its own challenge.
            let code = match flow::code_for_cli(&app, &signed, &cli.challenge).await {
                Ok(c) => c,
                Err(e) => return refused_page(&app, peer, "callback", &e).await,
            };
            let mut to = match url::Url::parse(&cli.redirect) {
                Ok(u) => u,
                Err(_) => return ApiError::bad_request("cli_redirect").into_response(),
            };
            to.query_pairs_mut()
                .append_pair("code", &code)
                .append_pair("state", &cli.state);
            Redirect::to(to.as_str()).into_response()
        }
        None => match console_session(&app, &signed, &headers).await {
            Ok(res) => res,
            Err(e) => return e.into_response(),
        },
    };
    // The sign-in in progress is over.
    if let Some(v) = pending_cookie(&app, "", 0) {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
    res
}

/// A console session for `signed`: its cookie, and the browser sent to the console.
async fn console_session(
    app: &App,
    signed: &SignedIn,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let ttl = Duration::from_secs(app.config.console.session_ttl_sec);
    let s = app
        .logins
        .open(app, ttl, signed.operator.clone())
        .await
        .map_err(ApiError::internal)?;
    signed_in_event(app, signed, "console", &s.id, s.expires_ms).await?;
    let value = crate::logins::credential(app, &s.id, s.expires_ms, None)
        .ok_or_else(|| ApiError::internal("console credential could not be signed"))?;
    let cookie = crate::api::console::set_cookie(
        &value,
        ttl.as_secs() as i64,
        crate::api::console::secure(app, headers),
    )
    .ok_or_else(|| ApiError::internal("console cookie is not a header value"))?;
    let mut res = Redirect::to("/ui/").into_response();
    res.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(res)
}

/// `admin.operator.signin`: who signed in, how, with their email and what they hold.
async fn signed_in_event(
    app: &App,
    signed: &SignedIn,
    how: &str,
    session: &str,
    expires_ms: i64,
) -> Result<String, ApiError> {
    let event_id = crate::ops::audited::record_admin(
        app,
        &signed.operator,
        crate::ops::audited::AdminAction {
            tool_id: "admin.operator.signin".into(),
            target_id: None,
            adapter: Some("root.oidc".into()),
            started_at: now(),
            request: json!({
                "how": how,
                "email": signed.email,
                "roles": signed.grant.roles(),
                "profiles": signed.grant.profile_names(),
                "session": session,
                "expires_at": format(from_unix_ms(expires_ms)),
            }),
            trace_id: None,
        },
        Ok(format!(
            "{} signed in ({how})",
            signed.email.as_deref().unwrap_or(signed.operator.name())
        )),
    )
    .await?;
    Ok(event_id)
}

/// The address a request came from (the listener's, never a header).
struct Peer(Option<std::net::IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;
    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Peer, std::convert::Infallible> {
        Ok(Peer(
            parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.ip()),
        ))
    }
}

/// A refused sign-in: one audit event (bounded per address), and a page that says why.
async fn refused_page(app: &App, peer: Peer, step: &str, why: &OidcError) -> Response {
    record_refusal(app, peer, step, why).await;
    let status = why.status();
    let text = html_escape(&why.to_string());
    let page = format!(
        "<!doctype html><meta charset=utf-8><title>Sign-in refused</title>\
         <h1>Sign-in refused</h1><p id=why>{text}</p><p><a href=\"/ui/\">Back to the console</a></p>"
    );
    (status, Html(page)).into_response()
}

async fn record_refusal(app: &App, peer: Peer, step: &str, why: &OidcError) {
    use crate::audit::refusals::Admit;
    let ip = peer.0;
    let unrecorded = match ip.map(|ip| app.refusals.admit(ip, std::time::Instant::now())) {
        Some(Admit::Count) => {
            app.metrics.unauthenticated_unrecorded.inc();
            return;
        }
        Some(Admit::Record { unrecorded }) => unrecorded,
        None => 0,
    };
    tracing::warn!(%step, error = %why, "an operator sign-in was refused");
    let action = crate::audit::Recorded {
        surface: mcp_shared::event::Surface::Admin,
        actor: ip.map_or_else(|| "address:unknown".into(), |ip| format!("address:{ip}")),
        tool_id: "admin.operator.signin".into(),
        target_id: None,
        adapter: Some("root.oidc".into()),
        started_at: now(),
        request: json!({ "step": step, "unrecorded_before": unrecorded }),
        trace_id: None,
    };
    let error = mcp_shared::ToolError::new(why.code(), why.to_string());
    let _ = crate::audit::record_denied(&app.audit, action, &error, "authentication").await;
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A refused API request of the CLI's flows: its status, code and message, recorded.
async fn api_refusal(app: &App, peer: Peer, step: &str, e: OidcError) -> ApiError {
    record_refusal(app, peer, step, &e).await;
    ApiError::new(e.status(), e.code(), e.to_string())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenBody {
    code: String,
    code_verifier: String,
}

/// `POST /v1/root/mcp/operators/oidc/token`: the CLI's root credential.
async fn token(
    State(app): State<Arc<App>>,
    peer: Peer,
    headers: HeaderMap,
    body: Result<Json<TokenBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let Json(body) = body.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let holder = cli_holder(&app, &headers, TOKEN_PATH)?;
    let redeemed = match oidc(&app) {
        Ok(_) => flow::redeem(&app, &body.code, &body.code_verifier).await,
        Err(e) => Err(e),
    };
    let signed = match redeemed {
        Ok(s) => s,
        Err(e) => return Err(api_refusal(&app, peer, "token", e).await),
    };
    Ok(Json(cli_credential(&app, &signed, "cli", holder).await?))
}

/// The key a CLI proved it holds (DPoP) when it asked for its credential, which is then bound
/// to it; none without a proof (refused under `[oauth] dpop = require`).
fn cli_holder(app: &App, headers: &HeaderMap, path: &str) -> Result<Option<String>, ApiError> {
    let url = format!("{}{path}", crate::api::oauth::Urls::of(app, headers).issuer);
    app.dpop
        .holder(headers, url, app.config.oauth.dpop)
        .map_err(|e| crate::api::principal::refused_proof(app, e))
}

/// A root credential for the CLI: a session of `cli_credential_ttl_sec`, as a bearer.
async fn cli_credential(
    app: &App,
    signed: &SignedIn,
    how: &str,
    holder: Option<String>,
) -> Result<serde_json::Value, ApiError> {
    let ttl = app
        .oidc
        .as_ref()
        .map_or(3600, |o| o.config.cli_credential_ttl_sec);
    let s = app
        .logins
        .open(app, Duration::from_secs(ttl), signed.operator.clone())
        .await
        .map_err(ApiError::internal)?;
    let event_id = signed_in_event(app, signed, how, &s.id, s.expires_ms).await?;
    let value = crate::logins::credential(app, &s.id, s.expires_ms, holder.as_deref())
        .ok_or_else(|| ApiError::internal("the credential could not be signed"))?;
    Ok(json!({
        "credential": format!("{}{value}", crate::logins::CLI_CREDENTIAL_PREFIX),
        "token_type": if holder.is_some() { "DPoP" } else { "Bearer" },
        "expires_at": format(from_unix_ms(s.expires_ms)),
        "operator": signed.operator.name(),
        "email": signed.email,
        "roles": signed.grant.roles(),
        "event_id": event_id,
    }))
}

/// `POST /v1/root/mcp/operators/oidc/device`: a device grant started at the provider.
async fn device(
    State(app): State<Arc<App>>,
    peer: Peer,
) -> Result<Json<flow::DeviceStart>, ApiError> {
    let o = match oidc(&app) {
        Ok(o) => o,
        Err(e) => return Err(api_refusal(&app, peer, "device", e).await),
    };
    match flow::start_device(app.clone(), o).await {
        Ok(s) => Ok(Json(s)),
        Err(e) => Err(api_refusal(&app, peer, "device", e).await),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PollBody {
    handle: String,
}

/// `POST /v1/root/mcp/operators/oidc/device/poll`: `202 {"status": "authorization_pending"}`
/// until the person approved at the provider, then the CLI's root credential (once).
async fn device_poll(
    State(app): State<Arc<App>>,
    peer: Peer,
    headers: HeaderMap,
    body: Result<Json<PollBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(|e| ApiError::bad_request(e.body_text()))?;
    // Checked at every poll, before the outcome is taken (once).
    let holder = cli_holder(&app, &headers, DEVICE_POLL_PATH)?;
    if let Err(e) = oidc(&app) {
        return Err(api_refusal(&app, peer, "device", e).await);
    }
    match flow::poll(&app, &body.handle).await {
        Ok(flow::Polled::Pending) => Ok((
            StatusCode::ACCEPTED,
            Json(json!({ "status": "authorization_pending" })),
        )
            .into_response()),
        Ok(flow::Polled::Done(signed)) => {
            Ok(Json(cli_credential(&app, &signed, "device", holder).await?).into_response())
        }
        Err(e) => Err(api_refusal(&app, peer, "device", e).await),
    }
}
