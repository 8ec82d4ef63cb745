//! Router: maps a target to its link and forwards routed calls, cancels and skill
//! commands to it; keeps the directory of managed target descriptors the policy engine reads.
//!
//! The map of links ([`Links`]) is shared: a hub's connection task puts its session in
//! ([`attach`], before the target is published online, so no call finds an online target
//! without its session) and takes it out ([`detach`]); calls and cancels read it and go
//! straight to the target's session ([`route`], [`cancel`]), so a routed call costs no
//! message to a zone-wide actor. The actor answers skill commands, counts and pressure.
//!
//! Links are not the router's children: they are spawned linked under the
//! [`LinkSupervisor`], an actor with no messages of its own (so nothing it handles can fail),
//! which takes a failed link out of the map. A router that fails and is restarted drops no
//! link, no connection and no call; only what was inside it (a skill command, a pressure
//! read) gets an error.
//!
//! Invariant: the router holds no per-tool branches; it forwards a call to the lease's target
//! session or answers `target_offline`.

use std::collections::HashMap;
use std::sync::Arc;

use dashmap::DashMap;
use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::{CallBody, SkillCommand, SkillState};
use mcp_shared::target::ManagedTargetDescriptor;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use super::link;

/// Managed target descriptors by target id (status online/offline), published by the hub
/// channel and read by the policy engine.
pub type TargetDirectory = DashMap<String, ManagedTargetDescriptor>;

/// Live router links by target id: written by hub connections ([`attach`], [`detach`]),
/// read by callers.
pub type Links = DashMap<String, ActorRef<link::Msg>>;

/// A call routed to a target: its body plus where it goes, under which lease, until when.
#[derive(Debug, Clone)]
pub struct RoutedCall {
    pub call_id: String,
    pub target_id: String,
    pub session_id: String,
    pub tool_id: String,
    pub capability: String,
    pub body: CallBody,
    pub trace_id: String,
    pub expires_at_ms: i64,
    /// Where the hub's `progress` frames for this call go (nowhere: dropped).
    pub progress: Option<ProgressSink>,
    /// The route span's W3C `traceparent` (OpenTelemetry on), for a hub that continues it.
    pub traceparent: Option<String>,
}

/// What a hub reports of a call while it runs: work done so far (only grows), the whole of
/// it when known, and the two in words.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Where a routed call's progress goes (the caller's client, a task's record).
#[derive(Clone)]
pub struct ProgressSink(Arc<dyn Fn(Progress) + Send + Sync>);

impl ProgressSink {
    pub fn new(report: impl Fn(Progress) + Send + Sync + 'static) -> ProgressSink {
        ProgressSink(Arc::new(report))
    }

    pub fn report(&self, progress: Progress) {
        (self.0)(progress)
    }
}

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressSink")
    }
}

/// What a routed call came to (the hub's outcome, or the failure that stood in for it).
pub(crate) type RoutedResult = mcp_shared::protocol::CallOutcome;

pub enum Msg {
    /// An operator command for a skill on a target.
    Skill {
        target_id: String,
        skill: String,
        command: SkillCommand,
        reply: RpcReplyPort<Result<SkillState, ToolError>>,
    },
    /// Number of targets with a live link.
    Connected(RpcReplyPort<usize>),
    /// Test builds only: panic, so tests can prove the supervisor contains it.
    #[cfg(any(test, feature = "fault-injection"))]
    Panic,
}

pub struct Args {
    pub targets: Arc<TargetDirectory>,
    /// The shared map of links (see [`attach`], [`route`]).
    pub links: Arc<Links>,
}

pub(crate) struct Router;

pub(crate) struct State {
    links: Arc<Links>,
}

/// A hub connected: its session replaces any older one for the same target (which is
/// stopped).
pub fn attach(links: &Links, target_id: String, session: ActorRef<link::Msg>) {
    if let Some(old) = links.insert(target_id, session) {
        old.stop(Some("replaced by a newer connection".into()));
    }
}

/// A hub's connection ended: its session leaves the map unless a newer connection's
/// replaced it already. Whether it was still the target's newest (and so left).
pub fn detach(links: &Links, target_id: &str, id: ractor::ActorId) -> bool {
    links
        .remove_if(target_id, |_, s| s.get_id() == id)
        .is_some()
}

/// Sends a call to `target_id`'s session, answered there; with no session the reply is
/// `target_offline` at once.
pub fn route(links: &Links, call: RoutedCall, reply: RpcReplyPort<RoutedResult>) {
    let session = links.get(&call.target_id).map(|s| s.value().clone());
    match session {
        Some(s) => {
            if let Err(e) = s.send_message(link::Msg::Call(Box::new(call), reply)) {
                // The session is gone; the reply port inside the message is dropped and the
                // caller sees the RPC fail, which it maps to target_offline.
                tracing::debug!(error = %e, "link stopped while routing");
            }
        }
        None => {
            let _ = reply.send(RoutedResult::failed(offline(&call.target_id)));
        }
    }
}

/// Tells the target to stop a call (deadline passed or the client cancelled).
pub fn cancel(links: &Links, target_id: &str, call_id: String) {
    let session = links.get(target_id).map(|s| s.value().clone());
    if let Some(s) = session {
        let _ = s.send_message(link::Msg::Cancel(call_id));
    }
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
        args: Arc<Args>,
    ) -> Result<State, ActorProcessingErr> {
        // Links belong to live connections (which attach and detach them) and are supervised
        // by the `LinkSupervisor`, not this actor: they stay routable across its restart.
        Ok(State {
            links: args.links.clone(),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Msg>,
        msg: Msg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            #[cfg(any(test, feature = "fault-injection"))]
            Msg::Panic => panic!("fault injected into the router"),
            Msg::Skill {
                target_id,
                skill,
                command,
                reply,
            } => match state.links.get(&target_id).map(|s| s.value().clone()) {
                Some(s) => {
                    let _ = s.send_message(link::Msg::Skill(skill, command, reply));
                }
                None => {
                    let _ = reply.send(Err(offline(&target_id)));
                }
            },
            Msg::Connected(reply) => {
                let _ = reply.send(state.links.len());
            }
        }
        Ok(())
    }
}

