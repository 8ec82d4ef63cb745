//! The fleet's authority without holes, and exactly once under concurrency (issue 49): one
//! idempotency key runs one write however many callers send it at once (the hubs' test
//! command appends a line to a file, so "ran" is counted on the machine); a fleet write
//! previewed twice and executed twice with one key runs once per target; a lease and a lease
//! it minted mint once under one key; the confirmed plan is the plan that runs; a run's
//! selector is its authority at each call; an operator's cordon is no error; a secret among
//! a run's arguments is never stored or shown; ids root reserves are refused at enrolment; a
//! retired target gets no new key; the CLI keeps an id one path segment.

use mcp_tests::TestRoot;
use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::refusal;
use serde_json::{Value, json};

use crate::ops::admin_cli::admin;
use mcp_tests::counted_test;
use mcp_tests::runs;

/// Mints a lease with `bearer` (`hub.issue_access_token`, previewed and confirmed under key
/// `key`): its bearer.
pub(crate) async fn mint(root: &TestRoot, bearer: &str, key: &str) -> String {
    let (s, b) = root
        .write(
            bearer,
            "hub.issue_access_token",
            json!({"capability_profile": "InfraOpsControl", "ttl_sec": 300}),
            key,
        )
        .await
        .unwrap();
    assert_eq!(s, 200, "{b}");
    b["result"]["result"]["token"].as_str().unwrap().to_owned()
}

