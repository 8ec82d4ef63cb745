//! Dynamic client registration (RFC 7591): any client may register (the operator's approval
//! is what grants access), as a public client (`token_endpoint_auth_method: none`, PKCE
//! proves possession) with the redirect URIs its sign-ins may return to.
//!
//! Anyone may register, so nobody may fill the registry: each client address (an IPv4
//! address, an IPv6 /64) registers at most `[oauth] registrations_per_hour` an hour (GCRA:
//! that many at once, one more each hour/n; past it `429` with `Retry-After`), and when
//! `max_clients` are kept, a new registration drops the oldest one that never signed in.
//! Outcomes are counted in `mcp_root_oauth_registrations_total{outcome}`.

use super::documents::Documents;
use super::protocol::OauthError;
use super::protocol::no_store;
use crate::app::App;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use serde::Serialize;
use std::sync::Arc;

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::OnceLock;

use axum::extract::ConnectInfo;
use axum::extract::rejection::JsonRejection;
use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde::Deserialize;

use crate::store::Registered;

/// Client addresses whose registrations are tracked at once before idle ones are forgotten.
const MAX_TRACKED: usize = 10_000;

/// Registrations per client address (see the module's header).
#[derive(Default)]
pub(crate) struct Registrations {
    limiter: OnceLock<DefaultKeyedRateLimiter<IpAddr>>,
}

impl Registrations {
    /// Takes one registration of `ip`'s allowance; how long until it has one when it has
    /// none.
    fn take(&self, per_hour: u32, ip: IpAddr) -> Result<(), std::time::Duration> {
        let limiter = self.limiter.get_or_init(|| {
            let n = NonZeroU32::new(per_hour).unwrap_or(NonZeroU32::MIN);
            RateLimiter::keyed(Quota::per_hour(n))
        });
        if limiter.len() >= MAX_TRACKED {
            limiter.retain_recent();
        }
        limiter
            .check_key(&address_key(ip))
            .map_err(|not_until| not_until.wait_time_from(limiter.clock().now()))
    }
}

/// The address a client is counted under: an IPv4 address (IPv4-mapped ones too), or an
/// IPv6 address's /64 (one host usually holds a whole /64).
fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(bits.into())
            }
        },
        v4 => v4,
    }
}

/// Redirect URIs one client may register.
const MAX_REDIRECT_URIS: usize = 10;
const MAX_URI_LEN: usize = 2000;
const MAX_NAME_LEN: usize = 200;

/// What a client asks to be registered with; metadata root does not use is ignored.
#[derive(Debug, Deserialize)]
pub(super) struct Registration {
    #[serde(default)]
    pub(crate) redirect_uris: Vec<String>,
    #[serde(default)]
    pub(crate) client_name: Option<String>,
    #[serde(default)]
    pub(crate) grant_types: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) response_types: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) scope: Option<String>,
}

/// A client as registered: what `/oauth/register` answers and the store keeps.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Client {
    pub(crate) client_id: String,
    pub(crate) client_id_issued_at: i64,
    pub(crate) client_name: Option<String>,
    pub(crate) redirect_uris: Vec<String>,
    pub(crate) grant_types: Vec<String>,
    pub(crate) response_types: Vec<String>,
    pub(crate) token_endpoint_auth_method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) scope: Option<String>,
}

