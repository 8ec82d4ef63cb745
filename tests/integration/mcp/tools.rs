//! tools/list and tools/call through a real MCP client, plus REST `/call`.

use mcp_tests::items;
use std::collections::BTreeSet;

use mcp_tests::{TestRoot, mcp_client};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

#[tokio::test]
async fn tools_list_is_filtered_by_profile_and_annotated() {
    let root = TestRoot::start().await.unwrap();
    let dev = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let nlu = root.bearer("hub:test-alpha", "NLUTeacherRead").await;

    let client = mcp_client(&root.mcp_url(), &dev).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let expected = [
        "sdk.get_metadata",
        "sdk.get_scenario_contract",
        "sdk.get_schema",
        "sdk.get_skill_contract",
        "sdk.get_system_model",
        "sdk.get_template",
        "sdk.list_capability_classes",
        "sdk.list_public_scenarios",
        "sdk.list_public_skills",
        "sdk.list_schemas",
        "sdk.list_templates",
    ];
    assert_eq!(names, expected, "stable order, all sdk tools");
    for t in &tools {
        let a = t.annotations.as_ref().unwrap();
        assert_eq!(a.read_only_hint, Some(true));
        assert_eq!(a.destructive_hint, Some(false));
        assert!(t.output_schema.is_some());
        assert_eq!(
            t.input_schema.get("type").and_then(|v| v.as_str()),
            Some("object")
        );
    }
    // Same order twice.
    let again: Vec<String> = mcp_tests::listed_tools(&client).await;
    assert_eq!(again, expected);

    let nlu_client = mcp_client(&root.mcp_url(), &nlu).await.unwrap();
    assert!(
        nlu_client.list_all_tools().await.unwrap().is_empty(),
        "no NLU tools exist yet, and no sdk capability"
    );

    // REST /contracts agrees with MCP for a lease, and shows everything to the operator.
    let res = root.get_as(&nlu, "/v1/root/mcp/contracts").await;
    let v: Value = res.json().await.unwrap();
    assert_eq!(items(&v["contracts"]).len(), 0);
    let all = root.admin_get("/v1/root/mcp/contracts").await;
    let ids: BTreeSet<_> = items(&all["contracts"])
        .iter()
        .map(|c| c["tool_id"].as_str().unwrap().to_string())
        .collect();
    assert!(ids.contains("sdk.get_schema"));
    root.stop().await;
}

#[tokio::test]
async fn descriptive_call_returns_structured_content_linked_to_its_audit_event() {
    let root = TestRoot::start().await.unwrap();
    // Judged within the served descriptors' freshness, whatever today's date is.
    let set = &root.handle().app.descriptors.snapshot();
    let generated = set
        .all()
        .iter()
        .map(|d| d.freshness.generated_at)
        .max()
        .unwrap();
    root.handle()
        .app
        .clock
        .set(generated + time::Duration::days(1));
    let (sid, token) = root.lease("hub:test-alpha", "AdaOSDevRead").await;
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();

    let res = client
        .call_tool(CallToolRequestParams::new("sdk.list_schemas"))
        .await
        .unwrap();
    assert_ne!(res.is_error, Some(true));
    let sc = res.structured_content.clone().unwrap();
    assert!(
        items(&sc["data"])
            .iter()
            .any(|s| s["name"] == "tool-contract"),
        "{sc}"
    );
    for f in [
        "descriptor_id",
        "source_kind",
        "source_ref",
        "generated_at",
        "fresh_until",
        "cache_ttl_sec",
        "stability",
        "content_hash",
    ] {
        assert!(
            !sc["descriptor"][f].is_null(),
            "freshness field {f} missing"
        );
    }
    assert_eq!(sc["stale"], false);
    // The text copy is the same JSON.
    let text = res.content[0].as_text().unwrap().text.clone();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), sc);
    let meta = res.meta.clone().unwrap();
    let event_id = meta.0["event_id"].as_str().unwrap().to_string();
    let trace_id = meta.0["trace_id"].as_str().unwrap().to_string();

    let audit = root.trail(&format!("trace_id={trace_id}")).await;
    let events = audit;
    assert_eq!(events.len(), 1);
    let e = &events[0];
    assert_eq!(e["event_id"], event_id);
    assert_eq!(e["tool_id"], "sdk.list_schemas");
    assert_eq!(e["status"], "ok");
    assert_eq!(e["surface"], "mcp");
    assert_eq!(e["capability"], "sdk.read.schemas");
    assert_eq!(e["actor"]["session_id"], sid);
    assert_eq!(e["policy_decision"]["decision"], "allow");
    assert_eq!(e["execution_adapter"], "root.descriptor_cache");
    assert_eq!(e["dry_run"], false);

    // Selecting one element by argument.
    let res = client
        .call_tool(
            CallToolRequestParams::new("sdk.get_schema")
                .with_arguments(args(json!({"name": "session-lease"}))),
        )
        .await
        .unwrap();
    let sc = res.structured_content.unwrap();
    assert_eq!(sc["data"]["name"], "session-lease");
    assert!(sc["data"]["schema"]["properties"]["deadline_at"].is_object());
    root.stop().await;
}

