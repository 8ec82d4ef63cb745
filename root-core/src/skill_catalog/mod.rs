//! The platform skill catalog: root owns it and publishes it as MCP resources (the skill
//! catalog ADR, `../shared/seeds/002_…`, applied with root as the MCP gateway and
//! `mcp-root skills sync` as the client).
//!
//! This module holds the three parts both sides must agree on:
//! - the wire format: the ontology resource (`<scheme>://platform/ontology`, a JSON object whose
//!   `skill_resources` names every skill and its URI) and the metadata every catalog resource
//!   carries in list and read results (`_meta["root-mcp.local/catalog"]`: owner application,
//!   manifest version, manifest SHA-256, bundle-relative path, content SHA-256, MIME type, size);
//! - the generic rules (names, URIs, paths, front matter, hashes) that the descriptor build,
//!   root's publish check and the client all apply: the client keeps only these protocol
//!   constants, never a list of concrete skills;
//! - root's served view, [`SkillCatalog`], built from the `platform_skill_catalog` descriptor
//!   that `mcp-root descriptors build` produces from a `skills/` tree of `SKILL.md` files.
//!
//! Invariant: nothing here panics on any input; every refusal names the rule it broke.

use std::collections::BTreeSet;

use mcp_shared::descriptor::Descriptor;
use saphyr::{LoadableYamlNode, Yaml};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub use mcp_shared::skill_catalog::{
    CatalogContent, MANIFEST_VERSION, META_KEY, OWNER_APPLICATION, Ontology, ResourceMeta,
    SkillEntry, SkillRef,
};

/// The catalog schema versions this client understands.
pub const SUPPORTED_MANIFEST_VERSIONS: &[u64] = &[1];
/// MIME type of a skill resource.
pub const SKILL_MIME: &str = "text/markdown";
/// MIME type of the ontology resource.
pub const ONTOLOGY_MIME: &str = "application/json";
/// Bundle-relative path of the ontology.
pub const ONTOLOGY_PATH: &str = "ontology.json";
/// Descriptor class of the catalog artifact.
pub(crate) const DESCRIPTOR_CLASS: &str = "platform_skill_catalog";
/// Default URI scheme (root config `skill_catalog.scheme`).
pub const DEFAULT_SCHEME: &str = "mcp-root";
/// Largest skill file accepted, in bytes.
pub(crate) const MAX_SKILL_BYTES: u64 = 256 * 1024;
/// Longest name or path component accepted.
const MAX_NAME: usize = 64;
/// Longest bundle-relative path accepted.
const MAX_PATH: usize = 512;
/// Largest front matter block parsed as YAML, in bytes.
const MAX_FRONT_MATTER: usize = 16 * 1024;

/// Why a name, path, URI, file or catalog breaks the rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("`{0}` is not a kebab-case name (a-z, 0-9, single hyphens, at most 64 characters)")]
    NotKebab(String),
    #[error("`{0}` is not a snake_case name (a-z, 0-9, single underscores, at most 64 characters)")]
    NotSnake(String),
    #[error("path `{path}` is not a canonical safe relative path: {why}")]
    UnsafePath { path: String, why: &'static str },
    #[error("path `{path}` must be skills/<snake_case dirs>/SKILL.md (or SKILL.markdown): {why}")]
    BadSkillPath { path: String, why: &'static str },
    #[error("not valid UTF-8")]
    NotUtf8,
    #[error("no YAML front matter (the file must start with a `---` line and close it)")]
    NoFrontMatter,
    #[error("front matter is not valid YAML: {0}")]
    BadYaml(String),
    #[error("front matter must be a YAML mapping with a string `name`")]
    NoName,
    #[error("front matter is larger than {MAX_FRONT_MATTER} bytes")]
    FrontMatterTooLarge,
    #[error("scheme `{0}` is not a URI scheme (a-z, then a-z 0-9 + . -)")]
    BadScheme(String),
}

/// Lowercase kebab-case: `root-descriptors`.
pub fn is_kebab(s: &str) -> bool {
    is_sep_case(s, b'-')
}

/// Lowercase snake_case: `root_descriptors`.
pub fn is_snake(s: &str) -> bool {
    is_sep_case(s, b'_')
}

fn is_sep_case(s: &str, sep: u8) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_NAME
        && b[0].is_ascii_lowercase()
        && b[b.len() - 1] != sep
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == sep)
        && !b.windows(2).any(|w| w[0] == sep && w[1] == sep)
}

