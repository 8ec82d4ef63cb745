//! A program's process group: every program the hub runs for a call (an allowed test, a
//! health check's command, a command adapter, git) is started as the leader of a group of its
//! own (`process_group(0)`), and the whole group, whatever it spawned, is killed when the call
//! ends, times out or is cancelled.

/// Kills the process group led by `pid`.
pub(crate) fn kill(pid: Option<u32>) {
    let pid = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Kills the group led by its pid when dropped; `disarm` keeps it alive (the program ended
/// by itself and nothing of its group is left to stop).
pub(crate) struct GroupGuard(Option<u32>);

impl GroupGuard {
    pub(crate) fn new(pid: Option<u32>) -> GroupGuard {
        GroupGuard(pid)
    }

    pub(crate) fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill(self.0);
    }
}
