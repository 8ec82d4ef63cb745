//! Who is calling: the bearer resolved to a lease or an operator (never a client header),
//! as extractors for the handlers and the middleware in front of `/mcp`.

use axum::response::IntoResponse;

use crate::api::error::ApiError;
use crate::app::App;
use crate::app::Principal;
use crate::leases::manager as lease_manager;
use axum::extract::FromRequestParts;
use axum::extract::Request;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use mcp_shared::error::ErrorCode;
use std::sync::Arc;

use axum::extract::FromRef;

use crate::api::endpoint::Endpoint;
use crate::config::DpopMode;
use crate::dpop::{DpopError, Presented};
use crate::ops::audited::Asked;
use crate::ops::error::Refusal;
use axum::http::{Method, Uri};

pub(super) fn unauthorized(app: &App, why: &str) -> ApiError {
    app.metrics.unauthenticated.inc();
    ApiError::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthenticated, why)
}

/// Resolves the credential of a request: a usable lease, the operator, or nothing. With
/// replicas, a lease another replica issued is loaded from the store on first use. A token
/// bound to a key (DPoP) resolves only as `Authorization: DPoP` with a proof that key signed
/// for this request; a refused proof is the error, to be answered with its challenge.
pub(super) async fn resolve(
    app: &App,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<Option<Principal>, DpopError> {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(None);
    };
    let (token, dpop) = match crate::auth::bearer(value) {
        Some(t) => (t, false),
        None => match crate::dpop::token(value) {
            Some(t) => (t, true),
            None => return Ok(None),
        },
    };
    // The bootstrap and named operators' tokens are bearer tokens (issued out of band).
    let operator = if crate::auth::secret_eq(token, &app.admin_token) {
        Some(crate::operators::OperatorId::admin())
    } else {
        app.operators.authenticate(token)
    };
    if let Some(op) = operator {
        return match dpop {
            true => Err(DpopError::Unbound),
            false => Ok(Some(Principal::Operator(op))),
        };
    }
    let asked = Presenting {
        method,
        uri,
        headers,
        token,
        dpop,
    };
    // `mcp-root login`'s credential: a session of a person signed in with the identity
    // provider, presented as a bearer (no cookie, so no CSRF check to pass).
    if let Some(value) = token.strip_prefix(crate::logins::CLI_CREDENTIAL_PREFIX) {
        let Some(session) = app.logins.verify(app, value).await else {
            return Ok(None);
        };
        held(app, &asked, session.dpop_jkt.as_deref(), true)?;
        return Ok(Some(Principal::Operator(session.operator)));
    }
    let Some(lease) = crate::replica::authenticate(app, token).await else {
        return Ok(None);
    };
    let l = lease.lease();
    held(app, &asked, l.dpop_jkt.as_deref(), l.grant_id.is_some())?;
    Ok(Some(Principal::Lease(lease)))
}

/// What a request presents with its token.
struct Presenting<'a> {
    method: &'a Method,
    uri: &'a Uri,
    headers: &'a HeaderMap,
    token: &'a str,
    /// Sent as `Authorization: DPoP`.
    dpop: bool,
}

/// Whether the request holds its token as the token was issued: a bound token (`jkt`) with a
/// proof its key signed for this request, an unbound one as a bearer (refused under
/// `[oauth] dpop = require` when it came from a sign-in, `signed_in`).
fn held(
    app: &App,
    a: &Presenting<'_>,
    jkt: Option<&str>,
    signed_in: bool,
) -> Result<(), DpopError> {
    match (jkt, a.dpop) {
        (None, false) if signed_in && app.config.oauth.dpop == DpopMode::Require => {
            Err(DpopError::Required)
        }
        (None, false) => Ok(()),
        (None, true) => Err(DpopError::Unbound),
        (Some(_), false) => Err(DpopError::Downgrade),
        (Some(jkt), true) => {
            let url = format!(
                "{}{}",
                crate::api::oauth::Urls::of(app, a.headers).issuer,
                a.uri.path()
            );
            let proven = app.dpop.check(&Presented {
                headers: a.headers,
                method: a.method.as_str(),
                url,
                token: Some(a.token),
            })?;
            match crate::auth::secret_eq(&proven, jkt) {
                true => Ok(()),
                false => Err(DpopError::OtherKey),
            }
        }
    }
}

/// A refused proof or binding: `401` with the `DPoP` challenge (and root's nonce when that
/// is what it asks for).
pub(crate) fn refused_proof(app: &App, e: DpopError) -> ApiError {
    let nonce = (e == DpopError::Nonce).then(|| app.dpop.nonce());
    unauthorized(app, &e.to_string()).with_challenge(e.challenge(), nonce)
}

