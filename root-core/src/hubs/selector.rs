//! Target selectors: which enrolled targets an operator or a fleet lease means, in one line.
//!
//! ```text
//! selector = term *( "," term )                      ; every term must hold
//! term     = field op values
//!          | [ "!" ] "label:" key [ op values ]      ; has (or lacks) the label
//! field    = "id" | "env" | "environment" | "subnet" | "zone"
//!          | "status" | "lifecycle" | "skill"
//! op       = "=" | "!="
//! values   = value *( "|" value )                    ; any of them
//! value    = 1*( ALPHA / DIGIT / "." / "_" / "-" / ":" / "*" )   ; "*" matches any run
//! ```
//!
//! For example `env=test,subnet=subnet-a,label:role=web`, `id=web-*,lifecycle!=cordoned` or
//! `!label:canary,status=online`. `status` is `online|degraded|offline`, `lifecycle`
//! `active|cordoned|retired`, `skill` `enabled|closed|disabled|uninstalled|owner_disabled`.
//! A selector that cannot be read is refused with the term and what is wrong with it.

use super::lifecycle::{Labels, State, valid_key};
use super::skill::Gate;

/// Longest selector accepted.
pub const MAX_LEN: usize = 1024;
/// Most terms in one selector.
pub const MAX_TERMS: usize = 32;

/// Skill states a selector (and the target list's `skill` filter) names.
pub const SKILL_STATES: [&str; 5] = [
    "enabled",
    "closed",
    "disabled",
    "uninstalled",
    "owner_disabled",
];
const STATUSES: [&str; 3] = ["online", "degraded", "offline"];
const LIFECYCLES: [&str; 3] = ["active", "cordoned", "retired"];

/// Why a selector is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("the selector is empty: name at least one term, e.g. `env=test`")]
    Empty,
    #[error("the selector is {0} characters long; at most {MAX_LEN}")]
    TooLong(usize),
    #[error("the selector has {0} terms; at most {MAX_TERMS}")]
    TooManyTerms(usize),
    #[error("term {0} is empty (two commas, or one at an end)")]
    EmptyTerm(usize),
    #[error("term {position} (`{term}`) has no `=` or `!=`")]
    NoOperator { position: usize, term: String },
    #[error(
        "term {position}: unknown field `{field}`; fields are id, env, subnet, zone, status, lifecycle, skill and label:KEY"
    )]
    UnknownField { position: usize, field: String },
    #[error(
        "term {position}: `{key}` is not a label key (1..63 characters of [a-z0-9._-], starting with a letter or digit)"
    )]
    LabelKey { position: usize, key: String },
    #[error("term {position}: `{value}` is not a value (1..200 characters of [A-Za-z0-9._:*-])")]
    Value { position: usize, value: String },
    #[error("term {position}: {field} is one of {allowed}, not `{value}`")]
    NotOneOf {
        position: usize,
        field: &'static str,
        value: String,
        allowed: String,
    },
    #[error("term {position}: `!label:{key}` takes no value (it means: has no label `{key}`)")]
    NegatedWithValue { position: usize, key: String },
}

/// What a term looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Field {
    Id,
    Environment,
    Subnet,
    Zone,
    Status,
    Lifecycle,
    Skill,
    Label(String),
}

/// One term: a field, whether it must (or must not) match, and the values it may take
/// (`None` with a label: the label is present, whatever its value).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    field: Field,
    negated: bool,
    values: Option<Vec<String>>,
}

/// A parsed selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    terms: Vec<Term>,
    text: String,
}

/// What a selector is matched against: one enrolled target as root sees it now.
pub struct Subject<'a> {
    pub target_id: &'a str,
    pub environment: &'a str,
    pub subnet_id: &'a str,
    pub zone: &'a str,
    /// `online`, `degraded` or `offline`.
    pub status: &'a str,
    pub lifecycle: State,
    pub skill: &'a Gate,
    pub labels: &'a Labels,
}

impl Selector {
    /// Reads a selector (see the module's grammar).
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        if text.len() > MAX_LEN {
            return Err(SelectorError::TooLong(text.len()));
        }
        if text.trim().is_empty() {
            return Err(SelectorError::Empty);
        }
        let raw: Vec<&str> = text.split(',').collect();
        if raw.len() > MAX_TERMS {
            return Err(SelectorError::TooManyTerms(raw.len()));
        }
        let terms = raw
            .iter()
            .enumerate()
            .map(|(i, t)| term(i + 1, t.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Selector {
            terms,
            text: text.trim().to_owned(),
        })
    }

