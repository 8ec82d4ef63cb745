//! The one admin client: root's REST API under a base URL with the admin bearer, for
//! [`crate::TestRoot`], the soak and the tests that run `mcp-root serve` as processes.

use anyhow::Context;
use serde_json::Value;

/// Root's admin API at `base` (`http://127.0.0.1:<port>`), with the admin bearer.
#[derive(Clone, Debug)]
pub struct Admin {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
}

impl Admin {
    pub fn new(http: reqwest::Client, base: impl Into<String>, token: impl Into<String>) -> Admin {
        Admin {
            http,
            base: base.into(),
            token: token.into(),
        }
    }

    /// GET `path`; its JSON body, or an error naming the path and the status (with the body)
    /// unless the status is a success.
    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let res = self.request(reqwest::Method::GET, path, None).await?;
        success("GET", path, res).await
    }

    /// POST `body` to `path`; its JSON answer, or an error unless the status is a success.
    pub async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let res = self
            .request(reqwest::Method::POST, path, Some(body))
            .await?;
        success("POST", path, res).await
    }

    /// GET `path`: `(status, body)` whatever the status (`null` for a body that is no JSON).
    pub async fn get_status(&self, path: &str) -> anyhow::Result<(u16, Value)> {
        let res = self.request(reqwest::Method::GET, path, None).await?;
        Ok((
            res.status().as_u16(),
            res.json().await.unwrap_or(Value::Null),
        ))
    }

    /// POST `body` to `path`: `(status, answer)` whatever the status (`null` for an answer
    /// that is no JSON).
    pub async fn post_status(&self, path: &str, body: Value) -> anyhow::Result<(u16, Value)> {
        let res = self
            .request(reqwest::Method::POST, path, Some(body))
            .await?;
        Ok((
            res.status().as_u16(),
            res.json().await.unwrap_or(Value::Null),
        ))
    }

    async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<reqwest::Response> {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        req.send().await.with_context(|| format!("{method} {path}"))
    }
}

/// The JSON body of a successful answer; an error with the status and body otherwise.
async fn success(method: &str, path: &str, res: reqwest::Response) -> anyhow::Result<Value> {
    let status = res.status();
    if !status.is_success() {
        let text = res.text().await.unwrap_or_default();
        anyhow::bail!("{method} {path}: {status} {text}");
    }
    res.json()
        .await
        .with_context(|| format!("{method} {path}: the JSON body"))
}
