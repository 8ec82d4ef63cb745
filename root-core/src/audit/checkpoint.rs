//! Signed checkpoints of the audit trail. A checkpoint is the C2SP `tlog-checkpoint` (origin,
//! tree size, root hash) of the trail's Merkle tree (`audit::tree`), in a C2SP signed note
//! (`tlog_tiles`, `signed_note`). It is signed with the zone's log key, an Ed25519 key derived
//! from root's master key. Every replica of a zone therefore signs with the same key, and
//! writes the same note for the same size. The key's verifier form (`<origin>+<id>+<base64>`)
//! is what auditors keep: `mcp-root admin audit key` prints it, `/v1/root/mcp/audit/key`
//! serves it.
//!
//! [`run`] signs a checkpoint once `every_events` events are past the last one, or `every_sec`
//! after the last when any event is. It grows the tree by the events since, signs, and stores
//! the hashes and the checkpoint in one transaction. It covers only flushed events
//! ([`Flushed::bound`]): a power loss never leaves a signed checkpoint over an event the trail
//! no longer has. On PostgreSQL, a replica that finds a
//! checkpoint of that size stored already writes nothing.

use std::time::Duration;

use signed_note::{Note, StandardVerifier, VerifierList};
use tlog_tiles::{Checkpoint, Hash};

use super::flusher::Flushed;
use super::tree::{self, TreeError};
use super::witness::cosign::key_name;
use crate::secrets::MasterKey;
use crate::store::{CheckpointRow, Store};

/// Most events one checkpoint adds to the tree (a long backlog is signed in steps).
const MAX_GROWTH: u64 = 100_000;
/// Chain hashes read per page while growing the tree.
const PAGE: i64 = 10_000;
/// Purpose of the log key's derivation from the master key.
const KEY_PURPOSE: &str = "audit checkpoint ed25519 v1";

/// Why a checkpoint could not be signed, read or trusted.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error(transparent)]
    Tree(#[from] TreeError),
    #[error(transparent)]
    Store(#[from] crate::store::Error),
    #[error("the verifier key is malformed: {0}")]
    Key(String),
    #[error("the checkpoint is not a signed note: {0}")]
    Note(String),
    #[error("the checkpoint's signature does not verify with key `{key}`: {why}")]
    Signature { key: String, why: String },
    #[error("the signed note is not a checkpoint (origin, tree size, root hash)")]
    Malformed,
    #[error("the checkpoint is of log `{found}`, not `{expected}`")]
    Origin { expected: String, found: String },
}

/// The zone's log key.
pub struct LogKey {
    origin: String,
    signer: signed_note::StandardSigner,
    verifier_key: String,
}

impl std::fmt::Debug for LogKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LogKey({})", self.verifier_key)
    }
}

/// The log's origin for zone `zone`: `root-mcp/<zone>`.
pub fn origin(zone: &str) -> String {
    key_name("root-mcp", zone)
}

