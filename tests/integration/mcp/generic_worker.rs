//! A generic worker needs nothing but its run profile and root's URL, and adding a tool
//! changes a contract file and a hub adapter, never the worker, the router or the protocol.
//!
//! The fixture adds a tool no source file knows, `hub.fixture.echo_upper`: its contract (with
//! its input and output schemas) in a contracts directory root loads, a capability profile
//! granting it, and its hub adapter as a configured command adapter (`[[skill.commands]]`, a
//! shell script answering JSON). A generic worker, written here against the run profile alone,
//! discovers and calls it over MCP with the rmcp client; root's unchanged policy, validation,
//! routing and audit handle it like every other tool.

use mcp_tests::error_message;
use mcp_tests::items;
use mcp_tests::refusal;
use mcp_tests::run_ok;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mcp_tests::{TestRoot, mcp_client};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::governance::run_profile::fetch;

const TOOL: &str = "hub.fixture.echo_upper";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The fixture's contract: a read routed to the target, under its own capability and plane.
fn contract() -> Value {
    json!({
        "tool_id": TOOL,
        "title": "Echo in upper case (fixture)",
        "summary": "Fixture tool added by a test: the text in upper case, and its length.",
        "input_schema": {
            "type": "object",
            "properties": {"text": {"type": "string", "maxLength": 200, "pattern": "^[a-z ]*$"}},
            "required": ["text"],
            "additionalProperties": false
        },
        "output_schema": {
            "type": "object",
            "properties": {
                "upper": {"type": "string"},
                "length": {"type": "integer", "minimum": 0}
            },
            "required": ["upper", "length"],
            "additionalProperties": false
        },
        "side_effect": "read",
        "routing": "operational_read",
        "required_capability": "fixture.read.echo",
        "allowed_environments": ["test"],
        "timeout_ms": 5000,
        "concurrency": {"per_lease": 4, "per_target": 8},
        "stability": "experimental",
        "plane": "FixturePlane"
    })
}

/// The fixture's hub adapter: the arguments' `text` in upper case, as JSON.
const ECHO_UPPER: &str = r#"#!/bin/sh
read -r line
text=$(printf '%s' "$line" | sed -n 's/.*"text":"\([^"]*\)".*/\1/p')
printf '{"upper":"%s","length":%s}\n' "$(printf '%s' "$text" | tr 'a-z' 'A-Z')" "${#text}"
"#;

/// Contracts (shipped + fixture), profiles (shipped + one granting the fixture), the
/// adapter's program; returns `(contracts dir, profiles file, program)`.
fn fixture(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let contracts = dir.join("contracts");
    std::fs::create_dir_all(&contracts).unwrap();
    for e in std::fs::read_dir(repo().join("schemas/tools")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, contracts.join(p.file_name().unwrap())).unwrap();
    }
    std::fs::write(
        contracts.join(format!("{TOOL}.json")),
        serde_json::to_string_pretty(&contract()).unwrap(),
    )
    .unwrap();
    let profiles = dir.join("profiles.toml");
    let shipped = std::fs::read_to_string(repo().join("config/profiles.toml")).unwrap();
    std::fs::write(
        &profiles,
        format!(
            "{shipped}\n[[profile]]\nname = \"FixtureEcho\"\nplane = \"FixturePlane\"\ndescription = \"The fixture's echo tool\"\ncapabilities = [\"fixture.read.echo\"]\n"
        ),
    )
    .unwrap();
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let program = bin.join("echo_upper.sh");
    std::fs::write(&program, ECHO_UPPER).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (contracts, profiles, program)
}

/// A generic worker: knows root's URL, its run profile and the bearer the profile's
/// `tokenRef` names; nothing about any tool. It exposes exactly the profile's actions.
struct GenericWorker {
    client: rmcp::service::RunningService<rmcp::RoleClient, ()>,
    actions: BTreeMap<String, Vec<String>>,
}

impl GenericWorker {
    async fn start(root_url: &str, profile: &Value, tokens: &BTreeMap<String, String>) -> Self {
        let tools = &profile["toolProfile"];
        let server = &tools["mcpServers"][0];
        let bearer = &tokens[server["tokenRef"].as_str().unwrap()];
        let endpoint = format!("{root_url}{}", server["endpoint"].as_str().unwrap());
        let client = mcp_client(&endpoint, bearer).await.unwrap();
        let actions = items(&tools["assistantActions"]["actions"])
            .iter()
            .map(|a| {
                let phases = items(&a["phases"])
                    .iter()
                    .map(|p| p.as_str().unwrap().to_string())
                    .collect();
                (a["actionId"].as_str().unwrap().to_string(), phases)
            })
            .collect();
        GenericWorker { client, actions }
    }

