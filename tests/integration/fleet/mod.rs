//! Fleet operations: targets' labels, lifecycle (cordon, uncordon, retire) and per-target
//! narrowing, the selectors that name a part of the fleet, and fleet runs over them.

mod lifecycle;
mod runs;
