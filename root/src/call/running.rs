//! `Running`: the tasks this replica runs right now (MCP tasks, calls run past their request),
//! each with how to stop it. The task lifecycle itself is `call::tasks`.

use std::time::Duration;

use dashmap::DashMap;
use tokio_util::sync::CancellationToken;

/// The tasks this replica runs.
#[derive(Default)]
pub(crate) struct Running {
    /// Task id → how to stop its call.
    tasks: DashMap<String, Stop>,
    /// Signalled whenever a task here ends (a stopping root waits for them).
    ended: tokio::sync::Notify,
}

struct Stop {
    cancel: CancellationToken,
    abort: Option<tokio::task::AbortHandle>,
}

impl Running {
    /// Task `id` runs here from now on; `cancel` stops its call.
    pub(crate) fn started(&self, id: &str, cancel: CancellationToken) {
        self.tasks.insert(
            id.to_owned(),
            Stop {
                cancel,
                abort: None,
            },
        );
    }

    /// The task running `id`'s call, aborted if root stops before it ends.
    pub(crate) fn runs_in(&self, id: &str, abort: tokio::task::AbortHandle) {
        if let Some(mut s) = self.tasks.get_mut(id) {
            s.abort = Some(abort);
        }
    }

    /// Task `id` ended here.
    pub(crate) fn ended(&self, id: &str) {
        self.tasks.remove(id);
        self.ended.notify_waiters();
    }

    /// Whether task `id` runs here.
    pub(crate) fn contains(&self, id: &str) -> bool {
        self.tasks.contains_key(id)
    }

    /// Stops the call of task `id` (`false`: it does not run here).
    pub(crate) fn stop(&self, id: &str) -> bool {
        match self.tasks.get(id) {
            Some(s) => {
                s.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Waits up to `budget` for every task here to end; aborts those still running and
    /// returns how many they were.
    pub(crate) async fn drain(&self, budget: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + budget;
        loop {
            let ended = self.ended.notified();
            if self.tasks.is_empty() {
                return 0;
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                break;
            }
        }
        for s in self.tasks.iter() {
            if let Some(abort) = &s.abort {
                abort.abort();
            }
        }
        self.tasks.len()
    }
}
