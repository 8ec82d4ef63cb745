//! MCP session leases: rows by token hash, status, usage.

use super::*;

/// A stored lease and the hash of its bearer.
#[derive(Debug, Clone)]
pub struct LeaseRow {
    pub lease: SessionLease,
    pub token_hash: String,
    /// The lease this one descends from by rotation (its own session id when it was not
    /// rotated from another): what owns its idempotency keys.
    pub lineage: String,
}

const LEASE_COLUMNS: &str = "session_id, token_hash, audience, target_id, subnet_id, zone, capability_profile, effective_tools, created_at, deadline_at, last_used_at, use_count, status, lineage, parent_id";

/// Reads a [`LeaseRow`] from a row of either backend (expanded inside `on_pool!`).
macro_rules! lease_from_row {
    ($r:expr, $op:expr) => {{
        let r = $r;
        let op: &'static str = $op;
        (|| -> Result<LeaseRow> {
            let get_s = |c: &str| r.try_get::<String, _>(c).map_err(db(op));
            let get_i = |c: &str| r.try_get::<i64, _>(c).map_err(db(op));
            let status = match get_s("status")?.as_str() {
                "active" => LeaseStatus::Active,
                "expired" => LeaseStatus::Expired,
                "revoked" => LeaseStatus::Revoked,
                other => {
                    return Err(Error::Corrupt {
                        op,
                        detail: format!("status `{other}`"),
                    });
                }
            };
            let tools: Vec<String> =
                serde_json::from_str(&get_s("effective_tools")?).map_err(|e| Error::Corrupt {
                    op,
                    detail: e.to_string(),
                })?;
            let session_id = get_s("session_id")?;
            Ok(LeaseRow {
                token_hash: get_s("token_hash")?,
                lineage: r
                    .try_get::<Option<String>, _>("lineage")
                    .map_err(db(op))?
                    .unwrap_or_else(|| session_id.clone()),
                lease: SessionLease {
                    session_id,
                    audience: get_s("audience")?,
                    target_id: get_s("target_id")?,
                    subnet_id: get_s("subnet_id")?,
                    zone: get_s("zone")?,
                    capability_profile: get_s("capability_profile")?,
                    effective_tools: tools,
                    created_at: from_unix_ms(get_i("created_at")?),
                    deadline_at: from_unix_ms(get_i("deadline_at")?),
                    last_used_at: r
                        .try_get::<Option<i64>, _>("last_used_at")
                        .map_err(db(op))?
                        .map(from_unix_ms),
                    use_count: get_i("use_count")?.max(0) as u64,
                    status,
                    parent_session_id: r
                        .try_get::<Option<String>, _>("parent_id")
                        .map_err(db(op))?,
                },
            })
        })()
    }};
}

impl Store {
    // ---- leases -------------------------------------------------------------------------

