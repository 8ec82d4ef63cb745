//! What a descriptor build reads (the manifest, its sections and entries, the options), the
//! context every class builder shares, its errors, and the readers of manifest fields.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use mcp_shared::contract::Stability;
use mcp_shared::profile::ProfileRegistry;
use serde::Deserialize;
use serde_json::Value;
use time::OffsetDateTime;

use crate::catalog::ContractRegistry;
use crate::skill_catalog;

/// Why a build failed: the file (relative to the source tree where it lies inside it) and
/// the reason.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{file}: cannot read: {reason}")]
    Read { file: String, reason: String },
    #[error("{file}: invalid manifest: {reason}")]
    Manifest { file: String, reason: String },
    #[error("{file}: {reason}")]
    Source { file: String, reason: String },
    #[error("the built set is invalid: {0}")]
    Set(#[from] crate::descriptors::SetError),
    #[error("{dir}: cannot write artifacts: {reason}")]
    Write { dir: String, reason: String },
}

/// The manifest of a source tree.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Manifest {
    pub(super) build: BuildSection,
    pub(super) inputs: Inputs,
    pub(super) descriptor: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BuildSection {
    /// RFC 3339: when this source set was released.
    pub(super) generated_at: String,
    pub(super) cache_ttl_sec: u64,
    pub(super) source_kind: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Inputs {
    pub(super) schemas_dir: String,
    pub(super) contracts_dir: String,
    pub(super) profiles_file: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Entry {
    pub(super) id: String,
    pub(super) class: String,
    pub(super) title: String,
    pub(super) source_ref: String,
    /// File (or directory, for registries and the skill catalog) inside the source tree.
    pub(super) source: String,
    #[serde(default)]
    pub(super) stability: Option<Stability>,
    #[serde(default)]
    pub(super) cache_ttl_sec: Option<u64>,
    /// For registries: the descriptor id of the manifest contract their entries follow.
    #[serde(default)]
    pub(super) manifest: Option<String>,
}

/// Build options from the command line.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Overrides the manifest's `generated_at` (e.g. `--generated-at now` in a release job).
    pub generated_at: Option<OffsetDateTime>,
}

/// Every descriptor class the pipeline builds.
pub const CLASSES: &[&str] = &[
    "architecture_descriptor",
    "sdk_export_metadata",
    "schema_registry",
    "manifest_contract",
    "template_catalog",
    "capability_profile_registry",
    "mcp_plane_registry",
    "system_model_vocabulary",
    "public_skill_registry",
    "public_scenario_registry",
    skill_catalog::DESCRIPTOR_CLASS,
];

/// What every normalizer may look at.
pub(super) struct Ctx {
    pub(super) root: PathBuf,
    pub(super) contracts: ContractRegistry,
    pub(super) profiles: ProfileRegistry,
    pub(super) schemas_dir: PathBuf,
    /// Schema names listed by the schema registry source, if the tree has one.
    pub(super) schema_names: BTreeSet<String>,
    /// Ids of every descriptor the manifest declares.
    pub(super) ids: BTreeSet<String>,
    /// Contents built so far, by id.
    pub(super) built: BTreeMap<String, Value>,
}

impl Ctx {
    /// `path` as shown in messages: relative to the source tree when inside it.
    pub(super) fn show(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    pub(super) fn err(&self, path: &Path, reason: impl std::fmt::Display) -> BuildError {
        BuildError::Source {
            file: self.show(path),
            reason: reason.to_string(),
        }
    }

    pub(super) fn read(&self, path: &Path) -> Result<String, BuildError> {
        std::fs::read_to_string(path).map_err(|e| BuildError::Read {
            file: self.show(path),
            reason: e.to_string(),
        })
    }

    pub(super) fn json(&self, path: &Path) -> Result<Value, BuildError> {
        serde_json::from_str(&self.read(path)?)
            .map_err(|e| self.err(path, format!("not JSON: {e}")))
    }
}

pub(super) fn object<'a>(
    ctx: &Ctx,
    path: &Path,
    v: &'a Value,
) -> Result<&'a serde_json::Map<String, Value>, BuildError> {
    v.as_object()
        .ok_or_else(|| ctx.err(path, "must be a JSON object"))
}

pub(super) fn array<'a>(
    ctx: &Ctx,
    path: &Path,
    v: &'a Value,
    key: &str,
) -> Result<&'a Vec<Value>, BuildError> {
    v.get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| ctx.err(path, format!("`{key}` must be an array")))
}

pub(super) fn string<'a>(
    ctx: &Ctx,
    path: &Path,
    v: &'a Value,
    key: &str,
    at: &str,
) -> Result<&'a str, BuildError> {
    v.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| ctx.err(path, format!("{at}: `{key}` must be a non-empty string")))
}

/// Names in `items` (by `key`) must be unique.
pub(super) fn unique<'a>(
    ctx: &Ctx,
    path: &Path,
    items: &'a [Value],
    key: &str,
    what: &str,
) -> Result<Vec<&'a str>, BuildError> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let name = string(ctx, path, item, key, &format!("{what} {i}"))?;
        if !seen.insert(name) {
            return Err(ctx.err(path, format!("{what} `{name}` appears twice")));
        }
        out.push(name);
    }
    Ok(out)
}
