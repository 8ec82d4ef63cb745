//! The adapter actor: one per adapter, linked under the skill; runs each call in a task of
//! its own within the concurrency limit and the call's deadline, and turns a panicking call
//! into a crash report and a failure of the actor (which the skill restarts).

use std::collections::HashMap;
use std::sync::Arc;

use mcp_shared::error::{ErrorCode, ToolError};
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::Semaphore;
use tokio::task::AbortHandle;
use tracing::Instrument;

use super::call::{AdapterReply, CallInput};
use super::registry::AdapterKind;
use crate::context::HubContext;

pub(crate) enum AdapterMsg {
    /// Run one call; refused at once with `busy` over the concurrency limit.
    Run {
        input: CallInput,
        reply: RpcReplyPort<AdapterReply>,
    },
    /// Stop a call in flight (its caller gets no reply).
    Cancel { call_id: String },
    /// A call's task finished.
    Done { call_id: String },
    /// A call's work panicked: answer it, report to the skill, then fail this actor.
    Crashed {
        call_id: String,
        message: String,
        reply: RpcReplyPort<AdapterReply>,
    },
}

/// Sent by an adapter to its skill when a call panicked, before the adapter fails.
pub struct CrashReport {
    pub kind: AdapterKind,
    pub adapter: ActorId,
    pub call_id: String,
    pub message: String,
    pub reply: RpcReplyPort<AdapterReply>,
}

pub(crate) struct AdapterArgs {
    pub kind: AdapterKind,
    pub ctx: Arc<HubContext>,
    /// Where crash reports go (the skill turns them into a restart and then the reply).
    pub on_crash: Arc<dyn Fn(CrashReport) + Send + Sync>,
}

pub(crate) struct AdapterActor;

pub(crate) struct AdapterState {
    args: Arc<AdapterArgs>,
    permits: Arc<Semaphore>,
    running: HashMap<String, AbortHandle>,
}

/// Aborts a task when dropped (so stopping a call also stops its work).
struct AbortOnDrop(AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn panic_message(err: tokio::task::JoinError) -> String {
    match err.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_owned()),
        Err(e) => e.to_string(),
    }
}

impl Actor for AdapterActor {
    type Msg = AdapterMsg;
    type State = AdapterState;
    type Arguments = Arc<AdapterArgs>;

    async fn pre_start(
        &self,
        _myself: ActorRef<AdapterMsg>,
        args: Arc<AdapterArgs>,
    ) -> Result<AdapterState, ActorProcessingErr> {
        let limit = args.ctx.config.skill.adapter_concurrency.max(1);
        Ok(AdapterState {
            args,
            permits: Arc::new(Semaphore::new(limit)),
            running: HashMap::new(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<AdapterMsg>,
        state: &mut AdapterState,
    ) -> Result<(), ActorProcessingErr> {
        // Calls in flight die with the adapter; their callers see the reply port close.
        for (_, task) in state.running.drain() {
            task.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<AdapterMsg>,
        msg: AdapterMsg,
        state: &mut AdapterState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            AdapterMsg::Run { input, reply } => {
                let call_id = input.call_id.clone();
                let deadline = input.deadline;
                let kind = state.args.kind;
                let Ok(permit) = state.permits.clone().try_acquire_owned() else {
                    let limit = state.args.ctx.config.skill.adapter_concurrency;
                    let _ = reply.send(Err(ToolError::new(
                        ErrorCode::Busy,
                        format!(
                            "adapter `{}` already runs {limit} calls; retry later",
                            kind.decl().name
                        ),
                    )));
                    return Ok(());
                };
                let ctx = state.args.ctx.clone();
                let me = myself.clone();
                let id = call_id.clone();
                let span = input
                    .span
                    .in_scope(|| mcp_shared::otel_span!("adapter run", adapter = kind.decl().name));
                let task = tokio::spawn(async move {
                    let _permit = permit;
                    let work = tokio::spawn(kind.run(ctx, input).instrument(span));
                    let _guard = AbortOnDrop(work.abort_handle());
                    match tokio::time::timeout_at(deadline, work).await {
                        Ok(Ok(outcome)) => {
                            let _ = reply.send(outcome);
                        }
                        Ok(Err(e)) if e.is_panic() => {
                            let message = panic_message(e);
                            let _ = me.cast(AdapterMsg::Crashed {
                                call_id: id.clone(),
                                message,
                                reply,
                            });
                        }
                        Ok(Err(e)) => {
                            let _ = reply.send(Err(ToolError::new(
                                ErrorCode::AdapterFailed,
                                format!("the adapter's task stopped: {e}"),
                            )));
                        }
                        Err(_) => {
                            let _ = reply.send(Err(ToolError::new(
                                ErrorCode::Timeout,
                                format!(
                                    "adapter `{}` did not finish before the call's deadline",
                                    kind.decl().name
                                ),
                            )));
                        }
                    }
                    let _ = me.cast(AdapterMsg::Done { call_id: id });
                });
                state.running.insert(call_id, task.abort_handle());
            }
            AdapterMsg::Cancel { call_id } => {
                if let Some(task) = state.running.remove(&call_id) {
                    tracing::debug!(%call_id, adapter = state.args.kind.decl().name, "call cancelled");
                    task.abort();
                }
            }
            AdapterMsg::Done { call_id } => {
                state.running.remove(&call_id);
            }
            AdapterMsg::Crashed {
                call_id,
                message,
                reply,
            } => {
                state.running.remove(&call_id);
                let name = state.args.kind.decl().name;
                tracing::error!(%call_id, adapter = name, panic = %message, "adapter panicked; failing it for a restart");
                (state.args.on_crash)(CrashReport {
                    kind: state.args.kind,
                    adapter: myself.get_id(),
                    call_id,
                    message: message.clone(),
                    reply,
                });
                return Err(format!("adapter `{name}` panicked: {message}").into());
            }
        }
        Ok(())
    }
}
