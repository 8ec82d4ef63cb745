//! A bounded soak: three real hubs and two dozen MCP clients on one root for
//! `MCP_TEST_SOAK_SECS` seconds (default 20), mixed routed reads, descriptive calls, previews
//! and previewed writes executed (`mcp_tests::soak`). Afterwards every call got an answer with
//! an event id, nothing failed but `busy`, and the audit trail holds exactly the events the
//! clients were given, one per call, in a chain that verifies. No timing is asserted.

use std::time::Duration;

use mcp_tests::TestRoot;
use mcp_tests::soak::{self, SoakOptions};

fn soak_secs() -> u64 {
    std::env::var("MCP_TEST_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|s| *s > 0)
        .unwrap_or(20)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_and_hubs_leave_one_verified_event_per_call() {
    let root = TestRoot::start().await.unwrap();
    let report = soak::run(&SoakOptions {
        root_url: root.handle().base_url(),
        admin_token: root.admin_token(),
        hubs: 3,
        clients: 24,
        duration: Duration::from_secs(soak_secs()),
        target_prefix: "soak".into(),
    })
    .await
    .unwrap();
    println!("{}", report.summary());
    let problems = report.problems();
    assert!(problems.is_empty(), "{problems:?}\n{}", report.summary());
    // The workload really exercised the write path and the routed reads.
    assert!(report.executes > 0, "{}", report.summary());
    assert!(report.ok > report.calls / 2, "{}", report.summary());
    root.stop().await;
}
