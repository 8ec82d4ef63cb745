//! Client ID metadata documents: a client whose `client_id` is an `https` URL is described
//! by the JSON document at that URL (its name, redirect URIs, grants), fetched by root when
//! the client first shows up and kept five minutes. Anyone can make root fetch such a URL,
//! so the fetch is bounded (5 s, 64 KiB, no redirects) and, unless
//! `[oauth] client_metadata_private_hosts`, never reaches a loopback or private address (the
//! name is resolved and checked before connecting).

use super::protocol::OauthError;
use crate::app::App;
use axum::http::header;

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use serde::Deserialize;

use super::register::Client;

const TIMEOUT: Duration = Duration::from_secs(5);
const MAX_DOCUMENT: usize = 64 * 1024;
const KEPT: Duration = Duration::from_secs(300);
const MAX_KEPT: usize = 1000;
const REFUSED: &str = "resolves to no address root fetches client metadata from";

/// Fetched documents, and the HTTP client that fetches them.
#[derive(Default)]
pub(crate) struct Documents {
    kept: DashMap<String, (Instant, Client)>,
    http: std::sync::OnceLock<Result<reqwest::Client, FetcherError>>,
}

/// Why root has no HTTP client to fetch metadata documents with (its configuration).
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetcherError {
    /// `[oauth] client_metadata_ca_file`.
    #[error("{0}")]
    Ca(#[from] crate::net::tls_client::CaFileError),
    #[error("{0}")]
    Build(#[from] reqwest::Error),
}

/// What a metadata document may say; what root does not use is ignored.
#[derive(Debug, Deserialize)]
struct Document {
    client_id: String,
    #[serde(default)]
    client_name: Option<String>,
    #[serde(default)]
    redirect_uris: Vec<String>,
    #[serde(default)]
    grant_types: Option<Vec<String>>,
    #[serde(default)]
    response_types: Option<Vec<String>>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
    #[serde(default)]
    client_secret: Option<serde_json::Value>,
}

/// Whether `client_id` names a metadata document (rather than a registered client).
pub(super) fn is_document_url(client_id: &str) -> bool {
    client_id.starts_with("https://")
}

/// Why `url` cannot be a client ID, if it cannot: `https`, a path, no fragment, no
/// credentials, no dot segments (draft-ietf-oauth-client-id-metadata-document §3).
fn refuse_url(app: &App, url: &str) -> Option<String> {
    let Ok(u) = url::Url::parse(url) else {
        return Some("the client_id is not a URL".into());
    };
    if u.scheme() != "https" || u.path() == "/" || u.fragment().is_some() {
        return Some("a client_id URL must be https with a path and no fragment".into());
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Some("a client_id URL must not carry credentials".into());
    }
    if url.len() > 2000 || url.contains("/./") || url.contains("/../") {
        return Some("a client_id URL must be short and have no dot segments".into());
    }
    let literal = match u.host() {
        Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
        _ => None,
    };
    if let Some(ip) = literal
        && !reachable(app, ip)
    {
        return Some(format!("root does not fetch client metadata from {ip}"));
    }
    None
}

/// Whether root may connect to `ip` for a metadata document.
fn reachable(app: &App, ip: IpAddr) -> bool {
    app.config.oauth.client_metadata_private_hosts || is_public(ip)
}

/// Whether `ip` is a public unicast address (not loopback, private, link-local, shared,
/// unspecified, multicast or documentation space).
fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1])))
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public(IpAddr::V4(v4)),
            None => {
                let first = v6.segments()[0];
                !(v6.is_loopback()
                    || v6.is_unspecified()
                    || v6.is_multicast()
                    || (first & 0xfe00) == 0xfc00
                    || (first & 0xffc0) == 0xfe80)
            }
        },
    }
}

/// A resolver that hands reqwest only the addresses root may reach.
struct Guarded {
    private_hosts: bool,
}

