//! `hub.get_status`: who this hub is, how long it has run, whether it is connected, and its
//! skills' lifecycle states.
//!
//! Test-only fault injection: with `skill.test_faults = true` the argument
//! `{"fault": "panic"}` panics and `{"fault": "hang"}` never finishes, so tests can prove panic
//! containment and deadlines. With the flag off (the default) those arguments are refused with
//! `invalid_arguments`.

use mcp_shared::error::{ErrorCode, ToolError};
use serde_json::{Value, json};

use crate::context::HubContext;

pub async fn run(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    match fault(arguments)? {
        None => {}
        Some(_) if !ctx.config.skill.test_faults => {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                "`fault` is accepted only on hubs configured with skill.test_faults = true",
            ));
        }
        Some(Fault::Panic) => panic!("test fault injected into hub.get_status"),
        Some(Fault::Hang) => std::future::pending::<()>().await,
    }
    Ok(status(ctx))
}

enum Fault {
    Panic,
    Hang,
}

fn fault(arguments: &Value) -> Result<Option<Fault>, ToolError> {
    let invalid = |m: &str| Err(ToolError::new(ErrorCode::InvalidArguments, m));
    let map = match arguments {
        Value::Null => return Ok(None),
        Value::Object(m) => m,
        _ => return invalid("arguments must be an object"),
    };
    if let Some(k) = map.keys().find(|k| *k != "fault") {
        return Err(ToolError::new(
            ErrorCode::InvalidArguments,
            format!("unknown argument `{k}`"),
        ));
    }
    match map.get("fault") {
        None => Ok(None),
        Some(Value::String(s)) if s == "panic" => Ok(Some(Fault::Panic)),
        Some(Value::String(s)) if s == "hang" => Ok(Some(Fault::Hang)),
        Some(_) => invalid("`fault` must be \"panic\" or \"hang\""),
    }
}

/// The status document.
pub fn status(ctx: &HubContext) -> Value {
    let connected_since = ctx.connected_since.load_full();
    json!({
        "target_id": ctx.config.target_id,
        "environment": ctx.config.environment,
        "subnet": ctx.config.subnet,
        "zone": ctx.config.zone,
        "hub_version": env!("CARGO_PKG_VERSION"),
        "protocol_version": mcp_shared::protocol::PROTOCOL_VERSION,
        "started_at": mcp_shared::time::format(ctx.started_at),
        "uptime_sec": ctx.started.elapsed().as_secs(),
        "connected": connected_since.is_some(),
        "connected_since": connected_since.map(|t| mcp_shared::time::format(*t)),
        "skills": ctx.skill_states(),
    })
}
