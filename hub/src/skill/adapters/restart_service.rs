//! `hub.restart_service`: stops a managed service (SIGTERM to its process group, SIGKILL after
//! its `stop_timeout_ms`) and starts it again in normal mode, through the
//! [`crate::machine::services`] supervisor.
//!
//! - `dry_run`: changes nothing; answers the expected effect (the service's state, pid and
//!   mode now, and what execute would stop and start).
//! - otherwise: restarts and answers the outcome (old pid, new pid, how it stopped, state,
//!   restarts). A call carrying an idempotency key already recorded in the hub's write ledger
//!   gets that call's outcome back and restarts nothing; the same key in flight is `busy`.

use mcp_shared::error::{ErrorCode, ToolError};
use serde::Deserialize;
use serde_json::{Value, json};

use super::args::{Arguments, invalid, parse};
use super::call::CallInput;
use super::decl::Builtin;
use crate::config::MAX_SERVICE_NAME;
use crate::context::HubContext;
use crate::machine::services::Mode;
use crate::store::ledger::Begin;

fn tool_id() -> &'static str {
    Builtin::RestartService.decl().tool_id
}

/// The arguments of `hub.restart_service`: `{"service": "<name>"}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    service: String,
}

impl Arguments for Args {
    fn rule(_field: &str) -> String {
        "`service` (a string) is required".into()
    }

    fn not_an_object() -> String {
        "arguments must be an object {\"service\": \"<name>\"}".into()
    }
}

/// The service name from `{"service": "..."}` (nothing else is accepted).
pub(crate) fn service_name(arguments: &Value) -> Result<String, ToolError> {
    let Args { service } = parse(arguments)?;
    if service.is_empty() || service.len() > MAX_SERVICE_NAME {
        return Err(invalid(format!(
            "`service` must have 1 to {MAX_SERVICE_NAME} characters"
        )));
    }
    Ok(service)
}

pub(crate) async fn run(ctx: &HubContext, input: CallInput) -> Result<Value, ToolError> {
    let name = service_name(&input.body.arguments)?;
    let name = name.as_str();
    let config = ctx.machine.services.config(name)?;
    if input.body.dry_run {
        let now = ctx.machine.services.get(name)?;
        let argv: Vec<String> = config
            .argv
            .iter()
            .map(|a| crate::skill::adapters::redact::redact_with(a, &ctx.logging.redaction).0)
            .collect();
        let stop = match now.pid {
            Some(pid) => format!(
                "will stop pid {pid} (SIGTERM to its process group, SIGKILL after {} ms)",
                config.stop_timeout_ms
            ),
            None => format!(
                "it is not running ({}); nothing to stop",
                now.state.as_str()
            ),
        };
        return Ok(json!({
            "action": "restart_service",
            "service": name,
            "state": now.state,
            "pid": now.pid,
            "mode": now.mode,
            "restarts": now.restarts,
            "next_mode": Mode::Normal,
            "argv": argv,
            "cwd": config.cwd.as_ref().map(|p| p.display().to_string()),
            "stop_timeout_ms": config.stop_timeout_ms,
            "description": format!("{stop} and start `{}`", argv.join(" ")),
        }));
    }
    let tool = tool_id();
    let _claim = match &input.body.idempotency_key {
        Some(key) => match ctx.stores.ledger.begin(tool, key)? {
            Begin::Replay(first) => return replayed(first, name, key),
            Begin::Run(claim) => Some(claim),
        },
        None => None,
    };
    let outcome = ctx
        .machine
        .services
        .restart(name, Mode::Normal, input.deadline)
        .await?;
    let result = serde_json::to_value(&outcome)
        .map_err(|e| ToolError::new(ErrorCode::Internal, format!("cannot encode result: {e}")))?;
    if let Some(key) = &input.body.idempotency_key {
        ctx.stores.ledger.record(tool, key, &result).map_err(|e| {
            ToolError::new(
                ErrorCode::Internal,
                format!(
                    "service `{name}` was restarted (pid {}) but the idempotency key was not recorded: {}",
                    outcome.new_pid, e.message
                ),
            )
        })?;
    }
    tracing::info!(service = name, old_pid = ?outcome.old_pid, new_pid = outcome.new_pid, "service restarted on request");
    Ok(result)
}

