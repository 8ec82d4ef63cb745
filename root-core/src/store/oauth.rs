//! OAuth sign-in's records: registered clients and grants (an operator's approval of one
//! client's sign-in, with its code and refresh token as hashes).

use super::*;

/// A grant as stored: what the operator approved, and where its tokens are now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantRow {
    pub grant_id: String,
    pub client_id: String,
    /// The operator who approved (a name, as `operator:<name>` names them in the trail).
    pub operator: String,
    pub target_id: String,
    pub capability_profile: String,
    /// The MCP URL every token of the grant is bound to (RFC 8707).
    pub resource: String,
    pub redirect_uri: String,
    /// PKCE S256 challenge of the authorization request.
    pub code_challenge: String,
    pub code_hash: String,
    pub code_expires_at_ms: i64,
    pub code_used_at_ms: Option<i64>,
    pub created_at_ms: i64,
    /// The end of the operator's approval: no token of the grant outlives it.
    pub expires_at_ms: i64,
    /// The lease the grant's current access token is.
    pub session_id: Option<String>,
    pub refresh_hash: Option<String>,
    pub ended_at_ms: Option<i64>,
    /// The thumbprint of the key the client proved at its code exchange (DPoP): every token
    /// of the grant is bound to it, and a refresh needs a proof it signed.
    pub dpop_jkt: Option<String>,
}

const GRANT_COLUMNS: &str = "grant_id, client_id, operator, target_id, capability_profile, resource, \
     redirect_uri, code_challenge, code_hash, code_expires_at, code_used_at, created_at, expires_at, \
     session_id, refresh_hash, ended_at, dpop_jkt";

/// A [`GrantRow`] from a row of either backend (the row types differ, the columns do not).
macro_rules! grant_from_row {
    ($r:expr) => {{
        let (r, op) = ($r, "read an oauth grant");
        Ok::<GrantRow, Error>(GrantRow {
            grant_id: r.try_get("grant_id").map_err(db(op))?,
            client_id: r.try_get("client_id").map_err(db(op))?,
            operator: r.try_get("operator").map_err(db(op))?,
            target_id: r.try_get("target_id").map_err(db(op))?,
            capability_profile: r.try_get("capability_profile").map_err(db(op))?,
            resource: r.try_get("resource").map_err(db(op))?,
            redirect_uri: r.try_get("redirect_uri").map_err(db(op))?,
            code_challenge: r.try_get("code_challenge").map_err(db(op))?,
            code_hash: r.try_get("code_hash").map_err(db(op))?,
            code_expires_at_ms: r.try_get("code_expires_at").map_err(db(op))?,
            code_used_at_ms: r.try_get("code_used_at").map_err(db(op))?,
            created_at_ms: r.try_get("created_at").map_err(db(op))?,
            expires_at_ms: r.try_get("expires_at").map_err(db(op))?,
            session_id: r.try_get("session_id").map_err(db(op))?,
            refresh_hash: r.try_get("refresh_hash").map_err(db(op))?,
            ended_at_ms: r.try_get("ended_at").map_err(db(op))?,
            dpop_jkt: r.try_get("dpop_jkt").map_err(db(op))?,
        })
    }};
}

/// What registering a client came to ([`Store::insert_oauth_client`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registered {
    /// Stored, after dropping `evicted` registrations that never signed in.
    Stored { evicted: u64 },
    /// Every registration kept has signed in: nothing was stored.
    Full,
}

/// How a refresh token was found ([`Store::claim_refresh`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefreshClaim {
    /// The grant's current token, now replaced by the new one: the caller issues the lease.
    Claimed(Box<GrantRow>),
    /// A token the live grant replaced earlier (or a concurrent refresh won): a reuse.
    Spent {
        grant_id: String,
    },
    /// A token of a grant that has ended.
    Ended,
    /// The live grant's current token, bound to another DPoP key than the caller proved (or
    /// the caller proved none): nothing spent.
    OtherHolder,
    Unknown,
}

impl Store {
    // ---- oauth ----------------------------------------------------------------------------

