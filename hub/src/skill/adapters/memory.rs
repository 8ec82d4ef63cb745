//! The ProfileOps tools (`hub.memory.*`) over [`crate::profiles`]: six reads and four bounded
//! writes.
//!
//! Reads: `get_status`, `list_sessions`, `get_session` (with its newest samples),
//! `list_incidents`, `list_artifacts`, `get_artifact` (inline up to
//! `[profiling] artifact_inline_max_bytes`; above it a chunked delivery contract — size,
//! SHA-256, chunk size and count — and chunk fetches by offset, each chunk base64 with its own
//! SHA-256; never a truncated blob).
//!
//! Writes (`dry_run` describes, changes nothing, and fails for the same reasons execute
//! would): `start_profile`, `stop_profile`, `retry_profile`, `publish_profile`. A call with an
//! idempotency key already in the hub's write ledger gets the first call's result back and
//! changes nothing; the same key with other arguments is refused.

use std::future::Future;

use base64::Engine;
use mcp_shared::error::{ErrorCode, ToolError};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::args::parse;
use super::call::CallInput;
use super::decl::Builtin;
use crate::context::HubContext;
use crate::machine::services::{Mode, ServiceState};
use crate::profiles::{DURATION_SEC, Delivery, INTERVAL_MS, SessionState, StartRequest};
use crate::store::ledger::Begin;

mod arguments;

use arguments::{
    GetArtifact, ListOfService, ListSessions, NoArgs, OneSession, StartProfile, id, limit,
    service_filter, text, within,
};

