//! A NUL character in a request (`%00` in a path or query, `\u0000` in a JSON string, `%00`
//! in an OAuth form) is refused at the edge with a precise `400`, on every door, before any
//! handler or store reads it: PostgreSQL refuses NUL in text, so one reaching a query
//! answered `500`, and one reaching the trail failed its batch and marked the trail
//! unavailable (every call refused). The suite's PostgreSQL pass runs this module too.

use serde_json::{Value, json};

use mcp_tests::TestRoot;

/// `(status, body)` of a request with the admin bearer.
async fn send(root: &TestRoot, req: reqwest::RequestBuilder) -> (u16, Value) {
    let res = req.bearer_auth(root.admin_token()).send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_anywhere_in_a_request_is_refused_at_the_edge_and_the_trail_stays_writable() {
    let root = TestRoot::start_with(mcp_tests::oauth::with_oauth)
        .await
        .unwrap();
    let http = mcp_tests::http_client();
    let (_, bearer) = root.lease("hub:nul", "AdaOSDevRead").await;

    // Paths and queries, on the REST family, the console and OAuth.
    for path in [
        "/v1/root/mcp/audit/a%00b",
        "/v1/root/mcp/audit?actor=a%00b",
        "/v1/root/mcp/sessions/a%00b",
        "/v1/root/mcp/approvals/a%00b",
        "/v1/root/fleet/runs/a%00b",
        "/v1/root/hubs/hub:a%00b",
        "/ui/a%00b",
        "/oauth/authorize?client_id=a%00b",
    ] {
        let (status, body) = send(&root, http.get(root.url(path))).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert_eq!(body["error"]["code"], "invalid_arguments", "{path}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("NUL character (%00)"),
            "{path}: {body}"
        );
    }

    // JSON bodies: an operator action and a governed call.
    let ask =
        r#"{"target_id": "hub:a\u0000b", "capability_profile": "AdaOSDevRead", "ttl_sec": 60}"#;
    let (status, body) = send(
        &root,
        http.post(root.url("/v1/root/mcp/sessions"))
            .header("content-type", "application/json")
            .body(ask),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"]["message"],
        "the body holds a NUL character (\\u0000) at byte 20"
    );
    let call = r#"{"tool_id": "sdk.get_metadata\u0000", "arguments": {}}"#;
    let res = http
        .post(root.url("/v1/root/mcp/call"))
        .bearer_auth(&bearer)
        .header("content-type", "application/json")
        .body(call)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);

    // MCP: a tool name holding NUL is an invalid request, answered by the front.
    let rpc = r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sdk.get_metadata\u0000", "arguments": {}}}"#;
    let res = http
        .post(root.url("/mcp"))
        .bearer_auth(&bearer)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(rpc)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600, "{body}");

    // OAuth's form bodies.
    let res = http
        .post(root.url("/oauth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("grant_type=authorization_code&client_id=a%00b&code=x")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"], "invalid_request", "{body}");

    // A backslash followed by the text `u0000` is no NUL: refused for what it is, a target
    // that is not a target id, not at the edge.
    let ask = json!({ "target_id": "hub:a\\u0000b", "capability_profile": "NoSuchProfile", "ttl_sec": 60 });
    let (status, body) = send(
        &root,
        http.post(root.url("/v1/root/mcp/sessions")).json(&ask),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("NoSuchProfile"),
        "{body}"
    );

    // The trail was never unavailable: calls are answered and it verifies.
    let (s, body) = root.call(&bearer, "sdk.get_metadata", json!({})).await;
    assert_eq!(s, 200, "{body}");
    let v = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(v["ok"], true, "{v}");
    let outages = root
        .admin_get("/v1/root/mcp/audit?tool_id=admin.audit.outage")
        .await;
    assert_eq!(outages["events"], json!([]), "{outages}");
    // Every refusal that reached a handler is in the trail; the edge's answered before any.
    let events = root.admin_get("/v1/root/mcp/audit").await;
    assert!(events["events"].as_array().unwrap().len() >= 3, "{events}");
    root.stop().await;
}
