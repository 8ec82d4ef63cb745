//! Supervisor of the root's actors: spawns each child linked, restarts a failed child with
//! the same arguments, and swaps the shared [`Actors`] handles.
//!
//! The restart budget is a sliding window per child: [`RESTART_BUDGET`] restarts within
//! [`RESTART_WINDOW`]. A child that fails once more inside its window stops the supervisor,
//! which stops root (it exits non-zero, for systemd's `Restart=` to start it afresh) rather
//! than run without, say, its audit writer. Rare failures over a long life never add up.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SupervisionEvent};
use std::time::Instant;

use super::{Actors, audit_writer, descriptor_cache, lease_manager, policy, router};

/// Restarts allowed per child within [`RESTART_WINDOW`].
pub const RESTART_BUDGET: usize = 5;
/// The window restarts are counted in.
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);

pub struct ChildArgs {
    pub leases: Arc<lease_manager::Args>,
    pub policy: Arc<policy::Args>,
    pub descriptors: Arc<descriptor_cache::Args>,
    pub audit: Arc<audit_writer::Args>,
    pub router: Arc<router::Args>,
}

pub(crate) struct Supervisor;

pub(crate) struct State {
    args: Arc<ChildArgs>,
    actors: Arc<Actors>,
    /// Each child's restarts within the window, oldest first.
    restarts: HashMap<&'static str, VecDeque<Instant>>,
}

pub enum Msg {}

#[derive(Clone, Copy, Debug)]
enum Child {
    Leases,
    Policy,
    Descriptors,
    Audit,
    Router,
    Links,
}

const CHILDREN: [Child; 6] = [
    Child::Leases,
    Child::Policy,
    Child::Descriptors,
    Child::Audit,
    Child::Router,
    Child::Links,
];

impl Child {
    fn name(self) -> &'static str {
        match self {
            Child::Leases => "lease_manager",
            Child::Policy => "policy_engine",
            Child::Descriptors => "descriptor_cache",
            Child::Audit => "audit_writer",
            Child::Router => "router",
            Child::Links => "link_supervisor",
        }
    }
}

/// Records a restart of `child` at `now`; whether the child is still within its budget.
fn within_budget(
    restarts: &mut HashMap<&'static str, VecDeque<Instant>>,
    child: Child,
    now: Instant,
) -> bool {
    let window = restarts.entry(child.name()).or_default();
    while window
        .front()
        .is_some_and(|at| now.duration_since(*at) >= RESTART_WINDOW)
    {
        window.pop_front();
    }
    window.push_back(now);
    window.len() <= RESTART_BUDGET
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
        Child::Links => {
            Actor::spawn_linked(None, router::LinkSupervisor, args.router.links.clone(), sup)
                .await?
                .0
                .get_cell()
        }
    })
}

fn publish(actors: &Actors, child: Child, cell: ActorCell) {
    match child {
        Child::Leases => actors.leases.store(Arc::new(cell.into())),
        Child::Policy => actors.policy.store(Arc::new(cell.into())),
        Child::Descriptors => actors.descriptors.store(Arc::new(cell.into())),
        Child::Audit => actors.audit.store(Arc::new(cell.into())),
        Child::Router => actors.router.store(Arc::new(cell.into())),
        Child::Links => actors.links.store(Arc::new(cell.into())),
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
        Child::Links => actors.links.load().get_id() == id,
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
        let router = spawn_child(Child::Router, sup.clone(), &args).await?;
        let links = spawn_child(Child::Links, sup, &args).await?;
        let actors = Arc::new(Actors {
            leases: ArcSwap::from_pointee(leases.into()),
            policy: ArcSwap::from_pointee(policy.into()),
            descriptors: ArcSwap::from_pointee(descriptors.into()),
            audit: Arc::new(ArcSwap::from_pointee(audit.into())),
            router: ArcSwap::from_pointee(router.into()),
            links: ArcSwap::from_pointee(links.into()),
            shutting_down: Default::default(),
        });
        let _ = tx.send(actors.clone());
        Ok(State {
            args,
            actors,
            restarts: HashMap::new(),
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
        if !within_budget(&mut state.restarts, child, Instant::now()) {
            tracing::error!(
                child = child.name(),
                %reason,
                budget = RESTART_BUDGET,
                window_sec = RESTART_WINDOW.as_secs(),
                "restart budget spent within its window; stopping root"
            );
            myself.stop(Some(format!(
                "{} failed more than {RESTART_BUDGET} times within {} s",
                child.name(),
                RESTART_WINDOW.as_secs()
            )));
            return Ok(());
        }
        tracing::warn!(child = child.name(), %reason, "actor stopped; restarting");
        let cell = spawn_child(child, myself.get_cell(), &state.args).await?;
        publish(&state.actors, child, cell);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_counts_restarts_within_a_window_only() {
        let t0 = Instant::now();
        let mut restarts = HashMap::new();
        for i in 0..RESTART_BUDGET as u32 {
            assert!(within_budget(
                &mut restarts,
                Child::Router,
                t0 + i * RESTART_WINDOW / 10
            ));
        }
        // Another child has a budget of its own.
        assert!(within_budget(&mut restarts, Child::Policy, t0));
        let late = t0 + RESTART_WINDOW / 2;
        assert!(
            !within_budget(&mut restarts, Child::Router, late),
            "one too many"
        );
        // Rare failures over a long life never add up.
        let mut restarts = HashMap::new();
        for i in 0..100 {
            let at = t0 + i * RESTART_WINDOW / 4;
            assert!(
                within_budget(&mut restarts, Child::Audit, at),
                "restart {i}"
            );
        }
    }
}
