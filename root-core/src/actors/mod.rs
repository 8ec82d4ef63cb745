//! The root daemon's actors (ractor) and their supervisor.
//!
//! - [`leases::manager`]: the only writer of MCP Session Leases; publishes a read index that the
//!   request path authenticates against without a round trip.
//! - [`policy`]: the policy decision point (capability grant, environment guard, destructive
//!   refusal) with a reason code for every denial.
//! - [`descriptors::cache`]: root-curated descriptors with freshness.
//! - [`audit::writer`]: batches events into hash-chained rows; a call's reply waits until its
//!   event is committed.
//! - [`hubs::router`]: maps targets to their links and forwards calls to them.
//! - [`hubs::link`]: one per connected target; signs calls, matches results, relays
//!   cancels and skill commands.
//!
//! Guarantees (ractor): messages from one sender are handled in send order, one at a time per
//! actor. A panic or error in `handle` stops only that actor; the [`supervisor`] restarts it
//! with the same arguments, and the [`Actors`] handles are swapped to the new instance.
//! State that must survive a restart lives in the store (leases, audit) or is rebuilt from
//! configuration in `pre_start` (profiles, contracts, descriptors). Links are supervised by
//! the [`router::LinkSupervisor`], a child with no messages: a link that fails leaves the map
//! and its connection closes, so its hub dials again; a router that fails is restarted and
//! drops no link. The restart budget is a window: a child may be restarted
//! [`supervisor::RESTART_BUDGET`] times within [`supervisor::RESTART_WINDOW`]; one more failure
//! in that window stops the supervisor, and root with it (a root that runs without, say, its
//! audit writer would be worse), for the service manager to start again. `Msg::Panic` (the
//! `fault-injection` feature, test builds only) lets tests prove it.

pub mod supervisor;

use arc_swap::ArcSwap;
use ractor::ActorRef;

use crate::audit::writer as audit_writer;
use crate::descriptors::cache as descriptor_cache;
use crate::hubs::router;
use crate::leases::manager as lease_manager;
use crate::policy;

/// Current references to the supervised actors; swapped by the supervisor on restart.
pub struct Actors {
    pub leases: ArcSwap<ActorRef<lease_manager::Msg>>,
    pub policy: ArcSwap<ActorRef<policy::Msg>>,
    pub descriptors: ArcSwap<ActorRef<descriptor_cache::Msg>>,
    /// Shared with the audit trail (`audit::Trail`), which appends through it.
    pub audit: std::sync::Arc<ArcSwap<ActorRef<audit_writer::Msg>>>,
    pub router: ArcSwap<ActorRef<router::Msg>>,
    /// The parent links are spawned under (see [`router::LinkSupervisor`]).
    pub links: ArcSwap<ActorRef<()>>,
    /// Set before shutdown so the supervisor does not restart children it is stopping.
    pub shutting_down: std::sync::atomic::AtomicBool,
}

/// Default timeout for an RPC to an actor, in milliseconds.
pub const RPC_TIMEOUT_MS: u64 = 5_000;
