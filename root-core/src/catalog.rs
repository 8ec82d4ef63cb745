//! Loading the data that defines root's surface: tool contracts, descriptors and capability
//! profiles, from configured directories or from the copies built into the binary.
//!
//! Invariant: a malformed file stops start-up with the file name and the reason; nothing is
//! half-loaded.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use include_dir::{Dir, include_dir};
use mcp_shared::contract::{RoutingClass, SideEffectClass, ToolContract};
use mcp_shared::descriptor::{Descriptor, content_hash};
use mcp_shared::profile::ProfileRegistry;

static BUILTIN_CONTRACTS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../schemas/tools");
static BUILTIN_DESCRIPTORS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../config/descriptors");
const BUILTIN_PROFILES: &str = include_str!("../../config/profiles.toml");
const BUILTIN_DESTRUCTIVE: &str = include_str!("../../config/destructive.toml");

/// Every root adapter name a contract may use (`call::executors` runs each).
pub(crate) const ROOT_EXECUTORS: &[&str] = &[
    "root.access_tokens.list",
    "root.access_tokens.issue",
    "root.access_tokens.revoke",
    "root.logs",
    "root.subnet.analysis_health",
    "root.subnet.timeline",
    "root.subnet.diagnostics",
    "root.retained.memory_profiles",
    "root.fleet.read",
    "root.fleet.write",
    "root.fleet.get",
];

/// Every root adapter a routed read may name to answer while its target is offline (a
/// contract's `offline`; `call::executors::evidence` runs each).
pub(crate) const ROOT_OFFLINE_EXECUTORS: &[&str] = &[
    "root.evidence.list_sessions",
    "root.evidence.get_session",
    "root.evidence.list_incidents",
    "root.evidence.list_artifacts",
    "root.evidence.get_artifact",
];

/// What root serves and governs by: the tool contracts, the capability profiles and the
/// destructive-action rules.
pub struct Catalog {
    pub contracts: Arc<ContractRegistry>,
    pub profiles: Arc<mcp_shared::profile::ProfileRegistry>,
    pub destructive: DestructiveRules,
}

/// Why a catalog file was refused.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {reason}")]
pub struct CatalogError {
    pub(crate) file: String,
    pub(crate) reason: String,
}

fn err(file: impl Into<String>, reason: impl Into<String>) -> CatalogError {
    CatalogError {
        file: file.into(),
        reason: reason.into(),
    }
}

