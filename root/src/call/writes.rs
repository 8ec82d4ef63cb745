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
//! - `execute`: needs an `idempotency_key`, which belongs to the lease that sends it (its
//!   rotation lineage; the adapter gets it as `lease:<lineage>/<key>`): another lease's
//!   identical key is a different key. The key is claimed before anything runs
//!   (`call::claims`): a key this lease already used with the same arguments returns the
//!   first result marked `replay` and runs nothing (a caller racing the first waits for it,
//!   or answers `idempotency_in_progress`); with other arguments it is an
//!   `idempotency_conflict`. Otherwise the token must be presented and is consumed (unknown,
//!   used, expired or bound to something else: `confirmation_required`), then the write runs
//!   with the preview's expected effect as `confirmed_effect`: an adapter whose world moved
//!   since (a branch to deploy now points elsewhere) refuses with `conflict`.
//!
//! [`has_effect`] says from the same control fields which calls' audit events are flushed
//! before their answer (an execute, whatever its outcome) and which only written.

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::event::OperationalEvent;
use mcp_shared::protocol::CallBody;
use mcp_shared::time::{format, from_unix_ms, now, unix_ms};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::app::App;
use crate::call::claims::{self, Claimed, Redeemed};
use crate::call::context::{CallContext, Confirmation};
use crate::call::dispatch::dispatch;
use crate::catalog::ContractEntry;
use crate::store::{ApprovalRow, ApprovalStatus, ConfirmationRow, IdempotencyKey};

/// Prefix of confirmation tokens (redacted like every bearer).
pub(crate) const CONFIRMATION_PREFIX: &str = "mcpc_";

fn internal(e: impl std::fmt::Display) -> ToolError {
    tracing::error!(error = %e, "store failure in the write flow");
    ToolError::new(ErrorCode::Internal, "the write ledger is unavailable")
}

/// The idempotency key an adapter is handed: the caller's key under its owner, so the
/// target's own ledger (which outlives root's) keeps two leases' keys apart as well.
pub(crate) fn hub_key(owner: &str, key: &str) -> String {
    format!("{owner}/{key}")
}

/// The digest a confirmation is bound to: SHA-256 of the domain arguments' canonical JSON.
pub(crate) fn args_hash(domain: &Value) -> String {
    hex::encode(Sha256::digest(mcp_shared::canonical::to_vec(domain)))
}

/// The write-control fields a write carries beside its domain arguments, taken out of them
/// before the arguments are hashed or run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Controls {
    pub(crate) phase: Phase,
    pub(crate) confirmation_token: Option<String>,
    pub(crate) idempotency_key: Option<String>,
    pub(crate) dry_run: bool,
}

/// A write's phase (`preview` when the call names none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Phase {
    Preview,
    Execute,
    /// A phase no write has, refused by name.
    Unknown(String),
}

impl Controls {
    /// Takes the control fields out of `arguments`, leaving the domain arguments. A control
    /// field of the wrong type (`"dry_run": "true"`, a numeric key) is refused by name rather
    /// than read as absent, which could turn a dry run into a preview.
    pub(crate) fn take(
        arguments: &mut serde_json::Map<String, Value>,
    ) -> Result<Controls, ToolError> {
        let wrong = |name: &str, kind: &str| {
            ToolError::new(
                ErrorCode::InvalidArguments,
                format!("`{name}` must be {kind}"),
            )
        };
        let mut text = |name: &str| match arguments.remove(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(wrong(name, "a string")),
        };
        let phase = match text("phase")?.as_deref() {
            None | Some("preview") => Phase::Preview,
            Some("execute") => Phase::Execute,
            Some(other) => Phase::Unknown(other.to_owned()),
        };
        let confirmation_token = text("confirmation_token")?;
        let idempotency_key = text("idempotency_key")?;
        let dry_run = match arguments.remove("dry_run") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => b,
            Some(_) => return Err(wrong("dry_run", "true or false")),
        };
        Ok(Controls {
            phase,
            confirmation_token,
            idempotency_key,
            dry_run,
        })
    }

    /// The control fields of `arguments`, which stay as they are (`None`: not an object).
    pub(crate) fn read(arguments: &Value) -> Option<Result<Controls, ToolError>> {
        let mut copy = arguments.as_object()?.clone();
        Some(Controls::take(&mut copy))
    }
}

