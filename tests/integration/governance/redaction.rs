//! Smoke test: a secret planted in a managed service's log (and in an allowed test's output)
//! never reaches the MCP client or root's audit store. The hub redacts before data leaves it;
//! root redacts again before it stores or answers. The audit store is checked at the bytes on
//! disk (database and write-ahead log), not only through the API.

use mcp_tests::items;
use mcp_tests::{TestRoot, mcp_client};
use serde_json::json;

use mcp_tests::eventually;

use crate::hubs::services::{call, fixture_service, write};
use mcp_tests::ports::free_port;

/// The token `mcp-fixture-service --print-secret` writes (`SECRET_LINE` in its source).
const PLANTED: &str = "sk_live_fixture0123456789abcdef";

fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<String> {
    let mut hits = Vec::new();
    for entry in mcp_tests::files_under(dir) {
        if let Ok(bytes) = std::fs::read(&entry)
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            hits.push(entry.display().to_string());
        }
    }
    hits
}

#[tokio::test]
async fn a_secret_in_a_service_log_never_reaches_the_client_or_the_audit_store() {
    let root = TestRoot::start().await.unwrap();
    let port = free_port();
    let test_toml = format!(
        "[[skill.allowed_tests]]\nname = \"leaky\"\nargv = [\"sh\", \"-c\", \"echo 'Authorization: Bearer {PLANTED}'; echo password=https://u:{PLANTED}@db.local/x\"]\ntimeout_ms = 10000\n"
    );
    let hub = root
        .start_hub(
            "hub:leaky",
            &format!(
                "{}{test_toml}",
                fixture_service("fixture", port, &["--print-secret"], "")
            ),
        )
        .await
        .unwrap();
    // The secret really is in the service's own log on the hub.
    let log = hub.state_dir.path().join("state/services/fixture.log");
    eventually("the fixture to log its secret", async || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|s| s.contains(PLANTED))
    })
    .await;

    let token = root.bearer("hub:leaky", "InfraOpsControl").await;
    let client = mcp_client(&root.mcp_url(), &token).await.unwrap();
    let mut seen = String::new();
    // Logs through root's subnet fan-out, the service stream and everything.
    for args in [
        json!({"stream": "fixture", "lines": 200}),
        json!({"lines": 1000}),
        json!({"contains": "sk_live"}),
        json!({"contains": "Bearer", "lines": 50}),
    ] {
        let answer = call(&client, "hub.get_logs", args.clone()).await;
        assert!(answer["entries"].is_array(), "{args}: {answer}");
        seen.push_str(&answer.to_string());
    }
    let fixture_lines = call(&client, "hub.get_logs", json!({"stream": "fixture"})).await;
    let entry = &fixture_lines["entries"][0];
    let markers = entry["redactions"].as_u64().unwrap();
    assert!(markers > 0, "{fixture_lines}");
    // Every answer says what was redacted from it (how many, which stream's lines): over
    // MCP in the result's `_meta`, over REST and the seed-003 endpoint in the body.
    let params = rmcp::model::CallToolRequestParams::new("hub.get_logs")
        .with_arguments(json!({"stream": "fixture"}).as_object().cloned().unwrap());
    let res = client.call_tool(params).await.unwrap();
    let meta = serde_json::to_value(res.meta.unwrap()).unwrap();
    let summary = &meta["redactions"];
    assert!(summary["count"].as_u64().unwrap() >= markers, "{meta}");
    assert_eq!(
        summary["paths"],
        json!(["result.entries[0].lines"]),
        "{meta}"
    );
    let (s, rest) = root
        .call(&token, "hub.get_logs", json!({"stream": "fixture"}))
        .await;
    assert_eq!(s, 200, "{rest}");
    assert_eq!(
        rest["redactions"]["paths"],
        json!(["result.entries[0].lines"])
    );
    let res = root.post_as(&token, "/api/ai-workspace/assistant/v1/actions", &json!({"phase": "execute", "input": {"actionId": "hub.get_logs", "stream": "fixture"}})).await;
    let action: serde_json::Value = res.json().await.unwrap();
    assert!(
        action["redactions"]["count"].as_u64().unwrap() > 0,
        "{action}"
    );
    // A read with nothing to redact says so.
    let (_, clean) = root.call(&token, "hub.get_status", json!({})).await;
    assert_eq!(
        clean["redactions"],
        json!({"count": 0, "paths": []}),
        "{clean}"
    );
    assert!(
        entry["lines"].to_string().contains("tick"),
        "{fixture_lines}"
    );
    // The probe for the secret's text finds nothing.
    let probe = call(&client, "hub.get_logs", json!({"contains": "sk_live"})).await;
    assert!(
        items(&probe["entries"])
            .iter()
            .all(|e| items(&e["lines"]).is_empty()),
        "{probe}"
    );
    // An allowed test's output, run and read back.
    let ran = write(
        &client,
        "hub.run_allowed_tests",
        json!({"name": "leaky"}),
        "k1",
    )
    .await;
    assert_eq!(ran["phase"], "execute", "{ran}");
    seen.push_str(&ran.to_string());
    seen.push_str(
        &call(&client, "hub.get_test_results", json!({"name": "leaky"}))
            .await
            .to_string(),
    );
    assert!(
        !seen.contains(PLANTED),
        "a planted secret reached the client: {seen}"
    );

    // Nor the audit trail, through the API or on disk.
    let audit = root.admin_get("/v1/root/mcp/audit?limit=1000").await;
    assert!(items(&audit["events"]).len() >= 7);
    assert!(!audit.to_string().contains(PLANTED));
    client.cancel().await.unwrap();
    hub.stop().await;
    let data = root.data_dir();
    root.stop().await;
    assert_eq!(
        files_containing(&data, PLANTED.as_bytes()),
        Vec::<String>::new(),
        "root's data dir holds the planted secret"
    );
}

