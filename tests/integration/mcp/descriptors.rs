//! The descriptor pipeline end to end: the example source tree builds every class and
//! reproduces `config/descriptors/` byte for byte; the build is published to a real root (as
//! CI would, through the `mcp-root` binary); answers carry fresh / stale / expired by root's
//! clock; a refused set changes nothing, also after a restart (SQLite and PostgreSQL); resources,
//! resource templates, pagination and the platform skill catalog.

use mcp_tests::items;
use std::path::{Path, PathBuf};

use mcp_root::descriptors::build;
use mcp_shared::descriptor::{Descriptor, content_hash};
use mcp_tests::zone::PgSchema;
use mcp_tests::{TestRoot, mcp_client};
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams, ResourceContents};
use serde_json::{Value, json};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn built() -> Vec<Descriptor> {
    build::build(
        &repo().join("config/descriptor-source"),
        &build::BuildOptions::default(),
    )
    .expect("config/descriptor-source builds")
}

fn as_values(set: &[Descriptor]) -> Vec<Value> {
    set.iter()
        .map(|d| serde_json::to_value(d).unwrap())
        .collect()
}

/// Recomputes `content_hash` after a test edited `content`.
fn rehash(v: &mut Value) {
    v["content_hash"] = json!(content_hash(&v["content"]));
}

fn find<'a>(set: &'a mut [Value], id: &str) -> &'a mut Value {
    set.iter_mut()
        .find(|d| d["descriptor_id"] == id)
        .unwrap_or_else(|| panic!("{id} is in the set"))
}

async fn publish(root: &TestRoot, token: &str, set: &[Value]) -> (u16, Value) {
    let res = root
        .post_as(
            token,
            "/v1/root/mcp/descriptors",
            &json!({ "descriptors": set }),
        )
        .await;
    (
        res.status().as_u16(),
        res.json().await.unwrap_or(Value::Null),
    )
}

fn text_of(c: &ResourceContents) -> String {
    match c {
        ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("expected text contents, got {other:?}"),
    }
}

/// CI's job: build the example source tree, check it is what is committed, publish it.
/// Multi-threaded: the `mcp-root` child process talks to the in-process root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_source_tree_builds_every_class_and_is_published() {
    let set = built();
    let classes: std::collections::BTreeSet<&str> = set.iter().map(|d| d.class.as_str()).collect();
    assert_eq!(
        classes,
        build::CLASSES.iter().copied().collect(),
        "one artifact per descriptor class"
    );
    let diffs = build::differences(&repo().join("config/descriptors"), &set);
    assert!(
        diffs.is_empty(),
        "config/descriptors/ is not the build of config/descriptor-source/ ({diffs:?}); run \
         `cargo run -p mcp-root -- descriptors build config/descriptor-source -o config/descriptors`"
    );
    // Deterministic: a second build gives the same bytes.
    let again = built();
    for (a, b) in set.iter().zip(&again) {
        assert_eq!(build::artifact_bytes(a), build::artifact_bytes(b));
    }

    let out = tempfile::tempdir().unwrap();
    build::write_artifacts(out.path(), &set).unwrap();
    let root = TestRoot::start().await.unwrap();
    let generated_at = set[0].freshness.generated_at;
    root.handle()
        .app
        .clock
        .set(generated_at + time::Duration::days(1));
    let bin = mcp_tests::workspace_bin("mcp-root").unwrap();
    let cli = std::process::Command::new(&bin)
        .args([
            "admin",
            "--root-url",
            &root.handle().base_url(),
            "--admin-token",
        ])
        .arg(root.admin_token())
        .args(["descriptors", "publish"])
        .arg(out.path())
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    let published: Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert_eq!(published["set"]["source"], "published");
    assert_eq!(published["set"]["revision"], 1);
    assert_eq!(published["skill_catalog"]["skills"], 3);

    // Every class is served with its freshness; a lease reads them through tools and REST.
    for d in &set {
        let id = &d.freshness.descriptor_id;
        let got = root
            .admin_get(&format!("/v1/root/mcp/descriptors/{id}"))
            .await;
        assert_eq!(got["class"], json!(d.class), "{id}");
        assert_eq!(got["content_hash"], json!(d.freshness.content_hash), "{id}");
        assert_eq!(got["freshness"], "fresh", "{id}");
    }
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    for (tool, args) in [
        ("sdk.get_metadata", json!({})),
        ("sdk.list_schemas", json!({})),
        ("sdk.get_schema", json!({"name": "descriptor"})),
        ("sdk.list_templates", json!({})),
        ("sdk.get_template", json!({"name": "skill"})),
        ("sdk.list_capability_classes", json!({})),
        ("sdk.get_system_model", json!({})),
        ("sdk.get_skill_contract", json!({})),
        ("sdk.get_scenario_contract", json!({})),
        ("sdk.list_public_skills", json!({})),
        ("sdk.list_public_scenarios", json!({})),
    ] {
        let (status, body) = root.call(&token, tool, args).await;
        assert_eq!(status, 200, "{tool}: {body}");
        assert_eq!(body["result"]["freshness"], "fresh", "{tool}");
        assert_eq!(body["result"]["stale"], false, "{tool}");
    }
    for (id, key, name) in [
        ("registry.skills", "skills", "infra_access_skill"),
        ("registry.scenarios", "scenarios", "hub_health_report"),
    ] {
        let res = root
            .get_as(&token, &format!("/v1/root/mcp/descriptors/{id}"))
            .await;
        assert_eq!(res.status(), 200, "{id}");
        let v: Value = res.json().await.unwrap();
        assert!(
            v["content"][key]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["name"] == name),
            "{id}: {v}"
        );
    }
    root.stop().await;
}

