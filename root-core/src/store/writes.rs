//! Safe writes: confirmations, idempotency records and approvals.

use super::*;

/// A single-use confirmation token issued by a write preview, as stored (hash only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmationRow {
    pub token_hash: String,
    pub session_id: String,
    pub tool_id: String,
    pub target_id: String,
    pub args_hash: String,
    pub expires_at_ms: i64,
    /// The domain arguments, kept for tokens issued by a proposing tool.
    pub arguments: Option<String>,
    /// The preview's expected effect (JSON): what the caller confirmed.
    pub effect: Option<String>,
}

/// An operator approval of a write (a contract's `requires_approval`), as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRow {
    pub approval_id: String,
    /// Hash of the confirmation token the approval belongs to.
    pub token_hash: String,
    pub session_id: String,
    pub target_id: String,
    pub tool_id: String,
    pub arguments: serde_json::Value,
    /// The preview's expected effect (for an NLU change: its diff).
    pub effect: serde_json::Value,
    /// As stored (`expired` is derived, see [`ApprovalRow::status_at`]).
    pub status: ApprovalStatus,
    pub requested_at_ms: i64,
    pub expires_at_ms: i64,
    pub decided_at_ms: Option<i64>,
    pub reason: Option<String>,
    pub preview_event_id: String,
    pub applied_event_id: Option<String>,
}

impl ApprovalRow {
    /// The status as of `now_ms`: an undecided or unapplied approval past its expiry is
    /// `expired`.
    pub fn status_at(&self, now_ms: i64) -> ApprovalStatus {
        match self.status {
            ApprovalStatus::Pending | ApprovalStatus::Approved if now_ms >= self.expires_at_ms => {
                ApprovalStatus::Expired
            }
            s => s,
        }
    }
}

/// Where an approval is: `pending` until an operator decides, then `approved` or `rejected`;
/// an approved one is `applied` or `failed` once its execute ran; `expired` (derived, never
/// stored) when its time ran out first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Rejected,
    Applied,
    Failed,
    Expired,
}

impl ApprovalStatus {
    /// Every status, in the order operators read them.
    pub const ALL: [ApprovalStatus; 6] = [
        ApprovalStatus::Pending,
        ApprovalStatus::Approved,
        ApprovalStatus::Rejected,
        ApprovalStatus::Applied,
        ApprovalStatus::Failed,
        ApprovalStatus::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Rejected => "rejected",
            ApprovalStatus::Applied => "applied",
            ApprovalStatus::Failed => "failed",
            ApprovalStatus::Expired => "expired",
        }
    }

    /// The status named `name`, if there is one.
    pub fn named(name: &str) -> Option<ApprovalStatus> {
        ApprovalStatus::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl std::fmt::Display for ApprovalStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

const APPROVAL_COLUMNS: &str = "approval_id, token_hash, session_id, target_id, tool_id, arguments, effect, status, requested_at, expires_at, decided_at, reason, preview_event_id, applied_event_id";

/// Reads an [`ApprovalRow`] from a row of either backend (expanded inside `on_pool!`).
macro_rules! approval_from_row {
    ($r:expr, $op:expr) => {{
        let r = $r;
        let op = $op;
        let json = |col: &str| -> Result<serde_json::Value> {
            let text: String = r.try_get(col).map_err(db(op))?;
            serde_json::from_str(&text).map_err(|e| Error::Corrupt {
                op,
                detail: format!("{col}: {e}"),
            })
        };
        Ok::<ApprovalRow, Error>(ApprovalRow {
            approval_id: r.try_get("approval_id").map_err(db(op))?,
            token_hash: r.try_get("token_hash").map_err(db(op))?,
            session_id: r.try_get("session_id").map_err(db(op))?,
            target_id: r.try_get("target_id").map_err(db(op))?,
            tool_id: r.try_get("tool_id").map_err(db(op))?,
            arguments: json("arguments")?,
            effect: json("effect")?,
            status: {
                let name: String = r.try_get("status").map_err(db(op))?;
                ApprovalStatus::named(&name).ok_or_else(|| Error::Corrupt {
                    op,
                    detail: format!("status: no approval status `{name}`"),
                })?
            },
            requested_at_ms: r.try_get("requested_at").map_err(db(op))?,
            expires_at_ms: r.try_get("expires_at").map_err(db(op))?,
            decided_at_ms: r.try_get("decided_at").map_err(db(op))?,
            reason: r.try_get("reason").map_err(db(op))?,
            preview_event_id: r.try_get("preview_event_id").map_err(db(op))?,
            applied_event_id: r.try_get("applied_event_id").map_err(db(op))?,
        })
    }};
}

/// Where an idempotency record lives: the key as its owner (`lease:<lineage>`) used it for a
/// tool on a target. Another owner's identical key is another record.
#[derive(Debug, Clone, Copy)]
pub struct IdempotencyKey<'a> {
    pub owner: &'a str,
    pub target_id: &'a str,
    pub tool_id: &'a str,
    pub key: &'a str,
}

