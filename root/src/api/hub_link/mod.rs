//! `GET /v1/root/hubs/connect`: a hub's WebSocket on root. A hub is admitted at the door by
//! the token in its upgrade request ([`super::hub_door`]), says `hello` with the same token
//! and must register the target id and environment it was enrolled with. Each connection gets
//! one link actor (`hubs::link`); frames go through the versioned protocol in `mcp-shared`,
//! and a malformed frame is answered with a protocol error, never a crash. What the hub
//! reports of its skill goes to [`super::skill`], which pushes root's desired state to it at
//! each connection.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use mcp_shared::error::ErrorCode;
use mcp_shared::protocol::{
    self, Envelope, Evidence, HubToRoot, MAX_FRAME_BYTES, PROTOCOL_VERSION, RootToHub, SkillState,
    feature,
};
use mcp_shared::target::{ManagedTargetDescriptor, TargetStatus};
use mcp_shared::time::{now, unix_ms};
use ractor::Actor;
use tokio::sync::mpsc;

use crate::api::error::ApiError;
use crate::app::App;
use crate::hubs::link::{self, Link};
use crate::hubs::skill::SKILL;
use crate::hubs::timeline::LifecycleKind;
use crate::net::listener::ConnSlot;
use crate::net::tls::TlsPeer;

use crate::hubs::{OUTBOUND_QUEUE, evidence, router};

pub(crate) mod door;
pub(crate) mod frames;

/// Time a new connection has to send its `hello`.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether this root requires hub client certificates (`[tls] client_ca_file`).
fn requires_client_cert(app: &App) -> bool {
    app.config
        .tls
        .as_ref()
        .is_some_and(|t| t.client_ca_file.is_some())
}

/// `GET /v1/root/hubs/connect`: the hub's WebSocket, upgraded only for a request that
/// carries an enrolled hub token (see `hubs::door`) and, where root has a client CA, a client
/// certificate.
pub(crate) async fn connect(
    State(app): State<Arc<App>>,
    axum::Extension(hub_door): axum::Extension<Arc<door::HubDoor>>,
    peer: Option<axum::Extension<TlsPeer>>,
    remote: Option<axum::Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    conn: Option<axum::Extension<Arc<ConnSlot>>>,
    headers: axum::http::HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if requires_client_cert(&app)
        && peer
            .as_ref()
            .and_then(|p| p.client_certificate.as_ref())
            .is_none()
    {
        tracing::warn!("hub connection without a client certificate refused (mutual TLS)");
        return ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            "this root requires hubs to present a client certificate issued by its client CA",
        )
        .into_response();
    }
    let link_slot = match hub_door.link_slot(&app) {
        Ok(slot) => slot,
        Err(refusal) => return refusal.into_response(),
    };
    let admitted = match door::admit(&app, &hub_door, remote.map(|r| r.0.0.ip()), &headers).await {
        Ok(a) => a,
        Err(refusal) => return refusal.into_response(),
    };
    let client_certificate = peer.and_then(|p| p.0.client_certificate);
    // tungstenite reserves 128 KiB per connection for reading by default; hub frames are
    // small (a call, a result) and a larger one still arrives (the buffer is the read chunk,
    // not a frame limit), so a fleet of idle hubs costs far less memory with a few KiB.
    ws.max_message_size(MAX_FRAME_BYTES)
        .max_frame_size(MAX_FRAME_BYTES)
        .read_buffer_size(HUB_READ_BUFFER_BYTES)
        .on_upgrade(move |socket| async move {
            // From here the socket counts among the hub links, no longer among the client
            // connections.
            if let Some(conn) = conn {
                conn.0.release();
            }
            if let Err(e) = serve(app, socket, admitted, client_certificate).await {
                tracing::info!(error = %e, "hub connection ended");
            }
            drop(link_slot);
        })
}

