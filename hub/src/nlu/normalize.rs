//! Normalization and stemming of phrases, template words, labels and aliases: the one place
//! that decides when two surface forms are "the same word".
//!
//! Normalization (every locale, in this order):
//! 1. lower case (Unicode `to_lowercase`);
//! 2. locale folding: Russian (`ru`) folds `ё` to `е`;
//! 3. apostrophes (`'`, `’`, `ʼ`, `` ` ``) are dropped (`what's` → `whats`);
//! 4. every other character that is not a letter or a digit becomes a space (punctuation,
//!    symbols, hyphens: `wi-fi` → `wi fi`);
//! 5. split on white space; empty tokens are dropped.
//!
//! Stemming (per token, by the locale's language; other languages are not stemmed):
//! - `ru`, tokens with Cyrillic letters: the longest ending of [`RU_ENDINGS`] whose removal
//!   leaves at least [`RU_MIN_STEM`] characters is removed (`лампа`, `лампу`, `лампы`,
//!   `лампой` → `ламп`; `кухне`, `кухня` → `кухн`; `включи`, `включите` → `включ`).
//! - `en`, ASCII tokens of at least four letters: `-ies` → `-y`, `-sses` → `-ss`, `-ches`,
//!   `-shes`, `-xes`, `-zes` lose `-es`, and a final `-s` is removed unless the word ends in
//!   `-ss`, `-us` or `-is` (`lamps` → `lamp`, `switches` → `switch`, `batteries` → `battery`).
//!
//! The stemmer is deliberately small and explicit: it makes inflected forms of the same word
//! meet, and it may also merge unrelated words; both sides of every comparison (phrase and
//! content) go through the same rules, so a merge is the same everywhere.

/// Russian endings removed by [`stem`], tried longest first.
pub(crate) const RU_ENDINGS: &[&str] = &[
    "ами", "ями", "ого", "его", "ому", "ему", "ыми", "ими", "ите", "ить", "ать", "ять", "еть",
    "ешь", "ишь", "ая", "яя", "ую", "юю", "ое", "ее", "ой", "ей", "ый", "ий", "ые", "ие", "ых",
    "ым", "ом", "ем", "ах", "ях", "ам", "ям", "ов", "ев", "ью", "ет", "ит", "ут", "ют", "ат", "ят",
    "а", "я", "у", "ю", "ы", "и", "е", "о", "ь", "й",
];

/// Characters a Russian stem keeps at least.
pub(crate) const RU_MIN_STEM: usize = 3;

/// The language part of a locale (`ru-RU` → `ru`).
pub(crate) fn language(locale: &str) -> &str {
    locale.split('-').next().unwrap_or(locale)
}

/// The normalized tokens of `text` in `locale`.
pub(crate) fn normalize(text: &str, locale: &str) -> Vec<String> {
    let fold_yo = language(locale) == "ru";
    let mut out = String::with_capacity(text.len());
    for c in text.chars().flat_map(char::to_lowercase) {
        match c {
            'ё' if fold_yo => out.push('е'),
            '\'' | '’' | 'ʼ' | '`' => {}
            c if c.is_alphanumeric() => out.push(c),
            _ => out.push(' '),
        }
    }
    out.split_whitespace().map(str::to_owned).collect()
}

/// The stem of one normalized token in `locale`.
pub(crate) fn stem(token: &str, locale: &str) -> String {
    match language(locale) {
        "ru" => stem_ru(token),
        "en" => stem_en(token),
        _ => token.to_owned(),
    }
}

fn is_cyrillic(c: char) -> bool {
    ('\u{0400}'..='\u{04FF}').contains(&c)
}

fn stem_ru(token: &str) -> String {
    if !token.chars().any(is_cyrillic) {
        return token.to_owned();
    }
    let chars = token.chars().count();
    let mut best: Option<&str> = None;
    for ending in RU_ENDINGS {
        let n = ending.chars().count();
        if token.ends_with(ending)
            && chars >= n + RU_MIN_STEM
            && best.is_none_or(|b| b.chars().count() < n)
        {
            best = Some(ending);
        }
    }
    match best {
        Some(ending) => token[..token.len() - ending.len()].to_owned(),
        None => token.to_owned(),
    }
}

