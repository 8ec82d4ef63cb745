//! The platform skill catalog's wire format (schema `schemas/skill-catalog.schema.json`):
//! what root stores in its `platform_skill_catalog` descriptor, the ontology resource it
//! serves, and the metadata every catalog resource carries in `_meta` of list and read
//! results. The rules over these values live with their users (`mcp-root`'s
//! `skill_catalog` module).

use serde::{Deserialize, Serialize};

/// The catalog schema version of these types (`manifest_version`). Any change to their
/// shape is a new version.
pub const MANIFEST_VERSION: u64 = 1;
/// The owner application of every catalog resource: root, the MCP gateway.
pub const OWNER_APPLICATION: &str = "mcp_gateway";
/// The `_meta` key that holds a catalog resource's [`ResourceMeta`].
pub const META_KEY: &str = "root-mcp.local/catalog";

/// A catalog resource's metadata, the same in `resources/list` and `resources/read`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceMeta {
    pub owner_application: String,
    pub manifest_version: u64,
    /// The catalog revision (lowercase hex SHA-256 of the manifest).
    pub manifest_sha256: String,
    /// Bundle-relative path, e.g. `skills/ops/hub_diagnostics/SKILL.md` or `ontology.json`.
    pub path: String,
    /// Lowercase hex SHA-256 of the resource's bytes.
    pub content_sha256: String,
    pub mime_type: String,
    /// Size of the resource's bytes.
    pub size: u64,
}

/// One skill as the catalog artifact stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillEntry {
    /// snake_case resource name.
    pub name: String,
    /// kebab-case identity: the URI's last segment and the front matter `name`.
    pub id: String,
    pub path: String,
    pub description: String,
    pub mime_type: String,
    pub size: u64,
    pub content_sha256: String,
    /// The `SKILL.md` text.
    pub text: String,
}

/// The content of the `platform_skill_catalog` descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogContent {
    pub manifest_version: u64,
    pub owner_application: String,
    pub manifest_sha256: String,
    pub skills: Vec<SkillEntry>,
}

/// One entry of the ontology's `skill_resources`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillRef {
    pub name: String,
    pub uri: String,
    pub path: String,
    pub description: String,
}

/// The ontology resource (`<scheme>://platform/ontology`): the authoritative skill index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ontology {
    pub manifest_version: u64,
    pub manifest_sha256: String,
    pub owner_application: String,
    pub skill_resources: Vec<SkillRef>,
}
