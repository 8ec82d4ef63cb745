//! A supervised actor's current instance: started linked under the hub's supervisor (which
//! starts it again when it fails), replaced when it is, asked through whichever instance runs
//! now, and stopped with the hub. The managed services' supervisor and ProfileOps each keep
//! theirs in one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorRef};

/// The instance of an actor with messages `M` running now, if any. Clones share it.
pub(crate) struct Restartable<M: ractor::Message>(Arc<Mutex<Option<ActorRef<M>>>>);

impl<M: ractor::Message> Clone for Restartable<M> {
    fn clone(&self) -> Self {
        Restartable(self.0.clone())
    }
}

impl<M: ractor::Message> Default for Restartable<M> {
    fn default() -> Self {
        Restartable(Arc::new(Mutex::new(None)))
    }
}

impl<M: ractor::Message> Restartable<M> {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<ActorRef<M>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Spawns `actor` (linked under `supervisor` when given) and makes it the current
    /// instance; one it replaces is stopped. `what` names it in the error.
    pub(crate) async fn start<A>(
        &self,
        actor: A,
        args: A::Arguments,
        supervisor: Option<ActorCell>,
        what: &str,
    ) -> anyhow::Result<ActorRef<M>>
    where
        A: Actor<Msg = M>,
    {
        let (started, _) = match supervisor {
            Some(sup) => Actor::spawn_linked(None, actor, args, sup).await,
            None => Actor::spawn(None, actor, args).await,
        }
        .map_err(|e| anyhow::anyhow!("cannot start {what}: {e}"))?;
        if let Some(old) = self.slot().replace(started.clone()) {
            old.stop(Some("replaced".into()));
        }
        Ok(started)
    }

    /// The instance running now, if any.
    pub(crate) fn current(&self) -> Option<ActorRef<M>> {
        self.slot().clone()
    }

    /// Stops the current instance and waits at most `wait` for it to be gone.
    pub(crate) async fn stop(&self, wait: Duration) {
        let actor = self.slot().take();
        if let Some(actor) = actor {
            let _ = actor
                .stop_and_wait(Some("hub shutting down".into()), Some(wait))
                .await;
        }
    }
}
