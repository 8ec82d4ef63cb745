//! What the MCP door keeps per MCP session: the lease that opened it (a session cannot be
//! continued with another lease's bearer) and its peer, told `notifications/tools/list_changed`
//! when its target's surface changes. The door learns of those changes from the broadcast in
//! `hubs` (`Hubs::surface`), never by being called.

use std::sync::Arc;

use dashmap::DashMap;
use rmcp::{Peer, RoleServer};
use tokio::sync::broadcast::{Receiver, error::RecvError};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
pub(crate) struct Bindings {
    /// MCP session id → the lease session that opened it.
    pub(crate) sessions: DashMap<String, String>,
    /// MCP session id → (the lease's target, the client peer).
    pub(crate) peers: DashMap<String, (String, Peer<RoleServer>)>,
}

impl Bindings {
    /// Whether `sid` may be continued by `lease` (unknown sessions are the transport's to
    /// refuse).
    pub(crate) fn continues(&self, sid: &str, lease: &str) -> bool {
        self.sessions
            .get(sid)
            .is_none_or(|owner| owner.value() == lease)
    }

    /// Binds a session the transport just opened to the lease that opened it.
    pub(crate) fn bind(&self, sid: &str, lease: &str) {
        self.sessions
            .entry(sid.to_string())
            .or_insert_with(|| lease.to_string());
    }

    /// Forgets the sessions of leases that can no longer authenticate.
    pub(crate) fn forget_leases(&self, dead: &[String]) {
        self.peers.retain(|sid, _| {
            self.sessions
                .get(sid)
                .is_some_and(|l| !dead.contains(l.value()))
        });
        self.sessions.retain(|_, lease| !dead.contains(lease));
    }

    /// Tells every session on `target_id` (every session if `None`) that its tool list
    /// changed; sessions whose transport closed are forgotten.
    fn announce(&self, target_id: Option<&str>) {
        let peers: Vec<(String, Peer<RoleServer>)> = self
            .peers
            .iter()
            .filter(|e| target_id.is_none_or(|t| e.value().0 == t))
            .map(|e| (e.key().clone(), e.value().1.clone()))
            .collect();
        for (sid, peer) in peers {
            if peer.is_transport_closed() {
                self.peers.remove(&sid);
                continue;
            }
            tokio::spawn(async move {
                if let Err(e) = peer.notify_tool_list_changed().await {
                    tracing::debug!(session = %sid, error = %e, "could not announce a tool list change");
                }
            });
        }
    }

    /// Announces surface changes as `hubs` broadcasts them, until `stop`. Fallen behind, it
    /// announces to every session (a spurious `list_changed` costs a `tools/list`).
    pub(crate) async fn announce_changes(
        self: Arc<Self>,
        mut changes: Receiver<String>,
        stop: CancellationToken,
    ) {
        loop {
            let change = tokio::select! {
                _ = stop.cancelled() => return,
                c = changes.recv() => c,
            };
            match change {
                Ok(target_id) => self.announce(Some(&target_id)),
                Err(RecvError::Lagged(_)) => self.announce(None),
                Err(RecvError::Closed) => return,
            }
        }
    }
}
