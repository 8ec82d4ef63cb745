//! The log's side of witnessing: each `[[audit.witnesses]]` entry is sent the newest
//! checkpoint it has not cosigned (`POST <url>/add-checkpoint`, with the consistency proof from
//! the size it last cosigned), its answer is checked against its key, and the cosignature is
//! stored beside the checkpoint. [`run`] tries once a second per witness that is behind, with
//! backoff after a failure; a new checkpoint signed meanwhile is the one sent next.
//!
//! A witness that answers `409` with a size this zone's checkpoints never reached, or `422`
//! (the proof does not extend what it cosigned), has seen another history of this trail: that
//! is logged as an error, shown with the witness (`/v1/root/mcp/audit/witnesses`, the
//! console) and raised in `/metrics` (`mcp_root_audit_witness_alarm`, alerted on). It is not
//! written into the trail it disputes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use serde::Serialize;
use signed_note::{Note, Verifier, VerifierList};

use super::cosign::{self, CosignatureVerifier};
use crate::audit::tree;
use crate::config::WitnessPeerConfig;
use crate::store::{CheckpointRow, CosignatureRow, Store};

/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The longest wait before trying a failing witness again.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Why a witness did not cosign.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("cannot reach the witness: {0}")]
    Unreachable(String),
    #[error("the witness refused ({status}): {body}")]
    Refused { status: u16, body: String },
    #[error(
        "the witness has cosigned size {witness} of this log, past this zone's newest checkpoint ({ours}): it saw another history"
    )]
    Ahead { witness: u64, ours: u64 },
    #[error(
        "the witness says the trail from size {old} does not extend to {size} (422): it saw another history"
    )]
    Inconsistent { old: u64, size: u64 },
    #[error("the witness's answer holds no valid cosignature of its key: {0}")]
    BadCosignature(String),
    #[error("building the request: {0}")]
    Local(String),
}

impl SubmitError {
    /// Whether the witness has evidence of another history of this trail.
    pub fn is_alarm(&self) -> bool {
        matches!(
            self,
            SubmitError::Ahead { .. } | SubmitError::Inconsistent { .. }
        )
    }
}

/// A configured witness.
pub struct Peer {
    pub name: String,
    pub url: String,
    pub key: String,
    verifier: CosignatureVerifier,
}

/// What this root knows of a witness, as served.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PeerStatus {
    pub name: String,
    pub url: String,
    pub key: String,
    /// The largest checkpoint size it has cosigned.
    pub cosigned_size: u64,
    /// Its last cosignature's timestamp (unix seconds).
    pub cosigned_at: Option<i64>,
    /// Why the last attempt failed, if it did.
    pub last_error: Option<String>,
    /// Whether that failure means the witness saw another history of the trail.
    pub alarm: bool,
}

/// The configured witnesses and their status.
pub struct Board {
    peers: Vec<Peer>,
    status: Mutex<HashMap<String, PeerStatus>>,
}

impl Board {
    /// The witnesses of `cfgs` (keys that do not parse were refused by the configuration's
    /// validation and are skipped).
    pub fn new(cfgs: &[WitnessPeerConfig]) -> Board {
        let peers: Vec<Peer> = cfgs
            .iter()
            .filter_map(|c| {
                let verifier = CosignatureVerifier::new(&c.key).ok()?;
                Some(Peer {
                    name: verifier.name().to_owned(),
                    url: c.url.trim_end_matches('/').to_owned(),
                    key: c.key.clone(),
                    verifier,
                })
            })
            .collect();
        let status = peers
            .iter()
            .map(|p| {
                let s = PeerStatus {
                    name: p.name.clone(),
                    url: p.url.clone(),
                    key: p.key.clone(),
                    ..Default::default()
                };
                (p.name.clone(), s)
            })
            .collect();
        Board {
            peers,
            status: Mutex::new(status),
        }
    }

    /// Each witness's status, in configuration order.
    pub fn status(&self) -> Vec<PeerStatus> {
        let status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        self.peers
            .iter()
            .filter_map(|p| status.get(&p.name).cloned())
            .collect()
    }

    fn update(&self, name: &str, f: impl FnOnce(&mut PeerStatus)) {
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = status.get_mut(name) {
            f(s);
        }
    }
}

