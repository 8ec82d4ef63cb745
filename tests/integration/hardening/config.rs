//! Example configs in `config/` parse and validate; bad configs get precise errors.

use std::path::Path;

use mcp_root::config::RootConfig;

#[test]
fn root_example_config_parses_and_matches_the_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/root.example.toml");
    let cfg = RootConfig::load(&path).unwrap();
    let def = RootConfig::default();
    assert_eq!(cfg.listen, def.listen);
    assert_eq!(cfg.allowed_hosts, def.allowed_hosts);
    assert_eq!(cfg.limits.max_body_bytes, def.limits.max_body_bytes);
    assert_eq!(cfg.oauth.discovery, def.oauth.discovery);
    assert_eq!(cfg.oauth.access_ttl_sec, def.oauth.access_ttl_sec);
}

#[test]
fn bad_configs_are_refused_with_the_reason() {
    for (text, why) in [
        ("listen = \"nope\"", "listen"),
        ("zone = \"\"", "zone must not be empty"),
        ("unknown_key = 1", "unknown field"),
        ("[limits]\nper_lease_in_flight = 0", "in-flight"),
        (
            "[limits]\nheartbeat_interval_ms = 50",
            "limits.heartbeat_interval_ms must be between 100 and 600000",
        ),
        (
            "[limits]\nmax_hub_links = 0",
            "limits.max_hub_links must be at least 1",
        ),
        ("[redaction]\npatterns = [\"(\"]", "redaction pattern"),
        ("database_url = \"mysql://x\"", "database_url"),
        ("[replica]\nid = \"root.a\"", "replica.id"),
        (
            "[replica]\nadvertise_url = \"http://10.0.0.1:8700/x\"",
            "replica.advertise_url",
        ),
        (
            "[replica]\nadvertise_url = \"10.0.0.1:8700\"",
            "replica.advertise_url",
        ),
        ("[oauth]\naccess_ttl_sec = 1", "oauth.access_ttl_sec"),
        (
            "[oauth]\npublic_url = \"https://root.example/x\"",
            "oauth.public_url",
        ),
        (
            "[storage]\nsqlite_synchronous = \"off\"",
            "expected `full` or `normal`",
        ),
        (
            "[[audit.sinks]]\nname = \"s\"\nkind = \"syslog\"\nendpoint = \"https://x:6514\"",
            "endpoint must be tls://host:port",
        ),
        (
            "[[audit.sinks]]\nname = \"s\"\nkind = \"syslog\"\nendpoint = \"tls://x\"",
            "endpoint must be tls://host:port",
        ),
        (
            "[[audit.sinks]]\nname = \"s\"\nkind = \"syslog\"\nendpoint = \"tls://x:6514\"\nfacility = 24",
            "facility must be 0..=23",
        ),
        (
            "[[audit.sinks]]\nname = \"s\"\nkind = \"syslog\"\nendpoint = \"tls://x:6514\"\nsd_id = \"a b\"",
            "sd_id `a b`",
        ),
        (
            "[[audit.sinks]]\nname = \"s\"\nkind = \"syslog\"\nendpoint = \"tls://x:6514\"\ncert_file = \"/c.pem\"",
            "cert_file and key_file go together",
        ),
        (
            "[[audit.sinks]]\nname = \"s\"\nkind = \"otlp\"\nendpoint = \"tls://x:6514\"",
            "endpoint must be an http(s) URL",
        ),
        (
            "[audit]\nreads = \"sometimes\"",
            "expected `written` or `flushed`",
        ),
        (
            "[limits]\nkeep_alive_timeout_ms = 0",
            "limits.keep_alive_timeout_ms must be between",
        ),
        ("[rates]\nper_lease = 0", "rates.per_lease: 0 calls"),
        ("[rates]\nper_owner = -1", "rates.per_owner: -1 calls"),
        (
            "[rates]\nper_operator = 99999999",
            "rates.per_operator: 99999999 calls",
        ),
        (
            "[rates]\nper_lease = \"many\"",
            "rates.per_lease: `many` is not a rate",
        ),
        (
            "[rates]\nper_lease = 2.5",
            "rates.per_lease: 2.5 is not a whole number",
        ),
        (
            "[rates.profiles.InfraOpsRead.tools]\n\"hub.get_logs\" = \"1/week\"",
            "rates.profiles.InfraOpsRead.tools.\"hub.get_logs\": `1/week`: unknown unit",
        ),
    ] {
        let err = RootConfig::parse(text).unwrap_err();
        assert!(err.to_string().contains(why), "{text}: {err}");
    }
}

#[tokio::test]
async fn sqlite_synchronous_normal_is_an_operator_choice_that_still_keeps_every_answered_call() {
    use mcp_root::config::SqliteSync;
    let cfg = RootConfig::parse("[storage]\nsqlite_synchronous = \"normal\"").unwrap();
    assert_eq!(cfg.storage.sqlite_synchronous, SqliteSync::Normal);
    assert_eq!(
        RootConfig::default().storage.sqlite_synchronous,
        SqliteSync::Full
    );
    // A root on `normal` answers and audits every call, and the chain verifies.
    let root = mcp_tests::TestRoot::start_with(|c| {
        mcp_tests::TestRoot::on_sqlite(c);
        c.storage.sqlite_synchronous = SqliteSync::Normal;
    })
    .await
    .unwrap();
    let token = root.bearer("hub:test-alpha", "AdaOSDevRead").await;
    for _ in 0..3 {
        let (status, r) = root
            .call(&token, "sdk.list_schemas", serde_json::json!({}))
            .await;
        assert_eq!((status, &r["ok"]), (200, &serde_json::json!(true)), "{r}");
    }
    let audit = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(audit["ok"], true, "{audit}");
    assert!(audit["checked"].as_u64().unwrap_or(0) >= 3, "{audit}");
    root.stop().await;
}

#[tokio::test]
async fn a_malformed_contract_directory_stops_start_up_with_the_file_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("sdk.broken.json"),
        "{\"tool_id\": \"sdk.broken\"}",
    )
    .unwrap();
    let cfg = RootConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().join("data"),
        contracts_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let err = format!("{:#}", mcp_root::run(cfg).await.err().unwrap());
    assert!(
        err.contains("sdk.broken.json") && err.contains("not a tool contract"),
        "{err}"
    );
}

#[tokio::test]
async fn a_contract_with_a_destructive_name_must_say_it_is_destructive() {
    let dir = tempfile::tempdir().unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../schemas/tools/hub.get_status.json");
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    c["tool_id"] = "hub.delete_everything".into();
    std::fs::write(dir.path().join("hub.delete_everything.json"), c.to_string()).unwrap();
    let cfg = RootConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().join("data"),
        contracts_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let err = format!("{:#}", mcp_root::run(cfg).await.err().unwrap());
    assert!(
        err.contains("hub.delete_everything") && err.contains("destructive"),
        "{err}"
    );
}
