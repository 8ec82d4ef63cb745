//! Dynamic client registration (RFC 7591): any client may register (the operator's approval
//! is what grants access), as a public client (`token_endpoint_auth_method: none`, PKCE
//! proves possession) with the redirect URIs its sign-ins may return to.

use super::*;
use axum::extract::rejection::JsonRejection;
use serde::Deserialize;

/// Redirect URIs one client may register.
const MAX_REDIRECT_URIS: usize = 10;
const MAX_URI_LEN: usize = 2000;
const MAX_NAME_LEN: usize = 200;

/// What a client asks to be registered with; metadata root does not use is ignored.
#[derive(Debug, Deserialize)]
pub(super) struct Registration {
    #[serde(default)]
    pub redirect_uris: Vec<String>,
    #[serde(default)]
    pub client_name: Option<String>,
    #[serde(default)]
    pub grant_types: Option<Vec<String>>,
    #[serde(default)]
    pub response_types: Option<Vec<String>>,
    #[serde(default)]
    pub scope: Option<String>,
}

/// A client as registered: what `/oauth/register` answers and the store keeps.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Client {
    pub client_id: String,
    pub client_id_issued_at: i64,
    pub client_name: Option<String>,
    pub redirect_uris: Vec<String>,
    pub grant_types: Vec<String>,
    pub response_types: Vec<String>,
    pub token_endpoint_auth_method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl Client {
    /// How the console names the client: its name, and for a metadata document the host
    /// that published it.
    pub fn label(&self) -> String {
        let name = self
            .client_name
            .clone()
            .unwrap_or_else(|| "an unnamed client".into());
        match url::Url::parse(&self.client_id) {
            Ok(u) if super::documents::is_document_url(&self.client_id) => {
                let host = u.host_str().unwrap_or("");
                match u.port() {
                    Some(port) => format!("{name} (published by {host}:{port})"),
                    None => format!("{name} (published by {host})"),
                }
            }
            _ => name,
        }
    }

    /// Whether `uri` is one of the client's redirect URIs. A loopback `http` URI matches on
    /// any port (RFC 8252 §7.3: a native client listens on whatever port is free).
    pub fn redirects_to(&self, uri: &str) -> bool {
        self.redirect_uris.iter().any(|r| {
            r == uri
                || match (url::Url::parse(r), url::Url::parse(uri)) {
                    (Ok(a), Ok(b)) => {
                        a.scheme() == "http"
                            && b.scheme() == "http"
                            && is_loopback(&a)
                            && a.host() == b.host()
                            && a.path() == b.path()
                            && a.query() == b.query()
                    }
                    _ => false,
                }
        })
    }
}

fn is_loopback(u: &url::Url) -> bool {
    match u.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    }
}

/// Why a redirect URI cannot be registered, if it cannot: `https`, loopback `http`, or a
/// private-use scheme of a native app (RFC 8252 §7.1), never with a fragment.
fn refuse_redirect(uri: &str) -> Option<String> {
    if uri.len() > MAX_URI_LEN {
        return Some(format!("a redirect URI is longer than {MAX_URI_LEN} bytes"));
    }
    let Ok(u) = url::Url::parse(uri) else {
        return Some(format!("redirect URI `{uri}` is not an absolute URL"));
    };
    if u.fragment().is_some() {
        return Some(format!("redirect URI `{uri}` has a fragment"));
    }
    match u.scheme() {
        "https" => None,
        "http" if is_loopback(&u) => None,
        "http" => Some(format!(
            "redirect URI `{uri}` is plain http to a host that is not loopback"
        )),
        "javascript" | "data" | "file" | "vbscript" | "blob" => Some(format!(
            "redirect URI `{uri}` has a scheme a browser must not follow"
        )),
        _ => None,
    }
}

fn invalid_metadata(d: impl Into<String>) -> OauthError {
    OauthError::new("invalid_client_metadata", d)
}