/// A malformed source fails the build with the file and the reason.
#[test]
fn malformed_sources_fail_with_file_and_reason() {
    let src = tempfile::tempdir().unwrap();
    mcp_tests::copy_tree(&repo().join("config/descriptor-source"), src.path());
    // The inputs outside the tree point back at the repository.
    let manifest = std::fs::read_to_string(src.path().join("sources.toml")).unwrap();
    let abs = |rel: &str| repo().join(rel).display().to_string();
    std::fs::write(
        src.path().join("sources.toml"),
        manifest
            .replace(
                "\"../../schemas/tools\"",
                &format!("{:?}", abs("schemas/tools")),
            )
            .replace("\"../../schemas\"", &format!("{:?}", abs("schemas")))
            .replace(
                "\"../profiles.toml\"",
                &format!("{:?}", abs("config/profiles.toml")),
            ),
    )
    .unwrap();
    build::build(src.path(), &build::BuildOptions::default()).expect("the copy builds");

    type Breaker<'a> = &'a dyn Fn(&Path);
    let cases: &[(&str, Breaker, &str)] = &[
        (
            "not JSON",
            &|p| std::fs::write(p.join("architecture/overview.json"), "{").unwrap(),
            "architecture/overview.json: not JSON",
        ),
        (
            "unsupported export",
            &|p| {
                edit_json(&p.join("sdk/export.json"), |v| {
                    v["format_version"] = json!(9)
                })
            },
            "sdk/export.json: unsupported export format_version 9",
        ),
        (
            "example breaks its schema",
            &|p| {
                edit_json(&p.join("manifests/skill.json"), |v| {
                    v["example"]["surplus"] = json!(1)
                })
            },
            "manifests/skill.json: the skill example does not match its schema",
        ),
        (
            "relation to an unknown kind",
            &|p| {
                edit_json(&p.join("system-model/vocabulary.json"), |v| {
                    v["relation_kinds"][0]["pairs"][0]["to"] = json!("nowhere")
                })
            },
            "undeclared object kind `nowhere`",
        ),
        (
            "a hand-listed derived field",
            &|p| {
                edit_json(&p.join("planes/registry.json"), |v| {
                    v["planes"][0]["tools"] = json!([])
                })
            },
            "planes/registry.json: plane `AdaOSDevPlane`: `tools` and `profiles` are derived",
        ),
        (
            "template names an unknown schema",
            &|p| {
                edit_json(&p.join("templates/catalog.json"), |v| {
                    v["templates"][0]["related_schemas"] = json!(["nope"])
                })
            },
            "unknown related schema `nope`",
        ),
        (
            "skill front matter does not match its directory",
            &|p| {
                let f = p.join("skills/root_descriptors/SKILL.md");
                let t = std::fs::read_to_string(&f).unwrap();
                std::fs::write(&f, t.replace("name: root-descriptors", "name: other-name")).unwrap()
            },
            "skills/root_descriptors/SKILL.md: front matter name `other-name` must match its directory",
        ),
        (
            "a skill without front matter",
            &|p| std::fs::write(p.join("skills/root_descriptors/SKILL.md"), "# none\n").unwrap(),
            "no YAML front matter",
        ),
        (
            "a non-skill file in the skill tree",
            &|p| std::fs::write(p.join("skills/notes.txt"), "x").unwrap(),
            "skills/notes.txt",
        ),
        (
            "scenario tool without a contract",
            &|p| {
                edit_json(&p.join("registry/scenarios/hub_test_cycle.json"), |v| {
                    v["steps"][0]["tool_id"] = json!("hub.nope")
                })
            },
            "registry/scenarios/hub_test_cycle.json: step `\"run\"`: tool `hub.nope` has no contract",
        ),
        (
            "a secret in a source",
            &|p| {
                edit_json(&p.join("architecture/overview.json"), |v| {
                    v["summary"] = json!("token mcpl_AAAAAAAAAAAAAAAAAAAAAAAA")
                })
            },
            "looks like a secret",
        ),
        (
            "unknown class in the manifest",
            &|p| {
                let t = std::fs::read_to_string(p.join("sources.toml")).unwrap();
                std::fs::write(
                    p.join("sources.toml"),
                    t.replace("class = \"architecture_descriptor\"", "class = \"wiki\""),
                )
                .unwrap()
            },
            "sources.toml: invalid manifest: descriptor `architecture.overview`: unknown class `wiki`",
        ),
    ];
    for (what, break_it, expected) in cases {
        let case = tempfile::tempdir().unwrap();
        mcp_tests::copy_tree(src.path(), case.path());
        break_it(case.path());
        let err = build::build(case.path(), &build::BuildOptions::default())
            .err()
            .unwrap_or_else(|| panic!("{what}: the build should fail"))
            .to_string();
        assert!(err.contains(expected), "{what}: `{err}` lacks `{expected}`");
    }
}