/// `n` executes of `tool` with `args` under one idempotency key `key`, sent at once through
/// `roots` and `bearers` in turn, each with a confirmation of its own previewed first: every
/// final `(status, body)` (a `busy` answer is retried).
pub(crate) async fn race(
    roots: &[&TestRoot],
    bearers: &[String],
    tool: &str,
    args: Value,
    key: &str,
    n: usize,
) -> Vec<(u16, Value)> {
    let mut tokens = Vec::new();
    for i in 0..n {
        let root = roots[i % roots.len()];
        let bearer = &bearers[i % bearers.len()];
        tokens.push(root.preview(bearer, tool, args.clone()).await.unwrap());
    }
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(n));
    let calls = tokens.into_iter().enumerate().map(|(i, token)| {
        let root = roots[i % roots.len()];
        let bearer = bearers[i % bearers.len()].clone();
        let (args, barrier) = (args.clone(), barrier.clone());
        async move {
            barrier.wait().await;
            // A caller told `busy` (its lease's slots were full; nothing ran, its
            // confirmation is unspent) retries, as a client does.
            loop {
                let (s, b) = root
                    .execute(&bearer, tool, args.clone(), Some(&token), key)
                    .await
                    .unwrap();
                if b["error"]["code"] != "busy" {
                    return (s, b);
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    });
    futures::future::join_all(calls).await
}

/// Every caller of one key got the first execution's outcome: one ran it, the others were
/// answered its result as a replay.
pub(crate) fn one_outcome(answers: &[(u16, Value)]) {
    for (s, b) in answers {
        assert_eq!(*s, 200, "{b}");
    }
    let first: Vec<&Value> = answers
        .iter()
        .filter(|(_, b)| b["result"]["replay"] == false)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(first.len(), 1, "one execution ran: {answers:?}");
    let result = &first[0]["result"]["result"];
    for (_, b) in answers {
        assert_eq!(&b["result"]["result"], result, "the same outcome: {b}");
    }
}

/// 32 executes of one key under three bearers of one owner (a lease and two leases it
/// minted), sent at once: the hub ran the test exactly once, and every caller got its result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_sent_by_32_callers_at_once_runs_once() {
    let root = TestRoot::start().await.unwrap();
    let (_dir, counter, hub) = root
        .start_counting_hub("hub:once", |c| counted_test(c, 1))
        .await;
    let bearer = root.bearer("hub:once", "InfraOpsControl").await;
    let bearers = vec![
        bearer.clone(),
        mint(&root, &bearer, "m1").await,
        mint(&root, &bearer, "m2").await,
    ];
    let answers = race(
        &[&root],
        &bearers,
        "hub.run_allowed_tests",
        json!({ "name": "smoke" }),
        "once-32",
        32,
    )
    .await;
    one_outcome(&answers);
    assert_eq!(runs(&counter), 1, "the hub's own count");
    hub.stop().await;
}

/// A lease and a lease it minted each preview `hub.issue_access_token` and execute at once
/// with one key: one lease is minted (root's claim is the only guard of a root tool), and
/// both are answered that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_and_its_minted_lease_mint_once_under_one_key() {
    let root = TestRoot::start().await.unwrap();
    let hub = root.start_hub("hub:mint-race", "").await.unwrap();
    let (parent_id, bearer) = root.lease("hub:mint-race", "InfraOpsControl").await;
    let child = mint(&root, &bearer, "m1").await;
    let answers = race(
        &[&root],
        &[bearer, child],
        "hub.issue_access_token",
        json!({"capability_profile": "InfraOpsRead", "ttl_sec": 120}),
        "one-mint",
        2,
    )
    .await;
    for (s, b) in &answers {
        assert_eq!(*s, 200, "{b}");
    }
    let minted: Vec<&str> = answers
        .iter()
        .map(|(_, b)| b["result"]["result"]["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(minted[0], minted[1], "one lease: {answers:?}");
    let d = root
        .admin_get(&format!("/v1/root/mcp/sessions/{parent_id}/delegation"))
        .await;
    let profiles: Vec<&str> = items(&d["descendants"])
        .iter()
        .map(|c| c["lease"]["capability_profile"].as_str().unwrap())
        .collect();
    assert_eq!(
        profiles.iter().filter(|p| **p == "InfraOpsRead").count(),
        1,
        "{d}"
    );
    hub.stop().await;
}

/// Calls an MCP tool; its structured content.
async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &'static str,
    args: Value,
) -> Value {
    super::agents::call(client, tool, args).await.0
}

/// An agent previews one fleet write twice and executes both previews at once with one
/// idempotency key: each target runs once and one run starts; the other call answers its
/// report as a replay, or `idempotency_in_progress` naming it while it runs. The same
/// execute sent again while the run goes on names the run and its state; once it ended, it
/// is answered the run's report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_write_previewed_twice_and_executed_twice_with_one_key_runs_once_per_target() {
    let root = TestRoot::start().await.unwrap();
    let (dir, hubs) = root.start_counted_hubs(&["eo-1", "eo-2", "eo-3"], 1).await;
    let counter = |id: &str| dir.path().join(format!("{id}.txt"));
    let issued = root.fleet_lease("id=eo-*", "InfraOpsControl").await;
    let bearer = issued["token"].as_str().unwrap();
    let client = mcp_tests::mcp_client(&root.mcp_url(), bearer)
        .await
        .unwrap();
    let write = json!({ "tool": "hub.run_allowed_tests", "arguments": { "name": "smoke" }, "plan": { "max_concurrency": 3 } });
    let mut executes = Vec::new();
    for _ in 0..2 {
        let p = call(&client, "root.run_fleet_write", write.clone()).await;
        let mut x = write.clone();
        x["phase"] = json!("execute");
        x["confirmation_token"] = p["confirmation_token"].clone();
        x["idempotency_key"] = json!("fleet-once");
        executes.push(x);
    }
    let client = std::sync::Arc::new(client);
    let calls = executes.into_iter().map(|x| {
        let client = client.clone();
        async move { call(&client, "root.run_fleet_write", x).await }
    });
    let mut answers = futures::future::join_all(calls).await;
    answers.sort_by_key(|a| a["replay"] != false);
    let (ran, other) = (&answers[0], &answers[1]);
    assert_eq!(ran["replay"], false, "{answers:?}");
    let run_id = ran["result"]["run_id"].as_str().unwrap().to_owned();
    match other["error"]["code"].as_str() {
        None => assert_eq!(other["result"]["run_id"], run_id.as_str(), "{other}"),
        Some(code) => {
            assert_eq!(code, "idempotency_in_progress", "{other}");
            assert_eq!(
                other["error"]["details"]["run_id"],
                run_id.as_str(),
                "{other}"
            );
        }
    }
    assert_eq!(
        ["eo-1", "eo-2", "eo-3"].map(|id| runs(&counter(id))),
        [1, 1, 1]
    );

    // While a run goes on, its execute sent again names it; once it ended, its report.
    let p = call(&client, "root.run_fleet_write", write.clone()).await;
    let mut x = write.clone();
    x["phase"] = json!("execute");
    x["confirmation_token"] = p["confirmation_token"].clone();
    x["idempotency_key"] = json!("fleet-twice");
    let running = {
        let (client, x) = (client.clone(), x.clone());
        tokio::spawn(async move { call(&client, "root.run_fleet_write", x).await })
    };
    let started = dir.path().join("eo-1.txt.started");
    mcp_tests::until("the second run starts", async || {
        std::fs::read_to_string(&started).is_ok_and(|s| s.lines().count() == 2)
    })
    .await;
    let again = call(&client, "root.run_fleet_write", x.clone()).await;
    assert_eq!(again["error"]["code"], "idempotency_in_progress", "{again}");
    let second_run = again["error"]["details"]["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(again["error"]["details"]["state"], "running", "{again}");
    let done = running.await.unwrap();
    assert_eq!(done["result"]["run_id"], second_run.as_str(), "{done}");
    let replayed = call(&client, "root.run_fleet_write", x).await;
    assert_eq!(replayed["replay"], true, "{replayed}");
    assert_eq!(
        replayed["result"]["run_id"],
        second_run.as_str(),
        "{replayed}"
    );
    assert_eq!(
        ["eo-1", "eo-2", "eo-3"].map(|id| runs(&counter(id))),
        [2, 2, 2]
    );
    for h in hubs {
        h.stop().await;
    }
}

/// The plan is part of what was confirmed: a different plan at execute is refused (the token
/// survives), none runs the previewed one, and the CLI's `--confirm` sends none unless asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmed_fleet_write_runs_the_plan_it_was_previewed_with() {
    let root = TestRoot::start().await.unwrap();
    let (dir, hubs) = root.start_counted_hubs(&["pl-1", "pl-2", "pl-3"], 0).await;
    let counter = |id: &str| dir.path().join(format!("{id}.txt"));
    let ops = root.admin();
    let previewed =
        json!({ "canary": 1, "max_concurrency": 2, "max_errors": 0, "pause_after_canary_ms": 0 });
    let ask = |plan: Option<Value>, token: Option<&str>| {
        let mut b = json!({ "selector": "id=pl-*", "tool_id": "hub.run_allowed_tests", "arguments": { "name": "smoke" } });
        if let Some(p) = plan {
            b["plan"] = p;
        }
        if let Some(t) = token {
            b["confirmation_token"] = json!(t);
        }
        b
    };
    let p = root
        .admin_post(
            "/v1/root/fleet/previews",
            ask(Some(json!({ "canary": 1, "max_concurrency": 2 })), None),
        )
        .await;
    let token = p["confirmation_token"].as_str().unwrap();
    let (s, b) = ops
        .post_status(
            "/v1/root/fleet/runs",
            ask(Some(json!({ "max_concurrency": 10 })), Some(token)),
        )
        .await
        .unwrap();
    assert_eq!(refusal(s, &b), (428, "confirmation_required"), "{b}");
    assert!(error_message(&b).contains("plan"), "{b}");
    assert_eq!(
        ["pl-1", "pl-2", "pl-3"].map(|id| runs(&counter(id))),
        [0, 0, 0]
    );
    let (s, b) = ops
        .post_status("/v1/root/fleet/runs", ask(None, Some(token)))
        .await
        .unwrap();
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["plan"], previewed, "{b}");

    // The CLI: `--confirm` with no plan options runs the previewed plan.
    let common = [
        "--selector",
        "id=pl-*",
        "--tool",
        "hub.run_allowed_tests",
        "--arguments",
        r#"{"name":"smoke"}"#,
    ];
    let (code, out, err) = admin(
        &root,
        &[
            &["fleet", "preview"][..],
            &common,
            &["--canary", "1", "--max-concurrency", "2", "--json"],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{out}{err}");
    let preview: Value = serde_json::from_str(&out).unwrap();
    let cli_token = preview["confirmation_token"].as_str().unwrap();
    let (code, out, err) = admin(
        &root,
        &[
            &["fleet", "run"][..],
            &common,
            &["--confirm", cli_token, "--wait", "--json"],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{out}{err}");
    let done: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(done["plan"], previewed, "{out}");
    for h in hubs {
        h.stop().await;
    }
}

/// Ids root gives a meaning of its own are refused at enrolment, whatever their case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_target_ids_are_refused_at_enrolment() {
    let root = TestRoot::start().await.unwrap();
    let ops = root.admin();
    for id in ["fleet:label:role", "FLEET:role", "mcp-hub:x"] {
        let (s, b) = ops
            .post_status(
                "/v1/root/hubs",
                json!({ "target_id": id, "environment": "test" }),
            )
            .await
            .unwrap();
        assert_eq!(s, 400, "{id}: {b}");
        assert!(error_message(&b).contains("reserves"), "{id}: {b}");
    }
    let listed = root.admin_get("/v1/root/hubs").await;
    assert!(!listed.to_string().contains("fleet:label"), "{listed}");
}

/// A retired target gets no new key (409, as every other lifecycle command), and the CLI
/// keeps a target id one path segment: `x/lifecycle/retire?` names no target, and `x` is
/// not retired by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retired_target_gets_no_key_and_the_cli_encodes_ids() {
    let root = TestRoot::start().await.unwrap();
    root.enroll("x", "test").await.unwrap();
    let (code, out, err) = admin(&root, &["hub", "cordon", "--target", "x/lifecycle/retire?"]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("not enrolled") || err.contains("404"), "{err}");
    let (code, out, err) = admin(&root, &["hub", "cordon", "--target", ".."]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("is not an id"), "{err}");
    let x = root.admin_get("/v1/root/hubs/x").await;
    assert_eq!(x["lifecycle"]["state"], "active", "{x}");

    root.enroll("gone", "test").await.unwrap();
    root.admin_post("/v1/root/hubs/gone/lifecycle/retire", json!({}))
        .await;
    let (s, b) = root
        .admin()
        .post_status("/v1/root/hubs/gone/rotate-key", json!({}))
        .await
        .unwrap();
    assert_eq!(refusal(s, &b), (409, "conflict"), "{b}");
    let (code, _, err) = admin(&root, &["hub", "rotate-key", "--target", "gone"]);
    assert_ne!(code, 0);
    assert!(err.contains("retired"), "{err}");
}

/// A fleet lease's authority is its selector at the time of each call: its read run pauses
/// after the canary, and meanwhile an operator moves one of its targets to production and
/// relabels another (whose hub stays connected); both are `refused` with the reason in the
/// report, never called (no event of the tool on them), each spending the run's error
/// budget at its turn. A cordoned target is an operator's deliberate state, not an error:
/// `excluded` with its reason, and the budget is not spent on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_read_reaches_only_what_its_selector_names_at_each_call() {
    let root = TestRoot::start().await.unwrap();
    let mut hubs = Vec::new();
    for id in ["sel-1", "sel-2", "sel-3", "sel-4"] {
        hubs.push(root.start_hub(id, "").await.unwrap());
        root.admin_post(
            &format!("/v1/root/hubs/{id}/labels"),
            json!({ "set": { "grp": "a" } }),
        )
        .await;
    }
    root.admin_post("/v1/root/hubs/sel-4/lifecycle/cordon", json!({}))
        .await;
    let selector = "env=test,label:grp=a";
    let issued = root
        .admin_post(
            "/v1/root/mcp/sessions",
            json!({ "selector": selector, "capability_profile": "InfraOpsRead", "ttl_sec": 600 }),
        )
        .await;
    let client = mcp_tests::mcp_client(&root.mcp_url(), issued["token"].as_str().unwrap())
        .await
        .unwrap();
    let client = std::sync::Arc::new(client);
    let reading = {
        let client = client.clone();
        tokio::spawn(async move {
            call(
                &client,
                "root.run_fleet_read",
                // Two refusals to come: a budget for them, so the run goes on to the end.
                json!({ "tool": "hub.get_status", "plan": { "canary": 1, "pause_after_canary_ms": 3000, "max_errors": 2 } }),
            )
            .await
        })
    };
    // The canary (sel-1) done, the run pauses: sel-2 moves to production, sel-3 to group b.
    mcp_tests::eventually("the canary is read", async || {
        let runs = root.admin_get("/v1/root/fleet/runs").await;
        let id = runs["runs"][0]["run_id"].as_str()?.to_owned();
        let r = root.admin_get(&format!("/v1/root/fleet/runs/{id}")).await;
        (r["counts"]["succeeded"] == 1).then_some(())
    })
    .await;
    root.admin_post(
        "/v1/root/hubs/sel-2/placement",
        json!({ "environment": "production" }),
    )
    .await;
    root.admin_post(
        "/v1/root/hubs/sel-3/labels",
        json!({ "set": { "grp": "b" } }),
    )
    .await;
    let r = reading.await.unwrap();
    assert_eq!(r["state"], "completed", "{r}");
    let target = |id: &str| {
        items(&r["targets"])
            .iter()
            .find(|t| t["target_id"] == id)
            .unwrap_or_else(|| panic!("{id} in {r}"))
            .clone()
    };
    assert_eq!(target("sel-1")["status"], "succeeded", "{r}");
    for gone in ["sel-2", "sel-3"] {
        let t = target(gone);
        assert_eq!(t["status"], "refused", "{r}");
        assert!(t["event_id"].is_null(), "never called: {t}");
    }
    let refused: Vec<&Value> = items(&r["groups"])
        .iter()
        .filter(|g| g["status"] == "refused")
        .collect();
    assert_eq!(refused.len(), 2, "{r}");
    for g in refused {
        assert!(
            g["sample"]
                .as_str()
                .unwrap()
                .contains(&format!("no longer matches `{selector}`")),
            "the reason is in the report: {g}"
        );
    }
    let cordoned = target("sel-4");
    assert_eq!(
        (cordoned["status"].as_str(), cordoned["code"].as_str()),
        (Some("excluded"), Some("target_cordoned")),
        "{r}"
    );
    // The trail holds no call of the tool on the moved target in this run.
    let events = root.trace_of(&r, "limit=1000").await;
    assert!(
        !events.iter().any(|e| e["tool_id"] == "hub.get_status"
            && ["sel-2", "sel-3"].contains(&e["target_id"].as_str().unwrap_or_default())),
        "{events:?}"
    );
    for h in hubs {
        h.stop().await;
    }
}

