//! Governed routing from root to a real hub over a real WebSocket, through the rmcp client.

use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::listed_tools;
use std::time::{Duration, Instant};

use mcp_tests::{TestHub, TestRoot, mcp_client};
use rmcp::model::CallToolRequestParams;
use serde_json::json;

/// What an `InfraOpsRead` lease lists on a hub with nothing configured: its reads that the
/// hub publishes (the write tools need `InfraOpsControl`; health checks and test results need
/// a configuration that gives them something to serve).
const HUB_TOOLS: [&str; 5] = [
    "hub.get_activity_log",
    "hub.get_capability_usage_summary",
    "hub.get_operational_surface",
    "hub.get_runtime_summary",
    "hub.get_status",
];

/// The reads root executes itself: listed whether or not the hub publishes anything.
/// What an `InfraOpsRead` lease lists while its target's skill is off: root's subnet views
/// only (no tool of the skill, wherever it runs).
const SUBNET_TOOLS: [&str; 3] = [
    "root.get_subnet_analysis_health",
    "root.get_subnet_diagnostics",
    "root.get_subnet_timeline",
];

const ROOT_TOOLS: [&str; 5] = [
    "hub.get_logs",
    "hub.list_access_tokens",
    "root.get_subnet_analysis_health",
    "root.get_subnet_diagnostics",
    "root.get_subnet_timeline",
];

/// Everything an `InfraOpsRead` lease lists while its hub is online, sorted like `tools/list`.
fn all_tools() -> Vec<&'static str> {
    let mut all: Vec<&str> = HUB_TOOLS.iter().chain(ROOT_TOOLS.iter()).copied().collect();
    all.sort();
    all
}

#[tokio::test]
async fn a_routed_call_returns_real_figures_and_an_event_naming_the_adapter() {
    let root = TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:test-alpha", "").await.unwrap();
    let token = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
    assert_eq!(listed_tools(&client).await, all_tools());

    let res = client
        .call_tool(CallToolRequestParams::new("hub.get_runtime_summary"))
        .await
        .unwrap();
    assert_ne!(res.is_error, Some(true), "{res:?}");
    let sc = res.structured_content.unwrap();
    let text = sc.to_string();
    assert!(text.contains("memory") && text.contains("load"), "{sc}");
    let event_id = res.meta.unwrap().0["event_id"]
        .as_str()
        .unwrap()
        .to_string();
    let ev = root.audit_event(&event_id).await;
    assert_eq!(ev["status"], "ok");
    assert_eq!(ev["target_id"], "hub:test-alpha");
    assert!(
        ev["execution_adapter"]
            .as_str()
            .unwrap()
            .starts_with("infra_access_skill."),
        "{ev}"
    );

    let res = client
        .call_tool(CallToolRequestParams::new("hub.get_status"))
        .await
        .unwrap();
    assert_eq!(
        res.structured_content.unwrap()["target_id"],
        "hub:test-alpha"
    );

    let list = root.admin_get("/v1/root/hubs").await;
    let t = &list["targets"][0];
    assert_eq!(t["target_id"], "hub:test-alpha");
    assert_eq!(t["status"], "online");
    assert!(t["last_seen_at"].is_string());
    assert_eq!(
        items(&t["published_capabilities"]).len(),
        ALWAYS_SERVED.len()
    );
    assert_eq!(
        t["descriptor"]["operational_surface"]["published_by"],
        "skill:infra_access_skill"
    );

    // Descriptive reads never touch the hub: they work with the hub gone.
    hub.stop().await;
    let dev = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    assert_eq!(root.call(&dev, "sdk.get_metadata", json!({})).await.0, 200);
    root.stop().await;
}

#[tokio::test]
async fn a_lease_for_another_target_cannot_reach_this_one() {
    let root = TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:test-alpha", "").await.unwrap();
    root.enroll("hub:test-beta", "test").await.unwrap();
    let beta = root.bearer("hub:test-beta", "InfraOpsRead").await;
    let client = mcp_client(&root.mcp_url(), &beta).await.unwrap();
    assert_eq!(
        listed_tools(&client).await,
        ROOT_TOOLS,
        "beta is offline: only the tools root answers itself"
    );
    let (status, body) = root.call(&beta, "hub.get_status", json!({})).await;
    assert_eq!(status, 503);
    assert_eq!(body["error"]["code"], "target_offline");
    // A lease for alpha without the capability cannot either.
    let dev = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let (status, body) = root.call(&dev, "hub.get_status", json!({})).await;
    assert_eq!(status, 403);
    assert_eq!(body["error"]["code"], "capability_not_granted");
    hub.stop().await;
    root.stop().await;
}

