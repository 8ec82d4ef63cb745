//! MCP tasks: a governed call that runs past its request, kept until its owner reads how it
//! ended (see `call::tasks`). A task's state changes only forward: `working` to one of the
//! terminal states, once (a cancelled task stays cancelled whatever its work did next).

use super::*;

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Working,
    Completed,
    Failed,
    Cancelled,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Working => "working",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
        }
    }

    fn parse(s: &str) -> Option<TaskState> {
        Some(match s {
            "working" => TaskState::Working,
            "completed" => TaskState::Completed,
            "failed" => TaskState::Failed,
            "cancelled" => TaskState::Cancelled,
            _ => return None,
        })
    }
}

/// A task as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    pub task_id: String,
    /// Who may read and cancel it: the lease lineage that created it (`lease:<lineage>`).
    pub owner: String,
    /// The lease that created it.
    pub session_id: String,
    pub target_id: String,
    pub tool_id: String,
    /// The replica running it (`local` on SQLite).
    pub replica: String,
    pub state: TaskState,
    pub status_message: Option<String>,
    /// `completed`: the tool result (MCP `CallToolResult`); `failed`: the JSON-RPC error.
    pub outcome: Option<serde_json::Value>,
    /// The call's audit event as admitted (redacted request, no outcome): what a restarted
    /// root commits for a task whose process died under it.
    pub event: String,
    pub event_id: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub expires_at_ms: i64,
}

const TASK_COLUMNS: &str = "task_id, owner, session_id, target_id, tool_id, replica, status, \
     status_message, outcome, event, event_id, created_at, updated_at, expires_at";

/// A [`TaskRow`] from a row of either backend.
macro_rules! task_from_row {
    ($r:expr) => {{
        let (r, op) = ($r, "read a task");
        let corrupt = |detail: String| Error::Corrupt { op, detail };
        let status: String = r.try_get("status").map_err(db(op))?;
        let outcome: Option<String> = r.try_get("outcome").map_err(db(op))?;
        Ok::<TaskRow, Error>(TaskRow {
            task_id: r.try_get("task_id").map_err(db(op))?,
            owner: r.try_get("owner").map_err(db(op))?,
            session_id: r.try_get("session_id").map_err(db(op))?,
            target_id: r.try_get("target_id").map_err(db(op))?,
            tool_id: r.try_get("tool_id").map_err(db(op))?,
            replica: r.try_get("replica").map_err(db(op))?,
            state: TaskState::parse(&status)
                .ok_or_else(|| corrupt(format!("unknown task status `{status}`")))?,
            status_message: r.try_get("status_message").map_err(db(op))?,
            outcome: outcome
                .map(|o| serde_json::from_str(&o))
                .transpose()
                .map_err(|e| corrupt(e.to_string()))?,
            event: r.try_get("event").map_err(db(op))?,
            event_id: r.try_get("event_id").map_err(db(op))?,
            created_at_ms: r.try_get("created_at").map_err(db(op))?,
            updated_at_ms: r.try_get("updated_at").map_err(db(op))?,
            expires_at_ms: r.try_get("expires_at").map_err(db(op))?,
        })
    }};
}

impl Store {
    // ---- tasks ----------------------------------------------------------------------------

