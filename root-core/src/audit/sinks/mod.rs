//! Export sinks: the trail shipped where security teams look (`[[audit.sinks]]`). A sink is
//! HTTP (JSON lines, or Splunk HEC's event shape; [`http`]), OpenTelemetry logs over
//! OTLP/HTTP, to the collector that receives the traces ([`otlp`]), or RFC 5424 syslog over
//! TLS ([`syslog`]). Its events are sent as
//! the chain hashed them, or mapped to OCSF ([`ocsf`]).
//!
//! Each sink has a durable cursor in the store: the sequence number of the last event it
//! delivered. Its shipper ([`run`]) reads the events after the cursor, in order, in batches.
//! It sends a batch and only then moves the cursor (saved at most once a second), so
//! delivery is at least once. What was sent in the second before root is SIGKILLed is sent
//! again. Every event carries its `event_id` for deduplication, and no event is skipped
//! across a restart or an outage of the sink. A failed send is retried with backoff. Only
//! flushed events are shipped ([`super::flusher::Flushed::bound`]): a power loss never leaves
//! a sink holding an event the trail no longer has.
//!
//! One replica of a zone ships each sink: the one holding its claim (a PostgreSQL advisory
//! lock, freed when that replica stops or dies; another then takes over from the cursor).
//!
//! The sink's lag is `head - cursor` (the flushed head), and its policy says what a lag past `max_lag` means.
//! With `fail_open`, calls go on, and the sink is logged as behind and alerted on. With
//! `fail_closed`, new calls are refused with `audit_unavailable` until it catches up, as
//! Vault does when no audit device can write. `/metrics` shows each sink's lag, delivered
//! events and errors, and whether it blocks calls.

pub mod http;
pub mod ocsf;
pub mod otlp;
pub mod record;
pub mod syslog;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use record::{Head, Shipped, SinkError};

use super::flusher::Flushed;
use super::health::AuditHealth;
use crate::config::{SinkConfig, SinkKind, SinkPolicy};
use crate::store::{SinkClaim, Store};
use crate::telemetry::metrics::Metrics;

/// The longest wait between two attempts at a failing sink.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How often a sink that is caught up looks for new events.
const IDLE: Duration = Duration::from_millis(500);
/// How long a shipper waits after a batch that was not full, so the next one gathers the
/// events of that time (one request for many, as OpenTelemetry's batch processor waits): a
/// steady trickle of events would otherwise cost one request, and two store reads, each.
const LINGER: Duration = Duration::from_millis(200);

/// A sink's transport: sends one batch, in order.
pub(crate) enum Transport {
    Http(http::HttpSink),
    Otlp(otlp::OtlpSink),
    Syslog(syslog::SyslogSink),
}

impl Transport {
    fn of(cfg: &SinkConfig, zone: &str) -> Result<Transport, SinkError> {
        Ok(match cfg.kind {
            SinkKind::Http => Transport::Http(http::HttpSink::new(cfg)?),
            SinkKind::Otlp => Transport::Otlp(otlp::OtlpSink::new(cfg, zone)),
            SinkKind::Syslog => Transport::Syslog(syslog::SyslogSink::new(cfg, zone)?),
        })
    }

    async fn send(&self, batch: &[Shipped]) -> Result<(), SinkError> {
        match self {
            Transport::Http(s) => s.send(batch).await,
            Transport::Otlp(s) => s.send(batch).await,
            Transport::Syslog(s) => s.send(batch).await,
        }
    }
}

/// Ships the trail to sink `cfg` until `stop` (see the module's header).
pub async fn run(
    store: Store,
    flushed: Arc<Flushed>,
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
    let mut shipper = Shipper {
        store,
        flushed,
        cfg,
        transport,
        health,
        metrics,
        claim: None,
    };
    let mut backoff = Duration::from_millis(200);
    loop {
        let wait = match shipper.round().await {
            Ok(Some(sent)) => {
                backoff = Duration::from_millis(200);
                if sent < shipper.cfg.batch {
                    LINGER
                } else {
                    Duration::ZERO
                }
            }
            Ok(None) => IDLE,
            Err(e) => {
                tracing::warn!(sink = %name, error = %e, retry_in_ms = backoff.as_millis() as u64, "audit sink failed");
                shipper.metrics.sink_error(&name);
                let w = backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                w
            }
        };
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(wait) => {}
        }
    }
    shipper.release().await;
}

/// How often a shipper saves its cursor while it delivers. Between saves the cursor is kept
/// in memory: a root that dies sends at most this much of the trail again (at least once),
/// and the store takes one cursor write a second instead of one a batch.
const CURSOR_SAVE: Duration = Duration::from_secs(1);