/// Read buffer of a hub's WebSocket on root (tungstenite's default is 128 KiB): the chunk
/// each read takes, not a frame limit. Hub frames are mostly small (heartbeats, results);
/// a larger one takes several reads. At 16 KiB it was a quarter of what a connected hub cost
/// root (heaptrack over 2,000 simulated hubs).
const HUB_READ_BUFFER_BYTES: usize = 4 * 1024;

fn encode(body: RootToHub, in_reply_to: Option<String>) -> String {
    let env = Envelope {
        v: PROTOCOL_VERSION,
        id: uuid::Uuid::now_v7().to_string(),
        in_reply_to,
        body,
    };
    serde_json::to_string(&env).unwrap_or_default()
}

async fn refuse<T>(socket: &mut WebSocket, message: String) -> anyhow::Result<T> {
    tracing::warn!(%message, "refusing hub connection");
    let frame = encode(
        RootToHub::ProtocolError {
            message: message.clone(),
        },
        None,
    );
    frames::refuse(socket, frame, &message).await;
    anyhow::bail!(message)
}

/// Root's side of the heartbeat, for the whole fleet from one task: every
/// heartbeat interval, a heartbeat into each connected hub's outbox (a hub counts root as
/// gone after three silent intervals). One timer and one burst per interval instead of a
/// timer and two task wake-ups per hub spread over it (root's CPU with a fleet connected and
/// idle).
pub(crate) async fn beat(app: Arc<App>, stop: tokio_util::sync::CancellationToken) {
    let mut tick = tokio::time::interval(app.hubs.heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        for outbox in app.outboxes.iter() {
            // A full outbox has frames going out anyway; a closed one is being removed.
            let _ = outbox.value().try_send(encode(RootToHub::Heartbeat, None));
        }
    }
}

/// Writes when each connected hub was last heard from, every heartbeat interval, for all
/// hubs heard from since the last round in one transaction: a connection's reader never
/// waits for the store (a routed call's result was held behind this write once per interval)
/// and a fleet of hubs costs one commit per interval, not one per hub.
pub(crate) async fn record_last_seen(app: Arc<App>, stop: tokio_util::sync::CancellationToken) {
    let mut tick = tokio::time::interval(app.hubs.heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut since = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let round = std::time::Instant::now();
        let now_ms = unix_ms(now());
        let seen: Vec<(String, i64)> = app
            .hubs
            .last_frame
            .iter()
            .filter(|e| *e.value() >= since)
            .map(|e| {
                let ago = i64::try_from(e.value().elapsed().as_millis()).unwrap_or(i64::MAX);
                (e.key().clone(), now_ms.saturating_sub(ago))
            })
            .collect();
        match app.store.update_targets_seen(&seen).await {
            Ok(()) => since = round,
            Err(e) => {
                tracing::warn!(error = %e, hubs = seen.len(), "cannot record when hubs were last heard from; next round retries")
            }
        }
    }
}

/// Where a connection's surface changes go to the store: one task writes them in the order
/// the hub sent them (a later surface never overwritten by an earlier one, which other
/// replicas would then read back), and tells the other replicas after each. The task starts
/// with the first change (most connections never change their surface, and an idle task
/// and its channel cost every connected hub some 6 KiB) and ends when the connection drops
/// the writer.
struct SurfaceWrites {
    app: Arc<App>,
    target_id: String,
    sender: std::sync::OnceLock<mpsc::UnboundedSender<(Option<String>, Option<String>)>>,
}

impl SurfaceWrites {
    fn new(app: &Arc<App>, target_id: &str) -> SurfaceWrites {
        SurfaceWrites {
            app: app.clone(),
            target_id: target_id.to_owned(),
            sender: std::sync::OnceLock::new(),
        }
    }

