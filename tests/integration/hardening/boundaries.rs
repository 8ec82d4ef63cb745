//! The protocol boundary tests of seed 003 ("Boundary Tests"), each a real test against real
//! daemons or the real sources:
//!
//! 1. the public run profile never exposes bearers or internal secrets;
//! 2. the hub (worker side) holds no product tool-id allowlist beyond its own adapters;
//! 3. root's router and call path hold no per-tool branches;
//! 4. the hub evaluates no business policy beyond final enforcement;
//! 5. forged actor headers are ignored;
//! 6. write execution without a confirmation token is blocked;
//! 7. write replay with the same idempotency key is safe (one effect);
//! 8. destructive actions resolve to safe alternatives;
//! 9. local and production configurations share one schema.
//!
//! Related tests elsewhere: `run_profile.rs` (the run profile's shape, auth and secrets with a
//! read lease), `auth.rs::forged_actor_headers_are_ignored` (REST), `hub_enforcement.rs`
//! (forged, expired, replayed and unpublished calls refused by the hub), `writes.rs` (the
//! whole preview / confirm / execute / replay flow of one write), `tools.rs` (destructive
//! names over REST and MCP), `config.rs` (example configs parse).

use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::refusal;
use mcp_tests::runs;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use mcp_shared::protocol::{self, CallOutcome, CallRequest, Envelope, HubToRoot, RootToHub};
use mcp_tests::TestRoot;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::governance::run_profile::{assert_no_secret, fetch};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every tool id with a contract (the product's action ids).
pub fn contract_tool_ids() -> BTreeSet<String> {
    std::fs::read_dir(repo().join("schemas/tools"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".json").map(str::to_owned)
        })
        .collect()
}

// ----------------------------------------------------------------------------- source scans

/// A Rust token, as far as these scans care: string literals, identifiers and punctuation
/// (comments and whitespace dropped).
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Str(String),
    Ident(String),
    Punct(char),
}

/// Tokenizes Rust source: comments (nested block comments too), char literals, lifetimes,
/// plain, byte and raw strings are handled so that a `"` or a brace inside them is not taken
/// for code.
fn tokens(src: &str) -> Vec<(usize, Tok)> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0usize, 1usize);
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let ident: String = c[start..i].iter().collect();
            let raw = matches!(ident.as_str(), "r" | "br") && (at(i) == '"' || at(i) == '#');
            if raw {
                let mut hashes = 0;
                while at(i) == '#' {
                    hashes += 1;
                    i += 1;
                }
                i += 1; // the opening quote
                let start = i;
                loop {
                    if i >= c.len() {
                        break;
                    }
                    if c[i] == '"' && (0..hashes).all(|k| at(i + 1 + k) == '#') {
                        break;
                    }
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
                out.push((line, Tok::Str(c[start..i].iter().collect())));
                i += 1 + hashes;
            } else if ident == "b" && at(i) == '"' {
                // A byte string: read as a plain string below.
            } else {
                out.push((line, Tok::Ident(ident)));
            }
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
        } else if ch == '"' {
            i += 1;
            let mut s = String::new();
            let start_line = line;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    match at(i + 1) {
                        'n' => s.push('\n'),
                        't' => s.push('\t'),
                        '\n' => {
                            line += 1;
                            i += 2;
                            while i < c.len() && c[i].is_whitespace() {
                                if c[i] == '\n' {
                                    line += 1;
                                }
                                i += 1;
                            }
                            continue;
                        }
                        other => s.push(other),
                    }
                    i += 2;
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    s.push(c[i]);
                    i += 1;
                }
            }
            i += 1;
            out.push((start_line, Tok::Str(s)));
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if at(i + 1) == '\\' {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else {
            out.push((line, Tok::Punct(ch)));
            i += 1;
        }
    }
    out
}

/// The string literals of `src` outside `#[cfg(test)]` items, with their lines.
fn literals_outside_tests(src: &str) -> Vec<(usize, String)> {
    let toks = tokens(src);
    let is = |k: usize, t: Tok| toks.get(k).map(|(_, x)| x) == Some(&t);
    let mut out = Vec::new();
    let mut k = 0;
    while k < toks.len() {
        let cfg_test = is(k, Tok::Punct('#'))
            && is(k + 1, Tok::Punct('['))
            && is(k + 2, Tok::Ident("cfg".into()))
            && is(k + 3, Tok::Punct('('))
            && is(k + 4, Tok::Ident("test".into()))
            && is(k + 5, Tok::Punct(')'))
            && is(k + 6, Tok::Punct(']'));
        if cfg_test {
            // Skip the item: up to its `;` or the end of its first block.
            k += 7;
            let mut depth = 0;
            while k < toks.len() {
                match &toks[k].1 {
                    Tok::Punct('{') => depth += 1,
                    Tok::Punct('}') => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    Tok::Punct(';') if depth == 0 => break,
                    _ => {}
                }
                k += 1;
            }
        } else if let (line, Tok::Str(s)) = &toks[k] {
            out.push((*line, s.clone()));
        }
        k += 1;
    }
    out
}

