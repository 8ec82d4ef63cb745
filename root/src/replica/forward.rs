//! Forwarding between replicas: the client side (a routed call, a cancel or a skill command
//! for a hub another replica holds; a push of the desired skill state, wherever the hub is)
//! and the owner's endpoint `POST /v1/root/internal/route`.
//!
//! The forwarding replica has already done everything the governed call path does before
//! routing (policy, argument validation, concurrency slots) and writes the call's one audit
//! event itself; the owner re-checks only what it alone knows first-hand (that it holds the
//! hub and that the hub publishes the tool through an enabled skill), signs the call for its
//! hub and relays the outcome. The deadline travels as the time left (`remaining_ms`), so the
//! replicas' clocks are never compared; past it the forwarding replica answers `timeout` and
//! tells the owner to cancel, and the owner cancels the hub call by itself at the same point.
//! With OpenTelemetry on, the forward carries the route span's W3C `traceparent` header and
//! the owner's `forwarded call` span continues it, so one call stays one trace.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::{CallOutcome, SkillCommand, SkillState};
use mcp_shared::replica::{REPLICA_PROTOCOL_VERSION, ReplicaAnswer, ReplicaCall, ReplicaEnvelope};
use mcp_shared::time::{now, unix_ms};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{Owner, Zone, credential};

/// The W3C trace-context header a forward carries.
const TRACEPARENT: &str = "traceparent";
use crate::actors::RPC_TIMEOUT_MS;
use crate::app::App;
use crate::hubs::push::Pushed;
use crate::hubs::router;
use crate::hubs::skill::SKILL;
use crate::net::answer::Refused;

/// The internal endpoint's path.
pub(crate) const ROUTE_PATH: &str = "/v1/root/internal/route";
/// Extra time a forwarded call gets on the wire beyond its own deadline (the owner answers
/// `timeout` itself at the deadline; this only covers the answer's way back).
const WIRE_SLACK: Duration = Duration::from_millis(250);
/// Added to a credential's lifetime for clock differences between replicas.
const CLOCK_SLACK: Duration = Duration::from_secs(30);
/// Accepted credentials remembered before expired ones are swept.
const SEEN_SWEEP_AT: usize = 10_000;

/// Why a request to another replica failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ForwardError {
    #[error("replica `{replica}` at {url} is unreachable: {source}")]
    Unreachable {
        replica: String,
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("replica `{replica}` refused the request ({status}): {message}")]
    Refused {
        replica: String,
        status: u16,
        message: String,
    },
    #[error("replica `{replica}` sent an answer this build cannot read: {detail}")]
    BadAnswer { replica: String, detail: String },
    /// The TLS handshake with the peer failed (its certificate is not trusted by
    /// `replica.ca_file` or the system roots, names another host, has expired, ...).
    #[error(
        "replica `{replica}` at {url} failed TLS verification: {detail} (check replica.ca_file \
         and the peer's certificate)"
    )]
    Tls {
        replica: String,
        url: String,
        detail: String,
    },
    /// This replica serves TLS and the peer advertises plain HTTP.
    #[error(
        "replica `{replica}` advertises plain {url}, and this replica serves TLS: forwarding \
         there is refused unless replica.insecure_http_peers = true"
    )]
    PlaintextPeer { replica: String, url: String },
}