    fn send(&self, descriptor: Option<String>, skills: Option<String>) {
        let sender = self.sender.get_or_init(|| {
            let (tx, mut rx) = mpsc::unbounded_channel::<(Option<String>, Option<String>)>();
            let (app, target_id) = (self.app.clone(), self.target_id.clone());
            tokio::spawn(async move {
                while let Some((descriptor, skills)) = rx.recv().await {
                    if let Err(e) = app
                        .store
                        .update_target_seen(
                            &target_id,
                            unix_ms(now()),
                            descriptor.as_deref(),
                            skills.as_deref(),
                        )
                        .await
                    {
                        tracing::warn!(%target_id, error = %e, "a surface change of the hub was not stored");
                    }
                    crate::replica::target_changed(&app, &target_id, false).await;
                }
            });
            tx
        });
        let _ = sender.send((descriptor, skills));
    }
}

/// A lifecycle event's detail: what the target publishes.
fn surface_detail(d: &ManagedTargetDescriptor) -> String {
    let s = &d.operational_surface;
    format!(
        "{} publishes {} tools ({})",
        s.published_by,
        s.capabilities.len(),
        if s.enabled { "enabled" } else { "disabled" }
    )
}

/// Publishes a target's descriptor and tells MCP sessions bound to it that their tool list
/// may have changed.
fn publish(app: &App, descriptor: ManagedTargetDescriptor) {
    let target_id = descriptor.target_id.clone();
    app.hubs.targets.insert(target_id.clone(), descriptor);
    app.hubs.surface_changed(&target_id);
}

/// Whether hub client certificates must name their target (`[tls]
/// bind_client_cert_to_target`).
fn binds_client_cert(app: &App) -> bool {
    app.config
        .tls
        .as_ref()
        .is_some_and(|t| t.client_ca_file.is_some() && t.bind_client_cert_to_target)
}

/// A hub whose hello was accepted: what it registered and the enrolment it speaks for.
struct Greeted {
    hello_id: String,
    /// What the hub announced it understands (nothing: a hub of an earlier build).
    features: Vec<String>,
    descriptor: ManagedTargetDescriptor,
    skills: Vec<mcp_shared::protocol::SkillState>,
    enrolment: crate::hubs::Enrolment,
    signing_key: [u8; 32],
    /// The hash of the token the connection was opened and greeted with.
    token_hash: String,
}

