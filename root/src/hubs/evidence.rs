//! Evidence a hub publishes: its ProfileOps records (sessions, incidents, artifact records
//! and small artifacts), kept at root so the profiler reads answer while the hub is offline
//! (`call::executors::evidence`).
//!
//! A hub that announces the `evidence` feature is told in `welcome` how far root holds its
//! evidence log, and sends `evidence` batches of what changed after that. Root takes a batch
//! only when it continues what root holds (or starts the log afresh, `after` 0), so a batch
//! lost with a connection, or one root failed to store, is sent again from root's position on
//! the next connection and never skipped. Every record is checked before it is kept: its id,
//! its service, its shape against the contract of the read that serves it, and an artifact's
//! bytes against their recorded size and SHA-256 (bytes that do not match are not kept; the
//! record is).

use mcp_shared::profiling::{EVIDENCE_CONTENT_MAX_BYTES, EvidenceCursor, EvidenceRecord};
use mcp_shared::protocol::Evidence;
use mcp_shared::time::{now, unix_ms};
use sha2::{Digest, Sha256};

use crate::catalog::ContractRegistry;
use crate::store::{EvidenceBatch, EvidenceCursorRow, EvidenceRow, Store};

/// The shape each kind must have: the items of the list read whose contract names this
/// offline adapter (the read root serves the records with).
const SHAPES: &[(&str, &str, &str)] = &[
    (
        "session",
        "root.evidence.list_sessions",
        "/properties/sessions/items",
    ),
    (
        "incident",
        "root.evidence.list_incidents",
        "/properties/incidents/items",
    ),
    (
        "artifact",
        "root.evidence.list_artifacts",
        "/properties/artifacts/items",
    ),
];

/// What became of one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// Stored: its records, and those refused (by reason).
    Stored { kept: usize, refused: Vec<String> },
    /// Not stored: it does not continue what root holds (root's position is older or newer).
    Gap {
        held: Option<(String, i64)>,
        after: u64,
    },
    /// Not stored: the store failed (nothing more is taken on this connection).
    Failed(String),
}

/// One hub connection's evidence intake.
pub struct Intake {
    store: Store,
    target_id: String,
    held: Option<EvidenceCursorRow>,
    shapes: Vec<(&'static str, jsonschema::Validator)>,
    failed: bool,
}

impl Intake {
    /// Reads how far root holds `target_id`'s evidence; what `welcome` tells the hub.
    pub async fn open(
        store: Store,
        target_id: &str,
        contracts: &ContractRegistry,
    ) -> Result<(Intake, EvidenceCursor), crate::store::Error> {
        let held = store.evidence_cursor(target_id).await?;
        let cursor = held
            .as_ref()
            .map(|h| EvidenceCursor {
                epoch: h.epoch.clone(),
                seq: u64::try_from(h.seq).unwrap_or(0),
            })
            .unwrap_or_default();
        let shapes = SHAPES
            .iter()
            .filter_map(|(kind, adapter, pointer)| {
                let read = contracts
                    .all()
                    .iter()
                    .find(|c| c.contract.offline.as_deref() == Some(*adapter))?;
                let schema = read.contract.output_schema.pointer(pointer)?;
                jsonschema::validator_for(schema).ok().map(|v| (*kind, v))
            })
            .collect();
        let intake = Intake {
            store,
            target_id: target_id.to_owned(),
            held,
            shapes,
            failed: false,
        };
        Ok((intake, cursor))
    }

    /// The target whose evidence this is.
    pub fn target_id(&self) -> &str {
        &self.target_id
    }