#[tokio::test]
async fn invalid_arguments_and_denials_are_tool_errors_with_events() {
    let root = TestRoot::start().await.unwrap();
    let dev = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let infra = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let client = mcp_client(&root.mcp_url(), &dev).await.unwrap();

    for bad in [
        json!({}),
        json!({"name": 42}),
        json!({"name": "x", "extra": true}),
        json!({"name": ""}),
    ] {
        let res = client
            .call_tool(
                CallToolRequestParams::new("sdk.get_schema").with_arguments(args(bad.clone())),
            )
            .await
            .unwrap();
        assert_eq!(res.is_error, Some(true), "{bad}");
        let sc = res.structured_content.unwrap();
        assert_eq!(sc["error"]["code"], "invalid_arguments", "{bad}: {sc}");
        assert!(res.meta.unwrap().0["event_id"].is_string());
    }
    // A name that does not exist is a precise error too.
    let res = client
        .call_tool(
            CallToolRequestParams::new("sdk.get_schema")
                .with_arguments(args(json!({"name": "nope"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        res.structured_content.unwrap()["error"]["code"],
        "invalid_arguments"
    );

    // Unknown tool: JSON-RPC invalid params, still audited.
    let err = client
        .call_tool(CallToolRequestParams::new("sdk.no_such_tool"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown tool"), "{err}");
    let denied = root
        .admin_get("/v1/root/mcp/audit?tool_id=sdk.no_such_tool")
        .await;
    assert_eq!(
        denied["events"][0]["policy_decision"]["reason"],
        "unknown_tool"
    );

    // A valid lease without the capability: capability_not_granted, on MCP and REST.
    let infra_client = mcp_client(&root.mcp_url(), &infra).await.unwrap();
    let res = infra_client
        .call_tool(CallToolRequestParams::new("sdk.get_metadata"))
        .await
        .unwrap();
    assert_eq!(res.is_error, Some(true));
    assert_eq!(
        res.structured_content.unwrap()["error"]["code"],
        "capability_not_granted"
    );
    let (status, body) = root.call(&infra, "sdk.get_metadata", json!({})).await;
    assert_eq!(status, 403);
    assert_eq!(body["error"]["code"], "capability_not_granted");
    let ev = root.audit_event(body["event_id"].as_str().unwrap()).await;
    assert_eq!(ev["status"], "denied");
    assert_eq!(ev["surface"], "rest");
    assert_eq!(ev["policy_decision"]["reason"], "capability_not_granted");

    // Secrets in arguments never reach the trail.
    let leaked = format!("here is {dev}");
    let (s, body) = root
        .call(&dev, "sdk.get_schema", json!({"name": leaked}))
        .await;
    assert_eq!(s, 400);
    let ev = root.audit_event(body["event_id"].as_str().unwrap()).await;
    assert!(
        !ev.to_string().contains(&dev),
        "bearer leaked into the audit trail"
    );
    assert_eq!(ev["redactions"][0]["rule"], "pattern:lease_bearer");
    root.stop().await;
}

#[tokio::test]
async fn over_the_concurrency_limit_calls_get_busy() {
    // One call per lease at a time: overlapping calls must be refused with `busy`, at once.
    let root = TestRoot::start_with(|c| c.limits.per_lease_in_flight = 1)
        .await
        .unwrap();
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let mut busy = 0;
    let mut ok = 0;
    for _round in 0..20 {
        let calls =
            (0..16).map(|_| root.call(&token, "sdk.get_schema", json!({"name": "tool-contract"})));
        for (status, body) in futures::future::join_all(calls).await.into_iter() {
            match status {
                200 => ok += 1,
                429 => {
                    assert_eq!(body["error"]["code"], "busy");
                    assert_eq!(body["error"]["retryable"], true);
                    busy += 1;
                }
                other => panic!("unexpected {other}: {body}"),
            }
        }
        if busy > 0 && ok > 0 {
            break;
        }
    }
    assert!(ok > 0 && busy > 0, "ok={ok} busy={busy}");
    let denied = root.trail("status=denied&limit=1000").await;
    let n_busy = denied
        .iter()
        .filter(|e| e["error"]["code"] == "busy")
        .count();
    assert_eq!(n_busy, busy, "every busy refusal is audited");
    root.stop().await;
}

#[tokio::test]
async fn a_bad_tools_list_cursor_is_invalid_params() {
    let root = TestRoot::start().await.unwrap();
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
    for cursor in ["zzz", "o:-1", "o:999"] {
        let params =
            rmcp::model::PaginatedRequestParams::default().with_cursor(Some(cursor.to_string()));
        let err = client.list_tools(Some(params)).await.unwrap_err();
        assert!(
            err.to_string().contains("-32602") || err.to_string().contains("cursor"),
            "{cursor}: {err}"
        );
    }
    root.stop().await;
}

#[tokio::test]
async fn destructive_action_names_get_forbidden_destructive_with_alternatives() {
    let root = TestRoot::start().await.unwrap();
    let token = root.bearer("hub:test-alpha", "InfraOpsControl").await;
    for name in [
        "hub.delete_deploy",
        "hub.wipe_state",
        "hub.exec",
        "hub.force_push",
    ] {
        let (status, body) = root.call(&token, name, json!({})).await;
        assert_eq!(status, 403, "{name}: {body}");
        assert_eq!(body["error"]["code"], "forbidden_destructive", "{name}");
        assert!(
            !items(&body["error"]["details"]["alternatives"]).is_empty(),
            "{name}: {body}"
        );
        let ev = root.audit_event(body["event_id"].as_str().unwrap()).await;
        assert_eq!(ev["policy_decision"]["reason"], "forbidden_destructive");
    }
    // Through MCP it is a tool error the agent can read, not a protocol error.
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
    let res = client
        .call_tool(CallToolRequestParams::new("hub.delete_deploy"))
        .await
        .unwrap();
    assert_eq!(res.is_error, Some(true));
    let sc = res.structured_content.unwrap();
    assert_eq!(sc["error"]["code"], "forbidden_destructive");
    assert!(
        sc["error"]["details"]["alternatives"][0]
            .as_str()
            .unwrap()
            .contains("rollback")
    );
    // A name that is merely unknown stays unknown.
    assert_eq!(
        root.call(&token, "hub.no_such_thing", json!({})).await.0,
        404
    );
    root.stop().await;
}
