//! `mcp-root login`: an operator signs in with the organization's identity provider
//! (`[operators.oidc]` on root) and keeps a short-lived root credential, never the provider's
//! tokens. With a browser on this machine: root's sign-in page opened with a loopback
//! redirect back to this command (RFC 8252) and a PKCE challenge of its own, so the one-time
//! code it receives is worth nothing to anyone else. On a headless machine, `--device`: the
//! device authorization grant (RFC 8628), approved from any browser.
//!
//! The credential goes to `--credential-file` (mode 0600) with the P-256 key this command
//! made for it: root binds the credential to that key (DPoP, RFC 9449; the command proves it
//! when it asks for the credential), so `mcp-root admin` signs a proof for each request and a
//! copy of the credential alone opens nothing. `mcp-root admin` uses it when no admin token
//! is given.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::api::bodies::ErrorAnswer;
use crate::dpop::holder::Holder;

/// `mcp-root login`.
#[derive(Args, Debug)]
pub(crate) struct LoginArgs {
    /// Root base URL.
    #[arg(long, env = "MCP_ROOT_URL", default_value = "http://127.0.0.1:8700")]
    pub(crate) root_url: String,
    /// Sign in from another device (the device authorization grant): for a machine without
    /// a browser.
    #[arg(long)]
    pub(crate) device: bool,
    /// Print the sign-in address instead of opening a browser.
    #[arg(long)]
    pub(crate) no_browser: bool,
    /// Where the root credential is kept; default `$XDG_CONFIG_HOME/mcp-root/credential`.
    #[arg(long, env = "MCP_ROOT_CREDENTIAL_FILE")]
    pub(crate) credential_file: Option<PathBuf>,
    /// PEM CA bundle to verify an https root with (instead of the system's roots).
    #[arg(long, env = "MCP_ROOT_CA_FILE")]
    pub(crate) ca_file: Option<PathBuf>,
    /// How long to wait for the sign-in, in seconds.
    #[arg(long, default_value_t = 600)]
    pub(crate) timeout: u64,
}

/// A root credential as kept on disk.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Kept {
    pub(crate) root_url: String,
    pub(crate) credential: String,
    pub(crate) expires_at: String,
    pub(crate) operator: String,
    #[serde(default)]
    pub(crate) email: Option<String>,
    #[serde(default)]
    pub(crate) roles: Vec<String>,
    /// The private key the credential is bound to (DPoP; base64url PKCS#8): the credential
    /// works only with proofs it signs, so a copy of the credential alone is useless.
    #[serde(default)]
    pub(crate) dpop_key: Option<String>,
}

/// The default credential file.
pub(crate) fn default_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("mcp-root").join("credential"))
}

/// The credential kept in `file` for `root_url`, unless it has expired.
pub(crate) fn kept_for(file: &Path, root_url: &str) -> Option<Kept> {
    let text = std::fs::read_to_string(file).ok()?;
    let kept: Kept = serde_json::from_str(&text).ok()?;
    let expires = mcp_shared::time::parse(&kept.expires_at).ok()?;
    (kept.root_url.trim_end_matches('/') == root_url.trim_end_matches('/')
        && expires > mcp_shared::time::now())
    .then_some(kept)
}

pub(crate) async fn run(args: LoginArgs) -> anyhow::Result<ExitCode> {
    let file = args
        .credential_file
        .clone()
        .or_else(default_file)
        .context("no --credential-file, and neither XDG_CONFIG_HOME nor HOME is set")?;
    let http = super::admin::client::http_client(args.ca_file.as_deref())?;
    let base = args.root_url.trim_end_matches('/').to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.timeout);
    let holder = Holder::generate()?;
    let to_root = ToRoot {
        http: &http,
        base: &base,
        holder: &holder,
    };
    let answer = if args.device {
        device(&to_root, deadline).await?
    } else {
        loopback(&to_root, args.no_browser, deadline).await?
    };
    let kept = Kept {
        root_url: base,
        credential: answer.credential,
        expires_at: answer.expires_at,
        operator: answer.operator,
        email: answer.email,
        roles: answer.roles,
        dpop_key: Some(holder.kept()),
    };
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    crate::secrets::write_private_file(&file, &serde_json::to_string_pretty(&kept)?)
        .with_context(|| format!("writing {}", file.display()))?;
    println!(
        "Signed in as {} ({}), roles: {}. The root credential is kept in {} until {}.",
        kept.email.as_deref().unwrap_or(&kept.operator),
        kept.operator,
        kept.roles.join(", "),
        file.display(),
        kept.expires_at
    );
    Ok(ExitCode::SUCCESS)
}

/// Root's answer with a credential.
#[derive(Debug, Deserialize)]
struct Credential {
    credential: String,
    expires_at: String,
    operator: String,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    roles: Vec<String>,
}

/// Root, asked with proofs of the key the credential will be bound to.
struct ToRoot<'a> {
    http: &'a reqwest::Client,
    base: &'a str,
    holder: &'a Holder,
}

