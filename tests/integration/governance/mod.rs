//! Governance: leases and what they may do, previewed and confirmed writes, delegation,
//! run profiles, the tools root runs itself, the audit trail and redaction (and the
//! operator's promises tried end to end in `no_holes`).

mod audit;
mod checkpoints;
mod delegation;
mod durability;
mod no_holes;
mod rates;
mod redaction;
mod roles;
mod root_tools;
pub(crate) mod run_profile;
pub(crate) mod sinks;
mod syslog;
mod witnesses;
mod writes;
