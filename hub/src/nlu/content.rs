//! NLU content as written in the files `[nlu]` declares, validated into [`Content`]: the
//! named-entity registry, the intents and the templates, and template fingerprints (the
//! syntax of names, refs, locales and template text is [`super::syntax`]).
//!
//! Files (JSON, unknown fields refused, at most [`MAX_FILE_BYTES`] each):
//! - entities: `{"entities": [{"ref": "device:lamp.kitchen", "labels": {"en": "kitchen lamp"},
//!   "aliases": {"en": ["kitchen light"], "ru": ["кухонная лампа"]}}]}`. A canonical ref is
//!   `<type>:<id>`; its type is the entity type slots name.
//! - intents: `{"intents": [{"intent": "device.turn_on", "skill": "home_skill", "tool":
//!   "home.set_power", "action": "turn_on", "slots": [{"name": "device", "type": "device"}],
//!   "arguments": {"power": "on"}, "description": "..."}]}`. `arguments` are constants; the
//!   action preview adds each filled slot as `<slot name>: <canonical ref>`.
//! - templates: `{"templates": [{"template_id": "en.device.turn_on", "locale": "en", "intent":
//!   "device.turn_on", "text": "turn on the {device:device}", "examples": ["turn on the
//!   kitchen lamp"]}]}`.
//!
//! Template text: words and slots `{name:type}` (name and type `[a-z][a-z0-9_]{0,31}`), a slot
//! separated from neighbouring words by spaces; the slots are exactly the intent's slots, each
//! once; at least one word besides the slots.
//!
//! A template's fingerprint is `sha256:<hex>` of the canonical JSON
//! (`mcp_shared::canonical::to_vec`) of `{template_id, locale, intent, text, examples}`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::normalize;
pub(crate) use super::syntax::{
    MAX_TEXT_CHARS, Piece, parse_text, valid_id, valid_locale, valid_ref, valid_slot_name,
};
use super::syntax::{SyntaxError, check_alias, check_form, valid_dispatch_name};

/// Largest content file read.
pub(crate) const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Entities in the registry at most.
pub(crate) const MAX_ENTITIES: usize = 500;
/// Aliases of one entity in one locale at most.
pub(crate) const MAX_ALIASES: usize = 32;
/// Intents at most.
pub(crate) const MAX_INTENTS: usize = 200;
/// Slots of one intent at most.
pub(crate) const MAX_SLOTS: usize = 8;
/// Templates at most (over all files); keeps `list_templates` within one protocol frame.
pub(crate) const MAX_TEMPLATES: usize = 100;
/// Examples of one template at most.
pub(crate) const MAX_EXAMPLES: usize = 20;
/// Bytes of the entities and intents as JSON at most (so `get_context` fits one frame).
pub(crate) const MAX_REGISTRY_BYTES: usize = 384 * 1024;
/// Bytes of all templates as JSON at most (so `list_templates` fits one frame).
pub(crate) const MAX_TEMPLATES_BYTES: usize = 384 * 1024;

fn json_len<T: Serialize>(v: &T) -> usize {
    serde_json::to_vec(v).map_or(usize::MAX, |b| b.len())
}

/// A named entity: its canonical ref and the surface forms that recognize it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entity {
    /// `<type>:<id>`; what dispatch and patches use, never a label.
    #[serde(rename = "ref")]
    pub reference: String,
    /// Display label per locale (also recognized).
    pub labels: BTreeMap<String, String>,
    /// More recognized forms per locale (inflected forms, synonyms).
    #[serde(default)]
    pub aliases: BTreeMap<String, Vec<String>>,
}

impl Entity {
    /// The entity type (the part of the ref before `:`).
    pub(crate) fn kind(&self) -> &str {
        self.reference
            .split_once(':')
            .map_or(self.reference.as_str(), |(k, _)| k)
    }
}

/// One slot an intent takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SlotDecl {
    pub name: String,
    /// An entity type.
    #[serde(rename = "type")]
    pub kind: String,
}

