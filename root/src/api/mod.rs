//! HTTP surface: the MCP endpoint, the REST family `/v1/root/mcp/*`, health and metrics, and
//! the middleware in front of them (Host/Origin guard, body limit, bearer resolution).
//!
//! Invariant: actor identity comes from the bearer (lease or admin token), never from client
//! headers; tokens are never taken from query strings.

pub mod approvals;
pub mod audited;
pub mod console;
pub mod descriptors;
pub mod hub_link;
pub mod inspect;
pub mod leases;
pub mod observe;
pub mod run_profile;
pub mod skill;
pub mod targets;

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{FromRequestParts, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use mcp_shared::error::ErrorCode;
use mcp_shared::event::Surface;
use ractor::call_t;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::actors::RPC_TIMEOUT_MS;
use crate::app::{App, Principal};
use crate::call::{self, CallContext};
use crate::hubs::router;
use crate::leases::manager as lease_manager;
use crate::policy;
use crate::store::AuditFilter;

/// What the REST family and the hub door keep between requests.
#[derive(Default)]
pub struct Surfaces {
    /// Operator console sessions (cookie logins), in memory.
    pub console: console::Sessions,
    /// Refused hub upgrades per peer address (`hub_link::door`).
    pub hub_door: hub_link::door::HubDoor,
    /// One push of a desired skill state to a hub at a time, per target.
    pub skill_pushes: skill::PushLocks,
}

/// An error answered by a REST endpoint: the status plus a normalized error body.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: ErrorCode,
    message: String,
    /// The audit event that records the refused request (an operator action), if any.
    event_id: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            event_id: None,
        }
    }

    /// The refusal as a tool error (for the audit event that records it).
    pub fn tool_error(&self) -> mcp_shared::ToolError {
        mcp_shared::ToolError::new(self.code, self.message.clone())
    }

    /// The refusal, naming the audit event that records it.
    pub fn with_event(mut self, event_id: String) -> ApiError {
        self.event_id = Some(event_id);
        self
    }
    pub(crate) fn not_found(what: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, what)
    }
    pub(crate) fn bad_request(what: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidArguments, what)
    }
    /// A tool error as a REST error (its status from [`status_of`]).
    pub fn of_tool(e: &mcp_shared::ToolError) -> ApiError {
        ApiError::new(status_of(e.code), e.code, e.message.clone())
    }
    pub(crate) fn internal(e: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %e, "internal error on a REST endpoint");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            "internal error; see the root's log",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": { "code": self.code, "message": self.message, "retryable": self.code.retryable() } });
        if let Some(id) = self.event_id {
            body["event_id"] = json!(id);
        }
        let body = Json(body);
        let mut res = (self.status, body).into_response();
        if self.code == ErrorCode::AuditUnavailable {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            res.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer error=\"invalid_token\""),
            );
        }
        res
    }
}

fn unauthorized(app: &App, why: &str) -> ApiError {
    app.metrics.unauthenticated.inc();
    ApiError::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthenticated, why)
}

/// The HTTP status a tool error maps to on REST `/call`.
pub fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorCode::Forbidden
        | ErrorCode::CapabilityNotGranted
        | ErrorCode::EnvironmentForbidden => StatusCode::FORBIDDEN,
        ErrorCode::ForbiddenDestructive | ErrorCode::SkillDisabled => StatusCode::FORBIDDEN,
        ErrorCode::UnknownTool | ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::InvalidArguments => StatusCode::BAD_REQUEST,
        ErrorCode::ConfirmationRequired => StatusCode::PRECONDITION_REQUIRED,
        ErrorCode::IdempotencyConflict | ErrorCode::Conflict => StatusCode::CONFLICT,
        ErrorCode::ApprovalPending => StatusCode::ACCEPTED,
        ErrorCode::Busy => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
        ErrorCode::TargetOffline
        | ErrorCode::DescriptorUnavailable
        | ErrorCode::AuditUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        // The target refused what root forwarded, or its adapter broke: a gateway failure.
        ErrorCode::SignatureInvalid
        | ErrorCode::DeadlineExpired
        | ErrorCode::ReplayRejected
        | ErrorCode::ClockSkew
        | ErrorCode::AdapterFailed => StatusCode::BAD_GATEWAY,
        // 499: the client closed the request (nginx's convention; REST clients see it only
        // in the audit trail, since they cannot cancel).
        ErrorCode::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Resolves the bearer of a request: a usable lease, the operator, or nothing. With
