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
use std::sync::Arc;

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
#[derive(Debug)]
pub enum Taken {
    /// Stored: its records, and those refused (by reason).
    Stored {
        kept: usize,
        refused: Vec<EvidenceRecordError>,
    },
    /// Not stored: it does not continue what root holds (root's position is older or newer).
    Gap {
        held: Option<(String, i64)>,
        after: u64,
    },
    /// Not stored: the store failed (nothing more is taken on this connection).
    Failed(String),
}

/// Why one evidence record of a batch is refused (the rest of the batch is kept).
#[derive(Debug, thiserror::Error)]
pub enum EvidenceRecordError {
    /// `id` holds at most 64 characters of what the hub sent.
    #[error("{kind} id `{id}` is not a UUID")]
    NotUuid { kind: &'static str, id: String },
    #[error("{kind} `{id}` cannot be encoded: {source}")]
    Encode {
        kind: &'static str,
        id: String,
        source: serde_json::Error,
    },
    /// The first schema error and where in the record it is.
    #[error("{kind} `{id}` does not have the shape its read serves: {error} at {at}")]
    Shape {
        kind: &'static str,
        id: String,
        error: String,
        at: String,
    },
}

/// The shape each evidence kind must have, compiled once per root from the contracts (a
/// connection's intake shares them: a validator per hub would cost each connection more
/// than the rest of its state).
pub struct Shapes(Vec<(&'static str, jsonschema::Validator)>);

impl Shapes {
    /// The shapes of the reads whose contracts name the offline adapters of [`SHAPES`].
    pub fn new(contracts: &ContractRegistry) -> Shapes {
        Shapes(
            SHAPES
                .iter()
                .filter_map(|(kind, adapter, pointer)| {
                    let read = contracts
                        .all()
                        .iter()
                        .find(|c| c.contract.offline.as_deref() == Some(*adapter))?;
                    let schema = read.contract.output_schema.pointer(pointer)?;
                    jsonschema::validator_for(schema).ok().map(|v| (*kind, v))
                })
                .collect(),
        )
    }

    fn of(&self, kind: &str) -> Option<&jsonschema::Validator> {
        self.0.iter().find(|(k, _)| *k == kind).map(|(_, v)| v)
    }
}

/// One hub connection's evidence intake.
pub struct Intake {
    store: Store,
    target_id: String,
    held: Option<EvidenceCursorRow>,
    shapes: Arc<Shapes>,
    failed: bool,
}

impl Intake {
    /// Reads how far root holds `target_id`'s evidence; what `welcome` tells the hub.
    pub async fn open(
        store: Store,
        target_id: &str,
        shapes: Arc<Shapes>,
    ) -> Result<(Intake, EvidenceCursor), crate::store::Error> {
        let held = store.evidence_cursor(target_id).await?;
        let cursor = held
            .as_ref()
            .map(|h| EvidenceCursor {
                epoch: h.epoch.clone(),
                seq: u64::try_from(h.seq).unwrap_or(0),
            })
            .unwrap_or_default();
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
    fn row(&self, record: EvidenceRecord) -> Result<EvidenceRow, EvidenceRecordError> {
        let (kind, id, service) = (record.kind(), record.id().to_owned(), record.service());
        if uuid::Uuid::parse_str(&id).is_err() {
            let id = bounded(&id);
            return Err(EvidenceRecordError::NotUuid { kind, id });
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
        let value = match value {
            Ok(v) => v,
            Err(source) => return Err(EvidenceRecordError::Encode { kind, id, source }),
        };
        if let Some(shape) = self.shapes.of(kind)
            && let Some(error) = shape.iter_errors(&value).next()
        {
            return Err(EvidenceRecordError::Shape {
                kind,
                at: error.instance_path().to_string(),
                error: error.to_string(),
                id,
            });
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

#[cfg(test)]
mod tests {
    use mcp_shared::profiling::{ArtifactKind, ArtifactMeta, Mode, Session, SessionState};

    use super::*;

    const TARGET: &str = "hub:ev";

    fn session(id: &str, service: &str) -> EvidenceRecord {
        EvidenceRecord::Session(Session {
            session_id: id.to_owned(),
            service: service.to_owned(),
            mode: Mode::Profiling,
            interval_ms: 500,
            duration_sec: 60,
            state: SessionState::Completed,
            started_at: "2026-12-04T10:00:00Z".to_owned(),
            ended_at: Some("2026-12-04T10:01:00Z".to_owned()),
            pid: Some(42),
            samples: 120,
            retry_of: None,
            artifact_id: None,
            incident_ids: Vec::new(),
            growth: None,
            published_at: None,
            error: None,
            heap: None,
            heap_error: None,
        })
    }

    fn artifact(id: &str, content: &str, sha256: String) -> EvidenceRecord {
        EvidenceRecord::Artifact {
            meta: ArtifactMeta {
                artifact_id: id.to_owned(),
                session_id: uuid::Uuid::now_v7().to_string(),
                service: "app".to_owned(),
                created_at: "2026-12-04T10:01:00Z".to_owned(),
                size_bytes: content.len() as u64,
                sha256,
                kind: ArtifactKind::Samples,
                format: None,
                snapshot: None,
            },
            content: Some(content.to_owned()),
        }
    }

    fn batch(epoch: &str, after: u64, upto: u64, records: Vec<EvidenceRecord>) -> Evidence {
        Evidence {
            epoch: epoch.to_owned(),
            after,
            upto,
            records,
        }
    }

    async fn opened() -> (tempfile::TempDir, Store, Arc<Shapes>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&format!("sqlite:{}", dir.path().join("e.db").display()))
            .await
            .unwrap();
        let contracts = ContractRegistry::load(None).unwrap();
        let shapes = Arc::new(Shapes::new(&contracts));
        assert_eq!(
            shapes.0.len(),
            SHAPES.len(),
            "every kind has its read's shape"
        );
        (dir, store, shapes)
    }

    #[tokio::test]
    async fn forged_records_are_refused_with_the_reason_and_the_rest_kept() {
        let (_dir, store, shapes) = opened().await;
        let (mut intake, cursor) = Intake::open(store.clone(), TARGET, shapes).await.unwrap();
        assert_eq!(cursor, EvidenceCursor::default());
        let good = uuid::Uuid::now_v7().to_string();
        let shaped_wrong = uuid::Uuid::now_v7().to_string();
        let taken = intake
            .take(batch(
                "e1",
                0,
                3,
                vec![
                    session(&good, "app"),
                    session("../../etc/passwd", "app"),
                    session(&shaped_wrong, "Not A Service!"),
                ],
            ))
            .await;
        let Taken::Stored { kept, refused } = taken else {
            panic!("stored: {taken:?}");
        };
        assert_eq!(kept, 1);
        let refused: Vec<String> = refused.iter().map(ToString::to_string).collect();
        assert!(refused[0].contains("is not a UUID"), "{refused:?}");
        assert!(
            refused[1].contains("does not have the shape its read serves")
                && refused[1].contains("/service"),
            "{refused:?}"
        );
        let rows = store
            .list_evidence(TARGET, "session", None, None, 10)
            .await
            .unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].item_id, good);
    }

    #[tokio::test]
    async fn artifact_bytes_are_kept_only_when_their_size_and_digest_match() {
        let (_dir, store, shapes) = opened().await;
        let (mut intake, _) = Intake::open(store.clone(), TARGET, shapes).await.unwrap();
        let bytes = r#"{"samples":[]}"#;
        let digest = hex::encode(Sha256::digest(bytes.as_bytes()));
        let (intact, forged) = (
            uuid::Uuid::now_v7().to_string(),
            uuid::Uuid::now_v7().to_string(),
        );
        let records = vec![
            artifact(&intact, bytes, digest),
            artifact(
                &forged,
                bytes,
                hex::encode(Sha256::digest(b"something else")),
            ),
        ];
        let taken = intake.take(batch("e1", 0, 2, records)).await;
        assert!(
            matches!(&taken, Taken::Stored { kept: 2, refused } if refused.is_empty()),
            "{taken:?}"
        );
        let rows = store
            .list_evidence(TARGET, "artifact", None, None, 10)
            .await
            .unwrap();
        let content = |id: &str| {
            rows.iter()
                .find(|r| r.item_id == id)
                .unwrap()
                .content
                .clone()
        };
        assert_eq!(content(&intact).as_deref(), Some(bytes));
        assert_eq!(
            content(&forged),
            None,
            "the record is kept, its bytes are not"
        );
    }

    #[tokio::test]
    async fn a_batch_that_does_not_continue_what_root_holds_is_not_stored() {
        let (_dir, store, shapes) = opened().await;
        let (mut intake, _) = Intake::open(store.clone(), TARGET, shapes.clone())
            .await
            .unwrap();
        let one = uuid::Uuid::now_v7().to_string();
        let first = intake
            .take(batch("e1", 0, 4, vec![session(&one, "app")]))
            .await;
        assert!(matches!(first, Taken::Stored { kept: 1, .. }), "{first:?}");
        // A later position of the same log (a batch lost in between), another epoch's
        // continuation, and a range that runs backwards: none is stored.
        let two = uuid::Uuid::now_v7().to_string();
        for b in [
            batch("e1", 6, 8, vec![session(&two, "app")]),
            batch("e2", 4, 6, vec![session(&two, "app")]),
            batch("e1", 4, 3, vec![session(&two, "app")]),
        ] {
            let taken = intake.take(b).await;
            assert!(matches!(taken, Taken::Gap { .. }), "{taken:?}");
        }
        let next = intake
            .take(batch("e1", 4, 5, vec![session(&two, "app")]))
            .await;
        assert!(matches!(next, Taken::Stored { kept: 1, .. }), "{next:?}");
        intake.close().await;
        // The next connection is told where root stands.
        let (_, cursor) = Intake::open(store.clone(), TARGET, shapes).await.unwrap();
        assert_eq!((cursor.epoch.as_str(), cursor.seq), ("e1", 5));
        let rows = store
            .list_evidence(TARGET, "session", None, None, 10)
            .await
            .unwrap();
        assert_eq!(rows.len(), 2);
    }
}
