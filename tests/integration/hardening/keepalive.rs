//! Keep-alive without a race: root's request-head timer and its idle timer are apart. A
//! keep-alive connection idle longer than the head timer is still served (the race reqwest
//! and Go pools met when the head timer also timed the idle wait); an idle connection ends
//! after `keep_alive_timeout_ms`, counted as `idle`; a head that stops half way, or never
//! starts, ends after `header_read_timeout_ms`, counted as `header`; an event stream and a
//! hub's WebSocket quiet for longer than either live on. Raw sockets, so that the connection
//! reused is known to be the same one.

use std::time::{Duration, Instant};

use mcp_tests::{TestRoot, eventually};

use super::faults::timeouts;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

/// One response read off `s`: its status line (headers and a `Content-Length` body read
/// past); `None` if the connection closed first.
async fn response(s: &mut TcpStream) -> Option<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).into_owned();
            let len = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0usize);
            if got.len() >= end + 4 + len {
                return head.lines().next().map(str::to_owned);
            }
        }
        match tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => return None,
        }
    }
}

/// How long until the peer closes `s` (EOF or reset), at most 10 s.
async fn closed_after(s: &mut TcpStream) -> Option<Duration> {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return start.elapsed(),
                Ok(_) => {}
            }
        }
    })
    .await
    .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keep_alive_connection_idle_past_the_head_timer_is_still_served() {
    let root = TestRoot::start_with(|c| c.limits.header_read_timeout_ms = 300)
        .await
        .unwrap();
    let mut s = TcpStream::connect(root.handle().addr).await.unwrap();
    for round in 0..3 {
        s.write_all(HEALTHZ).await.unwrap();
        let status = response(&mut s).await;
        assert_eq!(
            status.as_deref(),
            Some("HTTP/1.1 200 OK"),
            "request {round}"
        );
        // Idle for three head timers: what a client's pool would do between two requests.
        tokio::time::sleep(Duration::from_millis(900)).await;
    }
    assert_eq!(timeouts(&root, "header").await, 0);
    assert_eq!(timeouts(&root, "idle").await, 0);
    // And through a client with its pool as shipped (reqwest keeps idle connections 90 s).
    let http = reqwest::Client::new();
    for _ in 0..2 {
        let res = http.get(root.url("/healthz")).send().await.unwrap();
        assert_eq!(res.status(), 200);
        tokio::time::sleep(Duration::from_millis(900)).await;
    }
    root.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_half_sent_connections_end_by_their_own_timers_and_streams_live_on() {
    let root = TestRoot::start_with(|c| {
        c.limits.header_read_timeout_ms = 400;
        c.limits.keep_alive_timeout_ms = 1_500;
        c.limits.heartbeat_interval_ms = 10_000;
    })
    .await
    .unwrap();
    let hub = root.start_hub("hub:keepalive", "").await.unwrap();
    let bearer = root.bearer("hub:keepalive", "InfraOpsRead").await;
    let addr = root.handle().addr;
    let (head0, idle0) = (
        timeouts(&root, "header").await,
        timeouts(&root, "idle").await,
    );

    // Idle after a response: ended by the idle timer, not the head timer.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(HEALTHZ).await.unwrap();
    assert!(response(&mut idle).await.is_some());
    let after = closed_after(&mut idle)
        .await
        .expect("an idle connection ended");
    assert!(
        after >= Duration::from_millis(1_200),
        "ended after {after:?}"
    );
    // A later request's head that stops half way: ended by the head timer.
    let mut half = TcpStream::connect(addr).await.unwrap();
    half.write_all(HEALTHZ).await.unwrap();
    assert!(response(&mut half).await.is_some());
    tokio::time::sleep(Duration::from_millis(200)).await;
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127")
        .await
        .unwrap();
    let after = closed_after(&mut half)
        .await
        .expect("a half-sent head ended");
    assert!(
        after < Duration::from_millis(1_200),
        "ended after {after:?}"
    );
    // A connection that never sends a byte: its first head is timed from the accept.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let after = closed_after(&mut silent)
        .await
        .expect("a silent connection ended");
    assert!(
        after < Duration::from_millis(1_200),
        "ended after {after:?}"
    );
    eventually("each counted by its kind", async || {
        let (h, i) = (
            timeouts(&root, "header").await,
            timeouts(&root, "idle").await,
        );
        (h >= head0 + 2 && i > idle0).then_some(())
    })
    .await;

    // An event stream quiet for longer than both timers is not cut: its event arrives.
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            format!(
                "GET /v1/root/mcp/audit/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\
                 Accept: text/event-stream\r\n\r\n",
                root.admin_token()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let (s, body) = root
        .call(&bearer, "hub.get_status", serde_json::json!({}))
        .await;
    assert_eq!(s, 200, "{body}");
    let event_id = body["event_id"].as_str().unwrap().to_owned();
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    let arrived = tokio::time::timeout(Duration::from_secs(10), async {
        while !String::from_utf8_lossy(&seen).contains(&event_id) {
            match stream.read(&mut buf).await {
                Ok(n) if n > 0 => seen.extend_from_slice(&buf[..n]),
                _ => return false,
            }
        }
        true
    })
    .await;
    assert_eq!(
        arrived,
        Ok(true),
        "the stream was cut: {}",
        String::from_utf8_lossy(&seen)
    );
    // The hub's WebSocket, quiet between heartbeats 10 s apart, is still the same link.
    let since = |b: serde_json::Value| b["result"]["connected_since"].clone();
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let (_, later) = root
        .call(&bearer, "hub.get_status", serde_json::json!({}))
        .await;
    assert_eq!(
        since(later),
        since(body),
        "the hub's link was ended as idle"
    );
    hub.stop().await;
    root.stop().await;
}
