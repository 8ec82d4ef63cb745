//! Enrolled targets: their rows, signing keys (sealed), skill desired state, last seen.

use super::*;

/// An enrolled managed target as stored.
#[derive(Debug, Clone)]
pub struct TargetRow {
    pub target_id: String,
    pub environment: String,
    pub subnet_id: String,
    pub zone: String,
    pub token_hash: String,
    /// Hex of the per-hub call-signing key (derived from the hub token at enrolment).
    pub signing_key: String,
    pub enrolled_at_ms: i64,
    pub last_seen_at_ms: Option<i64>,
    /// The last descriptor the hub registered (JSON), if it ever connected.
    pub descriptor: Option<String>,
    /// The last skill states the hub reported (JSON).
    pub skills: Option<String>,
    /// Root's desired state of the target's skill (JSON of `hubs::skill::Desired`; `None`:
    /// installed and enabled).
    pub skill_desired: Option<String>,
    /// Its labels (JSON object; `None`: none), see `hubs::lifecycle`.
    pub labels: Option<String>,
    /// Its lifecycle state (JSON of `hubs::lifecycle::Lifecycle`; `None`: active).
    pub lifecycle: Option<String>,
    /// What operators denied on it (JSON of `hubs::lifecycle::Narrowing`; `None`: nothing).
    pub narrowing: Option<String>,
}

/// The operator-set columns of a target, each changed on its own ([`Store::set_target_column`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetColumn {
    Labels,
    Lifecycle,
    Narrowing,
}

impl TargetColumn {
    fn name(self) -> &'static str {
        match self {
            TargetColumn::Labels => "labels",
            TargetColumn::Lifecycle => "lifecycle",
            TargetColumn::Narrowing => "narrowing",
        }
    }
}

/// A target's previous hub token and signing key, valid until `expires_at_ms` (key rotation).
#[derive(Debug, Clone)]
pub struct PreviousKey {
    pub token_hash: String,
    /// Stored form (encrypted, see `secrets`).
    pub signing_key: String,
    pub expires_at_ms: i64,
}

impl Store {
    // ---- targets ------------------------------------------------------------------------

