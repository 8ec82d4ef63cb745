//! `hub.get_operational_surface`: what `infra_access_skill` publishes on this hub, with its
//! adapters and their limits.

use serde_json::{Value, json};

use crate::context::{HubContext, PUBLISHED_BY};

pub(crate) fn run(ctx: &HubContext) -> Value {
    let lifecycle = ctx.lifecycle();
    let adapters: Vec<Value> = ctx
        .adapter_decls()
        .iter()
        .map(|a| {
            json!({
                "name": a.name,
                "tool_id": a.tool_id,
                "writes": a.writes,
                "concurrency_limit": ctx.config.skill.adapter_concurrency,
            })
        })
        .collect();
    json!({
        "target_id": ctx.config.target_id,
        "environment": ctx.config.environment,
        "write_scope": ctx.config.write_scope,
        "published_by": PUBLISHED_BY,
        "enabled": lifecycle.active(),
        "capabilities": ctx.skill_states().pop().map(|s| s.published).unwrap_or_default(),
        "skills": ctx.skill_states(),
        "adapters": adapters,
    })
}