/// A sink's shipper: its transport and, while this root ships it for the zone, its claim.
struct Shipper {
    store: Store,
    flushed: Arc<Flushed>,
    cfg: SinkConfig,
    transport: Transport,
    health: Arc<AuditHealth>,
    metrics: Arc<Metrics>,
    claim: Option<Held>,
}

/// A claim on a sink with the cursor as delivered (`cursor`) and as saved (`saved`).
struct Held {
    claim: SinkClaim,
    cursor: i64,
    saved: i64,
    saved_at: Instant,
}

fn db(e: crate::store::Error) -> SinkError {
    SinkError::Unreachable(format!("the store: {e}"))
}

impl Shipper {
    /// One round: the lag checked against the policy, then, if this root holds the sink's
    /// claim, one batch sent. The number of events delivered, if any.
    /// Every replica checks the lag (each refuses calls under `fail_closed`); one ships.
    async fn round(&mut self) -> Result<Option<usize>, SinkError> {
        let head = self
            .store
            .audit_head()
            .await
            .map_err(db)?
            .map_or(0, |(s, _)| s);
        let head = self.flushed.bound(head);
        if self.claim.is_none()
            && let Some(claim) = self.store.claim_sink(&self.cfg.name).await.map_err(db)?
        {
            let cursor = self.store.sink_cursor(&self.cfg.name).await.map_err(db)?;
            tracing::info!(sink = %self.cfg.name, cursor, "shipping the audit trail to this sink");
            self.claim = Some(Held {
                claim,
                cursor,
                saved: cursor,
                saved_at: Instant::now(),
            });
        }
        let cursor = match &self.claim {
            Some(held) => held.cursor,
            None => self.store.sink_cursor(&self.cfg.name).await.map_err(db)?,
        };
        self.judge_lag((head - cursor).max(0) as u64);
        if self.claim.is_none() || head <= cursor {
            self.save(false).await?;
            return Ok(None);
        }
        let batch: Vec<Shipped> = self
            .store
            .audit_chain_page(cursor, (self.cfg.batch as i64).min(head - cursor))
            .await
            .map_err(db)?
            .into_iter()
            .map(|(seq, event, prev_hash, hash)| Shipped::new(seq, event, prev_hash, hash))
            .collect();
        let Some(last) = batch.last().map(|s| s.seq) else {
            return Ok(None);
        };
        self.transport.send(&batch).await?;
        if let Some(held) = &mut self.claim {
            held.cursor = last;
        }
        self.metrics
            .sink_delivered(&self.cfg.name, batch.len() as u64);
        self.metrics
            .sink_lag(&self.cfg.name, (head - last).max(0) as u64);
        self.save(false).await?;
        Ok(Some(batch.len()))
    }

    /// Publishes the lag, and what the sink's policy makes of it.
    fn judge_lag(&self, lag: u64) {
        let cfg = &self.cfg;
        self.metrics.sink_lag(&cfg.name, lag);
        let behind = lag > cfg.max_lag;
        let blocks = behind && cfg.policy == SinkPolicy::FailClosed;
        self.health
            .sink_behind(&cfg.name, blocks.then_some((lag, cfg.max_lag)));
        self.metrics.sink_blocking(&cfg.name, blocks);
        if behind && cfg.policy == SinkPolicy::FailOpen {
            tracing::warn!(sink = %cfg.name, lag, max_lag = cfg.max_lag, "audit sink is behind (fail_open: calls go on)");
        }
    }

    /// Saves the cursor when it moved and [`CURSOR_SAVE`] has passed, or `now`. A zone claim
    /// is also saved unmoved each period: that proves it still holds, and a claim whose
    /// connection failed is dropped (taken again next round).
    async fn save(&mut self, now: bool) -> Result<(), SinkError> {
        let Some(held) = &mut self.claim else {
            return Ok(());
        };
        let due = now || held.saved_at.elapsed() >= CURSOR_SAVE;
        let zone = matches!(held.claim, SinkClaim::Zone(_));
        if !due || (held.cursor == held.saved && !zone) {
            return Ok(());
        }
        let at = mcp_shared::time::unix_ms(mcp_shared::time::now());
        match self
            .store
            .save_sink_cursor(&mut held.claim, &self.cfg.name, held.cursor, at)
            .await
        {
            Ok(()) => {
                held.saved = held.cursor;
                held.saved_at = Instant::now();
                Ok(())
            }
            Err(e) => {
                if let Some(held) = self.claim.take() {
                    held.claim.release().await;
                }
                Err(db(e))
            }
        }
    }

    /// Saves the cursor and gives the claim up (root stopping).
    async fn release(mut self) {
        if let Err(e) = self.save(true).await {
            tracing::warn!(sink = %self.cfg.name, error = %e, "audit sink cursor not saved at stop (its last events will be sent again)");
        }
        if let Some(held) = self.claim.take() {
            held.claim.release().await;
        }
    }
}