    pub async fn insert_lease(
        &self,
        lease: &SessionLease,
        token_hash: &str,
        lineage: &str,
    ) -> Result<()> {
        let tools = serde_json::to_string(&lease.effective_tools).unwrap_or_else(|_| "[]".into());
        on_pool!(self, pool => {
            sqlx::query(
                "INSERT INTO leases (session_id, token_hash, audience, target_id, subnet_id, zone,
                    capability_profile, effective_tools, created_at, deadline_at, last_used_at,
                    use_count, status, lineage, parent_id)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
            )
            .bind(&lease.session_id)
            .bind(token_hash)
            .bind(&lease.audience)
            .bind(&lease.target_id)
            .bind(&lease.subnet_id)
            .bind(&lease.zone)
            .bind(&lease.capability_profile)
            .bind(&tools)
            .bind(unix_ms(lease.created_at))
            .bind(unix_ms(lease.deadline_at))
            .bind(lease.last_used_at.map(unix_ms))
            .bind(lease.use_count as i64)
            .bind(lease.status.as_str())
            .bind(lineage)
            .bind(&lease.parent_session_id)
            .execute(pool)
            .await
            .map_err(db("insert lease"))?;
            Ok(())
        })
    }

    pub async fn load_leases(&self) -> Result<Vec<LeaseRow>> {
        on_pool!(self, pool => {
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {LEASE_COLUMNS} FROM leases ORDER BY created_at"
            )))
            .fetch_all(pool)
            .await
            .map_err(db("load leases"))?;
            rows.iter().map(|r| lease_from_row!(r, "load leases")).collect()
        })
    }

    /// One lease by the hash of its bearer (a replica authenticating a lease another replica
    /// issued).
    pub async fn lease_by_hash(&self, token_hash: &str) -> Result<Option<LeaseRow>> {
        self.lease_where("token_hash", token_hash).await
    }

    /// One lease by its session id.
    pub async fn lease_by_id(&self, session_id: &str) -> Result<Option<LeaseRow>> {
        self.lease_where("session_id", session_id).await
    }

    async fn lease_where(&self, col: &'static str, value: &str) -> Result<Option<LeaseRow>> {
        on_pool!(self, pool => {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {LEASE_COLUMNS} FROM leases WHERE {col} = $1"
            )))
            .bind(value)
            .fetch_optional(pool)
            .await
            .map_err(db("load lease"))?;
            row.map(|r| lease_from_row!(&r, "load lease")).transpose()
        })
    }

    /// Ids of revoked leases whose deadline has not passed (the replicas' fallback re-reads
    /// them, so a missed notification never keeps a revoked bearer working).
    pub async fn revoked_unexpired_leases(&self, now_ms: i64) -> Result<Vec<String>> {
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT session_id FROM leases WHERE status = 'revoked' AND deadline_at > $1",
            )
            .bind(now_ms)
            .fetch_all(pool)
            .await
            .map_err(db("revoked leases"))?;
            rows.iter()
                .map(|r| r.try_get::<String, _>(0).map_err(db("revoked leases")))
                .collect()
        })
    }

    /// Revokes a lease that is still active; `Ok(false)` when it was not (another replica
    /// revoked or rotated it first).
    pub async fn revoke_lease_if_active(&self, session_id: &str) -> Result<bool> {
        on_pool!(self, pool => {
            let res = sqlx::query(
                "UPDATE leases SET status = 'revoked' WHERE session_id = $1 AND status = 'active'",
            )
            .bind(session_id)
            .execute(pool)
            .await
            .map_err(db("revoke lease"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    /// Revokes the active run credentials issued under `parent`; their session ids.
    pub async fn revoke_children(&self, parent: &str) -> Result<Vec<String>> {
        let op = "revoke run credentials";
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "UPDATE leases SET status = 'revoked' WHERE parent_id = $1 AND status = 'active'
                 RETURNING session_id",
            )
            .bind(parent)
            .fetch_all(pool)
            .await
            .map_err(db(op))?;
            rows.iter()
                .map(|r| r.try_get::<String, _>(0).map_err(db(op)))
                .collect()
        })
    }

    pub async fn set_lease_status(&self, session_id: &str, status: LeaseStatus) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query("UPDATE leases SET status = $1 WHERE session_id = $2")
                .bind(status.as_str())
                .bind(session_id)
                .execute(pool)
                .await
                .map_err(db("update lease status"))?;
            Ok(())
        })
    }

    /// Adds usage to many leases in one transaction: `(session id, last used ms, uses since
    /// the last flush)`. Increments, so replicas that serve one lease add up rather than
    /// overwrite each other.
    pub async fn record_lease_usage(&self, usage: &[(String, i64, u64)]) -> Result<()> {
        if usage.is_empty() {
            return Ok(());
        }
        on_pool!(self, pool => {
            let mut tx = pool.begin().await.map_err(db("record lease usage"))?;
            for (session_id, last_used_ms, uses) in usage {
                sqlx::query(
                    "UPDATE leases SET
                        last_used_at = CASE WHEN last_used_at IS NULL OR last_used_at < $1
                                            THEN $1 ELSE last_used_at END,
                        use_count = use_count + $2
                     WHERE session_id = $3",
                )
                .bind(*last_used_ms)
                .bind(*uses as i64)
                .bind(session_id)
                .execute(&mut *tx)
                .await
                .map_err(db("record lease usage"))?;
            }
            tx.commit().await.map_err(db("record lease usage"))?;
            Ok(())
        })
    }
}
