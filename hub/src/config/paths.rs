//! Paths in the configuration: made absolute, resolved through symbolic links, checked for
//! `..`.

use std::path::{Component, Path, PathBuf};

/// `path` made absolute against the current directory (lexically; nothing is resolved).
pub(super) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// `path` with its longest existing ancestor resolved (symbolic links followed) and the rest
/// appended as written.
pub(super) fn resolved(path: &Path) -> PathBuf {
    for ancestor in path.ancestors() {
        if let Ok(real) = ancestor.canonicalize() {
            let rest = path.strip_prefix(ancestor).unwrap_or(Path::new(""));
            return real.join(rest);
        }
    }
    path.to_owned()
}

pub(super) fn has_parent_component(path: &Path) -> bool {
    path.components().any(|c| c == Component::ParentDir)
}