    /// The selector as it was written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the target matches every term.
    pub fn matches(&self, s: &Subject<'_>) -> bool {
        self.terms.iter().all(|t| t.holds(s))
    }
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

fn term(position: usize, t: &str) -> Result<Term, SelectorError> {
    if t.is_empty() {
        return Err(SelectorError::EmptyTerm(position));
    }
    let (negated_label, rest) = match t.strip_prefix('!') {
        Some(r) => (true, r.trim_start()),
        None => (false, t),
    };
    // `!=` before `=`: the first `=` of `a!=b` is the operator's second character.
    let split = rest
        .find("!=")
        .map(|i| (i, 2, true))
        .or_else(|| rest.find('=').map(|i| (i, 1, false)));
    let (name, op) = match split {
        Some((i, len, negated)) => (rest[..i].trim(), Some((negated, rest[i + len..].trim()))),
        None => (rest.trim(), None),
    };
    let field = match name.strip_prefix("label:") {
        Some(key) => {
            if !valid_key(key) {
                return Err(SelectorError::LabelKey {
                    position,
                    key: key.to_owned(),
                });
            }
            Field::Label(key.to_owned())
        }
        None if negated_label => {
            return Err(SelectorError::UnknownField {
                position,
                field: format!("!{name}"),
            });
        }
        None => match name {
            "id" => Field::Id,
            "env" | "environment" => Field::Environment,
            "subnet" | "subnet_id" => Field::Subnet,
            "zone" => Field::Zone,
            "status" => Field::Status,
            "lifecycle" => Field::Lifecycle,
            "skill" => Field::Skill,
            _ if op.is_none() => {
                return Err(SelectorError::NoOperator {
                    position,
                    term: t.to_owned(),
                });
            }
            other => {
                return Err(SelectorError::UnknownField {
                    position,
                    field: other.to_owned(),
                });
            }
        },
    };
    let Some((negated, values)) = op else {
        return match field {
            Field::Label(_) => Ok(Term {
                field,
                negated: negated_label,
                values: None,
            }),
            _ => Err(SelectorError::NoOperator {
                position,
                term: t.to_owned(),
            }),
        };
    };
    if let (true, Field::Label(key)) = (negated_label, &field) {
        return Err(SelectorError::NegatedWithValue {
            position,
            key: key.clone(),
        });
    }
    let values: Vec<String> = values.split('|').map(|v| v.trim().to_owned()).collect();
    for v in &values {
        check_value(position, &field, v)?;
    }
    Ok(Term {
        field,
        negated,
        values: Some(values),
    })
}

fn check_value(position: usize, field: &Field, v: &str) -> Result<(), SelectorError> {
    let closed: Option<(&'static str, &[&str])> = match field {
        Field::Status => Some(("status", &STATUSES)),
        Field::Lifecycle => Some(("lifecycle", &LIFECYCLES)),
        Field::Skill => Some(("skill", &SKILL_STATES)),
        _ => None,
    };
    if let Some((name, allowed)) = closed {
        if allowed.contains(&v) {
            return Ok(());
        }
        return Err(SelectorError::NotOneOf {
            position,
            field: name,
            value: v.to_owned(),
            allowed: allowed.join(", "),
        });
    }
    // A label's value may be empty (a label with no value); nothing else may.
    let empty_ok = matches!(field, Field::Label(_));
    let ok = (empty_ok || !v.is_empty())
        && v.len() <= 200
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._:*-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(SelectorError::Value {
            position,
            value: v.to_owned(),
        })
    }
}

