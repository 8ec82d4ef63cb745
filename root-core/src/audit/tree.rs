//! The audit trail's Merkle tree, with RFC 6962 hashing and proofs through `tlog_tiles`, a
//! port of Go's `sumdb/tlog`. Leaf `n` is the event with sequence number `n + 1`. Its data is
//! that event's chain hash (32 bytes), which commits to the event as stored and to every event
//! before it.
//!
//! The tree's stored hashes use `tlog_tiles::stored_hash_index`'s layout, about two per event,
//! and are rows of the store. [`grow`] computes the rows for the events after a size.
//! [`inclusion`] and [`consistency`] read the rows and prove from them. [`root_of`] is the
//! offline verifier's tree over leaves held in memory.
//!
//! `tlog_tiles` reads hashes through a synchronous `HashReader`, and each of its functions
//! asks for what it needs in one call. [`Known`] answers from the hashes read so far and
//! records what it lacks. [`with_hashes`] then reads those from the store and runs the
//! function again.

use std::cell::RefCell;
use std::collections::HashMap;

use tlog_tiles::{Hash, HashReader};

use crate::store::Store;

/// Why the tree could not be grown, read or proved from.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error(transparent)]
    Store(#[from] crate::store::Error),
    /// A stored hash the tree needs is not in the store.
    #[error("the audit tree lacks stored hashes {0:?}")]
    Missing(Vec<u64>),
    #[error("stored hash {0} is not a 32-byte hex hash")]
    Corrupt(String),
    /// The events after the tree's size are not the next ones in order.
    #[error("the audit trail has a gap: expected event {expected}, found {found}")]
    Gap { expected: u64, found: i64 },
    #[error("{0}")]
    Proof(#[from] tlog_tiles::Error),
}

/// A hash from its hex form.
pub fn parse_hash(hex_text: &str) -> Option<Hash> {
    let bytes: [u8; 32] = hex::decode(hex_text).ok()?.try_into().ok()?;
    Some(Hash(bytes))
}

/// The leaf hash of an event whose chain hash is `chain_hash` (hex).
pub fn leaf_hash(chain_hash: &str) -> Option<Hash> {
    let bytes = hex::decode(chain_hash).ok()?;
    (bytes.len() == 32).then(|| tlog_tiles::record_hash(&bytes))
}

/// The hashes read so far, and those last asked for that were not there.
#[derive(Default)]
struct Known {
    hashes: HashMap<u64, Hash>,
    missing: RefCell<Vec<u64>>,
}

impl HashReader for Known {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        let missing: Vec<u64> = indexes
            .iter()
            .filter(|i| !self.hashes.contains_key(i))
            .copied()
            .collect();
        if !missing.is_empty() {
            *self.missing.borrow_mut() = missing;
            return Err(tlog_tiles::Error::IndexesNotInTree);
        }
        Ok(indexes.iter().map(|i| self.hashes[i]).collect())
    }
}

/// Runs `f` over the stored hashes. It runs again after whatever it asked for that `known`
/// lacked has been read from the store.
async fn with_hashes<T>(
    store: &Store,
    known: &mut Known,
    f: impl Fn(&Known) -> Result<T, tlog_tiles::Error>,
) -> Result<T, TreeError> {
    loop {
        match f(known) {
            Err(tlog_tiles::Error::IndexesNotInTree) if !known.missing.borrow().is_empty() => {
                let missing = std::mem::take(&mut *known.missing.borrow_mut());
                let found = store.audit_tree_hashes(&missing).await?;
                if found.len() != missing.len() {
                    return Err(TreeError::Missing(missing));
                }
                for (idx, hex_text) in found {
                    let h = parse_hash(&hex_text).ok_or(TreeError::Corrupt(hex_text))?;
                    known.hashes.insert(idx, h);
                }
            }
            other => return other.map_err(TreeError::from),
        }
    }
}

/// The tree grown by some events: the stored hashes they add, its new size and root.
#[derive(Debug)]
pub struct Grown {
    pub hashes: Vec<(u64, Hash)>,
    pub size: u64,
    pub root: Hash,
}

/// Grows the tree of `size` leaves by `leaves` (`(seq, chain hash hex)`, the events from
/// sequence number `size + 1` on, in order).
pub async fn grow(store: &Store, size: u64, leaves: &[(i64, String)]) -> Result<Grown, TreeError> {
    let mut known = Known::default();
    let mut added = Vec::new();
    for (i, (seq, chain_hash)) in leaves.iter().enumerate() {
        let n = size + i as u64;
        if *seq != n as i64 + 1 {
            return Err(TreeError::Gap {
                expected: n + 1,
                found: *seq,
            });
        }
        let data = hex::decode(chain_hash).map_err(|_| TreeError::Corrupt(chain_hash.clone()))?;
        let hashes = with_hashes(store, &mut known, |r| {
            tlog_tiles::stored_hashes(n, &data, r)
        })
        .await?;
        let first = tlog_tiles::stored_hash_index(0, n);
        for (k, h) in hashes.into_iter().enumerate() {
            known.hashes.insert(first + k as u64, h);
            added.push((first + k as u64, h));
        }
    }
    let grown = size + leaves.len() as u64;
    let root = with_hashes(store, &mut known, |r| tlog_tiles::tree_hash(grown, r)).await?;
    Ok(Grown {
        hashes: added,
        size: grown,
        root,
    })
}

/// The proof that the tree of `size` leaves holds leaf `n`.
pub async fn inclusion(store: &Store, size: u64, n: u64) -> Result<Vec<Hash>, TreeError> {
    let mut known = Known::default();
    with_hashes(store, &mut known, |r| tlog_tiles::prove_record(size, n, r)).await
}

/// The proof that the tree of `size` leaves holds the tree of `old` leaves as its prefix.
pub async fn consistency(store: &Store, size: u64, old: u64) -> Result<Vec<Hash>, TreeError> {
    let mut known = Known::default();
    with_hashes(store, &mut known, |r| tlog_tiles::prove_tree(size, old, r)).await
}

/// The stored hashes of a tree held in memory, by index.
struct InMemory(Vec<Hash>);

impl HashReader for InMemory {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        indexes
            .iter()
            .map(|i| self.0.get(*i as usize).copied())
            .collect::<Option<Vec<Hash>>>()
            .ok_or(tlog_tiles::Error::IndexesNotInTree)
    }
}

/// The root of the tree over `chain_hashes` (32 bytes each, the leaves' data in order), held
/// in memory: what an offline verifier compares with a checkpoint.
pub fn root_of(chain_hashes: impl IntoIterator<Item = [u8; 32]>) -> Result<(u64, Hash), TreeError> {
    let mut tree = InMemory(Vec::new());
    let mut n = 0u64;
    for data in chain_hashes {
        let hashes = tlog_tiles::stored_hashes(n, &data, &tree)?;
        tree.0.extend(hashes);
        n += 1;
    }
    Ok((n, tlog_tiles::tree_hash(n, &tree)?))
}
