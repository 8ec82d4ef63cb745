//! `hub.get_test_results`: recorded results of allowed tests, newest first, from
//! `<state_dir>/test-results.json`. Arguments: `{"name"?: string, "limit"?: 1..=50}` (default
//! 10). A name that is neither configured nor recorded is `invalid_arguments` naming the
//! allowed tests.

use mcp_shared::error::ToolError;
use serde::Deserialize;
use serde_json::{Value, json};

use super::args::{Arguments, invalid, parse, present};

use crate::context::HubContext;
use crate::store::results::KEEP_PER_TEST;

/// Results returned when no `limit` is given.
pub(crate) const DEFAULT_LIMIT: usize = 10;

/// The arguments of `hub.get_test_results`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default, deserialize_with = "present")]
    name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    limit: Option<u64>,
}

impl Arguments for Args {
    fn rule(field: &str) -> String {
        match field {
            "name" => "`name` must be a non-empty string".into(),
            _ => "`limit` must be an integer from 1 to 50".into(),
        }
    }
}

pub(crate) fn run(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let args: Args = parse(arguments)?;
    let name = match args.name.as_deref() {
        Some("") => return Err(invalid(Args::rule("name"))),
        n => n,
    };
    let limit = match args.limit {
        None => DEFAULT_LIMIT,
        Some(n @ 1..=50) => usize::try_from(n).unwrap_or(KEEP_PER_TEST),
        Some(_) => return Err(invalid(Args::rule("limit"))),
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
