//! Witnesses (C2SP `tlog-witness`, `tlog-cosignature`): parties outside the zone that cosign
//! its checkpoints after checking each is consistent with the last they saw, so a history
//! rewritten after a witness cosigned is refused by that witness, and a checkpoint carrying
//! its cosignature was seen by someone else.
//!
//! Root plays both parts:
//! - as a **log**, [`submit`] sends each new checkpoint, with the consistency proof from the
//!   size a witness last cosigned, to every `[[audit.witnesses]]` entry, checks the returned
//!   cosignature against that witness's key and stores it; checkpoints are served with their
//!   cosignatures;
//! - as a **witness** ([`Witness`]), it cosigns the checkpoints of the logs in `[witness]
//!   logs` (another zone's root) at `POST /v1/root/witness/add-checkpoint`, with its own key
//!   ([`cosign::Cosigner`], derived from its master key).

pub mod cosign;
pub mod submit;

use base64::Engine;
use signed_note::{Note, StandardVerifier, Verifier, VerifierList};
use tlog_tiles::{Checkpoint, Hash};

use crate::store::Store;
use cosign::Cosigner;

/// Most consistency proof lines a request may carry (the protocol's limit).
const MAX_PROOF_LINES: usize = 63;
/// Where root serves the witness protocol's submissions (under the witness's prefix
/// `/v1/root/witness`).
pub const ADD_CHECKPOINT: &str = "/v1/root/witness/add-checkpoint";

/// Most bytes of an `add-checkpoint` request.
pub const MAX_REQUEST: usize = 64 * 1024;

/// Why a checkpoint was not cosigned; each maps to the protocol's status code
/// ([`WitnessError::status`]).
#[derive(Debug, thiserror::Error)]
pub enum WitnessError {
    #[error("malformed add-checkpoint request: {0}")]
    BadRequest(String),
    #[error("this witness does not witness log `{0}`")]
    UnknownLog(String),
    #[error("no signature of a key this witness trusts for `{0}` verifies")]
    Forbidden(String),
    #[error("the latest checkpoint this witness cosigned of this log has size {0}")]
    Conflict(u64),
    #[error("the consistency proof from size {old} to {size} does not verify")]
    Inconsistent { old: u64, size: u64 },
    #[error("the witness's store: {0}")]
    Store(#[from] crate::store::Error),
    #[error("cosigning: {0}")]
    Sign(String),
}

impl WitnessError {
    /// The HTTP status the protocol gives this refusal.
    pub fn status(&self) -> u16 {
        match self {
            WitnessError::BadRequest(_) => 400,
            WitnessError::Forbidden(_) => 403,
            WitnessError::UnknownLog(_) => 404,
            WitnessError::Conflict(_) => 409,
            WitnessError::Inconsistent { .. } => 422,
            WitnessError::Store(_) | WitnessError::Sign(_) => 500,
        }
    }
}

/// An `add-checkpoint` request: the old size, the consistency proof, the checkpoint's note.
struct Request<'a> {
    old: u64,
    proof: Vec<Hash>,
    note: &'a [u8],
}

fn parse(body: &[u8]) -> Result<Request<'_>, WitnessError> {
    let bad = |why: &str| WitnessError::BadRequest(why.to_owned());
    let mut rest = body;
    let mut line = || -> Result<&[u8], WitnessError> {
        let end = rest
            .iter()
            .position(|b| *b == b'\n')
            .ok_or_else(|| bad("a line does not end in a newline"))?;
        let l = &rest[..end];
        rest = &rest[end + 1..];
        Ok(l)
    };
    let old = line()?
        .strip_prefix(b"old ")
        .and_then(|n| std::str::from_utf8(n).ok())
        .filter(|n| *n == "0" || !n.starts_with('0'))
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| bad("the first line is not `old <size>`"))?;
    let mut proof = Vec::new();
    loop {
        let l = line()?;
        if l.is_empty() {
            break;
        }
        if proof.len() == MAX_PROOF_LINES {
            return Err(bad("more than 63 consistency proof lines"));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(l)
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or_else(|| bad("a consistency proof line is not a base64 hash"))?;
        proof.push(Hash(bytes));
    }
    Ok(Request {
        old,
        proof,
        note: rest,
    })
}

/// Root as a witness of the logs it is configured with.
pub struct Witness {
    cosigner: Cosigner,
    /// Each witnessed log's verifier keys, by origin.
    logs: std::collections::HashMap<String, Vec<String>>,
}

