//! Descriptor cache: the root-curated descriptor set, served from memory without contacting
//! any target. A publish replaces the whole set in one message, so every reader sees either
//! the old set or the new one, never a mix; a restarted cache starts from the last set it
//! accepted (kept in its arguments), not from the start-up set. Published sets are taken in
//! revision order: a set older than the one served is refused, so a replica applying
//! publishes from several replicas never ends on an older one.
//!
//! Readers (descriptive calls, resources, the catalog) load the served set from the shared
//! [`Args::current`] without a message: a descriptive call costs no round trip to this actor.
//! Only `Replace` goes through it, so publishes are applied one at a time.

use std::sync::Arc;

use arc_swap::ArcSwap;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::descriptors::DescriptorSet;

pub enum Msg {
    /// Serve this (already validated) set from now on; answers `false` (and keeps the
    /// served set) when the served set is a newer published revision.
    Replace(Arc<DescriptorSet>, RpcReplyPort<bool>),
    /// Test builds only: panic, so tests can prove the supervisor contains it.
    #[cfg(any(test, feature = "fault-injection"))]
    Panic,
}

pub struct Args {
    /// The set to serve; updated on every `Replace`, so a restart keeps the newest set.
    pub current: ArcSwap<DescriptorSet>,
}

impl Args {
    pub fn new(set: DescriptorSet) -> Args {
        Args {
            current: ArcSwap::from_pointee(set),
        }
    }

    /// The set served right now (a lock-free read, no message).
    pub fn snapshot(&self) -> Arc<DescriptorSet> {
        self.current.load_full()
    }
}

pub(crate) struct DescriptorCache;

pub(crate) struct State {
    args: Arc<Args>,
    set: Arc<DescriptorSet>,
}

impl Actor for DescriptorCache {
    type Msg = Msg;
    type State = State;
    type Arguments = Arc<Args>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Msg>,
        args: Arc<Args>,
    ) -> Result<State, ActorProcessingErr> {
        let set = args.current.load_full();
        Ok(State { args, set })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Msg>,
        msg: Msg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            #[cfg(any(test, feature = "fault-injection"))]
            Msg::Panic => panic!("fault injected into the descriptor cache"),
            Msg::Replace(set, reply) => {
                let older = matches!(
                    (set.origin.revision, state.set.origin.revision),
                    (Some(new), Some(served)) if new < served
                );
                if !older {
                    state.args.current.store(set.clone());
                    state.set = set;
                }
                let _ = reply.send(!older);
            }
        }
        Ok(())
    }
}
