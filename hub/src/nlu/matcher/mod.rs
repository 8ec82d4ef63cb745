//! The deterministic phrase matcher behind `nlu_authoring.check_phrase`.
//!
//! Built once per content version ([`Index::build`]):
//! - a gazetteer per locale and entity type: every label and alias, normalized and stemmed
//!   ([`super::normalize::key`]), mapped to the entities it names (a form shared by several
//!   entities keeps them all);
//! - per template, its patterns: the template text (words stemmed, slots kept) and each
//!   example, delexicalized: spans of the example that name an entity of one of the
//!   template's slot types become that slot (left to right, longest span first, slots taken in
//!   text order), so an example generalizes to other entities of the same type.
//!
//! Matching a phrase:
//! 1. locale: the one given (exactly, else by language), or detected: Cyrillic letters in the
//!    majority pick `ru`, otherwise `en`, among the locales that have templates (else the
//!    first of them);
//! 2. normalize and stem the phrase (at most [`MAX_PHRASE_WORDS`] words);
//! 3. align every pattern of every template of the locale with the phrase: a word part
//!    matches a phrase word with the same stem, a slot part consumes 1 to N words whose
//!    joined stems are a form of an entity of the slot's type; unmatched parts and unmatched
//!    phrase words cost one each, and the alignment of least cost (then fewest unmatched
//!    parts) wins. Score = matched parts / (parts + unmatched phrase words), from 0 to 1;
//! 4. a template's score is its best pattern's (text first on ties); templates scoring at
//!    least [`MIN_SCORE`] are ranked: score descending, then `template_id` ascending; at most
//!    [`MAX_RANKING`];
//! 5. the top candidate's slots give the entities: the canonical ref of the entity whose form
//!    matched (a label before an alias, then the smallest ref; the others are `alternatives`)
//!    and the action preview: the intent's skill, tool, action and constant arguments plus
//!    each filled slot as `<slot>: <canonical ref>` (never a label); it executes nothing.
//!
//! A phrase that matches nothing is an empty ranking with the trace of what was tried, not an
//! error.

mod align;
mod patterns;

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use align::{Aligned, align, cmp_fraction, score_value};
use patterns::{Compiled, LocaleIndex, Source, compile, gazetteer_for};

use super::content::Content;
use super::normalize::{self, analyze};

/// Least score a template needs to be ranked.
pub(crate) const MIN_SCORE: f64 = 0.5;
/// Ranked templates at most.
pub(crate) const MAX_RANKING: usize = 10;
/// Words of a phrase at most.
pub(crate) const MAX_PHRASE_WORDS: usize = 64;

/// Why a phrase cannot be matched at all (a phrase that matches nothing is not an error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MatchError {
    #[error("no templates in locale `{asked}` (locales: {})", .known.join(", "))]
    UnknownLocale { asked: String, known: Vec<String> },
    #[error("the phrase has {words} words; at most {MAX_PHRASE_WORDS}")]
    TooManyWords { words: usize },
}

/// The compiled content of one version.
#[derive(Debug, Default)]
pub(crate) struct Index {
    locales: BTreeMap<String, LocaleIndex>,
}

fn ranked((num, den): (usize, usize)) -> bool {
    num > 0 && num as f64 >= MIN_SCORE * den as f64
}

impl Index {
    /// Compiles `content` (with its current templates).
    pub(crate) fn build(content: &Content) -> Index {
        let mut locales: BTreeMap<String, LocaleIndex> = BTreeMap::new();
        for template in content.templates.values() {
            let entry = locales
                .entry(template.locale.clone())
                .or_insert_with(|| LocaleIndex {
                    kinds: gazetteer_for(&template.locale, &content.entities),
                    templates: Vec::new(),
                });
            let compiled = compile(template, &entry.kinds);
            entry.templates.push(compiled);
        }
        Index { locales }
    }

    /// Locales that have templates.
    pub(crate) fn locales(&self) -> Vec<&str> {
        self.locales.keys().map(String::as_str).collect()
    }

