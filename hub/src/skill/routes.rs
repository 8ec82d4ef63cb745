//! Which adapter actor serves each tool right now: written by the skill actor whenever it
//! starts, restarts or withdraws an adapter, read by the call path, which sends each call
//! straight to its adapter ([`super::SkillHandle::execute_call`]) without a hop through the
//! skill actor. The skill's handle and every instance of its actor (a restarted one too)
//! share one [`SharedRoutes`].

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

use ractor::ActorRef;

use crate::skill::adapters::AdapterMsg;

/// How a tool's calls are served.
#[derive(Clone)]
pub(crate) enum Route {
    /// By this adapter actor.
    Adapter(ActorRef<AdapterMsg>),
    /// Not at all: its adapter used up its restart budget (why, in words).
    Unavailable(String),
}

/// The route of each tool the skill serves, by tool id.
pub(crate) type Routes = HashMap<&'static str, Route>;

/// The routes as the skill actor last published them.
pub(crate) type SharedRoutes = Arc<ArcSwap<Routes>>;
