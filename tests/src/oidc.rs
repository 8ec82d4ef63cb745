//! A real OpenID provider on loopback (`tests/clients/oidc-provider.mjs`: the certified
//! `oidc-provider` package from npm), and a person signing in at its login page over HTTP, as
//! a browser does (its cookies kept, its redirects followed one by one).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The provider, killed when dropped. Users: `alice` (group `sre`), `bob` (`auditors`),
/// `carol` (no group).
pub struct Provider {
    pub issuer: String,
    child: tokio::process::Child,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

impl Provider {
    /// Starts the provider on a free loopback port; ready when it says so.
    pub async fn start() -> anyhow::Result<Provider> {
        let npm = crate::npm_prefix()?;
        anyhow::ensure!(
            npm.join("node_modules/oidc-provider/package.json").exists(),
            "{} has no oidc-provider: run `npm install --prefix target/npm oidc-provider@9.13.3` (as .ci/run does)",
            npm.display()
        );
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("clients")
            .join("oidc-provider.mjs");
        let port = crate::ports::free_port();
        let mut child = tokio::process::Command::new("node")
            .arg(&script)
            .arg(&npm)
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("starting node with oidc-provider")?;
        let stdout = child.stdout.take().context("the provider's stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let issuer = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(issuer) = line.strip_prefix("ready ") {
                    return Ok(issuer.to_owned());
                }
            }
            bail!("the provider ended before it was ready")
        })
        .await
        .context("the provider did not start within 30 s")??;
        // Its output read to the end: a closed pipe would end it at its next line.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Provider { issuer, child })
    }

    /// `[operators.oidc]` for this provider: `sre` operators who may hand out
    /// `AdaOSDevRead`, `auditors` auditors.
    pub fn config(&self) -> mcp_root::config::OidcConfig {
        use mcp_root::config::{OidcConfig, RoleRule};
        use mcp_root::roles::Role;
        let rule = |group: &str, role: Role, profiles: &[&str]| RoleRule {
            group: Some(group.into()),
            email: None,
            subject: None,
            roles: vec![role],
            profiles: profiles.iter().map(|p| p.to_string()).collect(),
        };
        OidcConfig {
            issuer: self.issuer.clone(),
            client_id: "mcp-root".into(),
            client_secret_file: None,
            scopes: ["openid", "email", "groups", "offline_access"]
                .map(String::from)
                .to_vec(),
            groups_claim: "groups".into(),
            redirect_url: None,
            check_interval_sec: 10,
            cli_credential_ttl_sec: 3600,
            roles: vec![
                rule("sre", Role::Operator, &["AdaOSDevRead"]),
                rule("auditors", Role::Auditor, &[]),
            ],
        }
    }

    /// The provider forgets `user`: their refresh tokens are refused from now on.
    /// Makes the next token response's ID token a bad one (`aud`, `iss`, `exp`, `nonce`,
    /// `no_nonce`, `replay`, `key`: see `oidc-provider.mjs`).
    pub async fn tamper(&self, claim: &str) -> anyhow::Result<()> {
        let res = reqwest::Client::new()
            .post(format!("{}/test/tamper?claim={claim}", self.issuer))
            .send()
            .await?;
        anyhow::ensure!(res.status().is_success(), "tampering: {}", res.status());
        Ok(())
    }

    pub async fn remove(&self, user: &str) -> anyhow::Result<()> {
        let res = reqwest::Client::new()
            .post(format!("{}/test/remove?user={user}", self.issuer))
            .send()
            .await?;
        anyhow::ensure!(
            res.status().is_success(),
            "removing {user}: {}",
            res.status()
        );
        Ok(())
    }
}

/// A browser of one person: cookies by name (every server here is 127.0.0.1, and their
/// cookie names differ), redirects followed one at a time.
#[derive(Default)]
pub struct Browser {
    http: reqwest::Client,
    pub cookies: BTreeMap<String, String>,
}

/// Where a browser's walk ended.
pub struct Landed {
    pub url: String,
    pub status: reqwest::StatusCode,
    pub body: String,
}

