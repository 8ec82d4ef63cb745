//! The root channel: dials `<root_url>/v1/root/hubs/connect` over WebSocket, introduces the
//! hub with `hello`, waits for `welcome`, then serves root's frames until the connection
//! ends, and reconnects with jittered exponential backoff until shutdown, or until root says
//! the target is retired (`403 target_retired`), after which it dials no more. With several root URLs
//! (`root_urls`: replicas of one zone), each new attempt goes to the next URL, so a hub whose
//! root died is back on another replica after one backoff step.
//!
//! On a live connection one task owns the socket and multiplexes: frames from root, frames
//! queued by call tasks, the heartbeat timer, and shutdown. Every `call` runs in its own task
//! (many in flight), through the [`Gate`] and then the skill.
//! A frame that does not decode is answered with `protocol_error` and logged; it never ends the
//! connection. `hello` announces the protocol features this hub understands and `welcome`
//! root's; the hub sends root only the optional fields root announced, and a root of an
//! earlier build, which refuses a `hello` with features, is greeted without them from then on.
//! `cancel` (the caller asked to stop) aborts the call's task and stops its adapter work; the
//! hub then sends nothing for that call. When the connection drops, calls in flight are
//! stopped the same way (their results could not be delivered), except writes under an
//! idempotency key: nobody asked them to stop, and stopped midway a write is half done and a
//! retry under its key would start it again. They finish, record their result in the ledger,
//! and that answers the retry (`busy` until then). Root silent for three heartbeat intervals counts as
//! a dropped connection.
//!
//! Layout: this module holds the connection (dial, welcome, serve, skill commands);
//! [`connect`] the upgrade request, [`ChannelError`] and [`Backoff`]; [`frames`] the
//! envelopes and their encoding; [`call`] one call (gate, skill, progress, result).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use mcp_shared::profiling::EvidenceCursor;
use mcp_shared::protocol::{
    Envelope, Evidence, Features, HubToRoot, MAX_FRAME_BYTES, PROTOCOL_VERSION, RootToHub,
    SkillCommand, decode, feature,
};
use tokio::sync::{mpsc, watch};
use tokio::task::{AbortHandle, JoinSet};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_util::sync::CancellationToken;

mod call;
pub(crate) mod connect;
mod frames;

#[cfg(test)]
pub(crate) use call::execute;
use call::run_call;
use connect::Socket;
pub(crate) use connect::{Backoff, ChannelError, upgrade_request};
use frames::{encode, envelope, raw_id};

use crate::context::HubContext;
use crate::link::enforcement::Gate;
use crate::skill::SkillHandle;

/// How long root has to answer `hello` with `welcome`.
const WELCOME_TIMEOUT: Duration = Duration::from_secs(10);
/// Heartbeat interval used if root announces 0.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(15);
/// Missed heartbeat intervals after which root counts as gone.
const SILENCE_FACTOR: u32 = 3;
/// Frames queued for sending on one connection.
const OUTBOX: usize = 1024;

/// Everything one connection needs.
#[derive(Clone)]
pub(crate) struct Channel {
    pub ctx: Arc<HubContext>,
    pub gate: Arc<Gate>,
    pub skill: SkillHandle,
    pub connected: Arc<watch::Sender<bool>>,
    pub shutdown: CancellationToken,
}