/// Whether `path` is a module of tests only: a `tests.rs` or `*_tests.rs` that its parent
/// module declares under `#[cfg(test)]` (its items are not the product's code).
fn test_only(path: &Path) -> bool {
    let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
        return false;
    };
    if stem != "tests" && !stem.ends_with("_tests") {
        return false;
    }
    let dir = path.parent().unwrap();
    let mut parents = vec![dir.join("mod.rs"), dir.join("lib.rs"), dir.join("main.rs")];
    if let (Some(up), Some(name)) = (dir.parent(), dir.file_name()) {
        parents.push(up.join(format!("{}.rs", name.to_string_lossy())));
    }
    let declared = format!("#[cfg(test)]\nmod {stem};");
    parents
        .iter()
        .any(|p| std::fs::read_to_string(p).is_ok_and(|src| src.contains(&declared)))
}

/// `*.rs` files under `dir`, recursively, as paths relative to the repository; modules of
/// tests only ([`test_only`]) are left out, as `#[cfg(test)]` items are within a file.
fn rust_files(dir: &str) -> Vec<PathBuf> {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(p).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo().join(dir), &mut out);
    out.retain(|p| !test_only(p));
    out.sort();
    out.into_iter()
        .map(|p| p.strip_prefix(repo()).unwrap().to_path_buf())
        .collect()
}

/// Tool-id literals (`ids` exactly) in the non-test code of `files`: `file:line "id"`.
fn tool_id_literals(files: &[PathBuf], ids: &BTreeSet<String>) -> Vec<String> {
    let mut found = Vec::new();
    for f in files {
        let src = std::fs::read_to_string(repo().join(f)).unwrap();
        for (line, s) in literals_outside_tests(&src) {
            if ids.contains(&s) {
                found.push(format!("{}:{line} \"{s}\"", f.display()));
            }
        }
    }
    found
}

