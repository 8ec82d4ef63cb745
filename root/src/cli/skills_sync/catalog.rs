//! Client-side validation of a skill catalog as discovered: the desired set from the ontology,
//! the listed and read resources checked against their metadata, the whole catalog or nothing.

use super::options::SkillCatalogError;
use base64::Engine;

use crate::skill_catalog as rules;
use crate::skill_catalog::ResourceMeta;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::collections::BTreeSet;

/// A resource as `resources/list` showed it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub uri: String,
    pub name: String,
    pub mime_type: Option<String>,
    pub size: Option<u64>,
    pub meta: Option<Value>,
}

/// A resource as `resources/read` returned it (text, or decoded blob bytes).
#[derive(Debug, Clone)]
pub struct Read {
    pub uri: String,
    pub mime_type: Option<String>,
    pub bytes: Vec<u8>,
    pub meta: Option<Value>,
}

/// One validated skill, ready to install.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ValidSkill {
    pub name: String,
    pub(crate) uri: String,
    /// Below the namespace, e.g. `ops/hub_diagnostics/SKILL.md`.
    pub path: String,
    pub(crate) content_sha256: String,
    pub(crate) size: u64,
    #[serde(skip)]
    pub(crate) text: String,
}

/// A validated catalog, sorted by name and URI.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ValidCatalog {
    pub(crate) owner_application: String,
    pub(crate) manifest_version: u64,
    pub manifest_sha256: String,
    pub skills: Vec<ValidSkill>,
}

/// Steps 2–3 and 6 of discovery: index the listed resources by URI, keep only the ontology
/// and the skill prefix (duplicates there are refused), and require the ontology.
pub fn select(
    scheme: &str,
    listed: Vec<Listed>,
) -> Result<(Listed, BTreeMap<String, Listed>), SkillCatalogError> {
    let ontology_uri = rules::ontology_uri(scheme);
    let prefix = rules::skill_prefix(scheme);
    let mut ontology = None;
    let mut skills = BTreeMap::new();
    for r in listed {
        if r.uri == ontology_uri {
            if ontology.is_some() {
                return Err(SkillCatalogError::DuplicateUri(r.uri));
            }
            ontology = Some(r);
        } else if r.uri.starts_with(&prefix) {
            if skills.contains_key(&r.uri) {
                return Err(SkillCatalogError::DuplicateUri(r.uri));
            }
            skills.insert(r.uri.clone(), r);
        }
    }
    let ontology = ontology.ok_or(SkillCatalogError::MissingOntology(ontology_uri))?;
    Ok((ontology, skills))
}

/// Step 5: the ontology's declared skills `(name, uri)`, sorted by name and URI; the version
/// is checked first, so an unsupported catalog fails with a compatibility error.
pub fn declared(
    scheme: &str,
    listed: &Listed,
    read: &Read,
) -> Result<Vec<(String, String)>, SkillCatalogError> {
    let uri = listed.uri.clone();
    let bad = |why: String| SkillCatalogError::Ontology {
        uri: uri.clone(),
        why,
    };
    let meta = parse_meta(&uri, "read", read.meta.as_ref())?;
    if !rules::SUPPORTED_MANIFEST_VERSIONS.contains(&meta.manifest_version) {
        return Err(SkillCatalogError::UnsupportedVersion {
            found: meta.manifest_version,
            supported: rules::SUPPORTED_MANIFEST_VERSIONS.to_vec(),
        });
    }
    let text = std::str::from_utf8(&read.bytes).map_err(|_| bad("not UTF-8".into()))?;
    let v: Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let list = v
        .as_object()
        .ok_or_else(|| bad("must be a JSON object".into()))?
        .get("skill_resources")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("needs a `skill_resources` array".into()))?;
    let prefix = rules::skill_prefix(scheme);
    let mut names = BTreeSet::new();
    let mut uris = BTreeSet::new();
    let mut out = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let name = item.get("name").and_then(Value::as_str);
        let suri = item.get("uri").and_then(Value::as_str);
        let (Some(name), Some(suri)) = (name, suri) else {
            return Err(bad(format!(
                "skill_resources[{i}] needs string `name` and `uri`"
            )));
        };
        let kebab = suri.strip_prefix(&prefix).ok_or_else(|| {
            bad(format!(
                "skill `{name}`: URI `{suri}` is not under {prefix}"
            ))
        })?;
        let snake =
            rules::kebab_to_snake(kebab).map_err(|e| bad(format!("skill URI `{suri}`: {e}")))?;
        if !rules::is_snake(name) || snake != name {
            return Err(bad(format!(
                "skill `{name}`: the name must be the snake_case of the URI identity `{kebab}`"
            )));
        }
        if !names.insert(name.to_string()) {
            return Err(bad(format!("duplicate skill name `{name}`")));
        }
        if !uris.insert(suri.to_string()) {
            return Err(bad(format!("duplicate skill URI `{suri}`")));
        }
        out.push((name.to_string(), suri.to_string()));
    }
    out.sort();
    Ok(out)
}