/// What a write's preview answers: the expected effect and the token its execute presents
/// (and, for a write that needs one, the operator approval it waits for).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Preview {
    /// Always `preview`.
    pub(crate) phase: String,
    pub(crate) expected_effect: Value,
    pub(crate) confirmation_token: String,
    /// RFC 3339.
    pub(crate) confirmation_expires_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) approval: Option<PendingApproval>,
    /// What to do next, in words.
    pub(crate) summary: String,
}

/// The approval a preview opened.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PendingApproval {
    pub(crate) approval_id: String,
    pub(crate) status: ApprovalStatus,
    /// RFC 3339.
    pub(crate) expires_at: String,
}

/// Whether a call may have an effect, so that its event is flushed before its answer (allowed
/// or refused): a write's execute, or a write call whose phase is not clearly a preview or
/// a dry run. Reads, previews, dry runs and unknown tools change nothing.
pub(crate) fn has_effect(entry: Option<&ContractEntry>, arguments: &Value) -> bool {
    let Some(entry) = entry else { return false };
    if entry.contract.side_effect == mcp_shared::SideEffectClass::Read {
        return false;
    }
    !matches!(
        Controls::read(arguments),
        Some(Ok(c)) if c.dry_run || c.phase == Phase::Preview
    )
}

/// A write call: a dry run, its preview (a confirmation token) or its execute (once per
/// idempotency key, with the preview's token).
pub(crate) async fn write(
    app: &App,
    ctx: &CallContext,
    entry: &ContractEntry,
    arguments: &Value,
    event: &mut OperationalEvent,
) -> Result<Value, ToolError> {
    let c = &entry.contract;
    let mut domain = arguments.clone();
    let obj = domain.as_object_mut().ok_or_else(|| {
        ToolError::new(ErrorCode::InvalidArguments, "arguments must be an object")
    })?;
    let mut controls = Controls::take(obj)?;
    if let Some(answer) = &ctx.confirmation {
        answered(app, c, &mut controls, answer).await?;
    }
    let hash = args_hash(&domain);

    if controls.dry_run {
        event.dry_run = true;
        let effect = dispatch(app, ctx, entry, CallBody::dry_run(domain), event).await?;
        return Ok(
            json!({ "phase": "dry_run", "expected_effect": effect, "summary": "dry run: nothing was changed" }),
        );
    }
    match &controls.phase {
        Phase::Preview => preview(app, ctx, entry, domain, hash, event).await,
        Phase::Execute if c.proposes.is_some() => Err(ToolError::new(
            ErrorCode::InvalidArguments,
            format!(
                "`{}` only proposes; execute the proposal with `{}` and its confirmation_token",
                c.tool_id,
                c.proposes.as_deref().unwrap_or_default()
            ),
        )),
        Phase::Execute => execute(app, ctx, entry, domain, hash, controls, event).await,
        Phase::Unknown(other) => Err(ToolError::new(
            ErrorCode::InvalidArguments,
            format!("phase must be \"preview\" or \"execute\", not `{other}`"),
        )),
    }
}

/// Applies a retry's confirmation answer to the execute it was asked for.
async fn answered(
    app: &App,
    c: &mcp_shared::ToolContract,
    controls: &mut Controls,
    answer: &Confirmation,
) -> Result<(), ToolError> {
    if controls.phase != Phase::Execute || controls.dry_run || controls.confirmation_token.is_some()
    {
        return Err(ToolError::new(
            ErrorCode::InvalidArguments,
            "requestState answers the execute it was issued for: phase \"execute\", no dry_run and no confirmation_token",
        ));
    }
    match answer {
        Confirmation::Confirmed(token) => {
            controls.confirmation_token = Some(token.clone());
            Ok(())
        }
        Confirmation::Refused { token, why } => {
            app.store
                .consume_confirmation(&crate::auth::token_hash(token))
                .await
                .map_err(internal)?;
            Err(ToolError::new(
                ErrorCode::ConfirmationRequired,
                format!(
                    "`{}` was not confirmed ({why}); nothing was changed",
                    c.tool_id
                ),
            ))
        }
        Confirmation::Invalid(e) => Err(e.clone()),
    }
}

