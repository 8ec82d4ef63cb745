//! Managed targets on root: enrolments (an enrolled target with its signing keys and skill
//! gate), the directory of their descriptors, the link (router session) of each connected
//! hub, their labels, lifecycle and narrowing ([`lifecycle`]), their connection timeline,
//! and the evidence hubs publish. The WebSocket endpoint hubs dial is `api::hub_link`.

pub mod evidence;
pub mod identity;
pub mod lifecycle;
pub mod link;
pub mod push;
pub mod router;
pub mod selector;
pub mod skill;
pub mod timeline;

use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use mcp_shared::target::{ManagedTargetDescriptor, TargetStatus};

use crate::secrets::{MasterKey, SecretError};
use crate::store::{PreviousKey, TargetRow};

/// Frames queued per connection before calls are refused with `busy`.
pub const OUTBOUND_QUEUE: usize = 1024;
/// Prefix of hub enrolment tokens.
pub const HUB_TOKEN_PREFIX: &str = "mcph_";

/// Enrolled targets by target id.
pub type Enrolments = dashmap::DashMap<String, Enrolment>;

/// An enrolled target with its signing key (opened with the master key; the row holds it
/// encrypted).
#[derive(Clone)]
pub struct Enrolment {
    pub row: TargetRow,
    pub signing_key: [u8; 32],
    /// The token and key before the last rotation, valid until their grace period ends.
    pub previous: Option<PreviousHubKey>,
    /// Its skill as root governs it (desired state and the hub's last report).
    pub skill: crate::hubs::skill::Gate,
    /// Its labels, lifecycle state and per-target narrowing, as operators set them.
    pub labels: lifecycle::Labels,
    pub lifecycle: lifecycle::Lifecycle,
    pub narrowing: lifecycle::Narrowing,
}

/// A rotated-out hub token (hash) and its signing key.
#[derive(Clone)]
pub struct PreviousHubKey {
    pub token_hash: String,
    pub signing_key: [u8; 32],
    pub expires_at_ms: i64,
}

impl Enrolment {
    /// The target as selectors see it, with its `status` now.
    pub fn subject(&self, status: TargetStatus) -> selector::Subject<'_> {
        selector::Subject {
            target_id: &self.row.target_id,
            environment: &self.row.environment,
            subnet_id: &self.row.subnet_id,
            zone: &self.row.zone,
            status: status.as_str(),
            lifecycle: self.lifecycle.state,
            skill: &self.skill,
            labels: &self.labels,
        }
    }

    /// Opens a stored enrolment (and its previous key, if a rotation's grace is running).
    pub fn open(
        row: TargetRow,
        previous: Option<PreviousKey>,
        master: &MasterKey,
    ) -> Result<Enrolment, SecretError> {
        let signing_key = master.open_signing_key(&row.target_id, &row.signing_key)?;
        let previous = match previous {
            Some(p) => Some(PreviousHubKey {
                signing_key: master.open_signing_key(&row.target_id, &p.signing_key)?,
                token_hash: p.token_hash,
                expires_at_ms: p.expires_at_ms,
            }),
            None => None,
        };
        Ok(Enrolment::with_keys(row, signing_key, previous))
    }

    /// An enrolment of a stored row whose keys are open; its skill gate, labels, lifecycle
    /// and narrowing read from the row.
    pub fn with_keys(
        row: TargetRow,
        signing_key: [u8; 32],
        previous: Option<PreviousHubKey>,
    ) -> Enrolment {
        let id = &row.target_id;
        Enrolment {
            skill: crate::hubs::skill::Gate::from_row(&row),
            labels: lifecycle::read_column(id, "labels", row.labels.as_deref()),
            lifecycle: lifecycle::read_column(id, "lifecycle", row.lifecycle.as_deref()),
            narrowing: lifecycle::read_column(id, "narrowing", row.narrowing.as_deref()),
            row,
            signing_key,
            previous,
        }
    }

    /// Whether the target is retired (its hub token opens nothing).
    pub fn retired(&self) -> bool {
        self.lifecycle.state == lifecycle::State::Retired
    }

    /// The signing key that goes with a hub token of this hash at `now_ms`: the current key,
    /// or the previous one while its grace period runs. Constant-time comparisons.
    pub fn key_for(&self, token_hash: &str, now_ms: i64) -> Option<[u8; 32]> {
        if crate::auth::secret_eq(&self.row.token_hash, token_hash) {
            return Some(self.signing_key);
        }
        self.previous
            .as_ref()
            .filter(|p| {
                now_ms < p.expires_at_ms && crate::auth::secret_eq(&p.token_hash, token_hash)
            })
            .map(|p| p.signing_key)
    }

    /// The target as the directory shows it while no hub is connected: its last registered
    /// descriptor marked offline, or (never connected) its enrolment with nothing published
    /// and no write scope.
    pub fn offline_descriptor(&self) -> ManagedTargetDescriptor {
        let stored = self
            .row
            .descriptor
            .as_deref()
            .and_then(|d| serde_json::from_str::<ManagedTargetDescriptor>(d).ok());
        let mut d = stored.unwrap_or_else(|| ManagedTargetDescriptor {
            target_id: self.row.target_id.clone(),
            kind: "hub".into(),
            environment: self.row.environment.clone(),
            status: TargetStatus::Offline,
            transport: mcp_shared::target::Transport {
                channel: "websocket".into(),
            },
            operational_surface: mcp_shared::target::OperationalSurface {
                published_by: "none".into(),
                enabled: false,
                capabilities: Vec::new(),
            },
            policy: mcp_shared::target::TargetPolicy {
                write_scope: mcp_shared::target::WriteScope::None,
            },
        });
        d.status = TargetStatus::Offline;
        d.environment = self.row.environment.clone();
        d
    }
}

