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

fn architecture(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
    let v = ctx.json(path)?;
    object(ctx, path, &v)?;
    string(ctx, path, &v, "summary", "architecture")?;
    let components = array(ctx, path, &v, "components")?;
    unique(ctx, path, components, "name", "component")?;
    for c in components {
        for key in ["responsibilities", "invariants"] {
            if !c.get(key).is_none_or(Value::is_array) {
                return Err(ctx.err(
                    path,
                    format!("component `{}`: `{key}` must be an array", c["name"]),
                ));
            }
        }
    }
    Ok(v)
}

/// Supported `format_version`s of the SDK exporter's output.
const SDK_EXPORT_VERSIONS: &[u64] = &[1];

fn sdk_export(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
    let mut v = ctx.json(path)?;
    object(ctx, path, &v)?;
    if v.get("format").and_then(Value::as_str) != Some("mcp-sdk-export") {
        return Err(ctx.err(
            path,
            "`format` must be \"mcp-sdk-export\" (an SDK exporter's output)",
        ));
    }
    let version = v.get("format_version").and_then(Value::as_u64).unwrap_or(0);
    if !SDK_EXPORT_VERSIONS.contains(&version) {
        return Err(ctx.err(
            path,
            format!("unsupported export format_version {version} (supported: 1)"),
        ));
    }
    if let Some(m) = v.as_object_mut() {
        // Provenance of the export file itself, not SDK metadata.
        m.remove("format");
        m.remove("format_version");
        m.remove("exporter");
    }
    for key in ["project", "title", "version", "summary", "exported_crate"] {
        string(ctx, path, &v, key, "export")?;
    }
    unique(ctx, path, array(ctx, path, &v, "crates")?, "name", "crate")?;
    let modules = array(ctx, path, &v, "modules")?;
    unique(ctx, path, modules, "module", "module")?;
    for m in modules {
        let name = string(ctx, path, m, "module", "module")?;
        let at = format!("module `{name}`");
        string(ctx, path, m, "path", &at)?;
        string(ctx, path, m, "summary", &at)?;
        let stability = string(ctx, path, m, "stability", &at)?;
        if !["stable", "experimental", "internal"].contains(&stability) {
            return Err(ctx.err(path, format!("{at}: unknown stability `{stability}`")));
        }
        for item in array(ctx, path, m, "items")? {
            let item_name = string(ctx, path, item, "name", &at)?;
            string(ctx, path, item, "kind", &format!("{at} item `{item_name}`"))?;
            if let Some(schema) = item.get("schema").and_then(Value::as_str)
                && !ctx.schema_names.is_empty()
                && !ctx.schema_names.contains(schema)
            {
                return Err(ctx.err(
                    path,
                    format!("{at} item `{item_name}` names unknown schema `{schema}`"),
                ));
            }
        }
    }
    Ok(v)
}

fn registry_names(ctx: &Ctx, path: &Path) -> Result<BTreeSet<String>, BuildError> {
    let v = ctx.json(path)?;
    Ok(unique(
        ctx,
        path,
        array(ctx, path, &v, "schemas")?,
        "name",
        "schema",
    )?
    .into_iter()
    .map(str::to_string)
    .collect())
}