/// The snake_case resource name of a kebab-case skill identity.
pub fn kebab_to_snake(kebab: &str) -> Result<String, RuleError> {
    if !is_kebab(kebab) {
        return Err(RuleError::NotKebab(kebab.to_string()));
    }
    Ok(kebab.replace('-', "_"))
}

/// Checks a URI scheme (root config).
pub fn check_scheme(scheme: &str) -> Result<(), RuleError> {
    let b = scheme.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 32
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"+.-".contains(&c));
    if ok {
        Ok(())
    } else {
        Err(RuleError::BadScheme(scheme.to_string()))
    }
}

/// `<scheme>://platform/ontology`.
pub fn ontology_uri(scheme: &str) -> String {
    format!("{scheme}://platform/ontology")
}

/// `<scheme>://platform/skills/` (every skill URI starts with it).
pub fn skill_prefix(scheme: &str) -> String {
    format!("{scheme}://platform/skills/")
}

/// `<scheme>://platform/skills/<kebab>`.
pub fn skill_uri(scheme: &str, kebab: &str) -> String {
    format!("{}{kebab}", skill_prefix(scheme))
}

/// The components of a canonical safe bundle-relative path: not empty, relative, `/`
/// separated, no empty, `.` or `..` component, no backslash, no control character, no
/// drive letter or scheme (`:`), at most 512 bytes.
pub fn check_bundle_path(path: &str) -> Result<Vec<&str>, RuleError> {
    let bad = |why| RuleError::UnsafePath {
        path: path.chars().take(MAX_PATH).collect(),
        why,
    };
    if path.is_empty() {
        return Err(bad("empty"));
    }
    if path.len() > MAX_PATH {
        return Err(bad("longer than 512 bytes"));
    }
    if path.starts_with('/') {
        return Err(bad("absolute"));
    }
    if path.contains('\\') {
        return Err(bad("contains a backslash"));
    }
    if path.contains(':') {
        return Err(bad("contains `:` (a drive or scheme)"));
    }
    if path.chars().any(|c| c.is_control()) {
        return Err(bad("contains a control character"));
    }
    let parts: Vec<&str> = path.split('/').collect();
    for p in &parts {
        match *p {
            "" => return Err(bad("has an empty component (`//` or a trailing `/`)")),
            "." | ".." => return Err(bad("has a `.` or `..` component")),
            _ => {}
        }
    }
    Ok(parts)
}

/// Checks a skill's bundle path (`skills/<snake dirs…>/SKILL.md`) and returns the install path
/// relative to the namespace (the part below `skills/`).
pub fn check_skill_path(path: &str) -> Result<String, RuleError> {
    let parts = check_bundle_path(path)?;
    let bad = |why| RuleError::BadSkillPath {
        path: path.to_string(),
        why,
    };
    if parts.len() < 3 {
        return Err(bad("needs at least one directory below skills/"));
    }
    if parts[0] != "skills" {
        return Err(bad("does not start with skills/"));
    }
    let file = parts[parts.len() - 1];
    if file != "SKILL.md" && file != "SKILL.markdown" {
        return Err(bad("the file must be SKILL.md or SKILL.markdown"));
    }
    if !parts[1..parts.len() - 1].iter().all(|d| is_snake(d)) {
        return Err(bad("every directory must be snake_case"));
    }
    Ok(parts[1..].join("/"))
}

/// The skill's directory relative to the namespace (install path without the file name).
pub fn skill_dir(install_path: &str) -> &str {
    install_path
        .rsplit_once('/')
        .map(|(dir, _)| dir)
        .unwrap_or("")
}

/// What a skill's YAML front matter declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontMatter {
    pub name: String,
    pub(crate) description: Option<String>,
}

/// Parses the YAML front matter at the start of a `SKILL.md` text.
pub fn parse_front_matter(text: &str) -> Result<FrontMatter, RuleError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or(RuleError::NoFrontMatter)?;
    // The block ends at the first line that is exactly `---`.
    let mut end = None;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\n', '\r']) == "---" {
            end = Some(offset);
            break;
        }
        offset += line.len();
        if offset > MAX_FRONT_MATTER {
            return Err(RuleError::FrontMatterTooLarge);
        }
    }
    let block = &rest[..end.ok_or(RuleError::NoFrontMatter)?];
    let docs = Yaml::load_from_str(block).map_err(|e| RuleError::BadYaml(e.to_string()))?;
    let doc = match docs.as_slice() {
        [one] => one,
        _ => return Err(RuleError::NoName),
    };
    if !doc.is_mapping() {
        return Err(RuleError::NoName);
    }
    let name = doc
        .as_mapping_get("name")
        .and_then(|v| v.as_str())
        .ok_or(RuleError::NoName)?
        .to_string();
    let description = doc
        .as_mapping_get("description")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    Ok(FrontMatter { name, description })
}

