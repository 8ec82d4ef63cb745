//! Execution adapters of `infra_access_skill`: each a ractor actor, spawned linked under the
//! skill, that runs one tool's bounded work.
//!
//! - [`status`] serves `hub.get_status`.
//! - [`runtime`] serves `hub.get_runtime_summary` (from `/proc` and `statvfs`).
//! - [`surface`] serves `hub.get_operational_surface`.
//! - [`health`] serves `hub.run_healthchecks`.
//! - [`allowed_tests`] serves `hub.run_allowed_tests` (writes: runs a configured test).
//! - [`test_results`] serves `hub.get_test_results`.
//! - [`activity_log`] serves `hub.get_activity_log` (the hub's record of finished calls).
//! - [`capability_usage`] serves `hub.get_capability_usage_summary` (per-tool counts and
//!   latency percentiles from that record).
//! - [`deploy`] serves `hub.deploy_ref` and `hub.rollback_last_test_deploy` (writes: move the
//!   `[deploy]` worktree to an allowed ref or back to the previous deploy, restart services).
//! - [`logs`] serves `hub.get_logs` (tails of service logs, log sources and the hub's own log,
//!   redacted on the hub; one hub's part of root's subnet-wide answer).
//! - [`restart_service`] serves `hub.restart_service` (writes: restarts a managed service of
//!   [`crate::services`]; idempotency keys in [`crate::ledger`]).
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

pub mod activity_log;
pub mod allowed_tests;
pub mod capability_usage;
pub mod command;
pub mod deploy;
pub mod health;
pub mod logs;
pub mod memory;
pub mod nlu_authoring;
pub mod restart_service;
pub mod runtime;
pub mod status;
pub mod surface;
pub mod test_results;

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use mcp_shared::error::{ErrorCode, ToolError};
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::AbortHandle;

use crate::context::HubContext;

/// What an adapter declares about itself: the tool it serves, its name, whether it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdapterDecl {
    pub tool_id: &'static str,
    pub name: &'static str,
    pub writes: bool,
}

/// The work of an [`EmbeddedAdapter`]: one call, on a task of its own.
pub type EmbeddedRun = fn(Arc<HubContext>, CallInput) -> BoxFuture<'static, AdapterReply>;

/// An adapter compiled into the program that embeds the hub library, not into the hub: the
/// extension point for in-process adapters (`HubConfig::embedded`). The `mcp-hub` binary has
/// none; the test suite's fault fixture (an adapter that panics or hangs on request) is one,
/// so fault injection is in no contract and no release build.
pub struct EmbeddedAdapter {
    pub decl: AdapterDecl,
    pub run: EmbeddedRun,
}

impl std::fmt::Debug for EmbeddedAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedAdapter")
            .field("decl", &self.decl)
            .finish_non_exhaustive()
    }
}

impl PartialEq for EmbeddedAdapter {
    fn eq(&self, other: &Self) -> bool {
        self.decl == other.decl
    }
}

impl Eq for EmbeddedAdapter {}

/// Which implementation an adapter actor runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterKind {
    /// A configured command adapter ([`command`]); it carries its declaration (tool id and
    /// name from the configuration), so it is not in [`KINDS`].
    Command(AdapterDecl),
    /// An adapter of the embedding program ([`EmbeddedAdapter`]).
    Embedded(&'static EmbeddedAdapter),
    Status,
    RuntimeSummary,
    OperationalSurface,
    Healthchecks,
    AllowedTests,
    TestResults,
    ActivityLog,
    CapabilityUsage,
    DeployRef,
    RollbackLastTestDeploy,
    GetLogs,
    RestartService,
    MemoryStatus,
    MemoryListSessions,
    MemoryGetSession,
    MemoryListIncidents,
    MemoryListArtifacts,
    MemoryGetArtifact,
    MemoryStartProfile,
    MemoryStopProfile,
    MemoryRetryProfile,
    MemoryPublishProfile,
    NluGetContext,
    NluListTemplates,
    NluCheckPhrase,
    NluProposeChange,
    NluApplyChange,
}

/// Every built-in adapter kind, in the order of [`ADAPTERS`] (configured command adapters
/// come from `[[skill.commands]]`: [`crate::context::HubContext::adapter_kinds`]).
pub const KINDS: [AdapterKind; 27] = [
    AdapterKind::Status,
    AdapterKind::RuntimeSummary,
    AdapterKind::OperationalSurface,
    AdapterKind::Healthchecks,
    AdapterKind::AllowedTests,
    AdapterKind::TestResults,
    AdapterKind::ActivityLog,
    AdapterKind::CapabilityUsage,
    AdapterKind::DeployRef,
    AdapterKind::RollbackLastTestDeploy,
    AdapterKind::GetLogs,
    AdapterKind::RestartService,
    AdapterKind::MemoryStatus,
    AdapterKind::MemoryListSessions,
    AdapterKind::MemoryGetSession,
    AdapterKind::MemoryListIncidents,
    AdapterKind::MemoryListArtifacts,
    AdapterKind::MemoryGetArtifact,
    AdapterKind::MemoryStartProfile,
    AdapterKind::MemoryStopProfile,
    AdapterKind::MemoryRetryProfile,
    AdapterKind::MemoryPublishProfile,
    AdapterKind::NluGetContext,
    AdapterKind::NluListTemplates,
    AdapterKind::NluCheckPhrase,
    AdapterKind::NluProposeChange,
    AdapterKind::NluApplyChange,
];

/// Every built-in adapter of `infra_access_skill`, with the tool it serves.
pub const ADAPTERS: [AdapterDecl; KINDS.len()] = {
    let mut decls = [AdapterKind::Status.decl(); KINDS.len()];
    let mut i = 0;
    while i < KINDS.len() {
        decls[i] = KINDS[i].decl();
        i += 1;
    }
    decls
};

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
        }
    }
}

