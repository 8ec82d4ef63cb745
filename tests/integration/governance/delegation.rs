//! Authority ends with its source: a lease minted by another, a run credential, an OAuth
//! sign-in's access token and what they minted work only while every credential they came
//! from does; a revoked operator's approvals end (and, asked for, the leases they issued);
//! an idempotency key belongs to the top of its chain. Real roots and hubs, REST and OAuth.

use mcp_tests::TestRoot;
use mcp_tests::items;
use mcp_tests::oauth::{sign_in, token};
use mcp_tests::refusal;
use mcp_tests::runs;
use serde_json::{Value, json};

use mcp_tests::oauth::with_oauth;

/// `hub.get_status` with `bearer`: the status.
async fn status(root: &TestRoot, bearer: &str) -> u16 {
    root.call(bearer, "hub.get_status", json!({})).await.0
}

/// `GET /v1/root/mcp/contracts` with `bearer`: the status.
async fn contracts(root: &TestRoot, bearer: &str) -> u16 {
    root.get_as(bearer, "/v1/root/mcp/contracts")
        .await
        .status()
        .as_u16()
}

/// Mints an `InfraOpsControl` lease with `bearer` (`hub.issue_access_token`, previewed and
/// confirmed), for the seconds a lease minted under key `key` may live (`m2` less than `m1`,
/// so a grandchild ends no later than its parent): `(session_id, token)`.
async fn mint(root: &TestRoot, bearer: &str, key: &str) -> (String, String) {
    let depth: u64 = key[1..].parse().unwrap_or(1);
    let ttl = 300 - 10 * depth;
    let (s, b) = root
        .write(
            bearer,
            "hub.issue_access_token",
            json!({"capability_profile": "InfraOpsControl", "ttl_sec": ttl}),
            key,
        )
        .await
        .unwrap();
    assert_eq!(s, 200, "{b}");
    let r = &b["result"]["result"];
    (
        r["session_id"].as_str().unwrap().to_owned(),
        r["token"].as_str().unwrap().to_owned(),
    )
}

async fn lease_of(root: &TestRoot, id: &str) -> Value {
    root.admin_get(&format!("/v1/root/mcp/sessions/{id}")).await
}

/// Both doors a lease reads through refuse `bearer` (401).
async fn refused(root: &TestRoot, bearer: &str, what: &str) {
    assert_eq!(status(root, bearer).await, 401, "{what}: hub.get_status");
    assert_eq!(contracts(root, bearer).await, 401, "{what}: /contracts");
}

