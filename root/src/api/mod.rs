//! HTTP surface: the MCP endpoint, the REST family `/v1/root/mcp/*`, health and metrics, and
//! the middleware in front of them (Host/Origin guard, body limit, bearer resolution).
//!
//! Invariant: actor identity comes from the bearer (lease or admin token), never from client
//! headers; tokens are never taken from query strings.

pub(crate) mod actions;
pub(crate) mod approvals;
mod audit;
pub(crate) mod audited;
pub mod bodies;
mod catalog;
pub(crate) mod checkpoints;
pub mod console;
pub(crate) mod cookie;
pub(crate) mod descriptors;
pub(crate) mod endpoint;
pub(crate) mod error;
pub(crate) mod fleet;
mod guard;
mod health;
pub(crate) mod hub_link;
pub(crate) mod inspect;
pub(crate) mod leases;
pub(crate) mod lifecycle;
pub(crate) mod oauth;
pub(crate) mod observe;
pub(crate) mod oidc;
pub(crate) mod operators;
pub(crate) mod paging;
pub(crate) mod principal;
mod refused;
pub(crate) mod replicas;
mod rest_call;
pub mod run_profile;
pub(crate) mod sinks;
pub(crate) mod skill;
pub(crate) mod targets;
pub(crate) mod witness;

use std::sync::Arc;

use axum::Router;
use axum::middleware::{self};
use axum::routing::{get, post};

use crate::app::App;

use audit::{get_audit_event, query_audit, verify_audit};
use catalog::{foundation, get_contract, get_descriptor, list_contracts, list_descriptors};
use descriptors::publish_descriptors;
pub use endpoint::{Access, Endpoint};
pub(crate) use error::ApiError;
use guard::guard_host_origin;
use health::{metrics, readyz};
use principal::mcp_auth;
use rest_call::rest_call;

type Route = (Endpoint, axum::routing::MethodRouter<Arc<App>>);

/// Every REST route with its handler; [`endpoints`] lists them (the console's are in
/// `console`, `/mcp` apart) and [`router`] serves exactly these.
fn routes() -> Vec<Route> {
    [mcp_routes(), audit_routes(), fleet_routes()].concat()
}

/// One route of the table: its endpoint (method, path, who may call it) and handler.
fn r(
    method: &'static str,
    path: &'static str,
    access: Access,
    handler: axum::routing::MethodRouter<Arc<App>>,
) -> Route {
    (
        Endpoint {
            method,
            path,
            access,
        },
        handler,
    )
}

/// The REST family: contracts, descriptors, leases, run profiles and calls.
fn mcp_routes() -> Vec<Route> {
    use crate::api::{leases, run_profile};
    use crate::roles::Role::*;
    use Access::*;
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
            OperatorAction(Admin),
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
            OperatorRead(Viewer),
            get(leases::list),
        ),
        r(
            "POST",
            "/v1/root/mcp/sessions",
            OperatorAction(Operator),
            post(leases::create),
        ),
        r(
            "GET",
            "/v1/root/mcp/sessions/{id}",
            OperatorRead(Viewer),
            get(leases::get),
        ),
        r(
            "GET",
            "/v1/root/mcp/sessions/{id}/delegation",
            OperatorRead(Viewer),
            get(leases::delegation),
        ),
        r(
            "POST",
            "/v1/root/mcp/sessions/{id}/revoke",
            OperatorAction(Operator),
            post(leases::revoke),
        ),
        r(
            "POST",
            "/v1/root/mcp/sessions/{id}/rotate",
            OperatorAction(Operator),
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
            OperatorRead(Auditor),
            post(run_profile::verify),
        ),
        r("POST", "/v1/root/mcp/call", Lease, post(rest_call)),
        r(
            "POST",
            actions::ACTIONS_ENDPOINT,
            Lease,
            post(actions::post),
        ),
    ]
}

