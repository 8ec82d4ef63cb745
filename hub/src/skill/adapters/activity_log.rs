//! `hub.get_activity_log`: the hub's record of the calls it finished, newest first, from the
//! in-memory ring in [`crate::context::Stores::activity`]. Arguments: `{"limit"?: 1..=200
//! (default 50), "tool_id"?: string, "status"?: "ok" | "error" | "refused"}`. Answer:
//! `{"entries": [...], "retained": n, "capacity": 1000}`, where `retained` counts every call in
//! the ring (unfiltered).

use mcp_shared::error::{ErrorCode, ToolError};
use serde_json::{Value, json};

use crate::context::HubContext;
use crate::store::activity::ActivityStatus;

/// Entries returned when no `limit` is given.
pub(crate) const DEFAULT_LIMIT: usize = 50;
/// Largest `limit`.
pub(crate) const MAX_LIMIT: u64 = 200;

pub(crate) fn run(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let bad = |m: String| ToolError::new(ErrorCode::InvalidArguments, m);
    let map = match arguments {
        Value::Object(m) => m.clone(),
        Value::Null => serde_json::Map::new(),
        _ => return Err(bad("arguments must be an object".into())),
    };
    if let Some(k) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "limit" | "tool_id" | "status"))
    {
        return Err(bad(format!(
            "unknown argument `{k}`; this tool takes `limit`, `tool_id` and `status`"
        )));
    }
    let limit = match map.get("limit") {
        None => DEFAULT_LIMIT,
        Some(v) => match v.as_u64() {
            Some(n @ 1..=MAX_LIMIT) => usize::try_from(n).unwrap_or(DEFAULT_LIMIT),
            _ => {
                return Err(bad(format!(
                    "`limit` must be an integer from 1 to {MAX_LIMIT}"
                )));
            }
        },
    };
    let tool_id = match map.get("tool_id") {
        None => None,
        Some(Value::String(t)) if !t.is_empty() => Some(t.as_str()),
        Some(_) => return Err(bad("`tool_id` must be a non-empty string".into())),
    };
    let status = match map.get("status") {
        None => None,
        Some(v) => match v.as_str().and_then(ActivityStatus::parse) {
            Some(s) => Some(s),
            None => {
                return Err(bad(
                    "`status` must be one of \"ok\", \"error\", \"refused\"".into(),
                ));
            }
        },
    };
    let entries = ctx.stores.activity.recent(limit, tool_id, status);
    Ok(json!({
        "entries": entries,
        "retained": ctx.stores.activity.retained(),
        "capacity": ctx.stores.activity.capacity(),
    }))
}
