//! Targets with labels, a lifecycle and per-target narrowing: set by audited operator
//! commands (REST and the admin CLI), named by selectors, and in force on the next call: a
//! cordoned target takes no new call while one in flight finishes, a narrowed one refuses what
//! the operator denied, a retired one loses its hub connection and credentials for good.

use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::refusal;
use mcp_tests::{TestRoot, dial_hub_door, listed_tools, mcp_client, until};
use serde_json::{Value, json};

use crate::ops::admin_cli::admin;

/// The target ids of `GET /v1/root/hubs` with `query` (every page of up to 1000).
async fn selected(root: &TestRoot, query: &str) -> Vec<String> {
    let page = root
        .admin_get(&format!("/v1/root/hubs?limit=1000&{query}"))
        .await;
    assert!(page["next_cursor"].is_null(), "{page}");
    items(&page["targets"])
        .iter()
        .map(|t| t["target_id"].as_str().unwrap().to_owned())
        .collect()
}

/// The events of `tool_id` on `target`, newest first.
async fn events(root: &TestRoot, tool_id: &str, target: &str) -> Vec<Value> {
    let v = root
        .trail(&format!("tool_id={tool_id}&target_id={target}&limit=100"))
        .await;
    v.clone()
}

/// `hub.get_status` over REST `/call` with `token`: `(status, body)`.
async fn read_status(root: &TestRoot, token: &str) -> (u16, Value) {
    root.call(token, "hub.get_status", json!({})).await
}

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Labels at enrolment and by command, selectors over them and the directory (REST and CLI),
/// and every bad label or selector refused precisely, refusals audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_and_selectors_name_a_part_of_the_fleet() {
    let root = TestRoot::start().await.unwrap();
    let ops = root.admin();
    for i in 0..6 {
        let mut labels = json!({ "role": "web" });
        if i == 0 {
            labels["canary"] = json!("");
        }
        root.admin_post(
            "/v1/root/hubs",
            json!({
                "target_id": format!("web-{i:02}"),
                "environment": if i % 2 == 0 { "test" } else { "prod" },
                "subnet_id": if i < 3 { "subnet-a" } else { "subnet-b" },
                "labels": labels,
            }),
        )
        .await;
    }
    for i in 0..4 {
        root.admin_post(
            "/v1/root/hubs",
            json!({ "target_id": format!("db-{i:02}"), "environment": "test",
                    "subnet_id": "subnet-b", "labels": { "role": "db" } }),
        )
        .await;
    }
    let _hub = root.start_hub("hub:web-live", "").await.unwrap();
    let labelled = root
        .admin_post(
            "/v1/root/hubs/hub:web-live/labels",
            json!({ "set": { "role": "web", "rack": "r1" } }),
        )
        .await;
    assert_eq!(labelled["labels"], json!({ "rack": "r1", "role": "web" }));
    assert!(labelled["event_id"].is_string());
    let shown = root.admin_get("/v1/root/hubs/web-00").await;
    assert_eq!(shown["labels"], json!({ "canary": "", "role": "web" }));
    assert_eq!(shown["lifecycle"]["state"], "active");

    let web = [
        "hub:web-live",
        "web-00",
        "web-01",
        "web-02",
        "web-03",
        "web-04",
        "web-05",
    ];
    assert_eq!(selected(&root, "selector=label:role=web").await, web);
    assert_eq!(selected(&root, "label=role=web").await, web);
    assert_eq!(selected(&root, "label=canary").await, ["web-00"]);
    assert_eq!(
        selected(
            &root,
            &format!("selector={}", enc("label:role=web,env=prod"))
        )
        .await,
        ["web-01", "web-03", "web-05"]
    );
    assert_eq!(
        selected(
            &root,
            &format!(
                "selector={}",
                enc("!label:canary,label:role=web,status=online")
            )
        )
        .await,
        ["hub:web-live"]
    );
    assert_eq!(
        selected(
            &root,
            &format!(
                "selector={}",
                enc("id=db-*,subnet=subnet-b,label:role=db|cache")
            )
        )
        .await,
        ["db-00", "db-01", "db-02", "db-03"]
    );
    // A selector and the other filters hold together.
    assert_eq!(
        selected(
            &root,
            &format!("environment=test&selector={}", enc("label:role=web"))
        )
        .await,
        ["hub:web-live", "web-00", "web-02", "web-04"]
    );

    // Bad selectors and label filters: 400 naming the term and what is wrong.
    for (query, why) in [
        (
            "selector=env%3Dtest%2Ccolor%3Dred",
            "term 2: unknown field `color`",
        ),
        ("selector=label%3ARole%3Dweb", "`Role` is not a label key"),
        (
            "selector=status%3Dup",
            "status is one of online, degraded, offline, not `up`",
        ),
        ("selector=", "the selector is empty"),
        ("selector=env%3Dte%20st", "`te st` is not a value"),
        (
            "label=Role",
            "label filter or selector: term 1: `Role` is not a label key",
        ),
        (
            "lifecycle=gone",
            "lifecycle must be active, cordoned or retired",
        ),
    ] {
        let (status, body) = ops
            .get_status(&format!("/v1/root/hubs?{query}"))
            .await
            .unwrap();
        assert_eq!(status, 400, "{query}: {body}");
        let message = error_message(&body);
        assert!(message.contains(why), "{query}: {message}");
    }

    // Changing labels: set and remove at once; bad changes refused, each one event.
    let changed = root
        .admin_post(
            "/v1/root/hubs/web-00/labels",
            json!({ "set": { "role": "cache" }, "remove": ["canary", "never-had"] }),
        )
        .await;
    assert_eq!(changed["labels"], json!({ "role": "cache" }));
    for (body, status, why) in [
        (
            json!({ "set": { "Bad Key": "x" } }),
            400,
            "label key `Bad Key`",
        ),
        (
            json!({ "set": { "k": "a b" } }),
            400,
            "label `k`: the value `a b`",
        ),
        (
            json!({ "set": { "k": "v" }, "remove": ["k"] }),
            400,
            "both set and removed",
        ),
        (json!({}), 400, "name labels to set"),
        (json!({ "add": {} }), 400, "unknown field `add`"),
    ] {
        let (got, answer) = ops
            .post_status("/v1/root/hubs/web-00/labels", body.clone())
            .await
            .unwrap();
        assert_eq!(got, status, "{body}: {answer}");
        assert!(error_message(&answer).contains(why), "{body}: {answer}");
        assert!(
            answer["event_id"].is_string(),
            "a refusal names its event: {answer}"
        );
    }
    let (got, answer) = ops
        .post_status("/v1/root/hubs/nope/labels", json!({ "set": { "a": "b" } }))
        .await
        .unwrap();
    assert_eq!(got, 404, "{answer}");
    let (got, answer) = ops
        .post_status(
            "/v1/root/hubs",
            json!({ "target_id": "bad-labels", "environment": "test", "labels": { "UP": "x" } }),
        )
        .await
        .unwrap();
    assert_eq!(got, 400, "{answer}");
    let label_events = events(&root, "admin.hub.label", "web-00").await;
    assert_eq!(
        label_events.len(),
        6,
        "one event per label command, refusals included"
    );
    assert_eq!(
        label_events.iter().filter(|e| e["status"] == "ok").count(),
        1
    );
    assert_eq!(selected(&root, "label=canary").await, Vec::<String>::new());

    // The admin CLI: enrol with labels, label, list by selector.
    let (code, out, err) = admin(
        &root,
        &[
            "hub",
            "enroll",
            "--target",
            "web-06",
            "--environment",
            "prod",
            "--label",
            "role=web",
            "--label",
            "tier=gold",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = admin(
        &root,
        &[
            "hub",
            "label",
            "--target",
            "db-00",
            "--set",
            "tier=gold",
            "--remove",
            "role",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("labels:    tier=gold"), "{out}");
    let (code, out, err) = admin(
        &root,
        &["hub", "list", "--selector", "label:tier=gold", "--all"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("db-00") && out.contains("web-06"), "{out}");
    assert!(out.contains("2 of 2"), "{out}");
    assert!(out.contains("labels=role=web,tier=gold"), "{out}");
    let (code, out, err) = admin(&root, &["hub", "list", "--selector", "colour=red"]);
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("unknown field `colour`"), "{err}");
    let (code, _, err) = admin(
        &root,
        &["hub", "label", "--target", "db-00", "--set", "novalue"],
    );
    assert_ne!(code, 0);
    assert!(err.contains("a label is KEY=VALUE"), "{err}");
}

/// Cordon, narrowing and retire, each in force on the next call: a write in flight when the
/// target is cordoned finishes; tools lists follow; a retired target's hub is disconnected
/// and refused, leases on it and its id's enrolment are refused, its history stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cordon_narrowing_and_retire_govern_calls() {
    let mut root = TestRoot::start().await.unwrap();
    let ops = root.admin();
    let slow = "[[skill.allowed_tests]]\nname = \"slow\"\nargv = [\"sleep\", \"2\"]\n";
    let hub = root.start_hub("hub:life", slow).await.unwrap();
    let (read_id, read) = root.lease("hub:life", "InfraOpsRead").await;
    let control = root.bearer("hub:life", "InfraOpsControl").await;
    let client = mcp_client(&root.mcp_url(), &read).await.unwrap();
    let code = |answer: &(u16, Value)| answer.1["error"]["code"].as_str().map(str::to_owned);
    assert_eq!(read_status(&root, &read).await.0, 200);
    assert!(
        listed_tools(&client)
            .await
            .contains(&"hub.get_status".to_string())
    );

    // Narrowing: one tool denied on this target only, then read-only, then nothing.
    let narrowed = root
        .admin_post(
            "/v1/root/hubs/hub:life/narrowing",
            json!({ "deny": ["hub.get_status"] }),
        )
        .await;
    assert_eq!(
        narrowed["narrowing"],
        json!({ "read_only": false, "deny": ["hub.get_status"] })
    );
    let refused = read_status(&root, &read).await;
    assert_eq!(
        (refused.0, code(&refused).as_deref()),
        (403, Some("target_narrowed")),
        "{refused:?}"
    );
    assert!(
        refused.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("an operator denied `hub.get_status` on target `hub:life`"),
        "{refused:?}"
    );
    until("the tools list drops the denied tool", async || {
        !listed_tools(&client)
            .await
            .contains(&"hub.get_status".to_string())
    })
    .await;
    root.admin_post(
        "/v1/root/hubs/hub:life/narrowing",
        json!({ "read_only": true }),
    )
    .await;
    assert_eq!(
        read_status(&root, &read).await.0,
        200,
        "reads go on when read-only"
    );
    let (got, body) = root
        .call(&control, "hub.run_allowed_tests", json!({ "name": "slow" }))
        .await;
    assert_eq!(refusal(got, &body), (403, "target_narrowed"), "{body}");
    let (got, body) = ops
        .post_status(
            "/v1/root/hubs/hub:life/narrowing",
            json!({ "deny": ["no.such_tool"] }),
        )
        .await
        .unwrap();
    assert_eq!(refusal(got, &body), (404, "unknown_tool"), "{body}");
    root.admin_post("/v1/root/hubs/hub:life/narrowing", json!({}))
        .await;
    assert_eq!(read_status(&root, &read).await.0, 200);

    // Cordon while a two-second write runs: the write finishes, new calls are refused.
    let write = root.write_later(
        &control,
        "hub.run_allowed_tests",
        json!({ "name": "slow" }),
        "k1",
    );
    let write = tokio::spawn(write.await);
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let cordoned = root
        .admin_post(
            "/v1/root/hubs/hub:life/lifecycle/cordon",
            json!({ "reason": "kernel update" }),
        )
        .await;
    assert_eq!(cordoned["lifecycle"]["state"], "cordoned");
    assert_eq!(cordoned["lifecycle"]["reason"], "kernel update");
    assert_eq!(cordoned["lifecycle"]["changed_by"], "operator:admin");
    assert!(
        !write.is_finished(),
        "the write was in flight when the target was cordoned"
    );
    let refused = read_status(&root, &read).await;
    assert_eq!(
        (refused.0, code(&refused).as_deref()),
        (403, Some("target_cordoned")),
        "{refused:?}"
    );
    let (got, done) = write.await.unwrap();
    assert_eq!(got, 200, "the write in flight finished: {done}");
    until("a cordoned target's tools leave the list", async || {
        !listed_tools(&client)
            .await
            .iter()
            .any(|t| t.starts_with("hub."))
    })
    .await;
    assert_eq!(selected(&root, "lifecycle=cordoned").await, ["hub:life"]);
    for (command, why) in [
        ("cordon", "already cordoned"),
        ("drain", "command must be cordon, uncordon or retire"),
    ] {
        let (got, body) = ops
            .post_status(
                &format!("/v1/root/hubs/hub:life/lifecycle/{command}"),
                json!({}),
            )
            .await
            .unwrap();
        assert!(got == 409 || got == 400, "{command}: {got} {body}");
        assert!(error_message(&body).contains(why), "{body}");
    }
    let (code_, out, err) = admin(&root, &["hub", "uncordon", "--target", "hub:life"]);
    assert_eq!(code_, 0, "{out}{err}");
    assert!(
        out.contains("lifecycle: active (by operator:admin)"),
        "{out}"
    );
    assert_eq!(
        read_status(&root, &read).await.0,
        200,
        "uncordoned: calls again"
    );
    until("the tools come back", async || {
        listed_tools(&client)
            .await
            .contains(&"hub.get_status".to_string())
    })
    .await;
    let (got, body) = ops
        .post_status("/v1/root/hubs/hub:life/lifecycle/uncordon", json!({}))
        .await
        .unwrap();
    assert_eq!(got, 409, "{body}");

    // Retire (from the CLI): disconnected, refused at the door, no calls, no leases, no
    // second enrolment; its history stays.
    let (code_, out, err) = admin(
        &root,
        &[
            "hub",
            "retire",
            "--target",
            "hub:life",
            "--reason",
            "decommissioned",
        ],
    );
    assert_eq!(code_, 0, "{out}{err}");
    assert!(
        out.contains("lifecycle: retired (by operator:admin: decommissioned)"),
        "{out}"
    );
    until("the retired target's hub is disconnected", async || {
        root.admin_get("/v1/root/hubs/hub:life").await["status"] == "offline"
    })
    .await;
    // The hub dials again once, is told its target is retired, and dials no more (each
    // refusal would count against its address, which other hubs may share).
    let retired_refusals = async || {
        root.metric("mcp_root_hub_door_refusals_total{reason=\"retired\"}")
            .await
            .unwrap()
            .unwrap_or(0)
    };
    until("the hub was refused as retired", async || {
        retired_refusals().await >= 1
    })
    .await;
    let first = retired_refusals().await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(
        retired_refusals().await,
        first,
        "a retired target's hub stops dialling"
    );
    match dial_hub_door(&root.handle().base_url(), Some(&hub.token)).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            assert_eq!(r.status().as_u16(), 403)
        }
        other => panic!(
            "a retired target's hub token must be refused: {:?}",
            other.map(|_| ())
        ),
    }
    // Its leases ended with it; a lease on it is refused.
    let refused = read_status(&root, &read).await;
    assert_eq!(refused.0, 401, "{refused:?}");
    let lease = root
        .admin_get(&format!("/v1/root/mcp/sessions/{read_id}"))
        .await;
    assert_eq!(lease["status"], "revoked", "{lease}");
    let (got, body) = ops
        .post_status(
            "/v1/root/mcp/sessions",
            json!({ "target_id": "hub:life", "capability_profile": "InfraOpsRead", "ttl_sec": 60 }),
        )
        .await
        .unwrap();
    assert_eq!(refusal(got, &body), (409, "target_retired"), "{body}");
    let (got, body) = ops
        .post_status(
            "/v1/root/hubs",
            json!({ "target_id": "hub:life", "environment": "test" }),
        )
        .await
        .unwrap();
    assert_eq!(got, 409, "{body}");
    assert!(
        error_message(&body).contains("never enrolled again"),
        "{body}"
    );
    for command in ["uncordon", "cordon", "retire"] {
        let (got, body) = ops
            .post_status(
                &format!("/v1/root/hubs/hub:life/lifecycle/{command}"),
                json!({}),
            )
            .await
            .unwrap();
        assert_eq!(got, 409, "{command}: {body}");
        assert!(error_message(&body).contains("stays retired"), "{body}");
    }
    // History kept: the calls and the operator's commands are in the trail.
    assert!(!events(&root, "hub.get_status", "hub:life").await.is_empty());
    let retired = events(&root, "admin.hub.retire", "hub:life").await;
    assert_eq!(retired.len(), 2, "the retire and the refused second one");
    assert_eq!(retired.iter().filter(|e| e["status"] == "ok").count(), 1);
    let shown = root.admin_get("/v1/root/hubs/hub:life").await;
    assert_eq!(shown["lifecycle"]["state"], "retired");
    assert_eq!(shown["lifecycle"]["reason"], "decommissioned");
    // A restart keeps every state (stored, not only in memory).
    drop(client);
    root.restart().await.unwrap();
    let shown = root.admin_get("/v1/root/hubs/hub:life").await;
    assert_eq!(shown["lifecycle"]["state"], "retired");
    let (got, body) = root
        .admin()
        .post_status(
            "/v1/root/mcp/sessions",
            json!({ "target_id": "hub:life", "capability_profile": "InfraOpsRead", "ttl_sec": 60 }),
        )
        .await
        .unwrap();
    assert_eq!(refusal(got, &body), (409, "target_retired"), "{body}");
    hub.stop().await;
}

