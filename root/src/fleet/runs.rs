//! The fleet runs this replica drives, each with what wakes its task, the leases it issued
//! for runs' targets, and the followers of runs (an agent's fleet tool), told when a run's
//! state or a target's part changes here.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dashmap::DashMap;
use tokio::sync::Notify;

use crate::leases::manager::LeaseEntry;

/// The runs this replica drives, each with what wakes its task (a pause, resume or cancel
/// here; another replica's reaches it within a second through the store).
#[derive(Default)]
pub(crate) struct Runs {
    wakers: DashMap<String, Arc<Notify>>,
    /// Runs' leases by (run, target) (see `fleet::authority`).
    leases: DashMap<(String, String), Arc<LeaseEntry>>,
    kept: AtomicUsize,
    /// Per followed run: a counter bumped at each change here.
    changes: DashMap<String, tokio::sync::watch::Sender<u64>>,
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

    /// Wakes `run_id`'s task, if this replica drives it, and tells its followers.
    pub(crate) fn wake(&self, run_id: &str) {
        if let Some(w) = self.wakers.get(run_id) {
            w.notify_one();
        }
        self.changed(run_id);
    }

    /// Follows `run_id`: the receiver changes whenever the run's state or a target's part
    /// changes on this replica.
    pub(crate) fn follow(&self, run_id: &str) -> tokio::sync::watch::Receiver<u64> {
        self.changes
            .entry(run_id.to_owned())
            .or_insert_with(|| tokio::sync::watch::channel(0).0)
            .subscribe()
    }

    /// Tells `run_id`'s followers it changed; a run nobody follows any more is forgotten.
    pub(crate) fn changed(&self, run_id: &str) {
        let followed = match self.changes.get(run_id) {
            Some(tx) => {
                tx.send_modify(|n| *n += 1);
                tx.receiver_count() > 0
            }
            None => return,
        };
        if !followed {
            self.changes
                .remove_if(run_id, |_, tx| tx.receiver_count() == 0);
        }
    }

    pub(crate) fn finished(&self, run_id: &str) {
        self.wakers.remove(run_id);
    }

    /// Whether this replica drives `run_id` now.
    pub(crate) fn driving(&self, run_id: &str) -> bool {
        self.wakers.contains_key(run_id)
    }

    /// The lease kept for a run's target.
    pub(crate) fn lease(&self, key: &(String, String)) -> Option<Arc<LeaseEntry>> {
        self.leases.get(key).map(|l| l.clone())
    }

    /// Keeps a run's lease for its target; leases no longer usable (a preview never
    /// confirmed) are dropped on the way.
    pub(crate) fn keep_lease(&self, key: (String, String), lease: Arc<LeaseEntry>) {
        if self.kept.fetch_add(1, Ordering::Relaxed) % 4096 == 4095 {
            self.leases.retain(|_, l| l.is_usable());
        }
        self.leases.insert(key, lease);
    }

    /// Takes the leases kept for `run_id` (it ended).
    pub(crate) fn take_leases(&self, run_id: &str) -> Vec<Arc<LeaseEntry>> {
        let keys: Vec<(String, String)> = self
            .leases
            .iter()
            .filter(|e| e.key().0 == run_id)
            .map(|e| e.key().clone())
            .collect();
        keys.iter()
            .filter_map(|k| self.leases.remove(k).map(|(_, l)| l))
            .collect()
    }
}
