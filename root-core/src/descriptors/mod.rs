//! Descriptor sets: what the descriptor cache serves, how a whole set is validated before
//! it is served (at start-up and on publish), and the publish flow (validate → swap in the
//! cache actor → persist, or nothing changes).
//!
//! - [`build`]: `mcp-root descriptors build`, the pipeline from a source tree to artifacts.
//!
//! Invariants: a set is served whole or not at all; every descriptive contract's projection
//! resolves in the served set; a descriptor never carries a filesystem path (its
//! `source_ref` is repository-relative), code, or anything that looks like a credential.

pub mod build;
pub mod cache;
pub mod clock;
pub mod publish;

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use mcp_shared::contract::RoutingClass;
use mcp_shared::descriptor::{Descriptor, content_hash};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::catalog::ContractRegistry;
use crate::skill_catalog::{self, SkillCatalog};

/// Where the served set came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SetSource {
    /// Compiled into the binary (`config/descriptors/`).
    BuiltIn,
    /// Read from `descriptors_dir` at start-up.
    Configured,
    /// Published by an operator (and persisted in the store).
    Published,
}

impl SetSource {
    pub fn as_str(&self) -> &'static str {
        match self {
            SetSource::BuiltIn => "built_in",
            SetSource::Configured => "configured",
            SetSource::Published => "published",
        }
    }
}

/// Provenance of the served set.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SetOrigin {
    pub source: SetSource,
    /// The store's revision of a published set.
    pub revision: Option<i64>,
    /// RFC 3339, for a published set.
    pub(crate) published_at: Option<String>,
    /// `sha256:` over the canonical JSON of `[[descriptor_id, content_hash], …]`.
    pub set_hash: String,
}

/// A validated set of descriptors, served whole.
#[derive(Debug)]
pub struct DescriptorSet {
    pub by_id: BTreeMap<String, Arc<Descriptor>>,
    pub origin: SetOrigin,
    /// The platform skill catalog, when the set carries one.
    pub catalog: Option<Arc<SkillCatalog>>,
    /// Descriptive tools' answers from this set, built on first use (see
    /// [`crate::call`]'s `descriptive_answer`): at most one per tool, selected entry and
    /// freshness state, so bounded by the set's own size.
    pub answers: dashmap::DashMap<AnswerKey, Arc<DescriptiveAnswer>>,
}

/// What identifies a descriptive answer within one set: the tool, the selected entry's key
/// (JSON text; empty without a selector) and the freshness state it reports.
pub(crate) type AnswerKey = (String, String, mcp_shared::descriptor::FreshnessState);

/// A descriptive tool's answer: the projection, already checked against the tool's output
/// schema, its JSON text (the MCP result's structured content as written, and its text
/// content), and that text as a JSON string literal (the text content as written).
#[derive(Debug)]
pub struct DescriptiveAnswer {
    pub value: serde_json::Value,
    pub text: Arc<str>,
    pub text_literal: Arc<str>,
}

impl DescriptorSet {
    pub fn all(&self) -> Vec<Arc<Descriptor>> {
        self.by_id.values().cloned().collect()
    }
}

/// The set's identity: hash over its descriptors' ids and content hashes.
pub(crate) fn set_hash(descriptors: &[Descriptor]) -> String {
    let mut pairs: Vec<(&str, &str)> = descriptors
        .iter()
        .map(|d| {
            (
                d.freshness.descriptor_id.as_str(),
                d.freshness.content_hash.as_str(),
            )
        })
        .collect();
    pairs.sort();
    content_hash(&json!(pairs))
}

