//! The evidence log: which change of each ProfileOps record root has yet to hear of.
//!
//! Every change to the index (a session started, finished or published, an incident raised,
//! an artifact stored) gives the records it touched the next position of the log; the hub's
//! channel sends root the records changed after the position root holds (`welcome.evidence`),
//! in `evidence` frames, and from then on what changes as it changes. The log lives in the
//! index file, so positions survive a hub restart; a log without an epoch (a new state
//! directory, or an index of an earlier build) starts a new epoch with every record marked,
//! and root takes the whole of it again.

use std::collections::{BTreeMap, HashMap};

use mcp_shared::profiling::{ArtifactKind, EVIDENCE_CONTENT_MAX_BYTES, EvidenceRecord};
use serde::{Deserialize, Serialize};

use super::store::Index;

/// The log's state in the index.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct EvidenceLog {
    /// A new one whenever the log starts afresh (root then takes everything again).
    pub(super) epoch: String,
    /// The position of the latest change.
    pub(super) seq: u64,
    /// Each record's latest change, by `<kind>:<id>`.
    pub(super) marks: BTreeMap<String, u64>,
}

fn key(kind: &str, id: &str) -> String {
    format!("{kind}:{id}")
}

/// Every record of `index`, by key.
fn records(index: &Index) -> HashMap<String, EvidenceRecord> {
    let sessions = index
        .sessions
        .iter()
        .map(|s| EvidenceRecord::Session(s.clone()));
    let incidents = index
        .incidents
        .iter()
        .map(|i| EvidenceRecord::Incident(i.clone()));
    let artifacts = index.artifacts.iter().map(|a| EvidenceRecord::Artifact {
        meta: a.clone(),
        content: None,
    });
    sessions
        .chain(incidents)
        .chain(artifacts)
        .map(|r| (key(r.kind(), r.id()), r))
        .collect()
}

impl EvidenceLog {
    /// Starts a new epoch with every record of `index` marked (an index without a log).
    pub(super) fn start(index: &mut Index) {
        let mut log = EvidenceLog {
            epoch: uuid::Uuid::now_v7().to_string(),
            ..EvidenceLog::default()
        };
        let mut keys: Vec<String> = records(index).into_keys().collect();
        keys.sort();
        for k in keys {
            log.seq += 1;
            log.marks.insert(k, log.seq);
        }
        index.evidence = log;
    }

    /// Marks in `next` the records that `before` did not have or had otherwise, and forgets
    /// the records `next` no longer has (root keeps what it was sent).
    pub(super) fn mark(before: &Index, next: &mut Index) {
        let old = records(before);
        let now = records(next);
        let mut changed: Vec<&String> = now
            .iter()
            .filter(|(k, r)| old.get(*k) != Some(r))
            .map(|(k, _)| k)
            .collect();
        changed.sort();
        let log = &mut next.evidence;
        for k in changed {
            log.seq += 1;
            log.marks.insert(k.clone(), log.seq);
        }
        log.marks.retain(|k, _| now.contains_key(k));
    }
}

/// A record changed after some position, at its own position; an artifact's file to read
/// when it is small enough to go with it.
pub(crate) struct Change {
    pub seq: u64,
    pub record: EvidenceRecord,
    pub(super) content_of: Option<std::path::PathBuf>,
}

/// The records of `index` changed after `after`, in log order.
pub(super) fn changes_after(
    index: &Index,
    after: u64,
    artifact_path: impl Fn(&str) -> std::path::PathBuf,
    content_max: u64,
) -> Vec<Change> {
    let mut all = records(index);
    let mut out: Vec<Change> = index
        .evidence
        .marks
        .iter()
        .filter(|(_, seq)| **seq > after)
        .filter_map(|(k, seq)| {
            let record = all.remove(k)?;
            let content_of = match &record {
                // Root keeps JSON artifacts; heap snapshots (binary) stay on the hub.
                EvidenceRecord::Artifact { meta, .. }
                    if meta.kind == ArtifactKind::Samples
                        && meta.size_bytes <= content_max.min(EVIDENCE_CONTENT_MAX_BYTES) =>
                {
                    Some(artifact_path(&meta.artifact_id))
                }
                _ => None,
            };
            Some(Change {
                seq: *seq,
                record,
                content_of,
            })
        })
        .collect();
    out.sort_by_key(|c| c.seq);
    out
}

impl Change {
    /// Reads the artifact's bytes into the record, when it goes with them (an unreadable or
    /// non-UTF-8 file goes without: root then answers that the artifact is on the hub).
    pub(super) fn load(mut self) -> Change {
        if let (Some(path), EvidenceRecord::Artifact { content, .. }) =
            (&self.content_of, &mut self.record)
        {
            match std::fs::read(path).map(String::from_utf8) {
                Ok(Ok(text)) => *content = Some(text),
                Ok(Err(_)) => {
                    tracing::warn!(path = %path.display(), "artifact is not UTF-8; sent without it")
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "artifact unreadable; sent without it")
                }
            }
        }
        self
    }
}

/// Largest `evidence` frame the hub builds, in bytes of its records (well inside the
/// protocol's 1 MiB frame, with room for an artifact of [`EVIDENCE_CONTENT_MAX_BYTES`] and
/// its escaping).
const FRAME_BUDGET: usize = 640 * 1024;
/// Most records in one frame.
const FRAME_RECORDS: usize = 256;

/// `changes` (in log order, all after `after`) as `evidence` frames of at most
/// [`FRAME_BUDGET`] bytes each, every frame continuing from the one before.
pub(crate) fn frames(
    epoch: &str,
    mut after: u64,
    changes: Vec<Change>,
) -> Vec<mcp_shared::protocol::Evidence> {
    let mut out = Vec::new();
    let mut records = Vec::new();
    let (mut bytes, mut upto) = (0usize, after);
    for change in changes {
        let size = serde_json::to_string(&change.record).map_or(0, |s| s.len());
        if !records.is_empty() && (bytes + size > FRAME_BUDGET || records.len() >= FRAME_RECORDS) {
            out.push(mcp_shared::protocol::Evidence {
                epoch: epoch.to_owned(),
                after,
                upto,
                records: std::mem::take(&mut records),
            });
            (after, bytes) = (upto, 0);
        }
        bytes += size;
        upto = change.seq;
        records.push(change.record);
    }
    if !records.is_empty() {
        out.push(mcp_shared::protocol::Evidence {
            epoch: epoch.to_owned(),
            after,
            upto,
            records,
        });
    }
    out
}