/// The recorded outcome for a repeated key (which must name the same service).
fn replayed(first: Value, name: &str, key: &str) -> Result<Value, ToolError> {
    if first["service"] != name {
        return Err(ToolError::new(
            ErrorCode::InvalidArguments,
            format!(
                "idempotency key `{key}` was already used to restart service {}, not `{name}`",
                first["service"]
            ),
        ));
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::config::{HubConfig, ServiceConfig};
    use crate::skill::adapters::AdapterKind;

    fn soon() -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_secs(30)
    }

    async fn call(
        ctx: &Arc<HubContext>,
        args: Value,
        dry_run: bool,
        key: Option<&str>,
    ) -> Result<Value, ToolError> {
        let mut input = CallInput::new("c", args, soon());
        input.body.dry_run = dry_run;
        input.body.idempotency_key = key.map(str::to_owned);
        AdapterKind::RestartService.run(ctx.clone(), input).await
    }

    #[tokio::test]
    async fn dry_run_execute_and_replay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = HubConfig::new("hub:t", "test", "ws://x", "t", dir.path());
        config.services = vec![
            ServiceConfig::new("web", vec!["sleep".into(), "30".into()]),
            ServiceConfig::new("db", vec!["sleep".into(), "30".into()]),
        ];
        let ctx = Arc::new(HubContext::new(config).expect("context"));
        ctx.machine.services.start().await.expect("start");
        let pid = ctx
            .machine
            .services
            .get("web")
            .expect("web")
            .pid
            .expect("pid");

        let effect = call(&ctx, json!({"service": "web"}), true, Some("k"))
            .await
            .expect("dry run");
        assert_eq!(effect["pid"], pid);
        assert_eq!(effect["state"], "running");
        assert!(
            effect["description"]
                .as_str()
                .expect("description")
                .starts_with(&format!("will stop pid {pid} ")),
            "{effect}"
        );
        assert_eq!(
            ctx.machine.services.get("web").expect("web").pid,
            Some(pid),
            "nothing changed"
        );

        let first = call(&ctx, json!({"service": "web"}), false, Some("k"))
            .await
            .expect("restart");
        assert_eq!(first["old_pid"], pid);
        assert_ne!(first["new_pid"], pid);
        assert_eq!(first["restarts"], 1);
        let again = call(&ctx, json!({"service": "web"}), false, Some("k"))
            .await
            .expect("replay");
        assert_eq!(again, first);
        let now = ctx.machine.services.get("web").expect("web");
        assert_eq!(
            (now.pid, now.restarts),
            (first["new_pid"].as_u64().map(|p| p as u32), 1)
        );
        // Survives a hub restart: the key is in the state dir.
        let ledger = crate::store::ledger::WriteLedger::new(dir.path());
        assert_eq!(ledger.replay(tool_id(), "k").expect("ledger"), Some(first));

        let err = call(&ctx, json!({"service": "db"}), false, Some("k"))
            .await
            .expect_err("key of another service");
        assert_eq!(err.code, ErrorCode::InvalidArguments);
        for bad in [
            json!({}),
            json!({"service": "web", "argv": ["x"]}),
            json!({"service": 1}),
        ] {
            let err = call(&ctx, bad.clone(), false, None).await.expect_err("bad");
            assert_eq!(err.code, ErrorCode::InvalidArguments, "{bad}");
        }
        let err = call(&ctx, json!({"service": "nope"}), true, None)
            .await
            .expect_err("unknown");
        assert!(
            err.message.contains("`web`") && err.message.contains("`db`"),
            "{err}"
        );
        ctx.machine.services.stop().await;
    }
}
