//! `hub.get_runtime_summary`: machine and hub-process figures read from `/proc` and
//! `statvfs(2)` (Linux), with no extra dependency and no shell, plus the managed services
//! ([`crate::machine::services`]) with their state, pid, mode, restarts, RSS and CPU seconds.

use std::path::Path;

use mcp_shared::error::{ErrorCode, ToolError};
use serde_json::{Value, json};

use crate::context::HubContext;

pub(crate) async fn run(ctx: &HubContext) -> Result<Value, ToolError> {
    let state_dir = ctx.config.state_dir.clone();
    let hub_uptime = ctx.process.started.elapsed().as_secs();
    let mut v = tokio::task::spawn_blocking(move || summary(&state_dir, hub_uptime))
        .await
        .map_err(|e| ToolError::new(ErrorCode::Internal, format!("runtime summary task: {e}")))??;
    v["services"] = services(ctx);
    Ok(v)
}

/// The managed services: state, pid, mode, restarts, RSS, CPU seconds, last exit.
fn services(ctx: &HubContext) -> Value {
    Value::Array(
        ctx.machine
            .services
            .snapshot()
            .into_iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "state": s.state,
                    "pid": s.pid,
                    "mode": s.mode,
                    "restarts": s.restarts,
                    "rss_bytes": s.rss_bytes,
                    "cpu_seconds": s.cpu_seconds,
                    "started_at": s.started_at,
                    "last_exit": s.last_exit,
                    "error": s.error,
                })
            })
            .collect(),
    )
}

fn read(path: &str) -> Result<String, ToolError> {
    std::fs::read_to_string(path)
        .map_err(|e| ToolError::new(ErrorCode::Internal, format!("cannot read {path}: {e}")))
}

fn malformed(path: &str) -> ToolError {
    ToolError::new(ErrorCode::Internal, format!("unexpected format of {path}"))
}

/// The value in kB of `key` in a `/proc` "Key:   123 kB" file, in bytes.
fn kb_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

fn os_pretty_name() -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release")
        .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
        .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').to_owned())
}

fn summary(state_dir: &Path, hub_uptime_sec: u64) -> Result<Value, ToolError> {
    let uptime = read("/proc/uptime")?;
    let machine_uptime: f64 = uptime
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| malformed("/proc/uptime"))?;

    let loadavg = read("/proc/loadavg")?;
    let loads: Vec<f64> = loadavg
        .split_whitespace()
        .take(3)
        .filter_map(|s| s.parse().ok())
        .collect();
    let [one, five, fifteen] = loads[..] else {
        return Err(malformed("/proc/loadavg"));
    };

    let meminfo = read("/proc/meminfo")?;
    let mem_total = kb_field(&meminfo, "MemTotal").ok_or_else(|| malformed("/proc/meminfo"))?;
    let mem_available =
        kb_field(&meminfo, "MemAvailable").ok_or_else(|| malformed("/proc/meminfo"))?;

    let status = read("/proc/self/status")?;
    let rss = kb_field(&status, "VmRSS").ok_or_else(|| malformed("/proc/self/status"))?;

    let fs = rustix::fs::statvfs(state_dir).map_err(|e| {
        ToolError::new(
            ErrorCode::Internal,
            format!("statvfs of the state directory: {e}"),
        )
    })?;
    let block = if fs.f_frsize > 0 {
        fs.f_frsize
    } else {
        fs.f_bsize
    };

    let kernel = read("/proc/sys/kernel/ostype")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| std::env::consts::OS.to_owned());
    let kernel_release = read("/proc/sys/kernel/osrelease")?.trim().to_owned();
    let cpu_count = std::thread::available_parallelism().map_or(1, |n| n.get());

    Ok(json!({
        "machine_uptime_sec": machine_uptime.floor() as u64,
        "os": {
            "kernel": kernel,
            "kernel_release": kernel_release,
            "pretty_name": os_pretty_name(),
            "arch": std::env::consts::ARCH,
        },
        "cpu_count": cpu_count,
        "load_average": {"one": one, "five": five, "fifteen": fifteen},
        "memory": {"total_bytes": mem_total, "available_bytes": mem_available},
        "disk": {
            "filesystem_of": "state_dir",
            "total_bytes": fs.f_blocks.saturating_mul(block),
            "available_bytes": fs.f_bavail.saturating_mul(block),
        },
        "hub_process": {
            "pid": std::process::id(),
            "rss_bytes": rss,
            "uptime_sec": hub_uptime_sec,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_real() {
        let dir = tempfile::tempdir().expect("tempdir");
        let v = summary(dir.path(), 3).expect("summary");
        assert!(v["memory"]["total_bytes"].as_u64().expect("u64") > 0);
        assert!(
            v["memory"]["available_bytes"].as_u64().expect("u64")
                <= v["memory"]["total_bytes"].as_u64().expect("u64")
        );
        assert!(v["disk"]["total_bytes"].as_u64().expect("u64") > 0);
        assert!(v["hub_process"]["rss_bytes"].as_u64().expect("u64") > 1024 * 1024);
        assert!(v["cpu_count"].as_u64().expect("u64") >= 1);
        assert!(v["machine_uptime_sec"].as_u64().expect("u64") > 0);
        assert!(v["load_average"]["one"].as_f64().expect("f64") >= 0.0);
        assert!(!v["os"]["kernel_release"].as_str().expect("str").is_empty());
        assert_eq!(v["hub_process"]["uptime_sec"], 3);
    }
}
