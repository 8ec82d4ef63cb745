//! The fleet runs this replica drives, each with what wakes its task.

use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::Notify;

/// The runs this replica drives, each with what wakes its task (a pause, resume or cancel
/// here; another replica's reaches it within a second through the store).
#[derive(Default)]
pub(crate) struct Runs {
    wakers: DashMap<String, Arc<Notify>>,
}

impl Runs {
    /// Claims `run_id` for a task of this replica: its waker, or `None` when a task drives
    /// it already (a run is never driven twice here).
    pub(crate) fn claim(&self, run_id: &str) -> Option<Arc<Notify>> {
        match self.wakers.entry(run_id.to_owned()) {
            dashmap::Entry::Occupied(_) => None,
            dashmap::Entry::Vacant(v) => Some(v.insert(Arc::new(Notify::new())).clone()),
        }
    }

    /// Wakes `run_id`'s task, if this replica drives it.
    pub(crate) fn wake(&self, run_id: &str) {
        if let Some(w) = self.wakers.get(run_id) {
            w.notify_one();
        }
    }

    pub(crate) fn finished(&self, run_id: &str) {
        self.wakers.remove(run_id);
    }

    /// Whether this replica drives `run_id` now.
    pub(crate) fn driving(&self, run_id: &str) -> bool {
        self.wakers.contains_key(run_id)
    }
}
