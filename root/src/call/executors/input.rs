//! What a root adapter receives: the call's arguments with root's control fields stripped
//! (`ExecInput`), and the small readers and errors every adapter uses.

use mcp_shared::error::{ErrorCode, ToolError};
use serde_json::Value;

/// One call as a root adapter receives it (root's control fields already stripped).
#[derive(Debug, Clone)]
pub struct ExecInput {
    pub arguments: Value,
    /// Describe the effect, change nothing (write previews and dry runs).
    pub dry_run: bool,
    pub idempotency_key: Option<String>,
    /// A write's execute: the `expected_effect` of the preview whose confirmation token it
    /// consumed (what the caller confirmed). Adapters whose world can move between preview
    /// and execute (a branch to deploy) refuse with `conflict` when it no longer holds.
    pub confirmed_effect: Option<Value>,
}

impl ExecInput {
    /// A read: no dry run, no idempotency key, nothing confirmed.
    pub fn run(arguments: Value) -> ExecInput {
        ExecInput {
            arguments,
            dry_run: false,
            idempotency_key: None,
            confirmed_effect: None,
        }
    }

    /// A dry run (a write's preview or `dry_run: true`).
    pub fn dry_run(arguments: Value) -> ExecInput {
        ExecInput {
            dry_run: true,
            ..ExecInput::run(arguments)
        }
    }
}

/// A string argument, if present.
pub(super) fn arg_str<'a>(input: &'a ExecInput, name: &str) -> Option<&'a str> {
    input.arguments.get(name).and_then(Value::as_str)
}

/// An integer argument clamped to `lo..=hi`, or `default`.
pub(super) fn arg_u64(input: &ExecInput, name: &str, default: u64, lo: u64, hi: u64) -> u64 {
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
