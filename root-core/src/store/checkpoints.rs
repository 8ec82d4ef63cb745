//! The audit trail's Merkle tree and its signed checkpoints (`audit::tree`): the tree's
//! stored hashes by index (`audit_tree`, hex), and each checkpoint, by tree size, with its
//! root hash and signed note. A checkpoint and the hashes that grew the tree to its size
//! are written in one transaction, so the tree's size is the newest checkpoint's. Each export
//! sink's cursor (`audit::sinks`): the last event it delivered.

use super::*;

/// A signed checkpoint as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointRow {
    pub tree_size: u64,
    /// Hex.
    pub root_hash: String,
    /// The C2SP signed note.
    pub note: String,
    pub created_at_ms: i64,
}

fn checkpoint_from(
    tree_size: i64,
    root_hash: String,
    note: String,
    created_at_ms: i64,
) -> CheckpointRow {
    CheckpointRow {
        tree_size: tree_size.max(0) as u64,
        root_hash,
        note,
        created_at_ms,
    }
}

/// Stored hashes per insert (two parameters each).
const HASHES_PER_INSERT: usize = 256;

impl Store {
    /// The stored tree hashes at `indexes` that exist, as `(index, hex)`.
    pub async fn audit_tree_hashes(&self, indexes: &[u64]) -> Result<Vec<(u64, String)>> {
        let op = "read audit tree";
        let mut found = Vec::with_capacity(indexes.len());
        for chunk in indexes.chunks(500) {
            let list = serde_json::Value::from(chunk.to_vec()).to_string();
            let sql = match self.pool {
                Pool::Sqlite(_) => {
                    "SELECT idx, hash FROM audit_tree WHERE idx IN (SELECT value FROM json_each($1))"
                }
                Pool::Postgres(_) => {
                    "SELECT idx, hash FROM audit_tree WHERE idx IN (SELECT (json_array_elements_text($1::json))::BIGINT)"
                }
            };
            on_pool!(self, pool => {
                let rows = sqlx::query(sql).bind(&list).fetch_all(pool).await.map_err(db(op))?;
                for r in rows {
                    let idx: i64 = r.try_get(0).map_err(db(op))?;
                    found.push((idx as u64, r.try_get::<String, _>(1).map_err(db(op))?));
                }
            });
        }
        Ok(found)
    }

    /// Stores the hashes that grew the tree to `checkpoint.tree_size` and the checkpoint, in
    /// one transaction; `false` when a checkpoint of that size exists already (another
    /// replica wrote it: nothing is written).
    pub async fn put_audit_checkpoint(
        &self,
        hashes: &[(u64, String)],
        checkpoint: &CheckpointRow,
    ) -> Result<bool> {
        let op = "store audit checkpoint";
        on_pool!(self, pool => {
            let mut tx = begin_write(pool).await.map_err(db(op))?;
            let inserted = sqlx::query(
                "INSERT INTO audit_checkpoints (tree_size, root_hash, note, created_at)
                 VALUES ($1, $2, $3, $4) ON CONFLICT (tree_size) DO NOTHING",
            )
            .bind(checkpoint.tree_size as i64)
            .bind(&checkpoint.root_hash)
            .bind(&checkpoint.note)
            .bind(checkpoint.created_at_ms)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?
            .rows_affected();
            if inserted == 0 {
                return Ok(false);
            }
            for chunk in hashes.chunks(HASHES_PER_INSERT) {
                let mut sql = String::from("INSERT INTO audit_tree (idx, hash) VALUES ");
                for i in 0..chunk.len() {
                    if i > 0 {
                        sql.push(',');
                    }
                    sql.push_str(&format!("(${}, ${})", 2 * i + 1, 2 * i + 2));
                }
                sql.push_str(" ON CONFLICT (idx) DO NOTHING");
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                for (idx, hash) in chunk {
                    q = q.bind(*idx as i64).bind(hash);
                }
                q.execute(&mut *tx).await.map_err(db(op))?;
            }
            tx.commit().await.map_err(db(op))?;
            Ok(true)
        })
    }

