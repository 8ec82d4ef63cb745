//! Replica-to-replica traffic over TLS (issue 9): roots of one zone on one PostgreSQL schema
//! (`MCP_TEST_DATABASE_URL`; skipped, and said so, without), each serving HTTPS with a
//! certificate from a throwaway CA and advertising its `https://` address, a hub on one of
//! them over WSS, and an MCP client on another whose call is forwarded over TLS. A replica
//! whose `replica.ca_file` is another CA refuses to forward (a precise error to the client,
//! the call's audit event still written), and a TLS replica never forwards to a peer that
//! advertises plain `http://` unless `replica.insecure_http_peers` allows it.

use mcp_tests::items;
use std::path::Path;
use std::time::{Duration, Instant};

use mcp_root::config::RootConfig;
use mcp_tests::zone::Zone;
use mcp_tests::{TestHub, TestRoot};
use rmcp::model::CallToolRequestParams;
use serde_json::Value;

use crate::hardening::tls::{
    Leaf, Pki, https_client, hub_tls, mcp_https, tls_config, wait_for_log,
};

/// A replica of `zone` (the default zone, `zone-local`); `tls` is its certificate and the CA
/// its REST helpers trust; `f` sets the rest (`[replica] ca_file`, ...).
async fn replica(
    zone: &Zone,
    id: &str,
    tls: Option<(&Leaf, &Path)>,
    f: impl FnOnce(&mut RootConfig),
) -> TestRoot {
    let mut root = zone
        .replica_with(id, |c| {
            c.tls = tls.map(|(leaf, _)| tls_config(leaf, None, 0));
            f(c);
        })
        .await;
    if let Some((_, ca)) = tls {
        root.http = https_client(ca);
    }
    root
}

/// The replicas in `root`'s zone view: id → (advertised address, hubs held).
async fn zone_view(root: &TestRoot) -> Vec<(String, String, Vec<String>)> {
    let view = root.admin_get("/v1/root/replicas").await;
    assert_eq!(view["mode"], "replicated", "{view}");
    items(&view["replicas"])
        .iter()
        .map(|r| {
            (
                r["replica_id"].as_str().unwrap().to_owned(),
                r["advertise_url"].as_str().unwrap_or("").to_owned(),
                items(&r["hubs"])
                    .iter()
                    .filter_map(|h| h.as_str().map(str::to_owned))
                    .collect(),
            )
        })
        .collect()
}

