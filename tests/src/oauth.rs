//! A scripted OAuth client for the tests (they play the client, the browser and the
//! operator): PKCE, the authorization request's query, form bodies, a redirect's query.

use std::collections::HashMap;

use base64::Engine;
use sha2::Digest;

/// A test root's configuration with OAuth discovery on (`TestRoot::start_with(with_oauth)`).
pub fn with_oauth(cfg: &mut mcp_root::config::RootConfig) {
    cfg.oauth.discovery = true;
}

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

/// A scripted OAuth client of the root at `base` (`http://127.0.0.1:PORT`), playing the
/// person's browser too.
pub struct Client<'a> {
    pub http: &'a reqwest::Client,
    pub base: String,
}

/// An operator's answer to a sign-in request, with the PKCE verifier the exchange needs.
pub struct Approval {
    pub status: u16,
    pub body: serde_json::Value,
    pub verifier: String,
}

impl Client<'_> {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Registers a client with [`REDIRECT`] (`POST /oauth/register`): `(status, body)`.
    pub async fn register(&self) -> anyhow::Result<(u16, serde_json::Value)> {
        let res = self
            .http
            .post(self.url("/oauth/register"))
            .json(&serde_json::json!({"client_name": "scripted", "redirect_uris": [REDIRECT]}))
            .send()
            .await?;
        Ok((res.status().as_u16(), res.json().await?))
    }

    /// Client `client_id`'s authorization request, and the operator whose bearer is
    /// `approver` approving it for `target` and `profile` (an hour).
    pub async fn approve(
        &self,
        client_id: &str,
        approver: &str,
        target: &str,
        profile: &str,
    ) -> anyhow::Result<Approval> {
        use anyhow::Context;
        let pkce = pkce();
        let resource = self.url("/mcp");
        let query = authorize_query(
            client_id,
            REDIRECT,
            &pkce.challenge,
            &[("state", "st"), ("resource", &resource)],
        );
        let browser = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let res = browser
            .get(format!("{}?{query}", self.url("/oauth/authorize")))
            .send()
            .await?;
        let location = res.headers()["location"].to_str()?.to_owned();
        let sealed = sealed_request(&location).context("a sealed request")?;
        let res = self
            .http
            .post(self.url("/oauth/authorize/approve"))
            .bearer_auth(approver)
            .json(&serde_json::json!({"request": sealed, "target_id": target, "capability_profile": profile, "ttl_sec": 3600}))
            .send()
            .await?;
        Ok(Approval {
            status: res.status().as_u16(),
            body: res.json().await.unwrap_or(serde_json::Value::Null),
            verifier: pkce.verifier,
        })
    }

    /// The code of an approval exchanged at the token endpoint: `(status, body)`.
    pub async fn exchange(
        &self,
        client_id: &str,
        approval: &Approval,
    ) -> anyhow::Result<(u16, serde_json::Value)> {
        use anyhow::Context;
        let redirect = approval.body["redirect"].as_str().context("redirect")?;
        let code = query_of(redirect).remove("code").context("code")?;
        let resource = self.url("/mcp");
        self.token(&[
            ("grant_type", "authorization_code"),
            ("client_id", client_id),
            ("code", &code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", &approval.verifier),
            ("resource", &resource),
        ])
        .await
    }

    /// `POST /oauth/token` with a form body: `(status, body)`.
    pub async fn token(&self, pairs: &[(&str, &str)]) -> anyhow::Result<(u16, serde_json::Value)> {
        let res = self
            .http
            .post(self.url("/oauth/token"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(pairs))
            .send()
            .await?;
        Ok((res.status().as_u16(), res.json().await?))
    }

    /// `POST /oauth/revoke` (RFC 7009) of `token` by `client_id`: the status.
    pub async fn revoke(&self, client_id: &str, token: &str) -> anyhow::Result<u16> {
        let res = self
            .http
            .post(self.url("/oauth/revoke"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(&[("client_id", client_id), ("token", token)]))
            .send()
            .await?;
        Ok(res.status().as_u16())
    }

    /// A whole sign-in of client `client_id`, approved by `approver` for `target` and
    /// `profile`: its tokens.
    pub async fn sign_in(
        &self,
        client_id: &str,
        approver: &str,
        target: &str,
        profile: &str,
    ) -> anyhow::Result<SignIn> {
        use anyhow::Context;
        let approval = self.approve(client_id, approver, target, profile).await?;
        anyhow::ensure!(
            approval.status == 200,
            "approval: {} {}",
            approval.status,
            approval.body
        );
        let (status, tokens) = self.exchange(client_id, &approval).await?;
        anyhow::ensure!(status == 200, "code exchange: {status} {tokens}");
        let field = |k: &str| tokens[k].as_str().context(k.to_owned()).map(str::to_owned);
        Ok(SignIn {
            client_id: client_id.to_owned(),
            access: field("access_token")?,
            refresh: field("refresh_token")?,
        })
    }
}

/// The scripted client of a test root.
pub fn client(root: &crate::TestRoot) -> Client<'_> {
    Client {
        http: &root.http,
        base: root.handle().base_url(),
    }
}

/// Registers a client with [`REDIRECT`]: `(status, body)`.
pub async fn register(root: &crate::TestRoot) -> anyhow::Result<(u16, serde_json::Value)> {
    client(root).register().await
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
    client(root)
        .sign_in(client_id, approver, target, profile)
        .await
}

/// `POST /oauth/token` with a form body: `(status, body)`.
pub async fn token(
    root: &crate::TestRoot,
    pairs: &[(&str, &str)],
) -> anyhow::Result<(u16, serde_json::Value)> {
    client(root).token(pairs).await
}

/// `POST /oauth/revoke` (RFC 7009) of `token` by `client_id`: the status.
pub async fn revoke(root: &crate::TestRoot, client_id: &str, token: &str) -> anyhow::Result<u16> {
    client(root).revoke(client_id, token).await
}
