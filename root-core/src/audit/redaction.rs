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
pub(crate) const REDACTED: &str = "[REDACTED]";

const BUILTIN_FIELDS: &[&str] = &[
    "token",
    "confirmation_token",
    "password",
    "secret",
    "authorization",
    "api_key",
    "bearer",
];

/// A built-in rule: its name, its pattern, and literals of which every match contains at
/// least one (ASCII case aside), so a string with none of them is skipped without a regex.
struct Builtin {
    name: &'static str,
    pattern: &'static str,
    literals: &'static [&'static str],
}

const BUILTIN_PATTERNS: &[Builtin] = &[
    Builtin {
        name: "private_key",
        pattern: r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
        literals: &["PRIVATE KEY-----"],
    },
    Builtin {
        name: "lease_bearer",
        pattern: r"mcpl_[A-Za-z0-9_\-]{16,}",
        literals: &["mcpl_"],
    },
    Builtin {
        name: "admin_token",
        pattern: r"mcpa_[A-Za-z0-9_\-]{16,}",
        literals: &["mcpa_"],
    },
    Builtin {
        name: "hub_token",
        pattern: r"mcph_[A-Za-z0-9_\-]{16,}",
        literals: &["mcph_"],
    },
    Builtin {
        name: "confirmation_token",
        pattern: r"mcpc_[A-Za-z0-9_\-]{16,}",
        literals: &["mcpc_"],
    },
    Builtin {
        name: "oauth_code",
        pattern: r"mcpg_[A-Za-z0-9_\-]{16,}",
        literals: &["mcpg_"],
    },
    Builtin {
        name: "oauth_refresh_token",
        pattern: r"mcpr_[A-Za-z0-9_\-]{16,}",
        literals: &["mcpr_"],
    },
    Builtin {
        name: "operator_token",
        pattern: r"mcpo_[A-Za-z0-9_\-]{16,}",
        literals: &["mcpo_"],
    },
    Builtin {
        name: "bearer_credential",
        pattern: r"(?i)bearer\s+[A-Za-z0-9._~+/\-]{8,}=*",
        literals: &["bearer"],
    },
    Builtin {
        name: "aws_access_key",
        pattern: r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        literals: &["AKIA", "ASIA"],
    },
    Builtin {
        name: "aws_secret_key",
        pattern: r"(?i)aws_secret_access_key[\x22']?\s*[=:]\s*[\x22']?[A-Za-z0-9/+=]{40}",
        literals: &["aws_secret_access_key"],
    },
    Builtin {
        name: "stripe_key",
        pattern: r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
        literals: &["k_live_", "k_test_"],
    },
    Builtin {
        name: "github_token",
        pattern: r"\bgh[pousr]_[A-Za-z0-9]{30,}",
        literals: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
    },
    Builtin {
        name: "slack_token",
        pattern: r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
        literals: &["xox"],
    },
    Builtin {
        name: "google_api_key",
        pattern: r"\bAIza[0-9A-Za-z_\-]{35}",
        literals: &["AIza"],
    },
    Builtin {
        name: "jwt",
        pattern: r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{8,}",
        literals: &["eyJ"],
    },
    Builtin {
        name: "url_password",
        pattern: r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]+:[^\s@/]+@",
        literals: &["://"],
    },
    Builtin {
        name: "sensitive_path",
        pattern: r"(?:~|/home/[^/\s]+|/root|/Users/[^/\s]+)?/\.(?:ssh|gnupg|aws)/[^\s\x22',;)]*|/etc/(?:g?shadow|sudoers)\b|[^\s\x22',;()]*\bid_(?:rsa|dsa|ecdsa|ed25519)\b|[^\s\x22',;()]+\.(?:pem|key|p12|pfx|jks|keystore)\b",
        literals: &[
            "/.ssh/",
            "/.gnupg/",
            "/.aws/",
            "/etc/shadow",
            "/etc/gshadow",
            "/etc/sudoers",
            "id_rsa",
            "id_dsa",
            "id_ecdsa",
            "id_ed25519",
            ".pem",
            ".key",
            ".p12",
            ".pfx",
            ".jks",
        ],
    },
];

pub struct Redactor {
    fields: Vec<String>,
    patterns: Vec<(String, Regex)>,
    /// The built-in rules' literals: a string with none of them (and no match of a configured
    /// pattern) needs no regex at all. One pass of a SIMD literal search, where a set of the
    /// patterns themselves would run a DFA over every byte.
    literals: aho_corasick::AhoCorasick,
    /// The configured patterns at once (their literals are unknown).
    configured: Option<regex::RegexSet>,
}

impl Redactor {
    /// Built-in rules plus configured extra fields and patterns (already validated).
    pub fn new(extra_fields: &[String], extra_patterns: &[String]) -> Redactor {
        let mut patterns: Vec<(String, Regex)> = BUILTIN_PATTERNS
            .iter()
            .filter_map(|b| Regex::new(b.pattern).ok().map(|r| (b.name.to_string(), r)))
            .collect();
        let mut configured = Vec::new();
        for (i, p) in extra_patterns.iter().enumerate() {
            if let Ok(r) = Regex::new(p) {
                configured.push(p.as_str());
                patterns.push((format!("config_{i}"), r));
            }
        }
        let mut fields: Vec<String> = BUILTIN_FIELDS.iter().map(|s| s.to_string()).collect();
        fields.extend(extra_fields.iter().map(|f| f.to_ascii_lowercase()));
        let literals = aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(BUILTIN_PATTERNS.iter().flat_map(|b| b.literals.iter()))
            .expect("the built-in literals build an automaton");
        let configured = (!configured.is_empty())
            .then(|| regex::RegexSet::new(configured).ok())
            .flatten();
        Redactor {
            fields,
            patterns,
            literals,
            configured,
        }
    }