    /// The locale a phrase is matched in, and how it was chosen; `Err` names the known ones.
    fn pick_locale(
        &self,
        phrase: &str,
        asked: Option<&str>,
    ) -> Result<(String, String), MatchError> {
        let known = self.locales();
        if let Some(asked) = asked {
            if self.locales.contains_key(asked) {
                return Ok((asked.to_owned(), format!("locale `{asked}` as asked")));
            }
            let lang = normalize::language(asked);
            if let Some(l) = known.iter().find(|l| normalize::language(l) == lang) {
                return Ok((
                    (*l).to_owned(),
                    format!("locale `{l}`: asked for `{asked}`, same language"),
                ));
            }
            return Err(MatchError::UnknownLocale {
                asked: asked.to_owned(),
                known: known.iter().map(|l| (*l).to_owned()).collect(),
            });
        }
        let cyrillic = phrase
            .chars()
            .filter(|c| ('\u{0400}'..='\u{04FF}').contains(c))
            .count();
        let latin = phrase.chars().filter(char::is_ascii_alphabetic).count();
        let wanted = if cyrillic > latin { "ru" } else { "en" };
        let chosen = known
            .iter()
            .find(|l| normalize::language(l) == wanted)
            .or(known.first())
            .map(|l| (*l).to_owned())
            .unwrap_or_else(|| wanted.to_owned());
        Ok((
            chosen.clone(),
            format!("locale `{chosen}` detected ({cyrillic} Cyrillic and {latin} Latin letters)"),
        ))
    }

    /// Matches `phrase`: the `check_phrase` answer. `Err` only for a locale with no templates
    /// or a phrase over [`MAX_PHRASE_WORDS`] words.
    pub(crate) fn check(
        &self,
        content: &Content,
        phrase: &str,
        asked: Option<&str>,
    ) -> Result<Value, MatchError> {
        let mut trace = Vec::new();
        let (locale, why) = self.pick_locale(phrase, asked)?;
        trace.push(json!({"step": "locale", "detail": why}));
        let (tokens, stems) = analyze(phrase, &locale);
        if tokens.len() > MAX_PHRASE_WORDS {
            return Err(MatchError::TooManyWords {
                words: tokens.len(),
            });
        }
        trace.push(json!({
            "step": "normalize",
            "detail": format!("{} words after case folding, locale folding and punctuation removal", tokens.len()),
            "tokens": tokens,
        }));
        trace.push(json!({
            "step": "stem",
            "detail": format!("stems for `{}`", normalize::language(&locale)),
            "tokens": stems,
        }));
        let empty = LocaleIndex::default();
        let index = self.locales.get(&locale).unwrap_or(&empty);
        let mut candidates: Vec<(&Compiled, Source, Aligned)> = Vec::new();
        if tokens.is_empty() {
            trace.push(
                json!({"step": "rank", "detail": "the phrase has no words; nothing to match"}),
            );
        } else {
            candidates = score_templates(index, &tokens, &stems, &mut trace);
        }
        candidates.sort_by(|x, y| {
            cmp_fraction(y.2.score(), x.2.score())
                .then_with(|| x.0.template_id.cmp(&y.0.template_id))
        });
        candidates.truncate(MAX_RANKING);
        let ranking: Vec<Value> = candidates
            .iter()
            .map(|(t, source, a)| {
                json!({
                    "template_id": t.template_id,
                    "intent": t.intent,
                    "score": score_value(a.score()),
                    "pattern": source_name(*source),
                })
            })
            .collect();
        if !tokens.is_empty() {
            trace.push(json!({
                "step": "rank",
                "detail": match candidates.first() {
                    None => format!("no template of locale `{locale}` reached the minimum score {MIN_SCORE}"),
                    Some((t, _, _)) => format!("{} candidates; top `{}` (score descending, then template_id)", candidates.len(), t.template_id),
                },
            }));
        }
        let (entities, action) = match candidates.first() {
            Some((template, _, a)) => preview(content, template, a, &tokens, &mut trace),
            None => (Vec::new(), Value::Null),
        };
        Ok(json!({
            "phrase": phrase,
            "locale": locale,
            "normalized": tokens.join(" "),
            "trace": trace,
            "ranking": ranking,
            "entities": entities,
            "action_preview": action,
        }))
    }
}