/// Moving a target: a new subnet ends the leases bound to it while its hub stays; a new
/// environment is in force for the next call (a write refused in `prod`), disconnects the hub
/// and keeps it out while its own configuration names the old environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_target_keeps_no_authority_from_where_it_was() {
    let root = TestRoot::start().await.unwrap();
    let ops = root.admin();
    let _hub = root.start_hub("hub:mover", "").await.unwrap();
    let (old_id, old) = root.lease("hub:mover", "InfraOpsRead").await;
    assert_eq!(read_status(&root, &old).await.0, 200);

    let moved = root
        .admin_post(
            "/v1/root/hubs/hub:mover/placement",
            json!({ "subnet_id": "subnet-z" }),
        )
        .await;
    assert_eq!(
        (moved["subnet_id"].as_str(), moved["environment"].as_str()),
        (Some("subnet-z"), Some("test"))
    );
    assert_eq!(moved["leases_ended"], 1, "{moved}");
    assert_eq!(
        read_status(&root, &old).await.0,
        401,
        "the lease bound to the old subnet ended"
    );
    let lease = root
        .admin_get(&format!("/v1/root/mcp/sessions/{old_id}"))
        .await;
    assert_eq!(lease["status"], "revoked");
    assert_eq!(
        root.admin_get("/v1/root/hubs/hub:mover").await["status"],
        "online"
    );
    let control = root.bearer("hub:mover", "InfraOpsControl").await;
    let issued = root
        .admin_get("/v1/root/mcp/sessions?target_id=hub:mover&status=active")
        .await;
    assert_eq!(issued["sessions"][0]["subnet_id"], "subnet-z", "{issued}");
    let (got, body) = root
        .call(
            &control,
            "hub.run_allowed_tests",
            json!({ "name": "smoke" }),
        )
        .await;
    assert_ne!(
        body["error"]["code"], "environment_forbidden",
        "a test target takes writes: {got} {body}"
    );

    // Bad moves: refused, each one event; the target stays where it is.
    for (body, status, why) in [
        (
            json!({}),
            400,
            "is in environment `test` and subnet `subnet-z` already",
        ),
        (
            json!({ "environment": "pr od" }),
            400,
            "must be 1..200 characters",
        ),
        (json!({ "region": "x" }), 400, "unknown field `region`"),
    ] {
        let (got, answer) = ops
            .post_status("/v1/root/hubs/hub:mover/placement", body.clone())
            .await
            .unwrap();
        assert_eq!(got, status, "{body}: {answer}");
        assert!(error_message(&answer).contains(why), "{body}: {answer}");
    }

    let (code, out, err) = admin(
        &root,
        &[
            "hub",
            "move",
            "--target",
            "hub:mover",
            "--environment",
            "prod",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("hub:mover (env=prod, subnet=subnet-z)") && out.contains("leases ended: 1"),
        "{out}"
    );
    assert_eq!(read_status(&root, &control).await.0, 401);
    let prod_control = root.bearer("hub:mover", "InfraOpsControl").await;
    let (got, body) = root
        .call(
            &prod_control,
            "hub.run_allowed_tests",
            json!({ "name": "smoke" }),
        )
        .await;
    assert_eq!(
        refusal(got, &body),
        (403, "environment_forbidden"),
        "{body}"
    );
    until("the moved hub is disconnected", async || {
        root.admin_get("/v1/root/hubs/hub:mover").await["status"] == "offline"
    })
    .await;
    // Its configuration still says `test`: root keeps it out (it dials again meanwhile).
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(
        root.admin_get("/v1/root/hubs/hub:mover").await["status"],
        "offline"
    );
    assert_eq!(
        selected(&root, "environment=prod").await,
        ["hub:mover"],
        "the directory lists it where it is now"
    );
    let moves = events(&root, "admin.hub.move", "hub:mover").await;
    assert_eq!(moves.len(), 5, "two moves and three refusals");
}
