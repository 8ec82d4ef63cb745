//! The operator web console at `/ui`: static assets compiled into the binary (`root/ui/`),
//! the cookie login that lets a browser act as the operator, and the security headers every
//! console response carries.
//!
//! The console has no API of its own beyond login: its pages call the REST family
//! (`/v1/root/mcp/*`, `/v1/root/hubs`), whose `Operator` and `Auth` extractors accept the
//! console cookie besides the bearer (see `api::cookie`).
//!
//! Invariants:
//! - The cookie never holds the admin token: it holds `v1.<id>.<expiry>.<mac>`, an HMAC-SHA256
//!   under a key derived from the admin token, for a session root holds (logout or a new
//!   admin token ends it). A single replica (SQLite) keeps sessions in memory, so a restart
//!   ends them too; replicas of a zone (PostgreSQL) share the key (one admin token file) and
//!   the session records (`console_sessions`), so a login on one replica works on every
//!   replica, and a logout is in force on every live replica when it returns (the change
//!   feed, with the fallback re-reading cached sessions every 2 s).
//! - A cookie-authenticated request that is not `GET`/`HEAD` must carry the session's CSRF
//!   token in `X-MCP-Console-CSRF` and an allowed `Origin` (the Host/Origin guard checks the
//!   value); a `Sec-Fetch-Site` other than `same-origin`/`none` is refused. The cookie is
//!   `HttpOnly`, `SameSite=Strict`, and `Secure` when the login came over TLS.
//! - Nothing here logs a token or a cookie; tokens are never read from URLs.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use include_dir::{Dir, include_dir};
use mcp_shared::error::ErrorCode;
use mcp_shared::time::{format, from_unix_ms};
use serde::Deserialize;
use serde_json::json;

use crate::api::cookie::{COOKIE, cookie_operator, same_site_fetch};
use crate::api::error::ApiError;
use crate::app::App;
use crate::logins::{ConsoleSession, credential, csrf_token};

/// The console's files: HTML, CSS and JavaScript modules, no build step.
static ASSETS: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/ui");

/// Longest admin token accepted by the login form.
const MAX_TOKEN_LEN: usize = 512;
/// Content-Security-Policy of console responses: only the binary's own files, no inline
/// script or style, no framing.
pub(crate) const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

// ---- routes ---------------------------------------------------------------------------------

/// The console's API routes (its files apart): a login and a logout are operator actions,
/// each one audit event (a refused login is not: it has no operator to name).
pub(crate) fn endpoints() -> Vec<crate::api::endpoint::Endpoint> {
    use crate::api::endpoint::{Access, Endpoint};
    use crate::roles::Role;
    vec![
        Endpoint {
            method: "POST",
            path: "/ui/api/login",
            access: Access::OperatorAction(Role::Viewer),
        },
        Endpoint {
            method: "POST",
            path: "/ui/api/logout",
            access: Access::OperatorAction(Role::Viewer),
        },
        Endpoint {
            method: "GET",
            path: "/ui/api/session",
            access: Access::OperatorRead(Role::Viewer),
        },
        Endpoint {
            method: "GET",
            path: "/ui/api/signin",
            access: Access::Public,
        },
    ]
}

/// The console's routes; an empty router when the console is disabled.
pub(crate) fn routes(app: Arc<App>) -> Router {
    if !app.config.console.enabled {
        return Router::new();
    }
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(index))
        .route("/ui/api/login", post(login))
        .route("/ui/api/logout", post(logout))
        .route("/ui/api/session", get(session))
        .route("/ui/api/signin", get(signin))
        .route("/ui/api/{*rest}", axum::routing::any(api_not_found))
        .route("/ui/{*path}", get(asset))
        .layer(middleware::from_fn(security_headers))
        .with_state(app)
}

/// Adds the console's security headers to every response under `/ui`.
async fn security_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    res
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" => "text/javascript; charset=utf-8",
        "svg" => "image/svg+xml",
        "json" => "application/json",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// A file of the console, or 404.
pub fn asset_bytes(path: &str) -> Option<&'static [u8]> {
    if path.split('/').any(|seg| seg == ".." || seg.is_empty()) {
        return None;
    }
    ASSETS.get_file(path).map(|f| f.contents())
}

fn serve_file(path: &str) -> Response {
    match asset_bytes(path) {
        Some(bytes) => (
            [
                (header::CONTENT_TYPE, content_type(path)),
                // Revalidate every time, so a new binary's files are picked up at once.
                (header::CACHE_CONTROL, "no-cache"),
            ],
            bytes,
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "not found",
        )
            .into_response(),
    }
}

async fn index() -> Response {
    serve_file("index.html")
}

async fn asset(Path(path): Path<String>) -> Response {
    serve_file(&path)
}

async fn api_not_found() -> ApiError {
    ApiError::not_found("no such console endpoint")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginBody {
    token: String,
}

pub(crate) fn set_cookie(value: &str, max_age_sec: i64, secure: bool) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!(
        "{COOKIE}={value}; Path=/; Max-Age={max_age_sec}; HttpOnly; SameSite=Strict{}",
        if secure { "; Secure" } else { "" }
    ))
    .ok()
}

/// Whether the browser reached root over TLS: root serves HTTPS itself (`[tls]`), the
/// login's `Origin` is `https://…` (a TLS-terminating proxy in front), or the configuration
/// says so.
pub(crate) fn secure(app: &App, headers: &HeaderMap) -> bool {
    app.config.console.secure_cookie
        || app.config.tls.is_some()
        || headers
            .get(header::ORIGIN)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|o| o.starts_with("https://"))
}

