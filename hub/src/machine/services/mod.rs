//! Managed services: the long-running programs of `[[services]]` that the hub starts,
//! supervises and restarts on request.
//!
//! [`Services`] (in [`crate::context::Machine::services`]) holds the service table that
//! readers (`hub.get_runtime_summary`, `hub.run_healthchecks`, ProfileOps) snapshot without
//! waiting, and a handle to the `ServiceSupervisor` ractor actor that owns every control
//! action. The hub spawns the actor at start (`Services::start`: autostart services are
//! started then) and stops it at shutdown ([`Services::stop`]: every service is stopped, no
//! process is left behind).
//!
//! - Each service runs as a child process without a shell (`argv`, or `profiling_argv` in
//!   profiling mode), in its own process group (`process_group(0)`, `kill_on_drop`), with
//!   stdin closed and stdout and stderr appended as they come to its log file; past
//!   `log_max_bytes` the file is moved to `<log_file>.1` (replacing it) and started afresh,
//!   so at most twice the cap is on disk. The hub writes the raw bytes; whatever reads them
//!   back (`hub.get_logs`) redacts before anything leaves the hub.
//! - Stop: SIGTERM to the process group, up to `stop_timeout_ms` for the leader to exit,
//!   then SIGKILL to the group. When a leader exits (stopped or by itself) whatever is left of
//!   its group is killed.
//! - States: `starting`, `running`, `exited` (ended by itself; the exit status is kept),
//!   `stopped` (stopped by the hub, or never started), `failed` (could not be started; the
//!   reason is kept). A service that exits by itself is not restarted: only an explicit
//!   restart starts it again.
//! - Figures: RSS from `/proc/<pid>/status` (`VmRSS`) and CPU seconds from `/proc/<pid>/stat`
//!   (`utime + stime` over the clock tick rate), of the group leader.
//!
//! Guarantees: control actions (restart, stop) are serialised by the actor, so two restarts
//! of a service never interleave; the table is updated before a restart is answered, so a
//! snapshot taken after a restart shows the new pid.

mod capped_log;
mod process;
pub(crate) mod supervisor;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::time::OffsetDateTime;
use ractor::ActorRef;
use ractor::rpc::CallResult;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::config::{HubConfig, ServiceConfig};

pub(crate) use capped_log::CappedLog;
pub(crate) use mcp_shared::profiling::Mode;
pub(crate) use process::{cpu_seconds, kb_field, rss_bytes};
pub(crate) use supervisor::{Msg, ServiceSupervisor, SupervisorArgs};

/// How long to wait for a group's leader to go after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Where a service is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceState {
    Starting,
    Running,
    Exited,
    Stopped,
    Failed,
}

impl ServiceState {
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceState::Starting => "starting",
            ServiceState::Running => "running",
            ServiceState::Exited => "exited",
            ServiceState::Stopped => "stopped",
            ServiceState::Failed => "failed",
        }
    }
}

/// How a service's process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExitInfo {
    /// Exit status, when it exited normally.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// RFC 3339.
    pub at: String,
}

/// One service as readers see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServiceSnapshot {
    pub name: String,
    pub state: ServiceState,
    /// Of the running process (the leader of its process group).
    pub pid: Option<u32>,
    pub mode: Mode,
    /// Explicit restarts since the hub started.
    pub restarts: u64,
    pub rss_bytes: Option<u64>,
    pub cpu_seconds: Option<f64>,
    /// RFC 3339, of the running process.
    pub started_at: Option<String>,
    pub last_exit: Option<ExitInfo>,
    /// Why the last start failed (state `failed`).
    pub error: Option<String>,
}

/// How a running service was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopOutcome {
    /// It was not running.
    NotRunning,
    /// It exited after SIGTERM.
    Terminated,
    /// It needed SIGKILL.
    Killed,
}

/// What a restart did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestartOutcome {
    pub service: String,
    pub old_pid: Option<u32>,
    pub new_pid: u32,
    pub stopped: StopOutcome,
    pub state: ServiceState,
    pub mode: Mode,
    pub restarts: u64,
    /// RFC 3339.
    pub started_at: String,
}

