//! The hub's NLU content store, served by the `nlu_authoring.*` tools of the
//! NLUAuthoringPlane (see [`crate::skill::adapters::nlu_authoring`]).
//!
//! # Layout
//! - [`content`]: the files `[nlu]` declares (entities, intents, templates), validated; the
//!   template text syntax; template fingerprints.
//! - [`normalize`]: case, punctuation and locale folding; the small Russian and English
//!   stemmers.
//! - [`matcher`]: the deterministic matcher (trace, ranking, entities, action preview).
//! - [`change`]: a proposed template change and its preview diff.
//!
//! # Persistence
//! The configured files are never written. A change applied through `apply_change` is kept in
//! `<state_dir>/nlu/applied.json` (an overlay: per template, its current version, the
//! fingerprint of the configured version it was first applied on, and the history of applied
//! changes), written atomically before the change is visible. At load the overlay replaces the
//! configured version of each template it names, so applied changes survive a hub restart.
//! When the configured version changed since (another `source_fingerprint`) the applied
//! version still wins and a warning is logged; an overlay entry for a template no longer
//! configured is ignored (and logged). A damaged overlay, or an applied template that no
//! longer fits the configured entities and intents, stops start-up naming the file.
//!
//! # Guarantees
//! Reads see one consistent content version (an `ArcSwap` snapshot, compiled once per
//! version). Applies are serialized: the fingerprint check, the overlay write and the swap
//! happen under one lock, so of two changes on the same base fingerprint one applies and the
//! other gets `conflict`.

pub(crate) mod change;
pub(crate) mod content;
pub(crate) mod matcher;
pub(crate) mod normalize;
pub(crate) mod syntax;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use mcp_shared::error::{ErrorCode, ToolError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::config::HubConfig;
use change::ChangeRequest;
use content::{Content, LoadError, Template};
use matcher::Index;

/// Directory under `state_dir` of the NLU overlay.
pub(crate) const NLU_DIR: &str = "nlu";
/// The overlay file in [`NLU_DIR`].
pub(crate) const OVERLAY_FILE: &str = "applied.json";
/// Applied changes kept in a template's history (oldest forgotten first).
pub(crate) const KEEP_HISTORY: usize = 50;

/// Where a template's current version comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Origin {
    /// The configured file.
    Config,
    /// An applied change (the overlay in the state dir).
    Applied,
}

/// One applied change, as the overlay keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryEntry {
    previous_fingerprint: String,
    fingerprint: String,
    applied_at: String,
    #[serde(default)]
    idempotency_key: Option<String>,
    changes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppliedTemplate {
    template: Template,
    /// Fingerprint of the configured version the first applied change was made on.
    source_fingerprint: String,
    history: Vec<HistoryEntry>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Overlay {
    templates: BTreeMap<String, AppliedTemplate>,
}

/// One content version: what reads use.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub content: Content,
    pub origins: BTreeMap<String, Origin>,
    pub index: Index,
}

impl Snapshot {
    fn new(content: Content, origins: BTreeMap<String, Origin>) -> Snapshot {
        let index = Index::build(&content);
        Snapshot {
            content,
            origins,
            index,
        }
    }

    /// `sha256:` of the canonical JSON of the whole content (entities, intents, templates).
    pub(crate) fn content_fingerprint(&self) -> String {
        let value = json!({
            "entities": self.content.entities.values().map(|e| serde_json::to_value(e).unwrap_or(Value::Null)).collect::<Vec<_>>(),
            "intents": self.content.intents.values().map(|i| serde_json::to_value(i).unwrap_or(Value::Null)).collect::<Vec<_>>(),
            "templates": self.content.templates.values().map(Template::to_json).collect::<Vec<_>>(),
        });
        format!(
            "sha256:{}",
            hex::encode(Sha256::digest(mcp_shared::canonical::to_vec(&value)))
        )
    }

    /// The template `id`, `not_found` naming the known ones otherwise.
    pub(crate) fn template(&self, id: &str) -> Result<&Template, ToolError> {
        self.content.templates.get(id).ok_or_else(|| {
            let known: Vec<&str> = self.content.templates.keys().map(String::as_str).collect();
            ToolError::new(
                ErrorCode::NotFound,
                format!(
                    "no template `{id}` on this hub (templates: {})",
                    known.join(", ")
                ),
            )
        })
    }

    /// The `conflict` error when `base` is not the current fingerprint of `template`.
    fn check_base(&self, template: &Template, base: &str) -> Result<(), ToolError> {
        let current = template.fingerprint();
        if current == base {
            return Ok(());
        }
        Err(ToolError::new(
            ErrorCode::Conflict,
            format!(
                "template `{}` changed: its current fingerprint is {current}, not {base}; list the templates again and redo the change on the current version",
                template.template_id
            ),
        )
        .with_details(json!({"template_id": template.template_id, "current_fingerprint": current})))
    }

    /// The preview of `req` on the current version (changes nothing).
    pub(crate) fn preview(&self, req: &ChangeRequest) -> Result<Value, ToolError> {
        let before = self.template(&req.template_id)?;
        self.check_base(before, &req.base_fingerprint)?;
        let (after, changes) = req.apply_to(before, &self.content)?;
        Ok(change::preview(before, &after, &changes))
    }
}

/// The loaded store.
struct Store {
    overlay_path: PathBuf,
    current: ArcSwap<Snapshot>,
    /// Serializes applies; holds the overlay as on disk.
    overlay: Mutex<Overlay>,
}

/// The NLU content of this hub (in [`crate::context::Stores::nlu`]); empty without `[nlu]`.
pub(crate) struct Nlu {
    store: Option<Store>,
}