/// Checks a registration (or a metadata document's) and answers the client it registers.
pub(super) fn check(req: Registration, now_ms: i64) -> Result<Client, OauthError> {
    if req.redirect_uris.is_empty() || req.redirect_uris.len() > MAX_REDIRECT_URIS {
        return Err(OauthError::new(
            "invalid_redirect_uri",
            format!("redirect_uris must list 1 to {MAX_REDIRECT_URIS} URIs"),
        ));
    }
    if let Some(why) = req.redirect_uris.iter().find_map(|u| refuse_redirect(u)) {
        return Err(OauthError::new("invalid_redirect_uri", why));
    }
    let grant_types = req
        .grant_types
        .unwrap_or_else(|| vec!["authorization_code".into(), "refresh_token".into()]);
    if let Some(g) = grant_types
        .iter()
        .find(|g| !matches!(g.as_str(), "authorization_code" | "refresh_token"))
    {
        return Err(invalid_metadata(format!(
            "grant type `{g}` is not offered (authorization_code, refresh_token)"
        )));
    }
    let response_types = req.response_types.unwrap_or_else(|| vec!["code".into()]);
    if response_types.iter().any(|r| r != "code") {
        return Err(invalid_metadata("only the `code` response type is offered"));
    }
    let client_name = req
        .client_name
        .map(|n| n.chars().filter(|c| !c.is_control()).collect::<String>())
        .filter(|n| !n.trim().is_empty());
    if client_name
        .as_ref()
        .is_some_and(|n| n.chars().count() > MAX_NAME_LEN)
    {
        return Err(invalid_metadata(format!(
            "client_name is longer than {MAX_NAME_LEN} characters"
        )));
    }
    Ok(Client {
        client_id: format!("mcpclient_{}", uuid::Uuid::now_v7().simple()),
        client_id_issued_at: now_ms / 1000,
        client_name,
        redirect_uris: req.redirect_uris,
        grant_types,
        response_types,
        token_endpoint_auth_method: "none".into(),
        scope: req.scope.filter(|s| s.len() <= 1000),
    })
}

/// `POST /oauth/register`.
pub(super) async fn register(
    State(app): State<Arc<App>>,
    body: Result<Json<Registration>, JsonRejection>,
) -> Result<Response, OauthError> {
    let Json(req) = body.map_err(|e| invalid_metadata(e.body_text()))?;
    let now_ms = mcp_shared::time::unix_ms(mcp_shared::time::now());
    let client = check(req, now_ms)?;
    let metadata = serde_json::to_string(&client).map_err(OauthError::server_error)?;
    let stored = app
        .store
        .insert_oauth_client(
            &client.client_id,
            &metadata,
            now_ms,
            app.config.oauth.max_clients,
        )
        .await
        .map_err(OauthError::server_error)?;
    if !stored {
        return Err(OauthError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            ..OauthError::new(
                "temporarily_unavailable",
                "root keeps no more registered clients (`[oauth] max_clients`)",
            )
        });
    }
    tracing::info!(client_id = %client.client_id, name = ?client.client_name, "OAuth client registered");
    let mut res = (StatusCode::CREATED, Json(client)).into_response();
    no_store(&mut res);
    Ok(res)
}

/// The client `client_id` names, if any: one registered here, or the one a client ID
/// metadata document describes (an `https` client_id; a document that cannot be used is
/// `invalid_client` with the reason).
pub(super) async fn client(app: &App, client_id: &str) -> Result<Option<Client>, OauthError> {
    if super::documents::is_document_url(client_id) {
        return super::documents::client(app, client_id).await.map(Some);
    }
    if client_id.is_empty() || client_id.len() > 200 {
        return Ok(None);
    }
    let Some(text) = app
        .store
        .oauth_client(client_id)
        .await
        .map_err(OauthError::server_error)?
    else {
        return Ok(None);
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(OauthError::server_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registration(uris: &[&str]) -> Registration {
        Registration {
            redirect_uris: uris.iter().map(|u| u.to_string()).collect(),
            client_name: Some("test".into()),
            grant_types: None,
            response_types: None,
            scope: None,
        }
    }

    #[test]
    fn redirect_uris_are_https_loopback_or_native() {
        for ok in [
            "https://app.example/cb",
            "http://127.0.0.1:4321/callback",
            "http://localhost/cb",
            "http://[::1]:80/cb",
            "com.example.app:/oauth",
        ] {
            assert!(check(registration(&[ok]), 0).is_ok(), "{ok}");
        }
        for bad in [
            "http://evil.example/cb",
            "https://app.example/cb#frag",
            "javascript:alert(1)",
            "/relative",
        ] {
            let e = check(registration(&[bad]), 0).unwrap_err();
            assert_eq!(e.error, "invalid_redirect_uri", "{bad}");
        }
        assert!(check(registration(&[]), 0).is_err());
    }

    #[test]
    fn loopback_redirects_match_on_any_port_and_nothing_else_does() {
        let c = check(
            registration(&["http://127.0.0.1:4321/callback", "https://a.example/cb"]),
            0,
        )
        .unwrap();
        assert!(c.redirects_to("http://127.0.0.1:4321/callback"));
        assert!(c.redirects_to("http://127.0.0.1:9999/callback"));
        assert!(!c.redirects_to("http://127.0.0.1:9999/other"));
        assert!(!c.redirects_to("http://localhost:4321/callback"));
        assert!(c.redirects_to("https://a.example/cb"));
        assert!(!c.redirects_to("https://a.example:8443/cb"));
        assert_eq!(c.token_endpoint_auth_method, "none");
    }
}
