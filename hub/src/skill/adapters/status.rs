//! `hub.get_status`: who this hub is, how long it has run, whether it is connected, and its
//! skills' lifecycle states.

use mcp_shared::error::ToolError;
use serde_json::{Value, json};

use crate::context::HubContext;

pub(crate) async fn run(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    super::args::no_arguments(arguments)?;
    Ok(status(ctx))
}

/// The status document.
pub(crate) fn status(ctx: &HubContext) -> Value {
    let connected_since = ctx.connection.connected_since.load_full();
    json!({
        "target_id": ctx.config.target_id,
        "environment": ctx.config.environment,
        "subnet": ctx.config.subnet,
        "zone": ctx.config.zone,
        "hub_version": env!("CARGO_PKG_VERSION"),
        "protocol_version": mcp_shared::protocol::PROTOCOL_VERSION,
        "started_at": mcp_shared::time::format(ctx.process.started_at),
        "uptime_sec": ctx.process.started.elapsed().as_secs(),
        "connected": connected_since.is_some(),
        "connected_since": connected_since.map(|t| mcp_shared::time::format(*t)),
        "skills": ctx.skill_states(),
    })
}