/// Step 6: the listed skills are exactly the declared ones.
pub fn match_declared(
    declared: &[(String, String)],
    listed: &BTreeMap<String, Listed>,
) -> Result<(), SkillCatalogError> {
    let want: BTreeSet<&str> = declared.iter().map(|(_, u)| u.as_str()).collect();
    if let Some(extra) = listed.keys().find(|u| !want.contains(u.as_str())) {
        return Err(SkillCatalogError::Undeclared(extra.clone()));
    }
    if let Some(missing) = want.iter().find(|u| !listed.contains_key(**u)) {
        return Err(SkillCatalogError::Missing((*missing).to_string()));
    }
    Ok(())
}

pub(super) fn parse_meta(
    uri: &str,
    which: &str,
    meta: Option<&Value>,
) -> Result<ResourceMeta, SkillCatalogError> {
    let v =
        meta.and_then(|m| m.get(rules::META_KEY))
            .ok_or_else(|| SkillCatalogError::Resource {
                uri: uri.to_string(),
                why: format!("{which} result has no `_meta.{}`", rules::META_KEY),
            })?;
    serde_json::from_value(v.clone()).map_err(|e| SkillCatalogError::Resource {
        uri: uri.to_string(),
        why: format!("{which} metadata: {e}"),
    })
}

/// Step 8: validates the selected catalog whole. `skills` pairs each declared skill's list
/// entry with its read result, in declared order.
pub fn validate(
    scheme: &str,
    ontology: (&Listed, &Read),
    declared: &[(String, String)],
    skills: &[(Listed, Read)],
) -> Result<ValidCatalog, SkillCatalogError> {
    let (o_list, o_read) = ontology;
    let o_meta = check_resource(o_list, o_read, rules::ONTOLOGY_MIME)?;
    if o_meta.owner_application != rules::OWNER_APPLICATION {
        return Err(SkillCatalogError::Resource {
            uri: o_list.uri.clone(),
            why: format!(
                "owner application `{}` is not `{}`",
                o_meta.owner_application,
                rules::OWNER_APPLICATION
            ),
        });
    }
    rules::check_bundle_path(&o_meta.path).map_err(|e| SkillCatalogError::Resource {
        uri: o_list.uri.clone(),
        why: e.to_string(),
    })?;
    let mut out = Vec::new();
    let mut dirs: Vec<(String, String)> = Vec::new();
    let mut paths = BTreeSet::new();
    for (name, uri) in declared {
        let Some((listed, read)) = skills.iter().find(|(l, _)| &l.uri == uri) else {
            return Err(SkillCatalogError::Missing(uri.clone()));
        };
        let bad = |why: String| SkillCatalogError::Resource {
            uri: uri.clone(),
            why,
        };
        let meta = check_resource(listed, read, rules::SKILL_MIME)?;
        for (field, found, expected) in [
            (
                "owner_application",
                &meta.owner_application,
                &o_meta.owner_application,
            ),
            (
                "manifest_sha256",
                &meta.manifest_sha256,
                &o_meta.manifest_sha256,
            ),
        ] {
            if found != expected {
                return Err(SkillCatalogError::Mixed {
                    uri: uri.clone(),
                    field,
                    found: found.clone(),
                    expected: expected.clone(),
                });
            }
        }
        if meta.manifest_version != o_meta.manifest_version {
            return Err(SkillCatalogError::Mixed {
                uri: uri.clone(),
                field: "manifest_version",
                found: meta.manifest_version.to_string(),
                expected: o_meta.manifest_version.to_string(),
            });
        }
        if meta.owner_application != rules::OWNER_APPLICATION {
            return Err(bad(format!(
                "owner application `{}` is not `{}`",
                meta.owner_application,
                rules::OWNER_APPLICATION
            )));
        }
        if &listed.name != name {
            return Err(bad(format!(
                "listed name `{}` is not `{name}`",
                listed.name
            )));
        }
        let install = rules::check_skill_path(&meta.path).map_err(|e| bad(e.to_string()))?;
        let text = String::from_utf8(read.bytes.clone())
            .map_err(|_| bad("content is not UTF-8".into()))?;
        let kebab = uri
            .strip_prefix(&rules::skill_prefix(scheme))
            .unwrap_or_default();
        let fm = rules::parse_front_matter(&text).map_err(|e| bad(e.to_string()))?;
        if fm.name != kebab {
            return Err(bad(format!(
                "front matter name `{}` does not match the URI identity `{kebab}`",
                fm.name
            )));
        }
        if !paths.insert(install.to_ascii_lowercase()) {
            return Err(SkillCatalogError::Collision {
                first: uri.clone(),
                second: uri.clone(),
                path: install,
            });
        }
        dirs.push((rules::skill_dir(&install).to_string(), uri.clone()));
        out.push(ValidSkill {
            name: name.clone(),
            uri: uri.clone(),
            path: install,
            content_sha256: meta.content_sha256.clone(),
            size: meta.size,
            text,
        });
    }
    // Unique destinations: no two skills in the same (or a nested) directory, ignoring case.
    let mut sorted: Vec<(String, String)> = dirs
        .into_iter()
        .map(|(d, u)| (d.to_ascii_lowercase(), u))
        .collect();
    sorted.sort();
    for w in sorted.windows(2) {
        if w[0].0 == w[1].0 || w[1].0.starts_with(&format!("{}/", w[0].0)) {
            return Err(SkillCatalogError::Collision {
                first: w[0].1.clone(),
                second: w[1].1.clone(),
                path: w[1].0.clone(),
            });
        }
    }
    out.sort_by(|a, b| (&a.name, &a.uri).cmp(&(&b.name, &b.uri)));
    Ok(ValidCatalog {
        owner_application: o_meta.owner_application,
        manifest_version: o_meta.manifest_version,
        manifest_sha256: o_meta.manifest_sha256,
        skills: out,
    })
}