    /// Enrols a target; `Ok(false)` when the target id is already enrolled.
    pub async fn insert_target(&self, t: &TargetRow) -> Result<bool> {
        on_pool!(self, pool => {
            let res = sqlx::query(
                "INSERT INTO targets (target_id, environment, subnet_id, zone, token_hash, signing_key,
                    enrolled_at, last_seen_at, descriptor, skills, skill_desired, labels, lifecycle,
                    narrowing)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
                 ON CONFLICT (target_id) DO NOTHING",
            )
            .bind(&t.target_id)
            .bind(&t.environment)
            .bind(&t.subnet_id)
            .bind(&t.zone)
            .bind(&t.token_hash)
            .bind(&t.signing_key)
            .bind(t.enrolled_at_ms)
            .bind(t.last_seen_at_ms)
            .bind(&t.descriptor)
            .bind(&t.skills)
            .bind(&t.skill_desired)
            .bind(&t.labels)
            .bind(&t.lifecycle)
            .bind(&t.narrowing)
            .execute(pool)
            .await
            .map_err(db("insert target"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    /// Every enrolled target, by target id.
    pub async fn load_targets(&self) -> Result<Vec<TargetRow>> {
        self.select_targets(None).await
    }

    /// The enrolled targets among `ids`, by target id: one query, whatever the table holds
    /// (a replica applying a change to one target reads that target, not all of them).
    pub async fn load_targets_of(&self, ids: &[String]) -> Result<Vec<TargetRow>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.select_targets(Some(ids)).await
    }

    async fn select_targets(&self, ids: Option<&[String]>) -> Result<Vec<TargetRow>> {
        let op = "load targets";
        // The ids ride as one JSON array, unpacked by each backend's own function.
        let filter = match (ids, &self.pool) {
            (None, _) => "",
            (Some(_), Pool::Sqlite(_)) => "WHERE target_id IN (SELECT value FROM json_each($1))",
            (Some(_), Pool::Postgres(_)) => {
                "WHERE target_id IN (SELECT json_array_elements_text($1::json))"
            }
        };
        let sql = format!(
            "SELECT target_id, environment, subnet_id, zone, token_hash, signing_key, enrolled_at,
                last_seen_at, descriptor, skills, skill_desired, labels, lifecycle, narrowing
             FROM targets {filter} ORDER BY target_id"
        );
        let list = ids.map(|ids| serde_json::Value::from(ids.to_vec()).to_string());
        on_pool!(self, pool => {
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            if let Some(list) = list {
                query = query.bind(list);
            }
            let rows = query.fetch_all(pool).await.map_err(db(op))?;
            rows.iter().map(|r| -> Result<TargetRow> {
                Ok(TargetRow {
                    target_id: r.try_get("target_id").map_err(db(op))?,
                    environment: r.try_get("environment").map_err(db(op))?,
                    subnet_id: r.try_get("subnet_id").map_err(db(op))?,
                    zone: r.try_get("zone").map_err(db(op))?,
                    token_hash: r.try_get("token_hash").map_err(db(op))?,
                    signing_key: r.try_get("signing_key").map_err(db(op))?,
                    enrolled_at_ms: r.try_get("enrolled_at").map_err(db(op))?,
                    last_seen_at_ms: r.try_get("last_seen_at").map_err(db(op))?,
                    descriptor: r.try_get("descriptor").map_err(db(op))?,
                    skills: r.try_get("skills").map_err(db(op))?,
                    skill_desired: r.try_get("skill_desired").map_err(db(op))?,
                    labels: r.try_get("labels").map_err(db(op))?,
                    lifecycle: r.try_get("lifecycle").map_err(db(op))?,
                    narrowing: r.try_get("narrowing").map_err(db(op))?,
                })
            }).collect()
        })
    }

    /// Stores one operator-set column of a target (JSON, `None` for its default); `Ok(false)`
    /// when the target is not enrolled.
    pub async fn set_target_column(
        &self,
        target_id: &str,
        column: TargetColumn,
        value: Option<&str>,
    ) -> Result<bool> {
        let sql = format!(
            "UPDATE targets SET {} = $1 WHERE target_id = $2",
            column.name()
        );
        on_pool!(self, pool => {
            let res = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .bind(value)
                .bind(target_id)
                .execute(pool)
                .await
                .map_err(db("set target column"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    /// Moves a target to another environment and subnet; `Ok(false)` when it is not enrolled.
    pub async fn set_target_placement(
        &self,
        target_id: &str,
        environment: &str,
        subnet_id: &str,
    ) -> Result<bool> {
        on_pool!(self, pool => {
            let res = sqlx::query(
                "UPDATE targets SET environment = $1, subnet_id = $2 WHERE target_id = $3",
            )
            .bind(environment)
            .bind(subnet_id)
            .bind(target_id)
            .execute(pool)
            .await
            .map_err(db("move target"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    /// Stores root's desired state of a target's skill; `Ok(false)` when the target is not
    /// enrolled.
    pub async fn set_skill_desired(&self, target_id: &str, desired: &str) -> Result<bool> {
        on_pool!(self, pool => {
            let res = sqlx::query("UPDATE targets SET skill_desired = $1 WHERE target_id = $2")
                .bind(desired)
                .bind(target_id)
                .execute(pool)
                .await
                .map_err(db("set skill desired state"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    /// Replaces a target's stored signing key (encryption of rows written in clear).
    pub async fn set_target_signing_key(&self, target_id: &str, signing_key: &str) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query("UPDATE targets SET signing_key = $1 WHERE target_id = $2")
                .bind(signing_key)
                .bind(target_id)
                .execute(pool)
                .await
                .map_err(db("update target signing key"))?;
            Ok(())
        })
    }

    /// Key rotation: the new token hash and signing key become current, the current ones
    /// previous (valid until `previous.expires_at_ms`), only if the current token hash is still
    /// `expected_hash` (two rotations at once: one wins). `Ok(false)` when nothing changed.
    pub async fn rotate_target_key(
        &self,
        target_id: &str,
        expected_hash: &str,
        token_hash: &str,
        signing_key: &str,
        previous: &PreviousKey,
    ) -> Result<bool> {
        on_pool!(self, pool => {
            let res = sqlx::query(
                "UPDATE targets SET token_hash = $1, signing_key = $2, prev_token_hash = $3,
                    prev_signing_key = $4, prev_expires_at = $5
                 WHERE target_id = $6 AND token_hash = $7",
            )
            .bind(token_hash)
            .bind(signing_key)
            .bind(&previous.token_hash)
            .bind(&previous.signing_key)
            .bind(previous.expires_at_ms)
            .bind(target_id)
            .bind(expected_hash)
            .execute(pool)
            .await
            .map_err(db("rotate target key"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    /// Replaces a target's stored previous signing key (encryption of rows written in clear).
    pub async fn set_previous_signing_key(&self, target_id: &str, signing_key: &str) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query("UPDATE targets SET prev_signing_key = $1 WHERE target_id = $2")
                .bind(signing_key)
                .bind(target_id)
                .execute(pool)
                .await
                .map_err(db("update previous signing key"))?;
            Ok(())
        })
    }

    /// Previous keys of rotated targets, by target id.
    pub async fn load_previous_keys(&self) -> Result<Vec<(String, PreviousKey)>> {
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT target_id, prev_token_hash, prev_signing_key, prev_expires_at FROM targets
                 WHERE prev_token_hash IS NOT NULL ORDER BY target_id",
            )
            .fetch_all(pool)
            .await
            .map_err(db("load previous keys"))?;
            rows.iter().map(|r| -> Result<(String, PreviousKey)> {
                let op = "load previous keys";
                Ok((
                    r.try_get("target_id").map_err(db(op))?,
                    PreviousKey {
                        token_hash: r.try_get("prev_token_hash").map_err(db(op))?,
                        signing_key: r
                            .try_get::<Option<String>, _>("prev_signing_key")
                            .map_err(db(op))?
                            .unwrap_or_default(),
                        expires_at_ms: r
                            .try_get::<Option<i64>, _>("prev_expires_at")
                            .map_err(db(op))?
                            .unwrap_or(0),
                    },
                ))
            }).collect()
        })
    }

    /// Records what a connected hub registered and when it was last heard from.
    pub async fn update_target_seen(
        &self,
        target_id: &str,
        last_seen_ms: i64,
        descriptor: Option<&str>,
        skills: Option<&str>,
    ) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(
                "UPDATE targets SET last_seen_at = $1, descriptor = COALESCE($2, descriptor),
                    skills = COALESCE($3, skills) WHERE target_id = $4",
            )
            .bind(last_seen_ms)
            .bind(descriptor)
            .bind(skills)
            .bind(target_id)
            .execute(pool)
            .await
            .map_err(db("update target"))?;
            Ok(())
        })
    }

    /// Records when each of several connected hubs was last heard from, in one transaction
    /// (one commit for the whole fleet); a time older than the stored one is not written.
    /// One statement per [`SEEN_CHUNK`] hubs (their ids and times as one JSON array, joined
    /// against the table by each backend's JSON function): a statement per hub was 15,000
    /// round trips to the store's thread every 5 s at fleet size.
    pub async fn update_targets_seen(&self, seen: &[(String, i64)]) -> Result<()> {
        if seen.is_empty() {
            return Ok(());
        }
        let op = "update targets seen";
        let pairs = match &self.pool {
            Pool::Sqlite(_) => {
                "SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS ms
                 FROM json_each($1)"
            }
            Pool::Postgres(_) => {
                "SELECT e->>0 AS id, (e->>1)::BIGINT AS ms FROM json_array_elements($1::json) AS e"
            }
        };
        let sql = format!(
            "UPDATE targets SET last_seen_at = s.ms FROM ({pairs}) AS s
             WHERE targets.target_id = s.id
               AND (targets.last_seen_at IS NULL OR targets.last_seen_at < s.ms)"
        );
        on_pool!(self, pool => {
            let mut tx = begin_write(pool).await.map_err(db(op))?;
            for chunk in seen.chunks(SEEN_CHUNK) {
                let list = serde_json::Value::from(
                    chunk
                        .iter()
                        .map(|(id, ms)| serde_json::json!([id, ms]))
                        .collect::<Vec<_>>(),
                )
                .to_string();
                sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                    .bind(list)
                    .execute(&mut *tx)
                    .await
                    .map_err(db(op))?;
            }
            tx.commit().await.map_err(db(op))?;
            Ok(())
        })
    }
}

/// Hubs per statement of [`Store::update_targets_seen`].
const SEEN_CHUNK: usize = 5_000;
