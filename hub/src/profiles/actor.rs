//! The `ProfileOps` actor: the one writer of the profiling state (starts, stops, finishes and
//! publishes sessions; restarts a service into and out of profiling mode) and the sampler task
//! of each running session.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::machine::services::{Mode, ServiceState, Services};

use super::heap::collect::Keeper;
use super::sample::{Sample, sample};
use super::store::{Session, SessionState, Shared};
use super::store::{StartRequest, admission, lock, now, started_at};

pub enum Msg {
    Start {
        request: StartRequest,
        deadline: tokio::time::Instant,
        reply: RpcReplyPort<Result<Session, ToolError>>,
    },
    Stop {
        session_id: String,
        reply: RpcReplyPort<Result<(Session, bool), ToolError>>,
    },
    Publish {
        session_id: String,
        reply: RpcReplyPort<Result<Value, ToolError>>,
    },
    /// A sampler ended (`state` says how).
    Ended {
        session_id: String,
        state: SessionState,
        error: Option<String>,
    },
    /// Test builds only: panic, so tests can prove the hub's supervisor contains it.
    #[cfg(any(test, feature = "fault-injection"))]
    Panic,
}

pub(crate) struct ProfileOps;

pub(crate) struct OpsArgs {
    pub(super) shared: Arc<Shared>,
    pub(super) services: Services,
}

struct Running {
    cancel: CancellationToken,
    stoppers: Vec<RpcReplyPort<Result<(Session, bool), ToolError>>>,
}

/// How long returning a service from profiling mode to its normal argv may take (its stop
/// takes at most the service's `stop_timeout_ms`, then it starts).
const RESTORE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a running session keeps the heap snapshots its service wrote (at most).
const COLLECT_EVERY: Duration = Duration::from_secs(1);

pub(crate) struct OpsState {
    shared: Arc<Shared>,
    services: Services,
    running: HashMap<String, Running>,
}

impl OpsState {
    async fn start(
        &mut self,
        myself: &ActorRef<Msg>,
        request: StartRequest,
        deadline: tokio::time::Instant,
    ) -> Result<Session, ToolError> {
        let service = request.service.as_str();
        if let Some(why) = self
            .shared
            .with(|i| admission(&self.shared.config, i, service))?
        {
            return Err(ToolError::new(ErrorCode::Busy, why));
        }
        let services = &self.services;
        let pid = if request.mode == Mode::Profiling {
            services
                .restart(service, Mode::Profiling, deadline)
                .await?
                .new_pid
        } else {
            let now = services.get(service)?;
            match (now.state, now.pid) {
                (ServiceState::Running, Some(pid)) => pid,
                (state, _) => {
                    return Err(ToolError::new(
                        ErrorCode::InvalidArguments,
                        format!(
                            "service `{service}` is not running (state {}); restart it first or profile it in mode \"profiling\"",
                            state.as_str()
                        ),
                    ));
                }
            }
        };
        let mode = services.get(service)?.mode;
        let session = Session {
            session_id: uuid::Uuid::now_v7().to_string(),
            service: service.to_owned(),
            mode,
            interval_ms: request.interval_ms,
            duration_sec: request.duration_sec,
            state: SessionState::Running,
            started_at: now(),
            ended_at: None,
            pid: Some(pid),
            samples: 0,
            retry_of: request.retry_of,
            artifact_id: None,
            incident_ids: Vec::new(),
            growth: None,
            published_at: None,
            error: None,
            heap: None,
            heap_error: None,
        };
        let recorded = session.clone();
        self.shared.update(|i| i.sessions.push(recorded))?;
        let cancel = lock(&self.shared.epoch).child_token();
        lock(&self.shared.live).insert(session.session_id.clone(), Vec::new());
        if let Some(heap) = services.config(service).ok().and_then(|c| c.heap_profiles) {
            let keeper = Keeper::new(heap, Some(pid), started_at(&session));
            lock(&self.shared.live_heap)
                .insert(session.session_id.clone(), Arc::new(Mutex::new(keeper)));
        }
        tokio::spawn(sampler(
            self.shared.clone(),
            myself.clone(),
            session.clone(),
            pid,
            cancel.clone(),
        ));
        self.running.insert(
            session.session_id.clone(),
            Running {
                cancel,
                stoppers: Vec::new(),
            },
        );
        tracing::info!(service, session = %session.session_id, pid, mode = mode.as_str(), "profiling session started");
        Ok(session)
    }