/// Where a key's execution is: `claimed` while the claimer runs it, `done` with its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimState {
    Claimed,
    Done,
}

impl ClaimState {
    fn as_str(self) -> &'static str {
        match self {
            ClaimState::Claimed => "claimed",
            ClaimState::Done => "done",
        }
    }

    fn named(name: &str) -> Option<ClaimState> {
        [ClaimState::Claimed, ClaimState::Done]
            .into_iter()
            .find(|s| s.as_str() == name)
    }
}

/// An idempotency record: a key claimed by the execution that runs it (`event_id`), then its
/// first result.
#[derive(Debug, Clone)]
pub struct IdempotencyRow {
    pub args_hash: String,
    pub state: ClaimState,
    /// The result (JSON text) once `done`; empty while `claimed`.
    pub result: String,
    /// The event of the execution that claimed the key (and ran it).
    pub event_id: String,
    /// Who holds a claim: the replica that runs it (`single` on SQLite).
    pub claimed_by: String,
    /// When a claim no execution finished may be taken over (ms since the epoch).
    pub expires_at_ms: i64,
    /// What the claimer runs, for a caller who waits (a fleet write's run: `{"run_id": …}`).
    pub detail: Option<String>,
}

/// What claiming a key found.
#[derive(Debug, Clone)]
pub enum Claim {
    /// The key is this caller's to run: new (`None`), or a stale claim taken over, with
    /// what its execution had noted ([`Store::note_idempotency`]).
    Won(Option<String>),
    /// Another execution claimed or ran it first: its record.
    Held(IdempotencyRow),
}

/// A claim asked for: the key, the arguments' hash and the execution (its event) that runs it.
#[derive(Debug, Clone, Copy)]
pub struct NewClaim<'a> {
    pub args_hash: &'a str,
    pub event_id: &'a str,
    pub claimed_by: &'a str,
    pub now_ms: i64,
    pub expires_at_ms: i64,
}

const IDEMPOTENCY_WHERE: &str = "owner = $1 AND target_id = $2 AND tool_id = $3 AND idem_key = $4";

impl Store {
    // ---- safe writes --------------------------------------------------------------------