/// One row of the table.
struct Entry {
    config: ServiceConfig,
    log_path: PathBuf,
    state: ServiceState,
    pid: Option<u32>,
    mode: Mode,
    restarts: u64,
    started_at: Option<OffsetDateTime>,
    last_exit: Option<ExitInfo>,
    error: Option<String>,
    /// Bumped at every start; an exit report of an older process is ignored.
    generation: u64,
    /// Set while the hub stops the process (its exit is then `stopped`, not `exited`).
    stopping: bool,
    /// Turns true when the current process has exited and the table says so.
    exited: Option<watch::Receiver<bool>>,
}

/// The table shared by readers and the supervisor.
struct Table {
    entries: Mutex<Vec<Entry>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn unknown(name: &str, entries: &[Entry]) -> ToolError {
    let names: Vec<String> = entries
        .iter()
        .map(|e| format!("`{}`", e.config.name))
        .collect();
    let known = if names.is_empty() {
        "none are configured on this hub".to_owned()
    } else {
        format!("services: {}", names.join(", "))
    };
    ToolError::new(
        ErrorCode::InvalidArguments,
        format!("`{name}` is not a managed service; {known}"),
    )
}

impl Table {
    fn with<R>(&self, name: &str, f: impl FnOnce(&mut Entry) -> R) -> Result<R, ToolError> {
        let mut entries = lock(&self.entries);
        if let Some(e) = entries.iter_mut().find(|e| e.config.name == name) {
            return Ok(f(e));
        }
        Err(unknown(name, &entries))
    }

    /// Records the exit of generation `generation` of `name`.
    fn exited(&self, name: &str, generation: u64, info: ExitInfo) {
        let _ = self.with(name, |e| {
            if e.generation != generation {
                return;
            }
            e.state = if e.stopping {
                ServiceState::Stopped
            } else {
                ServiceState::Exited
            };
            if e.state == ServiceState::Exited {
                tracing::warn!(service = name, code = ?info.code, signal = ?info.signal, "service exited by itself");
            }
            e.stopping = false;
            e.pid = None;
            e.started_at = None;
            e.last_exit = Some(info);
        });
    }
}

/// The managed services of one hub: the table plus the supervisor actor once started. Clones
/// share them (ProfileOps holds one).
#[derive(Clone)]
pub struct Services {
    table: Arc<Table>,
    state_dir: PathBuf,
    actor: crate::restartable::Restartable<Msg>,
}

impl Services {
    /// The table of `config.services`, every service `stopped`; nothing runs until
    /// `Services::start`.
    pub(crate) fn new(config: &HubConfig) -> Services {
        let entries = config
            .services
            .iter()
            .map(|c| Entry {
                log_path: c.log_path(&config.state_dir),
                config: c.clone(),
                state: ServiceState::Stopped,
                pid: None,
                mode: Mode::Normal,
                restarts: 0,
                started_at: None,
                last_exit: None,
                error: None,
                generation: 0,
                stopping: false,
                exited: None,
            })
            .collect();
        Services {
            table: Arc::new(Table {
                entries: Mutex::new(entries),
            }),
            state_dir: config.state_dir.clone(),
            actor: Default::default(),
        }
    }

    /// Spawns the `ServiceSupervisor` actor, which starts the autostart services. A service
    /// that cannot be started is recorded as `failed`; the hub starts anyway. The hub's
    /// supervisor uses [`Services::start_under`].
    #[cfg(test)]
    pub(crate) async fn start(&self) -> anyhow::Result<()> {
        self.start_under(None).await.map(|_| ())
    }

    /// `Services::start` linked under `supervisor` (the hub's). A restarted supervisor
    /// takes the table as it is: running services keep running (their exits are still
    /// recorded), and only autostart services never started are started.
    pub(crate) async fn start_under(
        &self,
        supervisor: Option<ractor::ActorCell>,
    ) -> anyhow::Result<ActorRef<Msg>> {
        let args = SupervisorArgs {
            table: self.table.clone(),
            state_dir: self.state_dir.clone(),
        };
        let what = "the service supervisor";
        self.actor
            .start(ServiceSupervisor, args, supervisor, what)
            .await
    }

