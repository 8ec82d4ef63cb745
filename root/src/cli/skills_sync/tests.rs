//! Client-side catalog validation and installation, without a root.

use std::collections::BTreeMap;

use super::*;
use proptest::prelude::*;
use serde_json::{Value, json};

const SCHEME: &str = "mcp-root";

fn meta(path: &str, bytes: &[u8], mime: &str) -> Value {
    json!({ rules::META_KEY: {
        "owner_application": rules::OWNER_APPLICATION,
        "manifest_version": 1,
        "manifest_sha256": "ab",
        "path": path,
        "content_sha256": rules::sha256_hex(bytes),
        "mime_type": mime,
        "size": bytes.len(),
    }})
}

/// A one-skill catalog whose skill has URI identity `kebab`, listed name `name` and bundle
/// path `path`, run through the whole client-side validation.
fn check(
    kebab: &str,
    name: &str,
    path: &str,
    text: &str,
) -> Result<ValidCatalog, SkillCatalogError> {
    let uri = rules::skill_uri(SCHEME, kebab);
    let ontology = serde_json::to_vec(&json!({
        "skill_resources": [{ "name": name, "uri": uri }],
    }))
    .unwrap_or_default();
    let o_meta = meta(rules::ONTOLOGY_PATH, &ontology, rules::ONTOLOGY_MIME);
    let o_list = Listed {
        uri: rules::ontology_uri(SCHEME),
        name: "ontology".into(),
        mime_type: Some(rules::ONTOLOGY_MIME.into()),
        size: Some(ontology.len() as u64),
        meta: Some(o_meta.clone()),
    };
    let o_read = Read {
        uri: o_list.uri.clone(),
        mime_type: o_list.mime_type.clone(),
        bytes: ontology,
        meta: Some(o_meta),
    };
    let s_meta = meta(path, text.as_bytes(), rules::SKILL_MIME);
    let listed = Listed {
        uri: uri.clone(),
        name: name.to_string(),
        mime_type: Some(rules::SKILL_MIME.into()),
        size: Some(text.len() as u64),
        meta: Some(s_meta.clone()),
    };
    let read = Read {
        uri: uri.clone(),
        mime_type: Some(rules::SKILL_MIME.into()),
        bytes: text.as_bytes().to_vec(),
        meta: Some(s_meta),
    };
    let (ontology, skills) = select(SCHEME, vec![o_list, listed])?;
    let declared = declared(SCHEME, &ontology, &o_read)?;
    match_declared(&declared, &skills)?;
    validate(
        SCHEME,
        (&ontology, &o_read),
        &declared,
        &[(skills[&uri].clone(), read)],
    )
}

fn front(kebab: &str) -> String {
    format!("---\nname: {kebab}\ndescription: d\n---\nbody\n")
}

#[test]
fn a_valid_catalog_passes() {
    let c = check("a-b", "a_b", "skills/x/a_b/SKILL.md", &front("a-b")).unwrap();
    assert_eq!(c.skills[0].path, "x/a_b/SKILL.md");
}

/// What an accepted install path must be: relative, `/`-separated normal components.
fn safe(path: &str) -> bool {
    !path.starts_with('/')
        && !path.contains('\\')
        && std::path::Path::new(path)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
        && !path
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..")
}

/// `PROPTEST_CASES` when set (CI bounds every property test with it), else `default`.
fn cases(default: u32) -> ProptestConfig {
    let n = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig::with_cases(n)
}

/// Resource metadata: well-formed for `bytes` at `path` (so validation gets past the
/// hashes), or any JSON under the key, or none at all.
fn meta_for(bytes: &[u8], path: &str, mime: &str, shape: u8, junk: &Value) -> Option<Value> {
    match shape % 4 {
        0 | 1 => Some(meta(path, bytes, mime)),
        2 => Some(json!({ rules::META_KEY: junk })),
        _ => None,
    }
}

