//! A call's arguments as a typed struct: each adapter declares its arguments as a struct with
//! `#[serde(deny_unknown_fields)]` and [`parse`]s the call's arguments into it, so the struct
//! is the one list of what the tool takes. Root validates arguments against the tool's
//! contract first; the hub does not rely on it.
//!
//! Every refusal is `invalid_arguments`: arguments that are not an object (`null` counts as
//! `{}`); `unknown argument `x`; this tool takes `a`, `b` and `c``; and a missing argument
//! or a value that does not fit, answered with the rule its adapter states for that field
//! ([`Arguments::rule`]).

use mcp_shared::error::{ErrorCode, ToolError};
use serde::de::{Deserialize, DeserializeOwned, Deserializer};
use serde_json::{Map, Value};

/// The arguments of one tool.
pub(crate) trait Arguments: DeserializeOwned {
    /// What a value of `field` must be, as the refusal says when it does not fit
    /// (`` `limit` must be an integer from 1 to 200 ``).
    fn rule(field: &str) -> String;

    /// What a missing required `field` is told (its [`Arguments::rule`] unless said otherwise).
    fn missing(field: &str) -> String {
        Self::rule(field)
    }

    /// The refusal of arguments that are not an object.
    fn not_an_object() -> String {
        "arguments must be an object".into()
    }
}

pub(crate) fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::InvalidArguments, message)
}

/// The call's `arguments` as `T`.
pub(crate) fn parse<T: Arguments>(arguments: &Value) -> Result<T, ToolError> {
    let object = match arguments {
        Value::Object(m) => Value::Object(m.clone()),
        Value::Null => Value::Object(Map::new()),
        _ => return Err(invalid(T::not_an_object())),
    };
    serde_path_to_error::deserialize(object).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner().to_string();
        invalid(refusal::<T>(&field, &inner))
    })
}

/// The message for a deserialization error `inner` at `field` (`.` when it is about the
/// object itself: an unknown or missing field).
fn refusal<T: Arguments>(field: &str, inner: &str) -> String {
    if let Some(rest) = inner.strip_prefix("unknown field ") {
        let (name, expected) = rest.split_once(", ").unwrap_or((rest, ""));
        // serde says `expected `a``, `expected `a` or `b`` or `expected one of `a`, `b`, `c``.
        let names: Vec<&str> = match expected.strip_prefix("expected ") {
            Some(list) => match list.strip_prefix("one of ") {
                Some(list) => list.split(", ").collect(),
                None => list.split(" or ").collect(),
            },
            None => Vec::new(),
        };
        let takes = match names.split_last() {
            None => "this tool takes no arguments".to_owned(),
            Some((only, [])) => format!("this tool takes only {only}"),
            Some((last, first)) => format!("this tool takes {} and {last}", first.join(", ")),
        };
        return format!("unknown argument {name}; {takes}");
    }
    if let Some(rest) = inner.strip_prefix("missing field ") {
        return T::missing(rest.trim_matches('`'));
    }
    if field == "." || field.is_empty() {
        return inner.to_owned();
    }
    // The top-level field whose value did not fit (`limit`, or `items[2]` → `items`).
    let top = field.split(['.', '[']).next().unwrap_or(field);
    T::rule(top)
}

/// Refuses anything but `{}` (root validates too; the hub does not rely on it).
pub(crate) fn no_arguments(arguments: &Value) -> Result<(), ToolError> {
    match arguments {
        Value::Object(m) if m.is_empty() => Ok(()),
        Value::Null => Ok(()),
        _ => Err(ToolError::new(
            ErrorCode::InvalidArguments,
            "this tool takes no arguments",
        )),
    }
}

/// For `Option` fields given as `#[serde(default, deserialize_with = "present")]`: an argument
/// that is present must hold a value (`null` does not fit), one that is absent is `None`.
pub(crate) fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Two {
        name: String,
        #[serde(default, deserialize_with = "present")]
        limit: Option<u64>,
    }

    impl Arguments for Two {
        fn rule(field: &str) -> String {
            format!("`{field}` is wrong")
        }
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct One {
        #[serde(default, deserialize_with = "present")]
        #[allow(dead_code, reason = "only deserialized")]
        service: Option<String>,
    }

    impl Arguments for One {
        fn rule(field: &str) -> String {
            format!("`{field}` is wrong")
        }

        fn not_an_object() -> String {
            "arguments must be an object {\"service\": \"<name>\"}".into()
        }
    }

    fn refused<T: Arguments + std::fmt::Debug>(v: Value) -> String {
        let err = parse::<T>(&v).expect_err("refused");
        assert_eq!(err.code, ErrorCode::InvalidArguments);
        err.message
    }

    #[test]
    fn typed_arguments_are_read_and_refusals_name_the_field() {
        let two: Two = parse(&json!({"name": "a", "limit": 3})).expect("fits");
        assert_eq!((two.name.as_str(), two.limit), ("a", Some(3)));
        assert_eq!(
            refused::<Two>(json!({"name": "a", "path": "/"})),
            "unknown argument `path`; this tool takes `name` and `limit`"
        );
        assert_eq!(
            refused::<One>(json!({"path": "/"})),
            "unknown argument `path`; this tool takes only `service`"
        );
        assert_eq!(refused::<Two>(json!({})), "`name` is wrong");
        assert_eq!(
            refused::<Two>(json!({"name": "a", "limit": "x"})),
            "`limit` is wrong"
        );
        assert_eq!(
            refused::<Two>(json!({"name": "a", "limit": null})),
            "`limit` is wrong"
        );
        assert_eq!(refused::<Two>(json!([1])), "arguments must be an object");
        assert_eq!(
            refused::<One>(json!("x")),
            "arguments must be an object {\"service\": \"<name>\"}"
        );
        assert!(parse::<One>(&Value::Null).is_ok());
    }
}
