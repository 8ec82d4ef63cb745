//! `infra_access_skill` as a ractor actor: owns the skill's lifecycle (installed, enabled;
//! persisted in `<state_dir>/skills.json`), supervises one linked child actor per execution
//! adapter, and routes each call to the adapter that serves its tool.
//!
//! Guarantees: a failed adapter (panic or error in its actor) is restarted with the same
//! arguments; a call that was in flight on it gets `adapter_failed` only after the replacement
//! is in place, so the caller's next call runs on a live adapter. Restarts are budgeted
//! (`skill.adapter_max_restarts` within `skill.adapter_restart_window_ms`): the failure past
//! the budget leaves the adapter down and its tool withdrawn from the published surface (root
//! is sent `surface_changed`, so the tool leaves `tools/list`), and calls that still reach it
//! get `adapter_failed` saying why, until the skill is enabled again. Lifecycle changes are written
//! to disk (atomically, via a temporary file) before they are published or acknowledged.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::{SkillCommand, SkillState};
use ractor::rpc::CallResult;
use ractor::{Actor, ActorProcessingErr, ActorRef, ActorStatus, RpcReplyPort, SupervisionEvent};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::adapters::{
    AdapterActor, AdapterArgs, AdapterDecl, AdapterKind, AdapterMsg, AdapterReply, CallInput,
    CrashReport,
};
use crate::context::{HubContext, Lifecycle, SKILL};

/// File name of the lifecycle state under `state_dir`.
pub const STATE_FILE: &str = "skills.json";

/// Why the lifecycle file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// `skills.json`: lifecycle by skill name.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    skills: HashMap<String, Lifecycle>,
}

/// Reads the lifecycle of `infra_access_skill` (installed and enabled when there is no file).
pub fn load_lifecycle(state_dir: &Path) -> Result<Lifecycle, StateError> {
    let path = state_dir.join(STATE_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Lifecycle::default()),
        Err(source) => return Err(StateError::Io { path, source }),
    };
    let file: StateFile =
        serde_json::from_str(&text).map_err(|source| StateError::Parse { path, source })?;
    Ok(file.skills.get(SKILL).copied().unwrap_or_default())
}

/// File name of the hub owner's switch under `state_dir`.
pub const OWNER_FILE: &str = "skill-owner.json";

/// `skill-owner.json`: the hub owner's switch by skill name.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnerFile {
    skills: HashMap<String, OwnerSwitch>,
}

/// The hub owner's switch of a skill.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnerSwitch {
    enabled: bool,
    /// When the owner last set it (RFC 3339).
    changed_at: String,
}

/// Whether the hub's owner has `infra_access_skill` switched on (on when there is no file).
pub fn load_owner_switch(state_dir: &Path) -> Result<bool, StateError> {
    let path = state_dir.join(OWNER_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(source) => return Err(StateError::Io { path, source }),
    };
    let file: OwnerFile =
        serde_json::from_str(&text).map_err(|source| StateError::Parse { path, source })?;
    Ok(file.skills.get(SKILL).is_none_or(|s| s.enabled))
}

/// Sets the hub owner's switch of `infra_access_skill` (temporary file, then rename); a
/// running hub picks it up within [`OWNER_SWITCH_POLL`].
pub fn save_owner_switch(state_dir: &Path, enabled: bool) -> Result<(), StateError> {
    let file = OwnerFile {
        skills: HashMap::from([(
            SKILL.to_owned(),
            OwnerSwitch {
                enabled,
                changed_at: mcp_shared::time::format(mcp_shared::time::now()),
            },
        )]),
    };
    write_atomically(state_dir, OWNER_FILE, &file)
}

/// How often a running hub reads the owner's switch.
pub const OWNER_SWITCH_POLL: Duration = Duration::from_millis(500);

