//! `hub.run_healthchecks`: runs the configured checks concurrently, each under its own
//! timeout: HTTP GET (status must match), TCP connect, or a program run as an argv vector
//! (no shell; exit status 0 is healthy). Each managed service with a `health` check is checked
//! too, under the service's name (`service` names it; a service that is not running fails its
//! check). Overall `healthy` when every check passed, else `degraded`.
//!
//! A command check runs in its own process group, killed whole when the check ends or times
//! out; at most 4 KiB of each of its pipes is kept (the rest is read and dropped), so a check
//! that hangs or floods its output is contained.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::config::HealthcheckConfig;
use crate::context::HubContext;
use crate::machine::services::{ServiceSnapshot, ServiceState};

/// Longest `detail` returned (command output is cut to this).
const MAX_DETAIL: usize = 200;
/// Bytes of each pipe of a command check kept for its detail; the rest is read and dropped, so
/// a check that floods its output costs no memory.
const KEPT_OUTPUT: usize = 4096;
/// How long the pipes may stay open once the command has exited (a straggler of its group).
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// Why a check failed: its `detail`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HealthCheckError {
    #[error("no answer within {ms} ms")]
    Timeout { ms: u64 },
    #[error("GET failed: {0}")]
    Get(reqwest::Error),
    #[error("HTTP {status}, expected {expected}")]
    Status { status: u16, expected: u16 },
    #[error("connect failed: {0}")]
    Connect(std::io::Error),
    #[error("empty argv")]
    EmptyArgv,
    #[error("cannot run `{program}`: {error}")]
    Spawn {
        program: String,
        error: std::io::Error,
    },
    #[error("cannot wait for `{program}`: {error}")]
    Wait {
        program: String,
        error: std::io::Error,
    },
    /// The command exited unsuccessfully; `said` is the first line of its output.
    #[error("{}", exit_detail(*.code, .said))]
    Exit { code: i32, said: String },
    #[error("killed by a signal")]
    Killed,
}

/// The detail of a command that exited with `code`, having `said` (maybe nothing).
fn exit_detail(code: i32, said: &str) -> String {
    if said.is_empty() {
        format!("exit status {code}")
    } else {
        format!("exit status {code}: {said}")
    }
}

pub(crate) async fn run(ctx: &HubContext) -> Value {
    let plain = ctx
        .config
        .skill
        .healthchecks
        .iter()
        .map(|check| run_one(ctx, check, None));
    let mut checks = futures::future::join_all(plain).await;
    checks.extend(futures::future::join_all(services(ctx)).await);
    let healthy = checks.iter().all(|c| c["ok"] == Value::Bool(true));
    json!({
        "status": if healthy { "healthy" } else { "degraded" },
        "checked_at": mcp_shared::time::format(mcp_shared::time::now()),
        "checks": checks,
    })
}

fn cut(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(MAX_DETAIL) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// The health check of every managed service that has one; a service that does not run
/// fails its check without a probe.
fn services(ctx: &HubContext) -> Vec<impl Future<Output = Value> + '_> {
    ctx.config
        .services
        .iter()
        .filter_map(|service| {
            let check = service.health.as_ref()?.check(&service.name);
            let now = ctx.machine.services.get(&service.name).ok();
            Some(async move {
                match now {
                    Some(s) if s.state == ServiceState::Running => {
                        run_one(ctx, &check, Some(&service.name)).await
                    }
                    other => {
                        let detail = match other {
                            None => "unknown service".to_owned(),
                            Some(s) => not_running(&s),
                        };
                        json!({
                            "name": check.name(),
                            "kind": check.kind(),
                            "ok": false,
                            "latency_ms": 0,
                            "detail": cut(&detail),
                            "service": service.name,
                        })
                    }
                }
            })
        })
        .collect()
}

fn not_running(s: &ServiceSnapshot) -> String {
    let mut detail = format!("service is not running (state {}", s.state.as_str());
    if let Some(exit) = &s.last_exit {
        match (exit.code, exit.signal) {
            (Some(code), _) => detail.push_str(&format!(", exit status {code} at {}", exit.at)),
            (None, Some(signal)) => {
                detail.push_str(&format!(", ended by signal {signal} at {}", exit.at));
            }
            (None, None) => {}
        }
    }
    detail.push(')');
    if let Some(error) = &s.error {
        detail.push_str(&format!(": {error}"));
    }
    detail
}