    fn ended(&mut self, session_id: &str, state: SessionState, error: Option<String>) {
        let samples = lock(&self.shared.live)
            .remove(session_id)
            .unwrap_or_default();
        let heap = lock(&self.shared.live_heap)
            .remove(session_id)
            .map(|k| lock(&k).clone());
        let outcome = self.shared.finish(session_id, state, error, samples, heap);
        if let Err(e) = &outcome {
            tracing::error!(session = session_id, error = %e, "cannot finish a profiling session");
        }
        if let Some(running) = self.running.remove(session_id) {
            for stopper in running.stoppers {
                let _ = stopper.send(outcome.clone().map(|s| (s, true)));
            }
        }
    }

    /// After a session in profiling mode ended: its service back in its normal argv, if it
    /// is still in profiling mode.
    async fn restore_mode(&self, session_id: &str) {
        let Ok(session) = self.shared.session(session_id) else {
            return;
        };
        let services = &self.services;
        if session.mode != Mode::Profiling
            || !services
                .get(&session.service)
                .is_ok_and(|s| s.mode == Mode::Profiling)
        {
            return;
        }
        let deadline = tokio::time::Instant::now() + RESTORE_TIMEOUT;
        match services
            .restart(&session.service, Mode::Normal, deadline)
            .await
        {
            Ok(r) => {
                tracing::info!(service = %session.service, session = session_id, pid = r.new_pid, "profiling session ended; the service runs its normal argv again")
            }
            Err(e) => {
                tracing::error!(service = %session.service, session = session_id, error = %e, "profiling session ended; the service could not be returned to its normal argv")
            }
        }
    }
}

/// Keeps the heap snapshots `session`'s service wrote since the last time, and sums up what
/// is kept when that changed (off the runtime's threads: a snapshot is read, checked and
/// rewritten; a summary reads two).
async fn collect_heap(shared: &Arc<Shared>, session: &Session) {
    let Some(slot) = lock(&shared.live_heap).get(&session.session_id).cloned() else {
        return;
    };
    // Collected on a copy, then put back: readers never wait on the collection's I/O.
    let mut keeper = lock(&slot).clone();
    let files = shared.clone();
    let (id, service) = (session.session_id.clone(), session.service.clone());
    let started = started_at(session);
    let collected = tokio::task::spawn_blocking(move || {
        keeper.collect(&id, &service, false, |m| files.file_of(m));
        let samples = lock(&files.live).get(&id).cloned().unwrap_or_default();
        keeper.refresh(started, &samples);
        keeper
    })
    .await;
    if let Ok(keeper) = collected {
        *lock(&slot) = keeper;
    }
}

