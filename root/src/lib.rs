//! `mcp-root`: the Root MCP gateway daemon for one zone.
//!
//! # Layout, in two layers
//! The **lower layer** holds one concept each and never imports the upper layer or axum; its
//! modules import each other without a cycle (`tests/integration/boundaries.rs` checks both):
//! - [`config`]: static configuration (file + flags), with defaults that need no file.
//! - [`store`]: SQLite / PostgreSQL persistence of every table; [`secrets`]: secret files and
//!   the master key that encrypts hub signing keys at rest; [`auth`]: bearer tokens and their
//!   hashes.
//! - [`catalog`]: tool contracts, capability profiles and destructive-action rules.
//! - [`leases`]: MCP session leases (the lease manager and its read index).
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
//!
//! [`net`] is the listener with its bounds and TLS. The **upper layer** composes them:
//! - [`app`]: `App`, one field per concept.
//! - [`call`]: the one governed call path behind MCP `tools/call` and REST `/call`: writes
//!   (preview, confirmation, idempotent execute), elicitation, limits, and the executors for
//!   tools root runs itself.
//! - [`mcp`]: the MCP front door (rmcp's Streamable HTTP transport, its front checks, the
//!   direct path).
//! - [`api`]: every HTTP handler: the REST family, health and metrics, the web console,
//!   operator actions as audited events, and the hub WebSocket (`api::hub_link`);
//!   [`operators`]: who acts on operator endpoints.
//! - [`replica`]: several roots for one zone on PostgreSQL.
//! - [`cli`]: `serve`, the `admin` client and `skills sync` (`demo` is the binary's).
//!
//! [`run`] starts everything and returns a [`RootHandle`] with the bound address; tests start
//! the daemon in-process on `127.0.0.1:0`.

pub mod actors;
pub mod api;
pub mod app;
pub mod audit;
pub mod auth;
pub mod call;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod descriptors;
pub mod hubs;
pub mod leases;
pub mod mcp;
pub mod net;
pub mod operators;
pub mod policy;
pub mod replica;
pub mod secrets;
pub mod skill_catalog;
mod startup;
pub mod store;
pub mod telemetry;

pub use startup::{RootHandle, redact_url, run};
