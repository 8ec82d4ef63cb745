//! Published descriptor sets, by revision.

use super::*;

/// A published descriptor set as stored (the newest revision is the one served).
#[derive(Debug, Clone)]
pub struct DescriptorSetRow {
    pub revision: i64,
    pub(crate) published_at_ms: i64,
    /// The descriptors as a JSON array.
    pub(crate) body: String,
}

impl Store {
    // ---- descriptor sets ------------------------------------------------------------------

    /// Stores a published descriptor set as the next revision; returns the revision. Older
    /// revisions beyond the newest ten are dropped.
    pub(crate) async fn put_descriptor_set(
        &self,
        set_hash: &str,
        published_at_ms: i64,
        body: &str,
    ) -> Result<i64> {
        let op = "put descriptor set";
        on_pool!(self, pool => {
            let mut tx = begin_write(pool).await.map_err(db(op))?;
            let revision: i64 = sqlx::query("SELECT COALESCE(MAX(revision), 0) + 1 FROM descriptor_sets")
                .fetch_one(&mut *tx)
                .await
                .map_err(db(op))?
                .try_get(0)
                .map_err(db(op))?;
            sqlx::query(
                "INSERT INTO descriptor_sets (revision, set_hash, published_at, descriptors) VALUES ($1, $2, $3, $4)",
            )
            .bind(revision)
            .bind(set_hash)
            .bind(published_at_ms)
            .bind(body)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
            sqlx::query("DELETE FROM descriptor_sets WHERE revision <= $1")
                .bind(revision - 10)
                .execute(&mut *tx)
                .await
                .map_err(db(op))?;
            tx.commit().await.map_err(db(op))?;
            Ok(revision)
        })
    }

    /// Withdraws a stored revision (a publish the cache could not take).
    pub(crate) async fn delete_descriptor_set(&self, revision: i64) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query("DELETE FROM descriptor_sets WHERE revision = $1")
                .bind(revision)
                .execute(pool)
                .await
                .map_err(db("delete descriptor set"))?;
            Ok(())
        })
    }

    /// The newest published descriptor set, if any.
    pub async fn latest_descriptor_set(&self) -> Result<Option<DescriptorSetRow>> {
        let op = "load descriptor set";
        on_pool!(self, pool => {
            let row = sqlx::query(
                "SELECT revision, published_at, descriptors FROM descriptor_sets ORDER BY revision DESC LIMIT 1",
            )
            .fetch_optional(pool)
            .await
            .map_err(db(op))?;
            row.map(|r| -> Result<DescriptorSetRow> {
                Ok(DescriptorSetRow {
                    revision: r.try_get(0).map_err(db(op))?,
                    published_at_ms: r.try_get(1).map_err(db(op))?,
                    body: r.try_get(2).map_err(db(op))?,
                })
            })
            .transpose()
        })
    }
}