fn schema_registry(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
    let v = ctx.json(path)?;
    let listed = array(ctx, path, &v, "schemas")?;
    let mut index = Vec::new();
    let mut schemas = Vec::new();
    for entry in listed {
        let name = string(ctx, path, entry, "name", "schema")?;
        let stability = string(ctx, path, entry, "stability", &format!("schema `{name}`"))?;
        let file = ctx.schemas_dir.join(format!("{name}.schema.json"));
        let schema = ctx.json(&file)?;
        if let Err(e) = jsonschema::meta::validate(&schema) {
            return Err(ctx.err(&file, format!("not a valid JSON Schema: {e}")));
        }
        let title = string(ctx, &file, &schema, "title", "schema")?.to_string();
        let id = string(ctx, &file, &schema, "$id", "schema")?.to_string();
        index
            .push(json!({ "name": name, "title": title, "stability": stability, "schema_id": id }));
        schemas.push(json!({ "name": name, "title": title, "stability": stability, "schema_id": id, "schema": schema }));
    }
    // Every schema file is published: one that is not listed is a mistake, not a secret.
    let entries = std::fs::read_dir(&ctx.schemas_dir).map_err(|e| BuildError::Read {
        file: ctx.show(&ctx.schemas_dir),
        reason: e.to_string(),
    })?;
    let mut files = BTreeSet::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".schema.json") {
            files.insert(stem.to_string());
        }
    }
    if let Some(missing) = files.difference(&ctx.schema_names).next() {
        return Err(ctx.err(
            path,
            format!("{missing}.schema.json is in the schemas directory but not in the registry"),
        ));
    }
    Ok(json!({ "index": index, "schemas": schemas }))
}

fn compile(ctx: &Ctx, path: &Path, schema: &Value) -> Result<jsonschema::Validator, BuildError> {
    jsonschema::draft202012::options()
        .build(schema)
        .map_err(|e| ctx.err(path, format!("schema does not compile: {e}")))
}

fn validation_errors(validator: &jsonschema::Validator, v: &Value) -> Option<String> {
    let errors: Vec<String> = validator
        .iter_errors(v)
        .take(3)
        .map(|e| format!("at `{}`: {e}", e.instance_path()))
        .collect();
    (!errors.is_empty()).then(|| errors.join("; "))
}

fn manifest_contract(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
    let v = ctx.json(path)?;
    let at = "manifest contract";
    let kind = string(ctx, path, &v, "manifest_kind", at)?;
    string(ctx, path, &v, "manifest_path", at)?;
    let schema_file = string(ctx, path, &v, "schema", at)?;
    if skill_catalog::check_bundle_path(schema_file).is_err() {
        return Err(ctx.err(path, "`schema` must be a relative file name"));
    }
    let schema_path = path.parent().unwrap_or(Path::new(".")).join(schema_file);
    let schema = ctx.json(&schema_path)?;
    if let Err(e) = jsonschema::meta::validate(&schema) {
        return Err(ctx.err(&schema_path, format!("not a valid JSON Schema: {e}")));
    }
    if schema.get("additionalProperties") != Some(&Value::Bool(false)) {
        return Err(ctx.err(&schema_path, "a manifest schema must refuse unknown fields"));
    }
    let validator = compile(ctx, &schema_path, &schema)?;
    let example = v
        .get("example")
        .ok_or_else(|| ctx.err(path, "`example` is missing"))?;
    if let Some(e) = validation_errors(&validator, example) {
        return Err(ctx.err(
            path,
            format!("the {kind} example does not match its schema: {e}"),
        ));
    }
    array(ctx, path, &v, "runtime")?;
    let mut content = v.clone();
    content["schema"] = schema;
    Ok(content)
}

fn templates(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
    let v = ctx.json(path)?;
    let list = array(ctx, path, &v, "templates")?;
    unique(ctx, path, list, "name", "template")?;
    let mut index = Vec::new();
    for t in list {
        let name = string(ctx, path, t, "name", "template")?;
        let at = format!("template `{name}`");
        for key in ["title", "intended_use", "description"] {
            string(ctx, path, t, key, &at)?;
        }
        let files = array(ctx, path, t, "required_files")?;
        if files.is_empty() {
            return Err(ctx.err(path, format!("{at}: required_files must not be empty")));
        }
        for f in files {
            string(ctx, path, f, "path", &at)?;
            string(ctx, path, f, "purpose", &at)?;
        }
        for s in array(ctx, path, t, "related_schemas")? {
            let s = s.as_str().unwrap_or_default();
            if !ctx.schema_names.contains(s) {
                return Err(ctx.err(path, format!("{at}: unknown related schema `{s}`")));
            }
        }
        array(ctx, path, t, "steps")?;
        index.push(json!({ "name": name, "title": t["title"], "intended_use": t["intended_use"] }));
    }
    Ok(json!({ "index": index, "templates": list }))
}

