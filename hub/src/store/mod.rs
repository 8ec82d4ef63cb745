//! What the hub keeps: the state files under `state_dir` (written atomically), and the
//! in-memory rings of finished calls and of the hub's own log lines.

pub(crate) mod activity;
pub(crate) mod hublog;
pub(crate) mod json_file;
pub(crate) mod ledger;
pub(crate) mod results;
pub(crate) mod state;
