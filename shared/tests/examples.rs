//! The shipped tool contracts (`schemas/tools/`) and descriptors (`config/descriptors/`):
//! each parses into its `mcp-shared` type, and every descriptive tool's answer, built from the
//! real descriptor the way root builds it, validates against the tool's output schema.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use mcp_shared::contract::{DescriptorProjection, RoutingClass, ToolContract};
use mcp_shared::descriptor::{Descriptor, content_hash};
use mcp_shared::profile::ProfileRegistry;
use serde_json::{Value, json};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.json` file directly in `dir` (relative to the repository), by file name.
fn json_files(dir: &str) -> BTreeMap<String, Value> {
    let path = repo().join(dir);
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&path).unwrap_or_else(|e| panic!("{dir}: {e}")) {
        let path = entry.unwrap_or_else(|e| panic!("{dir}: {e}")).path();
        if path.extension().is_some_and(|e| e == "json") && path.is_file() {
            let name = file_name(&path);
            let text =
                std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{dir}/{name}: {e}"));
            let value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{dir}/{name}: not JSON: {e}"));
            files.insert(name, value);
        }
    }
    assert!(!files.is_empty(), "{dir}: no JSON files");
    files
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn validator(what: &str, schema: &Value) -> jsonschema::Validator {
    if let Err(e) = jsonschema::meta::validate(schema) {
        panic!("{what}: not a valid JSON Schema: {e}");
    }
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
        .unwrap_or_else(|e| panic!("{what}: schema does not compile: {e}"))
}

fn assert_valid(what: &str, validator: &jsonschema::Validator, instance: &Value) {
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| format!("  at `{}`: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}:\n{}", errors.join("\n"));
}

fn contracts() -> BTreeMap<String, (ToolContract, Value)> {
    json_files("schemas/tools")
        .into_iter()
        .map(|(name, value)| {
            let contract: ToolContract = serde_json::from_value(value.clone())
                .unwrap_or_else(|e| panic!("schemas/tools/{name}: not a ToolContract: {e}"));
            assert_eq!(
                name,
                format!("{}.json", contract.tool_id),
                "schemas/tools/{name}: file name must be the tool_id"
            );
            (contract.tool_id.clone(), (contract, value))
        })
        .collect()
}

fn descriptors() -> BTreeMap<String, (Descriptor, Value)> {
    json_files("config/descriptors")
        .into_iter()
        .map(|(name, value)| {
            let descriptor: Descriptor = serde_json::from_value(value.clone())
                .unwrap_or_else(|e| panic!("config/descriptors/{name}: not a Descriptor: {e}"));
            let id = descriptor.freshness.descriptor_id.clone();
            assert_eq!(
                name,
                format!("{id}.json"),
                "config/descriptors/{name}: file name must be the descriptor_id"
            );
            (id, (descriptor, value))
        })
        .collect()
}

fn content<'a>(descriptors: &'a BTreeMap<String, (Descriptor, Value)>, id: &str) -> &'a Value {
    &descriptors
        .get(id)
        .unwrap_or_else(|| panic!("config/descriptors/{id}.json is missing"))
        .0
        .content
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The values root answers a projection with: one per selectable element for `select`
/// projections (with the arguments that select it), else the value at `pointer`.
fn projected<'a>(
    tool: &str,
    projection: &DescriptorProjection,
    content: &'a Value,
) -> Vec<(Value, &'a Value)> {
    let at = content.pointer(&projection.pointer).unwrap_or_else(|| {
        panic!(
            "{tool}: pointer `{}` does not resolve in {}",
            projection.pointer, projection.descriptor_id
        )
    });
    let Some(select) = &projection.select else {
        return vec![(json!({}), at)];
    };
    let items = at.as_array().unwrap_or_else(|| {
        panic!(
            "{tool}: `{}` in {} is not an array, so it cannot be selected from",
            projection.pointer, projection.descriptor_id
        )
    });
    assert!(!items.is_empty(), "{tool}: nothing to select from");
    let mut keys = BTreeSet::new();
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let key = item
                .get(&select.key)
                .and_then(Value::as_str)
                .unwrap_or_else(|| {
                    panic!(
                        "{tool}: element {i} of `{}` in {} has no string field `{}`",
                        projection.pointer, projection.descriptor_id, select.key
                    )
                });
            assert!(
                keys.insert(key),
                "{tool}: two elements have {} `{key}`",
                select.key
            );
            (json!({ (select.argument.clone()): key }), item)
        })
        .collect()
}

#[test]
fn tool_contracts_parse_and_answer_from_real_descriptors() {
    let descriptors = descriptors();
    let contract_schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("schemas/tool-contract.schema.json"))
            .expect("schemas/tool-contract.schema.json"),
    )
    .expect("tool-contract.schema.json is JSON");
    let contract_validator = validator("tool-contract.schema.json", &contract_schema);
    let freshness_fields: BTreeSet<String> = {
        let (d, _) = descriptors.values().next().expect("a descriptor");
        serde_json::to_value(&d.freshness)
            .expect("freshness serializes")
            .as_object()
            .expect("freshness is an object")
            .keys()
            .cloned()
            .collect()
    };

    for (tool, (contract, raw)) in contracts() {
        assert_valid(
            &format!("schemas/tools/{tool}.json against tool-contract.schema.json"),
            &contract_validator,
            &raw,
        );
        assert_eq!(
            contract.input_schema["type"], "object",
            "{tool}: input_schema must be an object schema"
        );
        assert_eq!(
            contract.input_schema["additionalProperties"],
            Value::Bool(false),
            "{tool}: input_schema must refuse unknown arguments"
        );
        let input = validator(&format!("{tool} input_schema"), &contract.input_schema);
        let output = validator(&format!("{tool} output_schema"), &contract.output_schema);

        if contract.routing != RoutingClass::DescriptiveCached {
            continue;
        }
        let projection = contract.descriptor.as_ref().unwrap_or_else(|| {
            panic!("{tool}: descriptive_cached without a descriptor projection")
        });
        let (descriptor, _) = descriptors
            .get(&projection.descriptor_id)
            .unwrap_or_else(|| {
                panic!(
                    "{tool}: descriptor `{}` has no file in config/descriptors/",
                    projection.descriptor_id
                )
            });
        if let Some(select) = &projection.select {
            assert!(
                strings(&contract.input_schema["required"]).contains(&select.argument.as_str()),
                "{tool}: input_schema must require the select argument `{}`",
                select.argument
            );
        }
        let output_freshness: BTreeSet<String> = contract.output_schema["properties"]["descriptor"]
            ["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("{tool}: output_schema has no descriptor object"))
            .keys()
            .cloned()
            .collect();
        assert_eq!(
            output_freshness, freshness_fields,
            "{tool}: output_schema `descriptor` differs from the Freshness fields"
        );

        let header = serde_json::to_value(&descriptor.freshness).expect("freshness serializes");
        for (arguments, data) in projected(&tool, projection, &descriptor.content) {
            assert_valid(
                &format!("{tool}: arguments {arguments} against input_schema"),
                &input,
                &arguments,
            );
            let answer =
                json!({"data": data, "descriptor": header, "stale": false, "freshness": "fresh"});
            assert_valid(
                &format!("{tool}: answer for {arguments} against output_schema"),
                &output,
                &answer,
            );
        }
        let wrong_header = json!({
            "data": projected(&tool, projection, &descriptor.content)[0].1,
            "descriptor": {"descriptor_id": "someone.else"},
            "stale": false,
        });
        assert!(
            !output.is_valid(&wrong_header),
            "{tool}: output_schema accepts an answer without a full freshness header"
        );
    }
}

#[test]
fn descriptors_parse_hash_and_validate() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("schemas/descriptor.schema.json"))
            .expect("schemas/descriptor.schema.json"),
    )
    .expect("descriptor.schema.json is JSON");
    let schema = validator("descriptor.schema.json", &schema);
    for (id, (descriptor, raw)) in descriptors() {
        let file = format!("config/descriptors/{id}.json");
        assert_valid(
            &format!("{file} against descriptor.schema.json"),
            &schema,
            &raw,
        );
        assert_eq!(
            descriptor.freshness.content_hash,
            content_hash(&descriptor.content),
            "{file}: content_hash does not match the content"
        );
        let fresh = &descriptor.freshness;
        assert_eq!(
            fresh.fresh_until - fresh.generated_at,
            time::Duration::seconds(fresh.cache_ttl_sec as i64),
            "{file}: fresh_until must be generated_at plus cache_ttl_sec"
        );
        assert_eq!(
            serde_json::to_value(&descriptor).expect("serializes"),
            raw,
            "{file}: does not round-trip through Descriptor"
        );
    }
}

/// `sdk.schemas` publishes exactly the files in `schemas/`, byte for byte as JSON values.
#[test]
fn schema_registry_matches_the_schema_files() {
    let descriptors = descriptors();
    let registry = content(&descriptors, "sdk.schemas");
    let files: BTreeMap<String, Value> = json_files("schemas")
        .into_iter()
        .filter_map(|(name, v)| Some((name.strip_suffix(".schema.json")?.to_owned(), v)))
        .collect();
    let entries = registry["schemas"]
        .as_array()
        .expect("sdk.schemas /schemas");
    let published: BTreeSet<&str> = entries.iter().filter_map(|e| e["name"].as_str()).collect();
    assert_eq!(
        published,
        files.keys().map(String::as_str).collect(),
        "sdk.schemas must publish every schemas/*.schema.json"
    );
    for (i, entry) in entries.iter().enumerate() {
        let name = entry["name"].as_str().unwrap_or_default();
        let file = &files[name];
        assert_eq!(
            &entry["schema"], file,
            "sdk.schemas: `{name}` differs from schemas/{name}.schema.json"
        );
        assert_eq!(
            entry["schema_id"], file["$id"],
            "sdk.schemas: `{name}` schema_id"
        );
        assert_eq!(entry["title"], file["title"], "sdk.schemas: `{name}` title");
        let index = &registry["index"][i];
        for key in ["name", "title", "stability", "schema_id"] {
            assert_eq!(index[key], entry[key], "sdk.schemas: /index/{i}/{key}");
        }
    }
}

#[test]
fn descriptors_agree_with_each_other_and_the_contracts() {
    let descriptors = descriptors();
    let contracts = contracts();
    let schema_names: BTreeSet<&str> = content(&descriptors, "sdk.schemas")["index"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["name"].as_str())
        .collect();

    // SDK metadata names only published schemas.
    for module in content(&descriptors, "sdk.metadata")["modules"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for item in module["items"].as_array().into_iter().flatten() {
            if let Some(schema) = item["schema"].as_str() {
                assert!(
                    schema_names.contains(schema),
                    "sdk.metadata: {} names unknown schema `{schema}`",
                    item["name"]
                );
            }
        }
    }

    // Templates name only published schemas and list the same names in index and detail.
    let templates = content(&descriptors, "sdk.templates");
    for (i, template) in templates["templates"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for schema in strings(&template["related_schemas"]) {
            assert!(
                schema_names.contains(schema),
                "sdk.templates: {} names unknown schema `{schema}`",
                template["name"]
            );
        }
        assert_eq!(
            templates["index"][i]["name"], template["name"],
            "sdk.templates: /index/{i}"
        );
    }

    // Capability classes: their tools exist and require them; descriptive tools' capabilities
    // are all listed; profiles name known planes.
    let caps = content(&descriptors, "sdk.capability_classes");
    let mut classes = BTreeSet::new();
    for class in caps["capability_classes"].as_array().into_iter().flatten() {
        let name = class["name"].as_str().unwrap_or_default();
        classes.insert(name);
        for tool in strings(&class["tools"]) {
            let (contract, _) = contracts.get(tool).unwrap_or_else(|| {
                panic!("sdk.capability_classes: `{name}` lists unknown tool `{tool}`")
            });
            assert_eq!(
                contract.required_capability, name,
                "sdk.capability_classes: `{tool}`"
            );
        }
        for id in strings(&class["descriptor_ids"]) {
            assert!(
                descriptors.contains_key(id),
                "sdk.capability_classes: `{name}` names unknown descriptor `{id}`"
            );
        }
    }
    for (tool, (contract, _)) in &contracts {
        if contract.routing == RoutingClass::DescriptiveCached {
            assert!(
                classes.contains(contract.required_capability.as_str()),
                "{tool}: capability `{}` is not in sdk.capability_classes",
                contract.required_capability
            );
        }
    }

    // Planes: listed tools exist on that plane; every contract's plane and every profile's
    // plane is listed.
    let planes = content(&descriptors, "mcp.planes");
    let mut plane_names = BTreeSet::new();
    let mut plane_profiles = BTreeSet::new();
    for plane in planes["planes"].as_array().into_iter().flatten() {
        let name = plane["name"].as_str().unwrap_or_default();
        plane_names.insert(name);
        plane_profiles.extend(strings(&plane["profiles"]).into_iter().map(|p| (p, name)));
        for tool in strings(&plane["tools"]) {
            let (contract, _) = contracts
                .get(tool)
                .unwrap_or_else(|| panic!("mcp.planes: `{name}` lists unknown tool `{tool}`"));
            assert_eq!(
                contract.plane, name,
                "mcp.planes: `{tool}` is on another plane"
            );
        }
    }
    for (tool, (contract, _)) in &contracts {
        assert!(
            plane_names.contains(contract.plane.as_str()),
            "{tool}: plane `{}` is not in mcp.planes",
            contract.plane
        );
    }
    for profile in caps["profiles"].as_array().into_iter().flatten() {
        let key = (
            profile["name"].as_str().unwrap_or_default(),
            profile["plane"].as_str().unwrap_or_default(),
        );
        assert!(
            plane_profiles.contains(&key),
            "sdk.capability_classes: profile {key:?} is not published by that plane in mcp.planes"
        );
    }

    // The system model's relations connect declared object kinds.
    let model = content(&descriptors, "sdk.system_model");
    let kinds: BTreeSet<&str> = model["object_kinds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| k["kind"].as_str())
        .collect();
    for relation in model["relation_kinds"].as_array().into_iter().flatten() {
        for pair in relation["pairs"].as_array().into_iter().flatten() {
            for end in ["from", "to"] {
                let kind = pair[end].as_str().unwrap_or_default();
                assert!(
                    kinds.contains(kind),
                    "sdk.system_model: relation {} names undeclared kind `{kind}`",
                    relation["name"]
                );
            }
        }
    }
}

/// `config/profiles.toml` is a valid profile registry, and `sdk.capability_classes` publishes
/// exactly those profiles, each granting only listed capability classes.
#[test]
fn published_profiles_match_the_profile_file() {
    let text =
        std::fs::read_to_string(repo().join("config/profiles.toml")).expect("config/profiles.toml");
    let registry: ProfileRegistry =
        toml::from_str(&text).unwrap_or_else(|e| panic!("config/profiles.toml: {e}"));
    let as_json = serde_json::to_value(&registry).expect("registry serializes");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("schemas/capability-profiles.schema.json"))
            .expect("schemas/capability-profiles.schema.json"),
    )
    .expect("capability-profiles.schema.json is JSON");
    assert_valid(
        "config/profiles.toml against capability-profiles.schema.json",
        &validator("capability-profiles.schema.json", &schema),
        &as_json,
    );

    let descriptors = descriptors();
    let caps = content(&descriptors, "sdk.capability_classes");
    assert_eq!(
        caps["profiles"], as_json["profile"],
        "sdk.capability_classes /profiles differs from config/profiles.toml"
    );
    let classes: BTreeSet<&str> = caps["capability_classes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    for profile in &registry.profiles {
        for capability in &profile.capabilities {
            assert!(
                classes.contains(capability.as_str()),
                "config/profiles.toml: {} grants `{capability}`, which sdk.capability_classes does not list",
                profile.name
            );
        }
    }
}

/// The manifest contracts' examples satisfy their own schemas.
#[test]
fn manifest_contract_examples_validate() {
    let descriptors = descriptors();
    for id in ["sdk.skill_contract", "sdk.scenario_contract"] {
        let contract = content(&descriptors, id);
        let schema = validator(&format!("{id} /schema"), &contract["schema"]);
        assert_valid(
            &format!("{id}: /example against /schema"),
            &schema,
            &contract["example"],
        );
        let mut broken = contract["example"].clone();
        broken["surplus"] = json!(true);
        assert!(
            !schema.is_valid(&broken),
            "{id}: /schema accepts unknown fields"
        );
    }
}
