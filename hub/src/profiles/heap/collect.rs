//! A session's heap snapshots kept as artifacts, and summed up.
//!
//! A [`Keeper`] follows one running session: each [`Keeper::collect`] (the sampler's, about
//! once a second, and a last one when the session ends) finds the files the service wrote
//! into `heap_profiles.dir` since the session started, reads each new one, redacts its paths
//! and keeps it in the profiles directory as a `heap_snapshot` artifact (size and SHA-256).
//! A session keeps its first snapshot and the newest ones, `heap_profiles.keep` in all. The
//! first and the last kept are diffed into the session's [`HeapSummary`], with RSS over the
//! same interval.
//!
//! Skipped, and named with the reason in the summary: a file named `heap.<pid>.…` or
//! `jeprof.<pid>.…` of another process, one larger than `max_bytes`, one that does not read
//! as a heap profile (tried again if it changes: the service may still be writing it), one
//! that could not be kept (a full disk). Hidden files (`.name`, a writer's temporary) are
//! not snapshots. Only file names leave the machine, never the directory.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use mcp_shared::profiling::{ArtifactKind, ArtifactMeta, HeapSummary};
use sha2::{Digest, Sha256};

use super::{HeapError, Snapshot, diff, heaptrack, pprof};
use crate::config::{HeapFormat, HeapProfilesConfig};
use crate::profiles::sample::Sample;

/// Most skipped files a summary names.
const MAX_SKIPPED: usize = 16;
/// How often a heaptrack trace is snapshot while the session runs.
const TRACE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Why a snapshot file was not kept (named with its file in the summary's `skipped`).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum CollectError {
    #[error("written by process {writer}, not the session's {pid}")]
    OtherProcess { writer: u32, pid: u32 },
    #[error("{size} bytes, over heap_profiles.max_bytes ({max})")]
    TooLarge { size: u64, max: u64 },
    #[error("cannot be read: {0}")]
    Read(Arc<std::io::Error>),
    #[error(transparent)]
    Heap(#[from] HeapError),
    /// The artifact could not be written (a full disk).
    #[error("could not be kept: {0}")]
    Keep(Arc<std::io::Error>),
}

/// Why a session has no heap summary.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum HeapSummaryError {
    #[error("the heap profile directory cannot be read: {0}")]
    Directory(Arc<std::io::Error>),
    #[error("no heap snapshot was written while the session ran")]
    NoSnapshot,
    /// Every file was skipped; the summary's `skipped` lines (`<file>: <why>`).
    #[error("no usable heap snapshot: {}", .0.join("; "))]
    NoneUsable(Vec<String>),
    #[error("{name}: cannot be read: {error}")]
    Unreadable {
        name: String,
        error: Arc<std::io::Error>,
    },
    #[error("{name}: {error}")]
    Unusable { name: String, error: HeapError },
}

/// A snapshot file found in the service's directory.
struct Found {
    path: PathBuf,
    name: String,
    modified: SystemTime,
    size: u64,
}

/// A snapshot kept as an artifact.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    pub(crate) meta: ArtifactMeta,
    /// The artifact's file in the profiles directory.
    pub(crate) path: PathBuf,
    /// When the service wrote it.
    pub(crate) written: SystemTime,
}

/// The heap snapshots of one running session.
#[derive(Debug, Clone)]
pub(crate) struct Keeper {
    pub(crate) cfg: HeapProfilesConfig,
    pid: Option<u32>,
    since: SystemTime,
    /// Files looked at, with the size and time they had then.
    seen: HashMap<String, (u64, SystemTime)>,
    pub(crate) kept: Vec<Kept>,
    /// Files not kept, and why.
    skipped: BTreeMap<String, CollectError>,
    /// Why the directory could not be read, if it could not.
    unreadable: Option<Arc<std::io::Error>>,
    /// When a heaptrack trace was last snapshot.
    traced: Option<std::time::Instant>,
    /// The summary of what is kept now, once [`Keeper::refresh`] made it (cleared by a
    /// collection that changed anything): readers of a running session take it as it is.
    pub(crate) so_far: Option<Result<HeapSummary, HeapSummaryError>>,
}