/// Writes `value` as JSON to `state_dir/name` through [`crate::state::write_atomic`].
fn write_atomically(
    state_dir: &Path,
    name: &str,
    value: &impl Serialize,
) -> Result<(), StateError> {
    let path = state_dir.join(name);
    let text = serde_json::to_vec_pretty(value).map_err(|source| StateError::Parse {
        path: path.clone(),
        source,
    })?;
    crate::state::write_atomic(&path, &text)
        .map_err(|crate::state::WriteError { path, source }| StateError::Io { path, source })
}

/// Writes the lifecycle of `infra_access_skill` (temporary file, then rename).
pub fn save_lifecycle(state_dir: &Path, lifecycle: Lifecycle) -> Result<(), StateError> {
    let file = StateFile {
        skills: HashMap::from([(SKILL.to_owned(), lifecycle)]),
    };
    write_atomically(state_dir, STATE_FILE, &file)
}

pub enum Msg {
    /// Route a call (already past the gate) to the adapter serving `tool_id`.
    Execute {
        tool_id: String,
        input: CallInput,
        reply: RpcReplyPort<AdapterReply>,
    },
    /// Stop a call wherever it runs.
    Cancel { call_id: String },
    /// The hub owner switched the skill on or off (`mcp-hub skill enable|disable`).
    OwnerSwitch(bool),
    /// Install, enable, disable, uninstall or report a skill (root's desired state).
    Command {
        skill: String,
        command: SkillCommand,
        reply: RpcReplyPort<Result<SkillState, String>>,
    },
    /// An adapter's call panicked (sent by the adapter before it fails).
    AdapterCrashed(CrashReport),
    /// Test builds only: panic, so tests can prove the hub's supervisor contains it.
    #[cfg(any(test, feature = "fault-injection"))]
    Panic,
}

pub struct Skill;

pub struct SkillArgs {
    pub ctx: Arc<HubContext>,
}

pub struct State {
    ctx: Arc<HubContext>,
    adapters: HashMap<&'static str, ActorRef<AdapterMsg>>,
    restarts: u64,
    /// When each adapter was last restarted, within the restart window.
    recent_restarts: HashMap<&'static str, VecDeque<Instant>>,
    /// Adapters that used up their restart budget, with why (their tools are withdrawn).
    unavailable: HashMap<&'static str, String>,
}

async fn spawn_adapter(
    kind: AdapterKind,
    ctx: &Arc<HubContext>,
    skill: &ActorRef<Msg>,
) -> Result<ActorRef<AdapterMsg>, ActorProcessingErr> {
    let me = skill.clone();
    let args = Arc::new(AdapterArgs {
        kind,
        ctx: ctx.clone(),
        on_crash: Arc::new(move |report| {
            let _ = me.cast(Msg::AdapterCrashed(report));
        }),
    });
    let (adapter, _) = Actor::spawn_linked(None, AdapterActor, args, skill.get_cell()).await?;
    Ok(adapter)
}

impl State {
    /// Restarts the adapter of `kind` if `failed` is still the current instance, within its
    /// restart budget; past the budget the adapter is left down and its tool withdrawn.
    async fn replace(
        &mut self,
        myself: &ActorRef<Msg>,
        kind: AdapterKind,
        failed: ractor::ActorId,
        reason: &str,
    ) -> Result<(), ActorProcessingErr> {
        let tool = kind.decl().tool_id;
        if self.adapters.get(tool).map(|a| a.get_id()) != Some(failed) {
            return Ok(());
        }
        let skill = &self.ctx.config.skill;
        let window = Duration::from_millis(skill.adapter_restart_window_ms);
        let recent = self.recent_restarts.entry(tool).or_default();
        while recent.front().is_some_and(|t| t.elapsed() > window) {
            recent.pop_front();
        }
        if recent.len() >= skill.adapter_max_restarts as usize {
            let why = format!(
                "adapter `{}` failed {} times within {} s; it is unavailable until skill `{SKILL}` \
                 is enabled again",
                kind.decl().name,
                recent.len() + 1,
                window.as_secs()
            );
            tracing::error!(adapter = kind.decl().name, %reason, "restart budget used up; the adapter's tool is withdrawn");
            self.adapters.remove(tool);
            self.unavailable.insert(tool, why);
            self.publish_unavailable();
            return Ok(());
        }
        recent.push_back(Instant::now());
        self.restarts += 1;
        tracing::warn!(adapter = kind.decl().name, %reason, restarts = self.restarts, "adapter failed; restarting");
        let adapter = spawn_adapter(kind, &self.ctx, myself).await?;
        self.adapters.insert(tool, adapter);
        Ok(())
    }

