//! `mcp-root`: the Root MCP gateway daemon for one zone.
//!
//! # Layout, in two crates
//! The **lower layer** is the crate `mcp-root-core` (config, store, catalog, policy, leases,
//! operators, descriptors, audit, hubs, skill catalog, actors, secrets, auth, telemetry):
//! every concept of a zone that needs no HTTP. The compiler keeps it below: it cannot name this crate or
//! axum. Its modules are re-exported here under their own names, so `crate::store` reads the
//! same in both crates.
//!
//! This crate is the **upper layer**, the daemon that composes them:
//! - [`net`]: the listener with its bounds and TLS.
//! - [`app`]: `App`, one field per concept; [`logins`]: operators' console sessions.
//! - [`call`]: the one governed call path behind MCP `tools/call` and REST `/call`: writes
//!   (preview, confirmation, idempotent execute), elicitation, limits, and the executors for
//!   tools root runs itself.
//! - [`mcp`]: the MCP front door (rmcp's Streamable HTTP transport, its front checks, the
//!   direct path).
//! - [`api`]: every HTTP handler: the REST family, health and metrics, the web console,
//!   operator actions as audited events, and the hub WebSocket (`api::hub_link`).
//! - [`replica`]: several roots for one zone on PostgreSQL.
//! - `dpop`: tokens bound to their holder's key (RFC 9449), checked and signed.
//! - [`cli`]: `serve`, the `admin` client and `skills sync` (`demo` is the binary's).
//!
//! [`run`] starts everything and returns a [`RootHandle`] with the bound address; tests start
//! the daemon in-process on `127.0.0.1:0`.

#![warn(unreachable_pub)]
// The governed call path is one deep async call tree (front door, call, executors, fleet
// tools, leases, the trail); a release build's layout of its futures needs more query depth
// than the default 128 ("queries overflow the depth limit" on `api::actions::post`).
#![recursion_limit = "256"]

pub use mcp_root_core::{
    actors, audit, auth, catalog, config, descriptors, hubs, leases, operators, policy, roles,
    secrets, skill_catalog, store, telemetry,
};

pub mod api;
pub mod app;
pub mod call;
pub mod cli;
pub(crate) mod dpop;
pub(crate) mod fleet;
pub mod logins;
pub mod mcp;
pub mod net;
pub(crate) mod oidc;
pub(crate) mod ops;
pub mod replica;
mod startup;

pub use startup::{RootHandle, redact_url, run};