/// An intent and the skill, tool and action it dispatches to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Intent {
    pub intent: String,
    pub skill: String,
    pub tool: String,
    pub action: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub slots: Vec<SlotDecl>,
    /// Constant arguments of the action (slot values are added by name).
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// A template: the fingerprinted unit the authoring tools change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Template {
    pub template_id: String,
    pub locale: String,
    pub intent: String,
    pub text: String,
    #[serde(default)]
    pub examples: Vec<String>,
}

impl Template {
    /// `sha256:<hex>` of the template's canonical JSON.
    pub(crate) fn fingerprint(&self) -> String {
        let value = serde_json::json!({
            "template_id": self.template_id,
            "locale": self.locale,
            "intent": self.intent,
            "text": self.text,
            "examples": self.examples,
        });
        format!(
            "sha256:{}",
            hex::encode(Sha256::digest(mcp_shared::canonical::to_vec(&value)))
        )
    }

    /// The template as JSON (the fields the fingerprint covers).
    pub(crate) fn to_json(&self) -> Value {
        serde_json::json!({
            "template_id": self.template_id,
            "locale": self.locale,
            "intent": self.intent,
            "text": self.text,
            "examples": self.examples,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntitiesFile {
    entities: Vec<Entity>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IntentsFile {
    intents: Vec<Intent>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TemplatesFile {
    templates: Vec<Template>,
}

/// Why content could not be loaded: the file (or item) and the reason.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub(crate) struct LoadError {
    pub path: PathBuf,
    pub message: String,
}

impl LoadError {
    pub(crate) fn new(path: &Path, message: impl Into<String>) -> LoadError {
        LoadError {
            path: path.to_owned(),
            message: message.into(),
        }
    }
}

/// Why a template does not fit the registry and intents (its uniqueness aside).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TemplateError {
    #[error("template `{id}`: template_id must match [a-z0-9][a-z0-9_.-]{{0,63}}")]
    Id { id: String },
    #[error("template `{id}`: locale `{locale}` must be `xx` or `xx-XX` (ISO 639-1, ISO 3166-1)")]
    Locale { id: String, locale: String },
    #[error("template `{id}`: intent `{intent}` is not defined")]
    UnknownIntent { id: String, intent: String },
    #[error("template `{id}`: {error}")]
    Text {
        id: String,
        error: TemplateTextError,
    },
    #[error("template `{id}`: {count} examples; at most {MAX_EXAMPLES}")]
    Examples { id: String, count: usize },
    #[error("template `{id}`: example `{example}`: {error}")]
    Example {
        id: String,
        example: String,
        error: SyntaxError,
    },
    #[error("template `{id}`: example `{example}` repeats another example (after normalization)")]
    RepeatedExample { id: String, example: String },
}

/// Why a template's text does not fit its intent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TemplateTextError {
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
    #[error("text needs at least one word besides its slots")]
    NoWords,
    #[error("slot `{slot}` appears twice")]
    RepeatedSlot { slot: String },
    #[error("slot `{slot}` is not a slot of intent `{intent}` (its slots: {})", describe_slots(.slots))]
    UnknownSlot {
        slot: String,
        intent: String,
        slots: Vec<SlotDecl>,
    },
    #[error("slot `{slot}` has type `{declared}` in intent `{intent}`, not `{used}`")]
    SlotType {
        slot: String,
        declared: String,
        intent: String,
        used: String,
    },
    #[error("slot `{{{}:{}}}` of intent `{intent}` is missing", .slot.name, .slot.kind)]
    MissingSlot { slot: SlotDecl, intent: String },
}

/// Validated content (templates as configured, before applied changes).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Content {
    /// By ref.
    pub entities: BTreeMap<String, Entity>,
    /// By intent id.
    pub intents: BTreeMap<String, Intent>,
    /// By template id.
    pub templates: BTreeMap<String, Template>,
}

/// The slots of `pieces`, in order.
pub(crate) fn slots(pieces: &[Piece]) -> Vec<SlotDecl> {
    pieces
        .iter()
        .filter_map(|p| match p {
            Piece::Slot { name, kind } => Some(SlotDecl {
                name: name.clone(),
                kind: kind.clone(),
            }),
            Piece::Text(_) => None,
        })
        .collect()
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, LoadError> {
    let meta = std::fs::metadata(path).map_err(|e| LoadError::new(path, format!("{e}")))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(LoadError::new(
            path,
            format!(
                "{} bytes; content files are at most {MAX_FILE_BYTES}",
                meta.len()
            ),
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::new(path, format!("{e}")))?;
    serde_json::from_str(&text).map_err(|e| LoadError::new(path, format!("{e}")))
}

/// The template files named by `paths`: files as given, directories as their `*.json` files
/// in name order.
pub(crate) fn template_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|e| LoadError::new(path, format!("{e}")))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
                .collect();
            if found.is_empty() {
                return Err(LoadError::new(path, "the directory holds no *.json file"));
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

impl Content {
    /// Reads and validates the files `[nlu]` names.
    pub(crate) fn load(
        entities: &Path,
        intents: &Path,
        templates: &[PathBuf],
    ) -> Result<Content, LoadError> {
        let e: EntitiesFile = read_json(entities)?;
        let i: IntentsFile = read_json(intents)?;
        let mut all = Vec::new();
        for file in template_files(templates)? {
            let t: TemplatesFile = read_json(&file)?;
            all.extend(t.templates.into_iter().map(|t| (file.clone(), t)));
        }
        let entities_map = Self::check_entities(entities, e.entities)?;
        let kinds: BTreeSet<String> = entities_map.values().map(|e| e.kind().to_owned()).collect();
        let intents_map = Self::check_intents(intents, i.intents, &kinds)?;
        let mut content = Content {
            entities: entities_map,
            intents: intents_map,
            templates: BTreeMap::new(),
        };
        if all.len() > MAX_TEMPLATES {
            return Err(LoadError::new(
                templates.first().map_or(Path::new("templates"), |p| p),
                format!(
                    "{} templates; at most {MAX_TEMPLATES} are served",
                    all.len()
                ),
            ));
        }
        for (file, template) in all {
            content
                .check_template(&template)
                .map_err(|m| LoadError::new(&file, m.to_string()))?;
            if content.templates.contains_key(&template.template_id) {
                return Err(LoadError::new(
                    &file,
                    format!("template `{}` is defined twice", template.template_id),
                ));
            }
            content
                .templates
                .insert(template.template_id.clone(), template);
        }
        if content.templates.is_empty() {
            return Err(LoadError::new(
                templates.first().map_or(Path::new("templates"), |p| p),
                "no templates",
            ));
        }
        let registry = json_len(&content.entities) + json_len(&content.intents);
        if registry > MAX_REGISTRY_BYTES {
            return Err(LoadError::new(
                entities,
                format!(
                    "entities and intents take {registry} bytes as JSON; at most {MAX_REGISTRY_BYTES}"
                ),
            ));
        }
        let total = content.templates_bytes(None);
        if total > MAX_TEMPLATES_BYTES {
            return Err(LoadError::new(
                templates.first().map_or(Path::new("templates"), |p| p),
                format!("templates take {total} bytes as JSON; at most {MAX_TEMPLATES_BYTES}"),
            ));
        }
        Ok(content)
    }

    fn check_entities(
        path: &Path,
        list: Vec<Entity>,
    ) -> Result<BTreeMap<String, Entity>, LoadError> {
        if list.len() > MAX_ENTITIES {
            return Err(LoadError::new(
                path,
                format!("{} entities; at most {MAX_ENTITIES}", list.len()),
            ));
        }
        let mut map = BTreeMap::new();
        for entity in list {
            let r = entity.reference.clone();
            let bad = |m: String| LoadError::new(path, format!("entity `{r}`: {m}"));
            if !valid_ref(&r) {
                return Err(bad(
                    "ref must be `<type>:<id>` ([a-z][a-z0-9_]{0,31}:[a-z0-9][a-z0-9_.-]{0,63})"
                        .into(),
                ));
            }
            if entity.labels.is_empty() {
                return Err(bad("needs a label in at least one locale".into()));
            }
            for (locale, label) in &entity.labels {
                check_alias(locale, label).map_err(|m| bad(format!("label: {m}")))?;
            }
            for (locale, aliases) in &entity.aliases {
                if aliases.len() > MAX_ALIASES {
                    return Err(bad(format!(
                        "{} aliases in `{locale}`; at most {MAX_ALIASES}",
                        aliases.len()
                    )));
                }
                for alias in aliases {
                    check_alias(locale, alias).map_err(|m| bad(format!("alias: {m}")))?;
                }
            }
            if map.insert(r.clone(), entity).is_some() {
                return Err(LoadError::new(
                    path,
                    format!("entity `{r}` is defined twice"),
                ));
            }
        }
        Ok(map)
    }

    fn check_intents(
        path: &Path,
        list: Vec<Intent>,
        kinds: &BTreeSet<String>,
    ) -> Result<BTreeMap<String, Intent>, LoadError> {
        if list.len() > MAX_INTENTS {
            return Err(LoadError::new(
                path,
                format!("{} intents; at most {MAX_INTENTS}", list.len()),
            ));
        }
        let mut map = BTreeMap::new();
        for intent in list {
            let id = intent.intent.clone();
            let bad = |m: String| LoadError::new(path, format!("intent `{id}`: {m}"));
            if !valid_id(&id) {
                return Err(bad("id must match [a-z0-9][a-z0-9_.-]{0,63}".into()));
            }
            for (field, value) in [
                ("skill", &intent.skill),
                ("tool", &intent.tool),
                ("action", &intent.action),
            ] {
                if !valid_dispatch_name(value) {
                    return Err(bad(format!(
                        "{field} `{value}` must match [A-Za-z0-9][A-Za-z0-9_.:-]{{0,127}}"
                    )));
                }
            }
            if intent.description.chars().count() > 500 {
                return Err(bad("description has more than 500 characters".into()));
            }
            if intent.slots.len() > MAX_SLOTS {
                return Err(bad(format!("more than {MAX_SLOTS} slots")));
            }
            let mut names = BTreeSet::new();
            for slot in &intent.slots {
                if !valid_slot_name(&slot.name) {
                    return Err(bad(format!(
                        "slot name `{}` must match [a-z][a-z0-9_]{{0,31}}",
                        slot.name
                    )));
                }
                if !names.insert(slot.name.as_str()) {
                    return Err(bad(format!("slot `{}` is declared twice", slot.name)));
                }
                if !kinds.contains(&slot.kind) {
                    return Err(bad(format!(
                        "slot `{}` has type `{}`, which no entity has (types: {})",
                        slot.name,
                        slot.kind,
                        kinds.iter().cloned().collect::<Vec<_>>().join(", ")
                    )));
                }
                if intent.arguments.contains_key(&slot.name) {
                    return Err(bad(format!(
                        "argument `{}` has the name of a slot",
                        slot.name
                    )));
                }
            }
            if map.insert(id.clone(), intent).is_some() {
                return Err(LoadError::new(
                    path,
                    format!("intent `{id}` is defined twice"),
                ));
            }
        }
        Ok(map)
    }

    /// Checks one template against the registry and intents (not its uniqueness).
    pub(crate) fn check_template(&self, t: &Template) -> Result<(), TemplateError> {
        let id = || t.template_id.clone();
        if !valid_id(&t.template_id) {
            return Err(TemplateError::Id { id: id() });
        }
        if !valid_locale(&t.locale) {
            let locale = t.locale.clone();
            return Err(TemplateError::Locale { id: id(), locale });
        }
        let Some(intent) = self.intents.get(&t.intent) else {
            let intent = t.intent.clone();
            return Err(TemplateError::UnknownIntent { id: id(), intent });
        };
        self.check_text(&t.text, &t.locale, intent)
            .map_err(|error| TemplateError::Text { id: id(), error })?;
        check_examples(t)
    }

    /// Checks template text: syntax, slots equal to the intent's, at least one word.
    pub(crate) fn check_text(
        &self,
        text: &str,
        locale: &str,
        intent: &Intent,
    ) -> Result<(), TemplateTextError> {
        let pieces = parse_text(text)?;
        let words = pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Text(t) => Some(normalize::normalize(t, locale).len()),
                Piece::Slot { .. } => None,
            })
            .sum::<usize>();
        if words == 0 {
            return Err(TemplateTextError::NoWords);
        }
        check_slots(&slots(&pieces), intent)
    }

    /// Bytes of all templates as JSON, with `replaced` instead of the template of its id.
    pub(crate) fn templates_bytes(&self, replaced: Option<&Template>) -> usize {
        self.templates
            .values()
            .map(|t| match replaced {
                Some(r) if r.template_id == t.template_id => json_len(r),
                _ => json_len(t),
            })
            .sum()
    }

    /// Every locale used by templates, labels or aliases.
    pub(crate) fn locales(&self) -> BTreeSet<String> {
        let mut set: BTreeSet<String> = self.templates.values().map(|t| t.locale.clone()).collect();
        for e in self.entities.values() {
            set.extend(e.labels.keys().cloned());
            set.extend(e.aliases.keys().cloned());
        }
        set
    }
}

/// Checks a template's examples: at most [`MAX_EXAMPLES`], each a valid form, none repeating
/// another after normalization.
fn check_examples(t: &Template) -> Result<(), TemplateError> {
    let id = || t.template_id.clone();
    if t.examples.len() > MAX_EXAMPLES {
        let count = t.examples.len();
        return Err(TemplateError::Examples { id: id(), count });
    }
    let mut seen = BTreeSet::new();
    for example in &t.examples {
        if let Err(error) = check_form(&t.locale, example) {
            let example = example.clone();
            return Err(TemplateError::Example {
                id: id(),
                example,
                error,
            });
        }
        if !seen.insert(normalize::key(example, &t.locale)) {
            let example = example.clone();
            return Err(TemplateError::RepeatedExample { id: id(), example });
        }
    }
    Ok(())
}

/// Checks the slots `used` by a template's text against `intent`'s: each once, of the
/// intent's type, none missing.
fn check_slots(used: &[SlotDecl], intent: &Intent) -> Result<(), TemplateTextError> {
    let mut names = BTreeSet::new();
    for slot in used {
        if !names.insert(slot.name.as_str()) {
            let slot = slot.name.clone();
            return Err(TemplateTextError::RepeatedSlot { slot });
        }
        match intent.slots.iter().find(|s| s.name == slot.name) {
            None => {
                return Err(TemplateTextError::UnknownSlot {
                    slot: slot.name.clone(),
                    intent: intent.intent.clone(),
                    slots: intent.slots.clone(),
                });
            }
            Some(decl) if decl.kind != slot.kind => {
                return Err(TemplateTextError::SlotType {
                    slot: slot.name.clone(),
                    declared: decl.kind.clone(),
                    intent: intent.intent.clone(),
                    used: slot.kind.clone(),
                });
            }
            Some(_) => {}
        }
    }
    match intent
        .slots
        .iter()
        .find(|s| !names.contains(s.name.as_str()))
    {
        Some(missing) => Err(TemplateTextError::MissingSlot {
            slot: missing.clone(),
            intent: intent.intent.clone(),
        }),
        None => Ok(()),
    }
}

fn describe_slots(slots: &[SlotDecl]) -> String {
    if slots.is_empty() {
        return "none".into();
    }
    slots
        .iter()
        .map(|s| format!("{{{}:{}}}", s.name, s.kind))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