/// The managed targets as root sees them, shared by the request path, the policy engine and
/// the hub connections.
pub struct Hubs {
    /// Each target's descriptor as it last published it (offline ones from their enrolment).
    pub targets: Arc<router::TargetDirectory>,
    /// Connected targets' links (attached and detached by the hub connections; calls and
    /// cancels go to them directly, see [`router::route`]).
    pub links: Arc<router::Links>,
    /// Enrolled targets by target id (shared with the policy engine, which reads their skill
    /// gates).
    pub enrolments: Arc<Enrolments>,
    /// When each connected target last sent a frame (heartbeats included).
    pub last_frame: DashMap<String, Instant>,
    /// Hub lifecycle events for subnet timelines.
    pub timeline: timeline::Timeline,
    /// The shapes hubs' evidence records are checked against (one set per root).
    pub evidence: Arc<evidence::Shapes>,
    /// Targets whose published surface (tools a lease may see) just changed: a skill
    /// switched, a hub published, connected or left, here or on another replica. The MCP
    /// door subscribes and tells its sessions on those targets.
    pub surface: tokio::sync::broadcast::Sender<String>,
    /// One push of a desired skill state to a hub at a time, per target.
    pub pushes: push::PushLocks,
    /// The heartbeat interval announced to hubs (`limits.heartbeat_interval_ms`); a hub
    /// silent for three is dropped.
    pub heartbeat: Duration,
}

/// Surface changes a slow subscriber may fall behind by before it is told it lagged (and
/// then announces a change to every session).
pub const SURFACE_BACKLOG: usize = 1024;

impl Hubs {
    /// Announces that `target_id`'s surface changed (no one listening is fine).
    pub fn surface_changed(&self, target_id: &str) {
        let _ = self.surface.send(target_id.to_string());
    }

    /// Whether `target_id`'s hub is connected to this replica.
    pub fn connected(&self, target_id: &str) -> bool {
        self.links.contains_key(target_id)
    }

    /// Ends `target_id`'s hub connection on this replica, if it has one (its target was
    /// retired): the router session stops, calls in flight on it fail, the socket closes.
    pub fn drop_link(&self, target_id: &str, why: &str) {
        if let Some(link) = self.links.get(target_id) {
            link.stop(Some(why.to_owned()));
        }
    }

    /// Whether the skill tools of `target_id` may be called (enrolled, gate open).
    pub fn skill_open(&self, target_id: &str) -> bool {
        self.enrolments
            .get(target_id)
            .is_some_and(|e| e.skill.open())
    }

    /// A target's status as operators see it: `degraded` when connected but late with its
    /// heartbeats or publishing nothing through an enabled skill.
    pub fn status(&self, target_id: &str) -> TargetStatus {
        let late = self
            .last_frame
            .get(target_id)
            .is_some_and(|t| t.elapsed() > self.heartbeat * 2);
        match self.targets.get(target_id) {
            Some(d)
                if d.status == TargetStatus::Online && (late || !d.operational_surface.enabled) =>
            {
                TargetStatus::Degraded
            }
            Some(d) => d.status,
            None => TargetStatus::Offline,
        }
    }
}
