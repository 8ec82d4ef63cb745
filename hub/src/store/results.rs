//! Recorded results of allowed tests, persisted in `<state_dir>/test-results.json`: the last
//! [`KEEP_PER_TEST`] runs of each test, and the last [`KEEP_KEYS`] idempotency keys of
//! `hub.run_allowed_tests` with the result each produced.
//!
//! Guarantees: a change is written to disk (temporary file, then rename) before it is visible
//! or acknowledged; a failed write changes nothing. The file is read on first use, so a hub
//! whose file is damaged still starts (and its test tools answer `internal`, naming the file).
//! Only the adapters of `infra_access_skill` use the store; it is shared through
//! [`crate::context::HubContext`] so it survives adapter restarts.

use std::path::Path;

use mcp_shared::error::ToolError;
use serde::{Deserialize, Serialize};

use super::json_file::{Claim, JsonFile};

/// File name of the results under `state_dir`.
pub(crate) const RESULTS_FILE: &str = "test-results.json";
/// Results kept per test.
pub(crate) const KEEP_PER_TEST: usize = 50;
/// Idempotency keys kept (oldest forgotten first).
pub(crate) const KEEP_KEYS: usize = 1000;

/// One run of an allowed test, as returned and recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestRun {
    pub run_id: String,
    pub test: String,
    pub passed: bool,
    /// `None` when the process was killed by a signal (a timeout, for one).
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// RFC 3339.
    pub started_at: String,
    /// The last 4 KiB of stdout and stderr (interleaved as read), redacted.
    pub output_tail: String,
    /// Secrets replaced in `output_tail`.
    pub redactions: u64,
}

/// An idempotency key and the result of the call that first carried it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyRecord {
    tool: String,
    key: String,
    result: TestRun,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResultsFile {
    /// Oldest first.
    runs: Vec<TestRun>,
    /// Oldest first.
    idempotency: Vec<KeyRecord>,
}

/// The results store (one per hub process).
#[derive(Debug)]
pub(crate) struct TestResults {
    file: JsonFile<ResultsFile>,
}

impl TestResults {
    pub(crate) fn new(state_dir: &Path) -> TestResults {
        TestResults {
            file: JsonFile::new(state_dir.join(RESULTS_FILE), "test results"),
        }
    }

    /// The newest recorded run of `test`.
    pub(crate) fn last(&self, test: &str) -> Result<Option<TestRun>, ToolError> {
        self.file
            .read(|f| f.runs.iter().rev().find(|r| r.test == test).cloned())
    }

    /// Up to `limit` recorded runs (of `test`, or of every test), newest first.
    pub(crate) fn recent(
        &self,
        test: Option<&str>,
        limit: usize,
    ) -> Result<Vec<TestRun>, ToolError> {
        self.file.read(|f| {
            f.runs
                .iter()
                .rev()
                .filter(|r| test.is_none_or(|t| r.test == t))
                .take(limit)
                .cloned()
                .collect()
        })
    }

    /// The result recorded for `key` of `tool`, if any.
    pub(crate) fn replay(&self, tool: &str, key: &str) -> Result<Option<TestRun>, ToolError> {
        self.file.read(|f| {
            f.idempotency
                .iter()
                .rev()
                .find(|k| k.tool == tool && k.key == key)
                .map(|k| k.result.clone())
        })
    }

    /// Marks `key` of `tool` as in flight; `None` if a call with it is already running.
    pub(crate) fn claim(&self, tool: &str, key: &str) -> Option<Claim<'_>> {
        self.file.claim(tool, key)
    }

    /// Records `run` (and `key` of `tool` with it), writing the file before it is visible.
    pub(crate) fn record(&self, run: &TestRun, key: Option<(&str, &str)>) -> Result<(), ToolError> {
        self.file.change(|next| {
            next.runs.push(run.clone());
            let of_test = next.runs.iter().filter(|r| r.test == run.test).count();
            if of_test > KEEP_PER_TEST {
                let mut drop = of_test - KEEP_PER_TEST;
                next.runs.retain(|r| {
                    let gone = drop > 0 && r.test == run.test;
                    if gone {
                        drop -= 1;
                    }
                    !gone
                });
            }
            if let Some((tool, key)) = key {
                next.idempotency.push(KeyRecord {
                    tool: tool.to_owned(),
                    key: key.to_owned(),
                    result: run.clone(),
                });
                let over = next.idempotency.len().saturating_sub(KEEP_KEYS);
                next.idempotency.drain(..over);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_shared::error::ErrorCode;

    fn run(test: &str, i: usize) -> TestRun {
        TestRun {
            run_id: format!("r{i}"),
            test: test.into(),
            passed: true,
            exit_code: Some(0),
            timed_out: false,
            duration_ms: 1,
            started_at: "2026-01-01T00:00:00Z".into(),
            output_tail: String::new(),
            redactions: 0,
        }
    }

    #[test]
    fn keeps_the_last_runs_per_test_and_the_last_keys_across_a_reload() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = TestResults::new(dir.path());
        store.record(&run("other", 0), None).expect("record");
        for i in 1..=KEEP_PER_TEST + 5 {
            let key = format!("k{i}");
            store
                .record(&run("a", i), Some(("hub.run_allowed_tests", &key)))
                .expect("record");
        }
        let store = TestResults::new(dir.path());
        let a = store.recent(Some("a"), 100).expect("recent");
        assert_eq!(a.len(), KEEP_PER_TEST);
        assert_eq!(
            a[0].run_id,
            format!("r{}", KEEP_PER_TEST + 5),
            "newest first"
        );
        assert_eq!(
            store.recent(None, 100).expect("all").len(),
            KEEP_PER_TEST + 1
        );
        assert_eq!(
            store.last("other").expect("last").expect("kept").run_id,
            "r0"
        );
        let replay = store.replay("hub.run_allowed_tests", "k1").expect("replay");
        assert_eq!(replay.expect("key kept").run_id, "r1");
        assert!(
            store
                .replay("another.tool", "k1")
                .expect("replay")
                .is_none()
        );
        assert!(!dir.path().join(format!("{RESULTS_FILE}.tmp")).exists());
        let claim = store.claim("t", "k").expect("free");
        assert!(store.claim("t", "k").is_none(), "in flight");
        drop(claim);
        assert!(store.claim("t", "k").is_some(), "released");
    }

    #[test]
    fn a_damaged_file_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(RESULTS_FILE), "{not json").expect("write");
        let err = TestResults::new(dir.path()).last("a").expect_err("damaged");
        assert_eq!(err.code, ErrorCode::Internal);
        assert!(err.message.contains(RESULTS_FILE), "{err}");
    }
}
