//! Fleet operations: targets' labels, lifecycle (cordon, uncordon, retire) and per-target
//! narrowing, the selectors that name a part of the fleet, and fleet runs over them (reads,
//! and writes with a preview per target and one confirmation).

mod agents;
pub(crate) mod authority;
mod lifecycle;
mod runs;
pub(crate) mod writes;
