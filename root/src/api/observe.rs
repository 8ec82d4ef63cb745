//! Observability reads of the REST family computed from the audit trail, for the operator
//! console and any other client (no second observability API):
//!
//! - `GET /v1/root/mcp/audit/stream`: Server-Sent Events of audit events committed after a
//!   sequence number (`after_seq`, or the `Last-Event-ID` a reconnecting `EventSource` sends;
//!   by default from now on), with the filters of `/audit`. Each event's SSE id is its `seq`.
//! - `GET /v1/root/mcp/audit/usage`: per tool and per capability profile, counts by status,
//!   error rate and latency percentiles over a window, plus error codes and a time series.
//!
//! Both are operator-only. The stream waits on the audit writer's committed head (a watch
//! channel), so it never polls an idle store and ends when root shuts down.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use mcp_shared::error::ErrorCode;
use mcp_shared::event::EventStatus;
use mcp_shared::time::{format, from_unix_ms, now, unix_ms};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::store::{AuditFilter, AuditRow};

/// Events sent per store read of the stream.
const STREAM_PAGE: i64 = 200;
/// Most events a usage summary reads (newest first); a larger window is reported truncated.
const USAGE_MAX_EVENTS: i64 = 10_000;

fn check_status(s: &Option<String>) -> Result<(), ApiError> {
    match s.as_deref() {
        None | Some("ok" | "error" | "denied") => Ok(()),
        Some(other) => Err(ApiError::bad_request(format!(
            "status must be ok, error or denied, not `{other}`"
        ))),
    }
}

fn parse_time(name: &str, v: &Option<String>) -> Result<Option<i64>, ApiError> {
    v.as_deref()
        .map(|s| {
            mcp_shared::time::parse(s)
                .map(unix_ms)
                .map_err(|e| ApiError::bad_request(format!("{name} must be RFC 3339: {e}")))
        })
        .transpose()
}

/// An audit row as the REST family shows it: the event plus `seq` and `hash`.
pub(crate) fn row_json(r: &AuditRow) -> Value {
    let mut v = serde_json::to_value(&r.event).unwrap_or(Value::Null);
    v["seq"] = json!(r.seq);
    v["hash"] = json!(r.hash);
    v
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StreamQuery {
    /// Send events with a larger sequence number; default: the head when the stream opens.
    after_seq: Option<i64>,
    target_id: Option<String>,
    tool_id: Option<String>,
    status: Option<String>,
    trace_id: Option<String>,
    actor: Option<String>,
}

struct StreamState {
    app: Arc<App>,
    head: tokio::sync::watch::Receiver<i64>,
    filter: AuditFilter,
    last_seq: i64,
    buffered: VecDeque<Event>,
}

/// `GET /v1/root/mcp/audit/stream`.
pub(crate) async fn stream(
    State(app): State<Arc<App>>,
    _op: Operator,
    headers: HeaderMap,
    q: Result<Query<StreamQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    check_status(&q.status)?;
    let head = app.audit.head.subscribe();
    let last_event_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok());
    let last_seq = last_event_id
        .or(q.after_seq)
        .unwrap_or_else(|| *head.borrow())
        .max(0);
    let state = StreamState {
        app,
        head,
        filter: AuditFilter {
            target_id: q.target_id,
            tool_id: q.tool_id,
            status: q.status,
            trace_id: q.trace_id,
            actor: q.actor,
            limit: STREAM_PAGE,
            ascending: true,
            ..Default::default()
        },
        last_seq,
        buffered: VecDeque::new(),
    };
    let events = futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(ev) = st.buffered.pop_front() {
                return Some((Ok(ev), st));
            }
            // What is committed up to `head` is readable now.
            let head = *st.head.borrow_and_update();
            if head > st.last_seq {
                let mut f = st.filter.clone();
                f.after_seq = Some(st.last_seq);
                match st.app.store.query_audit(&f).await {
                    Ok(rows) => {
                        let full = rows.len() as i64 == STREAM_PAGE;
                        for r in &rows {
                            let data = serde_json::to_string(&row_json(r)).unwrap_or_default();
                            st.buffered.push_back(
                                Event::default()
                                    .event("audit")
                                    .id(r.seq.to_string())
                                    .data(data),
                            );
                        }
                        st.last_seq = match rows.last() {
                            Some(r) if full => r.seq,
                            Some(r) => r.seq.max(head),
                            None => head,
                        };
                        if !st.buffered.is_empty() {
                            continue;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "audit stream read failed; ending the stream");
                        return None;
                    }
                }
            }
            tokio::select! {
                _ = st.app.shutdown.cancelled() => return None,
                changed = st.head.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
            }
        }
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsageQuery {
    /// RFC 3339; default one hour before `until`.
    since: Option<String>,
    /// RFC 3339; default now.
    until: Option<String>,
    target_id: Option<String>,
    /// Width of the time series' buckets in seconds (default: the window / 60, at least 10).
    bucket_sec: Option<i64>,
}

#[derive(Default)]
struct Tally {
    calls: u64,
    ok: u64,
    error: u64,
    denied: u64,
    /// Refused past a rate (`[rates]`), among the denied.
    rate_limited: u64,
    latencies_ms: Vec<f64>,
}

impl Tally {
    fn add(&mut self, e: &mcp_shared::event::OperationalEvent, latency_ms: f64) {
        self.calls += 1;
        match e.status {
            EventStatus::Ok => self.ok += 1,
            EventStatus::Error => self.error += 1,
            EventStatus::Denied => self.denied += 1,
        }
        if e.error
            .as_ref()
            .is_some_and(|x| x.code == ErrorCode::RateLimited)
        {
            self.rate_limited += 1;
        }
        self.latencies_ms.push(latency_ms);
    }