/// Both doors answer `bearer`.
async fn works(root: &TestRoot, bearer: &str, what: &str) {
    assert_eq!(status(root, bearer).await, 200, "{what}: hub.get_status");
    assert_eq!(contracts(root, bearer).await, 200, "{what}: /contracts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minted_lease_ends_with_every_lease_above_it() {
    let root = TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:del-a", "").await.unwrap();
    let (parent, parent_token) = root.lease("hub:del-a", "InfraOpsControl").await;
    let (child, child_token) = mint(&root, &parent_token, "m1").await;
    let (grandchild, grandchild_token) = mint(&root, &child_token, "m2").await;
    let c = lease_of(&root, &child).await;
    assert_eq!(
        (c["kind"].as_str(), c["parent_session_id"].as_str()),
        (Some("minted"), Some(parent.as_str())),
        "{c}"
    );
    assert_eq!(
        lease_of(&root, &grandchild).await["parent_session_id"],
        child.as_str()
    );
    works(&root, &child_token, "the child").await;
    works(&root, &grandchild_token, "the grandchild").await;
    // `mcp-root admin lease show` draws the chain: the parent above, the grandchild below.
    let (code, out, err) = crate::ops::admin_cli::admin(&root, &["lease", "show", &child]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "issued by operator:admin", "{out}");
    assert!(lines[1].starts_with(&format!("{parent} issued ")), "{out}");
    assert!(lines[2].starts_with(&format!("  {child} minted ")), "{out}");
    assert!(lines[2].ends_with("<- this lease"), "{out}");
    assert!(
        lines[3].starts_with(&format!("    {grandchild} minted")),
        "{out}"
    );
    let (_, json_out, _) =
        crate::ops::admin_cli::admin(&root, &["lease", "show", &parent, "--json"]);
    let view: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(view["descendants"][1]["depth"], 2, "{view}");

    // The operator revokes the parent: one event, counting what ended with it.
    let revoked = root.on_lease(&parent, "revoke").await;
    refused(&root, &parent_token, "the revoked parent").await;
    refused(&root, &child_token, "the child of a revoked lease").await;
    refused(&root, &grandchild_token, "its grandchild").await;
    for id in [&child, &grandchild] {
        assert_eq!(lease_of(&root, id).await["status"], "revoked");
    }
    let event_id = revoked["event_id"].as_str().unwrap();
    let trail = root
        .admin_get("/v1/root/mcp/audit?tool_id=admin.lease.revoke&limit=10")
        .await;
    let event = items(&trail["events"])
        .iter()
        .find(|e| e["event_id"] == event_id)
        .unwrap_or_else(|| panic!("the revocation's event in {trail}"));
    assert!(
        event["result_summary"]
            .as_str()
            .unwrap()
            .contains("2 descendants (2 minted leases)"),
        "{event}"
    );

    // A rotation ends what the rotated bearer minted; an agent's revocation too.
    let (p2, p2_token) = root.lease("hub:del-a", "InfraOpsControl").await;
    let (_, c2_token) = mint(&root, &p2_token, "m3").await;
    let rotated = root.on_lease(&p2, "rotate").await;
    refused(&root, &c2_token, "the child of a rotated bearer").await;
    let p3_token = rotated["token"].as_str().unwrap();
    let (c3, c3_token) = mint(&root, p3_token, "m4").await;
    let (_, g3_token) = mint(&root, &c3_token, "m5").await;
    let (s, b) = root
        .write(
            p3_token,
            "hub.revoke_access_token",
            json!({"session_id": c3}),
            "r1",
        )
        .await
        .unwrap();
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["result"]["descendants_revoked"], 1, "{b}");
    refused(&root, &g3_token, "the child of an agent-revoked lease").await;
    works(&root, p3_token, "the lease that revoked its child").await;

    // A child never exceeds its parent, and a run credential hands nothing on.
    let (s, b) = root
        .call(
            p3_token,
            "hub.issue_access_token",
            json!({"capability_profile": "InfraOpsRead", "ttl_sec": 3600}),
        )
        .await;
    assert_eq!(refusal(s, &b), (400, "invalid_arguments"), "{b}");
    hub.stop().await;
    root.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oauth_sign_in_takes_what_its_tokens_minted_with_it() {
    let root = TestRoot::start_with(with_oauth).await.unwrap();
    let target = "hub:del-oauth";
    let hub = root.start_hub(target, "").await.unwrap();
    let admin = root.admin_token();

    // The client ends its sign-in (RFC 7009): what its access token minted ends with it.
    let s1 = sign_in(&root, &admin, target, "InfraOpsControl")
        .await
        .unwrap();
    let (child, child_token) = mint(&root, &s1.access, "o1").await;
    let c = lease_of(&root, &child).await;
    assert_eq!(c["kind"], "minted", "{c}");
    let parent = lease_of(&root, c["parent_session_id"].as_str().unwrap()).await;
    assert_eq!(
        (parent["issued_by"].as_str(), parent["grant_id"].is_string()),
        (Some("operator:admin"), true),
        "{parent}"
    );
    works(&root, &child_token, "a child of a sign-in").await;
    assert_eq!(
        mcp_tests::oauth::revoke(&root, &s1.client_id, &s1.access)
            .await
            .unwrap(),
        200
    );
    refused(&root, &s1.access, "the revoked access token").await;
    refused(&root, &child_token, "what the revoked access token minted").await;

    // Revoking with the refresh token ends the same.
    let s2 = sign_in(&root, &admin, target, "InfraOpsControl")
        .await
        .unwrap();
    let (_, child2) = mint(&root, &s2.access, "o2").await;
    assert_eq!(
        mcp_tests::oauth::revoke(&root, &s2.client_id, &s2.refresh)
            .await
            .unwrap(),
        200
    );
    refused(
        &root,
        &child2,
        "a child of a sign-in ended by its refresh token",
    )
    .await;

    // A refresh replaces the access token: what the replaced one minted ends with it.
    let s3 = sign_in(&root, &admin, target, "InfraOpsControl")
        .await
        .unwrap();
    let (_, child3) = mint(&root, &s3.access, "o3").await;
    let (code, refreshed) = token(
        &root,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", &s3.client_id),
            ("refresh_token", &s3.refresh),
        ],
    )
    .await
    .unwrap();
    assert_eq!(code, 200, "{refreshed}");
    refused(&root, &child3, "a child of a replaced access token").await;
    works(
        &root,
        refreshed["access_token"].as_str().unwrap(),
        "the new access token",
    )
    .await;
    hub.stop().await;
    root.stop().await;
}

