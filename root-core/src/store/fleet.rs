//! Fleet runs: a run (one tool on a frozen set of targets, under a plan) and each target's
//! part in it, so a run outlives the process that started it.

use super::*;

/// A fleet run's state, stored and shown by its snake_case name (`strum` for the names).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FleetRunState {
    /// A write run awaiting its confirmation.
    Previewed,
    Running,
    Paused,
    Cancelled,
    /// Its error budget was spent.
    Stopped,
    Completed,
}

/// A target's part in a fleet run, stored and shown by its snake_case name; [`Self::ALL`]
/// is the order reports list them in.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FleetTargetStatus {
    Succeeded,
    Failed,
    Undeliverable,
    Refused,
    Running,
    Pending,
    Skipped,
    Cancelled,
    /// A target that does not take part (its code says why): a write's that could not at its
    /// preview, or one an operator cordoned, retired or narrowed by the time its turn came (a
    /// deliberate state, not an error).
    Excluded,
}

impl FleetRunState {
    /// The stored (and shown) name.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl FleetTargetStatus {
    /// Every status, in the order reports list them.
    pub const ALL: &'static [FleetTargetStatus] = <Self as strum::VariantArray>::VARIANTS;

    /// The stored (and shown) name.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether a target in this status counts against its run's error budget.
    pub fn is_error(self) -> bool {
        matches!(
            self,
            FleetTargetStatus::Failed
                | FleetTargetStatus::Undeliverable
                | FleetTargetStatus::Refused
        )
    }
}

/// A fleet run as stored.
#[derive(Debug, Clone)]
pub struct FleetRunRow {
    pub run_id: String,
    /// The trace every event of the run joins (the run's own and each target's call).
    pub trace_id: String,
    pub created_by: String,
    pub created_at_ms: i64,
    pub selector: String,
    pub tool_id: String,
    /// JSON, as shown and exported: secrets redacted (`fleet::arguments`).
    pub arguments: String,
    /// The arguments as they run when redaction changed them, encrypted under the master key
    /// (bound to the run id); `None` when `arguments` are what runs.
    pub arguments_sealed: Option<String>,
    /// JSON of the plan.
    pub plan: String,
    /// SHA-256 of the frozen target set.
    pub set_hash: String,
    pub state: FleetRunState,
    pub finished_at_ms: Option<i64>,
    /// The replica driving it (`single` on SQLite): a restarted replica takes up its own.
    pub driver: String,
    /// A write run's capability profile (its targets' leases); `None` for a read run.
    pub profile: Option<String>,
    /// While `previewed`: the hash of its confirmation token and the token's deadline.
    pub confirmation_hash: Option<String>,
    pub confirm_by_ms: Option<i64>,
    /// A confirmed write's identity, set when it is confirmed: the confirmation that started
    /// it (an agent's idempotency key under its owner, or an operator's token hash). Its
    /// targets' idempotency keys derive from it (`fleet::authority::idempotency_key`).
    pub write_key: Option<String>,
}

/// One target's part in a fleet run.
#[derive(Debug, Clone)]
pub struct FleetTargetRow {
    pub target_id: String,
    /// Its place in the run's order (canaries first).
    pub ordinal: i64,
    pub status: FleetTargetStatus,
    /// The error code of a target that did not succeed.
    pub code: Option<String>,
    /// JSON: the tool's result, or the error.
    pub result: Option<String>,
    /// The target's call event.
    pub event_id: Option<String>,
    pub started_at_ms: Option<i64>,
    pub finished_at_ms: Option<i64>,
    /// JSON, a write's target: its preview (`expected_effect` or `error`, and `event_id`).
    pub preview: Option<String>,
}

const RUN_COLUMNS: &str = "run_id, trace_id, created_by, created_at, selector, tool_id, arguments, plan, set_hash, state, finished_at, driver, profile, confirmation_hash, confirm_by, write_key, arguments_sealed";