/// The audit trail and approvals.
fn audit_routes() -> Vec<Route> {
    use crate::api::{approvals, checkpoints, observe, sinks, witness};
    use crate::roles::Role::*;
    use Access::*;
    vec![
        r(
            "GET",
            "/v1/root/mcp/approvals",
            OperatorRead(Approver),
            get(approvals::list),
        ),
        r(
            "GET",
            "/v1/root/mcp/approvals/{id}",
            OperatorRead(Approver),
            get(approvals::show),
        ),
        r(
            "POST",
            "/v1/root/mcp/approvals/{id}/{decision}",
            OperatorAction(Approver),
            post(approvals::decide),
        ),
        r(
            "GET",
            "/v1/root/mcp/audit",
            OperatorRead(Auditor),
            get(query_audit),
        ),
        r(
            "GET",
            "/v1/root/mcp/audit/verify",
            OperatorRead(Auditor),
            get(verify_audit),
        ),
        r(
            "GET",
            "/v1/root/mcp/audit/stream",
            OperatorRead(Auditor),
            get(observe::stream),
        ),
        r(
            "GET",
            "/v1/root/mcp/audit/usage",
            OperatorRead(Viewer),
            get(observe::usage),
        ),
        r(
            "GET",
            "/v1/root/mcp/audit/{event_id}",
            OperatorRead(Auditor),
            get(get_audit_event),
        ),
        r(
            "GET",
            "/v1/root/mcp/audit/key",
            Public,
            get(checkpoints::key),
        ),
        r(
            "GET",
            "/v1/root/mcp/audit/checkpoints",
            Public,
            get(checkpoints::list),
        ),
        r(
            "GET",
            "/v1/root/mcp/audit/proof/{event_id}",
            OperatorRead(Auditor),
            get(checkpoints::inclusion),
        ),
        r(
            "GET",
            "/v1/root/mcp/audit/consistency",
            OperatorRead(Auditor),
            get(checkpoints::consistency),
        ),
        r(
            "GET",
            "/v1/root/mcp/audit/chain",
            OperatorRead(Auditor),
            get(checkpoints::chain),
        ),
        r(
            "GET",
            "/v1/root/mcp/audit/sinks",
            OperatorRead(Auditor),
            get(sinks::list),
        ),
        r(
            "GET",
            "/v1/root/mcp/audit/witnesses",
            OperatorRead(Auditor),
            get(witness::peers),
        ),
        r("GET", "/v1/root/witness", Public, get(witness::show)),
        r(
            "POST",
            witness::ADD_CHECKPOINT,
            Public,
            post(witness::add_checkpoint),
        ),
    ]
}

