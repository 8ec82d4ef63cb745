//! What root accepts from a connected hub beyond decoding, and how it ends a hub connection.
//!
//! Hub → root frames carry no signature of their own: the connection is the authentication
//! (the token in `hello`, checked against the enrolment; WSS; a client certificate where root
//! has a client CA). So nothing a frame says may widen what the enrolment says: a
//! `surface_changed` must name the enrolment's target and environment ([`check_claims`]),
//! else it is answered with a `protocol_error` and changes nothing. A `result` for a call that
//! is not waiting on this connection (late, answered twice, or never sent to it) is dropped by
//! the link, so a hub can only ever answer the calls routed to it, once.
//!
//! Root ends a connection with a close frame carrying an RFC 6455 code and the reason
//! ([`Closing`]): 1009 for a frame over the limit, 1007 for a text frame that is not UTF-8,
//! 1002 for other framing errors, 1008 for a refused or no longer valid hub (after a
//! `protocol_error` saying why), 1001 when root shuts down. The connection's writer task owns
//! the socket's sink, so the close frame is its last frame ([`write`], [`finish`]).

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use futures::stream::SplitSink;
use futures::{SinkExt, StreamExt};
use mcp_shared::protocol::HubToRoot;
use tokio::sync::{mpsc, oneshot};

/// Longest close reason a close frame may carry (RFC 6455: 125 bytes of payload, 2 for the
/// code).
const MAX_REASON_BYTES: usize = 123;

/// How long the writer gets to flush queued frames and the close frame at the end.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(1);

/// A frame claiming more than the connection's enrolment.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClaimError {
    #[error("surface_changed names `{claimed}`; this connection is `{target_id}`")]
    OtherTarget { claimed: String, target_id: String },
    #[error(
        "surface_changed claims environment `{claimed}`; `{target_id}` is enrolled in `{environment}`"
    )]
    OtherEnvironment {
        claimed: String,
        target_id: String,
        environment: String,
    },
}

/// Whether a frame's claims stay within the enrolment: a `surface_changed` names the target
/// this connection was admitted for and its enrolled environment.
pub(crate) fn check_claims(
    body: &HubToRoot,
    target_id: &str,
    environment: &str,
) -> Result<(), ClaimError> {
    let HubToRoot::SurfaceChanged { descriptor, .. } = body else {
        return Ok(());
    };
    if descriptor.target_id != target_id {
        return Err(ClaimError::OtherTarget {
            claimed: descriptor.target_id.clone(),
            target_id: target_id.to_owned(),
        });
    }
    if descriptor.environment != environment {
        return Err(ClaimError::OtherEnvironment {
            claimed: descriptor.environment.clone(),
            target_id: target_id.to_owned(),
            environment: environment.to_owned(),
        });
    }
    Ok(())
}

/// The close frame root ends a connection with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Closing {
    pub(crate) code: u16,
    pub(crate) reason: String,
}

impl Closing {
    pub(crate) fn new(code: u16, reason: impl Into<String>) -> Closing {
        let mut reason: String = reason.into();
        if reason.len() > MAX_REASON_BYTES {
            let mut end = MAX_REASON_BYTES;
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            reason.truncate(end);
        }
        Closing { code, reason }
    }

    pub(crate) fn normal() -> Closing {
        Closing::new(close_code::NORMAL, "")
    }

    /// A refused or no longer admitted hub.
    pub(crate) fn policy(reason: impl Into<String>) -> Closing {
        Closing::new(close_code::POLICY, reason)
    }

    /// Root is going away (shutdown).
    pub(crate) fn away(reason: impl Into<String>) -> Closing {
        Closing::new(close_code::AWAY, reason)
    }

    /// A frame could not be read: too big (1009), a text frame that is not UTF-8 (1007), or
    /// another protocol error (1002); the reason is the WebSocket library's own text
    /// (tungstenite's, e.g. "Space limit exceeded: Message too long: 1048577 > 1048576").
    pub(crate) fn read_error(e: &axum::Error) -> Closing {
        let text = e.to_string();
        let code = if text.contains("Space limit exceeded") {
            close_code::SIZE
        } else if text.contains("UTF-8") || text.contains("utf-8") {
            close_code::INVALID
        } else {
            close_code::PROTOCOL
        };
        Closing::new(code, text)
    }

    /// Whether a read error means the hub went away (its connection reset, with or without
    /// the WebSocket closing handshake: a hub stopping, a process killed, a network reset)
    /// rather than that it sent something unreadable. Matched on the WebSocket library's text
    /// as [`Closing::read_error`] is (axum's error does not expose tungstenite's).
    pub(crate) fn is_gone(e: &axum::Error) -> bool {
        let text = e.to_string();
        [
            "Connection reset without closing handshake",
            "Connection reset by peer",
            "Broken pipe",
        ]
        .iter()
        .any(|t| text.contains(t))
    }

    pub(crate) fn frame(&self) -> Message {
        Message::Close(Some(CloseFrame {
            code: self.code,
            reason: self.reason.as_str().into(),
        }))
    }
}

