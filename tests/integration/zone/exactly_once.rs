//! Exactly once across replicas: one idempotency key sent by 32 callers at once, under three
//! bearers of one owner, split across two replicas sharing PostgreSQL, runs once on the hub
//! (its own count: the allowed test appends a line to a file), and every caller gets that
//! execution's outcome. Each test says SKIPPED without `MCP_TEST_DATABASE_URL`.

use mcp_tests::until;
use serde_json::json;

use crate::fleet::authority::{mint, one_outcome, race};
use mcp_tests::counted_test;
use mcp_tests::runs;
use mcp_tests::zone::Zone;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_sent_by_32_callers_through_two_replicas_runs_once() {
    let Some(zone) = Zone::create("zone-rs").await else {
        return;
    };
    let [a, b] = zone.replicas(["r-a", "r-b"]).await;
    let (_dir, counter, hub) = a
        .start_counting_hub("hub:zone-once", |c| counted_test(c, 1))
        .await;
    until("B sees the hub online", || async {
        b.admin_get("/v1/root/hubs?selector=id%3Dhub:zone-once,status%3Donline")
            .await["total"]
            == 1
    })
    .await;
    let bearer = a.bearer("hub:zone-once", "InfraOpsControl").await;
    let bearers = vec![
        bearer.clone(),
        mint(&a, &bearer, "m1").await,
        mint(&b, &bearer, "m2").await,
    ];
    let answers = race(
        &[&a, &b],
        &bearers,
        "hub.run_allowed_tests",
        json!({ "name": "smoke" }),
        "zone-32",
        32,
    )
    .await;
    one_outcome(&answers);
    assert_eq!(runs(&counter), 1, "the hub's own count");
    hub.stop().await;
    zone.stop([a, b]).await;
}