    /// Runs one action of the manifest (a read: phase `execute`); refuses anything else
    /// without asking root.
    async fn execute(
        &self,
        action: &str,
        input: Value,
    ) -> Result<rmcp::model::CallToolResult, String> {
        match self.actions.get(action) {
            Some(phases) if phases.iter().any(|p| p == "execute") => {}
            _ => return Err(format!("`{action}` is not in this run's tool profile")),
        }
        let params = CallToolRequestParams::new(action.to_string())
            .with_arguments(input.as_object().cloned().unwrap_or_default());
        self.client
            .call_tool(params)
            .await
            .map_err(|e| e.to_string())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_contract_and_hub_adapter_flow_through_unchanged_code() {
    // Nothing in the sources names the fixture's tool: what follows runs unchanged code.
    for dir in ["root/src", "hub/src", "shared/src", "tests/src"] {
        let hits = std::process::Command::new("grep")
            .args(["-rl", "echo_upper"])
            .arg(repo().join(dir))
            .output()
            .unwrap();
        assert!(
            hits.stdout.is_empty(),
            "{dir} names the fixture tool: {}",
            String::from_utf8_lossy(&hits.stdout)
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let (contracts, profiles, program) = fixture(dir.path());
    let root = TestRoot::start_with(|c| {
        c.contracts_dir = Some(contracts.clone());
        c.profiles_file = Some(profiles.clone());
    })
    .await
    .unwrap();
    let hub = root
        .start_hub(
            "hub:test-alpha",
            &format!(
                "allowed_roots = [\"{}\"]\n[[skill.commands]]\ntool_id = \"{TOOL}\"\nargv = [\"{}\"]\ntimeout_ms = 5000\n",
                dir.path().display(),
                program.display()
            ),
        )
        .await
        .unwrap();
    let (id, token) = root.lease("hub:test-alpha", "FixtureEcho").await;

    // The run profile lists the new tool (profile and the target's surface), nothing else.
    let (s, issued) = fetch(&root, &id, Some(&token), Value::Null, &[]).await;
    assert_eq!(s, 201, "{issued}");
    let profile = issued["run_profile"].clone();
    let actions = &profile["toolProfile"]["assistantActions"];
    assert_eq!(actions["actionIds"], json!([TOOL]), "{profile:#}");
    assert_eq!(actions["actions"][0]["phases"], json!(["execute"]));
    assert_eq!(
        profile["toolProfile"]["enabledToolPacks"],
        json!(["FixturePlane"])
    );
    let verdict = root
        .admin_post("/v1/root/mcp/run-profiles/verify", profile.clone())
        .await;
    assert_eq!(verdict["valid"], true, "{verdict}");

    // The worker: root's URL, the document, the run credential its tokenRef names (never the
    // lease's own bearer).
    let tokens = BTreeMap::from([(
        issued["token_ref"].as_str().unwrap().to_owned(),
        issued["token"].as_str().unwrap().to_owned(),
    )]);
    let worker = GenericWorker::start(&root.handle().base_url(), &profile, &tokens).await;
    let listed: Vec<rmcp::model::Tool> = worker.client.list_all_tools().await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|t| t.name.to_string())
            .collect::<Vec<_>>(),
        [TOOL]
    );
    assert_eq!(
        Value::Object((*listed[0].input_schema).clone()),
        contract()["input_schema"]
    );
    let res = worker
        .execute(TOOL, json!({"text": "hello world"}))
        .await
        .unwrap();
    assert_ne!(res.is_error, Some(true), "{res:?}");
    assert_eq!(
        res.structured_content.clone().unwrap(),
        json!({"upper": "HELLO WORLD", "length": 11})
    );
    let event_id = res.meta.clone().unwrap().0["event_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(worker.execute("hub.get_status", json!({})).await.is_err());

    // Audited like every call: the run credential as actor, the new capability, the
    // adapter's name, the same policy checks (and the run's scope).
    let event = root.audit_event(&event_id).await;
    assert_eq!(event["tool_id"], TOOL);
    assert_eq!(event["status"], "ok");
    assert_eq!(event["surface"], "mcp");
    assert_eq!(event["actor"]["id"], issued["token_ref"]);
    assert_eq!(event["capability"], "fixture.read.echo");
    assert_eq!(
        event["execution_adapter"],
        format!("infra_access_skill.command.{TOOL}")
    );
    assert_eq!(
        event["policy_decision"]["checks"],
        json!([
            "destructive_refusal",
            "capability_grant",
            "run_scope",
            "fleet_scope",
            "target_resolution",
            "target_lifecycle",
            "environment_guard",
            "skill_enabled",
            "target_online",
            "skill_published"
        ])
    );

    // Root's validation and policy apply unchanged: schema-invalid arguments, a lease
    // without the capability, the skill disabled.
    let bad = worker
        .execute(TOOL, json!({"text": "NOT lower case"}))
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    assert_eq!(
        bad.structured_content.unwrap()["error"]["code"],
        "invalid_arguments"
    );
    let reader = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let (s, b) = root.call(&reader, TOOL, json!({"text": "x"})).await;
    assert_eq!(refusal(s, &b), (403, "capability_not_granted"), "{b}");
    // Over REST with the run's own bearer, the same answer as over MCP.
    let (s, b) = root.call(&token, TOOL, json!({"text": "abc"})).await;
    assert_eq!(
        (s, &b["result"]),
        (200, &json!({"upper": "ABC", "length": 3})),
        "{b}"
    );
    // The hub's own offline view lists it too (`mcp-hub skill status`).
    let out = run_ok(
        std::process::Command::new(mcp_tests::workspace_bin("mcp-hub").unwrap())
            .args(["skill", "status", "--json", "--config"])
            .arg(hub.state_dir.path().join("hub.toml")),
    );
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        items(&status["published"]).contains(&json!(TOOL)),
        "{status}"
    );
    root.admin_post(
        "/v1/root/hubs/hub:test-alpha/skills/infra_access_skill/disable",
        json!({}),
    )
    .await;
    let (s, b) = root.call(&token, TOOL, json!({"text": "abc"})).await;
    assert_eq!(b["error"]["code"], "skill_disabled", "{s} {b}");
    let (_, disabled) = fetch(&root, &id, Some(&token), Value::Null, &[]).await;
    assert_eq!(
        disabled["run_profile"]["toolProfile"]["assistantActions"]["actionIds"],
        json!([])
    );
    worker.client.cancel().await.ok();
    hub.stop().await;
    root.stop().await;
}

/// A worker written to seed 003 alone: it reads `toolProfile.assistantActions` (endpoint,
/// action ids, phases) from its run profile and POSTs the seed's bodies with its run
/// credential; root answers in the seed's terms, governs and audits every call.
#[tokio::test]
async fn a_seed_003_worker_uses_the_assistant_action_endpoint_as_written() {
    let root = TestRoot::start().await.unwrap();
    let (_dir, counter, hub) = root
        .start_counting_hub("hub:test-alpha", |counter| format!(
                "[[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"sh\", \"-c\", \"echo run >> {}\"]\ntimeout_ms = 10000\n",
                counter.display()
            ))
        .await;
    let runs = || {
        std::fs::read_to_string(&counter)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    let (lease_id, lease) = root.lease("hub:test-alpha", "InfraOpsControl").await;
    let ask = json!({"tools": ["hub.get_status", "hub.run_allowed_tests"]});
    let (s, issued) = fetch(&root, &lease_id, Some(&lease), ask, &[]).await;
    assert_eq!(s, 201, "{issued}");
    let credential = issued["token"].as_str().unwrap().to_owned();
    let actions = &issued["run_profile"]["toolProfile"]["assistantActions"];
    assert_eq!(
        actions["schemaVersion"],
        "ai-workspace.assistant-actions.v1"
    );
    assert_eq!(
        actions["phases"],
        json!(["preview", "execute"]),
        "{actions}"
    );
    let url = root.url(actions["endpoint"].as_str().unwrap());
    let post = |body: Value| {
        let (http, url, credential) = (&root.http, &url, &credential);
        async move {
            let res = http
                .post(url)
                .bearer_auth(credential)
                .json(&body)
                .send()
                .await
                .unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    };

    // A read executes at once.
    let (s, read) =
        post(json!({"phase": "execute", "input": {"actionId": "hub.get_status"}})).await;
    assert_eq!(s, 200, "{read}");
    assert_eq!(
        (read["phase"].as_str(), read["actionId"].as_str()),
        (Some("execute"), Some("hub.get_status"))
    );
    assert_eq!(read["result"]["target_id"], "hub:test-alpha", "{read}");
    // A write: the preview's human-readable effect and token, then the execute, once.
    let (s, preview) = post(json!({"phase": "preview", "input": {
        "actionId": "hub.run_allowed_tests", "name": "smoke", "idempotencyKey": "hub.run_allowed_tests:worker:smoke"
    }}))
    .await;
    assert_eq!(s, 200, "{preview}");
    assert_eq!(preview["phase"], "preview");
    assert_eq!(preview["expectedEffect"]["test"], "smoke", "{preview}");
    assert!(
        preview["summary"]
            .as_str()
            .unwrap()
            .contains("Nothing was changed")
    );
    let token = preview["confirmationToken"].as_str().unwrap().to_owned();
    assert_eq!(runs(), 0);
    let execute = json!({"phase": "execute", "input": {
        "actionId": "hub.run_allowed_tests", "name": "smoke",
        "confirmationToken": token, "idempotencyKey": "hub.run_allowed_tests:worker:smoke"
    }});
    let (s, done) = post(execute.clone()).await;
    assert_eq!(s, 200, "{done}");
    assert_eq!(
        (
            done["result"]["phase"].as_str(),
            done["result"]["replay"].as_bool()
        ),
        (Some("execute"), Some(false)),
        "{done}"
    );
    assert_eq!(runs(), 1);
    let (s, again) = post(execute).await;
    assert_eq!(
        (s, again["result"]["replay"].as_bool()),
        (200, Some(true)),
        "{again}"
    );
    assert_eq!(runs(), 1);
    // Each was one governed, audited call under the run credential.
    for answer in [&read, &preview, &done] {
        let event = root.audit_event(answer["eventId"].as_str().unwrap()).await;
        assert_eq!(event["tool_id"], answer["actionId"], "{event}");
        assert_eq!(event["status"], "ok", "{event}");
        assert_eq!(
            event["actor"]["session_id"], issued["session_id"],
            "{event}"
        );
    }

    // Refusals in the seed's terms, each with its event: no token, beyond the profile,
    // destructive (with safe alternatives), no such action.
    let refused = [
        (
            json!({"phase": "execute", "input": {"actionId": "hub.run_allowed_tests", "name": "smoke", "idempotencyKey": "k2"}}),
            428,
            "confirmation_required",
        ),
        (
            json!({"phase": "execute", "input": {"actionId": "hub.get_logs"}}),
            403,
            "capability_not_granted",
        ),
        (
            json!({"phase": "execute", "input": {"actionId": "hub.delete_deploy", "ref": "main"}}),
            403,
            "forbidden_destructive",
        ),
        (
            json!({"phase": "execute", "input": {"actionId": "hub.no_such_action", "idempotencyKey": "k3"}}),
            404,
            "unknown_tool",
        ),
    ];
    for (body, status, code) in refused {
        let (s, r) = post(body).await;
        assert_eq!(refusal(s, &r), (status, code), "{r}");
        assert!(
            r["eventId"].as_str().is_some_and(|id| !id.is_empty()),
            "{r}"
        );
    }
    let (_, forbidden) =
        post(json!({"phase": "execute", "input": {"actionId": "hub.wipe_state"}})).await;
    let alternatives = items(&forbidden["error"]["safeAlternatives"]);
    assert!(
        alternatives.iter().any(|a| a
            .as_str()
            .unwrap()
            .contains("hub.rollback_last_test_deploy")),
        "{forbidden}"
    );
    assert_eq!(runs(), 1);

    // Malformed requests: a precise 400, nothing called.
    let malformed = [
        (json!({"input": {"actionId": "hub.get_status"}}), "phase"),
        (
            json!({"phase": "apply", "input": {"actionId": "hub.get_status"}}),
            "phase",
        ),
        (json!({"phase": "execute", "input": {}}), "actionId"),
        (
            json!({"phase": "execute", "input": {"actionId": 7}}),
            "actionId",
        ),
        (
            json!({"phase": "preview", "input": {"actionId": "hub.get_status"}}),
            "no preview",
        ),
        (
            json!({"phase": "execute", "input": {"actionId": "hub.get_status", "idempotencyKey": "k"}}),
            "read action",
        ),
        (
            json!({"phase": "execute", "input": {"actionId": "hub.run_allowed_tests", "name": "smoke", "confirmation_token": "x"}}),
            "confirmationToken",
        ),
        (
            json!({"phase": "preview", "input": {"actionId": "hub.run_allowed_tests", "name": "smoke", "confirmationToken": "x"}}),
            "takes no confirmationToken",
        ),
        (
            json!({"phase": "execute", "input": {"actionId": "hub.run_allowed_tests", "name": "smoke", "idempotencyKey": 5}}),
            "must be a string",
        ),
        (
            json!({"phase": "execute", "input": {"actionId": "hub.get_status"}, "extra": 1}),
            "extra",
        ),
    ];
    for (body, why) in malformed {
        let (s, r) = post(body.clone()).await;
        assert_eq!(s, 400, "{body}: {r}");
        let message = error_message(&r);
        assert!(message.contains(why), "{body}: {message}");
    }
    // Without a bearer, or with one that is no lease: refused before anything runs.
    let res = root
        .http
        .post(&url)
        .json(&json!({"phase": "execute", "input": {"actionId": "hub.get_status"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 401);
    assert_eq!(runs(), 1);
    hub.stop().await;
    root.stop().await;
}
