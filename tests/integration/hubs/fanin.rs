//! Fan-in: a thousand simulated hubs (`mcp_tests::hubsim`, the real protocol over real
//! WebSockets) connected to one root, and root still right about each of them: the hub list
//! shows every target online with its surface, a lease for target k sees the tool in
//! `tools/list`, routed calls to a sample of targets come back from that target, calls the
//! target does not publish are refused on root, and the audit trail has one event per call
//! and verifies. `MCP_TEST_FANIN_HUBS` sets the number of hubs: 1000 by default, 200 on the
//! suite's PostgreSQL pass (`MCP_TEST_ALL_ON_POSTGRES`), where each enrolment and each hub
//! connection is a change in the zone's serialized change feed and 1000 of them took 35 to
//! 50 s on two cores. No timing is asserted; the times are printed.

use mcp_tests::items;
use std::collections::HashSet;

use mcp_tests::TestRoot;
use mcp_tests::hubsim::{self, Fleet, FleetOptions, SIM_TOOL, SIM_VERSION};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

fn hubs() -> usize {
    let default = if std::env::var_os("MCP_TEST_ALL_ON_POSTGRES").is_some() {
        200
    } else {
        1000
    };
    std::env::var("MCP_TEST_FANIN_HUBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n >= 2)
        .unwrap_or(default)
}

/// First, last, and a few spread over the fleet (deterministic, so a failure reproduces).
fn sample(n: usize) -> Vec<usize> {
    let mut picks = vec![0, n - 1, n / 2, n / 3, (n * 7) / 9, 1];
    picks.sort_unstable();
    picks.dedup();
    picks
}

/// Every event id of a lease's calls, oldest first.
async fn lease_event_ids(root: &TestRoot, session_id: &str) -> Vec<String> {
    let v = root
        .trail(&format!("actor=lease:{session_id}&limit=1000&order=asc"))
        .await;
    v.iter()
        .map(|e| e["event_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_simulated_hubs_register_and_route_correctly() {
    let n = hubs();
    let root = TestRoot::start().await.unwrap();
    let base = root.handle().base_url();
    let targets = hubsim::target_ids("fanin", n);

    let t = std::time::Instant::now();
    let enrolled = hubsim::enroll_on(&root, &targets).await;
    let enrol_time = t.elapsed();
    let mut fleet = Fleet::connect(&base, enrolled, FleetOptions::default())
        .await
        .unwrap();
    println!(
        "fan-in: {n} targets enrolled in {:.2}s, all {n} hubs registered in {:.2}s",
        enrol_time.as_secs_f64(),
        fleet.registration.as_secs_f64()
    );

    // The hub list: every simulated target, online, publishing the one tool.
    let list = root.admin_get("/v1/root/hubs?q=fanin-&limit=1000").await;
    let listed: Vec<&Value> = items(&list["targets"])
        .iter()
        .filter(|t| t["target_id"].as_str().unwrap().starts_with("fanin-"))
        .collect();
    assert_eq!(listed.len(), n);
    let ids: Vec<&str> = listed
        .iter()
        .map(|t| t["target_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, targets.iter().map(String::as_str).collect::<Vec<_>>());
    for t in &listed {
        assert_eq!(t["status"], "online", "{t}");
        assert_eq!(t["published_capabilities"], json!([SIM_TOOL]), "{t}");
    }

    // A sample of targets, each through an MCP client on a lease of its own.
    let mut leases = Vec::new();
    let mut answered = Vec::new();
    for k in sample(n) {
        let target = &targets[k];
        let (session_id, token) = root.lease(target, "InfraOpsRead").await;
        let client = mcp_tests::mcp_client(&root.mcp_url(), &token)
            .await
            .unwrap();
        let tools = mcp_tests::listed_tools(&client).await;
        assert!(tools.iter().any(|t| t == SIM_TOOL), "{target}: {tools:?}");
        // Only what this target publishes: no other routed tool of the profile is listed.
        assert!(
            !tools.iter().any(|t| t == "hub.get_runtime_summary"),
            "{target}: {tools:?}"
        );
        // Two routed calls: each answered by this target's simulated hub.
        for _ in 0..2 {
            let res = client
                .call_tool(CallToolRequestParams::new(SIM_TOOL))
                .await
                .unwrap();
            assert_ne!(res.is_error, Some(true), "{target}: {res:?}");
            let sc = res.structured_content.clone().unwrap();
            assert_eq!(sc["target_id"], json!(target), "{sc}");
            assert_eq!(sc["hub_version"], SIM_VERSION);
            answered.push(res.meta.unwrap()["event_id"].as_str().unwrap().to_owned());
        }
        // A tool the profile grants but this target does not publish: refused on root.
        let res = client
            .call_tool(CallToolRequestParams::new("hub.get_runtime_summary"))
            .await
            .unwrap();
        assert_eq!(res.is_error, Some(true));
        let sc = res.structured_content.unwrap();
        assert_eq!(sc["error"]["code"], "skill_disabled", "{sc}");
        answered.push(res.meta.unwrap()["event_id"].as_str().unwrap().to_owned());
        client.cancel().await.unwrap();
        leases.push(session_id);
    }
    let stats = &fleet.stats;
    let ok_calls = 2 * leases.len();
    assert_eq!(
        stats.calls_ok.load(std::sync::atomic::Ordering::Relaxed),
        ok_calls,
        "the simulated hubs answered exactly the routed calls; denials never reached one"
    );
    assert_eq!(
        stats
            .calls_refused
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    assert_eq!(
        stats.disconnects.load(std::sync::atomic::Ordering::Relaxed),
        0
    );

    // One audit event per call, exactly the ones the client was given, and the chain holds.
    let mut in_trail = Vec::new();
    for s in &leases {
        in_trail.extend(lease_event_ids(&root, s).await);
    }
    assert_eq!(in_trail.len(), answered.len());
    let a: HashSet<&String> = answered.iter().collect();
    let b: HashSet<&String> = in_trail.iter().collect();
    assert_eq!(a, b);
    assert_eq!(a.len(), answered.len(), "event ids are unique");
    let v = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(v["ok"], true, "{v}");

    fleet.shutdown().await;
    root.stop().await;
}