/// Adds operator `name`, who issues leases and approves sign-ins of every profile: their
/// bearer.
async fn add_operator(root: &TestRoot, name: &str) -> String {
    root.add_operator(name, &["operator", "approver"], &["*"])
        .await
}

/// A lease operator `bearer` issues: `(session_id, token)`.
async fn issued_by(root: &TestRoot, bearer: &str, target: &str) -> (String, String) {
    let res = root
        .post_as(
            bearer,
            "/v1/root/mcp/sessions",
            &json!({"target_id": target, "capability_profile": "InfraOpsControl", "ttl_sec": 600}),
        )
        .await;
    assert_eq!(res.status(), 201);
    let v: Value = res.json().await.unwrap();
    (
        v["session_id"].as_str().unwrap().to_owned(),
        v["token"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_operators_sign_ins_end_and_their_leases_only_when_asked() {
    let root = TestRoot::start_with(with_oauth).await.unwrap();
    let target = "hub:del-op";
    let hub = root.start_hub(target, "").await.unwrap();

    // Without --cascade: bob's approval ends; the lease bob issued keeps its deadline.
    let bob = add_operator(&root, "bob").await;
    let (lease, lease_token) = issued_by(&root, &bob, target).await;
    assert_eq!(lease_of(&root, &lease).await["issued_by"], "operator:bob");
    let (_, lease_child) = mint(&root, &lease_token, "b1").await;
    let s = sign_in(&root, &bob, target, "InfraOpsControl")
        .await
        .unwrap();
    let (_, oauth_child) = mint(&root, &s.access, "b2").await;
    works(&root, &s.access, "bob's sign-in").await;
    let revoked = root
        .admin_post("/v1/root/operators/bob/revoke", json!({}))
        .await;
    assert_eq!(
        revoked["ended"],
        json!({"cascade": false, "grants": 1, "leases": 1, "descendants": 1}),
        "{revoked}"
    );
    refused(&root, &s.access, "a sign-in a revoked operator approved").await;
    refused(&root, &oauth_child, "what that sign-in minted").await;
    let (code, body) = token(
        &root,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", &s.client_id),
            ("refresh_token", &s.refresh),
        ],
    )
    .await
    .unwrap();
    assert_eq!(
        (code, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    works(&root, &lease_token, "a lease bob issued (no cascade)").await;
    works(&root, &lease_child, "and what it minted").await;

    // With cascade: every lease carol issued ends too, with what it handed on.
    let carol = add_operator(&root, "carol").await;
    let (_, carol_lease) = issued_by(&root, &carol, target).await;
    let (_, carol_child) = mint(&root, &carol_lease, "c1").await;
    let s2 = sign_in(&root, &carol, target, "InfraOpsRead")
        .await
        .unwrap();
    let res = root
        .post_as(
            root.admin_token(),
            "/v1/root/operators/carol/revoke",
            &json!({"cascade": true}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let revoked: Value = res.json().await.unwrap();
    assert_eq!(
        revoked["ended"],
        json!({"cascade": true, "grants": 1, "leases": 2, "descendants": 1}),
        "{revoked}"
    );
    for (bearer, what) in [
        (&carol_lease, "a lease carol issued"),
        (&carol_child, "what it minted"),
        (&s2.access, "carol's sign-in"),
    ] {
        refused(&root, bearer, what).await;
    }
    let trail = root.trail("tool_id=admin.operator.revoke&limit=10").await;
    let summaries: Vec<&str> = trail
        .iter()
        .filter_map(|e| e["result_summary"].as_str())
        .collect();
    assert!(
        summaries.iter().any(|s| s
            .contains("operator `carol` revoked; ended 1 OAuth grants they approved, 2 leases")),
        "{summaries:?}"
    );

    // The CLI asks for the cascade by flag and says what ended.
    let erin = add_operator(&root, "erin").await;
    let (_, erin_lease) = issued_by(&root, &erin, target).await;
    let (code, out, err) =
        crate::ops::admin_cli::admin(&root, &["operator", "revoke", "erin", "--cascade"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("ended: 0 OAuth grants, 1 leases, 0 descendants"),
        "{out}"
    );
    refused(
        &root,
        &erin_lease,
        "a lease of an operator revoked with --cascade",
    )
    .await;

    // A body that is not the request's shape is refused, and nothing is revoked.
    let dave = add_operator(&root, "dave").await;
    let res = root
        .post_as(
            root.admin_token(),
            "/v1/root/operators/dave/revoke",
            &json!({"cascade": "yes"}),
        )
        .await;
    assert_eq!(res.status(), 400);
    let (_, dave_lease) = issued_by(&root, &dave, target).await;
    works(&root, &dave_lease, "a lease of an operator still active").await;
    hub.stop().await;
    root.stop().await;
}

/// A hub whose allowed test `smoke` appends a line to `runs` each time it runs.
fn smoke_hub(runs: &std::path::Path) -> String {
    format!(
        "[[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"sh\", \"-c\", \"echo run >> {}\"]\n\n\
         [[skill.allowed_tests]]\nname = \"other\"\nargv = [\"true\"]\n",
        runs.display()
    )
}

/// A run credential of lease `id` for `hub.run_allowed_tests`, issued by the operator.
async fn run_credential(root: &TestRoot, id: &str) -> String {
    let v = root
        .admin_post(
            &format!("/v1/root/mcp/sessions/{id}/run-profile"),
            json!({"tools": ["hub.run_allowed_tests"]}),
        )
        .await;
    v["token"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_belongs_to_the_top_of_its_chain() {
    let root = TestRoot::start().await.unwrap();
    let (_dir, counter, hub) = root.start_counting_hub("hub:del-idem", smoke_hub).await;
    let smoke = json!({"name": "smoke"});
    let (lease, lease_token) = root.lease("hub:del-idem", "InfraOpsControl").await;
    let tool = "hub.run_allowed_tests";

    // A worker's run runs the test under key `k`.
    let first = run_credential(&root, &lease).await;
    let (s, b) = root.write(&first, tool, smoke.clone(), "k").await.unwrap();
    assert_eq!((s, &b["result"]["replay"]), (200, &json!(false)), "{b}");
    assert_eq!(runs(&counter), 1);

    // Its run profile reissued from the same lease: a new preview, the same key, a replay.
    let second = run_credential(&root, &lease).await;
    let (s, b) = root.write(&second, tool, smoke.clone(), "k").await.unwrap();
    assert_eq!((s, &b["result"]["replay"]), (200, &json!(true)), "{b}");
    assert_eq!(runs(&counter), 1, "the reissued run ran nothing");
    // The same key with other arguments is a conflict, with its own code.
    let (s, b) = root
        .execute(&second, tool, json!({"name": "other"}), None, "k")
        .await
        .unwrap();
    assert_eq!(refusal(s, &b), (409, "idempotency_conflict"), "{b}");
    // The lease itself, and a lease it minted, replay it too.
    let (s, b) = root
        .execute(&lease_token, tool, smoke.clone(), None, "k")
        .await
        .unwrap();
    assert_eq!((s, &b["result"]["replay"]), (200, &json!(true)), "{b}");
    let (_, minted) = mint(&root, &lease_token, "m").await;
    let (s, b) = root.write(&minted, tool, smoke.clone(), "k").await.unwrap();
    assert_eq!((s, &b["result"]["replay"]), (200, &json!(true)), "{b}");
    assert_eq!(runs(&counter), 1);

    // Another owner's key is another key.
    let other = root.bearer("hub:del-idem", "InfraOpsControl").await;
    let (s, b) = root.write(&other, tool, smoke.clone(), "k").await.unwrap();
    assert_eq!((s, &b["result"]["replay"]), (200, &json!(false)), "{b}");
    assert_eq!(runs(&counter), 2);
    hub.stop().await;
    root.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_reaches_only_the_leases_environment() {
    let root = TestRoot::start().await.unwrap();
    let test_hub = root.start_hub("hub:fan-test", "").await.unwrap();
    // A production hub in the same subnet (the enrolment sets its environment).
    let token = root.enroll("hub:fan-prod", "production").await.unwrap();
    let prod_hub = mcp_tests::TestHub::start_with(
        &root.handle().base_url(),
        "hub:fan-prod",
        &token,
        "",
        |cfg| cfg.environment = "production".into(),
    )
    .await
    .unwrap();
    let test_lease = root.bearer("hub:fan-test", "InfraOpsRead").await;
    let (s, b) = root
        .call(
            &test_lease,
            "hub.get_logs",
            json!({"source": "subnet_active", "lines": 5}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    let r = &b["result"];
    let read: Vec<&str> = items(&r["entries"])
        .iter()
        .map(|e| e["target_id"].as_str().unwrap())
        .collect();
    assert!(!read.is_empty(), "{r}");
    assert!(read.iter().all(|t| *t == "hub:fan-test"), "{r}");
    assert_eq!(r["missing"], json!(["hub:fan-prod"]), "{r}");
    let why = r["missing_reasons"][0]["reason"].as_str().unwrap();
    assert!(why.contains("`production` is outside the lease"), "{r}");

    // The subnet views cover the same reach, and say what they leave out.
    for tool in [
        "root.get_subnet_analysis_health",
        "root.get_subnet_diagnostics",
        "root.get_subnet_timeline",
    ] {
        let (s, b) = root.call(&test_lease, tool, json!({})).await;
        assert_eq!(s, 200, "{tool}: {b}");
        let text = b["result"].to_string();
        assert_eq!(
            b["result"]["excluded"][0]["target_id"], "hub:fan-prod",
            "{tool}: {b}"
        );
        let (_, mentioned) = text.split_once("\"excluded\"").unwrap();
        assert!(
            !text.replace(mentioned, "").contains("hub:fan-prod"),
            "{tool} shows the production target outside `excluded`: {b}"
        );
    }

    // A production lease reaches the production hub only.
    let prod_lease = root.bearer("hub:fan-prod", "InfraOpsRead").await;
    let (s, b) = root
        .call(
            &prod_lease,
            "hub.get_logs",
            json!({"source": "subnet_active", "lines": 5}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["result"]["missing"], json!(["hub:fan-test"]), "{b}");
    test_hub.stop().await;
    prod_hub.stop().await;
    root.stop().await;
}