fn capabilities(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
    let mut v = ctx.json(path)?;
    let classes = array(ctx, path, &v, "capability_classes")?.clone();
    let names: BTreeSet<&str> = unique(ctx, path, &classes, "name", "capability class")?
        .into_iter()
        .collect();
    for entry in ctx.contracts.all() {
        let c = &entry.contract;
        if !names.contains(c.required_capability.as_str()) {
            return Err(ctx.err(
                path,
                format!(
                    "{}: capability `{}` is not a listed capability class",
                    c.tool_id, c.required_capability
                ),
            ));
        }
    }
    for p in &ctx.profiles.profiles {
        if let Some(cap) = p.capabilities.iter().find(|c| !names.contains(c.as_str())) {
            return Err(ctx.err(
                path,
                format!(
                    "profile {} grants `{cap}`, which is not a listed capability class",
                    p.name
                ),
            ));
        }
    }
    let mut out = Vec::new();
    for mut class in classes {
        let name = class["name"].as_str().unwrap_or_default().to_string();
        if class.get("tools").is_some() {
            return Err(ctx.err(
                path,
                format!("capability class `{name}`: `tools` is derived from the contracts; do not list it"),
            ));
        }
        for id in class
            .get("descriptor_ids")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = id.as_str().unwrap_or_default();
            if !ctx.ids.contains(id) {
                return Err(ctx.err(
                    path,
                    format!("capability class `{name}` names unknown descriptor `{id}`"),
                ));
            }
        }
        let tools: Vec<&str> = ctx
            .contracts
            .all()
            .iter()
            .filter(|c| c.contract.required_capability == name)
            .map(|c| c.contract.tool_id.as_str())
            .collect();
        class["tools"] = json!(tools);
        out.push(class);
    }
    v["capability_classes"] = json!(out);
    v["profiles"] =
        serde_json::to_value(&ctx.profiles.profiles).map_err(|e| ctx.err(path, e.to_string()))?;
    Ok(v)
}

fn planes(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
    let mut v = ctx.json(path)?;
    let planes = array(ctx, path, &v, "planes")?.clone();
    let names: BTreeSet<&str> = unique(ctx, path, &planes, "name", "plane")?
        .into_iter()
        .collect();
    for entry in ctx.contracts.all() {
        let c = &entry.contract;
        if !names.contains(c.plane.as_str()) {
            return Err(ctx.err(
                path,
                format!("{}: plane `{}` is not listed", c.tool_id, c.plane),
            ));
        }
    }
    for p in &ctx.profiles.profiles {
        if !names.contains(p.plane.as_str()) {
            return Err(ctx.err(
                path,
                format!("profile {}: plane `{}` is not listed", p.name, p.plane),
            ));
        }
    }
    let mut out = Vec::new();
    for mut plane in planes {
        let name = plane["name"].as_str().unwrap_or_default().to_string();
        if plane.get("tools").is_some() || plane.get("profiles").is_some() {
            return Err(ctx.err(
                path,
                format!("plane `{name}`: `tools` and `profiles` are derived; do not list them"),
            ));
        }
        let tools: Vec<&str> = ctx
            .contracts
            .all()
            .iter()
            .filter(|c| c.contract.plane == name)
            .map(|c| c.contract.tool_id.as_str())
            .collect();
        let profiles: Vec<&str> = ctx
            .profiles
            .profiles
            .iter()
            .filter(|p| p.plane == name)
            .map(|p| p.name.as_str())
            .collect();
        plane["tools"] = json!(tools);
        plane["profiles"] = json!(profiles);
        out.push(plane);
    }
    v["planes"] = json!(out);
    Ok(v)
}