impl std::fmt::Debug for Nlu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nlu")
            .field("configured", &self.store.is_some())
            .finish()
    }
}

fn internal(message: String) -> ToolError {
    ToolError::new(ErrorCode::Internal, message)
}

impl Nlu {
    /// Loads the content `[nlu]` declares plus the applied changes in the state dir.
    pub(crate) fn load(config: &HubConfig) -> Result<Nlu, LoadError> {
        let Some(paths) = config.nlu_paths() else {
            return Ok(Nlu { store: None });
        };
        let mut content = Content::load(&paths.entities, &paths.intents, &paths.templates)?;
        let overlay_path = config.state_dir.join(NLU_DIR).join(OVERLAY_FILE);
        let overlay = read_overlay(&overlay_path)?;
        let mut origins: BTreeMap<String, Origin> = content
            .templates
            .keys()
            .map(|k| (k.clone(), Origin::Config))
            .collect();
        for (id, applied) in &overlay.templates {
            let Some(configured) = content.templates.get(id) else {
                tracing::warn!(template_id = %id, path = %overlay_path.display(), "an applied NLU template is no longer configured; ignored");
                continue;
            };
            if configured.fingerprint() != applied.source_fingerprint {
                tracing::warn!(template_id = %id, "the configured NLU template changed since changes were applied to it; the applied version is served");
            }
            if applied.template.template_id != *id {
                return Err(LoadError::new(
                    &overlay_path,
                    format!(
                        "entry `{id}` holds template `{}`",
                        applied.template.template_id
                    ),
                ));
            }
            content.check_template(&applied.template).map_err(|m| {
                LoadError::new(
                    &overlay_path,
                    format!("the applied version no longer fits the configured content: {m}; fix the content or remove the entry"),
                )
            })?;
            content
                .templates
                .insert(id.clone(), applied.template.clone());
            origins.insert(id.clone(), Origin::Applied);
        }
        let n = content.templates.len();
        tracing::info!(
            templates = n,
            entities = content.entities.len(),
            intents = content.intents.len(),
            applied = overlay.templates.len(),
            "NLU content loaded"
        );
        Ok(Nlu {
            store: Some(Store {
                overlay_path,
                current: ArcSwap::from_pointee(Snapshot::new(content, origins)),
                overlay: Mutex::new(overlay),
            }),
        })
    }

    fn store(&self) -> Result<&Store, ToolError> {
        self.store.as_ref().ok_or_else(|| {
            ToolError::new(
                ErrorCode::NotFound,
                "this hub serves no NLU content ([nlu] is not configured)",
            )
        })
    }

    /// The current content version.
    pub(crate) fn snapshot(&self) -> Result<Arc<Snapshot>, ToolError> {
        Ok(self.store()?.current.load_full())
    }

    /// Applies `req` if `base_fingerprint` is still current: persists it, then makes it
    /// visible. Answers `{template_id, previous_fingerprint, fingerprint, diff}`.
    pub(crate) fn apply(&self, req: &ChangeRequest, key: Option<&str>) -> Result<Value, ToolError> {
        let store = self.store()?;
        let mut overlay = store.overlay.lock().unwrap_or_else(PoisonError::into_inner);
        let snapshot = store.current.load_full();
        let before = snapshot.template(&req.template_id)?;
        snapshot.check_base(before, &req.base_fingerprint)?;
        let (after, changes) = req.apply_to(before, &snapshot.content)?;
        let previous = before.fingerprint();
        let fingerprint = after.fingerprint();
        let mut next = overlay.clone();
        let entry = next
            .templates
            .entry(req.template_id.clone())
            .or_insert_with(|| AppliedTemplate {
                template: before.clone(),
                source_fingerprint: previous.clone(),
                history: Vec::new(),
            });
        entry.template = after.clone();
        entry.history.push(HistoryEntry {
            previous_fingerprint: previous.clone(),
            fingerprint: fingerprint.clone(),
            applied_at: mcp_shared::time::format(mcp_shared::time::now()),
            idempotency_key: key.map(str::to_owned),
            changes: changes.clone(),
        });
        let over = entry.history.len().saturating_sub(KEEP_HISTORY);
        entry.history.drain(..over);
        write_overlay(&store.overlay_path, &next)?;
        *overlay = next;
        let mut content = snapshot.content.clone();
        content
            .templates
            .insert(req.template_id.clone(), after.clone());
        let mut origins = snapshot.origins.clone();
        origins.insert(req.template_id.clone(), Origin::Applied);
        store
            .current
            .store(Arc::new(Snapshot::new(content, origins)));
        tracing::info!(template_id = %req.template_id, %previous, %fingerprint, "NLU template change applied");
        Ok(json!({
            "template_id": req.template_id,
            "previous_fingerprint": previous,
            "fingerprint": fingerprint,
            "diff": change::diff(before, &after, &changes),
        }))
    }
}

fn read_overlay(path: &Path) -> Result<Overlay, LoadError> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            LoadError::new(path, format!("cannot parse the applied NLU changes: {e}"))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Overlay::default()),
        Err(e) => Err(LoadError::new(path, format!("{e}"))),
    }
}

fn write_overlay(path: &Path, overlay: &Overlay) -> Result<(), ToolError> {
    let bytes = serde_json::to_vec_pretty(overlay)
        .map_err(|e| internal(format!("cannot encode the applied NLU changes: {e}")))?;
    crate::store::state::write_atomic(path, &bytes).map_err(|e| {
        internal(format!(
            "{}: cannot write the applied NLU changes: {}",
            e.path.display(),
            e.source
        ))
    })
}

#[cfg(test)]
pub(crate) mod tests;
