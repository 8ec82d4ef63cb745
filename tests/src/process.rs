//! The one guard for a child process a test started (`mcp-root serve`, `mcp-hub run`, a
//! packaged daemon): it keeps the process's log path for failure messages and, when dropped,
//! ends the child and reaps it, so a failing test leaves nothing running.
//!
//! By default the drop is a SIGKILL; [`Proc::term_on_drop`] asks for SIGTERM first (a root
//! with a hub in-process stops the hub's managed services on SIGTERM). A guard dropped while
//! its test panics prints the last lines of the log, unless [`Proc::quiet`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A child process this test started, ended (and reaped) when dropped.
pub struct Proc {
    child: Child,
    name: String,
    log: Option<PathBuf>,
    term_grace: Option<Duration>,
    quiet: bool,
}

impl Proc {
    /// Spawns `cmd` with stdout discarded and stderr appended to `log` (a process started
    /// again with the same log keeps what it logged before).
    pub fn spawn(name: &str, cmd: &mut Command, log: impl Into<PathBuf>) -> Proc {
        let log = log.into();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap_or_else(|e| panic!("the log file {}: {e}", log.display()));
        let child = cmd
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Proc::adopt(name, child, Some(log))
    }

    /// Guards a child the caller spawned with stdio of its own; `log` is where its output
    /// goes, if anywhere.
    pub fn adopt(name: &str, child: Child, log: Option<PathBuf>) -> Proc {
        Proc {
            child,
            name: name.to_owned(),
            log,
            term_grace: None,
            quiet: false,
        }
    }

    /// On drop, SIGTERM first and wait up to `grace` before the SIGKILL.
    pub fn term_on_drop(mut self, grace: Duration) -> Proc {
        self.term_grace = Some(grace);
        self
    }

    /// Prints nothing when dropped in a panicking test (for a caller whose failure messages
    /// carry the logs already).
    pub fn quiet(mut self) -> Proc {
        self.quiet = true;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The child itself (to take a piped stdout, say).
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Its exit status, if it has exited.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends `sig` (`-STOP`, `-CONT`, `-TERM`, ...) with kill(1); whether it was delivered.
    pub fn signal(&self, sig: &str) -> bool {
        Command::new("kill")
            .arg(sig)
            .arg(self.child.id().to_string())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// SIGTERM, then waits up to `limit` without blocking the runtime; the exit status, or
    /// `None` if it still runs.
    pub async fn terminate(&mut self, limit: Duration) -> Option<ExitStatus> {
        self.signal("-TERM");
        let start = Instant::now();
        loop {
            if let Some(status) = self.try_wait() {
                return Some(status);
            }
            if start.elapsed() >= limit {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// [`Proc::terminate`] for code outside a runtime (it blocks the thread).
    pub fn terminate_blocking(&mut self, limit: Duration) -> Option<ExitStatus> {
        self.signal("-TERM");
        let start = Instant::now();
        loop {
            if let Some(status) = self.try_wait() {
                return Some(status);
            }
            if start.elapsed() >= limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Where its output goes, if the guard knows.
    pub fn log_path(&self) -> Option<&Path> {
        self.log.as_deref()
    }

    /// Everything it logged so far (empty without a log).
    pub fn log_text(&self) -> String {
        self.log
            .as_ref()
            .and_then(|l| std::fs::read_to_string(l).ok())
            .unwrap_or_default()
    }

    /// The last `n` lines of its log, for a failure's message.
    pub fn tail(&self, n: usize) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // A failing test shows what the process logged, and whether it was still running.
        if std::thread::panicking() && !self.quiet && self.log.is_some() {
            let status = self.child.try_wait();
            eprintln!(
                "--- {} ({status:?}), last lines of its log:\n{}",
                self.name,
                self.tail(40)
            );
        }
        if let Some(grace) = self.term_grace {
            let _ = self.terminate_blocking(grace);
        }
        self.kill();
    }
}