/// Why a set of descriptors was refused. Each names the descriptor (or item) and the reason.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    #[error("the set is empty")]
    Empty,
    #[error("{item}: does not match descriptor.schema.json: {errors}")]
    Schema { item: String, errors: String },
    #[error("{item}: not a descriptor: {reason}")]
    Parse { item: String, reason: String },
    #[error("{id}: content_hash {declared} does not match the content ({actual})")]
    Hash {
        id: String,
        declared: String,
        actual: String,
    },
    #[error("{id}: fresh_until is before generated_at")]
    Times { id: String },
    #[error("{id}: appears twice in the set")]
    Duplicate { id: String },
    #[error(
        "{id}: source_ref `{source_ref}` must be a repository-relative reference (no absolute path, `..`, `~`, scheme or backslash)"
    )]
    SourceRef { id: String, source_ref: String },
    #[error(
        "{id}: content at `{pointer}` looks like a secret ({rule}); descriptors never carry secrets"
    )]
    Secret {
        id: String,
        pointer: String,
        rule: &'static str,
    },
    #[error("{tool}: its descriptor `{descriptor}` is not in the set")]
    MissingDescriptor { tool: String, descriptor: String },
    #[error("{tool}: pointer `{pointer}` does not resolve in descriptor `{descriptor}`")]
    Projection {
        tool: String,
        descriptor: String,
        pointer: String,
    },
    #[error(
        "{tool}: `{pointer}` in `{descriptor}` must be an array of objects with a string `{key}`"
    )]
    Select {
        tool: String,
        descriptor: String,
        pointer: String,
        key: String,
    },
    #[error("{id}: platform skill catalog: {reason}")]
    Catalog {
        id: String,
        reason: skill_catalog::CatalogDescriptorError,
    },
    #[error("two platform skill catalogs in one set ({first} and {second})")]
    TwoCatalogs { first: String, second: String },
}

/// Why the built-in descriptor schema is unusable (a broken build, never the input's fault).
#[derive(Debug, thiserror::Error)]
enum DescriptorSchemaError {
    #[error("{0}")]
    Json(serde_json::Error),
    #[error("{0}")]
    Compile(jsonschema::ValidationError<'static>),
}

static DESCRIPTOR_SCHEMA: LazyLock<Result<jsonschema::Validator, DescriptorSchemaError>> =
    LazyLock::new(|| {
        let schema: Value =
            serde_json::from_str(include_str!("../../../schemas/descriptor.schema.json"))
                .map_err(DescriptorSchemaError::Json)?;
        jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&schema)
            .map_err(DescriptorSchemaError::Compile)
    });

/// Credentials a descriptor must never contain (high-precision patterns only: prose such as
/// "bearer resolution" is fine, a token is not).
static SECRET_PATTERNS: LazyLock<Vec<(&'static str, regex::Regex)>> = LazyLock::new(|| {
    [
        ("root bearer", r"\bmcp[lahc]_[A-Za-z0-9_\-]{16,}"),
        ("private key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
        ("AWS access key", r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),
        ("GitHub token", r"\bgh[pousr]_[A-Za-z0-9]{36,}"),
        (
            "password in URL",
            r"[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@",
        ),
    ]
    .into_iter()
    .filter_map(|(n, p)| regex::Regex::new(p).ok().map(|r| (n, r)))
    .collect()
});

fn find_secret(v: &Value, pointer: &mut String) -> Option<(String, &'static str)> {
    match v {
        Value::String(s) => SECRET_PATTERNS
            .iter()
            .find(|(_, re)| re.is_match(s))
            .map(|(rule, _)| (pointer.clone(), *rule)),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
            let len = pointer.len();
            pointer.push_str(&format!("/{i}"));
            let found = find_secret(item, pointer);
            pointer.truncate(len);
            found
        }),
        Value::Object(map) => map.iter().find_map(|(k, item)| {
            let len = pointer.len();
            pointer.push('/');
            pointer.push_str(&k.replace('~', "~0").replace('/', "~1"));
            let found = find_secret(item, pointer).or_else(|| {
                SECRET_PATTERNS
                    .iter()
                    .find(|(_, re)| re.is_match(k))
                    .map(|(rule, _)| (pointer.clone(), *rule))
            });
            pointer.truncate(len);
            found
        }),
        _ => None,
    }
}