/// Samples `pid` for `session` until its duration has passed, it is cancelled, or the
/// process is gone; then tells the actor.
async fn sampler(
    shared: Arc<Shared>,
    actor: ActorRef<Msg>,
    session: Session,
    pid: u32,
    cancel: CancellationToken,
) {
    let started = tokio::time::Instant::now();
    let duration = Duration::from_secs(session.duration_sec);
    let mut ticks = tokio::time::interval(Duration::from_millis(session.interval_ms));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let jsonl = shared.samples_path(&session.session_id);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&jsonl)
        .map_err(|e| tracing::warn!(path = %jsonl.display(), error = %e, "samples are kept in memory only"))
        .ok();
    // The first tick is immediate: a session that starts always takes its first sample.
    ticks.tick().await;
    let mut collected = started;
    let (state, error) = loop {
        let t_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let Some(s) = sample(pid, t_ms) else {
            break (
                SessionState::Failed,
                Some(format!(
                    "the process of `{}` (pid {pid}) is gone",
                    session.service
                )),
            );
        };
        if let Some(f) = file.as_mut()
            && let Ok(line) = serde_json::to_string(&s)
        {
            let _ = writeln!(f, "{line}");
        }
        if let Some(live) = lock(&shared.live).get_mut(&session.session_id) {
            live.push(s);
        }
        if collected.elapsed() >= COLLECT_EVERY {
            collected = tokio::time::Instant::now();
            collect_heap(&shared, &session).await;
        }
        if started.elapsed() >= duration {
            break (SessionState::Completed, None);
        }
        tokio::select! {
            _ = cancel.cancelled() => break (SessionState::Stopped, None),
            _ = ticks.tick() => {}
        }
    };
    let _ = actor.cast(Msg::Ended {
        session_id: session.session_id,
        state,
        error,
    });
}

impl Actor for ProfileOps {
    type Msg = Msg;
    type State = OpsState;
    type Arguments = OpsArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Msg>,
        args: OpsArgs,
    ) -> Result<OpsState, ActorProcessingErr> {
        let shared = args.shared;
        // Samplers a failed ProfileOps left behind stop; their sessions end below.
        let old = std::mem::replace(&mut *lock(&shared.epoch), CancellationToken::new());
        old.cancel();
        // Sessions a previous hub process (or a failed ProfileOps) left running: finished as interrupted with the
        // samples their files kept. A damaged index is reported by every profiling tool.
        match shared.with(|i| {
            i.sessions
                .iter()
                .filter(|s| s.state == SessionState::Running)
                .map(|s| s.session_id.clone())
                .collect::<Vec<_>>()
        }) {
            Ok(left) => {
                for id in left {
                    let samples: Vec<Sample> = std::fs::read_to_string(shared.samples_path(&id))
                        .map(|t| {
                            t.lines()
                                .filter_map(|l| serde_json::from_str(l).ok())
                                .collect()
                        })
                        .unwrap_or_default();
                    if let Err(e) = shared.finish(
                        &id,
                        SessionState::Interrupted,
                        Some("the hub stopped while the session ran".into()),
                        samples,
                        None,
                    ) {
                        tracing::error!(session = %id, error = %e, "cannot finish an interrupted session");
                    }
                }
            }
            Err(e) => tracing::error!(error = %e, "the profiling index cannot be read"),
        }
        shared.sweep_snapshots();
        Ok(OpsState {
            shared,
            services: args.services,
            running: HashMap::new(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Msg>,
        state: &mut OpsState,
    ) -> Result<(), ActorProcessingErr> {
        let ids: Vec<String> = state.running.keys().cloned().collect();
        for id in ids {
            if let Some(r) = state.running.get(&id) {
                r.cancel.cancel();
            }
            state.ended(
                &id,
                SessionState::Interrupted,
                Some("the hub stopped while the session ran".into()),
            );
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Msg>,
        msg: Msg,
        state: &mut OpsState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            Msg::Start {
                request,
                deadline,
                reply,
            } => {
                let outcome = state.start(&myself, request, deadline).await;
                let _ = reply.send(outcome);
            }
            Msg::Stop { session_id, reply } => match state.running.get_mut(&session_id) {
                Some(running) => {
                    running.cancel.cancel();
                    running.stoppers.push(reply);
                }
                None => {
                    let _ = reply.send(state.shared.session(&session_id).map(|s| (s, false)));
                }
            },
            Msg::Publish { session_id, reply } => {
                let _ = reply.send(state.shared.publish(&session_id));
            }
            #[cfg(any(test, feature = "fault-injection"))]
            Msg::Panic => panic!("fault injected into ProfileOps"),
            Msg::Ended {
                session_id,
                state: end,
                error,
            } => {
                state.ended(&session_id, end, error);
                state.restore_mode(&session_id).await;
            }
        }
        Ok(())
    }
}
