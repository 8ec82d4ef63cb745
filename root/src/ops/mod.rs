//! Root's operations under its front doors: what an HTTP handler, an MCP tool or a fleet run
//! asks of root, once, with its own typed errors; `api/` parses and answers around them and
//! nothing here imports `api/`.

pub(crate) mod audited;
pub(crate) mod breakglass;
pub(crate) mod error;
pub(crate) mod leases;
pub(crate) mod operators;
