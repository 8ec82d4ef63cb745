//! `hub.get_activity_log`: the hub's record of the calls it finished, newest first, from the
//! in-memory ring in [`crate::context::Stores::activity`]. Arguments: `{"limit"?: 1..=200
//! (default 50), "tool_id"?: string, "status"?: "ok" | "error" | "refused"}`. Answer:
//! `{"entries": [...], "retained": n, "capacity": 1000}`, where `retained` counts every call in
//! the ring (unfiltered).

use mcp_shared::error::ToolError;
use serde::Deserialize;
use serde_json::{Value, json};

use super::args::{Arguments, invalid, parse, present};

use crate::context::HubContext;
use crate::store::activity::ActivityStatus;

/// Entries returned when no `limit` is given.
pub(crate) const DEFAULT_LIMIT: usize = 50;
/// Largest `limit`.
pub(crate) const MAX_LIMIT: u64 = 200;

/// The arguments of `hub.get_activity_log`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default, deserialize_with = "present")]
    limit: Option<u64>,
    #[serde(default, deserialize_with = "present")]
    tool_id: Option<String>,
    #[serde(default, deserialize_with = "present")]
    status: Option<String>,
}

impl Arguments for Args {
    fn rule(field: &str) -> String {
        match field {
            "limit" => format!("`limit` must be an integer from 1 to {MAX_LIMIT}"),
            "tool_id" => "`tool_id` must be a non-empty string".into(),
            _ => "`status` must be one of \"ok\", \"error\", \"refused\"".into(),
        }
    }
}

pub(crate) fn run(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let args: Args = parse(arguments)?;
    let limit = match args.limit {
        None => DEFAULT_LIMIT,
        Some(n @ 1..=MAX_LIMIT) => usize::try_from(n).unwrap_or(DEFAULT_LIMIT),
        Some(_) => return Err(invalid(Args::rule("limit"))),
    };
    let tool_id = match args.tool_id.as_deref() {
        Some("") => return Err(invalid(Args::rule("tool_id"))),
        t => t,
    };
    let status = match args.status.as_deref() {
        None => None,
        Some(s) => Some(ActivityStatus::parse(s).ok_or_else(|| invalid(Args::rule("status")))?),
    };
    let entries = ctx.stores.activity.recent(limit, tool_id, status);
    Ok(json!({
        "entries": entries,
        "retained": ctx.stores.activity.retained(),
        "capacity": ctx.stores.activity.capacity(),
    }))
}
