//! Router session: one actor per connected target. It signs and sends routed calls over the
//! hub's WebSocket, matches results to callers, relays cancels and skill commands, and keeps
//! the target's transport pressure (outbound queue depth, calls awaiting a result).
//!
//! Invariant: when the connection ends, every call still waiting is answered with
//! `target_offline` — no caller waits past its deadline for a hub that is gone.

use std::collections::HashMap;

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::{
    CallOutcome, CallRequest, Envelope, HubToRoot, PROTOCOL_VERSION, RootToHub, SkillCommand,
    SkillState,
};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::Serialize;
use tokio::sync::mpsc;

use super::router::{RoutedCall, RoutedResult};

/// A target's transport pressure.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Pressure {
    /// Frames queued for the socket and not yet written.
    pub queue_depth: usize,
    /// Calls sent and not yet answered.
    pub pending_calls: usize,
    /// Skill commands sent and not yet answered.
    pub pending_commands: usize,
}

pub enum Msg {
    Call(Box<RoutedCall>, RpcReplyPort<RoutedResult>),
    Cancel(String),
    Skill(
        String,
        SkillCommand,
        RpcReplyPort<Result<SkillState, ToolError>>,
    ),
    /// A frame from the hub (already decoded by the connection task).
    Frame(Box<Envelope<HubToRoot>>),
    Pressure(RpcReplyPort<Pressure>),
}

pub struct Args {
    pub target_id: String,
    pub signing_key: [u8; 32],
    /// Serialized frames for the connection's writer task.
    pub outbound: mpsc::Sender<String>,
    /// Called with every `surface_changed` (descriptor and skills) the hub sends.
    pub on_surface: Box<dyn Fn(HubToRoot) + Send + Sync>,
}

pub struct RouterSession;

pub struct State {
    args: Args,
    calls: HashMap<String, RpcReplyPort<RoutedResult>>,
    commands: HashMap<String, RpcReplyPort<Result<SkillState, ToolError>>>,
}

fn frame(body: RootToHub) -> (String, String) {
    let id = uuid::Uuid::now_v7().to_string();
    let env = Envelope {
        v: PROTOCOL_VERSION,
        id: id.clone(),
        in_reply_to: None,
        body,
    };
    (id, serde_json::to_string(&env).unwrap_or_default())
}

fn gone(target_id: &str) -> ToolError {
    ToolError::new(
        ErrorCode::TargetOffline,
        format!("the connection to target `{target_id}` ended"),
    )
}

impl State {
    /// Queues a frame without waiting; a full queue is back-pressure reported as `busy`.
    fn send(&self, text: String) -> Result<(), ToolError> {
        self.args.outbound.try_send(text).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => ToolError::new(
                ErrorCode::Busy,
                format!("the connection to `{}` is saturated", self.args.target_id),
            ),
            mpsc::error::TrySendError::Closed(_) => gone(&self.args.target_id),
        })
    }
}

impl Actor for RouterSession {
    type Msg = Msg;
    type State = State;
    type Arguments = Args;

    async fn pre_start(
        &self,
        _myself: ActorRef<Msg>,
        args: Args,
    ) -> Result<State, ActorProcessingErr> {
        Ok(State {
            args,
            calls: HashMap::new(),
            commands: HashMap::new(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Msg>,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        for (_, reply) in state.calls.drain() {
            let _ = reply.send(Err((None, gone(&state.args.target_id))));
        }
        for (_, reply) in state.commands.drain() {
            let _ = reply.send(Err(gone(&state.args.target_id)));
        }
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Msg>,
        msg: Msg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            Msg::Call(call, reply) => {
                let call = *call;
                let mut req = CallRequest {
                    call_id: call.call_id.clone(),
                    trace_id: call.trace_id,
                    session_id: call.session_id,
                    tool_id: call.tool_id,
                    capability: call.capability,
                    arguments: call.arguments,
                    dry_run: call.dry_run,
                    expires_at_ms: call.expires_at_ms,
                    idempotency_key: call.idempotency_key,
                    confirmed_effect: call.confirmed_effect,
                    signature: String::new(),
                };
                req.sign(&state.args.signing_key);
                let (_, text) = frame(RootToHub::Call(req));
                match state.send(text) {
                    Ok(()) => {
                        state.calls.insert(call.call_id, reply);
                    }
                    Err(e) => {
                        let _ = reply.send(Err((None, e)));
                    }
                }
            }
            Msg::Cancel(call_id) => {
                // The caller has given up (deadline or client cancel): forget it and tell the hub.
                state.calls.remove(&call_id);
                let (_, text) = frame(RootToHub::Cancel { call_id });
                let _ = state.send(text);
            }
            Msg::Skill(skill, command, reply) => {
                let (id, text) = frame(RootToHub::SkillCommand { skill, command });
                match state.send(text) {
                    Ok(()) => {
                        state.commands.insert(id, reply);
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            Msg::Frame(env) => match env.body {
                HubToRoot::Result { call_id, outcome } => {
                    if let Some(reply) = state.calls.remove(&call_id) {
                        let _ = reply.send(match outcome {
                            CallOutcome::Ok { adapter, result } => Ok((adapter, result)),
                            CallOutcome::Error { adapter, error } => Err((adapter, error)),
                        });
                    } else {
                        tracing::debug!(target_id = %state.args.target_id, %call_id, "result for a call nobody waits for");
                    }
                }
                HubToRoot::SkillState(s) => {
                    if let Some(reply) = env.in_reply_to.and_then(|id| state.commands.remove(&id)) {
                        let _ = reply.send(Ok(s));
                    }
                }
                body @ HubToRoot::SurfaceChanged { .. } => (state.args.on_surface)(body),
                HubToRoot::Progress { .. } | HubToRoot::Heartbeat => {}
                HubToRoot::ProtocolError { message } => {
                    tracing::warn!(target_id = %state.args.target_id, %message, "hub reported a protocol error");
                }
                HubToRoot::Hello { .. } => {
                    let (_, text) = frame(RootToHub::ProtocolError {
                        message: "hello after welcome".into(),
                    });
                    let _ = state.send(text);
                }
            },
            Msg::Pressure(reply) => {
                let _ = reply.send(Pressure {
                    queue_depth: state.args.outbound.max_capacity()
                        - state.args.outbound.capacity(),
                    pending_calls: state.calls.len(),
                    pending_commands: state.commands.len(),
                });
            }
        }
        Ok(())
    }
}
