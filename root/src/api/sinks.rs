//! The export sinks as operators see them (`GET /v1/root/mcp/audit/sinks`, `audit::sinks`):
//! each one's configuration (never its token), its saved cursor, its lag behind the trail's
//! head, and this replica's counts of deliveries and failed sends.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::config::{SinkFormat, SinkKind, SinkPolicy};

/// One sink, as served.
#[derive(Debug, Serialize)]
pub(crate) struct SinkBody {
    pub(crate) name: String,
    pub(crate) kind: &'static str,
    pub(crate) endpoint: String,
    pub(crate) format: &'static str,
    pub(crate) policy: &'static str,
    pub(crate) max_lag: u64,
    /// The sequence number of the last event delivered, as saved (at most a second old).
    pub(crate) cursor: i64,
    /// The trail's newest sequence number.
    pub(crate) head: i64,
    /// Events behind the head, from the saved cursor.
    pub(crate) lag: u64,
    /// Whether the sink refuses calls now (`fail_closed`, more than `max_lag` behind).
    pub(crate) blocking: bool,
    /// This replica's counts since it started.
    pub(crate) delivered: u64,
    pub(crate) errors: u64,
}

pub(super) async fn list(
    State(app): State<Arc<App>>,
    _op: Operator,
) -> Result<Json<Vec<SinkBody>>, ApiError> {
    let head = app
        .store
        .audit_head()
        .await
        .map_err(ApiError::internal)?
        .map_or(0, |(s, _)| s);
    let mut out = Vec::new();
    for cfg in &app.config.audit.sinks {
        let cursor = app
            .store
            .sink_cursor(&cfg.name)
            .await
            .map_err(ApiError::internal)?;
        let (_, delivered, errors, _) = app.metrics.sink_counts(&cfg.name);
        let lag = (head - cursor).max(0) as u64;
        out.push(SinkBody {
            name: cfg.name.clone(),
            kind: match cfg.kind {
                SinkKind::Http => "http",
                SinkKind::Otlp => "otlp",
                SinkKind::Syslog => "syslog",
            },
            endpoint: cfg.endpoint.clone(),
            format: match cfg.format {
                SinkFormat::Native => "native",
                SinkFormat::Ocsf => "ocsf",
            },
            policy: match cfg.policy {
                SinkPolicy::FailOpen => "fail_open",
                SinkPolicy::FailClosed => "fail_closed",
            },
            max_lag: cfg.max_lag,
            cursor,
            head,
            lag,
            blocking: cfg.policy == SinkPolicy::FailClosed && lag > cfg.max_lag,
            delivered,
            errors,
        });
    }
    Ok(Json(out))
}
