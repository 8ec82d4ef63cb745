//! Results retained for later reads (memory profiles).

use super::*;

/// A value root kept from a tool's result (a contract's `retain`), e.g. a published
/// memory-profile summary.
#[derive(Debug, Clone, PartialEq)]
pub struct RetainedRow {
    pub target_id: String,
    pub collection: String,
    pub item_key: String,
    pub body: serde_json::Value,
    pub retained_at_ms: i64,
    /// The audit event of the call that produced it.
    pub event_id: String,
}

impl Store {
    // ---- retained results -----------------------------------------------------------------

    /// Keeps (or replaces) one retained value.
    pub async fn put_retained(&self, r: &RetainedRow) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(
                "INSERT INTO retained (target_id, collection, item_key, body, retained_at, event_id)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (target_id, collection, item_key)
                 DO UPDATE SET body = excluded.body, retained_at = excluded.retained_at,
                               event_id = excluded.event_id",
            )
            .bind(&r.target_id)
            .bind(&r.collection)
            .bind(&r.item_key)
            .bind(r.body.to_string())
            .bind(r.retained_at_ms)
            .bind(&r.event_id)
            .execute(pool)
            .await
            .map_err(db("put retained"))?;
            Ok(())
        })
    }

    /// Retained values of one collection for the given targets, newest first.
    pub async fn list_retained(
        &self,
        collection: &str,
        target_ids: &[String],
        limit: i64,
    ) -> Result<Vec<RetainedRow>> {
        let op = "list retained";
        let mut out = Vec::new();
        for target_id in target_ids {
            let rows = on_pool!(self, pool => {
                sqlx::query(
                    "SELECT target_id, collection, item_key, body, retained_at, event_id
                     FROM retained WHERE collection = $1 AND target_id = $2
                     ORDER BY retained_at DESC LIMIT $3",
                )
                .bind(collection)
                .bind(target_id)
                .bind(limit.clamp(1, 10_000))
                .fetch_all(pool)
                .await
                .map_err(db(op))?
                .into_iter()
                .map(|r| -> Result<RetainedRow> {
                    let body: String = r.try_get(3).map_err(db(op))?;
                    Ok(RetainedRow {
                        target_id: r.try_get(0).map_err(db(op))?,
                        collection: r.try_get(1).map_err(db(op))?,
                        item_key: r.try_get(2).map_err(db(op))?,
                        body: serde_json::from_str(&body).map_err(|e| Error::Corrupt {
                            op,
                            detail: e.to_string(),
                        })?,
                        retained_at_ms: r.try_get(4).map_err(db(op))?,
                        event_id: r.try_get(5).map_err(db(op))?,
                    })
                })
                .collect::<Result<Vec<_>>>()?
            });
            out.extend(rows);
        }
        out.sort_by_key(|r| std::cmp::Reverse(r.retained_at_ms));
        out.truncate(limit.clamp(1, 10_000) as usize);
        Ok(out)
    }
}
