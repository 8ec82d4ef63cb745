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
    crate::replica::authenticate(app, token)
        .await
        .map(Principal::Lease)
}

/// Extractor: any authenticated principal.
pub(crate) struct Auth(pub(crate) Principal);
/// Extractor: an operator only (the bootstrap admin token, or the console cookie of an
/// operator's login).
pub(crate) struct Operator(pub(crate) crate::operators::OperatorId);

impl Operator {
    /// The actor id operator events name: `operator:<name>`.
    pub(crate) fn actor_id(&self) -> String {
        self.0.actor_id()
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
            None => crate::api::console::cookie_operator(app, &parts.method, &parts.headers)
                .await?
                .map(|s| Principal::Operator(s.operator)),
        };
        match principal {
            Some(p) => {
                if let Principal::Lease(l) = &p {
                    l.touch();
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
            None => crate::api::console::cookie_operator(app, &parts.method, &parts.headers)
                .await?
                .map(|s| Principal::Operator(s.operator)),
        };
        match principal {
            Some(Principal::Operator(op)) => Ok(Operator(op)),
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