impl AdapterKind {
    pub const fn decl(self) -> AdapterDecl {
        match self {
            AdapterKind::Command(decl) => decl,
            AdapterKind::Embedded(e) => e.decl,
            AdapterKind::Status => AdapterDecl {
                tool_id: "hub.get_status",
                name: "infra_access_skill.status",
                writes: false,
            },
            AdapterKind::RuntimeSummary => AdapterDecl {
                tool_id: "hub.get_runtime_summary",
                name: "infra_access_skill.runtime_summary",
                writes: false,
            },
            AdapterKind::OperationalSurface => AdapterDecl {
                tool_id: "hub.get_operational_surface",
                name: "infra_access_skill.operational_surface",
                writes: false,
            },
            AdapterKind::Healthchecks => AdapterDecl {
                tool_id: "hub.run_healthchecks",
                name: "infra_access_skill.healthchecks",
                writes: false,
            },
            AdapterKind::AllowedTests => AdapterDecl {
                tool_id: "hub.run_allowed_tests",
                name: "infra_access_skill.allowed_tests",
                writes: true,
            },
            AdapterKind::TestResults => AdapterDecl {
                tool_id: "hub.get_test_results",
                name: "infra_access_skill.test_results",
                writes: false,
            },
            AdapterKind::ActivityLog => AdapterDecl {
                tool_id: "hub.get_activity_log",
                name: "infra_access_skill.activity_log",
                writes: false,
            },
            AdapterKind::CapabilityUsage => AdapterDecl {
                tool_id: "hub.get_capability_usage_summary",
                name: "infra_access_skill.capability_usage",
                writes: false,
            },
            AdapterKind::DeployRef => AdapterDecl {
                tool_id: "hub.deploy_ref",
                name: "infra_access_skill.deploy_ref",
                writes: true,
            },
            AdapterKind::RollbackLastTestDeploy => AdapterDecl {
                tool_id: "hub.rollback_last_test_deploy",
                name: "infra_access_skill.rollback",
                writes: true,
            },
            AdapterKind::GetLogs => AdapterDecl {
                tool_id: "hub.get_logs",
                name: "infra_access_skill.logs",
                writes: false,
            },
            AdapterKind::RestartService => AdapterDecl {
                tool_id: "hub.restart_service",
                name: "infra_access_skill.restart_service",
                writes: true,
            },
            AdapterKind::MemoryStatus => AdapterDecl {
                tool_id: "hub.memory.get_status",
                name: "infra_access_skill.memory.status",
                writes: false,
            },
            AdapterKind::MemoryListSessions => AdapterDecl {
                tool_id: "hub.memory.list_sessions",
                name: "infra_access_skill.memory.list_sessions",
                writes: false,
            },
            AdapterKind::MemoryGetSession => AdapterDecl {
                tool_id: "hub.memory.get_session",
                name: "infra_access_skill.memory.get_session",
                writes: false,
            },
            AdapterKind::MemoryListIncidents => AdapterDecl {
                tool_id: "hub.memory.list_incidents",
                name: "infra_access_skill.memory.list_incidents",
                writes: false,
            },
            AdapterKind::MemoryListArtifacts => AdapterDecl {
                tool_id: "hub.memory.list_artifacts",
                name: "infra_access_skill.memory.list_artifacts",
                writes: false,
            },
            AdapterKind::MemoryGetArtifact => AdapterDecl {
                tool_id: "hub.memory.get_artifact",
                name: "infra_access_skill.memory.get_artifact",
                writes: false,
            },
            AdapterKind::MemoryStartProfile => AdapterDecl {
                tool_id: "hub.memory.start_profile",
                name: "infra_access_skill.memory.start_profile",
                writes: true,
            },
            AdapterKind::MemoryStopProfile => AdapterDecl {
                tool_id: "hub.memory.stop_profile",
                name: "infra_access_skill.memory.stop_profile",
                writes: true,
            },
            AdapterKind::MemoryRetryProfile => AdapterDecl {
                tool_id: "hub.memory.retry_profile",
                name: "infra_access_skill.memory.retry_profile",
                writes: true,
            },
            AdapterKind::MemoryPublishProfile => AdapterDecl {
                tool_id: "hub.memory.publish_profile",
                name: "infra_access_skill.memory.publish_profile",
                writes: true,
            },
            AdapterKind::NluGetContext => AdapterDecl {
                tool_id: "nlu_authoring.get_context",
                name: "infra_access_skill.nlu_authoring.get_context",
                writes: false,
            },
            AdapterKind::NluListTemplates => AdapterDecl {
                tool_id: "nlu_authoring.list_templates",
                name: "infra_access_skill.nlu_authoring.list_templates",
                writes: false,
            },
            AdapterKind::NluCheckPhrase => AdapterDecl {
                tool_id: "nlu_authoring.check_phrase",
                name: "infra_access_skill.nlu_authoring.check_phrase",
                writes: false,
            },
            AdapterKind::NluProposeChange => AdapterDecl {
                tool_id: "nlu_authoring.propose_change",
                name: "infra_access_skill.nlu_authoring.propose_change",
                writes: true,
            },
            AdapterKind::NluApplyChange => AdapterDecl {
                tool_id: "nlu_authoring.apply_change",
                name: "infra_access_skill.nlu_authoring.apply_change",
                writes: true,
            },
        }
    }

    /// The built-in adapter serving `tool_id`.
    pub fn for_tool(tool_id: &str) -> Option<AdapterKind> {
        KINDS.into_iter().find(|k| k.decl().tool_id == tool_id)
    }

