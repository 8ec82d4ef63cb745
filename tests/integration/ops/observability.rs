//! What operators watch: `/metrics` per tool, per target, per code and for the audit trail,
//! with bounded labels; the Grafana dashboard and the alert rules in `config/` name only
//! metrics a running root exposes.

use mcp_tests::items;
use std::collections::BTreeSet;

use mcp_tests::{TestHub, TestRoot};
use saphyr::{LoadableYamlNode, Yaml};
use serde_json::{Value, json};

fn repo_file(path: &str) -> String {
    let at = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path);
    std::fs::read_to_string(&at).unwrap_or_else(|e| panic!("{}: {e}", at.display()))
}

/// Every `mcp_root_*` name in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("mcp_root_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

/// Whether the exposition has `name` as a sample name of the type it declares: a counter's
/// `_total`, a histogram's `_bucket`, `_sum` or `_count`, a gauge's bare name.
fn exposes(exposition: &str, name: &str) -> bool {
    let declared = |family: &str, kind: &str| {
        exposition
            .lines()
            .any(|l| l == format!("# TYPE {family} {kind}"))
    };
    if let Some(family) = name.strip_suffix("_total") {
        return declared(family, "counter");
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(family) = name.strip_suffix(suffix) {
            return declared(family, "histogram");
        }
    }
    declared(name, "gauge")
}

/// The sample value of a series line `series` (labels included), if present.
fn sample(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|v| v.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
    })
}

