//! Supervision: a stopped or failed actor is restarted with its state rebuilt and the daemon
//! keeps answering. Failures are real panics (the `fault-injection` feature, on in this suite
//! only), on root (its supervised actors, a router session, the router) and on the hub (the
//! skill, the service supervisor, ProfileOps), and no other target or call is affected.

use mcp_tests::refusal;
use mcp_tests::{TestRoot, until};
use serde_json::json;

#[tokio::test]
async fn stopped_actors_are_restarted_and_state_is_rebuilt() {
    let root = TestRoot::start().await.unwrap();
    let (id, token) = root.lease("hub:test-alpha", "AdaOSDevRead").await;
    assert_eq!(
        root.call(&token, "sdk.get_metadata", json!({})).await.0,
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
    let (s, body) = root.call(&token, "sdk.get_metadata", json!({})).await;
    assert_eq!(s, 200, "{body}");
    // The restarted audit writer continued the chain from the stored head.
    let v = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["checked"], 3, "the lease's issue and two calls");
    // The restarted lease manager still manages the lease created before.
    root.on_lease(&id, "revoke").await;
    assert_eq!(
        root.call(&token, "sdk.get_metadata", json!({})).await.0,
        401
    );
    root.stop().await;
}

/// The status of `hub.get_status` with `token`.
async fn status(root: &TestRoot, token: &str) -> u16 {
    root.call(token, "hub.get_status", json!({})).await.0
}

/// The router session of `target`, if one is attached.
fn session_of(root: &TestRoot, target: &str) -> Option<ractor::ActorId> {
    root.handle().app.hubs.links.get(target).map(|s| s.get_id())
}

/// Each of root's actors panics (not a clean stop): the supervisor starts it again with its
/// state rebuilt, leases issued before still work, the audit chain goes on unbroken; a router
/// session that panics takes down only its own target's connection (the hub dials again and
/// is served by a new session), and the other target's session is never touched; a router
/// that panics is restarted and no hub's session is touched.
#[tokio::test]
async fn root_actors_that_panic_are_restarted_and_contain_the_failure() {
    use mcp_root::audit::writer as audit_writer;
    use mcp_root::descriptors::cache as descriptor_cache;
    use mcp_root::hubs::{link, router};
    use mcp_root::leases::manager as lease_manager;
    use mcp_root::policy;
    let root = TestRoot::start().await.unwrap();
    let alpha = root.start_hub("hub:test-alpha", "").await.unwrap();
    let beta = root.start_hub("hub:test-beta", "").await.unwrap();
    let a = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let b = root.bearer("hub:test-beta", "InfraOpsRead").await;
    assert_eq!(status(&root, &a).await, 200);
    assert_eq!(status(&root, &b).await, 200);

    let actors = &root.handle().app.actors;
    let ids = || {
        [
            actors.leases.load().get_id(),
            actors.policy.load().get_id(),
            actors.descriptors.load().get_id(),
            actors.audit.load().get_id(),
        ]
    };
    let before = ids();
    actors
        .leases
        .load()
        .cast(lease_manager::Msg::Panic)
        .unwrap();
    actors.policy.load().cast(policy::Msg::Panic).unwrap();
    actors
        .descriptors
        .load()
        .cast(descriptor_cache::Msg::Panic)
        .unwrap();
    actors.audit.load().cast(audit_writer::Msg::Panic).unwrap();
    until("every panicked actor replaced", async || {
        ids().iter().zip(before.iter()).all(|(now, was)| now != was)
    })
    .await;
    // Leases issued before the lease manager failed still authenticate; policy decides;
    // the audit writer continues the chain.
    assert_eq!(status(&root, &a).await, 200);
    assert_eq!(status(&root, &b).await, 200);
    let (s, body) = root.call(&a, "sdk.get_metadata", json!({})).await;
    assert_eq!(refusal(s, &body), (403, "capability_not_granted"), "{body}");

    // One target's router session panics: only that target reconnects.
    let alpha_session = session_of(&root, "hub:test-alpha").unwrap();
    let beta_session = session_of(&root, "hub:test-beta").unwrap();
    root.handle()
        .app
        .hubs
        .links
        .get("hub:test-alpha")
        .unwrap()
        .cast(link::Msg::Panic)
        .unwrap();
    until("alpha served by a new session", async || {
        session_of(&root, "hub:test-alpha").is_some_and(|s| s != alpha_session)
            && status(&root, &a).await == 200
    })
    .await;
    assert_eq!(session_of(&root, "hub:test-beta"), Some(beta_session));
    assert_eq!(status(&root, &b).await, 200);
    assert!(beta.handle().is_connected());

    // The router panics: a new router, and both hubs keep their sessions.
    let sessions = (
        session_of(&root, "hub:test-alpha").unwrap(),
        session_of(&root, "hub:test-beta").unwrap(),
    );
    let router_before = actors.router.load().get_id();
    actors.router.load().cast(router::Msg::Panic).unwrap();
    until("the router restarted", async || {
        actors.router.load().get_id() != router_before
    })
    .await;
    assert_eq!(status(&root, &a).await, 200);
    assert_eq!(status(&root, &b).await, 200);
    assert_eq!(
        (
            session_of(&root, "hub:test-alpha").unwrap(),
            session_of(&root, "hub:test-beta").unwrap()
        ),
        sessions,
        "no hub reconnected"
    );

    let v = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(v["ok"], true, "{v}");
    alpha.stop().await;
    beta.stop().await;
    root.stop().await;
}