async fn run_one(ctx: &HubContext, check: &HealthcheckConfig, service: Option<&str>) -> Value {
    let started = Instant::now();
    let timeout = Duration::from_millis(check.timeout_ms());
    let outcome = match tokio::time::timeout(timeout, probe(ctx, check)).await {
        Ok(r) => r,
        Err(_) => Err(HealthCheckError::Timeout {
            ms: check.timeout_ms(),
        }),
    };
    let (ok, detail) = match outcome {
        Ok(d) => (true, d),
        Err(e) => (false, e.to_string()),
    };
    json!({
        "name": check.name(),
        "kind": check.kind(),
        "ok": ok,
        "latency_ms": started.elapsed().as_millis() as u64,
        "detail": cut(&detail),
        "service": service,
    })
}

/// `Ok(detail)` when healthy, `Err(detail)` when not.
async fn probe(ctx: &HubContext, check: &HealthcheckConfig) -> Result<String, HealthCheckError> {
    match check {
        HealthcheckConfig::Http {
            url, expect_status, ..
        } => {
            let resp = ctx
                .machine
                .http
                .get(url)
                .send()
                .await
                .map_err(HealthCheckError::Get)?;
            let status = resp.status().as_u16();
            if status == *expect_status {
                Ok(format!("HTTP {status}"))
            } else {
                Err(HealthCheckError::Status {
                    status,
                    expected: *expect_status,
                })
            }
        }
        HealthcheckConfig::Tcp { address, .. } => {
            let stream = tokio::net::TcpStream::connect(address.as_str())
                .await
                .map_err(HealthCheckError::Connect)?;
            Ok(match stream.peer_addr() {
                Ok(peer) => format!("connected to {peer}"),
                Err(_) => "connected".to_owned(),
            })
        }
        HealthcheckConfig::Command { argv, cwd, .. } => command(argv, cwd.as_deref()).await,
    }
}

/// Runs a command check: in its own process group (killed whole when the check ends, times
/// out or is cancelled), reading at most [`KEPT_OUTPUT`] bytes of each pipe.
async fn command(
    argv: &[String],
    cwd: Option<&std::path::Path>,
) -> Result<String, HealthCheckError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(HealthCheckError::EmptyArgv);
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let mut child = cmd.spawn().map_err(|error| HealthCheckError::Spawn {
        program: program.clone(),
        error,
    })?;
    let group = crate::machine::group::GroupGuard::new(child.id());
    let stdout = child.stdout.take().map(|p| tokio::spawn(capped(p)));
    let stderr = child.stderr.take().map(|p| tokio::spawn(capped(p)));
    let status = child.wait().await.map_err(|error| HealthCheckError::Wait {
        program: program.clone(),
        error,
    })?;
    drop(group);
    let drained = |reader: Option<tokio::task::JoinHandle<Vec<u8>>>| async move {
        let reader = reader?;
        let abort = reader.abort_handle();
        match tokio::time::timeout(DRAIN_WAIT, reader).await {
            Ok(r) => r.ok(),
            Err(_) => {
                abort.abort();
                None
            }
        }
    };
    let (stdout, stderr) = (
        drained(stdout).await.unwrap_or_default(),
        drained(stderr).await.unwrap_or_default(),
    );
    let stderr = String::from_utf8_lossy(&stderr);
    let stdout = String::from_utf8_lossy(&stdout);
    let said = if stderr.trim().is_empty() {
        stdout
    } else {
        stderr
    };
    let said = said.lines().next().unwrap_or_default().to_owned();
    match status.code() {
        Some(code) if status.success() => Ok(exit_detail(code, &said)),
        Some(code) => Err(HealthCheckError::Exit { code, said }),
        None => Err(HealthCheckError::Killed),
    }
}

/// Reads `pipe` to its end, keeping the first [`KEPT_OUTPUT`] bytes.
async fn capped(mut pipe: impl tokio::io::AsyncRead + Unpin) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = KEPT_OUTPUT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}
