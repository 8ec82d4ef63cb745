//! The arguments of the `hub.memory.*` tools, typed (see `crate::skill::adapters::args`),
//! and the bounds their values are checked against after that.

use mcp_shared::error::ToolError;
use serde::Deserialize;

use crate::profiles::{DURATION_SEC, INTERVAL_MS};
use crate::skill::adapters::args::{Arguments, invalid as bad, present};

/// Default and largest `limit` of the list tools.
const DEFAULT_LIMIT: u64 = 50;
const MAX_LIMIT: u64 = 200;

/// The typed arguments of one `hub.memory.*` tool; the tools share one vocabulary of
/// arguments, so one rule per argument name.
macro_rules! memory_arguments {
    ($($name:ident),*) => {$(
        impl Arguments for $name {
            fn rule(field: &str) -> String {
                rule(field)
            }

            fn missing(field: &str) -> String {
                missing(field)
            }
        }
    )*};
}

/// What the value of `field` must be.
pub(super) fn rule(field: &str) -> String {
    match field {
        "service" => format!(
            "`service` must be a string of 1 to {} characters",
            crate::config::MAX_SERVICE_NAME
        ),
        "state" | "mode" => format!("`{field}` must be a string of 1 to 20 characters"),
        "session_id" | "artifact_id" => format!("`{field}` must be a string of 1 to 36 characters"),
        "limit" => range_rule(field, &(1..=MAX_LIMIT)),
        "offset" => range_rule(field, &(0..=u64::MAX)),
        "length" => range_rule(field, &(1..=u64::MAX)),
        "interval_ms" => range_rule(field, &INTERVAL_MS),
        "duration_sec" => range_rule(field, &DURATION_SEC),
        _ => format!("`{field}` does not fit"),
    }
}

/// What a missing required `field` is told.
pub(super) fn missing(field: &str) -> String {
    match field {
        "interval_ms" => "`interval_ms` (100 to 60000) is required".into(),
        "duration_sec" => "`duration_sec` (1 to 3600) is required".into(),
        _ => format!("`{field}` (a string) is required"),
    }
}

pub(super) fn range_rule(field: &str, range: &std::ops::RangeInclusive<u64>) -> String {
    format!(
        "`{field}` must be an integer from {} to {}",
        range.start(),
        range.end()
    )
}

/// `hub.memory.get_status`: no arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NoArgs {}

/// `hub.memory.list_sessions`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListSessions {
    #[serde(default, deserialize_with = "present")]
    pub(super) service: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub(super) state: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub(super) limit: Option<u64>,
}

/// `hub.memory.list_incidents` and `hub.memory.list_artifacts`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListOfService {
    #[serde(default, deserialize_with = "present")]
    pub(super) service: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub(super) limit: Option<u64>,
}

/// The tools about one session.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OneSession {
    pub(super) session_id: String,
}

/// `hub.memory.get_artifact`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GetArtifact {
    pub(super) artifact_id: String,
    #[serde(default, deserialize_with = "present")]
    pub(super) offset: Option<u64>,
    #[serde(default, deserialize_with = "present")]
    pub(super) length: Option<u64>,
}

/// `hub.memory.start_profile`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StartProfile {
    pub(super) service: String,
    pub(super) interval_ms: u64,
    pub(super) duration_sec: u64,
    #[serde(default, deserialize_with = "present")]
    pub(super) mode: Option<String>,
}

memory_arguments!(
    NoArgs,
    ListSessions,
    ListOfService,
    OneSession,
    GetArtifact,
    StartProfile
);

/// `value` if it has 1 to `max` bytes.
pub(super) fn text<'a>(
    value: Option<&'a str>,
    key: &str,
    max: usize,
) -> Result<Option<&'a str>, ToolError> {
    match value {
        Some(s) if s.is_empty() || s.len() > max => Err(bad(rule(key))),
        v => Ok(v),
    }
}

/// `value` if it is in `range`.
pub(super) fn within(
    value: Option<u64>,
    key: &str,
    range: std::ops::RangeInclusive<u64>,
) -> Result<Option<u64>, ToolError> {
    match value {
        Some(n) if !range.contains(&n) => Err(bad(range_rule(key, &range))),
        v => Ok(v),
    }
}

pub(super) fn limit(value: Option<u64>) -> Result<usize, ToolError> {
    Ok(within(value, "limit", 1..=MAX_LIMIT)?.unwrap_or(DEFAULT_LIMIT) as usize)
}

pub(super) fn service_filter(value: Option<&str>) -> Result<Option<&str>, ToolError> {
    text(value, "service", crate::config::MAX_SERVICE_NAME)
}

/// A session, incident or artifact id: a UUID.
pub(super) fn id<'a>(value: &'a str, key: &str) -> Result<&'a str, ToolError> {
    text(Some(value), key, 36)?;
    uuid::Uuid::parse_str(value)
        .map_err(|_| bad(format!("`{key}` must be a UUID")))
        .map(|_| value)
}
