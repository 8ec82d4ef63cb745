//! The binaries as users run them: `mcp-root demo` (the README's main job), and `mcp-root
//! serve` with `mcp-hub run` as separate processes talking over a real WebSocket.

use mcp_tests::items;
use mcp_tests::run_ok;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_tests::process::Proc;
use mcp_tests::root_process::RootProcess;
use mcp_tests::{mcp_client, workspace_bin};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

/// How long a dropped process gets after SIGTERM before the SIGKILL: a root with a hub
/// in-process stops the hub's managed services on SIGTERM.
const GRACE: Duration = Duration::from_secs(15);

/// Reads the child's stdout until a line containing `marker`; returns every line read.
fn read_until(child: &mut Child, marker: &str) -> Vec<String> {
    let out = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                let done = line.contains(marker);
                lines.push(line);
                if done {
                    return lines;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(_) => break,
        }
    }
    panic!("no line with `{marker}` in: {lines:#?}");
}

fn field(lines: &[String], label: &str) -> String {
    lines
        .iter()
        .find_map(|l| {
            l.trim_start()
                .strip_prefix(label)
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no `{label}` in {lines:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_prints_a_bearer_that_reaches_the_demo_hub() {
    mcp_tests::init_crypto();
    // The demo's managed service, built as `demo` would on its first start.
    workspace_bin("mcp-demo-app").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut child = Proc::adopt(
        "mcp-root demo",
        Command::new(workspace_bin("mcp-root").unwrap())
            .args(["demo", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        None,
    )
    .term_on_drop(GRACE);
    let lines = read_until(child.child_mut(), "Press Ctrl-C");
    let url = field(&lines, "MCP URL:");
    let token = field(&lines, "Bearer:");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("bearer_token_env_var = \"ROOT_MCP_TOKEN\""))
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("claude mcp add --transport http root"))
    );
    let client = mcp_client(&url, &token).await.unwrap();
    let res = mcp_tests::hub_status(&client).await;
    assert_eq!(res["target_id"], "hub:test-alpha");
    let dev = field(&lines, "Dev bearer:");
    let client = mcp_client(&url, &dev).await.unwrap();
    let res = client
        .call_tool(CallToolRequestParams::new("sdk.get_metadata"))
        .await
        .unwrap();
    assert_ne!(res.is_error, Some(true));
    the_demo_hub_serves_every_part(&lines, &token).await;
    the_demo_fleet_runs_as_printed(&lines);
    the_demo_fleet_lease_reads_the_fleet(&lines).await;
    the_demos_leak_is_found_through_the_python_sdk(&lines).await;
    the_demos_roles_are_what_it_says(&lines).await;
}

/// The viewer and the operator the demo prints to try roles with: the viewer reads and is
/// refused an action; the operator issues a lease of the profiles it hands out, not another.
async fn the_demos_roles_are_what_it_says(lines: &[String]) {
    let url = field(lines, "MCP URL:");
    let base = url.strip_suffix("/mcp").unwrap();
    let (viewer, operator) = (field(lines, "Viewer:"), field(lines, "Operator:"));
    let http = mcp_tests::http_client();
    let lease = |profile: &str| serde_json::json!({"target_id": "hub:test-alpha", "capability_profile": profile, "ttl_sec": 60});
    let ask = async |bearer: &str, profile: &str| {
        let res = http
            .post(format!("{base}/v1/root/mcp/sessions"))
            .bearer_auth(bearer)
            .json(&lease(profile))
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let body: serde_json::Value = res.json().await.unwrap();
        (status, body)
    };
    let hubs = http
        .get(format!("{base}/v1/root/hubs"))
        .bearer_auth(&viewer)
        .send()
        .await
        .unwrap();
    assert_eq!(hubs.status(), 200);
    let (s, b) = ask(&viewer, "InfraOpsRead").await;
    assert_eq!(
        (s, &b["error"]["code"]),
        (403, &serde_json::json!("role_required")),
        "{b}"
    );
    let (s, b) = ask(&operator, "InfraOpsRead").await;
    assert_eq!(s, 201, "{b}");
    let (s, b) = ask(&operator, "ProfileOpsControl").await;
    assert_eq!(
        (s, &b["error"]["code"]),
        (403, &serde_json::json!("role_required")),
        "{b}"
    );
}

/// The demo's ProfileOps walk-through, by an agent on the Python SDK with the demo's Profile
/// bearer: a session in profiling mode (the app leaks in `retain_request_history` and
/// writes jemalloc heap profiles) names that function first within 60 s; stopped, its
/// summary and its incident still do, and the last snapshot it kept comes in chunks that
/// match their SHA-256.
async fn the_demos_leak_is_found_through_the_python_sdk(lines: &[String]) {
    let url = field(lines, "MCP URL:");
    let profile = field(lines, "Profile bearer:");
    let function = "retain_request_history";
    let seen = mcp_tests::run_python_client("leak.py", &[&url, &profile, function])
        .await
        .unwrap();
    let after = seen["found_after_sec"]
        .as_f64()
        .unwrap_or_else(|| panic!("the leak was not named: {seen}"));
    assert!(after < 60.0, "named after {after} s: {seen}");
    let session = &seen["session"];
    assert_eq!(session["state"], "stopped", "{seen}");
    let heap = &session["heap"];
    let top = heap["top_sites"][0]["function"]
        .as_str()
        .unwrap_or_default();
    assert!(top.ends_with(function), "{seen}");
    assert!(heap["growth_bytes"].as_i64() > Some(0), "{seen}");
    assert_eq!(heap["symbolized"], true, "{seen}");
    assert!(heap["snapshots_kept"].as_u64() >= Some(2), "{seen}");
    let incident = &seen["incidents"][0];
    assert!(
        incident["top_site"]
            .as_str()
            .is_some_and(|t| t.ends_with(function)),
        "{seen}"
    );
    let snapshot = &seen["snapshot"];
    assert_eq!(snapshot["delivery"], "chunked", "{seen}");
    assert_eq!(snapshot["sha256_matches"], true, "{seen}");
    assert_eq!(snapshot["gzip"], true, "{seen}");
    assert_eq!(snapshot["record"]["kind"], "heap_snapshot", "{seen}");
    assert_eq!(snapshot["record"]["format"], "pprof", "{seen}");
}

/// The demo's fleet walk-through, run as printed (through `sh`, with this build's
/// `mcp-root`): a read on the fleet to its end, a write's preview, and the run its
/// confirmation starts, every target succeeded.
fn the_demo_fleet_runs_as_printed(lines: &[String]) {
    let bin = workspace_bin("mcp-root").unwrap();
    let printed = |needle: &str| {
        lines
            .iter()
            .find(|l| l.trim_start().starts_with("mcp-root admin") && l.contains(needle))
            .unwrap_or_else(|| panic!("no `{needle}` command in {lines:#?}"))
            .trim()
            .replacen("mcp-root", &bin.to_string_lossy(), 1)
    };
    let sh = |command: &str| {
        let out = Command::new("sh").args(["-c", command]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{command}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let read = sh(&printed("--tool hub.get_status"));
    assert!(read.contains("3 targets: 3 succeeded"), "{read}");
    let preview = sh(&printed("fleet preview"));
    assert!(preview.contains("3 targets: 3 pending"), "{preview}");
    let token = preview
        .lines()
        .find_map(|l| l.strip_prefix("confirmation token (shown once): "))
        .unwrap_or_else(|| panic!("no token in {preview}"));
    let run = sh(&printed("--confirm").replace("<the preview's token>", token));
    assert!(run.contains("3 targets: 3 succeeded"), "{run}");
}

/// The demo's fleet lease runs a read on the fleet through its fleet tool.
async fn the_demo_fleet_lease_reads_the_fleet(lines: &[String]) {
    let base = field(lines, "MCP URL:").trim_end_matches("/mcp").to_owned();
    let rest = Rest {
        http: mcp_tests::http_client(),
        url: format!("{base}/v1/root/mcp/call"),
    };
    let read =
        json!({ "tool_id": "root.run_fleet_read", "arguments": { "tool": "hub.get_status" } });
    let r = rest.call(&field(lines, "Fleet bearer:"), read).await;
    assert_eq!(r["result"]["summary"], "3 targets: 3 succeeded", "{r}");
}

/// The demo's walk-through and the rest of its hub, as a newcomer would try them: every part
/// of the product answers with something real.
async fn the_demo_hub_serves_every_part(lines: &[String], read: &str) {
    let base = field(lines, "MCP URL:").trim_end_matches("/mcp").to_owned();
    let control = field(lines, "Control bearer:");
    let rest = Rest {
        http: mcp_tests::http_client(),
        url: format!("{base}/v1/root/mcp/call"),
    };
    // The walk-through: a read, then the printed preview and its execute.
    let walk: Vec<&String> = lines.iter().filter(|l| l.contains("curl -s")).collect();
    assert_eq!(walk.len(), 3, "{lines:#?}");
    assert!(walk[0].contains("hub.run_healthchecks") && walk[1].contains(&control));
    mcp_tests::eventually("the demo app healthy", async || {
        let checks = rest
            .call(read, json!({"tool_id": "hub.run_healthchecks"}))
            .await;
        (checks["result"]["status"] == "healthy").then_some(())
    })
    .await;
    let restarted = rest
        .write(
            &control,
            "hub.restart_service",
            json!({"service": "demo-app"}),
        )
        .await;
    assert_eq!(restarted["state"], "running", "{restarted}");
    // The allowed test checks the app (and reports progress, counted from its output).
    let run = rest
        .write(
            &control,
            "hub.run_allowed_tests",
            json!({"name": "demo-app-checks"}),
        )
        .await;
    assert_eq!(run["passed"], true, "{run}");
    // A release from the demo's repository, deployed and the app restarted on it.
    let deployed = rest
        .write(&control, "hub.deploy_ref", json!({"ref": "v2"}))
        .await;
    assert_eq!(deployed["deployed"]["ref"], "v2", "{deployed}");
    assert_eq!(deployed["services"][0]["restarted"], true, "{deployed}");
    // ProfileOps sees the managed service; NLU answers from the sample content.
    let profile = field(lines, "Profile bearer:");
    let memory = rest
        .call(&profile, json!({"tool_id": "hub.memory.get_status"}))
        .await;
    assert_eq!(
        memory["result"]["services"][0]["name"], "demo-app",
        "{memory}"
    );
    let nlu = field(lines, "NLU bearer:");
    let context = rest
        .call(&nlu, json!({"tool_id": "nlu_authoring.get_context"}))
        .await;
    assert_eq!(context["ok"], true, "{context}");
}

/// `POST /v1/root/mcp/call` with one bearer per call.
struct Rest {
    http: reqwest::Client,
    url: String,
}

impl Rest {
    async fn call(&self, bearer: &str, body: Value) -> Value {
        self.http
            .post(&self.url)
            .bearer_auth(bearer)
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// A write's preview, then its execute with the confirmation token; the execute's result.
    async fn write(&self, bearer: &str, tool: &str, arguments: Value) -> Value {
        let preview = self
            .call(bearer, json!({"tool_id": tool, "arguments": arguments}))
            .await;
        let token = preview["result"]["confirmation_token"]
            .as_str()
            .unwrap_or_else(|| panic!("{preview}"));
        let mut execute = arguments;
        execute["phase"] = json!("execute");
        execute["confirmation_token"] = json!(token);
        execute["idempotency_key"] = json!(format!("demo-{tool}"));
        let done = self
            .call(bearer, json!({"tool_id": tool, "arguments": execute}))
            .await;
        assert_eq!(done["ok"], true, "{done}");
        done["result"]["result"].clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_and_hub_as_separate_processes() {
    mcp_tests::init_crypto();
    let dir = tempfile::tempdir().unwrap();
    let RootProcess { proc, base, admin } = RootProcess::serve(dir.path(), Duration::from_secs(20))
        .await
        .unwrap();
    let _root = proc.term_on_drop(GRACE);
    let http = mcp_tests::http_client();
    let post = |path: &str, body: Value| {
        http.post(format!("{base}{path}"))
            .bearer_auth(&admin)
            .json(&body)
            .send()
    };
    let enrol: Value = post(
        "/v1/root/hubs",
        json!({"target_id": "hub:test-alpha", "environment": "test"}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let token_file = dir.path().join("hub.token");
    std::fs::write(&token_file, enrol["token"].as_str().unwrap()).unwrap();
    mcp_tests::private_file(&token_file).unwrap();
    let lease: Value = post("/v1/root/mcp/sessions", json!({"target_id": "hub:test-alpha", "capability_profile": "InfraOpsRead", "ttl_sec": 600}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bearer = lease["token"].as_str().unwrap().to_string();

    // The hub with no config file at all: flags only.
    let _hub = Proc::spawn(
        "mcp-hub run",
        Command::new(workspace_bin("mcp-hub").unwrap())
            .args([
                "run",
                "--root-url",
                &base,
                "--target",
                "hub:test-alpha",
                "--environment",
                "test",
                "--token-file",
            ])
            .arg(&token_file)
            .arg("--state-dir")
            .arg(dir.path().join("hub-state"))
            .env("RUST_LOG", "info"),
        dir.path().join("hub.log"),
    )
    .term_on_drop(GRACE);
    let client = mcp_client(&format!("{base}/mcp"), &bearer).await.unwrap();
    let start = Instant::now();
    loop {
        let res = client
            .call_tool(CallToolRequestParams::new("hub.get_runtime_summary"))
            .await
            .unwrap();
        if res.is_error != Some(true) {
            let sc = res.structured_content.unwrap();
            assert!(sc["memory"]["total_bytes"].as_u64().unwrap() > 0, "{sc}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "hub never became reachable: {res:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The hub binary keeps its own recent log lines: stream `hub` of hub.get_logs.
    let res = client
        .call_tool(
            CallToolRequestParams::new("hub.get_logs")
                .with_arguments(json!({"stream": "hub"}).as_object().cloned().unwrap()),
        )
        .await
        .unwrap();
    let sc = res.structured_content.unwrap();
    let lines = items(&sc["entries"][0]["lines"]);
    assert!(
        lines
            .iter()
            .any(|l| l.as_str().unwrap().contains("mcp-hub starting")),
        "{sc}"
    );
    let hubs: Value = mcp_tests::get_json(&http, format!("{base}/v1/root/hubs"), &admin).await;
    assert_eq!(hubs["targets"][0]["status"], "online");
}

/// `mcp-hub heap summarize DIR` sums up snapshot files offline as a session would: the
/// first and last diffed (another process's skipped when `--pid` says whose), JSON out; a
/// directory without snapshots or an unknown format is a clear error.
#[test]
fn mcp_hub_sums_up_heap_snapshots_offline() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, leak: i64| {
        let stacks: &[(&[&str], i64)] = &[
            (&["malloc", "app::cache_forever", "app::main"], leak),
            (&["malloc", "app::serve", "app::main"], 4096),
        ];
        std::fs::write(dir.path().join(name), mcp_tests::heap::pprof(stacks)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    };
    write("heap.7.1.pb.gz", 1_000);
    write("heap.8.1.pb.gz", 50_000_000);
    write("heap.7.2.pb.gz", 9_000_000);
    let hub = workspace_bin("mcp-hub").unwrap();
    let out = run_ok(
        Command::new(&hub)
            .args(["heap", "summarize", "--pid", "7"])
            .arg(dir.path()),
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["top_sites"][0]["function"], "app::cache_forever");
    assert_eq!(summary["growth_bytes"], 8_999_000);
    assert_eq!(
        (&summary["from_snapshot"], &summary["to_snapshot"]),
        (&json!("heap.7.1.pb.gz"), &json!("heap.7.2.pb.gz"))
    );
    assert!(
        summary["skipped"][0]
            .as_str()
            .unwrap()
            .contains("process 8")
    );
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(&hub)
        .args(["heap", "summarize"])
        .arg(empty.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no heap snapshot"));
    let out = Command::new(&hub)
        .args(["heap", "summarize", "--format", "massif"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("--format must be pprof or heaptrack"));
}