    /// Whether some rule may match `s` (no false negatives).
    fn may_match(&self, s: &str) -> bool {
        self.literals.is_match(s) || self.configured.as_ref().is_some_and(|c| c.is_match(s))
    }

    /// Whether `key` names a field redacted whole.
    fn secret_field(&self, key: &str, contract_fields: &[String]) -> bool {
        self.fields.iter().any(|f| f.eq_ignore_ascii_case(key))
            || contract_fields.iter().any(|f| f.eq_ignore_ascii_case(key))
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

    /// Redacts `value` in place, with the contract's own rules added; `path` names it in the
    /// reported redactions.
    pub fn redact(
        &self,
        path: &str,
        value: &mut Value,
        contract_fields: &[String],
        contract_patterns: &[Regex],
        out: &mut Vec<Redaction>,
    ) {
        let rules = Rules {
            fields: contract_fields,
            patterns: contract_patterns,
        };
        self.walk(&mut path.to_owned(), value, &rules, out);
    }

    /// [`Redactor::redact`] below `at` (extended in place while descending, so a path string
    /// is made only for a value actually redacted).
    fn walk(&self, at: &mut String, value: &mut Value, rules: &Rules, out: &mut Vec<Redaction>) {
        let len = at.len();
        match value {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    at.push('.');
                    at.push_str(k);
                    if self.secret_field(k, rules.fields) {
                        if !v.is_null() {
                            *v = Value::String(REDACTED.into());
                            out.push(Redaction {
                                path: at.clone(),
                                rule: format!("field:{}", k.to_ascii_lowercase()),
                            });
                        }
                    } else {
                        self.walk(at, v, rules, out);
                    }
                    at.truncate(len);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter_mut().enumerate() {
                    use std::fmt::Write as _;
                    let _ = write!(at, "[{i}]");
                    self.walk(at, v, rules, out);
                    at.truncate(len);
                }
            }
            Value::String(s) => {
                if rules.patterns.is_empty() && !self.may_match(s) {
                    return;
                }
                let named = self.patterns.iter().map(|(n, r)| (n.as_str(), r));
                let contract = rules.patterns.iter().map(|r| ("contract", r));
                for (name, re) in named.chain(contract) {
                    if re.is_match(s) {
                        *s = re.replace_all(s, REDACTED).into_owned();
                        out.push(Redaction {
                            path: at.clone(),
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

/// A contract's own rules, for one walk.
struct Rules<'a> {
    fields: &'a [String],
    patterns: &'a [Regex],
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

    /// The prefilter never hides a match: in every sample, each match of a built-in rule
    /// contains one of its literals (ASCII case aside).
    #[test]
    fn each_rules_literals_cover_its_matches() {
        let samples = [
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN PRIVATE KEY-----\ncut off",
            "mcpl_AAAAAAAAAAAAAAAAAAAA mcpa_BBBBBBBBBBBBBBBBBBBB mcph_CCCCCCCCCCCCCCCCCCCC",
            "mcpc_DDDDDDDDDDDDDDDDDDDD mcpo_EEEEEEEEEEEEEEEEEEEE",
            "mcpg_FFFFFFFFFFFFFFFFFFFF mcpr_GGGGGGGGGGGGGGGGGGGG",
            "Authorization: BEARER abcdefghijkl== and bearer\tzyxwvutsrq",
            "AKIAIOSFODNN7EXAMPLE ASIAIOSFODNN7EXAMPLE",
            "AWS_SECRET_ACCESS_KEY: \"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\"",
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc rk_test_4eC39HqLyjWDarjtT1zdp7dc",
            "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB ghs_0123456789abcdefghijklmnopqrstuvwxyzAB",
            "xoxb-1234567890-abcdefghij xoxp-1234567890-abcdefghij",
            "AIzaSyA1234567890abcdefghijklmnopqrstuv",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "postgres://app:s3cr3t-pw@db:5432/prod HTTPS://u:p@host/",
            "/home/ann/.ssh/id_ed25519 ~/.gnupg/pubring.kbx /Users/bo/.aws/credentials /root/.ssh/",
            "/etc/shadow /etc/gshadow /etc/sudoers id_rsa.pub ./id_ecdsa id_dsa",
            "tls/key.pem server.KEY a.p12 b.pfx c.jks store.keystore",
        ];
        for b in BUILTIN_PATTERNS {
            let re = Regex::new(b.pattern).unwrap();
            let mut matched = 0;
            for sample in samples {
                for m in re.find_iter(sample) {
                    matched += 1;
                    let text = m.as_str().to_ascii_lowercase();
                    assert!(
                        b.literals
                            .iter()
                            .any(|l| text.contains(&l.to_ascii_lowercase())),
                        "{}: {:?} holds none of {:?}",
                        b.name,
                        m.as_str(),
                        b.literals
                    );
                }
            }
            assert!(matched > 0, "{} has a sample", b.name);
        }
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
