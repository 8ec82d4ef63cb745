//! Named operators' credentials.

use super::*;

/// A named operator as stored (the credential's hash only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorRow {
    pub name: String,
    pub token_hash: String,
    pub created_at_ms: i64,
    pub created_by: String,
    pub revoked_at_ms: Option<i64>,
    pub revoked_by: Option<String>,
    /// Roles, comma-separated (`crate::roles::Grant`'s stored form); `None` for an operator
    /// stored before roles existed.
    pub roles: Option<String>,
    /// Capability profiles the operator may issue leases for, comma-separated (`*`: all).
    pub profiles: Option<String>,
}

impl Store {
    // ---- operators ----------------------------------------------------------------------

    /// Adds an operator; `Ok(false)` when the name is taken (active or revoked: names are
    /// never reused, so the trail's actors stay unambiguous).
    pub async fn insert_operator(&self, o: &OperatorRow) -> Result<bool> {
        on_pool!(self, pool => {
            let res = sqlx::query(
                "INSERT INTO operators (name, token_hash, created_at, created_by, roles, profiles)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO NOTHING",
            )
            .bind(&o.name)
            .bind(&o.token_hash)
            .bind(o.created_at_ms)
            .bind(&o.created_by)
            .bind(&o.roles)
            .bind(&o.profiles)
            .execute(pool)
            .await
            .map_err(db("insert operator"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    /// Every operator, oldest first.
    pub async fn load_operators(&self) -> Result<Vec<OperatorRow>> {
        let op = "load operators";
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT name, token_hash, created_at, created_by, revoked_at, revoked_by, roles,
                        profiles
                 FROM operators ORDER BY created_at, name",
            )
            .fetch_all(pool)
            .await
            .map_err(db(op))?;
            rows.iter().map(|r| -> Result<OperatorRow> {
                Ok(OperatorRow {
                    name: r.try_get("name").map_err(db(op))?,
                    token_hash: r.try_get("token_hash").map_err(db(op))?,
                    created_at_ms: r.try_get("created_at").map_err(db(op))?,
                    created_by: r.try_get("created_by").map_err(db(op))?,
                    revoked_at_ms: r.try_get("revoked_at").map_err(db(op))?,
                    revoked_by: r.try_get("revoked_by").map_err(db(op))?,
                    roles: r.try_get("roles").map_err(db(op))?,
                    profiles: r.try_get("profiles").map_err(db(op))?,
                })
            }).collect()
        })
    }

    /// Revokes an active operator; `Ok(false)` when there is none of that name.
    pub async fn revoke_operator(&self, name: &str, at_ms: i64, by: &str) -> Result<bool> {
        on_pool!(self, pool => {
            let res = sqlx::query(
                "UPDATE operators SET revoked_at = $1, revoked_by = $2
                 WHERE name = $3 AND revoked_at IS NULL",
            )
            .bind(at_ms)
            .bind(by)
            .bind(name)
            .execute(pool)
            .await
            .map_err(db("revoke operator"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    // ---- people signed in through the OpenID provider -----------------------------------

    /// Records a sign-in of `who` (an `operators` row named `oidc:…`, active again if it was
    /// revoked, with the grant the provider's groups map to now) and the identity's check
    /// state: its email, encrypted refresh token and next check.
    pub async fn sign_in_oidc(
        &self,
        who: &OidcIdentity,
        roles: &str,
        profiles: &str,
    ) -> Result<()> {
        let op = "record an OpenID sign-in";
        on_pool!(self, pool => {
            let mut tx = pool.begin().await.map_err(db(op))?;
            sqlx::query(
                "INSERT INTO operators (name, token_hash, created_at, created_by, roles, profiles)
                 VALUES ($1, $2, $3, 'oidc', $4, $5)
                 ON CONFLICT (name) DO UPDATE SET roles = excluded.roles,
                     profiles = excluded.profiles, revoked_at = NULL, revoked_by = NULL",
            )
            .bind(&who.name)
            .bind(&who.name)
            .bind(who.signed_in_at_ms)
            .bind(roles)
            .bind(profiles)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
            sqlx::query(
                "INSERT INTO oidc_identities (name, email, refresh_token, signed_in_at, next_check)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (name) DO UPDATE SET email = excluded.email,
                     refresh_token = excluded.refresh_token, signed_in_at = excluded.signed_in_at,
                     next_check = excluded.next_check",
            )
            .bind(&who.name)
            .bind(&who.email)
            .bind(&who.refresh_token)
            .bind(who.signed_in_at_ms)
            .bind(who.next_check_ms)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
            tx.commit().await.map_err(db(op))
        })
    }

    /// Claims the active identities due for a check at `now_ms` (each claimed by one replica:
    /// its next check moves to `next_ms` in the same statement).
    pub async fn due_oidc_identities(
        &self,
        now_ms: i64,
        next_ms: i64,
    ) -> Result<Vec<OidcIdentity>> {
        let op = "claim OpenID identities to check";
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "UPDATE oidc_identities SET next_check = $2
                 WHERE next_check <= $1 AND name IN
                     (SELECT name FROM operators WHERE revoked_at IS NULL)
                 RETURNING name, email, refresh_token, signed_in_at, next_check",
            )
            .bind(now_ms)
            .bind(next_ms)
            .fetch_all(pool)
            .await
            .map_err(db(op))?;
            rows.iter().map(|r| -> Result<OidcIdentity> {
                Ok(OidcIdentity {
                    name: r.try_get("name").map_err(db(op))?,
                    email: r.try_get("email").map_err(db(op))?,
                    refresh_token: r.try_get("refresh_token").map_err(db(op))?,
                    signed_in_at_ms: r.try_get("signed_in_at").map_err(db(op))?,
                    next_check_ms: r.try_get("next_check").map_err(db(op))?,
                })
            }).collect()
        })
    }

    /// After a check the provider passed: the identity's new refresh token (when it rotated
    /// it) and grant.
    pub async fn checked_oidc(
        &self,
        name: &str,
        refresh_token: Option<&str>,
        roles: &str,
        profiles: &str,
    ) -> Result<()> {
        let op = "record an OpenID check";
        on_pool!(self, pool => {
            let mut tx = pool.begin().await.map_err(db(op))?;
            sqlx::query(
                "UPDATE oidc_identities SET refresh_token = COALESCE($2, refresh_token)
                 WHERE name = $1",
            )
            .bind(name)
            .bind(refresh_token)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
            sqlx::query(
                "UPDATE operators SET roles = $2, profiles = $3
                 WHERE name = $1 AND revoked_at IS NULL",
            )
            .bind(name)
            .bind(roles)
            .bind(profiles)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
            tx.commit().await.map_err(db(op))
        })
    }
}

/// A CLI's sign-in between two of its requests (`oidc_pending`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcPending {
    pub challenge: Option<String>,
    /// Who signed in (JSON), or why not; `None` while a device grant waits.
    pub outcome: Option<String>,
    pub expires_at_ms: i64,
}

impl Store {
    /// Keeps a CLI's sign-in under `id_hash` (`kind`: `code` or `device`) until
    /// `expires_at_ms`; drops the expired ones.
    pub async fn keep_oidc_pending(
        &self,
        id_hash: &str,
        kind: &str,
        p: &OidcPending,
        now_ms: i64,
    ) -> Result<()> {
        let op = "keep a CLI sign-in";
        on_pool!(self, pool => {
            sqlx::query("DELETE FROM oidc_pending WHERE expires_at <= $1")
                .bind(now_ms)
                .execute(pool)
                .await
                .map_err(db(op))?;
            sqlx::query(
                "INSERT INTO oidc_pending (id_hash, kind, challenge, outcome, expires_at)
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(id_hash)
            .bind(kind)
            .bind(&p.challenge)
            .bind(&p.outcome)
            .bind(p.expires_at_ms)
            .execute(pool)
            .await
            .map_err(db(op))?;
            Ok(())
        })
    }

    /// A device grant's outcome, once the provider said (who signed in, or why not).
    pub async fn settle_oidc_pending(&self, id_hash: &str, outcome: &str) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query("UPDATE oidc_pending SET outcome = $2 WHERE id_hash = $1")
                .bind(id_hash)
                .bind(outcome)
                .execute(pool)
                .await
                .map_err(db("settle a device sign-in"))?;
            Ok(())
        })
    }

    /// Takes the CLI sign-in `id_hash` of `kind` out, once, if it has an outcome (a device
    /// grant still waiting is left, and answered `Ok(Some)` with no outcome); `None` for
    /// one unknown, taken before, or expired.
    pub async fn take_oidc_pending(
        &self,
        id_hash: &str,
        kind: &str,
        now_ms: i64,
    ) -> Result<Option<OidcPending>> {
        let op = "take a CLI sign-in";
        on_pool!(self, pool => {
            let row = sqlx::query(
                "DELETE FROM oidc_pending
                 WHERE id_hash = $1 AND kind = $2 AND expires_at > $3 AND outcome IS NOT NULL
                 RETURNING challenge, outcome, expires_at",
            )
            .bind(id_hash)
            .bind(kind)
            .bind(now_ms)
            .fetch_optional(pool)
            .await
            .map_err(db(op))?;
            if let Some(r) = row {
                return Ok(Some(OidcPending {
                    challenge: r.try_get("challenge").map_err(db(op))?,
                    outcome: r.try_get("outcome").map_err(db(op))?,
                    expires_at_ms: r.try_get("expires_at").map_err(db(op))?,
                }));
            }
            let waiting: Option<i64> = sqlx::query_scalar(
                "SELECT expires_at FROM oidc_pending
                 WHERE id_hash = $1 AND kind = $2 AND expires_at > $3",
            )
            .bind(id_hash)
            .bind(kind)
            .bind(now_ms)
            .fetch_optional(pool)
            .await
            .map_err(db(op))?;
            Ok(waiting.map(|expires_at_ms| OidcPending {
                challenge: None,
                outcome: None,
                expires_at_ms,
            }))
        })
    }
}

/// A person signed in through the OpenID provider, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcIdentity {
    /// `oidc:<issuer>#<sub>`: the operator name (actor `operator:oidc:<issuer>#<sub>`).
    pub name: String,
    pub email: Option<String>,
    /// Encrypted under the master key (`secrets::MasterKey::encrypt`, the name as AAD).
    pub refresh_token: Option<String>,
    pub signed_in_at_ms: i64,
    pub next_check_ms: i64,
}