fn system_model(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
    let v = ctx.json(path)?;
    let kinds: BTreeSet<&str> = unique(
        ctx,
        path,
        array(ctx, path, &v, "object_kinds")?,
        "kind",
        "object kind",
    )?
    .into_iter()
    .collect();
    let relations = array(ctx, path, &v, "relation_kinds")?;
    unique(ctx, path, relations, "name", "relation kind")?;
    for r in relations {
        for pair in array(ctx, path, r, "pairs")? {
            for end in ["from", "to"] {
                let k = pair.get(end).and_then(Value::as_str).unwrap_or_default();
                if !kinds.contains(k) {
                    return Err(ctx.err(
                        path,
                        format!(
                            "relation `{}` names undeclared object kind `{k}`",
                            r["name"]
                        ),
                    ));
                }
            }
        }
    }
    if let Some(p) = v.get("projection_classes") {
        if let Some(items) = p.as_array() {
            unique(ctx, path, items, "name", "projection class")?;
        } else {
            return Err(ctx.err(path, "`projection_classes` must be an array"));
        }
    }
    Ok(v)
}

/// `*.json` manifests directly in `dir`, sorted by file name, each checked against the schema
/// of the manifest contract `manifest` names. Returns `(file, manifest)`.
fn manifests(ctx: &Ctx, dir: &Path, e: &Entry) -> Result<Vec<(PathBuf, Value)>, BuildError> {
    let contract_id = e.manifest.as_deref().ok_or_else(|| {
        ctx.err(
            dir,
            format!(
                "descriptor `{}` needs `manifest` (a manifest contract id)",
                e.id
            ),
        )
    })?;
    let contract = ctx.built.get(contract_id).ok_or_else(|| {
        ctx.err(
            dir,
            format!(
                "`{contract_id}` must be a manifest contract declared before `{}`",
                e.id
            ),
        )
    })?;
    let validator = compile(ctx, dir, &contract["schema"])?;
    let entries = std::fs::read_dir(dir).map_err(|err| BuildError::Read {
        file: ctx.show(dir),
        reason: err.to_string(),
    })?;
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    let mut names = BTreeSet::new();
    for file in files {
        let v = ctx.json(&file)?;
        if let Some(err) = validation_errors(&validator, &v) {
            return Err(ctx.err(
                &file,
                format!("does not match the {contract_id} schema: {err}"),
            ));
        }
        let name = v["name"].as_str().unwrap_or_default().to_string();
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if stem != name {
            return Err(ctx.err(&file, format!("file name must be `{name}.json`")));
        }
        if !names.insert(name.clone()) {
            return Err(ctx.err(&file, format!("`{name}` appears twice")));
        }
        out.push((file, v));
    }
    Ok(out)
}

fn manifest_sha(v: &Value) -> String {
    skill_catalog::sha256_hex(&mcp_shared::canonical::to_vec(v))
}

