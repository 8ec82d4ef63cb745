//! `mcp-root skills sync` against a real root and against a small MCP catalog server that
//! serves crafted catalogs (ones root itself would refuse to publish): every invalid case of
//! the catalog ADR is refused with a precise message and leaves the installed namespace and
//! its sentinel byte for byte unchanged; order does not matter; a new skill needs no client
//! change; a stalling server fails within the budget; a 401 renews the token once.

use mcp_tests::items;
use mcp_tests::run_ok;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_root::cli::skills_sync::{
    Budgets, SENTINEL, SyncError, SyncOptions, SyncReport, TokenSource, sync,
};
use mcp_root::skill_catalog::{META_KEY, sha256_hex};
use mcp_tests::TestRoot;
use rmcp::model::{
    InitializeResult, ListResourcesResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ServerCapabilities,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

const SCHEME: &str = "mcp-root";

// ---- a crafted catalog server ---------------------------------------------------------------

#[derive(Clone, Debug)]
struct FakeRes {
    uri: String,
    name: String,
    list_mime: Option<String>,
    read_mime: Option<String>,
    size: Option<u64>,
    bytes: Vec<u8>,
    blob: bool,
    list_meta: Value,
    read_meta: Value,
}

impl FakeRes {
    fn meta_mut(&mut self, f: impl Fn(&mut Value)) {
        f(&mut self.list_meta[META_KEY]);
        f(&mut self.read_meta[META_KEY]);
    }

    /// New content with metadata that matches it (to reach the rules after the hash check).
    fn set_bytes(&mut self, bytes: Vec<u8>) {
        let (sha, len) = (sha256_hex(&bytes), bytes.len() as u64);
        self.meta_mut(|m| {
            m["content_sha256"] = json!(sha);
            m["size"] = json!(len);
        });
        self.size = Some(len);
        self.bytes = bytes;
    }
}

fn meta(path: &str, bytes: &[u8], mime: &str, revision: &str) -> Value {
    json!({ META_KEY: {
        "owner_application": "mcp_gateway",
        "manifest_version": 1,
        "manifest_sha256": revision,
        "path": path,
        "content_sha256": sha256_hex(bytes),
        "mime_type": mime,
        "size": bytes.len(),
    }})
}

fn skill_text(kebab: &str) -> String {
    format!("---\nname: {kebab}\ndescription: The {kebab} skill.\n---\n\n# {kebab}\n")
}

/// A consistent catalog: `(kebab name, bundle path)` per skill, plus one unrelated resource.
fn catalog(skills: &[(&str, &str)]) -> Vec<FakeRes> {
    let revision = sha256_hex(format!("{skills:?}").as_bytes());
    let mut out = Vec::new();
    let mut declared = Vec::new();
    for (kebab, path) in skills {
        let uri = format!("{SCHEME}://platform/skills/{kebab}");
        let name = kebab.replace('-', "_");
        let bytes = skill_text(kebab).into_bytes();
        let m = meta(path, &bytes, "text/markdown", &revision);
        declared.push(json!({ "name": name, "uri": uri }));
        out.push(FakeRes {
            uri,
            name,
            list_mime: Some("text/markdown".into()),
            read_mime: Some("text/markdown".into()),
            size: Some(bytes.len() as u64),
            bytes,
            blob: false,
            list_meta: m.clone(),
            read_meta: m,
        });
    }
    let ontology = serde_json::to_vec_pretty(&json!({
        "manifest_version": 1,
        "skill_resources": declared,
    }))
    .unwrap();
    let m = meta("ontology.json", &ontology, "application/json", &revision);
    out.insert(
        0,
        FakeRes {
            uri: format!("{SCHEME}://platform/ontology"),
            name: "ontology".into(),
            list_mime: Some("application/json".into()),
            read_mime: Some("application/json".into()),
            size: Some(ontology.len() as u64),
            bytes: ontology,
            blob: false,
            list_meta: m.clone(),
            read_meta: m,
        },
    );
    // Not part of the catalog: ignored by the client.
    out.push(FakeRes {
        uri: "descriptor://sdk.schemas".into(),
        name: "sdk.schemas".into(),
        list_mime: Some("application/json".into()),
        read_mime: Some("application/json".into()),
        size: None,
        bytes: b"{}".to_vec(),
        blob: false,
        list_meta: json!({}),
        read_meta: json!({}),
    });
    out
}

fn valid() -> Vec<FakeRes> {
    catalog(&[
        ("root-descriptors", "skills/root_descriptors/SKILL.md"),
        ("hub-diagnostics", "skills/ops/hub_diagnostics/SKILL.md"),
        ("safe-writes", "skills/ops/safe_writes/SKILL.markdown"),
    ])
}

fn by_uri<'a>(c: &'a mut [FakeRes], kebab: &str) -> &'a mut FakeRes {
    let uri = format!("{SCHEME}://platform/skills/{kebab}");
    c.iter_mut()
        .find(|r| r.uri == uri)
        .expect("skill in catalog")
}

