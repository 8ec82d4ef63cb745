//! Operators: who acts on root's operator endpoints (the REST family's admin side, the
//! `mcp-root admin` CLI, the console). Every operator action is one audit event naming the
//! operator (`operator:<name>`), so "who issued this bearer?" has an answer.
//!
//! The bootstrap credential, `admin.token`, is operator [`ADMIN`].

use std::sync::Arc;

/// The operator the bootstrap admin token (`<data_dir>/admin.token`) stands for.
pub const ADMIN: &str = "admin";

/// An authenticated operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorId {
    name: Arc<str>,
}

impl OperatorId {
    /// The operator of the bootstrap admin token.
    pub fn admin() -> OperatorId {
        OperatorId::named(ADMIN)
    }

    pub fn named(name: &str) -> OperatorId {
        OperatorId { name: name.into() }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The actor id events and records name: `operator:<name>`.
    pub fn actor_id(&self) -> String {
        format!("operator:{}", self.name)
    }
}
