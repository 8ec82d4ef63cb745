//! Safe writes: preview → single-use confirmation token → execute with an idempotency key.
//!
//! Every `operational_write` tool goes through [`write`]; nothing here names a tool. The
//! client's arguments carry the control fields `phase` (`preview`, the default, or
//! `execute`), `confirmation_token`, `idempotency_key` and `dry_run`; root strips them and
//! routes the remaining (domain) arguments to the hub.
//!
//! - `dry_run: true`: the hub's adapter runs its checks and reports what it would do.
//! - `preview`: the same dry run on the hub, plus a confirmation token bound to the lease,
//!   tool, target and the SHA-256 of the domain arguments, valid `limits.confirmation_ttl_sec`
//!   (120 s by default), usable once (only its hash is stored).
//! - `execute`: needs an `idempotency_key`. A key already used with the same arguments returns
//!   the first result marked `replay` and runs nothing; with other arguments it is an
//!   `idempotency_conflict`. Otherwise the token must be presented and is consumed (unknown,
//!   used, expired or bound to something else: `confirmation_required`), then the write runs.

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::event::OperationalEvent;
use mcp_shared::time::{format, from_unix_ms, now, unix_ms};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::app::App;
use crate::call::{CallContext, dispatch};
use crate::catalog::ContractEntry;
use crate::store::{ConfirmationRow, IdempotencyRow};

/// Prefix of confirmation tokens (redacted like every bearer).
pub const CONFIRMATION_PREFIX: &str = "mcpc_";

fn internal(e: impl std::fmt::Display) -> ToolError {
    tracing::error!(error = %e, "store failure in the write flow");
    ToolError::new(ErrorCode::Internal, "the write ledger is unavailable")
}

fn args_hash(domain: &Value) -> String {
    hex::encode(Sha256::digest(mcp_shared::canonical::to_vec(domain)))
}

pub async fn write(
    app: &App,
    ctx: &CallContext,
    entry: &ContractEntry,
    arguments: &Value,
    event: &mut OperationalEvent,
) -> Result<Value, ToolError> {
    let c = &entry.contract;
    let lease = ctx.lease.lease();
    let mut domain = arguments.clone();
    let obj = domain.as_object_mut().ok_or_else(|| {
        ToolError::new(ErrorCode::InvalidArguments, "arguments must be an object")
    })?;
    let phase = obj
        .remove("phase")
        .and_then(|p| p.as_str().map(String::from))
        .unwrap_or_else(|| "preview".into());
    let token = obj
        .remove("confirmation_token")
        .and_then(|t| t.as_str().map(String::from));
    let key = obj
        .remove("idempotency_key")
        .and_then(|k| k.as_str().map(String::from));
    let dry_run = obj
        .remove("dry_run")
        .and_then(|d| d.as_bool())
        .unwrap_or(false);
    let hash = args_hash(&domain);

    if dry_run {
        event.dry_run = true;
        let effect = dispatch(app, ctx, entry, domain, true, None, event).await?;
        return Ok(
            json!({ "phase": "dry_run", "expected_effect": effect, "summary": "dry run: nothing was changed" }),
        );
    }
    match phase.as_str() {
        "preview" => {
            event.dry_run = true;
            let effect = dispatch(app, ctx, entry, domain, true, None, event).await?;
            let token = crate::auth::new_token(CONFIRMATION_PREFIX);
            let ttl = app.config.limits.confirmation_ttl_sec;
            let expires = now() + time::Duration::seconds(ttl as i64);
            app.store
                .insert_confirmation(&ConfirmationRow {
                    token_hash: crate::auth::token_hash(&token),
                    session_id: lease.session_id.clone(),
                    tool_id: c.tool_id.clone(),
                    target_id: lease.target_id.clone(),
                    args_hash: hash,
                    expires_at_ms: unix_ms(expires),
                })
                .await
                .map_err(internal)?;
            Ok(json!({
                "phase": "preview",
                "expected_effect": effect,
                "confirmation_token": token,
                "confirmation_expires_at": format(expires),
                "summary": format!(
                    "Nothing was changed. To apply, call `{}` again with the same arguments, phase \"execute\", this confirmation_token and an idempotency_key within {} s.",
                    c.tool_id, ttl
                ),
            }))
        }
        "execute" => {
            let key = key.ok_or_else(|| {
                ToolError::new(
                    ErrorCode::InvalidArguments,
                    "phase \"execute\" needs an idempotency_key",
                )
            })?;
            if let Some(first) = app
                .store
                .get_idempotency(&lease.target_id, &c.tool_id, &key)
                .await
                .map_err(internal)?
            {
                if first.args_hash != hash {
                    return Err(ToolError::new(
                        ErrorCode::IdempotencyConflict,
                        format!("idempotency_key `{key}` was already used with other arguments"),
                    ));
                }
                let result: Value = serde_json::from_str(&first.result).map_err(internal)?;
                event.result_summary = Some(format!("replay of event {}", first.event_id));
                return Ok(json!({
                    "phase": "execute",
                    "replay": true,
                    "idempotency_key": key,
                    "result": result,
                    "summary": format!("replay: the first execution (event {}) is returned; nothing ran again", first.event_id),
                }));
            }
            let token = token.ok_or_else(|| {
                ToolError::new(ErrorCode::ConfirmationRequired, format!("`{}` writes: call it with phase \"preview\" first and execute with its confirmation_token", c.tool_id))
            })?;
            let Some(conf) = app
                .store
                .consume_confirmation(&crate::auth::token_hash(&token))
                .await
                .map_err(internal)?
            else {
                return Err(ToolError::new(
                    ErrorCode::ConfirmationRequired,
                    "the confirmation token is unknown or was already used; preview again",
                ));
            };
            if conf.expires_at_ms < unix_ms(now()) {
                return Err(ToolError::new(
                    ErrorCode::ConfirmationRequired,
                    format!(
                        "the confirmation token expired at {}; preview again",
                        format(from_unix_ms(conf.expires_at_ms))
                    ),
                ));
            }
            if conf.session_id != lease.session_id
                || conf.tool_id != c.tool_id
                || conf.target_id != lease.target_id
            {
                return Err(ToolError::new(
                    ErrorCode::ConfirmationRequired,
                    "the confirmation token was issued for another lease, tool or target",
                ));
            }
            if conf.args_hash != hash {
                return Err(ToolError::new(
                    ErrorCode::ConfirmationRequired,
                    "the confirmation token was issued for other arguments; preview these",
                ));
            }
            let result = dispatch(app, ctx, entry, domain, false, Some(key.clone()), event).await?;
            // The replay copy never holds a secret (an issued bearer is shown once).
            let mut stored = result.clone();
            app.redactor.redact(
                "result",
                &mut stored,
                &c.redaction.fields,
                &entry.redaction_patterns,
                &mut Vec::new(),
            );
            let row = IdempotencyRow {
                args_hash: hash,
                result: stored.to_string(),
                event_id: event.event_id.clone(),
            };
            app.store
                .put_idempotency(&lease.target_id, &c.tool_id, &key, &row, unix_ms(now()))
                .await
                .map_err(internal)?;
            Ok(
                json!({ "phase": "execute", "replay": false, "idempotency_key": key, "result": result }),
            )
        }
        other => Err(ToolError::new(
            ErrorCode::InvalidArguments,
            format!("phase must be \"preview\" or \"execute\", not `{other}`"),
        )),
    }
}
