//! A descriptive call, answered on root from the served descriptor set: the descriptor (or
//! the part a contract projects) with its freshness.

use std::sync::Arc;

use mcp_shared::contract::DescriptorProjection;
use mcp_shared::error::{ErrorCode, ToolError};
use serde_json::{Value, json};

use super::failure::internal;
use super::schema::validate;
use crate::app::App;
use crate::catalog::ContractEntry;

/// A descriptive tool's answer from the served descriptor set, built (projected, checked
/// against the tool's output schema, serialized) on the first call that needs it and kept by
/// the set: a new set starts empty, and the answer's freshness state is part of its key, so a
/// descriptor turning stale or expired gets a new answer.
pub(super) fn descriptive_answer(
    app: &App,
    entry: &ContractEntry,
    p: &DescriptorProjection,
    arguments: &Value,
) -> Result<Arc<crate::descriptors::DescriptiveAnswer>, ToolError> {
    let set = app.descriptors.current.load();
    let d = set.by_id.get(&p.descriptor_id).ok_or_else(|| {
        ToolError::new(
            ErrorCode::DescriptorUnavailable,
            format!("descriptor `{}` is not loaded", p.descriptor_id),
        )
    })?;
    let freshness = d.freshness.state_at(app.clock.now());
    let selected = match &p.select {
        None => String::new(),
        Some(sel) => arguments
            .get(&sel.argument)
            .map_or_else(|| "null".to_owned(), Value::to_string),
    };
    let key = (entry.contract.tool_id.clone(), selected, freshness);
    if let Some(answer) = set.answers.get(&key) {
        return Ok(answer.clone());
    }
    let value = project(d, p, arguments, freshness)?;
    if let Err(errors) = validate(&entry.output, &value) {
        tracing::error!(tool = %entry.contract.tool_id, ?errors, "result violates the tool's output schema");
        return Err(ToolError::new(
            ErrorCode::Internal,
            format!(
                "the result of `{}` violates its output schema",
                entry.contract.tool_id
            ),
        ));
    }
    let text = serde_json::to_string(&value).map_err(|e| internal("descriptive answer", e))?;
    let text_literal =
        serde_json::to_string(&text).map_err(|e| internal("descriptive answer", e))?;
    let answer = Arc::new(crate::descriptors::DescriptiveAnswer {
        value,
        text: text.into(),
        text_literal: text_literal.into(),
    });
    set.answers.insert(key, answer.clone());
    Ok(answer)
}

/// Answers a descriptive tool from its descriptor: `{data, descriptor, stale, freshness}`.
pub(super) fn project(
    d: &mcp_shared::descriptor::Descriptor,
    p: &DescriptorProjection,
    arguments: &Value,
    freshness: mcp_shared::descriptor::FreshnessState,
) -> Result<Value, ToolError> {
    let at = d.content.pointer(&p.pointer).ok_or_else(|| {
        ToolError::new(
            ErrorCode::DescriptorUnavailable,
            format!("`{}` has nothing at `{}`", p.descriptor_id, p.pointer),
        )
    })?;
    let data = match &p.select {
        None => at.clone(),
        Some(sel) => {
            let wanted = arguments.get(&sel.argument).cloned().unwrap_or(Value::Null);
            at.as_array()
                .and_then(|items| items.iter().find(|i| i.get(&sel.key) == Some(&wanted)))
                .cloned()
                .ok_or_else(|| {
                    ToolError::new(
                        ErrorCode::InvalidArguments,
                        format!(
                            "no entry with {} = {wanted} in `{}`",
                            sel.key, p.descriptor_id
                        ),
                    )
                })?
        }
    };
    // `freshness` is judged by root's clock: fresh, stale (past fresh_until, served) or
    // expired (past fresh_until + cache_ttl_sec, still served, flagged).
    let stale = freshness != mcp_shared::descriptor::FreshnessState::Fresh;
    Ok(json!({ "data": data, "descriptor": d.freshness, "stale": stale, "freshness": freshness }))
}
