//! `mcp-root`: the Root MCP gateway daemon for one zone.
//!
//! # Layout, by concept
//! - [`config`]: static configuration (file + flags), with defaults that need no file.
//! - [`catalog`]: tool contracts, descriptors and capability profiles, loaded and checked.
//! - [`store`]: SQLite / PostgreSQL persistence (leases, the hash-chained audit, writes'
//!   confirmations and idempotency records, approvals, targets); [`secrets`]: secret files and
//!   the master key that encrypts hub signing keys at rest; [`auth`]: bearer tokens and their
//!   hashes.
//! - [`leases`]: MCP session leases (the lease manager and its read index).
//! - [`policy`]: the policy decision point, a reason code for every denial.
//! - [`descriptors`]: descriptor sets (validation, publish, the cache that serves them, the
//!   clock freshness is judged by) and the build pipeline.
//! - [`audit`]: operator actions as events, the audit writer and its commit thread, and the
//!   health that refuses calls while the trail cannot be written.
//! - [`hubs`]: enrolments, the hub door and WebSocket channel, one link per connected target,
//!   the router over them, each target's `infra_access_skill` as root governs it, lifecycle
//!   timelines.
//! - [`call`]: the one governed call path behind MCP `tools/call` and REST `/call`: writes
//!   (preview, confirmation, idempotent execute), elicitation, limits, redaction, and the
//!   executors for tools root runs itself.
//! - [`mcp`]: the MCP server over rmcp's Streamable HTTP transport, its front checks and the
//!   direct path.
//! - [`api`]: the REST family, health and metrics endpoints with their middleware, and the web
//!   console; [`operators`]: who acts on operator endpoints.
//! - [`replica`]: several roots for one zone on PostgreSQL.
//! - [`skill_catalog`]: the platform skill catalog served as MCP resources, and `skills sync`.
//! - [`net`]: the listener with its bounds, TLS; [`telemetry`]: logging and metrics.
//! - [`actors`]: the supervision tree over the actors the concepts above define.
//! - [`cli`]: `serve`, `demo` and the `admin` client.
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
