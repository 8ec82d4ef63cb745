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

pub mod change;
pub mod content;
pub mod matcher;
pub mod normalize;

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
pub const NLU_DIR: &str = "nlu";
/// The overlay file in [`NLU_DIR`].
pub const OVERLAY_FILE: &str = "applied.json";
/// Applied changes kept in a template's history (oldest forgotten first).
pub const KEEP_HISTORY: usize = 50;

/// Where a template's current version comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
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
pub struct Snapshot {
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
    pub fn content_fingerprint(&self) -> String {
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
    pub fn template(&self, id: &str) -> Result<&Template, ToolError> {
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
    pub fn preview(&self, req: &ChangeRequest) -> Result<Value, ToolError> {
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
pub struct Nlu {
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
    pub fn load(config: &HubConfig) -> Result<Nlu, LoadError> {
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

    /// Whether `[nlu]` is configured.
    pub fn configured(&self) -> bool {
        self.store.is_some()
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
    pub fn snapshot(&self) -> Result<Arc<Snapshot>, ToolError> {
        Ok(self.store()?.current.load_full())
    }

    /// Applies `req` if `base_fingerprint` is still current: persists it, then makes it
    /// visible. Answers `{template_id, previous_fingerprint, fingerprint, diff}`.
    pub fn apply(&self, req: &ChangeRequest, key: Option<&str>) -> Result<Value, ToolError> {
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
pub(crate) mod tests {
    use super::*;
    use crate::config::NluConfig;

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    /// `[nlu]` pointing at the shipped example content (config/nlu/).
    pub(crate) fn example_nlu_config() -> NluConfig {
        let dir = repo()
            .join("config/nlu")
            .canonicalize()
            .expect("config/nlu exists");
        NluConfig {
            entities: dir.join("entities.json"),
            intents: dir.join("intents.json"),
            templates: vec![dir.join("templates")],
        }
    }

    /// The shipped example content.
    pub(crate) fn example_content() -> Content {
        let c = example_nlu_config();
        Content::load(&c.entities, &c.intents, &c.templates).expect("config/nlu loads")
    }

    /// A hub configuration serving the example content, with `state` as state dir.
    pub(crate) fn config_with_nlu(state: &Path) -> HubConfig {
        let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", state);
        let nlu = example_nlu_config();
        config.allowed_roots = vec![nlu.entities.parent().expect("dir").to_owned()];
        config.nlu = Some(nlu);
        config
    }

    fn change(template_id: &str, base: &str, extra: Value) -> ChangeRequest {
        let mut args = json!({"template_id": template_id, "base_fingerprint": base});
        if let (Some(a), Value::Object(e)) = (args.as_object_mut(), extra) {
            a.extend(e);
        }
        ChangeRequest::parse(&args).expect("valid change")
    }

    #[test]
    fn the_example_content_loads_in_both_locales() {
        let content = example_content();
        let locales: Vec<String> = content.locales().into_iter().collect();
        assert_eq!(locales, ["en", "ru"]);
        for locale in ["en", "ru"] {
            assert!(
                content
                    .templates
                    .values()
                    .filter(|t| t.locale == locale)
                    .count()
                    >= 4,
                "{locale}"
            );
        }
        assert!(content.entities.len() >= 5 && content.intents.len() >= 4);
        let fingerprints: std::collections::BTreeSet<String> = content
            .templates
            .values()
            .map(Template::fingerprint)
            .collect();
        assert_eq!(fingerprints.len(), content.templates.len(), "distinct");
    }

    #[test]
    fn applied_changes_persist_across_a_reload_and_stale_bases_conflict() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = config_with_nlu(dir.path());
        let nlu = Nlu::load(&config).expect("load");
        let snap = nlu.snapshot().expect("configured");
        let id = "en.device.turn_on";
        let base = snap.template(id).expect("template").fingerprint();
        assert_eq!(snap.origins[id], Origin::Config);

        // Preview changes nothing.
        let req = change(id, &base, json!({"add_examples": ["power up the telly"]}));
        let preview = snap.preview(&req).expect("preview");
        assert_eq!(preview["base_fingerprint"], base);
        assert_ne!(preview["new_fingerprint"], base);
        assert_eq!(
            nlu.snapshot()
                .expect("s")
                .template(id)
                .expect("t")
                .fingerprint(),
            base
        );
        assert!(!dir.path().join(NLU_DIR).join(OVERLAY_FILE).exists());

        // Apply: the new fingerprint is the preview's, visible at once.
        let applied = nlu.apply(&req, Some("k1")).expect("apply");
        assert_eq!(applied["previous_fingerprint"], base);
        assert_eq!(applied["fingerprint"], preview["new_fingerprint"]);
        assert_eq!(applied["diff"], preview["diff"]);
        let now = nlu.snapshot().expect("s");
        assert_eq!(now.origins[id], Origin::Applied);
        assert_eq!(
            now.template(id).expect("t").fingerprint(),
            applied["fingerprint"].as_str().expect("fp")
        );
        let check = now
            .index
            .check(&now.content, "power up the kettle", Some("en"))
            .expect("check");
        assert_eq!(check["ranking"][0]["template_id"], id, "{check}");

        // The old base now conflicts, naming the current fingerprint.
        for err in [
            nlu.apply(&req, None).expect_err("stale"),
            now.preview(&req).expect_err("stale"),
        ] {
            assert_eq!(err.code, ErrorCode::Conflict);
            assert!(
                err.message
                    .contains(applied["fingerprint"].as_str().expect("fp")),
                "{err}"
            );
            assert_eq!(
                err.details
                    .as_ref()
                    .map(|d| d["current_fingerprint"].clone()),
                Some(applied["fingerprint"].clone())
            );
        }
        let err = now
            .preview(&change(
                "en.nope",
                &base,
                json!({"text": "x {device:device}"}),
            ))
            .expect_err("unknown");
        assert_eq!(err.code, ErrorCode::NotFound);

        // A reload (a hub restart) serves the applied version.
        let again = Nlu::load(&config).expect("reload");
        let snap = again.snapshot().expect("s");
        assert_eq!(snap.origins[id], Origin::Applied);
        assert_eq!(
            snap.template(id).expect("t").fingerprint(),
            applied["fingerprint"].as_str().expect("fp")
        );
        assert_eq!(snap.content_fingerprint(), now.content_fingerprint());
        // A second change on top, history kept in the overlay.
        let base2 = applied["fingerprint"].as_str().expect("fp").to_owned();
        again
            .apply(
                &change(
                    id,
                    &base2,
                    json!({"text": "please turn on the {device:device}"}),
                ),
                None,
            )
            .expect("second change");
        let overlay = read_overlay(&dir.path().join(NLU_DIR).join(OVERLAY_FILE)).expect("overlay");
        let entry = &overlay.templates[id];
        assert_eq!(entry.source_fingerprint, base);
        assert_eq!(entry.history.len(), 2);
        assert_eq!(entry.history[0].idempotency_key.as_deref(), Some("k1"));
        assert_eq!(entry.history[1].previous_fingerprint, base2);

        // A damaged overlay stops loading, naming the file.
        std::fs::write(dir.path().join(NLU_DIR).join(OVERLAY_FILE), "{").expect("write");
        let err = Nlu::load(&config).expect_err("damaged");
        assert!(err.to_string().contains(OVERLAY_FILE), "{err}");
    }

    /// A phrase nothing matched ranks once an example with another entity of the same type
    /// is applied (the example's entity became a slot).
    #[test]
    fn an_applied_example_changes_the_ranking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let nlu = Nlu::load(&config_with_nlu(dir.path())).expect("load");
        let check = |nlu: &Nlu| {
            let s = nlu.snapshot().expect("s");
            s.index
                .check(&s.content, "Вруби телевизор", None)
                .expect("check")
        };
        let before = check(&nlu);
        assert_eq!(before["ranking"], json!([]), "{before}");
        let id = "ru.device.turn_on";
        let base = nlu
            .snapshot()
            .expect("s")
            .template(id)
            .expect("t")
            .fingerprint();
        nlu.apply(
            &change(id, &base, json!({"add_examples": ["вруби телик"]})),
            None,
        )
        .expect("apply");
        let after = check(&nlu);
        assert_eq!(after["ranking"][0]["template_id"], id, "{after}");
        assert_eq!(after["ranking"][0]["score"], 1.0);
        assert_eq!(
            after["entities"][0]["canonical_ref"],
            "device:tv.living_room"
        );
    }

    #[test]
    fn concurrent_changes_on_one_base_apply_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let nlu = Arc::new(Nlu::load(&config_with_nlu(dir.path())).expect("load"));
        let id = "ru.device.turn_on";
        let base = nlu
            .snapshot()
            .expect("s")
            .template(id)
            .expect("t")
            .fingerprint();
        let results: Vec<Result<Value, ToolError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    let nlu = nlu.clone();
                    let base = base.clone();
                    s.spawn(move || {
                        nlu.apply(
                            &change(id, &base, json!({"add_examples": [format!("включи пожалуйста {} телевизор", ["быстро", "сейчас", "срочно", "тихо"][i])]})),
                            None,
                        )
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
        for r in results.iter().filter_map(|r| r.as_ref().err()) {
            assert_eq!(r.code, ErrorCode::Conflict);
        }
    }

    #[test]
    fn bad_content_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let nlu = example_nlu_config();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).expect("write");
            p
        };
        let entities = std::fs::read_to_string(&nlu.entities).expect("entities");
        let intents = std::fs::read_to_string(&nlu.intents).expect("intents");
        let templates = json!({"templates": [{"template_id": "en.x", "locale": "en", "intent": "device.turn_on", "text": "turn on the {device:device}"}]}).to_string();
        for (e, i, t, expect) in [
            ("{", intents.as_str(), templates.as_str(), "entities.json"),
            (
                r#"{"entities": [{"ref": "Lamp", "labels": {"en": "lamp"}}]}"#,
                &intents,
                &templates,
                "entity `Lamp`: ref must be",
            ),
            (
                r#"{"entities": [{"ref": "device:a", "labels": {}}]}"#,
                &intents,
                &templates,
                "needs a label",
            ),
            (
                r#"{"entities": [{"ref": "device:a", "labels": {"en": "a"}, "color": 1}]}"#,
                &intents,
                &templates,
                "unknown field",
            ),
            (
                &entities,
                r#"{"intents": [{"intent": "x", "skill": "s", "tool": "t", "action": "a", "slots": [{"name": "d", "type": "vehicle"}]}]}"#,
                &templates,
                "which no entity has",
            ),
            (
                &entities,
                &intents,
                r#"{"templates": [{"template_id": "en.x", "locale": "en", "intent": "nope", "text": "x"}]}"#,
                "intent `nope` is not defined",
            ),
            (
                &entities,
                &intents,
                r#"{"templates": [{"template_id": "en.x", "locale": "EN", "intent": "device.turn_on", "text": "x {device:device}"}]}"#,
                "locale `EN`",
            ),
            (
                &entities,
                &intents,
                r#"{"templates": [{"template_id": "en.x", "locale": "en", "intent": "device.turn_on", "text": "turn on the {room:room}"}]}"#,
                "not a slot of intent",
            ),
            (
                &entities,
                &intents,
                r#"{"templates": [{"template_id": "en.x", "locale": "en", "intent": "device.turn_on", "text": "x {device:device}"}, {"template_id": "en.x", "locale": "en", "intent": "device.turn_on", "text": "y {device:device}"}]}"#,
                "defined twice",
            ),
            (
                &entities,
                &intents,
                r#"{"templates": [{"template_id": "en.x", "locale": "en", "intent": "device.turn_on", "text": "x {device:device}", "examples": ["a b", "A, b!"]}]}"#,
                "repeats another example",
            ),
        ] {
            let err = Content::load(
                &write("entities.json", e),
                &write("intents.json", i),
                &[write("t.json", t)],
            )
            .expect_err(expect);
            assert!(err.to_string().contains(expect), "{expect}: {err}");
        }
        Content::load(
            &write("entities.json", &entities),
            &write("intents.json", &intents),
            &[write("t.json", &templates)],
        )
        .expect("valid");
        let empty = dir.path().join("empty");
        std::fs::create_dir_all(&empty).expect("dir");
        let err = Content::load(
            &write("entities.json", &entities),
            &write("intents.json", &intents),
            &[empty],
        )
        .expect_err("no files");
        assert!(err.to_string().contains("no *.json file"), "{err}");
    }

    /// The commented `[nlu]` example of config/hub.example.toml parses and names the files of
    /// the shipped example set (config/nlu/).
    #[test]
    fn the_commented_nlu_example_parses() {
        let text =
            std::fs::read_to_string(repo().join("config/hub.example.toml")).expect("example");
        let start = text.find("# [nlu]").expect("an [nlu] example");
        let block: String = text[start..]
            .lines()
            .map_while(|l| l.strip_prefix("# "))
            .map(|l| format!("{l}\n"))
            .collect();
        let file: crate::config::HubFile = toml::from_str(&block).expect("the example parses");
        let nlu = file.nlu.expect("nlu");
        let shipped = example_nlu_config();
        let name = |p: &Path| p.file_name().map(|n| n.to_owned());
        assert_eq!(name(&nlu.entities), name(&shipped.entities));
        assert_eq!(name(&nlu.intents), name(&shipped.intents));
        assert_eq!(
            nlu.templates.iter().map(|p| name(p)).collect::<Vec<_>>(),
            shipped
                .templates
                .iter()
                .map(|p| name(p))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn nlu_paths_are_confined() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = config_with_nlu(dir.path());
        config.validate().expect("under a declared root");
        config.allowed_roots.clear();
        let err = config.validate().expect_err("outside");
        assert!(
            err.to_string().contains("nlu: entities") && err.to_string().contains("outside"),
            "{err}"
        );
        config.nlu = Some(NluConfig {
            entities: "nlu/entities.json".into(),
            intents: "nlu/intents.json".into(),
            templates: vec![],
        });
        let err = config.validate().expect_err("no templates");
        assert!(err.to_string().contains("templates names no file"), "{err}");
        config.nlu = Some(NluConfig {
            entities: "nlu/entities.json".into(),
            intents: "nlu/../../intents.json".into(),
            templates: vec!["nlu/t".into()],
        });
        let err = config.validate().expect_err("..");
        assert!(err.to_string().contains("must not contain `..`"), "{err}");
        config.nlu = Some(NluConfig {
            entities: "content/entities.json".into(),
            intents: "content/intents.json".into(),
            templates: vec!["content/templates".into()],
        });
        config
            .validate()
            .expect("relative paths are under the state dir");
        assert_eq!(
            config.nlu_paths().expect("nlu").templates,
            [dir.path().join("content/templates")]
        );
        let file: crate::config::HubFile = toml::from_str(
            "[nlu]\nentities = \"e.json\"\nintents = \"i.json\"\ntemplates = \"t\"\n",
        )
        .expect("one path");
        assert_eq!(file.nlu.expect("nlu").templates, [PathBuf::from("t")]);
        let err = toml::from_str::<crate::config::HubFile>(
            "[nlu]\nentities = \"e.json\"\nintents = \"i.json\"\ntemplates = 3\n",
        )
        .expect_err("bad");
        assert!(
            err.to_string().contains("a path or a list of paths"),
            "{err}"
        );
    }
}
