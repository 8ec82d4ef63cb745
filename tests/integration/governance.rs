//! Governance without holes (issue 22): each promise an operator relies on, tried the way a
//! new operator would, against real daemons: what a lease reads of root's own log.

use mcp_tests::TestRoot;
use serde_json::json;

/// `hub.get_logs` with `root_local` hands a lease root's log lines about its own target only:
/// never another target's connection lines, never root's whole process log.
#[tokio::test]
async fn root_local_logs_are_scoped_to_the_leases_target() {
    let root = TestRoot::start().await.unwrap();
    let own = root.start_hub("hub:logs-own", "").await.unwrap();
    let other = root.start_hub("hub:logs-other", "").await.unwrap();
    let (_, token) = root
        .lease("hub:logs-own", "InfraOpsRead", 600)
        .await
        .unwrap();
    let (s, b) = root
        .rest_call(
            &token,
            "hub.get_logs",
            json!({"source": "root_local", "lines": 1000}),
        )
        .await
        .unwrap();
    assert_eq!(s, 200, "{b}");
    let lines: Vec<&str> = b["result"]["entries"][0]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("hub connected") && l.contains("hub:logs-own")),
        "its own hub's connection is there: {lines:#?}"
    );
    assert!(
        lines.iter().all(|l| l.contains("target_id=hub:logs-own")),
        "only lines about its own target: {lines:#?}"
    );
    assert!(
        !b.to_string().contains("hub:logs-other"),
        "nothing of another target: {b}"
    );
    // Root's log does hold the other target's lines: the scoping is what hides them.
    let (all, _) = mcp_root::logging::RING.tail(4000, |l| {
        l.contains("target_id=hub:logs-other").then(|| l.to_owned())
    });
    assert!(!all.is_empty());
    own.stop().await;
    other.stop().await;
    root.stop().await;
}
