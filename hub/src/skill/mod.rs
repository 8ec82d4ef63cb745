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
//!
//! Layout: [`lifecycle`] is the state on disk, [`actor`] the `Skill` actor; [`SkillHandle`]
//! (here) is how the rest of the hub talks to it.

pub(crate) mod actor;
pub(crate) mod adapters;
pub(crate) mod lifecycle;
pub(crate) mod routes;
#[cfg(test)]
pub(crate) mod test_fault;

use std::sync::Arc;
use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::{SkillCommand, SkillState};
use ractor::rpc::CallResult;
use ractor::{Actor, ActorRef};
use serde_json::Value;

use crate::context::HubContext;
use crate::skill::adapters::{AdapterDecl, AdapterMsg, AdapterReply, CallInput};
use crate::skill::routes::{Route, SharedRoutes};
use lifecycle::SKILL;

pub(crate) use actor::{Embedded, Msg, Skill, SkillArgs, SkillCommandError};
pub(crate) use lifecycle::{
    OWNER_SWITCH_POLL, load_lifecycle, load_owner_switch, save_owner_switch,
};

/// Default timeout for a request to the skill actor that does not run an adapter.
const RPC_TIMEOUT: Duration = Duration::from_secs(5);
/// How long past a call's deadline the caller waits for the adapter's own `timeout` answer.
const DEADLINE_GRACE: Duration = Duration::from_secs(2);

/// A cheap handle to the skill: its actor's current instance (the hub's supervisor swaps in a
/// restarted one) for commands, and the routes it publishes for calls.
#[derive(Clone)]
pub struct SkillHandle {
    actor: Arc<arc_swap::ArcSwap<ActorRef<Msg>>>,
    ctx: Arc<HubContext>,
    routes: SharedRoutes,
}

impl SkillHandle {
    /// Starts the skill (and its adapters) for `ctx`, with the embedding program's adapters
    /// `embedded`, unsupervised.
    pub async fn start(
        ctx: Arc<HubContext>,
        embedded: Embedded,
    ) -> anyhow::Result<(SkillHandle, tokio::task::JoinHandle<()>)> {
        let routes = SharedRoutes::default();
        let args = SkillArgs {
            ctx: ctx.clone(),
            routes: routes.clone(),
            embedded,
        };
        let (actor, join) = Actor::spawn(None, Skill, args)
            .await
            .map_err(|e| anyhow::anyhow!("cannot start {SKILL}: {e}"))?;
        Ok((SkillHandle::of(actor, ctx, routes), join))
    }

    /// A handle to `actor`, the skill of `ctx`, publishing to `routes`.
    pub(crate) fn of(
        actor: ActorRef<Msg>,
        ctx: Arc<HubContext>,
        routes: SharedRoutes,
    ) -> SkillHandle {
        SkillHandle {
            actor: Arc::new(arc_swap::ArcSwap::from_pointee(actor)),
            ctx,
            routes,
        }
    }

    /// Spawns the skill for `ctx` (with the embedding program's adapters `embedded`, publishing
    /// to `routes`) linked under `supervisor`.
    pub(crate) async fn spawn_under(
        ctx: Arc<HubContext>,
        embedded: Embedded,
        routes: SharedRoutes,
        supervisor: ractor::ActorCell,
    ) -> anyhow::Result<ActorRef<Msg>> {
        let args = SkillArgs {
            ctx,
            routes,
            embedded,
        };
        let (actor, _) = Actor::spawn_linked(None, Skill, args, supervisor)
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

    /// Runs `input` on the adapter `decl`, sent straight to the adapter actor serving it;
    /// answers by the call's deadline.
    pub async fn execute_call(&self, decl: AdapterDecl, input: CallInput) -> AdapterReply {
        let adapter = self.route(decl)?;
        let wait = input
            .deadline
            .saturating_duration_since(tokio::time::Instant::now())
            + DEADLINE_GRACE;
        // A dead adapter drops the message and so the reply port: `adapter_failed`.
        let res = adapter
            .call(|reply| AdapterMsg::Run { input, reply }, Some(wait))
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
                format!("adapter `{}` is not running: {e}", decl.name),
            )),
        }
    }

    /// The adapter serving `decl`'s tool while the skill is active; else why not.
    fn route(&self, decl: AdapterDecl) -> Result<ActorRef<AdapterMsg>, ToolError> {
        let routes = self.routes.load();
        match routes.get(decl.tool_id) {
            Some(Route::Adapter(adapter)) if self.ctx.lifecycle().active() => Ok(adapter.clone()),
            Some(Route::Unavailable(why)) => {
                Err(ToolError::new(ErrorCode::AdapterFailed, why.clone()))
            }
            _ => Err(ToolError::new(
                ErrorCode::SkillDisabled,
                format!(
                    "skill `{SKILL}` does not publish `{}` right now",
                    decl.tool_id
                ),
            )),
        }
    }

    /// Stops a call wherever it runs (fire and forget).
    pub fn cancel(&self, call_id: &str) {
        for route in self.routes.load().values() {
            if let Route::Adapter(adapter) = route {
                let _ = adapter.cast(AdapterMsg::Cancel {
                    call_id: call_id.to_owned(),
                });
            }
        }
    }

    /// Applies an operator command; the state afterwards.
    pub async fn command(
        &self,
        skill: &str,
        command: SkillCommand,
    ) -> Result<SkillState, SkillCommandError> {
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
            Ok(CallResult::Timeout) => Err(SkillCommandError::Timeout),
            Ok(CallResult::SenderError) => Err(SkillCommandError::Stopped),
            Err(e) => Err(SkillCommandError::NotRunning(e.map(|_| ()))),
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
pub(crate) struct CancelOnDrop {
    skill: SkillHandle,
    call_id: String,
    armed: bool,
}

impl CancelOnDrop {
    pub(crate) fn new(skill: &SkillHandle, call_id: &str) -> CancelOnDrop {
        CancelOnDrop {
            skill: skill.clone(),
            call_id: call_id.to_owned(),
            armed: true,
        }
    }

    pub(crate) fn disarm(mut self) {
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
mod skill_tests;