/// A repository-relative reference: no absolute path, `..`, `~`, scheme or backslash.
pub(crate) fn safe_source_ref(r: &str) -> bool {
    !r.is_empty()
        && r.len() <= 300
        && !r.starts_with('/')
        && !r.starts_with('~')
        && !r.contains('\\')
        && !r.contains(':')
        && !r.chars().any(char::is_control)
        && !r.split('/').any(|p| p == "..")
}

/// Checks one descriptor on its own (schema, hash, times, provenance, secrets). `item` names
/// it in errors (a file name or the descriptor id).
pub(crate) fn check_one(item: &str, raw: &Value) -> Result<Descriptor, SetError> {
    match &*DESCRIPTOR_SCHEMA {
        Ok(v) => {
            let errors: Vec<String> = v
                .iter_errors(raw)
                .take(5)
                .map(|e| format!("at `{}`: {e}", e.instance_path()))
                .collect();
            if !errors.is_empty() {
                return Err(SetError::Schema {
                    item: item.to_string(),
                    errors: errors.join("; "),
                });
            }
        }
        Err(e) => {
            return Err(SetError::Schema {
                item: item.to_string(),
                errors: format!("the built-in descriptor schema does not compile: {e}"),
            });
        }
    }
    let d: Descriptor = serde_json::from_value(raw.clone()).map_err(|e| SetError::Parse {
        item: item.to_string(),
        reason: e.to_string(),
    })?;
    let id = d.freshness.descriptor_id.clone();
    let actual = content_hash(&d.content);
    if actual != d.freshness.content_hash {
        return Err(SetError::Hash {
            id,
            declared: d.freshness.content_hash.clone(),
            actual,
        });
    }
    if d.freshness.fresh_until < d.freshness.generated_at {
        return Err(SetError::Times { id });
    }
    if !safe_source_ref(&d.freshness.source_ref) {
        return Err(SetError::SourceRef {
            id,
            source_ref: d.freshness.source_ref.clone(),
        });
    }
    let mut pointer = String::new();
    if let Some((pointer, rule)) = find_secret(&d.content, &mut pointer)
        .or_else(|| find_secret(&json!(d.title), &mut String::from("/title")))
    {
        return Err(SetError::Secret { id, pointer, rule });
    }
    Ok(d)
}

/// Checks a whole set against the contracts: every descriptor on its own, unique ids, every
/// descriptive contract's projection resolves (and selects from an array of keyed objects), at
/// most one platform skill catalog, which must satisfy the catalog rules.
pub fn validate(
    items: Vec<(String, Value)>,
    contracts: &ContractRegistry,
    scheme: &str,
) -> Result<(Vec<Descriptor>, Option<SkillCatalog>), SetError> {
    if items.is_empty() {
        return Err(SetError::Empty);
    }
    let mut by_id: BTreeMap<String, Descriptor> = BTreeMap::new();
    for (item, raw) in &items {
        let d = check_one(item, raw)?;
        let id = d.freshness.descriptor_id.clone();
        if by_id.insert(id.clone(), d).is_some() {
            return Err(SetError::Duplicate { id });
        }
    }
    for entry in contracts.all() {
        let c = &entry.contract;
        let Some(p) = &c.descriptor else { continue };
        if c.routing != RoutingClass::DescriptiveCached {
            continue;
        }
        let d = by_id
            .get(&p.descriptor_id)
            .ok_or_else(|| SetError::MissingDescriptor {
                tool: c.tool_id.clone(),
                descriptor: p.descriptor_id.clone(),
            })?;
        let at = d
            .content
            .pointer(&p.pointer)
            .ok_or_else(|| SetError::Projection {
                tool: c.tool_id.clone(),
                descriptor: p.descriptor_id.clone(),
                pointer: p.pointer.clone(),
            })?;
        if let Some(sel) = &p.select {
            let keyed = at.as_array().is_some_and(|items| {
                items
                    .iter()
                    .all(|i| i.get(&sel.key).is_some_and(Value::is_string))
            });
            if !keyed {
                return Err(SetError::Select {
                    tool: c.tool_id.clone(),
                    descriptor: p.descriptor_id.clone(),
                    pointer: p.pointer.clone(),
                    key: sel.key.clone(),
                });
            }
        }
    }
    let mut catalog: Option<(String, SkillCatalog)> = None;
    for d in by_id.values() {
        if d.class != skill_catalog::DESCRIPTOR_CLASS {
            continue;
        }
        let id = d.freshness.descriptor_id.clone();
        if let Some((first, _)) = &catalog {
            return Err(SetError::TwoCatalogs {
                first: first.clone(),
                second: id,
            });
        }
        let c = SkillCatalog::from_descriptor(d, scheme).map_err(|reason| SetError::Catalog {
            id: id.clone(),
            reason,
        })?;
        catalog = Some((id, c));
    }
    Ok((by_id.into_values().collect(), catalog.map(|(_, c)| c)))
}

