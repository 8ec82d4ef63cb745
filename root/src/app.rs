//! The daemon's shared state: configuration, store, actor handles and the read-side views
//! the request path uses. One `Arc<App>` is shared by the HTTP and MCP handlers.

use std::sync::Arc;

use crate::actors::Actors;
use crate::audit::Trail;
use crate::call::limits::ConcurrencyLimits;
use crate::catalog::Catalog;
use crate::config::RootConfig;
use crate::hubs::Hubs;
use crate::leases::manager::LeaseIndex;
use crate::store::Store;
use crate::telemetry::metrics::Metrics;

pub struct App {
    pub config: RootConfig,
    pub store: Store,
    pub actors: Arc<Actors>,
    /// Tool contracts, capability profiles and the destructive-action rules.
    pub(crate) catalog: Catalog,
    pub(crate) leases: Arc<LeaseIndex>,
    /// The descriptor set being served, read without a message to the descriptor cache
    /// (which alone replaces it; see `descriptors::cache`).
    pub descriptors: Arc<crate::descriptors::cache::Args>,
    /// Publishes descriptor sets, one at a time.
    pub(crate) publisher: crate::descriptors::publish::Publisher,
    /// The clock descriptor freshness is judged by (tests move it).
    pub clock: crate::descriptors::clock::Clock,
    /// Enrolled and connected targets, their links and timeline.
    pub hubs: Hubs,
    /// Each connected hub's queue of frames to send, by target id: root's heartbeats go to
    /// the whole fleet from one task at each interval (`api::hub_link::beat`).
    pub(crate) outboxes: dashmap::DashMap<String, tokio::sync::mpsc::Sender<String>>,
    /// The audit trail every call and operator action is appended to.
    pub(crate) audit: Arc<Trail>,
    pub(crate) limits: ConcurrencyLimits,
    /// Calls per second per lease, owner, tool and operator (`[rates]`).
    pub(crate) rates: crate::call::rates::Rates,
    /// The bootstrap admin token's uses (`ops::breakglass`).
    pub(crate) breakglass: crate::audit::breakglass::BreakGlass,
    /// How many refused credentials each address gets recorded (`api::refused`).
    pub(crate) refusals: crate::audit::refusals::Limiter,
    /// Checks DPoP proofs (`dpop`): the `jti`s seen, root's nonce.
    pub(crate) dpop: crate::dpop::Verifier,
    pub(crate) metrics: Arc<Metrics>,
    /// The bootstrap operator's (`admin`) bearer.
    pub(crate) admin_token: String,
    /// Named operators' credentials (`operators`).
    pub(crate) operators: crate::operators::Registry,
    /// Encrypts hub signing keys at rest.
    pub master_key: crate::secrets::MasterKey,
    /// Signs the audit trail's checkpoints (derived from the master key).
    pub(crate) log_key: Arc<crate::audit::checkpoint::LogKey>,
    /// Root as a witness of other zones' trails (`[witness]`; its key from the master key).
    pub(crate) witness: Arc<crate::audit::witness::Witness>,
    /// The witnesses this zone's checkpoints go to (`[[audit.witnesses]]`) and their status.
    pub(crate) witnesses: Arc<crate::audit::witness::submit::Board>,
    /// The tasks (calls run past their request) this replica runs.
    pub(crate) tasks: crate::call::running::Running,
    /// Operators' console sessions and the reader leases their reads run under.
    pub(crate) logins: crate::logins::Logins,
    /// Operators' sign-in with the organization's OpenID provider (`[operators.oidc]`).
    pub(crate) oidc: Option<Arc<crate::oidc::provider::Oidc>>,
    pub(crate) started_at: time::OffsetDateTime,
    /// Cancelled when the daemon shuts down; long-lived connections (hubs) end with it.
    pub(crate) shutdown: tokio_util::sync::CancellationToken,
    /// This process as one replica of the zone (PostgreSQL); `None` on SQLite, the single
    /// replica default.
    pub zone: Option<Arc<crate::replica::zone::Zone>>,
    /// The fleet runs this replica drives.
    pub(crate) fleet: crate::fleet::runs::Runs,
    /// The fleet tools' adapters (`fleet::agents`).
    pub(crate) fleet_tools: Arc<dyn crate::call::executors::fleet::FleetTools>,
    /// This app, for work that outlives the call holding a `&App` (a fleet run an agent
    /// starts).
    pub(crate) me: std::sync::Weak<App>,
}

/// The policy engine did not answer: its actor is gone or did not answer in time.
#[derive(Debug, thiserror::Error)]
#[error("policy engine unavailable: {0}")]
pub(crate) struct PolicyUnavailable(ractor::RactorErr<crate::policy::Msg>);

/// Who is calling, as resolved by root from the bearer.
#[derive(Clone)]
pub(crate) enum Principal {
    Lease(Arc<crate::leases::manager::LeaseEntry>),
    Operator(crate::operators::OperatorId),
}

impl App {
    /// How far the audit trail is on disk (tests hold its flush: feature `fault-injection`).
    pub fn audit_flushed(&self) -> &Arc<crate::audit::flusher::Flushed> {
        &self.audit.flushed
    }

    /// This replica's id in its zone (`single` on SQLite): who drives a fleet run, who holds
    /// an idempotency claim.
    pub(crate) fn replica_id(&self) -> &str {
        self.zone
            .as_ref()
            .map_or("single", |z| z.replica_id.as_str())
    }

    /// This app, shared (see [`App::me`]); `None` only while it is being dropped.
    pub(crate) fn shared(&self) -> Option<Arc<App>> {
        self.me.upgrade()
    }

    /// The tools a lease with `profile` may call: every non-destructive contract whose
    /// capability the profile grants, among the fleet tools for a fleet lease (`fleet`) and
    /// the others for any other lease.
    pub(crate) fn effective_tools(
        &self,
        profile: &mcp_shared::profile::CapabilityProfile,
        fleet: bool,
    ) -> Vec<String> {
        self.catalog
            .contracts
            .all()
            .iter()
            .filter(|c| c.contract.fleet == fleet)
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
    pub(crate) async fn visible_tools(
        &self,
        lease: &crate::leases::manager::LeaseEntry,
    ) -> Result<Vec<Arc<crate::catalog::ContractEntry>>, PolicyUnavailable> {
        let l = lease.lease();
        ractor::call_t!(
            self.actors.policy.load(),
            |reply| crate::policy::Msg::Visible {
                profile: l.capability_profile.clone(),
                target_id: l.target_id.clone(),
                scope: l.is_run().then(|| l.effective_tools.clone()),
                reply
            },
            crate::actors::RPC_TIMEOUT_MS
        )
        .map_err(PolicyUnavailable)
    }

    /// Descriptors of `set` readable with `visible` tools (`None`: the operator, who reads
    /// all): those a visible tool projects, plus those no tool projects (public
    /// self-description such as the plane registry).
    pub(crate) fn readable_in(
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
                visible.iter().any(projects) || !self.catalog.contracts.all().iter().any(projects)
            })
            .collect()
    }
}
