//! The HTTP sink: each batch one POST to `endpoint`. `json_lines` sends one record per line
//! (`application/x-ndjson`), with the token, if any, as a bearer. `splunk_hec` sends HEC's
//! event shape, `{"time", "host", "source", "sourcetype", "event"}` per record, concatenated
//! as HEC's `/services/collector/event` takes them, with `Authorization: Splunk <token>`. A
//! 2xx answer is delivery; anything else, or no answer within 30 s, is a failure to retry.

use std::time::Duration;

use super::record::{Shipped, SinkError};
use crate::config::{HttpShape, SinkConfig, SinkFormat};

/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Most bytes of a refusal's body kept for the log.
const BODY_KEPT: usize = 512;

pub(crate) struct HttpSink {
    client: reqwest::Client,
    endpoint: String,
    shape: HttpShape,
    format: SinkFormat,
    token: Option<String>,
}

impl HttpSink {
    pub(crate) fn new(cfg: &SinkConfig) -> Result<HttpSink, SinkError> {
        Ok(HttpSink {
            client: reqwest::Client::builder()
                .timeout(TIMEOUT)
                .build()
                .map_err(|e| SinkError::Unreachable(e.to_string()))?,
            endpoint: cfg.endpoint.clone(),
            shape: cfg.shape,
            format: cfg.format,
            token: super::record::token(cfg)?,
        })
    }

    /// The request body of `batch`.
    fn body(&self, batch: &[Shipped]) -> String {
        let mut body = String::new();
        for s in batch {
            let record = s.record(self.format);
            let line = match self.shape {
                HttpShape::JsonLines => record,
                HttpShape::SplunkHec => serde_json::json!({
                    "time": s.event["started_at"]
                        .as_str()
                        .and_then(|t| mcp_shared::time::parse(t).ok())
                        .map(|t| mcp_shared::time::unix_ms(t) as f64 / 1000.0),
                    "source": "mcp-root",
                    "sourcetype": "_json",
                    "event": record,
                }),
            };
            body.push_str(&line.to_string());
            body.push('\n');
        }
        body
    }

    pub(crate) async fn send(&self, batch: &[Shipped]) -> Result<(), SinkError> {
        let mut req = self
            .client
            .post(&self.endpoint)
            .header("content-type", "application/x-ndjson")
            .body(self.body(batch));
        if let Some(t) = &self.token {
            req = match self.shape {
                HttpShape::JsonLines => req.bearer_auth(t),
                HttpShape::SplunkHec => req.header("authorization", format!("Splunk {t}")),
            };
        }
        let res = req
            .send()
            .await
            .map_err(|e| SinkError::Unreachable(e.to_string()))?;
        let status = res.status();
        if status.is_success() {
            return Ok(());
        }
        let mut body = res.text().await.unwrap_or_default();
        let mut cut = BODY_KEPT.min(body.len());
        while !body.is_char_boundary(cut) {
            cut -= 1;
        }
        body.truncate(cut);
        Err(SinkError::Refused {
            status: status.as_u16(),
            body,
        })
    }
}
