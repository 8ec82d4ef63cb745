//! The `jti`s of the DPoP proofs accepted within their window, so that a proof is good for
//! one request: per replica (a proof replayed to another replica within the window is
//! caught by root's nonce when `[oauth] dpop_nonce` is on, not here).

use std::sync::atomic::{AtomicU64, Ordering};

use dashmap::DashMap;
use sha2::{Digest, Sha256};

/// Expired entries are swept once every this many proofs.
const SWEEP_EVERY: u64 = 1024;

/// `jti`s by their key's thumbprint, each with when it may be forgotten (unix seconds).
#[derive(Default)]
pub(crate) struct Seen {
    until: DashMap<[u8; 32], i64>,
    accepted: AtomicU64,
}

impl Seen {
    /// Whether `jti` of key `jkt` is new (and from now on kept until `until`).
    pub(crate) fn first(&self, jkt: &str, jti: &str, until: i64, now: i64) -> bool {
        let mut h = Sha256::new();
        h.update(jkt.as_bytes());
        h.update([0]);
        h.update(jti.as_bytes());
        let key: [u8; 32] = h.finalize().into();
        let new = match self.until.entry(key) {
            dashmap::mapref::entry::Entry::Occupied(mut e) if *e.get() < now => {
                e.insert(until);
                true
            }
            dashmap::mapref::entry::Entry::Occupied(_) => false,
            dashmap::mapref::entry::Entry::Vacant(e) => {
                e.insert(until);
                true
            }
        };
        if new && self.accepted.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.until.retain(|_, u| *u >= now);
        }
        new
    }

    /// How many are kept now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.until.len()
    }
}