    /// Stores `batch` when it continues what root holds.
    pub async fn take(&mut self, batch: Evidence) -> Taken {
        if self.failed {
            return Taken::Failed("an earlier batch of this connection was not stored".into());
        }
        let continues = batch.after == 0
            || self.held.as_ref().is_some_and(|h| {
                h.epoch == batch.epoch && u64::try_from(h.seq).ok() == Some(batch.after)
            });
        if !continues
            || batch.epoch.is_empty()
            || batch.epoch.len() > 64
            || batch.upto < batch.after
        {
            return Taken::Gap {
                held: self.held.as_ref().map(|h| (h.epoch.clone(), h.seq)),
                after: batch.after,
            };
        }
        let mut refused = Vec::new();
        let rows: Vec<EvidenceRow> = batch
            .records
            .into_iter()
            .filter_map(|r| match self.row(r) {
                Ok(row) => Some(row),
                Err(why) => {
                    refused.push(why);
                    None
                }
            })
            .collect();
        let kept = rows.len();
        let now_ms = unix_ms(now());
        let upto = i64::try_from(batch.upto).unwrap_or(i64::MAX);
        let stored = self
            .store
            .put_evidence(&EvidenceBatch {
                target_id: &self.target_id,
                epoch: &batch.epoch,
                upto,
                rows,
                now_ms,
            })
            .await;
        match stored {
            Ok(()) => {
                self.held = Some(EvidenceCursorRow {
                    epoch: batch.epoch,
                    seq: upto,
                    synced_at_ms: now_ms,
                });
                Taken::Stored { kept, refused }
            }
            Err(e) => {
                self.failed = true;
                Taken::Failed(e.to_string())
            }
        }
    }

    /// At the connection's end: root's copy was complete until now when every batch was
    /// stored (the hub sends each change as it happens).
    pub async fn close(&self) {
        if self.failed || self.held.is_none() {
            return;
        }
        if let Err(e) = self
            .store
            .evidence_synced(&self.target_id, unix_ms(now()))
            .await
        {
            tracing::warn!(target_id = %self.target_id, error = %e, "cannot record when the evidence was last complete");
        }
    }

    /// The row a record is kept as, or why it is refused.
    fn row(&self, record: EvidenceRecord) -> Result<EvidenceRow, String> {
        let (kind, id, service) = (record.kind(), record.id().to_owned(), record.service());
        if uuid::Uuid::parse_str(&id).is_err() {
            return Err(format!("{kind} id `{}` is not a UUID", bounded(&id)));
        }
        let service = service.to_owned();
        let (value, content) = match record {
            EvidenceRecord::Artifact { meta, content } => {
                let content = content.filter(|c| self.intact(&meta, c));
                (serde_json::to_value(&meta), content)
            }
            EvidenceRecord::Session(s) => (serde_json::to_value(&s), None),
            EvidenceRecord::Incident(i) => (serde_json::to_value(&i), None),
        };
        let value = value.map_err(|e| format!("{kind} `{id}` cannot be encoded: {e}"))?;
        if let Some((_, shape)) = self.shapes.iter().find(|(k, _)| *k == kind)
            && let Some(error) = shape.iter_errors(&value).next()
        {
            return Err(format!(
                "{kind} `{id}` does not have the shape its read serves: {error} at {}",
                error.instance_path()
            ));
        }
        Ok(EvidenceRow {
            kind: kind.to_owned(),
            item_id: id,
            service,
            record: value,
            content,
            received_at_ms: 0,
        })
    }

    /// Whether an artifact's bytes are what its record says (size and SHA-256) and small
    /// enough to keep.
    fn intact(&self, meta: &mcp_shared::profiling::ArtifactMeta, content: &str) -> bool {
        let ok = content.len() as u64 == meta.size_bytes
            && meta.size_bytes <= EVIDENCE_CONTENT_MAX_BYTES
            && hex::encode(Sha256::digest(content.as_bytes())) == meta.sha256;
        if !ok {
            tracing::warn!(target_id = %self.target_id, artifact = %meta.artifact_id, "artifact bytes do not match their record (size or SHA-256) or are too large; keeping the record only");
        }
        ok
    }
}

fn bounded(s: &str) -> String {
    s.chars().take(64).collect()
}
