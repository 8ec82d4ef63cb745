//! Installing a validated catalog: stage the namespace beside the destination and swap it in,
//! leaving the old tree and its sentinel byte for byte as they were on any failure.

use super::catalog::ValidCatalog;
use super::options::{InstallError, SENTINEL, SyncError, SyncOptions, SyncReport};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

// ---- installation ---------------------------------------------------------------------------

/// The sentinel's bytes: the catalog revision and what was installed, deterministic.
fn sentinel_bytes(namespace: &str, c: &ValidCatalog) -> Vec<u8> {
    let v = json!({
        "format": "mcp-root-skills-sentinel/1",
        "namespace": namespace,
        "owner_application": c.owner_application,
        "manifest_version": c.manifest_version,
        "manifest_sha256": c.manifest_sha256,
        "skills": c.skills,
    });
    let mut bytes = serde_json::to_vec_pretty(&v).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// Every regular file below `dir` as relative path → bytes (an absent dir is empty).
pub(super) fn read_tree(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, InstallError> {
    let mut out = BTreeMap::new();
    if !dir.exists() {
        return Ok(out);
    }
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, rel)) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let kind = entry.file_type()?;
            if kind.is_dir() {
                stack.push((entry.path(), child));
            } else {
                let bytes = if kind.is_file() {
                    std::fs::read(entry.path())?
                } else {
                    Vec::new()
                };
                out.insert(child, bytes);
            }
        }
    }
    Ok(out)
}

pub(super) fn install(
    opts: &SyncOptions,
    catalog: ValidCatalog,
    renewals: u32,
) -> Result<SyncReport, SyncError> {
    let ns_dir = opts.dest.join(&opts.namespace);
    let ierr = |path: &Path, reason: InstallError| SyncError::Install {
        path: path.display().to_string(),
        reason,
    };
    if let Ok(m) = std::fs::symlink_metadata(&ns_dir)
        && !m.is_dir()
    {
        return Err(ierr(&ns_dir, InstallError::NotADirectory));
    }
    let mut want: BTreeMap<String, Vec<u8>> = catalog
        .skills
        .iter()
        .map(|s| (s.path.clone(), s.text.clone().into_bytes()))
        .collect();
    want.insert(
        SENTINEL.to_string(),
        sentinel_bytes(&opts.namespace, &catalog),
    );
    let have = read_tree(&ns_dir).map_err(|e| ierr(&ns_dir, e))?;
    let removed: Vec<String> = have
        .keys()
        .filter(|k| !want.contains_key(*k))
        .cloned()
        .collect();
    let changed = have != want;
    let report = SyncReport {
        namespace: opts.namespace.clone(),
        dry_run: opts.dry_run,
        changed,
        catalog,
        removed,
        renewals,
    };
    if opts.dry_run || !changed {
        return Ok(report);
    }
    std::fs::create_dir_all(&opts.dest).map_err(|e| ierr(&opts.dest, e.into()))?;
    let tag = format!("{}-{}", std::process::id(), uuid::Uuid::now_v7().simple());
    let staging = opts.dest.join(format!(".{}.staging-{tag}", opts.namespace));
    let staged = (|| -> std::io::Result<()> {
        for (rel, bytes) in &want {
            let path = staging.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let mut f = std::fs::File::create(&path)?;
            std::io::Write::write_all(&mut f, bytes)?;
            f.sync_all()?;
        }
        Ok(())
    })();
    if let Err(e) = staged {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(ierr(&staging, e.into()));
    }
    if let Err(e) = swap_in(&staging, &ns_dir, &tag) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(ierr(&ns_dir, e));
    }
    Ok(report)
}

/// Puts `staging` at `target`: an atomic exchange where the kernel offers one, else the old
/// tree is renamed aside, the new one renamed in, and the old one renamed back on failure.
pub(super) fn swap_in(staging: &Path, target: &Path, tag: &str) -> Result<(), InstallError> {
    if !target.exists() {
        return Ok(std::fs::rename(staging, target)?);
    }
    #[cfg(target_os = "linux")]
    {
        if rustix::fs::renameat_with(
            rustix::fs::CWD,
            staging,
            rustix::fs::CWD,
            target,
            rustix::fs::RenameFlags::EXCHANGE,
        )
        .is_ok()
        {
            // `staging` now holds the old tree.
            let _ = std::fs::remove_dir_all(staging);
            return Ok(());
        }
    }
    let parent = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let backup = parent.join(format!(".{name}.backup-{tag}"));
    std::fs::rename(target, &backup).map_err(InstallError::MoveAside)?;
    if let Err(swap) = std::fs::rename(staging, target) {
        return Err(match std::fs::rename(&backup, target) {
            Ok(()) => InstallError::RolledBack(swap),
            Err(rollback) => InstallError::RollbackFailed {
                swap,
                rollback,
                backup,
            },
        });
    }
    let _ = std::fs::remove_dir_all(&backup);
    Ok(())
}