fn ontology_mut(c: &mut [FakeRes], f: impl FnOnce(&mut Value)) {
    let o = c.iter_mut().find(|r| r.name == "ontology").unwrap();
    let mut v: Value = serde_json::from_slice(&o.bytes).unwrap();
    f(&mut v);
    o.set_bytes(serde_json::to_vec_pretty(&v).unwrap());
}

#[derive(Clone)]
struct FakeServer(Arc<Mutex<Vec<FakeRes>>>);

fn meta_obj(v: &Value) -> Option<rmcp::model::MetaObject> {
    v.as_object()
        .filter(|m| !m.is_empty())
        .map(|m| rmcp::model::MetaObject(m.clone()))
}

impl ServerHandler for FakeServer {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_resources().build())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let all = self.0.lock().unwrap().clone();
        let start: usize = request
            .and_then(|r| r.cursor)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let end = (start + 2).min(all.len());
        let mut page = ListResourcesResult::with_all_items(
            all[start..end]
                .iter()
                .map(|r| {
                    let mut res = Resource::new(r.uri.clone(), r.name.clone());
                    res.mime_type = r.list_mime.clone();
                    res.size = r.size;
                    res.meta = meta_obj(&r.list_meta);
                    res
                })
                .collect(),
        );
        if end < all.len() {
            page.next_cursor = Some(end.to_string());
        }
        Ok(page)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let all = self.0.lock().unwrap().clone();
        let Some(r) = all.iter().find(|r| r.uri == request.uri) else {
            return Err(ErrorData::resource_not_found("no such resource", None));
        };
        let contents = if r.blob {
            use base64::Engine;
            ResourceContents::BlobResourceContents {
                uri: r.uri.clone(),
                mime_type: r.read_mime.clone(),
                blob: base64::engine::general_purpose::STANDARD.encode(&r.bytes),
                meta: meta_obj(&r.read_meta),
            }
        } else {
            ResourceContents::TextResourceContents {
                uri: r.uri.clone(),
                mime_type: r.read_mime.clone(),
                text: String::from_utf8_lossy(&r.bytes).into_owned(),
                meta: meta_obj(&r.read_meta),
            }
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}

/// Who may call the fake server: requests with another bearer get 401 (counted); with
/// `renew_to` set, the first refusal also writes the good token into the token file, as a
/// credential helper would.
struct Gate {
    good: String,
    renew_to: Option<PathBuf>,
    refused: AtomicU32,
}

async fn gate(
    axum::extract::State(g): axum::extract::State<Arc<Gate>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let ok = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        == Some(format!("Bearer {}", g.good).as_str());
    if ok {
        return next.run(req).await;
    }
    g.refused.fetch_add(1, Ordering::SeqCst);
    if let Some(file) = &g.renew_to {
        std::fs::write(file, &g.good).unwrap();
    }
    axum::response::Response::builder()
        .status(401)
        .header("www-authenticate", "Bearer error=\"invalid_token\"")
        .body(axum::body::Body::empty())
        .unwrap()
}

