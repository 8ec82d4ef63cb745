//! Validation of the refs a caller may deploy, before anything goes near git.
//!
//! A requested ref must pass, in this order:
//! 1. shape: 1 to [`MAX_REF`] characters of `A-Z a-z 0-9 . _ / -` only (no spaces, no shell
//!    or revision syntax such as `;`, `~`, `^`, `:`, `@{`, `*`), not starting with `-` (no
//!    option injection) and the rules of `git check-ref-format --allow-onelevel`: no
//!    component starting with `.` or ending with `.lock`, no `..`, no empty component (`//`,
//!    leading or trailing `/`), no trailing `.`;
//! 2. policy: a full 40-hex commit id is a commit and is allowed only with
//!    `deploy.allow_commits = true` (whatever the patterns say); anything else must match one
//!    of `deploy.allowed_refs`, where `*` matches any run of characters (including `/`) and
//!    everything else matches itself.
//!
//! The adapter then resolves an allowed name as `refs/tags/<name>`, else `refs/heads/<name>`
//! (git's own order), in the hub's mirror of the repository.

/// Longest ref a caller may name.
pub(crate) const MAX_REF: usize = 200;

/// What a validated request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wanted {
    /// A tag or branch name.
    Name(String),
    /// A full commit id (lower case).
    Commit(String),
}

/// Whether `s` is a full 40-hex commit id (either case).
pub(crate) fn is_full_commit(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn ref_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-')
}

/// What a checked string is: a requested ref, or an `allowed_refs` pattern (`*` allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Ref,
    Pattern,
}

impl Shape {
    /// The characters this shape allows, as the error names them.
    fn allowed(self) -> &'static str {
        match self {
            Shape::Ref => "letters, digits, `.`, `_`, `/` and `-`",
            Shape::Pattern => "letters, digits, `.`, `_`, `/`, `-` and `*`",
        }
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Shape::Ref => "ref",
            Shape::Pattern => "pattern",
        })
    }
}

/// Why a requested ref, or a configured `allowed_refs` pattern, is refused; the message is
/// the caller's (or the configuration's) explanation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RefError {
    #[error("a {what} must have 1 to {MAX_REF} characters")]
    Length { what: Shape },
    #[error("a {what} must not start with `-`")]
    LeadingDash { what: Shape },
    #[error("{what} `{}` contains {found:?}; only {} are allowed", .s.escape_debug(), .what.allowed())]
    Character { what: Shape, s: String, found: char },
    #[error("{what} `{s}` contains `..`")]
    DotDot { what: Shape, s: String },
    #[error("{what} `{s}` ends with `.`")]
    TrailingDot { what: Shape, s: String },
    #[error("{what} `{s}` has an empty component (a leading, trailing or double `/`)")]
    EmptyComponent { what: Shape, s: String },
    #[error("{what} `{s}` has a component starting with `.`")]
    HiddenComponent { what: Shape, s: String },
    #[error("{what} `{s}` has a component ending with `.lock`")]
    LockComponent { what: Shape, s: String },
    #[error(
        "`{requested}` is a commit id; this hub deploys only refs matching allowed_refs \
         (deploy.allow_commits is false)"
    )]
    CommitsOff { requested: String },
    #[error("ref `{requested}` is not allowed; allowed refs: {}", backticked(.allowed))]
    NotAllowed {
        requested: String,
        allowed: Vec<String>,
    },
}

/// `a`, `b` as `` `a`, `b` ``.
fn backticked(list: &[String]) -> String {
    let quoted: Vec<String> = list.iter().map(|p| format!("`{p}`")).collect();
    quoted.join(", ")
}

/// Checks the shape of a ref or pattern; the error says what is wrong.
fn check_shape(s: &str, what: Shape) -> Result<(), RefError> {
    if s.is_empty() || s.chars().count() > MAX_REF {
        return Err(RefError::Length { what });
    }
    if s.starts_with('-') {
        return Err(RefError::LeadingDash { what });
    }
    let pattern = what == Shape::Pattern;
    if let Some(found) = s.chars().find(|&c| !(ref_char(c) || (pattern && c == '*'))) {
        let s = s.to_owned();
        return Err(RefError::Character { what, s, found });
    }
    check_components(s, what)
}

/// The component rules of `git check-ref-format` (after the characters passed).
fn check_components(s: &str, what: Shape) -> Result<(), RefError> {
    let owned = || s.to_owned();
    if s.contains("..") {
        return Err(RefError::DotDot { what, s: owned() });
    }
    if s.ends_with('.') {
        return Err(RefError::TrailingDot { what, s: owned() });
    }
    for component in s.split('/') {
        if component.is_empty() {
            return Err(RefError::EmptyComponent { what, s: owned() });
        }
        if component.starts_with('.') {
            return Err(RefError::HiddenComponent { what, s: owned() });
        }
        if component.ends_with(".lock") {
            return Err(RefError::LockComponent { what, s: owned() });
        }
    }
    Ok(())
}