async fn serve(
    app: Arc<App>,
    mut socket: WebSocket,
    admitted: door::Admitted,
    client_certificate: Option<rustls::pki_types::CertificateDer<'static>>,
) -> anyhow::Result<()> {
    // Each step before and after the relay is boxed: a connection's task is as large as
    // its largest step (it is allocated once, at the upgrade), and only the relay lasts; the
    // setup and teardown futures (store writes, the actor's start) would otherwise make every
    // connected hub carry their room (root's memory per hub; BENCHMARKS.md).
    let greeted = Box::pin(greet(&app, &mut socket, admitted, client_certificate)).await?;
    let target_id = greeted.enrolment.row.target_id.clone();
    let subnet_id = greeted.enrolment.row.subnet_id.clone();
    let (out_tx, out_rx) = mpsc::channel::<String>(OUTBOUND_QUEUE);
    let intake = Box::pin(open_intake(&app, &greeted)).await;
    let cursor = intake.as_ref().map(|(_, c)| c.clone());
    let (session, session_done, connection_id) =
        Box::pin(open_link(&app, &greeted, &out_tx, cursor)).await?;
    app.outboxes.insert(target_id.clone(), out_tx.clone());
    let evidence = intake.map(|(intake, _)| take_evidence(intake));
    let (sink, stream) = socket.split();
    let (tell_writer, closing_rx) = tokio::sync::oneshot::channel();
    let writer = tokio::spawn(frames::write(sink, out_rx, closing_rx));
    let closing = relay(
        &app,
        &greeted,
        stream,
        &out_tx,
        &session,
        session_done,
        evidence.as_ref(),
    )
    .await;
    // The intake stores what is queued, then records when root's copy was last complete.
    drop(evidence);
    tracing::info!(%target_id, "hub disconnected");
    app.hubs.timeline.record(
        &target_id,
        &subnet_id,
        LifecycleKind::Disconnected,
        "the hub's connection ended".into(),
    );
    // Its session may have left the map already (the link supervisor detaches a session
    // that stopped: a retired or moved target's, a failed one): then it was the newest
    // unless another connection attached since.
    let newest = router::detach(&app.hubs.links, &target_id, session.get_id())
        || !app.hubs.links.contains_key(&target_id);
    session.stop(Some("connection closed".into()));
    // Its writer ends once every sender is gone, the fleet's heartbeat's included.
    app.outboxes
        .remove_if(&target_id, |_, outbox| outbox.same_channel(&out_tx));
    drop(out_tx);
    Box::pin(frames::finish(writer, tell_writer, closing)).await;
    // Only the newest connection of a target may mark it offline: an older one that a
    // reconnect replaced ends here too.
    if newest {
        // Decided under the target's entry: a reconnect attaches its link before it
        // publishes its surface (which takes this entry), so a link present here means the
        // hub is connected again, and a link attached after this check is published after
        // it. (Writing offline unconditionally here, after the awaits above, could overwrite
        // a reconnect's online: the governance model found root showing a connected hub
        // offline after a key rotation.)
        if let Some(mut d) = app.hubs.targets.get_mut(&target_id)
            && !app.hubs.links.contains_key(&target_id)
        {
            d.status = TargetStatus::Offline;
        }
        app.hubs.surface_changed(&target_id);
    }
    let _ = Box::pin(
        app.store
            .update_target_seen(&target_id, unix_ms(now()), None, None),
    )
    .await;
    Box::pin(crate::replica::hub_disconnected(
        &app,
        &target_id,
        &connection_id,
    ))
    .await;
    Ok(())
}

/// Reads the hub's hello and checks it against the connection the door admitted: the same
/// token, the protocol version, the enrolled target and environment, and (where root binds
/// them) a client certificate issued for that target. Anything else is refused.
async fn greet(
    app: &App,
    socket: &mut WebSocket,
    admitted: door::Admitted,
    client_certificate: Option<rustls::pki_types::CertificateDer<'static>>,
) -> anyhow::Result<Greeted> {
    let first = match tokio::time::timeout(HELLO_TIMEOUT, socket.recv()).await {
        Ok(Some(Ok(Message::Text(t)))) => t,
        Ok(Some(Ok(_))) => {
            return refuse(socket, "the first frame must be a text hello".into()).await;
        }
        Ok(Some(Err(e))) => {
            let closing = frames::Closing::read_error(&e);
            tracing::warn!(reason = %closing.reason, "hub connection refused: its first frame cannot be read");
            let _ = socket.send(closing.frame()).await;
            anyhow::bail!("first frame unreadable: {}", closing.reason)
        }
        Ok(None) => anyhow::bail!("closed before hello"),
        Err(_) => return refuse(socket, "no hello within 10 s".into()).await,
    };
    let hello = match protocol::decode::<HubToRoot>(first.as_str()) {
        Ok(env) => env,
        Err(e) => return refuse(socket, e.to_string()).await,
    };
    let HubToRoot::Hello {
        protocol_version,
        token,
        mut descriptor,
        skills,
        features,
    } = hello.body
    else {
        return refuse(socket, "the first frame must be hello".into()).await;
    };
    if protocol_version != PROTOCOL_VERSION {
        return refuse(
            socket,
            format!("unsupported protocol version {protocol_version}"),
        )
        .await;
    }
    // The hello speaks for the connection the door admitted: the same token.
    let hash = crate::auth::token_hash(&token);
    drop(token);
    if !crate::auth::secret_eq(&admitted.token_hash, &hash) {
        return refuse(
            socket,
            "the hello's token is not the one this connection was opened with".into(),
        )
        .await;
    }
    let door::Admitted {
        enrolment,
        signing_key,
        ..
    } = admitted;
    if !crate::auth::secret_eq(&enrolment.row.token_hash, &hash) {
        tracing::warn!(target_id = %enrolment.row.target_id, "hub connected with its previous token (rotation grace period)");
    }
    let target_id = enrolment.row.target_id.clone();
    if descriptor.target_id != target_id {
        return refuse(
            socket,
            format!(
                "this token is enrolled for `{target_id}`, not `{}`",
                descriptor.target_id
            ),
        )
        .await;
    }
    if descriptor.environment != enrolment.row.environment {
        return refuse(
            socket,
            format!(
                "`{target_id}` is enrolled in environment `{}`, not `{}`",
                enrolment.row.environment, descriptor.environment
            ),
        )
        .await;
    }
    if binds_client_cert(app) {
        // `connect` let no hub without a certificate this far.
        let der = client_certificate.as_ref().map_or(&[][..], |c| c.as_ref());
        if let Err(e) = crate::hubs::identity::check(der, &target_id) {
            tracing::warn!(
                %target_id,
                certificate = %crate::net::tls::fingerprint(&rustls::pki_types::CertificateDer::from(der)),
                error = %e,
                "hub client certificate not bound to its target; refused"
            );
            return refuse(socket, e.to_string()).await;
        }
    }
    descriptor.status = TargetStatus::Online;
    Ok(Greeted {
        hello_id: hello.id,
        features,
        descriptor,
        skills,
        enrolment,
        signing_key,
        token_hash: hash,
    })
}

