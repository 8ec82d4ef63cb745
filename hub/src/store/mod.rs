//! What the hub keeps: the state files under `state_dir`, each a typed JSON file
//! ([`json_file`]) written atomically ([`state`]): the write ledger ([`ledger`]) and the test
//! results ([`results`]), with the deploy history in `crate::machine::deploys`; and the
//! in-memory rings of finished calls ([`activity`]) and of the hub's own log lines
//! ([`hublog`]).

pub(crate) mod activity;
pub(crate) mod hublog;
pub(crate) mod json_file;
pub(crate) mod ledger;
pub(crate) mod results;
pub(crate) mod state;
