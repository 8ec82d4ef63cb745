//! Concurrency limits per lease, per owner and per target, per tool and overall.
//!
//! An owner is the top of a lease's delegation chain (`LeaseEntry::idempotency_owner`): the
//! leases it minted, its run credentials and a fleet lease's per-target children share its
//! slots, so handing authority on never multiplies how much runs at once. Over a limit the
//! call is refused at once with `busy`: nothing queues without bound.

use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

#[derive(Default)]
pub(crate) struct ConcurrencyLimits {
    slots: DashMap<String, Arc<Semaphore>>,
}

/// A call refused at once because one of its slots is full.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("concurrency limit reached ({key}); retry later")]
pub(crate) struct ConcurrencyError {
    /// The full slot's key (`lease:…`, `owner:…`, `target:…`).
    pub(crate) key: String,
}

/// Held for the duration of a call; dropping it frees the slots.
pub(crate) struct Permits(#[allow(dead_code)] Vec<OwnedSemaphorePermit>);

impl ConcurrencyLimits {
    /// Takes one slot in each `(key, limit)` or none at all; the error names the full one.
    pub(crate) fn try_acquire(&self, keys: &[(String, u32)]) -> Result<Permits, ConcurrencyError> {
        let mut held = Vec::with_capacity(keys.len());
        for (key, limit) in keys {
            let sem = self
                .slots
                .entry(key.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(*limit as usize)))
                .clone();
            match sem.try_acquire_owned() {
                Ok(p) => held.push(p),
                Err(_) => return Err(ConcurrencyError { key: key.clone() }),
            }
        }
        Ok(Permits(held))
    }

    /// Forgets the slots of a lease that can no longer call (revoked or rotated).
    pub(crate) fn forget_prefix(&self, prefix: &str) {
        self.slots.retain(|k, _| !k.starts_with(prefix));
    }

    /// Forgets every slot no call holds (its semaphore referenced by the map alone: no
    /// permit out, no caller between lookup and acquire, as both hold a reference), so keys
    /// of owners and targets gone do not accumulate.
    pub(crate) fn sweep_idle(&self) {
        self.slots.retain(|_, s| Arc::strong_count(s) > 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_the_limit_is_refused_at_once_and_released_on_drop() {
        let l = ConcurrencyLimits::default();
        let keys = vec![("lease:a:t".to_string(), 1), ("target:x".to_string(), 2)];
        let p1 = l.try_acquire(&keys).unwrap();
        assert_eq!(
            l.try_acquire(&keys).err().map(|e| e.key).as_deref(),
            Some("lease:a:t")
        );
        drop(p1);
        let _p2 = l.try_acquire(&keys).unwrap();
        // The target slot freed by the failed attempt is not leaked.
        let _p3 = l.try_acquire(&[("target:x".to_string(), 2)]).unwrap();
        assert!(l.try_acquire(&[("target:x".to_string(), 2)]).is_err());
    }

    #[test]
    fn idle_slots_are_swept_and_held_ones_kept() {
        let l = ConcurrencyLimits::default();
        let held = l.try_acquire(&[("owner:a".to_string(), 1)]).unwrap();
        drop(l.try_acquire(&[("owner:b".to_string(), 1)]).unwrap());
        l.sweep_idle();
        assert_eq!(l.slots.len(), 1);
        // The held slot still counts: its limit holds across the sweep.
        assert!(l.try_acquire(&[("owner:a".to_string(), 1)]).is_err());
        drop(held);
        l.sweep_idle();
        assert!(l.slots.is_empty());
    }
}
