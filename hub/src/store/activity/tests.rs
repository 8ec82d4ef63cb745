//! The activity record end to end: calls through [`crate::link::channel::execute`] (gate, skill,
//! adapters) land in the ring, and `hub.get_activity_log` / `hub.get_capability_usage_summary`
//! answer from it within their contracts.

use std::sync::Arc;
use std::time::Duration;

use mcp_shared::ToolContract;
use mcp_shared::error::ErrorCode;
use mcp_shared::protocol::{CallOutcome, CallRequest, signing_key};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{ActivityLog, MAX_ID_CHARS, bounded_id};
use crate::HubConfig;
use crate::context::HubContext;
use crate::link::channel::Channel;
use crate::link::enforcement::Gate;
use crate::skill::SkillHandle;
use crate::skill::adapters::{AdapterKind, CallInput};
use crate::store::activity::{ActivityEntry, ActivityStatus, CAPACITY};

/// A call through the channel's `execute`, its progress reported nowhere.
async fn execute(ch: &Channel, call: CallRequest) -> CallOutcome {
    crate::link::channel::execute(ch, call, Default::default()).await
}

const TOKEN: &str = "mcph_activity_test";

fn contract(tool: &str) -> ToolContract {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../schemas/tools")
        .join(format!("{tool}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
        .expect("schema compiles")
}

fn assert_valid(what: &str, schema: &Value, instance: &Value) {
    let v = validator(schema);
    let errors: Vec<String> = v
        .iter_errors(instance)
        .map(|e| format!("  at `{}`: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what}: {instance}\n{}",
        errors.join("\n")
    );
}

fn signed(id: &str, tool: &str, arguments: Value, dry_run: bool, key: &str) -> CallRequest {
    let mut call = CallRequest {
        call_id: id.into(),
        trace_id: format!("trace-{id}"),
        session_id: "lease-1".into(),
        tool_id: tool.into(),
        capability: "infra.read.activity".into(),
        body: mcp_shared::protocol::CallBody {
            arguments,
            dry_run,
            idempotency_key: None,
            confirmed_effect: None,
        },
        expires_at_ms: mcp_shared::time::unix_ms(mcp_shared::time::now()) + 10_000,
        traceparent: None,
        signature: String::new(),
    };
    call.sign(&signing_key(key));
    call
}

async fn channel(dir: &std::path::Path) -> (Channel, SkillHandle) {
    let mut config = HubConfig::new("hub:test-alpha", "test", "ws://x", TOKEN, dir);
    crate::skill::adapters::serve_everything(&mut config);
    let gate = Arc::new(Gate::new(TOKEN, &config.environment, config.write_scope));
    let fault = [crate::skill::test_fault::FAULT.decl];
    let ctx = Arc::new(HubContext::with_embedded(config, &fault).expect("context"));
    let (skill, _) = SkillHandle::start(ctx.clone(), crate::skill::test_fault::embedded())
        .await
        .expect("skill");
    let (tx, _) = watch::channel(false);
    let ch = Channel {
        ctx,
        gate,
        skill: skill.clone(),
        connected: Arc::new(tx),
        shutdown: CancellationToken::new(),
    };
    (ch, skill)
}

fn soon() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(10)
}

async fn read(ctx: &Arc<HubContext>, kind: AdapterKind, arguments: Value) -> Value {
    kind.run(ctx.clone(), CallInput::new("read", arguments, soon()))
        .await
        .unwrap_or_else(|e| panic!("{kind:?}: {e}"))
}

/// The `call_id`s of an activity log answer, in order.
fn ids_of(v: &Value) -> Vec<String> {
    v["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["call_id"].as_str().map(str::to_owned))
        .collect()
}

/// Runs five calls through the channel (c1..c5): ok, ok (dry run), error (adapter refuses
/// the arguments), refused (bad signature), refused (unpublished tool).
async fn record_five_calls(ch: &Channel) {
    let ok = execute(ch, signed("c1", "hub.get_status", json!({}), false, TOKEN)).await;
    assert!(matches!(ok, CallOutcome::Ok { .. }), "{ok:?}");
    execute(ch, signed("c2", "hub.get_status", json!({}), true, TOKEN)).await;
    let err = execute(
        ch,
        signed(
            "c3",
            "hub.get_test_results",
            json!({"limit": 0}),
            false,
            TOKEN,
        ),
    )
    .await;
    assert!(
        matches!(&err, CallOutcome::Error { adapter: Some(_), error } if error.code == ErrorCode::InvalidArguments),
        "{err:?}"
    );
    execute(
        ch,
        signed("c4", "hub.get_status", json!({}), false, "wrong"),
    )
    .await;
    execute(
        ch,
        signed("c5", "hub.no_such_tool", json!({}), false, TOKEN),
    )
    .await;
    assert_eq!(ch.ctx.stores.activity.retained(), 5);
}

/// Filters and limit over the log of [`record_five_calls`]; returns the answer filtered by
/// tool and status and limited to one.
async fn assert_filters(ctx: &Arc<HubContext>) -> Value {
    let refused = read(ctx, AdapterKind::ActivityLog, json!({"status": "refused"})).await;
    assert_eq!(ids_of(&refused), ["c5", "c4"]);
    assert_eq!(refused["retained"], 5, "retained counts the whole record");
    let status = read(
        ctx,
        AdapterKind::ActivityLog,
        json!({"tool_id": "hub.get_status"}),
    )
    .await;
    assert_eq!(ids_of(&status), ["c4", "c2", "c1"]);
    let both = read(
        ctx,
        AdapterKind::ActivityLog,
        json!({"tool_id": "hub.get_status", "status": "ok", "limit": 1}),
    )
    .await;
    assert_eq!(ids_of(&both), ["c2"]);
    let limited = read(ctx, AdapterKind::ActivityLog, json!({"limit": 2})).await;
    assert_eq!(ids_of(&limited), ["c5", "c4"]);
    both
}

#[tokio::test]
async fn every_finished_call_is_recorded_and_served_newest_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ch, skill) = channel(dir.path()).await;
    let ctx = ch.ctx.clone();

    record_five_calls(&ch).await;
    let log_contract = contract("hub.get_activity_log");
    let answer = read(&ctx, AdapterKind::ActivityLog, json!({})).await;
    assert_valid("activity log", &log_contract.output_schema, &answer);
    assert_eq!(answer["retained"], 5);
    assert_eq!(answer["capacity"], CAPACITY);
    let entries = answer["entries"].as_array().expect("entries");
    let ids: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["call_id"].as_str())
        .collect();
    assert_eq!(ids, ["c5", "c4", "c3", "c2", "c1"]);
    let by_id = |id: &str| {
        entries
            .iter()
            .find(|e| e["call_id"] == id)
            .cloned()
            .expect("entry")
    };
    let c1 = by_id("c1");
    assert_eq!(c1["status"], "ok");
    assert_eq!(c1["adapter"], "infra_access_skill.status");
    assert_eq!(c1["error_code"], Value::Null);
    assert_eq!(c1["trace_id"], "trace-c1");
    assert_eq!(c1["tool_id"], "hub.get_status");
    assert_eq!(c1["dry_run"], false);
    assert_eq!(by_id("c2")["dry_run"], true);
    let c3 = by_id("c3");
    assert_eq!(c3["status"], "error");
    assert_eq!(c3["adapter"], "infra_access_skill.test_results");
    assert_eq!(c3["error_code"], "invalid_arguments");
    let c4 = by_id("c4");
    assert_eq!(c4["status"], "refused");
    assert_eq!(c4["adapter"], Value::Null);
    assert_eq!(c4["error_code"], "signature_invalid");
    let c5 = by_id("c5");
    assert_eq!(c5["status"], "refused");
    assert_eq!(c5["error_code"], "skill_disabled");
    assert_eq!(c5["tool_id"], "hub.no_such_tool");

    let both = assert_filters(&ctx).await;
    assert_valid("filtered log", &log_contract.output_schema, &both);

    // A call through the channel to the log itself is recorded after it answers.
    let own = execute(
        &ch,
        signed("c6", "hub.get_activity_log", json!({}), false, TOKEN),
    )
    .await;
    let CallOutcome::Ok { result, .. } = own else {
        panic!("{own:?}")
    };
    assert_eq!(result["entries"][0]["call_id"], "c5");
    assert_eq!(ctx.stores.activity.retained(), 6);

    // Summary over the same record.
    let summary_contract = contract("hub.get_capability_usage_summary");
    let summary = read(&ctx, AdapterKind::CapabilityUsage, json!({})).await;
    assert_valid("usage summary", &summary_contract.output_schema, &summary);
    let tools: Vec<&str> = summary["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["tool_id"].as_str())
        .collect();
    assert_eq!(
        tools,
        [
            "hub.get_activity_log",
            "hub.get_status",
            "hub.get_test_results",
            "hub.no_such_tool"
        ]
    );
    let status = &summary["tools"][1];
    assert_eq!(status["calls"], 3);
    assert_eq!(status["ok"], 2);
    assert_eq!(status["errors"], 0);
    assert_eq!(status["refused"], 1);
    let rate = status["error_rate"].as_f64().expect("rate");
    assert!((rate - 1.0 / 3.0).abs() < 1e-9, "{rate}");
    assert_eq!(summary["tools"][2]["errors"], 1);
    assert_eq!(summary["tools"][2]["error_rate"], 1.0);
    let oldest = ctx.stores.activity.snapshot()[0].started_at;
    assert_eq!(summary["since"], mcp_shared::time::format(oldest));

    skill.stop().await;
}

#[tokio::test]
async fn a_cancelled_call_is_recorded_as_cancelled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ch, skill) = channel(dir.path()).await;
    let ctx = ch.ctx.clone();
    let call = signed(
        "hang",
        crate::skill::test_fault::TOOL,
        json!({"fault": "hang"}),
        false,
        TOKEN,
    );
    let chc = ch.clone();
    let task = tokio::spawn(async move { execute(&chc, call).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    task.abort();
    let _ = task.await;
    let entries = ctx.stores.activity.recent(10, None, None);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].status, ActivityStatus::Error);
    assert_eq!(entries[0].error_code, Some(ErrorCode::Cancelled));
    skill.stop().await;
}

