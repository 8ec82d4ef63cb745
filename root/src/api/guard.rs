//! The Host and Origin guard in front of every surface (DNS rebinding, cross-site requests).

use super::*;

pub(super) fn host_allowed(allowed: &[String], host: &str) -> bool {
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