impl Zone {
    /// Sends one request to `owner`; the credential lives as long as the request may take.
    /// A routed call's `traceparent` (OpenTelemetry on) rides in the W3C header, which a
    /// replica of an earlier build ignores: the owner continues the trace.
    async fn send(
        &self,
        owner: &Owner,
        call: ReplicaCall,
        budget: Duration,
        traceparent: Option<&str>,
    ) -> Result<ReplicaAnswer, ForwardError> {
        let body = serde_json::to_vec(&ReplicaEnvelope {
            v: REPLICA_PROTOCOL_VERSION,
            body: call,
        })
        .unwrap_or_default();
        // Slack for the replicas' clocks (they may disagree by up to this much).
        let lifetime =
            (budget + CLOCK_SLACK).min(Duration::from_millis(credential::MAX_LIFETIME_MS as u64));
        let expires_ms = unix_ms(now()) + lifetime.as_millis() as i64;
        let cred = credential::mint(
            &self.key,
            &self.replica_id,
            &owner.replica_id,
            expires_ms,
            &body,
        );
        if self.requires_tls_peers && !owner.advertise_url.starts_with("https://") {
            return Err(ForwardError::PlaintextPeer {
                replica: owner.replica_id.clone(),
                url: owner.advertise_url.clone(),
            });
        }
        let url = format!("{}{ROUTE_PATH}", owner.advertise_url);
        let unreachable =
            |source: reqwest::Error| match crate::net::tls_client::tls_failure(&source) {
                Some(detail) => ForwardError::Tls {
                    replica: owner.replica_id.clone(),
                    url: owner.advertise_url.clone(),
                    detail,
                },
                None => ForwardError::Unreachable {
                    replica: owner.replica_id.clone(),
                    url: owner.advertise_url.clone(),
                    source,
                },
            };
        let mut request = self.http.post(&url);
        if let Some(tp) = traceparent {
            request = request.header(TRACEPARENT, tp);
        }
        let res = request
            .header(
                header::AUTHORIZATION,
                format!("{} {cred}", credential::SCHEME),
            )
            .header(header::CONTENT_TYPE, "application/json")
            .timeout(budget + WIRE_SLACK)
            .body(body)
            .send()
            .await
            .map_err(unreachable)?;
        let status = res.status();
        let bytes = res.bytes().await.map_err(unreachable)?;
        if !status.is_success() {
            let message = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                .unwrap_or_else(|| String::from_utf8_lossy(&bytes).chars().take(200).collect());
            return Err(ForwardError::Refused {
                replica: owner.replica_id.clone(),
                status: status.as_u16(),
                message,
            });
        }
        let env: ReplicaEnvelope<ReplicaAnswer> =
            serde_json::from_slice(&bytes).map_err(|e| ForwardError::BadAnswer {
                replica: owner.replica_id.clone(),
                detail: e.to_string(),
            })?;
        if env.v != REPLICA_PROTOCOL_VERSION {
            return Err(ForwardError::BadAnswer {
                replica: owner.replica_id.clone(),
                detail: format!("channel version {}", env.v),
            });
        }
        Ok(env.body)
    }

    /// A failed forward as the caller sees it: the owner gone is `target_offline` (the hub
    /// reconnects to a live replica), anything else an internal failure.
    fn failed(&self, target_id: &str, e: ForwardError) -> ToolError {
        match e {
            ForwardError::Unreachable { .. } => {
                self.forget_owner(target_id);
                tracing::warn!(%target_id, error = %e, "forward failed");
                ToolError::new(
                    ErrorCode::TargetOffline,
                    format!(
                        "target `{target_id}`'s hub is held by a replica that does not answer; retry once the hub has reconnected"
                    ),
                )
            }
            ForwardError::Tls { ref detail, .. } => {
                let message = format!(
                    "the replica holding target `{target_id}`'s hub failed TLS verification \
                     ({detail}), so the call was not forwarded; the operator must fix the \
                     replicas' certificates or replica.ca_file (see the root's log)"
                );
                tracing::error!(%target_id, error = %e, "forward refused");
                ToolError::new(ErrorCode::Internal, message)
            }
            ForwardError::PlaintextPeer { .. } => {
                tracing::error!(%target_id, error = %e, "forward refused");
                ToolError::new(
                    ErrorCode::Internal,
                    format!(
                        "the replica holding target `{target_id}`'s hub advertises plain HTTP \
                         and this replica serves TLS, so the call was not forwarded unencrypted; \
                         the operator must give that replica [tls] or set \
                         replica.insecure_http_peers (see the root's log)"
                    ),
                )
            }
            e => {
                tracing::error!(%target_id, error = %e, "forward failed");
                ToolError::new(
                    ErrorCode::Internal,
                    "the replica holding the target's hub refused the forwarded request; see the root's log",
                )
            }
        }
    }
}