/// The execute phase: the key is claimed first (`call::claims`), so a replay, or a caller
/// racing the first, answers the first execution; otherwise the confirmation token is
/// redeemed, the adapter runs, and the result is kept under the key. A claim whose
/// execution fails or never starts is released.
async fn execute(
    app: &App,
    ctx: &CallContext,
    entry: &ContractEntry,
    domain: Value,
    hash: String,
    controls: Controls,
    event: &mut OperationalEvent,
) -> Result<Value, ToolError> {
    let c = &entry.contract;
    let lease = ctx.lease.lease();
    let key = controls.idempotency_key.clone().ok_or_else(|| {
        ToolError::new(
            ErrorCode::InvalidArguments,
            "phase \"execute\" needs an idempotency_key",
        )
    })?;
    let owner = ctx.lease.idempotency_owner();
    let at = IdempotencyKey {
        owner: &owner,
        target_id: &lease.target_id,
        tool_id: &c.tool_id,
        key: &key,
    };
    let timeout = std::time::Duration::from_millis(c.timeout_ms);
    let taken_over =
        match claims::claim(app, &at, &hash, &event.event_id, timeout, &ctx.lease).await? {
            Claimed::Replay(answer) => {
                event.result_summary = answer["summary"].as_str().map(str::to_owned);
                return Ok(answer);
            }
            Claimed::Run(taken_over) => taken_over,
        };
    let ready = match taken_over {
        Some(r) => Ok((None, r)),
        None => confirmed(app, ctx, entry, domain, &hash, controls, &at, event).await,
    };
    let (approval, redeemed) = match ready {
        Ok(ready) => ready,
        Err(e) => {
            claims::release(app, &at, &event.event_id).await;
            return Err(e);
        }
    };
    let input = CallBody {
        arguments: redeemed.arguments,
        dry_run: false,
        idempotency_key: Some(hub_key(at.owner, at.key)),
        confirmed_effect: redeemed.confirmed_effect,
    };
    let outcome = dispatch(app, ctx, entry, input, event).await;
    // A failed execution changed nothing root keeps: the key may run again (under the same
    // hub key, which the target's ledger answers if it got that far).
    if outcome.is_err() {
        claims::release(app, &at, &event.event_id).await;
    }
    applied(app, entry, &at, approval, outcome, event).await
}

/// What a claimed execute runs: its confirmation redeemed (after its approval, when the tool
/// needs one), noted on the claim; the approval.
#[allow(clippy::too_many_arguments)]
async fn confirmed(
    app: &App,
    ctx: &CallContext,
    entry: &ContractEntry,
    domain: Value,
    hash: &str,
    controls: Controls,
    at: &IdempotencyKey<'_>,
    event: &OperationalEvent,
) -> Result<(Option<ApprovalRow>, Redeemed), ToolError> {
    let c = &entry.contract;
    let token = controls.confirmation_token.ok_or_else(|| {
        ToolError::new(ErrorCode::ConfirmationRequired, format!("`{}` writes: call it with phase \"preview\" first and execute with its confirmation_token", c.tool_id))
    })?;
    let token_hash = crate::auth::token_hash(&token);
    // An approval is checked before the token is consumed: a pending one keeps it.
    let approval = if c.requires_approval {
        Some(approved(app, &token_hash).await?)
    } else {
        None
    };
    let (arguments, confirmed_effect) = redeem(app, ctx, c, &token_hash, domain, hash).await?;
    let r = Redeemed {
        arguments,
        confirmed_effect,
    };
    claims::redeemed(app, at, &event.event_id, &r).await?;
    Ok((approval, r))
}

