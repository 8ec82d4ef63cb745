//! Unit tests of the NLU content store, and the example content other tests load.

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
    let text = std::fs::read_to_string(repo().join("config/hub.example.toml")).expect("example");
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
    let file: crate::config::HubFile =
        toml::from_str("[nlu]\nentities = \"e.json\"\nintents = \"i.json\"\ntemplates = \"t\"\n")
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
