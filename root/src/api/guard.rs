//! The Host and Origin guard in front of every surface (DNS rebinding, cross-site requests):
//! the one rule root has for both, `/mcp` included (its transport, `mcp::transport`, checks
//! no host of its own).

use crate::app::App;
use crate::mcp::error::McpError;
use axum::extract::Request;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use rmcp::model::ErrorCode;
use std::sync::Arc;

/// The one Host rule, for every surface (`/mcp`, the REST family, the console, the hub
/// door): `host` names an entry of `allowed`, compared case-insensitively with IPv6 brackets
/// ignored; an entry with a port matches that port only, one without matches any port.
/// Anything that does not parse as an authority is refused.
pub(crate) fn host_allowed(allowed: &[String], host: &str) -> bool {
    let Ok(authority) = host.trim().parse::<http::uri::Authority>() else {
        return false;
    };
    let norm = |h: &str| h.trim_matches(['[', ']']).to_ascii_lowercase();
    let (host, port) = (norm(authority.host()), authority.port_u16());
    allowed.iter().any(|entry| {
        let entry = entry.trim();
        match entry.parse::<http::uri::Authority>() {
            Ok(a) => norm(a.host()) == host && a.port_u16().is_none_or(|p| port == Some(p)),
            Err(_) => !entry.is_empty() && norm(entry) == host,
        }
    })
}

/// An `Origin` is allowed when `allowed_origins` names it, or when it is `http(s)://` and
/// an authority the Host rule ([`host_allowed`]) allows.
pub(super) fn origin_allowed(app: &App, origin: &str) -> bool {
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
pub(super) async fn guard_host_origin(
    State(app): State<Arc<App>>,
    req: Request,
    next: Next,
) -> Response {
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
        McpError::new(StatusCode::FORBIDDEN, ErrorCode::INVALID_REQUEST, why).into_response()
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

#[cfg(test)]
mod tests {
    use super::host_allowed;

    #[test]
    fn hosts_match_by_name_and_by_port_where_the_entry_names_one() {
        let allowed = vec![
            "localhost".to_string(),
            "[::1]".to_string(),
            "::1".to_string(),
            "root.example:8443".to_string(),
        ];
        assert!(host_allowed(&allowed, "localhost:8700"));
        assert!(host_allowed(&allowed, "LOCALHOST"));
        assert!(host_allowed(&allowed, "[::1]:8700"));
        assert!(host_allowed(&["::1".to_string()], "[::1]:8700"));
        assert!(host_allowed(&allowed, "root.example:8443"));
        assert!(!host_allowed(&allowed, "root.example:8444"));
        assert!(!host_allowed(&allowed, "root.example"));
        assert!(!host_allowed(&allowed, "evil.example"));
        assert!(!host_allowed(&allowed, "localhost.evil.example"));
        assert!(!host_allowed(&allowed, ""));
        assert!(!host_allowed(&allowed, "local host"));
        assert!(
            !host_allowed(&[], "anything"),
            "an empty list allows nothing"
        );
    }
}
