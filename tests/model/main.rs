//! Governance proven by a model: random histories of operator actions, hub owners' switches,
//! faults and agent calls run against real processes (a root on SQLite, or two replicas on one
//! PostgreSQL database; a hub per target), each step
//! checked against a small oracle (`oracle.rs`) that never looks at root's decision code.
//!
//! After every step: the step's outcome equals the oracle's, including who refused (root's
//! policy, before anything reaches a hub); writes ran exactly as often as the oracle says;
//! the audit trail holds exactly the events the oracle counts and verifies; every live lease's
//! `tools/list` equals the oracle's visible set. A failing history is shrunk to a minimal one,
//! printed as a list of steps and added to `model/histories.json`, whose every history is
//! replayed as a regression case on every run (`recorded_histories_hold`).
//!
//! `MCP_MODEL_CASES` (histories, default 10) and `MCP_MODEL_STEPS` (steps at most per history,
//! default 50) make a longer run; the report says how many steps ran.

// Test helpers unwrap like tests do: a failure is a failed test with its message.
#![allow(clippy::unwrap_used)]

mod oracle;
mod world;

use std::collections::BTreeMap;

use proptest::test_runner::{Config, TestError, TestRunner};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};
use serde_json::{Value, json};

use oracle::{Expect, Governance, Model, READS, Step, TARGETS, WRITE};
use world::{Backend, World};

