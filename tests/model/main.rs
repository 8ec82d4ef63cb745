//! Governance proven by a model: random histories of operator actions, hub owners' switches,
//! faults and agent calls (`generate.rs`) run against real processes (`perform.rs`,
//! `world.rs`: a root on SQLite, or two replicas on one PostgreSQL database; a hub per target),
//! each step checked against a small oracle (`oracle.rs`) that never looks at root's decision
//! code.
//!
//! After every step: the step's outcome equals the oracle's, including who refused (root's
//! policy, before anything reaches a hub); what writes did on each target (tests run, services
//! restarted, deploys and rollbacks, leases issued, profiling sessions, NLU changes applied)
//! is what the oracle counts; the audit trail holds exactly the events the oracle counts and
//! verifies; every live lease's `tools/list` equals the oracle's visible set, and a lease that
//! stopped being a bearer opens no MCP session. A failing history is shrunk to a minimal one,
//! replayed once more on a world of its own, printed as a list of steps and added to
//! `model/histories.json`, whose every history is replayed as a regression case on every run
//! (`recorded_histories_hold`; `MCP_MODEL_REPLAY=N` replays only number N).
//!
//! `MCP_MODEL_CASES` (histories, default 10) and `MCP_MODEL_STEPS` (steps at most per history,
//! default 50) make a longer run; the report says how many steps ran and what was checked.
//! Shrinking stops after `MCP_MODEL_SHRINK_ITERS` attempts (300) or `MCP_MODEL_SHRINK_SECS`
//! (180), whichever comes first.

// Test helpers unwrap like tests do: a failure is a failed test with its message.
#![allow(clippy::unwrap_used)]

mod fleet;
mod generate;
mod histories;
mod oracle;
mod perform;
mod steps;
mod world;

use std::collections::BTreeMap;

use proptest::test_runner::{Config, TestError, TestRunner};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};

use generate::Governance;
use oracle::{Expect, Model};
use steps::{Step, TARGETS};
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

/// Counts `outcome` under the step's kind and, for the write flow, its tool.
fn tally(step: &Step, outcome: &Expect) {
    let kind = kind(step);
    let key = match step {
        Step::Preview { write, .. } | Step::Execute { write, .. } | Step::Elicit { write, .. } => {
            format!("{kind} {}: {outcome:?}", write.tool())
        }
        _ => format!("{kind}: {outcome:?}"),
    };
    OUTCOMES.with(|all| *all.borrow_mut().entry(key).or_default() += 1);
}

fn kind(step: &Step) -> String {
    let kind = format!("{step:?}");
    kind.split([' ', '{']).next().unwrap_or_default().to_owned()
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
        KINDS.with(|all| *all.borrow_mut().entry(kind(&step)).or_default() += 1);
        // Steps take turns among the replicas.
        w.via(m.steps);
        let seen = perform::perform(&mut w, m, &step);
        if let Some(seen) = seen {
            tally(&step, &seen);
            if seen != m.expect {
                // The roots' own account, for a divergence that does not replay (a Publish
                // answered 500 `internal` twice in CI, never on replay).
                eprintln!("{}", w.root_logs());
            }
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
        check_effects(w, m);
        check_audit(w, m);
        check_tools(w, m);
    }
}

/// What writes did on each target equals the oracle's count (a service's start line may
/// come a moment after its hub started, so that waits).
fn check_effects(w: &World, m: &Model) {
    for (t, spec) in TARGETS.iter().enumerate() {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut seen = w.effects(t);
        while seen.restarts < m.effects[t].restarts && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
            seen = w.effects(t);
        }
        assert_eq!(
            seen, m.effects[t],
            "what writes did on {} (left: the world)",
            spec.id
        );
    }
}

/// The trail holds exactly the events the oracle counts (hub owners' switches are recorded
/// a moment after root hears of them, so it waits for those), and verifies.
fn check_audit(w: &World, m: &Model) {
    let want = w.baseline + w.unpredicted.get() + m.audit.total();
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

/// Every live lease lists what the oracle says it may call; a lease that stopped being a
/// bearer since the last check (revoked by an operator or an agent, rotated, expired) opens
/// no MCP session.
fn check_tools(w: &World, m: &Model) {
    let mut was_live = w.was_live.borrow_mut();
    for (i, lease) in m.leases.iter().enumerate() {
        if !lease.live && was_live.get(i).copied().unwrap_or(true) {
            w.via(i + m.steps);
            assert!(
                w.refused(i),
                "after step {}, lease {i} ({} on {}) still opens an MCP session",
                m.steps,
                lease.profile,
                TARGETS[lease.target].id
            );
        }
    }
    *was_live = m.leases.iter().map(|l| l.live).collect();
    drop(was_live);
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
    histories::replay::<GovernanceTest>(HISTORIES);
}

/// Where the governance model keeps the histories it found.
const HISTORIES: &str = "histories.json";

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
        // Each shrink attempt starts a world of its own (seconds): bounded in time too, so a
        // divergence is reported within the CI budget.
        max_shrink_time: env_number("MCP_MODEL_SHRINK_SECS", 180).saturating_mul(1000),
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config.clone());
    let strategy = Governance::sequential_strategy(steps / 2..=steps);
    let started = std::time::Instant::now();
    // When and after how many steps the first divergence was met (before any shrinking).
    let found = std::cell::Cell::new(None);
    let result = runner.run(&strategy, |(initial, history, seen)| {
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            GovernanceTest::test_sequential(config.clone(), initial, history, seen)
        }));
        if let Err(panic) = run {
            if found.get().is_none() {
                found.set(Some((started.elapsed().as_secs(), STEPS.with(|s| s.get()))));
            }
            std::panic::resume_unwind(panic);
        }
        Ok(())
    });
    let ran = STEPS.with(|s| s.get());
    let backend = label.split_whitespace().next().unwrap_or("").to_owned();
    match result {
        Ok(()) => eprintln!(
            "governance model on {backend}: {cases} histories, {ran} steps on real processes, 0 divergences\n  steps: {:?}\n  outcomes checked:\n{}",
            KINDS.with(|all| all.borrow().clone()),
            OUTCOMES.with(|all| all
                .borrow()
                .iter()
                .map(|(k, n)| format!("    {n:4}  {k}"))
                .collect::<Vec<_>>()
                .join("\n"))
        ),
        Err(TestError::Fail(why, (_, history, _))) => {
            let steps: Vec<String> = history.iter().map(|s| format!("  {s:?}")).collect();
            // Kept only when it fails again on a world of its own: a history that passes when
            // replayed is no regression case (the divergence depended on timing).
            let replay = (config.clone(), history.clone());
            let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                GovernanceTest::test_sequential(replay.0, Model::default(), replay.1, None)
            }));
            let kept = match again {
                Err(_) => histories::record(HISTORIES, &why.to_string(), &history),
                Ok(()) => "not kept: it passed when replayed".to_owned(),
            };
            let (secs, at) = found.get().unwrap_or_default();
            panic!(
                "governance model on {backend}: 1 divergence, found after {secs} s and {at} steps, shrunk by {} s and {ran} steps: {why}\nminimal history ({} steps, {kept}):\n{}",
                started.elapsed().as_secs(),
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
