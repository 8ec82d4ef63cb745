//! `hub.memory.get_published_summaries`: the memory-profile summaries that hubs published to
//! root (`hub.memory.publish_profile`, kept through its contract's `retain`), read from root's
//! store with no hub round trip, so they stay readable while the hub is down.

use mcp_shared::error::ToolError;
use mcp_shared::time::{format, from_unix_ms};
use serde_json::{Value, json};

use super::input::{arg_str, arg_u64, internal};
use crate::app::App;
use crate::call::context::CallContext;
use mcp_shared::protocol::CallBody;

pub(crate) async fn memory_profiles(
    app: &App,
    ctx: &CallContext,
    input: &CallBody,
) -> Result<Value, ToolError> {
    let target = ctx.lease.lease().target_id.clone();
    let limit = arg_u64(input, "limit", 20, 1, 200) as i64;
    let session = arg_str(input, "session_id");
    let rows = app
        .store
        .list_retained("memory_profiles", std::slice::from_ref(&target), 10_000)
        .await
        .map_err(|e| internal("the retained summaries", e))?;
    let summaries: Vec<Value> = rows
        .into_iter()
        .filter(|r| session.is_none_or(|s| s == r.item_key))
        .take(limit as usize)
        .map(|r| {
            json!({
                "session_id": r.item_key,
                "published_at": format(from_unix_ms(r.retained_at_ms)),
                "event_id": r.event_id,
                "summary": r.body,
            })
        })
        .collect();
    Ok(json!({ "target_id": target, "source": "root", "summaries": summaries }))
}
