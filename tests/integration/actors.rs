//! Supervision: a stopped or failed actor is restarted and the daemon keeps answering.

use mcp_tests::TestRoot;
use serde_json::json;

#[tokio::test]
async fn stopped_actors_are_restarted_and_state_is_rebuilt() {
    let root = TestRoot::start().await.unwrap();
    let (id, token) = root
        .lease("hub:test-alpha", "AdaOSDevRead", 600)
        .await
        .unwrap();
    assert_eq!(
        root.rest_call(&token, "sdk.get_metadata", json!({}))
            .await
            .unwrap()
            .0,
        200
    );
    let actors = &root.handle().app.actors;
    let before = (
        actors.descriptors.load().get_id(),
        actors.audit.load().get_id(),
        actors.leases.load().get_id(),
        actors.policy.load().get_id(),
    );
    actors.descriptors.load().stop(Some("test".into()));
    actors.audit.load().stop(Some("test".into()));
    actors.leases.load().stop(Some("test".into()));
    actors.policy.load().stop(Some("test".into()));
    // Wait for the supervisor to swap in new instances.
    for _ in 0..100 {
        let now = (
            actors.descriptors.load().get_id(),
            actors.audit.load().get_id(),
            actors.leases.load().get_id(),
            actors.policy.load().get_id(),
        );
        if now.0 != before.0 && now.1 != before.1 && now.2 != before.2 && now.3 != before.3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_ne!(
        actors.audit.load().get_id(),
        before.1,
        "audit writer restarted"
    );
    let (s, body) = root
        .rest_call(&token, "sdk.get_metadata", json!({}))
        .await
        .unwrap();
    assert_eq!(s, 200, "{body}");
    // The restarted audit writer continued the chain from the stored head.
    let v = root.admin_get("/v1/root/mcp/audit/verify").await.unwrap();
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["checked"], 3, "the lease's issue and two calls");
    // The restarted lease manager still manages the lease created before.
    root.admin_post(&format!("/v1/root/mcp/sessions/{id}/revoke"), json!({}))
        .await
        .unwrap();
    assert_eq!(
        root.rest_call(&token, "sdk.get_metadata", json!({}))
            .await
            .unwrap()
            .0,
        401
    );
    root.stop().await;
}