/// `sha256:`-less lowercase hex SHA-256, as the catalog metadata carries it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The catalog revision: SHA-256 of the canonical JSON of the manifest (everything but the
/// skill texts, which their content hashes stand for).
pub(crate) fn manifest_sha256(manifest_version: u64, owner: &str, skills: &[SkillEntry]) -> String {
    let entries: Vec<Value> = skills
        .iter()
        .map(|s| {
            json!({
                "name": s.name, "id": s.id, "path": s.path, "mime_type": s.mime_type,
                "size": s.size, "content_sha256": s.content_sha256, "description": s.description,
            })
        })
        .collect();
    let manifest = json!({ "manifest_version": manifest_version, "owner_application": owner, "skills": entries });
    sha256_hex(&mcp_shared::canonical::to_vec(&manifest))
}

/// Why a `SKILL.md` file cannot be a catalog entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillFileError {
    /// Its path, encoding or front matter breaks a rule.
    #[error("{0}")]
    Rule(RuleError),
    #[error("larger than {MAX_SKILL_BYTES} bytes")]
    TooLarge,
    #[error("front matter name: {0}")]
    Name(RuleError),
    #[error(
        "front matter name `{name}` must match its directory `{dir}` (kebab-case of the snake_case directory)"
    )]
    NameMismatch { name: String, dir: String },
    #[error("front matter needs a non-empty `description`")]
    NoDescription,
}

/// Why stored catalog content breaks the rules (at build, publish or start-up); a skill's
/// own fault names its bundle path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogContentError {
    #[error("manifest_version {0} (root publishes {MANIFEST_VERSION})")]
    ManifestVersion(u64),
    #[error("owner_application must be `{OWNER_APPLICATION}`")]
    Owner,
    #[error("skill `{path}`: {rule}")]
    Rule { path: String, rule: RuleError },
    #[error("skill `{path}`: name `{name}` is not the snake_case of `{id}`")]
    NameNotId {
        path: String,
        name: String,
        id: String,
    },
    #[error("skill `{path}`: front matter name `{found}` is not `{id}`")]
    FrontMatterName {
        path: String,
        found: String,
        id: String,
    },
    #[error("skill `{path}`: mime_type must be {SKILL_MIME}")]
    MimeType { path: String },
    #[error("skill `{path}`: size or content_sha256 does not match the text")]
    Digest { path: String },
    #[error("skill `{path}`: duplicate skill name `{name}`")]
    Duplicate { path: String, name: String },
    #[error("skill directory `{inner}` lies inside skill directory `{outer}`")]
    Nested { outer: String, inner: String },
    #[error("manifest_sha256 {declared} does not match the manifest ({expected})")]
    ManifestHash { declared: String, expected: String },
}

/// Why a catalog descriptor cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum CatalogDescriptorError {
    /// The configured URI scheme.
    #[error("{0}")]
    Scheme(RuleError),
    #[error("not a skill catalog: {0}")]
    NotACatalog(serde_json::Error),
    #[error("{0}")]
    Content(#[from] CatalogContentError),
    /// The ontology resource could not be written (a broken invariant).
    #[error("{0}")]
    Ontology(serde_json::Error),
}

/// Builds one skill entry from a `SKILL.md` file at bundle path `path`.
pub(crate) fn skill_entry(path: &str, bytes: &[u8]) -> Result<SkillEntry, SkillFileError> {
    let install = check_skill_path(path).map_err(SkillFileError::Rule)?;
    if bytes.len() as u64 > MAX_SKILL_BYTES {
        return Err(SkillFileError::TooLarge);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| SkillFileError::Rule(RuleError::NotUtf8))?;
    let fm = parse_front_matter(text).map_err(SkillFileError::Rule)?;
    let name = kebab_to_snake(&fm.name).map_err(SkillFileError::Name)?;
    let dir = skill_dir(&install);
    let last = dir.rsplit('/').next().unwrap_or(dir);
    if last != name {
        return Err(SkillFileError::NameMismatch {
            name: fm.name,
            dir: last.to_string(),
        });
    }
    let description = fm
        .description
        .filter(|d| !d.trim().is_empty())
        .ok_or(SkillFileError::NoDescription)?;
    Ok(SkillEntry {
        name,
        id: fm.name,
        path: path.to_string(),
        description,
        mime_type: SKILL_MIME.to_string(),
        size: bytes.len() as u64,
        content_sha256: sha256_hex(bytes),
        text: text.to_string(),
    })
}