/// A `FleetRunRow` from a row of either backend (the column types are the same on both).
macro_rules! run_from_row {
    ($r:expr) => {{
        let r = $r;
        let op = "read fleet run";
        Ok::<FleetRunRow, Error>(FleetRunRow {
            run_id: r.try_get("run_id").map_err(db(op))?,
            trace_id: r.try_get("trace_id").map_err(db(op))?,
            created_by: r.try_get("created_by").map_err(db(op))?,
            created_at_ms: r.try_get("created_at").map_err(db(op))?,
            selector: r.try_get("selector").map_err(db(op))?,
            tool_id: r.try_get("tool_id").map_err(db(op))?,
            arguments: r.try_get("arguments").map_err(db(op))?,
            plan: r.try_get("plan").map_err(db(op))?,
            set_hash: r.try_get("set_hash").map_err(db(op))?,
            state: stored(op, r.try_get("state").map_err(db(op))?)?,
            finished_at_ms: r.try_get("finished_at").map_err(db(op))?,
            driver: r.try_get("driver").map_err(db(op))?,
            profile: r.try_get("profile").map_err(db(op))?,
            confirmation_hash: r.try_get("confirmation_hash").map_err(db(op))?,
            confirm_by_ms: r.try_get("confirm_by").map_err(db(op))?,
            write_key: r.try_get("write_key").map_err(db(op))?,
            arguments_sealed: r.try_get("arguments_sealed").map_err(db(op))?,
        })
    }};
}

