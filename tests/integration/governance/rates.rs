//! Rates (`[rates]`): per lease, per owner on one tool, and per operator, configured per
//! capability profile, with a lease's own rate over its profile's. Past a rate a call is
//! refused at once with `rate_limited` and when to retry (REST 429 with `Retry-After`, MCP a
//! tool error with the same fields), audited, and counted per profile and scope. Rates per
//! minute, so that no test depends on how fast this machine is: the burst passes, the next
//! call does not, and the retry is tens of seconds away.

use mcp_tests::TestRoot;
use mcp_tests::error_message;
use mcp_tests::items;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

fn rates(toml_text: &str) -> mcp_root::config::RatesConfig {
    toml::from_str(toml_text).unwrap()
}

/// A lease of `profile` on `target`, with its own `rate` when given: `(status, body)`.
async fn issue(root: &TestRoot, target: &str, profile: &str, rate: Option<Value>) -> (u16, Value) {
    let mut ask = json!({ "target_id": target, "capability_profile": profile, "ttl_sec": 600 });
    if let Some(r) = rate {
        ask["rate"] = r;
    }
    let admin = root.admin();
    admin
        .post_status("/v1/root/mcp/sessions", ask)
        .await
        .unwrap()
}

/// The arguments the two tools called here take.
fn arguments(tool: &str) -> Value {
    match tool {
        "sdk.get_schema" => json!({ "name": "session-lease" }),
        _ => json!({}),
    }
}

/// A REST call: `(status, Retry-After, body)`.
async fn call(root: &TestRoot, bearer: &str, tool: &str) -> (u16, Option<u64>, Value) {
    let res = root
        .post_as(
            bearer,
            "/v1/root/mcp/call",
            &json!({ "tool_id": tool, "arguments": arguments(tool) }),
        )
        .await;
    let retry = res
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    (res.status().as_u16(), retry, res.json().await.unwrap())
}

