//! A link: one actor per connected target (the router session of earlier builds). It signs and sends routed calls over the
//! hub's WebSocket, matches results to callers, relays cancels and skill commands, and keeps
//! the target's transport pressure (outbound queue depth, calls awaiting a result).
//!
//! Invariant: when the connection ends, every call still waiting is answered with
//! `target_offline` — no caller waits past its deadline for a hub that is gone. A call or
//! skill command the hub could not decode (its `protocol_error` answers the frame, e.g. a hub
//! of another build) is answered at once with that error, not at its deadline.

use std::collections::HashMap;

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::{
    CallRequest, Envelope, HubToRoot, PROTOCOL_VERSION, RootToHub, SkillCommand, SkillState,
};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::router::{Progress, ProgressSink, RoutedCall, RoutedResult};

/// A target's transport pressure.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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
    /// Test builds only: panic, so tests can prove the supervisor contains it.
    #[cfg(any(test, feature = "fault-injection"))]
    Panic,
}

/// What a link does with a hub's `surface_changed` (the hub connection decides).
pub type OnSurface = Box<dyn Fn(HubToRoot) + Send + Sync>;

pub struct Args {
    pub target_id: String,
    pub signing_key: [u8; 32],
    /// Serialized frames for the connection's writer task.
    pub outbound: mpsc::Sender<String>,
    /// Called with every `surface_changed` (descriptor and skills) the hub sends.
    pub on_surface: OnSurface,
    /// Whether calls carry their `traceparent` (both sides announced
    /// [`mcp_shared::protocol::feature::CALL_TRACEPARENT`]).
    pub traceparent: bool,
}

pub struct Link;

pub struct State {
    args: Args,
    /// Calls awaiting their result, by call id.
    calls: HashMap<String, Waiting>,
    commands: HashMap<String, RpcReplyPort<Result<SkillState, ToolError>>>,
}

/// A call sent to the hub and not yet answered.
struct Waiting {
    /// The id of the frame that carried it (a `protocol_error` names the frame; rare enough
    /// to be found by a scan).
    frame_id: String,
    reply: RpcReplyPort<RoutedResult>,
    progress: Option<ProgressSink>,
}

/// Longest progress message passed on (characters); a longer one is cut.
const MAX_PROGRESS_MESSAGE: usize = 256;

