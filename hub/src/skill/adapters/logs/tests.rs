//! Unit tests of `hub.get_logs`: streams, sources, the hub's own log, redaction and bounds.

use std::sync::Arc;

use mcp_shared::error::ErrorCode;

use super::*;
use crate::config::{HubConfig, LogSourceConfig};
use crate::skill::adapters::{AdapterKind, CallInput};

fn soon() -> tokio::time::Instant {
    tokio::time::Instant::now() + std::time::Duration::from_secs(10)
}

async fn call(ctx: &Arc<HubContext>, arguments: Value) -> Result<Value, ToolError> {
    AdapterKind::GetLogs
        .run(ctx.clone(), CallInput::new("l", arguments, soon()))
        .await
}

/// A hub with log sources `app` (with planted secrets) and `outside` (a link leading out
/// of the declared roots), and a configured redaction pattern.
fn ctx(dir: &Path) -> Arc<HubContext> {
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).expect("logs");
    let outside = dir.join("elsewhere");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(outside.join("secret.txt"), "root:x:0:0\n").expect("write");
    std::fs::write(
        logs.join("app.log"),
        "starting\n\
         connecting to postgres://app:hunter2@db.local/app\n\
         \x1b[32mready\x1b[0m\n\
         auth header Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig\n\
         key follows\n\
         -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0\nAQEFAASCBKcwggSjAgEAAoIBAQ\n-----END PRIVATE KEY-----\n\
         session=0123abcd opened\n\
         request ok\n",
    )
    .expect("write");
    let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", dir.join("state"));
    config.allowed_roots = vec![logs.clone()];
    config.log_sources = vec![
        LogSourceConfig {
            name: "app".into(),
            path: logs.join("app.log"),
        },
        LogSourceConfig {
            name: "outside".into(),
            path: logs.join("outside.log"),
        },
        LogSourceConfig {
            name: "later".into(),
            path: logs.join("later.log"),
        },
    ];
    config.redaction.patterns = vec![r"session=[0-9a-f]{8}".into()];
    config.validate().expect("valid config");
    // Planted after start-up validation: only the check at read time can catch it.
    std::os::unix::fs::symlink(outside.join("secret.txt"), logs.join("outside.log"))
        .expect("symlink");
    let ctx = HubContext::new(config).expect("context");
    Arc::new(ctx)
}

#[tokio::test]
async fn planted_secrets_never_leave_the_hub() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ctx(dir.path());
    let answer = call(&ctx, json!({"stream": "app", "lines": 1000}))
        .await
        .expect("logs");
    let text = answer.to_string();
    for secret in [
        "hunter2",
        "eyJhbGciOiJIUzI1NiJ9",
        "MIIEvQIBADANBgkqhkiG9w0",
        "AQEFAASCBKcwggSjAgEAAoIBAQ",
        "0123abcd",
    ] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    assert_eq!(answer["source"], "subnet_active");
    assert_eq!(answer["health"], "healthy");
    assert_eq!(answer["missing"], json!([]));
    let entry = &answer["entries"][0];
    assert_eq!(entry["target_id"], "hub:test-alpha");
    assert_eq!(entry["stream"], "app");
    assert_eq!(entry["truncated"], false);
    let lines: Vec<&str> = entry["lines"]
        .as_array()
        .expect("lines")
        .iter()
        .map(|l| l.as_str().expect("string"))
        .collect();
    assert_eq!(
        lines,
        [
            "starting",
            "connecting to postgres://app:[REDACTED]@db.local/app",
            "ready",
            "auth header Bearer [REDACTED]",
            "key follows",
            "[REDACTED]",
            "[REDACTED] opened",
            "request ok",
        ]
    );
    assert_eq!(entry["redactions"], 4);

    // A filter sees only redacted text: probing for a secret finds nothing.
    let probe = call(&ctx, json!({"stream": "app", "contains": "hunter2"}))
        .await
        .expect("logs");
    assert_eq!(probe["entries"][0]["lines"], json!([]));
    let two = call(&ctx, json!({"stream": "app", "lines": 2}))
        .await
        .expect("logs");
    assert_eq!(
        two["entries"][0]["lines"],
        json!(["[REDACTED] opened", "request ok"])
    );
    assert_eq!(two["entries"][0]["truncated"], true);
    let filtered = call(
        &ctx,
        json!({"stream": "app", "contains": "REDACTED", "lines": 1}),
    )
    .await
    .expect("logs");
    assert_eq!(
        filtered["entries"][0]["lines"],
        json!(["[REDACTED] opened"])
    );
    assert_eq!(filtered["entries"][0]["redactions"], 1);
}

