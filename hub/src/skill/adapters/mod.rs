//! Execution adapters of `infra_access_skill`: each a ractor actor, spawned linked under the
//! skill, that runs one tool's bounded work.
//!
//! - [`status`] serves `hub.get_status`.
//! - [`runtime`] serves `hub.get_runtime_summary` (from `/proc` and `statvfs`).
//! - [`surface`] serves `hub.get_operational_surface`.
//! - [`health`] serves `hub.run_healthchecks`.
//! - [`test_runs`] serves `hub.run_allowed_tests` (writes: runs a configured test).
//! - [`test_results`] serves `hub.get_test_results`.
//! - [`activity_log`] serves `hub.get_activity_log` (the hub's record of finished calls).
//! - [`capability_usage`] serves `hub.get_capability_usage_summary` (per-tool counts and
//!   latency percentiles from that record).
//! - [`deploy`] serves `hub.deploy_ref` and `hub.rollback_last_test_deploy` (writes: move the
//!   `[deploy]` worktree to an allowed ref or back to the previous deploy, restart services).
//! - [`logs`] serves `hub.get_logs` (tails of service logs, log sources and the hub's own log,
//!   redacted on the hub; one hub's part of root's subnet-wide answer).
//! - [`restart_service`] serves `hub.restart_service` (writes: restarts a managed service of
//!   [`crate::machine::services`]; idempotency keys in [`crate::store::ledger`]).
//! - [`memory`] serves the ProfileOps tools `hub.memory.*` over [`crate::profiles`]: reads
//!   (`get_status`, `list_sessions`, `get_session`, `list_incidents`, `list_artifacts`,
//!   `get_artifact`) and writes (`start_profile`, `stop_profile`, `retry_profile`,
//!   `publish_profile`).
//! - [`nlu_authoring`] serves the NLUAuthoringPlane tools `nlu_authoring.*` over
//!   [`crate::nlu`]: reads (`get_context`, `list_templates`, `check_phrase`) and writes
//!   (`propose_change`, which only ever previews, and `apply_change`).
//! - [`command`] serves the tools of `[[skill.commands]]`: read tools whose work is a declared
//!   program (JSON arguments on stdin, a JSON object on stdout), the generic extension point
//!   for adding a tool to the hub without changing its code.
//! - An [`EmbeddedAdapter`] is compiled into a program that embeds the hub library (none in
//!   `mcp-hub`; the test suite's fault fixture is one).
//!
//! Each call reaches its adapter as a [`CallInput`]: the arguments plus the call's `dry_run`
//! flag, idempotency key and deadline from root's signed `CallRequest`.
//!
//! Guarantees: an adapter runs at most `skill.adapter_concurrency` calls at once and refuses
//! the next one at once with `busy`; each call runs in its own task and is stopped at its
//! deadline with `timeout`; a panic in a call is answered with `adapter_failed` and fails the
//! adapter actor (its other calls in flight are stopped and get `adapter_failed` too), which
//! the skill then restarts. A cancelled call is stopped and answered with nothing.

//!
//! Layout: [`table`] is the table of built-in adapters, expanded into their declarations in
//! [`decl`] ([`AdapterDecl`], `Builtin`, `ADAPTERS`) and their dispatch in [`registry`]
//! ([`AdapterKind`], `KINDS`); [`args`] reads a call's arguments into an adapter's typed
//! arguments; [`actor`] is the adapter actor ([`AdapterActor`]) that runs their calls.

pub(crate) mod activity_log;
mod actor;
pub(crate) mod args;
pub(crate) mod capability_usage;
pub(crate) mod command;
pub(crate) mod decl;
pub(crate) mod deploy;
pub(crate) mod health;
pub(crate) mod logs;
pub(crate) mod memory;
pub(crate) mod nlu_authoring;
pub(crate) mod redact;
pub(crate) mod registry;
pub(crate) mod restart_service;
pub(crate) mod runtime;
pub(crate) mod status;
pub(crate) mod surface;
mod table;
pub(crate) mod test_results;
pub(crate) mod test_runs;

#[cfg(test)]
mod contract_tests;
#[cfg(test)]
mod memory_contract_tests;

use std::sync::Arc;

use serde_json::Value;

use mcp_shared::error::ToolError;

pub(crate) use actor::{AdapterActor, AdapterArgs, AdapterMsg, CrashReport};
#[cfg(test)]
pub(crate) use decl::ADAPTERS;
pub(crate) use decl::AdapterDecl;
use registry::no_arguments;
pub(crate) use registry::{AdapterKind, EmbeddedAdapter, served};
#[cfg(test)]
pub(crate) use registry::{KINDS, serve_everything};

/// One call as an adapter receives it.
#[derive(Debug, Clone)]
pub struct CallInput {
    pub call_id: String,
    /// The tool's arguments (root has stripped its own control fields).
    pub arguments: Value,
    /// From the signed `CallRequest`: describe the effect, change nothing.
    pub dry_run: bool,
    /// From the signed `CallRequest`.
    pub idempotency_key: Option<String>,
    /// From the signed `CallRequest`: a write's execute carries the dry-run effect the caller
    /// previewed and confirmed; an adapter whose world can move in between checks it.
    pub confirmed_effect: Option<Value>,
    /// When the call must be answered; the adapter task is stopped then.
    pub deadline: tokio::time::Instant,
    /// Where the adapter reports how far it has got.
    pub progress: Progress,
    /// The call's span (root's trace continued, OpenTelemetry on): the adapter's run is its
    /// child.
    pub span: tracing::Span,
}

/// Where an adapter reports how far a call has got (deploy steps, tests run): `progress`
/// frames to root, best effort (one the connection cannot queue at once is dropped). The
/// message says counts and step names, never output.
#[derive(Clone, Default)]
pub struct Progress(Option<Arc<Report>>);

/// What a [`Progress`] reports to: `(done, total, message)`.
type Report = dyn Fn(f64, Option<f64>, String) + Send + Sync;

impl Progress {
    /// Progress reported to `report(done, total, message)`.
    pub fn new(report: impl Fn(f64, Option<f64>, String) + Send + Sync + 'static) -> Progress {
        Progress(Some(Arc::new(report)))
    }

    /// Reports `done` (of `total`, when known); `done` only grows.
    pub fn report(&self, done: f64, total: Option<f64>, message: impl Into<String>) {
        if let Some(report) = &self.0 {
            report(done, total, message.into());
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Progress(reported)"
        } else {
            "Progress(none)"
        })
    }
}

impl CallInput {
    /// A call that is not a dry run and carries no idempotency key.
    pub fn new(call_id: &str, arguments: Value, deadline: tokio::time::Instant) -> CallInput {
        CallInput {
            call_id: call_id.to_owned(),
            arguments,
            dry_run: false,
            idempotency_key: None,
            confirmed_effect: None,
            deadline,
            progress: Progress::default(),
            span: tracing::Span::none(),
        }
    }
}

/// What an adapter replies to a call.
pub type AdapterReply = Result<Value, ToolError>;
