//! `hub.run_allowed_tests`: runs one test named in `[[skill.allowed_tests]]` — a fixed argv
//! run without a shell, in its own process group, killed (the whole group) at its timeout —
//! and records the result in `<state_dir>/test-results.json`.
//!
//! - `dry_run`: runs nothing; answers the expected effect (what would run, and the last
//!   recorded result of that test).
//! - otherwise: runs the test and answers the recorded result. A call carrying an
//!   idempotency key that is already recorded for this tool gets that call's result back
//!   (same `run_id`) and runs nothing; a second call with a key still in flight gets `busy`.
//!
//! The output tail is redacted ([`crate::skill::adapters::redact`]) before it is recorded or returned. A test
//! with `progress_line` (and `progress_total`) reports how many tests are done while it runs,
//! read from its output lines; only the counts leave the hub that way.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_shared::error::{ErrorCode, ToolError};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tracing::Instrument;

use super::args::{Arguments, invalid, parse};
use super::call::{CallInput, Progress};
use super::decl::Builtin;
use crate::config::{AllowedTestConfig, MAX_TEST_NAME};
use crate::context::HubContext;
use crate::store::results::TestRun;

/// Bytes of output returned (the tail of stdout and stderr).
pub(crate) const TAIL_BYTES: usize = 4096;
/// Bytes of output kept and redacted before the tail is cut, so a secret that starts before
/// the tail is still recognised whole.
const WINDOW_BYTES: usize = 16 * 1024;
/// Time kept back from the call's deadline to kill the test and record its result.
const RECORD_MARGIN: Duration = Duration::from_millis(500);
/// How long to wait for the output pipes to close once the process group is gone.
const DRAIN_WAIT: Duration = Duration::from_secs(1);
/// Progress of a run is reported at most this often.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// Bytes of one output line looked at for progress (the rest of a longer line is not).
const LINE_BYTES: usize = 4096;

fn tool_id() -> &'static str {
    Builtin::AllowedTests.decl().tool_id
}

/// `invalid_arguments` naming the allowed tests.
pub(crate) fn unknown_test(ctx: &HubContext, name: &str) -> ToolError {
    let names: Vec<String> = ctx
        .config
        .skill
        .allowed_tests
        .iter()
        .map(|t| format!("`{}`", t.name))
        .collect();
    let allowed = if names.is_empty() {
        "none are configured on this hub".to_owned()
    } else {
        format!("allowed tests: {}", names.join(", "))
    };
    ToolError::new(
        ErrorCode::InvalidArguments,
        format!("`{name}` is not an allowed test; {allowed}"),
    )
}

/// The arguments of `hub.run_allowed_tests`: `{"name": "<test>"}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    name: String,
}

impl Arguments for Args {
    fn rule(_field: &str) -> String {
        "`name` (a string) is required".into()
    }

    fn not_an_object() -> String {
        "arguments must be an object {\"name\": \"<test>\"}".into()
    }
}

/// The test name from `{"name": "..."}` (nothing else is accepted).
fn test_name(arguments: &Value) -> Result<String, ToolError> {
    let Args { name } = parse(arguments)?;
    if name.is_empty() || name.chars().count() > MAX_TEST_NAME {
        return Err(invalid("`name` must have 1 to 200 characters"));
    }
    Ok(name)
}

pub(crate) async fn run(ctx: &HubContext, input: CallInput) -> Result<Value, ToolError> {
    let name = test_name(&input.body.arguments)?;
    let name = name.as_str();
    let test = ctx
        .config
        .skill
        .allowed_tests
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| unknown_test(ctx, name))?;
    let store = &ctx.stores.test_results;
    if input.body.dry_run {
        let last = store.last(name)?;
        let argv: Vec<String> = test
            .argv
            .iter()
            .map(|a| crate::skill::adapters::redact::redact_with(a, &ctx.logging.redaction).0)
            .collect();
        return Ok(json!({
            "action": "run_allowed_test",
            "test": test.name,
            "argv": argv,
            "cwd": test.cwd.as_ref().map(|p| p.display().to_string()),
            "timeout_ms": test.timeout_ms,
            "last_result": last,
        }));
    }
    let tool = tool_id();
    let _claim = match &input.body.idempotency_key {
        Some(key) => {
            if let Some(first) = store.replay(tool, key)? {
                return replayed(first, name, key);
            }
            let claim = store.claim(tool, key).ok_or_else(|| {
                ToolError::new(
                    ErrorCode::Busy,
                    format!("a call with idempotency key `{key}` is still running; retry later"),
                )
            })?;
            // It may have finished between the lookup and the claim.
            if let Some(first) = store.replay(tool, key)? {
                return replayed(first, name, key);
            }
            Some(claim)
        }
        None => None,
    };
    let budget = input
        .deadline
        .saturating_duration_since(tokio::time::Instant::now())
        .saturating_sub(RECORD_MARGIN);
    let limit = Duration::from_millis(test.timeout_ms).min(budget);
    let counter = Counter::new(test, &input.progress).map(Arc::new);
    let process = mcp_shared::otel_span!("child process", test = %test.name);
    let outcome = execute(test, limit, &ctx.logging.redaction, counter)
        .instrument(process)
        .await;
    let key = input.body.idempotency_key.as_deref().map(|k| (tool, k));
    store.record(&outcome, key).map_err(|e| {
        ToolError::new(
            ErrorCode::Internal,
            format!(
                "test `{name}` ran (run {}, passed: {}) but its result was not recorded: {}",
                outcome.run_id, outcome.passed, e.message
            ),
        )
    })?;
    tracing::info!(test = name, run_id = %outcome.run_id, passed = outcome.passed, timed_out = outcome.timed_out, "allowed test ran");
    to_value(&outcome)
}