#[tokio::test]
async fn disabling_the_skill_withdraws_the_tools_and_calls_get_skill_disabled() {
    let root = TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:test-alpha", "").await.unwrap();
    let token = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
    assert_eq!(listed_tools(&client).await, all_tools());

    let v = root
        .admin_post(
            "/v1/root/hubs/hub:test-alpha/skills/infra_access_skill/disable",
            json!({}),
        )
        .await;
    assert_eq!(v["skill"]["desired"]["enabled"], false);
    assert_eq!(v["skill"]["open"], false);
    assert_eq!(v["skill"]["desired"]["changed_by"], "operator:admin");
    // The hub followed: it publishes nothing.
    assert_eq!(v["skill"]["hub"]["enabled"], false, "{v}");
    assert!(items(&v["skill"]["hub"]["published"]).is_empty());
    assert_eq!(listed_tools(&client).await, SUBNET_TOOLS);
    let (status, body) = root.call(&token, "hub.get_status", json!({})).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "skill_disabled");
    let ev = root
        .admin_get("/v1/root/mcp/audit?tool_id=admin.skill.disable")
        .await;
    assert_eq!(ev["events"][0]["status"], "ok");
    assert_eq!(ev["events"][0]["actor"]["id"], "operator:admin");

    let v = root
        .admin_post(
            "/v1/root/hubs/hub:test-alpha/skills/infra_access_skill/status",
            json!({}),
        )
        .await;
    assert_eq!(v["skill"]["hub"]["enabled"], false);
    root.admin_post(
        "/v1/root/hubs/hub:test-alpha/skills/infra_access_skill/enable",
        json!({}),
    )
    .await;
    assert_eq!(listed_tools(&client).await, all_tools());
    assert_eq!(root.call(&token, "hub.get_status", json!({})).await.0, 200);
    hub.stop().await;
    root.stop().await;
}

#[tokio::test]
async fn killing_the_hub_mid_call_fails_the_call_within_its_deadline() {
    let root = TestRoot::start_with(mcp_tests::faults::with_contract)
        .await
        .unwrap();
    let hub = root.start_fault_hub("hub:test-alpha", "").await.unwrap();
    let token = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let started = Instant::now();
    let call = root.call(&token, mcp_tests::faults::TOOL, json!({"fault": "hang"}));
    let kill = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        hub.stop().await;
    };
    let ((status, body), ()) = tokio::join!(call, kill);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered within the 5 s deadline"
    );
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "target_offline");
    let ev = root.audit_event(body["event_id"].as_str().unwrap()).await;
    assert_eq!(ev["status"], "error");
    root.stop().await;
}

#[tokio::test]
async fn a_hanging_adapter_times_out_and_a_panicking_one_is_contained() {
    let root = TestRoot::start_with(mcp_tests::faults::with_contract)
        .await
        .unwrap();
    let hub = root.start_fault_hub("hub:test-alpha", "").await.unwrap();
    let token = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let (status, body) = root
        .call(&token, mcp_tests::faults::TOOL, json!({"fault": "panic"}))
        .await;
    assert_eq!(body["error"]["code"], "adapter_failed", "{status} {body}");
    let (status, body) = root.call(&token, "hub.get_status", json!({})).await;
    assert_eq!(status, 200, "the next call succeeds: {body}");
    let started = Instant::now();
    let (status, body) = root
        .call(&token, mcp_tests::faults::TOOL, json!({"fault": "hang"}))
        .await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["code"], "timeout");
    assert!(started.elapsed() < Duration::from_secs(7));
    assert_eq!(root.call(&token, "hub.get_status", json!({})).await.0, 200);
    assert!(hub.handle().is_connected());
    hub.stop().await;
    root.stop().await;
}