/// Each of the hub's supervised parts panics in turn: the skill comes back with its lifecycle
/// read from disk (a skill root disabled stays disabled) and its adapters anew; the service
/// supervisor comes back over the same service table (the running service keeps its pid and
/// can still be restarted); ProfileOps comes back from its index (a session that was running
/// ends `interrupted`, a new one can start). The root channel never drops.
#[tokio::test]
async fn hub_parts_that_panic_are_restarted_with_their_state() {
    use crate::hubs::services::{call, fixture_service, write};
    use mcp_tests::ports::free_port;
    let target = "hub:test-alpha";
    let root = TestRoot::start().await.unwrap();
    let port = free_port();
    let hub = root
        .start_hub(target, &fixture_service("fixture", port, &[], ""))
        .await
        .unwrap();
    let read = root.bearer(target, "InfraOpsRead").await;
    let control = root.bearer(target, "InfraOpsControl").await;
    let profiles = root.bearer(target, "ProfileOpsControl").await;
    let client = mcp_tests::mcp_client(&root.mcp_url(), &control)
        .await
        .unwrap();
    let profiler = mcp_tests::mcp_client(&root.mcp_url(), &profiles)
        .await
        .unwrap();
    let pid_of = async |client| {
        let summary = call(client, "hub.get_runtime_summary", json!({})).await;
        summary["services"][0]["pid"].as_u64()
    };
    let pid = pid_of(&client).await.expect("the fixture runs");
    let ctx = hub.handle().context().clone();
    let connection = session_of(&root, target).unwrap();

    // The skill panics while root has it disabled: the new instance keeps it disabled.
    let disabled = root
        .admin_post(
            &format!("/v1/root/hubs/{target}/skills/infra_access_skill/disable"),
            json!({}),
        )
        .await;
    assert_eq!(disabled["skill"]["desired"]["enabled"], false, "{disabled}");
    until("the hub follows root's disable", async || {
        !hub.handle().skill_state().enabled
    })
    .await;
    let skill_before = hub.handle().skill().actor().get_id();
    hub.handle()
        .skill()
        .actor()
        .cast(mcp_hub::SkillMsg::Panic)
        .unwrap();
    until("a new skill instance", async || {
        hub.handle().skill().actor().get_id() != skill_before
    })
    .await;
    assert!(!hub.handle().skill_state().enabled, "rebuilt from disk");
    assert!(hub.handle().skill_state().published.is_empty());
    root.admin_post(
        &format!("/v1/root/hubs/{target}/skills/infra_access_skill/enable"),
        json!({}),
    )
    .await;
    until("the new skill answers", async || {
        status(&root, &read).await == 200
    })
    .await;

    // The service supervisor panics: the service runs on under the new one and can be
    // restarted through it.
    let services_before = ctx.machine.services.current().unwrap();
    services_before
        .cast(mcp_hub::ServiceSupervisorMsg::Panic)
        .unwrap();
    until("a new service supervisor", async || {
        ctx.machine
            .services
            .current()
            .is_some_and(|s| s.get_id() != services_before.get_id())
    })
    .await;
    assert_eq!(pid_of(&client).await, Some(pid), "the service ran on");
    let restarted = write(
        &client,
        "hub.restart_service",
        json!({"service": "fixture"}),
        "restart-after-panic",
    )
    .await;
    assert_eq!(restarted["phase"], "execute", "{restarted}");
    let new_pid = pid_of(&client).await.expect("running again");
    assert_ne!(new_pid, pid, "restarted by the new service supervisor");

    // ProfileOps panics with a session running: the session ends interrupted, and the new
    // ProfileOps starts another.
    let args =
        json!({"service": "fixture", "interval_ms": 100, "duration_sec": 60, "mode": "normal"});
    let started = write(&profiler, "hub.memory.start_profile", args, "profile-1").await;
    let session = started["result"]["session"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_owned();
    let ops_before = ctx.machine.profiles.current().unwrap();
    ops_before.cast(mcp_hub::ProfileOpsMsg::Panic).unwrap();
    until("the running session ended interrupted", async || {
        let s = call(
            &profiler,
            "hub.memory.get_session",
            json!({"session_id": session}),
        )
        .await;
        s["session"]["state"] == "interrupted"
    })
    .await;
    assert_ne!(
        ctx.machine.profiles.current().unwrap().get_id(),
        ops_before.get_id()
    );
    let args =
        json!({"service": "fixture", "interval_ms": 100, "duration_sec": 1, "mode": "normal"});
    let again = write(&profiler, "hub.memory.start_profile", args, "profile-2").await;
    assert_eq!(again["result"]["session"]["state"], "running", "{again}");

    // Nothing above dropped the hub's channel.
    assert!(hub.handle().is_connected());
    assert_eq!(
        session_of(&root, target),
        Some(connection),
        "same connection"
    );
    let v = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(v["ok"], true, "{v}");
    client.cancel().await.ok();
    profiler.cancel().await.ok();
    hub.stop().await;
    root.stop().await;
}

/// A router that fails drops no hub connection and fails no call that was not inside it:
/// forty simulated hubs and a real one keep their sessions (no disconnect, no second
/// welcome) while calls stream to them and a slow write runs through the failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_router_drops_no_hub_and_no_call() {
    use mcp_root::hubs::router;
    use mcp_tests::hubsim::{self, Fleet, FleetOptions};
    let root = TestRoot::start().await.unwrap();
    let base = root.handle().base_url();
    let targets = hubsim::target_ids("router-sim", 40);
    let enrolled = hubsim::enroll_on(&root, &targets).await;
    let mut fleet = Fleet::connect(&base, enrolled, FleetOptions::default())
        .await
        .unwrap();
    let slow = "[[skill.allowed_tests]]\nname = \"slow\"\nargv = [\"sleep\", \"2\"]\n";
    let hub = root.start_hub("hub:router-real", slow).await.unwrap();
    let mut tokens = Vec::new();
    for t in &targets {
        tokens.push(root.lease(t, "InfraOpsRead").await.1);
    }
    let control = root.bearer("hub:router-real", "InfraOpsControl").await;
    let mut ids: Vec<ractor::ActorId> = targets
        .iter()
        .map(|t| session_of(&root, t).unwrap())
        .collect();
    ids.push(session_of(&root, "hub:router-real").unwrap());

    // A write that runs two seconds, in flight when the router fails.
    let write = root.write_later(
        &control,
        "hub.run_allowed_tests",
        json!({"name": "slow"}),
        "k",
    );
    let write = tokio::spawn(write.await);
    let root = std::sync::Arc::new(root);
    // Reads streaming to every simulated hub before, during and after the failure.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for chunk in tokens.chunks(10) {
        let (root, chunk, stop) = (root.clone(), chunk.to_vec(), stop.clone());
        readers.push(tokio::spawn(async move {
            let mut answers = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                for t in &chunk {
                    answers.push(status(&root, t).await);
                }
            }
            answers
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let actors = &root.handle().app.actors;
    let router_before = actors.router.load().get_id();
    actors.router.load().cast(router::Msg::Panic).unwrap();
    until("the router restarted", async || {
        actors.router.load().get_id() != router_before
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Release);
    for r in readers {
        let answers = r.await.unwrap();
        assert!(!answers.is_empty());
        assert!(answers.iter().all(|s| *s == 200), "{answers:?}");
    }
    let (s, b) = write.await.unwrap();
    assert_eq!(s, 200, "the write in flight finished: {b}");
    assert_eq!(b["result"]["replay"], false, "{b}");

    // Every hub kept its session; the new router knows them all.
    let mut now: Vec<ractor::ActorId> = targets
        .iter()
        .map(|t| session_of(&root, t).unwrap())
        .collect();
    now.push(session_of(&root, "hub:router-real").unwrap());
    assert_eq!(now, ids, "no hub reconnected");
    let ordering = std::sync::atomic::Ordering::Acquire;
    assert_eq!(fleet.stats.disconnects.load(ordering), 0);
    assert_eq!(fleet.stats.welcomes.load(ordering), targets.len());
    assert!(hub.handle().is_connected());
    let connected = ractor::call_t!(actors.router.load(), router::Msg::Connected, 5_000).unwrap();
    assert_eq!(connected, targets.len() + 1);
    fleet.shutdown().await;
    hub.stop().await;
    std::sync::Arc::try_unwrap(root)
        .ok()
        .expect("every task ended")
        .stop()
        .await;
}

/// An actor that keeps failing spends its restart budget (five restarts in a minute) and
/// root stops, saying why, rather than serve without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_stops_when_an_actor_spends_its_restart_budget() {
    use mcp_root::actors::supervisor::RESTART_BUDGET;
    use mcp_root::policy;
    let mut root = TestRoot::start().await.unwrap();
    for i in 0..=RESTART_BUDGET {
        let actors = &root.handle().app.actors;
        let before = actors.policy.load().get_id();
        actors.policy.load().cast(policy::Msg::Panic).unwrap();
        if i < RESTART_BUDGET {
            until("the policy engine restarted", async || {
                actors.policy.load().get_id() != before
            })
            .await;
        }
    }
    let handle = root.handle.as_mut().unwrap();
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(20), handle.wait())
        .await
        .expect("root stops");
    let why = stopped.unwrap_err().to_string();
    assert!(
        why.contains("failed more than 5 times within 60 s"),
        "{why}"
    );
}
