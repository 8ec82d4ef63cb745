//! MCP session leases: rows by token hash, status, usage, and the delegation graph over them
//! (`parent_id`: the lease that minted this one or issued it as a run credential;
//! `grant_id`: the OAuth grant it is an access token of; `issued_by`: the operator at the top
//! of its chain). Ending a lease ends its descendants in one statement.

use mcp_shared::lease::LeaseKind;

use super::*;

/// A stored lease and the hash of its bearer.
#[derive(Debug, Clone)]
pub struct LeaseRow {
    pub lease: SessionLease,
    pub(crate) token_hash: String,
    /// The lease this one descends from by rotation (its own session id when it was not
    /// rotated from another): what owns its tasks.
    pub(crate) lineage: String,
    /// The lineage at the top of its delegation chain (its own lineage when it was issued,
    /// its parent's owner when it was handed on): what owns its idempotency keys.
    pub(crate) owner: String,
}

const LEASE_COLUMNS: &str = "session_id, token_hash, audience, target_id, subnet_id, zone, capability_profile, effective_tools, created_at, deadline_at, last_used_at, use_count, status, lineage, parent_id, kind, issued_by, grant_id, owner, rate, dpop_jkt";

/// How many leases a chain of handed-on authority holds at most (the top and its
/// descendants down one line): a chain stays short.
pub const MAX_CHAIN: usize = 8;

fn kind_of(s: Option<&str>, parent: bool) -> LeaseKind {
    match s {
        Some("minted") => LeaseKind::Minted,
        Some("run") => LeaseKind::Run,
        Some("fleet") => LeaseKind::Fleet,
        Some(_) => LeaseKind::Issued,
        // Rows from before the delegation graph: a parent meant a run credential.
        None if parent => LeaseKind::Run,
        None => LeaseKind::Issued,
    }
}

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
            let get_o = |c: &str| r.try_get::<Option<String>, _>(c).map_err(db(op));
            let lineage = get_o("lineage")?.unwrap_or_else(|| session_id.clone());
            let parent = get_o("parent_id")?;
            Ok(LeaseRow {
                token_hash: get_s("token_hash")?,
                owner: get_o("owner")?.unwrap_or_else(|| lineage.clone()),
                lineage,
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
                    kind: kind_of(get_o("kind")?.as_deref(), parent.is_some()),
                    parent_session_id: parent,
                    issued_by: get_o("issued_by")?,
                    grant_id: get_o("grant_id")?,
                    rate: get_o("rate")?,
                    dpop_jkt: get_o("dpop_jkt")?,
                },
            })
        })()
    }};
}

/// Where a set of leases came from, for ending them together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseSource {
    /// The access tokens of one OAuth grant.
    Grant,
    /// The leases one operator issued (`operator:<name>`), OAuth ones included.
    IssuedBy,
    /// The leases bound to one target (it was retired or moved).
    Target,
}

impl Store {
    // ---- leases -------------------------------------------------------------------------

