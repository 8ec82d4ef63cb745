//! What a sink sends: one event of the trail ([`Shipped`]) as a record in the sink's
//! format, and why a send failed ([`SinkError`]).

use serde_json::Value;

use super::ocsf;
use crate::config::{SinkConfig, SinkFormat};

/// One event as a sink ships it.
#[derive(Debug, Clone)]
pub struct Shipped {
    pub seq: i64,
    pub prev_hash: String,
    pub hash: String,
    /// The event as stored (canonical JSON, parsed).
    pub event: Value,
}

impl Shipped {
    pub fn event_id(&self) -> &str {
        self.event["event_id"].as_str().unwrap_or_default()
    }

    /// The record a sink sends, in `format`: the chain row (`{"seq", "prev_hash", "hash",
    /// "event"}`, a line of a verifiable export), or the event's OCSF form.
    pub fn record(&self, format: SinkFormat) -> Value {
        match format {
            SinkFormat::Native => serde_json::json!({
                "seq": self.seq,
                "prev_hash": self.prev_hash,
                "hash": self.hash,
                "event": self.event,
            }),
            SinkFormat::Ocsf => ocsf::map(&self.event, self.seq, &self.hash),
        }
    }
}

/// Why a batch was not delivered.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("cannot reach the sink: {0}")]
    Unreachable(String),
    #[error("the sink answered {status}: {body}")]
    Refused { status: u16, body: String },
    #[error("the sink's token file: {0}")]
    Token(String),
}

/// Reads a sink's token file (trimmed).
pub(crate) fn token(cfg: &SinkConfig) -> Result<Option<String>, SinkError> {
    cfg.token_file
        .as_ref()
        .map(|p| {
            crate::secrets::read_private_file(p)
                .map(|t| t.trim().to_owned())
                .map_err(|e| SinkError::Token(e.to_string()))
        })
        .transpose()
}