#[tokio::test]
async fn metrics_count_per_target_code_and_audit_commit_with_bounded_labels() {
    // An export sink whose receiver never answers (fail_open), and a witness that never
    // answers either: their series are exposed.
    let keys = tempfile::tempdir().unwrap();
    let witness_key = mcp_root::audit::witness::cosign::Cosigner::derive(
        &mcp_root::secrets::MasterKey::load_or_create(&keys.path().join("w.key"))
            .unwrap()
            .0,
        "witness.example/w1",
    )
    .verifier_key();
    let root = TestRoot::start_with(|c| {
        c.limits.header_read_timeout_ms = 200;
        c.audit.witnesses = vec![mcp_root::config::WitnessPeerConfig {
            url: "http://127.0.0.1:9/witness".into(),
            key: witness_key.clone(),
        }];
        c.audit.sinks = vec![
            toml::from_str(
                "name = \"siem\"\nkind = \"http\"\nendpoint = \"http://127.0.0.1:9/\"\n",
            )
            .unwrap(),
        ];
    })
    .await
    .unwrap();
    let token = root.enroll("hub:obs", "test").await.unwrap();
    let base = root.handle().base_url();
    let tests = "[[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"true\"]\n";
    let hub = TestHub::start(&base, "hub:obs", &token, tests)
        .await
        .unwrap();
    let (lease_id, bearer) = root.lease("hub:obs", "InfraOpsRead").await;
    // A routed read, a denial (a write this profile does not grant) and an error (the hub
    // has no such allowed test).
    let (s, v) = root.call(&bearer, "hub.get_status", json!({})).await;
    assert_eq!(s, 200, "{v}");
    let (_, v) = root
        .call(&bearer, "hub.restart_service", json!({"service": "x"}))
        .await;
    assert_eq!(v["ok"], false, "{v}");
    let (_, v) = root
        .call(
            &bearer,
            "hub.get_test_results",
            json!({"name": "no-such-test"}),
        )
        .await;
    let error_code = v["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_owned();
    // The hub reconnects once.
    hub.stop().await;
    let hub = TestHub::start(&base, "hub:obs", &token, tests)
        .await
        .unwrap();
    // A hub upgrade without a token, and a connection that never finishes its request head.
    let door = mcp_tests::websocket_upgrade(root.http.get(root.url("/v1/root/hubs/connect")))
        .send()
        .await
        .unwrap();
    assert_eq!(door.status(), 401);
    let mut silent = tokio::net::TcpStream::connect(base.trim_start_matches("http://"))
        .await
        .unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut silent, b"GET /healthz HTTP/1.1\r\n")
        .await
        .unwrap();
    mcp_tests::eventually("the request head's bound fired", async || {
        let fired = root
            .metric("mcp_root_connection_timeouts_total{kind=\"header\"}")
            .await
            .unwrap();
        fired.map(drop)
    })
    .await;
    drop(silent);
    let text = root.metrics_text().await.unwrap();

    for (series, want) in [
        ("mcp_root_target_connected{target=\"hub:obs\"}", 1.0),
        ("mcp_root_target_reconnects_total{target=\"hub:obs\"}", 1.0),
        ("mcp_root_target_inflight_calls{target=\"hub:obs\"}", 0.0),
        (
            "mcp_root_target_routed_latency_seconds_count{target=\"hub:obs\"}",
            2.0,
        ),
        ("mcp_root_leases{profile=\"InfraOpsRead\"}", 1.0),
        (
            "mcp_root_calls_total{tool=\"hub.get_status\",status=\"ok\"}",
            1.0,
        ),
        ("mcp_root_audit_available", 1.0),
        ("mcp_root_hub_door_refusals_total{reason=\"missing\"}", 1.0),
    ] {
        assert_eq!(sample(&text, series), Some(want), "{series} in\n{text}");
    }
    // The silent connection's bound fired. The same 200 ms bound also ends this client's own
    // keep-alive connections when they sit idle that long (a slow CI host between two
    // requests), and those count as `header` too: at least one, not exactly one.
    let header = "mcp_root_connection_timeouts_total{kind=\"header\"}";
    assert!(
        sample(&text, header).is_some_and(|n| n >= 1.0),
        "{header} in\n{text}"
    );
    let denials = "mcp_root_denials_total{reason=\"capability_not_granted\"}";
    assert_eq!(sample(&text, denials), Some(1.0), "{text}");
    let errors = format!("mcp_root_call_errors_total{{code=\"{error_code}\"}}");
    assert_eq!(sample(&text, &errors), Some(1.0), "{v}\n{text}");
    let commits = sample(&text, "mcp_root_audit_commits_total").unwrap();
    assert!(commits >= 3.0, "{text}");
    assert_eq!(
        sample(&text, "mcp_root_audit_commit_latency_seconds_count"),
        Some(commits),
        "{text}"
    );
    // Bounded labels: no lease, event or trace id, no bearer.
    assert!(
        !text.contains(&lease_id) && !text.contains(&bearer),
        "{text}"
    );
    assert!(
        !text.contains(v["event_id"].as_str().unwrap())
            && !text.contains(v["trace_id"].as_str().unwrap()),
        "{text}"
    );

    // The shipped dashboard and alert rules name only metrics this root exposes.
    let dashboard: Value =
        serde_json::from_str(&repo_file("config/grafana/mcp-root.json")).unwrap();
    let mut exprs = Vec::new();
    for panel in items(&dashboard["panels"]) {
        let targets = items(&panel["targets"]);
        assert!(!targets.is_empty(), "{panel}");
        exprs.extend(
            targets
                .iter()
                .map(|t| t["expr"].as_str().unwrap().to_owned()),
        );
    }
    let rules_text = repo_file("config/prometheus/mcp-root-alerts.yml");
    let docs = Yaml::load_from_str(&rules_text).unwrap();
    let groups = docs[0]
        .as_mapping_get("groups")
        .unwrap()
        .as_sequence()
        .unwrap();
    let mut alerts = Vec::new();
    for group in groups {
        for rule in group
            .as_mapping_get("rules")
            .unwrap()
            .as_sequence()
            .unwrap()
        {
            let name = rule.as_mapping_get("alert").and_then(Yaml::as_str).unwrap();
            let expr = rule.as_mapping_get("expr").and_then(Yaml::as_str).unwrap();
            alerts.push(name.to_owned());
            exprs.push(expr.to_owned());
        }
    }
    for alert in [
        "MCPRootAuditUnavailable",
        "MCPRootHubOffline",
        "MCPRootErrorRate",
        "MCPRootDenialRate",
    ] {
        assert!(alerts.iter().any(|a| a == alert), "{alerts:?}");
    }
    let named = metric_names(&exprs.join("\n"));
    assert!(named.len() >= 15, "{named:?}");
    let missing: Vec<&String> = named.iter().filter(|n| !exposes(&text, n)).collect();
    assert!(
        missing.is_empty(),
        "named but not exposed: {missing:?}\n{text}"
    );
    hub.stop().await;
    root.stop().await;
}