fn synthetic(n: usize, tool: &str, status: ActivityStatus, duration_ms: u64) -> ActivityEntry {
    ActivityEntry {
        call_id: format!("s{n}"),
        trace_id: format!("t{n}"),
        tool_id: tool.into(),
        adapter: (status != ActivityStatus::Refused).then(|| "infra_access_skill.status".into()),
        status,
        error_code: (status != ActivityStatus::Ok).then_some(ErrorCode::Timeout),
        dry_run: false,
        started_at: mcp_shared::time::from_unix_ms(1_700_000_000_000 + n as i64),
        duration_ms,
    }
}

#[tokio::test]
async fn summary_counts_and_percentiles_and_the_ring_is_bounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = HubConfig::new("hub:test-alpha", "test", "ws://x", TOKEN, dir.path());
    let ctx = Arc::new(HubContext::new(config).expect("context"));
    let summary_contract = contract("hub.get_capability_usage_summary");
    let log_contract = contract("hub.get_activity_log");

    // Empty record: since is the hub's start, no tools.
    let empty = read(&ctx, AdapterKind::CapabilityUsage, json!({})).await;
    assert_valid("empty summary", &summary_contract.output_schema, &empty);
    assert_eq!(
        empty["since"],
        mcp_shared::time::format(ctx.process.started_at)
    );
    assert_eq!(empty["tools"], json!([]));

    // 100 calls of `b` with durations 1..=100 (every 10th an error, every 25th refused),
    // 3 of `a`.
    for n in 1..=100u64 {
        let status = if n % 25 == 0 {
            ActivityStatus::Refused
        } else if n % 10 == 0 {
            ActivityStatus::Error
        } else {
            ActivityStatus::Ok
        };
        ctx.stores
            .activity
            .record(synthetic(n as usize, "hub.b", status, 101 - n));
    }
    for (i, d) in [5u64, 7, 3].into_iter().enumerate() {
        ctx.stores
            .activity
            .record(synthetic(200 + i, "hub.a", ActivityStatus::Ok, d));
    }
    let s = read(&ctx, AdapterKind::CapabilityUsage, json!({})).await;
    assert_valid("summary", &summary_contract.output_schema, &s);
    assert_eq!(
        s["since"],
        mcp_shared::time::format(mcp_shared::time::from_unix_ms(1_700_000_000_001))
    );
    assert_eq!(
        s["tools"][0],
        json!({"tool_id": "hub.a", "calls": 3, "ok": 3, "errors": 0, "refused": 0,
               "error_rate": 0.0, "p50_ms": 5, "p99_ms": 7})
    );
    // Errors at 10,20,30,40,60,70,80,90 (8); refused at 25,50,75,100 (4).
    assert_eq!(
        s["tools"][1],
        json!({"tool_id": "hub.b", "calls": 100, "ok": 88, "errors": 8, "refused": 4,
               "error_rate": 0.12, "p50_ms": 50, "p99_ms": 99})
    );

    // The ring keeps the last CAPACITY calls.
    for n in 0..CAPACITY {
        ctx.stores
            .activity
            .record(synthetic(1_000 + n, "hub.c", ActivityStatus::Ok, 1));
    }
    assert_eq!(ctx.stores.activity.retained(), CAPACITY);
    let log = read(&ctx, AdapterKind::ActivityLog, json!({"limit": 200})).await;
    assert_valid("full log", &log_contract.output_schema, &log);
    assert_eq!(log["entries"].as_array().map(Vec::len), Some(200));
    assert_eq!(log["retained"], CAPACITY);
    assert_eq!(
        log["entries"][0]["call_id"],
        format!("s{}", 1_000 + CAPACITY - 1)
    );
    let s = read(&ctx, AdapterKind::CapabilityUsage, json!({})).await;
    assert_eq!(s["tools"].as_array().map(Vec::len), Some(1));
    assert_eq!(s["tools"][0]["calls"], CAPACITY);
}

