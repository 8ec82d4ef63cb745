//! A scripted OAuth client for the tests (they play the client, the browser and the
//! operator): PKCE, the authorization request's query, form bodies, a redirect's query.

use std::collections::HashMap;

use base64::Engine;
use sha2::Digest;

/// A PKCE verifier and its S256 challenge.
pub struct Pkce {
    pub verifier: String,
    pub challenge: String,
}

pub fn pkce() -> Pkce {
    let verifier = format!(
        "{}{}",
        uuid::Uuid::now_v7().simple(),
        uuid::Uuid::now_v7().simple()
    );
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    Pkce {
        verifier,
        challenge,
    }
}

/// `pairs` as `application/x-www-form-urlencoded` (a token request's body, a query).
pub fn form(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// The query of an authorization request with PKCE S256; `extra` adds parameters or
/// replaces the standard ones of the same name (an empty value drops one).
pub fn authorize_query(
    client_id: &str,
    redirect_uri: &str,
    challenge: &str,
    extra: &[(&str, &str)],
) -> String {
    let mut pairs: Vec<(&str, &str)> = vec![
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect_uri),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
    ];
    for (k, v) in extra {
        pairs.retain(|(pk, _)| pk != k);
        if !v.is_empty() {
            pairs.push((k, v));
        }
    }
    form(&pairs)
}

/// The sealed sign-in request in the console address root redirects the browser to.
pub fn sealed_request(location: &str) -> Option<&str> {
    location.split_once("authorize=").map(|(_, sealed)| sealed)
}

/// The query parameters of `url` (a redirect back to the client).
pub fn query_of(url: &str) -> HashMap<String, String> {
    url::Url::parse(url)
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default()
}