/// The process a snapshot file's name says wrote it.
fn writer_pid(name: &str) -> Option<u32> {
    let mut parts = name.split('.');
    let prefix = parts.next()?;
    if !matches!(prefix, "heap" | "jeprof" | "heaptrack") {
        return None;
    }
    parts.next()?.parse().ok()
}

/// The snapshot files in `dir` modified at or after `since`, oldest first.
fn list(dir: &Path, since: SystemTime) -> std::io::Result<Vec<Found>> {
    let entries = std::fs::read_dir(dir)?;
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(meta) = entry.metadata() else { continue };
        let Ok(modified) = meta.modified() else {
            continue;
        };
        if name.starts_with('.') || !meta.is_file() || modified < since {
            continue;
        }
        found.push(Found {
            path: entry.path(),
            name,
            modified,
            size: meta.len(),
        });
    }
    found.sort_by(|a, b| {
        a.modified
            .cmp(&b.modified)
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(found)
}

fn rfc3339(t: SystemTime) -> String {
    let ms = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    mcp_shared::time::format(mcp_shared::time::from_unix_ms(ms))
}

/// Reads a kept snapshot.
fn read(k: &Kept, format: HeapFormat) -> Result<Snapshot, HeapSummaryError> {
    let name = || k.meta.snapshot.clone().unwrap_or_default();
    let bytes = std::fs::read(&k.path).map_err(|e| HeapSummaryError::Unreadable {
        name: name(),
        error: Arc::new(e),
    })?;
    match format {
        HeapFormat::Pprof => pprof::read(&bytes),
        HeapFormat::Heaptrack => heaptrack::read(&k.path),
    }
    .map_err(|error| HeapSummaryError::Unusable {
        name: name(),
        error,
    })
}

impl Keeper {
    /// Follows the snapshots process `pid` writes from `since` (the session's start) on.
    pub(crate) fn new(cfg: HeapProfilesConfig, pid: Option<u32>, since: SystemTime) -> Keeper {
        Keeper {
            cfg,
            pid,
            since,
            seen: HashMap::new(),
            kept: Vec::new(),
            skipped: BTreeMap::new(),
            unreadable: None,
            traced: None,
            so_far: None,
        }
    }

    /// What a collection may change, to tell whether the summary so far still holds.
    fn state(&self) -> (Option<String>, usize, usize, Option<String>) {
        (
            self.kept.last().map(|k| k.meta.artifact_id.clone()),
            self.kept.len(),
            self.skipped.len(),
            self.unreadable.as_ref().map(ToString::to_string),
        )
    }

    /// Makes the summary so far (see [`Keeper::so_far`]) when a collection changed it.
    pub(crate) fn refresh(&mut self, started: SystemTime, samples: &[Sample]) {
        if self.so_far.is_none() {
            self.so_far = Some(self.summary(started, samples));
        }
    }

    /// Keeps the snapshots written since the last call as artifacts of `session_id` (each
    /// file named by `file_of`); drops kept ones past `keep`. `last`: the session is
    /// ending (a heaptrack trace is snapshot now, whenever the last one was).
    pub(crate) fn collect(
        &mut self,
        session_id: &str,
        service: &str,
        last: bool,
        file_of: impl Fn(&ArtifactMeta) -> PathBuf,
    ) {
        let before = self.state();
        self.collect_new(session_id, service, last, file_of);
        if self.state() != before {
            self.so_far = None;
        }
    }

    fn collect_new(
        &mut self,
        session_id: &str,
        service: &str,
        last: bool,
        file_of: impl Fn(&ArtifactMeta) -> PathBuf,
    ) {
        let found = match list(&self.cfg.dir, self.since) {
            Ok(found) => found,
            Err(why) => {
                self.unreadable = Some(Arc::new(why));
                return;
            }
        };
        self.unreadable = None;
        let mut fresh = Vec::new();
        for f in found {
            if self.seen.get(&f.name) == Some(&(f.size, f.modified)) {
                continue;
            }
            if let Err(why) = self.admit(&f) {
                self.seen.insert(f.name.clone(), (f.size, f.modified));
                self.skipped.insert(f.name.clone(), why);
                continue;
            }
            fresh.push(f);
        }
        let due = |traced: Option<std::time::Instant>| {
            last || traced.is_none_or(|t| t.elapsed() >= TRACE_EVERY)
        };
        if self.cfg.format == HeapFormat::Heaptrack {
            // One trace grows for the whole run: its newest state, every few seconds.
            fresh.drain(..fresh.len().saturating_sub(1));
            if !due(self.traced) {
                fresh.clear();
            }
        }
        for f in fresh {
            self.seen.insert(f.name.clone(), (f.size, f.modified));
            let kept = self.stored_form(&f).and_then(|(name, bytes)| {
                self.store(name, &f, bytes, session_id, service, &file_of)
            });
            match kept {
                Ok(kept) => {
                    self.skipped.remove(&f.name);
                    self.kept.push(kept);
                    self.traced = Some(std::time::Instant::now());
                }
                Err(why) => {
                    self.skipped.insert(f.name.clone(), why);
                }
            }
        }
        let most = usize::try_from(self.cfg.keep).unwrap_or(usize::MAX).max(2);
        while self.kept.len() > most {
            // The first stays (the session's baseline); the oldest after it goes.
            let gone = self.kept.remove(1);
            let _ = std::fs::remove_file(&gone.path);
        }
    }

    /// Why a file is not one of the session's snapshots, if it is not.
    fn admit(&self, f: &Found) -> Result<(), CollectError> {
        if let (Some(writer), Some(pid)) = (writer_pid(&f.name), self.pid)
            && writer != pid
        {
            return Err(CollectError::OtherProcess { writer, pid });
        }
        self.within_max(f.size)
    }

    /// Whether `size` bytes are within `heap_profiles.max_bytes`.
    fn within_max(&self, size: u64) -> Result<(), CollectError> {
        let max = self.cfg.max_bytes;
        if size > max {
            return Err(CollectError::TooLarge { size, max });
        }
        Ok(())
    }

    /// A snapshot file read, checked and redacted: the kept snapshot's name and bytes.
    fn stored_form(&self, f: &Found) -> Result<(String, Vec<u8>), CollectError> {
        let bytes = std::fs::read(&f.path).map_err(|e| CollectError::Read(Arc::new(e)))?;
        self.within_max(bytes.len() as u64)?;
        match self.cfg.format {
            HeapFormat::Pprof => {
                let redacted = pprof::redact(&bytes, &self.cfg.keep_paths)?;
                Ok((f.name.clone(), redacted))
            }
            HeapFormat::Heaptrack => {
                let data = heaptrack::snapshot(&bytes, &self.cfg.keep_paths)?;
                let stem = f.name.strip_suffix(".raw").unwrap_or(&f.name);
                Ok((format!("{stem}.{}.gz", self.kept.len() + 1), data))
            }
        }
    }

    /// Stores `bytes` (snapshot `name`, from file `f`) as an artifact.
    fn store(
        &self,
        name: String,
        f: &Found,
        bytes: Vec<u8>,
        session_id: &str,
        service: &str,
        file_of: &impl Fn(&ArtifactMeta) -> PathBuf,
    ) -> Result<Kept, CollectError> {
        let meta = ArtifactMeta {
            artifact_id: uuid::Uuid::now_v7().to_string(),
            session_id: session_id.to_owned(),
            service: service.to_owned(),
            created_at: rfc3339(SystemTime::now()),
            size_bytes: bytes.len() as u64,
            sha256: hex::encode(Sha256::digest(&bytes)),
            kind: ArtifactKind::HeapSnapshot,
            format: Some(self.cfg.format.as_str().to_owned()),
            snapshot: Some(name),
        };
        let path = file_of(&meta);
        crate::store::state::write_atomic(&path, &bytes)
            .map_err(|e| CollectError::Keep(Arc::new(e.source)))?;
        Ok(Kept {
            meta,
            path,
            written: f.modified,
        })
    }

    /// Files not kept, and why (at most [`MAX_SKIPPED`]).
    fn skipped(&self) -> Vec<String> {
        self.skipped
            .iter()
            .take(MAX_SKIPPED)
            .map(|(name, why)| format!("{name}: {why}"))
            .collect()
    }

    /// The summary of the kept snapshots, with RSS from `samples` (taken from the session's
    /// start, `started`); `Err` says why there is none.
    pub(crate) fn summary(
        &self,
        started: SystemTime,
        samples: &[Sample],
    ) -> Result<HeapSummary, HeapSummaryError> {
        let skipped = self.skipped();
        let Some(last) = self.kept.last() else {
            return Err(if let Some(why) = &self.unreadable {
                HeapSummaryError::Directory(why.clone())
            } else if skipped.is_empty() {
                HeapSummaryError::NoSnapshot
            } else {
                HeapSummaryError::NoneUsable(skipped)
            });
        };
        let first = (self.kept.len() > 1).then(|| &self.kept[0]);
        let after = read(last, self.cfg.format)?;
        let before = first.map(|f| read(f, self.cfg.format)).transpose()?;
        let top_sites = diff(before.as_ref(), &after);
        let rss_at = |t: SystemTime, last: bool| {
            let ms = t
                .duration_since(started)
                .map_or(0, |d| d.as_millis() as u64);
            let mut within = samples
                .iter()
                .filter(|s| if last { s.t_ms <= ms } else { s.t_ms >= ms });
            if last {
                within.next_back()
            } else {
                within.next()
            }
            .map(|s| s.rss_bytes)
        };
        Ok(HeapSummary {
            format: self.cfg.format.as_str().to_owned(),
            from_snapshot: first.and_then(|f| f.meta.snapshot.clone()),
            to_snapshot: last.meta.snapshot.clone().unwrap_or_default(),
            from_taken_at: first.map(|f| rfc3339(f.written)),
            to_taken_at: rfc3339(last.written),
            from_artifact_id: first.map(|f| f.meta.artifact_id.clone()),
            to_artifact_id: Some(last.meta.artifact_id.clone()),
            snapshots_kept: u32::try_from(self.kept.len()).unwrap_or(u32::MAX),
            skipped,
            heap_bytes: after.total.bytes,
            growth_bytes: after.total.bytes - before.as_ref().map_or(0, |b| b.total.bytes),
            growth_objects: (after.has_objects && before.as_ref().is_none_or(|b| b.has_objects))
                .then(|| after.total.objects - before.as_ref().map_or(0, |b| b.total.objects)),
            symbolized: after.symbolized,
            top_sites,
            rss_from_bytes: rss_at(first.map_or(started, |f| f.written), false),
            rss_to_bytes: rss_at(last.written, true),
        })
    }
}

/// The summary of the snapshots in `cfg.dir` (of process `pid` only, when given) as a
/// session would make it, offline: each kept into `scratch` (which the caller removes), the
/// first and the last diffed. `mcp-hub heap summarize`.
pub(crate) fn summarize_dir(
    cfg: HeapProfilesConfig,
    pid: Option<u32>,
    scratch: &Path,
) -> Result<HeapSummary, HeapSummaryError> {
    let mut keeper = Keeper::new(cfg, pid, SystemTime::UNIX_EPOCH);
    keeper.collect("offline", "offline", true, |m| {
        scratch.join(super::snapshot_file_name(m))
    });
    keeper.summary(SystemTime::UNIX_EPOCH, &[])
}