/// Forwards a routed call to the replica holding its hub and waits for the outcome until
/// `timeout`; past it, or when `cancel` fires, the owner is told to cancel. Returns the hub
/// adapter that ran (if one did) with the outcome, like a local route.
pub(crate) async fn route(
    zone: &Arc<Zone>,
    owner: &Owner,
    call: router::RoutedCall,
    timeout: Duration,
    cancel: Option<&CancellationToken>,
) -> CallOutcome {
    let target_id = call.target_id.clone();
    let call_id = call.call_id.clone();
    let tool_id = call.tool_id.clone();
    let traceparent = call.traceparent.clone();
    let request = ReplicaCall::Route {
        target_id: call.target_id,
        call_id: call.call_id,
        trace_id: call.trace_id,
        session_id: call.session_id,
        tool_id: call.tool_id,
        capability: call.capability,
        body: call.body,
        remaining_ms: timeout.as_millis() as u64,
    };
    let cancelled = async {
        match cancel {
            Some(ct) => ct.cancelled().await,
            None => std::future::pending().await,
        }
    };
    let sent = zone.send(owner, request, timeout, traceparent.as_deref());
    let answer = tokio::select! {
        a = tokio::time::timeout(timeout + WIRE_SLACK, sent) => a,
        () = cancelled => {
            cancel_on_owner(zone, owner, &target_id, &call_id);
            return CallOutcome::failed(ToolError::new(ErrorCode::Cancelled, format!("the client cancelled `{tool_id}`; the target was told to stop")));
        }
    };
    match answer {
        Ok(Ok(ReplicaAnswer::Routed { outcome })) => outcome,
        Ok(Ok(ReplicaAnswer::Refused { error })) => {
            if error.code == ErrorCode::TargetOffline {
                zone.forget_owner(&target_id);
            }
            CallOutcome::failed(error)
        }
        Ok(Ok(other)) => CallOutcome::failed(zone.failed(
            &target_id,
            ForwardError::BadAnswer {
                replica: owner.replica_id.clone(),
                detail: format!("unexpected answer {other:?} to a route"),
            },
        )),
        Ok(Err(ForwardError::Unreachable { source, .. })) if source.is_timeout() => {
            cancel_on_owner(zone, owner, &target_id, &call_id);
            CallOutcome::failed(timed_out(&tool_id, timeout))
        }
        Ok(Err(e)) => CallOutcome::failed(zone.failed(&target_id, e)),
        Err(_) => {
            cancel_on_owner(zone, owner, &target_id, &call_id);
            CallOutcome::failed(timed_out(&tool_id, timeout))
        }
    }
}

fn timed_out(tool_id: &str, timeout: Duration) -> ToolError {
    ToolError::new(
        ErrorCode::Timeout,
        format!(
            "`{tool_id}` did not answer within {} ms; the target was told to cancel",
            timeout.as_millis()
        ),
    )
}

/// Tells the owner to cancel a forwarded call, without waiting.
fn cancel_on_owner(zone: &Arc<Zone>, owner: &Owner, target_id: &str, call_id: &str) {
    let (zone, owner) = (zone.clone(), owner.clone());
    let request = ReplicaCall::Cancel {
        target_id: target_id.to_owned(),
        call_id: call_id.to_owned(),
    };
    tokio::spawn(async move {
        if let Err(e) = zone
            .send(&owner, request, Duration::from_secs(2), None)
            .await
        {
            tracing::debug!(error = %e, "cancel of a forwarded call not delivered");
        }
    });
}

/// Brings `target_id`'s hub to root's desired skill state ([`Hubs::push_skill`]), through
/// this replica's link or the replica holding the hub.
///
/// [`Hubs::push_skill`]: crate::hubs::Hubs::push_skill
pub(crate) async fn push_skill(app: &App, target_id: &str, also: Option<SkillCommand>) -> Pushed {
    let reachable = async {
        app.hubs.connected(target_id)
            || match &app.zone {
                Some(z) => z.owner_of(target_id).await.is_some(),
                None => false,
            }
    };
    let send = |command| skill_command(app, target_id, SKILL, command);
    app.hubs.push_skill(target_id, also, reachable, send).await
}