/// A bearer given as a fleet run's argument is redacted before the run is stored or shown
/// (its record, its report, the data directory), and the run still runs with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_a_fleet_runs_arguments_is_never_stored_or_shown() {
    let root = TestRoot::start().await.unwrap();
    let mut hubs = Vec::new();
    for id in ["sec-1", "sec-2"] {
        hubs.push(root.start_hub(id, "").await.unwrap());
    }
    let bearer = root.bearer("sec-1", "InfraOpsRead").await;
    let started = root
        .admin_post(
            "/v1/root/fleet/runs",
            json!({ "selector": "id=sec-*", "tool_id": "hub.get_logs", "arguments": { "contains": bearer } }),
        )
        .await;
    let id = started["run_id"].as_str().unwrap().to_owned();
    let r = mcp_tests::eventually("the run ends", async || {
        let r = root.admin_get(&format!("/v1/root/fleet/runs/{id}")).await;
        (r["state"] == "completed").then_some(r)
    })
    .await;
    assert_eq!(
        r["counts"]["succeeded"], 2,
        "it ran with its arguments: {r}"
    );
    for shown in [&started, &r] {
        assert!(!shown.to_string().contains(&bearer), "{shown}");
        assert!(shown["arguments"]["contains"].is_string(), "{shown}");
    }
    let (code, out, err) = admin(&root, &["fleet", "status", &id, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains(&bearer), "{out}");
    for entry in std::fs::read_dir(root.data_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(bearer.len()).any(|w| w == bearer.as_bytes()),
                "{} holds the bearer",
                path.display()
            );
        }
    }
    for h in hubs {
        h.stop().await;
    }
}

