//! ProfileOps evidence hubs publish (see `hubs::evidence`): one row per record (session,
//! incident, artifact) as the hub last sent it, and each hub's position in its evidence log.

use super::*;

/// Records of one kind root keeps per target (the newest by id; hubs keep fewer).
pub const EVIDENCE_KEEP: i64 = 1000;
/// Artifacts whose bytes root keeps per target (the newest; older ones keep their record).
pub(crate) const EVIDENCE_KEEP_CONTENT: i64 = 50;

/// One stored record.
#[derive(Debug, Clone, PartialEq)]
pub struct EvidenceRow {
    pub(crate) kind: String,
    pub(crate) item_id: String,
    pub(crate) service: String,
    /// The record (JSON) as the hub sent it.
    pub record: serde_json::Value,
    /// An artifact's bytes, when root keeps them.
    pub content: Option<String>,
    pub(crate) received_at_ms: i64,
}

/// How far root holds a hub's evidence log, and since when its copy is known complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceCursorRow {
    pub(crate) epoch: String,
    pub(crate) seq: i64,
    pub synced_at_ms: i64,
}

/// One batch to store: its records and root's new position.
pub(crate) struct EvidenceBatch<'a> {
    pub(crate) target_id: &'a str,
    pub(crate) epoch: &'a str,
    pub(crate) upto: i64,
    pub(crate) rows: Vec<EvidenceRow>,
    pub(crate) now_ms: i64,
}

impl Store {
    /// Root's position in `target_id`'s evidence log (`None`: it holds nothing yet).
    pub async fn evidence_cursor(&self, target_id: &str) -> Result<Option<EvidenceCursorRow>> {
        let op = "read evidence cursor";
        on_pool!(self, pool => {
            let row = sqlx::query(
                "SELECT epoch, seq, synced_at FROM evidence_cursors WHERE target_id = $1",
            )
            .bind(target_id)
            .fetch_optional(pool)
            .await
            .map_err(db(op))?;
            row.map(|r| -> Result<EvidenceCursorRow> {
                Ok(EvidenceCursorRow {
                    epoch: r.try_get(0).map_err(db(op))?,
                    seq: r.try_get(1).map_err(db(op))?,
                    synced_at_ms: r.try_get(2).map_err(db(op))?,
                })
            })
            .transpose()
        })
    }

    /// Stores a batch and moves the position, in one transaction; then drops what is past
    /// [`EVIDENCE_KEEP`] and the bytes past [`EVIDENCE_KEEP_CONTENT`].
    pub(crate) async fn put_evidence(&self, batch: &EvidenceBatch<'_>) -> Result<()> {
        let op = "store evidence";
        let target = batch.target_id;
        on_pool!(self, pool => {
            let mut tx = begin_write(pool).await.map_err(db(op))?;
            for r in &batch.rows {
                sqlx::query(
                    "INSERT INTO evidence (target_id, kind, item_id, service, record, content, received_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)
                     ON CONFLICT (target_id, kind, item_id)
                     DO UPDATE SET service = excluded.service, record = excluded.record,
                                   content = COALESCE(excluded.content, evidence.content),
                                   received_at = excluded.received_at",
                )
                .bind(target)
                .bind(&r.kind)
                .bind(&r.item_id)
                .bind(&r.service)
                .bind(r.record.to_string())
                .bind(r.content.as_deref())
                .bind(batch.now_ms)
                .execute(&mut *tx)
                .await
                .map_err(db(op))?;
            }
            sqlx::query(
                "INSERT INTO evidence_cursors (target_id, epoch, seq, synced_at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (target_id) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq,
                                                      synced_at = excluded.synced_at",
            )
            .bind(target)
            .bind(batch.epoch)
            .bind(batch.upto)
            .bind(batch.now_ms)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
            for kind in ["session", "incident", "artifact"] {
                sqlx::query(
                    "DELETE FROM evidence WHERE target_id = $1 AND kind = $2 AND item_id NOT IN
                     (SELECT item_id FROM evidence WHERE target_id = $1 AND kind = $2
                      ORDER BY item_id DESC LIMIT $3)",
                )
                .bind(target)
                .bind(kind)
                .bind(EVIDENCE_KEEP)
                .execute(&mut *tx)
                .await
                .map_err(db(op))?;
            }
            sqlx::query(
                "UPDATE evidence SET content = NULL
                 WHERE target_id = $1 AND kind = 'artifact' AND content IS NOT NULL AND item_id NOT IN
                 (SELECT item_id FROM evidence WHERE target_id = $1 AND kind = 'artifact'
                  AND content IS NOT NULL ORDER BY item_id DESC LIMIT $2)",
            )
            .bind(target)
            .bind(EVIDENCE_KEEP_CONTENT)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
            tx.commit().await.map_err(db(op))?;
            Ok(())
        })
    }

    /// Root's copy of `target_id`'s evidence was complete at `at_ms` (its hub's connection
    /// ended with every batch stored).
    pub(crate) async fn evidence_synced(&self, target_id: &str, at_ms: i64) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query("UPDATE evidence_cursors SET synced_at = $2 WHERE target_id = $1 AND synced_at < $2")
                .bind(target_id)
                .bind(at_ms)
                .execute(pool)
                .await
                .map_err(db("mark evidence synced"))?;
            Ok(())
        })
    }

    /// Records of one kind of `target_id`, newest first, optionally of one service;
    /// `item_id` selects one.
    pub async fn list_evidence(
        &self,
        target_id: &str,
        kind: &str,
        service: Option<&str>,
        item_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<EvidenceRow>> {
        let op = "list evidence";
        on_pool!(self, pool => {
            sqlx::query(
                "SELECT kind, item_id, service, record, content, received_at FROM evidence
                 WHERE target_id = $1 AND kind = $2
                   AND (CAST($3 AS TEXT) IS NULL OR service = $3)
                   AND (CAST($4 AS TEXT) IS NULL OR item_id = $4)
                 ORDER BY item_id DESC LIMIT $5",
            )
            .bind(target_id)
            .bind(kind)
            .bind(service)
            .bind(item_id)
            .bind(limit.clamp(1, EVIDENCE_KEEP))
            .fetch_all(pool)
            .await
            .map_err(db(op))?
            .into_iter()
            .map(|r| -> Result<EvidenceRow> {
                let record: String = r.try_get(3).map_err(db(op))?;
                Ok(EvidenceRow {
                    kind: r.try_get(0).map_err(db(op))?,
                    item_id: r.try_get(1).map_err(db(op))?,
                    service: r.try_get(2).map_err(db(op))?,
                    record: serde_json::from_str(&record).map_err(|e| Error::Corrupt {
                        op,
                        detail: e.to_string(),
                    })?,
                    content: r.try_get(4).map_err(db(op))?,
                    received_at_ms: r.try_get(5).map_err(db(op))?,
                })
            })
            .collect()
        })
    }
}
