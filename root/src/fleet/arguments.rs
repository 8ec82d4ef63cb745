//! A fleet run's arguments at rest: stored and shown redacted, as every request is before it
//! is stored (the run's record, its report, the console); what runs is kept apart only when
//! redaction changed something, encrypted under the master key and bound to the run's id.

use serde_json::Value;

use crate::app::App;
use crate::ops::error::Refusal;
use crate::store::FleetRunRow;

/// The arguments as a run stores them.
pub(crate) struct Stored {
    /// Redacted JSON: what the run's record and its report show.
    pub(crate) shown: String,
    /// The arguments as they run, encrypted; `None` when `shown` is that.
    pub(crate) sealed: Option<String>,
}

/// `arguments` of run `run_id` of `tool_id`, as the run stores them.
pub(crate) fn stored(
    app: &App,
    tool_id: &str,
    run_id: &str,
    arguments: &Value,
) -> Result<Stored, Refusal> {
    let mut shown = arguments.clone();
    let mut redacted = Vec::new();
    let (fields, patterns) = match app.catalog.contracts.get(tool_id) {
        Some(e) => (
            e.contract.redaction.fields.clone(),
            e.redaction_patterns.clone(),
        ),
        None => (Vec::new(), Vec::new()),
    };
    app.audit
        .redactor
        .redact("arguments", &mut shown, &fields, &patterns, &mut redacted);
    let sealed = if redacted.is_empty() {
        None
    } else {
        Some(
            app.master_key
                .encrypt(run_id, arguments.to_string().as_bytes())
                .map_err(Refusal::internal)?,
        )
    };
    Ok(Stored {
        shown: shown.to_string(),
        sealed,
    })
}

/// The arguments `run` runs with.
pub(crate) fn opened(app: &App, run: &FleetRunRow) -> Result<Value, Refusal> {
    let text = match &run.arguments_sealed {
        None => run.arguments.clone(),
        Some(sealed) => app
            .master_key
            .decrypt(&run.run_id, sealed)
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| {
                Refusal::internal(format!(
                    "fleet run {}: its arguments do not open with this zone's master key",
                    run.run_id
                ))
            })?,
    };
    serde_json::from_str(&text).map_err(Refusal::internal)
}
