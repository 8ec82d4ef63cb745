//! What a root adapter receives: the call's arguments with root's control fields stripped
//! (`CallBody`), and the small readers and errors every adapter uses.

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::CallBody;
use serde_json::Value;

/// A string argument, if present.
pub(super) fn arg_str<'a>(input: &'a CallBody, name: &str) -> Option<&'a str> {
    input.arguments.get(name).and_then(Value::as_str)
}

/// An integer argument clamped to `lo..=hi`, or `default`.
pub(super) fn arg_u64(input: &CallBody, name: &str, default: u64, lo: u64, hi: u64) -> u64 {
    input
        .arguments
        .get(name)
        .and_then(Value::as_u64)
        .unwrap_or(default)
        .clamp(lo, hi)
}

pub(super) fn internal(component: &str, e: impl std::fmt::Display) -> ToolError {
    tracing::error!(error = %e, component, "root adapter failure");
    ToolError::new(ErrorCode::Internal, format!("{component} is unavailable"))
}
