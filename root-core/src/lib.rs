//! `mcp-root-core`: root's lower layer, every concept of a zone that needs no HTTP. The daemon
//! (`mcp-root`) composes these into its front doors; nothing here imports axum or the daemon,
//! and the crate boundary is what keeps it so.
//!
//! # Layout
//! Each module holds one concept; no import circle spans more than two files (`mcp-circles`):
//! - [`config`]: static configuration (file + flags), with defaults that need no file.
//! - [`store`]: SQLite / PostgreSQL persistence of every table; [`secrets`]: secret files and
//!   the master key that encrypts hub signing keys at rest; [`auth`]: bearer tokens and their
//!   hashes.
//! - [`catalog`]: tool contracts, capability profiles and destructive-action rules.
//! - [`leases`]: MCP session leases (the lease manager and its read index).
//! - [`operators`]: who acts on operator endpoints (named operators' credentials).
//! - [`policy`]: the policy decision point, a reason code for every denial.
//! - [`descriptors`]: descriptor sets (validation, the cache that serves them, the clock
//!   freshness is judged by) and the build pipeline.
//! - [`audit`]: the trail (append, verify, operator events), its writer and commit thread,
//!   its health, and the redaction every event passes.
//! - [`hubs`]: enrolments, the target directory, one link per connected target and the router
//!   over them, each target's `infra_access_skill` gate, lifecycle timelines.
//! - [`skill_catalog`]: the platform skill catalog's rules, served as MCP resources.
//! - [`actors`]: the supervision tree over the actors the concepts above define;
//!   [`telemetry`]: logging and metrics.

#![warn(unreachable_pub)]

pub mod actors;
pub mod audit;
pub mod auth;
pub mod catalog;
pub mod config;
pub mod descriptors;
pub mod hubs;
pub mod leases;
pub mod operators;
pub mod policy;
pub mod roles;
pub mod secrets;
pub mod skill_catalog;
pub mod store;
pub mod telemetry;
