//! A read run as it starts: its set resolved and frozen, the run stored `running` (then
//! driven by `execute::spawn`). The caller checked that the tool is a read it may run.

use mcp_shared::time::{now, unix_ms};
use serde_json::Value;

use super::plan::Plan;
use super::{RunState, set};
use crate::app::App;
use crate::hubs::selector::Selector;
use crate::ops::error::Refusal;
use crate::store::FleetRunRow;

/// What a read run is asked for.
pub(crate) struct ReadRun<'a> {
    /// `operator:<name>` or `lease:<session id>` (see `fleet::authority::Caller`).
    pub(crate) created_by: String,
    pub(crate) selector: &'a Selector,
    pub(crate) tool_id: String,
    pub(crate) arguments: Option<Value>,
    pub(crate) plan: Option<Plan>,
    pub(crate) trace_id: String,
}

/// Checks the plan and arguments, resolves and freezes the set, and stores the run.
pub(crate) async fn start(app: &App, ask: ReadRun<'_>) -> Result<FleetRunRow, Refusal> {
    let plan = ask.plan.unwrap_or_default();
    plan.check()
        .map_err(|e| Refusal::bad_request(format!("plan: {e}")))?;
    let arguments = ask.arguments.unwrap_or_else(|| serde_json::json!({}));
    if !arguments.is_object() {
        return Err(Refusal::bad_request("arguments must be a JSON object"));
    }
    let resolved = set::resolve(app, ask.selector)?;
    let run_id = uuid::Uuid::now_v7().to_string();
    let stored = super::arguments::stored(app, &ask.tool_id, &run_id, &arguments)?;
    let run = FleetRunRow {
        run_id,
        trace_id: ask.trace_id,
        created_by: ask.created_by,
        created_at_ms: unix_ms(now()),
        selector: ask.selector.as_str().to_owned(),
        tool_id: ask.tool_id,
        arguments: stored.shown,
        arguments_sealed: stored.sealed,
        plan: serde_json::to_string(&plan).map_err(Refusal::internal)?,
        set_hash: resolved.hash,
        state: RunState::Running,
        finished_at_ms: None,
        driver: super::execute::driver(app),
        profile: None,
        confirmation_hash: None,
        confirm_by_ms: None,
        write_key: None,
    };
    app.store
        .insert_fleet_run(&run, &resolved.targets)
        .await
        .map_err(Refusal::internal)?;
    Ok(run)
}
