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
use crate::ops::audited::Asked;
use crate::ops::error::Refusal;

pub(super) fn unauthorized(app: &App, why: &str) -> ApiError {
    app.metrics.unauthenticated.inc();
    ApiError::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthenticated, why)
}

/// Resolves the bearer of a request: a usable lease, the operator, or nothing. With
/// replicas, a lease another replica issued is loaded from the store on first use.
pub(super) async fn resolve(app: &App, headers: &HeaderMap) -> Option<Principal> {
    let token = headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()
        .and_then(crate::auth::bearer)?;
    if crate::auth::secret_eq(token, &app.admin_token) {
        return Some(Principal::Operator(crate::operators::OperatorId::admin()));
    }
    if let Some(op) = app.operators.authenticate(token) {
        return Some(Principal::Operator(op));
    }
    // `mcp-root login`'s credential: a session of a person signed in with the identity
    // provider, presented as a bearer (no cookie, so no CSRF check to pass).
    if let Some(value) = token.strip_prefix(crate::api::oidc::CLI_CREDENTIAL_PREFIX) {
        return app
            .logins
            .verify(app, value)
            .await
            .map(|s| Principal::Operator(s.operator));
    }
    crate::replica::authenticate(app, token)
        .await
        .map(Principal::Lease)
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
        let principal = match resolve(app, &parts.headers).await {
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
        let principal = match resolve(app, &parts.headers).await {
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
        match resolve(app, &parts.headers).await {
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
    let lease =
        match resolve(&app, req.headers()).await {
            Some(Principal::Lease(l)) => l,
            Some(Principal::Operator(_)) => return unauthorized(
                &app,
                "MCP needs a session lease bearer; create one with `mcp-root admin lease create`",
            )
            .into_response(),
            None => {
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
    req: Request,
    next: Next,
) -> Response {
    let Some(needed) = endpoint.access.role() else {
        return next.run(req).await;
    };
    let op = match resolve(&app, req.headers()).await {
        Some(Principal::Operator(op)) => op,
        Some(Principal::Lease(_)) => return next.run(req).await,
        None => {
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