/// The recorded result for a repeated idempotency key (which must name the same test).
fn replayed(first: TestRun, name: &str, key: &str) -> Result<Value, ToolError> {
    if first.test != name {
        return Err(ToolError::new(
            ErrorCode::InvalidArguments,
            format!(
                "idempotency key `{key}` was already used to run test `{}`, not `{name}`",
                first.test
            ),
        ));
    }
    to_value(&first)
}

fn to_value(run: &TestRun) -> Result<Value, ToolError> {
    serde_json::to_value(run)
        .map_err(|e| ToolError::new(ErrorCode::Internal, format!("cannot encode result: {e}")))
}

/// Output of both pipes, in the order read, bounded to the last [`WINDOW_BYTES`].
#[derive(Default)]
struct Tail {
    bytes: VecDeque<u8>,
    cut: bool,
}

/// Counts the tests a run has done from its output lines (`progress_line`,
/// `progress_total`) and reports the counts, at most every [`PROGRESS_EVERY`].
struct Counter {
    line: Option<regex::Regex>,
    total_line: Option<regex::Regex>,
    progress: Progress,
    state: Mutex<Count>,
}

#[derive(Default)]
struct Count {
    done: u64,
    total: Option<u64>,
    reported: Option<(Instant, u64, Option<u64>)>,
}

impl Counter {
    /// A counter for `test`, if it declares how to count (the patterns were checked when the
    /// configuration was read).
    fn new(test: &AllowedTestConfig, progress: &Progress) -> Option<Counter> {
        let compile = |p: &Option<String>| p.as_deref().and_then(|p| regex::Regex::new(p).ok());
        let (line, total_line) = (compile(&test.progress_line), compile(&test.progress_total));
        (line.is_some() || total_line.is_some()).then(|| Counter {
            line,
            total_line,
            progress: progress.clone(),
            state: Mutex::new(Count::default()),
        })
    }

    /// One line of output.
    fn line(&self, line: &str) {
        let total = self
            .total_line
            .as_ref()
            .and_then(|r| r.captures(line))
            .and_then(|c| c.get(1))
            .and_then(|m| m.as_str().parse::<u64>().ok());
        let done = self.line.as_ref().is_some_and(|r| r.is_match(line));
        if total.is_none() && !done {
            return;
        }
        let mut c = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = total {
            c.total = Some(c.total.unwrap_or(0).saturating_add(n));
        }
        c.done += u64::from(done);
        self.report(&mut c, false);
    }

    /// Reports the counts if they changed, unless one was reported less than
    /// [`PROGRESS_EVERY`] ago (`last`: the run is over, report anyway).
    fn report(&self, c: &mut Count, last: bool) {
        if let Some((at, done, total)) = c.reported
            && ((done, total) == (c.done, c.total) || (!last && at.elapsed() < PROGRESS_EVERY))
        {
            return;
        }
        let message = match c.total {
            Some(total) => format!("{} of {total} tests done", c.done),
            None => format!("{} tests done", c.done),
        };
        self.progress
            .report(c.done as f64, c.total.map(|t| t as f64), message);
        c.reported = Some((Instant::now(), c.done, c.total));
    }

    fn finish(&self) {
        let mut c = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.report(&mut c, true);
    }
}

