//! `hub.get_test_results`: recorded results of allowed tests, newest first, from
//! `<state_dir>/test-results.json`. Arguments: `{"name"?: string, "limit"?: 1..=50}` (default
//! 10). A name that is neither configured nor recorded is `invalid_arguments` naming the
//! allowed tests.

use mcp_shared::error::{ErrorCode, ToolError};
use serde_json::{Value, json};

use crate::context::HubContext;
use crate::store::results::KEEP_PER_TEST;

/// Results returned when no `limit` is given.
pub(crate) const DEFAULT_LIMIT: usize = 10;

pub(crate) fn run(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let bad = |m: String| ToolError::new(ErrorCode::InvalidArguments, m);
    let map = match arguments {
        Value::Object(m) => m.clone(),
        Value::Null => serde_json::Map::new(),
        _ => return Err(bad("arguments must be an object".into())),
    };
    if let Some(k) = map.keys().find(|k| *k != "name" && *k != "limit") {
        return Err(bad(format!(
            "unknown argument `{k}`; this tool takes `name` and `limit`"
        )));
    }
    let name = match map.get("name") {
        None => None,
        Some(Value::String(n)) if !n.is_empty() => Some(n.as_str()),
        Some(_) => return Err(bad("`name` must be a non-empty string".into())),
    };
    let limit = match map.get("limit") {
        None => DEFAULT_LIMIT,
        Some(v) => match v.as_u64() {
            Some(n @ 1..=50) => usize::try_from(n).unwrap_or(KEEP_PER_TEST),
            _ => return Err(bad("`limit` must be an integer from 1 to 50".into())),
        },
    };
    let results = ctx.stores.test_results.recent(name, limit)?;
    if let Some(name) = name
        && results.is_empty()
        && !ctx
            .config
            .skill
            .allowed_tests
            .iter()
            .any(|t| t.name == name)
    {
        return Err(super::test_runs::unknown_test(ctx, name));
    }
    Ok(json!({ "results": results }))
}
