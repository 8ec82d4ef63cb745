//! The normalizers of the descriptor classes read from one source file each: architecture,
//! SDK export, schema registry, manifest contract, templates, capabilities, planes, system
//! model.

use crate::skill_catalog;
use serde_json::Value;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::Path;

use super::inputs::*;

pub(super) fn architecture(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
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

pub(super) fn sdk_export(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
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

pub(super) fn registry_names(ctx: &Ctx, path: &Path) -> Result<BTreeSet<String>, BuildError> {
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

pub(super) fn schema_registry(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
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

pub(super) fn compile(
    ctx: &Ctx,
    path: &Path,
    schema: &Value,
) -> Result<jsonschema::Validator, BuildError> {
    jsonschema::draft202012::options()
        .build(schema)
        .map_err(|e| ctx.err(path, format!("schema does not compile: {e}")))
}

pub(super) fn validation_errors(validator: &jsonschema::Validator, v: &Value) -> Option<String> {
    let errors: Vec<String> = validator
        .iter_errors(v)
        .take(3)
        .map(|e| format!("at `{}`: {e}", e.instance_path()))
        .collect();
    (!errors.is_empty()).then(|| errors.join("; "))
}

pub(super) fn manifest_contract(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
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

pub(super) fn templates(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
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

pub(super) fn capabilities(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
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

pub(super) fn planes(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
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

pub(super) fn system_model(ctx: &Ctx, path: &Path) -> Result<Value, BuildError> {
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