/// Whether `feature` is understood on both sides: announced by the hub (`announced`) and by
/// this root (its `protocol_features`, a test's older root).
fn understood(app: &App, announced: &[String], feature: &str) -> bool {
    mcp_shared::protocol::Features::announced(announced).has(feature)
        && mcp_shared::protocol::announce(app.config.protocol_features.as_deref())
            .iter()
            .any(|f| f == feature)
}

/// The evidence intake of a hub that announced the `evidence` feature (when this root takes
/// it), and how far root holds the hub's evidence (`welcome` tells it). A store that cannot
/// say leaves the connection without evidence: the hub sends it on a later one.
async fn open_intake(
    app: &App,
    greeted: &Greeted,
) -> Option<(evidence::Intake, mcp_shared::profiling::EvidenceCursor)> {
    if !understood(app, &greeted.features, feature::EVIDENCE) {
        return None;
    }
    let target_id = &greeted.enrolment.row.target_id;
    match evidence::Intake::open(app.store.clone(), target_id, app.hubs.evidence.clone()).await {
        Ok(opened) => Some(opened),
        Err(e) => {
            tracing::warn!(%target_id, error = %e, "cannot read how far root holds the hub's evidence; none taken on this connection");
            None
        }
    }
}

/// Stores a connection's evidence batches in the order the hub sent them, on a task of its
/// own (the connection never waits for the store); when the connection drops the sender,
/// records that root's copy was complete until then.
fn take_evidence(mut intake: evidence::Intake) -> mpsc::UnboundedSender<Evidence> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Evidence>();
    tokio::spawn(async move {
        while let Some(batch) = rx.recv().await {
            let (records, upto) = (batch.records.len(), batch.upto);
            // Boxed: a store call's future is large, and an idle connection should not
            // carry its room (root's memory per connected hub).
            match Box::pin(intake.take(batch)).await {
                evidence::Taken::Stored { kept, refused } => {
                    tracing::debug!(target_id = %intake.target_id(), kept, upto, "hub evidence stored");
                    for why in refused {
                        tracing::warn!(target_id = %intake.target_id(), %why, "hub evidence record refused");
                    }
                }
                evidence::Taken::Gap { held, after } => {
                    tracing::warn!(target_id = %intake.target_id(), ?held, after, records, "hub evidence batch does not continue what root holds; not stored (the hub sends it again on its next connection)");
                }
                evidence::Taken::Failed(why) => {
                    tracing::error!(target_id = %intake.target_id(), %why, "hub evidence not stored; taken again on the hub's next connection");
                }
            }
        }
        Box::pin(intake.close()).await;
    });
    tx
}

