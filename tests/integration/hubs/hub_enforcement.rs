//! The hub's final enforcement, seen from a stand-in root that speaks the real protocol over a
//! real WebSocket: forged signatures, expired deadlines and replayed call ids are refused.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use mcp_shared::protocol::{
    self, CallOutcome, CallRequest, Envelope, HubToRoot, PROTOCOL_VERSION, RootToHub,
};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

fn frame(body: RootToHub) -> Message {
    let env = Envelope {
        v: PROTOCOL_VERSION,
        id: uuid::Uuid::now_v7().to_string(),
        in_reply_to: None,
        body,
    };
    Message::Text(serde_json::to_string(&env).unwrap().into())
}

fn call(id: &str, tool: &str, expires_at_ms: i64) -> CallRequest {
    CallRequest {
        call_id: id.into(),
        trace_id: "trace".into(),
        session_id: "lease".into(),
        tool_id: tool.into(),
        capability: "infra.read.status".into(),
        body: mcp_shared::protocol::CallBody {
            arguments: json!({}),
            dry_run: false,
            idempotency_key: None,
            confirmed_effect: None,
        },
        expires_at_ms,
        traceparent: None,
        signature: String::new(),
    }
}

#[tokio::test]
async fn forged_expired_replayed_and_unpublished_calls_are_refused_by_the_hub() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let token = "mcph_standin-token-for-enforcement-tests";
    let key = protocol::signing_key(token);
    let hub = tokio::spawn({
        let url = url.clone();
        async move { mcp_tests::TestHub::start(&url, "hub:test-alpha", token, "").await }
    });

    let (tcp, _) = listener.accept().await.unwrap();
    let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
    let hello = match ws.next().await.unwrap().unwrap() {
        Message::Text(t) => protocol::decode::<HubToRoot>(t.as_str()).unwrap(),
        other => panic!("expected hello, got {other:?}"),
    };
    let HubToRoot::Hello {
        token: sent,
        descriptor,
        ..
    } = hello.body
    else {
        panic!("first frame must be hello")
    };
    assert_eq!(sent, token);
    assert_eq!(descriptor.target_id, "hub:test-alpha");
    ws.send(frame(RootToHub::Welcome {
        target_id: "hub:test-alpha".into(),
        heartbeat_interval_ms: 60_000,
        root_time_ms: None,
        max_clock_skew_ms: None,
        features: Vec::new(),
        evidence: None,
    }))
    .await
    .unwrap();
    let hub = hub.await.unwrap().unwrap();

    let now = mcp_shared::time::unix_ms(mcp_shared::time::now());
    let mut good = call("c-1", "hub.get_status", now + 10_000);
    good.sign(&key);
    let mut forged = call("c-2", "hub.get_status", now + 10_000);
    forged.sign(&protocol::signing_key("some other hub"));
    let mut tampered = good.clone();
    tampered.call_id = "c-3".into();
    let mut expired = call("c-4", "hub.get_status", now - 1);
    expired.sign(&key);
    let mut unpublished = call("c-5", "hub.not_published_here", now + 10_000);
    unpublished.sign(&key);
    for c in [
        good.clone(),
        forged,
        tampered,
        expired,
        good.clone(),
        unpublished,
    ] {
        ws.send(frame(RootToHub::Call(c))).await.unwrap();
    }
    // Garbage never takes the hub down: it answers with a protocol error.
    ws.send(Message::Text("{not a frame".into())).await.unwrap();

    let mut results = Vec::new();
    let mut protocol_errors = 0;
    while results.len() < 6 {
        let msg = mcp_tests::next_frame(&mut ws, Duration::from_secs(10)).await;
        let Message::Text(t) = msg else { continue };
        match protocol::decode::<HubToRoot>(t.as_str()).unwrap().body {
            HubToRoot::Result { call_id, outcome } => results.push((call_id, outcome)),
            HubToRoot::ProtocolError { .. } => protocol_errors += 1,
            _ => {}
        }
    }
    let code = |id: &str, nth: usize| -> String {
        match &results.iter().filter(|(c, _)| c == id).nth(nth).unwrap().1 {
            CallOutcome::Ok { .. } => "ok".into(),
            CallOutcome::Error { error, .. } => error.code.as_str().into(),
        }
    };
    // The replay is refused on arrival, so it may be answered before the original.
    let mut c1 = vec![code("c-1", 0), code("c-1", 1)];
    c1.sort();
    assert_eq!(c1, ["ok", "replay_rejected"]);
    assert_eq!(code("c-2", 0), "signature_invalid");
    assert_eq!(code("c-3", 0), "signature_invalid");
    assert_eq!(code("c-4", 0), "deadline_expired");
    assert_eq!(code("c-5", 0), "skill_disabled");
    // The protocol error for the garbage frame may arrive before or after the results.
    if protocol_errors == 0 {
        let msg = mcp_tests::next_frame(&mut ws, Duration::from_secs(5)).await;
        let Message::Text(t) = msg else {
            panic!("expected a protocol error")
        };
        assert!(matches!(
            protocol::decode::<HubToRoot>(t.as_str()).unwrap().body,
            HubToRoot::ProtocolError { .. }
        ));
    }
    assert!(hub.handle().is_connected());
    hub.stop().await;
}
