//! A session's heap snapshots: the files its service wrote into `heap_profiles.dir` while the
//! session ran (modified at or after its start), oldest first. The first and the last are
//! read and diffed into the session's [`HeapSummary`], with RSS over the same interval.
//!
//! A file named `heap.<pid>.…` or `jeprof.<pid>.…` (jemalloc's and the demo's naming) says
//! which process wrote it: one of another process is skipped, and so is one larger than
//! `max_bytes`; the summary lists what it skipped. Only file names leave the machine, never
//! the directory.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use mcp_shared::profiling::HeapSummary;

use super::{Snapshot, diff, pprof};
use crate::config::{HeapFormat, HeapProfilesConfig};
use crate::profiles::sample::Sample;

/// Most skipped files a summary names.
const MAX_SKIPPED: usize = 16;

/// A snapshot file found.
struct Found {
    path: PathBuf,
    name: String,
    modified: SystemTime,
    size: u64,
}

/// The process a snapshot file's name says wrote it.
fn writer_pid(name: &str) -> Option<u32> {
    let mut parts = name.split('.');
    let prefix = parts.next()?;
    if !matches!(prefix, "heap" | "jeprof") {
        return None;
    }
    parts.next()?.parse().ok()
}

/// The snapshot files in `dir` modified at or after `since`, oldest first.
fn list(dir: &Path, since: SystemTime) -> Result<Vec<Found>, String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("the heap profile directory cannot be read: {e}"))?;
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        let Ok(modified) = meta.modified() else {
            continue;
        };
        if !meta.is_file() || modified < since {
            continue;
        }
        found.push(Found {
            path: entry.path(),
            name: entry.file_name().to_string_lossy().into_owned(),
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

/// Reads one snapshot file.
fn read(f: &Found, format: HeapFormat) -> Result<Snapshot, String> {
    let bytes = std::fs::read(&f.path).map_err(|e| format!("{}: cannot be read: {e}", f.name))?;
    match format {
        HeapFormat::Pprof => pprof::read(&bytes).map_err(|e| format!("{}: {e}", f.name)),
    }
}

/// The summary of the snapshots `pid` wrote since `started` (the session's start), with RSS
/// from `samples` over the same interval; `Err` says why there is none.
pub(crate) fn summarize(
    cfg: &HeapProfilesConfig,
    pid: Option<u32>,
    started: SystemTime,
    samples: &[Sample],
) -> Result<HeapSummary, String> {
    let mut skipped = Vec::new();
    let mine: Vec<Found> = list(&cfg.dir, started)?
        .into_iter()
        .filter(|f| {
            if let (Some(writer), Some(pid)) = (writer_pid(&f.name), pid)
                && writer != pid
            {
                skipped.push(format!(
                    "{}: written by process {writer}, not the session's {pid}",
                    f.name
                ));
                return false;
            }
            if f.size > cfg.max_bytes {
                skipped.push(format!(
                    "{}: {} bytes, over heap_profiles.max_bytes ({})",
                    f.name, f.size, cfg.max_bytes
                ));
                return false;
            }
            true
        })
        .collect();
    skipped.truncate(MAX_SKIPPED);
    let Some(last) = mine.last() else {
        let why = if skipped.is_empty() {
            "no heap snapshot was written while the session ran".to_owned()
        } else {
            format!("no usable heap snapshot: {}", skipped.join("; "))
        };
        return Err(why);
    };
    let first = (mine.len() > 1).then(|| &mine[0]);
    let after = read(last, cfg.format)?;
    let before = first.map(|f| read(f, cfg.format)).transpose()?;
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
        format: cfg.format.as_str().to_owned(),
        from_snapshot: first.map(|f| f.name.clone()),
        to_snapshot: last.name.clone(),
        from_taken_at: first.map(|f| rfc3339(f.modified)),
        to_taken_at: rfc3339(last.modified),
        skipped,
        heap_bytes: after.total.bytes,
        growth_bytes: after.total.bytes - before.as_ref().map_or(0, |b| b.total.bytes),
        growth_objects: (after.has_objects && before.as_ref().is_none_or(|b| b.has_objects))
            .then(|| after.total.objects - before.as_ref().map_or(0, |b| b.total.objects)),
        symbolized: after.symbolized,
        top_sites,
        rss_from_bytes: rss_at(first.map_or(started, |f| f.modified), false),
        rss_to_bytes: rss_at(last.modified, true),
    })
}