#[tokio::test]
async fn arguments_are_checked_against_the_contracts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = HubConfig::new("hub:test-alpha", "test", "ws://x", TOKEN, dir.path());
    let ctx = Arc::new(HubContext::new(config).expect("context"));
    let log = validator(&contract("hub.get_activity_log").input_schema);
    for ok in [
        json!({}),
        json!({"limit": 1}),
        json!({"limit": 200, "tool_id": "hub.get_status", "status": "error"}),
    ] {
        assert!(log.is_valid(&ok), "{ok}");
        read(&ctx, AdapterKind::ActivityLog, ok).await;
    }
    for bad in [
        json!({"limit": 0}),
        json!({"limit": 201}),
        json!({"status": "failed"}),
        json!({"tool_id": ""}),
        json!({"since": "x"}),
    ] {
        assert!(!log.is_valid(&bad), "{bad}");
        let err = AdapterKind::ActivityLog
            .run(ctx.clone(), CallInput::new("x", bad.clone(), soon()))
            .await
            .expect_err("refused");
        assert_eq!(err.code, ErrorCode::InvalidArguments, "{bad}");
    }
    let summary = validator(&contract("hub.get_capability_usage_summary").input_schema);
    assert!(summary.is_valid(&json!({})));
    assert!(!summary.is_valid(&json!({"limit": 1})));
    let err = AdapterKind::CapabilityUsage
        .run(
            ctx.clone(),
            CallInput::new("x", json!({"limit": 1}), soon()),
        )
        .await
        .expect_err("refused");
    assert_eq!(err.code, ErrorCode::InvalidArguments);
}