impl Browser {
    pub fn new() -> Browser {
        Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("a reqwest client"),
            cookies: BTreeMap::new(),
        }
    }

    fn keep_cookies(&mut self, res: &reqwest::Response) {
        for v in res.headers().get_all(reqwest::header::SET_COOKIE) {
            let Ok(v) = v.to_str() else { continue };
            let first = v.split(';').next().unwrap_or("");
            if let Some((k, val)) = first.split_once('=') {
                let gone = val.is_empty() || v.to_ascii_lowercase().contains("max-age=0");
                if gone {
                    self.cookies.remove(k.trim());
                } else {
                    self.cookies
                        .insert(k.trim().to_owned(), val.trim().to_owned());
                }
            }
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// One request with the cookies; keeps the ones set.
    async fn send(
        &mut self,
        method: reqwest::Method,
        url: &str,
        form: Option<&[(&str, &str)]>,
    ) -> anyhow::Result<reqwest::Response> {
        let mut req = self.http.request(method, url);
        if !self.cookies.is_empty() {
            req = req.header(reqwest::header::COOKIE, self.cookie_header());
        }
        if let Some(f) = form {
            let body = url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(f)
                .finish();
            req = req
                .header(
                    reqwest::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                )
                .body(body);
        }
        let res = req
            .send()
            .await
            .with_context(|| format!("requesting {url}"))?;
        self.keep_cookies(&res);
        Ok(res)
    }

    /// Follows redirects from `url` until a page answers (or `stop_at` is the next URL's
    /// prefix: it is not requested).
    pub async fn walk(&mut self, url: &str, stop_at: Option<&str>) -> anyhow::Result<Landed> {
        self.walk_from(reqwest::Method::GET, url, None, stop_at)
            .await
    }

    async fn walk_from(
        &mut self,
        method: reqwest::Method,
        url: &str,
        form: Option<&[(&str, &str)]>,
        stop_at: Option<&str>,
    ) -> anyhow::Result<Landed> {
        let mut url = url.to_owned();
        let mut res = self.send(method, &url, form).await?;
        for _ in 0..20 {
            if !res.status().is_redirection() {
                let status = res.status();
                return Ok(Landed {
                    url,
                    status,
                    body: res.text().await?,
                });
            }
            let location = res
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .context("a redirect without Location")?;
            let next = url::Url::parse(&url)?.join(location)?.to_string();
            if stop_at.is_some_and(|p| next.starts_with(p)) {
                return Ok(Landed {
                    url: next,
                    status: res.status(),
                    body: String::new(),
                });
            }
            url = next;
            res = self.send(reqwest::Method::GET, &url, None).await?;
        }
        bail!("more than 20 redirects from {url}")
    }

    /// At the provider's pages from `page` on, signs in as `user` and consents, as a person
    /// does: each form submitted (its login filled in) until a page without one.
    pub async fn log_in(
        &mut self,
        page: &Landed,
        user: &str,
        stop_at: Option<&str>,
    ) -> anyhow::Result<Landed> {
        let mut page = Landed {
            url: page.url.clone(),
            status: page.status,
            body: page.body.clone(),
        };
        for _ in 0..5 {
            if form_action(&page.body).is_none() || !page.url.contains("/interaction/") {
                return Ok(page);
            }
            let login: &[(&str, &str)] = if page.body.contains("name=\"login\"") {
                &[("login", user), ("password", "any")]
            } else {
                &[]
            };
            page = self.submit(&page, login, stop_at).await?;
        }
        bail!("still at the provider's forms after five: {}", page.url)
    }

    /// Submits the first form of `page` as it is (a confirmation page).
    pub async fn submit(
        &mut self,
        page: &Landed,
        fields: &[(&str, &str)],
        stop_at: Option<&str>,
    ) -> anyhow::Result<Landed> {
        let action = form_action(&page.body).context("no form on the page")?;
        let to = url::Url::parse(&page.url)?.join(&action)?.to_string();
        let mut all: Vec<(String, String)> = hidden_fields(&page.body);
        all.extend(fields.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let pairs: Vec<(&str, &str)> = all.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        self.walk_from(reqwest::Method::POST, &to, Some(&pairs), stop_at)
            .await
    }
}

/// The `action` of the first form of an HTML page.
fn form_action(html: &str) -> Option<String> {
    let form = &html[html.find("<form")?..];
    let at = form.find("action=\"")? + "action=\"".len();
    let end = form[at..].find('"')?;
    Some(form[at..at + end].replace("&amp;", "&"))
}

/// The hidden inputs of the first form of an HTML page.
fn hidden_fields(html: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(start) = html.find("<form") else {
        return out;
    };
    let form = &html[start
        ..html[start..]
            .find("</form>")
            .map_or(html.len(), |e| start + e)];
    for input in form.split("<input").skip(1) {
        let attr = |name: &str| {
            let key = format!("{name}=\"");
            let at = input.find(&key)? + key.len();
            let end = input[at..].find('"')?;
            Some(input[at..at + end].to_owned())
        };
        if attr("type").as_deref() == Some("hidden")
            && let (Some(n), Some(v)) = (attr("name"), attr("value"))
        {
            out.push((n, v));
        }
    }
    out
}
