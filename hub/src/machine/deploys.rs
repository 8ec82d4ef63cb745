//! The deploy history of this hub's `[deploy]` target, persisted in
//! `<state_dir>/deploys.json`: the last [`KEEP`] deploys and rollbacks, oldest first, each with
//! the commit before and after, the ref, the time, the idempotency key of the call and the
//! result that call answered (so a repeated key gets the first result back).
//!
//! Rollbacks work on a stack: a deploy pushes, a rollback pops. The point a rollback returns
//! to is the previous commit of the deploy on top of the stack; so deploy v1, deploy v2,
//! rollback (→ v1), rollback finds only v1, which has no previous commit: nothing to roll back.
//!
//! Guarantees: a change is on disk (temporary file, fsync, rename) before it is visible; a
//! failed write changes nothing. One deploy operation (git fetch, checkout, record, restart)
//! runs at a time per hub: [`Deploys::exclusive`].

use std::path::Path;

use mcp_shared::error::{ErrorCode, ToolError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::store::json_file::JsonFile;

/// File name of the history under `state_dir`.
pub(crate) const HISTORY_FILE: &str = "deploys.json";
/// Entries kept (oldest forgotten first).
pub(crate) const KEEP: usize = 200;

/// Whether an entry moved forward to a ref or back to the previous commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DeployKind {
    Deploy,
    Rollback,
}

/// One recorded deploy or rollback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeployRecord {
    pub deploy_id: String,
    pub kind: DeployKind,
    /// The tool that made it (the scope of its idempotency key).
    pub tool: String,
    /// The ref deployed (for a rollback: the ref the restored commit came from, if known).
    #[serde(rename = "ref")]
    pub ref_name: Option<String>,
    /// What the ref resolved to (`refs/tags/v1`), `null` for a commit or a rollback.
    pub resolved_ref: Option<String>,
    /// The worktree's commit before (`null`: the worktree did not exist).
    pub previous_commit: Option<String>,
    pub previous_ref: Option<String>,
    /// The commit checked out.
    pub commit: String,
    /// RFC 3339.
    pub at: String,
    pub idempotency_key: Option<String>,
    /// What the call answered.
    pub result: Value,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryFile {
    /// Oldest first.
    entries: Vec<DeployRecord>,
}

/// The history store (one per hub process, shared through the context).
#[derive(Debug)]
pub(crate) struct Deploys {
    file: JsonFile<HistoryFile>,
    op: tokio::sync::Mutex<()>,
}

impl Deploys {
    pub(crate) fn new(state_dir: &Path) -> Deploys {
        Deploys {
            file: JsonFile::new(state_dir.join(HISTORY_FILE), "the deploy history").pretty(),
            op: tokio::sync::Mutex::new(()),
        }
    }

    /// Waits (until `deadline`) to be the one deploy operation running on this hub.
    pub(crate) async fn exclusive(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<tokio::sync::MutexGuard<'_, ()>, ToolError> {
        tokio::time::timeout_at(deadline, self.op.lock())
            .await
            .map_err(|_| {
                ToolError::new(
                    ErrorCode::Busy,
                    "another deploy operation is still running on this hub; retry later",
                )
            })
    }