/// Transport pressure of those of `targets` connected here, each link asked at once (a
/// link that does not answer within a second is left out). Only the targets an operator
/// looks at are asked: a zone's every link is never walked on a request.
pub async fn pressure(links: &Links, targets: &[String]) -> HashMap<String, link::Pressure> {
    let asks = targets.iter().filter_map(|t| {
        let link = links.get(t)?.value().clone();
        Some(async move {
            let p = ractor::call_t!(link, link::Msg::Pressure, 1_000).ok()?;
            Some((t.clone(), p))
        })
    });
    futures::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// The parent of every link: a link that ends leaves the map (a failed one is logged; its
/// connection notices and closes, the hub dials again and gets a new session), and no other
/// link is touched. It has no messages, so it cannot fail on one; the router restarting
/// never touches it.
pub(crate) struct LinkSupervisor;

impl Actor for LinkSupervisor {
    type Msg = ();
    type State = Arc<Links>;
    type Arguments = Arc<Links>;

    async fn pre_start(
        &self,
        _myself: ActorRef<()>,
        links: Arc<Links>,
    ) -> Result<Arc<Links>, ActorProcessingErr> {
        Ok(links)
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<()>,
        evt: ractor::SupervisionEvent,
        links: &mut Arc<Links>,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, failure) = match &evt {
            ractor::SupervisionEvent::ActorFailed(cell, err) => (cell, Some(err.to_string())),
            ractor::SupervisionEvent::ActorTerminated(cell, _, _) => (cell, None),
            _ => return Ok(()),
        };
        let id = cell.get_id();
        let target = links
            .iter()
            .find(|e| e.value().get_id() == id)
            .map(|e| e.key().clone());
        if let Some(target_id) = target {
            detach(links, &target_id, id);
            if let Some(reason) = failure {
                tracing::error!(%target_id, %reason, "link failed; its hub reconnects");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::Value;
    use tokio::sync::mpsc;

    /// A routed read of `hub.get_status` (also used by the link's tests).
    pub(crate) fn call(call_id: &str, target_id: &str) -> RoutedCall {
        RoutedCall {
            call_id: call_id.into(),
            target_id: target_id.into(),
            session_id: "s".into(),
            tool_id: "hub.get_status".into(),
            capability: "infra.read.status".into(),
            body: CallBody::run(serde_json::json!({})),
            trace_id: "t".into(),
            expires_at_ms: i64::MAX,
            progress: None,
            traceparent: None,
        }
    }

    async fn session(target_id: &str) -> (ActorRef<link::Msg>, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel(8);
        let (s, _) = Actor::spawn(
            None,
            link::Link,
            link::Args {
                target_id: target_id.into(),
                signing_key: [7; 32],
                outbound: tx,
                on_surface: Box::new(|_| {}),
                traceparent: false,
            },
        )
        .await
        .expect("spawn session");
        (s, rx)
    }

    /// The `type` of the next frame queued for the hub.
    async fn next_frame(rx: &mut mpsc::Receiver<String>) -> (String, Value) {
        let text = rx.recv().await.expect("a frame");
        let v: Value = serde_json::from_str(&text).expect("json");
        (v["body"]["type"].as_str().unwrap_or_default().to_owned(), v)
    }

    #[tokio::test]
    async fn calls_reach_the_attached_session_and_a_stale_detach_keeps_the_newer_one() {
        let links = Arc::new(Links::default());
        let (router, _) = Actor::spawn(
            None,
            Router,
            Arc::new(Args {
                targets: Default::default(),
                links: links.clone(),
            }),
        )
        .await
        .expect("spawn router");

        // No session: target_offline at once, nothing waits.
        let (tx, rx) = ractor::concurrency::oneshot();
        route(&links, call("c0", "hub:t"), tx.into());
        let RoutedResult::Error {
            adapter: None,
            error: e,
        } = rx.await.expect("answered")
        else {
            panic!("expected an error")
        };
        assert_eq!(e.code, ErrorCode::TargetOffline);

        let (old, _old_rx) = session("hub:t").await;
        let (new, mut new_rx) = session("hub:t").await;
        attach(&links, "hub:t".into(), old.clone());
        attach(&links, "hub:t".into(), new.clone());
        // The old connection's detach arrives late: the newer session stays.
        detach(&links, "hub:t", old.get_id());
        let connected = ractor::call_t!(router, Msg::Connected, 1_000).expect("connected");
        assert_eq!(connected, 1);

        let (tx, _pending) = ractor::concurrency::oneshot();
        route(&links, call("c1", "hub:t"), tx.into());
        let (kind, frame) = next_frame(&mut new_rx).await;
        assert_eq!(kind, "call", "{frame}");
        assert_eq!(frame["body"]["call_id"], "c1");
        cancel(&links, "hub:t", "c1".into());
        let (kind, frame) = next_frame(&mut new_rx).await;
        assert_eq!(kind, "cancel", "{frame}");

        detach(&links, "hub:t", new.get_id());
        let connected = ractor::call_t!(router, Msg::Connected, 1_000).expect("connected");
        assert_eq!(connected, 0);
        assert!(links.is_empty());
    }
}