/// Assembles catalog content from entries (sorted by name and URI identity).
pub(crate) fn catalog_content(
    mut skills: Vec<SkillEntry>,
) -> Result<CatalogContent, CatalogContentError> {
    skills.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
    let content = CatalogContent {
        manifest_version: MANIFEST_VERSION,
        owner_application: OWNER_APPLICATION.to_string(),
        manifest_sha256: manifest_sha256(MANIFEST_VERSION, OWNER_APPLICATION, &skills),
        skills,
    };
    check_content(&content)?;
    Ok(content)
}

/// Every rule a stored catalog must satisfy (build, publish and start-up alike).
pub fn check_content(c: &CatalogContent) -> Result<(), CatalogContentError> {
    if c.manifest_version != MANIFEST_VERSION {
        return Err(CatalogContentError::ManifestVersion(c.manifest_version));
    }
    if c.owner_application != OWNER_APPLICATION {
        return Err(CatalogContentError::Owner);
    }
    let mut names = BTreeSet::new();
    let mut ids = BTreeSet::new();
    let mut dirs: Vec<String> = Vec::new();
    for s in &c.skills {
        let path = || s.path.clone();
        let rule = |rule| CatalogContentError::Rule { path: path(), rule };
        let install = check_skill_path(&s.path).map_err(rule)?;
        if kebab_to_snake(&s.id).map_err(rule)? != s.name {
            return Err(CatalogContentError::NameNotId {
                path: path(),
                name: s.name.clone(),
                id: s.id.clone(),
            });
        }
        let fm = parse_front_matter(&s.text).map_err(rule)?;
        if fm.name != s.id {
            return Err(CatalogContentError::FrontMatterName {
                path: path(),
                found: fm.name,
                id: s.id.clone(),
            });
        }
        if s.mime_type != SKILL_MIME {
            return Err(CatalogContentError::MimeType { path: path() });
        }
        if s.size != s.text.len() as u64 || s.content_sha256 != sha256_hex(s.text.as_bytes()) {
            return Err(CatalogContentError::Digest { path: path() });
        }
        if !names.insert(s.name.clone()) || !ids.insert(s.id.clone()) {
            return Err(CatalogContentError::Duplicate {
                path: path(),
                name: s.name.clone(),
            });
        }
        dirs.push(skill_dir(&install).to_string());
    }
    if let Some((outer, inner)) = nested_dirs(&dirs) {
        return Err(CatalogContentError::Nested { outer, inner });
    }
    let expected = manifest_sha256(c.manifest_version, &c.owner_application, &c.skills);
    if c.manifest_sha256 != expected {
        return Err(CatalogContentError::ManifestHash {
            declared: c.manifest_sha256.clone(),
            expected,
        });
    }
    Ok(())
}

/// Two skill directories that collide (equal ignoring ASCII case, so a case-insensitive
/// filesystem cannot merge them) or nest (one inside the other).
pub(crate) fn nested_dirs(dirs: &[String]) -> Option<(String, String)> {
    let mut lower: Vec<String> = dirs.iter().map(|d| d.to_ascii_lowercase()).collect();
    lower.sort();
    for w in lower.windows(2) {
        if w[0] == w[1] || w[1].starts_with(&format!("{}/", w[0])) {
            return Some((w[0].clone(), w[1].clone()));
        }
    }
    None
}

/// One resource root serves for the catalog.
#[derive(Debug, Clone)]
pub struct CatalogResource {
    pub uri: String,
    pub name: String,
    pub title: String,
    pub description: String,
    pub text: String,
    pub meta: ResourceMeta,
}

/// Root's served view of the catalog for one URI scheme: the ontology first, then the skills
/// sorted by name.
#[derive(Debug, Clone)]
pub struct SkillCatalog {
    pub ontology: CatalogResource,
    pub skills: Vec<CatalogResource>,
}

