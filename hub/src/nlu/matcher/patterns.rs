//! What the matcher builds from one content version: per locale and entity type a gazetteer of
//! normalized, stemmed forms, and per template its patterns (the text, and each example
//! delexicalized into slots).

use std::collections::{BTreeMap, HashMap};

use crate::nlu::content::{Entity, Piece, SlotDecl, Template, parse_text, slots};
use crate::nlu::normalize::analyze;

/// How an entity's form was written in the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MatchedBy {
    Label,
    Alias,
}

impl MatchedBy {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            MatchedBy::Label => "label",
            MatchedBy::Alias => "alias",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Hit {
    pub(super) by: MatchedBy,
    pub(super) reference: String,
}

/// The forms of one entity type in one locale.
#[derive(Debug, Default)]
pub(super) struct Gazetteer {
    /// Joined stems → the entities (sorted: labels first, then by ref).
    pub(super) forms: HashMap<String, Vec<Hit>>,
    /// Words of the longest form.
    pub(super) max_words: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Part {
    Word(String),
    /// Index into the template's slots.
    Slot(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    Text,
    Example(usize),
}

#[derive(Debug)]
pub(super) struct Pattern {
    pub(super) source: Source,
    pub(super) parts: Vec<Part>,
}

#[derive(Debug)]
pub(super) struct Compiled {
    pub(super) template_id: String,
    pub(super) intent: String,
    pub(super) slots: Vec<SlotDecl>,
    pub(super) patterns: Vec<Pattern>,
}

#[derive(Debug, Default)]
pub(super) struct LocaleIndex {
    pub(super) kinds: BTreeMap<String, Gazetteer>,
    pub(super) templates: Vec<Compiled>,
}

pub(super) fn gazetteer_for(
    locale: &str,
    entities: &BTreeMap<String, Entity>,
) -> BTreeMap<String, Gazetteer> {
    let mut kinds: BTreeMap<String, Gazetteer> = BTreeMap::new();
    for entity in entities.values() {
        let label = entity.labels.get(locale).map(|l| (MatchedBy::Label, l));
        let aliases = entity
            .aliases
            .get(locale)
            .into_iter()
            .flatten()
            .map(|a| (MatchedBy::Alias, a));
        for (by, form) in label.into_iter().chain(aliases) {
            let stems = analyze(form, locale).1;
            if stems.is_empty() {
                continue;
            }
            let g = kinds.entry(entity.kind().to_owned()).or_default();
            g.max_words = g.max_words.max(stems.len());
            let hits = g.forms.entry(stems.join(" ")).or_default();
            if !hits.iter().any(|h| h.reference == entity.reference) {
                hits.push(Hit {
                    by,
                    reference: entity.reference.clone(),
                });
                hits.sort();
            }
        }
    }
    kinds
}

/// Turns an example into parts: entity spans of the slots' types become slots.
pub(super) fn delexicalize(
    example: &str,
    locale: &str,
    slots: &[SlotDecl],
    kinds: &BTreeMap<String, Gazetteer>,
) -> Vec<Part> {
    let stems = analyze(example, locale).1;
    let mut used = vec![false; slots.len()];
    let mut parts = Vec::new();
    let mut j = 0;
    'words: while j < stems.len() {
        let longest = slots
            .iter()
            .filter_map(|s| kinds.get(&s.kind).map(|g| g.max_words))
            .max()
            .unwrap_or(0)
            .min(stems.len() - j);
        for len in (1..=longest).rev() {
            let key = stems[j..j + len].join(" ");
            let free = slots.iter().enumerate().find(|(i, s)| {
                !used[*i]
                    && kinds
                        .get(&s.kind)
                        .is_some_and(|g| g.forms.contains_key(&key))
            });
            if let Some((i, _)) = free {
                used[i] = true;
                parts.push(Part::Slot(i));
                j += len;
                continue 'words;
            }
        }
        parts.push(Part::Word(stems[j].clone()));
        j += 1;
    }
    parts
}

pub(super) fn compile(template: &Template, kinds: &BTreeMap<String, Gazetteer>) -> Compiled {
    let locale = &template.locale;
    // Content is validated before it is compiled; a text that does not parse has no pattern.
    let pieces = parse_text(&template.text).unwrap_or_default();
    let slot_list = slots(&pieces);
    let mut parts = Vec::new();
    for piece in &pieces {
        match piece {
            Piece::Text(t) => parts.extend(analyze(t, locale).1.into_iter().map(Part::Word)),
            Piece::Slot { name, .. } => {
                if let Some(i) = slot_list.iter().position(|s| &s.name == name) {
                    parts.push(Part::Slot(i));
                }
            }
        }
    }
    let mut patterns = vec![Pattern {
        source: Source::Text,
        parts,
    }];
    for (i, example) in template.examples.iter().enumerate() {
        let parts = delexicalize(example, locale, &slot_list, kinds);
        if !parts.is_empty() {
            patterns.push(Pattern {
                source: Source::Example(i),
                parts,
            });
        }
    }
    Compiled {
        template_id: template.template_id.clone(),
        intent: template.intent.clone(),
        slots: slot_list,
        patterns,
    }
}
