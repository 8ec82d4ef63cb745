//! Upgrades without a flag day: root and hubs of different builds share the protocol
//! version and announce the optional parts they understand (`hello.features`,
//! `welcome.features`); a sender includes an optional field only for a peer that announced
//! it, and a reader ignores fields it does not know. Here: root welcomes a hub of an earlier
//! build (no features) in terms it can read and takes a newer hub's unknown fields without
//! refusing it; and every tool works between a root and a hub that announce older feature
//! sets, either way round. (The hub's side, a root of an earlier build that refuses
//! `features`: `mcp-hub`'s channel tests.)

use futures::{SinkExt, StreamExt};
use mcp_shared::protocol::{self, HubToRoot};
use mcp_tests::{TestHub, TestRoot, mcp_client};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::hardening::bad_input::hub_door::{descriptor, dial, text};

/// The body of the next text frame root sends (heartbeats skipped).
async fn next_body(ws: &mut crate::hardening::bad_input::hub_door::Ws) -> Value {
    loop {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(10), ws.next())
            .await
            .expect("a frame within 10 s")
            .expect("open")
            .expect("frame");
        if let Message::Text(t) = msg {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["body"]["type"] != "heartbeat" {
                return v["body"].clone();
            }
        }
    }
}

fn hello(token: &str, features: &[&str]) -> Message {
    text(
        "hello-1",
        &HubToRoot::Hello {
            protocol_version: protocol::PROTOCOL_VERSION,
            token: token.into(),
            descriptor: descriptor("hub:up-raw", "test"),
            skills: vec![],
            features: features.iter().map(|f| (*f).to_owned()).collect(),
        },
    )
}

#[tokio::test]
async fn root_welcomes_each_hub_in_terms_it_can_read() {
    let root = TestRoot::start().await.unwrap();
    let token = root.enroll("hub:up-raw", "test").await.unwrap();

    // A hub of an earlier build announces nothing: its welcome has no `features` field (that
    // build's decoder would refuse one).
    let mut ws = dial(&root.handle().base_url(), &token).await;
    ws.send(hello(&token, &[])).await.unwrap();
    let welcome = next_body(&mut ws).await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    assert!(welcome.get("features").is_none(), "{welcome}");
    ws.close(None).await.unwrap();

    // A newer hub: features root does not know, and fields it does not know, in its hello
    // and in its descriptor. Root ignores them and welcomes it with what root understands.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let mut ws = dial(&root.handle().base_url(), &token).await;
    let Message::Text(t) = hello(&token, &["progress.total", "telepathy"]) else {
        unreachable!()
    };
    let mut v: Value = serde_json::from_str(&t).unwrap();
    v["body"]["shiny"] = json!(true);
    v["body"]["descriptor"]["hardware"] = json!({"gpus": 8});
    ws.send(Message::text(v.to_string())).await.unwrap();
    let welcome = next_body(&mut ws).await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    assert_eq!(welcome["features"], json!(protocol::FEATURES), "{welcome}");
    let targets = root.admin_get("/v1/root/hubs").await;
    assert!(
        targets.to_string().contains("hub:up-raw"),
        "the newer hub is registered: {targets}"
    );
    root.stop().await;
}

/// Arguments a tool's contract requires (writes without a phase preview, a dry run); `{}` for
/// the others.
fn arguments(tool: &str) -> Value {
    let uuid = "00000000-0000-4000-8000-000000000000";
    match tool {
        "hub.deploy_ref" => json!({"ref": "main"}),
        "hub.issue_access_token" => json!({"capability_profile": "InfraOpsRead", "ttl_sec": 60}),
        "hub.memory.get_artifact" => json!({"artifact_id": uuid}),
        "hub.memory.get_session"
        | "hub.memory.publish_profile"
        | "hub.memory.retry_profile"
        | "hub.memory.stop_profile" => json!({"session_id": uuid}),
        "hub.memory.start_profile" => {
            json!({"service": "app", "interval_ms": 100, "duration_sec": 1})
        }
        "hub.restart_service" => json!({"service": "app"}),
        "hub.revoke_access_token" => json!({"session_id": "none"}),
        "hub.run_allowed_tests" => json!({"name": "count"}),
        "nlu_authoring.check_phrase" => json!({"phrase": "turn on the light"}),
        "nlu_authoring.propose_change" => json!({
            "template_id": "lights.on",
            "base_fingerprint": format!("sha256:{}", "0".repeat(64)),
        }),
        "sdk.get_schema" | "sdk.get_template" => json!({"name": "tool-contract"}),
        _ => json!({}),
    }
}

