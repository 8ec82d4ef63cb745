//! Managed services: the long-running programs of `[[services]]` that the hub starts,
//! supervises and restarts on request.
//!
//! [`Services`] (in [`crate::context::HubContext::services`]) holds the service table that
//! readers (`hub.get_runtime_summary`, `hub.run_healthchecks`, ProfileOps) snapshot without
//! waiting, and a handle to the `ServiceSupervisor` ractor actor that owns every control
//! action. The hub spawns the actor at start ([`Services::start`]: autostart services are
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

use std::fs::File;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::time::OffsetDateTime;
use ractor::rpc::CallResult;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

use crate::config::{HubConfig, ServiceConfig};

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

/// Which argv a service runs: `argv` (normal) or `profiling_argv` (profiling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Normal,
    Profiling,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Normal => "normal",
            Mode::Profiling => "profiling",
        }
    }
}

/// How a service's process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExitInfo {
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
pub struct ServiceSnapshot {
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

/// The managed services of one hub: the table plus the supervisor actor once started.
pub struct Services {
    table: Arc<Table>,
    state_dir: PathBuf,
    actor: Mutex<Option<ActorRef<Msg>>>,
}

impl Services {
    /// The table of `config.services`, every service `stopped`; nothing runs until
    /// [`Services::start`].
    pub fn new(config: &HubConfig) -> Services {
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
            actor: Mutex::new(None),
        }
    }

    /// Spawns the `ServiceSupervisor` actor, which starts the autostart services. A service
    /// that cannot be started is recorded as `failed`; the hub starts anyway.
    pub async fn start(&self) -> anyhow::Result<()> {
        self.start_under(None).await.map(|_| ())
    }

    /// [`Services::start`] linked under `supervisor` (the hub's). A restarted supervisor
    /// takes the table as it is: running services keep running (their exits are still
    /// recorded), and only autostart services never started are started.
    pub async fn start_under(
        &self,
        supervisor: Option<ractor::ActorCell>,
    ) -> anyhow::Result<ActorRef<Msg>> {
        let args = SupervisorArgs {
            table: self.table.clone(),
            state_dir: self.state_dir.clone(),
        };
        let (actor, _) = match supervisor {
            Some(sup) => Actor::spawn_linked(None, ServiceSupervisor, args, sup).await,
            None => Actor::spawn(None, ServiceSupervisor, args).await,
        }
        .map_err(|e| anyhow::anyhow!("cannot start the service supervisor: {e}"))?;
        if let Some(old) = lock(&self.actor).replace(actor.clone()) {
            old.stop(Some("replaced".into()));
        }
        Ok(actor)
    }

    /// The `ServiceSupervisor` running now, if any.
    pub fn current(&self) -> Option<ActorRef<Msg>> {
        lock(&self.actor).clone()
    }

    /// Stops the supervisor and with it every service; returns once they are gone.
    pub async fn stop(&self) {
        let actor = lock(&self.actor).take();
        if let Some(actor) = actor {
            let wait = Duration::from_millis(self.longest_stop_ms()) + KILL_WAIT * 2;
            let _ = actor
                .stop_and_wait(Some("hub shutting down".into()), Some(wait))
                .await;
        }
    }

