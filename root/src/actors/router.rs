//! Router registry: one router session per connected target (filled by the hub channel in
//! the next stage), and the directory of managed target descriptors the policy engine reads.
//!
//! Invariant: the router holds no per-tool branches; it forwards a call to the target's
//! session or answers `target_offline`.

use std::sync::Arc;

use dashmap::DashMap;
use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::target::ManagedTargetDescriptor;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::Value;

/// Managed target descriptors by target id, published by the router actor.
pub type TargetDirectory = DashMap<String, ManagedTargetDescriptor>;

/// A call routed to a target.
#[derive(Debug, Clone)]
pub struct RoutedCall {
    pub target_id: String,
    pub tool_id: String,
    pub arguments: Value,
    pub trace_id: String,
}

/// What a routed call produced: the adapter that ran and its result.
pub type RoutedResult = Result<(String, Value), ToolError>;

pub enum Msg {
    /// Registers or replaces a target's descriptor.
    Register(ManagedTargetDescriptor),
    /// Routes a call; answered by the target's router session.
    Route(RoutedCall, RpcReplyPort<RoutedResult>),
    /// Number of targets with a live router session.
    Connected(RpcReplyPort<usize>),
}

pub struct Args {
    pub targets: Arc<TargetDirectory>,
}

pub struct Router;

pub struct State {
    targets: Arc<TargetDirectory>,
}

impl Actor for Router {
    type Msg = Msg;
    type State = State;
    type Arguments = Arc<Args>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Msg>,
        args: Arc<Args>,
    ) -> Result<State, ActorProcessingErr> {
        Ok(State {
            targets: args.targets.clone(),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Msg>,
        msg: Msg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            Msg::Register(d) => {
                state.targets.insert(d.target_id.clone(), d);
            }
            Msg::Route(call, reply) => {
                // No target has a router session yet: hubs connect in the next stage.
                let _ = reply.send(Err(ToolError::new(
                    ErrorCode::TargetOffline,
                    format!("target `{}` has no connected hub", call.target_id),
                )));
            }
            Msg::Connected(reply) => {
                let _ = reply.send(0);
            }
        }
        Ok(())
    }
}