#[test]
fn the_source_scanner_finds_tool_ids_in_code_and_not_in_comments_or_tests() {
    let ids: BTreeSet<String> = ["hub.get_status".to_string()].into();
    let src = r##"
        // "hub.get_status" in a comment
        /* "hub.get_status" /* nested */ still a comment */
        fn route(tool_id: &str) -> bool {
            let q = '"'; let _l: &'static str = "x";
            if tool_id == "hub.get_status" { return true; }
            match tool_id { r#"hub.get_status"# => true, _ => false }
        }
        #[cfg(test)]
        mod tests { const T: &str = "hub.get_status"; fn f() { let _ = "{"; } }
        const AFTER: &str = "hub.get_status";
    "##;
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x.rs");
    std::fs::write(&f, src).unwrap();
    let found: Vec<usize> = literals_outside_tests(src)
        .into_iter()
        .filter(|(_, s)| ids.contains(s))
        .map(|(line, _)| line)
        .collect();
    assert_eq!(found, [6, 7, 11], "code lines only: {found:?}");
}

/// Boundary 2: The hub holds no product tool-id allowlist beyond its own adapters: outside
/// `hub/src/adapters/` (and tests) no contract's tool id appears in the hub's source; inside,
/// only the ids its adapters declare. What the hub publishes is exactly its adapters'
/// declarations.
#[test]
fn the_hub_names_tool_ids_only_in_its_adapters() {
    let ids = contract_tool_ids();
    assert!(ids.contains("hub.get_status"), "{ids:?}");
    let (adapters, others): (Vec<PathBuf>, Vec<PathBuf>) = rust_files("hub/src")
        .into_iter()
        .filter(|p| !p.to_string_lossy().ends_with("tests.rs"))
        .partition(|p| p.starts_with("hub/src/skill/adapters"));
    assert!(others.iter().any(|p| p.ends_with("enforcement.rs")));
    assert!(others.iter().any(|p| p.ends_with("channel/mod.rs")));
    let found = tool_id_literals(&others, &ids);
    assert!(
        found.is_empty(),
        "tool ids outside the hub's adapters (an allowlist or per-tool branch): {found:#?}"
    );
    let declared: BTreeSet<String> = mcp_hub::ADAPTERS
        .iter()
        .map(|a| a.tool_id.to_string())
        .collect();
    let in_adapters: BTreeSet<String> = tool_id_literals(&adapters, &ids)
        .into_iter()
        .map(|f| f.rsplit('"').nth(1).unwrap().to_string())
        .collect();
    let undeclared: Vec<&String> = in_adapters.difference(&declared).collect();
    assert!(
        undeclared.is_empty(),
        "adapter sources name tools no adapter declares: {undeclared:?}"
    );
}

/// Boundary 3: Root's router and call path hold no per-tool branches: no contract's tool id appears
/// as a literal in root's non-test code (both crates) outside its own adapters (`call/executors/`), nor in the
/// protocol types. Tools are data (contracts); the path is the same for all of them.
#[test]
fn root_and_the_protocol_name_no_tool() {
    let ids = contract_tool_ids();
    let mut files: Vec<PathBuf> = rust_files("root/src")
        .into_iter()
        .chain(rust_files("root-core/src"))
        .filter(|p| !p.starts_with("root/src/call/executors"))
        .collect();
    for must in [
        "root/src/call/mod.rs",
        "root/src/call/writes.rs",
        "root/src/mcp/mod.rs",
        "root/src/api/mod.rs",
        "root-core/src/hubs/router.rs",
        "root-core/src/hubs/link.rs",
        "root-core/src/policy.rs",
        "root/src/replica/forward.rs",
        "root/src/api/run_profile.rs",
    ] {
        assert!(files.contains(&PathBuf::from(must)), "{must} is scanned");
    }
    files.extend(rust_files("shared/src"));
    let found = tool_id_literals(&files, &ids);
    assert!(
        found.is_empty(),
        "per-tool code on root's path or in the protocol: {found:#?}"
    );
}

// ------------------------------------------------------------------- the hub: enforcement only

fn frame(body: RootToHub) -> Message {
    let env = Envelope {
        v: protocol::PROTOCOL_VERSION,
        id: uuid::Uuid::now_v7().to_string(),
        in_reply_to: None,
        body,
    };
    Message::Text(serde_json::to_string(&env).unwrap().into())
}

/// A stand-in root: accepts one hub (of `environment`, with an allowed test `smoke`; writes
/// allowed only on `test`), welcomes it; returns the socket and the hub.
async fn stand_in_root(
    target: &str,
    environment: &str,
    token: &str,
    state_dir: &Path,
) -> (
    tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
    mcp_hub::HubHandle,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let mut cfg = mcp_hub::config::HubConfig::new(target, environment, url, token, state_dir);
    if environment == "test" {
        cfg.write_scope = mcp_shared::target::WriteScope::TestOnly;
    }
    cfg.skill.allowed_tests = vec![mcp_hub::config::AllowedTestConfig {
        timeout_ms: 5_000,
        ..mcp_hub::config::AllowedTestConfig::new("smoke", vec!["true".into()])
    }];
    let hub = tokio::spawn(async move {
        let hub = mcp_hub::start(cfg).await.unwrap();
        hub.wait_connected(Duration::from_secs(10)).await.unwrap();
        hub
    });
    let (tcp, _) = listener.accept().await.unwrap();
    let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
    let _hello = ws.next().await.unwrap().unwrap();
    // Raw JSON: the welcome's optional fields keep their defaults.
    let welcome = json!({"v": protocol::PROTOCOL_VERSION, "id": "w1", "in_reply_to": null,
        "body": {"type": "welcome", "target_id": target, "heartbeat_interval_ms": 60_000}});
    ws.send(Message::Text(welcome.to_string().into()))
        .await
        .unwrap();
    (ws, hub.await.unwrap())
}

async fn results(
    ws: &mut tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
    n: usize,
) -> BTreeMap<String, CallOutcome> {
    let mut out = BTreeMap::new();
    while out.len() < n {
        let msg = mcp_tests::next_frame(ws, Duration::from_secs(15)).await;
        let Message::Text(t) = msg else { continue };
        if let HubToRoot::Result { call_id, outcome } =
            protocol::decode::<HubToRoot>(t.as_str()).unwrap().body
        {
            out.insert(call_id, outcome);
        }
    }
    out
}

fn code(o: &CallOutcome) -> String {
    match o {
        CallOutcome::Ok { .. } => "ok".into(),
        CallOutcome::Error { error, .. } => error.code.as_str().into(),
    }
}

/// Boundary 4: The hub evaluates no business policy. What it checks (enforcement.rs): the signature,
/// the deadline (in root's time, so clock skew belongs here), replay of the call id, that an
/// enabled skill publishes the tool (its capability on this target), and its own
/// environment's write scope; plus a full replay cache answering `busy`. It never looks at
/// leases, capability profiles or who the caller is: a correctly signed call for a lease that
/// does not exist, with a capability no profile grants, runs. (Forged, expired, replayed and
/// unpublished calls: `hub_enforcement.rs`.)
#[tokio::test]
async fn the_hub_refuses_only_on_signature_expiry_replay_capability_or_environment() {
    // The source: the gate's refusals, and no policy vocabulary anywhere in the hub.
    let gate = std::fs::read_to_string(repo().join("hub/src/link/enforcement.rs")).unwrap();
    let toks = tokens(&gate);
    let cut = toks
        .windows(5)
        .position(|w| {
            w.iter().map(|(_, t)| t.clone()).collect::<Vec<_>>()
                == [
                    Tok::Punct('#'),
                    Tok::Punct('['),
                    Tok::Ident("cfg".into()),
                    Tok::Punct('('),
                    Tok::Ident("test".into()),
                ]
        })
        .unwrap_or(toks.len());
    let codes: BTreeSet<String> = toks[..cut]
        .windows(4)
        .filter(|w| {
            w[0].1 == Tok::Ident("ErrorCode".into())
                && w[1].1 == Tok::Punct(':')
                && w[2].1 == Tok::Punct(':')
        })
        .filter_map(|w| match &w[3].1 {
            Tok::Ident(i) => Some(i.clone()),
            _ => None,
        })
        .collect();
    let allowed: BTreeSet<String> = [
        "SignatureInvalid",
        "DeadlineExpired",
        "ClockSkew",
        "ReplayRejected",
        "SkillDisabled",
        "EnvironmentForbidden",
        "Busy",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert!(codes.contains("SignatureInvalid") && codes.contains("SkillDisabled"));
    let extra: Vec<&String> = codes.difference(&allowed).collect();
    assert!(extra.is_empty(), "the hub's gate refuses for {extra:?}");
    for f in rust_files("hub/src") {
        let src = std::fs::read_to_string(repo().join(&f)).unwrap();
        let idents: BTreeSet<String> = tokens(&src)
            .into_iter()
            .filter_map(|(_, t)| match t {
                Tok::Ident(i) => Some(i),
                _ => None,
            })
            .collect();
        for policy in [
            "CapabilityProfile",
            "ProfileRegistry",
            "SessionLease",
            "PolicyDecision",
            "capability_profile",
            "effective_tools",
        ] {
            assert!(
                !idents.contains(policy),
                "{} uses `{policy}`: business policy belongs to root",
                f.display()
            );
        }
    }

    // Behaviour: a test hub runs what root signed, whoever the lease; a production hub
    // refuses writes on its own scope.
    let token = "mcph_boundary-standin-token";
    let key = protocol::signing_key(token);
    let now = mcp_shared::time::unix_ms(mcp_shared::time::now());
    let call = |id: &str, tool: &str, args: Value, dry_run: bool| {
        let mut c = CallRequest {
            call_id: id.into(),
            trace_id: "trace".into(),
            session_id: "no-such-lease".into(),
            tool_id: tool.into(),
            capability: "no.profile.grants.this".into(),
            body: mcp_shared::protocol::CallBody {
                arguments: args,
                dry_run,
                idempotency_key: None,
                confirmed_effect: None,
            },
            expires_at_ms: now + 30_000,
            traceparent: None,
            signature: String::new(),
        };
        c.sign(&key);
        c
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut ws, hub) = stand_in_root("hub:test-alpha", "test", token, dir.path()).await;
    for c in [
        call("read", "hub.get_status", json!({}), false),
        call(
            "write-dry",
            "hub.run_allowed_tests",
            json!({"name": "smoke"}),
            true,
        ),
        call(
            "write",
            "hub.run_allowed_tests",
            json!({"name": "smoke"}),
            false,
        ),
    ] {
        ws.send(frame(RootToHub::Call(c))).await.unwrap();
    }
    let r = results(&mut ws, 3).await;
    for id in ["read", "write-dry", "write"] {
        assert_eq!(code(&r[id]), "ok", "{id}: {:?}", r[id]);
    }
    hub.shutdown().await;

    // The same calls on a production hub: its own write scope refuses the writes.
    let dir = tempfile::tempdir().unwrap();
    let (mut ws, hub) = stand_in_root("hub:prod-alpha", "prod", token, dir.path()).await;
    for c in [
        call("read", "hub.get_status", json!({}), false),
        call(
            "write",
            "hub.run_allowed_tests",
            json!({"name": "smoke"}),
            true,
        ),
    ] {
        ws.send(frame(RootToHub::Call(c))).await.unwrap();
    }
    let r = results(&mut ws, 2).await;
    assert_eq!(code(&r["read"]), "ok", "{:?}", r["read"]);
    assert_eq!(
        code(&r["write"]),
        "environment_forbidden",
        "{:?}",
        r["write"]
    );
    hub.shutdown().await;
}

// ------------------------------------------------------------------------------ through root

/// Boundary 1: The public run profile never exposes bearers or secrets, for a lease that may write too
/// (its write actions carry phases, never a token), whoever asks, and neither does root's
/// verification answer. (`run_profile.rs` covers a read lease, the operator's copy and
/// forged headers.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_profile_never_exposes_bearers_or_secrets() {
    let root = TestRoot::start().await.unwrap();
    let tests = "[[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"true\"]\n";
    let hub = root.start_hub("hub:test-alpha", tests).await.unwrap();
    let (id, token) = root.lease("hub:test-alpha", "InfraOpsControl").await;
    let (s, issued) = fetch(&root, &id, Some(&token), Value::Null, &[]).await;
    assert_eq!(s, 201, "{issued}");
    let p = issued["run_profile"].clone();
    let credential = issued["token"].as_str().unwrap().to_owned();
    let actions = items(&p["toolProfile"]["assistantActions"]["actions"]).clone();
    let write = actions
        .iter()
        .find(|a| a["actionId"] == "hub.run_allowed_tests")
        .unwrap_or_else(|| panic!("a write action: {p:#}"));
    assert_eq!(write["phases"], json!(["preview", "execute"]));
    assert!(actions.iter().all(|a| a["sideEffect"] != "destructive"));
    let verdict = root
        .admin_post("/v1/root/mcp/run-profiles/verify", p.clone())
        .await;
    assert_eq!(verdict["valid"], true);
    let (_, op) = fetch(&root, &id, Some(&root.admin_token()), Value::Null, &[]).await;
    let op_credential = op["token"].as_str().unwrap().to_owned();
    for doc in [&p, &op["run_profile"], &verdict] {
        assert_no_secret(
            doc,
            &[&token, &hub.token, &credential, &op_credential],
            &root,
        );
    }
    hub.stop().await;
    root.stop().await;
}

/// An rmcp client whose every request carries `headers` besides the bearer.
async fn mcp_client_with_headers(
    url: &str,
    token: &str,
    headers: &[(&'static str, &str)],
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut config =
        StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(token);
    for (k, v) in headers {
        config.custom_headers.insert(
            reqwest::header::HeaderName::from_static(k),
            reqwest::header::HeaderValue::from_str(v).unwrap(),
        );
    }
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

/// Boundary 5: Forged actor headers are ignored: over MCP (and REST, `auth.rs`) the audit event's
/// actor is the lease root resolved from the bearer, and the run profile's owner is that
/// lease (`run_profile.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_actor_headers_are_ignored_over_mcp() {
    let root = TestRoot::start().await.unwrap();
    let (id, token) = root.lease("hub:test-alpha", "AdaOSDevRead").await;
    let forged = [
        ("x-actor", "root-admin"),
        ("x-owner-key", "email:mallory@example.org"),
        ("x-user-id", "platform-user-mallory"),
        ("x-forwarded-user", "mallory"),
        ("x-actor-role", "root-admin"),
    ];
    let client = mcp_client_with_headers(&root.mcp_url(), &token, &forged).await;
    let res = client
        .call_tool(CallToolRequestParams::new("sdk.get_metadata"))
        .await
        .unwrap();
    assert_ne!(res.is_error, Some(true), "{res:?}");
    let event_id = res.meta.unwrap().0["event_id"]
        .as_str()
        .unwrap()
        .to_string();
    let event = root.audit_event(&event_id).await;
    assert_eq!(event["actor"]["id"], format!("lease:{id}"));
    assert_eq!(event["actor"]["capability_profile"], "AdaOSDevRead");
    let text = event.to_string();
    assert!(
        !text.contains("mallory") && !text.contains("root-admin"),
        "{event}"
    );
    // A forged header is no credential either.
    let res = root
        .http
        .get(root.url("/v1/root/mcp/sessions"))
        .header("x-actor", "operator")
        .header("x-root-admin", "true")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    client.cancel().await.ok();
    root.stop().await;
}

/// A value valid for `schema`, from a fixed list of candidates (no tool-specific knowledge).
fn example_for(schema: &Value) -> Option<Value> {
    let v = jsonschema::validator_for(schema).ok()?;
    let mut candidates = vec![];
    if let Some(e) = schema["enum"].as_array().and_then(|e| e.first()) {
        candidates.push(e.clone());
    }
    if let Some(m) = schema["minimum"].as_i64() {
        candidates.push(json!(m));
    }
    for s in [
        "a",
        "hub.run_allowed_tests",
        "smoke",
        "app",
        "main",
        "AdaOSDevRead",
        "00000000-0000-4000-8000-000000000000",
        &format!("sha256:{}", "0".repeat(64)),
    ] {
        candidates.push(json!(s));
    }
    candidates.extend([json!(1), json!(true), json!([]), json!({})]);
    candidates.into_iter().find(|c| v.is_valid(c))
}

/// Schema-valid domain arguments for a contract: each required property from
/// [`example_for`]; then control fields are added by the caller.
fn domain_arguments(contract: &Value) -> Value {
    let schema = &contract["input_schema"];
    let mut args = serde_json::Map::new();
    for r in schema["required"].as_array().into_iter().flatten() {
        let name = r.as_str().unwrap();
        let value = example_for(&schema["properties"][name])
            .unwrap_or_else(|| panic!("{}: no example for `{name}`", contract["tool_id"]));
        args.insert(name.to_string(), value);
    }
    Value::Object(args)
}

/// Boundary 6: Write execution without a confirmation token is blocked, for every write tool any
/// capability profile grants (found from the contracts, no tool named here): an execute with
/// an idempotency key but no token is refused before anything runs, on root or on the hub.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_write_executes_without_a_confirmation_token() {
    let root = TestRoot::start().await.unwrap();
    let (_dir, counter, hub) = root
        .start_counting_hub("hub:test-alpha", |counter| format!(
                "{}\n[[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"sh\", \"-c\", \"echo run >> {}\"]\n",
                mcp_tests::serving_everything_toml().unwrap(),
                counter.display()
            ))
        .await;
    let foundation = root.admin_get("/v1/root/mcp/foundation").await;
    let contracts = root.admin_get("/v1/root/mcp/contracts").await;
    let by_id: BTreeMap<String, Value> = items(&contracts["contracts"])
        .iter()
        .map(|c| (c["tool_id"].as_str().unwrap().to_string(), c.clone()))
        .collect();
    let sessions_before = root.admin_get("/v1/root/mcp/sessions").await["sessions"]
        .as_array()
        .unwrap()
        .len();
    let mut tried = BTreeSet::new();
    // Each profile's lease on the target, and its fleet lease where it grants fleet tools.
    let mut tokens = Vec::new();
    for profile in items(&foundation["capability_profiles"]) {
        let name = profile["name"].as_str().unwrap().to_owned();
        let token = root.bearer("hub:test-alpha", &name).await;
        tokens.push((name.clone(), token));
        let (s, fleet) = root
            .admin()
            .post_status(
                "/v1/root/mcp/sessions",
                json!({ "selector": "id=*", "capability_profile": name, "ttl_sec": 600 }),
            )
            .await
            .unwrap();
        if s == 201 {
            tokens.push((
                format!("{name}-fleet"),
                fleet["token"].as_str().unwrap().to_owned(),
            ));
        }
    }
    let leases = tokens.len();
    for (name, token) in &tokens {
        let name = name.as_str();
        let visible =
            mcp_tests::get_json(&root.http, root.url("/v1/root/mcp/contracts"), token).await;
        for c in items(&visible["contracts"]) {
            if c["routing"] != "operational_write" {
                continue;
            }
            let tool = c["tool_id"].as_str().unwrap();
            let mut args = domain_arguments(&by_id[tool]);
            args["phase"] = json!("execute");
            args["idempotency_key"] = json!(format!("boundary-{tool}-{name}"));
            let (s, b) = root.call(token, tool, args.clone()).await;
            let code = b["error"]["code"].as_str().unwrap_or("none");
            let only_previews = !c["proposes"].is_null();
            assert!(
                code == "confirmation_required" || (only_previews && code == "invalid_arguments"),
                "{tool} with {args}: {s} {b}"
            );
            if code == "confirmation_required" {
                assert_eq!(s, 428, "{tool}");
            }
            tried.insert(tool.to_string());
        }
    }
    let writes: BTreeSet<String> = by_id
        .iter()
        .filter(|(_, c)| c["routing"] == "operational_write")
        .map(|(id, _)| id.clone())
        .collect();
    assert!(tried.contains("hub.run_allowed_tests") && tried.contains("hub.issue_access_token"));
    assert_eq!(
        tried, writes,
        "every write contract is granted by some profile and was tried"
    );
    // Nothing ran: no test, no lease issued by the access-token executor, no write reached
    // the hub's adapters.
    assert_eq!(runs(&counter), 0);
    let sessions_after = root.admin_get("/v1/root/mcp/sessions").await["sessions"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(sessions_after, sessions_before + leases);
    let reader = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let (s, activity) = root
        .call(&reader, "hub.get_activity_log", json!({"limit": 100}))
        .await;
    assert_eq!(s, 200, "{activity}");
    let ran: Vec<&Value> = items(&activity["result"]["entries"])
        .iter()
        .filter(|e| writes.contains(e["tool_id"].as_str().unwrap_or("")))
        .collect();
    assert!(ran.is_empty(), "writes reached the hub: {ran:?}");
    hub.stop().await;
    root.stop().await;
}

/// Boundary 7: Write replay with the same idempotency key is safe: one preview, then the same execute
/// (token and key) sent eight times at once and once more afterwards: the test runs exactly
/// once, every success is that one result, the later ones are marked replays.
/// (`writes.rs` covers the sequential replay and a key reused with other arguments.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_replays_of_one_write_have_one_effect() {
    let root = TestRoot::start().await.unwrap();
    let (_dir, counter, hub) = root
        .start_counting_hub("hub:test-alpha", |counter| format!(
                "[[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"sh\", \"-c\", \"echo run >> {}; sleep 0.2\"]\ntimeout_ms = 10000\n",
                counter.display()
            ))
        .await;
    let token = root.bearer("hub:test-alpha", "InfraOpsControl").await;
    let (s, preview) = root
        .call(&token, "hub.run_allowed_tests", json!({"name": "smoke"}))
        .await;
    assert_eq!(s, 200, "{preview}");
    let conf = preview["result"]["confirmation_token"]
        .as_str()
        .unwrap()
        .to_string();
    let exec = json!({"name": "smoke", "phase": "execute", "confirmation_token": conf, "idempotency_key": "one-effect"});
    let attempts = futures::future::join_all((0..8).map(|_| {
        let (root, token, exec) = (&root, &token, exec.clone());
        async move { root.call(token, "hub.run_allowed_tests", exec).await }
    }))
    .await;
    let ok: Vec<&Value> = attempts
        .iter()
        .filter(|(s, _)| *s == 200)
        .map(|(_, b)| b)
        .collect();
    assert!(!ok.is_empty(), "{attempts:?}");
    for (s, b) in &attempts {
        let code = b["error"]["code"].as_str().unwrap_or("ok");
        assert!(
            *s == 200 || ["confirmation_required", "busy"].contains(&code),
            "{s} {b}"
        );
    }
    let run_id = &ok[0]["result"]["result"]["run_id"];
    assert!(
        ok.iter()
            .all(|b| &b["result"]["result"]["run_id"] == run_id)
    );
    let (s, later) = root
        .call(&token, "hub.run_allowed_tests", exec.clone())
        .await;
    assert_eq!(s, 200, "{later}");
    assert_eq!(later["result"]["replay"], true);
    assert_eq!(&later["result"]["result"]["run_id"], run_id);
    assert_eq!(runs(&counter), 1, "one effect");
    hub.stop().await;
    root.stop().await;
}

/// Boundary 8: Destructive actions resolve to safe alternatives (`config/destructive.toml`): a
/// delete, drop, wipe, purge, shell or history rewrite on any plane is `forbidden_destructive`
/// with the rule's reason and alternatives, each of which names an existing tool or an
/// operator command, and never a tool the lease gets listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destructive_actions_resolve_to_safe_alternatives() {
    let root = TestRoot::start().await.unwrap();
    let (id, token) = root.lease("hub:test-alpha", "InfraOpsControl").await;
    let ids = contract_tool_ids();
    for name in [
        "hub.delete_deploy",
        "hub.drop_database",
        "hub.memory.purge_artifacts",
        "nlu_authoring.delete_template",
        "sdk.remove_schema",
        "root.truncate_audit",
        "hub.run_command",
        "hub.reset_hard",
    ] {
        assert!(!ids.contains(name));
        let (s, b) = root.call(&token, name, json!({})).await;
        assert_eq!(
            refusal(s, &b),
            (403, "forbidden_destructive"),
            "{name}: {b}"
        );
        let message = error_message(&b);
        assert!(
            message.contains(name) && message.contains("never a tool"),
            "{name}: {message}"
        );
        let alternatives = items(&b["error"]["details"]["alternatives"]);
        assert!(!alternatives.is_empty(), "{name}");
        for alt in alternatives {
            let alt = alt.as_str().unwrap();
            let head = alt.split_whitespace().next().unwrap();
            assert!(
                ids.contains(head) || alt.starts_with("mcp-root admin "),
                "{name}: alternative `{alt}` names neither a tool nor an operator command"
            );
        }
    }
    let (_, issued) = fetch(&root, &id, Some(&token), Value::Null, &[]).await;
    let root_ids =
        issued["run_profile"]["toolProfile"]["assistantActions"]["actionIds"].to_string();
    for verb in ["delete", "drop", "wipe", "purge", "destroy", "truncate"] {
        assert!(!root_ids.contains(verb), "{root_ids}");
    }
    root.stop().await;
}

/// Boundary 9: Local and production configurations share one schema: the local and production example
/// files of root and of the hub load with the same parsers (`deny_unknown_fields`) and pass
/// the same validation; they differ only in URLs, transport, token and topology, and both
/// roots decide with the same contracts, profiles and destructive rules.
#[test]
fn local_and_production_configs_share_one_schema() {
    use mcp_root::config::RootConfig;
    let local = RootConfig::load(&repo().join("config/root.example.toml")).unwrap();
    let prod = RootConfig::load(&repo().join("config/root.production.example.toml")).unwrap();
    for (what, cfg) in [("local", &local), ("production", &prod)] {
        cfg.validate()
            .unwrap_or_else(|e| panic!("{what} root example: {e}"));
    }
    assert!(
        prod.tls.is_some()
            && prod
                .database_url
                .as_deref()
                .unwrap()
                .starts_with("postgres://")
    );
    for (a, b, what) in [
        (&local.contracts_dir, &prod.contracts_dir, "contracts_dir"),
        (
            &local.descriptors_dir,
            &prod.descriptors_dir,
            "descriptors_dir",
        ),
        (&local.profiles_file, &prod.profiles_file, "profiles_file"),
        (
            &local.destructive_file,
            &prod.destructive_file,
            "destructive_file",
        ),
    ] {
        assert_eq!(
            a, b,
            "{what}: local and production must use the same business rules"
        );
    }
    let tools = |cfg: &RootConfig| -> Vec<String> {
        mcp_root::catalog::ContractRegistry::load(cfg.contracts_dir.as_deref())
            .unwrap()
            .all()
            .iter()
            .map(|c| c.contract.tool_id.clone())
            .collect()
    };
    assert_eq!(tools(&local), tools(&prod));
    let profiles = |cfg: &RootConfig| {
        serde_json::to_value(
            mcp_root::catalog::load_profiles(cfg.profiles_file.as_deref()).unwrap(),
        )
        .unwrap()
    };
    assert_eq!(profiles(&local), profiles(&prod));
    // An unknown key is refused in either (one schema, no production-only fields).
    assert!(RootConfig::parse("production_only_policy = true").is_err());

    use mcp_hub::config::HubFile;
    let mut hubs = Vec::new();
    for file in [
        "config/hub.example.toml",
        "config/hub.production.example.toml",
    ] {
        let mut f = HubFile::load(&repo().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        // The examples name token files that do not exist here.
        f.token_file = None;
        f.token = Some("mcph_example".into());
        let cfg = f.resolve().unwrap_or_else(|e| panic!("{file}: {e}"));
        hubs.push(cfg);
    }
    assert_eq!(hubs[1].environment, "prod");
    assert_eq!(
        hubs[1].write_scope,
        mcp_shared::target::WriteScope::None,
        "a production target takes no writes"
    );
    assert!(
        hubs[1]
            .connect_urls()
            .unwrap()
            .iter()
            .all(|u| u.starts_with("wss://"))
    );
}