/// Targets, operators, replicas, health and metrics.
fn fleet_routes() -> Vec<Route> {
    use crate::api::{inspect, targets};
    use crate::replica;
    use crate::roles::Role::*;
    use Access::*;
    vec![
        r(
            "GET",
            "/v1/root/hubs",
            OperatorRead(Viewer),
            get(targets::list),
        ),
        r(
            "POST",
            "/v1/root/hubs",
            OperatorAction(Admin),
            post(targets::enroll),
        ),
        r(
            "GET",
            "/v1/root/hubs/connect",
            Hub,
            get(crate::api::hub_link::connect),
        ),
        r(
            "GET",
            "/v1/root/hubs/{target_id}",
            OperatorRead(Viewer),
            get(targets::show),
        ),
        r(
            "POST",
            "/v1/root/hubs/{target_id}/rotate-key",
            OperatorAction(Admin),
            post(targets::rotate_key),
        ),
        r(
            "POST",
            "/v1/root/hubs/{target_id}/skills/{skill}/{command}",
            OperatorAction(Operator),
            post(skill::command),
        ),
        r(
            "POST",
            "/v1/root/hubs/{target_id}/labels",
            OperatorAction(Operator),
            post(crate::api::lifecycle::labels),
        ),
        r(
            "POST",
            "/v1/root/hubs/{target_id}/lifecycle/{command}",
            OperatorAction(Operator),
            post(crate::api::lifecycle::command),
        ),
        // Retirement ends a target for good: admin's, and matched before `{command}`.
        r(
            "POST",
            "/v1/root/hubs/{target_id}/lifecycle/retire",
            OperatorAction(Admin),
            post(crate::api::lifecycle::retire),
        ),
        r(
            "POST",
            "/v1/root/hubs/{target_id}/narrowing",
            OperatorAction(Operator),
            post(crate::api::lifecycle::narrowing),
        ),
        r(
            "GET",
            "/v1/root/fleet/runs",
            OperatorRead(Viewer),
            get(crate::api::fleet::list),
        ),
        r(
            "POST",
            "/v1/root/fleet/runs",
            OperatorAction(Operator),
            post(crate::api::fleet::start),
        ),
        r(
            "POST",
            "/v1/root/fleet/previews",
            OperatorAction(Operator),
            post(crate::api::fleet::preview),
        ),
        r(
            "GET",
            "/v1/root/fleet/runs/{run_id}",
            OperatorRead(Viewer),
            get(crate::api::fleet::show),
        ),
        r(
            "GET",
            "/v1/root/fleet/runs/{run_id}/targets/{target_id}",
            OperatorRead(Viewer),
            get(crate::api::fleet::target),
        ),
        r(
            "POST",
            "/v1/root/fleet/runs/{run_id}/{command}",
            OperatorAction(Operator),
            post(crate::api::fleet::command),
        ),
        r(
            "POST",
            "/v1/root/hubs/{target_id}/placement",
            OperatorAction(Operator),
            post(crate::api::lifecycle::placement),
        ),
        // A read of the target's tool, audited as a call naming the operator.
        r(
            "POST",
            "/v1/root/hubs/{target_id}/read",
            OperatorAction(Operator),
            post(inspect::operator_read),
        ),
        r(
            "GET",
            "/v1/root/operators",
            OperatorRead(Admin),
            get(operators::list),
        ),
        r(
            "GET",
            "/v1/root/operators/breakglass",
            OperatorRead(Viewer),
            get(operators::breakglass),
        ),
        r(
            "POST",
            "/v1/root/operators",
            OperatorAction(Admin),
            post(operators::add),
        ),
        r(
            "POST",
            "/v1/root/operators/{name}/revoke",
            OperatorAction(Admin),
            post(operators::revoke),
        ),
        r("GET", "/v1/root/replicas", Any, get(replicas::list)),
        r(
            "POST",
            replica::forward::ROUTE_PATH,
            Replica,
            post(replica::forward::internal_route),
        ),
        r("GET", "/healthz", Public, get(|| async { "ok" })),
        r("GET", "/readyz", Public, get(readyz)),
        r("GET", "/metrics", OperatorRead(Viewer), get(metrics)),
    ]
}

/// Every route root serves but `/mcp`: the REST family's and the console's.
pub fn endpoints() -> Vec<Endpoint> {
    routes()
        .into_iter()
        .map(|(e, _)| e)
        .chain(crate::api::console::endpoints())
        .chain(oauth::endpoints())
        .chain(oidc::endpoints())
        .collect()
}

pub(crate) fn router(app: Arc<App>, mcp: axum::routing::MethodRouter<()>) -> Router {
    catalog::SERVED.get_or_init(endpoints);
    let rest = routes()
        .into_iter()
        .fold(Router::new(), |router, (e, handler)| {
            router.route(e.path, principal::with_role(&app, e, handler))
        })
        .with_state(app.clone())
        .layer(middleware::from_fn_with_state(
            app.clone(),
            crate::mcp::front::rest_guard,
        ));
    let mcp = Router::new()
        .route("/mcp", mcp)
        .layer(middleware::from_fn_with_state(app.clone(), mcp_auth));
    rest.merge(mcp)
        .merge(crate::api::console::routes(app.clone()))
        .merge(oauth::routes(app.clone()))
        .merge(oidc::routes(app.clone()))
        .fallback(|| async { ApiError::not_found("no such endpoint") })
        .layer(axum::Extension(Arc::new(hub_link::door::HubDoor::new(
            app.config.limits.max_hub_links,
        ))))
        .layer(middleware::from_fn_with_state(
            app.clone(),
            refused::on_unauthorized,
        ))
        .layer(middleware::from_fn_with_state(
            app.clone(),
            principal::on_admin_token,
        ))
        .layer(middleware::from_fn_with_state(
            app.clone(),
            guard_host_origin,
        ))
        .layer(middleware::from_fn(crate::mcp::front::refuse_nul_uri))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(
            app.config.limits.max_body_bytes,
        ))
        .layer(middleware::from_fn_with_state(
            app.clone(),
            crate::mcp::front::shape_refusals,
        ))
}