    /// Publishes which tools are withdrawn and has the channel tell root.
    fn publish_unavailable(&self) {
        let mut tools: Vec<&'static str> = self.unavailable.keys().copied().collect();
        tools.sort_unstable();
        self.ctx.unavailable.store(Arc::new(tools));
        self.ctx.surface_changed.notify_one();
    }

    /// Starts again every adapter that used up its budget, with a fresh budget.
    async fn revive(&mut self, myself: &ActorRef<Msg>) -> Result<(), ActorProcessingErr> {
        if self.unavailable.is_empty() {
            return Ok(());
        }
        for tool in std::mem::take(&mut self.unavailable).into_keys() {
            if let Some(kind) = self.ctx.adapter_kind(tool) {
                self.adapters
                    .insert(tool, spawn_adapter(kind, &self.ctx, myself).await?);
                self.recent_restarts.remove(tool);
                tracing::info!(
                    adapter = kind.decl().name,
                    "unavailable adapter started again"
                );
            }
        }
        self.publish_unavailable();
        Ok(())
    }

    fn set_lifecycle(&self, lifecycle: Lifecycle) -> Result<(), String> {
        save_lifecycle(&self.ctx.config.state_dir, lifecycle).map_err(|e| e.to_string())?;
        self.ctx.lifecycle.store(Arc::new(lifecycle));
        Ok(())
    }
}

