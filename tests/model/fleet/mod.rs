//! Fleet runs proven by a model: random histories of runs started by operators and agents
//! (reads and writes over random selectors, with random plans), while other steps cordon,
//! move, retire, label and narrow targets, let hubs answer or fail, revoke the run's
//! operator or fleet lease, pause, resume and cancel it, and SIGKILL root (or a replica).
//!
//! Every call a run makes waits at its simulated hub until a step lets it go, so the oracle
//! (`oracle.rs`, rules F1–F7) knows at each step which targets run, and predicts the run's
//! whole report and the hubs' own counts; after every step the world must show exactly that.
//! A divergence is shrunk to a minimal history, kept in `model/fleet-histories.json` and
//! replayed on every run (`fleet_recorded_histories_hold`). `MCP_MODEL_CASES` and
//! `MCP_MODEL_STEPS` size a longer search, as for the governance model.

pub mod generate;
pub mod oracle;
pub mod steps;
pub mod world;

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::test_runner::{Config, TestError, TestRunner};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};

use generate::Fleets;
use oracle::{Answer, FleetModel};
use steps::FleetStep;
use world::FleetWorld;

use crate::world::Backend;

thread_local! {
    static BACKEND: std::cell::RefCell<Backend> = const { std::cell::RefCell::new(Backend::Sqlite) };
    /// Steps by kind, and snapshots checked per rule, for the report.
    static KINDS: std::cell::RefCell<BTreeMap<String, usize>> =
        const { std::cell::RefCell::new(BTreeMap::new()) };
    static RULES: std::cell::RefCell<BTreeMap<&'static str, usize>> =
        const { std::cell::RefCell::new(BTreeMap::new()) };
    static OUTCOMES: std::cell::RefCell<BTreeMap<String, usize>> =
        const { std::cell::RefCell::new(BTreeMap::new()) };
}

/// How many root replicas the worlds of this thread run (two on PostgreSQL).
fn replicas() -> usize {
    BACKEND.with(|b| match *b.borrow() {
        Backend::Sqlite => 1,
        Backend::Postgres { .. } => 2,
    })
}

fn kind(step: &FleetStep) -> String {
    let kind = format!("{step:?}");
    let name = kind.split([' ', '{']).next().unwrap_or_default().to_owned();
    match step {
        FleetStep::Start { write, who, .. } => {
            let what = if *write { "write" } else { "read" };
            let by = match who {
                steps::Who::Agent { .. } => "agent",
                _ => "operator",
            };
            format!("{name} {what} by {by}")
        }
        _ => name,
    }
}

struct FleetTest;

impl StateMachineTest for FleetTest {
    type SystemUnderTest = FleetWorld;
    type Reference = Fleets;

    fn init_test(_: &FleetModel) -> FleetWorld {
        BACKEND.with(|b| FleetWorld::start(&b.borrow()))
    }

    fn apply(mut w: FleetWorld, m: &FleetModel, step: FleetStep) -> FleetWorld {
        KINDS.with(|all| *all.borrow_mut().entry(kind(&step)).or_default() += 1);
        w.w.via(m.steps);
        let answer = w.perform(&step);
        assert_eq!(
            answer,
            m.answer,
            "{step:?}: the world answered {answer:?}, the oracle {:?} (answer: {})",
            m.answer,
            w.w.last.borrow()
        );
        // A restart waits for the hubs and the run's takeover (a heartbeat or two).
        let patience = match step {
            FleetStep::RestartRoot { .. } => Duration::from_secs(30),
            _ => Duration::from_secs(10),
        };
        let want = m.snapshot();
        let seen = w.settle(&want, patience);
        if seen != want {
            eprintln!("{}", w.w.root_logs());
        }
        assert_eq!(
            seen, want,
            "after {step:?} (step {}): the world (left) and the oracle (right) differ",
            m.steps
        );
        for rule in m.exercised() {
            RULES.with(|all| *all.borrow_mut().entry(rule).or_default() += 1);
        }
        if let Some(run) = m.last.as_ref().filter(|_| m.run.is_none() && w.is_open()) {
            OUTCOMES.with(|all| {
                let mut all = all.borrow_mut();
                for p in &run.parts {
                    *all.entry(format!("target {}", p.status)).or_default() += 1;
                }
                let how = match run.ended_by {
                    Some(why) => format!("run {} by {why}", run.state),
                    None => format!("run {}", run.state),
                };
                *all.entry(how).or_default() += 1;
            });
            w.closed();
        }
        if let Answer::Refused(s) = answer {
            OUTCOMES.with(|all| *all.borrow_mut().entry(format!("refused {s}")).or_default() += 1);
        }
        w
    }

