//! Governance without holes (issue 22): each promise an operator relies on, tried the way a
//! new operator would, against real daemons: what a lease reads of root's own log.

use mcp_tests::items;
use mcp_tests::refusal;
use mcp_tests::run_ok;
use mcp_tests::{TestRoot, until};
use serde_json::json;

/// `hub.get_logs` with `root_local` hands a lease root's log lines about its own target only:
/// never another target's connection lines, never root's whole process log.
#[tokio::test]
async fn root_local_logs_are_scoped_to_the_leases_target() {
    let root = TestRoot::start().await.unwrap();
    let own = root.start_hub("hub:logs-own", "").await.unwrap();
    let other = root.start_hub("hub:logs-other", "").await.unwrap();
    let token = root.bearer("hub:logs-own", "InfraOpsRead").await;
    let (s, b) = root
        .call(
            &token,
            "hub.get_logs",
            json!({"source": "root_local", "lines": 1000}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    let lines: Vec<&str> = items(&b["result"]["entries"][0]["lines"])
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
    let (all, _) = mcp_root::telemetry::logging::RING.tail(4000, |l| {
        l.contains("target_id=hub:logs-other").then(|| l.to_owned())
    });
    assert!(!all.is_empty());
    own.stop().await;
    other.stop().await;
    root.stop().await;
}

/// An upgrade request to the hub door with this `Authorization` header (or none).
async fn hub_upgrade(root: &TestRoot, auth: Option<&str>) -> reqwest::Response {
    let mut req = mcp_tests::websocket_upgrade(root.http.get(root.url("/v1/root/hubs/connect")));
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    tokio::time::timeout(std::time::Duration::from_secs(2), req.send())
        .await
        .expect("the door answers at once, without holding the socket")
        .unwrap()
}

/// The hub socket is authenticated before the upgrade: without a valid hub token root
/// answers 401 on plain HTTP and never upgrades; refusals are counted and, past the
/// configured number from one address, answered 429 without a lookup.
#[tokio::test]
async fn the_hub_door_authenticates_before_the_upgrade() {
    let root = TestRoot::start_with(|c| c.limits.hub_door_max_failures = 3)
        .await
        .unwrap();
    let hub = root.start_hub("hub:door-alpha", "").await.unwrap();
    let refusals = |reason: &'static str| {
        let root = &root;
        async move {
            root.metric(&format!(
                "mcp_root_hub_door_refusals_total{{reason=\"{reason}\"}}"
            ))
            .await
            .unwrap()
            .unwrap_or(0)
        }
    };

    let res = hub_upgrade(&root, None).await;
    assert_eq!(res.status(), 401, "no token, no upgrade");
    assert!(res.headers().get("upgrade").is_none());
    let b: serde_json::Value = res.json().await.unwrap();
    assert_eq!(b["error"]["code"], "unauthenticated", "{b}");
    assert_eq!(refusals("missing").await, 1);

    let forged = format!("Bearer mcph_{}", "Z".repeat(43));
    let res = hub_upgrade(&root, Some(&forged)).await;
    assert_eq!(res.status(), 401);
    assert_eq!(refusals("unknown").await, 1);
    // A valid token upgrades (101) while the address is within its bound.
    let res = hub_upgrade(&root, Some(&format!("Bearer {}", hub.token))).await;
    assert_eq!(res.status(), 101);
    drop(res);

    // The third refusal reaches the bound: the address is now answered 429, valid token or not.
    let res = hub_upgrade(&root, Some("Bearer mcph_another")).await;
    assert_eq!(res.status(), 401);
    let res = hub_upgrade(&root, Some(&format!("Bearer {}", hub.token))).await;
    assert_eq!(res.status(), 429);
    assert_eq!(refusals("throttled").await, 1);
    let b: serde_json::Value = res.json().await.unwrap();
    assert_eq!(b["error"]["code"], "busy", "{b}");

    // The connected hub was never disturbed.
    assert!(hub.handle().is_connected());
    let token = root.bearer("hub:door-alpha", "InfraOpsRead").await;
    let (s, b) = root.call(&token, "hub.get_status", json!({})).await;
    assert_eq!(s, 200, "{b}");
    hub.stop().await;
    root.stop().await;
}

/// Test fault injection is in no contract and no release build: `tools/list` shows agents
/// `hub.get_status` without a `fault` argument, no shipped contract mentions test-only
/// machinery, a `fault` argument is refused by the contract before any hub sees it, and the
/// `mcp-hub` binary carries no fault adapter (a root that knows the fixture's contract still
/// cannot reach one through it).
#[tokio::test]
async fn test_faults_are_in_no_contract_and_no_release_hub() {
    let root = TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:faultless", "").await.unwrap();
    let token = root.bearer("hub:faultless", "InfraOpsRead").await;
    let client = mcp_tests::mcp_client(&root.mcp_url(), &token)
        .await
        .unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let status = tools
        .iter()
        .find(|t| t.name == "hub.get_status")
        .expect("listed");
    let schema = serde_json::to_value(&status.input_schema).unwrap();
    assert_eq!(schema["properties"], json!({}), "{schema}");
    for t in &tools {
        let text = serde_json::to_string(t).unwrap().to_lowercase();
        assert!(
            !text.contains("test only") && !text.contains("\"fault\""),
            "{}: {text}",
            t.name
        );
    }
    let (s, b) = root
        .call(&token, "hub.get_status", json!({"fault": "panic"}))
        .await;
    assert_eq!(refusal(s, &b), (400, "invalid_arguments"), "{b}");
    client.cancel().await.unwrap();
    hub.stop().await;
    root.stop().await;

    // The release binary has no fault adapter at all.
    let bin = mcp_tests::workspace_bin("mcp-hub").unwrap();
    let bytes = std::fs::read(bin).unwrap();
    for needle in [&b"test fault injected"[..], b"test.fault"] {
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle),
            "mcp-hub carries {:?}",
            String::from_utf8_lossy(needle)
        );
    }
    // While the suite's fault binary does (so the check above can fail).
    let faulty = std::fs::read(mcp_tests::workspace_bin("mcp-hub-faults").unwrap()).unwrap();
    assert!(faulty.windows(10).any(|w| w == b"test.fault"));
}

