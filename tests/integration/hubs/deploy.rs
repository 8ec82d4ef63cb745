//! Deploys through root to a real hub, over the rmcp client: a local git repository with
//! three commits (tags `v1`, `v2`, branch `main`), preview → confirmation token → execute with
//! an idempotency key for `hub.deploy_ref` and `hub.rollback_last_test_deploy`; the worktree's
//! HEAD and files, the deploy history on the hub, the restarted service's process and the
//! refusals (refs outside `allowed_refs`, forged refs, nothing to roll back) are checked.

use mcp_tests::error_message;
use mcp_tests::items;
use std::path::Path;

use mcp_tests::git::{git, repository};
use mcp_tests::{TestRoot, mcp_client};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};

type Client = RunningService<rmcp::RoleClient, ()>;

/// A call's structured content (the result, or `{"error": ...}` when `isError`).
async fn call(client: &Client, tool: &str, args: Value) -> Value {
    let params = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap());
    let res = client.call_tool(params).await.unwrap();
    let sc = res.structured_content.unwrap_or(Value::Null);
    assert_eq!(
        res.is_error == Some(true),
        sc.get("error").is_some(),
        "{tool} {args}: {sc}"
    );
    sc
}

/// Preview (checked to change nothing), then execute with the preview's token and `key`.
async fn write(client: &Client, tool: &str, args: Value, key: &str) -> (Value, Value) {
    let preview = call(client, tool, args.clone()).await;
    assert_eq!(preview["phase"], "preview", "{preview}");
    let mut exec = args.clone();
    exec["phase"] = json!("execute");
    exec["confirmation_token"] = preview["confirmation_token"].clone();
    exec["idempotency_key"] = json!(key);
    let done = call(client, tool, exec).await;
    assert_eq!(done["phase"], "execute", "{done}");
    (preview, done)
}