/// `(file name, contents)` of every `*.json` file in `dir`, or of the built-in directory.
fn json_files(
    dir: Option<&Path>,
    builtin: &Dir<'_>,
) -> Result<Vec<(String, String)>, CatalogError> {
    let mut out = Vec::new();
    match dir {
        Some(dir) => {
            let entries = std::fs::read_dir(dir)
                .map_err(|e| err(dir.display().to_string(), e.to_string()))?;
            for entry in entries {
                let entry = entry.map_err(|e| err(dir.display().to_string(), e.to_string()))?;
                let path = entry.path();
                if path.extension().and_then(|e| e.to_str()) != Some("json") {
                    continue;
                }
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| err(path.display().to_string(), e.to_string()))?;
                out.push((path.display().to_string(), text));
            }
        }
        None => {
            for f in builtin.files() {
                if f.path().extension().and_then(|e| e.to_str()) != Some("json") {
                    continue;
                }
                let text = f
                    .contents_utf8()
                    .ok_or_else(|| err(f.path().display().to_string(), "not UTF-8"))?;
                out.push((
                    format!("(built-in) {}", f.path().display()),
                    text.to_string(),
                ));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn file_stem(name: &str) -> &str {
    let base = name.rsplit(['/', ' ']).next().unwrap_or(name);
    base.strip_suffix(".json").unwrap_or(base)
}

/// A contract with its compiled validators.
pub struct ContractEntry {
    pub contract: ToolContract,
    pub input: jsonschema::Validator,
    pub output: jsonschema::Validator,
    /// The contract's redaction patterns, compiled once.
    pub redaction_patterns: Vec<regex::Regex>,
}

/// Every tool contract, by id and in stable (id) order.
pub struct ContractRegistry {
    by_id: HashMap<String, Arc<ContractEntry>>,
    ordered: Vec<Arc<ContractEntry>>,
}

impl ContractRegistry {
    pub fn load(dir: Option<&Path>) -> Result<ContractRegistry, CatalogError> {
        let mut map = BTreeMap::new();
        for (file, text) in json_files(dir, &BUILTIN_CONTRACTS)? {
            let contract: ToolContract = serde_json::from_str(&text)
                .map_err(|e| err(&file, format!("not a tool contract: {e}")))?;
            let entry = Self::check(&file, contract)?;
            if map
                .insert(entry.contract.tool_id.clone(), Arc::new(entry))
                .is_some()
            {
                return Err(err(&file, "duplicate tool_id"));
            }
        }
        // Cross-contract rules: a proposing tool previews an existing write; approvals
        // gate writes only.
        for entry in map.values() {
            let c = &entry.contract;
            let file = format!("{}.json", c.tool_id);
            if c.requires_approval && c.routing != RoutingClass::OperationalWrite {
                return Err(err(
                    &file,
                    "requires_approval is only for operational_write tools",
                ));
            }
            if let Some(target) = &c.proposes {
                if c.routing != RoutingClass::OperationalWrite {
                    return Err(err(&file, "a proposing tool must be operational_write"));
                }
                match map.get(target) {
                    Some(t)
                        if t.contract.routing == RoutingClass::OperationalWrite
                            && t.contract.proposes.is_none() => {}
                    Some(_) => {
                        return Err(err(
                            &file,
                            format!(
                                "proposes `{target}`, which is not an operational_write tool that executes"
                            ),
                        ));
                    }
                    None => return Err(err(&file, format!("proposes unknown tool `{target}`"))),
                }
            }
        }
        let ordered: Vec<_> = map.values().cloned().collect();
        Ok(ContractRegistry {
            by_id: map.into_iter().collect(),
            ordered,
        })
    }

    fn check(file: &str, c: ToolContract) -> Result<ContractEntry, CatalogError> {
        if file_stem(file) != c.tool_id {
            return Err(err(file, format!("file name must be `{}.json`", c.tool_id)));
        }
        if c.tool_id.is_empty()
            || !c
                .tool_id
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "._-".contains(ch))
        {
            return Err(err(file, "tool_id must be non-empty [A-Za-z0-9._-]"));
        }
        for (name, schema) in [
            ("input_schema", &c.input_schema),
            ("output_schema", &c.output_schema),
        ] {
            if schema.get("type").and_then(|t| t.as_str()) != Some("object") {
                return Err(err(
                    file,
                    format!("{name} must be an object schema (\"type\": \"object\")"),
                ));
            }
        }
        let input = jsonschema::validator_for(&c.input_schema)
            .map_err(|e| err(file, format!("input_schema does not compile: {e}")))?;
        let output = jsonschema::validator_for(&c.output_schema)
            .map_err(|e| err(file, format!("output_schema does not compile: {e}")))?;
        if c.routing == RoutingClass::DescriptiveCached && c.descriptor.is_none() {
            return Err(err(
                file,
                "a descriptive_cached tool needs a `descriptor` projection",
            ));
        }
        if c.routing == RoutingClass::DescriptiveCached && c.side_effect != SideEffectClass::Read {
            return Err(err(
                file,
                "a descriptive_cached tool must be side_effect `read`",
            ));
        }
        if c.routing == RoutingClass::OperationalWrite && c.side_effect == SideEffectClass::Read {
            return Err(err(
                file,
                "an operational_write tool cannot be side_effect `read`",
            ));
        }
        if let Some(executor) = &c.executor {
            if c.routing == RoutingClass::DescriptiveCached {
                return Err(err(
                    file,
                    "a descriptive_cached tool is answered from its descriptor, not an executor",
                ));
            }
            if !ROOT_EXECUTORS.contains(&executor.as_str()) {
                return Err(err(
                    file,
                    format!(
                        "unknown executor `{executor}` (root has: {})",
                        ROOT_EXECUTORS.join(", ")
                    ),
                ));
            }
        }
        if c.fleet && (c.executor.is_none() || c.skill.is_some() || c.offline.is_some()) {
            return Err(err(
                file,
                "a fleet tool runs on root (an `executor`), for no one target's skill and with no `offline` adapter",
            ));
        }
        if let Some(offline) = &c.offline {
            if c.routing != RoutingClass::OperationalRead || c.executor.is_some() {
                return Err(err(
                    file,
                    "only a routed read (operational_read, no executor) has an `offline` adapter",
                ));
            }
            if !ROOT_OFFLINE_EXECUTORS.contains(&offline.as_str()) {
                return Err(err(
                    file,
                    format!(
                        "unknown offline adapter `{offline}` (root has: {})",
                        ROOT_OFFLINE_EXECUTORS.join(", ")
                    ),
                ));
            }
        }
        if let Some(r) = &c.retain
            && !(r.pointer.is_empty() || r.pointer.starts_with('/'))
        {
            return Err(err(file, "retain.pointer must be a JSON pointer"));
        }
        if c.timeout_ms == 0 || c.concurrency.per_lease == 0 || c.concurrency.per_target == 0 {
            return Err(err(
                file,
                "timeout_ms and concurrency hints must be at least 1",
            ));
        }
        if c.allowed_environments.is_empty() {
            return Err(err(file, "allowed_environments must not be empty"));
        }
        if let Some(r) = &c.retry {
            use mcp_shared::error::ErrorCode;
            if !(1..=5).contains(&r.attempts) || r.backoff_ms >= c.timeout_ms {
                return Err(err(
                    file,
                    "retry.attempts must be 1 to 5 and retry.backoff_ms below timeout_ms",
                ));
            }
            if r.on.is_empty()
                || r.on
                    .iter()
                    .any(|code| !matches!(code, ErrorCode::TargetOffline | ErrorCode::Busy))
            {
                return Err(err(
                    file,
                    "retry.on lists target_offline and/or busy (nothing else is safe to retry)",
                ));
            }
            if c.executor.is_some() || c.routing == RoutingClass::DescriptiveCached {
                return Err(err(file, "only routed tools are retried"));
            }
        }
        let redaction_patterns = c
            .redaction
            .patterns
            .iter()
            .map(|p| {
                regex::Regex::new(p).map_err(|e| err(file, format!("redaction pattern `{p}`: {e}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(ContractEntry {
            contract: c,
            input,
            output,
            redaction_patterns,
        })
    }

    pub fn get(&self, tool_id: &str) -> Option<&Arc<ContractEntry>> {
        self.by_id.get(tool_id)
    }

    /// All contracts in stable order (by tool id).
    pub fn all(&self) -> &[Arc<ContractEntry>] {
        &self.ordered
    }
}

/// Loads descriptors; each file's `content_hash` must match its content.
pub fn load_descriptors(dir: Option<&Path>) -> Result<Vec<Descriptor>, CatalogError> {
    let mut out: Vec<Descriptor> = Vec::new();
    for (file, text) in json_files(dir, &BUILTIN_DESCRIPTORS)? {
        let d: Descriptor = serde_json::from_str(&text)
            .map_err(|e| err(&file, format!("not a descriptor: {e}")))?;
        if file_stem(&file) != d.freshness.descriptor_id {
            return Err(err(
                &file,
                format!("file name must be `{}.json`", d.freshness.descriptor_id),
            ));
        }
        let actual = content_hash(&d.content);
        if actual != d.freshness.content_hash {
            return Err(err(
                &file,
                format!(
                    "content_hash {} does not match content ({actual})",
                    d.freshness.content_hash
                ),
            ));
        }
        if d.freshness.fresh_until < d.freshness.generated_at {
            return Err(err(&file, "fresh_until is before generated_at"));
        }
        if out
            .iter()
            .any(|o| o.freshness.descriptor_id == d.freshness.descriptor_id)
        {
            return Err(err(&file, "duplicate descriptor_id"));
        }
        out.push(d);
    }
    Ok(out)
}

/// Loads capability profiles from a TOML file or the built-in copy.
pub fn load_profiles(file: Option<&Path>) -> Result<ProfileRegistry, CatalogError> {
    let (name, text) = match file {
        Some(p) => (
            p.display().to_string(),
            std::fs::read_to_string(p).map_err(|e| err(p.display().to_string(), e.to_string()))?,
        ),
        None => (
            "(built-in) profiles.toml".to_string(),
            BUILTIN_PROFILES.to_string(),
        ),
    };
    let reg: ProfileRegistry = toml::from_str(&text).map_err(|e| err(&name, e.to_string()))?;
    let mut seen = std::collections::HashSet::new();
    for p in &reg.profiles {
        if !seen.insert(p.name.clone()) {
            return Err(err(&name, format!("duplicate profile `{}`", p.name)));
        }
        if p.capabilities.is_empty() {
            return Err(err(
                &name,
                format!("profile `{}` grants no capability", p.name),
            ));
        }
    }
    Ok(reg)
}

/// One rule of `config/destructive.toml`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DestructiveRuleFile {
    pattern: String,
    reason: String,
    alternatives: Vec<String>,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DestructiveFile {
    rule: Vec<DestructiveRuleFile>,
}

/// A destructive action name and what to do instead.
pub struct DestructiveRule {
    pub(crate) pattern: regex::Regex,
    pub reason: String,
    pub alternatives: Vec<String>,
}

/// Names that are destructive actions: never tools, answered with safe alternatives.
pub struct DestructiveRules(Vec<DestructiveRule>);

impl DestructiveRules {
    pub fn load(file: Option<&Path>) -> Result<DestructiveRules, CatalogError> {
        let (name, text) = match file {
            Some(p) => (
                p.display().to_string(),
                std::fs::read_to_string(p)
                    .map_err(|e| err(p.display().to_string(), e.to_string()))?,
            ),
            None => (
                "(built-in) destructive.toml".to_string(),
                BUILTIN_DESTRUCTIVE.to_string(),
            ),
        };
        let f: DestructiveFile = toml::from_str(&text).map_err(|e| err(&name, e.to_string()))?;
        let rules = f
            .rule
            .into_iter()
            .map(|r| {
                let pattern = regex::Regex::new(&r.pattern)
                    .map_err(|e| err(&name, format!("pattern `{}`: {e}", r.pattern)))?;
                Ok(DestructiveRule {
                    pattern,
                    reason: r.reason,
                    alternatives: r.alternatives,
                })
            })
            .collect::<Result<_, CatalogError>>()?;
        Ok(DestructiveRules(rules))
    }

    /// The rule a tool name falls under, if it names a destructive action.
    pub fn matching(&self, tool_id: &str) -> Option<&DestructiveRule> {
        self.0.iter().find(|r| r.pattern.is_match(tool_id))
    }
}