/// replicas, a lease another replica issued is loaded from the store on first use.
async fn resolve(app: &App, headers: &HeaderMap) -> Option<Principal> {
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
pub struct Auth(pub Principal);
/// Extractor: an operator only (the bootstrap admin token, or the console cookie of an
/// operator's login).
pub struct Operator(pub crate::operators::OperatorId);

impl Operator {
    /// The actor id operator events name: `operator:<name>`.
    pub fn actor_id(&self) -> String {
        self.0.actor_id()
    }
}
/// Extractor: a lease only.
pub struct LeaseAuth(pub Arc<lease_manager::LeaseEntry>);

impl FromRequestParts<Arc<App>> for Auth {
    type Rejection = ApiError;
    async fn from_request_parts(
        parts: &mut http::request::Parts,
        app: &Arc<App>,
    ) -> Result<Self, ApiError> {
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

impl FromRequestParts<Arc<App>> for Operator {
    type Rejection = ApiError;
    async fn from_request_parts(
        parts: &mut http::request::Parts,
        app: &Arc<App>,
    ) -> Result<Self, ApiError> {
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

impl FromRequestParts<Arc<App>> for LeaseAuth {
    type Rejection = ApiError;
    async fn from_request_parts(
        parts: &mut http::request::Parts,
        app: &Arc<App>,
    ) -> Result<Self, ApiError> {
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

fn host_allowed(allowed: &[String], host: &str) -> bool {
    let host = host.trim().to_ascii_lowercase();
    // Strip the port: `[::1]:80`, `127.0.0.1:80`, `name:80`.
    let bare = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("").to_string()
    } else if host.matches(':').count() == 1 {
        host.split(':').next().unwrap_or("").to_string()
    } else {
        host.clone()
    };
    allowed.iter().any(|a| {
        let a = a.to_ascii_lowercase();
        a == bare || a == host
    })
}

fn origin_allowed(app: &App, origin: &str) -> bool {
    if app
        .config
        .allowed_origins
        .iter()
        .any(|o| o.eq_ignore_ascii_case(origin))
    {
        return true;
    }
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    rest.is_some_and(|authority| {
        !authority.contains('/') && host_allowed(&app.config.allowed_hosts, authority)
    })
}

/// DNS-rebinding protection: `Host` must be an allowed host, and a present `Origin` must be
/// an allowed origin. Refusals are 403 with a JSON-RPC-shaped body (MCP clients parse it).
async fn guard_host_origin(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    // The replica channel is called by other replicas at their advertised address, never by
    // a browser, and is authenticated per request (no ambient credential to rebind).
    if req.uri().path() == crate::replica::forward::ROUTE_PATH {
        return next.run(req).await;
    }
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()));
    let refuse = |why: String| {
        (StatusCode::FORBIDDEN, Json(json!({ "jsonrpc": "2.0", "id": null, "error": { "code": -32600, "message": why } })))
            .into_response()
    };
    match host {
        Some(h) if host_allowed(&app.config.allowed_hosts, h) => {}
        Some(h) => return refuse(format!("host `{h}` is not allowed")),
        None => return refuse("missing Host header".into()),
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let o = origin.to_str().unwrap_or("");
        if !origin_allowed(&app, o) {
            return refuse(format!("origin `{o}` is not allowed"));
        }
    }
    next.run(req).await
}

/// `/mcp` admission: a usable lease bearer, and an MCP session only with the lease that
/// opened it.
async fn mcp_auth(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
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
    if let Some(sid) = req
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        && let Some(owner) = app.mcp.sessions.get(sid)
        && owner.value() != lease.session_id()
    {
        return (StatusCode::NOT_FOUND, Json(json!({ "jsonrpc": "2.0", "id": null, "error": { "code": -32001, "message": "session not found" } })))
            .into_response();
    }
    lease.touch();
    let lease_id = lease.session_id().to_string();
    req.extensions_mut().insert(Principal::Lease(lease));
    let res = next.run(req).await;
    if let Some(sid) = res
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
    {
        app.mcp.sessions.entry(sid.to_string()).or_insert(lease_id);
    }
    res
}

// ---- routes ---------------------------------------------------------------------------------

/// Who may call a route, and whether a call is an operator action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone (health).
    Public,
    /// A lease or an operator; each sees what it may.
    Any,
    /// A lease's bearer (tool calls).
    Lease,
    /// An operator; reads nothing changes, so no audit event.
    OperatorRead,
    /// An operator; every call is one audit event naming the operator, refusals included.
    OperatorAction,
    /// A lease (its own) or an operator; every call is one audit event naming the caller.
    AnyAction,
    /// A hub's token, checked before the upgrade.
    Hub,
    /// Another replica of the zone (its own credential).
    Replica,
}

/// A route root serves: method, path (axum's syntax) and who may call it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub method: &'static str,
    pub path: &'static str,
    pub access: Access,
}

type Route = (Endpoint, axum::routing::MethodRouter<Arc<App>>);

/// Every REST route with its handler; [`endpoints`] lists them (the console's are in
/// `console`, `/mcp` apart) and [`router`] serves exactly these.
fn routes() -> Vec<Route> {
    use crate::api::{approvals, inspect, leases, observe, run_profile, targets};
    use crate::{operators, replica};
    use Access::*;
    let r = |method, path, access, handler| {
        (
            Endpoint {
                method,
                path,
                access,
            },
            handler,
        )
    };
    vec![
        r("GET", "/v1/root/mcp/foundation", Any, get(foundation)),
        r("GET", "/v1/root/mcp/contracts", Any, get(list_contracts)),
        r(
            "GET",
            "/v1/root/mcp/contracts/{tool_id}",
            Any,
            get(get_contract),
        ),
        r(
            "GET",
            "/v1/root/mcp/descriptors",
            Any,
            get(list_descriptors),
        ),
        r(
            "POST",
            "/v1/root/mcp/descriptors",
            OperatorAction,
            post(publish_descriptors),
        ),
        r(
            "GET",
            "/v1/root/mcp/descriptors/{id}",
            Any,
            get(get_descriptor),
        ),
        r(
            "GET",
            "/v1/root/mcp/sessions",
            OperatorRead,
            get(leases::list),
        ),
        r(
            "POST",
            "/v1/root/mcp/sessions",
            OperatorAction,
            post(leases::create),
        ),
        r(
            "GET",
            "/v1/root/mcp/sessions/{id}",
            OperatorRead,
            get(leases::get),
        ),
        r(
            "POST",
            "/v1/root/mcp/sessions/{id}/revoke",
            OperatorAction,
            post(leases::revoke),
        ),
        r(
            "POST",
            "/v1/root/mcp/sessions/{id}/rotate",
            OperatorAction,
            post(leases::rotate),
        ),
        r(
            "POST",
            "/v1/root/mcp/sessions/{id}/run-profile",
            AnyAction,
            post(run_profile::post),
        ),
        r(
            "POST",
            "/v1/root/mcp/run-profiles/verify",
            OperatorRead,
            post(run_profile::verify),
        ),
        r("POST", "/v1/root/mcp/call", Lease, post(rest_call)),
        r(
            "GET",
            "/v1/root/mcp/approvals",
            OperatorRead,
            get(approvals::list),
        ),
        r(
            "GET",
            "/v1/root/mcp/approvals/{id}",
            OperatorRead,
            get(approvals::show),
        ),
        r(
            "POST",
            "/v1/root/mcp/approvals/{id}/{decision}",
            OperatorAction,
            post(approvals::decide),
        ),
        r("GET", "/v1/root/mcp/audit", OperatorRead, get(query_audit)),
        r(
            "GET",
            "/v1/root/mcp/audit/verify",
            OperatorRead,
            get(verify_audit),
        ),
        r(
            "GET",
            "/v1/root/mcp/audit/stream",
            OperatorRead,
            get(observe::stream),
        ),
        r(
            "GET",
            "/v1/root/mcp/audit/usage",
            OperatorRead,
            get(observe::usage),
        ),
        r(
            "GET",
            "/v1/root/mcp/audit/{event_id}",
            OperatorRead,
            get(get_audit_event),
        ),
        r("GET", "/v1/root/hubs", OperatorRead, get(targets::list)),
        r(
            "POST",
            "/v1/root/hubs",
            OperatorAction,
            post(targets::enroll),
        ),
        r(
            "GET",
            "/v1/root/hubs/connect",
            Hub,
            get(crate::api::hub_link::connect),
        ),
        r(
            "POST",
            "/v1/root/hubs/{target_id}/rotate-key",
            OperatorAction,
            post(targets::rotate_key),
        ),
        r(
            "POST",
            "/v1/root/hubs/{target_id}/skills/{skill}/{command}",
            OperatorAction,
            post(skill::command),
        ),
        // A read of the target's tool, audited as a call naming the operator.
        r(
            "POST",
            "/v1/root/hubs/{target_id}/read",
            OperatorAction,
            post(inspect::operator_read),
        ),
        r(
            "GET",
            "/v1/root/operators",
            OperatorRead,
            get(operators::list),
        ),
        r(
            "POST",
            "/v1/root/operators",
            OperatorAction,
            post(operators::add),
        ),
        r(
            "POST",
            "/v1/root/operators/{name}/revoke",
            OperatorAction,
            post(operators::revoke),
        ),
        r("GET", "/v1/root/replicas", Any, get(replica::list)),
        r(
            "POST",
            replica::forward::ROUTE_PATH,
            Replica,
            post(replica::forward::internal_route),
        ),
        r("GET", "/healthz", Public, get(|| async { "ok" })),
        r("GET", "/readyz", Public, get(readyz)),
        r("GET", "/metrics", OperatorRead, get(metrics)),
    ]
}

/// Every route root serves but `/mcp`: the REST family's and the console's.
pub fn endpoints() -> Vec<Endpoint> {
    routes()
        .into_iter()
        .map(|(e, _)| e)
        .chain(crate::api::console::endpoints())
        .collect()
}

pub fn router(app: Arc<App>, mcp: axum::routing::MethodRouter<()>) -> Router {
    let rest = routes()
        .into_iter()
        .fold(Router::new(), |router, (e, handler)| {
            router.route(e.path, handler)
        })
        .with_state(app.clone())
        .layer(middleware::from_fn_with_state(
            app.clone(),
            crate::mcp::front::rest_guard,
        ));
    let mcp = Router::new()
        .route("/mcp", mcp)
        .layer(middleware::from_fn_with_state(
            app.clone(),
            crate::mcp::front::mcp_guard,
        ))
        .layer(middleware::from_fn_with_state(app.clone(), mcp_auth));
    rest.merge(mcp)
        .merge(crate::api::console::routes(app.clone()))
        .fallback(|| async { ApiError::not_found("no such endpoint") })
        .layer(middleware::from_fn_with_state(
            app.clone(),
            guard_host_origin,
        ))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(
            app.config.limits.max_body_bytes,
        ))
        .layer(middleware::from_fn_with_state(
            app.clone(),
            crate::mcp::front::shape_refusals,
        ))
}

async fn readyz(State(app): State<Arc<App>>) -> Result<&'static str, ApiError> {
    // Public: says since when, never the cause (that is in the log and the outage record).
    if let Some(since) = app.audit.health.unavailable_since() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::AuditUnavailable,
            format!(
                "the audit trail cannot be written since {}; calls are refused until it can",
                mcp_shared::time::format(since)
            ),
        ));
    }
    tokio::time::timeout(Duration::from_secs(2), app.store.ping())
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Internal,
                "database did not answer",
            )
        })?
        .map_err(|e| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Internal,
                e.to_string(),
            )
        })?;
    Ok("ready")
}

