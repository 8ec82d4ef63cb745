//! Execution adapters of `infra_access_skill`: each a ractor actor, spawned linked under the
//! skill, that runs one tool's bounded work.
//!
//! - [`status`] serves `hub.get_status`.
//! - [`runtime`] serves `hub.get_runtime_summary` (from `/proc` and `statvfs`).
//! - [`surface`] serves `hub.get_operational_surface`.
//! - [`health`] serves `hub.run_healthchecks`.
//!
//! Guarantees: an adapter runs at most `skill.adapter_concurrency` calls at once and refuses
//! the next one at once with `busy`; each call runs in its own task and is stopped at its
//! deadline with `timeout`; a panic in a call is answered with `adapter_failed` and fails the
//! adapter actor (its other calls in flight are stopped and get `adapter_failed` too), which
//! the skill then restarts. A cancelled call is stopped and answered with nothing.

pub mod health;
pub mod runtime;
pub mod status;
pub mod surface;

use std::collections::HashMap;
use std::sync::Arc;

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

/// Which implementation an adapter actor runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterKind {
    Status,
    RuntimeSummary,
    OperationalSurface,
    Healthchecks,
}

/// Every adapter of `infra_access_skill`, with the tool it serves.
pub const ADAPTERS: [AdapterDecl; 4] = [
    AdapterKind::Status.decl(),
    AdapterKind::RuntimeSummary.decl(),
    AdapterKind::OperationalSurface.decl(),
    AdapterKind::Healthchecks.decl(),
];

/// Every adapter kind, in the order of [`ADAPTERS`].
pub const KINDS: [AdapterKind; 4] = [
    AdapterKind::Status,
    AdapterKind::RuntimeSummary,
    AdapterKind::OperationalSurface,
    AdapterKind::Healthchecks,
];

impl AdapterKind {
    pub const fn decl(self) -> AdapterDecl {
        match self {
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
        }
    }

    pub fn for_tool(tool_id: &str) -> Option<AdapterKind> {
        KINDS.into_iter().find(|k| k.decl().tool_id == tool_id)
    }

    /// Runs the adapter's work (in a task of its own).
    pub async fn run(self, ctx: Arc<HubContext>, arguments: Value) -> Result<Value, ToolError> {
        match self {
            AdapterKind::Status => status::run(&ctx, &arguments).await,
            AdapterKind::RuntimeSummary => {
                no_arguments(&arguments)?;
                runtime::run(&ctx).await
            }
            AdapterKind::OperationalSurface => {
                no_arguments(&arguments)?;
                Ok(surface::run(&ctx))
            }
            AdapterKind::Healthchecks => {
                no_arguments(&arguments)?;
                Ok(health::run(&ctx).await)
            }
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
        call_id: String,
        arguments: Value,
        deadline: tokio::time::Instant,
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
            AdapterMsg::Run {
                call_id,
                arguments,
                deadline,
                reply,
            } => {
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
                    let work = tokio::spawn(kind.run(ctx, arguments));
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
    use crate::config::{HealthcheckConfig, HubConfig};
    use mcp_shared::{SideEffectClass, ToolContract};
    use serde_json::json;

    fn contract(tool: &str) -> ToolContract {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../schemas/tools")
            .join(format!("{tool}.json"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
    }

    fn validator(schema: &Value) -> jsonschema::Validator {
        jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(schema)
            .expect("schema compiles")
    }

    fn assert_valid(what: &str, schema: &Value, instance: &Value) {
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
                assert_valid(
                    &format!("{} input", decl.tool_id),
                    &c.input_schema,
                    &json!({}),
                );
                let answer = kind
                    .run(ctx.clone(), json!({}))
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
        let c = contract("hub.get_status");
        assert_valid("fault", &c.input_schema, &json!({"fault": "hang"}));
        assert!(!validator(&c.input_schema).is_valid(&json!({"fault": "explode"})));
    }
}