/// Builds a served set from validated parts.
pub fn assemble(
    descriptors: Vec<Descriptor>,
    catalog: Option<SkillCatalog>,
    source: SetSource,
    revision: Option<i64>,
    published_at: Option<String>,
) -> DescriptorSet {
    let origin = SetOrigin {
        source,
        revision,
        published_at,
        set_hash: set_hash(&descriptors),
    };
    DescriptorSet {
        by_id: descriptors
            .into_iter()
            .map(|d| (d.freshness.descriptor_id.clone(), Arc::new(d)))
            .collect(),
        origin,
        catalog: catalog.map(Arc::new),
        answers: Default::default(),
    }
}

/// The answer header every served descriptor carries: its freshness at `now` and when it
/// expires.
pub fn served_state(d: &Descriptor, now: time::OffsetDateTime) -> Value {
    json!({
        "freshness": d.freshness.state_at(now).as_str(),
        "expires_at": mcp_shared::time::format(d.freshness.expires_at()),
    })
}

/// Why a publish failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("{0}")]
    Invalid(#[from] SetError),
    /// The cache did not take the set (`publish::CacheUnavailable`, its actor's error).
    #[error("the descriptor cache is unavailable: {0}")]
    Cache(Box<dyn std::error::Error + Send + Sync>),
    /// The validated set could not be written as JSON (a broken invariant).
    #[error("cannot encode the set: {0}")]
    Encode(serde_json::Error),
    #[error("cannot persist the set: {0}")]
    Store(#[from] crate::store::Error),
}

/// The published set persisted in the store, validated against the current contracts;
/// `None` when nothing was published or the stored set no longer fits (then root serves its
/// configured set and logs why).
pub async fn load_published(
    store: &crate::store::Store,
    contracts: &ContractRegistry,
    scheme: &str,
) -> Result<Option<DescriptorSet>, crate::store::Error> {
    let Some(row) = store.latest_descriptor_set().await? else {
        return Ok(None);
    };
    let values: Vec<Value> = match serde_json::from_str(&row.body) {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(revision = row.revision, error = %e, "stored descriptor set is corrupt; serving the configured set");
            return Ok(None);
        }
    };
    let items = values
        .into_iter()
        .enumerate()
        .map(|(i, v)| (format!("stored set #{} item {i}", row.revision), v))
        .collect();
    match validate(items, contracts, scheme) {
        Ok((descriptors, catalog)) => Ok(Some(assemble(
            descriptors,
            catalog,
            SetSource::Published,
            Some(row.revision),
            Some(mcp_shared::time::format(mcp_shared::time::from_unix_ms(
                row.published_at_ms,
            ))),
        ))),
        Err(e) => {
            tracing::error!(revision = row.revision, error = %e, "stored descriptor set does not fit the current contracts; serving the configured set");
            Ok(None)
        }
    }
}