impl SkillCatalog {
    /// The served view of a catalog descriptor, or why it cannot be served.
    pub(crate) fn from_descriptor(
        d: &Descriptor,
        scheme: &str,
    ) -> Result<SkillCatalog, CatalogDescriptorError> {
        check_scheme(scheme).map_err(CatalogDescriptorError::Scheme)?;
        let c: CatalogContent = serde_json::from_value(d.content.clone())
            .map_err(CatalogDescriptorError::NotACatalog)?;
        check_content(&c)?;
        let meta = |path: &str, text: &str, mime: &str| ResourceMeta {
            owner_application: c.owner_application.clone(),
            manifest_version: c.manifest_version,
            manifest_sha256: c.manifest_sha256.clone(),
            path: path.to_string(),
            content_sha256: sha256_hex(text.as_bytes()),
            mime_type: mime.to_string(),
            size: text.len() as u64,
        };
        let skills: Vec<CatalogResource> = c
            .skills
            .iter()
            .map(|s| CatalogResource {
                uri: skill_uri(scheme, &s.id),
                name: s.name.clone(),
                title: s.id.clone(),
                description: s.description.clone(),
                text: s.text.clone(),
                meta: meta(&s.path, &s.text, SKILL_MIME),
            })
            .collect();
        let ontology = Ontology {
            manifest_version: c.manifest_version,
            manifest_sha256: c.manifest_sha256.clone(),
            owner_application: c.owner_application.clone(),
            skill_resources: skills
                .iter()
                .map(|s| SkillRef {
                    name: s.name.clone(),
                    uri: s.uri.clone(),
                    path: s.meta.path.clone(),
                    description: s.description.clone(),
                })
                .collect(),
        };
        let text =
            serde_json::to_string_pretty(&ontology).map_err(CatalogDescriptorError::Ontology)?;
        Ok(SkillCatalog {
            ontology: CatalogResource {
                uri: ontology_uri(scheme),
                name: "ontology".into(),
                title: "Platform skill ontology".into(),
                description: "The platform skill catalog: every skill's name and URI".into(),
                meta: meta(ONTOLOGY_PATH, &text, ONTOLOGY_MIME),
                text,
            },
            skills,
        })
    }

    /// Every resource in served order.
    pub fn resources(&self) -> impl Iterator<Item = &CatalogResource> {
        std::iter::once(&self.ontology).chain(self.skills.iter())
    }

