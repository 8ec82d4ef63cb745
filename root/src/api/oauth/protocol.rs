//! The pieces of OAuth 2.1 every endpoint of root's authorization server shares: where root
//! is (`Urls`), the error body (`OauthError`), form parameters, `Cache-Control: no-store`,
//! credentials and the PKCE check.

use crate::app::App;
use axum::Json;
use axum::http::HeaderMap;
use axum::http::HeaderValue;
use axum::http::StatusCode;
use axum::http::header;
use axum::response::IntoResponse;
use axum::response::Response;
use serde::Serialize;

/// Where this root is, as its clients reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Urls {
    /// `scheme://host[:port]`: the issuer, and the base of every endpoint.
    pub(crate) issuer: String,
}

impl Urls {
    /// From `[oauth] public_url`, or the request's scheme and `Host` (which the Host guard
    /// has already checked against `allowed_hosts`).
    pub(crate) fn of(app: &App, headers: &HeaderMap) -> Urls {
        if let Some(url) = &app.config.oauth.public_url {
            return Urls {
                issuer: url.clone(),
            };
        }
        let scheme = if app.config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost");
        Urls {
            issuer: format!("{scheme}://{host}"),
        }
    }

    /// The MCP URL tokens are bound to (the `resource`, RFC 8707).
    pub(crate) fn mcp(&self) -> String {
        format!("{}/mcp", self.issuer)
    }

    pub(super) fn at(&self, path: &str) -> String {
        format!("{}{path}", self.issuer)
    }
}

/// An OAuth error answer (RFC 6749 §5.2): `{"error", "error_description"}`, never cached.
#[derive(Debug)]
pub(crate) struct OauthError {
    pub(super) status: StatusCode,
    pub(super) error: &'static str,
    pub(super) description: String,
    /// Seconds for `Retry-After` (a `429`).
    pub(super) retry_after: Option<u64>,
    /// Root's DPoP nonce (`DPoP-Nonce`), with `use_dpop_nonce`.
    pub(super) dpop_nonce: Option<String>,
}

impl OauthError {
    pub(super) fn new(error: &'static str, description: impl Into<String>) -> OauthError {
        OauthError {
            status: StatusCode::BAD_REQUEST,
            error,
            description: description.into(),
            retry_after: None,
            dpop_nonce: None,
        }
    }
    /// A refused DPoP proof at the token endpoint (RFC 9449 §5, §8): `invalid_dpop_proof`,
    /// or `use_dpop_nonce` with root's nonce.
    pub(super) fn dpop(app: &App, e: crate::dpop::DpopError) -> OauthError {
        let nonce = (e == crate::dpop::DpopError::Nonce).then(|| app.dpop.nonce());
        OauthError {
            dpop_nonce: nonce,
            ..OauthError::new(e.oauth_code(), e.to_string())
        }
    }
    pub(super) fn invalid_request(d: impl Into<String>) -> OauthError {
        OauthError::new("invalid_request", d)
    }
    pub(super) fn invalid_grant(d: impl Into<String>) -> OauthError {
        OauthError::new("invalid_grant", d)
    }
    pub(super) fn invalid_client(d: impl Into<String>) -> OauthError {
        OauthError {
            status: StatusCode::UNAUTHORIZED,
            ..OauthError::new("invalid_client", d)
        }
    }
    /// The server cannot answer now and says when to ask again (503; the audit trail cannot
    /// be written, so nothing is issued).
    pub(super) fn temporarily_unavailable(d: impl Into<String>) -> OauthError {
        OauthError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            retry_after: Some(1),
            ..OauthError::new("temporarily_unavailable", d)
        }
    }
    pub(super) fn server_error(e: impl std::fmt::Display) -> OauthError {
        tracing::error!(error = %e, "internal error on an OAuth endpoint");
        OauthError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            ..OauthError::new("server_error", "internal error; see the root's log")
        }
    }
}

#[derive(Serialize)]
struct OauthErrorBody<'a> {
    error: &'a str,
    error_description: &'a str,
}

impl IntoResponse for OauthError {
    fn into_response(self) -> Response {
        let body = Json(OauthErrorBody {
            error: self.error,
            error_description: &self.description,
        });
        let mut res = (self.status, body).into_response();
        no_store(&mut res);
        if let Some(secs) = self.retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if let Some(n) = self.dpop_nonce.and_then(|n| HeaderValue::from_str(&n).ok()) {
            res.headers_mut().insert(crate::dpop::NONCE_HEADER, n);
        }
        res
    }
}

/// An OAuth request's parameters (a query or a form body), each at most once (RFC 6749
/// §3.1) and none holding a NUL character: else `invalid_request`, naming a repeated one.
pub(super) fn parameters(
    encoded: &[u8],
) -> Result<std::collections::HashMap<String, String>, OauthError> {
    let mut out = std::collections::HashMap::new();
    for (k, v) in url::form_urlencoded::parse(encoded) {
        if k.contains('\0') || v.contains('\0') {
            return Err(OauthError::invalid_request(
                "a parameter holds a NUL character (%00)",
            ));
        }
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(OauthError::invalid_request(format!(
                "parameter `{k}` is repeated"
            )));
        }
    }
    Ok(out)
}

/// Marks an answer that carries or refuses credentials as never to be cached.
pub(super) fn no_store(res: &mut Response) {
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res.headers_mut()
        .insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
}

/// A random credential with a recognizable prefix (`mcpg_` authorization codes, `mcpr_`
/// refresh tokens; both redacted from events like every other credential of root's).
pub(super) fn credential(prefix: &str) -> String {
    use base64::Engine;
    let bytes: [u8; 32] = rand::random();
    format!(
        "{prefix}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// PKCE S256 (RFC 7636 §4.2): whether `verifier` hashes to `challenge`.
pub(super) fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    use base64::Engine;
    use sha2::Digest;
    let ok_chars = verifier
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
    if !(43..=128).contains(&verifier.len()) || !ok_chars {
        return false;
    }
    let digest = sha2::Sha256::digest(verifier.as_bytes());
    let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
    crate::auth::secret_eq(&computed, challenge)
}