fn skill_registry(ctx: &Ctx, dir: &Path, e: &Entry) -> Result<Value, BuildError> {
    let mut skills = Vec::new();
    for (file, m) in manifests(ctx, dir, e)? {
        let tools: Vec<&str> = m["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["tool_id"].as_str())
            .collect();
        for t in &tools {
            if ctx.contracts.get(t).is_none() {
                return Err(ctx.err(&file, format!("tool `{t}` has no contract")));
            }
        }
        for cap in m["capabilities"].as_array().into_iter().flatten() {
            let cap = cap.as_str().unwrap_or_default();
            if !tools.contains(&cap) {
                return Err(ctx.err(&file, format!("capability `{cap}` is not one of its tools")));
            }
        }
        skills.push(json!({
            "name": m["name"], "version": m["version"], "title": m.get("title").cloned().unwrap_or(m["name"].clone()),
            "description": m.get("description").cloned().unwrap_or(json!("")),
            "plane": m["plane"], "environments": m.get("environments").cloned().unwrap_or(json!([])),
            "capabilities": m["capabilities"], "tools": tools,
            "manifest_sha256": manifest_sha(&m),
        }));
    }
    Ok(json!({ "skills": skills }))
}

fn scenario_registry(ctx: &Ctx, dir: &Path, e: &Entry) -> Result<Value, BuildError> {
    let known_skills: BTreeSet<String> = ctx
        .built
        .values()
        .filter_map(|c| c.get("skills")?.as_array())
        .flatten()
        .filter(|s| s.get("manifest_sha256").is_some())
        .filter_map(|s| s["name"].as_str().map(str::to_string))
        .collect();
    let mut scenarios = Vec::new();
    for (file, m) in manifests(ctx, dir, e)? {
        let profile = m["capability_profile"].as_str().unwrap_or_default();
        let Some(p) = ctx.profiles.get(profile) else {
            return Err(ctx.err(&file, format!("unknown capability profile `{profile}`")));
        };
        let mut tools: Vec<&str> = Vec::new();
        for step in m["steps"].as_array().into_iter().flatten() {
            let t = step["tool_id"].as_str().unwrap_or_default();
            let Some(c) = ctx.contracts.get(t) else {
                return Err(ctx.err(
                    &file,
                    format!("step `{}`: tool `{t}` has no contract", step["id"]),
                ));
            };
            if !p.capabilities.contains(&c.contract.required_capability) {
                return Err(ctx.err(
                    &file,
                    format!(
                        "step `{}`: profile {profile} does not grant `{}`",
                        step["id"], c.contract.required_capability
                    ),
                ));
            }
            if !tools.contains(&t) {
                tools.push(t);
            }
        }
        let skills: Vec<&str> = m
            .get("skills")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s["name"].as_str())
            .collect();
        for s in &skills {
            if !known_skills.contains(*s) {
                return Err(ctx.err(
                    &file,
                    format!("needs skill `{s}`, which no public skill registry lists"),
                ));
            }
        }
        scenarios.push(json!({
            "name": m["name"], "version": m["version"], "title": m["title"],
            "description": m.get("description").cloned().unwrap_or(json!("")),
            "capability_profile": profile, "skills": skills, "tools": tools,
            "manifest_sha256": manifest_sha(&m),
        }));
    }
    Ok(json!({ "scenarios": scenarios }))
}

/// Every file below `dir` (relative `/`-separated paths), refusing symbolic links.
fn walk(
    ctx: &Ctx,
    dir: &Path,
    rel: &str,
    out: &mut Vec<(String, PathBuf)>,
) -> Result<(), BuildError> {
    let entries = std::fs::read_dir(dir).map_err(|e| BuildError::Read {
        file: ctx.show(dir),
        reason: e.to_string(),
    })?;
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry
            .file_name()
            .to_str()
            .map(str::to_string)
            .ok_or_else(|| ctx.err(&path, "file name is not UTF-8"))?;
        let child = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let kind = entry
            .file_type()
            .map_err(|e| ctx.err(&path, e.to_string()))?;
        if kind.is_symlink() {
            return Err(ctx.err(&path, "symbolic links are not allowed in the skill tree"));
        } else if kind.is_dir() {
            walk(ctx, &path, &child, out)?;
        } else {
            out.push((child, path));
        }
    }
    Ok(())
}

fn skill_catalog_content(ctx: &Ctx, dir: &Path) -> Result<Value, BuildError> {
    let mut files = Vec::new();
    walk(ctx, dir, "", &mut files)?;
    let mut skills = Vec::new();
    for (rel, path) in files {
        let bundle_path = format!("skills/{rel}");
        let bytes = std::fs::read(&path).map_err(|e| BuildError::Read {
            file: ctx.show(&path),
            reason: e.to_string(),
        })?;
        let entry =
            skill_catalog::skill_entry(&bundle_path, &bytes).map_err(|r| ctx.err(&path, r))?;
        skills.push(entry);
    }
    let content = skill_catalog::catalog_content(skills).map_err(|r| ctx.err(dir, r))?;
    serde_json::to_value(content).map_err(|e| ctx.err(dir, e.to_string()))
}