/// A listing with `n` resources of arbitrary URIs, names, MIME types, metadata and bytes
/// (the ontology's bytes are arbitrary JSON or arbitrary bytes), run through the whole
/// client-side validation in the ADR's order, as `discover` runs it.
#[allow(clippy::type_complexity)]
fn run_listing(
    resources: &[(String, String, String, Vec<u8>, u8)],
    ontology: &Value,
    ontology_raw: Option<&[u8]>,
    junk: &Value,
) -> Result<ValidCatalog, SkillCatalogError> {
    let o_uri = rules::ontology_uri(SCHEME);
    let mut listed = Vec::new();
    let mut reads = BTreeMap::new();
    for (uri, name, mime, bytes, shape) in resources {
        let (uri, bytes) = if uri == "ontology" {
            let b = ontology_raw
                .map(<[u8]>::to_vec)
                .unwrap_or_else(|| serde_json::to_vec(ontology).unwrap_or_default());
            (o_uri.clone(), b)
        } else {
            (uri.clone(), bytes.clone())
        };
        let path = format!("skills/{name}/SKILL.md");
        let m = meta_for(&bytes, &path, mime, *shape, junk);
        listed.push(Listed {
            uri: uri.clone(),
            name: name.clone(),
            mime_type: Some(mime.clone()),
            size: (shape % 2 == 0).then_some(bytes.len() as u64),
            meta: m.clone(),
        });
        reads.insert(
            uri.clone(),
            Read {
                uri,
                mime_type: Some(mime.clone()),
                bytes,
                meta: m,
            },
        );
    }
    let (ontology, skills) = select(SCHEME, listed)?;
    let o_read = reads
        .get(&ontology.uri)
        .cloned()
        .ok_or_else(|| SkillCatalogError::Missing(ontology.uri.clone()))?;
    let declared = declared(SCHEME, &ontology, &o_read)?;
    match_declared(&declared, &skills)?;
    let mut pairs = Vec::new();
    for (_, uri) in &declared {
        let listed = skills
            .get(uri)
            .cloned()
            .ok_or_else(|| SkillCatalogError::Missing(uri.clone()))?;
        let read = reads
            .get(uri)
            .cloned()
            .ok_or_else(|| SkillCatalogError::Missing(uri.clone()))?;
        pairs.push((listed, read));
    }
    validate(SCHEME, (&ontology, &o_read), &declared, &pairs)
}

/// Arbitrary JSON, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// One listed resource: URI (the ontology, a skill URI, or anything), name, MIME type,
/// bytes (a plausible SKILL.md or anything) and a shape selector for its metadata.
fn resource() -> impl Strategy<Value = (String, String, String, Vec<u8>, u8)> {
    let kebab = "[a-z][a-z0-9-]{0,8}";
    (
        prop_oneof![
            Just("ontology".to_string()),
            kebab.prop_map(|k| rules::skill_uri(SCHEME, &k)),
            ".{0,24}",
        ],
        "[a-z][a-z0-9_]{0,8}",
        prop_oneof![
            Just(rules::SKILL_MIME.to_string()),
            Just(rules::ONTOLOGY_MIME.to_string()),
            "[a-z/]{0,12}",
        ],
        prop_oneof![
            kebab.prop_map(|k| front(&k).into_bytes()),
            prop::collection::vec(any::<u8>(), 0..64),
        ],
        any::<u8>(),
    )
}

proptest! {
    #![proptest_config(cases(512))]

    #[test]
    fn arbitrary_listings_never_panic_and_what_passes_is_safe(
        resources in prop::collection::vec(resource(), 0..5),
        skill_refs in prop::collection::vec(("[a-z][a-z0-9_-]{0,8}", "[a-z][a-z0-9-]{0,8}"), 0..4),
        extra in json_value(),
        raw in proptest::option::of(prop::collection::vec(any::<u8>(), 0..64)),
        junk in json_value(),
    ) {
        // The ontology declares some of the skill URIs the listing may hold.
        let ontology = json!({
            "skill_resources": skill_refs.iter().map(|(name, kebab)| json!({
                "name": name, "uri": rules::skill_uri(SCHEME, kebab)
            })).collect::<Vec<_>>(),
            "extra": extra,
        });
        if let Ok(c) = run_listing(&resources, &ontology, raw.as_deref(), &junk) {
            prop_assert!(c.skills.iter().all(|s| safe(&s.path)), "{c:?}");
            for s in &c.skills {
                let kebab = s.uri.strip_prefix(&rules::skill_prefix(SCHEME)).unwrap_or_default();
                prop_assert_eq!(&kebab.replace('-', "_"), &s.name);
                prop_assert_eq!(rules::sha256_hex(s.text.as_bytes()), s.content_sha256.clone());
            }
        }
    }

    #[test]
    fn paths_never_escape(path in "(/|\\.\\./|\\./|skills/|[a-z_]{1,6}/|\\\\|:|//){0,6}(SKILL\\.md|SKILL\\.markdown|x)?") {
        if let Ok(install) = rules::check_skill_path(&path) {
            prop_assert!(safe(&install), "accepted {path} -> {install}");
        }
        let text = front("a-b");
        if let Ok(c) = check("a-b", "a_b", &path, &text) {
            prop_assert!(c.skills.iter().all(|s| safe(&s.path)), "accepted {path}");
        }
    }

    #[test]
    fn arbitrary_strings_never_panic(path in any::<String>(), name in any::<String>(), kebab in any::<String>(), text in any::<String>()) {
        let _ = rules::check_bundle_path(&path);
        let _ = rules::parse_front_matter(&text);
        if let Ok(c) = check(&kebab, &name, &path, &text) {
            prop_assert!(c.skills.iter().all(|s| safe(&s.path)));
            prop_assert!(rules::is_kebab(&kebab) && rules::is_snake(&name));
        }
    }

    #[test]
    fn names_follow_the_uri(kebab in "[a-z][a-z0-9-]{0,20}", name in "[a-z][a-z0-9_]{0,20}") {
        let path = format!("skills/{name}/SKILL.md");
        if check(&kebab, &name, &path, &front(&kebab)).is_ok() {
            prop_assert_eq!(kebab.replace('-', "_"), name);
        }
    }
}