/// Scores every template of `index` against the phrase (its best pattern), tracing each, and
/// returns those that reach the minimum score.
fn score_templates<'a>(
    index: &'a LocaleIndex,
    tokens: &[String],
    stems: &[String],
    trace: &mut Vec<Value>,
) -> Vec<(&'a Compiled, Source, Aligned)> {
    let mut candidates: Vec<(&Compiled, Source, Aligned)> = Vec::new();
    for template in &index.templates {
        let mut top: Option<(Source, Aligned)> = None;
        for pattern in &template.patterns {
            let a = align(pattern, &template.slots, stems, &index.kinds);
            if top
                .as_ref()
                .is_none_or(|(_, t)| cmp_fraction(a.score(), t.score()) == Ordering::Greater)
            {
                top = Some((pattern.source, a));
            }
        }
        let Some((source, a)) = top else { continue };
        let ok = ranked(a.score());
        let mut detail = format!(
            "{}: matched {} of {} parts, {} extra words",
            source_name(source),
            a.matched,
            a.parts,
            a.extra
        );
        for (slot, fill) in template.slots.iter().zip(&a.fills) {
            match fill {
                Some(f) => detail.push_str(&format!(
                    "; slot {} = `{}` → {}",
                    slot.name,
                    tokens[f.start..f.end].join(" "),
                    f.hits.first().map_or("?", |h| h.reference.as_str())
                )),
                None => detail.push_str(&format!("; slot {} unfilled", slot.name)),
            }
        }
        if !ok {
            detail.push_str(&format!("; below the minimum score {MIN_SCORE}"));
        }
        trace.push(json!({
            "step": if ok { "match" } else { "no_match" },
            "detail": detail,
            "template_id": template.template_id,
            "pattern": source_name(source),
            "score": score_value(a.score()),
        }));
        if ok {
            candidates.push((template, source, a));
        }
    }
    candidates
}

/// The entities of the top candidate's filled slots and the action its intent would dispatch
/// (never executed), tracing each.
fn preview(
    content: &Content,
    template: &Compiled,
    a: &Aligned,
    tokens: &[String],
    trace: &mut Vec<Value>,
) -> (Vec<Value>, Value) {
    let mut entities = Vec::new();
    let mut action = Value::Null;
    let mut arguments = Map::new();
    let mut missing = Vec::new();
    let intent = content.intents.get(&template.intent);
    if let Some(intent) = intent {
        arguments.extend(intent.arguments.clone());
    }
    for (slot, fill) in template.slots.iter().zip(&a.fills) {
        let chosen = fill.as_ref().and_then(|f| f.hits.first().map(|h| (f, h)));
        let Some((f, hit)) = chosen else {
            missing.push(slot.name.clone());
            continue;
        };
        let surface = tokens[f.start..f.end].join(" ");
        let alternatives: Vec<&str> = f.hits[1..].iter().map(|h| h.reference.as_str()).collect();
        trace.push(json!({
                "step": "entity",
                "detail": format!(
                    "slot {} `{surface}` → {} (by {}{})",
                    slot.name,
                    hit.reference,
                    hit.by.as_str(),
                    if alternatives.is_empty() { String::new() } else { format!("; also names {}", alternatives.join(", ")) }
                ),
                "template_id": template.template_id,
            }));
        arguments.insert(slot.name.clone(), Value::String(hit.reference.clone()));
        entities.push(json!({
            "slot": slot.name,
            "type": slot.kind,
            "surface": surface,
            "canonical_ref": hit.reference,
            "matched_by": hit.by.as_str(),
            "alternatives": alternatives,
        }));
    }
    if let Some(intent) = intent {
        trace.push(json!({
                "step": "action",
                "detail": format!(
                    "would dispatch {}/{}/{}{}; nothing was executed",
                    intent.skill,
                    intent.tool,
                    intent.action,
                    if missing.is_empty() { String::new() } else { format!(" (slots unfilled: {})", missing.join(", ")) }
                ),
                "template_id": template.template_id,
            }));
        action = json!({
            "template_id": template.template_id,
            "intent": intent.intent,
            "skill": intent.skill,
            "tool": intent.tool,
            "action": intent.action,
            "arguments": arguments,
            "missing_slots": missing,
            "executes": false,
        });
    }
    (entities, action)
}

fn source_name(source: Source) -> String {
    match source {
        Source::Text => "text".to_owned(),
        Source::Example(i) => format!("example {i}"),
    }
}

#[cfg(test)]
mod matcher_tests;