impl ToRoot<'_> {
    /// `POST <base><path>` with `body` and a DPoP proof (again with root's nonce when root
    /// asks for one).
    async fn post(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> anyhow::Result<reqwest::Response> {
        let url = format!("{}{path}", self.base);
        let mut nonce: Option<String> = None;
        loop {
            let proof = self.holder.proof("POST", &url, None, nonce.as_deref())?;
            let res = self
                .http
                .post(&url)
                .header(crate::dpop::HEADER, proof)
                .json(body)
                .send()
                .await
                .with_context(|| format!("cannot reach root at {}", self.base))?;
            let asked = res
                .headers()
                .get(crate::dpop::NONCE_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            match asked {
                Some(n) if nonce.is_none() && !res.status().is_success() => nonce = Some(n),
                _ => return Ok(res),
            }
        }
    }
}

/// Root's refusal, as the operator should read it.
async fn refusal(res: reqwest::Response) -> anyhow::Error {
    let status = res.status();
    let body = res.bytes().await.unwrap_or_default();
    let why = match serde_json::from_slice::<ErrorAnswer>(&body) {
        Ok(e) => e.error.message,
        Err(_) => String::from_utf8_lossy(&body).chars().take(500).collect(),
    };
    anyhow::anyhow!("root refused the sign-in ({status}): {why}")
}

/// The browser flow, back to a loopback listener of this command.
async fn loopback(
    root: &ToRoot<'_>,
    no_browser: bool,
    deadline: tokio::time::Instant,
) -> anyhow::Result<Credential> {
    let base = root.base;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot listen on the loopback interface for the sign-in's redirect")?;
    let redirect = format!("http://{}/callback", listener.local_addr()?);
    let verifier = crate::auth::new_token("");
    let challenge = crate::logins::b64(&sha2::Sha256::digest(verifier.as_bytes()));
    let state = crate::auth::new_token("");
    let mut url = url::Url::parse(&format!("{base}/ui/oidc/start"))
        .with_context(|| format!("{base} is not a URL"))?;
    url.query_pairs_mut()
        .append_pair("cli_redirect", &redirect)
        .append_pair("cli_challenge", &challenge)
        .append_pair("cli_state", &state);
    println!("Sign in with your identity provider: {url}");
    if !no_browser {
        open_browser(url.as_str());
    }
    println!("Waiting for the sign-in to come back to {redirect} ...");
    let code = tokio::time::timeout_at(deadline, receive(&listener, &state))
        .await
        .context("the sign-in did not come back in time")??;
    let body = serde_json::json!({ "code": code, "code_verifier": verifier });
    let res = root
        .post("/v1/root/mcp/operators/oidc/token", &body)
        .await?;
    if !res.status().is_success() {
        return Err(refusal(res).await);
    }
    Ok(res.json().await?)
}

/// Waits for the browser to arrive at the loopback redirect with `state`; its code.
async fn receive(listener: &tokio::net::TcpListener, state: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let (mut conn, _) = listener.accept().await?;
        let mut buf = vec![0u8; 8192];
        let n = conn.read(&mut buf).await.unwrap_or(0);
        let head = String::from_utf8_lossy(&buf[..n]);
        let target = head
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("/");
        let url = url::Url::parse(&format!("http://loopback{target}"))?;
        let get = |k: &str| {
            url.query_pairs()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.into_owned())
        };
        let (reply, outcome) = match (get("code"), get("state")) {
            (Some(code), Some(s)) if crate::auth::secret_eq(&s, state) => (
                "Signed in. You can close this window and return to the terminal.",
                Some(Ok(code)),
            ),
            (Some(_), _) => (
                "This sign-in was not started by this command (its state differs).",
                Some(Err(anyhow::anyhow!(
                    "the redirect's state is not this sign-in's"
                ))),
            ),
            // A browser's other requests (a favicon): not the redirect.
            _ => ("Waiting for the sign-in.", None),
        };
        let body = format!("<!doctype html><meta charset=utf-8><p>{reply}</p>");
        let _ = conn
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
            .await;
        if let Some(o) = outcome {
            return o;
        }
    }
}

/// Opens `url` in the desktop's browser, if there is one (the address is printed anyway).
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let _ = std::process::Command::new(opener)
        .arg(url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

#[derive(Debug, Deserialize)]
struct DeviceStart {
    handle: String,
    verification_uri: String,
    verification_uri_complete: Option<String>,
    user_code: String,
    interval: u64,
}

/// The device grant: the person approves on another device; this command polls root.
async fn device(root: &ToRoot<'_>, deadline: tokio::time::Instant) -> anyhow::Result<Credential> {
    let base = root.base;
    let res = root
        .http
        .post(format!("{base}/v1/root/mcp/operators/oidc/device"))
        .send()
        .await
        .with_context(|| format!("cannot reach root at {base}"))?;
    if !res.status().is_success() {
        return Err(refusal(res).await);
    }
    let start: DeviceStart = res.json().await?;
    println!(
        "On any device, open {} and enter the code {}",
        start.verification_uri, start.user_code
    );
    if let Some(complete) = &start.verification_uri_complete {
        println!("(or open {complete})");
    }
    let every = Duration::from_secs(start.interval.clamp(1, 30));
    loop {
        if tokio::time::Instant::now() >= deadline {
            bail!("the sign-in was not approved in time");
        }
        tokio::time::sleep(every).await;
        let body = serde_json::json!({ "handle": start.handle });
        let res = root
            .post("/v1/root/mcp/operators/oidc/device/poll", &body)
            .await?;
        match res.status() {
            reqwest::StatusCode::ACCEPTED => continue,
            s if s.is_success() => return Ok(res.json().await?),
            _ => return Err(refusal(res).await),
        }
    }
}
