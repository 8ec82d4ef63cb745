//! Router: maps a target to its router session and forwards routed calls, cancels and skill
//! commands to it; keeps the directory of managed target descriptors the policy engine reads.
//!
//! Invariant: the router holds no per-tool branches; it forwards a call to the lease's target
//! session or answers `target_offline`.

use std::collections::HashMap;
use std::sync::Arc;

use dashmap::DashMap;
use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::{SkillCommand, SkillState};
use mcp_shared::target::ManagedTargetDescriptor;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::Value;

use super::router_session;

/// Managed target descriptors by target id (status online/offline), published by the hub
/// channel and read by the policy engine.
pub type TargetDirectory = DashMap<String, ManagedTargetDescriptor>;

/// A call routed to a target.
#[derive(Debug, Clone)]
pub struct RoutedCall {
    pub call_id: String,
    pub target_id: String,
    pub session_id: String,
    pub tool_id: String,
    pub capability: String,
    pub arguments: Value,
    pub trace_id: String,
    pub dry_run: bool,
    pub expires_at_ms: i64,
    pub idempotency_key: Option<String>,
    /// See [`mcp_shared::protocol::CallRequest::confirmed_effect`].
    pub confirmed_effect: Option<Value>,
}

/// What a routed call produced: the adapter that ran and its result, or the error (with the
/// adapter when one ran).
pub type RoutedResult = Result<(String, Value), (Option<String>, ToolError)>;

pub enum Msg {
    /// A hub connected: its session replaces any older one for the same target.
    Attach(String, ActorRef<router_session::Msg>),
    /// A hub's connection ended.
    Detach(String, ractor::ActorId),
    /// Routes a call to the target's session; answered by the session.
    Route(RoutedCall, RpcReplyPort<RoutedResult>),
    /// Tells the target to stop a call (deadline passed or the client cancelled).
    Cancel { target_id: String, call_id: String },
    /// An operator command for a skill on a target.
    Skill {
        target_id: String,
        skill: String,
        command: SkillCommand,
        reply: RpcReplyPort<Result<SkillState, ToolError>>,
    },
    /// Number of targets with a live router session.
    Connected(RpcReplyPort<usize>),
    /// Transport pressure of every connected target.
    Pressure(RpcReplyPort<HashMap<String, router_session::Pressure>>),
}

pub struct Args {
    pub targets: Arc<TargetDirectory>,
}

pub struct Router;

pub struct State {
    sessions: HashMap<String, ActorRef<router_session::Msg>>,
}

fn offline(target_id: &str) -> ToolError {
    ToolError::new(
        ErrorCode::TargetOffline,
        format!("target `{target_id}` has no connected hub"),
    )
}

impl Actor for Router {
    type Msg = Msg;
    type State = State;
    type Arguments = Arc<Args>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Msg>,
        _args: Arc<Args>,
    ) -> Result<State, ActorProcessingErr> {
        // Sessions belong to live connections; after a restart hubs re-attach when they
        // reconnect (their connections close with the old sessions' channels).
        Ok(State {
            sessions: HashMap::new(),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Msg>,
        msg: Msg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            Msg::Attach(target_id, session) => {
                if let Some(old) = state.sessions.insert(target_id, session) {
                    old.stop(Some("replaced by a newer connection".into()));
                }
            }
            Msg::Detach(target_id, id) => {
                if state
                    .sessions
                    .get(&target_id)
                    .is_some_and(|s| s.get_id() == id)
                {
                    state.sessions.remove(&target_id);
                }
            }
            Msg::Route(call, reply) => match state.sessions.get(&call.target_id) {
                Some(s) => {
                    if let Err(e) = s.send_message(router_session::Msg::Call(Box::new(call), reply))
                    {
                        // The session is gone; the reply port inside the message is dropped and
                        // the caller sees the RPC fail, which it maps to target_offline.
                        tracing::debug!(error = %e, "router session stopped while routing");
                    }
                }
                None => {
                    let _ = reply.send(Err((None, offline(&call.target_id))));
                }
            },
            Msg::Cancel { target_id, call_id } => {
                if let Some(s) = state.sessions.get(&target_id) {
                    let _ = s.send_message(router_session::Msg::Cancel(call_id));
                }
            }
            Msg::Skill {
                target_id,
                skill,
                command,
                reply,
            } => match state.sessions.get(&target_id) {
                Some(s) => {
                    let _ = s.send_message(router_session::Msg::Skill(skill, command, reply));
                }
                None => {
                    let _ = reply.send(Err(offline(&target_id)));
                }
            },
            Msg::Connected(reply) => {
                let _ = reply.send(state.sessions.len());
            }
            Msg::Pressure(reply) => {
                let mut out = HashMap::new();
                for (t, s) in &state.sessions {
                    if let Ok(p) = ractor::call_t!(s, router_session::Msg::Pressure, 1_000) {
                        out.insert(t.clone(), p);
                    }
                }
                let _ = reply.send(out);
            }
        }
        Ok(())
    }
}
