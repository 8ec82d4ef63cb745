//! The admin client: root's REST family with the operator's bearer, an error body turned into
//! the command's error, and the two ways an answer is printed (JSON or lines for people).

use std::io::Write;

use anyhow::{Context, bail};
use reqwest::header::AUTHORIZATION;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::bodies::ErrorAnswer;

/// What a path segment keeps as it is: RFC 3986's unreserved characters and `:` (target ids
/// are `hub:web-1`); everything else, `/`, `?`, `#` and `%` included, is percent-encoded.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b':');

/// `s` as one URL path segment: an id such as `x/lifecycle/retire?` stays one segment of the
/// path it is put into, never a path or query of its own. `.`, `..` and the empty id are
/// refused (a URL parser would drop or climb them).
pub(crate) fn segment(s: &str) -> anyhow::Result<String> {
    let bare = s.replace("%2e", ".").replace("%2E", ".");
    if bare.is_empty() || bare == "." || bare == ".." {
        bail!("`{s}` is not an id (empty, `.` and `..` cannot name anything in a URL)");
    }
    Ok(percent_encoding::utf8_percent_encode(s, SEGMENT).to_string())
}

/// A small HTTP client for the admin API.
pub struct AdminClient {
    base: String,
    token: String,
    http: reqwest::Client,
    /// The key the token is bound to (DPoP): each request then carries its proof.
    holder: Option<crate::dpop::holder::Holder>,
    /// Root's latest DPoP nonce, once it asked for one.
    nonce: std::sync::Mutex<Option<String>>,
}

/// The CLI's HTTP client: root's answers within 30 s, an https root verified against
/// `ca_file` (PEM) when given instead of the system's roots.
pub(crate) fn http_client(ca_file: Option<&std::path::Path>) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30));
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .with_context(|| format!("{}: not a PEM certificate bundle", path.display()))?;
        builder = builder.tls_certs_only(certs);
    }
    Ok(builder.build()?)
}

impl AdminClient {
    pub fn new(base: String, token: String) -> anyhow::Result<AdminClient> {
        Self::with_ca(base, token, None)
    }

    /// A client that verifies an https root against `ca_file` (PEM) instead of the system's
    /// roots.
    pub(crate) fn with_ca(
        base: String,
        token: String,
        ca_file: Option<&std::path::Path>,
    ) -> anyhow::Result<AdminClient> {
        let http = http_client(ca_file)?;
        Ok(AdminClient {
            base: base.trim_end_matches('/').to_string(),
            token,
            http,
            holder: None,
            nonce: std::sync::Mutex::new(None),
        })
    }

    /// The client, its token bound to `holder`'s key (DPoP) when there is one.
    pub(crate) fn holding(mut self, holder: Option<crate::dpop::holder::Holder>) -> AdminClient {
        self.holder = holder;
        self
    }

    /// Sends `req` with the operator's credential (and a DPoP proof when it is bound; once
    /// more with root's nonce when root asks for one).
    async fn sent(&self, req: reqwest::RequestBuilder) -> anyhow::Result<reqwest::Response> {
        let mut request = req.build()?;
        let Some(holder) = &self.holder else {
            let value = format!("Bearer {}", self.token).parse()?;
            request.headers_mut().insert(AUTHORIZATION, value);
            return self.execute(request).await;
        };
        request
            .headers_mut()
            .insert(AUTHORIZATION, format!("DPoP {}", self.token).parse()?);
        let again = request.try_clone();
        let res = self.execute(self.proved(holder, request)?).await?;
        let asked = res.status() == reqwest::StatusCode::UNAUTHORIZED
            && res.headers().get(crate::dpop::NONCE_HEADER).is_some();
        let (Some(again), true) = (again, asked) else {
            return Ok(res);
        };
        *self.nonce.lock().unwrap_or_else(|e| e.into_inner()) = res
            .headers()
            .get(crate::dpop::NONCE_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        self.execute(self.proved(holder, again)?).await
    }

    /// `request` with a fresh proof of `holder`'s key for it.
    fn proved(
        &self,
        holder: &crate::dpop::holder::Holder,
        mut request: reqwest::Request,
    ) -> anyhow::Result<reqwest::Request> {
        let nonce = self.nonce.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let proof = holder.proof(
            request.method().as_str(),
            request.url().as_str(),
            Some(&self.token),
            nonce.as_deref(),
        )?;
        request
            .headers_mut()
            .insert(crate::dpop::HEADER, proof.parse()?);
        Ok(request)
    }

    async fn execute(&self, request: reqwest::Request) -> anyhow::Result<reqwest::Response> {
        self.http
            .execute(request)
            .await
            .with_context(|| format!("cannot reach root at {}", self.base))
    }

    /// Sends `req` with the operator's credential; the answer as `T`, or root's refusal as an
    /// error.
    async fn send<T: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> anyhow::Result<T> {
        let res = self.sent(req).await?;
        let status = res.status();
        let body = res
            .bytes()
            .await
            .with_context(|| format!("reading root's answer ({status})"))?;
        if !status.is_success() {
            let why = match serde_json::from_slice::<ErrorAnswer>(&body) {
                Ok(e) => e.error.message,
                Err(_) => String::from_utf8_lossy(&body).chars().take(500).collect(),
            };
            bail!("root answered {status}: {why}");
        }
        serde_json::from_slice(&body).with_context(|| {
            format!(
                "root's answer is not the {} this CLI reads",
                std::any::type_name::<T>()
                    .rsplit("::")
                    .next()
                    .unwrap_or("body")
            )
        })
    }

    pub(crate) async fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    pub(crate) async fn get_query<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> anyhow::Result<T> {
        self.send(self.http.get(format!("{}{path}", self.base)).query(query))
            .await
    }

    pub async fn post<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> anyhow::Result<T> {
        self.send(self.http.post(format!("{}{path}", self.base)).json(body))
            .await
    }
}

/// Prints an answer: as JSON with `--json`, else as the human line(s) `human` makes of it. A
/// closed pipe (`… | head`) is not an error worth a panic.
pub(super) fn print<T: Serialize>(json_out: bool, answer: &T, human: impl FnOnce(&T) -> String) {
    let text = if json_out {
        serde_json::to_string_pretty(answer).unwrap_or_default()
    } else {
        human(answer)
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}").and_then(|()| out.flush());
}

/// `lines` one per line, or `none` when there are none.
pub(super) fn lines_or(lines: Vec<String>, none: &str) -> String {
    if lines.is_empty() {
        none.into()
    } else {
        lines.join("\n")
    }
}

/// A fleet-sized list's filters plus the page asked for, as query pairs.
pub(super) fn page_query(
    filters: Vec<(&'static str, Option<String>)>,
    page: &super::commands::PageArgs,
    cursor: Option<String>,
) -> Vec<(&'static str, String)> {
    let mut q: Vec<(&str, String)> = filters
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
    q.push(("limit", page.limit.to_string()));
    if let Some(c) = cursor.or_else(|| page.cursor.clone()) {
        q.push(("cursor", c));
    }
    q
}

/// The footer of a page as the CLI prints it: how many of how many, and how to go on.
pub(super) fn page_footer(
    shown: usize,
    total: usize,
    by_status: &std::collections::BTreeMap<String, usize>,
    next: Option<&str>,
) -> String {
    let counts: Vec<String> = by_status.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let mut out = format!("{shown} of {total} ({})", counts.join(", "));
    if let Some(c) = next {
        out.push_str(&format!("; next page: --cursor {c}"));
    }
    out
}