/// What a middleware in front of the handler resolved (kept so that a request's proof is
/// checked, and its `jti` spent, once).
#[derive(Clone)]
struct Resolved(Principal);

/// The request's credential, resolved once per request.
async fn principal_of(
    app: &App,
    parts: &mut http::request::Parts,
) -> Result<Option<Principal>, ApiError> {
    if let Some(Resolved(p)) = parts.extensions.get::<Resolved>() {
        return Ok(Some(p.clone()));
    }
    let resolved = resolve(app, &parts.method, &parts.uri, &parts.headers)
        .await
        .map_err(|e| refused_proof(app, e))?;
    if let Some(p) = &resolved {
        parts.extensions.insert(Resolved(p.clone()));
    }
    Ok(resolved)
}

/// Counts an operator's request against `[rates] per_operator`: past it, 429 with
/// `Retry-After`.
fn operator_rate(app: &App, op: &crate::operators::OperatorId) -> Result<(), ApiError> {
    app.rates.check_operator(&op.actor_id()).map_err(|limited| {
        app.metrics.rate_limited("operator", limited.scope);
        ApiError::of_tool(&limited.error()).retry_after(limited.retry_after_ms().div_ceil(1000))
    })
}

/// Extractor: any authenticated principal.
pub(crate) struct Auth(pub(crate) Principal);
/// Extractor: an operator only (the bootstrap admin token, or the console cookie of an
/// operator's login), with what they hold.
pub(crate) struct Operator {
    pub(crate) id: crate::operators::OperatorId,
    pub(crate) grant: Arc<crate::roles::Grant>,
}

impl std::ops::Deref for Operator {
    type Target = crate::operators::OperatorId;
    fn deref(&self) -> &crate::operators::OperatorId {
        &self.id
    }
}
/// Extractor: a lease only.
pub(crate) struct LeaseAuth(pub(crate) Arc<lease_manager::LeaseEntry>);

impl<S: Send + Sync> FromRequestParts<S> for Auth
where
    Arc<App>: FromRef<S>,
{
    type Rejection = ApiError;
    async fn from_request_parts(
        parts: &mut http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        let app = &Arc::<App>::from_ref(state);
        let principal = match principal_of(app, parts).await? {
            Some(p) => Some(p),
            None => crate::api::cookie::cookie_operator(app, &parts.method, &parts.headers)
                .await?
                .map(|s| Principal::Operator(s.operator)),
        };
        match principal {
            Some(p) => {
                match &p {
                    Principal::Lease(l) => l.touch(),
                    Principal::Operator(op) => operator_rate(app, op)?,
                }
                Ok(Auth(p))
            }
            None => Err(unauthorized(
                app,
                "missing, unknown, expired or revoked bearer",
            )),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Operator
where
    Arc<App>: FromRef<S>,
{
    type Rejection = ApiError;
    async fn from_request_parts(
        parts: &mut http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        let app = &Arc::<App>::from_ref(state);
        let principal = match principal_of(app, parts).await? {
            Some(p) => Some(p),
            // The console's cookie, for a browser without the bearer (console.rs).
            None => crate::api::cookie::cookie_operator(app, &parts.method, &parts.headers)
                .await?
                .map(|s| Principal::Operator(s.operator)),
        };
        match principal {
            Some(Principal::Operator(op)) => {
                operator_rate(app, &op)?;
                // Revoked between the credential's check and here: nothing held.
                let grant = app
                    .operators
                    .grant(op.name())
                    .ok_or_else(|| unauthorized(app, "missing or invalid admin token"))?;
                Ok(Operator { id: op, grant })
            }
            Some(Principal::Lease(_)) => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::Forbidden,
                "this endpoint needs the admin token",
            )),
            None => Err(unauthorized(app, "missing or invalid admin token")),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for LeaseAuth
where
    Arc<App>: FromRef<S>,
{
    type Rejection = ApiError;
    async fn from_request_parts(
        parts: &mut http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        let app = &Arc::<App>::from_ref(state);
        match principal_of(app, parts).await? {
            Some(Principal::Lease(l)) => {
                l.touch();
                Ok(LeaseAuth(l))
            }
            Some(Principal::Operator(_)) => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::Forbidden,
                "calls need a session lease bearer, not the admin token",
            )),
            None => Err(unauthorized(
                app,
                "missing, unknown, expired or revoked bearer",
            )),
        }
    }
}

// ---- middleware -----------------------------------------------------------------------------

/// Every route: a request the bootstrap admin token authenticates is counted as a
/// break-glass use (`ops::breakglass`), by the address it came from.
pub(super) async fn on_admin_token(
    State(app): State<Arc<App>>,
    req: Request,
    next: Next,
) -> Response {
    let admin = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::auth::bearer)
        .is_some_and(|t| crate::auth::secret_eq(t, &app.admin_token));
    if admin {
        let peer = req
            .extensions()
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|c| c.0.ip());
        app.breakglass
            .used(peer, req.method().as_str(), req.uri().path());
    }
    next.run(req).await
}