/// The checks every selected resource passes: metadata on both sides and equal, the MIME
/// type, the read URI, and the actual hash and size of the bytes.
pub(super) fn check_resource(
    listed: &Listed,
    read: &Read,
    mime: &str,
) -> Result<ResourceMeta, SkillCatalogError> {
    let uri = &listed.uri;
    let bad = |why: String| SkillCatalogError::Resource {
        uri: uri.clone(),
        why,
    };
    let list_meta = parse_meta(uri, "list", listed.meta.as_ref())?;
    let read_meta = parse_meta(uri, "read", read.meta.as_ref())?;
    if !rules::SUPPORTED_MANIFEST_VERSIONS.contains(&list_meta.manifest_version) {
        return Err(SkillCatalogError::UnsupportedVersion {
            found: list_meta.manifest_version,
            supported: rules::SUPPORTED_MANIFEST_VERSIONS.to_vec(),
        });
    }
    if list_meta != read_meta {
        return Err(bad("list and read metadata differ".into()));
    }
    if read.uri != *uri {
        return Err(bad(format!("read returned URI `{}`", read.uri)));
    }
    for (which, m) in [
        ("list", listed.mime_type.as_deref()),
        ("read", read.mime_type.as_deref()),
        ("metadata", Some(read_meta.mime_type.as_str())),
    ] {
        if m != Some(mime) {
            return Err(bad(format!("{which} MIME type {m:?} is not {mime}")));
        }
    }
    if let Some(size) = listed.size
        && size != read_meta.size
    {
        return Err(bad(format!(
            "listed size {size} is not the metadata size {}",
            read_meta.size
        )));
    }
    if std::str::from_utf8(&read.bytes).is_err() {
        return Err(bad("content is not UTF-8".into()));
    }
    if read.bytes.len() as u64 != read_meta.size {
        return Err(bad(format!(
            "content is {} bytes, the metadata says {}",
            read.bytes.len(),
            read_meta.size
        )));
    }
    let actual = rules::sha256_hex(&read.bytes);
    if actual != read_meta.content_sha256 {
        return Err(bad(format!(
            "content SHA-256 {actual} is not the metadata's {}",
            read_meta.content_sha256
        )));
    }
    Ok(read_meta)
}

pub(super) fn listed_of(r: &rmcp::model::Resource) -> Listed {
    Listed {
        uri: r.uri.clone(),
        name: r.name.clone(),
        mime_type: r.mime_type.clone(),
        size: r.size,
        meta: r.meta.as_ref().map(|m| Value::Object(m.0.clone())),
    }
}

pub(super) fn read_of(
    uri: &str,
    res: rmcp::model::ReadResourceResult,
) -> Result<Read, SkillCatalogError> {
    let bad = |why: &str| SkillCatalogError::Resource {
        uri: uri.to_string(),
        why: why.to_string(),
    };
    let [content] = res.contents.as_slice() else {
        return Err(bad("read must return exactly one content item"));
    };
    Ok(match content {
        rmcp::model::ResourceContents::TextResourceContents {
            uri,
            mime_type,
            text,
            meta,
        } => Read {
            uri: uri.clone(),
            mime_type: mime_type.clone(),
            bytes: text.clone().into_bytes(),
            meta: meta.as_ref().map(|m| Value::Object(m.0.clone())),
        },
        rmcp::model::ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            meta,
        } => Read {
            uri: uri.clone(),
            mime_type: mime_type.clone(),
            bytes: base64::engine::general_purpose::STANDARD
                .decode(blob)
                .map_err(|_| bad("blob is not base64"))?,
            meta: meta.as_ref().map(|m| Value::Object(m.0.clone())),
        },
        _ => return Err(bad("unknown content kind")),
    })
}