    pub async fn insert_confirmation(&self, c: &ConfirmationRow) -> Result<()> {
        let op = "insert confirmation";
        on_pool!(self, pool => {
            // One transaction (one commit) for the token and the sweep.
            let mut tx = begin_write(pool).await.map_err(db(op))?;
            sqlx::query(
                "INSERT INTO confirmations (token_hash, session_id, tool_id, target_id, args_hash, expires_at, arguments, effect)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(&c.token_hash)
            .bind(&c.session_id)
            .bind(&c.tool_id)
            .bind(&c.target_id)
            .bind(&c.args_hash)
            .bind(c.expires_at_ms)
            .bind(&c.arguments)
            .bind(&c.effect)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
            // Tokens expired a day ago are useless; drop them on the way (an index range).
            sqlx::query("DELETE FROM confirmations WHERE expires_at < $1")
                .bind(c.expires_at_ms - 24 * 3600 * 1000)
                .execute(&mut *tx)
                .await
                .map_err(db(op))?;
            tx.commit().await.map_err(db(op))?;
            Ok(())
        })
    }

    /// Removes and returns a confirmation: a token can be consumed once, whatever follows.
    pub async fn consume_confirmation(&self, token_hash: &str) -> Result<Option<ConfirmationRow>> {
        on_pool!(self, pool => {
            let row = sqlx::query(
                "DELETE FROM confirmations WHERE token_hash = $1
                 RETURNING token_hash, session_id, tool_id, target_id, args_hash, expires_at, arguments, effect",
            )
            .bind(token_hash)
            .fetch_optional(pool)
            .await
            .map_err(db("consume confirmation"))?;
            let op = "consume confirmation";
            row.map(|r| -> Result<ConfirmationRow> {
                Ok(ConfirmationRow {
                    token_hash: r.try_get("token_hash").map_err(db(op))?,
                    session_id: r.try_get("session_id").map_err(db(op))?,
                    tool_id: r.try_get("tool_id").map_err(db(op))?,
                    target_id: r.try_get("target_id").map_err(db(op))?,
                    args_hash: r.try_get("args_hash").map_err(db(op))?,
                    expires_at_ms: r.try_get("expires_at").map_err(db(op))?,
                    arguments: r.try_get("arguments").map_err(db(op))?,
                    effect: r.try_get("effect").map_err(db(op))?,
                })
            })
            .transpose()
        })
    }

    pub async fn get_idempotency(&self, at: &IdempotencyKey<'_>) -> Result<Option<IdempotencyRow>> {
        let op = "get idempotency";
        on_pool!(self, pool => {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT args_hash, state, result, event_id, claimed_by, expires_at, detail
                 FROM idempotency_keys WHERE {IDEMPOTENCY_WHERE}"
            )))
            .bind(at.owner)
            .bind(at.target_id)
            .bind(at.tool_id)
            .bind(at.key)
            .fetch_optional(pool)
            .await
            .map_err(db(op))?;
            row.map(|r| -> Result<IdempotencyRow> {
                let state: String = r.try_get("state").map_err(db(op))?;
                Ok(IdempotencyRow {
                    args_hash: r.try_get("args_hash").map_err(db(op))?,
                    state: ClaimState::named(&state).ok_or_else(|| Error::Corrupt {
                        op,
                        detail: format!("state: no claim state `{state}`"),
                    })?,
                    result: r.try_get("result").map_err(db(op))?,
                    event_id: r.try_get("event_id").map_err(db(op))?,
                    claimed_by: r
                        .try_get::<Option<String>, _>("claimed_by")
                        .map_err(db(op))?
                        .unwrap_or_default(),
                    expires_at_ms: r
                        .try_get::<Option<i64>, _>("expires_at")
                        .map_err(db(op))?
                        .unwrap_or(0),
                    detail: r.try_get("detail").map_err(db(op))?,
                })
            })
            .transpose()
        })
    }

    /// Claims `at` for the execution `c.event_id`, before anything runs: one statement that
    /// inserts the claim or finds the key's record, so of any number of concurrent callers
    /// (on any replica sharing the store) exactly one wins. A claim past its expiry (its
    /// claimer died mid-way) is taken over by one statement too.
    pub async fn claim_idempotency(
        &self,
        at: &IdempotencyKey<'_>,
        c: &NewClaim<'_>,
    ) -> Result<Claim> {
        let op = "claim idempotency";
        let won = on_pool!(self, pool => {
            let inserted = sqlx::query(
                "INSERT INTO idempotency_keys (owner, target_id, tool_id, idem_key, args_hash, result, event_id, created_at, state, claimed_by, expires_at)
                 VALUES ($1, $2, $3, $4, $5, '', $6, $7, 'claimed', $8, $9)
                 ON CONFLICT (owner, target_id, tool_id, idem_key) DO NOTHING RETURNING event_id",
            )
            .bind(at.owner)
            .bind(at.target_id)
            .bind(at.tool_id)
            .bind(at.key)
            .bind(c.args_hash)
            .bind(c.event_id)
            .bind(c.now_ms)
            .bind(c.claimed_by)
            .bind(c.expires_at_ms)
            .fetch_optional(pool)
            .await
            .map_err(db(op))?;
            if inserted.is_some() {
                Some(None)
            } else {
                // A stale claim, with the same arguments: taken over by one caller.
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "UPDATE idempotency_keys SET event_id = $5, claimed_by = $6, expires_at = $7, created_at = $8
                     WHERE {IDEMPOTENCY_WHERE} AND state = 'claimed' AND expires_at < $8 AND args_hash = $9
                     RETURNING detail"
                )))
                .bind(at.owner)
                .bind(at.target_id)
                .bind(at.tool_id)
                .bind(at.key)
                .bind(c.event_id)
                .bind(c.claimed_by)
                .bind(c.expires_at_ms)
                .bind(c.now_ms)
                .bind(c.args_hash)
                .fetch_optional(pool)
                .await
                .map_err(db(op))?
                .map(|r| r.try_get::<Option<String>, _>("detail"))
                .transpose()
                .map_err(db(op))?
            }
        });
        if let Some(detail) = won {
            return Ok(Claim::Won(detail));
        }
        match self.get_idempotency(at).await? {
            Some(row) => Ok(Claim::Held(row)),
            // Released between the insert and the read: claim it again.
            None => Box::pin(self.claim_idempotency(at, c)).await,
        }
    }

    /// Records the result of the execution that holds `at`'s claim (`event_id`): the key is
    /// `done`, and every later caller is answered this result. False when the claim is not
    /// `event_id`'s any more (it expired and another took it over).
    pub async fn finish_idempotency(
        &self,
        at: &IdempotencyKey<'_>,
        event_id: &str,
        result: &str,
    ) -> Result<bool> {
        on_pool!(self, pool => {
            let done = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE idempotency_keys SET state = 'done', result = $5, detail = NULL
                 WHERE {IDEMPOTENCY_WHERE} AND state = 'claimed' AND event_id = $6"
            )))
            .bind(at.owner)
            .bind(at.target_id)
            .bind(at.tool_id)
            .bind(at.key)
            .bind(result)
            .bind(event_id)
            .execute(pool)
            .await
            .map_err(db("finish idempotency"))?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Notes what the claim of `event_id` runs, for callers who wait on it.
    pub async fn note_idempotency(
        &self,
        at: &IdempotencyKey<'_>,
        event_id: &str,
        detail: &str,
    ) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE idempotency_keys SET detail = $5
                 WHERE {IDEMPOTENCY_WHERE} AND state = 'claimed' AND event_id = $6"
            )))
            .bind(at.owner)
            .bind(at.target_id)
            .bind(at.tool_id)
            .bind(at.key)
            .bind(detail)
            .bind(event_id)
            .execute(pool)
            .await
            .map_err(db("note idempotency"))?;
            Ok(())
        })
    }

    /// Releases the claim of `event_id` on `at`: its execution ran nothing (refused before
    /// it reached the target, or failed), so the key may be executed again.
    pub async fn release_idempotency(&self, at: &IdempotencyKey<'_>, event_id: &str) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM idempotency_keys WHERE {IDEMPOTENCY_WHERE} AND state = 'claimed' AND event_id = $5"
            )))
            .bind(at.owner)
            .bind(at.target_id)
            .bind(at.tool_id)
            .bind(at.key)
            .bind(event_id)
            .execute(pool)
            .await
            .map_err(db("release idempotency"))?;
            Ok(())
        })
    }

    /// At start: settles the claims `claimed_by` (this replica) left by a crash, whose callers
    /// got no answer. One that never got past its confirmation ran nothing: released. One
    /// that did (its detail notes what it redeemed) expires now, for the next caller with
    /// its key to take over and send again under the same hub key, which the target's own
    /// ledger answers with the first execution if it got that far.
    pub async fn release_claims_of(&self, claimed_by: &str) -> Result<u64> {
        let op = "release claims";
        on_pool!(self, pool => {
            let mut tx = begin_write(pool).await.map_err(db(op))?;
            let released = sqlx::query(
                "DELETE FROM idempotency_keys WHERE state = 'claimed' AND claimed_by = $1 AND detail IS NULL",
            )
            .bind(claimed_by)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
            let expired = sqlx::query(
                "UPDATE idempotency_keys SET expires_at = 0 WHERE state = 'claimed' AND claimed_by = $1",
            )
            .bind(claimed_by)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
            tx.commit().await.map_err(db(op))?;
            Ok(released.rows_affected() + expired.rows_affected())
        })
    }

    // ---- approvals --------------------------------------------------------------------------

    pub async fn insert_approval(&self, a: &ApprovalRow) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO approvals ({APPROVAL_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
            )))
            .bind(&a.approval_id)
            .bind(&a.token_hash)
            .bind(&a.session_id)
            .bind(&a.target_id)
            .bind(&a.tool_id)
            .bind(a.arguments.to_string())
            .bind(a.effect.to_string())
            .bind(a.status.as_str())
            .bind(a.requested_at_ms)
            .bind(a.expires_at_ms)
            .bind(a.decided_at_ms)
            .bind(&a.reason)
            .bind(&a.preview_event_id)
            .bind(&a.applied_event_id)
            .execute(pool)
            .await
            .map_err(db("insert approval"))?;
            Ok(())
        })
    }

    /// One approval by id, or by the hash of its confirmation token.
    pub async fn get_approval(
        &self,
        id: Option<&str>,
        token_hash: Option<&str>,
    ) -> Result<Option<ApprovalRow>> {
        let (col, value) = match (id, token_hash) {
            (Some(id), _) => ("approval_id", id),
            (None, Some(h)) => ("token_hash", h),
            (None, None) => return Ok(None),
        };
        on_pool!(self, pool => {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE {col} = $1"
            )))
            .bind(value)
            .fetch_optional(pool)
            .await
            .map_err(db("get approval"))?;
            row.map(|r| approval_from_row!(&r, "get approval")).transpose()
        })
    }

    /// Approvals newest first, optionally only those with a stored `status`.
    pub async fn list_approvals(
        &self,
        status: Option<ApprovalStatus>,
        limit: i64,
    ) -> Result<Vec<ApprovalRow>> {
        on_pool!(self, pool => {
            let rows = match status {
                Some(s) => sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE status = $1 ORDER BY requested_at DESC LIMIT $2"
                )))
                .bind(s.as_str())
                .bind(limit.clamp(1, 1_000))
                .fetch_all(pool)
                .await,
                None => sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals ORDER BY requested_at DESC LIMIT $1"
                )))
                .bind(limit.clamp(1, 1_000))
                .fetch_all(pool)
                .await,
            }
            .map_err(db("list approvals"))?;
            rows.iter().map(|r| approval_from_row!(r, "list approvals")).collect()
        })
    }

    /// Moves an approval from `from` to `to` (with the decision's time and reason, or the
    /// applying event); false when it was not in `from` or has expired (nothing changes).
    pub async fn transition_approval(
        &self,
        id: &str,
        from: ApprovalStatus,
        to: ApprovalStatus,
        now_ms: i64,
        reason: Option<&str>,
        applied_event_id: Option<&str>,
    ) -> Result<bool> {
        on_pool!(self, pool => {
            let done = sqlx::query(
                "UPDATE approvals SET status = $1,
                     decided_at = CASE WHEN $2 = 'applied' THEN decided_at ELSE $3 END,
                     reason = COALESCE($4, reason),
                     applied_event_id = COALESCE($5, applied_event_id)
                 WHERE approval_id = $6 AND status = $7 AND expires_at > $3",
            )
            .bind(to.as_str())
            .bind(to.as_str())
            .bind(now_ms)
            .bind(reason)
            .bind(applied_event_id)
            .bind(id)
            .bind(from.as_str())
            .execute(pool)
            .await
            .map_err(db("transition approval"))?;
            Ok(done.rows_affected() == 1)
        })
    }
}
