//! An internal failure on the call path: logged in full, answered as `internal` naming only
//! the part that failed.

use mcp_shared::error::{ErrorCode, ToolError};

pub(super) fn internal(component: &str, e: impl std::fmt::Display) -> ToolError {
    tracing::error!(component, error = %e, "internal failure on the call path");
    ToolError::new(ErrorCode::Internal, format!("{component} unavailable"))
}
