//! `mcp-root descriptors build SOURCE_DIR -o ARTIFACT_DIR`: the descriptor build pipeline.
//!
//! A source tree has a `sources.toml` manifest (the freshness defaults, where the project's
//! contracts, schemas and profiles live, and one `[[descriptor]]` entry per artifact) and one
//! source per artifact. Each descriptor class has a normalizer that reads its source, checks
//! it, and derives what must never be written by hand (which tools each plane and capability
//! class has, the schema bodies, the registry summaries, the skill catalog's hashes). The
//! result is checked as a whole set exactly as root checks a publish, then written as
//! `<descriptor_id>.json`.
//!
//! Reproducible: `generated_at` comes from the manifest (the source set's release instant),
//! not from the wall clock, so the same sources give byte-identical artifacts; derived lists
//! are sorted. The build never runs project code: an SDK export is a JSON file an exporter
//! produced, and sources are only parsed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use mcp_shared::contract::Stability;
use mcp_shared::descriptor::{Descriptor, Freshness, content_hash};
use mcp_shared::profile::ProfileRegistry;
use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::catalog::ContractRegistry;
use crate::skill_catalog;

mod classes;
mod skills;

use classes::*;
use skills::*;

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
    Set(#[from] super::SetError),
    #[error("{dir}: cannot write artifacts: {reason}")]
    Write { dir: String, reason: String },
}