impl LogKey {
    /// The log key of `zone`, derived from `master`.
    pub fn derive(master: &MasterKey, zone: &str) -> LogKey {
        use base64::Engine;
        let origin = origin(zone);
        let seed = master.derive_key(KEY_PURPOSE);
        let signing = ed25519_dalek::SigningKey::from_bytes(&seed);
        let verifier_key = signed_note::new_ed25519_verifier_key(&origin, &signing.verifying_key());
        let public = [&[1u8][..], signing.verifying_key().as_bytes()].concat();
        let private = [&[1u8][..], &seed[..]].concat();
        let encoded = format!(
            "PRIVATE+KEY+{origin}+{:08x}+{}",
            signed_note::key_id(&origin, &public),
            base64::engine::general_purpose::STANDARD.encode(private)
        );
        let signer = signed_note::StandardSigner::new(&encoded)
            .expect("a signer key built from its own parts");
        LogKey {
            origin,
            signer,
            verifier_key,
        }
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The key in the signed-note verifier form auditors keep.
    pub fn verifier_key(&self) -> &str {
        &self.verifier_key
    }

    /// The signed note of the checkpoint of a tree of `size` leaves with root `root`.
    pub fn sign(&self, size: u64, root: Hash) -> String {
        let checkpoint =
            Checkpoint::new(&self.origin, size, root, "").expect("an origin that is not empty");
        let mut note =
            Note::new(&checkpoint.to_bytes(), &[]).expect("a checkpoint is a well-formed note");
        note.add_sigs(&[&self.signer])
            .expect("the origin is a valid key name");
        String::from_utf8(note.to_bytes()).expect("a note is UTF-8")
    }
}

/// The checkpoint `note` signs, if its signature verifies with `verifier_key` and it is of
/// that key's log.
pub fn open(note: &str, verifier_key: &str) -> Result<Checkpoint, CheckpointError> {
    let verifier =
        StandardVerifier::new(verifier_key).map_err(|e| CheckpointError::Key(e.to_string()))?;
    let name = signed_note::Verifier::name(&verifier).to_owned();
    let parsed =
        Note::from_bytes(note.as_bytes()).map_err(|e| CheckpointError::Note(e.to_string()))?;
    parsed
        .verify(&VerifierList::new(vec![Box::new(verifier)]))
        .map_err(|e| CheckpointError::Signature {
            key: name.clone(),
            why: e.to_string(),
        })?;
    let checkpoint =
        Checkpoint::from_bytes(parsed.text()).map_err(|_| CheckpointError::Malformed)?;
    if checkpoint.origin() != name {
        return Err(CheckpointError::Origin {
            expected: name,
            found: checkpoint.origin().to_owned(),
        });
    }
    Ok(checkpoint)
}

/// Signs the next checkpoint, over at most [`MAX_GROWTH`] flushed events past the last one;
/// `None` when no flushed event is past it (or another replica stored this size first).
pub async fn sign_next(
    store: &Store,
    flushed: &Flushed,
    key: &LogKey,
) -> Result<Option<CheckpointRow>, CheckpointError> {
    let size = store
        .audit_checkpoints(1)
        .await?
        .first()
        .map_or(0, |c| c.tree_size);
    let head = flushed_head(store, flushed).await?;
    if head <= size {
        return Ok(None);
    }
    let until = head.min(size + MAX_GROWTH);
    let mut leaves = Vec::with_capacity((until - size) as usize);
    while (leaves.len() as u64) < until - size {
        let from = (size + leaves.len() as u64 + 1) as i64;
        let want = PAGE.min((until - size) as i64 - leaves.len() as i64);
        let page = store.audit_chain_hashes(from, want).await?;
        if page.is_empty() {
            break;
        }
        leaves.extend(page);
    }
    let grown = tree::grow(store, size, &leaves).await?;
    let row = CheckpointRow {
        tree_size: grown.size,
        root_hash: hex::encode(grown.root.0),
        note: key.sign(grown.size, grown.root),
        created_at_ms: mcp_shared::time::unix_ms(mcp_shared::time::now()),
    };
    let hashes: Vec<(u64, String)> = grown
        .hashes
        .iter()
        .map(|(i, h)| (*i, hex::encode(h.0)))
        .collect();
    Ok(store
        .put_audit_checkpoint(&hashes, &row)
        .await?
        .then_some(row))
}

/// The newest `seq` of the trail that is on disk (see [`Flushed::bound`]).
async fn flushed_head(store: &Store, flushed: &Flushed) -> Result<u64, crate::store::Error> {
    let head = store.audit_head().await?.map_or(0, |(seq, _)| seq);
    Ok(flushed.bound(head).max(0) as u64)
}

/// Signs checkpoints as the configuration says until `stop` (see the module's header).
pub async fn run(
    store: Store,
    flushed: std::sync::Arc<Flushed>,
    key: std::sync::Arc<LogKey>,
    every_events: u64,
    every: Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut last = tokio::time::Instant::now();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(1).min(every)) => {}
        }
        let due = match (
            flushed_head(&store, &flushed).await,
            store.audit_checkpoints(1).await,
        ) {
            (Ok(head), Ok(cps)) => {
                let size = cps.first().map_or(0, |c| c.tree_size);
                head > size && (head - size >= every_events || last.elapsed() >= every)
            }
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "cannot read the audit trail's head for a checkpoint");
                false
            }
        };
        if !due {
            continue;
        }
        match sign_next(&store, &flushed, &key).await {
            Ok(Some(cp)) => {
                tracing::debug!(size = cp.tree_size, "audit checkpoint signed");
                last = tokio::time::Instant::now();
            }
            Ok(None) => last = tokio::time::Instant::now(),
            Err(e) => tracing::error!(error = %e, "cannot sign an audit checkpoint"),
        }
    }
}
