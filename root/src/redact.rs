//! Redaction before audit: secrets never reach the trail.
//!
//! Field rules replace the value of any object key named in the contract's or the config's
//! field list (and the built-in secret names); pattern rules replace matches in every string
//! (lease and admin bearers, `Bearer ...` credentials, configured patterns). Each replacement
//! is reported as a [`Redaction`] with its path and rule.

use mcp_shared::event::Redaction;
use regex::Regex;
use serde_json::Value;

/// What replaces a redacted value.
pub const REDACTED: &str = "[REDACTED]";

const BUILTIN_FIELDS: &[&str] = &[
    "token",
    "confirmation_token",
    "password",
    "secret",
    "authorization",
    "api_key",
    "bearer",
];

const BUILTIN_PATTERNS: &[(&str, &str)] = &[
    ("lease_bearer", r"mcpl_[A-Za-z0-9_\-]{16,}"),
    ("admin_token", r"mcpa_[A-Za-z0-9_\-]{16,}"),
    ("hub_token", r"mcph_[A-Za-z0-9_\-]{16,}"),
    ("confirmation_token", r"mcpc_[A-Za-z0-9_\-]{16,}"),
    ("operator_token", r"mcpo_[A-Za-z0-9_\-]{16,}"),
    (
        "bearer_credential",
        r"(?i)bearer\s+[A-Za-z0-9._~+/\-]{8,}=*",
    ),
];

pub struct Redactor {
    fields: Vec<String>,
    patterns: Vec<(String, Regex)>,
}

impl Redactor {
    /// Built-in rules plus configured extra fields and patterns (already validated).
    pub fn new(extra_fields: &[String], extra_patterns: &[String]) -> Redactor {
        let mut patterns: Vec<(String, Regex)> = BUILTIN_PATTERNS
            .iter()
            .filter_map(|(name, re)| Regex::new(re).ok().map(|r| (name.to_string(), r)))
            .collect();
        for (i, p) in extra_patterns.iter().enumerate() {
            if let Ok(r) = Regex::new(p) {
                patterns.push((format!("config_{i}"), r));
            }
        }
        let mut fields: Vec<String> = BUILTIN_FIELDS.iter().map(|s| s.to_string()).collect();
        fields.extend(extra_fields.iter().map(|f| f.to_ascii_lowercase()));
        Redactor { fields, patterns }
    }

    /// Redacts `value` in place, with the contract's own rules added.
    pub fn redact(
        &self,
        path: &str,
        value: &mut Value,
        contract_fields: &[String],
        contract_patterns: &[Regex],
        out: &mut Vec<Redaction>,
    ) {
        match value {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    let lk = k.to_ascii_lowercase();
                    let child = format!("{path}.{k}");
                    if self.fields.contains(&lk)
                        || contract_fields.iter().any(|f| f.eq_ignore_ascii_case(k))
                    {
                        if !v.is_null() {
                            *v = Value::String(REDACTED.into());
                            out.push(Redaction {
                                path: child,
                                rule: format!("field:{lk}"),
                            });
                        }
                    } else {
                        self.redact(&child, v, contract_fields, contract_patterns, out);
                    }
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter_mut().enumerate() {
                    self.redact(
                        &format!("{path}[{i}]"),
                        v,
                        contract_fields,
                        contract_patterns,
                        out,
                    );
                }
            }
            Value::String(s) => {
                let named = self.patterns.iter().map(|(n, r)| (n.as_str(), r));
                let contract = contract_patterns.iter().map(|r| ("contract", r));
                for (name, re) in named.chain(contract) {
                    if re.is_match(s) {
                        *s = re.replace_all(s, REDACTED).into_owned();
                        out.push(Redaction {
                            path: path.to_string(),
                            rule: format!("pattern:{name}"),
                        });
                    }
                }
            }
            _ => {}
        }
    }

    /// Redacts a free-text string (messages, summaries).
    pub fn redact_text(&self, path: &str, text: &str, out: &mut Vec<Redaction>) -> String {
        let mut v = Value::String(text.to_string());
        self.redact(path, &mut v, &[], &[], out);
        match v {
            Value::String(s) => s,
            _ => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_and_bearers_are_redacted_and_reported() {
        let r = Redactor::new(&["ssn".into()], &[r"hunter\d".into()]);
        let mut v = json!({
            "name": "x",
            "token": "abc",
            "nested": {"SSN": "123", "note": "use mcpl_AAAAAAAAAAAAAAAAAAAAAAAA please"},
            "list": ["Bearer abcdefghijkl", "hunter2"]
        });
        let mut out = Vec::new();
        r.redact("request.arguments", &mut v, &[], &[], &mut out);
        assert_eq!(v["token"], REDACTED);
        assert_eq!(v["nested"]["SSN"], REDACTED);
        assert_eq!(v["nested"]["note"], "use [REDACTED] please");
        assert_eq!(v["list"][0], REDACTED);
        assert_eq!(v["list"][1], REDACTED);
        assert_eq!(v["name"], "x");
        let paths: Vec<_> = out.iter().map(|r| r.path.as_str()).collect();
        assert!(paths.contains(&"request.arguments.token"));
        assert!(paths.contains(&"request.arguments.nested.note"));
        assert!(out.iter().any(|r| r.rule == "pattern:config_0"));
    }
}