/// An operator's skill command for `target_id`: run by the router when this replica holds the
/// hub (or is the only replica), else forwarded to the replica that does.
pub(crate) async fn skill_command(
    app: &App,
    target_id: &str,
    skill: &str,
    command: SkillCommand,
) -> Result<SkillState, ToolError> {
    if let Some(zone) = &app.zone
        && !app.hubs.connected(target_id)
        && let Some(owner) = zone.owner_of(target_id).await
    {
        let request = ReplicaCall::Skill {
            target_id: target_id.to_owned(),
            skill: skill.to_owned(),
            command,
        };
        let budget = Duration::from_millis(RPC_TIMEOUT_MS) + super::ACK_BUDGET;
        return match zone.send(&owner, request, budget, None).await {
            Ok(ReplicaAnswer::SkillState { state }) => Ok(state),
            Ok(ReplicaAnswer::Refused { error }) => Err(error),
            Ok(other) => Err(zone.failed(
                target_id,
                ForwardError::BadAnswer {
                    replica: owner.replica_id.clone(),
                    detail: format!("unexpected answer {other:?} to a skill command"),
                },
            )),
            Err(e) => Err(zone.failed(target_id, e)),
        };
    }
    local_skill_command(app, target_id, skill, command).await
}

/// A skill command through this replica's router. A changed surface is stored and every live
/// replica has applied it before this returns, so the next `tools/list` anywhere shows it.
async fn local_skill_command(
    app: &App,
    target_id: &str,
    skill: &str,
    command: SkillCommand,
) -> Result<SkillState, ToolError> {
    let res = ractor::call_t!(
        app.actors.router.load(),
        |reply| router::Msg::Skill {
            target_id: target_id.to_owned(),
            skill: skill.to_owned(),
            command,
            reply
        },
        RPC_TIMEOUT_MS
    );
    let state = match res {
        Ok(r) => r?,
        Err(e) => {
            return Err(ToolError::new(
                ErrorCode::TargetOffline,
                format!("no answer from target `{target_id}`: {e}"),
            ));
        }
    };
    if command != SkillCommand::Status
        && let Some(zone) = &app.zone
    {
        // The hub's surface_changed came before its skill_state on the same connection, so
        // the directory already holds the new surface.
        let descriptor = app
            .hubs
            .targets
            .get(target_id)
            .and_then(|d| serde_json::to_string(&*d).ok());
        if let Err(e) = app
            .store
            .update_target_seen(target_id, unix_ms(now()), descriptor.as_deref(), None)
            .await
        {
            tracing::warn!(%target_id, error = %e, "cannot store the changed surface");
        }
        zone.changed(super::ChangeKind::Target, target_id, true)
            .await;
    }
    Ok(state)
}