/// An execution's outcome recorded: its approval applied or failed, its result kept under
/// the key (secrets redacted); the answer.
async fn applied(
    app: &App,
    entry: &ContractEntry,
    at: &IdempotencyKey<'_>,
    approval: Option<ApprovalRow>,
    outcome: Result<Value, ToolError>,
    event: &mut OperationalEvent,
) -> Result<Value, ToolError> {
    let c = &entry.contract;
    // What ran is answered whatever the bookkeeping after it meets (logged).
    if let Some(a) = &approval {
        let to = if outcome.is_ok() {
            ApprovalStatus::Applied
        } else {
            ApprovalStatus::Failed
        };
        if let Err(e) = app
            .store
            .transition_approval(
                &a.approval_id,
                ApprovalStatus::Approved,
                to,
                unix_ms(now()),
                None,
                Some(&event.event_id),
            )
            .await
        {
            tracing::error!(approval_id = %a.approval_id, error = %e, "cannot record how an approved write ended");
        }
    }
    let result = outcome?;
    // The replay copy never holds a secret (an issued bearer is shown once).
    let mut stored = result.clone();
    app.audit.redactor.redact(
        "result",
        &mut stored,
        &c.redaction.fields,
        &entry.redaction_patterns,
        &mut Vec::new(),
    );
    claims::finish(app, at, &event.event_id, &stored).await;
    let mut answer =
        json!({ "phase": "execute", "replay": false, "idempotency_key": at.key, "result": result });
    if let Some(a) = approval {
        answer["approval_id"] = json!(a.approval_id);
        event.result_summary = Some(format!("applied after operator approval {}", a.approval_id));
    }
    Ok(answer)
}

/// Consumes a confirmation token (single use, whatever follows) and checks it was issued for
/// this lease, tool, target and arguments and has not expired. What runs: the arguments
/// (a proposal's token carries its own) and the effect the caller confirmed.
async fn redeem(
    app: &App,
    ctx: &CallContext,
    c: &mcp_shared::contract::ToolContract,
    token_hash: &str,
    domain: Value,
    hash: &str,
) -> Result<(Value, Option<Value>), ToolError> {
    let lease = ctx.lease.lease();
    let Some(conf) = app
        .store
        .consume_confirmation(token_hash)
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
    // A proposal's token carries its arguments: the execute may repeat them or omit them.
    let run_args = match &conf.arguments {
        Some(stored) => {
            let empty = domain.as_object().is_some_and(|o| o.is_empty());
            if !empty && conf.args_hash != hash {
                return Err(ToolError::new(
                    ErrorCode::ConfirmationRequired,
                    "the confirmation token was issued for other arguments; propose these",
                ));
            }
            serde_json::from_str(stored).map_err(internal)?
        }
        None if conf.args_hash != hash => {
            return Err(ToolError::new(
                ErrorCode::ConfirmationRequired,
                "the confirmation token was issued for other arguments; preview these",
            ));
        }
        None => domain,
    };
    // What the caller confirmed goes along: the adapter refuses (`conflict`) rather
    // than run something else should its world have moved since the preview.
    let confirmed_effect = conf
        .effect
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
        .map_err(internal)?;
    Ok((run_args, confirmed_effect))
}