/// Calls every tool the profiles' leases list once; each must answer as a tool does (a
/// result, or a tool error of its own), never with a protocol failure between root and hub.
async fn every_tool_answers(root: &TestRoot, target: &str) -> usize {
    let mut called = std::collections::BTreeSet::new();
    for profile in [
        "InfraOpsControl",
        "ProfileOpsControl",
        "NLUTeacherAuthor",
        "AdaOSDevRead",
    ] {
        let token = root.bearer(target, profile).await;
        let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
        for tool in client.list_all_tools().await.unwrap() {
            let name = tool.name.to_string();
            if !called.insert(name.clone()) {
                continue;
            }
            let args = arguments(&name);
            let params = CallToolRequestParams::new(name.clone())
                .with_arguments(args.as_object().cloned().unwrap());
            let res = client
                .call_tool(params)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let body = res.structured_content.unwrap_or(Value::Null);
            let error = &body["error"];
            assert!(
                error.is_null()
                    || (error["code"] != "internal"
                        && !error["message"].as_str().unwrap_or("").contains("decode")),
                "{name} {args}: {body}"
            );
        }
        client.cancel().await.unwrap();
    }
    called.len()
}

/// A hub configuration in which every tool has something to work on.
fn hub_toml(repo: &std::path::Path) -> String {
    format!(
        "{}\n[[skill.allowed_tests]]\nname = \"count\"\nargv = [\"sh\", \"-c\", \"echo of 2; echo ok; echo ok\"]\n\
         progress_line = '^ok$'\nprogress_total = '^of (\\d+)$'\n\
         [[services]]\nname = \"app\"\nargv = [\"sleep\", \"600\"]\n\
         [deploy]\nrepository = \"{}\"\nworktree = \"deploy/app\"\nallowed_refs = [\"main\"]\n",
        mcp_tests::nlu_hub_toml().unwrap(),
        repo.display()
    )
}

#[tokio::test]
async fn every_tool_works_between_older_and_newer_peers() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, _) = mcp_tests::git::repository(dir.path());
    // (what root announces, what the hub announces): `None` is all this build understands,
    // `Some([])` an earlier build's nothing.
    for (root_features, hub_features, target) in [
        (None, Some(vec![]), "hub:up-old-hub"),
        (Some(vec![]), None, "hub:up-old-root"),
    ] {
        let root = TestRoot::start_with(|c| c.protocol_features = root_features)
            .await
            .unwrap();
        let token = root.enroll(target, "test").await.unwrap();
        let hub = TestHub::start_with(
            &root.handle().base_url(),
            target,
            &token,
            &hub_toml(&repo),
            |cfg| cfg.protocol_features = hub_features,
        )
        .await
        .unwrap();
        let called = every_tool_answers(&root, target).await;
        assert!(called >= 40, "{target}: only {called} tools listed");
        // Neither peer announced `progress.total` to the other: progress comes without it.
        let bearer = root.bearer(target, "InfraOpsControl").await;
        let client = crate::mcp::tasks::connect_to(&root.mcp_url(), &bearer, false).await;
        let token =
            crate::mcp::tasks::preview(&client, "hub.run_allowed_tests", &json!({"name": "count"}))
                .await;
        let exec = crate::mcp::tasks::execute_args(&json!({"name": "count"}), &token, "k-up");
        let res = client
            .peer()
            .call_tool_once(crate::mcp::tasks::params("hub.run_allowed_tests", exec))
            .await
            .unwrap();
        assert!(
            matches!(res, rmcp::model::CallToolResponse::Complete(_)),
            "{res:?}"
        );
        // The client handles notifications on a task of its own: one sent before the answer
        // may be handled just after it.
        mcp_tests::until("progress to arrive", async || {
            !client.service().progress.lock().unwrap().is_empty()
        })
        .await;
        let progress = client.service().progress.lock().unwrap().clone();
        assert!(
            progress.iter().all(|p| p.total.is_none()),
            "{target}: {progress:?}"
        );
        // Evidence was not agreed either: the hub's ProfileOps answers carry no `evidence`
        // for a root that did not announce it (its contract would refuse the field), and
        // root holds none of an older hub's, so with the hub gone the read is target_offline.
        let profiler = root.bearer(target, "ProfileOpsRead").await;
        let (status, sessions) = root
            .call(&profiler, "hub.memory.list_sessions", json!({}))
            .await;
        assert_eq!(status, 200, "{target}: {sessions}");
        if target == "hub:up-old-root" {
            assert!(sessions["result"].get("evidence").is_none(), "{sessions}");
        }
        hub.stop().await;
        mcp_tests::eventually("the hub offline", async || {
            let (s, b) = root
                .call(&profiler, "hub.memory.list_sessions", json!({}))
                .await;
            (s == 503).then_some(b)
        })
        .await;
        root.stop().await;
    }
}
