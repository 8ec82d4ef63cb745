//! Redaction of text that leaves the hub (an allowed test's output, log lines): root's tokens
//! (`mcpl_…`, `mcph_…`, `mcpa_…`, `mcpo_…`, `mcpc_…`), `Bearer <x>`, PEM private key blocks,
//! passwords in URLs, cloud and API keys (`AKIA…`, `aws_secret_access_key=…`, `sk_live_…`,
//! `ghp_…`, `xox…-`, `AIza…`), JSON Web Tokens and sensitive paths (`~/.ssh/…`, `/etc/shadow`,
//! key files) are replaced with `[REDACTED]`, and the replacements are counted.
//!
//! Root redacts again before audit; this is the hub's own line, so a secret a test prints is
//! never sent over the channel or kept in `test-results.json`.

use std::sync::LazyLock;

use regex::Regex;

/// What replaces a redacted value.
pub(crate) const REDACTED: &str = "[REDACTED]";

struct Rules {
    /// A whole private key block; an unterminated one runs to the end of the text.
    key_block: Regex,
    /// The end of a block whose start is not in the text (the text was cut).
    key_end: Regex,
    token: Regex,
    bearer: Regex,
    url_password: Regex,
    aws_key: Regex,
    /// Bare secrets: cloud and API keys, JSON Web Tokens.
    keys: Regex,
    /// Sensitive paths: SSH and GnuPG material, shadow files, key files.
    paths: Regex,
}

static RULES: LazyLock<Rules> = LazyLock::new(|| {
    let re = |s: &str| Regex::new(s).expect("built-in redaction pattern compiles");
    Rules {
        key_block: re(
            r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
        ),
        key_end: re(r"(?s)\A.*?-----END [A-Z0-9 ]*PRIVATE KEY-----"),
        token: re(r"\bmcp[lhaoc]_[A-Za-z0-9_\-]+"),
        bearer: re(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/\-]+=*"),
        url_password: re(r"\b([A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]+):[^\s@/]+@"),
        aws_key: re(r"\bAKIA[0-9A-Z]{16}\b"),
        keys: re(concat!(
            r"(?i:aws_secret_access_key)[\x22']?\s*[=:]\s*[\x22']?[A-Za-z0-9/+=]{40}",
            r"|\bASIA[0-9A-Z]{16}\b",
            r"|\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
            r"|\bgh[pousr]_[A-Za-z0-9]{30,}",
            r"|\bxox[abposr]-[A-Za-z0-9-]{10,}",
            r"|\bAIza[0-9A-Za-z_\-]{35}",
            r"|\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{8,}",
        )),
        paths: re(concat!(
            r"(?:~|/home/[^/\s]+|/root|/Users/[^/\s]+)?/\.(?:ssh|gnupg|aws)/[^\s\x22',;)]*",
            r"|/etc/(?:g?shadow|sudoers)\b",
            r"|[^\s\x22',;()]*\bid_(?:rsa|dsa|ecdsa|ed25519)\b",
            r"|[^\s\x22',;()]+\.(?:pem|key|p12|pfx|jks|keystore)\b",
        )),
    }
});

/// `text` with every secret replaced, and how many replacements were made.
pub(crate) fn redact(text: &str) -> (String, usize) {
    let r = &*RULES;
    let mut count = 0;
    let mut out = text.to_owned();
    // A block cut at its start: everything up to its END line goes.
    if let Some(end) = r.key_end.find(&out)
        && !r.key_block.is_match(&out[..end.end()])
    {
        out = format!("{REDACTED}{}", &out[end.end()..]);
        count += 1;
    }
    let mut apply = |re: &Regex, with: &str| {
        let n = re.find_iter(&out).count();
        if n > 0 {
            out = re.replace_all(&out, with).into_owned();
            count += n;
        }
    };
    apply(&r.key_block, REDACTED);
    apply(&r.token, REDACTED);
    apply(&r.bearer, "$1 [REDACTED]");
    apply(&r.url_password, "$1:[REDACTED]@");
    apply(&r.aws_key, REDACTED);
    apply(&r.keys, REDACTED);
    apply(&r.paths, REDACTED);
    (out, count)
}

/// [`redact`], then every match of the configured `extra` patterns (`[redaction]`).
pub(crate) fn redact_with(text: &str, extra: &[Regex]) -> (String, usize) {
    let (mut out, mut count) = redact(text);
    for re in extra {
        let n = re.find_iter(&out).count();
        if n > 0 {
            out = re.replace_all(&out, REDACTED).into_owned();
            count += n;
        }
    }
    (out, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_replaced_and_counted() {
        let text = "lease mcpl_AAAAbbbb1234_-x and hub mcph_zzz, admin mcpa_q\n\
                    Authorization: Bearer eyJhbGciOi.J9.sig==\n\
                    db postgres://app:s3cr3t@db.local:5432/x and https://host/path@x\n\
                    aws AKIAABCDEFGHIJKLMNOP done\n\
                    -----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----\n\
                    after";
        let (out, n) = redact(text);
        for secret in [
            "AAAAbbbb", "mcph_zzz", "mcpa_q", "eyJhbG", "s3cr3t", "AKIAABCD", "MIIEow",
        ] {
            assert!(!out.contains(secret), "{secret} survived: {out}");
        }
        assert!(out.contains("Bearer [REDACTED]"), "{out}");
        assert!(out.contains("postgres://app:[REDACTED]@db.local"), "{out}");
        assert!(out.contains("https://host/path@x"), "{out}");
        assert!(out.ends_with("[REDACTED]\nafter"), "{out}");
        assert_eq!(n, 7, "{out}");
        assert_eq!(redact("nothing here"), ("nothing here".to_owned(), 0));
    }

    #[test]
    fn bare_keys_tokens_and_sensitive_paths_are_replaced() {
        for secret in [
            "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
            "xoxb-1234567890-abcdefghij",
            "AIzaSyA1234567890abcdefghijklmnopqrstuv",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "/home/ann/.ssh/id_ed25519",
            "/etc/shadow",
            "/srv/app/tls/server.key",
        ] {
            let (out, n) = redact(&format!("read {secret} ok"));
            assert!(!out.contains(secret) && n >= 1, "{secret}: {out}");
            assert!(out.starts_with("read ") && out.ends_with(" ok"), "{out}");
        }
        assert_eq!(redact("keys=4 tokens=12 /srv/app/log.txt").1, 0);
    }

    #[test]
    fn configured_patterns_apply_after_the_built_in_ones() {
        let extra = [Regex::new(r"session=[0-9a-f]{8}").expect("compiles")];
        let (out, n) = redact_with("session=deadbeef and mcph_abc", &extra);
        assert_eq!((out.as_str(), n), ("[REDACTED] and [REDACTED]", 2));
    }

    #[test]
    fn cut_and_unterminated_key_blocks_are_replaced() {
        let (out, n) = redact("AAAB3Nza\nQQ==\n-----END PRIVATE KEY-----\nok");
        assert_eq!((out.as_str(), n), ("[REDACTED]\nok", 1));
        let (out, n) = redact("x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNz");
        assert_eq!((out.as_str(), n), ("x\n[REDACTED]", 1));
    }
}