/// Concurrency is limited per owner as well as per lease: while a lease runs a write whose
/// tool allows one call per lease at a time, a lease it minted is `busy` on the same tool and
/// target (before, each minted lease brought slots of its own), and is served once it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minted_leases_share_their_owners_concurrency_slots() {
    let root = TestRoot::start().await.unwrap();
    let (_dir, counter, hub) = root
        .start_counting_hub("hub:slots", |c| counted_test(c, 2))
        .await;
    let bearer = root.bearer("hub:slots", "InfraOpsControl").await;
    let minted = mint(&root, &bearer, "m1").await;
    let args = json!({ "name": "smoke" });
    let token = root
        .preview(&bearer, "hub.run_allowed_tests", args.clone())
        .await
        .unwrap();
    let second = root
        .preview(&minted, "hub.run_allowed_tests", args.clone())
        .await
        .unwrap();
    let first = {
        let (http, url) = (mcp_tests::http_client(), root.url("/v1/root/mcp/call"));
        let body = json!({ "tool_id": "hub.run_allowed_tests", "arguments": {
            "name": "smoke", "phase": "execute", "confirmation_token": token, "idempotency_key": "slot-1" } });
        let bearer = bearer.clone();
        tokio::spawn(async move {
            http.post(url)
                .bearer_auth(bearer)
                .json(&body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        })
    };
    let started = counter.with_extension("txt.started");
    mcp_tests::until("the first write runs", async || started.exists()).await;
    let (s, b) = root
        .execute(
            &minted,
            "hub.run_allowed_tests",
            args.clone(),
            Some(&second),
            "slot-2",
        )
        .await
        .unwrap();
    assert_eq!(refusal(s, &b), (429, "busy"), "{b}");
    assert!(error_message(&b).contains("owner:"), "{b}");
    assert_eq!(first.await.unwrap(), 200);
    // Its confirmation was not spent: once the owner's slot is free, it runs.
    let (s, b) = root
        .execute(
            &minted,
            "hub.run_allowed_tests",
            args,
            Some(&second),
            "slot-2",
        )
        .await
        .unwrap();
    assert_eq!(s, 200, "{b}");
    assert_eq!(runs(&counter), 2);
    hub.stop().await;
}