fn history(state: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(state.join("deploys.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    items(&v["entries"]).clone()
}

#[tokio::test]
async fn deploy_preview_rollback_and_refusals_through_root() {
    let dir = tempfile::tempdir().unwrap();
    let (src, shas) = repository(dir.path());
    let root = TestRoot::start().await.unwrap();
    let hub = root
        .start_hub(
            "hub:test-alpha",
            &format!(
                "[deploy]\nrepository = \"{}\"\nworktree = \"deploy/app\"\n\
                 allowed_refs = [\"main\", \"v*\"]\nrestart_services = [\"app\"]\n\
                 [[services]]\nname = \"app\"\nargv = [\"sleep\", \"600\"]\n\
                 [[log_sources]]\nname = \"release-notes\"\npath = \"notes.log\"\n",
                src.display()
            ),
        )
        .await
        .unwrap();
    let state = hub.state_dir.path().join("state");
    let worktree = state.join("deploy/app");
    let token = root.bearer("hub:test-alpha", "InfraOpsControl").await;
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
    let tools: Vec<String> = mcp_tests::listed_tools(&client).await;
    for tool in ["hub.deploy_ref", "hub.rollback_last_test_deploy"] {
        assert!(
            tools.iter().any(|t| t == tool),
            "{tool} not listed: {tools:?}"
        );
    }

    // Nothing deployed yet: nothing to roll back.
    let none = call(&client, "hub.rollback_last_test_deploy", json!({})).await;
    assert_eq!(none["error"]["code"], "not_found", "{none}");

    // Deploy v1: the preview changes nothing, execute checks it out.
    let (preview, done) = write(&client, "hub.deploy_ref", json!({"ref": "v1"}), "d1").await;
    let effect = &preview["expected_effect"];
    assert_eq!(effect["current"], Value::Null, "{effect}");
    assert_eq!(effect["target"]["commit"], shas[0]);
    assert_eq!(effect["restart_services"], json!(["app"]));
    let first = &done["result"];
    assert_eq!(done["replay"], false);
    assert_eq!(first["deployed"]["commit"], shas[0], "{done}");
    assert_eq!(first["deployed"]["resolved_ref"], "refs/tags/v1");
    assert_eq!(git(&worktree, &["rev-parse", "HEAD"]), shas[0]);
    assert_eq!(
        std::fs::read_to_string(worktree.join("app.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(first["services"][0]["name"], "app");
    assert_eq!(first["services"][0]["restarted"], true, "{first}");
    let pid_v1 = first["services"][0]["pid"].as_u64().unwrap();

    // Preview v2: the commits between v1 and v2, a fast-forward; nothing changes.
    let preview = call(&client, "hub.deploy_ref", json!({"ref": "v2"})).await;
    let effect = &preview["expected_effect"];
    assert_eq!(effect["current"], json!({"ref": "v1", "commit": shas[0]}));
    assert_eq!(effect["target"]["commit"], shas[1]);
    assert_eq!(
        effect["commits"],
        json!([{"sha": shas[1], "subject": "commit two", "author": "t"}])
    );
    assert_eq!(effect["commits_truncated"], false);
    assert_eq!(effect["fast_forward"], true);
    assert_eq!(effect["commits_removed"], json!([]));
    assert_eq!(
        git(&worktree, &["rev-parse", "HEAD"]),
        shas[0],
        "a preview changes nothing"
    );

    // Deploy v2: the service gets a new process.
    let (_, done) = write(&client, "hub.deploy_ref", json!({"ref": "v2"}), "d2").await;
    let second = done["result"].clone();
    assert_eq!(second["previous"], json!({"ref": "v1", "commit": shas[0]}));
    assert_eq!(
        std::fs::read_to_string(worktree.join("app.txt")).unwrap(),
        "two\n"
    );
    let pid_v2 = second["services"][0]["pid"].as_u64().unwrap();
    assert_ne!(pid_v1, pid_v2, "{second}");
    assert_eq!(history(&state).len(), 2);

    // A replayed execute returns the first result and deploys nothing.
    let preview = call(&client, "hub.deploy_ref", json!({"ref": "v2"})).await;
    let again = call(
        &client,
        "hub.deploy_ref",
        json!({"ref": "v2", "phase": "execute", "idempotency_key": "d2",
               "confirmation_token": preview["confirmation_token"]}),
    )
    .await;
    assert_eq!(again["replay"], true, "{again}");
    assert_eq!(again["result"]["deploy_id"], second["deploy_id"]);
    assert_eq!(history(&state).len(), 2, "nothing deployed again");

    // Roll back: the preview names the deploy it undoes; execute returns to v1.
    let (preview, done) = write(&client, "hub.rollback_last_test_deploy", json!({}), "r1").await;
    let effect = &preview["expected_effect"];
    assert_eq!(effect["current"]["commit"], shas[1], "{effect}");
    assert_eq!(effect["target"]["commit"], shas[0]);
    assert_eq!(effect["undoes"]["deploy_id"], second["deploy_id"]);
    assert_eq!(effect["commits_removed"][0]["sha"], shas[1]);
    assert_eq!(done["result"]["deployed"]["commit"], shas[0], "{done}");
    assert_eq!(git(&worktree, &["rev-parse", "HEAD"]), shas[0]);
    assert_eq!(
        std::fs::read_to_string(worktree.join("app.txt")).unwrap(),
        "one\n"
    );
    let entries = history(&state);
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[2]["kind"], "rollback");
    assert_eq!(entries[2]["previous_commit"], shas[1]);
    // The hub keeps the key under the lease that sent it (`lease:<lineage>/<key>`).
    let key = entries[2]["idempotency_key"].as_str().unwrap();
    assert!(key.starts_with("lease:") && key.ends_with("/r1"), "{key}");
    // v1 was the first deploy: nothing further to roll back.
    let none = call(&client, "hub.rollback_last_test_deploy", json!({})).await;
    assert_eq!(none["error"]["code"], "not_found", "{none}");

    // Refs outside allowed_refs and forged refs are refused precisely; nothing moves.
    for (r, code, why) in [
        (
            "feature/x",
            "invalid_arguments",
            "allowed refs: `main`, `v*`",
        ),
        ("-x", "invalid_arguments", "must not start with `-`"),
        ("../x", "invalid_arguments", "`..`"),
        ("main;rm", "invalid_arguments", ""),
        ("v9", "invalid_arguments", "no tag or branch"),
    ] {
        let refused = call(&client, "hub.deploy_ref", json!({"ref": r})).await;
        assert_eq!(refused["error"]["code"], code, "{r}: {refused}");
        let message = error_message(&refused);
        assert!(message.contains(why), "{r}: {message}");
    }
    assert_eq!(git(&worktree, &["rev-parse", "HEAD"]), shas[0]);
    assert_eq!(history(&state).len(), 3);

    // What was confirmed is what runs: `main` previewed at its third commit moves on before
    // the execute; the hub refuses (`conflict`, naming both commits), nothing is deployed, and
    // the consumed token is gone. Previewed again, the new commit deploys.
    let preview = call(&client, "hub.deploy_ref", json!({"ref": "main"})).await;
    assert_eq!(preview["expected_effect"]["target"]["commit"], shas[2]);
    std::fs::write(src.join("app.txt"), "four\n").unwrap();
    git(&src, &["commit", "-qam", "commit four"]);
    let four = git(&src, &["rev-parse", "HEAD"]);
    let exec = json!({"ref": "main", "phase": "execute", "idempotency_key": "m1",
                      "confirmation_token": preview["confirmation_token"]});
    let moved = call(&client, "hub.deploy_ref", exec.clone()).await;
    assert_eq!(moved["error"]["code"], "conflict", "{moved}");
    let message = error_message(&moved);
    assert!(
        message.contains(&shas[2]) && message.contains(&four),
        "{message}"
    );
    assert_eq!(git(&worktree, &["rev-parse", "HEAD"]), shas[0]);
    assert_eq!(history(&state).len(), 3);
    let reused = call(&client, "hub.deploy_ref", exec).await;
    assert_eq!(reused["error"]["code"], "confirmation_required", "{reused}");
    let (_, done) = write(&client, "hub.deploy_ref", json!({"ref": "main"}), "m2").await;
    assert_eq!(
        done["result"]["deployed"]["commit"],
        four.as_str(),
        "{done}"
    );
    assert_eq!(history(&state).len(), 4);

    // The hub's streams through root's subnet-wide hub.get_logs: redacted on the hub.
    std::fs::write(
        state.join("notes.log"),
        "deployed v1\ntoken mcph_AAAAAAAAAAAAAAAAAAAAAAAA\ndeployed v2\n",
    )
    .unwrap();
    let logs = call(&client, "hub.get_logs", json!({"stream": "release-notes"})).await;
    assert_eq!(logs["source"], "subnet_active", "{logs}");
    assert_eq!(logs["health"], "healthy", "{logs}");
    let entry = &logs["entries"][0];
    assert_eq!(entry["target_id"], "hub:test-alpha");
    assert_eq!(
        entry["lines"],
        json!(["deployed v1", "token [REDACTED]", "deployed v2"])
    );
    assert_eq!(entry["redactions"], 1);
    assert!(!logs.to_string().contains("mcph_AAAA"));
    let all = call(&client, "hub.get_logs", json!({"lines": 5})).await;
    let streams: Vec<&str> = items(&all["entries"])
        .iter()
        .map(|e| e["stream"].as_str().unwrap())
        .collect();
    assert_eq!(streams, ["app", "release-notes", "hub"], "{all}");

    client.cancel().await.unwrap();
    hub.stop().await;
    root.stop().await;
}