/// The manifest of a source tree.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    build: BuildSection,
    inputs: Inputs,
    descriptor: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BuildSection {
    /// RFC 3339: when this source set was released.
    generated_at: String,
    cache_ttl_sec: u64,
    source_kind: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Inputs {
    schemas_dir: String,
    contracts_dir: String,
    profiles_file: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: String,
    class: String,
    title: String,
    source_ref: String,
    /// File (or directory, for registries and the skill catalog) inside the source tree.
    source: String,
    #[serde(default)]
    stability: Option<Stability>,
    #[serde(default)]
    cache_ttl_sec: Option<u64>,
    /// For registries: the descriptor id of the manifest contract their entries follow.
    #[serde(default)]
    manifest: Option<String>,
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
struct Ctx {
    root: PathBuf,
    contracts: ContractRegistry,
    profiles: ProfileRegistry,
    schemas_dir: PathBuf,
    /// Schema names listed by the schema registry source, if the tree has one.
    schema_names: BTreeSet<String>,
    /// Ids of every descriptor the manifest declares.
    ids: BTreeSet<String>,
    /// Contents built so far, by id.
    built: BTreeMap<String, Value>,
}

impl Ctx {
    /// `path` as shown in messages: relative to the source tree when inside it.
    fn show(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    fn err(&self, path: &Path, reason: impl Into<String>) -> BuildError {
        BuildError::Source {
            file: self.show(path),
            reason: reason.into(),
        }
    }

    fn read(&self, path: &Path) -> Result<String, BuildError> {
        std::fs::read_to_string(path).map_err(|e| BuildError::Read {
            file: self.show(path),
            reason: e.to_string(),
        })
    }

    fn json(&self, path: &Path) -> Result<Value, BuildError> {
        serde_json::from_str(&self.read(path)?)
            .map_err(|e| self.err(path, format!("not JSON: {e}")))
    }
}

/// Builds every artifact a source tree declares.
pub fn build(source_dir: &Path, opts: &BuildOptions) -> Result<Vec<Descriptor>, BuildError> {
    let manifest_path = source_dir.join("sources.toml");
    let text = std::fs::read_to_string(&manifest_path).map_err(|e| BuildError::Read {
        file: "sources.toml".into(),
        reason: e.to_string(),
    })?;
    let manifest: Manifest = toml::from_str(&text).map_err(|e| BuildError::Manifest {
        file: "sources.toml".into(),
        reason: e.to_string(),
    })?;
    let bad_manifest = |reason: String| BuildError::Manifest {
        file: "sources.toml".into(),
        reason,
    };
    let generated_at = match opts.generated_at {
        Some(t) => t,
        None => mcp_shared::time::parse(&manifest.build.generated_at)
            .map_err(|e| bad_manifest(format!("build.generated_at must be RFC 3339: {e}")))?,
    };
    // Whole seconds, UTC: the artifacts' timestamps read the same everywhere.
    let generated_at = generated_at
        .to_offset(time::UtcOffset::UTC)
        .replace_nanosecond(0)
        .unwrap_or(generated_at);
    if manifest.build.source_kind.trim().is_empty() {
        return Err(bad_manifest("build.source_kind must not be empty".into()));
    }

    let contracts_dir = source_dir.join(&manifest.inputs.contracts_dir);
    let contracts =
        ContractRegistry::load(Some(&contracts_dir)).map_err(|e| BuildError::Source {
            file: e.file,
            reason: e.reason,
        })?;
    let profiles_file = source_dir.join(&manifest.inputs.profiles_file);
    let profiles =
        crate::catalog::load_profiles(Some(&profiles_file)).map_err(|e| BuildError::Source {
            file: e.file,
            reason: e.reason,
        })?;
    let mut ids = BTreeSet::new();
    for e in &manifest.descriptor {
        if !ids.insert(e.id.clone()) {
            return Err(bad_manifest(format!(
                "descriptor `{}` is declared twice",
                e.id
            )));
        }
        if !CLASSES.contains(&e.class.as_str()) {
            return Err(bad_manifest(format!(
                "descriptor `{}`: unknown class `{}` (known: {})",
                e.id,
                e.class,
                CLASSES.join(", ")
            )));
        }
        if !super::safe_source_ref(&e.source_ref) {
            return Err(bad_manifest(format!(
                "descriptor `{}`: source_ref `{}` must be repository-relative",
                e.id, e.source_ref
            )));
        }
        if skill_catalog::check_bundle_path(&e.source).is_err() {
            return Err(bad_manifest(format!(
                "descriptor `{}`: source `{}` must be a relative path inside the source tree",
                e.id, e.source
            )));
        }
    }
    let mut ctx = Ctx {
        root: source_dir.to_path_buf(),
        contracts,
        profiles,
        schemas_dir: source_dir.join(&manifest.inputs.schemas_dir),
        schema_names: BTreeSet::new(),
        ids,
        built: BTreeMap::new(),
    };
    if let Some(e) = manifest
        .descriptor
        .iter()
        .find(|e| e.class == "schema_registry")
    {
        let path = source_dir.join(&e.source);
        ctx.schema_names = registry_names(&ctx, &path)?;
    }

    let mut out = Vec::new();
    for e in &manifest.descriptor {
        let path = source_dir.join(&e.source);
        let content = match e.class.as_str() {
            "architecture_descriptor" => architecture(&ctx, &path)?,
            "sdk_export_metadata" => sdk_export(&ctx, &path)?,
            "schema_registry" => schema_registry(&ctx, &path)?,
            "manifest_contract" => manifest_contract(&ctx, &path)?,
            "template_catalog" => templates(&ctx, &path)?,
            "capability_profile_registry" => capabilities(&ctx, &path)?,
            "mcp_plane_registry" => planes(&ctx, &path)?,
            "system_model_vocabulary" => system_model(&ctx, &path)?,
            "public_skill_registry" => skill_registry(&ctx, &path, e)?,
            "public_scenario_registry" => scenario_registry(&ctx, &path, e)?,
            _ => skill_catalog_content(&ctx, &path)?,
        };
        ctx.built.insert(e.id.clone(), content.clone());
        let ttl = e.cache_ttl_sec.unwrap_or(manifest.build.cache_ttl_sec);
        let fresh_until = generated_at
            .checked_add(time::Duration::seconds(
                i64::try_from(ttl).unwrap_or(i64::MAX),
            ))
            .ok_or_else(|| {
                bad_manifest(format!("descriptor `{}`: cache_ttl_sec is too large", e.id))
            })?;
        out.push(Descriptor {
            freshness: Freshness {
                descriptor_id: e.id.clone(),
                source_kind: manifest.build.source_kind.clone(),
                source_ref: e.source_ref.clone(),
                generated_at,
                fresh_until,
                cache_ttl_sec: ttl,
                stability: e.stability.unwrap_or(Stability::Stable),
                content_hash: content_hash(&content),
            },
            class: e.class.clone(),
            title: e.title.clone(),
            content,
        });
    }
    // The same whole-set check root applies to a publish.
    super::validate(
        out.iter()
            .map(|d| {
                (
                    format!("{}.json", d.freshness.descriptor_id),
                    serde_json::to_value(d).unwrap_or_default(),
                )
            })
            .collect(),
        &ctx.contracts,
        skill_catalog::DEFAULT_SCHEME,
    )?;
    Ok(out)
}

/// The bytes of one artifact file: pretty JSON and a newline.
pub fn artifact_bytes(d: &Descriptor) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(d).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// Writes `<id>.json` for every descriptor into `dir` and removes other `*.json` files there
/// (the artifact directory is the build's output, nothing else). Returns the files written.
pub fn write_artifacts(dir: &Path, descriptors: &[Descriptor]) -> Result<Vec<PathBuf>, BuildError> {
    let werr = |reason: String| BuildError::Write {
        dir: dir.display().to_string(),
        reason,
    };
    std::fs::create_dir_all(dir).map_err(|e| werr(e.to_string()))?;
    let mut written = Vec::new();
    let keep: BTreeSet<String> = descriptors
        .iter()
        .map(|d| format!("{}.json", d.freshness.descriptor_id))
        .collect();
    for d in descriptors {
        let path = dir.join(format!("{}.json", d.freshness.descriptor_id));
        let tmp = dir.join(format!(".{}.json.tmp", d.freshness.descriptor_id));
        std::fs::write(&tmp, artifact_bytes(d)).map_err(|e| werr(e.to_string()))?;
        std::fs::rename(&tmp, &path).map_err(|e| werr(e.to_string()))?;
        written.push(path);
    }
    for entry in std::fs::read_dir(dir).map_err(|e| werr(e.to_string()))? {
        let path = entry.map_err(|e| werr(e.to_string()))?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.ends_with(".json") && path.is_file() && !keep.contains(&name) {
            std::fs::remove_file(&path).map_err(|e| werr(e.to_string()))?;
        }
    }
    Ok(written)
}

/// How `dir` differs from `descriptors` (missing, different or surplus artifact files).
pub fn differences(dir: &Path, descriptors: &[Descriptor]) -> Vec<String> {
    let mut out = Vec::new();
    let mut expected = BTreeSet::new();
    for d in descriptors {
        let name = format!("{}.json", d.freshness.descriptor_id);
        match std::fs::read(dir.join(&name)) {
            Ok(bytes) if bytes == artifact_bytes(d) => {}
            Ok(_) => out.push(format!("{name}: differs")),
            Err(_) => out.push(format!("{name}: missing")),
        }
        expected.insert(name);
    }
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".json") && !expected.contains(&name) {
            out.push(format!("{name}: not produced by the build"));
        }
    }
    out
}

// ---- normalizers ----------------------------------------------------------------------------

fn object<'a>(
    ctx: &Ctx,
    path: &Path,
    v: &'a Value,
) -> Result<&'a serde_json::Map<String, Value>, BuildError> {
    v.as_object()
        .ok_or_else(|| ctx.err(path, "must be a JSON object"))
}

fn array<'a>(
    ctx: &Ctx,
    path: &Path,
    v: &'a Value,
    key: &str,
) -> Result<&'a Vec<Value>, BuildError> {
    v.get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| ctx.err(path, format!("`{key}` must be an array")))
}

fn string<'a>(
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
fn unique<'a>(
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
