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
pub(crate) mod call;
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

pub(crate) use actor::{AdapterActor, AdapterArgs, AdapterMsg, CrashReport};
pub use call::{AdapterReply, CallInput, Progress};
#[cfg(test)]
pub(crate) use decl::ADAPTERS;
pub(crate) use decl::AdapterDecl;
pub(crate) use registry::{AdapterKind, EmbeddedAdapter, served};
#[cfg(test)]
pub(crate) use registry::{KINDS, serve_everything};
