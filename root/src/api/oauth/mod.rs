//! OAuth 2.1 sign-in that ends in a lease (`[oauth] discovery`, off by default): root is a
//! protected resource (RFC 9728 metadata at `/.well-known/oauth-protected-resource` and its
//! `/mcp`-suffixed form, `resource_metadata` in every 401's challenge) and its own
//! authorization server (RFC 8414 metadata; authorization code with PKCE S256 only; clients
//! registered dynamically, RFC 7591, or by client ID metadata documents, `documents`; tokens
//! bound to this root's MCP URL, RFC 8707).
//!
//! A sign-in: the client registers (`register`), sends the person's browser to
//! `/oauth/authorize`, which checks the request and hands it, sealed, to the console's MCP
//! Server dialog (`authorize`); a signed-in operator picks target, capability profile and
//! lifetime and approves (an operator action, audited), which records a grant with a
//! single-use code and sends the browser back to the client. The client exchanges the code
//! (`token`) for an access token that is a lease like any other, issued under the approving
//! operator's name through that client (audience `oauth:<client_id>`), and a refresh token
//! that rotates: each refresh issues the next lease of the same lineage while the approval
//! lasts. Revoking the lease, a reused code or a reused refresh token ends the grant.
//!
//! Invariants: codes and refresh tokens are stored as hashes only and never logged; a token
//! never outlives the operator's approval, nor the operator; nothing is read from a URL
//! but the authorization request's own parameters.

mod authorize;
mod documents;
mod protocol;
mod register;
mod token;

