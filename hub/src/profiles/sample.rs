//! Memory samples of a process (`/proc/<pid>/smaps_rollup`, else `/proc/<pid>/status`) and
//! the growth over a session's window.

use serde::{Deserialize, Serialize};

use crate::machine::services::kb_field;
pub(crate) use mcp_shared::profiling::Growth;

/// One memory sample of a process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Sample {
    /// Milliseconds since the session started.
    pub t_ms: u64,
    pub rss_bytes: u64,
    /// `None` when only `/proc/<pid>/status` could be read.
    pub pss_bytes: Option<u64>,
    pub anon_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
    /// `smaps_rollup` or `status`.
    pub source: String,
}

/// Reads one sample of `pid` (`None` once the process is gone).
pub(crate) fn sample(pid: u32, t_ms: u64) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    if let Ok(rollup) = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        && let Some(rss) = kb_field(&rollup, "Rss")
    {
        return Some(Sample {
            t_ms,
            rss_bytes: rss,
            pss_bytes: kb_field(&rollup, "Pss"),
            anon_bytes: kb_field(&rollup, "Anonymous"),
            swap_bytes: kb_field(&rollup, "Swap"),
            source: "smaps_rollup".into(),
        });
    }
    Some(Sample {
        t_ms,
        rss_bytes: kb_field(&status, "VmRSS")?,
        pss_bytes: None,
        anon_bytes: kb_field(&status, "RssAnon"),
        swap_bytes: kb_field(&status, "VmSwap"),
        source: "status".into(),
    })
}

/// Growth of `samples` (`None` when there are none).
pub(crate) fn growth(samples: &[Sample]) -> Option<Growth> {
    let first = samples.first()?;
    let last = samples.last()?;
    let peak = samples.iter().map(|s| s.rss_bytes).max()?;
    let growth_bytes = i64::try_from(last.rss_bytes).unwrap_or(i64::MAX)
        - i64::try_from(first.rss_bytes).unwrap_or(i64::MAX);
    let growth_percent =
        (first.rss_bytes > 0).then(|| growth_bytes as f64 * 100.0 / first.rss_bytes as f64);
    let slope = if samples.len() >= 2 {
        let n = samples.len() as f64;
        let xs = samples.iter().map(|s| s.t_ms as f64 / 1000.0);
        let mean_x = xs.clone().sum::<f64>() / n;
        let mean_y = samples.iter().map(|s| s.rss_bytes as f64).sum::<f64>() / n;
        let (mut num, mut den) = (0.0, 0.0);
        for (x, s) in xs.zip(samples) {
            num += (x - mean_x) * (s.rss_bytes as f64 - mean_y);
            den += (x - mean_x) * (x - mean_x);
        }
        (den > 0.0).then(|| num / den)
    } else {
        None
    };
    Some(Growth {
        start_rss_bytes: first.rss_bytes,
        end_rss_bytes: last.rss_bytes,
        peak_rss_bytes: peak,
        growth_bytes,
        growth_percent,
        slope_bytes_per_sec: slope,
    })
}
