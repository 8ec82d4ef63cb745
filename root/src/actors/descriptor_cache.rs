//! Descriptor cache: root-curated descriptors, served without contacting any target.

use std::collections::BTreeMap;
use std::sync::Arc;

use mcp_shared::descriptor::Descriptor;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

pub enum Msg {
    Get(String, RpcReplyPort<Option<Arc<Descriptor>>>),
    List(RpcReplyPort<Vec<Arc<Descriptor>>>),
}

pub struct Args {
    pub descriptors: Vec<Descriptor>,
}

pub struct DescriptorCache;

pub struct State {
    by_id: BTreeMap<String, Arc<Descriptor>>,
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
        Ok(State {
            by_id: args
                .descriptors
                .iter()
                .map(|d| (d.freshness.descriptor_id.clone(), Arc::new(d.clone())))
                .collect(),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Msg>,
        msg: Msg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            Msg::Get(id, reply) => {
                let _ = reply.send(state.by_id.get(&id).cloned());
            }
            Msg::List(reply) => {
                let _ = reply.send(state.by_id.values().cloned().collect());
            }
        }
        Ok(())
    }
}