    /// Every kept entry, oldest first.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> Result<Vec<DeployRecord>, ToolError> {
        self.file.read(|f| f.entries.clone())
    }

    /// The newest entry.
    pub(crate) fn last(&self) -> Result<Option<DeployRecord>, ToolError> {
        self.file.read(|f| f.entries.last().cloned())
    }

    /// The entry made by `tool` with idempotency key `key`, if kept.
    pub(crate) fn replay(&self, tool: &str, key: &str) -> Result<Option<DeployRecord>, ToolError> {
        self.file.read(|f| {
            f.entries
                .iter()
                .rev()
                .find(|e| e.tool == tool && e.idempotency_key.as_deref() == Some(key))
                .cloned()
        })
    }

    /// The deploy a rollback would undo (the top of the deploy stack), if any.
    pub(crate) fn rollback_point(&self) -> Result<Option<DeployRecord>, ToolError> {
        self.file.read(|f| {
            let mut stack: Vec<&DeployRecord> = Vec::new();
            for e in &f.entries {
                match e.kind {
                    DeployKind::Deploy => stack.push(e),
                    DeployKind::Rollback => {
                        stack.pop();
                    }
                }
            }
            stack.last().map(|e| (*e).clone())
        })
    }

    /// Appends `record`, writing the file before it is visible.
    pub(crate) fn record(&self, record: &DeployRecord) -> Result<(), ToolError> {
        self.file.change(|next| {
            next.entries.push(record.clone());
            let over = next.entries.len().saturating_sub(KEEP);
            next.entries.drain(..over);
        })
    }

    /// Replaces the recorded result of `deploy_id` (once its services have restarted).
    pub(crate) fn set_result(&self, deploy_id: &str, result: &Value) -> Result<(), ToolError> {
        self.file.change(|next| {
            if let Some(e) = next.entries.iter_mut().find(|e| e.deploy_id == deploy_id) {
                e.result = result.clone();
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(id: &str, kind: DeployKind, prev: Option<&str>, commit: &str) -> DeployRecord {
        DeployRecord {
            deploy_id: id.into(),
            kind,
            tool: "hub.deploy_ref".into(),
            ref_name: Some(format!("ref-{commit}")),
            resolved_ref: None,
            previous_commit: prev.map(str::to_owned),
            previous_ref: prev.map(|p| format!("ref-{p}")),
            commit: commit.into(),
            at: "2026-01-01T00:00:00Z".into(),
            idempotency_key: Some(format!("key-{id}")),
            result: json!({"id": id}),
        }
    }

    #[test]
    fn rollbacks_pop_the_deploy_stack_and_survive_a_reload() {
        use DeployKind::{Deploy, Rollback};
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Deploys::new(dir.path());
        assert_eq!(store.rollback_point().expect("empty"), None);
        store.record(&rec("1", Deploy, None, "a")).expect("record");
        store
            .record(&rec("2", Deploy, Some("a"), "b"))
            .expect("record");
        store
            .record(&rec("3", Deploy, Some("b"), "c"))
            .expect("record");
        assert_eq!(store.rollback_point().expect("top").expect("c").commit, "c");
        store
            .record(&rec("4", Rollback, Some("c"), "b"))
            .expect("record");
        let store = Deploys::new(dir.path());
        let top = store.rollback_point().expect("top").expect("b");
        assert_eq!(
            (top.commit.as_str(), top.previous_commit.as_deref()),
            ("b", Some("a"))
        );
        store
            .record(&rec("5", Rollback, Some("b"), "a"))
            .expect("record");
        let top = store.rollback_point().expect("top").expect("a");
        assert_eq!(
            top.previous_commit, None,
            "the first deploy has nothing before it"
        );
        assert_eq!(store.entries().expect("entries").len(), 5);
        let again = store.replay("hub.deploy_ref", "key-2").expect("replay");
        assert_eq!(again.expect("kept").result, json!({"id": "2"}));
        assert!(
            store
                .replay("hub.other", "key-2")
                .expect("replay")
                .is_none()
        );
        store
            .set_result("2", &json!({"id": "2", "done": true}))
            .expect("set");
        let store = Deploys::new(dir.path());
        let again = store.replay("hub.deploy_ref", "key-2").expect("replay");
        assert_eq!(again.expect("kept").result["done"], true);
        assert!(!dir.path().join(format!("{HISTORY_FILE}.tmp")).exists());
    }

    #[test]
    fn a_damaged_history_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(HISTORY_FILE), "{nope").expect("write");
        let err = Deploys::new(dir.path()).entries().expect_err("damaged");
        assert_eq!(err.code, ErrorCode::Internal);
        assert!(err.message.contains(HISTORY_FILE), "{err}");
    }
}
