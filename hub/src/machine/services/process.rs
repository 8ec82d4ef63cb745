//! Figures of a service's process from `/proc` (RSS, CPU seconds) and signals to its process
//! group.

/// `VmRSS` of `pid` in bytes.
pub(crate) fn rss_bytes(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    kb_field(&text, "VmRSS")
}

/// The value in kB of `key` in a `/proc` "Key:   123 kB" text, in bytes.
pub(crate) fn kb_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// `utime + stime` of `pid`, in seconds.
pub(crate) fn cpu_seconds(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: fields follow the last `)`.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After `)`: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let ticks = rustix::param::clock_ticks_per_second().max(1);
    Some((utime + stime) as f64 / ticks as f64)
}

/// Sends `signal` to the process group led by `pid`.
pub(super) fn signal_group(pid: u32, signal: rustix::process::Signal) {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}
