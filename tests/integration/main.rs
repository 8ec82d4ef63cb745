//! The integration suite: one binary, real root daemons on 127.0.0.1:0, real MCP clients.

// Test helpers unwrap like tests do: a failure is a failed test with its message.
#![allow(clippy::unwrap_used)]

mod actors;
mod admin_cli;
mod audit;
mod auth;
mod bad_input;
mod boundaries;
mod config;
mod console;
mod delegation;
mod deploy;
mod descriptors;
mod elicitation;
mod fanin;
mod faults;
mod generic_worker;
mod governance;
mod hub;
mod hub_enforcement;
mod nlu;
mod nlu_approval;
mod oauth;
mod observability;
mod otel;
mod packages;
mod postgres;
mod processes;
mod profileops;
mod protocol;
mod redaction;
mod replica_state;
mod replica_tls;
mod replicas;
mod root_tools;
mod run_profile;
mod secrets;
mod services;
mod skills_sync;
mod soak;
mod tasks;
mod tls;
mod tools;
mod transport;
mod upgrades;
mod writes;
