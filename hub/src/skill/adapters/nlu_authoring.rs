//! The NLUAuthoringPlane tools over the hub's NLU content store ([`crate::nlu`]).
//!
//! Reads: `nlu_authoring.get_context` (the compact entity registry, intents, locale hints and
//! canonicalization rules), `nlu_authoring.list_templates` (every template with its
//! `template_id` and fingerprint), `nlu_authoring.check_phrase` (the matcher's trace, ranking,
//! entities and action preview; executes nothing).
//!
//! Writes (declared so; both take `{template_id, base_fingerprint, add_examples?,
//! remove_examples?, text?}`):
//! - `nlu_authoring.propose_change` never changes anything: dry run or not, it answers the
//!   preview `{template_id, base_fingerprint, new_fingerprint, diff: {before, after,
//!   changes}}`.
//! - `nlu_authoring.apply_change`: a dry run answers the same preview; otherwise the
//!   fingerprint is checked again and the change applied and persisted, answering
//!   `{template_id, previous_fingerprint, fingerprint, diff}`. An idempotency key already in
//!   the hub's write ledger answers the first result and applies nothing; the same key with
//!   other arguments is `idempotency_conflict`.
//!
//! Errors: a `base_fingerprint` that is not the template's current one is `conflict` (the
//! message and `details.current_fingerprint` name the current one); an unknown template is
//! `not_found`; a hub without `[nlu]` answers `not_found` to every tool.

use mcp_shared::error::{ErrorCode, ToolError};
use serde::Deserialize;
use serde_json::{Value, json};

use super::args::{Arguments, parse, present};
use super::call::CallInput;
use super::decl::Builtin;
use crate::context::HubContext;
use crate::nlu::change::ChangeRequest;
use crate::nlu::content::{MAX_TEXT_CHARS, valid_id, valid_locale};
use crate::nlu::matcher::{MAX_PHRASE_WORDS, MIN_SCORE};
use crate::nlu::normalize::{RU_ENDINGS, RU_MIN_STEM, language};
use crate::store::ledger::Begin;

/// Characters of a phrase `check_phrase` takes at most.
pub(crate) const MAX_PHRASE_CHARS: usize = 500;

fn bad(message: String) -> ToolError {
    ToolError::new(ErrorCode::InvalidArguments, message)
}

/// What the value of `field` must be (the read tools share their arguments' names).
fn rule(field: &str) -> String {
    match field {
        "locale" => "`locale` must be `xx` or `xx-XX` (ISO 639-1, ISO 3166-1)".into(),
        "intent" => "`intent` must match [a-z0-9][a-z0-9_.-]{0,63}".into(),
        _ => format!("`phrase` (a string of 1 to {MAX_PHRASE_CHARS} characters) is required"),
    }
}

/// `nlu_authoring.get_context`: no arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// `nlu_authoring.list_templates`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListTemplates {
    #[serde(default, deserialize_with = "present")]
    locale: Option<String>,
    #[serde(default, deserialize_with = "present")]
    intent: Option<String>,
}

/// `nlu_authoring.check_phrase`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckPhrase {
    phrase: String,
    #[serde(default, deserialize_with = "present")]
    locale: Option<String>,
}

impl Arguments for NoArgs {
    fn rule(field: &str) -> String {
        rule(field)
    }
}

impl Arguments for ListTemplates {
    fn rule(field: &str) -> String {
        rule(field)
    }
}

impl Arguments for CheckPhrase {
    fn rule(field: &str) -> String {
        rule(field)
    }
}

fn locale_arg(locale: Option<&str>) -> Result<Option<&str>, ToolError> {
    match locale {
        Some(l) if !valid_locale(l) => Err(bad(rule("locale"))),
        l => Ok(l),
    }
}

/// What the normalizer does in `locale`, for agents writing content.
fn locale_hint(locale: &str, templates: usize) -> Value {
    let mut folding = vec!["lower case"];
    let stemming = match language(locale) {
        "ru" => {
            folding.push("ё → е");
            format!(
                "the longest ending of canonicalization.ru_endings is removed when at least {RU_MIN_STEM} characters remain (лампа, лампу, лампы → ламп)"
            )
        }
        "en" => "plural endings of words of 4+ letters: -ies → -y, -sses → -ss, -ches/-shes/-xes/-zes lose -es, a final -s is dropped unless -ss/-us/-is (lamps → lamp)".to_owned(),
        _ => "none".to_owned(),
    };
    folding.push("apostrophes dropped");
    folding.push("other punctuation and symbols → space");
    json!({
        "locale": locale,
        "templates": templates,
        "folding": folding,
        "stemming": stemming,
    })
}

