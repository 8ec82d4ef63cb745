//! Types that cross a process boundary, and what both daemons' tracing shares.
//!
//! # Layout
//! - [`canonical`]: canonical JSON for hashes and signatures.
//! - [`contract`]: the tool contract (one JSON file per tool under `schemas/tools/`).
//! - [`profile`]: capability profiles (named capability sets a lease is issued for).
//! - [`lease`]: the MCP Session Lease and its freshness-normalized status.
//! - [`target`]: the managed target descriptor.
//! - [`descriptor`]: descriptive artifacts with freshness and provenance fields.
//! - [`event`]: the operational event that every handled call becomes.
//! - [`error`]: normalized error codes and the normalized tool response.
//! - [`protocol`]: the versioned root↔hub protocol.
//! - [`profiling`]: ProfileOps records (sessions, incidents, artifacts) a hub publishes to
//!   root as evidence.
//! - [`replica`]: the internal channel between root replicas of one zone (forwarded calls).
//! - [`run_profile`]: the signed run profile and tool profile a generic worker runs under
//!   (seed 003 applied to leases).
//! - [`skill_catalog`]: the platform skill catalog's wire format (ontology, resource metadata).
//! - [`time`]: RFC 3339 timestamps as used on every wire format here.
//! - [`logging`] and [`otel`]: what both daemons' tracing shares (payload caps; OpenTelemetry
//!   export, off unless configured).
//!
//! Invariant: everything here is plain serde data with a JSON Schema in `schemas/`
//! that a test checks against these types.

pub mod canonical;
pub mod contract;
pub mod descriptor;
pub mod error;
pub mod event;
pub mod lease;
pub mod logging;
pub mod otel;
pub mod pem;
pub mod profile;
pub mod profiling;
pub mod protocol;
pub mod reference;
pub mod replica;
pub mod run_profile;
pub mod skill_catalog;
pub mod target;
pub mod time;

pub use contract::{RoutingClass, SideEffectClass, ToolContract};
pub use error::{ErrorCode, ToolError, ToolResponse};
pub use event::{OperationalEvent, PolicyDecision};
pub use lease::{LeaseStatus, SessionLease};