async fn collect(
    mut pipe: impl AsyncRead + Unpin,
    tail: Arc<Mutex<Tail>>,
    counter: Option<Arc<Counter>>,
) {
    let mut buf = [0u8; 8192];
    let mut line = Vec::new();
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => {
                if let Some(counter) = &counter
                    && !line.is_empty()
                {
                    counter.line(&String::from_utf8_lossy(&line));
                }
                return;
            }
            Ok(n) => {
                if let Some(counter) = &counter {
                    for &b in &buf[..n] {
                        if b == b'\n' {
                            counter.line(String::from_utf8_lossy(&line).trim_end_matches('\r'));
                            line.clear();
                        } else if line.len() < LINE_BYTES {
                            line.push(b);
                        }
                    }
                }
                let mut t = tail
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                t.bytes.extend(&buf[..n]);
                let over = t.bytes.len().saturating_sub(WINDOW_BYTES);
                if over > 0 {
                    t.bytes.drain(..over);
                    t.cut = true;
                }
            }
        }
    }
}

/// The last [`TAIL_BYTES`] of the output, redacted with the built-in and the configured
/// (`extra`, `[redaction]`) patterns, and the number of redactions.
fn redacted_tail(tail: &Tail, extra: &[regex::Regex]) -> (String, u64) {
    let (bytes, _) = tail.bytes.as_slices();
    let mut raw = bytes.to_vec();
    raw.extend(tail.bytes.as_slices().1);
    let mut text = String::from_utf8_lossy(&raw).into_owned();
    if tail.cut {
        // The first line is partial: drop it rather than show half of a secret.
        text = match text.split_once('\n') {
            Some((_, rest)) => rest.to_owned(),
            None => String::new(),
        };
    }
    let (text, n) = crate::skill::adapters::redact::redact_with(&text, extra);
    let mut start = text.len().saturating_sub(TAIL_BYTES);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    (text[start..].to_owned(), n as u64)
}

/// Runs `test` for at most `limit`; its output is redacted with `extra` on top of the built-in
/// patterns.
async fn execute(
    test: &AllowedTestConfig,
    limit: Duration,
    extra: &[regex::Regex],
    counter: Option<Arc<Counter>>,
) -> TestRun {
    let run_id = uuid::Uuid::now_v7().to_string();
    let started_at = mcp_shared::time::format(mcp_shared::time::now());
    let started = Instant::now();
    let finish =
        |exit_code: Option<i32>, timed_out: bool, output_tail: String, redactions| TestRun {
            run_id: run_id.clone(),
            test: test.name.clone(),
            passed: exit_code == Some(0) && !timed_out,
            exit_code,
            timed_out,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            started_at: started_at.clone(),
            output_tail,
            redactions,
        };
    let Some((program, args)) = test.argv.split_first() else {
        return finish(None, false, "empty argv".into(), 0);
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .envs(&test.env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = &test.cwd {
        cmd.current_dir(dir);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let (text, n) = crate::skill::adapters::redact::redact_with(
                &format!("cannot run `{program}`: {e}"),
                extra,
            );
            return finish(None, false, text, n as u64);
        }
    };
    let pid = child.id();
    // Should this call be stopped (cancel, deadline), the group goes with it.
    let _group = crate::machine::group::GroupGuard::new(pid);
    let tail = Arc::new(Mutex::new(Tail::default()));
    let readers = [
        child
            .stdout
            .take()
            .map(|p| tokio::spawn(collect(p, tail.clone(), counter.clone()))),
        child
            .stderr
            .take()
            .map(|p| tokio::spawn(collect(p, tail.clone(), counter.clone()))),
    ];
    let (status, timed_out) = match tokio::time::timeout(limit, child.wait()).await {
        Ok(status) => (status.ok(), false),
        Err(_) => {
            crate::machine::group::kill(pid);
            let _ = child.kill().await;
            (child.wait().await.ok(), true)
        }
    };
    // Stragglers of the group still holding the pipes are killed too.
    crate::machine::group::kill(pid);
    for reader in readers.into_iter().flatten() {
        let abort = reader.abort_handle();
        if tokio::time::timeout(DRAIN_WAIT, reader).await.is_err() {
            abort.abort();
        }
    }
    if let Some(counter) = &counter {
        counter.finish();
    }
    let (output_tail, redactions) = {
        let t = tail
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        redacted_tail(&t, extra)
    };
    let exit_code = if timed_out {
        None
    } else {
        status.and_then(|s| s.code())
    };
    finish(exit_code, timed_out, output_tail, redactions)
}

#[cfg(test)]
mod tests;