fn edit_json(path: &Path, f: impl FnOnce(&mut Value)) {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

#[tokio::test]
async fn answers_are_fresh_then_stale_then_expired_by_roots_clock() {
    let root = TestRoot::start().await.unwrap();
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
    let d = root
        .admin_get("/v1/root/mcp/descriptors/sdk.metadata")
        .await;
    let at = |k: &str| mcp_shared::time::parse(d[k].as_str().unwrap()).unwrap();
    let (generated, fresh_until) = (at("generated_at"), at("fresh_until"));
    let expires_at = at("expires_at");
    assert_eq!(expires_at - fresh_until, fresh_until - generated);
    let day = time::Duration::days(1);
    for (now, state, stale) in [
        (generated + day, "fresh", false),
        (fresh_until + day, "stale", true),
        (expires_at + day, "expired", true),
    ] {
        root.handle().app.clock.set(now);
        // Tool result.
        let res = client
            .call_tool(CallToolRequestParams::new("sdk.get_metadata"))
            .await
            .unwrap();
        let sc = res.structured_content.unwrap();
        assert_eq!(sc["freshness"], state, "{sc}");
        assert_eq!(sc["stale"], stale);
        // REST, list and one.
        let list = root.admin_get("/v1/root/mcp/descriptors").await;
        assert!(
            items(&list["descriptors"])
                .iter()
                .all(|d| d["freshness"] == state),
            "{list}"
        );
        let one = root
            .admin_get("/v1/root/mcp/descriptors/sdk.metadata")
            .await;
        assert_eq!(one["freshness"], state);
        // Resources: in the text and in `_meta`, listed and read.
        let read = client
            .read_resource(ReadResourceRequestParams::new("descriptor://sdk.metadata"))
            .await
            .unwrap();
        let v: Value = serde_json::from_str(&text_of(&read.contents[0])).unwrap();
        assert_eq!(v["freshness"], state);
        let meta = match &read.contents[0] {
            ResourceContents::TextResourceContents { meta, .. } => meta.clone().unwrap(),
            _ => unreachable!(),
        };
        assert_eq!(meta.0["root-mcp.local/descriptor"]["freshness"], state);
        let listed = client.list_all_resources().await.unwrap();
        let r = listed
            .iter()
            .find(|r| r.uri == "descriptor://sdk.metadata")
            .unwrap();
        assert_eq!(
            r.meta.as_ref().unwrap().0["root-mcp.local/descriptor"]["freshness"],
            state
        );
    }
    client.cancel().await.unwrap();
    root.stop().await;
}

/// Publishes a good set, then every kind of bad set; none changes what is served, before or
/// after a restart.
async fn refused_sets_change_nothing(database_url: Option<String>) {
    let mut root = TestRoot::start_with(|c| c.database_url = database_url.clone())
        .await
        .unwrap();
    let admin = root.admin_token();
    let mut good = as_values(&built());
    find(&mut good, "architecture.overview")["title"] = json!("Architecture (published)");
    let (status, body) = publish(&root, &admin, &good).await;
    assert_eq!(status, 200, "{body}");
    let set_hash = body["set"]["set_hash"].clone();
    assert_eq!(body["set"]["revision"], 1);

    let lease = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    assert_eq!(
        publish(&root, &lease, &good).await.0,
        403,
        "leases cannot publish"
    );

    type Breaker = fn(&mut Vec<Value>);
    let bad: &[(&str, Breaker, &str)] = &[
        ("empty", |s| s.clear(), "the set is empty"),
        (
            "hash",
            |s| find(s, "sdk.metadata")["content"]["version"] = json!("9.9.9"),
            "sdk.metadata: content_hash",
        ),
        (
            "schema",
            |s| find(s, "mcp.planes")["surplus"] = json!(1),
            "descriptor.schema.json",
        ),
        (
            "missing projected descriptor",
            |s| s.retain(|d| d["descriptor_id"] != "sdk.schemas"),
            "its descriptor `sdk.schemas` is not in the set",
        ),
        (
            "pointer",
            |s| {
                let d = find(s, "sdk.templates");
                d["content"].as_object_mut().unwrap().remove("templates");
                rehash(d);
            },
            "does not resolve in descriptor `sdk.templates`",
        ),
        (
            "secret",
            |s| {
                let d = find(s, "architecture.overview");
                d["content"]["summary"] = json!("admin mcpa_0123456789abcdefghij");
                rehash(d);
            },
            "looks like a secret",
        ),
        (
            "filesystem path",
            |s| find(s, "sdk.metadata")["source_ref"] = json!("/home/ci/work/shared/src"),
            "must be a repository-relative reference",
        ),
        (
            "duplicate",
            |s| {
                let d = s[0].clone();
                s.push(d);
            },
            "appears twice",
        ),
        (
            "skill catalog",
            |s| {
                let d = find(s, "platform.skills");
                let text = d["content"]["skills"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_string();
                d["content"]["skills"][0]["text"] = json!(text.replacen("name: ", "name: x", 1));
                rehash(d);
            },
            "platform skill catalog",
        ),
    ];
    for (what, break_it, expected) in bad {
        let mut set = good.clone();
        break_it(&mut set);
        let (status, body) = publish(&root, &admin, &set).await;
        assert_eq!(status, 422, "{what}: {body}");
        let msg = body["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains(expected), "{what}: `{msg}` lacks `{expected}`");
        let now = root.admin_get("/v1/root/mcp/descriptors").await;
        assert_eq!(now["set"]["set_hash"], set_hash, "{what} changed the set");
    }
    let audit = root.trail("tool_id=admin.descriptors.publish").await;
    assert_eq!(audit.len(), 1 + bad.len());

    // A restarted descriptor cache serves the last set it accepted, not the start-up set.
    let actors = &root.handle().app.actors;
    let before = actors.descriptors.load().get_id();
    actors.descriptors.load().stop(Some("test".into()));
    for _ in 0..200 {
        if actors.descriptors.load().get_id() != before {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_ne!(
        actors.descriptors.load().get_id(),
        before,
        "cache restarted"
    );
    let now = root.admin_get("/v1/root/mcp/descriptors").await;
    assert_eq!(now["set"]["set_hash"], set_hash);

    root.restart().await.unwrap();
    let now = root.admin_get("/v1/root/mcp/descriptors").await;
    assert_eq!(now["set"]["set_hash"], set_hash);
    assert_eq!(now["set"]["source"], "published");
    assert_eq!(now["set"]["revision"], 1);
    let arch = root
        .admin_get("/v1/root/mcp/descriptors/architecture.overview")
        .await;
    assert_eq!(arch["title"], "Architecture (published)");
    root.stop().await;
}

#[tokio::test]
async fn a_refused_set_changes_nothing_also_after_restart() {
    refused_sets_change_nothing(None).await;
}

#[tokio::test]
async fn a_published_set_survives_a_restart_on_postgres() {
    let Some(db) = PgSchema::create("a_published_set_survives_a_restart_on_postgres").await else {
        return;
    };
    refused_sets_change_nothing(Some(db.url.clone())).await;
    db.drop_schema().await;
}

#[tokio::test]
async fn resources_templates_pagination_and_the_skill_catalog() {
    let root = TestRoot::start_with(|c| {
        c.limits.resources_page_size = 2;
        c.skill_catalog.scheme = "acme-skills".into();
    })
    .await
    .unwrap();
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
    let first = client.list_resources(None).await.unwrap();
    assert_eq!(first.resources.len(), 2);
    assert!(first.next_cursor.is_some(), "a page size of 2 paginates");
    let all = client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = all.iter().map(|r| r.uri.as_str()).collect();
    for uri in [
        "descriptor://sdk.schemas",
        "descriptor://registry.skills",
        "acme-skills://platform/ontology",
        "acme-skills://platform/skills/root-descriptors",
        "acme-skills://platform/skills/hub-diagnostics",
        "acme-skills://platform/skills/safe-writes",
    ] {
        assert!(uris.contains(&uri), "{uri} not in {uris:?}");
    }
    let unique: std::collections::BTreeSet<&str> = uris.iter().copied().collect();
    assert_eq!(unique.len(), uris.len(), "pages do not overlap");

    let templates = client.list_all_resource_templates().await.unwrap();
    let t: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    for want in [
        "descriptor://{descriptor_id}",
        "descriptor://sdk.schemas/schemas/{name}",
        "descriptor://sdk.templates/templates/{name}",
        "acme-skills://platform/skills/{name}",
    ] {
        assert!(t.contains(&want), "{want} not in {t:?}");
    }
    let read = client
        .read_resource(ReadResourceRequestParams::new(
            "descriptor://sdk.schemas/schemas/tool-contract",
        ))
        .await
        .unwrap();
    let v: Value = serde_json::from_str(&text_of(&read.contents[0])).unwrap();
    assert_eq!(v["data"]["name"], "tool-contract");
    assert_eq!(v["descriptor"]["descriptor_id"], "sdk.schemas");
    assert!(v["freshness"].is_string());
    for missing in [
        "descriptor://sdk.schemas/schemas/nope",
        "descriptor://sdk.schemas/schemas/../../etc",
        "file:///etc/passwd",
    ] {
        assert!(
            client
                .read_resource(ReadResourceRequestParams::new(missing))
                .await
                .is_err(),
            "{missing}"
        );
    }

    // The catalog: ontology, then skills with their metadata, list and read alike.
    let ontology = client
        .read_resource(ReadResourceRequestParams::new(
            "acme-skills://platform/ontology",
        ))
        .await
        .unwrap();
    let o: Value = serde_json::from_str(&text_of(&ontology.contents[0])).unwrap();
    let skills = items(&o["skill_resources"]);
    assert_eq!(skills.len(), 3);
    for s in skills {
        let uri = s["uri"].as_str().unwrap();
        let read = client
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
            .unwrap();
        let (text, meta, mime) = match &read.contents[0] {
            ResourceContents::TextResourceContents {
                text,
                meta,
                mime_type,
                ..
            } => (text.clone(), meta.clone().unwrap(), mime_type.clone()),
            _ => unreachable!(),
        };
        let m = &meta.0["root-mcp.local/catalog"];
        assert_eq!(mime.as_deref(), Some("text/markdown"));
        assert_eq!(m["owner_application"], "mcp_gateway");
        assert_eq!(m["manifest_version"], 1);
        assert_eq!(m["mime_type"], "text/markdown");
        assert_eq!(m["size"], text.len());
        assert_eq!(
            m["content_sha256"],
            mcp_root::skill_catalog::sha256_hex(text.as_bytes())
        );
        assert_eq!(m["manifest_sha256"], o["manifest_sha256"]);
        assert!(m["path"].as_str().unwrap().starts_with("skills/"));
        let listed = all.iter().find(|r| r.uri == uri).unwrap();
        assert_eq!(
            listed.meta.as_ref().unwrap().0["root-mcp.local/catalog"],
            *m,
            "list and read metadata agree"
        );
        assert_eq!(listed.name, s["name"]);
    }
    client.cancel().await.unwrap();

    // Any lease reads the catalog; descriptors stay behind the tools a lease may call.
    let ops = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let client = mcp_client(&root.mcp_url(), &ops).await.unwrap();
    let all = client.list_all_resources().await.unwrap();
    assert!(
        all.iter()
            .any(|r| r.uri == "acme-skills://platform/ontology")
    );
    assert!(!all.iter().any(|r| r.uri == "descriptor://sdk.schemas"));
    assert!(
        client
            .read_resource(ReadResourceRequestParams::new(
                "descriptor://sdk.schemas/schemas/tool-contract"
            ))
            .await
            .is_err()
    );
    client.cancel().await.unwrap();
    root.stop().await;
}

/// The committed SDK export is what an exporter of `mcp-shared` produces: one module entry per
/// `pub mod` of `shared/src/lib.rs`, each pointing at its file.
#[test]
fn the_sdk_export_fixture_matches_the_shared_crate() {
    let lib = std::fs::read_to_string(repo().join("shared/src/lib.rs")).unwrap();
    let mut modules: Vec<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect();
    modules.sort();
    let export: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("config/descriptor-source/sdk/export.json")).unwrap(),
    )
    .unwrap();
    let mut exported: Vec<String> = items(&export["modules"])
        .iter()
        .map(|m| m["module"].as_str().unwrap().to_string())
        .collect();
    exported.sort();
    assert_eq!(
        exported, modules,
        "config/descriptor-source/sdk/export.json is out of date with shared/src/lib.rs"
    );
    for m in items(&export["modules"]) {
        let path = m["path"].as_str().unwrap();
        assert!(repo().join(path).is_file(), "{path} does not exist");
    }
}