/// The error of a call or command the hub answered with `protocol_error`.
fn undecodable(target_id: &str, message: &str) -> ToolError {
    ToolError::new(
        ErrorCode::Internal,
        format!(
            "target `{target_id}` could not decode the request ({message}); root and hub may be of different builds"
        ),
    )
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

impl Actor for Link {
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
        for (_, waiting) in state.calls.drain() {
            let _ = waiting
                .reply
                .send(RoutedResult::failed(gone(&state.args.target_id)));
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
            #[cfg(any(test, feature = "fault-injection"))]
            Msg::Panic => panic!("fault injected into the router session"),
            Msg::Call(call, reply) => {
                let call = *call;
                let mut req = CallRequest {
                    call_id: call.call_id.clone(),
                    trace_id: call.trace_id,
                    session_id: call.session_id,
                    tool_id: call.tool_id,
                    capability: call.capability,
                    body: call.body,
                    expires_at_ms: call.expires_at_ms,
                    traceparent: call.traceparent.filter(|_| state.args.traceparent),
                    signature: String::new(),
                };
                req.sign(&state.args.signing_key);
                let (frame_id, text) = frame(RootToHub::Call(req));
                match state.send(text) {
                    Ok(()) => {
                        let waiting = Waiting {
                            frame_id,
                            reply,
                            progress: call.progress,
                        };
                        state.calls.insert(call.call_id, waiting);
                    }
                    Err(e) => {
                        let _ = reply.send(RoutedResult::failed(e));
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
                    if let Some(Waiting { reply, .. }) = state.calls.remove(&call_id) {
                        let _ = reply.send(outcome);
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
                HubToRoot::Progress {
                    call_id,
                    progress,
                    total,
                    message,
                } => {
                    let sink = state.calls.get(&call_id).and_then(|w| w.progress.as_ref());
                    if let Some(sink) = sink
                        && progress.is_finite()
                        && total.is_none_or(f64::is_finite)
                    {
                        let message =
                            message.map(|m| m.chars().take(MAX_PROGRESS_MESSAGE).collect());
                        sink.report(Progress {
                            progress,
                            total,
                            message,
                        });
                    }
                }
                // The connection hands evidence to its intake (`hubs::evidence`), never here.
                HubToRoot::Heartbeat | HubToRoot::Evidence(_) => {}
                HubToRoot::ProtocolError { message } => {
                    tracing::warn!(target_id = %state.args.target_id, %message, in_reply_to = ?env.in_reply_to, "hub reported a protocol error");
                    let Some(frame_id) = env.in_reply_to else {
                        return Ok(());
                    };
                    let target_id = &state.args.target_id;
                    let call_id = state
                        .calls
                        .iter()
                        .find(|(_, w)| w.frame_id == frame_id)
                        .map(|(call_id, _)| call_id.clone());
                    if let Some(w) = call_id.and_then(|id| state.calls.remove(&id)) {
                        let _ = w
                            .reply
                            .send(RoutedResult::failed(undecodable(target_id, &message)));
                    } else if let Some(reply) = state.commands.remove(&frame_id) {
                        let _ = reply.send(Err(undecodable(target_id, &message)));
                    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn routed(call_id: &str) -> Box<RoutedCall> {
        Box::new(super::super::router::tests::call(call_id, "hub:t"))
    }

    /// The id of the next frame root queued for the hub.
    async fn next_frame_id(rx: &mut mpsc::Receiver<String>) -> String {
        let text = rx.recv().await.expect("a frame");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        v["id"].as_str().expect("id").to_owned()
    }

    #[tokio::test]
    async fn a_call_the_hub_cannot_decode_fails_at_once_and_the_other_waits() {
        let (tx, mut rx) = mpsc::channel(8);
        let (session, handle) = Actor::spawn(
            None,
            Link,
            Args {
                target_id: "hub:t".into(),
                signing_key: [7; 32],
                outbound: tx,
                on_surface: Box::new(|_| {}),
                traceparent: false,
            },
        )
        .await
        .expect("spawn");
        let call = |id: &'static str| {
            let session = session.clone();
            tokio::spawn(async move { session.call(|r| Msg::Call(routed(id), r), None).await })
        };
        let first = call("c1");
        let f1 = next_frame_id(&mut rx).await;
        let second = call("c2");
        let _f2 = next_frame_id(&mut rx).await;
        session
            .send_message(Msg::Frame(Box::new(Envelope {
                v: PROTOCOL_VERSION,
                id: "h1".into(),
                in_reply_to: Some(f1),
                body: HubToRoot::ProtocolError {
                    message: "malformed frame: unknown field `confirmed_effect`".into(),
                },
            })))
            .expect("send");
        // A protocol error naming no frame changes nothing.
        session
            .send_message(Msg::Frame(Box::new(Envelope {
                v: PROTOCOL_VERSION,
                id: "h2".into(),
                in_reply_to: None,
                body: HubToRoot::ProtocolError {
                    message: "garbage".into(),
                },
            })))
            .expect("send");
        let ractor::rpc::CallResult::Success(pressure) =
            session.call(Msg::Pressure, None).await.expect("rpc")
        else {
            panic!("no pressure answer");
        };
        assert_eq!(pressure.pending_calls, 1, "one call still waits");
        // The first call failed at once, with the hub's reason.
        let outcome = tokio::time::timeout(std::time::Duration::from_secs(5), first)
            .await
            .expect("answered at once")
            .expect("join")
            .expect("rpc");
        let ractor::rpc::CallResult::Success(RoutedResult::Error {
            adapter: None,
            error: err,
        }) = outcome
        else {
            panic!("the undecodable call did not fail with an error");
        };
        assert_eq!(err.code, ErrorCode::Internal);
        assert!(
            err.message.contains("could not decode") && err.message.contains("confirmed_effect"),
            "{err}"
        );
        // The other ends with the connection, as every waiting call does.
        session.stop(None);
        handle.await.expect("stopped");
        let outcome = second.await.expect("join").expect("rpc");
        let ractor::rpc::CallResult::Success(RoutedResult::Error {
            adapter: None,
            error: err,
        }) = outcome
        else {
            panic!("the waiting call did not end with the connection");
        };
        assert_eq!(err.code, ErrorCode::TargetOffline);
    }
}
