//! ProfileOps through root and a real hub, with the rmcp client and a `ProfileOpsControl`
//! lease: a managed `mcp-fixture-service` that leaks memory steadily is profiled (restarted
//! into its profiling argv), the session completes, a memory-growth incident is raised, the
//! artifact comes in chunks that reassemble to its SHA-256 (and inline when small), a second
//! session is stopped early, and the first is published (with a replay that publishes nothing
//! new). Root's retention of published summaries is tested on root's side, and so is the
//! evidence the hub published as it went: with the hub stopped (and after root restarts), the
//! profiler reads are answered from root, saying so and how old the answer is.

use base64::Engine;
use mcp_tests::items;
use mcp_tests::{TestRoot, mcp_client, workspace_bin};
use serde_json::{Value, json};
use sha2::Digest;

use mcp_tests::eventually;

use crate::hubs::services::{Client, call, fixture_service, write};
use mcp_tests::ports::free_port;

#[tokio::test]
async fn profile_a_leaking_service_through_mcp() {
    let root = TestRoot::start().await.unwrap();
    let port = free_port();
    let bin = workspace_bin("mcp-fixture-service").unwrap();
    let profiling_argv = format!(
        "profiling_argv = [{:?}, \"--port\", \"{port}\", \"--leak-kib-per-sec\", \"2048\", \"--mode\", \"profiling\"]",
        bin.display().to_string()
    );
    let config = format!(
        "{}[profiling]\ngrowth_threshold_bytes = 1048576\ngrowth_threshold_percent = 1000.0\n\
         artifact_inline_max_bytes = 1024\nmax_concurrent_sessions = 2\n\
         evidence_artifact_max_bytes = 1024\n",
        fixture_service(
            "leaky",
            port,
            &["--leak-kib-per-sec", "2048"],
            &profiling_argv
        )
    );
    let hub = root.start_hub("hub:test-alpha", &config).await.unwrap();
    let token = root.bearer("hub:test-alpha", "ProfileOpsControl").await;
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
    let tools: Vec<String> = mcp_tests::listed_tools(&client).await;
    for tool in [
        "hub.memory.get_status",
        "hub.memory.list_sessions",
        "hub.memory.get_session",
        "hub.memory.list_incidents",
        "hub.memory.list_artifacts",
        "hub.memory.get_artifact",
        "hub.memory.start_profile",
        "hub.memory.stop_profile",
        "hub.memory.retry_profile",
        "hub.memory.publish_profile",
    ] {
        assert!(
            tools.iter().any(|t| t == tool),
            "{tool} not listed: {tools:?}"
        );
    }

    let status = call(&client, "hub.memory.get_status", json!({})).await;
    assert_eq!(status["authority"], "hub", "{status}");
    assert_eq!(status["services"][0]["name"], "leaky");
    assert_eq!(status["services"][0]["profiling_available"], true);
    let normal_pid = status["services"][0]["pid"].as_u64().unwrap();

    // Start in profiling mode: preview, then execute with the token.
    let args =
        json!({"service": "leaky", "interval_ms": 200, "duration_sec": 2, "mode": "profiling"});
    let preview = call(&client, "hub.memory.start_profile", args.clone()).await;
    assert_eq!(
        preview["expected_effect"]["will_restart"], true,
        "{preview}"
    );
    assert_eq!(preview["expected_effect"]["pid"], normal_pid);
    let started = write(&client, "hub.memory.start_profile", args, "start-1").await;
    assert_eq!(started["phase"], "execute", "{started}");
    let session = &started["result"]["session"];
    assert_eq!(session["state"], "running");
    assert_eq!(session["mode"], "profiling");
    let a = session["session_id"].as_str().unwrap().to_owned();
    assert_ne!(session["pid"].as_u64(), Some(normal_pid), "restarted");

    let done = eventually("the session to end", async || {
        let s = call(&client, "hub.memory.get_session", json!({"session_id": a})).await;
        (s["session"]["state"] != "running").then_some(s)
    })
    .await;
    let done_session = &done["session"];
    assert_eq!(done_session["state"], "completed", "{done}");
    // The session over, the service runs its normal argv again (a new process).
    let back = eventually("the service back in its normal argv", async || {
        let s = call(&client, "hub.memory.get_status", json!({})).await;
        (s["services"][0]["mode"] == "normal" && s["services"][0]["state"] == "running")
            .then_some(s)
    })
    .await;
    assert_ne!(back["services"][0]["pid"], session["pid"], "{back}");
    let samples = done_session["samples"].as_u64().unwrap();
    assert!(samples >= 2, "{done}");
    assert!(
        done_session["growth"]["growth_bytes"].as_i64().unwrap() > 0,
        "{done}"
    );

    // The leak raised an incident.
    let incidents = call(
        &client,
        "hub.memory.list_incidents",
        json!({"service": "leaky"}),
    )
    .await;
    let incident = items(&incidents["incidents"])
        .iter()
        .find(|i| i["session_id"] == a)
        .cloned()
        .unwrap_or_else(|| panic!("no incident for {a}: {incidents} {done}"));
    assert_eq!(incident["kind"], "memory_growth");
    assert_eq!(done_session["incident_ids"][0], incident["incident_id"]);

    // Its artifact is over the 1 KiB inline limit: a chunked delivery whose chunks
    // reassemble to the announced size and SHA-256.
    let artifact_id = done_session["artifact_id"].as_str().unwrap().to_owned();
    let (delivery, bytes) = chunked_artifact(&client, &artifact_id).await;
    let artifact: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(artifact["session_id"], a);
    assert_eq!(items(&artifact["samples"]).len() as u64, samples);

    // A second session (normal mode), stopped early: its small artifact comes inline.
    let b_args = json!({"service": "leaky", "interval_ms": 200, "duration_sec": 600});
    let b = write(&client, "hub.memory.start_profile", b_args, "start-2").await;
    let b = b["result"]["session"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    eventually("a first sample", async || {
        let s = call(&client, "hub.memory.get_session", json!({"session_id": b})).await;
        (s["session"]["samples"].as_u64() > Some(0)).then_some(())
    })
    .await;
    let stopped = write(
        &client,
        "hub.memory.stop_profile",
        json!({"session_id": b}),
        "stop-1",
    )
    .await;
    assert_eq!(stopped["result"]["stopped"], true, "{stopped}");
    assert_eq!(stopped["result"]["session"]["state"], "stopped");
    let small = call(
        &client,
        "hub.memory.get_artifact",
        json!({"artifact_id": stopped["result"]["session"]["artifact_id"]}),
    )
    .await;
    assert_eq!(small["delivery"], "inline", "{small}");
    assert_eq!(small["artifact"]["session_id"], b);

    // Publish the first session: the stable summary root keeps.
    let published = write(
        &client,
        "hub.memory.publish_profile",
        json!({"session_id": a}),
        "pub-1",
    )
    .await;
    assert_eq!(published["phase"], "execute", "{published}");
    let summary = &published["result"]["published_summary"];
    assert_eq!(summary["session_id"], a);
    assert_eq!(summary["target_id"], "hub:test-alpha");
    assert_eq!(summary["service"], "leaky");
    assert_eq!(summary["samples"], samples);
    assert_eq!(summary["incident_ids"][0], incident["incident_id"]);
    assert_eq!(summary["artifact"]["sha256"], delivery["sha256"]);
    assert!(summary["rss"]["peak_bytes"].as_u64() >= summary["rss"]["start_bytes"].as_u64());
    let again = call(
        &client,
        "hub.memory.publish_profile",
        json!({"session_id": a, "phase": "execute", "idempotency_key": "pub-1"}),
    )
    .await;
    assert_eq!(again["replay"], true, "{again}");
    assert_eq!(again["result"], published["result"]);

    // Lists.
    let sessions = call(
        &client,
        "hub.memory.list_sessions",
        json!({"service": "leaky"}),
    )
    .await;
    assert_eq!(items(&sessions["sessions"]).len(), 2, "{sessions}");
    let artifacts = call(&client, "hub.memory.list_artifacts", json!({})).await;
    assert_eq!(items(&artifacts["artifacts"]).len(), 2, "{artifacts}");

    // A read-only lease reads but cannot start.
    let read = root.bearer("hub:test-alpha", "ProfileOpsRead").await;
    let (status, body) = root
        .call(&read, "hub.memory.list_sessions", json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = root
        .call(
            &read,
            "hub.memory.start_profile",
            json!({"service": "leaky", "interval_ms": 200, "duration_sec": 1}),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "capability_not_granted");

    // Root kept the published summary: readable with the hub stopped, without a round trip.
    hub.stop().await;
    eventually("the hub to be offline", async || {
        let (s, b) = root.call(&read, "hub.memory.get_status", json!({})).await;
        (s == 503 && b["error"]["code"] == "target_offline").then_some(())
    })
    .await;
    let hub_said = HubSaid {
        sessions: sessions["sessions"].clone(),
        incidents: incidents["incidents"].clone(),
        artifacts: artifacts["artifacts"].clone(),
        chunked: delivery.clone(),
        inline: small.clone(),
    };
    evidence_answers_while_the_hub_is_offline(&root, &read, &hub_said).await;
    let (status, kept) = root
        .call(&read, "hub.memory.get_published_summaries", json!({}))
        .await;
    assert_eq!(status, 200, "{kept}");
    assert_eq!(kept["result"]["source"], "root");
    let summaries = items(&kept["result"]["summaries"]);
    assert_eq!(summaries.len(), 1, "{kept}");
    assert_eq!(summaries[0]["summary"], *summary);
    // Kept by the first execute (the replay kept nothing again).
    let audit = root
        .admin_get("/v1/root/mcp/audit?tool_id=hub.memory.publish_profile&status=ok")
        .await;
    let executes: Vec<&Value> = items(&audit["events"])
        .iter()
        .filter(|e| e["dry_run"] == false)
        .collect();
    assert_eq!(executes.len(), 2, "{audit}");
    assert_eq!(summaries[0]["event_id"], executes[1]["event_id"]);
    let (_, one) = root
        .call(
            &read,
            "hub.memory.get_published_summaries",
            json!({"session_id": a}),
        )
        .await;
    assert_eq!(items(&one["result"]["summaries"]).len(), 1);
    let (_, none) = root
        .call(
            &read,
            "hub.memory.get_published_summaries",
            json!({"session_id": "nope"}),
        )
        .await;
    assert!(items(&none["result"]["summaries"]).is_empty());
    // And the subnet diagnostics carry it as a compact memory-profile projection.
    let ops = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let (status, diag) = root
        .call(&ops, "root.get_subnet_diagnostics", json!({}))
        .await;
    assert_eq!(status, 200, "{diag}");
    let profiles = items(&diag["result"]["memory_profiles"]);
    assert_eq!(profiles.len(), 1, "{diag}");
    assert_eq!(profiles[0]["session_id"], a);
    assert_eq!(profiles[0]["service"], "leaky");
    // The evidence outlives root's restart too (it is in root's store).
    let mut root = root;
    root.restart().await.unwrap();
    evidence_answers_while_the_hub_is_offline(&root, &read, &hub_said).await;
    // Tools a lease lists while its hub is offline: the reads root answers, not the rest.
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
    let listed: Vec<String> = mcp_tests::listed_tools(&client).await;
    for tool in [
        "hub.memory.list_sessions",
        "hub.memory.get_session",
        "hub.memory.list_incidents",
        "hub.memory.list_artifacts",
        "hub.memory.get_artifact",
        "hub.memory.get_published_summaries",
    ] {
        assert!(listed.iter().any(|t| t == tool), "{tool}: {listed:?}");
    }
    for tool in ["hub.memory.get_status", "hub.memory.start_profile"] {
        assert!(!listed.iter().any(|t| t == tool), "{tool}: {listed:?}");
    }
    let offline = call(&client, "hub.memory.list_incidents", json!({})).await;
    assert_eq!(offline["evidence"]["source"], "root", "{offline}");
    root.stop().await;
}

/// What the hub answered while it was connected.
struct HubSaid {
    sessions: Value,
    incidents: Value,
    artifacts: Value,
    /// `get_artifact` of the first session's artifact (over the 1 KiB root is sent: chunked).
    chunked: Value,
    /// `get_artifact` of the second's (small: inline, and kept at root).
    inline: Value,
}

/// With the hub offline, root answers the profiler reads from the evidence the hub published:
/// the same records, saying so and how old they are; the small artifact inline (and by
/// chunks), the larger one as where it is; each call audited as answered on root.
async fn evidence_answers_while_the_hub_is_offline(root: &TestRoot, lease: &str, hub: &HubSaid) {
    let read = async |tool: &str, args: Value| {
        let (status, body) = root.call(lease, tool, args).await;
        assert_eq!(status, 200, "{tool}: {body}");
        let result = body["result"].clone();
        assert_eq!(result["evidence"]["source"], "root", "{tool}: {result}");
        assert!(
            result["evidence"]["age_seconds"].as_u64().unwrap() < 300,
            "{result}"
        );
        mcp_shared::time::parse(result["evidence"]["as_of"].as_str().unwrap()).unwrap();
        result
    };
    let sessions = read("hub.memory.list_sessions", json!({"service": "leaky"})).await;
    assert_eq!(sessions["sessions"], hub.sessions);
    let stopped = read("hub.memory.list_sessions", json!({"state": "stopped"})).await;
    assert_eq!(items(&stopped["sessions"]).len(), 1, "{stopped}");
    assert_eq!(stopped["sessions"][0], hub.sessions[0]);
    let incidents = read("hub.memory.list_incidents", json!({})).await;
    assert_eq!(incidents["incidents"], hub.incidents);
    let artifacts = read("hub.memory.list_artifacts", json!({})).await;
    assert_eq!(artifacts["artifacts"], hub.artifacts);

    // Newest first: [1] is the first session (its artifact too large to go to root).
    let first = &hub.sessions[1];
    let one = read(
        "hub.memory.get_session",
        json!({"session_id": first["session_id"]}),
    )
    .await;
    assert_eq!(one["session"], *first);
    assert_eq!(one["recent_samples"], json!([]), "{one}");
    let large = read(
        "hub.memory.get_artifact",
        json!({"artifact_id": first["artifact_id"]}),
    )
    .await;
    assert_eq!(large["delivery"], "on_hub", "{large}");
    assert_eq!(large["sha256"], hub.chunked["sha256"]);
    assert_eq!(large["size_bytes"], hub.chunked["size_bytes"]);

    let second = &hub.sessions[0];
    let two = read(
        "hub.memory.get_session",
        json!({"session_id": second["session_id"]}),
    )
    .await;
    assert_eq!(two["recent_samples"], hub.inline["artifact"]["samples"]);
    let kept = read(
        "hub.memory.get_artifact",
        json!({"artifact_id": second["artifact_id"]}),
    )
    .await;
    assert_eq!(kept["delivery"], "inline", "{kept}");
    assert_eq!(kept["artifact"], hub.inline["artifact"]);
    assert_eq!(kept["sha256"], hub.inline["sha256"]);
    let chunk = read(
        "hub.memory.get_artifact",
        json!({"artifact_id": second["artifact_id"], "offset": 0, "length": 64}),
    )
    .await;
    let data = base64::engine::general_purpose::STANDARD
        .decode(chunk["data_base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(data.len(), 64);
    assert_eq!(
        hex::encode(sha2::Sha256::digest(&data)),
        chunk["chunk_sha256"]
    );

    let (status, missing) = root
        .call(
            lease,
            "hub.memory.get_session",
            json!({"session_id": uuid::Uuid::now_v7().to_string()}),
        )
        .await;
    assert_eq!(status, 404, "{missing}");
    assert_eq!(missing["error"]["code"], "not_found");
    // The live status has no evidence to answer from.
    let (status, live) = root.call(lease, "hub.memory.get_status", json!({})).await;
    assert_eq!(
        (status, &live["error"]["code"]),
        (503, &json!("target_offline"))
    );

    let audit = root
        .admin_get("/v1/root/mcp/audit?tool_id=hub.memory.list_incidents&limit=1")
        .await;
    let event = &audit["events"][0];
    assert_eq!(event["status"], "ok", "{audit}");
    assert_eq!(event["execution_adapter"], "root.evidence.list_incidents");
}

/// A native service as built, profiled with heaptrack (Debian's package): its profiling argv
/// runs with heaptrack's recorder preloaded, the hub snapshots the trace every few seconds
/// as `heaptrack` artifacts, and the running session's summary names the leaking function
/// (`leak_steadily`, the fixture's); the kept snapshot, fetched in chunks, is a file
/// `heaptrack_print` opens, with the service's paths redacted.
#[tokio::test]
async fn a_native_service_under_heaptrack_names_its_leak() {
    if !std::path::Path::new("/usr/lib/heaptrack/libheaptrack_preload.so").exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "heaptrack is missing (.ci/run installs Debian's package)"
        );
        eprintln!("SKIPPED: heaptrack is not installed");
        return;
    }
    let root = TestRoot::start().await.unwrap();
    let port = free_port();
    let heap = tempfile::tempdir().unwrap();
    let heap_dir = heap.path().canonicalize().unwrap();
    let bin = workspace_bin("mcp-fixture-service").unwrap();
    let more = format!(
        "profiling_argv = [{:?}, \"--port\", \"{port}\", \"--leak-kib-per-sec\", \"1024\"]\n\
         heap_profiles = {{ dir = {:?}, format = \"heaptrack\" }}\n",
        bin.display().to_string(),
        heap_dir.display().to_string()
    );
    let config = format!(
        "allowed_roots = [{:?}]\n{}",
        heap_dir.display().to_string(),
        fixture_service("native", port, &[], &more)
    );
    let hub = root.start_hub("hub:test-alpha", &config).await.unwrap();
    let token = root.bearer("hub:test-alpha", "ProfileOpsControl").await;
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
    let args =
        json!({"service": "native", "interval_ms": 200, "duration_sec": 300, "mode": "profiling"});
    let started = write(&client, "hub.memory.start_profile", args, "ht-1").await;
    let id = started["result"]["session"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_owned();
    let mut last = Value::Null;
    let deadline = std::time::Instant::now() + mcp_tests::PATIENCE;
    let running = loop {
        let s = call(&client, "hub.memory.get_session", json!({"session_id": id})).await;
        let top = s["session"]["heap"]["top_sites"][0]["function"].as_str();
        if top.is_some_and(|t| t.ends_with("leak_steadily")) {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the leak not named while the session ran: {last}"
        );
        last = s;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(running["session"]["state"], "running", "{running}");
    // The snapshots the running summary compares are artifacts already: listed and whole.
    let newest = running["session"]["heap"]["to_artifact_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{running}"))
        .to_owned();
    let listed = call(
        &client,
        "hub.memory.list_artifacts",
        json!({"service": "native"}),
    )
    .await;
    assert!(
        items(&listed["artifacts"])
            .iter()
            .any(|a| a["artifact_id"] == newest.as_str() && a["kind"] == "heap_snapshot"),
        "a running session's snapshot is listed: {listed}"
    );
    let (delivery, _) = chunked_artifact(&client, &newest).await;
    assert_eq!(delivery["artifact_id"], newest.as_str(), "{delivery}");
    let stopped = write(
        &client,
        "hub.memory.stop_profile",
        json!({"session_id": id}),
        "ht-stop",
    )
    .await;
    let heap = &stopped["result"]["session"]["heap"];
    assert_eq!(heap["format"], "heaptrack", "{stopped}");
    assert!(
        heap["top_sites"][0]["function"]
            .as_str()
            .is_some_and(|f| f.ends_with("leak_steadily")),
        "{stopped}"
    );
    assert!(heap["growth_bytes"].as_i64() > Some(0), "{stopped}");
    // The last snapshot kept: a heaptrack data file, whole (its SHA-256), without the
    // service's paths.
    let artifact_id = heap["to_artifact_id"].as_str().unwrap().to_owned();
    let (_, bytes) = chunked_artifact(&client, &artifact_id).await;
    let file = heap_dir.join("kept.gz");
    std::fs::write(&file, &bytes).unwrap();
    let printed = std::process::Command::new("heaptrack_print")
        .args(["-l", "1", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&printed.stdout);
    assert!(printed.status.success(), "{text}");
    assert!(text.contains("leak_steadily"), "{text}");
    let bin_dir = bin.parent().unwrap().display().to_string();
    assert!(
        !text.contains(&bin_dir),
        "the service's path left the hub: {text}"
    );
    let listed = call(
        &client,
        "hub.memory.list_artifacts",
        json!({"service": "native"}),
    )
    .await;
    let snapshot = items(&listed["artifacts"])
        .iter()
        .find(|a| a["artifact_id"] == artifact_id.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(
        (&snapshot["kind"], &snapshot["format"]),
        (&json!("heap_snapshot"), &json!("heaptrack")),
        "{snapshot}"
    );
    hub.stop().await;
}

/// Artifact `id` through `hub.memory.get_artifact` as a client takes a large one: the
/// chunked delivery's contract, then each chunk (checked against its own SHA-256), the
/// whole checked against the contract's size and SHA-256. The contract and the bytes.
async fn chunked_artifact(client: &Client, id: &str) -> (Value, Vec<u8>) {
    let delivery = call(
        client,
        "hub.memory.get_artifact",
        json!({"artifact_id": id}),
    )
    .await;
    assert_eq!(delivery["delivery"], "chunked", "{delivery}");
    let chunk = delivery["chunk_bytes"].as_u64().unwrap();
    let mut bytes = Vec::new();
    for i in 0..delivery["chunks"].as_u64().unwrap() {
        let part = call(
            client,
            "hub.memory.get_artifact",
            json!({"artifact_id": id, "offset": i * chunk, "length": chunk}),
        )
        .await;
        assert_eq!(part["delivery"], "chunk", "{part}");
        let data = base64::engine::general_purpose::STANDARD
            .decode(part["data_base64"].as_str().unwrap())
            .unwrap();
        assert_eq!(
            hex::encode(sha2::Sha256::digest(&data)),
            part["chunk_sha256"]
        );
        bytes.extend(data);
    }
    assert_eq!(bytes.len() as u64, delivery["size_bytes"].as_u64().unwrap());
    assert_eq!(
        hex::encode(sha2::Sha256::digest(&bytes)),
        delivery["sha256"]
    );
    (delivery, bytes)
}
