//! Export sinks: the trail shipped where security teams look (`[[audit.sinks]]`). A sink is
//! HTTP (JSON lines, or Splunk HEC's event shape; [`http`]) or OpenTelemetry logs over
//! OTLP/HTTP, to the collector that receives the traces ([`otlp`]). Its events are sent as
//! the chain hashed them, or mapped to OCSF ([`ocsf`]).
//!
//! Each sink has a durable cursor in the store: the sequence number of the last event it
//! delivered. Its shipper ([`run`]) reads the events after the cursor, in order, in batches.
//! It sends a batch and only then moves the cursor, so delivery is at least once. A batch sent
//! just before root is SIGKILLed, and not yet recorded, is sent again. Every event carries
//! its `event_id` for deduplication, and no event is skipped across a restart or an outage of
//! the sink. A failed send is retried with backoff.
//!
//! The sink's lag is `head - cursor`, and its policy says what a lag past `max_lag` means.
//! With `fail_open`, calls go on, and the sink is logged as behind and alerted on. With
//! `fail_closed`, new calls are refused with `audit_unavailable` until it catches up, as
//! Vault does when no audit device can write. `/metrics` shows each sink's lag, delivered
//! events and errors, and whether it blocks calls.

pub mod http;
pub mod ocsf;
pub mod otlp;
pub mod record;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub use record::{Shipped, SinkError};

use super::health::AuditHealth;
use crate::config::{SinkConfig, SinkKind, SinkPolicy};
use crate::store::Store;
use crate::telemetry::metrics::Metrics;

/// The longest wait between two attempts at a failing sink.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How often a sink that is caught up looks for new events.
const IDLE: Duration = Duration::from_millis(500);

/// A sink's transport: sends one batch, in order.
pub(crate) enum Transport {
    Http(http::HttpSink),
    Otlp(otlp::OtlpSink),
}

impl Transport {
    fn of(cfg: &SinkConfig, zone: &str) -> Result<Transport, SinkError> {
        Ok(match cfg.kind {
            SinkKind::Http => Transport::Http(http::HttpSink::new(cfg)?),
            SinkKind::Otlp => Transport::Otlp(otlp::OtlpSink::new(cfg, zone)),
        })
    }

    async fn send(&self, batch: &[Shipped]) -> Result<(), SinkError> {
        match self {
            Transport::Http(s) => s.send(batch).await,
            Transport::Otlp(s) => s.send(batch).await,
        }
    }
}

/// Ships the trail to sink `cfg` until `stop` (see the module's header).
pub async fn run(
    store: Store,
    cfg: SinkConfig,
    zone: String,
    health: Arc<AuditHealth>,
    metrics: Arc<Metrics>,
    stop: tokio_util::sync::CancellationToken,
) {
    let name = cfg.name.clone();
    let transport = match Transport::of(&cfg, &zone) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(sink = %name, error = %e, "audit sink cannot start");
            metrics.sink_error(&name);
            return;
        }
    };
    let mut backoff = Duration::from_millis(200);
    loop {
        let wait = match ship_once(&store, &cfg, &transport, &health, &metrics).await {
            Ok(true) => {
                backoff = Duration::from_millis(200);
                Duration::ZERO
            }
            Ok(false) => IDLE,
            Err(e) => {
                tracing::warn!(sink = %name, error = %e, retry_in_ms = backoff.as_millis() as u64, "audit sink failed");
                metrics.sink_error(&name);
                let w = backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                w
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// One round: the lag checked against the policy, then one batch sent and the cursor moved.
/// `true` when a batch was delivered (more may be waiting).
async fn ship_once(
    store: &Store,
    cfg: &SinkConfig,
    transport: &Transport,
    health: &AuditHealth,
    metrics: &Metrics,
) -> Result<bool, SinkError> {
    let db = |e: crate::store::Error| SinkError::Unreachable(format!("the store: {e}"));
    let cursor = store.sink_cursor(&cfg.name).await.map_err(db)?;
    let head = store.audit_head().await.map_err(db)?.map_or(0, |(s, _)| s);
    let lag = (head - cursor).max(0) as u64;
    metrics.sink_lag(&cfg.name, lag);
    let behind = lag > cfg.max_lag;
    let blocks = behind && cfg.policy == SinkPolicy::FailClosed;
    health.sink_behind(&cfg.name, blocks.then_some((lag, cfg.max_lag)));
    metrics.sink_blocking(&cfg.name, blocks);
    if behind && cfg.policy == SinkPolicy::FailOpen {
        tracing::warn!(sink = %cfg.name, lag, max_lag = cfg.max_lag, "audit sink is behind (fail_open: calls go on)");
    }
    if lag == 0 {
        return Ok(false);
    }
    let rows = store
        .audit_chain_page(cursor, cfg.batch as i64)
        .await
        .map_err(db)?;
    let batch: Vec<Shipped> = rows
        .into_iter()
        .map(|(seq, json, prev_hash, hash)| Shipped {
            seq,
            prev_hash,
            hash,
            event: serde_json::from_str(&json).unwrap_or(Value::String(json)),
        })
        .collect();
    let Some(last) = batch.last().map(|s| s.seq) else {
        return Ok(false);
    };
    transport.send(&batch).await?;
    store
        .advance_sink_cursor(
            &cfg.name,
            last,
            mcp_shared::time::unix_ms(mcp_shared::time::now()),
        )
        .await
        .map_err(db)?;
    metrics.sink_delivered(&cfg.name, batch.len() as u64);
    metrics.sink_lag(&cfg.name, (head - last).max(0) as u64);
    Ok(true)
}