    /// The `ServiceSupervisor` running now, if any.
    pub fn current(&self) -> Option<ActorRef<Msg>> {
        self.actor.current()
    }

    /// Stops the supervisor and with it every service; returns once they are gone.
    pub(crate) async fn stop(&self) {
        let wait = Duration::from_millis(self.longest_stop_ms()) + KILL_WAIT * 2;
        self.actor.stop(wait).await;
    }

    fn longest_stop_ms(&self) -> u64 {
        lock(&self.table.entries)
            .iter()
            .map(|e| e.config.stop_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    /// The configuration of `name`.
    pub(crate) fn config(&self, name: &str) -> Result<ServiceConfig, ToolError> {
        self.table.with(name, |e| e.config.clone())
    }

    /// Where the output of `name` goes (`<log_file>.1` holds the previous part).
    #[cfg(test)]
    pub(crate) fn log_path(&self, name: &str) -> Result<PathBuf, ToolError> {
        self.table.with(name, |e| e.log_path.clone())
    }

    /// Every service, in configuration order, with live RSS and CPU figures.
    pub(crate) fn snapshot(&self) -> Vec<ServiceSnapshot> {
        let rows: Vec<ServiceSnapshot> = lock(&self.table.entries).iter().map(row).collect();
        rows.into_iter().map(with_figures).collect()
    }

    /// One service, with live figures.
    pub(crate) fn get(&self, name: &str) -> Result<ServiceSnapshot, ToolError> {
        self.table.with(name, |e| row(e)).map(with_figures)
    }

    /// Stops `name` (if it runs) and starts it again in `mode`; answers the new process.
    /// Waits at most until `deadline`.
    pub(crate) async fn restart(
        &self,
        name: &str,
        mode: Mode,
        deadline: tokio::time::Instant,
    ) -> Result<RestartOutcome, ToolError> {
        // Unknown names and a missing profiling argv are refused before anything queues.
        let config = self.config(name)?;
        if mode == Mode::Profiling && config.profiling_argv.is_none() {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                format!(
                    "service `{name}` has no profiling_argv configured; it cannot run in profiling mode"
                ),
            ));
        }
        let actor = self.actor.current().ok_or_else(|| {
            ToolError::new(ErrorCode::Internal, "the service supervisor is not running")
        })?;
        let wait = deadline.saturating_duration_since(tokio::time::Instant::now());
        let res = actor
            .call(
                |reply| Msg::Restart {
                    name: name.to_owned(),
                    mode,
                    reply,
                },
                Some(wait),
            )
            .await;
        match res {
            Ok(CallResult::Success(r)) => r,
            Ok(CallResult::Timeout) => Err(ToolError::new(
                ErrorCode::Timeout,
                format!(
                    "the restart of `{name}` did not finish before the call's deadline; it goes on in the background"
                ),
            )),
            Ok(CallResult::SenderError) | Err(_) => Err(ToolError::new(
                ErrorCode::Internal,
                "the service supervisor stopped while restarting",
            )),
        }
    }
}

fn row(e: &Entry) -> ServiceSnapshot {
    ServiceSnapshot {
        name: e.config.name.clone(),
        state: e.state,
        pid: e.pid,
        mode: e.mode,
        restarts: e.restarts,
        rss_bytes: None,
        cpu_seconds: None,
        started_at: e.started_at.map(mcp_shared::time::format),
        last_exit: e.last_exit.clone(),
        error: e.error.clone(),
    }
}

fn with_figures(mut s: ServiceSnapshot) -> ServiceSnapshot {
    if let Some(pid) = s.pid {
        s.rss_bytes = rss_bytes(pid);
        s.cpu_seconds = cpu_seconds(pid);
    }
    s
}

#[cfg(test)]
mod services_tests;
