//! `hub.get_capability_usage_summary`: per-tool usage computed from the hub's activity ring
//! ([`crate::context::Stores::activity`]). Takes no arguments. Answer: `{"since": RFC 3339,
//! "tools": [{"tool_id", "calls", "ok", "errors", "refused", "error_rate", "p50_ms",
//! "p99_ms"}]}`, tools sorted by id. `since` is the oldest retained call's start, or the hub's
//! start when the ring is empty. `error_rate` is `(errors + refused) / calls`; the percentiles are
//! nearest-rank over the durations of all of the tool's retained calls.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::context::HubContext;
use crate::store::activity::ActivityStatus;

#[derive(Default)]
struct Usage {
    ok: u64,
    errors: u64,
    refused: u64,
    durations: Vec<u64>,
}

/// Nearest-rank percentile (`q` in 0..=100) of sorted values; 0 for none.
pub(crate) fn percentile(sorted: &[u64], q: u64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let n = sorted.len() as u64;
    // rank = ceil(q/100 * n), at least 1.
    let rank = (q * n).div_ceil(100).max(1);
    let index = usize::try_from(rank - 1).unwrap_or(usize::MAX);
    sorted[index.min(sorted.len() - 1)]
}

pub(crate) fn run(ctx: &HubContext) -> Value {
    let entries = ctx.stores.activity.snapshot();
    let since = entries
        .iter()
        .map(|e| e.started_at)
        .min()
        .unwrap_or(ctx.process.started_at);
    let mut by_tool: BTreeMap<String, Usage> = BTreeMap::new();
    for e in entries {
        let u = by_tool.entry(e.tool_id).or_default();
        match e.status {
            ActivityStatus::Ok => u.ok += 1,
            ActivityStatus::Error => u.errors += 1,
            ActivityStatus::Refused => u.refused += 1,
        }
        u.durations.push(e.duration_ms);
    }
    let tools: Vec<Value> = by_tool
        .into_iter()
        .map(|(tool_id, mut u)| {
            u.durations.sort_unstable();
            let calls = u.ok + u.errors + u.refused;
            let error_rate = if calls == 0 {
                0.0
            } else {
                (u.errors + u.refused) as f64 / calls as f64
            };
            json!({
                "tool_id": tool_id,
                "calls": calls,
                "ok": u.ok,
                "errors": u.errors,
                "refused": u.refused,
                "error_rate": error_rate,
                "p50_ms": percentile(&u.durations, 50),
                "p99_ms": percentile(&u.durations, 99),
            })
        })
        .collect();
    json!({
        "since": mcp_shared::time::format(since),
        "tools": tools,
    })
}
