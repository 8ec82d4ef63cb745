//! Histories a model found, kept as regression cases (`model/histories.json` for the
//! governance model, `model/fleet-histories.json` for fleet runs): loaded, added to, and
//! replayed (`MCP_MODEL_REPLAY=N` replays only number N, from 0).

use proptest::test_runner::Config;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};
use serde::{Serialize, de::DeserializeOwned};

/// A history a model found: the first line of why it failed, and its steps.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Recorded<S> {
    pub found: String,
    pub steps: Vec<S>,
}

fn path(file: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("model")
        .join(file)
}

/// The histories kept in `model/<file>` (none when it does not exist yet).
pub fn load<S: DeserializeOwned>(file: &str) -> Vec<Recorded<S>> {
    let text = std::fs::read_to_string(path(file)).unwrap_or_else(|_| "[]".into());
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("model/{file}: {e}"))
}

/// Adds a minimal failing history to `model/<file>`; says where it went.
pub fn record<S: Serialize + DeserializeOwned + Clone>(
    file: &str,
    why: &str,
    steps: &[S],
) -> String {
    let mut all: Vec<Recorded<S>> = load(file);
    all.push(Recorded {
        found: why.lines().next().unwrap_or(why).to_owned(),
        steps: steps.to_vec(),
    });
    let text = serde_json::to_string_pretty(&all).expect("JSON") + "\n";
    match std::fs::write(path(file), text) {
        Ok(()) => format!("kept in model/{file}"),
        Err(e) => format!("not kept: {e}"),
    }
}

/// Replays every history kept in `model/<file>` against `T`'s world, each first checked to
/// apply step by step to the reference state machine.
pub fn replay<T>(file: &str)
where
    T: StateMachineTest,
    <T::Reference as ReferenceStateMachine>::Transition: DeserializeOwned,
    <T::Reference as ReferenceStateMachine>::State: Default,
{
    let only: Option<usize> = std::env::var("MCP_MODEL_REPLAY")
        .ok()
        .and_then(|n| n.parse().ok());
    for (i, history) in load::<<T::Reference as ReferenceStateMachine>::Transition>(file)
        .into_iter()
        .enumerate()
    {
        if only.is_some_and(|n| n != i) {
            continue;
        }
        // Said first, so a failure's output names its history.
        eprintln!("model/{file}: history {i} ({})", history.found);
        let mut m = Default::default();
        for step in &history.steps {
            assert!(
                T::Reference::preconditions(&m, step),
                "model/{file} history {i} ({}): {step:?} does not apply",
                history.found
            );
            m = T::Reference::apply(m, step);
        }
        T::test_sequential(Config::default(), Default::default(), history.steps, None);
    }
}