impl Term {
    fn holds(&self, s: &Subject<'_>) -> bool {
        let actual: Option<&str> = match &self.field {
            Field::Id => Some(s.target_id),
            Field::Environment => Some(s.environment),
            Field::Subnet => Some(s.subnet_id),
            Field::Zone => Some(s.zone),
            Field::Status => Some(s.status),
            Field::Lifecycle => Some(s.lifecycle.as_str()),
            Field::Label(key) => s.labels.get(key).map(String::as_str),
            Field::Skill => {
                let any = self
                    .values
                    .iter()
                    .flatten()
                    .any(|want| skill_is(s.skill, want));
                return any != self.negated;
            }
        };
        let matched = match (&self.values, actual) {
            // `label:k` / `!label:k`: present or absent.
            (None, a) => a.is_some(),
            (Some(_), None) => false,
            (Some(values), Some(a)) => values.iter().any(|v| glob(v, a)),
        };
        // A label the target lacks matches neither `label:k=v` nor `label:k!=v`.
        if matches!(self.field, Field::Label(_)) && self.values.is_some() && actual.is_none() {
            return false;
        }
        matched != self.negated
    }
}

/// Whether a skill gate is in the named state (see [`SKILL_STATES`]).
pub fn skill_is(g: &Gate, want: &str) -> bool {
    match want {
        "enabled" => g.open(),
        "closed" => !g.open(),
        "disabled" => g.desired.installed && !g.desired.enabled,
        "uninstalled" => !g.desired.installed,
        "owner_disabled" => g.owner_disabled(),
        _ => false,
    }
}

/// `*` matches any run of characters (empty included); everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    if !pattern.contains('*') {
        return pattern == text;
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &text[first.len()..];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject<'a>(labels: &'a Labels, gate: &'a Gate) -> Subject<'a> {
        Subject {
            target_id: "web-07",
            environment: "test",
            subnet_id: "subnet-a",
            zone: "z1",
            status: "online",
            lifecycle: State::Active,
            skill: gate,
            labels,
        }
    }

    #[test]
    fn terms_all_hold() {
        let labels: Labels = [("role".to_string(), "web".to_string())].into();
        let gate = Gate::default();
        let s = subject(&labels, &gate);
        let yes = [
            "env=test",
            "env = test , subnet=subnet-a",
            "environment=prod|test",
            "id=web-*",
            "id=*-07",
            "id=w*b*7",
            "label:role=web",
            "label:role",
            "label:role!=db",
            "!label:canary",
            "status=online,lifecycle=active",
            "lifecycle!=cordoned|retired",
            "zone=z1,subnet!=subnet-b",
            "skill=enabled",
        ];
        for text in yes {
            assert!(Selector::parse(text).unwrap().matches(&s), "{text}");
        }
        let no = [
            "env=prod",
            "id=db-*",
            "label:role=db",
            "label:canary",
            "label:canary!=x",
            "!label:role",
            "env=test,status=offline",
            "skill=disabled",
        ];
        for text in no {
            assert!(!Selector::parse(text).unwrap().matches(&s), "{text}");
        }
    }

    #[test]
    fn bad_selectors_are_refused_precisely() {
        use SelectorError::*;
        let cases: [(&str, SelectorError); 9] = [
            ("", Empty),
            ("env=test,,zone=a", EmptyTerm(2)),
            (
                "env=test,color=red",
                UnknownField {
                    position: 2,
                    field: "color".into(),
                },
            ),
            (
                "test",
                NoOperator {
                    position: 1,
                    term: "test".into(),
                },
            ),
            (
                "label:Role=web",
                LabelKey {
                    position: 1,
                    key: "Role".into(),
                },
            ),
            (
                "env=te st",
                Value {
                    position: 1,
                    value: "te st".into(),
                },
            ),
            (
                "env=",
                Value {
                    position: 1,
                    value: "".into(),
                },
            ),
            (
                "status=up",
                NotOneOf {
                    position: 1,
                    field: "status",
                    value: "up".into(),
                    allowed: "online, degraded, offline".into(),
                },
            ),
            (
                "!label:role=web",
                NegatedWithValue {
                    position: 1,
                    key: "role".into(),
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(Selector::parse(text), Err(want), "{text}");
        }
        assert_eq!(
            Selector::parse(&"a".repeat(MAX_LEN + 1)),
            Err(TooLong(MAX_LEN + 1))
        );
        let many = vec!["env=test"; MAX_TERMS + 1].join(",");
        assert_eq!(Selector::parse(&many), Err(TooManyTerms(MAX_TERMS + 1)));
    }

    #[test]
    fn globs() {
        assert!(glob("*", ""));
        assert!(glob("a*", "a"));
        assert!(glob("*a*b*", "xaxbx"));
        assert!(!glob("a*a", "a"));
        assert!(!glob("*ab", "ba"));
    }
}
