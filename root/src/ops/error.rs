//! [`Refusal`]: why an operation refused or failed, in the governed calls' error vocabulary
//! (a [`ToolError`]'s code and message), and for an operator action the audit event that
//! records it. `api/` answers it with the status its code maps to; an MCP tool answers its
//! tool error; a fleet run reports it per target.

use mcp_shared::ToolError;
use mcp_shared::error::ErrorCode;

use crate::roles::{Grant, Role};

/// `viewer, operator`: the roles a grant holds, for a refusal's message.
fn roles_of(held: &Grant) -> String {
    let names: Vec<&str> = held.roles().into_iter().map(Role::as_str).collect();
    names.join(", ")
}

/// Why an operation refused or failed.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub(crate) struct Refusal {
    pub(crate) error: ToolError,
    /// The audit event that records the refused operator action, if any.
    pub(crate) event_id: Option<String>,
}

impl Refusal {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Refusal {
        ToolError::new(code, message).into()
    }
    pub(crate) fn bad_request(what: impl Into<String>) -> Refusal {
        Refusal::new(ErrorCode::InvalidArguments, what)
    }
    pub(crate) fn not_found(what: impl Into<String>) -> Refusal {
        Refusal::new(ErrorCode::NotFound, what)
    }
    /// The operator does not hold `needed` (a route's or a command's role).
    pub(crate) fn role_required(needed: Role, held: &Grant) -> Refusal {
        Refusal::new(
            ErrorCode::RoleRequired,
            format!(
                "this needs the role `{needed}`; the operator holds {}",
                roles_of(held)
            ),
        )
    }
    /// The operator may not hand out `profile` (a lease, a fleet run's, a sign-in's).
    pub(crate) fn profile_not_held(profile: &str, held: &Grant) -> Refusal {
        Refusal::new(
            ErrorCode::RoleRequired,
            format!(
                "the operator may not issue `{profile}` (their profiles: {}); an operator hands out no more than they hold",
                match held.profile_names().join(", ") {
                    p if p.is_empty() => "none".to_owned(),
                    p => p,
                }
            ),
        )
    }
    /// What root itself failed at (a store error, a broken invariant): logged here, and the
    /// caller told only to look at root's log.
    pub(crate) fn internal(e: impl std::fmt::Display) -> Refusal {
        tracing::error!(error = %e, "internal error");
        Refusal::new(ErrorCode::Internal, "internal error; see the root's log")
    }
    /// The refusal as the contract's tool error (for an event, an MCP answer, a report).
    pub(crate) fn tool_error(&self) -> ToolError {
        self.error.clone()
    }
    /// The refusal, naming the audit event that records it.
    pub(crate) fn with_event(mut self, event_id: String) -> Refusal {
        self.event_id = Some(event_id);
        self
    }
}

impl From<ToolError> for Refusal {
    fn from(error: ToolError) -> Refusal {
        Refusal {
            error,
            event_id: None,
        }
    }
}

impl From<Refusal> for ToolError {
    fn from(r: Refusal) -> ToolError {
        r.error
    }
}
