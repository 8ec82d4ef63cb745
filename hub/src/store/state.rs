//! Files under the hub's state directory: [`write_atomic`], the one way the hub replaces a
//! state file (the write ledger, test results, deploy history, skill lifecycle, ProfileOps
//! index and artifacts, applied NLU changes) so a crash leaves either the old or the new copy.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A step of [`write_atomic`] failed: `path` is the file or directory that step touched.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub(crate) struct WriteError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// Replaces `path` with `bytes`: creates the parent directory, writes `<path>.tmp`, flushes it
/// to disk (fsync), then renames it over `path`.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let at = |p: &Path| {
        let path = p.to_owned();
        move |source| WriteError { path, source }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(at(dir))?;
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    let mut f = std::fs::File::create(&tmp).map_err(at(&tmp))?;
    f.write_all(bytes).map_err(at(&tmp))?;
    f.sync_all().map_err(at(&tmp))?;
    std::fs::rename(&tmp, path).map_err(at(path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_copy() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub").join("f.json");
        write_atomic(&path, b"one").expect("first");
        write_atomic(&path, b"two").expect("second");
        assert_eq!(std::fs::read(&path).expect("read"), b"two");
        assert!(!dir.path().join("sub").join("f.json.tmp").exists());
    }

    #[test]
    fn names_the_path_that_failed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "x").expect("write");
        let err = write_atomic(&blocker.join("f.json"), b"x").expect_err("parent is a file");
        assert_eq!(err.path, blocker);
    }
}
