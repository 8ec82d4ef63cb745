//! The audit trail shipped to export sinks: an HTTP endpoint (JSON lines, as the chain hashed
//! each event) and an OTLP/HTTP logs receiver (the events in OCSF), both real servers in this
//! test. The HTTP sink answers 500 for a while and root is SIGKILLed mid-export: every event
//! arrives, duplicates only as the same event. A sink whose connections close mid-request
//! loses nothing either. A `fail_closed` sink that falls too far behind stops new calls,
//! audited, until it catches up. (One shipper per sink across replicas:
//! `zone::replica_state`.)

use mcp_tests::error_message;
use mcp_tests::items;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::StatusCode;
use mcp_tests::root_process::RootProcess;
use mcp_tests::{TestRoot, eventually, until};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use prost::Message;
use serde_json::{Value, json};

/// What the receivers got: each line's event id and the line.
#[derive(Default)]
pub(crate) struct Received {
    pub(crate) http: Mutex<Vec<(String, String)>>,
    otlp: Mutex<Vec<(String, Value)>>,
    /// Requests the HTTP endpoint refuses (500) before it accepts.
    refuse: AtomicU32,
}

/// An HTTP endpoint and an OTLP logs receiver on one loopback port.
pub(crate) async fn receivers(on: Option<std::net::SocketAddr>) -> (String, Arc<Received>) {
    // The tests' HTTP clients (reqwest) need the process's TLS provider, even for http://.
    mcp_tests::init_crypto();
    let got = Arc::new(Received::default());
    let (h, o) = (got.clone(), got.clone());
    let app = axum::Router::new()
        .route(
            "/ingest",
            axum::routing::post(move |body: String| {
                let got = h.clone();
                async move {
                    if got
                        .refuse
                        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                        .is_ok()
                    {
                        return StatusCode::INTERNAL_SERVER_ERROR;
                    }
                    let mut lines = got.http.lock().unwrap();
                    for l in body.lines().filter(|l| !l.is_empty()) {
                        let v: Value = serde_json::from_str(l).expect("a JSON line");
                        let id = v["event"]["event_id"].as_str().unwrap_or_default().to_owned();
                        lines.push((id, l.to_owned()));
                    }
                    StatusCode::OK
                }
            }),
        )
        .route(
            "/v1/logs",
            axum::routing::post(move |body: Bytes| {
                let got = o.clone();
                async move {
                    let req = ExportLogsServiceRequest::decode(body).expect("OTLP logs");
                    let mut seen = got.otlp.lock().unwrap();
                    for r in req
                        .resource_logs
                        .iter()
                        .flat_map(|r| &r.scope_logs)
                        .flat_map(|s| &s.log_records)
                    {
                        let id = r
                            .attributes
                            .iter()
                            .find(|a| a.key == "event_id")
                            .and_then(|a| a.value.as_ref())
                            .and_then(|v| match &v.value {
                                Some(opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s)) => Some(s.clone()),
                                _ => None,
                            })
                            .unwrap_or_default();
                        let body = match r.body.as_ref().and_then(|b| b.value.as_ref()) {
                            Some(opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s)) => {
                                serde_json::from_str(s).unwrap_or(Value::Null)
                            }
                            _ => Value::Null,
                        };
                        seen.push((id, body));
                    }
                    StatusCode::OK
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind(on.unwrap_or(([127, 0, 0, 1], 0).into()))
        .await
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, got)
}

/// Every event id in the trail, from the chain.
pub(crate) async fn trail_ids(base: &str, admin: &str) -> Vec<String> {
    let http = mcp_tests::http_client();
    let page: Value = mcp_tests::get_json(
        &http,
        format!("{base}/v1/root/mcp/audit/chain?limit=5000"),
        admin,
    )
    .await;
    items(&page["events"])
        .iter()
        .map(|e| e["event"]["event_id"].as_str().unwrap().to_owned())
        .collect()
}

async fn leases(base: &str, admin: &str, from: usize, n: usize) {
    let http = mcp_tests::http_client();
    for i in from..from + n {
        let res = http
            .post(format!("{base}/v1/root/mcp/sessions"))
            .bearer_auth(admin)
            .json(&json!({ "target_id": format!("hub:s-{i}"), "capability_profile": "InfraOpsRead", "ttl_sec": 600 }))
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sinks_deliver_every_event_across_an_outage_and_a_sigkill() {
    let (sink, got) = receivers(None).await;
    got.refuse.store(3, Ordering::Release);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("root.toml");
    std::fs::write(
        &config,
        format!(
            "[[audit.sinks]]\nname = \"http\"\nkind = \"http\"\nendpoint = \"{sink}/ingest\"\nbatch = 7\n\n\
             [[audit.sinks]]\nname = \"otel\"\nkind = \"otlp\"\nendpoint = \"{sink}\"\nformat = \"ocsf\"\nbatch = 50\n"
        ),
    )
    .unwrap();
    let root = RootProcess::serve_with(dir.path(), Some(&config), Duration::from_secs(60))
        .await
        .unwrap();
    leases(&root.base, &root.admin, 0, 40).await;
    // Root dies mid-export: some batches are out, the rest not.
    until("some events delivered", async || {
        got.http.lock().unwrap().len() >= 7
    })
    .await;
    let mut root = root;
    root.proc.kill();
    std::fs::rename(dir.path().join("root.log"), dir.path().join("root.1.log")).unwrap();
    let root = RootProcess::serve_with(dir.path(), Some(&config), Duration::from_secs(60))
        .await
        .unwrap();
    leases(&root.base, &root.admin, 40, 10).await;
    let all: BTreeSet<String> = trail_ids(&root.base, &root.admin)
        .await
        .into_iter()
        .collect();
    assert!(all.len() >= 50, "{}", all.len());
    eventually("every event at both sinks", async || {
        let http: BTreeSet<String> = got
            .http
            .lock()
            .unwrap()
            .iter()
            .map(|(id, _)| id.clone())
            .collect();
        let otlp: BTreeSet<String> = got
            .otlp
            .lock()
            .unwrap()
            .iter()
            .map(|(id, _)| id.clone())
            .collect();
        (all.is_subset(&http) && all.is_subset(&otlp)).then_some(())
    })
    .await;
    // Duplicates are only the same event again, as the chain hashed it.
    let mut lines: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (id, line) in got.http.lock().unwrap().iter() {
        lines.entry(id.clone()).or_default().insert(line.clone());
    }
    for (id, copies) in &lines {
        assert!(all.contains(id), "an event the trail does not hold: {id}");
        assert_eq!(
            copies.len(),
            1,
            "event {id} arrived with different contents"
        );
    }
    // The OCSF form: a lease's issue is an Authentication (3002) logon.
    let lease = got
        .otlp
        .lock()
        .unwrap()
        .iter()
        .find(|(_, b)| b["api"]["operation"] == "admin.lease.create")
        .map(|(_, b)| b.clone())
        .expect("a lease's event");
    assert_eq!(
        (lease["class_uid"].as_u64(), lease["activity_id"].as_u64()),
        (Some(3002), Some(1))
    );
    assert!(lease["metadata"]["uid"].is_string());
    // The lag is gone, and shown.
    let http = mcp_tests::http_client();
    until("lag 0 in /metrics", async || {
        let m = mcp_tests::get_text(&http, format!("{}/metrics", root.base), &root.admin).await;
        m.contains("mcp_root_audit_sink_lag_events{sink=\"http\"} 0")
            && m.contains("mcp_root_audit_sink_lag_events{sink=\"otel\"} 0")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fail_closed_sink_too_far_behind_stops_calls_until_it_catches_up() {
    // A port nothing listens on yet: the sink fails until its receiver starts there.
    let reserved = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = reserved.local_addr().unwrap();
    drop(reserved);
    let root = TestRoot::start_with(|c| {
        c.audit.sinks = vec![
            toml::from_str(&format!(
                "name = \"siem\"\nkind = \"http\"\nendpoint = \"http://{addr}/ingest\"\npolicy = \"fail_closed\"\nmax_lag = 3\n"
            ))
            .unwrap(),
        ];
    })
    .await
    .unwrap();
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    for _ in 0..4 {
        root.admin_post(
            "/v1/root/mcp/sessions",
            json!({ "target_id": "hub:x", "capability_profile": "AdaOSDevRead", "ttl_sec": 60 }),
        )
        .await;
    }
    let refused = eventually("calls refused", async || {
        let (s, body) = root.call(&token, "sdk.get_metadata", json!({})).await;
        (s != 200).then_some(body)
    })
    .await;
    assert_eq!(refused["error"]["code"], "audit_unavailable", "{refused}");
    let message = error_message(&refused);
    assert!(
        message.contains("audit sink `siem`") && message.contains("fail_closed"),
        "{refused}"
    );
    // The refusal itself is in the trail.
    let event = root
        .audit_event(refused["event_id"].as_str().unwrap())
        .await;
    assert_eq!(event["error"]["code"], "audit_unavailable", "{event}");
    // The receiver starts: the sink catches up and calls run again.
    let (_, got) = receivers(Some(addr)).await;
    eventually("calls run again", async || {
        let (s, _) = root.call(&token, "sdk.get_metadata", json!({})).await;
        (s == 200).then_some(())
    })
    .await;
    assert!(got.http.lock().unwrap().len() >= 6);
    root.stop().await;
}

/// A TCP front for `to` that cuts its first `cuts` connections once it has read part of a
/// request (the sink's peer going away mid-stream), and relays the later ones.
async fn cutting_front(to: &str, cuts: u32) -> (String, Arc<AtomicU32>) {
    use tokio::io::AsyncReadExt;
    let to = to.trim_start_matches("http://").to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let cut = Arc::new(AtomicU32::new(0));
    let seen = cut.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            if seen.load(Ordering::Acquire) < cuts {
                seen.fetch_add(1, Ordering::AcqRel);
                let mut part = [0u8; 200];
                let _ = conn.read_exact(&mut part).await;
                drop(conn);
                continue;
            }
            let to = to.clone();
            tokio::spawn(async move {
                if let Ok(mut up) = tokio::net::TcpStream::connect(&to).await {
                    let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
                }
            });
        }
    });
    (base, cut)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_that_closes_mid_stream_loses_nothing() {
    let (sink, got) = receivers(None).await;
    let (front, cut) = cutting_front(&sink, 3).await;
    let root = TestRoot::start_with(|c| {
        c.audit.sinks = vec![
            toml::from_str(&format!(
                "name = \"cut\"\nkind = \"http\"\nendpoint = \"{front}/ingest\"\nbatch = 5\n"
            ))
            .unwrap(),
        ];
    })
    .await
    .unwrap();
    let base = root.url("");
    leases(&base, &root.admin_token(), 0, 20).await;
    let all: BTreeSet<String> = trail_ids(&base, &root.admin_token())
        .await
        .into_iter()
        .collect();
    eventually("every event past the cut connections", async || {
        let http: BTreeSet<String> = got
            .http
            .lock()
            .unwrap()
            .iter()
            .map(|(id, _)| id.clone())
            .collect();
        all.is_subset(&http).then_some(())
    })
    .await;
    assert_eq!(cut.load(Ordering::Acquire), 3, "three connections cut");
    let errors = root
        .metric("mcp_root_audit_sink_errors_total{sink=\"cut\"}")
        .await
        .unwrap()
        .expect("the sink's error counter");
    assert!(errors >= 3, "each cut counted as an error: {errors}");
    root.stop().await;
}