/// The preview phase: the target's (or root adapter's) dry run and a confirmation token for
/// the tool that will execute (the proposed one for a proposing tool); an approval is opened
/// when that tool needs one.
async fn preview(
    app: &App,
    ctx: &CallContext,
    entry: &ContractEntry,
    domain: Value,
    hash: String,
    event: &mut OperationalEvent,
) -> Result<Value, ToolError> {
    let c = &entry.contract;
    let lease = ctx.lease.lease();
    // The tool the token is for.
    let executes = match &c.proposes {
        Some(id) => app.catalog.contracts.get(id).cloned().ok_or_else(|| {
            ToolError::new(
                ErrorCode::Internal,
                format!("proposed tool `{id}` is not loaded"),
            )
        })?,
        None => app
            .catalog
            .contracts
            .get(&c.tool_id)
            .cloned()
            .ok_or_else(|| ToolError::new(ErrorCode::Internal, "contract vanished"))?,
    };
    let needs_approval = executes.contract.requires_approval;
    event.dry_run = true;
    let effect = dispatch(app, ctx, entry, CallBody::dry_run(domain.clone()), event).await?;
    let token = crate::auth::new_token(CONFIRMATION_PREFIX);
    let ttl = if needs_approval {
        app.config.limits.approval_ttl_sec
    } else {
        app.config.limits.confirmation_ttl_sec
    };
    let now_ms = unix_ms(now());
    let expires = now() + time::Duration::seconds(ttl as i64);
    let token_hash = crate::auth::token_hash(&token);
    app.store
        .insert_confirmation(&ConfirmationRow {
            token_hash: token_hash.clone(),
            session_id: lease.session_id.clone(),
            tool_id: executes.contract.tool_id.clone(),
            target_id: lease.target_id.clone(),
            args_hash: hash,
            expires_at_ms: unix_ms(expires),
            arguments: c.proposes.as_ref().map(|_| domain.to_string()),
            effect: Some(effect.to_string()),
        })
        .await
        .map_err(internal)?;
    let next = format!(
        "call `{}` with phase \"execute\", this confirmation_token and an idempotency_key within {} s",
        executes.contract.tool_id, ttl
    );
    let mut answer = Preview {
        phase: "preview".into(),
        expected_effect: effect,
        confirmation_token: token,
        confirmation_expires_at: format(expires),
        approval: None,
        summary: format!("Nothing was changed. To apply, {next}."),
    };
    if needs_approval {
        let approval_id = format!("apr_{}", uuid::Uuid::now_v7().simple());
        app.store
            .insert_approval(&ApprovalRow {
                approval_id: approval_id.clone(),
                token_hash,
                session_id: lease.session_id.clone(),
                target_id: lease.target_id.clone(),
                tool_id: executes.contract.tool_id.clone(),
                arguments: domain,
                effect: answer.expected_effect.clone(),
                status: ApprovalStatus::Pending,
                requested_at_ms: now_ms,
                expires_at_ms: unix_ms(expires),
                decided_at_ms: None,
                reason: None,
                preview_event_id: event.event_id.clone(),
                applied_event_id: None,
            })
            .await
            .map_err(internal)?;
        answer.summary = format!(
            "Nothing was changed. An operator must approve {approval_id} (mcp-root admin approvals approve {approval_id}); then {next}. Until then the execute answers approval_pending."
        );
        answer.approval = Some(PendingApproval {
            approval_id,
            status: ApprovalStatus::Pending,
            expires_at: format(expires),
        });
    }
    Ok(json!(answer))
}

/// A confirmation root issues itself for one execute of `tool_id` with `domain` under
/// `lease`, carrying the `effect` the execute confirms: a fleet write's target, whose execute
/// the operator confirmed for the whole set (`fleet::preview`). Bound and redeemed like a
/// preview's token; valid `confirmation_ttl_sec`.
pub(crate) async fn confirmation_for(
    app: &App,
    lease: &mcp_shared::SessionLease,
    tool_id: &str,
    domain: &Value,
    effect: Option<&Value>,
) -> Result<String, ToolError> {
    let token = crate::auth::new_token(CONFIRMATION_PREFIX);
    let expires = now() + time::Duration::seconds(app.config.limits.confirmation_ttl_sec as i64);
    app.store
        .insert_confirmation(&ConfirmationRow {
            token_hash: crate::auth::token_hash(&token),
            session_id: lease.session_id.clone(),
            tool_id: tool_id.to_owned(),
            target_id: lease.target_id.clone(),
            args_hash: args_hash(domain),
            expires_at_ms: unix_ms(expires),
            arguments: None,
            effect: effect.map(Value::to_string),
        })
        .await
        .map_err(internal)?;
    Ok(token)
}