fn stem_en(token: &str) -> String {
    if token.len() < 4 || !token.chars().all(|c| c.is_ascii_lowercase()) {
        return token.to_owned();
    }
    if let Some(base) = token.strip_suffix("ies")
        && base.len() >= 2
    {
        return format!("{base}y");
    }
    if let Some(base) = token.strip_suffix("sses") {
        return format!("{base}ss");
    }
    for suffix in ["ches", "shes", "xes", "zes"] {
        if token.ends_with(suffix) {
            return token[..token.len() - 2].to_owned();
        }
    }
    if token.ends_with('s') && !["ss", "us", "is"].iter().any(|s| token.ends_with(s)) {
        return token[..token.len() - 1].to_owned();
    }
    token.to_owned()
}

/// `text` normalized and stemmed: (tokens, stems), index by index.
pub(crate) fn analyze(text: &str, locale: &str) -> (Vec<String>, Vec<String>) {
    let tokens = normalize(text, locale);
    let stems = tokens.iter().map(|t| stem(t, locale)).collect();
    (tokens, stems)
}

/// The stems of `text` joined by single spaces: the key two surface forms share when they are
/// the same words.
pub(crate) fn key(text: &str, locale: &str) -> String {
    analyze(text, locale).1.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization_folds_case_punctuation_space_and_yo() {
        assert_eq!(
            normalize("  Turn ON, the   Kitchen-Lamp!! ", "en"),
            ["turn", "on", "the", "kitchen", "lamp"]
        );
        assert_eq!(normalize("What's up?", "en"), ["whats", "up"]);
        assert_eq!(normalize("Включи ЁЛКУ…", "ru"), ["включи", "елку"]);
        assert_eq!(normalize("ёлка", "en"), ["ёлка"], "ё folds only in ru");
        assert_eq!(
            normalize("«Свет» — на\tкухне\u{a0}№5", "ru-RU"),
            ["свет", "на", "кухне", "5"]
        );
        assert!(normalize("?!… --- ***", "en").is_empty());
        assert!(normalize("", "ru").is_empty());
    }

    #[test]
    fn russian_inflections_meet() {
        for (forms, stem_of_all) in [
            (
                &["лампа", "лампу", "лампы", "лампе", "лампой", "лампами"][..],
                "ламп",
            ),
            (&["кухня", "кухне", "кухни", "кухню"][..], "кухн"),
            (&["кухонная", "кухонную", "кухонной"][..], "кухонн"),
            (&["включи", "включите", "включить"][..], "включ"),
            (&["телевизор", "телевизора", "телевизоре"][..], "телевизор"),
            (&["спальня", "спальне", "спальни"][..], "спальн"),
            (&["свет", "света"][..], "свет"),
            (&["гостиная", "гостиной", "гостиную"][..], "гостин"),
        ] {
            for form in forms {
                assert_eq!(stem(form, "ru"), stem_of_all, "{form}");
            }
        }
        // Short words and words with no known ending stay.
        for same in ["на", "в", "чем", "свет", "режим", "lamp"] {
            assert_eq!(stem(same, "ru"), same);
        }
        assert_eq!(key("Лампу на КУХНЕ", "ru"), key("лампа на кухне", "ru"));
        assert_eq!(key("кухонную лампу", "ru"), key("Кухонная лампа", "ru"));
    }

    #[test]
    fn english_plurals_meet() {
        for (word, expect) in [
            ("lamps", "lamp"),
            ("lights", "light"),
            ("switches", "switch"),
            ("boxes", "box"),
            ("batteries", "battery"),
            ("glasses", "glass"),
            ("glass", "glass"),
            ("status", "status"),
            ("this", "this"),
            ("tvs", "tvs"),
            ("on", "on"),
            ("лампы", "лампы"),
        ] {
            assert_eq!(stem(word, "en"), expect, "{word}");
        }
        assert_eq!(
            stem("lamps", "de"),
            "lamps",
            "unknown languages are not stemmed"
        );
    }
}