/// Sends checkpoint `cp` to `peer`, starting from the size it last cosigned (`old`), and
/// stores its cosignature.
pub async fn submit(
    store: &Store,
    http: &reqwest::Client,
    peer: &Peer,
    mut old: u64,
    cp: &CheckpointRow,
) -> Result<CosignatureRow, SubmitError> {
    let local = |e: &dyn std::fmt::Display| SubmitError::Local(e.to_string());
    for _ in 0..3 {
        if old > cp.tree_size {
            return Err(SubmitError::Ahead {
                witness: old,
                ours: cp.tree_size,
            });
        }
        let proof = if old == 0 || old == cp.tree_size {
            Vec::new()
        } else {
            tree::consistency(store, cp.tree_size, old)
                .await
                .map_err(|e| local(&e))?
        };
        let mut body = format!("old {old}\n");
        for h in &proof {
            body.push_str(&base64::engine::general_purpose::STANDARD.encode(h.0));
            body.push('\n');
        }
        body.push('\n');
        body.push_str(&cp.note);
        let res = http
            .post(format!("{}/add-checkpoint", peer.url))
            .body(body)
            .send()
            .await
            .map_err(|e| SubmitError::Unreachable(e.to_string()))?;
        let status = res.status().as_u16();
        let text = res.text().await.unwrap_or_default();
        match status {
            200 => return cosignature(peer, cp, &text),
            409 => {
                let theirs = text
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| SubmitError::Refused {
                        status,
                        body: text.chars().take(200).collect(),
                    })?;
                if theirs == old {
                    // Same size, another root hash: it cosigned a different tree of this size.
                    return Err(SubmitError::Inconsistent {
                        old,
                        size: cp.tree_size,
                    });
                }
                old = theirs;
            }
            422 => {
                return Err(SubmitError::Inconsistent {
                    old,
                    size: cp.tree_size,
                });
            }
            _ => {
                return Err(SubmitError::Refused {
                    status,
                    body: text.chars().take(200).collect(),
                });
            }
        }
    }
    Err(SubmitError::Refused {
        status: 409,
        body: "the witness's size kept changing".to_owned(),
    })
}

/// The cosignature of `peer` in answer `text` to checkpoint `cp`, verified.
fn cosignature(peer: &Peer, cp: &CheckpointRow, text: &str) -> Result<CosignatureRow, SubmitError> {
    let bad = |why: String| SubmitError::BadCosignature(why);
    if text.is_empty() || !text.ends_with('\n') || !text.starts_with('\u{2014}') {
        return Err(bad("not signature lines".to_owned()));
    }
    let joined = format!("{}{text}", cp.note);
    let note = Note::from_bytes(joined.as_bytes()).map_err(|e| bad(e.to_string()))?;
    let known = VerifierList::new(vec![Box::new(peer.verifier.clone()) as Box<dyn Verifier>]);
    let (verified, _) = note.verify(&known).map_err(|e| bad(e.to_string()))?;
    let sig = verified
        .into_iter()
        .next()
        .ok_or_else(|| bad("none of its key".to_owned()))?;
    let at =
        cosign::timestamp(sig.signature()).ok_or_else(|| bad("not cosignature/v1".to_owned()))?;
    let line = String::from_utf8(sig.to_bytes()).map_err(|e| bad(e.to_string()))?;
    Ok(CosignatureRow {
        tree_size: cp.tree_size,
        witness: peer.name.clone(),
        line: line.trim_end().to_owned(),
        cosigned_at: at as i64,
    })
}

/// Submits checkpoints to the board's witnesses until `stop` (see the module's header).
pub async fn run(
    store: Store,
    board: Arc<Board>,
    metrics: Arc<crate::telemetry::metrics::Metrics>,
    stop: tokio_util::sync::CancellationToken,
) {
    if board.peers.is_empty() {
        return;
    }
    let http = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .unwrap_or_default();
    let mut next_try: HashMap<String, (tokio::time::Instant, Duration)> = HashMap::new();
    for p in &board.peers {
        if let Ok(size) = store.cosigned_size(&p.name).await {
            board.update(&p.name, |s| s.cosigned_size = size);
            metrics.witness(&p.name, size, false);
        }
    }
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        let Ok(Some(latest)) = store
            .audit_checkpoints(1)
            .await
            .map(|v| v.into_iter().next())
        else {
            continue;
        };
        for peer in &board.peers {
            let now = tokio::time::Instant::now();
            let wait = next_try.get(&peer.name).copied();
            if wait.is_some_and(|(at, _)| now < at) {
                continue;
            }
            let old = board
                .status()
                .into_iter()
                .find(|s| s.name == peer.name)
                .map_or(0, |s| s.cosigned_size);
            if old >= latest.tree_size && wait.is_none() {
                continue;
            }
            match submit(&store, &http, peer, old, &latest).await {
                Ok(cosig) => {
                    if let Err(e) = store.put_cosignature(&cosig).await {
                        tracing::warn!(witness = %peer.name, error = %e, "cannot store a cosignature");
                        continue;
                    }
                    tracing::debug!(witness = %peer.name, size = cosig.tree_size, "checkpoint cosigned");
                    board.update(&peer.name, |s| {
                        s.cosigned_size = cosig.tree_size;
                        s.cosigned_at = Some(cosig.cosigned_at);
                        s.last_error = None;
                        s.alarm = false;
                    });
                    metrics.witness(&peer.name, cosig.tree_size, false);
                    next_try.remove(&peer.name);
                }
                Err(e) => {
                    if e.is_alarm() {
                        tracing::error!(witness = %peer.name, error = %e, "a witness refuses this trail's checkpoint");
                    } else {
                        tracing::warn!(witness = %peer.name, error = %e, "checkpoint not cosigned");
                    }
                    board.update(&peer.name, |s| {
                        s.last_error = Some(e.to_string());
                        s.alarm = e.is_alarm();
                    });
                    metrics.witness(&peer.name, old, e.is_alarm());
                    let backoff =
                        wait.map_or(Duration::from_secs(1), |(_, b)| (b * 2).min(MAX_BACKOFF));
                    next_try.insert(peer.name.clone(), (now + backoff, backoff));
                }
            }
        }
    }
}
