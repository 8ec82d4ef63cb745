//! Fleet operations: targets' labels, lifecycle (cordon, uncordon, retire) and per-target
//! narrowing, and the selectors that name a part of the fleet.

mod lifecycle;