impl Actor for Skill {
    type Msg = Msg;
    type State = State;
    type Arguments = SkillArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Msg>,
        args: SkillArgs,
    ) -> Result<State, ActorProcessingErr> {
        let ctx = args.ctx;
        let mut lifecycle = load_lifecycle(&ctx.config.state_dir)?;
        lifecycle.owner_enabled = load_owner_switch(&ctx.config.state_dir)?;
        // A restarted skill (its predecessor failed) starts every adapter with a fresh budget.
        if !ctx.unavailable.load().is_empty() {
            ctx.unavailable.store(Arc::new(Vec::new()));
            ctx.surface_changed.notify_one();
        }
        std::fs::create_dir_all(&ctx.config.state_dir)?;
        ctx.lifecycle.store(Arc::new(lifecycle));
        let mut adapters = HashMap::new();
        for &kind in ctx.adapter_kinds() {
            adapters.insert(
                kind.decl().tool_id,
                spawn_adapter(kind, &ctx, &myself).await?,
            );
        }
        tracing::info!(
            skill = SKILL,
            installed = lifecycle.installed,
            enabled = lifecycle.enabled,
            "skill started"
        );
        Ok(State {
            ctx,
            adapters,
            restarts: 0,
            recent_restarts: HashMap::new(),
            unavailable: HashMap::new(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Msg>,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        for adapter in state.adapters.values() {
            adapter.stop(Some("skill stopping".into()));
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Msg>,
        msg: Msg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            Msg::Execute {
                tool_id,
                input,
                reply,
            } => {
                let adapter = state.adapters.get(tool_id.as_str());
                match adapter {
                    Some(adapter) if state.ctx.lifecycle().active() => {
                        // A dead adapter drops the message and so the reply port: the caller
                        // sees `adapter_failed`.
                        let _ = adapter.send_message(AdapterMsg::Run { input, reply });
                    }
                    _ => {
                        let error = match state.unavailable.get(tool_id.as_str()) {
                            Some(why) => ToolError::new(ErrorCode::AdapterFailed, why.clone()),
                            None => ToolError::new(
                                ErrorCode::SkillDisabled,
                                format!("skill `{SKILL}` does not publish `{tool_id}` right now"),
                            ),
                        };
                        let _ = reply.send(Err(error));
                    }
                }
            }
            Msg::Cancel { call_id } => {
                for adapter in state.adapters.values() {
                    let _ = adapter.cast(AdapterMsg::Cancel {
                        call_id: call_id.clone(),
                    });
                }
            }
            Msg::Command {
                skill,
                command,
                reply,
            } => {
                if skill != SKILL {
                    // Not installed here: report it as such, change nothing.
                    let _ = reply.send(Ok(SkillState {
                        skill,
                        installed: false,
                        enabled: false,
                        published: Vec::new(),
                        owner_disabled: false,
                        version: None,
                        adapters: Vec::new(),
                    }));
                    return Ok(());
                }
                let current = state.ctx.lifecycle();
                let outcome = match command {
                    SkillCommand::Status => Ok(current),
                    SkillCommand::Install | SkillCommand::Uninstall => {
                        let next = Lifecycle {
                            installed: command == SkillCommand::Install,
                            ..current
                        };
                        state.set_lifecycle(next).map(|()| next)
                    }
                    SkillCommand::Enable => {
                        let next = Lifecycle {
                            enabled: true,
                            ..current
                        };
                        // Enabling also gives adapters that used up their budget a new one.
                        state.revive(&myself).await?;
                        state.set_lifecycle(next).map(|()| next)
                    }
                    SkillCommand::Disable => {
                        let next = Lifecycle {
                            enabled: false,
                            ..current
                        };
                        state.set_lifecycle(next).map(|()| next)
                    }
                };
                if let Ok(l) = &outcome
                    && command != SkillCommand::Status
                {
                    tracing::info!(
                        skill = SKILL,
                        ?command,
                        installed = l.installed,
                        enabled = l.enabled,
                        "skill lifecycle changed (as root directs)"
                    );
                }
                let decls = state.ctx.adapter_decls();
                let _ = reply.send(outcome.map(|l| l.skill_state_with(decls)));
            }
            Msg::OwnerSwitch(enabled) => {
                let current = state.ctx.lifecycle();
                if current.owner_enabled != enabled {
                    state.ctx.lifecycle.store(Arc::new(Lifecycle {
                        owner_enabled: enabled,
                        ..current
                    }));
                    tracing::warn!(
                        skill = SKILL,
                        owner_enabled = enabled,
                        "the hub's owner switched the skill {}",
                        if enabled { "on" } else { "off" }
                    );
                    state.ctx.surface_changed.notify_one();
                }
            }
            #[cfg(any(test, feature = "fault-injection"))]
            Msg::Panic => panic!("fault injected into {SKILL}"),
            Msg::AdapterCrashed(report) => {
                state
                    .replace(&myself, report.kind, report.adapter, &report.message)
                    .await?;
                let message = match state.unavailable.get(report.kind.decl().tool_id) {
                    Some(why) => format!("the adapter failed while running the call; {why}"),
                    None => format!(
                        "adapter `{}` failed while running the call; it was restarted",
                        report.kind.decl().name
                    ),
                };
                let _ = report
                    .reply
                    .send(Err(ToolError::new(ErrorCode::AdapterFailed, message)));
                tracing::debug!(call_id = %report.call_id, "crashed call answered");
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Msg>,
        evt: SupervisionEvent,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, reason) = match &evt {
            SupervisionEvent::ActorFailed(cell, err) => (cell.clone(), err.to_string()),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell.clone(), format!("{reason:?}"))
            }
            _ => return Ok(()),
        };
        if myself.get_status() != ActorStatus::Running {
            return Ok(());
        }
        let id = cell.get_id();
        let Some(kind) = state
            .ctx
            .adapter_kinds()
            .iter()
            .copied()
            .find(|k| state.adapters.get(k.decl().tool_id).map(|a| a.get_id()) == Some(id))
        else {
            return Ok(());
        };
        state.replace(&myself, kind, id, &reason).await
    }
}

/// Default timeout for a request to the skill actor that does not run an adapter.
const RPC_TIMEOUT: Duration = Duration::from_secs(5);
/// How long past a call's deadline the caller waits for the adapter's own `timeout` answer.
const DEADLINE_GRACE: Duration = Duration::from_secs(2);

/// A cheap handle to the skill actor: the current instance (the hub's supervisor swaps in a
/// restarted one).
#[derive(Clone)]
pub struct SkillHandle {
    actor: Arc<arc_swap::ArcSwap<ActorRef<Msg>>>,
}

impl SkillHandle {
    /// Starts the skill (and its adapters) for `ctx`, unsupervised.
    pub async fn start(
        ctx: Arc<HubContext>,
    ) -> anyhow::Result<(SkillHandle, tokio::task::JoinHandle<()>)> {
        let (actor, join) = Actor::spawn(None, Skill, SkillArgs { ctx })
            .await
            .map_err(|e| anyhow::anyhow!("cannot start {SKILL}: {e}"))?;
        Ok((SkillHandle::of(actor), join))
    }

    /// A handle to `actor`.
    pub fn of(actor: ActorRef<Msg>) -> SkillHandle {
        SkillHandle {
            actor: Arc::new(arc_swap::ArcSwap::from_pointee(actor)),
        }
    }

    /// Spawns the skill for `ctx` linked under `supervisor`.
    pub async fn spawn_under(
        ctx: Arc<HubContext>,
        supervisor: ractor::ActorCell,
    ) -> anyhow::Result<ActorRef<Msg>> {
        let (actor, _) = Actor::spawn_linked(None, Skill, SkillArgs { ctx }, supervisor)
            .await
            .map_err(|e| anyhow::anyhow!("cannot start {SKILL}: {e}"))?;
        Ok(actor)
    }

    /// From now on this handle (and its clones) reach `actor`.
    pub fn replace(&self, actor: ActorRef<Msg>) {
        self.actor.store(Arc::new(actor));
    }

    /// The current skill actor.
    pub fn actor(&self) -> ActorRef<Msg> {
        (**self.actor.load()).clone()
    }

    /// Runs a call (not a dry run, no idempotency key) on the adapter `decl`; answers by the
    /// call's deadline.
    pub async fn execute(
        &self,
        call_id: &str,
        decl: AdapterDecl,
        arguments: Value,
        deadline: tokio::time::Instant,
    ) -> AdapterReply {
        self.execute_call(decl, CallInput::new(call_id, arguments, deadline))
            .await
    }

    /// Runs `input` on the adapter `decl`; answers by the call's deadline.
    pub async fn execute_call(&self, decl: AdapterDecl, input: CallInput) -> AdapterReply {
        let wait = input
            .deadline
            .saturating_duration_since(tokio::time::Instant::now())
            + DEADLINE_GRACE;
        let res = self
            .actor()
            .call(
                |reply| Msg::Execute {
                    tool_id: decl.tool_id.to_owned(),
                    input,
                    reply,
                },
                Some(wait),
            )
            .await;
        match res {
            Ok(CallResult::Success(r)) => r,
            Ok(CallResult::Timeout) => Err(ToolError::new(
                ErrorCode::Timeout,
                format!("adapter `{}` did not answer by the deadline", decl.name),
            )),
            Ok(CallResult::SenderError) => Err(ToolError::new(
                ErrorCode::AdapterFailed,
                format!("adapter `{}` stopped while running the call", decl.name),
            )),
            Err(e) => Err(ToolError::new(
                ErrorCode::AdapterFailed,
                format!("skill `{SKILL}` is not running: {e}"),
            )),
        }
    }

    /// Stops a call wherever it runs (fire and forget).
    pub fn cancel(&self, call_id: &str) {
        let _ = self.actor().cast(Msg::Cancel {
            call_id: call_id.to_owned(),
        });
    }

    /// Applies an operator command; the state afterwards.
    pub async fn command(&self, skill: &str, command: SkillCommand) -> Result<SkillState, String> {
        match self
            .actor()
            .call(
                |reply| Msg::Command {
                    skill: skill.to_owned(),
                    command,
                    reply,
                },
                Some(RPC_TIMEOUT),
            )
            .await
        {
            Ok(CallResult::Success(r)) => r,
            Ok(CallResult::Timeout) => Err("the skill did not answer in time".into()),
            Ok(CallResult::SenderError) => Err("the skill stopped".into()),
            Err(e) => Err(format!("the skill is not running: {e}")),
        }
    }

    /// Applies the hub owner's switch (fire and forget).
    pub fn owner_switch(&self, enabled: bool) {
        let _ = self.actor().cast(Msg::OwnerSwitch(enabled));
    }

    /// Stops the skill and its adapters.
    pub async fn stop(&self) {
        let _ = self
            .actor()
            .stop_and_wait(Some("hub shutting down".into()), Some(RPC_TIMEOUT))
            .await;
    }
}

/// Stops a call's adapter work when the call's task is dropped before it finished (a
/// `cancel` from root, or the connection going away).
pub struct CancelOnDrop {
    skill: SkillHandle,
    call_id: String,
    armed: bool,
}

impl CancelOnDrop {
    pub fn new(skill: &SkillHandle, call_id: &str) -> CancelOnDrop {
        CancelOnDrop {
            skill: skill.clone(),
            call_id: call_id.to_owned(),
            armed: true,
        }
    }

    pub fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            self.skill.cancel(&self.call_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::ADAPTERS;
    use crate::config::HubConfig;

    fn ctx(dir: &Path, concurrency: usize) -> Arc<HubContext> {
        let mut config = HubConfig::new("hub:test-alpha", "test", "ws://127.0.0.1:1", "t", dir);
        config.embedded = vec![&crate::test_fault::FAULT];
        config.skill.adapter_concurrency = concurrency;
        Arc::new(HubContext::new(config).expect("context"))
    }

    fn soon(ms: u64) -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_millis(ms)
    }

    const STATUS: AdapterDecl = AdapterKind::Status.decl();
    const FAULT: AdapterDecl = crate::test_fault::FAULT.decl;

    #[tokio::test]
    async fn every_adapter_answers_with_real_figures() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = ctx(dir.path(), 4);
        let (skill, _) = SkillHandle::start(ctx.clone()).await.expect("skill");
        let mut answers = HashMap::new();
        for decl in ADAPTERS {
            // Writes and the reads that name an object need arguments, the NLU tools need
            // `[nlu]` content; their own tests cover them.
            if decl.writes
                || ["hub.memory.get_session", "hub.memory.get_artifact"].contains(&decl.tool_id)
                || decl.tool_id.starts_with("nlu_authoring.")
            {
                continue;
            }
            let v = skill
                .execute("c", decl, serde_json::json!({}), soon(5_000))
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", decl.tool_id));
            answers.insert(decl.tool_id, v);
        }
        let status = &answers["hub.get_status"];
        assert_eq!(status["target_id"], "hub:test-alpha");
        assert_eq!(
            status["skills"][0]["published"].as_array().map(Vec::len),
            Some(ADAPTERS.len() + 1),
            "the built-in adapters and the embedded fault fixture"
        );
        let runtime = &answers["hub.get_runtime_summary"];
        assert!(runtime["memory"]["total_bytes"].as_u64().expect("u64") > 0);
        let surface = &answers["hub.get_operational_surface"];
        assert_eq!(surface["adapters"][1]["concurrency_limit"], 4);
        let listed: Vec<(&str, &str, bool)> = surface["adapters"]
            .as_array()
            .expect("adapters")
            .iter()
            .filter_map(|a| {
                Some((
                    a["tool_id"].as_str()?,
                    a["name"].as_str()?,
                    a["writes"] == true,
                ))
            })
            .collect();
        assert!(
            listed.contains(&(
                "hub.run_allowed_tests",
                "infra_access_skill.allowed_tests",
                true
            )),
            "{listed:?}"
        );
        assert!(
            listed.contains(&(
                "hub.get_test_results",
                "infra_access_skill.test_results",
                false
            )),
            "{listed:?}"
        );
        assert_eq!(
            answers["hub.get_test_results"]["results"],
            serde_json::json!([])
        );
        assert_eq!(surface["enabled"], true);
        let health = &answers["hub.run_healthchecks"];
        assert_eq!(health["status"], "healthy");
        skill.stop().await;
    }

    #[tokio::test]
    async fn the_adapter_sees_the_calls_dry_run_flag_and_idempotency_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mark = dir.path().join("ran");
        let mut config = HubConfig::new("hub:t", "test", "ws://127.0.0.1:1", "t", dir.path());
        config.skill.allowed_tests = vec![crate::config::AllowedTestConfig {
            name: "mark".into(),
            argv: vec![
                "sh".into(),
                "-c".into(),
                format!("echo x >> '{}'", mark.display()),
            ],
            cwd: None,
            timeout_ms: 5_000,
            env: Default::default(),
        }];
        let ctx = Arc::new(HubContext::new(config).expect("context"));
        let (skill, _) = SkillHandle::start(ctx).await.expect("skill");
        let decl = AdapterKind::AllowedTests.decl();
        let input = |dry_run: bool, key: &str| CallInput {
            call_id: format!("{dry_run}-{key}"),
            arguments: serde_json::json!({"name": "mark"}),
            dry_run,
            idempotency_key: Some(key.to_owned()),
            confirmed_effect: None,
            deadline: soon(5_000),
        };
        let effect = skill
            .execute_call(decl, input(true, "k"))
            .await
            .expect("dry");
        assert_eq!(effect["action"], "run_allowed_test");
        assert!(!mark.exists(), "nothing ran");
        let first = skill
            .execute_call(decl, input(false, "k"))
            .await
            .expect("run");
        let again = skill
            .execute_call(decl, input(false, "k"))
            .await
            .expect("replay");
        assert_eq!(first, again);
        let ran = std::fs::read_to_string(&mark).expect("ran once");
        assert_eq!(ran.lines().count(), 1);
        skill.stop().await;
    }

    #[tokio::test]
    async fn lifecycle_persists_across_a_restart_of_the_skill() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (skill, _) = SkillHandle::start(ctx(dir.path(), 4)).await.expect("skill");
        let state = skill
            .command(SKILL, SkillCommand::Disable)
            .await
            .expect("disable");
        assert!(!state.enabled);
        assert!(state.published.is_empty());
        let err = skill
            .execute("c1", STATUS, Value::Null, soon(1_000))
            .await
            .expect_err("disabled");
        assert_eq!(err.code, ErrorCode::SkillDisabled);
        skill.stop().await;

        let ctx2 = ctx(dir.path(), 4);
        let (skill, _) = SkillHandle::start(ctx2.clone())
            .await
            .expect("restarted skill");
        let state = skill
            .command(SKILL, SkillCommand::Status)
            .await
            .expect("status");
        assert!(state.installed && !state.enabled, "{state:?}");
        assert!(!ctx2.descriptor().operational_surface.enabled);
        let state = skill
            .command(SKILL, SkillCommand::Enable)
            .await
            .expect("enable");
        assert_eq!(state.published.len(), ADAPTERS.len() + 1);
        assert_eq!(
            ctx2.descriptor().operational_surface.capabilities.len(),
            ADAPTERS.len() + 1
        );
        let other = skill
            .command("other_skill", SkillCommand::Enable)
            .await
            .expect("other");
        assert!(!other.installed);
        skill.stop().await;
        assert!(load_lifecycle(dir.path()).expect("load").enabled);
    }

    #[tokio::test]
    async fn a_panicking_adapter_fails_the_call_and_is_restarted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (skill, _) = SkillHandle::start(ctx(dir.path(), 4)).await.expect("skill");
        for i in 0..3 {
            let err = skill
                .execute(
                    &format!("p{i}"),
                    FAULT,
                    serde_json::json!({"fault": "panic"}),
                    soon(5_000),
                )
                .await
                .expect_err("panics");
            assert_eq!(err.code, ErrorCode::AdapterFailed, "{err}");
            let v = skill
                .execute(&format!("ok{i}"), FAULT, serde_json::json!({}), soon(5_000))
                .await
                .expect("the next call succeeds");
            assert_eq!(v["ok"], true);
        }
        skill.stop().await;
    }

    #[tokio::test]
    async fn over_the_limit_is_busy_and_a_hang_times_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (skill, _) = SkillHandle::start(ctx(dir.path(), 1)).await.expect("skill");
        let hung = {
            let skill = skill.clone();
            tokio::spawn(async move {
                skill
                    .execute("h", FAULT, serde_json::json!({"fault": "hang"}), soon(700))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = std::time::Instant::now();
        let err = skill
            .execute("b", FAULT, serde_json::json!({}), soon(5_000))
            .await
            .expect_err("busy");
        assert_eq!(err.code, ErrorCode::Busy);
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "busy is immediate"
        );
        let err = hung.await.expect("join").expect_err("hang");
        assert_eq!(err.code, ErrorCode::Timeout);
        // The slot is free again.
        skill
            .execute("after", FAULT, serde_json::json!({}), soon(5_000))
            .await
            .expect("runs after the timeout");
        skill.stop().await;
    }

    #[tokio::test]
    async fn uninstall_and_the_owners_switch_withdraw_everything_and_persist() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = ctx(dir.path(), 4);
        let (skill, _) = SkillHandle::start(ctx.clone()).await.expect("skill");
        let state = skill
            .command(SKILL, SkillCommand::Uninstall)
            .await
            .expect("uninstall");
        assert!(!state.installed && state.published.is_empty(), "{state:?}");
        assert_eq!(
            state.adapters.len(),
            ADAPTERS.len() + 1,
            "its adapter set stays known"
        );
        let err = skill
            .execute("u", STATUS, Value::Null, soon(1_000))
            .await
            .expect_err("uninstalled");
        assert_eq!(err.code, ErrorCode::SkillDisabled);
        assert!(!load_lifecycle(dir.path()).expect("load").installed);
        skill
            .command(SKILL, SkillCommand::Install)
            .await
            .expect("install");

        // The owner's switch: off wins over root's enabled state, and is kept in its file.
        save_owner_switch(dir.path(), false).expect("save");
        assert!(!load_owner_switch(dir.path()).expect("load"));
        skill.owner_switch(false);
        let state = skill
            .command(SKILL, SkillCommand::Enable)
            .await
            .expect("enable");
        assert!(state.owner_disabled && state.enabled && state.published.is_empty());
        assert!(!ctx.descriptor().operational_surface.enabled);
        skill.stop().await;
        // A restarted skill starts switched off by its owner.
        let ctx2 = super::tests::ctx(dir.path(), 4);
        let (skill, _) = SkillHandle::start(ctx2.clone()).await.expect("restarted");
        assert!(!ctx2.lifecycle().owner_enabled);
        skill.owner_switch(true);
        let state = skill
            .command(SKILL, SkillCommand::Status)
            .await
            .expect("status");
        assert!(
            !state.owner_disabled && !state.published.is_empty(),
            "{state:?}"
        );
        skill.stop().await;
    }

    #[tokio::test]
    async fn hub_get_status_takes_no_arguments() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = HubConfig::new("hub:x", "test", "ws://127.0.0.1:1", "t", dir.path());
        let ctx = Arc::new(HubContext::new(config).expect("context"));
        let (skill, _) = SkillHandle::start(ctx).await.expect("skill");
        let err = skill
            .execute(
                "f",
                STATUS,
                serde_json::json!({"fault": "panic"}),
                soon(5_000),
            )
            .await
            .expect_err("refused");
        assert_eq!(err.code, ErrorCode::InvalidArguments);
        skill.stop().await;
    }
}