    pub(crate) async fn insert_lease(&self, row: &LeaseRow) -> Result<()> {
        let lease = &row.lease;
        let tools = serde_json::to_string(&lease.effective_tools).unwrap_or_else(|_| "[]".into());
        on_pool!(self, pool => {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO leases ({LEASE_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                         $17, $18, $19, $20, $21)",
            )))
            .bind(&lease.session_id)
            .bind(&row.token_hash)
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
            .bind(&row.lineage)
            .bind(&lease.parent_session_id)
            .bind(lease.kind.as_str())
            .bind(&lease.issued_by)
            .bind(&lease.grant_id)
            .bind(&row.owner)
            .bind(&lease.rate)
            .bind(&lease.dpop_jkt)
            .execute(pool)
            .await
            .map_err(db("insert lease"))?;
            Ok(())
        })
    }

    pub(crate) async fn load_leases(&self) -> Result<Vec<LeaseRow>> {
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

    /// A lease and its ancestors, the top of its chain first (what an index needs to judge
    /// it: a lease works only while every ancestor does); empty when there is no such lease.
    pub async fn lease_chain(&self, session_id: &str) -> Result<Vec<LeaseRow>> {
        let op = "load a lease's ancestors";
        let mut chain = Vec::new();
        let mut next = Some(session_id.to_owned());
        while let Some(id) = next {
            let Some(row) = self.lease_by_id(&id).await? else {
                break;
            };
            next = row.lease.parent_session_id.clone();
            chain.push(row);
            if chain.len() > MAX_CHAIN {
                return Err(Error::Corrupt {
                    op,
                    detail: format!("lease `{session_id}` is in a chain of more than {MAX_CHAIN}"),
                });
            }
        }
        chain.reverse();
        Ok(chain)
    }

    /// The leases descended from `session_id` (minted by it, run credentials of it, and theirs
    /// in turn), oldest first; the lease itself not included.
    pub async fn lease_descendants(&self, session_id: &str) -> Result<Vec<LeaseRow>> {
        on_pool!(self, pool => {
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "WITH RECURSIVE tree(id) AS (
                     SELECT session_id FROM leases WHERE parent_id = $1
                     UNION SELECT l.session_id FROM leases l JOIN tree t ON l.parent_id = t.id)
                 SELECT {LEASE_COLUMNS} FROM leases WHERE session_id IN (SELECT id FROM tree)
                 ORDER BY created_at, session_id"
            )))
            .bind(session_id)
            .fetch_all(pool)
            .await
            .map_err(db("load a lease's descendants"))?;
            rows.iter().map(|r| lease_from_row!(r, "load a lease's descendants")).collect()
        })
    }

    /// Whether lease `session_id` and every ancestor of it are active in the store (checked
    /// after a child is written, so a revocation racing with it on another replica is seen by
    /// one side or the other).
    pub async fn chain_active(&self, session_id: &str, now_ms: i64) -> Result<bool> {
        let chain = self.lease_chain(session_id).await?;
        Ok(!chain.is_empty()
            && chain.iter().all(|r| {
                r.lease.status == LeaseStatus::Active && unix_ms(r.lease.deadline_at) > now_ms
            }))
    }

    /// Revokes the active descendants of the leases `roots` (whatever their own status), in
    /// one statement; the revoked ones with their kinds.
    pub(crate) async fn revoke_descendants(
        &self,
        roots: &[String],
    ) -> Result<Vec<(String, LeaseKind)>> {
        let op = "revoke a lease's descendants";
        let mut out = Vec::new();
        for root in roots {
            on_pool!(self, pool => {
                let rows = sqlx::query(
                    "WITH RECURSIVE tree(id) AS (
                         SELECT session_id FROM leases WHERE parent_id = $1
                         UNION SELECT l.session_id FROM leases l JOIN tree t ON l.parent_id = t.id)
                     UPDATE leases SET status = 'revoked'
                     WHERE session_id IN (SELECT id FROM tree) AND status = 'active'
                     RETURNING session_id, kind, parent_id",
                )
                .bind(root)
                .fetch_all(pool)
                .await
                .map_err(db(op))?;
                for r in &rows {
                    let id: String = r.try_get(0).map_err(db(op))?;
                    let kind: Option<String> = r.try_get(1).map_err(db(op))?;
                    let parent: Option<String> = r.try_get(2).map_err(db(op))?;
                    out.push((id, kind_of(kind.as_deref(), parent.is_some())));
                }
            });
        }
        Ok(out)
    }

    /// Revokes the active leases whose `column` (`grant_id` or `issued_by`) is `value`; their
    /// ids (their descendants are the caller's next step).
    pub(crate) async fn revoke_leases_where(
        &self,
        column: LeaseSource,
        value: &str,
    ) -> Result<Vec<String>> {
        let op = "revoke leases by source";
        let column = match column {
            LeaseSource::Grant => "grant_id",
            LeaseSource::IssuedBy => "issued_by",
            LeaseSource::Target => "target_id",
        };
        on_pool!(self, pool => {
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE leases SET status = 'revoked' WHERE {column} = $1 AND status = 'active'
                 RETURNING session_id"
            )))
            .bind(value)
            .fetch_all(pool)
            .await
            .map_err(db(op))?;
            rows.iter()
                .map(|r| r.try_get::<String, _>(0).map_err(db(op)))
                .collect()
        })
    }

    /// One lease by its session id.
    pub(crate) async fn lease_by_id(&self, session_id: &str) -> Result<Option<LeaseRow>> {
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
    pub(crate) async fn revoke_lease_if_active(&self, session_id: &str) -> Result<bool> {
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

    pub(crate) async fn set_lease_status(
        &self,
        session_id: &str,
        status: LeaseStatus,
    ) -> Result<()> {
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
    pub(crate) async fn record_lease_usage(&self, usage: &[(String, i64, u64)]) -> Result<()> {
        if usage.is_empty() {
            return Ok(());
        }
        on_pool!(self, pool => {
            let mut tx = begin_write(pool).await.map_err(db("record lease usage"))?;
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