/// `POST /v1/root/internal/route`: a request from another replica of the zone.
pub(crate) async fn internal_route(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(zone) = app.zone.clone() else {
        return Refused::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            "the replica channel is off: this root is the zone's only replica (SQLite)",
        )
        .into_response();
    };
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let now_ms = unix_ms(now());
    let verified = credential::verify(&zone.key, &zone.replica_id, auth, &body, now_ms)
        .and_then(|from| first_use(&zone, auth.unwrap_or_default(), now_ms).map(|()| from));
    let from = match verified {
        Ok(from) => from,
        Err(e) => {
            tracing::warn!(error = %e, "refused a request on the replica channel");
            app.metrics.unauthenticated.inc();
            return Refused::new(
                StatusCode::UNAUTHORIZED,
                ErrorCode::Unauthenticated,
                e.to_string(),
            )
            .into_response();
        }
    };
    let env: ReplicaEnvelope<ReplicaCall> = match serde_json::from_slice(&body) {
        Ok(env) => env,
        Err(e) => {
            return Refused::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidArguments,
                format!("not a replica request: {e}"),
            )
            .into_response();
        }
    };
    if env.v != REPLICA_PROTOCOL_VERSION {
        return Refused::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidArguments,
            format!(
                "replica channel version {} is not {REPLICA_PROTOCOL_VERSION}",
                env.v
            ),
        )
        .into_response();
    }
    let answer = match env.body {
        ReplicaCall::Route {
            target_id,
            call_id,
            trace_id,
            session_id,
            tool_id,
            capability,
            body,
            remaining_ms,
        } => {
            tracing::debug!(%from, %target_id, %tool_id, %call_id, "forwarded call");
            if !app.hubs.connected(&target_id) {
                ReplicaAnswer::Refused {
                    error: not_here(&zone, &target_id),
                }
            } else if !publishes(&app, &target_id, &tool_id) {
                ReplicaAnswer::Routed {
                    outcome: CallOutcome::Error {
                        adapter: None,
                        error: ToolError::new(
                            ErrorCode::SkillDisabled,
                            format!(
                                "target `{target_id}` does not publish `{tool_id}` through an enabled skill"
                            ),
                        ),
                    },
                }
            } else {
                let remaining = remaining_ms.min(credential::MAX_LIFETIME_MS as u64);
                // The forwarding replica's route continues here, and on to the hub.
                let span =
                    mcp_shared::otel_span!("forwarded call", target = %target_id, tool = %tool_id);
                let traceparent = headers.get(TRACEPARENT).and_then(|v| v.to_str().ok());
                mcp_shared::otel::continue_from(&span, traceparent);
                let call = router::RoutedCall {
                    call_id,
                    target_id,
                    session_id,
                    tool_id,
                    capability,
                    body,
                    trace_id,
                    expires_at_ms: unix_ms(now()) + remaining as i64,
                    progress: None,
                    traceparent: mcp_shared::otel::traceparent_of(&span),
                };
                let outcome = crate::call::route::route_local(
                    &app,
                    call,
                    Duration::from_millis(remaining),
                    None,
                )
                .instrument(span)
                .await;
                ReplicaAnswer::Routed { outcome }
            }
        }
        ReplicaCall::Cancel { target_id, call_id } => {
            router::cancel(&app.hubs.links, &target_id, call_id);
            ReplicaAnswer::Cancelled
        }
        ReplicaCall::Skill {
            target_id,
            skill,
            command,
        } => {
            tracing::info!(%from, %target_id, %skill, ?command, "forwarded skill command");
            if app.hubs.connected(&target_id) {
                match local_skill_command(&app, &target_id, &skill, command).await {
                    Ok(state) => ReplicaAnswer::SkillState { state },
                    Err(error) => ReplicaAnswer::Refused { error },
                }
            } else {
                ReplicaAnswer::Refused {
                    error: not_here(&zone, &target_id),
                }
            }
        }
    };
    axum::Json(ReplicaEnvelope {
        v: REPLICA_PROTOCOL_VERSION,
        body: answer,
    })
    .into_response()
}

/// Each credential is accepted once (a captured request cannot be replayed, e.g. an old
/// skill command undoing a newer one); remembered until it expires.
fn first_use(
    zone: &Zone,
    credential: &str,
    now_ms: i64,
) -> Result<(), credential::CredentialError> {
    let expires_ms = credential
        .rsplit('.')
        .nth(1)
        .and_then(|e| e.parse::<i64>().ok())
        .unwrap_or(now_ms + credential::MAX_LIFETIME_MS);
    if zone.seen_credentials.len() >= SEEN_SWEEP_AT {
        zone.seen_credentials.retain(|_, exp| *exp > now_ms);
    }
    match zone.seen_credentials.entry(credential.to_owned()) {
        dashmap::Entry::Occupied(_) => Err(credential::CredentialError::Replayed),
        dashmap::Entry::Vacant(v) => {
            v.insert(expires_ms);
            Ok(())
        }
    }
}

fn not_here(zone: &Zone, target_id: &str) -> ToolError {
    ToolError::new(
        ErrorCode::TargetOffline,
        format!(
            "replica `{}` does not hold `{target_id}`'s hub (it moved or disconnected)",
            zone.replica_id
        ),
    )
}

/// Whether the hub connected here publishes `tool_id` through an enabled skill.
fn publishes(app: &App, target_id: &str, tool_id: &str) -> bool {
    app.hubs.targets.get(target_id).is_some_and(|d| {
        d.operational_surface.enabled
            && d.operational_surface
                .capabilities
                .iter()
                .any(|t| t == tool_id)
    })
}