/// Checks one configured `allowed_refs` pattern.
pub(crate) fn check_pattern(pattern: &str) -> Result<(), RefError> {
    check_shape(pattern, Shape::Pattern)
}

/// Whether `name` matches `pattern` (`*` is any run of characters, possibly empty).
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni) = (0, 0);
    // Where the last `*` was, and the name position it is tried against.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Validates a requested ref against its shape and the policy; the error is the message for
/// the caller.
pub(crate) fn check_requested(
    requested: &str,
    allowed_refs: &[String],
    allow_commits: bool,
) -> Result<Wanted, RefError> {
    check_shape(requested, Shape::Ref)?;
    if is_full_commit(requested) {
        return if allow_commits {
            Ok(Wanted::Commit(requested.to_ascii_lowercase()))
        } else {
            Err(RefError::CommitsOff {
                requested: requested.to_owned(),
            })
        };
    }
    if allowed_refs.iter().any(|p| matches(p, requested)) {
        Ok(Wanted::Name(requested.to_owned()))
    } else {
        Err(RefError::NotAllowed {
            requested: requested.to_owned(),
            allowed: allowed_refs.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed() -> Vec<String> {
        vec!["main".into(), "release/*".into(), "v*".into()]
    }

    #[test]
    fn patterns_match_with_a_star_glob() {
        assert!(matches("main", "main"));
        assert!(!matches("main", "main2"));
        assert!(!matches("main", "mai"));
        assert!(matches("release/*", "release/1.2"));
        assert!(matches("release/*", "release/1.2/hotfix"));
        assert!(!matches("release/*", "releases/1"));
        assert!(matches("v*", "v1"));
        assert!(matches("v*", "v"));
        assert!(!matches("v*", "xv1"));
        assert!(matches("*-rc*", "v2-rc1"));
        assert!(matches("a*b*c", "aXbYbZc"));
        assert!(!matches("a*b*c", "aXbYbZ"));
        assert!(matches("*", "anything/at/all"));
    }

    #[test]
    fn allowed_refs_pass() {
        for (r, want) in [
            ("main", Wanted::Name("main".into())),
            ("v2", Wanted::Name("v2".into())),
            ("release/2026.1", Wanted::Name("release/2026.1".into())),
        ] {
            assert_eq!(check_requested(r, &allowed(), false), Ok(want), "{r}");
        }
    }

    #[test]
    fn forged_and_unlisted_refs_are_refused() {
        for (r, why) in [
            ("-x", "must not start with `-`"),
            ("--upload-pack=touch /tmp/x", "must not start with `-`"),
            ("../x", "`..`"),
            ("v1/../../etc", "`..`"),
            ("main;rm", "contains ';'"),
            ("main rm", "contains ' '"),
            ("v1^{commit}", "contains '^'"),
            ("v1~1", "contains '~'"),
            ("main@{1}", "contains '@'"),
            ("v*", "contains '*'"),
            ("v1:refs/heads/x", "contains ':'"),
            ("v1\n", "contains '\\n'"),
            ("", "1 to 200"),
            ("v1.", "ends with `.`"),
            ("v1.lock", "`.lock`"),
            ("release/.hidden", "starting with `.`"),
            ("/main", "empty component"),
            ("release//1", "empty component"),
            ("release/", "empty component"),
            (
                "feature/x",
                "not allowed; allowed refs: `main`, `release/*`, `v*`",
            ),
            ("mainline", "not allowed"),
            ("HEAD", "not allowed"),
        ] {
            let err = check_requested(r, &allowed(), false)
                .expect_err(r)
                .to_string();
            assert!(err.contains(why), "{r:?}: {err}");
        }
        let long = format!("v{}", "1".repeat(MAX_REF));
        assert!(check_requested(&long, &allowed(), false).is_err());
    }

    #[test]
    fn full_commits_need_allow_commits() {
        let sha = "0123456789ABCDEF0123456789abcdef01234567";
        let every = vec!["*".to_owned()];
        let err = check_requested(sha, &every, false)
            .expect_err("commits off")
            .to_string();
        assert!(err.contains("allow_commits"), "{err}");
        assert_eq!(
            check_requested(sha, &[], true),
            Ok(Wanted::Commit(sha.to_ascii_lowercase()))
        );
        // An abbreviated id is only a name (and resolves only if such a tag or branch exists).
        assert_eq!(
            check_requested("0123456", &every, false),
            Ok(Wanted::Name("0123456".into()))
        );
        assert!(is_full_commit(sha) && !is_full_commit(&sha[..39]));
    }

    #[test]
    fn patterns_are_checked() {
        for ok in ["main", "release/*", "v*", "*"] {
            check_pattern(ok).expect(ok);
        }
        for bad in ["", "-*", "a b", "x/../y", "release/", "v1;x", "~"] {
            assert!(check_pattern(bad).is_err(), "{bad:?}");
        }
    }
}