/// The connection's writer: sends queued frames until told to close (or the queue ends),
/// then the close frame.
pub(crate) async fn write(
    mut sink: SplitSink<WebSocket, Message>,
    mut frames: mpsc::Receiver<String>,
    mut closing: oneshot::Receiver<Closing>,
) {
    let last = loop {
        tokio::select! {
            biased;
            text = frames.recv() => match text {
                // Frames queued meanwhile (calls routed while the last write ran) go out with
                // it: one flush, one system call, for all of them.
                Some(text) => {
                    let mut next = Some(text);
                    while let Some(text) = next {
                        if sink.feed(Message::Text(text.into())).await.is_err() {
                            return;
                        }
                        next = frames.try_recv().ok();
                    }
                    if sink.flush().await.is_err() {
                        return;
                    }
                }
                // Every sender is gone: the connection is ending, and says how next.
                None => break (&mut closing).await.unwrap_or_else(|_| Closing::normal()),
            },
            c = &mut closing => break c.unwrap_or_else(|_| Closing::normal()),
        }
    };
    // Frames queued before the close was decided (a protocol error saying why) go first.
    while let Ok(text) = frames.try_recv() {
        if sink.send(Message::Text(text.into())).await.is_err() {
            return;
        }
    }
    let _ = sink.send(last.frame()).await;
    let _ = sink.close().await;
}

/// Ends a connection's writer with `closing`: it gets [`FLUSH_TIMEOUT`] to write what is
/// queued and the close frame, then it is stopped.
pub(crate) async fn finish(
    writer: tokio::task::JoinHandle<()>,
    tell: oneshot::Sender<Closing>,
    closing: Closing,
) {
    let _ = tell.send(closing);
    let abort = writer.abort_handle();
    if tokio::time::timeout(FLUSH_TIMEOUT, writer).await.is_err() {
        abort.abort();
    }
}

/// Refuses a connection before `welcome`: the reason as a `protocol_error` frame (`encoded`),
/// then a close frame with code 1008 and the same reason.
pub(crate) async fn refuse(socket: &mut WebSocket, encoded: String, reason: &str) {
    let _ = socket.send(Message::Text(encoded.into())).await;
    let _ = socket.send(Closing::policy(reason).frame()).await;
    // Wait briefly for the peer's close so the frames are delivered before the socket drops.
    let _ = tokio::time::timeout(FLUSH_TIMEOUT, async {
        while let Some(Ok(m)) = socket.next().await {
            if matches!(m, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_shared::target::{
        ManagedTargetDescriptor, OperationalSurface, TargetPolicy, TargetStatus, Transport,
        WriteScope,
    };

    #[test]
    fn a_reset_connection_is_a_hub_gone_not_an_unreadable_frame() {
        let err = |text: &str| axum::Error::new(std::io::Error::other(text.to_owned()));
        for gone in [
            "WebSocket protocol error: Connection reset without closing handshake",
            "IO error: Connection reset by peer (os error 104)",
            "IO error: Broken pipe (os error 32)",
        ] {
            assert!(Closing::is_gone(&err(gone)), "{gone}");
        }
        for unreadable in [
            "Space limit exceeded: Message too long: 1048577 > 1048576",
            "UTF-8 encoding error",
            "WebSocket protocol error: Reserved bits are non-zero",
        ] {
            assert!(!Closing::is_gone(&err(unreadable)), "{unreadable}");
        }
    }

    fn surface(target: &str, env: &str) -> HubToRoot {
        HubToRoot::SurfaceChanged {
            descriptor: ManagedTargetDescriptor {
                target_id: target.into(),
                kind: "hub".into(),
                environment: env.into(),
                status: TargetStatus::Online,
                transport: Transport {
                    channel: "ws".into(),
                },
                operational_surface: OperationalSurface {
                    published_by: "infra_access_skill".into(),
                    enabled: true,
                    capabilities: vec![],
                },
                policy: TargetPolicy {
                    write_scope: WriteScope::TestOnly,
                },
            },
            skills: vec![],
        }
    }

    #[test]
    fn surface_claims_stay_within_the_enrolment() {
        let said =
            |body: &HubToRoot| check_claims(body, "hub:a", "prod").map_err(|e| e.to_string());
        assert_eq!(said(&surface("hub:a", "prod")), Ok(()));
        assert_eq!(
            said(&surface("hub:b", "prod")),
            Err("surface_changed names `hub:b`; this connection is `hub:a`".into())
        );
        assert_eq!(
            said(&surface("hub:a", "test")),
            Err("surface_changed claims environment `test`; `hub:a` is enrolled in `prod`".into())
        );
        assert_eq!(said(&HubToRoot::Heartbeat), Ok(()));
    }

    #[test]
    fn close_reasons_fit_a_close_frame() {
        let c = Closing::policy("é".repeat(100));
        assert!(c.reason.len() <= MAX_REASON_BYTES);
        assert!(c.reason.chars().all(|ch| ch == 'é'));
        assert_eq!(c.code, 1008);
    }
}
