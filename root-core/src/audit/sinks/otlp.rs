//! The OpenTelemetry logs sink: each batch one OTLP/HTTP export (`POST <endpoint>/v1/logs`,
//! protobuf, the OpenTelemetry project's own message types), to the collector that receives
//! root's traces. The resource is `service.name = mcp-root` with the zone. Each event is a log
//! record: its time is the event's start, its trace id the call's (so the collector joins it
//! to the call's trace), and its body the record in the sink's format. Its attributes are
//! `event_id`, `seq`, `tool_id`, `status`, `actor`, `target_id`, and severity is INFO, or
//! WARN for a denied or failed call.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

use super::record::{Head, Shipped, SinkError};
use crate::config::{SinkConfig, SinkFormat};

const TIMEOUT: Duration = Duration::from_secs(30);
/// OTLP severity numbers.
const INFO: i32 = 9;
const WARN: i32 = 13;

pub(crate) struct OtlpSink {
    client: reqwest::Client,
    url: String,
    format: SinkFormat,
    zone: String,
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
        ..Default::default()
    }
}

impl OtlpSink {
    pub(crate) fn new(cfg: &SinkConfig, zone: &str) -> OtlpSink {
        OtlpSink {
            client: reqwest::Client::builder()
                .timeout(TIMEOUT)
                .build()
                .unwrap_or_default(),
            url: format!("{}/v1/logs", cfg.endpoint.trim_end_matches('/')),
            format: cfg.format,
            zone: zone.to_owned(),
        }
    }

    fn record(&self, s: &Shipped, observed: u64) -> Result<LogRecord, SinkError> {
        let e = s.head();
        let nanos = |t: &Option<std::borrow::Cow<'_, str>>| {
            t.as_deref()
                .and_then(|t| mcp_shared::time::parse(t).ok())
                .map_or(0, |t| t.unix_timestamp_nanos().max(0) as u64)
        };
        let status = Head::text(&e.status);
        let severity = if status == "ok" { INFO } else { WARN };
        let mut body = Vec::with_capacity(1024);
        s.write(self.format, Some(&e), &mut body)?;
        let body = String::from_utf8(body).map_err(|e| SinkError::Encode(e.to_string()))?;
        Ok(LogRecord {
            time_unix_nano: nanos(&e.started_at),
            observed_time_unix_nano: observed,
            severity_number: severity,
            severity_text: if severity == INFO { "INFO" } else { "WARN" }.to_owned(),
            body: Some(AnyValue {
                value: Some(any_value::Value::StringValue(body)),
            }),
            attributes: vec![
                text("event_id", Head::text(&e.event_id)),
                KeyValue {
                    key: "seq".into(),
                    value: Some(AnyValue {
                        value: Some(any_value::Value::IntValue(s.seq)),
                    }),
                    ..Default::default()
                },
                text("tool_id", Head::text(&e.tool_id)),
                text("status", status),
                text("actor", e.actor.as_ref().map_or("", |a| Head::text(&a.id))),
                text("target_id", Head::text(&e.target_id)),
            ],
            trace_id: hex::decode(Head::text(&e.trace_id))
                .ok()
                .filter(|b| b.len() == 16)
                .unwrap_or_default(),
            event_name: "mcp_root.audit".to_owned(),
            ..Default::default()
        })
    }

    pub(crate) async fn send(&self, batch: &[Shipped]) -> Result<(), SinkError> {
        let observed = mcp_shared::time::now().unix_timestamp_nanos().max(0) as u64;
        let log_records = batch
            .iter()
            .map(|s| self.record(s, observed))
            .collect::<Result<Vec<_>, _>>()?;
        let request = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(Resource {
                    attributes: vec![
                        text("service.name", "mcp-root"),
                        text("mcp_root.zone", &self.zone),
                    ],
                    ..Default::default()
                }),
                scope_logs: vec![ScopeLogs {
                    scope: Some(InstrumentationScope {
                        name: "mcp-root.audit".to_owned(),
                        ..Default::default()
                    }),
                    log_records,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let res = self
            .client
            .post(&self.url)
            .header("content-type", "application/x-protobuf")
            .body(request.encode_to_vec())
            .send()
            .await
            .map_err(|e| SinkError::Unreachable(e.to_string()))?;
        let status = res.status();
        if status.is_success() {
            return Ok(());
        }
        Err(SinkError::Refused {
            status: status.as_u16(),
            body: String::new(),
        })
    }
}