impl Channel {
    /// Connects and reconnects until shutdown. With several root URLs (replicas of one
    /// zone), a failed or ended connection moves on to the next URL.
    pub(crate) async fn run(self) {
        let cfg = self.ctx.config.reconnect;
        let mut backoff = Backoff::new(cfg.initial_ms, cfg.max_ms);
        let n_urls = self.ctx.config.root_url_list().len().max(1);
        let mut url_idx = 0usize;
        loop {
            let res = tokio::select! {
                () = self.shutdown.cancelled() => break,
                res = self.session(&mut backoff, url_idx) => res,
            };
            if !matches!(res, Err(ChannelError::TokenChanged)) {
                url_idx = (url_idx + 1) % n_urls;
            }
            self.ctx.connection.connected_since.store(None);
            self.connected.send_replace(false);
            if self.shutdown.is_cancelled() {
                break;
            }
            if matches!(res, Err(ChannelError::TokenChanged)) {
                tracing::info!("reconnecting with the new hub token");
                continue;
            }
            // Retired for good: dialling on would only fill root's refusals (and count against
            // this address, which other hubs behind it share).
            if let Err(e @ ChannelError::Retired(_)) = &res {
                tracing::error!(error = %e, "the hub stops dialling root");
                self.shutdown.cancelled().await;
                break;
            }
            let delay = match res.as_ref().err().and_then(ChannelError::retry_after) {
                Some(asked) => backoff.delay_after(asked),
                None => backoff.next_delay(),
            };
            match res {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "root channel down")
                }
            }
            tokio::select! {
                () = self.shutdown.cancelled() => break,
                () = tokio::time::sleep(delay) => {}
            }
        }
        self.ctx.connection.connected_since.store(None);
        self.connected.send_replace(false);
    }

    /// One connection to the `url_idx`th root URL, from dial to its end. `Ok` only on
    /// shutdown.
    async fn session(&self, backoff: &mut Backoff, url_idx: usize) -> Result<(), ChannelError> {
        let (mut ws, token) = self.dial(url_idx).await?;
        let (heartbeat, evidence) = tokio::time::timeout(WELCOME_TIMEOUT, self.welcome(&mut ws))
            .await
            .map_err(|_| ChannelError::NoWelcome(WELCOME_TIMEOUT))??;

        let heartbeat = if heartbeat == 0 {
            DEFAULT_HEARTBEAT
        } else {
            Duration::from_millis(heartbeat.max(50))
        };
        backoff.reset();
        self.ctx
            .connection
            .connected_since
            .store(Some(Arc::new(mcp_shared::time::now())));
        self.connected.send_replace(true);
        tracing::info!(target_id = %self.ctx.config.target_id, heartbeat_ms = heartbeat.as_millis() as u64, "welcomed by root");

        self.serve(&mut ws, token, heartbeat, evidence).await
    }

    /// Dials the `url_idx`th root URL (the token rides in the upgrade request) and sends
    /// `hello`; returns the socket and the token it was opened with.
    async fn dial(&self, url_idx: usize) -> Result<(Socket, Arc<String>), ChannelError> {
        let urls = self
            .ctx
            .config
            .connect_urls()
            .map_err(|e| ChannelError::Config(e.to_string()))?;
        let url = urls
            .get(url_idx % urls.len().max(1))
            .cloned()
            .ok_or_else(|| ChannelError::Config("no root URL".into()))?;
        let ws_config = WebSocketConfig::default()
            .max_message_size(Some(MAX_FRAME_BYTES))
            .max_frame_size(Some(MAX_FRAME_BYTES));
        // The URL's scheme decides: `wss` is verified with the configured roots and pins and
        // never retried as `ws`.
        let connector = self
            .ctx
            .connection
            .tls
            .clone()
            .map(tokio_tungstenite::Connector::Rustls);
        // Root authenticates the hub before it upgrades: the token rides in the request.
        let token = self.ctx.connection.token.load_full();
        let request = upgrade_request(&url, &token)?;
        let (mut ws, _) = tokio_tungstenite::connect_async_tls_with_config(
            request,
            Some(ws_config),
            true,
            connector,
        )
        .await
        .map_err(|e| ChannelError::of_upgrade(&url, e))?;
        tracing::debug!(%url, "connected; sending hello");

        self.gate.set_token(&token);
        let features = if self.ctx.connection.plain_hello.load(Ordering::Relaxed) {
            Vec::new()
        } else {
            mcp_shared::protocol::announce(self.ctx.config.protocol_features.as_deref())
        };
        let hello = envelope(
            HubToRoot::Hello {
                protocol_version: PROTOCOL_VERSION,
                token: token.as_ref().clone(),
                descriptor: self.ctx.descriptor(),
                skills: self.ctx.skill_states(),
                features,
            },
            None,
        );
        if let Some(text) = encode(&hello) {
            ws.send(Message::text(text)).await?;
        }
        Ok((ws, token))
    }

    /// Waits for root's `welcome` (heartbeats are skipped; anything else refuses the
    /// connection) and takes root's clock from it; returns the announced heartbeat interval
    /// and how far root holds this hub's evidence (when root takes evidence).
    async fn welcome(
        &self,
        ws: &mut Socket,
    ) -> Result<(u64, Option<EvidenceCursor>), ChannelError> {
        loop {
            let Some(msg) = ws.next().await else {
                return Err(ChannelError::Closed);
            };
            let text = match msg? {
                Message::Text(t) => t,
                Message::Close(_) => return Err(ChannelError::Closed),
                Message::Binary(_) => {
                    return Err(ChannelError::UnexpectedBeforeWelcome(
                        "a binary frame".into(),
                    ));
                }
                _ => continue,
            };
            match decode::<RootToHub>(&text) {
                Ok(Envelope {
                    body:
                        RootToHub::Welcome {
                            target_id,
                            heartbeat_interval_ms,
                            root_time_ms,
                            max_clock_skew_ms,
                            features,
                            evidence,
                        },
                    ..
                }) => {
                    tracing::debug!(?features, "root's protocol features");
                    self.ctx
                        .connection
                        .root_features
                        .store(Arc::new(Features::announced(&features)));
                    if target_id != self.ctx.config.target_id {
                        tracing::warn!(configured = %self.ctx.config.target_id, %target_id, "root welcomed this hub under another target id");
                    }
                    self.ctx
                        .connection
                        .clock
                        .welcomed(root_time_ms, max_clock_skew_ms);
                    if let Err(e) = self.ctx.connection.clock.check() {
                        tracing::error!(message = %e.message, "this hub's clock is too far from root's; every call will be refused");
                    }
                    let root_takes = Features::announced(&features).has(feature::EVIDENCE);
                    return Ok((heartbeat_interval_ms, evidence.filter(|_| root_takes)));
                }
                Ok(Envelope {
                    body: RootToHub::ProtocolError { message },
                    ..
                }) => {
                    // A root of an earlier build refuses the `features` it does not know:
                    // greet it the way it knows from now on.
                    if message.contains("unknown field `features`") {
                        tracing::info!("root predates protocol features; hellos announce none");
                        self.ctx
                            .connection
                            .plain_hello
                            .store(true, Ordering::Relaxed);
                    }
                    return Err(ChannelError::Refused(message));
                }
                Ok(Envelope {
                    body: RootToHub::Heartbeat,
                    ..
                }) => {}
                Ok(other) => {
                    return Err(ChannelError::UnexpectedBeforeWelcome(format!(
                        "{:?}",
                        std::mem::discriminant(&other.body)
                    )));
                }
                Err(e) => return Err(ChannelError::Refused(format!("undecodable frame: {e}"))),
            }
        }
    }

    /// Serves a welcomed connection until it ends: root's frames, results queued by call
    /// tasks, surface and token changes, heartbeats (root silent for [`SILENCE_FACTOR`]
    /// intervals ends it), shutdown. Calls still in flight at the end are stopped.
    async fn serve(
        &self,
        ws: &mut Socket,
        token: Arc<String>,
        heartbeat: Duration,
        evidence: Option<EvidenceCursor>,
    ) -> Result<(), ChannelError> {
        let (out_tx, mut out_rx) = mpsc::channel::<Envelope<HubToRoot>>(OUTBOX);
        let mut calls: JoinSet<String> = JoinSet::new();
        // Each call's task, and whether it is a write under an idempotency key (see below).
        let mut in_flight: std::collections::HashMap<String, (AbortHandle, bool)> =
            std::collections::HashMap::new();
        let mut ticker =
            tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let silence = heartbeat * SILENCE_FACTOR;
        let mut last_heard = tokio::time::Instant::now();
        let mut pace = mcp_shared::protocol::HeartbeatPace::new(heartbeat);
        // Root's position in this hub's evidence log; `None`: root takes no evidence.
        let mut evidence = evidence;
        let mut evidence_changes = self.ctx.machine.profiles.evidence_changes();
        self.send_evidence(ws, &mut evidence).await?;

        let end = loop {
            tokio::select! {
                () = self.shutdown.cancelled() => {
                    let _ = ws.close(None).await;
                    break Ok(());
                }
                () = self.ctx.skill.surface_changed.notified() => {
                    // An adapter became unavailable (or available again): root re-reads the surface.
                    self.send(ws, envelope(HubToRoot::SurfaceChanged {
                        descriptor: self.ctx.descriptor(),
                        skills: self.ctx.skill_states(),
                    }, None)).await?;
                }
                Ok(()) = evidence_changes.changed(), if evidence.is_some() => {
                    self.send_evidence(ws, &mut evidence).await?;
                }
                () = self.ctx.connection.token_changed.notified() => {
                    if **self.ctx.connection.token.load() != *token {
                        let _ = ws.close(None).await;
                        break Err(ChannelError::TokenChanged);
                    }
                }
                msg = ws.next() => {
                    let Some(msg) = msg else { break Err(ChannelError::Closed) };
                    let msg = match msg {
                        Ok(m) => m,
                        Err(e) => break Err(e.into()),
                    };
                    last_heard = tokio::time::Instant::now();
                    let text = match msg {
                        Message::Text(t) => t,
                        Message::Close(_) => break Err(ChannelError::Closed),
                        Message::Binary(_) => {
                            tracing::warn!("binary frame from root");
                            self.send(ws, envelope(HubToRoot::ProtocolError {
                                message: "binary frames are not part of the protocol".into(),
                            }, None)).await?;
                            continue;
                        }
                        _ => continue,
                    };
                    let env = match decode::<RootToHub>(&text) {
                        Ok(env) => env,
                        Err(e) => {
                            let message = e.to_string();
                            tracing::warn!(%message, "undecodable frame from root");
                            self.send(ws, envelope(HubToRoot::ProtocolError { message }, raw_id(&text))).await?;
                            continue;
                        }
                    };
                    match env.body {
                        RootToHub::Call(call) => {
                            let call_id = call.call_id.clone();
                            let keyed = !call.body.dry_run && call.body.idempotency_key.is_some();
                            let task = calls.spawn(run_call(self.clone(), call, env.id, out_tx.clone()));
                            // A duplicate id is refused by the gate; keep the first task's handle.
                            in_flight.entry(call_id).or_insert((task, keyed));
                        }
                        RootToHub::Cancel { call_id } => {
                            if let Some((task, _)) = in_flight.remove(&call_id) {
                                tracing::debug!(%call_id, "call cancelled by root");
                                task.abort();
                            }
                        }
                        RootToHub::SkillCommand { skill, command } => {
                            for frame in self.skill_command(&skill, command, env.id).await {
                                self.send(ws, frame).await?;
                            }
                            // Enabled again: what changed meanwhile goes out now.
                            self.send_evidence(ws, &mut evidence).await?;
                        }
                        RootToHub::Heartbeat => {
                            if pace.answer_root() {
                                self.send(ws, envelope(HubToRoot::Heartbeat, None)).await?;
                            }
                        }
                        RootToHub::ProtocolError { message } => {
                            tracing::warn!(%message, in_reply_to = ?env.in_reply_to, "root reports a protocol error");
                        }
                        RootToHub::Welcome { .. } => {
                            tracing::warn!("second welcome on one connection; ignored");
                        }
                    }
                }
                // Results of calls that finished meanwhile go out with it: one flush, one
                // system call, for all of them.
                Some(frame) = out_rx.recv() => {
                    self.feed(ws, frame).await?;
                    while let Ok(frame) = out_rx.try_recv() {
                        self.feed(ws, frame).await?;
                    }
                    ws.flush().await?;
                }
                Some(done) = calls.join_next(), if !calls.is_empty() => {
                    if let Ok(call_id) = done {
                        in_flight.remove(&call_id);
                    }
                }
                _ = ticker.tick() => {
                    if last_heard.elapsed() > silence {
                        break Err(ChannelError::Silent(silence));
                    }
                    if pace.on_tick() {
                        self.send(ws, envelope(HubToRoot::Heartbeat, None)).await?;
                    }
                }
            }
        };
        // Calls still in flight stop (their guards stop the adapters), except writes under an
        // idempotency key (see the module's header).
        for (task, keyed) in in_flight.values() {
            if !keyed {
                task.abort();
            }
        }
        calls.detach_all();
        end
    }

    /// Sends root the evidence changed after `held` (root's position), while the skill is
    /// active (it publishes nothing otherwise), and moves `held` past it. A log root holds
    /// in another epoch, or ahead of this one (a restored state directory), is sent whole.
    async fn send_evidence(
        &self,
        ws: &mut Socket,
        held: &mut Option<EvidenceCursor>,
    ) -> Result<(), ChannelError> {
        let Some(cursor) = held.as_mut() else {
            return Ok(());
        };
        if !self.ctx.lifecycle().active() {
            return Ok(());
        }
        let profiles = &self.ctx.machine.profiles;
        let (epoch, latest, after) = match profiles.evidence_head() {
            Ok((epoch, latest)) if epoch == cursor.epoch && cursor.seq <= latest => {
                let after = cursor.seq;
                (epoch, latest, after)
            }
            Ok((epoch, latest)) => (epoch, latest, 0),
            Err(e) => {
                tracing::warn!(error = %e.message, "profiling index unreadable; no evidence sent");
                return Ok(());
            }
        };
        let changes = match profiles.evidence_after(after) {
            Ok((_, changes)) => changes,
            Err(e) => {
                tracing::warn!(error = %e.message, "profiling index unreadable; no evidence sent");
                return Ok(());
            }
        };
        let mut batches = crate::profiles::evidence_frames(&epoch, after, changes);
        if batches.is_empty() && cursor.epoch != epoch {
            // Root holds another epoch (or nothing): an empty batch tells it this log holds
            // nothing it lacks, so root knows the hub's evidence, empty as it is.
            batches.push(Evidence {
                epoch: epoch.clone(),
                after: 0,
                upto: latest,
                records: Vec::new(),
            });
        }
        for batch in batches {
            let upto = batch.upto;
            self.send(ws, envelope(HubToRoot::Evidence(batch), None))
                .await?;
            *cursor = EvidenceCursor {
                epoch: epoch.clone(),
                seq: upto,
            };
        }
        Ok(())
    }

    async fn send<S>(&self, ws: &mut S, frame: Envelope<HubToRoot>) -> Result<(), ChannelError>
    where
        S: futures::Sink<Message, Error = tokio_tungstenite::tungstenite::Error> + Unpin,
    {
        self.feed(ws, frame).await?;
        ws.flush().await?;
        Ok(())
    }

    /// [`Self::send`] without the flush: the frame waits in the socket's buffer for the next
    /// flush.
    async fn feed<S>(&self, ws: &mut S, frame: Envelope<HubToRoot>) -> Result<(), ChannelError>
    where
        S: futures::Sink<Message, Error = tokio_tungstenite::tungstenite::Error> + Unpin,
    {
        if let Some(text) = encode(&frame) {
            ws.feed(Message::text(text)).await?;
        }
        Ok(())
    }

    /// Applies a skill command; the frames to send (surface change first, then the reply).
    async fn skill_command(
        &self,
        skill: &str,
        command: SkillCommand,
        frame_id: String,
    ) -> Vec<Envelope<HubToRoot>> {
        match self.skill.command(skill, command).await {
            Ok(state) => {
                let mut frames = Vec::new();
                if command != SkillCommand::Status && skill == crate::skill::lifecycle::SKILL {
                    frames.push(envelope(
                        HubToRoot::SurfaceChanged {
                            descriptor: self.ctx.descriptor(),
                            skills: self.ctx.skill_states(),
                        },
                        None,
                    ));
                }
                frames.push(envelope(HubToRoot::SkillState(state), Some(frame_id)));
                frames
            }
            Err(message) => {
                tracing::error!(%skill, ?command, %message, "skill command failed");
                vec![envelope(
                    HubToRoot::ProtocolError {
                        message: format!("skill command failed: {message}"),
                    },
                    Some(frame_id),
                )]
            }
        }
    }
}

#[cfg(test)]
mod tests;