/// The approval of a token, if it allows the execute now: `approval_pending` while undecided,
/// `confirmation_required` once rejected, expired, failed or used.
async fn approved(app: &App, token_hash: &str) -> Result<ApprovalRow, ToolError> {
    let Some(a) = app
        .store
        .get_approval(None, Some(token_hash))
        .await
        .map_err(internal)?
    else {
        return Err(ToolError::new(
            ErrorCode::ConfirmationRequired,
            "the confirmation token is unknown or was already used; preview again",
        ));
    };
    match a.status_at(unix_ms(now())) {
        ApprovalStatus::Approved => Ok(a),
        ApprovalStatus::Pending => Err(ToolError::new(
            ErrorCode::ApprovalPending,
            format!(
                "approval {} is pending: an operator must approve it; retry this execute afterwards",
                a.approval_id
            ),
        )
        .with_details(json!({ "approval_id": a.approval_id }))),
        ApprovalStatus::Rejected => Err(ToolError::new(
            ErrorCode::ConfirmationRequired,
            format!(
                "approval {} was rejected{}; nothing was changed",
                a.approval_id,
                a.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
            ),
        )),
        ApprovalStatus::Expired => Err(ToolError::new(
            ErrorCode::ConfirmationRequired,
            format!("approval {} expired; propose again", a.approval_id),
        )),
        other @ (ApprovalStatus::Applied | ApprovalStatus::Failed) => Err(ToolError::new(
            ErrorCode::ConfirmationRequired,
            format!("approval {} was already used ({other}); propose again", a.approval_id),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(v: Value) -> Result<(Controls, Value), ToolError> {
        let mut v = v;
        let controls = Controls::take(v.as_object_mut().unwrap())?;
        Ok((controls, v))
    }

    #[test]
    fn controls_are_taken_out_of_the_domain_arguments() {
        let (c, domain) = take(json!({
            "name": "smoke", "phase": "execute", "confirmation_token": "mcpc_x",
            "idempotency_key": "k1", "dry_run": false
        }))
        .unwrap();
        assert_eq!(domain, json!({ "name": "smoke" }));
        assert_eq!(c.phase, Phase::Execute);
        assert_eq!(c.confirmation_token.as_deref(), Some("mcpc_x"));
        assert_eq!(c.idempotency_key.as_deref(), Some("k1"));
        assert!(!c.dry_run);
        let (c, _) = take(json!({ "name": "smoke", "confirmation_token": null })).unwrap();
        assert_eq!((c.phase, c.confirmation_token), (Phase::Preview, None));
        let (c, _) = take(json!({ "phase": "apply" })).unwrap();
        assert_eq!(c.phase, Phase::Unknown("apply".into()));
    }

    #[test]
    fn a_control_field_of_the_wrong_type_is_refused_by_name() {
        for (args, field) in [
            (json!({ "dry_run": "true" }), "`dry_run`"),
            (json!({ "idempotency_key": 7 }), "`idempotency_key`"),
            (
                json!({ "confirmation_token": ["mcpc_x"] }),
                "`confirmation_token`",
            ),
            (json!({ "phase": true }), "`phase`"),
        ] {
            let e = take(args).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidArguments);
            assert!(e.message.contains(field), "{}", e.message);
        }
        assert!(Controls::read(&json!([1])).is_none());
        let args = json!({ "phase": "execute", "idempotency_key": "k" });
        assert!(Controls::read(&args).unwrap().is_ok());
        assert_eq!(
            args["phase"], "execute",
            "read leaves the arguments as they are"
        );
    }

    /// Which calls' events are flushed before their answer: writes' executes (and a write
    /// whose phase is not clearly a preview or a dry run), never reads, previews, dry runs
    /// or unknown tools.
    #[test]
    fn a_call_has_an_effect_only_when_it_may_change_something() {
        let contracts = crate::catalog::ContractRegistry::load(None).expect("built-in contracts");
        let read = contracts.get("hub.get_status").map(|e| &**e);
        let write = contracts.get("hub.restart_service").map(|e| &**e);
        let args = |v: Value| v;
        assert!(!has_effect(read, &args(json!({}))));
        assert!(!has_effect(None, &args(json!({"phase": "execute"}))));
        assert!(
            !has_effect(write, &args(json!({"service": "a"}))),
            "a preview"
        );
        assert!(!has_effect(
            write,
            &args(json!({"service": "a", "phase": "preview"}))
        ));
        assert!(!has_effect(
            write,
            &args(json!({"service": "a", "dry_run": true}))
        ));
        assert!(has_effect(
            write,
            &args(json!({"service": "a", "phase": "execute", "idempotency_key": "k"}))
        ));
        assert!(
            has_effect(write, &args(json!({"phase": "later"}))),
            "an unknown phase"
        );
        assert!(
            has_effect(write, &args(json!({"dry_run": "yes"}))),
            "malformed controls"
        );
        assert!(
            has_effect(write, &args(json!([1]))),
            "arguments that are no object"
        );
    }
}
