//! The daemon's shared state: configuration, store, actor handles and the read-side views
//! the request path uses. One `Arc<App>` is shared by the HTTP and MCP handlers.

use std::sync::Arc;

use dashmap::DashMap;
use mcp_shared::profile::ProfileRegistry;

use crate::actors::Actors;
use crate::call::limits::ConcurrencyLimits;
use crate::call::redaction::Redactor;
use crate::catalog::ContractRegistry;
use crate::config::RootConfig;
use crate::hubs::router::TargetDirectory;
use crate::leases::manager::LeaseIndex;
use crate::store::Store;
use crate::telemetry::metrics::Metrics;

pub struct App {
    pub config: RootConfig,
    pub store: Store,
    pub actors: Arc<Actors>,
    /// The descriptor set being served, read without a message to the descriptor cache
    /// (which alone replaces it; see `descriptors::cache`).
    pub descriptors: Arc<crate::descriptors::cache::Args>,
    pub leases: Arc<LeaseIndex>,
    pub targets: Arc<TargetDirectory>,
    /// Connected targets' router sessions (attached and detached by the hub connections;
    /// calls and cancels go to them directly, see `hubs::router::route`).
    pub router_sessions: Arc<crate::hubs::router::Sessions>,
    pub contracts: Arc<ContractRegistry>,
    pub profiles: Arc<ProfileRegistry>,
    pub destructive: crate::catalog::DestructiveRules,
    pub redactor: Redactor,
    pub limits: ConcurrencyLimits,
    pub metrics: Metrics,
    /// The newest committed audit sequence number (the audit live stream waits on it).
    pub audit_head: Arc<tokio::sync::watch::Sender<i64>>,
    /// Whether the audit trail can be written; calls are refused while it cannot.
    pub audit_health: Arc<crate::audit::health::AuditHealth>,
    /// The audit writer's commit thread on embedded SQLite; events go to it directly (see
    /// `audit::writer::append`).
    pub audit_commit_thread: crate::audit::writer::CommitThread,
    /// Governed calls not yet at their audit append (the audit writer's group-commit hint).
    pub running_calls: Arc<crate::audit::writer::RunningCalls>,
    /// Operator console sessions (cookie logins), in memory.
    pub console: crate::api::console::Sessions,
    /// The bootstrap operator's (`admin`) bearer.
    pub admin_token: String,
    /// Named operators' credentials (`operators`).
    pub operators: crate::operators::Registry,
    /// Encrypts hub signing keys at rest.
    pub master_key: crate::secrets::MasterKey,
    /// MCP transport session id → the lease session that opened it (a session cannot be
    /// continued with another lease's bearer).
    pub mcp_sessions: DashMap<String, String>,
    pub started_at: time::OffsetDateTime,
    /// Enrolled targets by target id (shared with the policy engine, which reads their skill
    /// gates).
    pub enrolments: Arc<crate::hubs::Enrolments>,
    /// One push of a desired skill state to a hub at a time, per target.
    pub skill_pushes: crate::hubs::skill::PushLocks,
    /// Refused hub upgrades per peer address (`hubs::door`).
    pub hub_door: crate::hubs::door::HubDoor,
    /// When each connected target last sent a frame (heartbeats included).
    pub hub_last_frame: DashMap<String, std::time::Instant>,
    /// The router session of each target's newest hub connection.
    pub hub_connections: DashMap<String, ractor::ActorId>,
    /// MCP transport session id → (the lease's target, the client peer), for
    /// `notifications/tools/list_changed` when that target's surface changes.
    pub mcp_peers: DashMap<String, (String, rmcp::Peer<rmcp::RoleServer>)>,
    /// Hub lifecycle events for subnet timelines.
    pub timeline: crate::hubs::timeline::Timeline,
    /// The clock descriptor freshness is judged by (tests move it).
    pub clock: crate::descriptors::clock::Clock,
    /// Cancelled when the daemon shuts down; long-lived connections (hubs) end with it.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// This process as one replica of the zone (PostgreSQL); `None` on SQLite, the single
    /// replica default.
    pub zone: Option<Arc<crate::replica::Zone>>,
}

/// Who is calling, as resolved by root from the bearer.
#[derive(Clone)]
pub enum Principal {
    Lease(Arc<crate::leases::manager::LeaseEntry>),
    Operator(crate::operators::OperatorId),
}

impl App {
    /// The tools a lease with `profile` may call: every non-destructive contract whose
    /// capability the profile grants.
    pub fn effective_tools(&self, profile: &mcp_shared::profile::CapabilityProfile) -> Vec<String> {
        self.contracts
            .all()
            .iter()
            .filter(|c| {
                profile
                    .capabilities
                    .contains(&c.contract.required_capability)
            })
            .filter(|c| {
                c.contract.side_effect != mcp_shared::contract::SideEffectClass::Destructive
            })
            .map(|c| c.contract.tool_id.clone())
            .collect()
    }

    /// The contracts a lease may call right now, in stable order (the policy engine decides).
    pub async fn visible_tools(
        &self,
        lease: &crate::leases::manager::LeaseEntry,
    ) -> Result<Vec<Arc<crate::catalog::ContractEntry>>, String> {
        let l = lease.lease();
        ractor::call_t!(
            self.actors.policy.load(),
            |reply| crate::policy::Msg::Visible {
                profile: l.capability_profile.clone(),
                target_id: l.target_id.clone(),
                scope: l
                    .parent_session_id
                    .as_ref()
                    .map(|_| l.effective_tools.clone()),
                reply
            },
            crate::actors::RPC_TIMEOUT_MS
        )
        .map_err(|e| format!("policy engine unavailable: {e}"))
    }

    /// Descriptors of `set` readable with `visible` tools (`None`: the operator, who reads
    /// all): those a visible tool projects, plus those no tool projects (public
    /// self-description such as the plane registry).
    pub fn readable_in(
        &self,
        set: &crate::descriptors::DescriptorSet,
        visible: Option<&[Arc<crate::catalog::ContractEntry>]>,
    ) -> Vec<Arc<mcp_shared::descriptor::Descriptor>> {
        let all = set.all();
        let Some(visible) = visible else {
            return all;
        };
        all.into_iter()
            .filter(|d| {
                let id = &d.freshness.descriptor_id;
                let projects = |c: &Arc<crate::catalog::ContractEntry>| {
                    c.contract
                        .descriptor
                        .as_ref()
                        .is_some_and(|p| &p.descriptor_id == id)
                };
                visible.iter().any(projects) || !self.contracts.all().iter().any(projects)
            })
            .collect()
    }
}
