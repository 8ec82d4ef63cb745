//! Fuzzes both skill catalog validators: the client's (`skills_sync`: select, declared,
//! match, validate, in discovery's order) over a one-skill listing built from the input with
//! correct hashes, so the fuzzer reaches past them; and the publish side's `check_content`
//! over the input as catalog JSON. What passes installs only below the namespace.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_root::cli::skills_sync::catalog::{
    Listed, Read, declared, match_declared, select, validate,
};
use mcp_root::skill_catalog as rules;
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

fn resource(uri: &str, name: &str, path: &str, bytes: &[u8], mime: &str) -> (Listed, Read) {
    let m = meta(path, bytes, mime);
    (
        Listed {
            uri: uri.into(),
            name: name.into(),
            mime_type: Some(mime.into()),
            size: Some(bytes.len() as u64),
            meta: Some(m.clone()),
        },
        Read {
            uri: uri.into(),
            mime_type: Some(mime.into()),
            bytes: bytes.to_vec(),
            meta: Some(m),
        },
    )
}

fn safe(path: &str) -> bool {
    !path.starts_with('/')
        && !path.contains('\\')
        && !path
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..")
}

fuzz_target!(|data: &[u8]| {
    // Fields separated by NUL: ontology bytes, skill text, bundle path, URI identity, name.
    let mut parts = data.split(|b| *b == 0);
    let mut next = || parts.next().unwrap_or_default();
    let (ontology, text, path, kebab, name) = (next(), next(), next(), next(), next());
    let (path, kebab, name) = (
        String::from_utf8_lossy(path),
        String::from_utf8_lossy(kebab),
        String::from_utf8_lossy(name),
    );
    let uri = rules::skill_uri(SCHEME, &kebab);
    let (o_list, o_read) = resource(
        &rules::ontology_uri(SCHEME),
        "ontology",
        rules::ONTOLOGY_PATH,
        ontology,
        rules::ONTOLOGY_MIME,
    );
    let (s_list, s_read) = resource(&uri, &name, &path, text, rules::SKILL_MIME);
    if let Ok((o, skills)) = select(SCHEME, vec![o_list, s_list])
        && let Ok(decl) = declared(SCHEME, &o, &o_read)
        && match_declared(&decl, &skills).is_ok()
    {
        let pairs: Vec<(Listed, Read)> = decl
            .iter()
            .filter_map(|(_, u)| (u == &uri).then(|| (skills[u].clone(), s_read.clone())))
            .collect();
        if let Ok(c) = validate(SCHEME, (&o, &o_read), &decl, &pairs) {
            assert!(c.skills.iter().all(|s| safe(&s.path)), "{c:?}");
        }
    }
    // The publish side: the whole input as catalog content.
    if let Ok(content) = serde_json::from_slice::<rules::CatalogContent>(data) {
        if rules::check_content(&content).is_ok() {
            assert!(
                content
                    .skills
                    .iter()
                    .all(|s| rules::check_skill_path(&s.path).is_ok())
            );
        }
    }
});
