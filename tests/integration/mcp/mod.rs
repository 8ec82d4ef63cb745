//! The MCP front door: transports, protocol revisions and wire-level checks as clients see
//! them, tool lists and calls, tasks, elicitation, OAuth sign-in and DPoP-bound tokens, descriptors, `skills
//! sync`, and generic workers on run profiles.

mod descriptors;
mod dpop;
mod elicitation;
mod generic_worker;
mod oauth;
mod protocol;
mod skills_sync;
pub(crate) mod tasks;
mod tools;
pub(crate) mod transport;