/// Starts the connection's link (router session), stores and publishes what the hub
/// registered, attaches the link so calls reach it, welcomes the hub (with how far root holds
/// its evidence, for a hub that sends it) and pushes root's desired skill state to it.
/// Returns the link, its end and this connection's id.
async fn open_link(
    app: &Arc<App>,
    greeted: &Greeted,
    out_tx: &mpsc::Sender<String>,
    evidence: Option<mcp_shared::profiling::EvidenceCursor>,
) -> anyhow::Result<(
    ractor::ActorRef<link::Msg>,
    ractor::concurrency::JoinHandle<()>,
    String,
)> {
    let target_id = greeted.enrolment.row.target_id.clone();
    let subnet_id = greeted.enrolment.row.subnet_id.clone();
    let (descriptor, skills) = (greeted.descriptor.clone(), &greeted.skills);
    let session_args = link::Args {
        target_id: target_id.clone(),
        signing_key: greeted.signing_key,
        outbound: out_tx.clone(),
        on_surface: on_surface(app, &target_id, &subnet_id),
        traceparent: understood(app, &greeted.features, feature::CALL_TRACEPARENT),
    };
    // Linked under the link supervisor (not the router, whose failure must drop no link): a
    // session that fails leaves the map, and this connection closes so the hub dials again
    // (a new session, state rebuilt from its hello).
    let parent = app.actors.links.load().get_cell();
    let (session, session_done) = Actor::spawn_linked(None, Link, session_args, parent).await?;
    // Stored, reported and attached as one step with respect to a replica's reload of the
    // target (which reads the store and takes the report of a hub connected here): a reload
    // between the store and the attach would take this report as the previous one, and the
    // skill update it is would go unrecorded.
    let writes = crate::replica::enrolment_write(app).await;
    app.store
        .update_target_seen(
            &target_id,
            unix_ms(now()),
            serde_json::to_string(&descriptor).ok().as_deref(),
            serde_json::to_string(skills).ok().as_deref(),
        )
        .await?;
    skill_reported(app, &target_id, skills);
    router::attach(&app.hubs.links, target_id.clone(), session.clone());
    drop(writes);
    app.metrics.targets.connected_now(&target_id);
    // Other replicas forward this target's calls here from now on.
    let connection_id = uuid::Uuid::now_v7().to_string();
    crate::replica::hub_connected(app, &target_id, &connection_id).await;
    app.hubs.timeline.record(
        &target_id,
        &subnet_id,
        LifecycleKind::Connected,
        surface_detail(&descriptor),
    );
    publish(app, descriptor);
    let _ = out_tx
        .send(encode(
            RootToHub::Welcome {
                target_id: target_id.clone(),
                heartbeat_interval_ms: app.hubs.heartbeat.as_millis() as u64,
                root_time_ms: Some(unix_ms(now())),
                max_clock_skew_ms: Some(app.config.limits.max_hub_clock_skew_ms),
                // A hub that announced nothing is of an earlier build: it knows no `features`.
                features: if greeted.features.is_empty() {
                    Vec::new()
                } else {
                    mcp_shared::protocol::announce(app.config.protocol_features.as_deref())
                },
                evidence,
            },
            Some(greeted.hello_id.clone()),
        ))
        .await;
    tracing::info!(%target_id, features = ?greeted.features, "hub connected");
    // The hub follows root's desired state of its skill from the start of each connection.
    {
        let (app, target_id) = (app.clone(), target_id.clone());
        tokio::spawn(async move {
            if let crate::hubs::push::Pushed::Failed(why) =
                crate::replica::forward::push_skill(&app, &target_id, None).await
            {
                tracing::warn!(%target_id, %why, "the hub did not take root's desired skill state");
            }
        });
    }

    Ok((session, session_done, connection_id))
}