impl Witness {
    /// A witness cosigning with `cosigner` the logs whose verifier keys are `logs` (each
    /// key's name is its log's origin; keys that do not parse were refused by the
    /// configuration's validation and are skipped).
    pub fn new(cosigner: Cosigner, logs: &[String]) -> Witness {
        let mut by_origin: std::collections::HashMap<String, Vec<String>> = Default::default();
        for key in logs {
            if let Ok(v) = StandardVerifier::new(key) {
                by_origin
                    .entry(v.name().to_owned())
                    .or_default()
                    .push(key.clone());
            }
        }
        Witness {
            cosigner,
            logs: by_origin,
        }
    }

    pub fn cosigner(&self) -> &Cosigner {
        &self.cosigner
    }

    /// The logs witnessed (their origins).
    pub fn origins(&self) -> impl Iterator<Item = &str> {
        self.logs.keys().map(String::as_str)
    }

    /// Handles `add-checkpoint` (C2SP `tlog-witness`): verifies the checkpoint's signature
    /// against the log's keys and its consistency with the latest this witness cosigned,
    /// records it, and answers the cosignature line.
    pub async fn add_checkpoint(&self, store: &Store, body: &[u8]) -> Result<String, WitnessError> {
        let req = parse(body)?;
        let note = Note::from_bytes(req.note).map_err(|e| {
            WitnessError::BadRequest(format!("the checkpoint is not a signed note: {e}"))
        })?;
        let cp = Checkpoint::from_bytes(note.text())
            .map_err(|_| WitnessError::BadRequest("the note is not a checkpoint".to_owned()))?;
        let origin = cp.origin().to_owned();
        let keys = self
            .logs
            .get(&origin)
            .ok_or_else(|| WitnessError::UnknownLog(origin.clone()))?;
        {
            // Verifiers are not Send: checked before any await.
            let known = VerifierList::new(
                keys.iter()
                    .filter_map(|k| StandardVerifier::new(k).ok())
                    .map(|v| Box::new(v) as Box<dyn Verifier>)
                    .collect(),
            );
            note.verify(&known)
                .map_err(|_| WitnessError::Forbidden(origin.clone()))?;
        }
        let size = cp.size();
        if req.old > size {
            return Err(WitnessError::BadRequest(format!(
                "old size {} is past the checkpoint's size {size}",
                req.old
            )));
        }
        let latest = store.witnessed(&origin).await?;
        let (latest_size, latest_root) = latest.clone().unwrap_or((0, String::new()));
        if req.old != latest_size {
            return Err(WitnessError::Conflict(latest_size));
        }
        let root_hex = hex::encode(cp.hash().0);
        if req.old == size {
            if latest.is_some() && latest_root != root_hex {
                return Err(WitnessError::Conflict(latest_size));
            }
        } else if req.old == 0 {
            if !req.proof.is_empty() {
                return Err(WitnessError::BadRequest(
                    "a request from old size 0 carries no proof".to_owned(),
                ));
            }
        } else {
            let old_root = crate::audit::tree::parse_hash(&latest_root)
                .ok_or_else(|| WitnessError::Sign("a stored root hash is not a hash".to_owned()))?;
            tlog_tiles::check_tree(&req.proof, size, *cp.hash(), req.old, old_root)
                .map_err(|_| WitnessError::Inconsistent { old: req.old, size })?;
        }
        if req.old != size {
            let text = String::from_utf8_lossy(req.note);
            let now = mcp_shared::time::unix_ms(mcp_shared::time::now());
            if !store
                .advance_witnessed(&origin, req.old, size, &root_hex, &text, now)
                .await?
            {
                let now_at = store.witnessed(&origin).await?.map_or(0, |(s, _)| s);
                return Err(WitnessError::Conflict(now_at));
            }
        }
        self.cosign(note.text())
    }

    /// The cosignature line of checkpoint body `text`.
    fn cosign(&self, text: &[u8]) -> Result<String, WitnessError> {
        let mut bare = Note::new(text, &[]).map_err(|e| WitnessError::Sign(e.to_string()))?;
        bare.add_sigs(&[&self.cosigner])
            .map_err(|e| WitnessError::Sign(e.to_string()))?;
        let signed = bare.to_bytes();
        let lines = &signed[text.len() + 1..];
        String::from_utf8(lines.to_vec()).map_err(|e| WitnessError::Sign(e.to_string()))
    }
}