async fn metrics(State(app): State<Arc<App>>, _op: Operator) -> Response {
    app.metrics
        .active_leases
        .set(app.leases.active_count() as i64);
    let connected = call_t!(
        app.actors.router.load(),
        router::Msg::Connected,
        RPC_TIMEOUT_MS
    )
    .unwrap_or(0);
    app.metrics.connected_targets.set(connected as i64);
    app.metrics
        .audit_available
        .set(i64::from(app.audit.health.is_available()));
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        app.metrics.encode(),
    )
        .into_response()
}

async fn profiles(app: &App) -> Result<Arc<mcp_shared::profile::ProfileRegistry>, ApiError> {
    call_t!(
        app.actors.policy.load(),
        policy::Msg::Profiles,
        RPC_TIMEOUT_MS
    )
    .map_err(ApiError::internal)
}

async fn foundation(State(app): State<Arc<App>>, auth: Auth) -> Result<Json<Value>, ApiError> {
    let profiles = profiles(&app).await?;
    let zone_view = crate::replica::view_for(&app, &auth).await?;
    let mut planes: Vec<&str> = profiles.profiles.iter().map(|p| p.plane.as_str()).collect();
    planes.sort();
    planes.dedup();
    Ok(Json(json!({
        "name": "mcp-root",
        "version": env!("CARGO_PKG_VERSION"),
        "zone": app.config.zone,
        "mcp_endpoint": "/mcp",
        "protocol_versions": crate::mcp::SUPPORTED_VERSIONS.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
        "planes": planes,
        "capability_profiles": profiles.profiles,
        "surface_classes": {
            "routing": ["descriptive_cached", "operational_read", "operational_write"],
            "side_effect": ["read", "write", "destructive"],
        },
        "error_codes": [
            "unauthenticated", "forbidden", "unknown_tool", "capability_not_granted", "environment_forbidden",
            "invalid_arguments", "target_offline", "timeout", "busy", "skill_disabled", "confirmation_required",
            "forbidden_destructive", "descriptor_unavailable", "signature_invalid", "deadline_expired",
            "replay_rejected", "adapter_failed", "cancelled", "idempotency_conflict", "not_found", "conflict", "approval_pending", "audit_unavailable", "clock_skew", "internal"
        ],
        "endpoints": [
            "/mcp", "/v1/root/mcp/foundation", "/v1/root/mcp/contracts", "/v1/root/mcp/descriptors",
            "/v1/root/mcp/sessions", "/v1/root/mcp/sessions/{id}/run-profile", "/v1/root/mcp/run-profiles/verify",
            "/v1/root/mcp/call", "/v1/root/mcp/audit", "/v1/root/mcp/audit/stream",
            "/v1/root/mcp/audit/usage", "/v1/root/mcp/audit/verify", "/v1/root/mcp/approvals", "/v1/root/hubs",
            "/v1/root/replicas",
            "/healthz", "/readyz", "/metrics", "/ui/"
        ],
        "limits": {
            "max_lease_ttl_sec": app.config.limits.max_lease_ttl_sec,
            "per_lease_in_flight": app.config.limits.per_lease_in_flight,
            "per_target_in_flight": app.config.limits.per_target_in_flight,
            "confirmation_ttl_sec": app.config.limits.confirmation_ttl_sec,
            "approval_ttl_sec": app.config.limits.approval_ttl_sec,
            "max_body_bytes": app.config.limits.max_body_bytes,
        },
        "tools": app.catalog.contracts.all().len(),
        "skill_catalog": {
            "ontology": crate::skill_catalog::ontology_uri(&app.config.skill_catalog.scheme),
            "skills": crate::skill_catalog::skill_prefix(&app.config.skill_catalog.scheme),
        },
        "replicas": zone_view,
    })))
}