/// Redaction in depth: a hub that does not redact (here one on the real protocol that
/// answers `hub.get_status` with bare secrets in it: a private key, cloud and API keys, a JWT,
/// a password in a URL, sensitive paths) still leaks none of them, neither to the client nor
/// into the trail: root applies the contract's rules and its own before a result leaves it.
#[tokio::test]
async fn root_redacts_bare_secrets_a_hub_did_not() {
    use crate::hardening::bad_input::hub_door::{hello, next, text};
    use futures::SinkExt;
    use mcp_shared::protocol::{CallOutcome, HubToRoot, RootToHub};

    let secrets = [
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAplanted\n-----END RSA PRIVATE KEY-----",
        "AKIAIOSFODNN7PLANTED",
        "sk_live_planted0123456789abcd",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.c2lnbmF0dXJlcGxhbnRlZA",
        "postgres://app:plantedpw@db.internal/prod",
        "/home/ann/.ssh/id_ed25519",
        "/etc/shadow",
    ];
    let root = TestRoot::start().await.unwrap();
    let target = "hub:leaky-raw";
    let token = root.enroll(target, "test").await.unwrap();
    let mut ws = mcp_tests::dial_hub_door(&root.handle().base_url(), Some(&token))
        .await
        .unwrap();
    ws.send(hello(&token, target, "test")).await.unwrap();
    assert!(matches!(
        next(&mut ws).await,
        Ok((RootToHub::Welcome { .. }, _))
    ));
    let lease = root.bearer(target, "InfraOpsRead").await;
    let call = tokio::spawn(root.call_later(&lease, "hub.get_status", json!({})));
    let call_id = loop {
        match next(&mut ws).await {
            Ok((RootToHub::Call(c), _)) => break c.call_id,
            Ok(_) => continue,
            Err(e) => panic!("connection ended: {e:?}"),
        }
    };
    let result = json!({
        "target_id": target,
        "environment": "test",
        "subnet": secrets.join(" | "),
        "zone": format!("config at {} and {}", secrets[5], secrets[6]),
        "hub_version": secrets[1],
        "protocol_version": 1,
        "started_at": "2026-12-01T00:00:00Z",
        "uptime_sec": 1,
        "connected": true,
        "connected_since": secrets[3],
        "skills": [],
    });
    let answer = HubToRoot::Result {
        call_id,
        outcome: CallOutcome::Ok {
            adapter: "unredacting-fake".into(),
            result,
        },
    };
    ws.send(text("r1", &answer)).await.unwrap();
    let (status, body) = call.await.unwrap();
    assert_eq!(status, 200, "{body}");
    let answered = body.to_string();
    let ev = root.audit_event(body["event_id"].as_str().unwrap()).await;
    let stored = ev.to_string();
    for secret in secrets {
        let probe = secret.lines().nth(1).unwrap_or(secret);
        assert!(
            !answered.contains(probe),
            "{secret} reached the client: {answered}"
        );
        assert!(
            !stored.contains(probe),
            "{secret} reached the trail: {stored}"
        );
    }
    assert!(answered.contains("[REDACTED]"), "{answered}");
    let rules: Vec<&str> = items(&ev["redactions"])
        .iter()
        .map(|r| r["rule"].as_str().unwrap())
        .collect();
    for rule in [
        "private_key",
        "aws_access_key",
        "stripe_key",
        "jwt",
        "url_password",
        "sensitive_path",
    ] {
        assert!(
            rules.contains(&format!("pattern:{rule}").as_str()),
            "{rule}: {rules:?}"
        );
    }
    // The answer says what was redacted, and where: never what.
    let summary = &body["redactions"];
    let paths: Vec<&str> = items(&summary["paths"])
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "result.connected_since",
            "result.hub_version",
            "result.subnet",
            "result.zone"
        ],
        "{summary}"
    );
    assert!(summary["count"].as_u64().unwrap() >= 7, "{summary}");
    root.stop().await;
}