pub(crate) use documents::Documents;
pub(crate) use protocol::Urls;

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{FromRef, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::api::endpoint::{Access, Endpoint};
use crate::app::App;
use crate::roles::Role;

/// The protected-resource metadata path (RFC 9728), and its form for `/mcp`.
pub(crate) const RESOURCE_METADATA: &str = "/.well-known/oauth-protected-resource";
const RESOURCE_METADATA_MCP: &str = "/.well-known/oauth-protected-resource/mcp";
/// The authorization-server metadata path (RFC 8414).
pub(crate) const SERVER_METADATA: &str = "/.well-known/oauth-authorization-server";

/// The OAuth endpoints the operator calls (the console's dialog); the client's endpoints
/// (`/oauth/register`, `/oauth/authorize`, `/oauth/token`) take no root credential.
pub(crate) fn endpoints() -> Vec<Endpoint> {
    vec![
        Endpoint {
            method: "POST",
            path: authorize::REQUEST_PATH,
            access: Access::OperatorRead(Role::Approver),
        },
        Endpoint {
            method: "POST",
            path: authorize::APPROVE_PATH,
            access: Access::OperatorAction(Role::Approver),
        },
        Endpoint {
            method: "POST",
            path: authorize::DENY_PATH,
            access: Access::OperatorAction(Role::Approver),
        },
    ]
}

/// The OAuth routes; none (a clean 404 for every discovery probe) while discovery is off.
pub(crate) fn routes(app: Arc<App>) -> Router {
    if !app.config.oauth.discovery {
        return Router::new();
    }
    // The operator's routes behind the role `endpoints` declares for them.
    let role = |path: &str, handler| {
        let e = endpoints()
            .into_iter()
            .find(|e| e.path == path)
            .expect("every operator route of OAuth is in endpoints()");
        crate::api::principal::with_role(&app, e, handler)
    };
    Router::new()
        .route(RESOURCE_METADATA, get(resource_metadata))
        .route(RESOURCE_METADATA_MCP, get(resource_metadata))
        .route(SERVER_METADATA, get(server_metadata))
        .route("/oauth/register", post(register::register))
        .route("/oauth/authorize", get(authorize::authorize))
        .route(
            authorize::REQUEST_PATH,
            role(authorize::REQUEST_PATH, post(authorize::describe)),
        )
        .route(
            authorize::APPROVE_PATH,
            role(authorize::APPROVE_PATH, post(authorize::approve)),
        )
        .route(
            authorize::DENY_PATH,
            role(authorize::DENY_PATH, post(authorize::deny)),
        )
        .route("/oauth/token", post(token::token))
        .route("/oauth/revoke", post(token::revoke))
        .with_state(Oauth {
            app,
            documents: Default::default(),
            registrations: Default::default(),
        })
}

/// The OAuth server's state: the daemon's, plus what only sign-in keeps between requests.
#[derive(Clone)]
pub(crate) struct Oauth {
    app: Arc<App>,
    /// Client ID metadata documents fetched for sign-in.
    documents: Arc<Documents>,
    /// Registrations per client address.
    registrations: Arc<register::Registrations>,
}

impl FromRef<Oauth> for Arc<App> {
    fn from_ref(o: &Oauth) -> Arc<App> {
        o.app.clone()
    }
}

impl FromRef<Oauth> for Arc<Documents> {
    fn from_ref(o: &Oauth) -> Arc<Documents> {
        o.documents.clone()
    }
}

impl FromRef<Oauth> for Arc<register::Registrations> {
    fn from_ref(o: &Oauth) -> Arc<register::Registrations> {
        o.registrations.clone()
    }
}

/// The scopes root grants: capability profile names (a token carries exactly one).
fn scopes(app: &App) -> Vec<String> {
    app.catalog
        .profiles
        .profiles
        .iter()
        .map(|p| p.name.clone())
        .collect()
}

/// `GET /.well-known/oauth-protected-resource[/mcp]` (RFC 9728).
async fn resource_metadata(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let urls = Urls::of(&app, &headers);
    public_json(json!({
        "resource": urls.mcp(),
        "authorization_servers": [urls.issuer],
        "scopes_supported": scopes(&app),
        "bearer_methods_supported": ["header"],
        "resource_name": format!("Root MCP gateway, zone {}", app.config.zone),
        // RFC 9449 §5.1.
        "dpop_signing_alg_values_supported": crate::dpop::ALGORITHM_NAMES,
        "dpop_bound_access_tokens_required":
            app.config.oauth.dpop == crate::config::DpopMode::Require,
    }))
}

/// `GET /.well-known/oauth-authorization-server` (RFC 8414).
async fn server_metadata(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let urls = Urls::of(&app, &headers);
    public_json(json!({
        "issuer": urls.issuer,
        "authorization_endpoint": urls.at("/oauth/authorize"),
        "token_endpoint": urls.at("/oauth/token"),
        "registration_endpoint": urls.at("/oauth/register"),
        "revocation_endpoint": urls.at("/oauth/revoke"),
        "revocation_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": scopes(&app),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": true,
        "client_id_metadata_document_supported": true,
        "dpop_signing_alg_values_supported": crate::dpop::ALGORITHM_NAMES,
    }))
}

/// Metadata any client may read, from any origin (browser-based clients discover too).
fn public_json(body: serde_json::Value) -> Response {
    let mut res = Json(body).into_response();
    res.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    res
}

/// The challenge of a 401 while discovery is on: where the protected-resource metadata is.
pub(crate) fn challenge(app: &App, headers: &HeaderMap) -> Option<HeaderValue> {
    if !app.config.oauth.discovery {
        return None;
    }
    let urls = Urls::of(app, headers);
    let scope = scopes(app).join(" ");
    HeaderValue::from_str(&format!(
        "Bearer error=\"invalid_token\", resource_metadata=\"{}\", scope=\"{scope}\"",
        urls.at(RESOURCE_METADATA_MCP)
    ))
    .ok()
}

/// The challenge of a 403 for a call the lease's profile does not grant, naming the
/// profiles that would (RFC 6750 `insufficient_scope`).
pub(crate) fn insufficient_scope(
    app: &App,
    headers: &HeaderMap,
    tool_id: &str,
) -> Option<HeaderValue> {
    if !app.config.oauth.discovery {
        return None;
    }
    let urls = Urls::of(app, headers);
    let granting: Vec<String> = app
        .catalog
        .profiles
        .profiles
        .iter()
        .filter(|p| app.effective_tools(p, false).iter().any(|t| t == tool_id))
        .map(|p| p.name.clone())
        .collect();
    HeaderValue::from_str(&format!(
        "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\"",
        granting.join(" "),
        urls.at(RESOURCE_METADATA_MCP)
    ))
    .ok()
}

#[cfg(test)]
mod tests {
    use super::protocol::pkce_matches;

    #[test]
    fn pkce_s256_is_the_base64url_sha256_of_the_verifier() {
        // The challenge as Python's hashlib and base64 compute it for this verifier.
        let verifier = "dBjftJeZ4CVP-mJ92aXxqMPRjUTr0uBY5z-VqECuQcg";
        let challenge = "le-0ARP0YVwocISqy7mDilnKomHeyeZatyEIYztrUU0";
        assert!(pkce_matches(verifier, challenge));
        assert!(!pkce_matches(
            verifier,
            "le-0ARP0YVwocISqy7mDilnKomHeyeZatyEIYztrUU1"
        ));
        assert!(!pkce_matches("short", challenge), "too short a verifier");
        assert!(
            !pkce_matches(&format!("{verifier}!"), challenge),
            "a character PKCE forbids"
        );
    }
}
