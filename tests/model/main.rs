//! Governance proven by a model: random histories of operator actions, hub owners' switches,
//! faults and agent calls run against real processes (a root, a hub per target), each step
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
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::test_runner::{Config, TestError, TestRunner};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};
use serde_json::{Value, json};

use oracle::{Expect, Governance, Model, READS, Step, TARGETS, WRITE};
use world::World;

/// Steps applied to real processes in this run (shrinking included).
static STEPS: AtomicUsize = AtomicUsize::new(0);

/// How often each outcome was checked, for the report (so a run that never reached a write
/// or a refusal shows it).
static OUTCOMES: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());

fn tally(outcome: &Expect) {
    let mut all = OUTCOMES.lock().unwrap_or_else(|e| e.into_inner());
    *all.entry(format!("{outcome:?}")).or_default() += 1;
}

struct GovernanceTest;

impl StateMachineTest for GovernanceTest {
    type SystemUnderTest = World;
    type Reference = Governance;

    fn init_test(_: &Model) -> World {
        World::start()
    }

    fn apply(mut w: World, m: &Model, step: Step) -> World {
        STEPS.fetch_add(1, Ordering::Relaxed);
        let seen = run(&mut w, m, &step);
        if let Some(seen) = seen {
            tally(&seen);
            assert_eq!(
                seen, m.expect,
                "{step:?}: the world answered {seen:?}, the oracle {:?}",
                m.expect
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
        Step::Lease { target, profile } => {
            let (s, v) = w.operator(
                "/v1/root/mcp/sessions",
                json!({"target_id": TARGETS[target].id, "capability_profile": profile.0, "ttl_sec": 3600}),
            );
            Some(lease_created(w, s, &v))
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
                lease_created(w, s, &v),
                Expect::Ok,
                "a one-second lease: {v}"
            );
            std::thread::sleep(std::time::Duration::from_millis(1100));
            let (s, v) = w.call(w.leases.len() - 1, tool.0, read_arguments(tool.0));
            Some(call_outcome(w, w.leases.len() - 1, s, &v))
        }
        Step::Revoke { lease } => {
            let path = format!("/v1/root/mcp/sessions/{}/revoke", w.leases[lease].0);
            let (s, v) = w.operator(&path, json!({}));
            Some(operator_outcome(w, s, &v))
        }
        Step::Rotate { lease } => {
            let path = format!("/v1/root/mcp/sessions/{}/rotate", w.leases[lease].0);
            let (s, v) = w.operator(&path, json!({}));
            if s == 200 {
                return Some(lease_created(w, s, &v));
            }
            Some(operator_outcome(w, s, &v))
        }
        Step::Skill { target, command } => {
            let path = format!(
                "/v1/root/hubs/{}/skills/infra_access_skill/{}",
                TARGETS[target].id,
                command.name()
            );
            let (s, v) = w.operator(&path, json!({}));
            let seen = operator_outcome(w, s, &v);
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
        Step::RestartRoot => {
            w.restart_root();
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

fn read_arguments(tool: &str) -> Value {
    let args = READS.iter().find(|(t, _)| *t == tool).map(|(_, a)| *a);
    serde_json::from_str(args.unwrap_or("{}")).expect("JSON arguments")
}

/// A lease created (or rotated): kept under the model's next number.
fn lease_created(w: &mut World, status: u16, v: &Value) -> Expect {
    let seen = operator_outcome(w, status, v);
    if seen == Expect::Ok {
        let id = v["session_id"].as_str().expect("session_id").to_owned();
        let token = v["token"].as_str().expect("token").to_owned();
        w.leases.push((id, token));
    }
    seen
}

/// An operator action's outcome; its event must name the operator.
fn operator_outcome(w: &World, status: u16, v: &Value) -> Expect {
    let id = v["event_id"]
        .as_str()
        .unwrap_or_else(|| panic!("an operator action without its event: {status} {v}"));
    let event = w.event(id);
    assert_eq!(event["actor"]["id"], "operator:admin", "{event}");
    if (200..300).contains(&status) {
        Expect::Ok
    } else {
        Expect::OperatorRefused(code(v))
    }
}

/// A call's outcome as the oracle words it; its event must name the lease and, for a refusal
/// by root's policy, say so.
fn call_outcome(w: &World, lease: usize, status: u16, v: &Value) -> Expect {
    if status == 401 {
        assert!(
            v.get("event_id").is_none(),
            "no event for a non-bearer: {v}"
        );
        return Expect::Unauthenticated;
    }
    let id = v["event_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a call without its event: {status} {v}"));
    let event = w.event(id);
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
    const KNOWN: [&str; 8] = [
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
        let listed = w.tools_list(i);
        let visible = m.visible(lease);
        assert_eq!(
            listed,
            visible,
            "tools/list of lease {i} ({} on {}): listed {:?} the oracle lacks, lacks {:?}",
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

/// Every history the model ever found (model/histories.json) holds.
#[test]
fn recorded_histories_hold() {
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
fn governance_model() {
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
    let ran = STEPS.load(Ordering::Relaxed);
    match result {
        Ok(()) => eprintln!(
            "governance model: {cases} histories, {ran} steps on real processes, 0 divergences; outcomes checked: {:?}",
            OUTCOMES.lock().unwrap_or_else(|e| e.into_inner())
        ),
        Err(TestError::Fail(why, (_, history, _))) => {
            let steps: Vec<String> = history.iter().map(|s| format!("  {s:?}")).collect();
            let kept = record(&why.to_string(), &history);
            panic!(
                "governance model: 1 divergence after {ran} steps: {why}\nminimal history ({} steps, {kept}):\n{}",
                steps.len(),
                steps.join("\n")
            );
        }
        Err(TestError::Abort(why)) => panic!("governance model aborted after {ran} steps: {why}"),
    }
}