#[tokio::test]
async fn a_root_restart_heals_without_an_operator() {
    let mut root = TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:test-alpha", "").await.unwrap();
    let token = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    assert_eq!(root.call(&token, "hub.get_status", json!({})).await.0, 200);
    let addr = root.handle().addr;
    let dir = root.data_dir();
    root.handle.take().unwrap().shutdown().await;
    // Same address and data: leases, enrolment and audit persist; the hub redials.
    let root2 = TestRoot::start_with(|c| {
        c.listen = addr;
        c.data_dir = dir.clone();
    })
    .await
    .unwrap();
    mcp_tests::until("the hub to reconnect", async || {
        root2.call(&token, "hub.get_status", json!({})).await.0 == 200
    })
    .await;
    let v = root2.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(v["ok"], true);
    assert!(v["checked"].as_u64().unwrap() >= 2);
    hub.stop().await;
    root2.stop().await;
    drop(root);
}

#[tokio::test]
async fn a_wrong_token_target_or_environment_is_refused_and_the_hub_keeps_trying() {
    let root = TestRoot::start().await.unwrap();
    let token = root.enroll("hub:test-alpha", "test").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let base = root.handle().base_url();
    for (target, env, tok, why) in [
        (
            "hub:test-gamma",
            "test",
            token.as_str(),
            "the right token for another target",
        ),
        (
            "hub:test-alpha",
            "production",
            token.as_str(),
            "the right token in another environment",
        ),
        ("hub:test-alpha", "test", "mcph_forged", "an unknown token"),
    ] {
        let cfg = mcp_hub::config::HubConfig::new(
            target,
            env,
            base.clone(),
            tok,
            dir.path().join(target.replace(':', "_")),
        );
        let hub = mcp_hub::start(cfg).await.unwrap();
        assert!(
            hub.wait_connected(Duration::from_millis(800))
                .await
                .is_err(),
            "{why} must not connect"
        );
        hub.shutdown().await;
    }
    let list = root.admin_get("/v1/root/hubs").await;
    assert_eq!(list["targets"][0]["status"], "offline");
    // The real one connects; when it stops, the target shows offline.
    let hub = TestHub::start(&base, "hub:test-alpha", &token, "")
        .await
        .unwrap();
    assert_eq!(
        root.admin_get("/v1/root/hubs").await["targets"][0]["status"],
        "online"
    );
    hub.stop().await;
    mcp_tests::until("the target to show offline", async || {
        root.admin_get("/v1/root/hubs").await["targets"][0]["status"] == "offline"
    })
    .await;
    root.stop().await;
}

#[tokio::test]
async fn a_client_cancel_is_forwarded_to_the_hub_and_audited() {
    let root = TestRoot::start_with(mcp_tests::faults::with_contract)
        .await
        .unwrap();
    let hub = root.start_fault_hub("hub:test-alpha", "").await.unwrap();
    let token = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
    let params = CallToolRequestParams::new(mcp_tests::faults::TOOL)
        .with_arguments(json!({"fault": "hang"}).as_object().cloned().unwrap());
    let handle = client
        .send_cancellable_request(
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::Request::new(params)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    handle
        .cancel(Some("user pressed stop".into()))
        .await
        .unwrap();
    mcp_tests::until("the cancelled call's audit event", async || {
        let v = root.trail("tool_id=test.fault").await;
        v.iter().any(|e| e["error"]["code"] == "cancelled")
    })
    .await;
    // The adapter slot was released on the hub: a normal call goes through.
    assert_eq!(
        root.call(&token, mcp_tests::faults::TOOL, json!({}))
            .await
            .0,
        200
    );
    hub.stop().await;
    root.stop().await;
}

#[tokio::test]
async fn sessions_bound_to_a_target_hear_that_its_tool_list_changed() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Clone, Default)]
    struct Counter(Arc<AtomicUsize>);
    impl rmcp::ClientHandler for Counter {
        async fn on_tool_list_changed(
            &self,
            _ctx: rmcp::service::NotificationContext<rmcp::RoleClient>,
        ) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    let root = TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:test-alpha", "").await.unwrap();
    let token = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let counter = Counter::default();
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            root.mcp_url(),
        )
        .auth_header(token),
    );
    let client = rmcp::ServiceExt::serve(counter.clone(), transport)
        .await
        .unwrap();
    assert_eq!(
        client.list_all_tools().await.unwrap().len(),
        all_tools().len()
    );
    root.admin_post(
        "/v1/root/hubs/hub:test-alpha/skills/infra_access_skill/disable",
        json!({}),
    )
    .await;
    mcp_tests::until("tools/list_changed", async || {
        counter.0.load(Ordering::SeqCst) > 0
    })
    .await;
    assert_eq!(
        client.list_all_tools().await.unwrap().len(),
        SUBNET_TOOLS.len()
    );
    hub.stop().await;
    root.stop().await;
}

