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
}
