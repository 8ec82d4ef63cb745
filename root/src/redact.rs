//! Redaction: secrets never reach the trail, and never leave root in a result.
//!
//! Field rules replace the value of any object key named in the contract's or the config's
//! field list (and the built-in secret names); pattern rules replace matches in every string:
//! root's own credentials (lease, admin, operator, hub and confirmation tokens), `Bearer …`
//! credentials, bare secrets (private key blocks, cloud and API keys such as `AKIA…`,
//! `sk_live_…`, `ghp_…`, `xox…-`, `AIza…`, JSON Web Tokens, passwords in URLs) and sensitive
//! paths (`~/.ssh/…`, `/etc/shadow`, key files), plus configured patterns. Requests, results
//! and error messages are redacted before they are stored; results again before they are
//! answered (the hub redacts first; root does not rely on it). Each replacement is reported
//! as a [`Redaction`] with its path and rule.

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
    (
        "private_key",
        r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
    ),
    ("lease_bearer", r"mcpl_[A-Za-z0-9_\-]{16,}"),
    ("admin_token", r"mcpa_[A-Za-z0-9_\-]{16,}"),
    ("hub_token", r"mcph_[A-Za-z0-9_\-]{16,}"),
    ("confirmation_token", r"mcpc_[A-Za-z0-9_\-]{16,}"),
    ("operator_token", r"mcpo_[A-Za-z0-9_\-]{16,}"),
    (
        "bearer_credential",
        r"(?i)bearer\s+[A-Za-z0-9._~+/\-]{8,}=*",
    ),
    ("aws_access_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    (
        "aws_secret_key",
        r"(?i)aws_secret_access_key[\x22']?\s*[=:]\s*[\x22']?[A-Za-z0-9/+=]{40}",
    ),
    ("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("github_token", r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{8,}",
    ),
    (
        "url_password",
        r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]+:[^\s@/]+@",
    ),
    (
        "sensitive_path",
        r"(?:~|/home/[^/\s]+|/root|/Users/[^/\s]+)?/\.(?:ssh|gnupg|aws)/[^\s\x22',;)]*|/etc/(?:g?shadow|sudoers)\b|[^\s\x22',;()]*\bid_(?:rsa|dsa|ecdsa|ed25519)\b|[^\s\x22',;()]+\.(?:pem|key|p12|pfx|jks|keystore)\b",
    ),
];

pub struct Redactor {
    fields: Vec<String>,
    patterns: Vec<(String, Regex)>,
    /// All of `patterns` at once: a string none of them matches costs one scan.
    any: regex::RegexSet,
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
        let any = regex::RegexSet::new(patterns.iter().map(|(_, r)| r.as_str()))
            .unwrap_or_else(|_| regex::RegexSet::empty());
        Redactor {
            fields,
            patterns,
            any,
        }
    }

    /// Redacts a result before it is answered: the contract's rules and the built-in ones,
    /// except the top-level fields the tool issues (a new bearer, shown once to its caller;
    /// audit and replay copies redact them).
    pub fn redact_result(
        &self,
        value: &mut Value,
        contract: &mcp_shared::contract::RedactionRules,
        contract_patterns: &[Regex],
        out: &mut Vec<Redaction>,
    ) {
        let issued: Vec<(String, Value)> = match value.as_object_mut() {
            Some(map) => contract
                .issued
                .iter()
                .filter_map(|k| map.remove(k).map(|v| (k.clone(), v)))
                .collect(),
            None => Vec::new(),
        };
        self.redact("result", value, &contract.fields, contract_patterns, out);
        if let Some(map) = value.as_object_mut() {
            map.extend(issued);
        }
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
                if contract_patterns.is_empty() && !self.any.is_match(s) {
                    return;
                }
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
    fn bare_secrets_and_sensitive_paths_are_redacted() {
        let r = Redactor::new(&[], &[]);
        let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----";
        for (rule, secret) in [
            ("private_key", pem),
            ("aws_access_key", "AKIAIOSFODNN7EXAMPLE"),
            (
                "aws_secret_key",
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            ),
            ("stripe_key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
            ("github_token", "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"),
            ("slack_token", "xoxb-1234567890-abcdefghij"),
            ("google_api_key", "AIzaSyA1234567890abcdefghijklmnopqrstuv"),
            (
                "jwt",
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            ),
            (
                "url_password",
                "postgres://app:s3cr3t-pw@db.internal:5432/prod",
            ),
            ("sensitive_path", "/home/ann/.ssh/id_ed25519"),
            ("sensitive_path", "~/.ssh/config"),
            ("sensitive_path", "/etc/shadow"),
            ("sensitive_path", "/etc/mcp-root/tls/key.pem"),
        ] {
            let mut v = json!({ "line": format!("found {secret} here") });
            let mut out = Vec::new();
            r.redact("result", &mut v, &[], &[], &mut out);
            let text = v["line"].as_str().unwrap_or_default();
            assert!(!text.contains(secret), "{rule}: {text}");
            assert!(text.contains(REDACTED), "{rule}: {text}");
            assert!(
                out.iter().any(|o| o.rule == format!("pattern:{rule}")),
                "{rule}: {out:?}"
            );
        }
        // Ordinary text is left alone.
        let mut v = json!({ "line": "GET /healthz 200 in 3 ms; keys=4 tokens=12" });
        let mut out = Vec::new();
        r.redact("result", &mut v, &[], &[], &mut out);
        assert_eq!(v["line"], "GET /healthz 200 in 3 ms; keys=4 tokens=12");
        assert!(out.is_empty());
    }

    #[test]
    fn an_issued_secret_is_answered_once_and_redacted_elsewhere() {
        let r = Redactor::new(&[], &[]);
        let rules = mcp_shared::contract::RedactionRules {
            fields: vec!["token".into()],
            patterns: vec![],
            issued: vec!["token".into()],
        };
        let bearer = "mcpl_AAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        let mut v = json!({ "token": bearer, "note": format!("copy {bearer}") });
        let mut out = Vec::new();
        r.redact_result(&mut v, &rules, &[], &mut out);
        assert_eq!(v["token"], bearer, "the caller gets what was issued");
        assert_eq!(v["note"], "copy [REDACTED]", "nowhere else");
    }

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