fn bad(message: String) -> ToolError {
    ToolError::new(ErrorCode::InvalidArguments, message)
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, ToolError> {
    serde_json::to_value(v).map_err(|e| {
        ToolError::new(
            ErrorCode::Internal,
            format!("cannot encode the answer: {e}"),
        )
    })
}

/// A read's answer from the hub itself: live (`evidence.source` "hub"; root answers from its
/// copy while the hub is offline). Said only to a root that announced the `evidence` feature:
/// an earlier root's contract has no such field, and would refuse the answer.
fn live(ctx: &HubContext, mut answer: Value) -> Value {
    let features = ctx.connection.root_features.load();
    if features.has(mcp_shared::protocol::feature::EVIDENCE) {
        answer["evidence"] = json!({
            "source": "hub",
            "as_of": mcp_shared::time::format(mcp_shared::time::now()),
            "age_seconds": 0,
        });
    }
    answer
}

/// `hub.memory.get_status`.
pub(crate) fn status(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let NoArgs {} = parse(arguments)?;
    let p = &ctx.machine.profiles;
    let (sessions, running, incidents, artifacts) = p.counts()?;
    let c = p.config();
    let services: Vec<Value> = ctx
        .machine
        .services
        .snapshot()
        .into_iter()
        .map(|s| {
            let profiling = ctx
                .machine
                .services
                .config(&s.name)
                .is_ok_and(|c| c.profiling_argv.is_some());
            json!({
                "name": s.name,
                "state": s.state,
                "mode": s.mode,
                "pid": s.pid,
                "rss_bytes": s.rss_bytes,
                "profiling_available": profiling,
            })
        })
        .collect();
    Ok(json!({
        "authority": "hub",
        "target_id": ctx.config.target_id,
        "running_sessions": running,
        "max_concurrent_sessions": c.max_concurrent_sessions,
        "growth_threshold_bytes": c.growth_threshold_bytes,
        "growth_threshold_percent": c.growth_threshold_percent,
        "artifact_inline_max_bytes": c.artifact_inline_max_bytes,
        "chunk_bytes": p.chunk_bytes(),
        "sessions": sessions,
        "incidents": incidents,
        "artifacts": artifacts,
        "services": services,
    }))
}

/// `hub.memory.list_sessions`.
pub(crate) fn list_sessions(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let args: ListSessions = parse(arguments)?;
    let state = match text(args.state.as_deref(), "state", 20)? {
        None => None,
        Some(s) => Some(
            serde_json::from_value::<SessionState>(json!(s)).map_err(|_| {
                bad(format!(
                    "`state` must be one of running, completed, stopped, failed, interrupted, not `{s}`"
                ))
            })?,
        ),
    };
    let sessions = ctx.machine.profiles.sessions(
        service_filter(args.service.as_deref())?,
        state,
        limit(args.limit)?,
    )?;
    Ok(live(ctx, json!({ "sessions": to_value(&sessions)? })))
}

/// `hub.memory.get_session`.
pub(crate) async fn get_session(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let args: OneSession = parse(arguments)?;
    let (session, recent) = ctx
        .machine
        .profiles
        .session(id(&args.session_id, "session_id")?)
        .await?;
    Ok(live(
        ctx,
        json!({ "session": to_value(&session)?, "recent_samples": to_value(&recent)? }),
    ))
}

/// `hub.memory.list_incidents`.
pub(crate) fn list_incidents(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let args: ListOfService = parse(arguments)?;
    let incidents = ctx
        .machine
        .profiles
        .incidents(service_filter(args.service.as_deref())?, limit(args.limit)?)?;
    Ok(live(ctx, json!({ "incidents": to_value(&incidents)? })))
}

/// `hub.memory.list_artifacts`.
pub(crate) fn list_artifacts(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let args: ListOfService = parse(arguments)?;
    let artifacts = ctx
        .machine
        .profiles
        .artifacts(service_filter(args.service.as_deref())?, limit(args.limit)?)?;
    Ok(live(ctx, json!({ "artifacts": to_value(&artifacts)? })))
}

/// `hub.memory.get_artifact`.
pub(crate) fn get_artifact(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let args: GetArtifact = parse(arguments)?;
    let artifact_id = id(&args.artifact_id, "artifact_id")?;
    let offset = args.offset;
    let length = within(args.length, "length", 1..=u64::MAX)?;
    Ok(live(
        ctx,
        match ctx.machine.profiles.artifact(artifact_id, offset, length)? {
            Delivery::Inline { meta, artifact } => json!({
                "artifact_id": meta.artifact_id,
                "delivery": "inline",
                "size_bytes": meta.size_bytes,
                "sha256": meta.sha256,
                "artifact": artifact,
            }),
            Delivery::Chunked {
                meta,
                chunk_bytes,
                chunks,
            } => json!({
                "artifact_id": meta.artifact_id,
                "delivery": "chunked",
                "size_bytes": meta.size_bytes,
                "sha256": meta.sha256,
                "chunk_bytes": chunk_bytes,
                "chunks": chunks,
            }),
            Delivery::Chunk {
                meta,
                offset,
                bytes,
            } => {
                let length = bytes.len() as u64;
                json!({
                    "artifact_id": meta.artifact_id,
                    "delivery": "chunk",
                    "size_bytes": meta.size_bytes,
                    "sha256": meta.sha256,
                    "offset": offset,
                    "length": length,
                    "chunk_sha256": hex::encode(Sha256::digest(&bytes)),
                    "data_base64": base64::engine::general_purpose::STANDARD.encode(&bytes),
                    "eof": offset + length >= meta.size_bytes,
                })
            }
        },
    ))
}

/// Runs a write once per idempotency key: a recorded key answers its first result (when the
/// arguments are the same) and runs nothing.
async fn once<F>(
    ctx: &HubContext,
    kind: Builtin,
    input: &CallInput,
    run: F,
) -> Result<Value, ToolError>
where
    F: Future<Output = Result<Value, ToolError>>,
{
    let tool = kind.decl().tool_id;
    let Some(key) = &input.body.idempotency_key else {
        return run.await;
    };
    let _claim = match ctx.stores.ledger.begin(tool, key)? {
        Begin::Replay(first) => {
            if first["arguments"] != input.body.arguments {
                return Err(bad(format!(
                    "idempotency key `{key}` was already used with other arguments ({})",
                    first["arguments"]
                )));
            }
            return Ok(first["result"].clone());
        }
        Begin::Run(claim) => claim,
    };
    let result = run.await?;
    ctx.stores
        .ledger
        .record(
            tool,
            key,
            &json!({"arguments": input.body.arguments, "result": result}),
        )
        .map_err(|e| {
            ToolError::new(
                ErrorCode::Internal,
                format!(
                    "`{tool}` ran but its idempotency key was not recorded: {}",
                    e.message
                ),
            )
        })?;
    Ok(result)
}

/// Checks that a session for `service` in `mode` could start now; what would happen.
fn plan(ctx: &HubContext, service: &str, mode: Mode) -> Result<Value, ToolError> {
    let config = ctx.machine.services.config(service)?;
    let now = ctx.machine.services.get(service)?;
    let will_restart = mode == Mode::Profiling;
    if will_restart && config.profiling_argv.is_none() {
        return Err(bad(format!(
            "service `{service}` has no profiling_argv configured; it cannot run in profiling mode"
        )));
    }
    if !will_restart && now.state != ServiceState::Running {
        return Err(bad(format!(
            "service `{service}` is not running (state {}); restart it first or profile it in mode \"profiling\"",
            now.state.as_str()
        )));
    }
    if let Some(why) = ctx.machine.profiles.admission(service)? {
        return Err(ToolError::new(ErrorCode::Busy, why));
    }
    let argv: Option<Vec<String>> = will_restart.then(|| {
        config
            .profiling_argv
            .iter()
            .flatten()
            .map(|a| crate::skill::adapters::redact::redact_with(a, &ctx.logging.redaction).0)
            .collect()
    });
    Ok(json!({
        "service_state": now.state,
        "pid": now.pid,
        "will_restart": will_restart,
        "argv": argv,
    }))
}

fn describe(
    service: &str,
    mode: Mode,
    interval_ms: u64,
    duration_sec: u64,
    plan: &Value,
) -> String {
    let restart = if plan["will_restart"] == true {
        let argv: Vec<&str> = plan["argv"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match plan["pid"].as_u64() {
            Some(pid) => format!(
                "will restart `{service}` (stopping pid {pid}) into its profiling argv `{}`, then ",
                argv.join(" ")
            ),
            None => format!(
                "will start `{service}` with its profiling argv `{}`, then ",
                argv.join(" ")
            ),
        }
    } else {
        String::new()
    };
    let back = if plan["will_restart"] == true {
        ", then restart it in its normal argv when the session ends"
    } else {
        ""
    };
    format!(
        "{restart}will sample the memory of `{service}` ({} mode) every {interval_ms} ms for {duration_sec} s{back}",
        mode.as_str()
    )
}

fn expected_samples(interval_ms: u64, duration_sec: u64) -> u64 {
    duration_sec * 1000 / interval_ms + 1
}

/// `hub.memory.start_profile`.
pub(crate) async fn start(ctx: &HubContext, input: CallInput) -> Result<Value, ToolError> {
    let args: StartProfile = parse(&input.body.arguments)?;
    let service = text(
        Some(&args.service),
        "service",
        crate::config::MAX_SERVICE_NAME,
    )?
    .unwrap_or_default();
    let interval_ms = args.interval_ms;
    within(Some(interval_ms), "interval_ms", INTERVAL_MS)?;
    let duration_sec = args.duration_sec;
    within(Some(duration_sec), "duration_sec", DURATION_SEC)?;
    let mode = match text(args.mode.as_deref(), "mode", 20)? {
        None | Some("normal") => Mode::Normal,
        Some("profiling") => Mode::Profiling,
        Some(other) => {
            return Err(bad(format!(
                "`mode` must be \"normal\" or \"profiling\", not `{other}`"
            )));
        }
    };
    if input.body.dry_run {
        let plan = plan(ctx, service, mode)?;
        let c = ctx.machine.profiles.config();
        return Ok(json!({
            "action": "start_profile",
            "service": service,
            "mode": mode,
            "interval_ms": interval_ms,
            "duration_sec": duration_sec,
            "expected_samples": expected_samples(interval_ms, duration_sec),
            "service_state": plan["service_state"],
            "pid": plan["pid"],
            "will_restart": plan["will_restart"],
            "argv": plan["argv"],
            "growth_threshold_bytes": c.growth_threshold_bytes,
            "growth_threshold_percent": c.growth_threshold_percent,
            "description": describe(service, mode, interval_ms, duration_sec, &plan),
        }));
    }
    let request = StartRequest {
        service: service.to_owned(),
        mode,
        interval_ms,
        duration_sec,
        retry_of: None,
    };
    once(ctx, Builtin::MemoryStartProfile, &input, async {
        plan(ctx, service, mode)?;
        let session = ctx
            .machine
            .profiles
            .start_session(request, input.deadline)
            .await?;
        Ok(json!({ "session": to_value(&session)? }))
    })
    .await
}

/// `hub.memory.stop_profile`.
pub(crate) async fn stop(ctx: &HubContext, input: CallInput) -> Result<Value, ToolError> {
    let args: OneSession = parse(&input.body.arguments)?;
    let session_id = id(&args.session_id, "session_id")?;
    let session = ctx.machine.profiles.get(session_id)?;
    if input.body.dry_run {
        let running = session.state == SessionState::Running;
        let description = if running {
            let back = if session.mode == Mode::Profiling {
                format!(", then restart `{}` in its normal argv", session.service)
            } else {
                String::new()
            };
            format!(
                "will stop session `{session_id}` of `{}` after {} samples and store its artifact{back}",
                session.service, session.samples
            )
        } else {
            format!(
                "session `{session_id}` is not running (state {}); nothing to stop",
                session.state.as_str()
            )
        };
        return Ok(json!({
            "action": "stop_profile",
            "session": to_value(&session)?,
            "running": running,
            "description": description,
        }));
    }
    once(ctx, Builtin::MemoryStopProfile, &input, async {
        let (session, stopped) = ctx
            .machine
            .profiles
            .stop_session(session_id, input.deadline)
            .await?;
        Ok(json!({ "session": to_value(&session)?, "stopped": stopped }))
    })
    .await
}

/// `hub.memory.retry_profile`.
pub(crate) async fn retry(ctx: &HubContext, input: CallInput) -> Result<Value, ToolError> {
    let args: OneSession = parse(&input.body.arguments)?;
    let session_id = id(&args.session_id, "session_id")?;
    let old = ctx.machine.profiles.get(session_id)?;
    if input.body.dry_run {
        let plan = plan(ctx, &old.service, old.mode)?;
        return Ok(json!({
            "action": "retry_profile",
            "retry_of": session_id,
            "service": old.service,
            "mode": old.mode,
            "interval_ms": old.interval_ms,
            "duration_sec": old.duration_sec,
            "will_restart": plan["will_restart"],
            "description": describe(&old.service, old.mode, old.interval_ms, old.duration_sec, &plan),
        }));
    }
    let request = StartRequest {
        service: old.service.clone(),
        mode: old.mode,
        interval_ms: old.interval_ms,
        duration_sec: old.duration_sec,
        retry_of: Some(session_id.to_owned()),
    };
    once(ctx, Builtin::MemoryRetryProfile, &input, async {
        plan(ctx, &request.service, request.mode)?;
        let session = ctx
            .machine
            .profiles
            .start_session(request, input.deadline)
            .await?;
        Ok(json!({ "session": to_value(&session)? }))
    })
    .await
}

/// `hub.memory.publish_profile`: the compact summary root keeps (`result.published_summary`).
pub(crate) async fn publish(ctx: &HubContext, input: CallInput) -> Result<Value, ToolError> {
    let args: OneSession = parse(&input.body.arguments)?;
    let session_id = id(&args.session_id, "session_id")?;
    let session = ctx.machine.profiles.get(session_id)?;
    if input.body.dry_run {
        let summary = ctx.machine.profiles.summary(&session)?;
        return Ok(json!({
            "action": "publish_profile",
            "session_id": session_id,
            "published_summary": summary,
            "description": format!(
                "will publish the summary of session `{session_id}` of `{}` ({} samples) to root",
                session.service, session.samples
            ),
        }));
    }
    once(ctx, Builtin::MemoryPublishProfile, &input, async {
        let summary = ctx
            .machine
            .profiles
            .publish(session_id, input.deadline)
            .await?;
        Ok(json!({ "published_summary": summary }))
    })
    .await
}
