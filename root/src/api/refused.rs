//! A refused credential (`401`, wherever it came from): the OAuth challenge while discovery is
//! on (a client learns where to sign in from any refused request), and one `denied` audit
//! event, `auth.refuse`, naming the address, bounded per address and overall
//! (`audit::refusals`) so a flood of guesses cannot fill the trail. The event never holds the
//! credential, only what kind it looked like.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use mcp_shared::error::ErrorCode;
use serde_json::json;

use crate::app::App;
use crate::audit::refusals::Admit;

/// Middleware on every route (see the module's header).
pub(crate) async fn on_unauthorized(
    State(app): State<Arc<App>>,
    req: Request,
    next: Next,
) -> Response {
    // Kept for the rare 401 only: cheap clones (shared bytes), no map built, no parsing.
    let method = req.method().clone();
    let uri = req.uri().clone();
    let headers = [header::HOST, header::AUTHORIZATION, header::COOKIE]
        .map(|name| req.headers().get(&name).cloned().map(|v| (name, v)));
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let mut res = next.run(req).await;
    if res.status() != StatusCode::UNAUTHORIZED {
        return res;
    }
    let kept: HeaderMap = headers.into_iter().flatten().collect();
    // A refused DPoP proof or binding keeps its own challenge (and says it in the event).
    let dpop = res
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.starts_with("DPoP "))
        .map(str::to_owned);
    if let Some(c) = crate::api::oauth::challenge(&app, &kept) {
        match dpop {
            Some(_) => res.headers_mut().append(header::WWW_AUTHENTICATE, c),
            None => res
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, c)
                .is_some(),
        };
    }
    let unrecorded = match peer.map(|ip| app.refusals.admit(ip, Instant::now())) {
        Some(Admit::Record { unrecorded }) => unrecorded,
        // Without a peer address (never from the listener): recorded, uncounted.
        None => 0,
        Some(Admit::Count) => {
            app.metrics.unauthenticated_unrecorded.inc();
            return res;
        }
    };
    let surface = if uri.path() == "/mcp" {
        mcp_shared::event::Surface::Mcp
    } else {
        mcp_shared::event::Surface::Rest
    };
    let action = crate::audit::Recorded {
        surface,
        actor: match peer {
            Some(ip) => format!("address:{ip}"),
            None => "address:unknown".into(),
        },
        tool_id: "auth.refuse".into(),
        target_id: None,
        adapter: None,
        started_at: mcp_shared::time::now(),
        request: json!({
            "method": method.as_str(),
            "path": uri.path(),
            "credential": credential(&kept),
            "unrecorded_before": unrecorded,
        }),
        trace_id: None,
    };
    let error = mcp_shared::ToolError::new(
        ErrorCode::Unauthenticated,
        match &dpop {
            Some(challenge) => format!("a refused DPoP proof or binding: {challenge}"),
            None => "missing, unknown, expired or revoked credential".into(),
        },
    );
    // A trail that cannot be written refuses every call anyway; the 401 stands.
    let _ = crate::audit::record_denied(&app.audit, action, &error, "authentication").await;
    res
}

/// What the refused request presented, by kind: never the credential.
fn credential(h: &HeaderMap) -> &'static str {
    use crate::auth::{ADMIN_TOKEN_PREFIX, LEASE_TOKEN_PREFIX};
    let Some(auth) = h.get(header::AUTHORIZATION) else {
        return if h.contains_key(header::COOKIE) {
            "cookie"
        } else {
            "none"
        };
    };
    let value = auth.to_str().unwrap_or_default();
    let Some(token) = crate::auth::bearer(value).or_else(|| crate::dpop::token(value)) else {
        return "another scheme";
    };
    let kinds = [
        (LEASE_TOKEN_PREFIX, "lease bearer"),
        (crate::operators::OPERATOR_TOKEN_PREFIX, "operator bearer"),
        (ADMIN_TOKEN_PREFIX, "admin token"),
        (crate::hubs::HUB_TOKEN_PREFIX, "hub token"),
        (crate::logins::CLI_CREDENTIAL_PREFIX, "CLI credential"),
    ];
    kinds
        .iter()
        .find(|(prefix, _)| token.starts_with(prefix))
        .map_or("other bearer", |(_, kind)| kind)
}