/// Takes what a connected hub reports of its skills into its gate; an update of the skill
/// or an owner's switch is recorded in the audit trail (as the hub's own action).
fn skill_reported(app: &Arc<App>, target_id: &str, skills: &[SkillState]) {
    for change in app.hubs.skill_reported(target_id, skills) {
        let (app, target_id) = (app.clone(), target_id.to_owned());
        tokio::spawn(async move {
            let action = crate::audit::Recorded {
                surface: mcp_shared::event::Surface::Hub,
                actor: format!("target:{target_id}"),
                tool_id: change.tool_id.into(),
                target_id: Some(&target_id),
                adapter: Some(format!("hub.skill:{SKILL}")),
                started_at: now(),
                request: change.request,
                trace_id: None,
            };
            if let Err(e) = crate::ops::audited::record(&app, action, Ok(change.summary)).await {
                tracing::error!(%target_id, error = ?e, "a skill change of the hub was not recorded");
            }
        });
    }
}

/// What the link does with a hub's `surface_changed`: the gate takes the skill report, the
/// timeline and the store record it (in order), and the directory publishes the descriptor.
fn on_surface(app: &Arc<App>, target_id: &str, subnet_id: &str) -> link::OnSurface {
    let surface_writes = SurfaceWrites::new(app, target_id);
    let surface_app = app.clone();
    let surface_target = target_id.to_owned();
    let surface_subnet = subnet_id.to_owned();
    Box::new(move |body| {
        if let HubToRoot::SurfaceChanged {
            mut descriptor,
            skills,
        } = body
        {
            if descriptor.target_id != surface_target {
                tracing::warn!(target_id = %surface_target, "surface_changed for another target ignored");
                return;
            }
            descriptor.status = TargetStatus::Online;
            skill_reported(&surface_app, &surface_target, &skills);
            surface_app.hubs.timeline.record(
                &surface_target,
                &surface_subnet,
                LifecycleKind::SurfaceChanged,
                surface_detail(&descriptor),
            );
            surface_writes.send(
                serde_json::to_string(&descriptor).ok(),
                serde_json::to_string(&skills).ok(),
            );
            publish(&surface_app, descriptor);
        }
    })
}

