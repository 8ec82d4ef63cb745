//! Reads answered when written, effects when flushed (`[audit] reads`): while a flush of the
//! trail is held (fault injection on root's flush thread), reads are answered, an operator's
//! action is not, and no signed checkpoint, cosignature or sink delivery covers the reads'
//! events; once the flush goes, all of them catch up. And root SIGKILLed while reads stream
//! loses none of the events of the reads it answered, under either setting.

use mcp_tests::items;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mcp_tests::root_process::RootProcess;
use mcp_tests::witness::Witnessed;
use mcp_tests::{TestRoot, eventually};
use serde_json::{Value, json};

use super::sinks::{Received, receivers, trail_ids};

/// The event ids the sink's HTTP receiver got.
fn shipped(got: &Received) -> BTreeSet<String> {
    let lines = got.http.lock().unwrap();
    lines.iter().map(|(id, _)| id.clone()).collect()
}

/// The newest checkpoint's size and the sizes a witness cosigned.
async fn signed(a: &TestRoot) -> (u64, Vec<u64>) {
    let l = a
        .admin_get("/v1/root/mcp/audit/checkpoints?limit=100")
        .await;
    let size = l["latest"]["tree_size"].as_u64().unwrap_or(0);
    let cosigned = items(&l["checkpoints"])
        .iter()
        .filter(|c| c["cosignatures"].as_array().is_some_and(|s| !s.is_empty()))
        .filter_map(|c| c["tree_size"].as_u64())
        .collect();
    (size, cosigned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_a_flush_is_held_reads_answer_and_nothing_signed_or_shipped_covers_them() {
    let zones = Witnessed::start().await.unwrap();
    let (sink, got) = receivers(None).await;
    let a = TestRoot::start_with(|c| {
        // The flush thread held here is SQLite's (on PostgreSQL a commit is a flush), whatever
        // MCP_TEST_ALL_ON_POSTGRES says.
        TestRoot::on_sqlite(c);
        zones.zone_a(c);
        c.audit.checkpoint.every_events = 1;
        c.audit.checkpoint.every_sec = 1;
        c.audit.sinks = vec![
            toml::from_str(&format!(
                "name = \"siem\"\nkind = \"http\"\nendpoint = \"{sink}/ingest\"\n"
            ))
            .unwrap(),
        ];
    })
    .await
    .unwrap();
    assert_eq!(
        a.handle().app.config.audit.reads,
        mcp_root::config::Durability::Written
    );
    let bearer = a.bearer("hub:durable", "AdaOSDevRead").await;
    let (s, body) = a.call(&bearer, "sdk.get_metadata", json!({})).await;
    assert_eq!(s, 200, "{body}");
    // Everything so far is flushed, signed, cosigned and shipped.
    let base = a.handle().base_url();
    let settled = async || {
        let ids: BTreeSet<String> = trail_ids(&base, &a.admin_token())
            .await
            .into_iter()
            .collect();
        eventually("the whole trail signed, cosigned and shipped", async || {
            let (size, cosigned) = signed(&a).await;
            let shipped = shipped(&got);
            (size == ids.len() as u64 && cosigned.contains(&size) && ids.is_subset(&shipped))
                .then_some(())
        })
        .await;
        ids
    };
    let before = settled().await;

    let flushed = a.handle().app.audit_flushed().clone();
    flushed.hold();
    let held_at = before.len() as i64;
    // Reads are answered while their flush is held.
    let mut reads = Vec::new();
    for _ in 0..5 {
        let call = a.call(&bearer, "sdk.get_metadata", json!({}));
        let (s, body) = tokio::time::timeout(Duration::from_secs(10), call)
            .await
            .expect("a read waits for no flush");
        assert_eq!(s, 200, "{body}");
        reads.push(body["event_id"].as_str().unwrap().to_owned());
    }
    // An operator's action (a lease issued) is not answered before its event is flushed.
    let lease = {
        let admin = a.admin();
        let ask = json!({ "target_id": "hub:durable", "capability_profile": "AdaOSDevRead", "ttl_sec": 600 });
        tokio::spawn(async move { admin.post_status("/v1/root/mcp/sessions", ask).await })
    };
    // Checkpoints are due every event and every second, the sink polls, the witness is asked
    // each second: three seconds, and none of them went past the flush.
    tokio::time::sleep(Duration::from_secs(3)).await;
    if lease.is_finished() {
        let answered = lease.await.unwrap();
        panic!("an effect answered before its flush: {answered:?}");
    }
    assert!(flushed.seq() <= held_at, "{} past {held_at}", flushed.seq());
    let (size, cosigned) = signed(&a).await;
    assert!(
        size <= held_at as u64,
        "a checkpoint of {size} over unflushed events"
    );
    assert!(
        cosigned.iter().all(|s| *s <= held_at as u64),
        "{cosigned:?}"
    );
    let shipped = shipped(&got);
    for id in &reads {
        assert!(!shipped.contains(id), "a sink got unflushed event {id}");
    }
    let head = a.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(
        head["checked"],
        held_at + 6,
        "the reads and the lease are written: {head}"
    );

    // Once flushed, the action is answered and all of them cover everything.
    flushed.release();
    let (status, body) = lease.await.unwrap().unwrap();
    assert_eq!(status, 201, "{body}");
    let after = settled().await;
    assert_eq!(after.len(), before.len() + 6);
    assert!(reads.iter().all(|id| after.contains(id)));
    let v = a.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(v["ok"], true, "{v}");
    a.stop().await;
    zones.b.stop().await;
}

/// Reads from `clients` concurrent callers until `stop`; the event ids of those answered.
async fn stream_reads(base: &str, bearers: &[String], stop: Arc<AtomicBool>) -> Vec<String> {
    let mut tasks = Vec::new();
    for bearer in bearers {
        let (base, bearer, stop) = (base.to_owned(), bearer.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let http = mcp_tests::http_client();
            let mut answered = Vec::new();
            while !stop.load(Ordering::Acquire) {
                let res = http
                    .post(format!("{base}/v1/root/mcp/call"))
                    .bearer_auth(&bearer)
                    .json(&json!({ "tool_id": "sdk.get_metadata", "arguments": {} }))
                    .send()
                    .await;
                let Ok(res) = res else { break };
                let Ok(body) = res.json::<Value>().await else {
                    break;
                };
                if let Some(id) = body["event_id"].as_str().filter(|id| !id.is_empty()) {
                    answered.push(id.to_owned());
                }
            }
            answered
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

async fn sigkill_while_reads_stream(reads: &str) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("root.toml");
    std::fs::write(&config, format!("[audit]\nreads = \"{reads}\"\n")).unwrap();
    let root = RootProcess::serve_with(dir.path(), Some(&config), Duration::from_secs(60))
        .await
        .unwrap();
    let admin = |root: &RootProcess| {
        mcp_tests::admin::Admin::new(mcp_tests::http_client(), &root.base, &root.admin)
    };
    let mut bearers = Vec::new();
    for i in 0..4 {
        let ask = json!({ "target_id": format!("hub:k-{i}"), "capability_profile": "AdaOSDevRead", "ttl_sec": 600 });
        let lease = admin(&root)
            .post("/v1/root/mcp/sessions", ask)
            .await
            .unwrap();
        bearers.push(lease["token"].as_str().unwrap().to_owned());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let streaming = tokio::spawn({
        let (base, stop) = (root.base.clone(), stop.clone());
        async move { stream_reads(&base, &bearers, stop).await }
    });
    // Killed mid-stream: the callers' requests in flight fail, and they stop.
    mcp_tests::until("reads answered", async || {
        trail_ids(&root.base, &root.admin).await.len() > 200
    })
    .await;
    let mut root = root;
    root.proc.kill();
    stop.store(true, Ordering::Release);
    let answered = streaming.await.unwrap();
    assert!(answered.len() > 100, "{}", answered.len());
    std::fs::rename(dir.path().join("root.log"), dir.path().join("root.1.log")).unwrap();
    let root = RootProcess::serve_with(dir.path(), Some(&config), Duration::from_secs(60))
        .await
        .unwrap();
    let v = admin(&root).get("/v1/root/mcp/audit/verify").await.unwrap();
    assert_eq!(v["ok"], true, "reads = {reads}: {v}");
    let trail: BTreeSet<String> = trail_ids(&root.base, &root.admin)
        .await
        .into_iter()
        .collect();
    let lost: Vec<&String> = answered.iter().filter(|id| !trail.contains(*id)).collect();
    assert!(
        lost.is_empty(),
        "reads = {reads}: answered reads without their event: {lost:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_while_reads_stream_loses_no_answered_read_under_either_setting() {
    sigkill_while_reads_stream("written").await;
    sigkill_while_reads_stream("flushed").await;
}