async fn visible_ids(app: &App, p: &Principal) -> Result<Option<Vec<String>>, ApiError> {
    match p {
        Principal::Operator(_) => Ok(None),
        Principal::Lease(l) => {
            let v = app.visible_tools(l).await.map_err(ApiError::internal)?;
            Ok(Some(v.iter().map(|c| c.contract.tool_id.clone()).collect()))
        }
    }
}

async fn list_contracts(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
) -> Result<Json<Value>, ApiError> {
    let visible = visible_ids(&app, &p).await?;
    let contracts: Vec<_> = app
        .catalog
        .contracts
        .all()
        .iter()
        .filter(|c| {
            visible
                .as_ref()
                .is_none_or(|v| v.contains(&c.contract.tool_id))
        })
        .map(|c| &c.contract)
        .collect();
    Ok(Json(json!({ "contracts": contracts })))
}

async fn get_contract(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    Path(tool_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let visible = visible_ids(&app, &p).await?;
    match app.catalog.contracts.get(&tool_id) {
        Some(c) if visible.as_ref().is_none_or(|v| v.contains(&tool_id)) => Ok(Json(
            serde_json::to_value(&c.contract).map_err(ApiError::internal)?,
        )),
        _ => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::UnknownTool,
            format!("no tool `{tool_id}` visible to this bearer"),
        )),
    }
}

