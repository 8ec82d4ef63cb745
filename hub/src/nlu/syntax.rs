//! The syntax of NLU content: names, canonical refs, ids and locales; template text (words and
//! slots `{name:type}`, see [`super::content`]); and the checks every label, alias and example
//! passes.

use super::normalize;

/// Words of one label or alias at most (after normalization).
pub(crate) const MAX_ALIAS_WORDS: usize = 6;
/// Characters of a template text, an example, a label or an alias at most.
pub(crate) const MAX_TEXT_CHARS: usize = 160;

/// One piece of template text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Literal text between slots (may hold several words).
    Text(String),
    Slot {
        name: String,
        kind: String,
    },
}

fn is_name(s: &str, max: usize) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && s.len() <= max
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// `[a-z][a-z0-9_]{0,31}`: slot names and entity types.
pub(crate) fn valid_slot_name(s: &str) -> bool {
    is_name(s, 32)
}

/// `<type>:<id>` with type `[a-z][a-z0-9_]{0,31}` and id `[a-z0-9][a-z0-9_.-]{0,63}`.
pub(crate) fn valid_ref(s: &str) -> bool {
    let Some((kind, id)) = s.split_once(':') else {
        return false;
    };
    let mut chars = id.chars();
    valid_slot_name(kind)
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && id.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c))
}

/// `[a-z0-9][a-z0-9_.-]{0,63}`: template and intent ids.
pub(crate) fn valid_id(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c))
}

/// `[a-z]{2}` with an optional `-[A-Z]{2}` region.
pub(crate) fn valid_locale(s: &str) -> bool {
    let (lang, region) = match s.split_once('-') {
        Some((l, r)) => (l, Some(r)),
        None => (s, None),
    };
    lang.len() == 2
        && lang.chars().all(|c| c.is_ascii_lowercase())
        && region.is_none_or(|r| r.len() == 2 && r.chars().all(|c| c.is_ascii_uppercase()))
}

/// `[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}`: skill, tool and action names.
pub(super) fn valid_dispatch_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.len() <= 128
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
}

/// Whether `s` is 1 to [`MAX_TEXT_CHARS`] characters without control characters.
fn plain_text(s: &str) -> bool {
    let n = s.chars().count();
    (1..=MAX_TEXT_CHARS).contains(&n) && !s.chars().any(char::is_control) && !s.trim().is_empty()
}

/// Splits template text into words and slots, checking the slot syntax.
pub(crate) fn parse_text(text: &str) -> Result<Vec<Piece>, String> {
    if !plain_text(text) {
        return Err(format!(
            "text must have 1 to {MAX_TEXT_CHARS} characters, no control characters"
        ));
    }
    let mut pieces = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let open = rest.find('{');
        let close = rest.find('}');
        match (open, close) {
            (None, None) => {
                pieces.push(Piece::Text(rest.to_owned()));
                break;
            }
            (Some(o), Some(c)) if o < c => {
                let before = &rest[..o];
                let inner = &rest[o + 1..c];
                let after = &rest[c + 1..];
                if inner.contains('{') {
                    return Err(format!("slot `{{{inner}}}`: slots cannot nest"));
                }
                if !(before.is_empty() || before.ends_with(char::is_whitespace))
                    || !(after.is_empty() || after.starts_with(char::is_whitespace))
                {
                    return Err(format!(
                        "slot `{{{inner}}}` must be separated from neighbouring words by spaces"
                    ));
                }
                let Some((name, kind)) = inner.split_once(':') else {
                    return Err(format!(
                        "slot `{{{inner}}}` must be written `{{name:type}}`"
                    ));
                };
                if !valid_slot_name(name) || !valid_slot_name(kind) {
                    return Err(format!(
                        "slot `{{{inner}}}`: name and type must match [a-z][a-z0-9_]{{0,31}}"
                    ));
                }
                if !before.is_empty() {
                    pieces.push(Piece::Text(before.to_owned()));
                }
                pieces.push(Piece::Slot {
                    name: name.to_owned(),
                    kind: kind.to_owned(),
                });
                rest = after;
            }
            (Some(_), _) => return Err("`{` without a matching `}`".into()),
            (None, Some(_)) => return Err("`}` without a matching `{`".into()),
        }
    }
    Ok(pieces)
}

/// Checks a label, alias or example in `locale`.
pub(super) fn check_form(locale: &str, form: &str) -> Result<(), String> {
    if !valid_locale(locale) {
        return Err(format!("locale `{locale}` must be `xx` or `xx-XX`"));
    }
    if !plain_text(form) {
        return Err(format!(
            "`{form}` must have 1 to {MAX_TEXT_CHARS} characters, no control characters"
        ));
    }
    let words = normalize::normalize(form, locale).len();
    if words == 0 {
        return Err(format!("`{form}` has no words"));
    }
    Ok(())
}

/// Checks a label or alias: a form of at most [`MAX_ALIAS_WORDS`] words.
pub(super) fn check_alias(locale: &str, form: &str) -> Result<(), String> {
    check_form(locale, form)?;
    let words = normalize::normalize(form, locale).len();
    if words > MAX_ALIAS_WORDS {
        return Err(format!("`{form}` has more than {MAX_ALIAS_WORDS} words"));
    }
    Ok(())
}
