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

/// Where a sign-in ended: the client and its tokens.
pub struct SignIn {
    pub client_id: String,
    pub access: String,
    pub refresh: String,
}

/// The loopback redirect the scripted client registers.
pub const REDIRECT: &str = "http://127.0.0.1:47999/callback";

/// Registers a client with [`REDIRECT`] (`POST /oauth/register`): `(status, body)`.
pub async fn register(root: &crate::TestRoot) -> anyhow::Result<(u16, serde_json::Value)> {
    let res = root
        .http
        .post(root.url("/oauth/register"))
        .json(&serde_json::json!({"client_name": "scripted", "redirect_uris": [REDIRECT]}))
        .send()
        .await?;
    Ok((res.status().as_u16(), res.json().await?))
}

/// A whole sign-in against a root with `[oauth] discovery` on: registration, the
/// authorization request, the approval by the operator whose bearer is `approver` (for
/// `target` and `profile`), and the code exchange.
pub async fn sign_in(
    root: &crate::TestRoot,
    approver: &str,
    target: &str,
    profile: &str,
) -> anyhow::Result<SignIn> {
    use anyhow::Context;
    let (status, registered) = register(root).await?;
    anyhow::ensure!(status == 201, "registration: {status} {registered}");
    let client_id = registered["client_id"].as_str().context("client_id")?;
    sign_in_client(root, client_id, approver, target, profile).await
}

/// [`sign_in`] with a client registered already.
pub async fn sign_in_client(
    root: &crate::TestRoot,
    client_id: &str,
    approver: &str,
    target: &str,
    profile: &str,
) -> anyhow::Result<SignIn> {
    use anyhow::Context;
    let client_id = client_id.to_owned();
    let pkce = pkce();
    let resource = root.url("/mcp");
    let query = authorize_query(
        &client_id,
        REDIRECT,
        &pkce.challenge,
        &[("state", "st"), ("resource", &resource)],
    );
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let res = browser
        .get(format!("{}?{query}", root.url("/oauth/authorize")))
        .send()
        .await?;
    let location = res.headers()["location"].to_str()?.to_owned();
    let sealed = sealed_request(&location).context("a sealed request")?;
    let decided: serde_json::Value = root
        .http
        .post(root.url("/oauth/authorize/approve"))
        .bearer_auth(approver)
        .json(&serde_json::json!({"request": sealed, "target_id": target, "capability_profile": profile, "ttl_sec": 3600}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let code = query_of(decided["redirect"].as_str().context("redirect")?)
        .remove("code")
        .context("code")?;
    let (status, tokens) = token(
        root,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &client_id),
            ("code", &code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", &pkce.verifier),
            ("resource", &resource),
        ],
    )
    .await?;
    anyhow::ensure!(status == 200, "code exchange: {status} {tokens}");
    Ok(SignIn {
        client_id,
        access: tokens["access_token"]
            .as_str()
            .context("access")?
            .to_owned(),
        refresh: tokens["refresh_token"]
            .as_str()
            .context("refresh")?
            .to_owned(),
    })
}

/// `POST /oauth/token` with a form body: `(status, body)`.
pub async fn token(
    root: &crate::TestRoot,
    pairs: &[(&str, &str)],
) -> anyhow::Result<(u16, serde_json::Value)> {
    let res = root
        .http
        .post(root.url("/oauth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(pairs))
        .send()
        .await?;
    Ok((res.status().as_u16(), res.json().await?))
}

/// `POST /oauth/revoke` (RFC 7009) of `token` by `client_id`: the status.
pub async fn revoke(root: &crate::TestRoot, client_id: &str, token: &str) -> anyhow::Result<u16> {
    let res = root
        .http
        .post(root.url("/oauth/revoke"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("client_id", client_id), ("token", token)]))
        .send()
        .await?;
    Ok(res.status().as_u16())
}