async fn descriptors_for(
    app: &App,
    p: &Principal,
) -> Result<
    (
        Arc<crate::descriptors::DescriptorSet>,
        Vec<Arc<mcp_shared::descriptor::Descriptor>>,
    ),
    ApiError,
> {
    let visible = match p {
        Principal::Operator(_) => None,
        Principal::Lease(l) => Some(app.visible_tools(l).await.map_err(ApiError::internal)?),
    };
    let set = app.descriptors.snapshot();
    let readable = app.readable_in(&set, visible.as_deref());
    Ok((set, readable))
}

/// A descriptor's JSON with what root says about it now: `freshness` and `expires_at`.
fn served_json(app: &App, d: &mcp_shared::descriptor::Descriptor, full: bool) -> Value {
    let mut v = if full {
        serde_json::to_value(d).unwrap_or(Value::Null)
    } else {
        let mut v = serde_json::to_value(&d.freshness).unwrap_or(Value::Null);
        v["class"] = json!(d.class);
        v["title"] = json!(d.title);
        v
    };
    if let (Value::Object(m), Value::Object(extra)) =
        (&mut v, crate::descriptors::served_state(d, app.clock.now()))
    {
        m.extend(extra);
    }
    v
}

async fn list_descriptors(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
) -> Result<Json<Value>, ApiError> {
    let (set, readable) = descriptors_for(&app, &p).await?;
    let list: Vec<Value> = readable
        .iter()
        .map(|d| served_json(&app, d, false))
        .collect();
    Ok(Json(json!({ "descriptors": list, "set": set.origin })))
}

