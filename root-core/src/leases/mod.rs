//! MCP session leases: the lease manager, the only writer of leases, and the read index the
//! request path authenticates against.

pub mod manager;