/// `POST /ui/api/login` with `{"token": "<operator credential>"}` (the admin token or a named
/// operator's): opens a console session for that operator and sets its cookie; answers the
/// CSRF token the page sends with state-changing requests.
async fn login(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Json<LoginBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if !same_site_fetch(&headers) || !headers.contains_key(header::ORIGIN) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            "log in from the console page",
        ));
    }
    let token = body.token.trim();
    let operator = if token.len() > MAX_TOKEN_LEN {
        None
    } else if crate::auth::secret_eq(token, &app.admin_token) {
        Some(crate::operators::OperatorId::admin())
    } else {
        app.operators.authenticate(token)
    };
    let Some(operator) = operator else {
        app.metrics.unauthenticated.inc();
        tracing::warn!("console login refused: not an operator credential");
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthenticated,
            "not an operator credential",
        ));
    };
    let ttl = Duration::from_secs(app.config.console.session_ttl_sec);
    let s = app
        .logins
        .open(&app, ttl, operator)
        .await
        .map_err(ApiError::internal)?;
    let (Some(value), Some(csrf)) = (
        credential(&app, &s.id, s.expires_ms, None),
        csrf_token(&app, &s.id),
    ) else {
        return Err(ApiError::internal("console credential could not be signed"));
    };
    let cookie = set_cookie(&value, ttl.as_secs() as i64, secure(&app, &headers))
        .ok_or_else(|| ApiError::internal("console cookie is not a header value"))?;
    tracing::info!(console_session = %s.id, operator = %s.operator.name(), "console login");
    let event_id = console_event(&app, "login", &s).await?;
    let mut res = Json(json!({
        "csrf_token": csrf,
        "expires_at": format(from_unix_ms(s.expires_ms)),
        "operator": s.operator.name(),
        // What the console offers: the roles held (admin's are every role).
        "roles": held_roles(&app, s.operator.name()),
        "event_id": event_id,
    }))
    .into_response();
    res.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(res)
}

/// Records a console login or logout (`admin.console.<verb>`) in the audit trail and waits
/// for its commit, like every operator action. A refused login is not an event (it is counted
/// in `mcp_root_unauthenticated_total` and logged, like any request without credentials).
async fn console_event(
    app: &App,
    verb: &str,
    session: &ConsoleSession,
) -> Result<String, ApiError> {
    let (session_id, expires_ms) = (&session.id, session.expires_ms);
    let event_id = crate::ops::audited::record_admin(
        app,
        &session.operator,
        crate::ops::audited::AdminAction {
            tool_id: format!("admin.console.{verb}"),
            target_id: None,
            adapter: Some("root.console".into()),
            started_at: mcp_shared::time::now(),
            request: json!({
                "console_session": session_id,
                "expires_at": format(from_unix_ms(expires_ms)),
            }),
            trace_id: None,
        },
        Ok(format!("console {verb}")),
    )
    .await?;
    Ok(event_id)
}

async fn require_session(
    app: &App,
    method: &Method,
    headers: &HeaderMap,
) -> Result<ConsoleSession, ApiError> {
    cookie_operator(app, method, headers).await?.ok_or_else(|| {
        app.metrics.unauthenticated.inc();
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthenticated,
            "not logged in to the console",
        )
    })
}

/// `POST /ui/api/logout`: ends the session and clears the cookie.
async fn logout(
    State(app): State<Arc<App>>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let s = require_session(&app, &method, &headers).await?;
    app.logins
        .close(&app, &s.id)
        .await
        .map_err(ApiError::internal)?;
    tracing::info!(console_session = %s.id, "console logout");
    let event_id = console_event(&app, "logout", &s).await?;
    let mut res = Json(json!({ "logged_out": true, "event_id": event_id })).into_response();
    if let Some(c) = set_cookie("", 0, secure(&app, &headers)) {
        res.headers_mut().insert(header::SET_COOKIE, c);
    }
    Ok(res)
}

/// `GET /ui/api/session`: the current session (for a reloaded page) with its CSRF token.
async fn session(
    State(app): State<Arc<App>>,
    method: Method,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>, ApiError> {
    let s = require_session(&app, &method, &headers).await?;
    Ok(Json(json!({
        "csrf_token": csrf_token(&app, &s.id),
        "expires_at": format(from_unix_ms(s.expires_ms)),
        "operator": s.operator.name(),
        "roles": held_roles(&app, s.operator.name()),
        "zone": app.config.zone,
        "version": env!("CARGO_PKG_VERSION"),
    })))
}

/// `GET /ui/api/signin`: how operators sign in here (the login page offers the identity
/// provider when `[operators.oidc]` is configured).
async fn signin(State(app): State<Arc<App>>) -> Json<serde_json::Value> {
    Json(json!({
        "oidc": app.oidc.as_ref().map(|o| json!({ "issuer": o.issuer(), "start": crate::api::oidc::START_PATH })),
        "token": true,
    }))
}

/// Every role `name` holds (`admin` holds them all; nothing once revoked).
fn held_roles(app: &App, name: &str) -> Vec<crate::roles::Role> {
    let grant = app.operators.grant(name);
    crate::roles::Role::ALL
        .into_iter()
        .filter(|r| grant.as_ref().is_some_and(|g| g.holds(*r)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_are_compiled_in_and_paths_cannot_escape() {
        assert!(asset_bytes("index.html").is_some());
        assert!(asset_bytes("app.js").is_some());
        assert!(asset_bytes("../Cargo.toml").is_none());
        assert!(asset_bytes("js//x.js").is_none());
        assert_eq!(content_type("a/b.js"), "text/javascript; charset=utf-8");
    }
}
