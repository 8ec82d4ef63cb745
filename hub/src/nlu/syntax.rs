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

/// Why template text, a label, an alias or an example is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SyntaxError {
    #[error("text must have 1 to {MAX_TEXT_CHARS} characters, no control characters")]
    TextLength,
    #[error("slot `{{{inner}}}`: slots cannot nest")]
    NestedSlot { inner: String },
    #[error("slot `{{{inner}}}` must be separated from neighbouring words by spaces")]
    SlotNotSeparated { inner: String },
    #[error("slot `{{{inner}}}` must be written `{{name:type}}`")]
    SlotShape { inner: String },
    #[error("slot `{{{inner}}}`: name and type must match [a-z][a-z0-9_]{{0,31}}")]
    SlotName { inner: String },
    #[error("`{{` without a matching `}}`")]
    UnclosedSlot,
    #[error("`}}` without a matching `{{`")]
    UnopenedSlot,
    #[error("locale `{locale}` must be `xx` or `xx-XX`")]
    Locale { locale: String },
    #[error("`{form}` must have 1 to {MAX_TEXT_CHARS} characters, no control characters")]
    FormLength { form: String },
    #[error("`{form}` has no words")]
    NoWords { form: String },
    #[error("`{form}` has more than {MAX_ALIAS_WORDS} words")]
    TooManyWords { form: String },
}

/// Splits template text into words and slots, checking the slot syntax.
pub(crate) fn parse_text(text: &str) -> Result<Vec<Piece>, SyntaxError> {
    if !plain_text(text) {
        return Err(SyntaxError::TextLength);
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
                let (before, inner, after) = (&rest[..o], &rest[o + 1..c], &rest[c + 1..]);
                let (name, kind) = check_slot(before, inner, after)?;
                if !before.is_empty() {
                    pieces.push(Piece::Text(before.to_owned()));
                }
                pieces.push(Piece::Slot {
                    name: name.to_owned(),
                    kind: kind.to_owned(),
                });
                rest = after;
            }
            (Some(_), _) => return Err(SyntaxError::UnclosedSlot),
            (None, Some(_)) => return Err(SyntaxError::UnopenedSlot),
        }
    }
    Ok(pieces)
}

/// Checks the slot `{inner}` between `before` and `after`: its name and type.
fn check_slot<'a>(
    before: &str,
    inner: &'a str,
    after: &str,
) -> Result<(&'a str, &'a str), SyntaxError> {
    let slot = || inner.to_owned();
    if inner.contains('{') {
        return Err(SyntaxError::NestedSlot { inner: slot() });
    }
    if !(before.is_empty() || before.ends_with(char::is_whitespace))
        || !(after.is_empty() || after.starts_with(char::is_whitespace))
    {
        return Err(SyntaxError::SlotNotSeparated { inner: slot() });
    }
    let Some((name, kind)) = inner.split_once(':') else {
        return Err(SyntaxError::SlotShape { inner: slot() });
    };
    if !valid_slot_name(name) || !valid_slot_name(kind) {
        return Err(SyntaxError::SlotName { inner: slot() });
    }
    Ok((name, kind))
}

/// Checks a label, alias or example in `locale`.
pub(super) fn check_form(locale: &str, form: &str) -> Result<(), SyntaxError> {
    if !valid_locale(locale) {
        return Err(SyntaxError::Locale {
            locale: locale.to_owned(),
        });
    }
    if !plain_text(form) {
        let form = form.to_owned();
        return Err(SyntaxError::FormLength { form });
    }
    if normalize::normalize(form, locale).is_empty() {
        let form = form.to_owned();
        return Err(SyntaxError::NoWords { form });
    }
    Ok(())
}

/// Checks a label or alias: a form of at most [`MAX_ALIAS_WORDS`] words.
pub(super) fn check_alias(locale: &str, form: &str) -> Result<(), SyntaxError> {
    check_form(locale, form)?;
    let words = normalize::normalize(form, locale).len();
    if words > MAX_ALIAS_WORDS {
        return Err(SyntaxError::TooManyWords {
            form: form.to_owned(),
        });
    }
    Ok(())
}
