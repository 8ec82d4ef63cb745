//! Witnessing (`audit::witness`): as a witness, the latest checkpoint this root cosigned of
//! each log it witnesses (`witness_state`, moved only from the size the request names, so two
//! requests at once cannot roll a log back); as a log, the cosignatures witnesses gave this
//! zone's checkpoints (`audit_cosignatures`, one signature line per checkpoint and witness).

use super::*;

/// A cosignature a witness gave one of this zone's checkpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CosignatureRow {
    pub tree_size: u64,
    /// The witness's name (its key's name).
    pub witness: String,
    /// The signature line (`— <name> <base64>`), to append to the checkpoint's note.
    pub line: String,
    /// The cosignature's own timestamp, in unix seconds.
    pub cosigned_at: i64,
}

impl Store {
    /// The latest checkpoint this root cosigned of log `origin`: `(tree size, root hash hex)`.
    pub async fn witnessed(&self, origin: &str) -> Result<Option<(u64, String)>> {
        let op = "read witness state";
        on_pool!(self, pool => {
            let row = sqlx::query("SELECT tree_size, root_hash FROM witness_state WHERE origin = $1")
                .bind(origin)
                .fetch_optional(pool)
                .await
                .map_err(db(op))?;
            row.map(|r| {
                Ok((
                    r.try_get::<i64, _>(0).map_err(db(op))?.max(0) as u64,
                    r.try_get::<String, _>(1).map_err(db(op))?,
                ))
            })
            .transpose()
        })
    }

    /// Records `size` (root `root_hex`, checkpoint `note`) as the latest cosigned of log
    /// `origin`, only if the latest is still `old` (0: none). `false` when another request
    /// moved it first.
    pub async fn advance_witnessed(
        &self,
        origin: &str,
        old: u64,
        size: u64,
        root_hex: &str,
        note: &str,
        now_ms: i64,
    ) -> Result<bool> {
        let op = "move witness state";
        let sql = if old == 0 {
            "INSERT INTO witness_state (origin, tree_size, root_hash, note, updated_at)
             VALUES ($1, $3, $4, $5, $6) ON CONFLICT (origin) DO NOTHING"
        } else {
            "UPDATE witness_state SET tree_size = $3, root_hash = $4, note = $5, updated_at = $6
             WHERE origin = $1 AND tree_size = $2"
        };
        on_pool!(self, pool => {
            let done = sqlx::query(sql)
                .bind(origin)
                .bind(old as i64)
                .bind(size as i64)
                .bind(root_hex)
                .bind(note)
                .bind(now_ms)
                .execute(pool)
                .await
                .map_err(db(op))?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Stores a witness's cosignature of checkpoint `tree_size` (a later one from the same
    /// witness for the same size replaces it).
    pub async fn put_cosignature(&self, c: &CosignatureRow) -> Result<()> {
        let op = "store cosignature";
        on_pool!(self, pool => {
            sqlx::query(
                "INSERT INTO audit_cosignatures (tree_size, witness, line, cosigned_at)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (tree_size, witness) DO UPDATE SET line = excluded.line,
                     cosigned_at = excluded.cosigned_at",
            )
            .bind(c.tree_size as i64)
            .bind(&c.witness)
            .bind(&c.line)
            .bind(c.cosigned_at)
            .execute(pool)
            .await
            .map_err(db(op))?;
            Ok(())
        })
    }

    /// The cosignatures of the checkpoints from `min_size` to `max_size`.
    pub async fn cosignatures(&self, min_size: u64, max_size: u64) -> Result<Vec<CosignatureRow>> {
        let op = "read cosignatures";
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT tree_size, witness, line, cosigned_at FROM audit_cosignatures
                 WHERE tree_size >= $1 AND tree_size <= $2 ORDER BY tree_size DESC, witness",
            )
            .bind(min_size as i64)
            .bind(max_size as i64)
            .fetch_all(pool)
            .await
            .map_err(db(op))?;
            rows.iter()
                .map(|r| {
                    Ok(CosignatureRow {
                        tree_size: r.try_get::<i64, _>(0).map_err(db(op))?.max(0) as u64,
                        witness: r.try_get(1).map_err(db(op))?,
                        line: r.try_get(2).map_err(db(op))?,
                        cosigned_at: r.try_get(3).map_err(db(op))?,
                    })
                })
                .collect()
        })
    }

    /// The largest checkpoint size witness `name` has cosigned (0: none).
    pub async fn cosigned_size(&self, name: &str) -> Result<u64> {
        let op = "read cosigned size";
        on_pool!(self, pool => {
            let size: Option<i64> = sqlx::query_scalar(
                "SELECT MAX(tree_size) FROM audit_cosignatures WHERE witness = $1",
            )
            .bind(name)
            .fetch_one(pool)
            .await
            .map_err(db(op))?;
            Ok(size.unwrap_or(0).max(0) as u64)
        })
    }
}
