//! Hub-side idempotency keys of writes other than `hub.run_allowed_tests` (which keeps its
//! keys with its results, see [`crate::store::results`]): `<state_dir>/write-ledger.json` holds, per
//! tool, the last [`KEEP_KEYS`] idempotency keys and the result each first produced, so a
//! repeated key is answered with that result and the write never runs twice — even when
//! root's own ledger was lost, and across a restart of the hub.
//!
//! Guarantees: a result is on disk (temporary file, flushed, then renamed) before it is
//! returned; a key is claimed while its call runs, so a concurrent call with the same key gets
//! `busy`. A damaged file is named in an `internal` error; the hub still starts.

use std::path::Path;

use mcp_shared::error::{ErrorCode, ToolError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::json_file::{Claim, JsonFile};

/// File name of the ledger under `state_dir`.
pub(crate) const LEDGER_FILE: &str = "write-ledger.json";
/// Keys kept (oldest forgotten first), over all tools.
pub(crate) const KEEP_KEYS: usize = 1000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    tool: String,
    key: String,
    result: Value,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LedgerFile {
    /// Oldest first.
    records: Vec<Record>,
}

/// The ledger (one per hub process, in [`crate::context::Stores::ledger`]).
#[derive(Debug)]
pub(crate) struct WriteLedger {
    file: JsonFile<LedgerFile>,
}

/// What [`WriteLedger::begin`] found for a key.
pub(crate) enum Begin<'a> {
    /// The key was used before: its first result.
    Replay(Value),
    /// The key is new and now claimed: run the write, then [`WriteLedger::record`].
    Run(Claim<'a>),
}

impl WriteLedger {
    pub(crate) fn new(state_dir: &Path) -> WriteLedger {
        WriteLedger {
            file: JsonFile::new(state_dir.join(LEDGER_FILE), "the write ledger"),
        }
    }

    /// The result first recorded for `key` of `tool`.
    pub(crate) fn replay(&self, tool: &str, key: &str) -> Result<Option<Value>, ToolError> {
        self.file.read(|f| {
            f.records
                .iter()
                .rev()
                .find(|r| r.tool == tool && r.key == key)
                .map(|r| r.result.clone())
        })
    }

    /// Looks `key` of `tool` up and claims it when new; `busy` when a call with it runs.
    pub(crate) fn begin(&self, tool: &str, key: &str) -> Result<Begin<'_>, ToolError> {
        if let Some(first) = self.replay(tool, key)? {
            return Ok(Begin::Replay(first));
        }
        let Some(claim) = self.file.claim(tool, key) else {
            return Err(ToolError::new(
                ErrorCode::Busy,
                format!("a call with idempotency key `{key}` is still running; retry later"),
            ));
        };
        // It may have finished between the lookup and the claim.
        if let Some(first) = self.replay(tool, key)? {
            return Ok(Begin::Replay(first));
        }
        Ok(Begin::Run(claim))
    }

    /// Records `result` for `key` of `tool`, on disk before it is visible.
    pub(crate) fn record(&self, tool: &str, key: &str, result: &Value) -> Result<(), ToolError> {
        self.file.change(|next| {
            next.records.push(Record {
                tool: tool.to_owned(),
                key: key.to_owned(),
                result: result.clone(),
            });
            let over = next.records.len().saturating_sub(KEEP_KEYS);
            next.records.drain(..over);
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_replay_across_a_reload_and_are_claimed_while_running() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ledger = WriteLedger::new(dir.path());
        let Begin::Run(claim) = ledger.begin("t", "k").expect("new") else {
            panic!("a new key runs");
        };
        let err = ledger.begin("t", "k").err().expect("in flight");
        assert_eq!(err.code, ErrorCode::Busy);
        ledger.record("t", "k", &json!({"n": 1})).expect("record");
        drop(claim);
        let ledger = WriteLedger::new(dir.path());
        match ledger.begin("t", "k").expect("known") {
            Begin::Replay(v) => assert_eq!(v, json!({"n": 1})),
            Begin::Run(_) => panic!("a recorded key replays"),
        }
        assert!(matches!(ledger.begin("other", "k"), Ok(Begin::Run(_))));
        for i in 0..KEEP_KEYS {
            ledger
                .record("t", &format!("x{i}"), &json!(i))
                .expect("record");
        }
        assert_eq!(ledger.replay("t", "k").expect("replay"), None, "forgotten");
        assert_eq!(ledger.replay("t", "x5").expect("replay"), Some(json!(5)));
    }

    #[test]
    fn a_damaged_file_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(LEDGER_FILE), "{").expect("write");
        let err = WriteLedger::new(dir.path())
            .replay("t", "k")
            .expect_err("damaged");
        assert!(err.message.contains(LEDGER_FILE), "{err}");
    }
}