impl Client {
    /// How the console names the client: its name, and for a metadata document the host
    /// that published it.
    pub(crate) fn label(&self) -> String {
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

    /// Whether `uri` is one of the client's redirect URIs, compared as strings (RFC 6749
    /// §3.1.2, RFC 9700 §2.1). Only a loopback `http` URI's port may differ (RFC 8252 §7.3: a
    /// native client listens on whatever port is free).
    pub(crate) fn redirects_to(&self, uri: &str) -> bool {
        self.redirect_uris
            .iter()
            .any(|r| r == uri || loopback_port_variant(r, uri))
    }
}

/// Whether `uri` is the loopback `http` redirect `registered` with another port and, byte
/// for byte, nothing else: no userinfo, no fragment, the same host, path and query, each
/// spelled as registered.
fn loopback_port_variant(registered: &str, uri: &str) -> bool {
    let (Ok(a), Ok(mut b)) = (url::Url::parse(registered), url::Url::parse(uri)) else {
        return false;
    };
    let plain = b.username().is_empty() && b.password().is_none() && b.fragment().is_none();
    // Both exactly as written (a URL parser would hide `HTTP://`, `:80` or `%2F` spellings).
    let as_written = a.as_str() == registered && b.as_str() == uri;
    if a.scheme() != "http" || !is_loopback(&a) || !plain || !as_written {
        return false;
    }
    b.set_port(a.port()).is_ok() && b.as_str() == registered
}

/// Why a redirect URI in an authorization request can never match, named: a fragment or
/// userinfo (RFC 6749 §3.1.2, RFC 9700 §4.1.3), which no registration holds.
pub(super) fn malformed_redirect(uri: &str) -> Option<&'static str> {
    let u = url::Url::parse(uri).ok()?;
    if u.fragment().is_some() {
        Some("redirect_uri must not have a fragment")
    } else if !u.username().is_empty() || u.password().is_some() {
        Some("redirect_uri must not have userinfo (`user@`)")
    } else {
        None
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
    if !u.username().is_empty() || u.password().is_some() {
        return Some(format!("redirect URI `{uri}` has userinfo (`user@`)"));
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

/// `429` with `Retry-After`: this address registered its allowance for now.
fn slow_down(wait: std::time::Duration) -> OauthError {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    OauthError {
        status: StatusCode::TOO_MANY_REQUESTS,
        retry_after: Some(secs.max(1)),
        ..OauthError::new(
            "temporarily_unavailable",
            format!(
                "this address registered as many clients as it may for now; retry in {} s",
                secs.max(1)
            ),
        )
    }
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
    State(registrations): State<Arc<Registrations>>,
    remote: Option<axum::Extension<ConnectInfo<SocketAddr>>>,
    body: Result<Json<Registration>, JsonRejection>,
) -> Result<Response, OauthError> {
    let counted = |outcome: &str, n: u64| {
        app.metrics
            .oauth_registrations
            .get_or_create(&crate::telemetry::metrics::OutcomeLabel {
                outcome: outcome.into(),
            })
            .inc_by(n);
    };
    if let Some(axum::Extension(ConnectInfo(peer))) = remote
        && let Err(wait) = registrations.take(app.config.oauth.registrations_per_hour, peer.ip())
    {
        counted("rate_limited", 1);
        return Err(slow_down(wait));
    }
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
    match stored {
        Registered::Stored { evicted } => {
            counted("registered", 1);
            if evicted > 0 {
                counted("evicted", evicted);
                tracing::info!(
                    evicted,
                    "OAuth registry full: dropped the oldest registrations that never signed in"
                );
            }
        }
        Registered::Full => {
            counted("full", 1);
            return Err(OauthError {
                status: StatusCode::SERVICE_UNAVAILABLE,
                ..OauthError::new(
                    "temporarily_unavailable",
                    "root keeps no more registered clients (`[oauth] max_clients`), and every \
                     one has signed in",
                )
            });
        }
    }
    tracing::info!(client_id = %client.client_id, name = ?client.client_name, "OAuth client registered");
    let mut res = (StatusCode::CREATED, Json(client)).into_response();
    no_store(&mut res);
    Ok(res)
}

/// The client `client_id` names, if any: one registered here, or the one a client ID
/// metadata document describes (an `https` client_id; a document that cannot be used is
/// `invalid_client` with the reason).
pub(super) async fn client(
    app: &App,
    documents: &Documents,
    client_id: &str,
) -> Result<Option<Client>, OauthError> {
    if super::documents::is_document_url(client_id) {
        return super::documents::client(app, documents, client_id)
            .await
            .map(Some);
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
            "http://127.0.0.1:5999/cb#",
            "http://evil.example@127.0.0.1:5999/cb",
            "https://user:pw@app.example/cb",
            "javascript:alert(1)",
            "/relative",
        ] {
            let e = check(registration(&[bad]), 0).unwrap_err();
            assert_eq!(e.error, "invalid_redirect_uri", "{bad}");
        }
        assert!(check(registration(&[]), 0).is_err());
    }

    #[test]
    fn an_address_is_counted_as_its_host_or_its_ipv6_64() {
        let key = |s: &str| address_key(s.parse().unwrap()).to_string();
        assert_eq!(key("192.0.2.7"), "192.0.2.7");
        assert_eq!(key("::ffff:192.0.2.7"), "192.0.2.7");
        assert_eq!(key("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::");
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff::9"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
    }

    #[test]
    fn an_address_registers_its_allowance_then_waits() {
        let r = Registrations::default();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..3 {
            assert!(r.take(3, ip).is_ok());
        }
        let wait = r.take(3, ip).unwrap_err();
        assert!(wait > std::time::Duration::from_secs(1000), "{wait:?}");
        assert!(r.take(3, "192.0.2.2".parse().unwrap()).is_ok());
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
        // Only the port varies: never a fragment, userinfo or another spelling.
        for bad in [
            "http://127.0.0.1:4321/callback#evil",
            "http://127.0.0.1:9999/callback#",
            "http://evil.example@127.0.0.1:4321/callback",
            "http://u:p@127.0.0.1:9999/callback",
            "HTTP://127.0.0.1:9999/callback",
            "http://127.0.0.1:9999/callback?",
            "http://127.0.0.1:9999/callback?x=1",
            "http://127.0.0.1:9999/%63allback",
            "http://127.0.0.1:9999//callback",
            "https://a.example/cb#x",
            "https://x@a.example/cb",
        ] {
            assert!(!c.redirects_to(bad), "{bad}");
        }
    }
}