impl Store {
    /// Stores a new run and its targets (all `pending`, in `targets`' order), in one
    /// transaction.
    pub async fn insert_fleet_run(&self, run: &FleetRunRow, targets: &[String]) -> Result<()> {
        let op = "insert fleet run";
        let list = serde_json::Value::from(targets.to_vec()).to_string();
        let unpack = match self.pool {
            Pool::Sqlite(_) => {
                "INSERT INTO fleet_targets (run_id, ordinal, target_id, status)
                 SELECT $1, CAST(key AS BIGINT), value, 'pending' FROM json_each($2)"
            }
            Pool::Postgres(_) => {
                "INSERT INTO fleet_targets (run_id, ordinal, target_id, status)
                 SELECT $1::TEXT, t.ord - 1, t.value, 'pending'
                 FROM json_array_elements_text($2::json) WITH ORDINALITY AS t(value, ord)"
            }
        };
        on_pool!(self, pool => {
            let mut tx = begin_write(pool).await.map_err(db(op))?;
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO fleet_runs ({RUN_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)"
            )))
            .bind(&run.run_id)
            .bind(&run.trace_id)
            .bind(&run.created_by)
            .bind(run.created_at_ms)
            .bind(&run.selector)
            .bind(&run.tool_id)
            .bind(&run.arguments)
            .bind(&run.plan)
            .bind(&run.set_hash)
            .bind(run.state.as_str())
            .bind(run.finished_at_ms)
            .bind(&run.driver)
            .bind(&run.profile)
            .bind(&run.confirmation_hash)
            .bind(run.confirm_by_ms)
            .bind(&run.write_key)
            .bind(&run.arguments_sealed)
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
            sqlx::query(sqlx::AssertSqlSafe(unpack))
                .bind(&run.run_id)
                .bind(&list)
                .execute(&mut *tx)
                .await
                .map_err(db(op))?;
            tx.commit().await.map_err(db(op))?;
            Ok(())
        })
    }

    /// One run.
    pub async fn fleet_run(&self, run_id: &str) -> Result<Option<FleetRunRow>> {
        on_pool!(self, pool => {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {RUN_COLUMNS} FROM fleet_runs WHERE run_id = $1"
            )))
            .bind(run_id)
            .fetch_optional(pool)
            .await
            .map_err(db("read fleet run"))?;
            row.map(|r| run_from_row!(&r)).transpose()
        })
    }

    /// The newest runs first, at most `limit`.
    pub async fn fleet_runs(&self, limit: i64) -> Result<Vec<FleetRunRow>> {
        on_pool!(self, pool => {
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {RUN_COLUMNS} FROM fleet_runs ORDER BY created_at DESC, run_id DESC LIMIT $1"
            )))
            .bind(limit)
            .fetch_all(pool)
            .await
            .map_err(db("list fleet runs"))?;
            rows.iter().map(|r| run_from_row!(r)).collect()
        })
    }

    /// The runs `driver` started before `before_ms` and left unfinished (`running` or
    /// `paused`, or `cancelled` with calls admitted before that still `running`): it takes
    /// them up again.
    pub async fn unfinished_fleet_runs(&self, driver: &str, before_ms: i64) -> Result<Vec<String>> {
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT run_id FROM fleet_runs r WHERE driver = $1 AND created_at < $2
                   AND (state IN ('running', 'paused')
                        OR (state = 'cancelled' AND EXISTS (SELECT 1 FROM fleet_targets t
                              WHERE t.run_id = r.run_id AND t.status = 'running')))
                 ORDER BY created_at",
            )
            .bind(driver)
            .bind(before_ms)
            .fetch_all(pool)
            .await
            .map_err(db("list unfinished fleet runs"))?;
            rows.iter()
                .map(|r| r.try_get::<String, _>(0).map_err(db("list unfinished fleet runs")))
                .collect()
        })
    }

    /// A run's targets in the run's order.
    pub async fn fleet_targets(&self, run_id: &str) -> Result<Vec<FleetTargetRow>> {
        let op = "read fleet targets";
        on_pool!(self, pool => {
            let rows = sqlx::query(
                "SELECT target_id, ordinal, status, code, result, event_id, started_at, finished_at,
                    preview
                 FROM fleet_targets WHERE run_id = $1 ORDER BY ordinal",
            )
            .bind(run_id)
            .fetch_all(pool)
            .await
            .map_err(db(op))?;
            rows.iter().map(|r| -> Result<FleetTargetRow> {
                Ok(FleetTargetRow {
                    target_id: r.try_get("target_id").map_err(db(op))?,
                    ordinal: r.try_get("ordinal").map_err(db(op))?,
                    status: stored(op, r.try_get("status").map_err(db(op))?)?,
                    code: r.try_get("code").map_err(db(op))?,
                    result: r.try_get("result").map_err(db(op))?,
                    event_id: r.try_get("event_id").map_err(db(op))?,
                    started_at_ms: r.try_get("started_at").map_err(db(op))?,
                    finished_at_ms: r.try_get("finished_at").map_err(db(op))?,
                    preview: r.try_get("preview").map_err(db(op))?,
                })
            }).collect()
        })
    }

    /// Moves a run to `state` (`finished_at_ms` for a final one); `Ok(false)` when it does not
    /// exist or is in none of the states `from`.
    pub async fn set_fleet_run_state(
        &self,
        run_id: &str,
        from: &[FleetRunState],
        state: FleetRunState,
        finished_at_ms: Option<i64>,
    ) -> Result<bool> {
        let from: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
        let from = serde_json::Value::from(from).to_string();
        let within = match self.pool {
            Pool::Sqlite(_) => "state IN (SELECT value FROM json_each($4))",
            Pool::Postgres(_) => "state IN (SELECT json_array_elements_text($4::json))",
        };
        let sql = format!(
            "UPDATE fleet_runs SET state = $1, finished_at = $2 WHERE run_id = $3 AND {within}"
        );
        on_pool!(self, pool => {
            let res = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .bind(state.as_str())
                .bind(finished_at_ms)
                .bind(run_id)
                .bind(&from)
                .execute(pool)
                .await
                .map_err(db("set fleet run state"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    /// Records a target's part: its status and, once it finished, its code, result and event.
    pub async fn set_fleet_target(&self, run_id: &str, t: &FleetTargetRow) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(
                "UPDATE fleet_targets SET status = $1, code = $2, result = $3, event_id = $4,
                    started_at = $5, finished_at = $6
                 WHERE run_id = $7 AND target_id = $8",
            )
            .bind(t.status.as_str())
            .bind(&t.code)
            .bind(&t.result)
            .bind(&t.event_id)
            .bind(t.started_at_ms)
            .bind(t.finished_at_ms)
            .bind(run_id)
            .bind(&t.target_id)
            .execute(pool)
            .await
            .map_err(db("record a fleet target"))?;
            Ok(())
        })
    }

    /// Starts a target's call: `pending` (or `running`, left so by a stop) becomes `running`
    /// at `started_at_ms`; `Ok(false)` when it is neither (a cancel settled it meanwhile).
    pub async fn start_fleet_target(
        &self,
        run_id: &str,
        target_id: &str,
        started_at_ms: i64,
    ) -> Result<bool> {
        on_pool!(self, pool => {
            let res = sqlx::query(
                "UPDATE fleet_targets SET status = 'running', started_at = $1
                 WHERE run_id = $2 AND target_id = $3 AND status IN ('pending', 'running')",
            )
            .bind(started_at_ms)
            .bind(run_id)
            .bind(target_id)
            .execute(pool)
            .await
            .map_err(db("start a fleet target"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    /// Records a write's target's preview: `pending` (it takes part) or `excluded`, with the
    /// code of why not.
    pub async fn set_fleet_target_preview(
        &self,
        run_id: &str,
        target_id: &str,
        status: FleetTargetStatus,
        code: Option<&str>,
        preview: &str,
    ) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(
                "UPDATE fleet_targets SET status = $1, code = $2, preview = $3
                 WHERE run_id = $4 AND target_id = $5",
            )
            .bind(status.as_str())
            .bind(code)
            .bind(preview)
            .bind(run_id)
            .bind(target_id)
            .execute(pool)
            .await
            .map_err(db("record a fleet target's preview"))?;
            Ok(())
        })
    }

    /// The previewed run a confirmation token (by its hash) was issued for.
    pub async fn fleet_run_by_confirmation(&self, token_hash: &str) -> Result<Option<FleetRunRow>> {
        on_pool!(self, pool => {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {RUN_COLUMNS} FROM fleet_runs WHERE confirmation_hash = $1"
            )))
            .bind(token_hash)
            .fetch_optional(pool)
            .await
            .map_err(db("read fleet run by confirmation"))?;
            row.map(|r| run_from_row!(&r)).transpose()
        })
    }

    /// Sets a previewed run's confirmation deadline (from when its previews are readable).
    pub async fn set_fleet_confirm_by(&self, run_id: &str, confirm_by_ms: i64) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query("UPDATE fleet_runs SET confirm_by = $1 WHERE run_id = $2")
                .bind(confirm_by_ms)
                .bind(run_id)
                .execute(pool)
                .await
                .map_err(db("set a fleet run's confirmation deadline"))?;
            Ok(())
        })
    }

    /// Redeems a previewed run's confirmation, once: `previewed` with this token hash becomes
    /// `running` under the plan it was previewed with, driven by `driver`, its token
    /// forgotten and the confirmed write's identity (`write_key`) kept. `Ok(false)`: already
    /// redeemed (or not this run's token).
    pub async fn confirm_fleet_run(
        &self,
        run_id: &str,
        token_hash: &str,
        write_key: &str,
        driver: &str,
    ) -> Result<bool> {
        on_pool!(self, pool => {
            let res = sqlx::query(
                "UPDATE fleet_runs SET state = 'running', confirmation_hash = NULL, write_key = $1,
                    driver = $2
                 WHERE run_id = $3 AND state = 'previewed' AND confirmation_hash = $4",
            )
            .bind(write_key)
            .bind(driver)
            .bind(run_id)
            .bind(token_hash)
            .execute(pool)
            .await
            .map_err(db("confirm fleet run"))?;
            Ok(res.rows_affected() == 1)
        })
    }

    /// Marks every target of a run still `pending` (or, `running_too`, `running`) as `status`.
    pub async fn settle_fleet_targets(
        &self,
        run_id: &str,
        status: FleetTargetStatus,
        running_too: bool,
    ) -> Result<u64> {
        let sql = if running_too {
            "UPDATE fleet_targets SET status = $1 WHERE run_id = $2 AND status IN ('pending', 'running')"
        } else {
            "UPDATE fleet_targets SET status = $1 WHERE run_id = $2 AND status = 'pending'"
        };
        on_pool!(self, pool => {
            let res = sqlx::query(sql)
                .bind(status.as_str())
                .bind(run_id)
                .execute(pool)
                .await
                .map_err(db("settle fleet targets"))?;
            Ok(res.rows_affected())
        })
    }
}

/// A stored name read back, or the row is corrupt.
fn stored<T: std::str::FromStr>(op: &'static str, text: String) -> Result<T> {
    text.parse().map_err(|_| Error::Corrupt {
        op,
        detail: format!("unknown state `{text}`"),
    })
}