thread_local! {
    /// Steps applied to real processes by this test thread (shrinking included).
    static STEPS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

thread_local! {
    /// Steps applied by kind, for the report.
    static KINDS: std::cell::RefCell<BTreeMap<String, usize>> =
        const { std::cell::RefCell::new(BTreeMap::new()) };
}

thread_local! {
    /// How often each outcome was checked, for the report (so a run that never reached a
    /// write or a refusal shows it).
    static OUTCOMES: std::cell::RefCell<BTreeMap<String, usize>> =
        const { std::cell::RefCell::new(BTreeMap::new()) };
}

fn tally(outcome: &Expect) {
    OUTCOMES.with(|all| *all.borrow_mut().entry(format!("{outcome:?}")).or_default() += 1);
}

struct GovernanceTest;

thread_local! {
    /// The backend the histories of this test thread run on.
    static BACKEND: std::cell::RefCell<Backend> = const { std::cell::RefCell::new(Backend::Sqlite) };
}

impl StateMachineTest for GovernanceTest {
    type SystemUnderTest = World;
    type Reference = Governance;

    fn init_test(_: &Model) -> World {
        BACKEND.with(|b| World::start(&b.borrow()))
    }

    fn apply(mut w: World, m: &Model, step: Step) -> World {
        STEPS.with(|s| s.set(s.get() + 1));
        let kind = format!("{step:?}");
        let kind = kind.split([' ', '{']).next().unwrap_or_default().to_owned();
        KINDS.with(|all| *all.borrow_mut().entry(kind).or_default() += 1);
        // Steps take turns among the replicas.
        w.via(m.steps);
        let seen = run(&mut w, m, &step);
        if let Some(seen) = seen {
            tally(&seen);
            assert_eq!(
                seen,
                m.expect,
                "{step:?}: the world answered {seen:?}, the oracle {:?} (answer: {})",
                m.expect,
                w.last.borrow()
            );
        }
        w
    }

    fn check_invariants(w: &World, m: &Model) {
        check_runs(w, m);
        check_audit(w, m);
        check_tools(w, m);
    }
}

/// Performs `step` on the world; what it came to, for the steps that answer.
fn run(w: &mut World, m: &Model, step: &Step) -> Option<Expect> {
    match *step {
        Step::Lease {
            target,
            profile,
            by,
        } => {
            let (s, v) = w.operator_as(
                by,
                "/v1/root/mcp/sessions",
                json!({"target_id": TARGETS[target].id, "capability_profile": profile.0, "ttl_sec": 3600}),
            );
            Some(lease_created(w, by, s, &v))
        }
        Step::Expired {
            target,
            profile,
            tool,
        } => {
            let (s, v) = w.operator(
                "/v1/root/mcp/sessions",
                json!({"target_id": TARGETS[target].id, "capability_profile": profile.0, "ttl_sec": 1}),
            );
            assert_eq!(
                lease_created(w, None, s, &v),
                Expect::Ok,
                "a one-second lease: {v}"
            );
            std::thread::sleep(std::time::Duration::from_millis(1100));
            let (s, v) = w.call(w.leases.len() - 1, tool.0, read_arguments(tool.0));
            Some(call_outcome(w, w.leases.len() - 1, s, &v))
        }
        Step::Revoke { lease, by } => {
            let path = format!("/v1/root/mcp/sessions/{}/revoke", w.leases[lease].0);
            let (s, v) = w.operator_as(by, &path, json!({}));
            Some(operator_outcome(w, by, s, &v))
        }
        Step::Rotate { lease, by } => {
            let path = format!("/v1/root/mcp/sessions/{}/rotate", w.leases[lease].0);
            let (s, v) = w.operator_as(by, &path, json!({}));
            if s == 200 {
                return Some(lease_created(w, by, s, &v));
            }
            Some(operator_outcome(w, by, s, &v))
        }
        Step::AddOperator { name, by } => {
            let body = json!({"name": format!("op{name}")});
            let (s, v) = w.operator_as(by, "/v1/root/operators", body);
            let seen = operator_outcome(w, by, s, &v);
            if seen == Expect::Ok {
                let token = v["token"].as_str().expect("an operator's token");
                w.operators[name as usize] = Some(token.to_owned());
            }
            Some(seen)
        }
        Step::RevokeOperator { name, by } => {
            let path = format!("/v1/root/operators/op{name}/revoke");
            let (s, v) = w.operator_as(by, &path, json!({}));
            Some(operator_outcome(w, by, s, &v))
        }
        Step::Skill {
            target,
            command,
            by,
        } => {
            let path = format!(
                "/v1/root/hubs/{}/skills/infra_access_skill/{}",
                TARGETS[target].id,
                command.name()
            );
            let (s, v) = w.operator_as(by, &path, json!({}));
            let seen = operator_outcome(w, by, s, &v);
            w.settle(m);
            Some(seen)
        }
        Step::PublishInvalid { by } => {
            // A descriptor without any of the fields a descriptor needs.
            let body = json!({"descriptors": [{"descriptor_id": "model.invalid"}]});
            let (s, v) = w.operator_as(by, "/v1/root/mcp/descriptors", body);
            Some(operator_outcome(w, by, s, &v))
        }
        Step::Enrol { target, by } => {
            let spec = &TARGETS[target];
            let body = json!({"target_id": spec.id, "environment": spec.environment, "subnet_id": spec.subnet});
            let (s, v) = w.operator_as(by, "/v1/root/hubs", body);
            Some(operator_outcome(w, by, s, &v))
        }
        Step::RotateHubKey { target, by } => {
            let path = format!("/v1/root/hubs/{}/rotate-key", TARGETS[target].id);
            let (s, v) = w.operator_as(by, &path, json!({}));
            let seen = operator_outcome(w, by, s, &v);
            if seen == Expect::Ok {
                let reloads = w.token_reloads(target);
                w.hub_token(target, v["token"].as_str().expect("the new hub token"));
                // A running hub polls its token file and reconnects with the new token: wait
                // for that, so no later step meets the reconnection.
                if m.targets[target].hub_running {
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                    while w.token_reloads(target) == reloads {
                        assert!(
                            std::time::Instant::now() < deadline,
                            "the hub of {} never picked up its new token",
                            TARGETS[target].id
                        );
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                }
            }
            w.settle(m);
            Some(seen)
        }
        Step::Owner { target, on } => {
            w.owner_switch(target, on);
            w.settle(m);
            None
        }
        Step::StopHub { target } => {
            w.hubs[target] = None;
            w.settle(m);
            None
        }
        Step::StartHub { target } => {
            w.hubs[target] = Some(w.start_hub(target));
            w.settle(m);
            None
        }
        Step::RestartRoot { replica } => {
            let n = w.replicas.len();
            w.restart(replica as usize % n);
            w.settle(m);
            None
        }
        Step::Read { lease, tool } => {
            let (s, v) = w.call(lease, tool.0, read_arguments(tool.0));
            Some(call_outcome(w, lease, s, &v))
        }
        Step::Preview { lease } => {
            let (s, v) = w.call(lease, WRITE, json!({"name": "smoke"}));
            let seen = call_outcome(w, lease, s, &v);
            if seen == Expect::Ok {
                let token = v["result"]["confirmation_token"].as_str();
                w.confirmations
                    .push(token.expect("a preview's confirmation").to_owned());
            }
            Some(seen)
        }
        Step::RevokeInFlight { lease } => Some(revoke_in_flight(w, m, lease)),
        Step::Execute {
            lease,
            confirmation,
            key,
        } => {
            let mut args =
                json!({"name": "smoke", "phase": "execute", "idempotency_key": format!("k{key}")});
            if let Some(p) = confirmation {
                args["confirmation_token"] = json!(w.confirmations[p]);
            }
            let (s, v) = w.call(lease, WRITE, args);
            Some(call_outcome(w, lease, s, &v))
        }
    }
}

/// Previews and executes the allowed test `slow`, revokes the lease while it runs; the
/// execute's outcome (the preview and the revocation must succeed).
fn revoke_in_flight(w: &mut World, m: &Model, lease: usize) -> Expect {
    let (s, v) = w.call(lease, WRITE, json!({"name": "slow"}));
    assert_eq!(call_outcome(w, lease, s, &v), Expect::Ok, "preview: {v}");
    let token = v["result"]["confirmation_token"]
        .as_str()
        .expect("a confirmation");
    w.confirmations.push(token.to_owned());
    let args = json!({"name": "slow", "phase": "execute", "confirmation_token": token,
        "idempotency_key": format!("in-flight-{}", m.steps)});
    let request = w
        .http
        .post(w.url("/v1/root/mcp/call"))
        .bearer_auth(&w.leases[lease].1)
        .json(&json!({"tool_id": WRITE, "arguments": args}));
    let execute = w.rt.spawn(async move {
        let res = request.send().await.expect("root answers");
        let status = res.status().as_u16();
        (status, res.json::<Value>().await.unwrap_or(Value::Null))
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let path = format!("/v1/root/mcp/sessions/{}/revoke", w.leases[lease].0);
    let (s, v) = w.operator(&path, json!({}));
    assert_eq!(operator_outcome(w, None, s, &v), Expect::Ok, "revoke: {v}");
    assert!(
        !execute.is_finished(),
        "the slow test finished before the revocation"
    );
    let (s, v) = w.block(execute).expect("the execute's task");
    *w.last.borrow_mut() = v.clone();
    call_outcome(w, lease, s, &v)
}

fn read_arguments(tool: &str) -> Value {
    let args = READS.iter().find(|(t, _)| *t == tool).map(|(_, a)| *a);
    serde_json::from_str(args.unwrap_or("{}")).expect("JSON arguments")
}

/// A lease created (or rotated): kept under the model's next number.
fn lease_created(w: &mut World, by: Option<u8>, status: u16, v: &Value) -> Expect {
    let seen = operator_outcome(w, by, status, v);
    if seen == Expect::Ok {
        let id = v["session_id"].as_str().expect("session_id").to_owned();
        let token = v["token"].as_str().expect("token").to_owned();
        w.leases.push((id, token));
    }
    seen
}

/// The event an answer names; `None` for a 401, which must name none (a non-bearer leaves no
/// trace).
fn event_of(w: &World, status: u16, v: &Value) -> Option<Value> {
    if status == 401 {
        assert!(
            v.get("event_id").is_none(),
            "no event for a non-bearer: {v}"
        );
        return None;
    }
    let id = v["event_id"]
        .as_str()
        .unwrap_or_else(|| panic!("an answer without its event: {status} {v}"));
    Some(w.event(id))
}

/// An operator action's outcome; its event must name the operator (a revoked operator's
/// token is no bearer: 401 and no event).
fn operator_outcome(w: &World, by: Option<u8>, status: u16, v: &Value) -> Expect {
    let Some(event) = event_of(w, status, v) else {
        return Expect::Unauthenticated;
    };
    let actor = by.map_or("operator:admin".to_owned(), |n| format!("operator:op{n}"));
    assert_eq!(event["actor"]["id"], actor, "{event}");
    if (200..300).contains(&status) {
        Expect::Ok
    } else {
        Expect::OperatorRefused(code(v))
    }
}

/// A call's outcome as the oracle words it; its event must name the lease and, for a refusal
/// by root's policy, say so.
fn call_outcome(w: &World, lease: usize, status: u16, v: &Value) -> Expect {
    let Some(event) = event_of(w, status, v) else {
        return Expect::Unauthenticated;
    };
    assert_eq!(
        event["actor"]["id"],
        format!("lease:{}", w.leases[lease].0),
        "{event}"
    );
    if v["ok"] == true {
        assert_eq!(event["status"], "ok", "{event}");
        return if v["result"]["replay"] == true {
            Expect::Replay
        } else {
            Expect::Ok
        };
    }
    if event["policy_decision"]["decision"] == "deny" {
        assert_eq!(event["status"], "denied", "{event}");
        Expect::Denied(code(v))
    } else {
        Expect::Refused(code(v))
    }
}

/// The error code of an answer, as one of the codes the oracle knows (others are kept as
/// `unexpected`, which no oracle outcome equals).
fn code(v: &Value) -> &'static str {
    const KNOWN: [&str; 9] = [
        "not_found",
        "capability_not_granted",
        "environment_forbidden",
        "skill_disabled",
        "target_offline",
        "confirmation_required",
        "invalid_arguments",
        "unauthenticated",
        "conflict",
    ];
    let c = v["error"]["code"].as_str().unwrap_or("");
    KNOWN.iter().find(|k| **k == c).copied().unwrap_or_else(|| {
        eprintln!("an answer with a code the oracle does not know: {v}");
        "unexpected"
    })
}

fn check_runs(w: &World, m: &Model) {
    for (t, spec) in TARGETS.iter().enumerate() {
        assert_eq!(
            w.runs(t),
            m.runs[t],
            "writes run on {} (the oracle: {})",
            spec.id,
            m.runs[t]
        );
    }
}

/// The trail holds exactly the events the oracle counts (hub owners' switches are recorded
/// a moment after root hears of them, so it waits for those), and verifies.
fn check_audit(w: &World, m: &Model) {
    let want = w.baseline + m.audit.total();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let (mut count, mut ok) = w.audit_verify();
    while count < want && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        (count, ok) = w.audit_verify();
    }
    assert!(ok, "audit verify failed");
    assert_eq!(
        count, want,
        "events in the trail (the oracle: {:?} after {} at the start)",
        m.audit, w.baseline
    );
}

fn check_tools(w: &World, m: &Model) {
    for (i, lease) in m.leases.iter().enumerate().filter(|(_, l)| l.live) {
        w.via(i + m.steps);
        let listed = w.tools_list(i);
        let visible = m.visible(lease);
        assert_eq!(
            listed,
            visible,
            "after step {}, tools/list of lease {i} ({} on {}): listed {:?} the oracle lacks, lacks {:?}",
            m.steps,
            lease.profile,
            TARGETS[lease.target].id,
            listed.difference(&visible).collect::<Vec<_>>(),
            visible.difference(&listed).collect::<Vec<_>>()
        );
    }
}

fn env_number(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A history the model found, kept as a regression case.
#[derive(serde::Serialize, serde::Deserialize)]
struct Recorded {
    found: String,
    steps: Vec<Step>,
}

fn histories_file() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("model/histories.json")
}

fn recorded() -> Vec<Recorded> {
    let text = std::fs::read_to_string(histories_file()).expect("model/histories.json");
    serde_json::from_str(&text).expect("model/histories.json holds recorded histories")
}

/// Adds a minimal failing history to `model/histories.json`; says where it went.
fn record(why: &str, steps: &[Step]) -> String {
    let mut all = recorded();
    let found = why.lines().next().unwrap_or(why).to_owned();
    all.push(Recorded {
        found,
        steps: steps.to_vec(),
    });
    let text = serde_json::to_string_pretty(&all).expect("JSON") + "\n";
    match std::fs::write(histories_file(), text) {
        Ok(()) => "kept in model/histories.json".to_owned(),
        Err(e) => format!("not kept: {e}"),
    }
}

/// The PostgreSQL backend when `MCP_TEST_DATABASE_URL` is set (else `None`, after saying so).
fn postgres(test: &str) -> Option<Backend> {
    match std::env::var("MCP_TEST_DATABASE_URL") {
        Ok(base_url) => Some(Backend::Postgres { base_url }),
        Err(_) => {
            eprintln!("SKIPPED {test}: MCP_TEST_DATABASE_URL is not set");
            None
        }
    }
}

/// Replays every history the model ever found (model/histories.json) on `backend`.
fn replay_recorded(backend: Backend) {
    BACKEND.with(|b| *b.borrow_mut() = backend);
    for (i, history) in recorded().into_iter().enumerate() {
        let mut m = Model::default();
        for step in &history.steps {
            assert!(
                Governance::preconditions(&m, step),
                "recorded history {i} ({}): {step:?} does not apply",
                history.found
            );
            m = Governance::apply(m, step);
        }
        GovernanceTest::test_sequential(Config::default(), Model::default(), history.steps, None);
    }
}

#[test]
fn recorded_histories_hold() {
    replay_recorded(Backend::Sqlite);
}

#[test]
fn recorded_histories_hold_on_postgres() {
    if let Some(backend) = postgres("recorded_histories_hold_on_postgres") {
        replay_recorded(backend);
    }
}

/// Random histories on `backend`; panics with the minimal history of a divergence.
fn explore(backend: Backend) {
    let label = format!("{backend:?}");
    BACKEND.with(|b| *b.borrow_mut() = backend);
    let cases = env_number("MCP_MODEL_CASES", 10);
    let steps = env_number("MCP_MODEL_STEPS", 50) as usize;
    let config = Config {
        cases,
        max_shrink_iters: env_number("MCP_MODEL_SHRINK_ITERS", 300),
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config.clone());
    let strategy = Governance::sequential_strategy(steps / 2..=steps);
    let result = runner.run(&strategy, |(initial, history, seen)| {
        GovernanceTest::test_sequential(config.clone(), initial, history, seen);
        Ok(())
    });
    let ran = STEPS.with(|s| s.get());
    let backend = label.split_whitespace().next().unwrap_or("").to_owned();
    match result {
        Ok(()) => eprintln!(
            "governance model on {backend}: {cases} histories, {ran} steps on real processes, 0 divergences\n  steps: {:?}\n  outcomes checked: {:?}",
            KINDS.with(|all| all.borrow().clone()),
            OUTCOMES.with(|all| all.borrow().clone())
        ),
        Err(TestError::Fail(why, (_, history, _))) => {
            let steps: Vec<String> = history.iter().map(|s| format!("  {s:?}")).collect();
            let kept = record(&why.to_string(), &history);
            panic!(
                "governance model on {backend}: 1 divergence after {ran} steps: {why}\nminimal history ({} steps, {kept}):\n{}",
                steps.len(),
                steps.join("\n")
            );
        }
        Err(TestError::Abort(why)) => {
            panic!("governance model on {backend} aborted after {ran} steps: {why}")
        }
    }
}

#[test]
fn governance_model() {
    explore(Backend::Sqlite);
}

/// Two replicas on one PostgreSQL database: requests alternate between them, hubs prefer
/// one each, a replica is killed and started again.
#[test]
fn governance_model_on_postgres() {
    if let Some(backend) = postgres("governance_model_on_postgres") {
        explore(backend);
    }
}