struct Fake {
    url: String,
    state: Arc<Mutex<Vec<FakeRes>>>,
    gate: Arc<Gate>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn fake(resources: Vec<FakeRes>, renew_to: Option<PathBuf>) -> Fake {
    let state = Arc::new(Mutex::new(resources));
    let handler = FakeServer(state.clone());
    let svc = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let gate_state = Arc::new(Gate {
        good: "good-token".into(),
        renew_to,
        refused: AtomicU32::new(0),
    });
    let app =
        axum::Router::new()
            .nest_service("/mcp", svc)
            .layer(axum::middleware::from_fn_with_state(
                gate_state.clone(),
                gate,
            ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Fake {
        url: format!("http://{addr}/mcp"),
        state,
        gate: gate_state,
        server,
    }
}

// ---- helpers --------------------------------------------------------------------------------

fn token_file(dir: &Path, token: &str) -> PathBuf {
    let p = dir.join("token");
    std::fs::write(&p, token).unwrap();
    p
}

fn opts(url: &str, token: PathBuf, dest: &Path, namespace: &str) -> SyncOptions {
    SyncOptions {
        url: url.to_string(),
        token: TokenSource::File(token),
        dest: dest.to_path_buf(),
        namespace: namespace.to_string(),
        scheme: SCHEME.into(),
        dry_run: false,
        budgets: Budgets::default(),
        ca_file: None,
    }
}

/// Every file below `dir` with its bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(e.path()).unwrap());
            }
        }
    }
    out
}

async fn ok(o: &SyncOptions) -> SyncReport {
    match sync(o).await {
        Ok(r) => r,
        Err(e) => panic!("sync failed: {e}"),
    }
}

// ---- against a real root --------------------------------------------------------------------

// Multi-threaded: the `mcp-root` child process talks to the in-process root while this
// thread waits for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_root_catalog_installs_and_a_new_skill_needs_no_client_change() {
    let root = TestRoot::start().await.unwrap();
    let token = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let work = tempfile::tempdir().unwrap();
    let dest = work.path().join("skills");
    let o = opts(
        &root.mcp_url(),
        token_file(work.path(), &token),
        &dest,
        "mcp_root_platform",
    );
    let report = ok(&o).await;
    assert!(report.changed);
    let names: Vec<&str> = report
        .catalog
        .skills
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["hub_diagnostics", "root_descriptors", "safe_writes"]
    );
    let installed = tree(&dest);
    for p in [
        "mcp_root_platform/root_descriptors/SKILL.md",
        "mcp_root_platform/ops/hub_diagnostics/SKILL.md",
        "mcp_root_platform/ops/safe_writes/SKILL.md",
    ] {
        assert!(installed.contains_key(p), "{p} in {:?}", installed.keys());
    }
    let sentinel: Value =
        serde_json::from_slice(&installed[&format!("mcp_root_platform/{SENTINEL}")]).unwrap();
    assert_eq!(
        sentinel["manifest_sha256"],
        json!(report.catalog.manifest_sha256)
    );
    assert_eq!(sentinel["manifest_version"], 1);

    // Again: nothing changes, not even the sentinel's bytes.
    let again = ok(&o).await;
    assert!(!again.changed);
    assert_eq!(tree(&dest), installed);

    // The server gains a skill (a new source tree, built and published): the same client
    // installs it.
    let src = tempfile::tempdir().unwrap();
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    mcp_tests::copy_tree(&repo.join("config/descriptor-source"), src.path());
    let manifest = std::fs::read_to_string(src.path().join("sources.toml")).unwrap();
    let abs = |rel: &str| format!("{:?}", repo.join(rel).display().to_string());
    std::fs::write(
        src.path().join("sources.toml"),
        manifest
            .replace("\"../../schemas/tools\"", &abs("schemas/tools"))
            .replace("\"../../schemas\"", &abs("schemas"))
            .replace("\"../profiles.toml\"", &abs("config/profiles.toml")),
    )
    .unwrap();
    std::fs::create_dir_all(src.path().join("skills/new_area/brand_new")).unwrap();
    std::fs::write(
        src.path().join("skills/new_area/brand_new/SKILL.md"),
        skill_text("brand-new"),
    )
    .unwrap();
    let set = mcp_root::descriptors::build::build(src.path(), &Default::default()).unwrap();
    let res = root
        .post_as(
            root.admin_token(),
            "/v1/root/mcp/descriptors",
            &json!({ "descriptors": set }),
        )
        .await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let report = ok(&o).await;
    assert!(report.changed);
    assert_eq!(report.catalog.skills.len(), 4);
    let after = tree(&dest);
    assert_eq!(
        after["mcp_root_platform/new_area/brand_new/SKILL.md"],
        skill_text("brand-new").into_bytes()
    );

    // The binary, with the token in an environment variable.
    let bin = mcp_tests::workspace_bin("mcp-root").unwrap();
    let out = run_ok(
        std::process::Command::new(bin)
            .args(["skills", "sync", "--url", &root.mcp_url(), "--token-env"])
            .arg("SYNC_TEST_TOKEN")
            .arg("--dest")
            .arg(work.path().join("cli"))
            .arg("--json")
            .env("SYNC_TEST_TOKEN", &token),
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(items(&v["catalog"]["skills"]).len(), 4);
    assert_eq!(v["changed"], true);
    root.stop().await;
}

