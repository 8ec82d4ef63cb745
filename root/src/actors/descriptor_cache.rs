//! Descriptor cache: the root-curated descriptor set, served from memory without contacting
//! any target. A publish replaces the whole set in one message, so every reader sees either
//! the old set or the new one, never a mix; a restarted cache starts from the last set it
//! accepted (kept in its arguments), not from the start-up set. Published sets are taken in
//! revision order: a set older than the one served is refused, so a replica applying
//! publishes from several replicas never ends on an older one.

use std::collections::BTreeMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use mcp_shared::descriptor::Descriptor;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::descriptors::DescriptorSet;

pub enum Msg {
    Get(String, RpcReplyPort<Option<Arc<Descriptor>>>),
    List(RpcReplyPort<Vec<Arc<Descriptor>>>),
    /// The whole served set (descriptors, origin, skill catalog) as one snapshot.
    Snapshot(RpcReplyPort<Arc<DescriptorSet>>),
    /// Serve this (already validated) set from now on; answers `false` (and keeps the
    /// served set) when the served set is a newer published revision.
    Replace(Arc<DescriptorSet>, RpcReplyPort<bool>),
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
}

pub struct DescriptorCache;

pub struct State {
    args: Arc<Args>,
    set: Arc<DescriptorSet>,
}

impl State {
    fn by_id(&self) -> &BTreeMap<String, Arc<Descriptor>> {
        &self.set.by_id
    }
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
            Msg::Get(id, reply) => {
                let _ = reply.send(state.by_id().get(&id).cloned());
            }
            Msg::List(reply) => {
                let _ = reply.send(state.by_id().values().cloned().collect());
            }
            Msg::Snapshot(reply) => {
                let _ = reply.send(state.set.clone());
            }
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