/// `/mcp` admission: a usable lease bearer, and an MCP session only with the lease that
/// opened it.
pub(super) async fn mcp_auth(
    State(app): State<Arc<App>>,
    mut req: Request,
    next: Next,
) -> Response {
    let resolved = resolve(&app, req.method(), req.uri(), req.headers()).await;
    let lease =
        match resolved {
            Err(e) => return refused_proof(&app, e).into_response(),
            Ok(Some(Principal::Lease(l))) => l,
            Ok(Some(Principal::Operator(_))) => return unauthorized(
                &app,
                "MCP needs a session lease bearer; create one with `mcp-root admin lease create`",
            )
            .into_response(),
            Ok(None) => {
                return unauthorized(&app, "missing, unknown, expired or revoked bearer")
                    .into_response();
            }
        };
    lease.touch();
    req.extensions_mut().insert(Principal::Lease(lease));
    next.run(req).await
}

// ---- routes ---------------------------------------------------------------------------------

/// Middleware on a route operators call: an operator who does not hold the route's role
/// (its [`Endpoint`]'s `access`) is refused with `403 role_required` before the handler runs;
/// on an audited route the refusal is one event naming the operator (`admin.role.refuse`).
/// A lease, or a request with no credential, goes on to the handler, whose extractor answers
/// it.
pub(crate) async fn require_role(
    State((app, endpoint)): State<(Arc<App>, Endpoint)>,
    mut req: Request,
    next: Next,
) -> Response {
    let Some(needed) = endpoint.access.role() else {
        return next.run(req).await;
    };
    let resolved = resolve(&app, req.method(), req.uri(), req.headers()).await;
    if let Ok(Some(p)) = &resolved {
        req.extensions_mut().insert(Resolved(p.clone()));
    }
    let op = match resolved {
        Ok(Some(Principal::Operator(op))) => op,
        // The handler's extractor answers a refused proof, a lease, or no credential.
        Ok(Some(Principal::Lease(_))) | Err(_) => return next.run(req).await,
        Ok(None) => {
            match crate::api::cookie::cookie_operator(&app, req.method(), req.headers()).await {
                Ok(Some(session)) => session.operator,
                _ => return next.run(req).await,
            }
        }
    };
    let Some(grant) = app.operators.grant(op.name()) else {
        return next.run(req).await;
    };
    if grant.holds(needed) {
        return next.run(req).await;
    }
    if let Err(limited) = operator_rate(&app, &op) {
        return limited.into_response();
    }
    let refusal = Refusal::role_required(needed, &grant);
    if !endpoint.access.audited() {
        return ApiError::from(refusal).into_response();
    }
    let asked = Asked {
        tool_id: "admin.role.refuse",
        target_id: None,
        adapter: None,
        request: serde_json::json!({
            "method": req.method().as_str(),
            "path": req.uri().path(),
            "route": endpoint.path,
            "role": needed,
        }),
    };
    let refused: Result<((), String), Refusal> =
        crate::ops::audited::audited(&app, &op, asked, None, async { Err(refusal) }).await;
    match refused {
        Err(r) => ApiError::from(r).into_response(),
        Ok(_) => ApiError::internal("a refusal recorded as a success").into_response(),
    }
}

/// `handler` behind [`require_role`] for `endpoint`.
pub(crate) fn with_role<S: Clone + Send + Sync + 'static>(
    app: &Arc<App>,
    endpoint: Endpoint,
    handler: axum::routing::MethodRouter<S>,
) -> axum::routing::MethodRouter<S> {
    match endpoint.access.role() {
        // Every operator holds `viewer`: nothing to check.
        None | Some(crate::roles::Role::Viewer) => handler,
        Some(_) => handler.layer(axum::middleware::from_fn_with_state(
            (app.clone(), endpoint),
            require_role,
        )),
    }
}