// ---- compatibility --------------------------------------------------------------------------

#[tokio::test]
async fn every_invalid_catalog_is_refused_and_changes_nothing() {
    type Breaker = fn(&mut Vec<FakeRes>);
    let cases: &[(&str, Breaker, &str)] = &[
        (
            "path traversal",
            |c| {
                by_uri(c, "hub-diagnostics")
                    .meta_mut(|m| m["path"] = json!("skills/../../etc/SKILL.md"))
            },
            "has a `.` or `..` component",
        ),
        (
            "absolute path",
            |c| {
                by_uri(c, "hub-diagnostics")
                    .meta_mut(|m| m["path"] = json!("/etc/hub_diagnostics/SKILL.md"))
            },
            "absolute",
        ),
        (
            "duplicate name",
            |c| {
                ontology_mut(c, |o| {
                    let first = o["skill_resources"][0].clone();
                    o["skill_resources"].as_array_mut().unwrap().push(first);
                })
            },
            "duplicate skill name",
        ),
        (
            "duplicate URI",
            |c| {
                let again = by_uri(c, "safe-writes").clone();
                c.push(again);
            },
            "is listed twice",
        ),
        (
            "hash mismatch",
            |c| by_uri(c, "safe-writes").meta_mut(|m| m["content_sha256"] = json!("0".repeat(64))),
            "content SHA-256",
        ),
        (
            "size mismatch",
            |c| {
                let r = by_uri(c, "safe-writes");
                let n = r.bytes.len() as u64 + 1;
                r.meta_mut(|m| m["size"] = json!(n));
                r.size = Some(n);
            },
            "the metadata says",
        ),
        (
            "bad UTF-8",
            |c| {
                let r = by_uri(c, "safe-writes");
                r.blob = true;
                r.set_bytes(vec![b'-', b'-', b'-', b'\n', 0xff, 0xfe, b'\n']);
            },
            "not UTF-8",
        ),
        (
            "missing front matter",
            |c| by_uri(c, "safe-writes").set_bytes(b"# no front matter\n".to_vec()),
            "no YAML front matter",
        ),
        (
            "mismatched front matter",
            |c| by_uri(c, "safe-writes").set_bytes(skill_text("other-name").into_bytes()),
            "does not match the URI identity `safe-writes`",
        ),
        (
            "wrong owner",
            |c| {
                for r in c.iter_mut().filter(|r| r.uri.starts_with(SCHEME)) {
                    r.meta_mut(|m| m["owner_application"] = json!("someone_else"));
                }
            },
            "owner application `someone_else` is not `mcp_gateway`",
        ),
        (
            "wrong MIME",
            |c| {
                let r = by_uri(c, "safe-writes");
                r.list_mime = Some("text/plain".into());
                r.read_mime = Some("text/plain".into());
                r.meta_mut(|m| m["mime_type"] = json!("text/plain"));
            },
            "is not text/markdown",
        ),
        (
            "mixed manifest revisions",
            |c| by_uri(c, "safe-writes").meta_mut(|m| m["manifest_sha256"] = json!("f".repeat(64))),
            "manifest revisions differ",
        ),
        (
            "undeclared resource under the skill prefix",
            |c| {
                let mut extra = by_uri(c, "safe-writes").clone();
                extra.uri = format!("{SCHEME}://platform/skills/stowaway");
                extra.name = "stowaway".into();
                c.push(extra);
            },
            "`mcp-root://platform/skills/stowaway` is listed under the skill prefix but not declared",
        ),
        (
            "declared skill missing",
            |c| c.retain(|r| !r.uri.ends_with("/safe-writes")),
            "`mcp-root://platform/skills/safe-writes` is declared by the ontology but not listed",
        ),
        (
            "unsupported manifest version",
            |c| {
                for r in c.iter_mut().filter(|r| r.uri.starts_with(SCHEME)) {
                    r.meta_mut(|m| m["manifest_version"] = json!(2));
                }
            },
            "unsupported catalog manifest version 2",
        ),
        (
            "list and read metadata disagree",
            |c| {
                by_uri(c, "safe-writes").list_meta[META_KEY]["path"] =
                    json!("skills/ops/other/SKILL.md")
            },
            "list and read metadata differ",
        ),
        (
            "nested destinations",
            |c| {
                by_uri(c, "safe-writes").meta_mut(|m| {
                    m["path"] = json!("skills/ops/hub_diagnostics/safe_writes/SKILL.md")
                })
            },
            "same or nested destination",
        ),
        (
            "no ontology",
            |c| c.retain(|r| r.name != "ontology"),
            "lists no ontology",
        ),
    ];
    let work = tempfile::tempdir().unwrap();
    let token = token_file(work.path(), "good-token");
    let f = fake(valid(), None).await;
    let dest = work.path().join("skills");
    let o = opts(&f.url, token, &dest, "mcp_root_platform");
    let installed = ok(&o).await;
    assert_eq!(installed.catalog.skills.len(), 3);
    let before = tree(&dest);
    assert!(before.contains_key(&format!("mcp_root_platform/{SENTINEL}")));
    for (what, break_it, expected) in cases {
        let mut c = valid();
        break_it(&mut c);
        *f.state.lock().unwrap() = c;
        let err = match sync(&o).await {
            Ok(_) => panic!("{what}: accepted"),
            Err(e) => e,
        };
        assert!(
            matches!(err, SyncError::Catalog(_)),
            "{what}: not a catalog error: {err}"
        );
        let msg = err.to_string();
        assert!(msg.contains(expected), "{what}: `{msg}` lacks `{expected}`");
        assert_eq!(tree(&dest), before, "{what}: the installed tree changed");
        // Dry runs validate the same way.
        let dry = SyncOptions {
            dry_run: true,
            ..o.clone()
        };
        assert!(sync(&dry).await.is_err(), "{what}: dry run accepted");
    }
    // No staging or backup directories are left behind.
    let left: Vec<String> = std::fs::read_dir(&dest)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["mcp_root_platform"]);
}