/// A run's authority ends with its source: an operator revoked while their fleet write runs
/// (one target at a time) has the run cancelled: the target running finishes (a write is
/// not cut off midway), no other ever starts, and the report says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_an_operator_cancels_their_fleet_run_in_progress() {
    let root = TestRoot::start().await.unwrap();
    let (dir, hubs) = root.start_counted_hubs(&["rv-1", "rv-2", "rv-3"], 2).await;
    let counter = |id: &str| dir.path().join(format!("{id}.txt"));
    let added = root
        .admin_post(
            "/v1/root/operators",
            json!({ "name": "dana", "roles": ["operator"], "profiles": ["*"] }),
        )
        .await;
    let dana = mcp_tests::admin::Admin::new(
        mcp_tests::http_client(),
        root.handle().base_url(),
        added["token"].as_str().unwrap(),
    );
    let ask = json!({ "selector": "id=rv-*", "tool_id": "hub.run_allowed_tests",
        "arguments": { "name": "smoke" }, "plan": { "max_concurrency": 1 } });
    let p = dana
        .post("/v1/root/fleet/previews", ask.clone())
        .await
        .unwrap();
    let mut run = ask;
    run["confirmation_token"] = p["confirmation_token"].clone();
    let started = dana.post("/v1/root/fleet/runs", run).await.unwrap();
    let id = started["run_id"].as_str().unwrap().to_owned();
    let began = |t: &str| dir.path().join(format!("{t}.txt.started")).exists();
    mcp_tests::until("the first target starts", async || began("rv-1")).await;
    root.admin_post("/v1/root/operators/dana/revoke", json!({}))
        .await;
    let r = mcp_tests::eventually("the run ends", async || {
        let r = root.admin_get(&format!("/v1/root/fleet/runs/{id}")).await;
        let open =
            r["counts"]["running"].as_u64().unwrap() + r["counts"]["pending"].as_u64().unwrap();
        (r["state"] == "cancelled" && open == 0).then_some(r)
    })
    .await;
    assert_eq!(r["counts"]["cancelled"], 2, "{r}");
    mcp_tests::until("the running target finishes", async || {
        runs(&counter("rv-1")) == 1
    })
    .await;
    // Longer than a target takes (2 s): nothing else started.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert!(!began("rv-2") && !began("rv-3"), "{r}");
    for h in hubs {
        h.stop().await;
    }
}