/// Checks a refusal past a rate of `scope` per minute.
fn refused(status: u16, retry: Option<u64>, body: &Value, scope: &str) {
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    assert_eq!(body["error"]["retryable"], true, "{body}");
    let details = &body["error"]["details"];
    assert_eq!(details["scope"], scope, "{body}");
    let ms = details["retry_after_ms"].as_u64().unwrap();
    assert!((1..=60_000).contains(&ms), "{body}");
    assert_eq!(
        retry,
        Some(ms.div_ceil(1000)),
        "Retry-After rounds retry_after_ms up"
    );
    assert!(
        !body["event_id"].as_str().unwrap().is_empty(),
        "audited: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_a_rate_are_refused_with_when_to_retry_and_counted() {
    let root = TestRoot::start_with(|c| {
        c.rates = rates(
            "per_lease = \"3/min\"\n\
             [profiles.AdaOSDevRead]\nper_lease = \"2/min\"\n\
             [profiles.AdaOSDevRead.tools]\n\"sdk.get_schema\" = \"1/min\"\n",
        );
    })
    .await
    .unwrap();
    // The profile's own per-lease rate: two calls, then refused.
    let (_, lease) = issue(&root, "hub:rates", "AdaOSDevRead", None).await;
    let bearer = lease["token"].as_str().unwrap();
    for _ in 0..2 {
        let (s, _, b) = call(&root, bearer, "sdk.get_metadata").await;
        assert_eq!(s, 200, "{b}");
    }
    let (s, retry, body) = call(&root, bearer, "sdk.get_metadata").await;
    refused(s, retry, &body, "lease");
    // The refusal is in the trail with its code.
    let event = root.audit_event(body["event_id"].as_str().unwrap()).await;
    assert_eq!(event["error"]["code"], "rate_limited", "{event}");

    // A tool's rate is per owner: a second call of it is refused (spending nothing of the
    // lease's two) while other tools pass.
    let (_, lease) = issue(&root, "hub:rates", "AdaOSDevRead", None).await;
    let bearer = lease["token"].as_str().unwrap();
    let (s, _, b) = call(&root, bearer, "sdk.get_schema").await;
    assert_eq!(s, 200, "{b}");
    let (s, retry, body) = call(&root, bearer, "sdk.get_schema").await;
    refused(s, retry, &body, "tool");
    let (s, _, b) = call(&root, bearer, "sdk.get_metadata").await;
    assert_eq!(s, 200, "another tool: {b}");

    // A lease's own rate replaces its profile's, and travels to MCP as a tool error.
    let (s, lease) = issue(&root, "hub:rates", "AdaOSDevRead", Some(json!("4/min"))).await;
    assert_eq!(s, 201, "{lease}");
    assert_eq!(lease["lease"]["rate"], "4/min", "{lease}");
    let bearer = lease["token"].as_str().unwrap();
    let client = mcp_tests::mcp_client(&root.mcp_url(), bearer)
        .await
        .unwrap();
    for _ in 0..4 {
        let res = client
            .call_tool(CallToolRequestParams::new("sdk.get_metadata"))
            .await
            .unwrap();
        assert_ne!(res.is_error, Some(true), "{res:?}");
    }
    let res = client
        .call_tool(CallToolRequestParams::new("sdk.get_metadata"))
        .await
        .unwrap();
    assert_eq!(res.is_error, Some(true), "{res:?}");
    let sc = res.structured_content.unwrap();
    assert_eq!(sc["error"]["code"], "rate_limited", "{sc}");
    assert!(
        sc["error"]["details"]["retry_after_ms"].as_u64().unwrap() > 1_000,
        "{sc}"
    );
    client.cancel().await.unwrap();

    // Another profile has the defaults: three calls.
    let (_, lease) = issue(&root, "hub:rates", "InfraOpsRead", None).await;
    let bearer = lease["token"].as_str().unwrap();
    for _ in 0..3 {
        let (s, _, b) = call(&root, bearer, "sdk.get_metadata").await;
        assert_ne!(b["error"]["code"], "rate_limited", "{s} {b}");
    }
    let (s, retry, body) = call(&root, bearer, "sdk.get_metadata").await;
    refused(s, retry, &body, "lease");

    // A lease's rate that is no rate is refused by name; nothing is issued.
    for bad in [json!("0/s"), json!(-3), json!("fast"), json!(1.5)] {
        let (s, body) = issue(&root, "hub:rates", "AdaOSDevRead", Some(bad.clone())).await;
        assert_eq!(s, 400, "{bad}: {body}");
        assert!(error_message(&body).starts_with("rate: "), "{body}");
    }
    for (profile, scope, n) in [
        ("AdaOSDevRead", "lease", 2),
        ("AdaOSDevRead", "tool", 1),
        ("InfraOpsRead", "lease", 1),
    ] {
        let series =
            format!("mcp_root_rate_limited_total{{profile=\"{profile}\",scope=\"{scope}\"}}");
        assert_eq!(root.metric(&series).await.unwrap(), Some(n), "{series}");
    }
    // The console's Usage page shows them per profile.
    let usage = root.admin_get("/v1/root/mcp/audit/usage").await;
    let limited = |profile: &str| {
        items(&usage["by_profile"])
            .iter()
            .find(|p| p["capability_profile"] == profile)
            .map(|p| p["rate_limited"].clone())
    };
    assert_eq!(limited("AdaOSDevRead"), Some(json!(3)), "{usage}");
    assert_eq!(limited("InfraOpsRead"), Some(json!(1)), "{usage}");
    root.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_past_their_rate_gets_429_and_others_are_not_held_back() {
    let root = TestRoot::start_with(|c| c.rates = rates("per_operator = \"5/min\"\n"))
        .await
        .unwrap();
    let added = root
        .admin_post("/v1/root/operators", json!({"name": "ann"}))
        .await;
    let ann = added["token"].as_str().unwrap().to_owned();
    let get = async |bearer: &str| {
        let res = root.get_as(bearer, "/v1/root/mcp/sessions").await;
        let retry = res.headers().get("retry-after").cloned();
        (
            res.status().as_u16(),
            retry,
            res.json::<Value>().await.unwrap(),
        )
    };
    for _ in 0..5 {
        assert_eq!(get(&ann).await.0, 200);
    }
    let (s, retry, body) = get(&ann).await;
    assert_eq!(s, 429, "{body}");
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    let secs: u64 = retry.unwrap().to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&secs), "{secs}");
    // The admin has a rate of their own.
    assert_eq!(get(&root.admin_token()).await.0, 200);
    let series = "mcp_root_rate_limited_total{profile=\"operator\",scope=\"operator\"}";
    assert_eq!(root.metric(series).await.unwrap(), Some(1));
    root.stop().await;
}

#[tokio::test]
async fn rates_naming_an_unknown_profile_or_tool_stop_start_up() {
    for (text, want) in [
        (
            "[profiles.Nobody]\nper_lease = 1",
            "rates.profiles.Nobody: no capability profile",
        ),
        (
            "[tools]\n\"hub.no_such\" = 1",
            "rates.tools: no tool is named `hub.no_such`",
        ),
    ] {
        let err = TestRoot::start_with(|c| c.rates = rates(text))
            .await
            .err()
            .unwrap();
        assert!(format!("{err:#}").contains(want), "{text}: {err:#}");
    }
}
