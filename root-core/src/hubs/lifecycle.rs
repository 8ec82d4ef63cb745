//! A target's lifecycle as operators run a fleet: its labels, its state (active → cordoned →
//! retired) and per-target narrowing (tools denied on this target only, or read-only).
//!
//! Each is one stored column of the target (JSON, `NULL` for the default), changed only by an
//! audited operator command and in force on every replica when the command returns. Policy
//! reads them on every call ([`crate::policy::decide`]): a cordoned or retired target takes
//! no new call, a narrowed one refuses what the operator denied; calls in flight finish.

use std::collections::BTreeMap;

use mcp_shared::contract::SideEffectClass;
use mcp_shared::error::ErrorCode;
use serde::{Deserialize, Serialize};

/// Most labels a target carries.
pub const MAX_LABELS: usize = 64;
/// Longest label key or value.
pub const MAX_LABEL_LEN: usize = 63;

/// A target's labels (`role=web`, `rack=r12`): sorted, each key once.
pub type Labels = BTreeMap<String, String>;

/// Why a label set is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    #[error(
        "label key `{0}` must be 1..63 characters of [a-z0-9._-], starting with a letter or digit"
    )]
    Key(String),
    #[error("label `{key}`: the value `{value}` must be 0..63 characters of [A-Za-z0-9._-]")]
    Value { key: String, value: String },
    #[error("a target carries at most {MAX_LABELS} labels, not {0}")]
    TooMany(usize),
}

/// Whether `key` is a label key: lowercase, so `Role` and `role` are never two labels.
pub fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_LABEL_LEN
        && key.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
}

/// Whether `value` is a label value (empty allowed: a label present with no value).
pub fn valid_value(value: &str) -> bool {
    value.len() <= MAX_LABEL_LEN
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// Checks a whole label set.
pub fn check_labels(labels: &Labels) -> Result<(), LabelError> {
    if labels.len() > MAX_LABELS {
        return Err(LabelError::TooMany(labels.len()));
    }
    for (key, value) in labels {
        if !valid_key(key) {
            return Err(LabelError::Key(key.clone()));
        }
        if !valid_value(value) {
            return Err(LabelError::Value {
                key: key.clone(),
                value: value.clone(),
            });
        }
    }
    Ok(())
}

/// Where a target is in its lifecycle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Takes calls as policy allows.
    #[default]
    Active,
    /// No new calls; calls in flight finish. Uncordoning makes it active again.
    Cordoned,
    /// Its hub credentials are revoked and its socket refused; history kept; final (a retired
    /// id is never enrolled again).
    Retired,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Active => "active",
            State::Cordoned => "cordoned",
            State::Retired => "retired",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        Some(match s {
            "active" => State::Active,
            "cordoned" => State::Cordoned,
            "retired" => State::Retired,
            _ => return None,
        })
    }
}

/// A target's lifecycle state and who put it there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lifecycle {
    pub state: State,
    /// The operator who last changed the state (`None`: active since enrolment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_by: Option<String>,
    /// When (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_at: Option<String>,
    /// The operator's reason, if they gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What an operator denied on one target, whatever leases and the hub allow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Narrowing {
    /// Every write is denied (reads go on).
    #[serde(default)]
    pub read_only: bool,
    /// Tools denied by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

impl Narrowing {
    pub fn is_empty(&self) -> bool {
        !self.read_only && self.deny.is_empty()
    }

    /// Whether the narrowing denies `tool_id` of this side effect.
    pub fn denies(&self, tool_id: &str, side_effect: SideEffectClass) -> bool {
        (self.read_only && side_effect != SideEffectClass::Read)
            || self.deny.iter().any(|t| t == tool_id)
    }
}

/// The policy reason a target's lifecycle and narrowing give a call (`None`: no objection).
pub fn objection(
    lifecycle: &Lifecycle,
    narrowing: &Narrowing,
    tool_id: &str,
    side_effect: SideEffectClass,
) -> Option<ErrorCode> {
    match lifecycle.state {
        State::Retired => Some(ErrorCode::TargetRetired),
        State::Cordoned => Some(ErrorCode::TargetCordoned),
        State::Active if narrowing.denies(tool_id, side_effect) => Some(ErrorCode::TargetNarrowed),
        State::Active => None,
    }
}

/// Reads a stored column: `NULL` (or, defensively, unreadable JSON, logged) is the default.
pub fn read_column<T: Default + serde::de::DeserializeOwned>(
    target_id: &str,
    column: &str,
    stored: Option<&str>,
) -> T {
    match stored {
        None => T::default(),
        Some(s) => serde_json::from_str(s).unwrap_or_else(|e| {
            tracing::error!(%target_id, column, error = %e, "stored column cannot be read; using its default");
            T::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys_and_values_are_checked() {
        assert!(valid_key("role"));
        assert!(valid_key("app.kubernetes.io_name-1"));
        assert!(!valid_key(""));
        assert!(!valid_key("Role"));
        assert!(!valid_key("-role"));
        assert!(!valid_key("a=b"));
        assert!(!valid_key(&"k".repeat(64)));
        assert!(valid_value(""));
        assert!(valid_value("Web-1.2"));
        assert!(!valid_value("a b"));
        assert!(!valid_value("a,b"));
        let many: Labels = (0..65).map(|i| (format!("k{i}"), String::new())).collect();
        assert_eq!(check_labels(&many), Err(LabelError::TooMany(65)));
    }

    #[test]
    fn lifecycle_objects_before_narrowing() {
        let cordoned = Lifecycle {
            state: State::Cordoned,
            ..Lifecycle::default()
        };
        let ro = Narrowing {
            read_only: true,
            deny: vec!["hub.get_status".into()],
        };
        assert_eq!(
            objection(&cordoned, &ro, "x", SideEffectClass::Read),
            Some(ErrorCode::TargetCordoned)
        );
        let active = Lifecycle::default();
        assert_eq!(objection(&active, &ro, "x", SideEffectClass::Read), None);
        assert_eq!(
            objection(&active, &ro, "x", SideEffectClass::Write),
            Some(ErrorCode::TargetNarrowed)
        );
        assert_eq!(
            objection(&active, &ro, "hub.get_status", SideEffectClass::Read),
            Some(ErrorCode::TargetNarrowed)
        );
        assert_eq!(
            objection(&active, &Narrowing::default(), "x", SideEffectClass::Write),
            None
        );
    }
}
