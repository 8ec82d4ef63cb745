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

use crate::catalog::ContractRegistry;
use crate::skill_catalog;

mod classes;
mod inputs;
mod skills;

use classes::*;
use inputs::*;
pub use inputs::{BuildError, BuildOptions, CLASSES};
use skills::*;
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
