//! The profiling mode: a leak on purpose, and the heap profiles that show where it is.
//!
//! `retain_request_history` keeps a record of every (simulated) request and never lets one
//! go: `--leak-kib-per-sec` (by default [`LEAK_KIB_PER_SEC`]) in a record every [`TICK`],
//! up to [`LEAK_CAP_BYTES`]. jemalloc samples
//! the heap (about one allocation per [`LG_SAMPLE`]-sized interval of bytes) and every
//! [`DUMP_EVERY`] the mode writes what it sampled as a gzipped pprof profile (through
//! `jemalloc_pprof`, with symbol names) to `<heap-dir>/heap.<pid>.<n>.pb.gz`, written to a
//! temporary name and renamed, keeping the newest [`KEEP`]. The hub's ProfileOps reads them
//! (the service's `heap_profiles`).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// jemalloc's options come from this variable (tikv-jemallocator's prefix), read once at its
/// first allocation.
const MALLOC_CONF: &str = "_RJEM_MALLOC_CONF";
/// Base 2 logarithm of the mean bytes between two sampled allocations (64 KiB).
const LG_SAMPLE: u32 = 16;
/// What the leak retains per second unless told.
pub(crate) const LEAK_KIB_PER_SEC: usize = 320;
/// How often it does.
const TICK: Duration = Duration::from_millis(100);
/// The leak stops growing here, so a forgotten demo does not take the machine.
const LEAK_CAP_BYTES: usize = 256 * 1024 * 1024;
/// How often a heap profile is written.
const DUMP_EVERY: Duration = Duration::from_secs(5);
/// Heap profiles of this process kept in the directory.
const KEEP: usize = 24;

/// Makes sure jemalloc samples the heap: when its options are not set, runs this program
/// again (the same process, by `exec`) with them.
pub(crate) fn ensure_sampling() -> anyhow::Result<()> {
    if std::env::var_os(MALLOC_CONF).is_some() {
        return Ok(());
    }
    let exe = std::env::current_exe()?;
    let err = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(
            MALLOC_CONF,
            format!("prof:true,prof_active:true,lg_prof_sample:{LG_SAMPLE}"),
        )
        .exec();
    Err(anyhow::anyhow!(
        "cannot restart with jemalloc's heap profiling on: {err}"
    ))
}

/// Starts the leak (`kib_per_sec`) and the heap profiles written into `dir`.
pub(crate) async fn start(dir: PathBuf, kib_per_sec: usize) -> anyhow::Result<()> {
    let per_tick = (kib_per_sec * 1024 / 10).max(8);
    tokio::fs::create_dir_all(&dir).await?;
    let ctl = jemalloc_pprof::PROF_CTL.as_ref().cloned().ok_or_else(|| {
        anyhow::anyhow!("jemalloc's heap profiling is off ({MALLOC_CONF} has no prof:true)")
    })?;
    // The first dump loads the binary's debug information to name frames (tens of MB kept
    // for the process's life): done once now, it is in every profile, not growth between two.
    let warm = ctl.clone();
    tokio::task::spawn_blocking(move || warm.blocking_lock().dump_pprof().map(|_| ())).await??;
    println!(
        "profiling: retaining {} KiB/s in retain_request_history; heap profiles every {} s in {}",
        per_tick * 10 / 1024,
        DUMP_EVERY.as_secs(),
        dir.display()
    );
    tokio::spawn(async move {
        let mut history = Vec::new();
        let mut tick = tokio::time::interval(TICK);
        for n in 0u64.. {
            tick.tick().await;
            if history.len() * per_tick < LEAK_CAP_BYTES {
                retain_request_history(&mut history, n, per_tick);
            }
        }
    });
    tokio::spawn(async move {
        let pid = std::process::id();
        for n in 1u64.. {
            tokio::time::sleep(DUMP_EVERY).await;
            let ctl = ctl.clone();
            let dir = dir.clone();
            let written = tokio::task::spawn_blocking(move || {
                let began = std::time::Instant::now();
                let pprof = ctl.blocking_lock().dump_pprof()?;
                write_profile(&dir, pid, n, &pprof)?;
                anyhow::Ok((pprof.len(), began.elapsed()))
            })
            .await;
            match written {
                Ok(Ok((bytes, took))) => println!(
                    "profiling: heap profile {n} written ({bytes} bytes in {} ms)",
                    took.as_millis()
                ),
                Ok(Err(e)) => eprintln!("profiling: heap profile {n} not written: {e:#}"),
                Err(e) => eprintln!("profiling: heap profile {n} not written: {e}"),
            }
        }
    });
    Ok(())
}

/// The leak: a record of request `n` (`bytes` long), kept forever.
#[inline(never)]
fn retain_request_history(history: &mut Vec<Box<[u8]>>, n: u64, bytes: usize) {
    // Every page written, so the record is resident as a real one would be.
    let record = vec![n.to_le_bytes()[0] | 1; bytes].into_boxed_slice();
    history.push(record);
}

/// Writes profile `n` of process `pid` (atomically) and removes its older ones past [`KEEP`].
fn write_profile(dir: &Path, pid: u32, n: u64, pprof: &[u8]) -> anyhow::Result<()> {
    let name = format!("heap.{pid}.{n}.pb.gz");
    let partial = dir.join(format!(".{name}.partial"));
    std::fs::write(&partial, pprof)?;
    std::fs::rename(&partial, dir.join(&name))?;
    if let Some(old) = n.checked_sub(KEEP as u64) {
        let _ = std::fs::remove_file(dir.join(format!("heap.{pid}.{old}.pb.gz")));
    }
    Ok(())
}
