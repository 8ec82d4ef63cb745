//! The `ServiceSupervisor` actor: the one place a service is started, stopped or restarted,
//! so control actions on a service never interleave.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::time::OffsetDateTime;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::watch;

use crate::config::HeapFormat;

use super::capped_log::{CappedLog, pump};
use super::process::signal_group;
use super::{ExitInfo, KILL_WAIT, Mode, RestartOutcome, ServiceState, StopOutcome, Table, lock};

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

pub(crate) struct ServiceSupervisor;

pub(crate) struct SupervisorArgs {
    pub(super) table: Arc<Table>,
    pub(super) state_dir: PathBuf,
}

pub(crate) struct SupervisorState {
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
        if mode == Mode::Profiling
            && let Some(heap) = &config.heap_profiles
            && heap.format == HeapFormat::Heaptrack
        {
            // Recorded by heaptrack from its first allocation (see profiles::heap::heaptrack).
            let env = crate::profiles::heap::heaptrack::env(&heap.dir)
                .map_err(|e| fail(e.to_string()))?;
            cmd.envs(env);
        }
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