#[tokio::test]
async fn order_does_not_matter_and_namespaces_do_not_collide() {
    let work = tempfile::tempdir().unwrap();
    let token = token_file(work.path(), "good-token");
    let f = fake(valid(), None).await;
    let a = work.path().join("a");
    let first = ok(&opts(&f.url, token.clone(), &a, "alpha")).await;

    // Reverse the list order and the ontology's order.
    let mut c = valid();
    c.reverse();
    ontology_mut(&mut c, |o| {
        o["skill_resources"].as_array_mut().unwrap().reverse();
    });
    *f.state.lock().unwrap() = c;
    let b = work.path().join("b");
    let second = ok(&opts(&f.url, token.clone(), &b, "alpha")).await;
    assert_eq!(
        serde_json::to_value(&first.catalog.skills).unwrap(),
        serde_json::to_value(&second.catalog.skills).unwrap()
    );
    assert_eq!(tree(&a), tree(&b), "same files and sentinel bytes");

    // Equal relative names in separate namespaces are not collisions.
    let beta = ok(&opts(&f.url, token, &a, "beta")).await;
    assert!(beta.changed);
    let both = tree(&a);
    assert!(both.contains_key("alpha/root_descriptors/SKILL.md"));
    assert!(both.contains_key("beta/root_descriptors/SKILL.md"));

    // A dry run writes nothing.
    let fresh = work.path().join("dry");
    let dry = SyncOptions {
        dry_run: true,
        ..opts(
            &f.url,
            token_file(work.path(), "good-token"),
            &fresh,
            "alpha",
        )
    };
    let r = ok(&dry).await;
    assert!(r.dry_run && r.changed);
    assert!(!fresh.exists());
}

