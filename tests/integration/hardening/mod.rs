//! Hardening: bad input, limits and boundaries, authentication, TLS, secrets, config
//! validation, supervised actors that panic, and the fault battery.

mod actors;
mod auth;
pub(crate) mod bad_input;
mod boundaries;
mod budgets;
mod circles;
mod config;
pub(crate) mod faults;
mod keepalive;
mod nul;
mod secrets;
pub(crate) mod tls;