async fn get_descriptor(
    State(app): State<Arc<App>>,
    Auth(p): Auth,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    descriptors_for(&app, &p)
        .await?
        .1
        .into_iter()
        .find(|d| d.freshness.descriptor_id == id)
        .map(|d| Json(served_json(&app, &d, true)))
        .ok_or_else(|| ApiError::not_found(format!("no descriptor `{id}` readable by this bearer")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PublishBody {
    /// The whole set; items are named `descriptors[i]` (or by `names[i]`) in errors.
    descriptors: Vec<Value>,
    /// Optional labels for the items (the CLI sends file names).
    #[serde(default)]
    names: Vec<String>,
}

/// `POST /v1/root/mcp/descriptors` (operator): validate a whole set and serve it instead of
/// the current one; a refused set changes nothing (422 with the first reason).
async fn publish_descriptors(
    State(app): State<Arc<App>>,
    op: Operator,
    body: Result<Json<PublishBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let parsed = body.map(|Json(b)| b).map_err(|e| e.body_text());
    let request = match &parsed {
        Ok(b) => json!({ "descriptors": b.descriptors.len() }),
        Err(why) => json!({ "invalid_body": why }),
    };
    let asked = crate::api::audited::Asked {
        tool_id: "admin.descriptors.publish",
        target_id: None,
        adapter: Some("root.descriptor_cache".into()),
        request,
    };
    let (set, event_id) = crate::api::audited::audited(&app, &op, asked, async {
        let body = parsed.map_err(ApiError::bad_request)?;
        let items: Vec<(String, Value)> = body
            .descriptors
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                let name = body
                    .names
                    .get(i)
                    .filter(|n| n.len() <= 200)
                    .cloned()
                    .unwrap_or_else(|| format!("descriptors[{i}]"));
                (name, v)
            })
            .collect();
        let set = crate::api::descriptors::publish(&app, items)
            .await
            .map_err(|e| match e {
                crate::descriptors::PublishError::Invalid(e) => ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    ErrorCode::InvalidArguments,
                    format!("descriptor set refused, nothing changed: {e}"),
                ),
                e => ApiError::internal(e),
            })?;
        let summary = format!(
            "descriptor set revision {} ({} descriptors, {})",
            set.origin.revision.unwrap_or_default(),
            set.by_id.len(),
            set.origin.set_hash
        );
        Ok((set, summary))
    })
    .await?;
    Ok(Json(json!({
        "set": set.origin,
        "descriptors": set.by_id.values().map(|d| served_json(&app, d, false)).collect::<Vec<_>>(),
        "skill_catalog": set.catalog.as_ref().map(|c| json!({
            "ontology": c.ontology.uri,
            "skills": c.skills.len(),
            "manifest_sha256": c.ontology.meta.manifest_sha256,
        })),
        "event_id": event_id,
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallBody {
    tool_id: String,
    #[serde(default)]
    arguments: Option<Value>,
}

async fn rest_call(
    State(app): State<Arc<App>>,
    LeaseAuth(lease): LeaseAuth,
    headers: HeaderMap,
    body: Result<Json<CallBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let ctx = CallContext {
        surface: Surface::Rest,
        lease,
        trace_id: call::trace_id_from(headers.get("traceparent").and_then(|v| v.to_str().ok())),
        request_id: uuid::Uuid::now_v7().to_string(),
        cancel: None,
        operator: None,
    };
    let arguments = body.arguments.unwrap_or_else(|| json!({}));
    let outcome = call::call(&app, ctx, &body.tool_id, arguments).await;
    if let Some(e) = outcome.unaudited_error() {
        return Err(ApiError::of_tool(e));
    }
    let status = outcome
        .response
        .error
        .as_ref()
        .map(|e| status_of(e.code))
        .unwrap_or(StatusCode::OK);
    Ok((status, Json(outcome.response)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    target_id: Option<String>,
    tool_id: Option<String>,
    status: Option<String>,
    trace_id: Option<String>,
    /// `operator` or `lease:<session id>`.
    actor: Option<String>,
    /// RFC 3339.
    since: Option<String>,
    until: Option<String>,
    limit: Option<i64>,
    /// Opaque cursor from a previous page.
    cursor: Option<String>,
    /// `asc` for oldest first (exports).
    order: Option<String>,
}

fn parse_time(name: &str, v: &Option<String>) -> Result<Option<i64>, ApiError> {
    v.as_deref()
        .map(|s| {
            mcp_shared::time::parse(s)
                .map(mcp_shared::time::unix_ms)
                .map_err(|e| ApiError::bad_request(format!("{name} must be RFC 3339: {e}")))
        })
        .transpose()
}

async fn query_audit(
    State(app): State<Arc<App>>,
    _op: Operator,
    q: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let ascending = match q.order.as_deref() {
        None | Some("desc") => false,
        Some("asc") => true,
        Some(o) => {
            return Err(ApiError::bad_request(format!(
                "order must be asc or desc, not `{o}`"
            )));
        }
    };
    if let Some(s) = &q.status
        && !["ok", "error", "denied"].contains(&s.as_str())
    {
        return Err(ApiError::bad_request(format!(
            "status must be ok, error or denied, not `{s}`"
        )));
    }
    let cursor = q
        .cursor
        .as_deref()
        .map(|c| {
            c.strip_prefix("s:")
                .and_then(|n| n.parse::<i64>().ok())
                .ok_or_else(|| ApiError::bad_request("invalid cursor"))
        })
        .transpose()?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request("limit must be between 1 and 1000"));
    }
    let filter = AuditFilter {
        target_id: q.target_id,
        tool_id: q.tool_id,
        status: q.status,
        trace_id: q.trace_id,
        actor: q.actor,
        event_id: None,
        since_ms: parse_time("since", &q.since)?,
        until_ms: parse_time("until", &q.until)?,
        before_seq: if ascending { None } else { cursor },
        after_seq: if ascending { cursor } else { None },
        limit,
        ascending,
    };
    let rows = app
        .store
        .query_audit(&filter)
        .await
        .map_err(ApiError::internal)?;
    let next = (rows.len() as i64 == limit)
        .then(|| rows.last().map(|r| format!("s:{}", r.seq)))
        .flatten();
    let events: Vec<Value> = rows
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(&r.event).unwrap_or(Value::Null);
            v["seq"] = json!(r.seq);
            v["hash"] = json!(r.hash);
            if let Some(replica) = &r.replica_id {
                v["replica_id"] = json!(replica);
            }
            v
        })
        .collect();
    Ok(Json(json!({ "events": events, "next_cursor": next })))
}

async fn get_audit_event(
    State(app): State<Arc<App>>,
    _op: Operator,
    Path(event_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let filter = AuditFilter {
        event_id: Some(event_id.clone()),
        limit: 1,
        ..Default::default()
    };
    let rows = app
        .store
        .query_audit(&filter)
        .await
        .map_err(ApiError::internal)?;
    let r = rows
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::not_found(format!("no audit event `{event_id}`")))?;
    let mut v = serde_json::to_value(&r.event).map_err(ApiError::internal)?;
    v["seq"] = json!(r.seq);
    v["hash"] = json!(r.hash);
    v["prev_hash"] = json!(r.prev_hash);
    if let Some(replica) = &r.replica_id {
        v["replica_id"] = json!(replica);
    }
    Ok(Json(v))
}

async fn verify_audit(State(app): State<Arc<App>>, _op: Operator) -> Result<Json<Value>, ApiError> {
    let v = crate::audit::verify(&app.store)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(json!(v)))
}
