//! The `Skill` actor: supervises one linked adapter actor per adapter (restarting a failed
//! one within its budget), publishes which adapter serves each tool ([`super::routes`]; calls
//! go there directly), and applies root's lifecycle commands and the owner's switch.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::{SkillCommand, SkillState};
use ractor::{Actor, ActorProcessingErr, ActorRef, ActorStatus, RpcReplyPort, SupervisionEvent};

use crate::context::HubContext;
use crate::skill::adapters::{
    AdapterActor, AdapterArgs, AdapterKind, AdapterMsg, CrashReport, EmbeddedAdapter,
};
use crate::skill::routes::{Route, Routes, SharedRoutes};

use super::lifecycle::{
    Lifecycle, SKILL, StateError, load_lifecycle, load_owner_switch, save_lifecycle,
};

/// Why a skill command of root's could not be applied (`pub`: the reply of the public
/// [`Msg::Command`] and `SkillHandle::command`).
#[derive(Debug, thiserror::Error)]
pub enum SkillCommandError {
    /// The new lifecycle could not be saved.
    #[error(transparent)]
    Save(#[from] StateError),
    #[error("the skill did not answer in time")]
    Timeout,
    #[error("the skill stopped")]
    Stopped,
    #[error("the skill is not running: {0}")]
    NotRunning(ractor::MessagingErr<()>),
}

pub enum Msg {
    /// The hub owner switched the skill on or off (`mcp-hub skill enable|disable`).
    OwnerSwitch(bool),
    /// Install, enable, disable, uninstall or report a skill (root's desired state).
    Command {
        skill: String,
        command: SkillCommand,
        reply: RpcReplyPort<Result<SkillState, SkillCommandError>>,
    },
    /// An adapter's call panicked (sent by the adapter before it fails).
    AdapterCrashed(CrashReport),
    /// Test builds only: panic, so tests can prove the hub's supervisor contains it.
    #[cfg(any(test, feature = "fault-injection"))]
    Panic,
}

pub(crate) struct Skill;

pub(crate) struct SkillArgs {
    pub ctx: Arc<HubContext>,
    /// Where it publishes which adapter serves each tool.
    pub routes: SharedRoutes,
    /// The adapters of the program embedding the hub (declared in the context too).
    pub embedded: Embedded,
}

/// The adapters of the program embedding the hub library (none in `mcp-hub`).
pub(crate) type Embedded = Arc<[&'static EmbeddedAdapter]>;

pub(crate) struct State {
    ctx: Arc<HubContext>,
    routes: SharedRoutes,
    /// Every adapter of the skill, in the order of the context's declarations.
    kinds: Vec<AdapterKind>,
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
            self.publish_routes();
            return Ok(());
        }
        recent.push_back(Instant::now());
        self.restarts += 1;
        tracing::warn!(adapter = kind.decl().name, %reason, restarts = self.restarts, "adapter failed; restarting");
        let adapter = spawn_adapter(kind, &self.ctx, myself).await?;
        self.adapters.insert(tool, adapter);
        self.publish_routes();
        Ok(())
    }

    /// Publishes which adapter serves each tool (or why none does) to the call path.
    fn publish_routes(&self) {
        let adapters = self
            .adapters
            .iter()
            .map(|(&tool, a)| (tool, Route::Adapter(a.clone())));
        let unavailable = self
            .unavailable
            .iter()
            .map(|(&tool, why)| (tool, Route::Unavailable(why.clone())));
        let routes: Routes = adapters.chain(unavailable).collect();
        self.routes.store(Arc::new(routes));
    }

    /// Publishes which tools are withdrawn and has the channel tell root.
    fn publish_unavailable(&self) {
        let mut tools: Vec<&'static str> = self.unavailable.keys().copied().collect();
        tools.sort_unstable();
        self.ctx.skill.unavailable.store(Arc::new(tools));
        self.ctx.skill.surface_changed.notify_one();
    }

    /// Starts again every adapter that used up its budget, with a fresh budget.
    async fn revive(&mut self, myself: &ActorRef<Msg>) -> Result<(), ActorProcessingErr> {
        if self.unavailable.is_empty() {
            return Ok(());
        }
        for tool in std::mem::take(&mut self.unavailable).into_keys() {
            if let Some(kind) = self
                .kinds
                .iter()
                .copied()
                .find(|k| k.decl().tool_id == tool)
            {
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
        self.publish_routes();
        Ok(())
    }

    fn set_lifecycle(&self, lifecycle: Lifecycle) -> Result<(), SkillCommandError> {
        save_lifecycle(&self.ctx.config.state_dir, lifecycle)?;
        self.ctx.skill.lifecycle.store(Arc::new(lifecycle));
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
        if !ctx.skill.unavailable.load().is_empty() {
            ctx.skill.unavailable.store(Arc::new(Vec::new()));
            ctx.skill.surface_changed.notify_one();
        }
        std::fs::create_dir_all(&ctx.config.state_dir)?;
        ctx.skill.lifecycle.store(Arc::new(lifecycle));
        let kinds: Vec<AdapterKind> = ctx
            .adapter_decls()
            .iter()
            .map(|&decl| AdapterKind::of(decl, &args.embedded))
            .collect();
        let mut adapters = HashMap::new();
        for &kind in &kinds {
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
        let state = State {
            ctx,
            routes: args.routes,
            kinds,
            adapters,
            restarts: 0,
            recent_restarts: HashMap::new(),
            unavailable: HashMap::new(),
        };
        state.publish_routes();
        Ok(state)
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Msg>,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        state.routes.store(Arc::default());
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
                    state.ctx.skill.lifecycle.store(Arc::new(Lifecycle {
                        owner_enabled: enabled,
                        ..current
                    }));
                    tracing::warn!(
                        skill = SKILL,
                        owner_enabled = enabled,
                        "the hub's owner switched the skill {}",
                        if enabled { "on" } else { "off" }
                    );
                    state.ctx.skill.surface_changed.notify_one();
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
            .kinds
            .iter()
            .copied()
            .find(|k| state.adapters.get(k.decl().tool_id).map(|a| a.get_id()) == Some(id))
        else {
            return Ok(());
        };
        state.replace(&myself, kind, id, &reason).await
    }
}
