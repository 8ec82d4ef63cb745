//! What the hub keeps: the state files under `state_dir` (written atomically), and the
//! in-memory rings of finished calls and of the hub's own log lines.

pub mod activity;
pub mod hublog;
pub mod json_file;
pub mod ledger;
pub mod results;
pub mod state;
