//! The integration suite: one binary, real root daemons on 127.0.0.1:0, real MCP clients.

// Test helpers unwrap like tests do: a failure is a failed test with its message.
#![allow(clippy::unwrap_used)]

// Modules by concept; a test's path (`zone::replicas::...`) is what `.ci/run` filters on.
mod fleet;
mod governance;
mod hardening;
mod hubs;
mod mcp;
mod ops;
mod zone;