    /// Registers a client while fewer than `max` are registered. When full, the oldest
    /// registration that never got a grant is dropped first (anyone may register, so unused
    /// ones must not lock the registry); `Full` when every one has signed in.
    pub async fn insert_oauth_client(
        &self,
        client_id: &str,
        metadata: &str,
        now_ms: i64,
        max: u64,
    ) -> Result<Registered> {
        let op = "register an oauth client";
        on_pool!(self, pool => {
            let count = async || -> Result<u64> {
                let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM oauth_clients")
                    .fetch_one(pool)
                    .await
                    .map_err(db(op))?;
                Ok(n as u64)
            };
            let mut evicted = 0;
            while count().await? >= max {
                let dropped = sqlx::query(
                    "DELETE FROM oauth_clients WHERE client_id = (
                         SELECT client_id FROM oauth_clients
                         WHERE client_id NOT IN (SELECT client_id FROM oauth_grants)
                         ORDER BY created_at, client_id LIMIT 1)",
                )
                .execute(pool)
                .await
                .map_err(db(op))?;
                if dropped.rows_affected() == 0 {
                    return Ok(Registered::Full);
                }
                evicted += 1;
            }
            sqlx::query("INSERT INTO oauth_clients (client_id, metadata, created_at) VALUES ($1, $2, $3)")
                .bind(client_id)
                .bind(metadata)
                .bind(now_ms)
                .execute(pool)
                .await
                .map_err(db(op))?;
            Ok(Registered::Stored { evicted })
        })
    }

    /// A registered client's metadata (JSON), if it is registered.
    pub async fn oauth_client(&self, client_id: &str) -> Result<Option<String>> {
        on_pool!(self, pool => {
            sqlx::query_scalar("SELECT metadata FROM oauth_clients WHERE client_id = $1")
                .bind(client_id)
                .fetch_optional(pool)
                .await
                .map_err(db("read an oauth client"))
        })
    }

    pub async fn insert_oauth_grant(&self, g: &GrantRow) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO oauth_grants ({GRANT_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)"
            )))
            .bind(&g.grant_id)
            .bind(&g.client_id)
            .bind(&g.operator)
            .bind(&g.target_id)
            .bind(&g.capability_profile)
            .bind(&g.resource)
            .bind(&g.redirect_uri)
            .bind(&g.code_challenge)
            .bind(&g.code_hash)
            .bind(g.code_expires_at_ms)
            .bind(g.code_used_at_ms)
            .bind(g.created_at_ms)
            .bind(g.expires_at_ms)
            .bind(&g.session_id)
            .bind(&g.refresh_hash)
            .bind(g.ended_at_ms)
            .bind(&g.dpop_jkt)
            .execute(pool)
            .await
            .map_err(db("store an oauth grant"))?;
            Ok(())
        })
    }

    /// Marks a code used and returns its grant; `Err(grant)` when it was used before (a
    /// replay: the caller ends the grant), `Ok(None)` when no grant has it.
    pub async fn claim_code(
        &self,
        code_hash: &str,
        now_ms: i64,
    ) -> Result<std::result::Result<Option<GrantRow>, GrantRow>> {
        let op = "claim an oauth code";
        on_pool!(self, pool => {
            let claimed = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE oauth_grants SET code_used_at = $2
                 WHERE code_hash = $1 AND code_used_at IS NULL RETURNING {GRANT_COLUMNS}"
            )))
            .bind(code_hash)
            .bind(now_ms)
            .fetch_optional(pool)
            .await
            .map_err(db(op))?;
            if let Some(r) = claimed {
                return Ok(Ok(Some(grant_from_row!(&r)?)));
            }
            let used = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {GRANT_COLUMNS} FROM oauth_grants WHERE code_hash = $1"
            )))
            .bind(code_hash)
            .fetch_optional(pool)
            .await
            .map_err(db(op))?;
            match used {
                Some(r) => Ok(Err(grant_from_row!(&r)?)),
                None => Ok(Ok(None)),
            }
        })
    }

    /// Replaces a grant's current refresh token by `new_hash` (one caller wins), keeping the
    /// old one as spent. A grant bound to a DPoP key is claimed only by a caller who proved
    /// that key (`holder`, its thumbprint).
    pub async fn claim_refresh(
        &self,
        old_hash: &str,
        new_hash: &str,
        holder: Option<&str>,
        now_ms: i64,
    ) -> Result<RefreshClaim> {
        let op = "claim an oauth refresh token";
        on_pool!(self, pool => {
            let mut tx = begin_write(pool).await.map_err(db(op))?;
            let claimed = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE oauth_grants SET refresh_hash = $2
                 WHERE refresh_hash = $1 AND ended_at IS NULL
                   AND (dpop_jkt IS NULL OR dpop_jkt = $3) RETURNING {GRANT_COLUMNS}"
            )))
            .bind(old_hash)
            .bind(new_hash)
            .bind(holder)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db(op))?;
            let answer = match claimed {
                Some(r) => {
                    let grant = grant_from_row!(&r)?;
                    sqlx::query(
                        "INSERT INTO oauth_spent_refresh (token_hash, grant_id, spent_at) VALUES ($1, $2, $3)",
                    )
                    .bind(old_hash)
                    .bind(&grant.grant_id)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await
                    .map_err(db(op))?;
                    RefreshClaim::Claimed(Box::new(grant))
                }
                None => {
                    let spent: Option<(String, Option<i64>)> = sqlx::query_as(
                        "SELECT s.grant_id, g.ended_at FROM oauth_spent_refresh s
                         JOIN oauth_grants g ON g.grant_id = s.grant_id WHERE s.token_hash = $1",
                    )
                    .bind(old_hash)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db(op))?;
                    let current: Option<(String,)> = sqlx::query_as(
                        "SELECT grant_id FROM oauth_grants WHERE refresh_hash = $1 AND ended_at IS NULL",
                    )
                    .bind(old_hash)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db(op))?;
                    match (spent, current) {
                        (_, Some(_)) => RefreshClaim::OtherHolder,
                        (Some((grant_id, None)), None) => RefreshClaim::Spent { grant_id },
                        (Some((_, Some(_))), None) => RefreshClaim::Ended,
                        (None, None) => RefreshClaim::Unknown,
                    }
                }
            };
            tx.commit().await.map_err(db(op))?;
            Ok(answer)
        })
    }

    /// The live grant whose current refresh token or current lease is `refresh_hash` or
    /// `session_id` (a revocation request names one of them).
    pub async fn live_grant_of(
        &self,
        refresh_hash: &str,
        session_id: Option<&str>,
    ) -> Result<Option<GrantRow>> {
        on_pool!(self, pool => {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {GRANT_COLUMNS} FROM oauth_grants
                 WHERE ended_at IS NULL AND (refresh_hash = $1 OR session_id = $2)"
            )))
            .bind(refresh_hash)
            .bind(session_id)
            .fetch_optional(pool)
            .await
            .map_err(db("find an oauth grant"))?;
            row.map(|r| grant_from_row!(&r)).transpose()
        })
    }

    /// The lease a grant's tokens are now, and its refresh token and holder's key (after a
    /// code exchange).
    pub async fn set_grant_tokens(
        &self,
        grant_id: &str,
        session_id: &str,
        refresh_hash: Option<&str>,
        dpop_jkt: Option<&str>,
    ) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(
                "UPDATE oauth_grants SET session_id = $2, refresh_hash = COALESCE($3, refresh_hash),
                 dpop_jkt = COALESCE($4, dpop_jkt)
                 WHERE grant_id = $1",
            )
            .bind(grant_id)
            .bind(session_id)
            .bind(refresh_hash)
            .bind(dpop_jkt)
            .execute(pool)
            .await
            .map_err(db("record an oauth grant's tokens"))?;
            Ok(())
        })
    }

    /// Ends a grant (its refresh token, kept as spent, no longer works); returns it if it
    /// was live.
    pub async fn end_grant(&self, grant_id: &str, now_ms: i64) -> Result<Option<GrantRow>> {
        Ok(self
            .end_grants("grant_id", grant_id, now_ms)
            .await?
            .into_iter()
            .next())
    }

    /// Ends the live grants operator `name` approved (the operator was revoked); returns them.
    pub async fn end_grants_of_operator(&self, name: &str, now_ms: i64) -> Result<Vec<GrantRow>> {
        self.end_grants("operator", name, now_ms).await
    }

    /// Whether grant `grant_id` is live (not ended).
    pub(crate) async fn grant_live(&self, grant_id: &str) -> Result<bool> {
        on_pool!(self, pool => {
            let ended: Option<Option<i64>> =
                sqlx::query_scalar("SELECT ended_at FROM oauth_grants WHERE grant_id = $1")
                    .bind(grant_id)
                    .fetch_optional(pool)
                    .await
                    .map_err(db("read an oauth grant"))?;
            Ok(matches!(ended, Some(None)))
        })
    }

    /// A grant by id, live or ended.
    pub async fn grant(&self, grant_id: &str) -> Result<Option<GrantRow>> {
        on_pool!(self, pool => {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {GRANT_COLUMNS} FROM oauth_grants WHERE grant_id = $1"
            )))
            .bind(grant_id)
            .fetch_optional(pool)
            .await
            .map_err(db("read an oauth grant"))?;
            row.map(|r| grant_from_row!(&r)).transpose()
        })
    }

    /// Ends the grants whose tokens are lease `session_id` (the operator revoked it).
    pub async fn end_grants_of_lease(&self, session_id: &str, now_ms: i64) -> Result<u64> {
        Ok(self
            .end_grants("session_id", session_id, now_ms)
            .await?
            .len() as u64)
    }

    /// Ends the live grants whose `column` is `value`, keeping their current refresh tokens
    /// as spent (so a later refresh is told the sign-in ended); returns them.
    async fn end_grants(
        &self,
        column: &'static str,
        value: &str,
        now_ms: i64,
    ) -> Result<Vec<GrantRow>> {
        let op = "end oauth grants";
        on_pool!(self, pool => {
            let mut tx = begin_write(pool).await.map_err(db(op))?;
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO oauth_spent_refresh (token_hash, grant_id, spent_at)
                 SELECT refresh_hash, grant_id, $2 FROM oauth_grants
                 WHERE {column} = $1 AND ended_at IS NULL AND refresh_hash IS NOT NULL"
            )))
            .bind(value)
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE oauth_grants SET ended_at = $2, refresh_hash = NULL
                 WHERE {column} = $1 AND ended_at IS NULL RETURNING {GRANT_COLUMNS}"
            )))
            .bind(value)
            .bind(now_ms)
            .fetch_all(&mut *tx)
            .await
            .map_err(db(op))?;
            tx.commit().await.map_err(db(op))?;
            rows.iter().map(|r| grant_from_row!(r)).collect()
        })
    }
}