    pub async fn insert_task(&self, t: &TaskRow) -> Result<()> {
        let outcome = t.outcome.as_ref().map(|o| o.to_string());
        on_pool!(self, pool => {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO tasks ({TASK_COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
            )))
            .bind(&t.task_id)
            .bind(&t.owner)
            .bind(&t.session_id)
            .bind(&t.target_id)
            .bind(&t.tool_id)
            .bind(&t.replica)
            .bind(t.state.as_str())
            .bind(&t.status_message)
            .bind(&outcome)
            .bind(&t.event)
            .bind(&t.event_id)
            .bind(t.created_at_ms)
            .bind(t.updated_at_ms)
            .bind(t.expires_at_ms)
            .execute(pool)
            .await
            .map_err(db("insert a task"))?;
            Ok(())
        })
    }

    /// One task, whoever owns it (callers check the owner).
    pub async fn task(&self, task_id: &str) -> Result<Option<TaskRow>> {
        on_pool!(self, pool => {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = $1"
            )))
            .bind(task_id)
            .fetch_optional(pool)
            .await
            .map_err(db("read a task"))?;
            row.map(|r| task_from_row!(&r)).transpose()
        })
    }

    /// An owner's tasks, newest first, after `after` (the `(created_at, task_id)` of the last
    /// one of the previous page).
    pub async fn list_tasks(
        &self,
        owner: &str,
        after: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<TaskRow>> {
        let (at, id) = after.unwrap_or((i64::MAX, ""));
        on_pool!(self, pool => {
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {TASK_COLUMNS} FROM tasks WHERE owner = $1
                 AND (created_at < $2 OR (created_at = $2 AND task_id < $3))
                 ORDER BY created_at DESC, task_id DESC LIMIT $4"
            )))
            .bind(owner)
            .bind(at)
            .bind(id)
            .bind(limit.clamp(1, 1000))
            .fetch_all(pool)
            .await
            .map_err(db("list tasks"))?;
            rows.iter().map(|r| task_from_row!(r)).collect()
        })
    }

    /// A working task's progress, in words.
    pub async fn set_task_message(&self, task_id: &str, message: &str, now_ms: i64) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query(
                "UPDATE tasks SET status_message = $2, updated_at = $3
                 WHERE task_id = $1 AND status = 'working'",
            )
            .bind(task_id)
            .bind(message)
            .bind(now_ms)
            .execute(pool)
            .await
            .map_err(db("update a task"))?;
            Ok(())
        })
    }

    /// Ends a working task (`Ok(false)`: it had ended already, e.g. cancelled meanwhile).
    /// With `owner`, only that owner's task ends (a cancel).
    pub async fn end_task(
        &self,
        task_id: &str,
        owner: Option<&str>,
        state: TaskState,
        message: &str,
        outcome: Option<&serde_json::Value>,
        now_ms: i64,
    ) -> Result<bool> {
        let outcome = outcome.map(|o| o.to_string());
        on_pool!(self, pool => {
            let done = sqlx::query(
                "UPDATE tasks SET status = $2, status_message = $3, outcome = $4, updated_at = $5
                 WHERE task_id = $1 AND status = 'working' AND ($6 IS NULL OR owner = $6)",
            )
            .bind(task_id)
            .bind(state.as_str())
            .bind(message)
            .bind(&outcome)
            .bind(now_ms)
            .bind(owner)
            .execute(pool)
            .await
            .map_err(db("end a task"))?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Keeps what a task's call answered on a task that ended before it (cancelled).
    pub async fn set_task_outcome(&self, task_id: &str, outcome: &serde_json::Value) -> Result<()> {
        on_pool!(self, pool => {
            sqlx::query("UPDATE tasks SET outcome = $2 WHERE task_id = $1 AND outcome IS NULL")
                .bind(task_id)
                .bind(outcome.to_string())
                .execute(pool)
                .await
                .map_err(db("keep a task's outcome"))?;
            Ok(())
        })
    }

    /// Tasks still working whose runner is `replica` (or, with `None`, any replica).
    pub async fn working_tasks(&self, replica: Option<&str>) -> Result<Vec<TaskRow>> {
        on_pool!(self, pool => {
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {TASK_COLUMNS} FROM tasks
                 WHERE status = 'working' AND ($1 IS NULL OR replica = $1)"
            )))
            .bind(replica)
            .fetch_all(pool)
            .await
            .map_err(db("list working tasks"))?;
            rows.iter().map(|r| task_from_row!(r)).collect()
        })
    }

    /// Forgets ended tasks whose time to live is over; returns how many.
    pub async fn delete_expired_tasks(&self, now_ms: i64) -> Result<u64> {
        on_pool!(self, pool => {
            let done = sqlx::query("DELETE FROM tasks WHERE expires_at < $1 AND status <> 'working'")
                .bind(now_ms)
                .execute(pool)
                .await
                .map_err(db("forget expired tasks"))?;
            Ok(done.rows_affected())
        })
    }
}
