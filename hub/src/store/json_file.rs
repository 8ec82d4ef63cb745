//! [`JsonFile`]: one typed JSON state file under `state_dir`, the store behind the write
//! ledger, the test results and the deploy history. It reads the file on first use (a
//! missing file is the default value, a damaged one an `internal` error naming it, so a hub
//! whose file is damaged still starts), serves reads from memory, writes every change to
//! disk through [`write_atomic`] before it becomes visible (a failed write changes nothing),
//! and claims idempotency keys while their call runs.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};

use mcp_shared::error::{ErrorCode, ToolError};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::state::write_atomic;

/// A typed JSON file: `T` as last written, loaded on first use.
#[derive(Debug)]
pub(crate) struct JsonFile<T> {
    path: PathBuf,
    /// What the file holds, as error messages name it (`the write ledger`).
    what: &'static str,
    /// Written indented (as the deploy history always was) rather than on one line.
    pretty: bool,
    loaded: Mutex<Option<T>>,
    in_flight: Mutex<HashSet<(String, String)>>,
}

/// Holds an idempotency key of a tool as in flight; released when dropped.
pub(crate) struct Claim<'a> {
    in_flight: &'a Mutex<HashSet<(String, String)>>,
    slot: (String, String),
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        lock(self.in_flight).remove(&self.slot);
    }
}

fn internal(message: String) -> ToolError {
    ToolError::new(ErrorCode::Internal, message)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T: Serialize + DeserializeOwned + Default + Clone> JsonFile<T> {
    /// The file at `path`, holding `what`, written on one line.
    pub(crate) fn new(path: PathBuf, what: &'static str) -> JsonFile<T> {
        JsonFile {
            path,
            what,
            pretty: false,
            loaded: Mutex::new(None),
            in_flight: Mutex::new(HashSet::new()),
        }
    }

    /// The same file, written indented.
    pub(crate) fn pretty(self) -> JsonFile<T> {
        JsonFile {
            pretty: true,
            ..self
        }
    }

    /// Runs `f` on the file's content (reading the file on first use).
    pub(crate) fn read<R>(&self, f: impl FnOnce(&T) -> R) -> Result<R, ToolError> {
        let mut guard = lock(&self.loaded);
        Ok(f(self.loaded(&mut guard)?))
    }

    /// Changes a copy of the content with `f`, writes it, and only then makes it the content;
    /// when the write fails nothing changes.
    pub(crate) fn change<R>(&self, f: impl FnOnce(&mut T) -> R) -> Result<R, ToolError> {
        let mut guard = lock(&self.loaded);
        let current = self.loaded(&mut guard)?;
        let mut next = current.clone();
        let out = f(&mut next);
        self.write(&next)?;
        *current = next;
        Ok(out)
    }

    /// Marks `key` of `tool` as in flight; `None` if a call with it is already running.
    pub(crate) fn claim(&self, tool: &str, key: &str) -> Option<Claim<'_>> {
        let slot = (tool.to_owned(), key.to_owned());
        // The guard is released before a claim exists (its drop takes the lock).
        let claimed = lock(&self.in_flight).insert(slot.clone());
        // Built only when claimed: a `Claim` made and dropped for a refused caller would
        // release the running call's slot (`then_some` builds its argument either way).
        claimed.then(|| Claim {
            in_flight: &self.in_flight,
            slot,
        })
    }

    /// The content in `guard`, read from disk first if it was not yet.
    fn loaded<'g>(&self, guard: &'g mut MutexGuard<'_, Option<T>>) -> Result<&'g mut T, ToolError> {
        if guard.is_none() {
            let path = &self.path;
            let what = self.what;
            let content = match std::fs::read_to_string(path) {
                Ok(text) => serde_json::from_str(&text).map_err(|e| {
                    internal(format!("{}: cannot parse {what}: {e}", path.display()))
                })?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => T::default(),
                Err(e) => {
                    return Err(internal(format!(
                        "{}: cannot read {what}: {e}",
                        path.display()
                    )));
                }
            };
            **guard = Some(content);
        }
        Ok(guard.get_or_insert_with(T::default))
    }

    /// Writes `content` atomically (temporary file, flushed, then renamed).
    fn write(&self, content: &T) -> Result<(), ToolError> {
        let what = self.what;
        let bytes = if self.pretty {
            serde_json::to_vec_pretty(content)
        } else {
            serde_json::to_vec(content)
        }
        .map_err(|e| internal(format!("cannot encode {what}: {e}")))?;
        write_atomic(&self.path, &bytes).map_err(|e| {
            internal(format!(
                "{}: cannot write {what}: {}",
                e.path.display(),
                e.source
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
    struct Counter {
        n: u32,
    }

    #[test]
    fn a_refused_claim_leaves_the_running_calls_claim_held() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file: JsonFile<Counter> = JsonFile::new(dir.path().join("c.json"), "the counter");
        let first = file.claim("tool", "k").expect("the first claim");
        assert!(
            file.claim("tool", "k").is_none(),
            "a second caller is refused"
        );
        assert!(
            file.claim("tool", "k").is_none(),
            "and the refusal did not release the first claim"
        );
        assert!(file.claim("tool", "other").is_some());
        drop(first);
        assert!(
            file.claim("tool", "k").is_some(),
            "released when the call ends"
        );
    }

    #[test]
    fn a_change_is_on_disk_before_it_is_visible_and_survives_a_reload() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("counter.json");
        let file: JsonFile<Counter> = JsonFile::new(path.clone(), "the counter");
        assert_eq!(file.read(|c| c.n).expect("missing is default"), 0);
        file.change(|c| c.n = 2).expect("change");
        assert_eq!(
            std::fs::read_to_string(&path).expect("on disk"),
            r#"{"n":2}"#
        );
        let again: JsonFile<Counter> = JsonFile::new(path.clone(), "the counter").pretty();
        assert_eq!(again.read(|c| c.n).expect("reloaded"), 2);
        again.change(|c| c.n = 3).expect("change");
        assert!(
            std::fs::read_to_string(&path)
                .expect("on disk")
                .contains("\n")
        );
    }

    #[test]
    fn a_failed_write_changes_nothing_and_a_damaged_file_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let parent = dir.path().join("sub");
        let file: JsonFile<Counter> = JsonFile::new(parent.join("c.json"), "the counter");
        assert_eq!(file.read(|c| c.n).expect("missing is default"), 0);
        // The parent directory cannot be created: a file is in its way.
        std::fs::write(&parent, "x").expect("write");
        let err = file.change(|c| c.n = 1).expect_err("parent is a file");
        assert!(err.message.contains("cannot write the counter"), "{err}");
        assert_eq!(file.read(|c| c.n).expect("unchanged"), 0);
        let damaged: JsonFile<Counter> = JsonFile::new(parent, "the counter");
        let err = damaged.read(|c| c.n).expect_err("damaged");
        assert!(err.message.contains("cannot parse the counter"), "{err}");
    }

    #[test]
    fn a_key_is_claimed_once_until_its_claim_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file: JsonFile<Counter> = JsonFile::new(dir.path().join("c.json"), "the counter");
        let claim = file.claim("t", "k").expect("free");
        assert!(file.claim("t", "k").is_none());
        assert!(file.claim("other", "k").is_some());
        drop(claim);
        assert!(file.claim("t", "k").is_some());
    }
}
