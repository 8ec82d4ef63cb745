//! The fleet tools of a fleet lease (`root.fleet.{read,write,get}`) run fleet runs, which
//! sit above the call path: a fleet run makes governed calls. Their adapters are therefore
//! `crate::fleet::agents`, which the call path reaches through [`FleetTools`], held by the
//! app (which the implementation holds in turn, weakly).

use futures::future::BoxFuture;
use mcp_shared::error::ToolError;
use mcp_shared::protocol::CallBody;
use serde_json::Value;

use crate::call::context::CallContext;

/// The fleet tools' adapters.
pub(crate) trait FleetTools: Send + Sync {
    /// Runs adapter `name` (`root.fleet.read`, `root.fleet.write` or `root.fleet.get`).
    fn run<'a>(
        &'a self,
        ctx: &'a CallContext,
        name: &'a str,
        input: &'a CallBody,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;
}
