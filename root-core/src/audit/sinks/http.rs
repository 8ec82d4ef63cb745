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

    /// The request body of `batch`: one record per line, in HEC's envelope for
    /// `splunk_hec`.
    fn body(&self, batch: &[Shipped]) -> Result<Vec<u8>, SinkError> {
        let mut body = Vec::with_capacity(batch.len() * 1024);
        for s in batch {
            match self.shape {
                HttpShape::JsonLines => s.write(self.format, None, &mut body)?,
                HttpShape::SplunkHec => {
                    let head = s.head();
                    let time = head.started_ms().map(|ms| ms as f64 / 1000.0);
                    body.extend_from_slice(b"{\"time\":");
                    serde_json::to_writer(&mut body, &time)
                        .map_err(|e| SinkError::Encode(e.to_string()))?;
                    body.extend_from_slice(
                        b",\"source\":\"mcp-root\",\"sourcetype\":\"_json\",\"event\":",
                    );
                    s.write(self.format, Some(&head), &mut body)?;
                    body.push(b'}');
                }
            }
            body.push(b'\n');
        }
        Ok(body)
    }

    pub(crate) async fn send(&self, batch: &[Shipped]) -> Result<(), SinkError> {
        let mut req = self
            .client
            .post(&self.endpoint)
            .header("content-type", "application/x-ndjson")
            .body(self.body(batch)?);
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