    fn longest_stop_ms(&self) -> u64 {
        lock(&self.table.entries)
            .iter()
            .map(|e| e.config.stop_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    /// The configuration of `name`.
    pub fn config(&self, name: &str) -> Result<ServiceConfig, ToolError> {
        self.table.with(name, |e| e.config.clone())
    }

    /// Where the output of `name` goes (`<log_file>.1` holds the previous part).
    pub fn log_path(&self, name: &str) -> Result<PathBuf, ToolError> {
        self.table.with(name, |e| e.log_path.clone())
    }

    /// Every service, in configuration order, with live RSS and CPU figures.
    pub fn snapshot(&self) -> Vec<ServiceSnapshot> {
        let rows: Vec<ServiceSnapshot> = lock(&self.table.entries).iter().map(row).collect();
        rows.into_iter().map(with_figures).collect()
    }

    /// One service, with live figures.
    pub fn get(&self, name: &str) -> Result<ServiceSnapshot, ToolError> {
        self.table.with(name, |e| row(e)).map(with_figures)
    }

    /// Stops `name` (if it runs) and starts it again in `mode`; answers the new process.
    /// Waits at most until `deadline`.
    pub async fn restart(
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
        let actor = lock(&self.actor).clone().ok_or_else(|| {
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

/// `VmRSS` of `pid` in bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    kb_field(&text, "VmRSS")
}

/// The value in kB of `key` in a `/proc` "Key:   123 kB" text, in bytes.
pub fn kb_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// `utime + stime` of `pid`, in seconds.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
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
fn signal_group(pid: u32, signal: rustix::process::Signal) {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// A log file capped at `cap` bytes: past it, the file becomes `<path>.1` and a new one starts.
pub struct CappedLog {
    path: PathBuf,
    cap: u64,
    file: Option<File>,
    size: u64,
    warned: bool,
}

impl CappedLog {
    /// Opens `path` for appending (creating it and its directory).
    pub fn open(path: &Path, cap: u64) -> std::io::Result<CappedLog> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let size = file.metadata()?.len();
        Ok(CappedLog {
            path: path.to_owned(),
            cap: cap.max(1),
            file: Some(file),
            size,
            warned: false,
        })
    }

    /// The previous part of a log at `path`.
    pub fn rotated_path(path: &Path) -> PathBuf {
        let mut name = path.as_os_str().to_owned();
        name.push(".1");
        PathBuf::from(name)
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.file = None;
        std::fs::rename(&self.path, Self::rotated_path(&self.path))?;
        self.file = Some(
            std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(true)
                .open(&self.path)?,
        );
        self.size = 0;
        Ok(())
    }

    fn write_capped(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        while !bytes.is_empty() {
            if self.size >= self.cap || self.file.is_none() {
                self.rotate()?;
            }
            let room = usize::try_from(self.cap - self.size).unwrap_or(usize::MAX);
            let n = room.min(bytes.len());
            if let Some(f) = self.file.as_mut() {
                f.write_all(&bytes[..n])?;
            }
            self.size += n as u64;
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// Appends `bytes`, rotating as often as needed; a failure is logged once and the bytes
    /// are dropped (a full disk must not stop the service).
    pub fn write(&mut self, bytes: &[u8]) {
        if let Err(e) = self.write_capped(bytes) {
            if !self.warned {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot write a service log; output is dropped");
                self.warned = true;
            }
        } else {
            self.warned = false;
        }
    }
}

async fn pump(mut pipe: impl AsyncRead + Unpin, log: Arc<Mutex<CappedLog>>) {
    let mut buf = vec![0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => lock(&log).write(&buf[..n]),
        }
    }
}

pub enum Msg {
    /// Stop the service (if it runs) and start it again in `mode`.
    Restart {
        name: String,
        mode: Mode,
        reply: RpcReplyPort<Result<RestartOutcome, ToolError>>,
    },
    /// Test builds only: panic, so tests can prove the hub's supervisor contains it.
    #[cfg(any(test, feature = "fault-injection"))]
    Panic,
}

pub struct ServiceSupervisor;

pub struct SupervisorArgs {
    table: Arc<Table>,
    state_dir: PathBuf,
}

pub struct SupervisorState {
    table: Arc<Table>,
    state_dir: PathBuf,
}

impl SupervisorState {
    /// Starts `name` in `mode`; the table says `running` (with the new pid) before it returns.
    fn start(&self, name: &str, mode: Mode) -> Result<(u32, OffsetDateTime), ToolError> {
        let (config, log_path, generation) = self.table.with(name, |e| {
            e.generation += 1;
            e.state = ServiceState::Starting;
            e.mode = mode;
            e.error = None;
            (e.config.clone(), e.log_path.clone(), e.generation)
        })?;
        let fail = |message: String| {
            let _ = self.table.with(name, |e| {
                e.state = ServiceState::Failed;
                e.error = Some(message.clone());
            });
            tracing::warn!(service = name, error = %message, "service could not be started");
            ToolError::new(
                ErrorCode::AdapterFailed,
                format!("service `{name}` could not be started: {message}"),
            )
        };
        let argv = match mode {
            Mode::Normal => &config.argv,
            Mode::Profiling => config.profiling_argv.as_ref().unwrap_or(&config.argv),
        };
        let Some((program, args)) = argv.split_first() else {
            return Err(fail("empty argv".into()));
        };
        let log = CappedLog::open(&log_path, config.log_max_bytes).map_err(|e| {
            fail(format!(
                "cannot open its log file {}: {e}",
                log_path.display()
            ))
        })?;
        let log = Arc::new(Mutex::new(log));
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .envs(&config.env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        match &config.cwd {
            Some(dir) => {
                cmd.current_dir(dir);
            }
            None => {
                cmd.current_dir(&self.state_dir);
            }
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| fail(format!("cannot run `{program}`: {e}")))?;
        let Some(pid) = child.id() else {
            return Err(fail("the process ended before its pid was known".into()));
        };
        if let Some(out) = child.stdout.take() {
            tokio::spawn(pump(out, log.clone()));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(pump(err, log));
        }
        let (tx, rx) = watch::channel(false);
        let started_at = mcp_shared::time::now();
        self.table.with(name, |e| {
            e.state = ServiceState::Running;
            e.pid = Some(pid);
            e.started_at = Some(started_at);
            e.exited = Some(rx);
        })?;
        let table = self.table.clone();
        let service = name.to_owned();
        tokio::spawn(async move {
            let status = child.wait().await;
            let info = ExitInfo {
                code: status.as_ref().ok().and_then(|s| s.code()),
                signal: status.as_ref().ok().and_then(|s| s.signal()),
                at: mcp_shared::time::format(mcp_shared::time::now()),
            };
            table.exited(&service, generation, info);
            // Whatever is left of its process group goes with it.
            signal_group(pid, rustix::process::Signal::KILL);
            let _ = tx.send(true);
        });
        tracing::info!(service = name, pid, mode = mode.as_str(), "service started");
        Ok((pid, started_at))
    }

    /// Stops `name` if it runs: SIGTERM to its group, SIGKILL after `stop_timeout_ms`.
    async fn stop(&self, name: &str) -> Result<(Option<u32>, StopOutcome), ToolError> {
        let running = self
            .table
            .with(name, |e| match (e.state, e.pid, &e.exited) {
                (ServiceState::Running, Some(pid), Some(rx)) => {
                    e.stopping = true;
                    Some((pid, rx.clone(), e.config.stop_timeout_ms))
                }
                _ => None,
            })?;
        let Some((pid, mut exited, timeout_ms)) = running else {
            return Ok((None, StopOutcome::NotRunning));
        };
        signal_group(pid, rustix::process::Signal::TERM);
        let terminated = tokio::time::timeout(
            Duration::from_millis(timeout_ms),
            exited.wait_for(|gone| *gone),
        )
        .await
        .is_ok();
        if terminated {
            tracing::info!(service = name, pid, "service stopped");
            return Ok((Some(pid), StopOutcome::Terminated));
        }
        signal_group(pid, rustix::process::Signal::KILL);
        if tokio::time::timeout(KILL_WAIT, exited.wait_for(|gone| *gone))
            .await
            .is_err()
        {
            return Err(ToolError::new(
                ErrorCode::Internal,
                format!("service `{name}` (pid {pid}) did not exit after SIGKILL"),
            ));
        }
        tracing::warn!(service = name, pid, "service killed after its stop timeout");
        Ok((Some(pid), StopOutcome::Killed))
    }

    async fn restart(&self, name: &str, mode: Mode) -> Result<RestartOutcome, ToolError> {
        let (old_pid, stopped) = self.stop(name).await?;
        let (new_pid, started_at) = self.start(name, mode)?;
        let restarts = self.table.with(name, |e| {
            e.restarts += 1;
            e.restarts
        })?;
        let state = self.table.with(name, |e| e.state)?;
        Ok(RestartOutcome {
            service: name.to_owned(),
            old_pid,
            new_pid,
            stopped,
            state,
            mode,
            restarts,
            started_at: mcp_shared::time::format(started_at),
        })
    }
}

impl Actor for ServiceSupervisor {
    type Msg = Msg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Msg>,
        args: SupervisorArgs,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        std::fs::create_dir_all(&args.state_dir)?;
        let state = SupervisorState {
            table: args.table,
            state_dir: args.state_dir,
        };
        // Never-started autostart services only: after a restart of this actor the running
        // ones run on, and one that exited stays exited (never restarted behind the caller).
        let autostart: Vec<String> = lock(&state.table.entries)
            .iter()
            .filter(|e| e.config.autostart && e.generation == 0)
            .map(|e| e.config.name.clone())
            .collect();
        for name in autostart {
            // A failure is recorded in the table (state `failed`, with the reason).
            let _ = state.start(&name, Mode::Normal);
        }
        Ok(state)
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Msg>,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let names: Vec<String> = lock(&state.table.entries)
            .iter()
            .map(|e| e.config.name.clone())
            .collect();
        let stops = names.iter().map(|name| state.stop(name));
        for (name, outcome) in names.iter().zip(futures::future::join_all(stops).await) {
            if let Err(e) = outcome {
                tracing::error!(service = %name, error = %e, "service not stopped at shutdown");
            }
        }
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Msg>,
        msg: Msg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            Msg::Restart { name, mode, reply } => {
                let outcome = state.restart(&name, mode).await;
                let _ = reply.send(outcome);
            }
            #[cfg(any(test, feature = "fault-injection"))]
            Msg::Panic => panic!("fault injected into the service supervisor"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soon() -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_secs(30)
    }

    fn services(dir: &Path, list: Vec<ServiceConfig>) -> Services {
        let mut config = HubConfig::new("hub:t", "test", "ws://x", "t", dir);
        config.services = list;
        config.validate().expect("valid");
        Services::new(&config)
    }

    fn argv(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Whether `pid` is gone (or only a zombie waiting for a reaper that is not the hub).
    fn gone(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rfind(')')
                .is_some_and(|i| stat[i + 1..].trim_start().starts_with('Z')),
        }
    }

    async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
        for _ in 0..400 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("timed out waiting for {what}");
    }

    #[tokio::test]
    async fn start_restart_and_shutdown_leave_no_process() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut manual = ServiceConfig::new("manual", argv(&["sleep", "30"]));
        manual.autostart = false;
        // A leader with a child of its own: the whole group goes at a stop.
        let family = ServiceConfig::new(
            "family",
            argv(&["sh", "-c", "sleep 30 & echo child $! ; wait"]),
        );
        let svc = services(
            dir.path(),
            vec![
                ServiceConfig::new("sleeper", argv(&["sleep", "30"])),
                manual,
                family,
            ],
        );
        let before = svc.snapshot();
        assert!(
            before
                .iter()
                .all(|s| s.state == ServiceState::Stopped && s.pid.is_none())
        );
        svc.start().await.expect("start");
        let snap = svc.snapshot();
        assert_eq!(snap[0].state, ServiceState::Running);
        assert_eq!(snap[1].state, ServiceState::Stopped, "not autostarted");
        let first = snap[0].pid.expect("pid");
        assert!(snap[0].rss_bytes.expect("rss") > 0);
        assert!(snap[0].cpu_seconds.expect("cpu") >= 0.0);
        assert_eq!(snap[0].mode, Mode::Normal);
        mcp_shared::time::parse(snap[0].started_at.as_deref().expect("started_at"))
            .expect("rfc3339");

        let out = svc
            .restart("sleeper", Mode::Normal, soon())
            .await
            .expect("restart");
        assert_eq!(out.old_pid, Some(first));
        assert_ne!(out.new_pid, first);
        assert_eq!(out.stopped, StopOutcome::Terminated);
        assert_eq!((out.state, out.restarts), (ServiceState::Running, 1));
        assert!(gone(first), "the old process is gone");
        let now = svc.get("sleeper").expect("known");
        assert_eq!((now.pid, now.restarts), (Some(out.new_pid), 1));
        assert_eq!(now.last_exit.as_ref().and_then(|e| e.signal), Some(15));

        // A restart of a service that does not run starts it.
        let out = svc
            .restart("manual", Mode::Normal, soon())
            .await
            .expect("start");
        assert_eq!((out.old_pid, out.stopped), (None, StopOutcome::NotRunning));
        let manual_pid = out.new_pid;

        let err = svc
            .restart("nope", Mode::Normal, soon())
            .await
            .expect_err("unknown");
        assert_eq!(err.code, ErrorCode::InvalidArguments);
        assert!(err.message.contains("`sleeper`"), "{err}");
        let err = svc
            .restart("sleeper", Mode::Profiling, soon())
            .await
            .expect_err("no profiling argv");
        assert!(err.message.contains("profiling_argv"), "{err}");

        // The family's child pid, from its log.
        let log = svc.log_path("family").expect("log");
        assert_eq!(log, dir.path().join("services/family.log"));
        let mut child = None;
        wait_for("the family's child pid", || {
            child = std::fs::read_to_string(&log).ok().and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("child ")?.trim().parse::<u32>().ok())
            });
            child.is_some()
        })
        .await;
        let child = child.expect("child pid");
        let family = svc.get("family").expect("family").pid.expect("pid");
        assert!(!gone(child) && !gone(family));

        svc.stop().await;
        // Killed processes leave /proc a moment after the signal (on a loaded machine, a
        // while): each must be gone soon after the shutdown, not outlive it.
        for pid in [out.new_pid, manual_pid, family, child] {
            wait_for(
                &format!("pid {pid} to end after the hub's shutdown"),
                || gone(pid),
            )
            .await;
        }
        assert!(
            svc.snapshot()
                .iter()
                .all(|s| s.state == ServiceState::Stopped && s.pid.is_none())
        );
    }

    #[tokio::test]
    async fn a_service_that_exits_is_not_restarted_and_one_that_ignores_sigterm_is_killed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut stubborn = ServiceConfig::new(
            "stubborn",
            argv(&[
                "sh",
                "-c",
                "trap '' TERM; echo ready; while :; do sleep 1; done",
            ]),
        );
        stubborn.stop_timeout_ms = 300;
        let broken = ServiceConfig::new("broken", argv(&["/nonexistent/program"]));
        let svc = services(
            dir.path(),
            vec![
                ServiceConfig::new("quitter", argv(&["sh", "-c", "exit 3"])),
                stubborn,
                broken,
            ],
        );
        svc.start().await.expect("start");
        wait_for("the quitter to exit", || {
            svc.get("quitter").expect("known").state == ServiceState::Exited
        })
        .await;
        let quitter = svc.get("quitter").expect("known");
        assert_eq!(quitter.last_exit.as_ref().and_then(|e| e.code), Some(3));
        assert_eq!((quitter.pid, quitter.restarts), (None, 0));
        let broken = svc.get("broken").expect("known");
        assert_eq!(broken.state, ServiceState::Failed);
        assert!(
            broken
                .error
                .as_deref()
                .is_some_and(|e| e.contains("/nonexistent/program"))
        );

        let log = svc.log_path("stubborn").expect("log");
        wait_for("the trap to be set", || {
            std::fs::read_to_string(&log).is_ok_and(|t| t.contains("ready"))
        })
        .await;
        let out = svc
            .restart("stubborn", Mode::Normal, soon())
            .await
            .expect("restart");
        assert_eq!(out.stopped, StopOutcome::Killed);
        assert!(out.old_pid.is_some_and(gone));
        // Failed and exited services start again on an explicit restart only.
        let out = svc
            .restart("quitter", Mode::Normal, soon())
            .await
            .expect("restart");
        assert_eq!(out.stopped, StopOutcome::NotRunning);
        svc.stop().await;
    }

    #[tokio::test]
    async fn the_log_is_capped_and_rotated_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut chatty = ServiceConfig::new(
            "chatty",
            argv(&[
                "sh",
                "-c",
                "i=0; while [ $i -lt 2000 ]; do echo line $i of a chatty service; i=$((i+1)); done; echo done; sleep 30",
            ]),
        );
        chatty.log_max_bytes = 4096;
        chatty.profiling_argv = Some(argv(&["sh", "-c", "echo profiling; sleep 30"]));
        let svc = services(dir.path(), vec![chatty]);
        svc.start().await.expect("start");
        let log = svc.log_path("chatty").expect("log");
        let rotated = CappedLog::rotated_path(&log);
        wait_for("the last line", || {
            std::fs::read_to_string(&log).is_ok_and(|t| t.ends_with("done\n"))
        })
        .await;
        let current = std::fs::metadata(&log).expect("log").len();
        let previous = std::fs::metadata(&rotated).expect("rotated").len();
        assert!(current <= 4096 && previous == 4096, "{current} {previous}");
        assert!(!dir.path().join("services/chatty.log.2").exists());
        let text = std::fs::read_to_string(&rotated).expect("rotated");
        assert!(text.contains("of a chatty service"), "{text}");

        let out = svc
            .restart("chatty", Mode::Profiling, soon())
            .await
            .expect("profiling");
        assert_eq!(out.mode, Mode::Profiling);
        assert_eq!(svc.get("chatty").expect("known").mode, Mode::Profiling);
        wait_for("the profiling argv", || {
            std::fs::read_to_string(&log).is_ok_and(|t| t.contains("profiling\n"))
        })
        .await;
        svc.stop().await;
    }

    #[test]
    fn capped_log_splits_a_large_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.log");
        let mut log = CappedLog::open(&path, 1024).expect("open");
        log.write(&[b'a'; 1000]);
        log.write(&[b'b'; 3000]);
        let current = std::fs::read(&path).expect("current");
        let previous = std::fs::read(CappedLog::rotated_path(&path)).expect("previous");
        assert_eq!(previous, [b'b'; 1024]);
        assert_eq!(current, [b'b'; 928], "24 + 1024 + 1024 + 928 = 3000");
        // Reopened, it continues from the size on disk.
        let mut log = CappedLog::open(&path, 1024).expect("reopen");
        log.write(&[b'c'; 96]);
        assert_eq!(std::fs::read(&path).expect("current").len(), 1024);
        log.write(b"d");
        assert_eq!(std::fs::read(&path).expect("current"), b"d");
    }

    #[test]
    fn proc_figures_of_this_process() {
        let me = std::process::id();
        assert!(rss_bytes(me).expect("rss") > 0);
        assert!(cpu_seconds(me).expect("cpu") >= 0.0);
        assert_eq!(rss_bytes(u32::MAX), None);
    }
}