    fn json(mut self, key: &str, name: &str) -> Value {
        self.latencies_ms.sort_by(f64::total_cmp);
        let p = |q: f64| percentile(&self.latencies_ms, q);
        json!({
            key: name,
            "calls": self.calls,
            "ok": self.ok,
            "error": self.error,
            "denied": self.denied,
            "rate_limited": self.rate_limited,
            "error_rate": if self.calls == 0 { 0.0 } else { self.error as f64 / self.calls as f64 },
            "denied_rate": if self.calls == 0 { 0.0 } else { self.denied as f64 / self.calls as f64 },
            "latency_ms": { "p50": p(0.50), "p95": p(0.95), "p99": p(0.99), "max": self.latencies_ms.last().copied() },
        })
    }
}

/// The nearest-rank percentile of sorted values, rounded to microseconds.
fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some((sorted[rank - 1] * 1000.0).round() / 1000.0)
}

/// `GET /v1/root/mcp/audit/usage`.
pub(crate) async fn usage(
    State(app): State<Arc<App>>,
    _op: Operator,
    q: Result<Query<UsageQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let until_ms = parse_time("until", &q.until)?.unwrap_or_else(|| unix_ms(now()) + 1);
    let since_ms = parse_time("since", &q.since)?.unwrap_or(until_ms - 3_600_000);
    if since_ms >= until_ms {
        return Err(ApiError::bad_request("since must be before until"));
    }
    let window_ms = until_ms - since_ms;
    let bucket_ms = match q.bucket_sec {
        Some(b) if !(1..=86_400).contains(&b) => {
            return Err(ApiError::bad_request(
                "bucket_sec must be between 1 and 86400",
            ));
        }
        Some(b) => b * 1000,
        None => (window_ms / 60).max(10_000),
    };
    if window_ms / bucket_ms > 1_000 {
        return Err(ApiError::bad_request(
            "the window holds more than 1000 buckets; widen bucket_sec",
        ));
    }
    let rows = app
        .store
        .query_audit(&AuditFilter {
            target_id: q.target_id.clone(),
            since_ms: Some(since_ms),
            until_ms: Some(until_ms),
            limit: USAGE_MAX_EVENTS,
            ..Default::default()
        })
        .await
        .map_err(ApiError::internal)?;
    let truncated = rows.len() as i64 == USAGE_MAX_EVENTS;
    let mut total = Tally::default();
    let mut by_tool: BTreeMap<String, Tally> = BTreeMap::new();
    let mut by_profile: BTreeMap<String, Tally> = BTreeMap::new();
    let mut by_code: BTreeMap<String, u64> = BTreeMap::new();
    let n_buckets = ((window_ms + bucket_ms - 1) / bucket_ms).max(1) as usize;
    let mut series = vec![(0u64, 0u64, 0u64); n_buckets];
    for r in &rows {
        let e = &r.event;
        let latency_ms = (e.finished_at - e.started_at).as_seconds_f64().max(0.0) * 1000.0;
        total.add(e, latency_ms);
        by_tool
            .entry(e.tool_id.clone())
            .or_default()
            .add(e, latency_ms);
        let profile = e
            .actor
            .capability_profile
            .clone()
            .unwrap_or_else(|| e.actor.id.clone());
        by_profile.entry(profile).or_default().add(e, latency_ms);
        if let Some(err) = &e.error {
            let code = serde_json::to_value(err.code)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            *by_code.entry(code).or_default() += 1;
        }
        let i = ((unix_ms(e.started_at) - since_ms) / bucket_ms).clamp(0, n_buckets as i64 - 1);
        let b = &mut series[i as usize];
        b.0 += 1;
        match e.status {
            EventStatus::Error => b.1 += 1,
            EventStatus::Denied => b.2 += 1,
            EventStatus::Ok => {}
        }
    }
    let mut tools: Vec<Value> = by_tool
        .into_iter()
        .map(|(k, t)| t.json("tool_id", &k))
        .collect();
    tools.sort_by_key(|v| std::cmp::Reverse(v["calls"].as_u64().unwrap_or(0)));
    let mut profiles: Vec<Value> = by_profile
        .into_iter()
        .map(|(k, t)| t.json("capability_profile", &k))
        .collect();
    profiles.sort_by_key(|v| std::cmp::Reverse(v["calls"].as_u64().unwrap_or(0)));
    let mut codes: Vec<Value> = by_code
        .into_iter()
        .map(|(code, count)| json!({ "code": code, "count": count }))
        .collect();
    codes.sort_by_key(|v| std::cmp::Reverse(v["count"].as_u64().unwrap_or(0)));
    let buckets: Vec<Value> = series
        .iter()
        .enumerate()
        .map(|(i, (calls, errors, denied))| {
            json!({
                "at": format(from_unix_ms(since_ms + i as i64 * bucket_ms)),
                "calls": calls, "ok": calls - errors - denied, "error": errors, "denied": denied,
            })
        })
        .collect();
    Ok(Json(json!({
        "since": format(from_unix_ms(since_ms)),
        "until": format(from_unix_ms(until_ms)),
        "target_id": q.target_id,
        "events": rows.len(),
        "truncated": truncated,
        "totals": total.json("scope", "all"),
        "by_tool": tools,
        "by_profile": profiles,
        "by_error_code": codes,
        "series": { "bucket_sec": bucket_ms / 1000, "buckets": buckets },
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(percentile(&[], 0.5), None);
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), Some(50.0));
        assert_eq!(percentile(&v, 0.95), Some(95.0));
        assert_eq!(percentile(&v, 0.99), Some(99.0));
        assert_eq!(percentile(&[7.0], 0.99), Some(7.0));
    }
}