impl reqwest::dns::Resolve for Guarded {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let private_hosts = self.private_hosts;
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0))
                .await?
                .filter(|a| private_hosts || is_public(a.ip()))
                .collect();
            if found.is_empty() {
                return Err(format!("`{}` {REFUSED}", name.as_str()).into());
            }
            Ok(Box::new(found.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

fn http<'a>(app: &App, documents: &'a Documents) -> Result<reqwest::Client, &'a FetcherError> {
    documents
        .http
        .get_or_init(|| {
            let mut b = reqwest::Client::builder()
                .timeout(TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .https_only(true)
                .dns_resolver(std::sync::Arc::new(Guarded {
                    private_hosts: app.config.oauth.client_metadata_private_hosts,
                }));
            if let Some(path) = &app.config.oauth.client_metadata_ca_file {
                b = b.tls_certs_only(crate::net::tls_client::load_ca_bundle(path)?);
            }
            Ok(b.build()?)
        })
        .as_ref()
        .cloned()
}

/// The client a metadata document describes (fetched, or kept from a fetch within five
/// minutes); `invalid_client` naming why when it cannot be used.
pub(super) async fn client(
    app: &App,
    documents: &Documents,
    url: &str,
) -> Result<Client, OauthError> {
    if let Some(kept) = documents.kept.get(url)
        && kept.0.elapsed() < KEPT
    {
        return Ok(kept.1.clone());
    }
    if let Some(why) = refuse_url(app, url) {
        return Err(OauthError::invalid_client(why));
    }
    let doc = fetch(app, documents, url).await?;
    let client = check(url, doc)?;
    let kept = &documents.kept;
    if kept.len() >= MAX_KEPT {
        kept.clear();
    }
    kept.insert(url.to_owned(), (Instant::now(), client.clone()));
    Ok(client)
}

async fn fetch(app: &App, documents: &Documents, url: &str) -> Result<Document, OauthError> {
    let http = http(app, documents).map_err(OauthError::server_error)?;
    let unusable =
        |why: String| OauthError::invalid_client(format!("client metadata at {url}: {why}"));
    let mut res = http
        .get(url)
        .header(header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| {
            // Only what does not map the network behind root: a refused address or a
            // certificate, never which ports answer.
            let why = refused_address(&e)
                .or_else(|| crate::net::tls_client::tls_failure(&e))
                .unwrap_or_else(|| "cannot be fetched".into());
            tracing::warn!(%url, error = %e, "a client metadata document could not be fetched");
            unusable(why)
        })?;
    if !res.status().is_success() {
        return Err(unusable(format!("answered {}", res.status())));
    }
    let mut body = Vec::new();
    while let Some(chunk) = res
        .chunk()
        .await
        .map_err(|_| unusable("the answer broke off".into()))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_DOCUMENT {
            return Err(unusable(format!("longer than {MAX_DOCUMENT} bytes")));
        }
    }
    serde_json::from_slice(&body).map_err(|e| unusable(format!("not a metadata document: {e}")))
}

/// The guarded resolver's refusal inside a request error, if that is what failed.
fn refused_address(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next = Some(e);
    while let Some(err) = next {
        let text = err.to_string();
        if text.contains(REFUSED) {
            return Some(text);
        }
        next = err.source();
    }
    None
}

/// The document as a client: it must name itself and hold no secret.
fn check(url: &str, doc: Document) -> Result<Client, OauthError> {
    let bad = |why: &str| OauthError::invalid_client(format!("client metadata at {url}: {why}"));
    if doc.client_id != url {
        return Err(bad("its client_id is not the URL it was fetched from"));
    }
    if doc.client_secret.is_some() {
        return Err(bad("a metadata document must not hold a client_secret"));
    }
    if doc
        .token_endpoint_auth_method
        .as_deref()
        .is_some_and(|m| m != "none")
    {
        return Err(bad(
            "root takes public clients only (token_endpoint_auth_method none)",
        ));
    }
    let registration = super::register::Registration {
        redirect_uris: doc.redirect_uris,
        client_name: doc.client_name,
        grant_types: doc.grant_types,
        response_types: doc.response_types,
        scope: None,
    };
    let mut client = super::register::check(registration, 0).map_err(|e| bad(&e.description))?;
    client.client_id = url.to_owned();
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::{Document, check, is_public};

    const URL: &str = "https://app.example/oauth/client.json";

    fn doc(f: impl FnOnce(&mut Document)) -> Document {
        let mut d = Document {
            client_id: URL.into(),
            client_name: Some("App".into()),
            redirect_uris: vec!["http://127.0.0.1:5000/cb".into()],
            grant_types: None,
            response_types: None,
            token_endpoint_auth_method: None,
            client_secret: None,
        };
        f(&mut d);
        d
    }

    #[test]
    fn a_document_must_name_itself_hold_no_secret_and_redirect_safely() {
        let c = check(URL, doc(|_| {})).unwrap();
        assert_eq!(c.client_id, URL);
        assert_eq!(c.token_endpoint_auth_method, "none");
        assert!(c.redirects_to("http://127.0.0.1:6000/cb"));
        for (bad, why) in [
            (
                doc(|d| d.client_id = "https://evil.example/c.json".into()),
                "client_id",
            ),
            (doc(|d| d.client_secret = Some("s".into())), "client_secret"),
            (
                doc(|d| d.token_endpoint_auth_method = Some("private_key_jwt".into())),
                "public clients",
            ),
            (
                doc(|d| d.redirect_uris = vec!["http://evil.example/cb".into()]),
                "plain http",
            ),
            (doc(|d| d.redirect_uris.clear()), "redirect_uris"),
        ] {
            let e = check(URL, bad).unwrap_err();
            assert_eq!(e.error, "invalid_client");
            assert!(e.description.contains(why), "{why}: {}", e.description);
        }
    }

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["93.184.216.34", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }
}
