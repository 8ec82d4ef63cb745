//! Idempotency claims: an execute claims its key in the store before anything runs, so one
//! key runs once however many callers send it at once, on however many replicas.
//!
//! - The claim is one statement (`Store::claim_idempotency`): of concurrent callers exactly
//!   one wins and runs; the others wait for its outcome ([`WAIT`] at most) and replay it, or
//!   answer `idempotency_in_progress` with what to follow; a fleet write's, at once, with its
//!   run's id and state (a run may take hours).
//! - The winner notes what it redeemed (the arguments and the confirmed effect) once its
//!   confirmation is spent, records the result when done, and releases the claim when the
//!   execution failed or never started, so the key may be executed again.
//! - A claim outlives a crash of its replica: at start, that replica's claims that never got
//!   past their confirmation are released, and the others expire at once. A later caller with
//!   the same key and arguments takes an expired claim over and sends what was redeemed again
//!   under the same hub key: the target's own ledger answers its first execution (or `busy`
//!   while it still runs); a fleet write follows the run it started.

use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::time::{now, unix_ms};
use serde_json::{Value, json};

use crate::app::App;
use crate::store::{Claim, ClaimState, IdempotencyKey, IdempotencyRow, NewClaim};

/// How long a second caller waits for the first's outcome before answering
/// `idempotency_in_progress`.
const WAIT: Duration = Duration::from_secs(20);
/// A claim's life past its tool's timeout, after which another caller may take it over.
const SLACK: Duration = Duration::from_secs(30);

fn internal(e: impl std::fmt::Display) -> ToolError {
    tracing::error!(error = %e, "store failure in an idempotency claim");
    ToolError::new(ErrorCode::Internal, "the write ledger is unavailable")
}

/// What redeeming a confirmation gave an execution: what it runs, noted on its claim.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Redeemed {
    pub(crate) arguments: Value,
    #[serde(default)]
    pub(crate) confirmed_effect: Option<Value>,
}

/// What claiming a key gave this caller.
pub(crate) enum Claimed {
    /// Run it: a new claim (`None`), or an expired one taken over with what its first
    /// execution had redeemed (sent again without a confirmation).
    Run(Option<Redeemed>),
    /// The first execution's answer (a replay).
    Replay(Value),
}

/// Claims `at` for the execution `event_id` with arguments `hash`: the claim, or the first
/// execution's replay once it is done (waiting for it up to [`WAIT`], while the caller's
/// `lease` lasts: a caller whose authority ended meanwhile is answered `cancelled`, nothing
/// sent).
pub(crate) async fn claim(
    app: &App,
    at: &IdempotencyKey<'_>,
    hash: &str,
    event_id: &str,
    timeout: Duration,
    lease: &crate::leases::manager::LeaseEntry,
) -> Result<Claimed, ToolError> {
    let key = at.key;
    let until = tokio::time::Instant::now() + WAIT;
    let mut pause = Duration::from_millis(20);
    loop {
        let now_ms = unix_ms(now());
        let life = i64::try_from((timeout + SLACK).as_millis()).unwrap_or(i64::MAX / 4);
        let asked = NewClaim {
            args_hash: hash,
            event_id,
            claimed_by: app.replica_id(),
            now_ms,
            expires_at_ms: now_ms + life,
        };
        let held = match app
            .store
            .claim_idempotency(at, &asked)
            .await
            .map_err(internal)?
        {
            Claim::Won(detail) => {
                let redeemed = detail
                    .as_deref()
                    .map(serde_json::from_str::<Redeemed>)
                    .transpose()
                    .map_err(internal)?;
                return Ok(Claimed::Run(redeemed));
            }
            Claim::Held(row) => row,
        };
        if held.args_hash != hash {
            return Err(ToolError::new(
                ErrorCode::IdempotencyConflict,
                format!("idempotency_key `{key}` was already used with other arguments"),
            ));
        }
        if held.state == ClaimState::Done {
            return replay(key, &held).map(Claimed::Replay);
        }
        // A fleet write's run may take hours: its id and state now, to follow.
        if tokio::time::Instant::now() >= until || run_of(&held).is_some() {
            return Err(in_progress(app, key, &held).await);
        }
        if !lease.is_usable() {
            return Err(ToolError::new(
                ErrorCode::Cancelled,
                format!(
                    "the lease ended while idempotency_key `{key}`'s first execution (event {}) ran; nothing was sent",
                    held.event_id
                ),
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// The answer of a key's first execution, to a caller who sent the key again.
fn replay(key: &str, first: &IdempotencyRow) -> Result<Value, ToolError> {
    let result: Value = serde_json::from_str(&first.result).map_err(internal)?;
    Ok(json!({
        "phase": "execute",
        "replay": true,
        "idempotency_key": key,
        "result": result,
        "summary": format!("replay: the first execution (event {}) is returned; nothing ran again", first.event_id),
    }))
}

/// The fleet run a claim's execution started (its confirmed effect names it), if any.
fn run_of(held: &IdempotencyRow) -> Option<String> {
    let redeemed: Redeemed = serde_json::from_str(held.detail.as_deref()?).ok()?;
    Some(redeemed.confirmed_effect?["run_id"].as_str()?.to_owned())
}

/// `idempotency_in_progress`: the key's first execution still runs; what to follow.
async fn in_progress(app: &App, key: &str, held: &IdempotencyRow) -> ToolError {
    let run_id = run_of(held);
    let mut details = json!({ "idempotency_key": key, "event_id": held.event_id });
    let message = match run_id {
        Some(run_id) => {
            let state = match app.store.fleet_run(&run_id).await {
                Ok(Some(run)) => run.state.as_str(),
                _ => "unknown",
            };
            details["run_id"] = json!(run_id);
            details["state"] = json!(state);
            format!(
                "idempotency_key `{key}` started fleet run {run_id} ({state}); follow it with root.get_fleet_run, or send this execute again for its report once it ends"
            )
        }
        None => format!(
            "idempotency_key `{key}` is being executed (event {}); send this execute again to get its result once it is done",
            held.event_id
        ),
    };
    ToolError::new(ErrorCode::IdempotencyInProgress, message).with_details(details)
}

/// Notes on the claim what its execution redeemed (sent again by whoever takes it over).
pub(crate) async fn redeemed(
    app: &App,
    at: &IdempotencyKey<'_>,
    event_id: &str,
    what: &Redeemed,
) -> Result<(), ToolError> {
    let text = serde_json::to_string(what).map_err(internal)?;
    app.store
        .note_idempotency(at, event_id, &text)
        .await
        .map_err(internal)
}

/// Records the execution's result (`stored`, secrets redacted) under the key. What ran is
/// answered even when this fails (logged): the claim then expires, and the next caller with
/// the key sends it again under the same hub key, which the target's ledger answers.
pub(crate) async fn finish(app: &App, at: &IdempotencyKey<'_>, event_id: &str, stored: &Value) {
    match app
        .store
        .finish_idempotency(at, event_id, &stored.to_string())
        .await
    {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!(key = at.key, %event_id, "an idempotency claim was taken over before its execution finished")
        }
        Err(e) => {
            tracing::error!(key = at.key, %event_id, error = %e, "cannot record an execution's result under its idempotency key")
        }
    }
}

/// Releases the claim: its execution ran nothing, or failed.
pub(crate) async fn release(app: &App, at: &IdempotencyKey<'_>, event_id: &str) {
    if let Err(e) = app.store.release_idempotency(at, event_id).await {
        tracing::error!(key = at.key, %event_id, error = %e, "cannot release an idempotency claim; it expires");
    }
}