    /// Runs the adapter's work (in a task of its own).
    pub async fn run(self, ctx: Arc<HubContext>, input: CallInput) -> Result<Value, ToolError> {
        let arguments = &input.arguments;
        match self {
            AdapterKind::Command(decl) => command::run(&ctx, decl.tool_id, input).await,
            AdapterKind::Embedded(e) => (e.run)(ctx, input).await,
            AdapterKind::Status => status::run(&ctx, arguments).await,
            AdapterKind::RuntimeSummary => {
                no_arguments(arguments)?;
                runtime::run(&ctx).await
            }
            AdapterKind::OperationalSurface => {
                no_arguments(arguments)?;
                Ok(surface::run(&ctx))
            }
            AdapterKind::Healthchecks => {
                no_arguments(arguments)?;
                Ok(health::run(&ctx).await)
            }
            AdapterKind::AllowedTests => allowed_tests::run(&ctx, input).await,
            AdapterKind::TestResults => test_results::run(&ctx, arguments),
            AdapterKind::ActivityLog => activity_log::run(&ctx, arguments),
            AdapterKind::CapabilityUsage => {
                no_arguments(arguments)?;
                Ok(capability_usage::run(&ctx))
            }
            AdapterKind::DeployRef => deploy::deploy_ref(&ctx, input).await,
            AdapterKind::RollbackLastTestDeploy => deploy::rollback(&ctx, input).await,
            AdapterKind::GetLogs => logs::run(&ctx, arguments).await,
            AdapterKind::RestartService => restart_service::run(&ctx, input).await,
            AdapterKind::MemoryStatus => memory::status(&ctx, arguments),
            AdapterKind::MemoryListSessions => memory::list_sessions(&ctx, arguments),
            AdapterKind::MemoryGetSession => memory::get_session(&ctx, arguments),
            AdapterKind::MemoryListIncidents => memory::list_incidents(&ctx, arguments),
            AdapterKind::MemoryListArtifacts => memory::list_artifacts(&ctx, arguments),
            AdapterKind::MemoryGetArtifact => memory::get_artifact(&ctx, arguments),
            AdapterKind::MemoryStartProfile => memory::start(&ctx, input).await,
            AdapterKind::MemoryStopProfile => memory::stop(&ctx, input).await,
            AdapterKind::MemoryRetryProfile => memory::retry(&ctx, input).await,
            AdapterKind::MemoryPublishProfile => memory::publish(&ctx, input).await,
            AdapterKind::NluGetContext => nlu_authoring::get_context(&ctx, arguments),
            AdapterKind::NluListTemplates => nlu_authoring::list_templates(&ctx, arguments),
            AdapterKind::NluCheckPhrase => nlu_authoring::check_phrase(&ctx, arguments),
            AdapterKind::NluProposeChange => nlu_authoring::propose_change(&ctx, &input),
            AdapterKind::NluApplyChange => nlu_authoring::apply_change(&ctx, &input),
        }
    }
}

/// Refuses anything but `{}` (root validates too; the hub does not rely on it).
fn no_arguments(arguments: &Value) -> Result<(), ToolError> {
    match arguments {
        Value::Object(m) if m.is_empty() => Ok(()),
        Value::Null => Ok(()),
        _ => Err(ToolError::new(
            ErrorCode::InvalidArguments,
            "this tool takes no arguments",
        )),
    }
}

/// What an adapter replies to a call.
pub type AdapterReply = Result<Value, ToolError>;

pub enum AdapterMsg {
    /// Run one call; refused at once with `busy` over the concurrency limit.
    Run {
        input: CallInput,
        reply: RpcReplyPort<AdapterReply>,
    },
    /// Stop a call in flight (its caller gets no reply).
    Cancel { call_id: String },
    /// A call's task finished.
    Done { call_id: String },
    /// A call's work panicked: answer it, report to the skill, then fail this actor.
    Crashed {
        call_id: String,
        message: String,
        reply: RpcReplyPort<AdapterReply>,
    },
}

/// Sent by an adapter to its skill when a call panicked, before the adapter fails.
pub struct CrashReport {
    pub kind: AdapterKind,
    pub adapter: ActorId,
    pub call_id: String,
    pub message: String,
    pub reply: RpcReplyPort<AdapterReply>,
}

pub struct AdapterArgs {
    pub kind: AdapterKind,
    pub ctx: Arc<HubContext>,
    /// Where crash reports go (the skill turns them into a restart and then the reply).
    pub on_crash: Arc<dyn Fn(CrashReport) + Send + Sync>,
}

pub struct AdapterActor;

pub struct AdapterState {
    args: Arc<AdapterArgs>,
    permits: Arc<Semaphore>,
    running: HashMap<String, AbortHandle>,
}

/// Aborts a task when dropped (so stopping a call also stops its work).
struct AbortOnDrop(AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn panic_message(err: tokio::task::JoinError) -> String {
    match err.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_owned()),
        Err(e) => e.to_string(),
    }
}

impl Actor for AdapterActor {
    type Msg = AdapterMsg;
    type State = AdapterState;
    type Arguments = Arc<AdapterArgs>;

