//! What a sink sends: one event of the trail ([`Shipped`]) as a record in the sink's
//! format, and why a send failed ([`SinkError`]).
//!
//! The event travels as the text the chain hashed, never parsed into a tree and written
//! again: a `native` record embeds it byte for byte, and the fields a format or a transport
//! needs (the OCSF class, OTLP's attributes, HEC's time) are read from it into [`Head`],
//! borrowing from the text. Shipping costs root's cores one scan of each event per sink.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::ocsf;
use crate::config::{SinkConfig, SinkFormat};

/// One event as a sink ships it.
#[derive(Debug, Clone)]
pub struct Shipped {
    pub seq: i64,
    pub prev_hash: String,
    pub hash: String,
    /// The event's canonical JSON, as stored and hashed.
    pub event: Box<RawValue>,
}

/// The fields of an event that formats and transports read (absent ones `None`).
#[derive(Debug, Default, Deserialize)]
pub struct Head<'a> {
    #[serde(borrow)]
    pub event_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub trace_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub request_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub tool_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub capability: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub status: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub surface: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub target_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub started_at: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub finished_at: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub actor: Option<ActorHead<'a>>,
    #[serde(borrow)]
    pub error: Option<ErrorHead<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ActorHead<'a> {
    #[serde(borrow)]
    pub id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub session_id: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ErrorHead<'a> {
    #[serde(borrow)]
    pub code: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub message: Option<Cow<'a, str>>,
}

impl Head<'_> {
    /// Field `f` of the head, or `""`.
    pub fn text<'b>(f: &'b Option<Cow<'_, str>>) -> &'b str {
        f.as_deref().unwrap_or_default()
    }

    /// The event's start in unix milliseconds, when it has one.
    pub fn started_ms(&self) -> Option<i64> {
        parse_ms(&self.started_at)
    }
}

/// A timestamp field in unix milliseconds.
pub(crate) fn parse_ms(f: &Option<Cow<'_, str>>) -> Option<i64> {
    f.as_deref()
        .and_then(|t| mcp_shared::time::parse(t).ok())
        .map(mcp_shared::time::unix_ms)
}

/// A chain row as a `native` record: a line of a verifiable export.
#[derive(Serialize)]
struct Row<'a> {
    seq: i64,
    prev_hash: &'a str,
    hash: &'a str,
    event: &'a RawValue,
}

impl Shipped {
    /// The row `seq` of the trail. A stored event that is not JSON (a damaged database) is
    /// shipped as a JSON string, so the record stays valid and the damage visible.
    pub fn new(seq: i64, event: String, prev_hash: String, hash: String) -> Shipped {
        let event = match serde_json::from_str::<&RawValue>(&event) {
            Ok(raw) => raw.to_owned(),
            Err(_) => serde_json::value::to_raw_value(&event)
                .unwrap_or_else(|_| RawValue::NULL.to_owned()),
        };
        Shipped {
            seq,
            prev_hash,
            hash,
            event,
        }
    }

    /// The fields formats read (all `None` when the event is not an object).
    pub fn head(&self) -> Head<'_> {
        serde_json::from_str(self.event.get()).unwrap_or_default()
    }

    /// Appends the record in `format` to `out`: the chain row (`{"seq", "prev_hash",
    /// "hash", "event"}`), or the event's OCSF form. `head` is the event's, when the caller
    /// has read it already.
    pub fn write(
        &self,
        format: SinkFormat,
        head: Option<&Head<'_>>,
        out: &mut Vec<u8>,
    ) -> Result<(), SinkError> {
        let done = match format {
            SinkFormat::Native => serde_json::to_writer(
                &mut *out,
                &Row {
                    seq: self.seq,
                    prev_hash: &self.prev_hash,
                    hash: &self.hash,
                    event: &self.event,
                },
            ),
            SinkFormat::Ocsf => match head {
                Some(h) => serde_json::to_writer(&mut *out, &ocsf::map(h, self)),
                None => serde_json::to_writer(&mut *out, &ocsf::map(&self.head(), self)),
            },
        };
        done.map_err(|e| SinkError::Encode(e.to_string()))
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
    #[error("the sink's TLS settings: {0}")]
    Tls(String),
    #[error("encoding a record: {0}")]
    Encode(String),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &Shipped, format: SinkFormat) -> String {
        let mut out = Vec::new();
        s.write(format, None, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_native_record_carries_the_event_as_the_chain_hashed_it() {
        let stored = r#"{"actor":{"id":"lease:a","session_id":"a"},"event_id":"e\u00e9","status":"ok","tool_id":"hub.get_status"}"#;
        let s = Shipped::new(3, stored.to_owned(), "p".into(), "h".into());
        let l = line(&s, SinkFormat::Native);
        assert_eq!(
            l,
            format!(r#"{{"seq":3,"prev_hash":"p","hash":"h","event":{stored}}}"#)
        );
        let head = s.head();
        assert_eq!(Head::text(&head.event_id), "eé");
        assert_eq!(
            head.actor.as_ref().map(|a| Head::text(&a.id)),
            Some("lease:a")
        );
        let ocsf: serde_json::Value = serde_json::from_str(&line(&s, SinkFormat::Ocsf)).unwrap();
        assert_eq!(ocsf["metadata"]["uid"], "eé");
        assert_eq!(
            ocsf["unmapped"]["event"],
            serde_json::from_str::<serde_json::Value>(stored).unwrap()
        );
    }

    #[test]
    fn a_damaged_event_ships_as_a_string_and_stays_valid_json() {
        let s = Shipped::new(9, "{\"event_id\": tru".into(), "p".into(), "h".into());
        let v: serde_json::Value = serde_json::from_str(&line(&s, SinkFormat::Native)).unwrap();
        assert_eq!(v["event"], "{\"event_id\": tru");
        let o: serde_json::Value = serde_json::from_str(&line(&s, SinkFormat::Ocsf)).unwrap();
        assert_eq!(o["metadata"]["uid"], serde_json::Value::Null);
        assert_eq!(o["unmapped"]["seq"], 9);
    }
}