// The ring itself and the wire shape of its entries.

fn entry(n: usize) -> ActivityEntry {
    ActivityEntry {
        call_id: format!("c{n}"),
        trace_id: "t".into(),
        tool_id: "hub.get_status".into(),
        adapter: Some("infra_access_skill.status".into()),
        status: ActivityStatus::Ok,
        error_code: None,
        dry_run: false,
        started_at: mcp_shared::time::now(),
        duration_ms: 1,
    }
}

#[test]
fn ring_keeps_the_newest_calls() {
    let log = ActivityLog::with_capacity(3);
    for n in 0..5 {
        log.record(entry(n));
    }
    assert_eq!(log.retained(), 3);
    let ids: Vec<String> = log
        .recent(10, None, None)
        .into_iter()
        .map(|e| e.call_id)
        .collect();
    assert_eq!(ids, ["c4", "c3", "c2"]);
    assert_eq!(log.snapshot()[0].call_id, "c2");
    assert_eq!(ActivityLog::default().capacity(), CAPACITY);
}

#[test]
fn ids_are_bounded_on_char_boundaries() {
    assert_eq!(bounded_id("abc"), "abc");
    let long = "é".repeat(MAX_ID_CHARS + 5);
    assert_eq!(bounded_id(&long).chars().count(), MAX_ID_CHARS);
}

#[test]
fn entries_serialize_to_the_wire_shape() {
    let mut e = entry(1);
    e.status = ActivityStatus::Refused;
    e.adapter = None;
    e.error_code = Some(ErrorCode::SignatureInvalid);
    let v = serde_json::to_value(&e).expect("serializes");
    assert_eq!(v["status"], "refused");
    assert_eq!(v["adapter"], serde_json::Value::Null);
    assert_eq!(v["error_code"], "signature_invalid");
    assert!(v["started_at"].as_str().is_some_and(|s| s.contains('T')));
}
