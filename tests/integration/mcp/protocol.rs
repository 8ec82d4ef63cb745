//! Wire-level behaviour: protocol revisions, the 2026-07-28 probe, Host/Origin checks,
//! oversized and malformed input, health and metrics.

use mcp_tests::TestRoot;
use mcp_tests::items;
use serde_json::{Value, json};

const ACCEPT: &str = "application/json, text/event-stream";

/// Parses a response that is either JSON or a single-event SSE stream.
async fn jsonrpc_body(res: reqwest::Response) -> Value {
    let text = res.text().await.unwrap();
    if let Ok(v) = serde_json::from_str(&text) {
        return v;
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC message in {text}"))
}

#[tokio::test]
async fn session_revisions_negotiate_and_2026_07_28_is_served_statelessly() {
    let root = TestRoot::start().await.unwrap();
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    for v in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let res = root
            .http
            .post(root.mcp_url())
            .bearer_auth(&token)
            .header("accept", ACCEPT)
            .json(
                &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
                "protocolVersion": v,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert!(
            res.headers().get("mcp-session-id").is_some(),
            "{v} is session-based"
        );
        let body = jsonrpc_body(res).await;
        assert_eq!(body["result"]["protocolVersion"], v);
    }

    // What Claude Code and the Python SDK send first.
    let res = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        root.http
            .post(root.mcp_url())
            .bearer_auth(&token)
            .header("accept", ACCEPT)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "server/discover")
            .json(
                &json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{
                "io.modelcontextprotocol/protocolVersion":"2026-07-28",
                "io.modelcontextprotocol/clientCapabilities":{},
                "io.modelcontextprotocol/clientInfo":{"name":"probe","version":"1"}}}}),
            )
            .send(),
    )
    .await
    .expect("the 2026-07-28 probe must never hang")
    .unwrap();
    assert_eq!(res.status(), 200, "2026-07-28 is served");
    let body = jsonrpc_body(res).await;
    // The version list names the stateless revision and the session revisions clients fall
    // back to; never only versions a client cannot speak.
    let versions: Vec<&str> = items(&body["result"]["supportedVersions"])
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        versions,
        ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"],
        "{body}"
    );

    // Stateless requests carry the lease bearer like any other: list and call.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"}
    });
    let stateless = |method: &'static str, name: Option<&'static str>, params: Value| {
        let mut req = root
            .http
            .post(root.mcp_url())
            .bearer_auth(&token)
            .header("accept", ACCEPT)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}));
        if let Some(n) = name {
            req = req.header("mcp-name", n);
        }
        req.send()
    };
    let list = jsonrpc_body(
        stateless("tools/list", None, json!({"_meta": meta}))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(items(&list["result"]["tools"]).len(), 11, "{list}");
    let call = jsonrpc_body(
        stateless(
            "tools/call",
            Some("sdk.get_metadata"),
            json!({"name": "sdk.get_metadata", "arguments": {}, "_meta": meta}),
        )
        .await
        .unwrap(),
    )
    .await;
    assert!(
        call["result"]["structuredContent"]["data"].is_object(),
        "{call}"
    );
    assert!(call["result"]["_meta"]["event_id"].is_string(), "{call}");
    // And without a bearer, 401 as on every revision.
    let res = root
        .http
        .post(root.mcp_url())
        .header("accept", ACCEPT)
        .header("mcp-protocol-version", "2026-07-28")
        .json(&json!({"jsonrpc": "2.0", "id": 8, "method": "server/discover", "params": {"_meta": meta}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    root.stop().await;
}

#[tokio::test]
async fn foreign_host_and_origin_are_refused() {
    let root = TestRoot::start().await.unwrap();
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let send = |host: Option<&'static str>, origin: Option<&'static str>| {
        let mut req = root
            .http
            .post(root.mcp_url())
            .bearer_auth(&token)
            .header("accept", ACCEPT)
            .json(&init);
        if let Some(h) = host {
            req = req.header("host", h);
        }
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        req.send()
    };
    assert_eq!(
        send(Some("evil.example.com"), None).await.unwrap().status(),
        403
    );
    assert_eq!(
        send(None, Some("http://evil.example.com"))
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(
        send(Some("localhost"), Some("http://localhost:1234"))
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(send(None, None).await.unwrap().status(), 200);
    // So is a call the direct path would answer (2026-07-28, no session): the guard in front
    // of every surface is the one Host rule.
    let direct = |host: &'static str| {
        root.http
            .post(root.mcp_url())
            .bearer_auth(&token)
            .header("accept", ACCEPT)
            .header("host", host)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "sdk.get_schema")
            .json(
                &json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{
                "name":"sdk.get_schema","arguments":{"name":"tool-contract"},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"}
                }}}),
            )
            .send()
    };
    assert_eq!(direct("evil.example.com").await.unwrap().status(), 403);
    assert_eq!(direct("localhost").await.unwrap().status(), 200);
    // REST is guarded the same way.
    let res = root
        .http
        .get(root.url("/healthz"))
        .header("host", "evil.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);

    // A public root lists its names.
    let public = TestRoot::start_with(|c| c.allowed_hosts = vec!["root.example.net".into()])
        .await
        .unwrap();
    let res = public
        .http
        .get(public.url("/healthz"))
        .header("host", "root.example.net")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    public.stop().await;
    root.stop().await;
}

#[tokio::test]
async fn malformed_and_oversized_input_get_precise_errors() {
    let root = TestRoot::start_with(|c| c.limits.max_body_bytes = 64 * 1024)
        .await
        .unwrap();
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let big = "x".repeat(200 * 1024);
    let res = root
        .http
        .post(root.url("/v1/root/mcp/call"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(format!(
            "{{\"tool_id\":\"sdk.get_schema\",\"arguments\":{{\"name\":\"{big}\"}}}}"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    let res = root
        .http
        .post(root.url("/v1/root/mcp/call"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["error"]["code"], "invalid_arguments");
    let res = root
        .http
        .post(root.mcp_url())
        .bearer_auth(&token)
        .header("accept", ACCEPT)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert!(res.status().is_client_error(), "{}", res.status());
    let res = root
        .http
        .post(root.mcp_url())
        .bearer_auth(&token)
        .header("accept", ACCEPT)
        .header("content-type", "application/json")
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    let res = root.get_as(&token, "/v1/root/mcp/nope").await;
    assert_eq!(res.status(), 404);
    root.stop().await;
}

#[tokio::test]
async fn health_readiness_metrics_and_self_description() {
    let root = TestRoot::start().await.unwrap();
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    assert_eq!(
        root.http
            .get(root.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        root.http
            .get(root.url("/readyz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    root.call(&token, "sdk.get_metadata", json!({})).await;
    root.call(&token, "sdk.get_schema", json!({})).await;
    assert_eq!(
        root.http
            .get(root.url("/metrics"))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    let text = root.metrics_text().await.unwrap();
    assert!(
        text.contains("mcp_root_calls_total{tool=\"sdk.get_metadata\",status=\"ok\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("mcp_root_denials_total{reason=\"invalid_arguments\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("mcp_root_call_latency_seconds_bucket"),
        "{text}"
    );
    assert!(text.contains("mcp_root_active_leases 1"), "{text}");
    assert!(text.contains("mcp_root_connected_targets 0"), "{text}");

    let res = root.get_as(&token, "/v1/root/mcp/foundation").await;
    let f: Value = res.json().await.unwrap();
    assert_eq!(f["protocol_versions"][2], "2025-11-25");
    let planes: Vec<&str> = items(&f["planes"])
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(
        planes,
        [
            "AdaOSDevPlane",
            "InfraOpsPlane",
            "NLUAuthoringPlane",
            "ProfileOpsPlane"
        ]
    );
    assert_eq!(items(&f["capability_profiles"]).len(), 8);
    // The endpoints a client may discover include the run-profile routes.
    for endpoint in [
        "/mcp",
        "/v1/root/mcp/call",
        "/v1/root/mcp/sessions/{id}/run-profile",
        "/v1/root/mcp/run-profiles/verify",
    ] {
        assert!(
            items(&f["endpoints"]).iter().any(|e| e == endpoint),
            "{endpoint} missing: {}",
            f["endpoints"]
        );
    }

    let d = root.admin_get("/v1/root/mcp/descriptors").await;
    assert!(
        items(&d["descriptors"])
            .iter()
            .any(|d| d["descriptor_id"] == "sdk.schemas")
    );
    let one = root
        .admin_get("/v1/root/mcp/descriptors/sdk.metadata")
        .await;
    assert!(one["content"].is_object());
    root.stop().await;
}

#[tokio::test]
async fn resources_list_and_read_descriptors() {
    let root = TestRoot::start().await.unwrap();
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let client = mcp_tests::mcp_client(&root.mcp_url(), &token)
        .await
        .unwrap();
    let list = client.list_resources(None).await.unwrap();
    let uris: Vec<&str> = list.resources.iter().map(|r| r.uri.as_str()).collect();
    assert!(uris.contains(&"descriptor://sdk.schemas"), "{uris:?}");
    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "descriptor://sdk.metadata",
        ))
        .await
        .unwrap();
    let text = match &read.contents[0] {
        rmcp::model::ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("unexpected {other:?}"),
    };
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["descriptor_id"], "sdk.metadata");
    let err = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "descriptor://nope",
        ))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("-32002")
            || err.to_string().to_lowercase().contains("not found")
            || err.to_string().contains("no readable"),
        "{err}"
    );
    let prompts = client.list_prompts(None).await.unwrap();
    assert!(prompts.prompts.is_empty());
    root.stop().await;
}
