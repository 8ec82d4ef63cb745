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
pub mod health;
pub mod runtime;
pub mod status;
pub mod surface;
pub mod test_results;

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
    AllowedTests,
    TestResults,
    ActivityLog,
    CapabilityUsage,
}

/// Every adapter kind, in the order of [`ADAPTERS`].
pub const KINDS: [AdapterKind; 8] = [
    AdapterKind::Status,
    AdapterKind::RuntimeSummary,
    AdapterKind::OperationalSurface,
    AdapterKind::Healthchecks,
    AdapterKind::AllowedTests,
    AdapterKind::TestResults,
    AdapterKind::ActivityLog,
    AdapterKind::CapabilityUsage,
];

/// Every adapter of `infra_access_skill`, with the tool it serves.
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
            deadline,
        }
    }
}

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
        }
    }

    pub fn for_tool(tool_id: &str) -> Option<AdapterKind> {
        KINDS.into_iter().find(|k| k.decl().tool_id == tool_id)
    }

    /// Runs the adapter's work (in a task of its own).
    pub async fn run(self, ctx: Arc<HubContext>, input: CallInput) -> Result<Value, ToolError> {
        let arguments = &input.arguments;
        match self {
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
                if kind == AdapterKind::AllowedTests {
                    // Takes a test name; see `test_tool_answers_match_their_contracts`.
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
        let c = contract("hub.get_status");
        assert_valid("fault", &c.input_schema, &json!({"fault": "hang"}));
        assert!(!validator(&c.input_schema).is_valid(&json!({"fault": "explode"})));
    }

    fn soon() -> tokio::time::Instant {
        tokio::time::Instant::now() + std::time::Duration::from_secs(10)
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
}
