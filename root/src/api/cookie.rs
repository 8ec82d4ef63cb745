//! The console's cookie credential: which operator's console session a request without a
//! bearer comes from, and whether it passes the cross-site checks (see `api::console` for
//! the cookie's form and invariants). `api::principal` resolves a caller through it.

use axum::http::{HeaderMap, Method, StatusCode, header};
use mcp_shared::error::ErrorCode;

use crate::api::error::ApiError;
use crate::app::App;
use crate::logins::{ConsoleSession, csrf_token};

/// The session cookie's name.
pub(crate) const COOKIE: &str = "mcp_console";
/// The header a cookie-authenticated state-changing request must carry.
pub(crate) const CSRF_HEADER: &str = "x-mcp-console-csrf";

/// The value of the request's cookie `name`, if it has one.
pub(crate) fn named<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// Whether `Sec-Fetch-Site` (when the browser sends it) says the request came from the
/// console's own origin or from the operator typing the address.
pub(crate) fn same_site_fetch(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_none_or(|v| v == "same-origin" || v == "none")
}

/// The operator, from the console cookie of a request without an `Authorization` header.
///
/// `Ok(None)`: no usable cookie (the caller answers 401). `Err`: a valid session whose
/// request fails the cross-site checks (403).
pub(crate) async fn cookie_operator(
    app: &App,
    method: &Method,
    headers: &HeaderMap,
) -> Result<Option<ConsoleSession>, ApiError> {
    if headers.contains_key(header::AUTHORIZATION) {
        return Ok(None);
    }
    let Some(value) = named(headers, COOKIE) else {
        return Ok(None);
    };
    // A CLI's bound credential works only with its key's proofs, never as a cookie.
    let Some(session) = app
        .logins
        .verify(app, value)
        .await
        .filter(|s| s.dpop_jkt.is_none())
    else {
        return Ok(None);
    };
    let forbidden = |why: &str| ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, why);
    if !same_site_fetch(headers) {
        return Err(forbidden("cross-site request refused"));
    }
    if method != Method::GET && method != Method::HEAD {
        // The Host/Origin guard has already refused an origin that is not allowed; a
        // state-changing console request must name one.
        if !headers.contains_key(header::ORIGIN) {
            return Err(forbidden(
                "a console request that changes state needs an Origin",
            ));
        }
        let sent = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
        let want = csrf_token(app, &session.id);
        let ok =
            matches!((sent, want.as_deref()), (Some(s), Some(w)) if crate::auth::secret_eq(s, w));
        if !ok {
            return Err(forbidden(
                "missing or wrong X-MCP-Console-CSRF header on a console request",
            ));
        }
    }
    Ok(Some(session))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn cookie_value_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; mcp_console=v1.x.1.y; b=2"),
        );
        assert_eq!(named(&h, COOKIE), Some("v1.x.1.y"));
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_static("xmcp_console=1"));
        assert_eq!(named(&h, COOKIE), None);
    }
}
