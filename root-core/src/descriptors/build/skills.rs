//! The normalizers that read a tree: skill and scenario registries (their manifests) and
//! the platform skill catalog's content.

use crate::skill_catalog;
use serde_json::Value;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::Path;
use std::path::PathBuf;

use super::classes::{compile, validation_errors};
use super::inputs::*;

/// `*.json` manifests directly in `dir`, sorted by file name, each checked against the schema
/// of the manifest contract `manifest` names. Returns `(file, manifest)`.
pub(super) fn manifests(
    ctx: &Ctx,
    dir: &Path,
    e: &Entry,
) -> Result<Vec<(PathBuf, Value)>, BuildError> {
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

pub(super) fn manifest_sha(v: &Value) -> String {
    skill_catalog::sha256_hex(&mcp_shared::canonical::to_vec(v))
}

pub(super) fn skill_registry(ctx: &Ctx, dir: &Path, e: &Entry) -> Result<Value, BuildError> {
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

pub(super) fn scenario_registry(ctx: &Ctx, dir: &Path, e: &Entry) -> Result<Value, BuildError> {
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
pub(super) fn walk(
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

pub(super) fn skill_catalog_content(ctx: &Ctx, dir: &Path) -> Result<Value, BuildError> {
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
    serde_json::to_value(content).map_err(|e| ctx.err(dir, e))
}