    /// The newest checkpoints, newest first (at most `limit`).
    pub async fn audit_checkpoints(&self, limit: i64) -> Result<Vec<CheckpointRow>> {
        let op = "read audit checkpoints";
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT tree_size, root_hash, note, created_at FROM audit_checkpoints
                 ORDER BY tree_size DESC LIMIT $1",
            )
            .bind(limit)
            .fetch_all(pool)
            .await
            .map_err(db(op))?;
            rows.iter()
                .map(|r| {
                    Ok(checkpoint_from(
                        r.try_get(0).map_err(db(op))?,
                        r.try_get(1).map_err(db(op))?,
                        r.try_get(2).map_err(db(op))?,
                        r.try_get(3).map_err(db(op))?,
                    ))
                })
                .collect()
        })
    }

    /// The checkpoint of tree size `size`, if one was signed.
    pub async fn audit_checkpoint(&self, size: u64) -> Result<Option<CheckpointRow>> {
        let op = "read audit checkpoint";
        on_pool!(self, pool => {
            let row = sqlx::query(
                "SELECT tree_size, root_hash, note, created_at FROM audit_checkpoints WHERE tree_size = $1",
            )
            .bind(size as i64)
            .fetch_optional(pool)
            .await
            .map_err(db(op))?;
            row.map(|r| {
                Ok(checkpoint_from(
                    r.try_get(0).map_err(db(op))?,
                    r.try_get(1).map_err(db(op))?,
                    r.try_get(2).map_err(db(op))?,
                    r.try_get(3).map_err(db(op))?,
                ))
            })
            .transpose()
        })
    }

    /// The chain hashes of the events `from_seq..from_seq + limit`, oldest first.
    pub async fn audit_chain_hashes(
        &self,
        from_seq: i64,
        limit: i64,
    ) -> Result<Vec<(i64, String)>> {
        let op = "read audit chain hashes";
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT seq, hash FROM audit_events WHERE seq >= $1 ORDER BY seq ASC LIMIT $2",
            )
            .bind(from_seq)
            .bind(limit)
            .fetch_all(pool)
            .await
            .map_err(db(op))?;
            rows.iter()
                .map(|r| Ok((r.try_get(0).map_err(db(op))?, r.try_get(1).map_err(db(op))?)))
                .collect()
        })
    }

    /// The sequence number of event `event_id`, if it is in the trail.
    pub async fn audit_seq_of(&self, event_id: &str) -> Result<Option<i64>> {
        let op = "find audit event";
        on_pool!(self, pool => {
            let row = sqlx::query("SELECT seq FROM audit_events WHERE event_id = $1")
                .bind(event_id)
                .fetch_optional(pool)
                .await
                .map_err(db(op))?;
            row.map(|r| r.try_get::<i64, _>(0).map_err(db(op))).transpose()
        })
    }

    /// The sequence number of the last event sink `name` delivered (0: none yet).
    pub async fn sink_cursor(&self, name: &str) -> Result<i64> {
        let op = "read sink cursor";
        on_pool!(self, pool => {
            let row = sqlx::query("SELECT seq FROM audit_sink_cursors WHERE name = $1")
                .bind(name)
                .fetch_optional(pool)
                .await
                .map_err(db(op))?;
            Ok(row.map(|r| r.try_get::<i64, _>(0)).transpose().map_err(db(op))?.unwrap_or(0))
        })
    }

    /// Moves sink `name`'s cursor forward to `seq` (never back: a replica that delivered
    /// less meanwhile does not undo another's progress).
    pub async fn advance_sink_cursor(&self, name: &str, seq: i64, now_ms: i64) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(ADVANCE_SINK_CURSOR)
                .bind(name)
                .bind(seq)
                .bind(now_ms)
                .execute(pool)
                .await
                .map_err(db("move sink cursor"))?;
            Ok(())
        })
    }

    /// The right to ship sink `name` for the zone, if no one else holds it. On PostgreSQL it
    /// is a session advisory lock on a connection of its own, taken out of the pool: a
    /// replica that stops or dies frees it with its connection, and another replica's shipper
    /// takes over. On SQLite there is one root, and the claim is always granted.
    pub async fn claim_sink(&self, name: &str) -> Result<Option<SinkClaim>> {
        let op = "claim sink";
        let (Pool::Postgres(pg), Some(names)) = (&self.pool, &self.shared) else {
            return Ok(Some(SinkClaim::Local));
        };
        let mut conn = pg.acquire().await.map_err(db(op))?;
        let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
            .bind(names.sink_lock(name))
            .fetch_one(&mut *conn)
            .await
            .map_err(db(op))?;
        Ok(got.then(|| SinkClaim::Zone(Box::new(conn.detach()))))
    }

    /// Saves sink `name`'s cursor through its claim. On PostgreSQL this also proves the
    /// claim still holds: an error means its connection, and so the lock, is gone.
    pub async fn save_sink_cursor(
        &self,
        claim: &mut SinkClaim,
        name: &str,
        seq: i64,
        now_ms: i64,
    ) -> Result<()> {
        match claim {
            SinkClaim::Local => self.advance_sink_cursor(name, seq, now_ms).await,
            SinkClaim::Zone(conn) => {
                sqlx::query(ADVANCE_SINK_CURSOR)
                    .bind(name)
                    .bind(seq)
                    .bind(now_ms)
                    .execute(&mut **conn)
                    .await
                    .map_err(db("move sink cursor"))?;
                Ok(())
            }
        }
    }
}

/// Moves a sink's cursor forward only.
const ADVANCE_SINK_CURSOR: &str =
    "INSERT INTO audit_sink_cursors (name, seq, updated_at) VALUES ($1, $2, $3)
     ON CONFLICT (name) DO UPDATE SET seq = excluded.seq, updated_at = excluded.updated_at
     WHERE audit_sink_cursors.seq < excluded.seq";

/// The right to ship one sink for the zone ([`Store::claim_sink`]).
pub enum SinkClaim {
    /// SQLite: one root, no one to share with.
    Local,
    /// PostgreSQL: the connection holding the sink's advisory lock.
    Zone(Box<sqlx::PgConnection>),
}

impl SinkClaim {
    /// Gives the claim up (on PostgreSQL, closes its connection, which frees the lock).
    pub async fn release(self) {
        if let SinkClaim::Zone(conn) = self {
            let _ = sqlx::Connection::close(*conn).await;
        }
    }
}