#[tokio::test]
async fn all_streams_links_out_of_the_roots_and_bad_arguments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ctx(dir.path());
    let answer = call(&ctx, json!({})).await.expect("logs");
    let streams: Vec<&str> = answer["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["stream"].as_str().expect("stream"))
        .collect();
    assert_eq!(streams, ["app", "outside", "later", "hub"]);
    assert_eq!(answer["entries"][1]["lines"], json!([]), "not followed out");
    assert!(!answer.to_string().contains("root:x:0:0"));
    let summary = answer["summary"].as_str().expect("summary");
    assert!(summary.contains("`outside`: resolves outside"), "{summary}");
    assert!(summary.contains("`later`: no such file yet"), "{summary}");

    for (bad, why) in [
        (
            json!({"stream": "nope"}),
            "streams: `app`, `outside`, `later`, `hub`",
        ),
        (json!({"source": "root_local"}), "answered by root"),
        (json!({"source": "everywhere"}), "`source` must be"),
        (json!({"lines": 0}), "`lines` must be"),
        (json!({"lines": 1001}), "`lines` must be"),
        (json!({"contains": ""}), "`contains` must be"),
        (json!({"path": "/etc/passwd"}), "unknown argument `path`"),
    ] {
        let err = call(&ctx, bad.clone()).await.expect_err("refused");
        assert_eq!(err.code, ErrorCode::InvalidArguments, "{bad}");
        assert!(err.message.contains(why), "{bad}: {err}");
    }
}

#[tokio::test]
async fn a_service_log_is_read_with_its_previous_part() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", "t", dir.path());
    config.services = vec![crate::config::ServiceConfig::new(
        "web",
        vec!["true".into()],
    )];
    let log = config.services[0].log_path(&config.state_dir);
    std::fs::create_dir_all(log.parent().expect("dir")).expect("dir");
    std::fs::write(
        crate::machine::services::CappedLog::rotated_path(&log),
        "old 1\nold 2 AKIAABCDEFGHIJKLMNOP\nhalf ",
    )
    .expect("write");
    std::fs::write(&log, "a line\nnew 1\n").expect("write");
    let ctx = Arc::new(HubContext::new(config).expect("context"));
    let answer = call(&ctx, json!({"stream": "web"})).await.expect("logs");
    let entry = &answer["entries"][0];
    assert_eq!(
        entry["lines"],
        json!(["old 1", "old 2 [REDACTED]", "half a line", "new 1"])
    );
    assert_eq!(
        (entry["redactions"].as_u64(), entry["truncated"].as_bool()),
        (Some(1), Some(false))
    );
    let all = call(&ctx, json!({"lines": 1})).await.expect("logs");
    let streams: Vec<&Value> = all["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| &e["stream"])
        .collect();
    assert_eq!(streams, [&json!("web"), &json!("hub")]);
    assert_eq!(all["entries"][0]["lines"], json!(["new 1"]));
    assert_eq!(all["entries"][0]["truncated"], true);
}

#[test]
fn a_cut_window_drops_its_partial_first_line_and_lines_are_cleaned() {
    let req = Request {
        stream: None,
        lines: 10,
        contains: None,
    };
    let raw = Raw {
        text: "mcph_second_half_of_a_token\nkept\n".into(),
        partial_first: true,
        earlier: true,
    };
    let t = tail(raw, &req, &[]);
    assert_eq!(t.lines, ["kept"]);
    assert!(t.truncated);
    let long = clean(&format!("a\u{7}b{}", "é".repeat(MAX_LINE_BYTES)));
    assert!(long.starts_with("a\u{FFFD}b") && long.ends_with('…'));
    assert!(long.len() <= MAX_LINE_BYTES);
}