/// Waits until `root` sees `target`'s hub held by replica `owner` and online.
async fn wait_for_owner(root: &TestRoot, target: &str, owner: &str) {
    let start = Instant::now();
    loop {
        let held = zone_view(root)
            .await
            .iter()
            .any(|(id, _, hubs)| id == owner && hubs.iter().any(|h| h == target));
        let online = root.admin_get("/v1/root/hubs").await["targets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["target_id"] == target && t["status"] == "online");
        if held && online {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{target} never seen on {owner}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The audit events written for lease `session_id` on the zone's one chain.
async fn events_of(root: &TestRoot, session_id: &str) -> Vec<Value> {
    root.trail(&format!("actor=lease:{session_id}"))
        .await
        .clone()
}

/// The error an MCP tool result carries (`isError` with `structuredContent.error`).
fn tool_error(res: &rmcp::model::CallToolResult) -> Value {
    assert_eq!(res.is_error, Some(true), "{res:?}");
    res.structured_content.as_ref().unwrap()["error"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_forward_over_tls_and_a_replica_with_the_wrong_ca_refuses() {
    let Some(zone) = Zone::create("zone-local").await else {
        return;
    };
    let pki = Pki::new("replicas");
    let wrong = Pki::new("not-the-zone");
    let ca = pki.ca_file();
    let (a_cert, b_cert, w_cert) = (pki.server("r-a"), pki.server("r-b"), pki.server("r-w"));
    let a = replica(&zone, "tls-a", Some((&a_cert, &ca)), |c| {
        c.replica.ca_file = Some(ca.clone());
    })
    .await;
    let b = replica(&zone, "tls-b", Some((&b_cert, &ca)), |c| {
        c.replica.ca_file = Some(ca.clone());
    })
    .await;
    // Trusts another CA for its peers: it cannot verify A or B.
    let w = replica(&zone, "tls-w", Some((&w_cert, &ca)), |c| {
        c.replica.ca_file = Some(wrong.ca_file());
    })
    .await;
    // Every replica advertises its https:// address (the bound one, scheme from [tls]).
    let view = zone_view(&a).await;
    assert_eq!(view.len(), 3, "{view:?}");
    for (id, url, _) in &view {
        assert!(url.starts_with("https://127.0.0.1:"), "{id}: {url}");
    }

    // The hub on B over WSS, verified against the CA.
    let target = "hub:replica-tls";
    let token = a.enroll(target, "test").await.unwrap();
    let hub = TestHub::start(
        &b.handle().base_url(),
        target,
        &token,
        &hub_tls(&ca, &[], None),
    )
    .await
    .unwrap();
    wait_for_owner(&a, target, "tls-b").await;
    assert!(!a.handle().app.hubs.connected(target));

    // An MCP client on A over HTTPS: the call is forwarded A → B over TLS and answered.
    let (session_a, bearer) = a.lease(target, "InfraOpsRead").await;
    let client = mcp_https(&ca, &a.mcp_url(), &bearer).await;
    let res = mcp_tests::hub_status(&client).await;
    assert_eq!(res["target_id"], target);
    let events = events_of(&a, &session_a).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["status"], "ok", "{events:?}");
    assert_eq!(events[0]["replica_id"], "tls-a", "{events:?}");

    // W trusts another CA: it refuses to forward, says why, and still audits the call.
    wait_for_owner(&w, target, "tls-b").await;
    let (session_w, bearer) = w.lease(target, "InfraOpsRead").await;
    let client_w = mcp_https(&ca, &w.mcp_url(), &bearer).await;
    let res = client_w
        .call_tool(CallToolRequestParams::new("hub.get_status"))
        .await
        .unwrap();
    let error = tool_error(&res);
    assert_eq!(error["code"], "internal", "{error}");
    assert_eq!(error["retryable"], false, "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("failed TLS verification")
            && message.contains("UnknownIssuer")
            && message.contains("replica.ca_file")
            && message.contains(target),
        "{message}"
    );
    // The internal address is for the operator's log, not the client.
    assert!(!message.contains("https://"), "{message}");
    wait_for_log(&[
        "forward refused",
        "replica `tls-b` at https://127.0.0.1:",
        "failed TLS verification",
    ])
    .await;
    let events = events_of(&a, &session_w).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["replica_id"], "tls-w", "{events:?}");
    assert_eq!(events[0]["status"], "error", "{events:?}");
    assert_eq!(events[0]["error"]["code"], "internal", "{events:?}");
    // The hub stayed with B (a TLS failure does not make the owner look dead), and A still
    // forwards.
    mcp_tests::hub_status(&client).await;
    let verify = a.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(verify["ok"], true, "{verify}");
    drop((client, client_w));
    hub.stop().await;
    zone.stop([w, b, a]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_replica_forwards_to_a_plain_http_peer_only_when_allowed() {
    // A TLS root cannot advertise a plain address (its only listener speaks TLS).
    let pki = Pki::new("plain-peers");
    let ca = pki.ca_file();
    let leaf = pki.server("t");
    let mut cfg = RootConfig {
        tls: Some(tls_config(&leaf, None, 0)),
        ..Default::default()
    };
    cfg.replica.advertise_url = Some("http://127.0.0.1:8700".into());
    let err = cfg.validate().unwrap_err().to_string();
    assert!(
        err.contains("replica.advertise_url") && err.contains("serves [tls]"),
        "{err}"
    );

    let Some(zone) = Zone::create("zone-local").await else {
        return;
    };
    // P serves plain HTTP on loopback and holds the hub.
    let p = replica(&zone, "plain-p", None, |_| {}).await;
    let target = "hub:plain-peer";
    let token = p.enroll(target, "test").await.unwrap();
    let hub = TestHub::start(&p.handle().base_url(), target, &token, "")
        .await
        .unwrap();
    // T serves TLS and keeps the default: no forwarding to plain peers.
    let t = replica(&zone, "tls-t", Some((&leaf, &ca)), |c| {
        c.replica.ca_file = Some(ca.clone());
    })
    .await;
    // U serves TLS and allows plain peers explicitly.
    let u_cert = pki.server("u");
    let u = replica(&zone, "tls-u", Some((&u_cert, &ca)), |c| {
        c.replica.ca_file = Some(ca.clone());
        c.replica.insecure_http_peers = true;
    })
    .await;
    let view = zone_view(&t).await;
    assert!(
        view.iter()
            .any(|(id, url, _)| id == "plain-p" && url.starts_with("http://")),
        "{view:?}"
    );
    wait_for_owner(&t, target, "plain-p").await;
    wait_for_owner(&u, target, "plain-p").await;

    let (session_t, bearer) = t.lease(target, "InfraOpsRead").await;
    let client_t = mcp_https(&ca, &t.mcp_url(), &bearer).await;
    let res = client_t
        .call_tool(CallToolRequestParams::new("hub.get_status"))
        .await
        .unwrap();
    let error = tool_error(&res);
    assert_eq!(error["code"], "internal", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("advertises plain HTTP")
            && message.contains("replica.insecure_http_peers")
            && message.contains(target),
        "{message}"
    );
    wait_for_log(&[
        "forward refused",
        "replica `plain-p` advertises plain http://127.0.0.1:",
    ])
    .await;
    let events = events_of(&t, &session_t).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["replica_id"], "tls-t", "{events:?}");
    assert_eq!(events[0]["error"]["code"], "internal", "{events:?}");

    // U was told plain peers are acceptable: the same call is forwarded and answered.
    let bearer = u.bearer(target, "InfraOpsRead").await;
    let client_u = mcp_https(&ca, &u.mcp_url(), &bearer).await;
    let res = mcp_tests::hub_status(&client_u).await;
    assert_eq!(res["target_id"], target);

    drop((client_t, client_u));
    hub.stop().await;
    zone.stop([u, t, p]).await;
}
