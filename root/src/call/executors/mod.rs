//! Root adapters: the operational tools that root executes itself because root is their
//! source of truth. A contract opts in with `"executor": "<name>"`; the governed call path
//! (policy, validation, limits, preview/confirmation for writes, audit) is the same as for
//! routed tools, only the last step runs here instead of on the target's hub.
//!
//! - [`access_tokens`]: `root.access_tokens.{list,issue,revoke}` manage MCP session leases for
//!   the caller's target (never wider than the caller's own profile and deadline).
//! - [`logs`]: `root.logs` serves `hub.get_logs`: `root_local` from root's log ring,
//!   `subnet_active` by fanning the call out to every connected hub of the lease's subnet.
//! - [`subnet`]: `root.subnet.{analysis_health,timeline,diagnostics}`, compact subnet views
//!   from the target directory, router pressure, the audit trail and retained summaries.
//! - [`retained`]: `root.retained.memory_profiles` serves what hubs published (a contract's
//!   `retain`), with no hub round trip.
//! - [`evidence`]: `root.evidence.*` answer the ProfileOps reads while the target is offline
//!   (a contract's `offline`), from the evidence its hub published.
//! - [`fleet`]: `root.fleet.{read,write,get}`, the fleet tools of a fleet lease: one tool
//!   on every target of its selector, as a fleet run (run by `crate::fleet::agents`).
//! - [`reach`]: how far the tools that reach several targets go (the lease's subnet, in the
//!   environment of the lease's target).
//!
//! The table in [`run`] maps adapter names to code; `catalog` refuses a contract naming an
//! adapter that is not in [`crate::catalog::ROOT_EXECUTORS`].

pub(crate) mod access_tokens;
pub(crate) mod evidence;
pub(crate) mod fleet;
pub(crate) mod input;
pub(crate) mod logs;
pub(crate) mod reach;
pub(crate) mod retained;
pub(crate) mod subnet;

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::event::OperationalEvent;
use mcp_shared::protocol::CallBody;
use serde_json::Value;

use crate::app::App;
use crate::call::context::CallContext;
use crate::catalog::ContractEntry;

pub(crate) async fn run(
    app: &App,
    ctx: &CallContext,
    entry: &ContractEntry,
    name: &str,
    input: CallBody,
    event: &mut OperationalEvent,
) -> Result<Value, ToolError> {
    match name {
        "root.access_tokens.list" => access_tokens::list(app, ctx, &input),
        "root.access_tokens.issue" => access_tokens::issue(app, ctx, &input).await,
        "root.access_tokens.revoke" => access_tokens::revoke(app, ctx, &input).await,
        "root.logs" => logs::run(app, ctx, entry, &input, event).await,
        "root.subnet.analysis_health" => subnet::analysis_health(app, ctx).await,
        "root.subnet.timeline" => subnet::timeline(app, ctx, &input).await,
        "root.subnet.diagnostics" => subnet::diagnostics(app, ctx).await,
        "root.retained.memory_profiles" => retained::memory_profiles(app, ctx, &input).await,
        "root.fleet.read" | "root.fleet.write" | "root.fleet.get" => {
            app.fleet_tools.run(ctx, name, &input).await
        }
        other => Err(ToolError::new(
            ErrorCode::Internal,
            format!("no root adapter `{other}`"),
        )),
    }
}