/// Relays the hub's frames to its link until the connection ends (the hub leaves, falls
/// silent for three heartbeats, sends what cannot be read, outlives its rotated token, or
/// root shuts down); root's heartbeats go out meanwhile. How the connection is to close.
async fn relay(
    app: &App,
    greeted: &Greeted,
    mut stream: futures::stream::SplitStream<WebSocket>,
    out_tx: &mpsc::Sender<String>,
    session: &ractor::ActorRef<link::Msg>,
    session_done: ractor::concurrency::JoinHandle<()>,
    evidence: Option<&mpsc::UnboundedSender<Evidence>>,
) -> frames::Closing {
    let target_id = &greeted.enrolment.row.target_id;
    let environment = &greeted.enrolment.row.environment;
    let hash = &greeted.token_hash;
    let mut session_done = std::pin::pin!(session_done);
    let mut closing = frames::Closing::normal();
    // Root's side of the heartbeat is `beat`'s, for the whole fleet.
    let mut last_heard = tokio::time::Instant::now();
    loop {
        let next = tokio::select! {
            _ = app.shutdown.cancelled() => {
                closing = frames::Closing::away("root is shutting down");
                break;
            }
            _ = &mut session_done => {
                if app.hubs.enrolments.get(target_id).is_some_and(|e| e.retired()) {
                    tracing::info!(%target_id, "target retired; closing its hub connection");
                    closing = frames::Closing::policy("this target is retired");
                } else {
                    tracing::warn!(%target_id, "the connection's router session ended; closing so the hub dials again");
                    closing = frames::Closing::away("root's session for this hub ended; dial again");
                }
                break;
            }
            () = tokio::time::sleep_until(last_heard + app.hubs.heartbeat * 3) => {
                tracing::warn!(%target_id, "hub silent for three heartbeat intervals; dropping it");
                closing = frames::Closing::policy("no frame for three heartbeat intervals");
                break;
            }
            next = stream.next() => next,
        };
        last_heard = tokio::time::Instant::now();
        let msg = match next {
            None => break,
            Some(Err(e)) => {
                closing = frames::Closing::read_error(&e);
                if frames::Closing::is_gone(&e) {
                    tracing::info!(%target_id, reason = %closing.reason, "hub connection reset");
                } else {
                    tracing::warn!(%target_id, reason = %closing.reason, "unreadable frame from hub; closing");
                }
                break;
            }
            Some(Ok(m)) => m,
        };
        // A rotated-out token works only until its grace period ends.
        let valid = app
            .hubs
            .enrolments
            .get(target_id)
            .is_some_and(|e| !e.retired() && e.key_for(hash, unix_ms(now())).is_some());
        if !valid {
            tracing::warn!(%target_id, "the hub's token was rotated out and its grace period ended; dropping the connection");
            let _ = out_tx.try_send(encode(
                RootToHub::ProtocolError {
                    message: "this hub token is no longer valid (rotated, or its target retired)"
                        .into(),
                },
                None,
            ));
            closing = frames::Closing::policy(
                "this hub token is no longer valid (rotated, or its target retired)",
            );
            break;
        }
        match msg {
            Message::Text(text) => match protocol::decode_from_hub(text.as_str()) {
                Ok(env) => {
                    // Nothing a hub says may widen its enrolment (target, environment).
                    if let Err(claim) = frames::check_claims(&env.body, target_id, environment) {
                        tracing::warn!(%target_id, message = %claim, "frame claiming beyond the enrolment refused");
                        let message = claim.to_string();
                        let _ = out_tx
                            .try_send(encode(RootToHub::ProtocolError { message }, Some(env.id)));
                        continue;
                    }
                    // Written to the store for the whole fleet at once (`record_last_seen`);
                    // updated in place (a fleet's heartbeats allocate no key).
                    match app.hubs.last_frame.get_mut(target_id) {
                        Some(mut seen) => *seen = std::time::Instant::now(),
                        None => {
                            app.hubs
                                .last_frame
                                .insert(target_id.clone(), std::time::Instant::now());
                        }
                    }
                    // A heartbeat has done its work (the hub was heard); the link has
                    // nothing to do with it.
                    if matches!(env.body, HubToRoot::Heartbeat) {
                        continue;
                    }
                    // Evidence goes to the intake, never through the link (calls' path).
                    let env = match (env.body, evidence) {
                        (HubToRoot::Evidence(batch), Some(intake)) => {
                            let _ = intake.send(batch);
                            continue;
                        }
                        (HubToRoot::Evidence(_), None) => {
                            let message = "this root takes no evidence on this connection (feature `evidence` not agreed)".to_owned();
                            let _ = out_tx.try_send(encode(
                                RootToHub::ProtocolError { message },
                                Some(env.id),
                            ));
                            continue;
                        }
                        (body, _) => Envelope { body, ..env },
                    };
                    if session
                        .send_message(link::Msg::Frame(Box::new(env)))
                        .is_err()
                    {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(%target_id, error = %e, "malformed frame from hub");
                    let message = e.to_string();
                    let _ = out_tx.try_send(encode(RootToHub::ProtocolError { message }, None));
                }
            },
            Message::Binary(_) => {
                let _ = out_tx.try_send(encode(
                    RootToHub::ProtocolError {
                        message: "binary frames are not part of the protocol".into(),
                    },
                    None,
                ));
            }
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) => {}
        }
    }
    closing
}