#[tokio::test]
async fn the_hub_reports_its_activity_and_capability_usage() {
    let root = TestRoot::start_with(mcp_tests::faults::with_contract)
        .await
        .unwrap();
    let hub = root.start_fault_hub("hub:test-alpha", "").await.unwrap();
    let token = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    for _ in 0..3 {
        assert_eq!(root.call(&token, "hub.get_status", json!({})).await.0, 200);
    }
    let (_, b) = root
        .call(&token, mcp_tests::faults::TOOL, json!({"fault": "panic"}))
        .await;
    assert_eq!(b["error"]["code"], "adapter_failed");
    let (s, log) = root.call(&token, "hub.get_activity_log", json!({})).await;
    assert_eq!(s, 200, "{log}");
    let entries = items(&log["result"]["entries"]);
    assert_eq!(entries.len(), 4);
    assert_eq!(entries[0]["status"], "error", "newest first: {log}");
    assert_eq!(entries[0]["tool_id"], mcp_tests::faults::TOOL);
    assert_eq!(entries[0]["error_code"], "adapter_failed");
    let (s, usage) = root
        .call(&token, "hub.get_capability_usage_summary", json!({}))
        .await;
    assert_eq!(s, 200, "{usage}");
    let counts = |tool: &str| {
        let t = items(&usage["result"]["tools"])
            .iter()
            .find(|t| t["tool_id"] == tool)
            .unwrap()
            .clone();
        (t["calls"].as_u64(), t["ok"].as_u64(), t["errors"].as_u64())
    };
    assert_eq!(
        counts("hub.get_status"),
        (Some(3), Some(3), Some(0)),
        "{usage}"
    );
    assert_eq!(
        counts(mcp_tests::faults::TOOL),
        (Some(1), Some(0), Some(1)),
        "{usage}"
    );
    hub.stop().await;
    root.stop().await;
}

/// The tools that answer from the hub itself, whatever its configuration.
const ALWAYS_SERVED: [&str; 6] = [
    "hub.get_activity_log",
    "hub.get_capability_usage_summary",
    "hub.get_logs",
    "hub.get_operational_surface",
    "hub.get_runtime_summary",
    "hub.get_status",
];

#[tokio::test]
async fn a_hub_publishes_only_the_tools_its_configuration_serves() {
    let root = TestRoot::start().await.unwrap();
    // Nothing configured: no health checks, tests, services, deploy repository or NLU content.
    let bare = root.start_hub("hub:bare", "").await.unwrap();
    // The same hub with NLU content and an allowed test.
    let extra = format!(
        "{}[[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"true\"]\n",
        mcp_tests::nlu_hub_toml().unwrap()
    );
    let served = root.start_hub("hub:served", &extra).await.unwrap();
    let published = async |target: &str| {
        let list = root.admin_get("/v1/root/hubs").await;
        let t = items(&list["targets"])
            .iter()
            .find(|t| t["target_id"] == target)
            .cloned()
            .unwrap();
        let mut tools: Vec<String> = items(&t["published_capabilities"])
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        tools.sort();
        tools
    };
    assert_eq!(published("hub:bare").await, ALWAYS_SERVED);
    let mut expected: Vec<&str> = ALWAYS_SERVED.to_vec();
    expected.extend([
        "hub.get_test_results",
        "hub.run_allowed_tests",
        "nlu_authoring.apply_change",
        "nlu_authoring.check_phrase",
        "nlu_authoring.get_context",
        "nlu_authoring.list_templates",
        "nlu_authoring.propose_change",
    ]);
    expected.sort();
    assert_eq!(published("hub:served").await, expected);

    // A tool the hub does not serve is refused at root, by name, with an event; the hub that
    // serves it answers.
    for (target, ok) in [("hub:bare", false), ("hub:served", true)] {
        let bearer = root.bearer(target, "NLUTeacherRead").await;
        let (status, body) = root
            .call(&bearer, "nlu_authoring.get_context", json!({}))
            .await;
        if ok {
            assert_eq!((status, &body["ok"]), (200, &json!(true)), "{body}");
        } else {
            assert_eq!(body["error"]["code"], "skill_disabled", "{body}");
            assert!(
                error_message(&body).contains("does not publish `nlu_authoring.get_context`"),
                "{body}"
            );
            assert!(body["event_id"].is_string(), "{body}");
        }
    }
    drop((bare, served));
    root.stop().await;
}