    pub fn get(&self, uri: &str) -> Option<&CatalogResource> {
        self.resources().find(|r| r.uri == uri)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_kebab("root-descriptors"));
        assert!(!is_kebab("root--x") && !is_kebab("-a") && !is_kebab("a-") && !is_kebab("A"));
        assert!(is_snake("root_descriptors") && !is_snake("root__x") && !is_snake("_a"));
        assert_eq!(kebab_to_snake("a-b-c").as_deref(), Ok("a_b_c"));
    }

    #[test]
    fn paths() {
        assert_eq!(
            check_skill_path("skills/a/SKILL.md").as_deref(),
            Ok("a/SKILL.md")
        );
        assert_eq!(
            check_skill_path("skills/ops/a_b/SKILL.markdown").as_deref(),
            Ok("ops/a_b/SKILL.markdown")
        );
        for bad in [
            "/skills/a/SKILL.md",
            "skills/../a/SKILL.md",
            "skills/a/../SKILL.md",
            "skills//a/SKILL.md",
            "skills/a/SKILL.md/",
            "skills/SKILL.md",
            "skill/a/SKILL.md",
            "skills/A/SKILL.md",
            "skills/a-b/SKILL.md",
            "skills/a/README.md",
            "skills\\a\\SKILL.md",
            "C:/skills/a/SKILL.md",
            "skills/./a/SKILL.md",
        ] {
            assert!(check_skill_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn front_matter() {
        let fm = parse_front_matter("---\nname: a-b\ndescription: x y\n---\n# body\n").unwrap();
        assert_eq!(fm.name, "a-b");
        assert_eq!(fm.description.as_deref(), Some("x y"));
        assert_eq!(parse_front_matter("# no"), Err(RuleError::NoFrontMatter));
        assert_eq!(
            parse_front_matter("---\nname: a\n"),
            Err(RuleError::NoFrontMatter)
        );
        assert_eq!(
            parse_front_matter("---\n- a\n---\n"),
            Err(RuleError::NoName)
        );
        assert!(matches!(
            parse_front_matter("---\nname: [a\n---\n"),
            Err(RuleError::BadYaml(_))
        ));
    }

    #[test]
    fn nesting_and_case_collisions() {
        assert!(nested_dirs(&["a".into(), "a/b".into()]).is_some());
        assert!(nested_dirs(&["ops/a".into(), "OPS/a".into()]).is_some());
        assert!(nested_dirs(&["a".into(), "ab".into(), "b/a".into()]).is_none());
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// A `SKILL.md` at `skills/<dirs>/<name>/<file>` whose front matter may or may not
        /// match its directory.
        fn skill_file() -> impl Strategy<Value = (String, Vec<u8>)> {
            (
                prop::collection::vec("[a-z][a-z_]{0,5}|[A-Z]{1,3}|\\.\\.|", 0..3),
                "[a-z][a-z0-9_]{0,8}",
                prop_oneof![Just("SKILL.md"), Just("SKILL.markdown"), Just("README.md")],
                prop_oneof!["[a-z][a-z0-9-]{0,8}".prop_map(Some), Just(None),],
                proptest::option::of(".{0,20}"),
                prop::collection::vec(any::<u8>(), 0..24),
            )
                .prop_map(|(dirs, name, file, fm_name, description, tail)| {
                    let mut path = vec!["skills".to_string()];
                    path.extend(dirs);
                    path.push(name.clone());
                    path.push(file.to_string());
                    let fm_name = fm_name.unwrap_or_else(|| name.replace('_', "-"));
                    let mut text = format!("---\nname: {fm_name}\n");
                    if let Some(d) = description {
                        text.push_str(&format!("description: {d}\n"));
                    }
                    text.push_str("---\n");
                    let mut bytes = text.into_bytes();
                    bytes.extend(tail);
                    (path.join("/"), bytes)
                })
        }

        proptest! {
            // Cases: `PROPTEST_CASES` (CI bounds it), else proptest's default of 256.
            #![proptest_config(ProptestConfig::default())]

            /// The publish-side validator: entries built from arbitrary files either fail
            /// with a reason or make a catalog that every rule accepts, with safe paths.
            #[test]
            fn built_catalogs_pass_their_own_rules(files in prop::collection::vec(skill_file(), 0..5)) {
                let entries: Vec<SkillEntry> = files
                    .iter()
                    .filter_map(|(path, bytes)| skill_entry(path, bytes).ok())
                    .collect();
                if let Ok(content) = catalog_content(entries) {
                    prop_assert_eq!(check_content(&content), Ok(()));
                    for s in &content.skills {
                        let install = check_skill_path(&s.path);
                        prop_assert!(install.is_ok(), "{}", s.path);
                        prop_assert!(!s.path.contains(".."), "{}", s.path);
                    }
                }
            }

            /// Stored content that was tampered with after the build (any one field of any
            /// one skill changed) is refused, never accepted or a panic.
            #[test]
            fn tampered_content_is_refused(
                files in prop::collection::vec(skill_file(), 1..4),
                which in any::<prop::sample::Index>(),
                field in 0usize..6,
                junk in ".{1,12}",
            ) {
                let entries: Vec<SkillEntry> = files
                    .iter()
                    .filter_map(|(path, bytes)| skill_entry(path, bytes).ok())
                    .collect();
                let Ok(mut content) = catalog_content(entries) else {
                    return Ok(());
                };
                if content.skills.is_empty() {
                    return Ok(());
                }
                let i = which.index(content.skills.len());
                let s = &mut content.skills[i];
                match field {
                    0 => s.name.push_str(&junk),
                    1 => s.id.push_str(&junk),
                    2 => s.path = format!("{}{junk}", s.path),
                    3 => s.text.push_str(&junk),
                    4 => s.size += 1,
                    _ => content.manifest_sha256.push_str(&junk),
                }
                prop_assert!(check_content(&content).is_err());
            }

            /// Any JSON that deserializes as catalog content is judged without a panic.
            #[test]
            fn arbitrary_content_is_judged(
                names in prop::collection::vec(".{0,10}", 0..3),
                texts in prop::collection::vec(".{0,40}", 0..3),
                version in 0u64..3,
            ) {
                let skills: Vec<Value> = names.iter().zip(texts.iter()).map(|(n, t)| json!({
                    "name": n, "id": n, "path": format!("skills/{n}/SKILL.md"), "description": "d",
                    "mime_type": SKILL_MIME, "size": t.len(), "content_sha256": sha256_hex(t.as_bytes()),
                    "text": t,
                })).collect();
                let v = json!({
                    "manifest_version": version, "owner_application": OWNER_APPLICATION,
                    "manifest_sha256": "00", "skills": skills,
                });
                if let Ok(c) = serde_json::from_value::<CatalogContent>(v) {
                    // The manifest hash is wrong: refused whatever else holds.
                    prop_assert!(check_content(&c).is_err());
                }
            }
        }
    }
}