/// `nlu_authoring.get_context`.
pub(crate) fn get_context(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let NoArgs {} = parse(arguments)?;
    let snap = ctx.stores.nlu.snapshot()?;
    let content = &snap.content;
    let locales: Vec<Value> = content
        .locales()
        .iter()
        .map(|l| {
            locale_hint(
                l,
                content
                    .templates
                    .values()
                    .filter(|t| &t.locale == l)
                    .count(),
            )
        })
        .collect();
    let kinds: std::collections::BTreeSet<&str> =
        content.entities.values().map(|e| e.kind()).collect();
    let entities: Vec<Value> = content
        .entities
        .values()
        .map(|e| {
            json!({
                "ref": e.reference,
                "type": e.kind(),
                "labels": e.labels,
                "aliases": e.aliases,
            })
        })
        .collect();
    let intents: Vec<Value> = content
        .intents
        .values()
        .map(|i| {
            json!({
                "intent": i.intent,
                "skill": i.skill,
                "tool": i.tool,
                "action": i.action,
                "description": i.description,
                "slots": i.slots.iter().map(|s| json!({"name": s.name, "type": s.kind})).collect::<Vec<_>>(),
                "arguments": i.arguments,
            })
        })
        .collect();
    Ok(json!({
        "content_fingerprint": snap.content_fingerprint(),
        "locales": locales,
        "entity_types": kinds,
        "entities": entities,
        "intents": intents,
        "canonicalization": {
            "ref_format": "<type>:<id>, type [a-z][a-z0-9_]{0,31}, id [a-z0-9][a-z0-9_.-]{0,63}",
            "slot_syntax": "{name:type}: name [a-z][a-z0-9_]{0,31}, type an entity type; separated from words by spaces",
            "rules": [
                "Dispatch arguments and proposed changes reference canonical refs, never labels or aliases",
                "Labels and aliases are recognition metadata of their locale",
                "A phrase and every label, alias, template word and example are normalized and stemmed with the same rules of their locale before they are compared",
                "A template's slots are exactly its intent's slots, each once",
                "A change names template_id and the base_fingerprint it was made on; a stale base_fingerprint is a conflict",
                "Examples generalize: an entity named in an example stands for any entity of its slot's type",
            ],
            "min_score": MIN_SCORE,
            "max_phrase_words": MAX_PHRASE_WORDS,
            "max_text_chars": MAX_TEXT_CHARS,
            "ru_endings": RU_ENDINGS,
            "ru_min_stem": RU_MIN_STEM,
        },
    }))
}

/// `nlu_authoring.list_templates`.
pub(crate) fn list_templates(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let args: ListTemplates = parse(arguments)?;
    let locale = locale_arg(args.locale.as_deref())?;
    let intent = match args.intent.as_deref() {
        Some(i) if !valid_id(i) => return Err(bad(rule("intent"))),
        i => i,
    };
    let snap = ctx.stores.nlu.snapshot()?;
    let templates: Vec<Value> = snap
        .content
        .templates
        .values()
        .filter(|t| locale.is_none_or(|l| t.locale == l))
        .filter(|t| intent.is_none_or(|i| t.intent == i))
        .map(|t| {
            let slots = crate::nlu::content::parse_text(&t.text)
                .map(|p| crate::nlu::content::slots(&p))
                .unwrap_or_default();
            json!({
                "template_id": t.template_id,
                "locale": t.locale,
                "intent": t.intent,
                "text": t.text,
                "slots": slots.iter().map(|s| json!({"name": s.name, "type": s.kind})).collect::<Vec<_>>(),
                "examples": t.examples,
                "fingerprint": t.fingerprint(),
                "origin": snap.origins.get(&t.template_id).copied().unwrap_or(crate::nlu::Origin::Config),
            })
        })
        .collect();
    Ok(json!({"count": templates.len(), "templates": templates}))
}

/// `nlu_authoring.check_phrase`.
pub(crate) fn check_phrase(ctx: &HubContext, arguments: &Value) -> Result<Value, ToolError> {
    let args: CheckPhrase = parse(arguments)?;
    let phrase = args.phrase.as_str();
    if !(1..=MAX_PHRASE_CHARS).contains(&phrase.chars().count()) {
        return Err(bad(rule("phrase")));
    }
    let locale = locale_arg(args.locale.as_deref())?;
    let snap = ctx.stores.nlu.snapshot()?;
    snap.index
        .check(&snap.content, phrase, locale)
        .map_err(|e| bad(e.to_string()))
}

/// `nlu_authoring.propose_change`: the preview, whatever `dry_run` says.
pub(crate) fn propose_change(ctx: &HubContext, input: &CallInput) -> Result<Value, ToolError> {
    let req = ChangeRequest::parse(&input.body.arguments)?;
    ctx.stores.nlu.snapshot()?.preview(&req)
}

/// `nlu_authoring.apply_change`.
pub(crate) fn apply_change(ctx: &HubContext, input: &CallInput) -> Result<Value, ToolError> {
    let req = ChangeRequest::parse(&input.body.arguments)?;
    if input.body.dry_run {
        return ctx.stores.nlu.snapshot()?.preview(&req);
    }
    let tool = Builtin::NluApplyChange.decl().tool_id;
    let Some(key) = &input.body.idempotency_key else {
        return ctx.stores.nlu.apply(&req, None);
    };
    let _claim = match ctx.stores.ledger.begin(tool, key)? {
        Begin::Replay(first) => {
            if first["arguments"] != input.body.arguments {
                return Err(ToolError::new(
                    ErrorCode::IdempotencyConflict,
                    format!(
                        "idempotency key `{key}` was already used with other arguments ({})",
                        first["arguments"]
                    ),
                ));
            }
            return Ok(first["result"].clone());
        }
        Begin::Run(claim) => claim,
    };
    let result = ctx.stores.nlu.apply(&req, Some(key))?;
    ctx.stores.ledger
        .record(
            tool,
            key,
            &json!({"arguments": input.body.arguments, "result": result}),
        )
        .map_err(|e| {
            ToolError::new(
                ErrorCode::Internal,
                format!(
                    "template `{}` was changed (fingerprint {}) but the idempotency key was not recorded: {}",
                    req.template_id, result["fingerprint"], e.message
                ),
            )
        })?;
    Ok(result)
}

#[cfg(test)]
mod tests;