#[tokio::test]
async fn a_stalling_server_fails_the_sync_within_the_budget() {
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stall = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    let work = tempfile::tempdir().unwrap();
    let dest = work.path().join("skills");
    std::fs::create_dir_all(dest.join("mcp_root_platform")).unwrap();
    std::fs::write(dest.join("mcp_root_platform/keep.md"), "kept").unwrap();
    let before = tree(&dest);
    let mut o = opts(
        &format!("http://{addr}/mcp"),
        token_file(work.path(), "t"),
        &dest,
        "mcp_root_platform",
    );
    o.budgets = Budgets {
        connect: Duration::from_millis(300),
        read: Duration::from_millis(300),
        total: Duration::from_millis(600),
    };
    let err = sync(&o).await.expect_err("a stalled server fails the sync");
    assert!(
        matches!(err, SyncError::Timeout { .. }),
        "not a budget error: {err}"
    );
    assert_eq!(tree(&dest), before);
    stall.abort();
}

#[tokio::test]
async fn a_401_renews_the_token_once() {
    let work = tempfile::tempdir().unwrap();
    let token = token_file(work.path(), "stale-token");
    let f = fake(valid(), Some(token.clone())).await;
    let dest = work.path().join("skills");
    let report = ok(&opts(&f.url, token.clone(), &dest, "mcp_root_platform")).await;
    assert_eq!(report.renewals, 1);
    assert_eq!(f.gate.refused.load(Ordering::SeqCst), 1);
    assert_eq!(report.catalog.skills.len(), 3);

    // A source that still holds a refused token: one renewal, one resend, then failure.
    let g = fake(valid(), None).await;
    let bad = token_file(work.path(), "wrong-token");
    let err = sync(&opts(
        &g.url,
        bad,
        &work.path().join("other"),
        "mcp_root_platform",
    ))
    .await
    .expect_err("a refused token fails the sync");
    assert!(
        matches!(err, SyncError::Unauthorized { .. }),
        "unexpected error: {err}"
    );
    assert_eq!(
        g.gate.refused.load(Ordering::SeqCst),
        2,
        "exactly one resend"
    );
    assert!(!work.path().join("other").exists());
}
