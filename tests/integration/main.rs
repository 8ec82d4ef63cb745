//! The integration suite: one binary, real root daemons on 127.0.0.1:0, real MCP clients.

mod admin_cli;
mod audit;
mod auth;
mod protocol;
mod tools;