/// A skill command through the REST family, as the CLI and the console send it.
async fn skill(root: &TestRoot, target: &str, command: &str) -> serde_json::Value {
    root.admin_post(
        &format!("/v1/root/hubs/{target}/skills/infra_access_skill/{command}"),
        json!({}),
    )
    .await
}

/// `(status, error code)` of a call.
async fn outcome(
    root: &TestRoot,
    token: &str,
    tool: &str,
    args: serde_json::Value,
) -> (u16, String) {
    let (s, b) = root.call(token, tool, args).await;
    (s, b["error"]["code"].as_str().unwrap_or("").to_owned())
}

/// One rule for the skill: disabling `infra_access_skill` cuts every tool of the target off,
/// routed or executed on root, connected or not; root's desired state is stored and pushed to
/// the hub when it reconnects; the lifecycle (install, uninstall, update) is real; the hub's
/// owner can switch the skill off locally, which root shows and cannot override.
#[tokio::test]
async fn disabling_the_skill_cuts_the_target_off_everywhere() {
    let target = "hub:skill-off";
    let root = TestRoot::start().await.unwrap();
    let hub = root.start_hub(target, "").await.unwrap();
    let reader = root.bearer(target, "InfraOpsRead").await;
    let control = root.bearer(target, "InfraOpsControl").await;
    let (victim, _) = root.lease(target, "InfraOpsRead").await;
    let logs = json!({"source": "root_local", "lines": 5});
    let issue = json!({"capability_profile": "InfraOpsRead", "ttl_sec": 60});
    let revoke = json!({"session_id": victim});
    // The tools of the target's skill, wherever they run.
    let skill_tools = [
        ("hub.get_status", &reader, json!({})),
        ("hub.get_logs", &reader, logs.clone()),
        ("hub.list_access_tokens", &reader, json!({})),
        ("hub.issue_access_token", &control, issue.clone()),
        ("hub.revoke_access_token", &control, revoke.clone()),
    ];
    assert_eq!(
        outcome(&root, &reader, "hub.get_logs", logs.clone())
            .await
            .0,
        200
    );
    assert_eq!(
        outcome(&root, &reader, "hub.list_access_tokens", json!({}))
            .await
            .0,
        200
    );

    let v = skill(&root, target, "disable").await;
    assert_eq!(v["skill"]["open"], false, "{v}");
    for (tool, token, args) in &skill_tools {
        let (s, code) = outcome(&root, token, tool, args.clone()).await;
        assert_eq!((s, code.as_str()), (403, "skill_disabled"), "{tool}");
    }
    // The subnet views are root's own, not the skill's.
    assert_eq!(
        outcome(&root, &reader, "root.get_subnet_analysis_health", json!({}))
            .await
            .0,
        200
    );
    let client = mcp_tests::mcp_client(&root.mcp_url(), &reader)
        .await
        .unwrap();
    let names: Vec<String> = mcp_tests::listed_tools(&client).await;
    assert!(names.iter().all(|n| n.starts_with("root.")), "{names:?}");
    // The hub's own view followed.
    assert!(!hub.handle().skill_state().enabled);
    let ev = root
        .admin_get("/v1/root/mcp/audit?tool_id=admin.skill.disable")
        .await;
    assert_eq!(ev["events"][0]["actor"]["id"], "operator:admin", "{ev}");

    // The hub goes away; the operator can still switch the target on and off.
    let hub_token = hub.token.clone();
    hub.stop().await;
    until("the target to be offline", async || {
        let list = root.admin_get("/v1/root/hubs").await;
        list["targets"][0]["status"] == "offline"
    })
    .await;
    let v = skill(&root, target, "enable").await;
    assert_eq!(v["skill"]["open"], true, "{v}");
    assert!(
        v["skill"]["hub_push"].as_str().unwrap().contains("offline"),
        "{v}"
    );
    assert_eq!(
        outcome(&root, &reader, "hub.list_access_tokens", json!({}))
            .await
            .0,
        200
    );
    let v = skill(&root, target, "disable").await;
    assert_eq!(v["skill"]["open"], false, "{v}");
    let (s, code) = outcome(&root, &reader, "hub.list_access_tokens", json!({})).await;
    assert_eq!((s, code.as_str()), (403, "skill_disabled"));

    // A hub connecting (a fresh state, so it starts enabled) is told root's state at once.
    let hub = mcp_tests::TestHub::start(&root.handle().base_url(), target, &hub_token, "")
        .await
        .unwrap();
    until("the hub to follow root's disable", async || {
        !hub.handle().skill_state().enabled
    })
    .await;
    let (s, code) = outcome(&root, &reader, "hub.get_status", json!({})).await;
    assert_eq!((s, code.as_str()), (403, "skill_disabled"));

    // Uninstall and install are real states, pushed like the rest.
    skill(&root, target, "enable").await;
    let v = skill(&root, target, "uninstall").await;
    assert_eq!(v["skill"]["desired"]["installed"], false, "{v}");
    assert_eq!(v["skill"]["hub"]["installed"], false, "{v}");
    assert!(!hub.handle().skill_state().installed);
    let (s, code) = outcome(&root, &reader, "hub.get_logs", logs.clone()).await;
    assert_eq!((s, code.as_str()), (403, "skill_disabled"));
    let v = skill(&root, target, "install").await;
    assert_eq!(v["skill"]["open"], true, "{v}");
    assert!(hub.handle().skill_state().installed && hub.handle().skill_state().enabled);
    assert_eq!(
        outcome(&root, &reader, "hub.get_status", json!({})).await.0,
        200
    );

    // The hub's owner switches the skill off on the hub: root shows it and cannot override.
    let config = hub.state_dir.path().join("hub.toml");
    let run = |verb: &str| {
        let out = run_ok(
            std::process::Command::new(mcp_tests::workspace_bin("mcp-hub").unwrap())
                .args(["skill", verb, "--config"])
                .arg(&config),
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(run("disable").contains("switched off"));
    until("root to see the owner's switch", async || {
        let v = skill(&root, target, "status").await;
        v["skill"]["owner_disabled"] == true && v["skill"]["open"] == false
    })
    .await;
    let v = skill(&root, target, "enable").await;
    assert_eq!(
        v["skill"]["open"], false,
        "root cannot override the owner: {v}"
    );
    assert!(
        v["skill"]["closed_because"]
            .as_str()
            .unwrap()
            .contains("owner"),
        "{v}"
    );
    let (s, code) = outcome(&root, &reader, "hub.list_access_tokens", json!({})).await;
    assert_eq!((s, code.as_str()), (403, "skill_disabled"));
    let status = run("status");
    assert!(
        status.contains("switched off by the hub's owner"),
        "{status}"
    );
    run("enable");
    until("the owner's switch back on", async || {
        outcome(&root, &reader, "hub.get_status", json!({})).await.0 == 200
    })
    .await;
    let ev = root
        .admin_get("/v1/root/mcp/audit?tool_id=target.skill.owner_switch")
        .await;
    let events = items(&ev["events"]);
    assert_eq!(events.len(), 2, "{ev}");
    assert_eq!(events[0]["actor"]["id"], format!("target:{target}"));
    assert_eq!(events[0]["surface"], "hub");

    // An update: the hub comes back with another adapter set.
    hub.stop().await;
    let extra = "[[skill.commands]]\ntool_id = \"acme.inventory.count\"\nargv = [\"true\"]\n";
    let hub = mcp_tests::TestHub::start(&root.handle().base_url(), target, &hub_token, extra)
        .await
        .unwrap();
    until("the update to be recorded", async || {
        let ev = root
            .admin_get("/v1/root/mcp/audit?tool_id=target.skill.update")
            .await;
        ev["events"][0]["request"]["added"] == json!(["acme.inventory.count"])
    })
    .await;
    let verified = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(verified["ok"], true, "{verified}");
    client.cancel().await.unwrap();
    hub.stop().await;
    root.stop().await;
}

/// Events of the trail whose actor is `actor`.
async fn events_by(root: &TestRoot, actor: &str) -> Vec<serde_json::Value> {
    let v = root.trail(&format!("actor={actor}&limit=1000")).await;
    v.clone()
}

/// Named operators, every action audited: each operator endpoint of the router (the REST
/// family's and the console's, as `mcp_root::api::endpoints` lists them) writes exactly one
/// event naming the operator who called it, refusals included; a case missing here for a new
/// endpoint fails the test. Operators have credentials of their own, are listed, and a
/// revoked one is refused at once, console session included.
#[tokio::test]
async fn every_operator_action_is_one_event_naming_the_operator() {
    use mcp_root::api::endpoints;
    let root = TestRoot::start_with(|c| c.oauth.discovery = true)
        .await
        .unwrap();
    let hub = root.start_hub("hub:ops-alpha", "").await.unwrap();
    root.enroll("hub:ops-beta", "test").await.unwrap();
    let ann = root.add_operator("ann", &["admin"], &["*"]).await;
    assert!(ann.starts_with("mcpo_"));
    let lease = |profile: &'static str| {
        let root = &root;
        async move { root.lease("hub:ops-alpha", profile).await.0 }
    };
    let (to_revoke, to_rotate) = (lease("InfraOpsRead").await, lease("InfraOpsRead").await);
    let to_profile = lease("InfraOpsRead").await;
    let origin = root.handle().base_url();
    let http = &root.http;
    let mut console_cookie = String::new();
    let mut csrf = String::new();

    let actions: Vec<_> = endpoints()
        .into_iter()
        .filter(|e| e.access.audited())
        .collect();
    assert!(actions.len() >= 14, "{actions:?}");
    for e in actions {
        let before = events_by(&root, "operator:ann").await.len();
        let url = |path: &str| root.url(path);
        let req = match (e.method, e.path) {
            ("POST", "/v1/root/mcp/descriptors") => http
                .post(url(e.path))
                .json(&json!({"descriptors": [{"not": "a descriptor"}]})),
            ("POST", "/v1/root/mcp/sessions") => http.post(url(e.path)).json(&json!({
                "target_id": "hub:ops-alpha", "capability_profile": "InfraOpsRead", "ttl_sec": 60
            })),
            ("POST", "/v1/root/mcp/sessions/{id}/revoke") => {
                http.post(url(&format!("/v1/root/mcp/sessions/{to_revoke}/revoke")))
            }
            ("POST", "/v1/root/mcp/sessions/{id}/rotate") => {
                http.post(url(&format!("/v1/root/mcp/sessions/{to_rotate}/rotate")))
            }
            ("POST", "/v1/root/mcp/sessions/{id}/run-profile") => http.post(url(&format!(
                "/v1/root/mcp/sessions/{to_profile}/run-profile"
            ))),
            ("POST", "/v1/root/mcp/approvals/{id}/{decision}") => {
                http.post(url("/v1/root/mcp/approvals/no-such-approval/approve"))
            }
            ("POST", "/v1/root/hubs") => http
                .post(url(e.path))
                .json(&json!({"target_id": "hub:ops-gamma", "environment": "test"})),
            ("POST", "/v1/root/hubs/{target_id}/rotate-key") => http
                .post(url("/v1/root/hubs/hub:ops-beta/rotate-key"))
                .json(&json!({"grace_sec": 60})),
            ("POST", "/v1/root/hubs/{target_id}/skills/{skill}/{command}") => http.post(url(
                "/v1/root/hubs/hub:ops-beta/skills/infra_access_skill/disable",
            )),
            // Refused runs and commands (a run's own calls would add events of their own).
            ("POST", "/v1/root/fleet/runs") => http
                .post(url(e.path))
                .json(&json!({"selector": "id=*", "tool_id": "hub.no_such_tool"})),
            ("POST", "/v1/root/fleet/previews") => http
                .post(url(e.path))
                .json(&json!({"selector": "id=*", "tool_id": "hub.get_status"})),
            ("POST", "/v1/root/fleet/runs/{run_id}/{command}") => {
                http.post(url("/v1/root/fleet/runs/no-such-run/pause"))
            }
            ("POST", "/v1/root/hubs/{target_id}/labels") => http
                .post(url("/v1/root/hubs/hub:ops-beta/labels"))
                .json(&json!({"set": {"role": "web"}})),
            ("POST", "/v1/root/hubs/{target_id}/lifecycle/{command}") => http
                .post(url("/v1/root/hubs/hub:ops-beta/lifecycle/cordon"))
                .json(&json!({"reason": "maintenance"})),
            ("POST", "/v1/root/hubs/{target_id}/lifecycle/retire") => {
                http.post(url("/v1/root/hubs/hub:ops-nobody/lifecycle/retire"))
            }
            ("POST", "/v1/root/hubs/{target_id}/placement") => http
                .post(url("/v1/root/hubs/hub:ops-beta/placement"))
                .json(&json!({"subnet_id": "subnet-q"})),
            ("POST", "/v1/root/hubs/{target_id}/narrowing") => http
                .post(url("/v1/root/hubs/hub:ops-beta/narrowing"))
                .json(&json!({"read_only": true})),
            ("POST", "/v1/root/hubs/{target_id}/read") => http
                .post(url("/v1/root/hubs/hub:ops-alpha/read"))
                .json(&json!({"tool_id": "hub.get_status"})),
            ("POST", "/v1/root/operators") => http.post(url(e.path)).json(&json!({"name": "bob"})),
            ("POST", "/v1/root/operators/{name}/revoke") => {
                http.post(url("/v1/root/operators/bob/revoke"))
            }
            // A sign-in request that is not root's: refused, and the refusal is an event.
            ("POST", "/oauth/authorize/approve") => http.post(url(e.path)).json(&json!({
                "request": "oar1.forged.AAAA", "target_id": "hub:ops-alpha",
                "capability_profile": "InfraOpsRead", "ttl_sec": 600
            })),
            ("POST", "/oauth/authorize/deny") => http
                .post(url(e.path))
                .json(&json!({"request": "oar1.forged.AAAA"})),
            ("POST", "/ui/api/login") => http
                .post(url(e.path))
                .header("origin", &origin)
                .json(&json!({"token": ann})),
            ("POST", "/ui/api/logout") => http
                .post(url(e.path))
                .header("origin", &origin)
                .header("cookie", &console_cookie)
                .header("x-mcp-console-csrf", &csrf),
            (method, path) => panic!(
                "no case for the operator action {method} {path}: add one, so it is proven audited"
            ),
        };
        // Console requests carry their own credentials; the rest are ann's.
        let req = if e.path.starts_with("/ui/") {
            req
        } else {
            req.bearer_auth(&ann)
        };
        let res = req.send().await.unwrap();
        let status = res.status();
        if e.path == "/ui/api/login" {
            console_cookie = res
                .headers()
                .get("set-cookie")
                .and_then(|c| c.to_str().ok())
                .and_then(|c| c.split(';').next())
                .unwrap()
                .to_owned();
            let b: serde_json::Value = res.json().await.unwrap();
            assert_eq!(b["operator"], "ann", "{b}");
            csrf = b["csrf_token"].as_str().unwrap().to_owned();
        }
        let after = events_by(&root, "operator:ann").await;
        // The first operator read also issues the reader lease it runs under (an event too).
        let new = after.len() - before;
        let expected = if e.path.ends_with("/read") { 2 } else { 1 };
        assert_eq!(
            new, expected,
            "{} {} (answered {status}) wrote {new} events naming operator:ann",
            e.method, e.path
        );
        let secret_free = serde_json::to_string(&after).unwrap();
        assert!(
            !secret_free.contains(&ann),
            "no operator credential in the trail"
        );
    }
    // The refused ones are events too, with their error.
    let refused: Vec<serde_json::Value> = events_by(&root, "operator:ann")
        .await
        .into_iter()
        .filter(|e| e["status"] == "error")
        .collect();
    let refused_tools: Vec<&str> = refused
        .iter()
        .map(|e| e["tool_id"].as_str().unwrap())
        .collect();
    assert!(
        refused_tools.contains(&"admin.approval.approve"),
        "{refused_tools:?}"
    );
    assert!(
        refused_tools.contains(&"admin.descriptors.publish"),
        "{refused_tools:?}"
    );

    // Operators are listed; names are never reused; admin cannot be revoked through the API.
    let list = root.admin_get("/v1/root/operators").await;
    let names: Vec<(&str, &str)> = items(&list["operators"])
        .iter()
        .map(|o| (o["name"].as_str().unwrap(), o["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        [("admin", "active"), ("ann", "active"), ("bob", "revoked")]
    );
    for (path, body, code) in [
        ("/v1/root/operators", json!({"name": "bob"}), 409),
        ("/v1/root/operators/admin/revoke", json!({}), 409),
        ("/v1/root/operators", json!({"name": "Not Valid"}), 400),
    ] {
        let res = http
            .post(root.url(path))
            .bearer_auth(root.admin_token())
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), code, "{path}");
        let b: serde_json::Value = res.json().await.unwrap();
        assert!(
            b["event_id"].is_string(),
            "a refused action names its event: {b}"
        );
    }

    // ann's console session and credential end when she is revoked.
    let (cookie, _) = root.console_login_as(&ann).await;
    let session = || {
        http.get(root.url("/ui/api/session"))
            .header("cookie", &cookie)
            .send()
    };
    assert_eq!(session().await.unwrap().status(), 200);
    root.admin_post("/v1/root/operators/ann/revoke", json!({}))
        .await;
    assert_eq!(session().await.unwrap().status(), 401);
    let res = http
        .get(root.url("/v1/root/mcp/sessions"))
        .bearer_auth(&ann)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let verified = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(verified["ok"], true, "{verified}");
    hub.stop().await;
    root.stop().await;
}

/// The admin CLI acts as the operator whose credential it is given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_cli_acts_as_a_named_operator() {
    let root = TestRoot::start().await.unwrap();
    let bin = mcp_tests::workspace_bin("mcp-root").unwrap();
    let admin = |token: &str, args: &[&str]| {
        let out = std::process::Command::new(&bin)
            .args([
                "admin",
                "--root-url",
                &root.handle().base_url(),
                "--admin-token",
                token,
            ])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let file = root.dir.path().join("carol.token");
    let (code, out, err) = admin(
        &root.admin_token(),
        &[
            "operator",
            "add",
            "carol",
            "--role",
            "operator",
            "--profile",
            "InfraOpsRead",
            "--token-file",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("written to"), "{out}");
    let carol = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    let (code, out, err) = admin(
        &carol,
        &[
            "lease",
            "create",
            "--target",
            "hub:cli",
            "--profile",
            "InfraOpsRead",
            "--ttl",
            "60",
            "--json",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let lease: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ev = root.audit_event(lease["event_id"].as_str().unwrap()).await;
    assert_eq!(ev["tool_id"], "admin.lease.create");
    assert_eq!(ev["actor"]["id"], "operator:carol");
    // Who operators are is admin's to see; carol is an operator.
    let (code, _, err) = admin(&carol, &["operator", "list"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("403") && err.contains("needs the role `admin`"),
        "{err}"
    );
    let (_, out, _) = admin(&root.admin_token(), &["operator", "list"]);
    let line = out.lines().find(|l| l.starts_with("carol")).unwrap();
    assert!(
        line.contains("operator")
            && line.contains("InfraOpsRead")
            && line.contains("operator:admin"),
        "{out}"
    );
    let (code, _, _) = admin(&root.admin_token(), &["operator", "revoke", "carol"]);
    assert_eq!(code, Some(0));
    let (code, _, err) = admin(&carol, &["lease", "list"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("401"), "{err}");
    root.stop().await;
}

/// The next call root routes on `ws`.
async fn next_call(ws: &mut mcp_tests::HubSocket) -> mcp_shared::protocol::CallRequest {
    use mcp_shared::protocol::RootToHub;
    loop {
        match crate::hardening::bad_input::hub_door::next(ws).await {
            Ok((RootToHub::Call(c), _)) => return c,
            Ok(_) => continue,
            Err(e) => panic!("connection ended: {e:?}"),
        }
    }
}

/// Retry policy per tool: a routed read whose connection ends mid-call, or whose hub answers
/// `busy`, is tried again under its contract's policy inside the call's deadline (a new signed
/// call each time) and answered once it succeeds; the event records the failed attempts.
#[tokio::test]
async fn routed_reads_are_retried_under_their_contracts_policy() {
    use crate::hardening::bad_input::hub_door::{descriptor, next, text};
    use futures::SinkExt;
    use mcp_shared::error::{ErrorCode, ToolError};
    use mcp_shared::protocol::{self, CallOutcome, HubToRoot, RootToHub};

    let root = TestRoot::start().await.unwrap();
    let target = "hub:retry";
    let token = root.enroll(target, "test").await.unwrap();
    let base = root.handle().base_url();
    let connect = || {
        let (base, token) = (base.clone(), token.clone());
        async move {
            let mut ws = mcp_tests::dial_hub_door(&base, Some(&token)).await.unwrap();
            let hello = HubToRoot::Hello {
                protocol_version: protocol::PROTOCOL_VERSION,
                token: token.clone(),
                descriptor: descriptor(target, "test"),
                skills: vec![],
                features: Vec::new(),
            };
            ws.send(text("hello", &hello)).await.unwrap();
            assert!(matches!(
                next(&mut ws).await,
                Ok((RootToHub::Welcome { .. }, _))
            ));
            ws
        }
    };
    let status = json!({
        "target_id": target, "environment": "test", "subnet": null, "zone": null,
        "hub_version": "fake", "protocol_version": 1, "started_at": "2026-12-01T00:00:00Z",
        "uptime_sec": 1, "connected": true, "connected_since": null, "skills": [],
    });
    let answer = |call_id: String, outcome: CallOutcome| HubToRoot::Result { call_id, outcome };
    let lease = root.bearer(target, "InfraOpsRead").await;
    let call = || tokio::spawn(root.call_later(&lease, "hub.get_status", json!({})));

    // The connection ends under the call; the hub comes back; the retry is answered.
    let mut ws = connect().await;
    let pending = call();
    let first = next_call(&mut ws).await;
    drop(ws);
    let mut ws = connect().await;
    let second = next_call(&mut ws).await;
    assert_ne!(
        first.call_id, second.call_id,
        "each attempt is a new signed call"
    );
    ws.send(text(
        "r1",
        &answer(
            second.call_id,
            CallOutcome::Ok {
                adapter: "fake.status".into(),
                result: status.clone(),
            },
        ),
    ))
    .await
    .unwrap();
    let (s, body) = pending.await.unwrap();
    assert_eq!(s, 200, "{body}");
    let ev = root.audit_event(body["event_id"].as_str().unwrap()).await;
    let retried = items(&ev["retried"]);
    assert!(!retried.is_empty(), "{ev}");
    assert!(
        retried.iter().all(|r| r["code"] == "target_offline"),
        "{ev}"
    );
    assert_eq!(ev["execution_adapter"], "fake.status");

    // `busy` from the hub is retried too.
    let pending = call();
    let first = next_call(&mut ws).await;
    let busy = ToolError::new(ErrorCode::Busy, "adapter busy");
    ws.send(text(
        "r2",
        &answer(
            first.call_id,
            CallOutcome::Error {
                adapter: Some("fake.status".into()),
                error: busy,
            },
        ),
    ))
    .await
    .unwrap();
    let second = next_call(&mut ws).await;
    ws.send(text(
        "r3",
        &answer(
            second.call_id,
            CallOutcome::Ok {
                adapter: "fake.status".into(),
                result: status.clone(),
            },
        ),
    ))
    .await
    .unwrap();
    let (s, body) = pending.await.unwrap();
    assert_eq!(s, 200, "{body}");
    let ev = root.audit_event(body["event_id"].as_str().unwrap()).await;
    assert_eq!(ev["retried"][0]["code"], "busy", "{ev}");
    assert_eq!(items(&ev["retried"]).len(), 1);

    // An error the policy does not name is answered at once, not retried.
    let pending = call();
    let first = next_call(&mut ws).await;
    ws.send(text(
        "r4",
        &answer(
            first.call_id,
            CallOutcome::Error {
                adapter: Some("fake.status".into()),
                error: ToolError::new(ErrorCode::AdapterFailed, "broken"),
            },
        ),
    ))
    .await
    .unwrap();
    let (s, body) = pending.await.unwrap();
    assert_eq!(refusal(s, &body), (502, "adapter_failed"), "{body}");
    root.stop().await;
}
