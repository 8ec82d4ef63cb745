//! The hub's supervisor: `infra_access_skill`, the `ServiceSupervisor` and `ProfileOps` run
//! linked under it, and a child that fails (a panic, an error) or stops outside a shutdown is
//! started again with its state rebuilt: the skill from its lifecycle files (and its adapters
//! anew), the service supervisor over the same service table (running services run on), and
//! ProfileOps from its index on disk (sessions that were running end `interrupted`). The
//! others, the root channel and calls of other adapters are not touched.
//!
//! Restarts are budgeted per child ([`MAX_RESTARTS`] within [`RESTART_WINDOW`]); past it the
//! child stays down and the failure is logged as an error.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};

use crate::context::HubContext;
use crate::skill::routes::SharedRoutes;
use crate::skill::{Embedded, SkillHandle};

/// Restarts of one child allowed within [`RESTART_WINDOW`].
pub(crate) const MAX_RESTARTS: usize = 5;
/// The window restarts are counted in.
pub(crate) const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// A supervised part of the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Child {
    Skill,
    Services,
    Profiles,
}

impl Child {
    fn name(self) -> &'static str {
        match self {
            Child::Skill => "infra_access_skill",
            Child::Services => "service supervisor",
            Child::Profiles => "ProfileOps",
        }
    }
}

pub(crate) struct HubSupervisor;

pub(crate) struct Args {
    pub ctx: Arc<HubContext>,
    /// The adapters of the program embedding the hub (the skill serves them).
    pub embedded: Embedded,
    /// Set by the hub's shutdown: children stopping then are not restarted.
    pub stopping: Arc<AtomicBool>,
    /// Gets the handle of the skill (swapped to each new instance) once it is started.
    pub skill: tokio::sync::oneshot::Sender<SkillHandle>,
}

pub(crate) struct State {
    ctx: Arc<HubContext>,
    embedded: Embedded,
    stopping: Arc<AtomicBool>,
    skill: Option<SkillHandle>,
    /// Where every instance of the skill publishes its routes (its handle reads them).
    routes: SharedRoutes,
    children: HashMap<ActorId, Child>,
    restarts: HashMap<Child, VecDeque<Instant>>,
}

/// Starts the supervisor and its children; returns it and the skill's handle.
pub(crate) async fn start(
    ctx: Arc<HubContext>,
    embedded: Embedded,
    stopping: Arc<AtomicBool>,
) -> anyhow::Result<(ActorRef<Msg>, SkillHandle)> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let args = Args {
        ctx,
        embedded,
        stopping,
        skill: tx,
    };
    let (sup, _) = Actor::spawn(None, HubSupervisor, args)
        .await
        .map_err(|e| anyhow::anyhow!("cannot start the hub's supervisor: {e}"))?;
    let skill = rx.await?;
    Ok((sup, skill))
}

/// Messages: none; the supervisor acts on its children's supervision events.
pub enum Msg {}

impl State {
    async fn spawn(&mut self, child: Child, me: ActorCell) -> Result<(), ActorProcessingErr> {
        let ctx = self.ctx.clone();
        let id = match child {
            Child::Skill => {
                let routes = self.routes.clone();
                let actor =
                    SkillHandle::spawn_under(ctx.clone(), self.embedded.clone(), routes, me)
                        .await?;
                let id = actor.get_id();
                match &self.skill {
                    Some(handle) => handle.replace(actor),
                    None => {
                        let handle = SkillHandle::of(actor, ctx.clone(), self.routes.clone());
                        self.skill = Some(handle);
                    }
                }
                id
            }
            Child::Services => ctx.machine.services.start_under(Some(me)).await?.get_id(),
            Child::Profiles => ctx
                .machine
                .profiles
                .start_under(ctx.machine.services.clone(), Some(me))
                .await?
                .get_id(),
        };
        self.children.insert(id, child);
        Ok(())
    }

    /// Whether `child` may be restarted once more within its budget (and counts it).
    fn within_budget(&mut self, child: Child) -> bool {
        let recent = self.restarts.entry(child).or_default();
        while recent.front().is_some_and(|t| t.elapsed() > RESTART_WINDOW) {
            recent.pop_front();
        }
        if recent.len() >= MAX_RESTARTS {
            return false;
        }
        recent.push_back(Instant::now());
        true
    }
}

impl Actor for HubSupervisor {
    type Msg = Msg;
    type State = State;
    type Arguments = Args;

    async fn pre_start(
        &self,
        myself: ActorRef<Msg>,
        args: Args,
    ) -> Result<State, ActorProcessingErr> {
        let mut state = State {
            ctx: args.ctx,
            embedded: args.embedded,
            stopping: args.stopping,
            skill: None,
            routes: SharedRoutes::default(),
            children: HashMap::new(),
            restarts: HashMap::new(),
        };
        // Services first (a skill's adapters read them), the skill last.
        for child in [Child::Services, Child::Profiles, Child::Skill] {
            state.spawn(child, myself.get_cell()).await?;
        }
        if let Some(skill) = &state.skill {
            let _ = args.skill.send(skill.clone());
        }
        Ok(state)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Msg>,
        msg: Msg,
        _state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {}
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
                (cell.clone(), format!("stopped: {reason:?}"))
            }
            _ => return Ok(()),
        };
        let Some(child) = state.children.remove(&cell.get_id()) else {
            return Ok(());
        };
        if state.stopping.load(Ordering::Acquire) {
            return Ok(());
        }
        // A failed skill's adapters go with it; the new one spawns its own.
        cell.stop_children(Some(format!("{} failed", child.name())));
        if !state.within_budget(child) {
            tracing::error!(child = child.name(), %reason, "failed too often; left down");
            return Ok(());
        }
        tracing::warn!(child = child.name(), %reason, "failed; starting it again");
        if let Err(e) = state.spawn(child, myself.get_cell()).await {
            tracing::error!(child = child.name(), error = %e, "could not be started again");
        }
        Ok(())
    }
}
