//! OpenTelemetry across root and a hub: both run as processes exporting over OTLP/HTTP to a
//! receiver in this test (the standard `OTEL_*` variables), and one governed call is one
//! trace: root's call with its policy, validation, route and audit commit, continued on the
//! hub (its call, the adapter's run, the allowed test's child process), the trace id the
//! event's `trace_id`, a client's `traceparent` continued (from a REST header, and from an
//! MCP request's `_meta`); and a call forwarded between replicas stays one trace.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use mcp_tests::ports;
use mcp_tests::process::Proc;
use mcp_tests::zone::{Zone, ready};
use mcp_tests::{private_file, workspace_bin};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;
use serde_json::{Value, json};

/// One exported span, as the receiver saw it.
#[derive(Debug, Clone)]
struct Exported {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
}

type Received = Arc<Mutex<Vec<Exported>>>;

/// An OTLP/HTTP traces receiver on 127.0.0.1:0: its base URL and what it received.
async fn receiver() -> (String, Received) {
    let received: Received = Arc::default();
    let store = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: Bytes| {
            let store = store.clone();
            async move {
                let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                store.lock().unwrap().extend(spans_of(request));
                (
                    [("content-type", "application/x-protobuf")],
                    ExportTraceServiceResponse::default().encode_to_vec(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, received)
}

fn spans_of(request: ExportTraceServiceRequest) -> Vec<Exported> {
    let mut out = Vec::new();
    for rs in request.resource_spans {
        let service = rs
            .resource
            .iter()
            .flat_map(|r| r.attributes.iter())
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| kv.value.as_ref()?.value.as_ref())
            .map(|v| match v {
                AnyValue::StringValue(s) => s.clone(),
                other => format!("{other:?}"),
            })
            .unwrap_or_default();
        for span in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
            out.push(Exported {
                service: service.clone(),
                name: span.name,
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: hex(&span.parent_span_id),
            });
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An `mcp-hub run` process on `settings` (its state under `dir`), exporting to `otlp`.
fn exporting_hub(dir: &std::path::Path, settings: &str, otlp: &str) -> Proc {
    let config = dir.join("hub.toml");
    let state = dir.join("hub");
    std::fs::write(
        &config,
        // Top-level keys first: `settings` may end inside a table.
        format!("state_dir = \"{}\"\n{settings}", state.display()),
    )
    .unwrap();
    private_file(&config).unwrap();
    exporting(
        "mcp-hub",
        Command::new(workspace_bin("mcp-hub").unwrap())
            .args(["run", "--config"])
            .arg(&config),
        otlp,
        dir.join("hub.log"),
    )
}

fn exporting(name: &str, cmd: &mut Command, otlp: &str, log: PathBuf) -> Proc {
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env_remove("OTEL_SDK_DISABLED")
        .env_remove("OTEL_SERVICE_NAME");
    Proc::spawn(name, cmd, log)
}

/// SIGTERM, then waits (without holding a runtime thread: the receiver still answers the
/// daemon's last export); the guard kills it if it outlives the wait.
async fn stop(daemon: &mut Proc) {
    let _ = daemon.terminate(Duration::from_secs(20)).await;
}

struct Rest {
    http: reqwest::Client,
    base: String,
}

impl Rest {
    async fn post(&self, bearer: &str, path: &str, body: Value, headers: &[(&str, &str)]) -> Value {
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(bearer)
            .json(&body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send().await.unwrap().json().await.unwrap()
    }
}

/// Waits until `f` finds what it looks for in the received spans.
async fn received<T>(spans: &Received, what: &str, f: impl Fn(&[Exported]) -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(t) = f(&spans.lock().unwrap()) {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {:#?}",
            spans.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The spans of `trace`, by service and name.
fn by_name(spans: &[Exported], trace: &str) -> BTreeMap<(String, String), Exported> {
    spans
        .iter()
        .filter(|s| s.trace_id == trace)
        .map(|s| ((s.service.clone(), s.name.clone()), s.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_call_is_one_trace_across_root_and_hub() {
    mcp_tests::init_crypto();
    let (otlp, spans) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("root");
    let mut root = exporting(
        "mcp-root",
        Command::new(workspace_bin("mcp-root").unwrap())
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data),
        &otlp,
        dir.path().join("root.log"),
    );
    let base = ports::announced_root_url(&mut root, Duration::from_secs(30)).await;
    let rest = Rest {
        http: mcp_tests::http_client(),
        base: base.clone(),
    };
    let start = Instant::now();
    while rest
        .http
        .get(format!("{base}/healthz"))
        .send()
        .await
        .is_err()
    {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "root did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let admin = std::fs::read_to_string(data.join("admin.token")).unwrap();
    let admin = admin.trim();
    let enrolled = rest
        .post(
            admin,
            "/v1/root/hubs",
            json!({"target_id": "hub:otel", "environment": "test"}),
            &[],
        )
        .await;
    let mut hub = exporting_hub(
        dir.path(),
        &format!(
            "target_id = \"hub:otel\"\nenvironment = \"test\"\nroot_url = \"{base}\"\n\
             token = \"{}\"\nwrite_scope = \"test-only\"\n\
             [[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"true\"]\n",
            enrolled["token"].as_str().unwrap(),
        ),
        &otlp,
    );
    let lease = rest
        .post(
            admin,
            "/v1/root/mcp/sessions",
            json!({"target_id": "hub:otel", "capability_profile": "InfraOpsControl", "ttl_sec": 600}),
            &[],
        )
        .await;
    let bearer = lease["token"].as_str().unwrap();
    let call =
        |tool: &'static str, arguments: Value, headers: &'static [(&'static str, &'static str)]| {
            let rest = &rest;
            async move {
                rest.post(
                    bearer,
                    "/v1/root/mcp/call",
                    json!({"tool_id": tool, "arguments": arguments}),
                    headers,
                )
                .await
            }
        };
    let start = Instant::now();
    let status = loop {
        let v = call("hub.get_status", json!({}), &[]).await;
        if v["ok"] == true {
            break v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "hub not online: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    // A routed read: root's spans and the hub's in the trace its event names.
    let trace = status["trace_id"].as_str().unwrap().to_owned();
    let tree = received(&spans, "root's and the hub's spans of the read", |s| {
        let tree = by_name(s, &trace);
        let names = [
            ("mcp-root", "governed call"),
            ("mcp-root", "policy"),
            ("mcp-root", "validation"),
            ("mcp-root", "route"),
            ("mcp-root", "audit commit"),
            ("mcp-hub", "hub call"),
            ("mcp-hub", "adapter run"),
        ];
        names
            .iter()
            .all(|(svc, n)| tree.contains_key(&((*svc).to_owned(), (*n).to_owned())))
            .then_some(tree)
    })
    .await;
    let span = |svc: &str, name: &str| tree[&(svc.to_owned(), name.to_owned())].clone();
    let call_span = span("mcp-root", "governed call");
    assert_eq!(
        call_span.parent_span_id, "",
        "a trace of its own: {call_span:?}"
    );
    for child in ["policy", "validation", "route", "audit commit"] {
        assert_eq!(
            span("mcp-root", child).parent_span_id,
            call_span.span_id,
            "{child}"
        );
    }
    // The hub continues root's route span, through the call's envelope.
    let hub_call = span("mcp-hub", "hub call");
    assert_eq!(hub_call.parent_span_id, span("mcp-root", "route").span_id);
    assert_eq!(
        span("mcp-hub", "adapter run").parent_span_id,
        hub_call.span_id
    );
    let event = mcp_tests::get_json(
        &rest.http,
        format!(
            "{base}/v1/root/mcp/audit/{}",
            status["event_id"].as_str().unwrap()
        ),
        admin,
    )
    .await;
    assert_eq!(event["trace_id"], trace.as_str(), "{event}");

    // A client's traceparent is continued: the event's trace id is the client's.
    const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    let preview = call(
        "hub.run_allowed_tests",
        json!({"name": "smoke"}),
        &[(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )],
    )
    .await;
    assert_eq!(preview["trace_id"], CLIENT_TRACE, "{preview}");
    let token = preview["result"]["confirmation_token"].as_str().unwrap();
    let run = call(
        "hub.run_allowed_tests",
        json!({"name": "smoke", "phase": "execute", "confirmation_token": token, "idempotency_key": "otel-1"}),
        &[],
    )
    .await;
    assert_eq!(run["result"]["result"]["passed"], true, "{run}");
    let run_trace = run["trace_id"].as_str().unwrap().to_owned();
    let continued = received(&spans, "the client's trace continued", |s| {
        s.iter()
            .find(|x| x.trace_id == CLIENT_TRACE && x.name == "governed call")
            .cloned()
    })
    .await;
    assert_eq!(continued.parent_span_id, "00f067aa0ba902b7");
    // The execute's allowed test: its child process under the adapter's run, on the hub.
    let tree = received(&spans, "the allowed test's child process", |s| {
        let tree = by_name(s, &run_trace);
        // The child's span ends before its adapter run's: they may ship in two batches.
        ["child process", "adapter run"]
            .iter()
            .all(|n| tree.contains_key(&("mcp-hub".to_owned(), (*n).to_owned())))
            .then_some(tree)
    })
    .await;
    let key = |n: &str| ("mcp-hub".to_owned(), n.to_owned());
    assert_eq!(
        tree[&key("child process")].parent_span_id,
        tree[&key("adapter run")].span_id
    );

    // Over MCP the client's traceparent rides in the request's `_meta` (a 2026-07-28
    // stateless tools/call): root's call continues it, and so does the hub.
    const MCP_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
    let res = rest
        .http
        .post(format!("{base}/mcp"))
        .bearer_auth(bearer)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "hub.get_status")
        .json(
            &json!({"jsonrpc": "2.0", "id": "t-1", "method": "tools/call",
            "params": {"name": "hub.get_status", "arguments": {}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "otel-test", "version": "1"},
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
            }}}),
        )
        .send()
        .await
        .unwrap();
    let (code, answer) = crate::hardening::bad_input::json_of(res).await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let tree = received(&spans, "the MCP client's trace continued", |s| {
        let tree = by_name(s, MCP_TRACE);
        let root_span = ("mcp-root".to_owned(), "governed call".to_owned());
        let hub_span = ("mcp-hub".to_owned(), "hub call".to_owned());
        // Root and hub export in their own batches: wait for both.
        (tree.contains_key(&root_span) && tree.contains_key(&hub_span)).then_some(tree)
    })
    .await;
    assert_eq!(
        tree[&("mcp-root".to_owned(), "governed call".to_owned())].parent_span_id,
        "b7ad6b7169203331"
    );
    let events = mcp_tests::get_json(
        &rest.http,
        format!("{base}/v1/root/mcp/audit?trace_id={MCP_TRACE}"),
        admin,
    )
    .await;
    assert_eq!(events["events"][0]["tool_id"], "hub.get_status", "{events}");
    stop(&mut hub).await;
    stop(&mut root).await;
}

/// A call made on one replica for a hub another replica holds is still one trace: the
/// forwarding replica's route, the owner's forwarded call, the hub's call (PostgreSQL).
#[tokio::test]
async fn a_forwarded_call_is_one_trace_across_replicas_and_the_hub() {
    let Some(zone) = Zone::create("zone-otel").await else {
        return;
    };
    let (otlp, spans) = receiver().await;
    let replica = async |id: &str| {
        let mut daemon = exporting(
            &format!("replica {id}"),
            Command::new(workspace_bin("mcp-root").unwrap())
                .args(["serve", "--config"])
                .arg(zone.config(id, "")),
            &otlp,
            zone.dir.path().join(format!("{id}.log")),
        );
        let base = ports::announced_root_url(&mut daemon, Duration::from_secs(30)).await;
        (base, daemon)
    };
    let http = mcp_tests::http_client();
    // A first: it writes the admin token and master key B shares.
    let (a, mut a_daemon) = replica("r-a").await;
    ready(&a, || a.clone()).await;
    let (b, mut b_daemon) = replica("r-b").await;
    ready(&b, || b.clone()).await;
    let admin = zone.admin_token();
    let rest = Rest {
        http: http.clone(),
        base: a.clone(),
    };
    let enrolled = rest
        .post(
            &admin,
            "/v1/root/hubs",
            json!({"target_id": "hub:otel-far", "environment": "test", "subnet_id": "subnet-a"}),
            &[],
        )
        .await;
    // The hub dials B only; the client calls A.
    let mut hub = exporting_hub(
        zone.dir.path(),
        &format!(
            "target_id = \"hub:otel-far\"\nenvironment = \"test\"\nsubnet = \"subnet-a\"\n\
             root_url = \"{b}\"\ntoken = \"{}\"\n",
            enrolled["token"].as_str().unwrap(),
        ),
        &otlp,
    );
    let lease = rest
        .post(
            &admin,
            "/v1/root/mcp/sessions",
            json!({"target_id": "hub:otel-far", "capability_profile": "InfraOpsRead", "ttl_sec": 600}),
            &[],
        )
        .await;
    let bearer = lease["token"].as_str().unwrap();
    let call = async |headers: &[(&str, &str)]| {
        rest.post(
            bearer,
            "/v1/root/mcp/call",
            json!({"tool_id": "hub.get_status", "arguments": {}}),
            headers,
        )
        .await
    };
    // Until A's directory has the hub B holds online (the change feed).
    let start = Instant::now();
    loop {
        let v = call(&[]).await;
        if v["ok"] == true {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "hub not reachable through A: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    const TRACE: &str = "5cf92f3577b34da6a3ce929d0e0e4737";
    let v = call(&[(
        "traceparent",
        "00-5cf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b8-01",
    )])
    .await;
    assert_eq!(
        (&v["ok"], &v["trace_id"]),
        (&json!(true), &json!(TRACE)),
        "{v}"
    );
    let tree = received(
        &spans,
        "A's route, B's forwarded call, the hub's call",
        |s| {
            let tree = by_name(s, TRACE);
            [
                ("mcp-root", "route"),
                ("mcp-root", "forwarded call"),
                ("mcp-hub", "hub call"),
            ]
            .iter()
            .all(|(svc, n)| tree.contains_key(&((*svc).to_owned(), (*n).to_owned())))
            .then_some(tree)
        },
    )
    .await;
    let span = |svc: &str, name: &str| tree[&(svc.to_owned(), name.to_owned())].clone();
    assert_eq!(
        span("mcp-root", "forwarded call").parent_span_id,
        span("mcp-root", "route").span_id
    );
    assert_eq!(
        span("mcp-hub", "hub call").parent_span_id,
        span("mcp-root", "forwarded call").span_id
    );
    stop(&mut hub).await;
    stop(&mut b_daemon).await;
    stop(&mut a_daemon).await;
}
