//! Root's two connection budgets (`root/src/net/listener.rs`, `api/hub_link/door.rs`): hub
//! links past `limits.max_hub_links` are refused at the door with `503` and `Retry-After`
//! and come back on their own once a place frees; client connections past
//! `limits.max_connections` still get their probes answered and everything else a `503`
//! with `Retry-After`; and while hubs sit at their cap, agents and operators are served.

use mcp_tests::error_message;
use std::time::Duration;

use mcp_tests::{PATIENCE, TestHub, TestRoot, eventually, mcp_client};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `mcp_root_connections_refused_total{kind}`.
async fn refused(root: &TestRoot, kind: &str) -> u64 {
    root.metric(&format!(
        "mcp_root_connections_refused_total{{kind=\"{kind}\"}}"
    ))
    .await
    .unwrap()
    .unwrap_or(0)
}

/// One request on a new connection; the whole answer (root closes the connection after
/// it, or it is read until a pause).
async fn one_request(root: &TestRoot, request: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(root.handle().addr)
        .await
        .unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut all = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => all.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&all).into_owned()
}

fn get(path: &str, bearer: Option<&str>) -> String {
    let auth = bearer.map_or(String::new(), |b| format!("Authorization: Bearer {b}\r\n"));
    format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hubs_at_their_cap_are_refused_with_retry_after_and_clients_are_still_served() {
    let root = TestRoot::start_with(|c| {
        c.limits.max_hub_links = 2;
        c.limits.max_connections = 16;
    })
    .await
    .unwrap();
    let base = root.handle().base_url();
    let first = root.start_hub("hub:cap-a", "").await.unwrap();
    let _second = root.start_hub("hub:cap-b", "").await.unwrap();

    // A third hub's upgrade is refused at the door, before its token is looked up.
    let token = root.enroll("hub:cap-c", "test").await.unwrap();
    let refusal = mcp_tests::dial_hub_door(&base, Some(&token)).await;
    let Err(tokio_tungstenite::tungstenite::Error::Http(answer)) = refusal else {
        panic!("a hub past the cap was upgraded: {refusal:?}");
    };
    assert_eq!(answer.status(), 503);
    assert_eq!(
        answer
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("5")
    );
    let body: Value = serde_json::from_slice(answer.body().as_deref().unwrap_or_default()).unwrap();
    assert_eq!(body["error"]["code"], "busy", "{body}");
    assert!(error_message(&body).contains("max_hub_links"), "{body}");

    // The real hub keeps trying (and waiting as told) while root is at its cap.
    let third = TestHub::launch(&base, "hub:cap-c", &token, "")
        .await
        .unwrap();
    eventually("the third hub refused at the cap", async || {
        (refused(&root, "hub_links").await >= 2).then_some(())
    })
    .await;
    assert!(!third.handle().is_connected());

    // Meanwhile agents, operators and probes are served.
    for probe in ["/healthz", "/readyz"] {
        let answer = one_request(&root, &get(probe, None)).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{probe}: {answer}");
    }
    let bearer = root.bearer("hub:cap-a", "InfraOpsRead").await;
    let client = mcp_client(&root.mcp_url(), &bearer).await.unwrap();
    mcp_tests::hub_status(&client).await;
    let hubs = root.admin_get("/v1/root/hubs").await;
    assert!(hubs.to_string().contains("hub:cap-c"), "{hubs}");
    let console = one_request(&root, &get("/ui/", None)).await;
    assert!(console.starts_with("HTTP/1.1 200"), "{console}");

    // A place frees: the refused hub gets in on its own, after the wait it was told.
    first.stop().await;
    third
        .handle()
        .wait_connected(PATIENCE)
        .await
        .expect("the refused hub connected once a place freed");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_past_their_budget_get_503_while_probes_still_answer() {
    const MAX: usize = 4;
    let root = TestRoot::start_with(|c| {
        c.limits.max_connections = MAX;
        c.limits.header_read_timeout_ms = 60_000;
    })
    .await
    .unwrap();
    let bearer = root.bearer("hub:none", "InfraOpsRead").await;
    let before = refused(&root, "connections").await;

    // Every client place taken by connections that send nothing.
    let mut idle = Vec::new();
    for _ in 0..MAX {
        idle.push(
            tokio::net::TcpStream::connect(root.handle().addr)
                .await
                .unwrap(),
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Probes are answered (and the connection closes after each).
    for (probe, bearer) in [
        ("/healthz", None),
        ("/readyz", None),
        ("/metrics", Some(root.admin_token())),
    ] {
        let answer = one_request(&root, &get(probe, bearer.as_deref())).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{probe}: {answer}");
        assert!(
            answer.to_ascii_lowercase().contains("connection: close"),
            "{probe}: {answer}"
        );
    }
    // Anything else waits a moment for a place, then is refused, saying when to come back.
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let mcp = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {bearer}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let answer = one_request(&root, &mcp).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 1"),
        "{answer}"
    );
    assert!(
        answer.contains("\"busy\"") && answer.contains("max_connections"),
        "{answer}"
    );
    assert!(refused(&root, "connections").await > before);

    // Places free: clients are served again. (All of them: an rmcp client holds several
    // connections at once, its event stream and pooled POSTs.)
    drop(idle);
    let client = eventually("an MCP client served once places freed", async || {
        mcp_client(&root.mcp_url(), &bearer).await.ok()
    })
    .await;
    client.peer().list_all_tools().await.unwrap();
    client.cancel().await.unwrap();
}
