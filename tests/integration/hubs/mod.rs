//! Hubs: hubs connected to root and the enforcement on the hub, upgrades across builds,
//! fan-in, and what hubs serve (managed services, ProfileOps, deploy, NLU and its approval
//! flow).

mod deploy;
mod fanin;
mod hub;
mod hub_enforcement;
mod memory;
mod nlu;
mod nlu_approval;
mod profileops;
pub(crate) mod services;
mod upgrades;