    async fn pre_start(
        &self,
        _myself: ActorRef<AdapterMsg>,
        args: Arc<AdapterArgs>,
    ) -> Result<AdapterState, ActorProcessingErr> {
        let limit = args.ctx.config.skill.adapter_concurrency.max(1);
        Ok(AdapterState {
            args,
            permits: Arc::new(Semaphore::new(limit)),
            running: HashMap::new(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<AdapterMsg>,
        state: &mut AdapterState,
    ) -> Result<(), ActorProcessingErr> {
        // Calls in flight die with the adapter; their callers see the reply port close.
        for (_, task) in state.running.drain() {
            task.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<AdapterMsg>,
        msg: AdapterMsg,
        state: &mut AdapterState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            AdapterMsg::Run { input, reply } => {
                let call_id = input.call_id.clone();
                let deadline = input.deadline;
                let kind = state.args.kind;
                let Ok(permit) = state.permits.clone().try_acquire_owned() else {
                    let limit = state.args.ctx.config.skill.adapter_concurrency;
                    let _ = reply.send(Err(ToolError::new(
                        ErrorCode::Busy,
                        format!(
                            "adapter `{}` already runs {limit} calls; retry later",
                            kind.decl().name
                        ),
                    )));
                    return Ok(());
                };
                let ctx = state.args.ctx.clone();
                let me = myself.clone();
                let id = call_id.clone();
                let task = tokio::spawn(async move {
                    let _permit = permit;
                    let work = tokio::spawn(kind.run(ctx, input));
                    let _guard = AbortOnDrop(work.abort_handle());
                    match tokio::time::timeout_at(deadline, work).await {
                        Ok(Ok(outcome)) => {
                            let _ = reply.send(outcome);
                        }
                        Ok(Err(e)) if e.is_panic() => {
                            let message = panic_message(e);
                            let _ = me.cast(AdapterMsg::Crashed {
                                call_id: id.clone(),
                                message,
                                reply,
                            });
                        }
                        Ok(Err(e)) => {
                            let _ = reply.send(Err(ToolError::new(
                                ErrorCode::AdapterFailed,
                                format!("the adapter's task stopped: {e}"),
                            )));
                        }
                        Err(_) => {
                            let _ = reply.send(Err(ToolError::new(
                                ErrorCode::Timeout,
                                format!(
                                    "adapter `{}` did not finish before the call's deadline",
                                    kind.decl().name
                                ),
                            )));
                        }
                    }
                    let _ = me.cast(AdapterMsg::Done { call_id: id });
                });
                state.running.insert(call_id, task.abort_handle());
            }
            AdapterMsg::Cancel { call_id } => {
                if let Some(task) = state.running.remove(&call_id) {
                    tracing::debug!(%call_id, adapter = state.args.kind.decl().name, "call cancelled");
                    task.abort();
                }
            }
            AdapterMsg::Done { call_id } => {
                state.running.remove(&call_id);
            }
            AdapterMsg::Crashed {
                call_id,
                message,
                reply,
            } => {
                state.running.remove(&call_id);
                let name = state.args.kind.decl().name;
                tracing::error!(%call_id, adapter = name, panic = %message, "adapter panicked; failing it for a restart");
                (state.args.on_crash)(CrashReport {
                    kind: state.args.kind,
                    adapter: myself.get_id(),
                    call_id,
                    message: message.clone(),
                    reply,
                });
                return Err(format!("adapter `{name}` panicked: {message}").into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{AllowedTestConfig, HealthcheckConfig, HubConfig};
    use mcp_shared::{SideEffectClass, ToolContract};
    use serde_json::json;

    pub(super) fn contract(tool: &str) -> ToolContract {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../schemas/tools")
            .join(format!("{tool}.json"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
    }

    pub(super) fn validator(schema: &Value) -> jsonschema::Validator {
        jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(schema)
            .expect("schema compiles")
    }

    pub(super) fn assert_valid(what: &str, schema: &Value, instance: &Value) {
        let v = validator(schema);
        let errors: Vec<String> = v
            .iter_errors(instance)
            .map(|e| format!("  at `{}`: {e}", e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{what}: {instance}\n{}",
            errors.join("\n")
        );
    }

    /// Every adapter's real answer matches its contract's output schema, and every contract
    /// matches the adapter's declaration.
    #[tokio::test]
    async fn answers_match_the_tool_contracts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let open = listener.local_addr().expect("addr").to_string();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").to_string()
        };
        for (subnet, zone, checks) in [
            (None, None, vec![]),
            (
                Some("subnet-1".to_owned()),
                Some("eu".to_owned()),
                vec![
                    HealthcheckConfig::Tcp {
                        name: "open".into(),
                        address: open.clone(),
                        timeout_ms: 1_000,
                    },
                    HealthcheckConfig::Http {
                        name: "closed".into(),
                        url: format!("http://{closed}/healthz"),
                        expect_status: 200,
                        timeout_ms: 1_000,
                    },
                    HealthcheckConfig::Command {
                        name: "true".into(),
                        argv: vec!["true".into()],
                        cwd: None,
                        timeout_ms: 1_000,
                    },
                    HealthcheckConfig::Command {
                        name: "slow".into(),
                        argv: vec!["sleep".into(), "5".into()],
                        cwd: None,
                        timeout_ms: 200,
                    },
                ],
            ),
        ] {
            let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", dir.path());
            config.subnet = subnet;
            config.zone = zone;
            config.skill.healthchecks = checks;
            let ctx = Arc::new(HubContext::new(config).expect("context"));
            ctx.connected_since
                .store(Some(Arc::new(mcp_shared::time::now())));
            for kind in KINDS {
                let decl = kind.decl();
                let c = contract(decl.tool_id);
                assert_eq!(c.tool_id, decl.tool_id);
                assert_eq!(c.side_effect == SideEffectClass::Read, !decl.writes);
                if matches!(
                    kind,
                    AdapterKind::AllowedTests
                        | AdapterKind::DeployRef
                        | AdapterKind::RollbackLastTestDeploy
                        | AdapterKind::RestartService
                        | AdapterKind::MemoryGetSession
                        | AdapterKind::MemoryGetArtifact
                        | AdapterKind::MemoryStartProfile
                        | AdapterKind::MemoryStopProfile
                        | AdapterKind::MemoryRetryProfile
                        | AdapterKind::MemoryPublishProfile
                        | AdapterKind::NluGetContext
                        | AdapterKind::NluListTemplates
                        | AdapterKind::NluCheckPhrase
                        | AdapterKind::NluProposeChange
                        | AdapterKind::NluApplyChange
                ) {
                    // Writes with arguments and state; see `test_tool_answers_match_their_contracts`,
                    // `deploy_tool_answers_match_their_contracts`,
                    // `service_tool_answers_match_their_contracts`,
                    // `profile_tool_answers_match_their_contracts` and (NLU content, which
                    // these configurations lack) `nlu_authoring::tests`.
                    continue;
                }
                assert_valid(
                    &format!("{} input", decl.tool_id),
                    &c.input_schema,
                    &json!({}),
                );
                let answer = kind
                    .run(ctx.clone(), CallInput::new("c", json!({}), soon()))
                    .await
                    .unwrap_or_else(|e| panic!("{}: {e}", decl.tool_id));
                assert_valid(
                    &format!("{} output", decl.tool_id),
                    &c.output_schema,
                    &answer,
                );
                if decl.tool_id == "hub.run_healthchecks"
                    && !ctx.config.skill.healthchecks.is_empty()
                {
                    assert_eq!(answer["status"], "degraded");
                    let ok: Vec<bool> = answer["checks"]
                        .as_array()
                        .expect("checks")
                        .iter()
                        .map(|c| c["ok"] == true)
                        .collect();
                    assert_eq!(ok, [true, false, true, false], "{answer}");
                    assert!(answer["checks"][3]["latency_ms"].as_u64().expect("ms") < 2_000);
                }
            }
        }
        // Test fault injection is in no contract: hub.get_status takes no arguments.
        let c = contract("hub.get_status");
        assert!(validator(&c.input_schema).is_valid(&json!({})));
        assert!(!validator(&c.input_schema).is_valid(&json!({"fault": "hang"})));
    }

    fn soon() -> tokio::time::Instant {
        tokio::time::Instant::now() + std::time::Duration::from_secs(10)
    }

    /// The deploy tools: dry-run effects and execute results (first deploy, fast-forward,
    /// rollback) fit root's write envelope, and their inputs are what root accepts.
    #[tokio::test]
    async fn deploy_tool_answers_match_their_contracts() {
        use super::deploy::tests::{call, config, fixture_repo};
        let dir = tempfile::tempdir().expect("tempdir");
        let (src, _) = fixture_repo(dir.path());
        let ctx = Arc::new(HubContext::new(config(dir.path(), &src)).expect("context"));
        let deploy = contract("hub.deploy_ref");
        let rollback = contract("hub.rollback_last_test_deploy");
        let deploy_input = validator(&deploy.input_schema);
        for ok in [
            json!({"ref": "v1"}),
            json!({"ref": "release/1.0", "phase": "preview"}),
            json!({"ref": "v1", "phase": "execute", "confirmation_token": "c", "idempotency_key": "k"}),
            json!({"ref": "v1", "dry_run": true}),
        ] {
            assert!(deploy_input.is_valid(&ok), "{ok}");
        }
        for bad in [
            json!({}),
            json!({"ref": ""}),
            json!({"ref": "main;rm"}),
            json!({"ref": "v1 v2"}),
            json!({"ref": "v1", "worktree": "/"}),
        ] {
            assert!(!deploy_input.is_valid(&bad), "{bad}");
        }
        let rollback_input = validator(&rollback.input_schema);
        assert!(rollback_input.is_valid(&json!({})));
        assert!(rollback_input.is_valid(
            &json!({"phase": "execute", "confirmation_token": "c", "idempotency_key": "k"})
        ));
        assert!(!rollback_input.is_valid(&json!({"ref": "v1"})));

        let check = |c: &ToolContract, effect: Option<&Value>, result: Option<&Value>| {
            if let Some(effect) = effect {
                for phase in ["dry_run", "preview"] {
                    assert_valid(
                        &format!("{} {phase}", c.tool_id),
                        &c.output_schema,
                        &json!({"phase": phase, "expected_effect": effect, "confirmation_token": "t",
                                "confirmation_expires_at": "2026-01-01T00:00:00Z", "summary": "s"}),
                    );
                }
            }
            if let Some(result) = result {
                assert_valid(
                    &format!("{} execute", c.tool_id),
                    &c.output_schema,
                    &json!({"phase": "execute", "result": result, "replay": false, "idempotency_key": "k"}),
                );
            }
        };
        let kind = AdapterKind::DeployRef;
        for r in ["v1", "main"] {
            let effect = call(&ctx, kind, json!({"ref": r}), true, None)
                .await
                .expect("dry run");
            let result = call(&ctx, kind, json!({"ref": r}), false, Some(r))
                .await
                .expect("deploys");
            check(&deploy, Some(&effect), Some(&result));
        }
        let kind = AdapterKind::RollbackLastTestDeploy;
        let effect = call(&ctx, kind, json!({}), true, None)
            .await
            .expect("dry run");
        let result = call(&ctx, kind, json!({}), false, Some("r"))
            .await
            .expect("rolls back");
        check(&rollback, Some(&effect), Some(&result));
        assert!(
            !validator(&rollback.output_schema).is_valid(
                &json!({"phase": "execute", "result": {"action": "rollback_last_test_deploy"}})
            ),
            "a result must be complete"
        );
    }

    /// The allowed-test tools: the hub's dry-run effect and run result fit root's write
    /// envelope (`expected_effect`, `result`), and recorded results fit `hub.get_test_results`.
    #[tokio::test]
    async fn test_tool_answers_match_their_contracts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", dir.path());
        config.skill.allowed_tests = vec![
            AllowedTestConfig {
                name: "ok".into(),
                argv: vec!["echo".into(), "Bearer abcdefgh12345".into()],
                cwd: Some(dir.path().to_owned()),
                timeout_ms: 5_000,
                env: Default::default(),
            },
            AllowedTestConfig {
                name: "slow".into(),
                argv: vec!["sleep".into(), "5".into()],
                cwd: None,
                timeout_ms: 100,
                env: Default::default(),
            },
        ];
        let ctx = Arc::new(HubContext::new(config).expect("context"));
        let run_contract = contract("hub.run_allowed_tests");
        let envelope = &run_contract.output_schema;
        let input = validator(&run_contract.input_schema);
        for ok in [
            json!({"name": "ok"}),
            json!({"name": "ok", "phase": "preview"}),
            json!({"name": "ok", "phase": "execute", "confirmation_token": "c", "idempotency_key": "k"}),
            json!({"name": "ok", "dry_run": true}),
        ] {
            assert!(input.is_valid(&ok), "{ok}");
        }
        for bad in [
            json!({}),
            json!({"name": ""}),
            json!({"name": "ok", "argv": ["x"]}),
        ] {
            assert!(!input.is_valid(&bad), "{bad}");
        }
        let call = |name: &str, dry_run: bool| {
            let mut input = CallInput::new("c", json!({ "name": name }), soon());
            input.dry_run = dry_run;
            AdapterKind::AllowedTests.run(ctx.clone(), input)
        };
        let effect = call("ok", true).await.expect("dry run");
        assert_valid(
            "dry run",
            envelope,
            &json!({"phase": "dry_run", "expected_effect": effect}),
        );
        let mut results = Vec::new();
        for name in ["ok", "slow"] {
            let result = call(name, false).await.expect("runs");
            assert_valid(
                "execute",
                envelope,
                &json!({"phase": "execute", "result": result, "replay": false, "idempotency_key": "k", "summary": "s"}),
            );
            results.push(result);
        }
        assert_eq!(results[0]["redactions"], 1);
        assert_eq!(results[1]["timed_out"], true);
        let effect = call("ok", true).await.expect("dry run");
        assert_eq!(effect["last_result"], results[0]);
        assert_valid(
            "preview",
            envelope,
            &json!({"phase": "preview", "expected_effect": effect, "confirmation_token": "t",
                    "confirmation_expires_at": "2026-01-01T00:00:00Z"}),
        );
        assert!(!validator(envelope).is_valid(&json!({"expected_effect": effect})));

        let read_contract = contract("hub.get_test_results");
        let answer = AdapterKind::TestResults
            .run(
                ctx.clone(),
                CallInput::new("r", json!({"limit": 50}), soon()),
            )
            .await
            .expect("results");
        assert_eq!(answer["results"].as_array().map(Vec::len), Some(2));
        assert_valid("results", &read_contract.output_schema, &answer);
        let input = validator(&read_contract.input_schema);
        assert!(input.is_valid(&json!({"name": "ok", "limit": 1})));
        assert!(!input.is_valid(&json!({"limit": 51})));
        assert!(!input.is_valid(&json!({"limit": 0})));
    }

    /// Managed services: the runtime summary's `services`, service health checks and
    /// `hub.restart_service` (dry-run effect, result) fit their contracts.
    #[tokio::test]
    async fn service_tool_answers_match_their_contracts() {
        use crate::config::{ServiceConfig, ServiceHealthConfig};
        let dir = tempfile::tempdir().expect("tempdir");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let open = listener.local_addr().expect("addr").to_string();
        let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", dir.path());
        let mut web = ServiceConfig::new("web", vec!["sleep".into(), "30".into()]);
        web.health = Some(ServiceHealthConfig::Tcp {
            address: open,
            timeout_ms: 1_000,
        });
        let mut quitter = ServiceConfig::new("quitter", vec!["true".into()]);
        quitter.health = Some(ServiceHealthConfig::Command {
            argv: vec!["true".into()],
            cwd: None,
            timeout_ms: 1_000,
        });
        config.services = vec![
            web,
            quitter,
            ServiceConfig::new("broken", vec!["/nonexistent/x".into()]),
        ];
        let ctx = Arc::new(HubContext::new(config).expect("context"));
        ctx.services.start().await.expect("services");
        for _ in 0..400 {
            if ctx.services.get("quitter").expect("known").state
                == crate::services::ServiceState::Exited
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        let run = |kind: AdapterKind, args: Value, dry_run: bool| {
            let mut input = CallInput::new("c", args, soon());
            input.dry_run = dry_run;
            input.idempotency_key = Some("k".into());
            kind.run(ctx.clone(), input)
        };

        let c = contract("hub.get_runtime_summary");
        let summary = run(AdapterKind::RuntimeSummary, json!({}), false)
            .await
            .expect("summary");
        assert_valid("runtime summary", &c.output_schema, &summary);
        let states: Vec<&str> = summary["services"]
            .as_array()
            .expect("services")
            .iter()
            .filter_map(|s| s["state"].as_str())
            .collect();
        assert_eq!(states, ["running", "exited", "failed"], "{summary}");

        let c = contract("hub.run_healthchecks");
        let health = run(AdapterKind::Healthchecks, json!({}), false)
            .await
            .expect("health");
        assert_valid("health", &c.output_schema, &health);
        let checks: Vec<(&str, bool)> = health["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .map(|c| (c["service"].as_str().unwrap_or("-"), c["ok"] == true))
            .collect();
        assert_eq!(checks, [("web", true), ("quitter", false)], "{health}");
        assert!(
            health["checks"][1]["detail"]
                .as_str()
                .expect("detail")
                .contains("not running (state exited, exit status 0"),
            "{health}"
        );

        let c = contract("hub.restart_service");
        let input = validator(&c.input_schema);
        for ok in [
            json!({"service": "web"}),
            json!({"service": "web", "phase": "execute", "confirmation_token": "c", "idempotency_key": "k"}),
            json!({"service": "web", "dry_run": true}),
        ] {
            assert!(input.is_valid(&ok), "{ok}");
        }
        for bad in [
            json!({}),
            json!({"service": "Web"}),
            json!({"service": "web", "argv": []}),
        ] {
            assert!(!input.is_valid(&bad), "{bad}");
        }
        let effect = run(AdapterKind::RestartService, json!({"service": "web"}), true)
            .await
            .expect("dry run");
        assert_valid(
            "preview",
            &c.output_schema,
            &json!({"phase": "preview", "expected_effect": effect, "confirmation_token": "t",
                    "confirmation_expires_at": "2026-01-01T00:00:00Z"}),
        );
        let result = run(
            AdapterKind::RestartService,
            json!({"service": "web"}),
            false,
        )
        .await
        .expect("restart");
        assert_valid(
            "execute",
            &c.output_schema,
            &json!({"phase": "execute", "result": result, "replay": false, "idempotency_key": "k"}),
        );
        ctx.services.stop().await;
    }

    /// ProfileOps: every `hub.memory.*` answer (reads, dry-run effects, execute results)
    /// fits its contract, and the flows behind them work: sessions complete and stop,
    /// artifacts come inline or in chunks that reassemble to their SHA-256, retries and
    /// profiling mode restart as configured, publish needs a finished session, idempotency
    /// keys replay, and a session running when the hub stops ends `interrupted`.
    #[tokio::test]
    async fn profile_tool_answers_match_their_contracts() {
        use crate::config::ServiceConfig;
        use base64::Engine;
        use sha2::Digest;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", dir.path());
        let mut app = ServiceConfig::new("app", vec!["sleep".into(), "30".into()]);
        app.profiling_argv = Some(vec!["sleep".into(), "31".into()]);
        config.services = vec![
            app,
            ServiceConfig::new("plain", vec!["sleep".into(), "30".into()]),
        ];
        config.profiling.artifact_inline_max_bytes = 1024;
        let ctx = Arc::new(HubContext::new(config).expect("context"));
        ctx.services.start().await.expect("services");
        ctx.profiles.start(ctx.clone()).await.expect("profiles");
        let run = |kind: AdapterKind, args: Value, dry_run: bool, key: Option<&str>| {
            let mut input = CallInput::new("c", args, soon());
            input.dry_run = dry_run;
            input.idempotency_key = key.map(str::to_owned);
            kind.run(ctx.clone(), input)
        };
        let check_read = |tool: &str, answer: &Value| {
            assert_valid(tool, &contract(tool).output_schema, answer);
        };
        let check_effect = |tool: &str, effect: &Value| {
            assert_valid(
                &format!("{tool} preview"),
                &contract(tool).output_schema,
                &json!({"phase": "preview", "expected_effect": effect, "confirmation_token": "t",
                        "confirmation_expires_at": "2026-01-01T00:00:00Z"}),
            );
        };
        let check_result = |tool: &str, result: &Value| {
            assert_valid(
                &format!("{tool} execute"),
                &contract(tool).output_schema,
                &json!({"phase": "execute", "result": result, "replay": false, "idempotency_key": "k"}),
            );
        };
        let session_of = |id: &str| {
            let ctx = ctx.clone();
            let id = id.to_owned();
            async move {
                let input = CallInput::new("g", json!({"session_id": id}), soon());
                AdapterKind::MemoryGetSession
                    .run(ctx, input)
                    .await
                    .expect("session")
            }
        };

        // Inputs: bounds and shapes.
        let start_in = validator(&contract("hub.memory.start_profile").input_schema);
        assert!(
            start_in.is_valid(&json!({"service": "app", "interval_ms": 100, "duration_sec": 1}))
        );
        for bad in [
            json!({"service": "app", "interval_ms": 99, "duration_sec": 1}),
            json!({"service": "app", "interval_ms": 100, "duration_sec": 3601}),
            json!({"service": "app", "interval_ms": 100, "duration_sec": 1, "mode": "x"}),
            json!({"service": "app", "interval_ms": 100}),
        ] {
            assert!(!start_in.is_valid(&bad), "{bad}");
            let err = run(AdapterKind::MemoryStartProfile, bad.clone(), true, None)
                .await
                .expect_err("refused by the hub too");
            assert_eq!(err.code, ErrorCode::InvalidArguments, "{bad}");
        }

        // A complete session.
        let args = json!({"service": "app", "interval_ms": 100, "duration_sec": 1});
        let effect = run(AdapterKind::MemoryStartProfile, args.clone(), true, None)
            .await
            .expect("dry run");
        check_effect("hub.memory.start_profile", &effect);
        assert_eq!(
            (
                effect["will_restart"].clone(),
                effect["expected_samples"].clone()
            ),
            (json!(false), json!(11))
        );
        let started = run(
            AdapterKind::MemoryStartProfile,
            args.clone(),
            false,
            Some("s1"),
        )
        .await
        .expect("start");
        check_result("hub.memory.start_profile", &started);
        let a = started["session"]["session_id"]
            .as_str()
            .expect("id")
            .to_owned();
        assert_eq!(
            run(
                AdapterKind::MemoryStartProfile,
                args.clone(),
                false,
                Some("s1")
            )
            .await
            .expect("replay"),
            started,
            "a replayed key starts nothing"
        );
        let err = run(AdapterKind::MemoryStartProfile, args.clone(), false, None)
            .await
            .expect_err("one session per service");
        assert_eq!(err.code, ErrorCode::Busy);
        let err = run(
            AdapterKind::MemoryPublishProfile,
            json!({"session_id": a}),
            false,
            None,
        )
        .await
        .expect_err("still running");
        assert_eq!(err.code, ErrorCode::Busy);
        let live = session_of(&a).await;
        check_read("hub.memory.get_session", &live);
        let mut done = live;
        for _ in 0..400 {
            if done["session"]["state"] == "completed" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            done = session_of(&a).await;
        }
        check_read("hub.memory.get_session", &done);
        assert_eq!(done["session"]["state"], "completed", "{done}");
        assert!(done["session"]["samples"].as_u64().expect("samples") >= 2);
        assert!(
            !done["recent_samples"]
                .as_array()
                .expect("samples")
                .is_empty()
        );

        // Its artifact is over the inline limit: chunked, and the chunks reassemble.
        let artifact_id = done["session"]["artifact_id"]
            .as_str()
            .expect("artifact")
            .to_owned();
        let get = |args: Value| run(AdapterKind::MemoryGetArtifact, args, false, None);
        let contract_answer = get(json!({"artifact_id": artifact_id}))
            .await
            .expect("artifact");
        check_read("hub.memory.get_artifact", &contract_answer);
        assert_eq!(contract_answer["delivery"], "chunked", "{contract_answer}");
        let (size, chunk) = (
            contract_answer["size_bytes"].as_u64().expect("size"),
            contract_answer["chunk_bytes"].as_u64().expect("chunk"),
        );
        assert!(size > 1024 && chunk == 1024);
        let mut whole = Vec::new();
        for i in 0..contract_answer["chunks"].as_u64().expect("chunks") {
            let part = get(json!({"artifact_id": artifact_id, "offset": i * chunk}))
                .await
                .expect("chunk");
            check_read("hub.memory.get_artifact", &part);
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(part["data_base64"].as_str().expect("data"))
                .expect("base64");
            assert_eq!(
                hex::encode(sha2::Sha256::digest(&bytes)),
                part["chunk_sha256"]
            );
            assert_eq!(part["eof"], (i + 1) * chunk >= size);
            whole.extend(bytes);
        }
        assert_eq!(whole.len() as u64, size);
        assert_eq!(
            hex::encode(sha2::Sha256::digest(&whole)),
            contract_answer["sha256"]
        );
        let parsed: Value = serde_json::from_slice(&whole).expect("the artifact is JSON");
        assert_eq!(parsed["session_id"], a);
        for bad in [
            json!({"artifact_id": artifact_id, "offset": size}),
            json!({"artifact_id": artifact_id, "offset": 0, "length": 1025}),
            json!({"artifact_id": "not-a-uuid"}),
        ] {
            assert_eq!(
                get(bad.clone()).await.expect_err("refused").code,
                ErrorCode::InvalidArguments,
                "{bad}"
            );
        }
        let missing = uuid::Uuid::now_v7().to_string();
        assert_eq!(
            get(json!({"artifact_id": missing}))
                .await
                .expect_err("unknown")
                .code,
            ErrorCode::NotFound
        );

        // Publish: the summary root keeps.
        let effect = run(
            AdapterKind::MemoryPublishProfile,
            json!({"session_id": a}),
            true,
            None,
        )
        .await
        .expect("dry run");
        check_effect("hub.memory.publish_profile", &effect);
        let published = run(
            AdapterKind::MemoryPublishProfile,
            json!({"session_id": a}),
            false,
            Some("p1"),
        )
        .await
        .expect("publish");
        check_result("hub.memory.publish_profile", &published);
        let summary = &published["published_summary"];
        assert_eq!(summary["session_id"], a);
        assert_eq!(summary["artifact"]["artifact_id"], artifact_id);
        assert_eq!(summary["artifact"]["sha256"], contract_answer["sha256"]);
        assert!(session_of(&a).await["session"]["published_at"].is_string());

        // Retry (same parameters), stop early: a small artifact comes inline.
        let effect = run(
            AdapterKind::MemoryRetryProfile,
            json!({"session_id": a}),
            true,
            None,
        )
        .await
        .expect("dry run");
        check_effect("hub.memory.retry_profile", &effect);
        let retried = run(
            AdapterKind::MemoryRetryProfile,
            json!({"session_id": a}),
            false,
            None,
        )
        .await
        .expect("retry");
        check_result("hub.memory.retry_profile", &retried);
        assert_eq!(retried["session"]["retry_of"], a);
        let b = retried["session"]["session_id"]
            .as_str()
            .expect("id")
            .to_owned();
        let effect = run(
            AdapterKind::MemoryStopProfile,
            json!({"session_id": b}),
            true,
            None,
        )
        .await
        .expect("dry run");
        check_effect("hub.memory.stop_profile", &effect);
        assert_eq!(effect["running"], true);
        let stopped = run(
            AdapterKind::MemoryStopProfile,
            json!({"session_id": b}),
            false,
            None,
        )
        .await
        .expect("stop");
        check_result("hub.memory.stop_profile", &stopped);
        assert_eq!(
            (
                stopped["stopped"].clone(),
                stopped["session"]["state"].clone()
            ),
            (json!(true), json!("stopped"))
        );
        let again = run(
            AdapterKind::MemoryStopProfile,
            json!({"session_id": b}),
            false,
            None,
        )
        .await
        .expect("stop again");
        assert_eq!(again["stopped"], false);
        let small = get(json!({"artifact_id": stopped["session"]["artifact_id"]}))
            .await
            .expect("inline");
        check_read("hub.memory.get_artifact", &small);
        assert_eq!(small["delivery"], "inline", "{small}");
        assert_eq!(small["artifact"]["session_id"], b);

        // Profiling mode restarts the service into its profiling argv; a service without one
        // is refused.
        let before = ctx.services.get("app").expect("app").pid;
        let start_profiling = || {
            run(
                AdapterKind::MemoryStartProfile,
                json!({"service": "app", "interval_ms": 100, "duration_sec": 60, "mode": "profiling"}),
                false,
                None,
            )
        };
        let prof = start_profiling().await.expect("profiling mode");
        let now = ctx.services.get("app").expect("app");
        assert_eq!(now.mode, crate::services::Mode::Profiling);
        assert_ne!(now.pid, before);
        assert_eq!(prof["session"]["mode"], "profiling");
        // Stopped, the session returns the service to its normal argv, before ProfileOps takes
        // another message (so before this next session starts, in profiling mode again).
        let stop = run(
            AdapterKind::MemoryStopProfile,
            json!({"session_id": prof["session"]["session_id"]}),
            true,
            None,
        )
        .await
        .expect("stop preview");
        assert!(
            stop["description"]
                .as_str()
                .is_some_and(|d| d.ends_with("then restart `app` in its normal argv")),
            "{stop}"
        );
        run(
            AdapterKind::MemoryStopProfile,
            json!({"session_id": prof["session"]["session_id"]}),
            false,
            None,
        )
        .await
        .expect("stop profiling session");
        let mut restored = None;
        for _ in 0..400 {
            let s = ctx.services.get("app").expect("app");
            if s.mode == crate::services::Mode::Normal && s.pid.is_some() && s.pid != now.pid {
                restored = Some(s);
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        assert!(restored.is_some(), "app not back in its normal argv");
        let prof = start_profiling().await.expect("profiling mode again");
        assert_eq!(
            ctx.services.get("app").expect("app").mode,
            crate::services::Mode::Profiling
        );
        let err = run(
            AdapterKind::MemoryStartProfile,
            json!({"service": "plain", "interval_ms": 100, "duration_sec": 1, "mode": "profiling"}),
            true,
            None,
        )
        .await
        .expect_err("no profiling argv");
        assert!(err.message.contains("profiling_argv"), "{err}");

        // Reads.
        for (kind, tool) in [
            (AdapterKind::MemoryStatus, "hub.memory.get_status"),
            (AdapterKind::MemoryListSessions, "hub.memory.list_sessions"),
            (
                AdapterKind::MemoryListIncidents,
                "hub.memory.list_incidents",
            ),
            (
                AdapterKind::MemoryListArtifacts,
                "hub.memory.list_artifacts",
            ),
        ] {
            let answer = run(kind, json!({}), false, None).await.expect(tool);
            check_read(tool, &answer);
        }
        let status = run(AdapterKind::MemoryStatus, json!({}), false, None)
            .await
            .expect("status");
        assert_eq!(status["running_sessions"].as_array().map(Vec::len), Some(1));
        let listed = run(
            AdapterKind::MemoryListSessions,
            json!({"service": "app", "state": "stopped", "limit": 5}),
            false,
            None,
        )
        .await
        .expect("list");
        // The session stopped earlier and the profiling-mode one.
        assert_eq!(listed["sessions"].as_array().map(Vec::len), Some(2));
        let artifacts = run(
            AdapterKind::MemoryListArtifacts,
            json!({"limit": 1}),
            false,
            None,
        )
        .await
        .expect("artifacts");
        assert_eq!(artifacts["artifacts"].as_array().map(Vec::len), Some(1));

        // The hub stops with a session running: it ends interrupted, kept on disk.
        let c = prof["session"]["session_id"]
            .as_str()
            .expect("id")
            .to_owned();
        for _ in 0..400 {
            if session_of(&c).await["session"]["samples"].as_u64() > Some(0) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        ctx.profiles.stop().await;
        ctx.services.stop().await;
        let config = ctx.config.clone();
        let fresh = crate::profiles::Profiles::new(&config);
        let (session, samples) = fresh.session(&c).expect("kept");
        assert_eq!(session.state, crate::profiles::SessionState::Interrupted);
        assert!(session.artifact_id.is_some() && !samples.is_empty());
    }
}
