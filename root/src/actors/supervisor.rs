//! Supervisor of the root's actors: spawns each child linked, restarts a failed child with
//! the same arguments (up to a budget), and swaps the shared [`Actors`] handles.

use std::sync::Arc;

use arc_swap::ArcSwap;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SupervisionEvent};

use super::{Actors, audit_writer, descriptor_cache, lease_manager, policy, router};

/// Restarts allowed per child before the supervisor gives up and stops (taking root down
/// rather than running without, say, its audit writer).
const RESTART_BUDGET: u32 = 5;

pub struct ChildArgs {
    pub leases: Arc<lease_manager::Args>,
    pub policy: Arc<policy::Args>,
    pub descriptors: Arc<descriptor_cache::Args>,
    pub audit: Arc<audit_writer::Args>,
    pub router: Arc<router::Args>,
}

pub struct Supervisor;

pub struct State {
    args: Arc<ChildArgs>,
    actors: Arc<Actors>,
    restarts: u32,
}

pub enum Msg {}

#[derive(Clone, Copy, Debug)]
enum Child {
    Leases,
    Policy,
    Descriptors,
    Audit,
    Router,
}

const CHILDREN: [Child; 5] = [
    Child::Leases,
    Child::Policy,
    Child::Descriptors,
    Child::Audit,
    Child::Router,
];

impl Child {
    fn name(self) -> &'static str {
        match self {
            Child::Leases => "lease_manager",
            Child::Policy => "policy_engine",
            Child::Descriptors => "descriptor_cache",
            Child::Audit => "audit_writer",
            Child::Router => "router",
        }
    }
}

async fn spawn_child(
    child: Child,
    sup: ActorCell,
    args: &ChildArgs,
) -> Result<ActorCell, ActorProcessingErr> {
    Ok(match child {
        Child::Leases => {
            Actor::spawn_linked(None, lease_manager::LeaseManager, args.leases.clone(), sup)
                .await?
                .0
                .get_cell()
        }
        Child::Policy => Actor::spawn_linked(None, policy::PolicyEngine, args.policy.clone(), sup)
            .await?
            .0
            .get_cell(),
        Child::Descriptors => Actor::spawn_linked(
            None,
            descriptor_cache::DescriptorCache,
            args.descriptors.clone(),
            sup,
        )
        .await?
        .0
        .get_cell(),
        Child::Audit => {
            Actor::spawn_linked(None, audit_writer::AuditWriter, args.audit.clone(), sup)
                .await?
                .0
                .get_cell()
        }
        Child::Router => Actor::spawn_linked(None, router::Router, args.router.clone(), sup)
            .await?
            .0
            .get_cell(),
    })
}

fn publish(actors: &Actors, child: Child, cell: ActorCell) {
    match child {
        Child::Leases => actors.leases.store(Arc::new(cell.into())),
        Child::Policy => actors.policy.store(Arc::new(cell.into())),
        Child::Descriptors => actors.descriptors.store(Arc::new(cell.into())),
        Child::Audit => actors.audit.store(Arc::new(cell.into())),
        Child::Router => actors.router.store(Arc::new(cell.into())),
    }
}

fn which(actors: &Actors, cell: &ActorCell) -> Option<Child> {
    let id = cell.get_id();
    CHILDREN.into_iter().find(|c| match c {
        Child::Leases => actors.leases.load().get_id() == id,
        Child::Policy => actors.policy.load().get_id() == id,
        Child::Descriptors => actors.descriptors.load().get_id() == id,
        Child::Audit => actors.audit.load().get_id() == id,
        Child::Router => actors.router.load().get_id() == id,
    })
}

/// Starts the supervisor and its children; returns the supervisor and the shared handles.
pub async fn start(args: ChildArgs) -> anyhow::Result<(ActorRef<Msg>, Arc<Actors>)> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (sup, _) = Actor::spawn(None, Supervisor, (Arc::new(args), tx)).await?;
    let actors = rx.await?;
    Ok((sup, actors))
}

impl Actor for Supervisor {
    type Msg = Msg;
    type State = State;
    type Arguments = (Arc<ChildArgs>, tokio::sync::oneshot::Sender<Arc<Actors>>);

    async fn pre_start(
        &self,
        myself: ActorRef<Msg>,
        (args, tx): Self::Arguments,
    ) -> Result<State, ActorProcessingErr> {
        let sup = myself.get_cell();
        let leases = spawn_child(Child::Leases, sup.clone(), &args).await?;
        let policy = spawn_child(Child::Policy, sup.clone(), &args).await?;
        let descriptors = spawn_child(Child::Descriptors, sup.clone(), &args).await?;
        let audit = spawn_child(Child::Audit, sup.clone(), &args).await?;
        let router = spawn_child(Child::Router, sup, &args).await?;
        let actors = Arc::new(Actors {
            leases: ArcSwap::from_pointee(leases.into()),
            policy: ArcSwap::from_pointee(policy.into()),
            descriptors: ArcSwap::from_pointee(descriptors.into()),
            audit: Arc::new(ArcSwap::from_pointee(audit.into())),
            router: ArcSwap::from_pointee(router.into()),
            shutting_down: Default::default(),
        });
        let _ = tx.send(actors.clone());
        Ok(State {
            args,
            actors,
            restarts: 0,
        })
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
        let Some(child) = which(&state.actors, &cell) else {
            return Ok(());
        };
        if state
            .actors
            .shutting_down
            .load(std::sync::atomic::Ordering::Acquire)
            || myself.get_status() != ractor::ActorStatus::Running
        {
            return Ok(());
        }
        state.restarts += 1;
        if state.restarts > RESTART_BUDGET * CHILDREN.len() as u32 {
            tracing::error!(child = child.name(), %reason, "restart budget exhausted; stopping");
            myself.stop(Some(format!("{} failed too often", child.name())));
            return Ok(());
        }
        tracing::warn!(child = child.name(), %reason, "actor stopped; restarting");
        let cell = spawn_child(child, myself.get_cell(), &state.args).await?;
        publish(&state.actors, child, cell);
        Ok(())
    }
}
