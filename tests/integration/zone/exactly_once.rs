//! Exactly once across replicas: one idempotency key sent by 32 callers at once, under three
//! bearers of one owner, split across two replicas sharing PostgreSQL, runs once on the hub
//! (its own count: the allowed test appends a line to a file), and every caller gets that
//! execution's outcome. Each test says SKIPPED without `MCP_TEST_DATABASE_URL`.

use mcp_tests::until;
use serde_json::json;

use super::replica_state::{Db, replica};
use crate::fleet::authority::{mint, one_outcome, race};
use crate::fleet::writes::{runs, with_test};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_sent_by_32_callers_through_two_replicas_runs_once() {
    let test = "one_key_sent_by_32_callers_through_two_replicas_runs_once";
    let Some(db) = Db::create(test).await else {
        return;
    };
    let shared = tempfile::tempdir().unwrap();
    let a = replica(&db, shared.path(), "r-a").await;
    let b = replica(&db, shared.path(), "r-b").await;
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("once.txt");
    let hub = a
        .start_hub("hub:zone-once", &with_test(&counter, 1))
        .await
        .unwrap();
    until("B sees the hub online", || async {
        b.admin_get("/v1/root/hubs?selector=id%3Dhub:zone-once,status%3Donline")
            .await
            .unwrap()["total"]
            == 1
    })
    .await;
    let (_, bearer) = a
        .lease("hub:zone-once", "InfraOpsControl", 600)
        .await
        .unwrap();
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
    a.stop().await;
    b.stop().await;
    db.drop_schema().await;
}