    fn teardown(mut w: FleetWorld, _: FleetModel) {
        w.shutdown();
    }
}

/// Where the fleet model keeps the histories it found.
const HISTORIES: &str = "fleet-histories.json";

fn replay_recorded(backend: Backend) {
    BACKEND.with(|b| *b.borrow_mut() = backend);
    crate::histories::replay::<FleetTest>(HISTORIES);
}

fn explore(backend: Backend) {
    let label = format!("{backend:?}");
    let backend_name = label.split_whitespace().next().unwrap_or("").to_owned();
    BACKEND.with(|b| *b.borrow_mut() = backend);
    let cases = crate::env_number("MCP_MODEL_CASES", 8);
    let steps = crate::env_number("MCP_MODEL_STEPS", 30) as usize;
    let config = Config {
        cases,
        max_shrink_iters: crate::env_number("MCP_MODEL_SHRINK_ITERS", 300),
        max_shrink_time: crate::env_number("MCP_MODEL_SHRINK_SECS", 180).saturating_mul(1000),
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config.clone());
    let strategy = Fleets::sequential_strategy(steps / 2..=steps);
    let started = std::time::Instant::now();
    let result = runner.run(&strategy, |(initial, history, seen)| {
        FleetTest::test_sequential(config.clone(), initial, history, seen);
        Ok(())
    });
    let ran: usize = KINDS.with(|k| k.borrow().values().sum());
    let table = |m: &BTreeMap<String, usize>| {
        m.iter()
            .map(|(k, n)| format!("    {n:5}  {k}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    match result {
        Ok(()) => eprintln!(
            "fleet model on {backend_name}: {cases} histories, {ran} steps in {} s, 0 divergences\n  steps:\n{}\n  snapshots checked per rule:\n{}\n  outcomes:\n{}",
            started.elapsed().as_secs(),
            KINDS.with(|k| table(&k.borrow())),
            RULES.with(|r| r
                .borrow()
                .iter()
                .map(|(k, n)| format!("    {n:5}  {k}"))
                .collect::<Vec<_>>()
                .join("\n")),
            OUTCOMES.with(|o| table(&o.borrow())),
        ),
        Err(TestError::Fail(why, (_, history, _))) => {
            let lines: Vec<String> = history.iter().map(|s| format!("  {s:?}")).collect();
            let replay = (config.clone(), history.clone());
            let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                FleetTest::test_sequential(replay.0, FleetModel::default(), replay.1, None)
            }));
            let kept = match again {
                Err(_) => crate::histories::record(HISTORIES, &why.to_string(), &history),
                Ok(()) => "not kept: it passed when replayed".to_owned(),
            };
            panic!(
                "fleet model on {backend_name}: 1 divergence after {} s: {why}\nminimal history ({} steps, {kept}):\n{}",
                started.elapsed().as_secs(),
                lines.len(),
                lines.join("\n")
            );
        }
        Err(TestError::Abort(why)) => panic!("fleet model on {backend_name} aborted: {why}"),
    }
}

#[test]
fn fleet_recorded_histories_hold() {
    replay_recorded(Backend::Sqlite);
}

#[test]
fn fleet_recorded_histories_hold_on_postgres() {
    if let Some(backend) = crate::postgres("fleet_recorded_histories_hold_on_postgres") {
        replay_recorded(backend);
    }
}

#[test]
fn fleet_model() {
    explore(Backend::Sqlite);
}

/// Two replicas on one PostgreSQL database: requests alternate between them, and either
/// may be killed while a run goes.
#[test]
fn fleet_model_on_postgres() {
    if let Some(backend) = crate::postgres("fleet_model_on_postgres") {
        explore(backend);
    }
}
