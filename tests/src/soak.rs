//! A bounded soak: several real hubs and many MCP clients on one root for a fixed time, mixed
//! reads and previewed writes, then the audit trail checked call by call.
//!
//! Used by `tests/integration/ops/soak.rs` (seconds, in CI) and `mcp-hubsim --mode soak`
//! (minutes, by hand). Everything is loopback: the hubs are in-process [`TestHub`]s enrolled
//! through root's REST API, the clients are rmcp clients each on a lease of its own.
//!
//! The workload per client, drawn at random each step: `hub.get_status`,
//! `hub.get_runtime_summary`, `hub.get_operational_surface` (routed reads), `tools/list` (not
//! a tool call, so not audited), a preview of `hub.run_allowed_tests` or
//! `hub.restart_service` (nothing runs), or preview → confirm → execute of a no-op allowed
//! test or, rarely, a restart of the hub's fixture service. One client in four holds a
//! descriptive lease (`AdaOSDevRead`) and calls `sdk.*` tools instead of routed ones.
//!
//! What it checks afterwards ([`SoakReport::problems`]): every `tools/call` the clients sent
//! got an answer with an `event_id`; the only errors are `busy` (a concurrency limit, audited
//! like every other call); the audit trail holds exactly one event per call, and the events
//! of the soak's leases are exactly the event ids the clients were given (no more, no fewer,
//! no duplicates); `audit verify` passes over the whole chain.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::Context;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::admin::Admin;
use crate::hubsim::{Enrolled, enroll_all};
use crate::{TestHub, mcp_client, workspace_bin};

/// What to run.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// Root's base URL (`http://127.0.0.1:PORT`).
    pub root_url: String,
    pub admin_token: String,
    /// Real hubs (in-process), each with an allowed no-op test and a fixture service.
    pub hubs: usize,
    /// Concurrent MCP clients, spread over the hubs.
    pub clients: usize,
    pub duration: Duration,
    /// Prefix of the hubs' target ids (unique per run against a long-lived root).
    pub target_prefix: String,
}

/// What the soak saw. `problems()` is empty when every invariant held.
#[derive(Debug, Default)]
pub struct SoakReport {
    pub elapsed: Duration,
    /// `tools/call` requests sent.
    pub calls: usize,
    pub ok: usize,
    /// Answered `busy` (a concurrency limit).
    pub busy: usize,
    /// Other error answers, by code.
    pub errors: BTreeMap<String, usize>,
    /// Requests that got no answer (transport failure) or an answer without `event_id`.
    pub unanswered: usize,
    /// `tools/list` requests (not tool calls; not audited).
    pub lists: usize,
    /// Write executions that ran (preview → confirm → execute).
    pub executes: usize,
    /// Events of the soak's leases in the audit trail.
    pub audit_events: usize,
    /// Event ids the clients were given that the trail lacks.
    pub missing_events: usize,
    /// Events in the trail that no client was given (or given twice).
    pub extra_events: usize,
    /// `audit verify` over the whole chain.
    pub verify_ok: bool,
    pub verify_checked: u64,
}

impl SoakReport {
    /// Every broken invariant, as sentences.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.calls == 0 {
            p.push("no call was made".into());
        }
        if !self.errors.is_empty() {
            p.push(format!("errors other than busy: {:?}", self.errors));
        }
        if self.unanswered > 0 {
            p.push(format!(
                "{} calls got no answer with an event id",
                self.unanswered
            ));
        }
        if self.audit_events != self.calls {
            p.push(format!(
                "{} audit events for {} calls",
                self.audit_events, self.calls
            ));
        }
        if self.missing_events > 0 || self.extra_events > 0 {
            p.push(format!(
                "audit trail vs answers: {} event ids missing, {} extra or duplicated",
                self.missing_events, self.extra_events
            ));
        }
        if !self.verify_ok {
            p.push("audit verify failed".into());
        }
        p
    }

    /// One line for logs and the tool's output.
    pub fn summary(&self) -> String {
        format!(
            "soak: {:.1}s calls={} calls/s={:.0} ok={} busy={} errors={:?} unanswered={} executes={} tools/list={} audit_events={} missing={} extra={} verify={} (chain of {})",
            self.elapsed.as_secs_f64(),
            self.calls,
            self.calls as f64 / self.elapsed.as_secs_f64().max(0.001),
            self.ok,
            self.busy,
            self.errors,
            self.unanswered,
            self.executes,
            self.lists,
            self.audit_events,
            self.missing_events,
            self.extra_events,
            if self.verify_ok { "ok" } else { "FAILED" },
            self.verify_checked,
        )
    }
}

/// What one client did.
#[derive(Default)]
struct ClientTally {
    calls: usize,
    ok: usize,
    busy: usize,
    errors: BTreeMap<String, usize>,
    unanswered: usize,
    lists: usize,
    executes: usize,
    event_ids: Vec<String>,
}

/// How one call ended.
enum Answer {
    Ok(Value),
    /// An error answer (counted by code in the tally).
    Error,
    /// Transport failure, or an answer without an event id.
    None,
}

type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

impl ClientTally {
    async fn call(&mut self, client: &Client, tool: &str, args: Value) -> Answer {
        self.calls += 1;
        let params = CallToolRequestParams::new(tool.to_owned())
            .with_arguments(args.as_object().cloned().unwrap_or_default());
        let Ok(res) = client.call_tool(params).await else {
            self.unanswered += 1;
            return Answer::None;
        };
        let event_id = res
            .meta
            .as_ref()
            .and_then(|m| m.get("event_id"))
            .and_then(Value::as_str);
        let Some(event_id) = event_id else {
            self.unanswered += 1;
            return Answer::None;
        };
        self.event_ids.push(event_id.to_owned());
        let sc = res.structured_content.unwrap_or(Value::Null);
        if res.is_error == Some(true) {
            let code = sc["error"]["code"].as_str().unwrap_or("?").to_owned();
            if code == "busy" {
                self.busy += 1;
            } else {
                *self.errors.entry(format!("{tool}: {code}")).or_default() += 1;
            }
            Answer::Error
        } else {
            self.ok += 1;
            Answer::Ok(sc)
        }
    }

    /// Preview of `tool`; with `execute`, confirm and execute it under a fresh key.
    async fn write(&mut self, client: &Client, tool: &str, args: Value, key: Option<String>) {
        let Answer::Ok(preview) = self.call(client, tool, args.clone()).await else {
            return;
        };
        let (Some(key), Some(token)) = (key, preview["confirmation_token"].as_str()) else {
            return;
        };
        let mut exec = args;
        exec["phase"] = json!("execute");
        exec["confirmation_token"] = json!(token);
        exec["idempotency_key"] = json!(key);
        if let Answer::Ok(_) = self.call(client, tool, exec).await {
            self.executes += 1;
        }
    }
}

/// xorshift64: a reproducible mix per client without a dependency.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

async fn run_client(
    url: String,
    token: String,
    index: usize,
    descriptive: bool,
    until: Instant,
    run_tag: u128,
) -> anyhow::Result<ClientTally> {
    let client = mcp_client(&url, &token).await?;
    let mut t = ClientTally::default();
    let mut mix = Mix(0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0x2545_F491));
    let mut step = 0u64;
    while Instant::now() < until {
        step += 1;
        let roll = mix.next() % 100;
        if descriptive {
            match roll {
                0..10 => {
                    client.list_all_tools().await.context("tools/list")?;
                    t.lists += 1;
                }
                10..55 => {
                    t.call(&client, "sdk.get_metadata", json!({})).await;
                }
                _ => {
                    t.call(&client, "sdk.list_schemas", json!({})).await;
                }
            }
            continue;
        }
        // Idempotency keys unique per run, so a soak against a long-lived root never replays
        // an earlier one's.
        let key = || Some(format!("soak-{run_tag}-{index}-{step}"));
        match roll {
            0..35 => {
                t.call(&client, "hub.get_status", json!({})).await;
            }
            35..50 => {
                t.call(&client, "hub.get_runtime_summary", json!({})).await;
            }
            50..60 => {
                t.call(&client, "hub.get_operational_surface", json!({}))
                    .await;
            }
            60..65 => {
                client.list_all_tools().await.context("tools/list")?;
                t.lists += 1;
            }
            65..80 => {
                t.write(
                    &client,
                    "hub.run_allowed_tests",
                    json!({"name": "noop"}),
                    None,
                )
                .await;
            }
            80..88 => {
                t.write(
                    &client,
                    "hub.restart_service",
                    json!({"service": "fixture"}),
                    None,
                )
                .await;
            }
            88..99 => {
                t.write(
                    &client,
                    "hub.run_allowed_tests",
                    json!({"name": "noop"}),
                    key(),
                )
                .await;
            }
            _ => {
                t.write(
                    &client,
                    "hub.restart_service",
                    json!({"service": "fixture"}),
                    key(),
                )
                .await;
            }
        }
    }
    let _ = client.cancel().await;
    Ok(t)
}

/// Hub TOML: a no-op allowed test and the fixture service, managed by the hub.
fn hub_toml() -> anyhow::Result<String> {
    let bin = workspace_bin("mcp-fixture-service")?;
    // The fixture service binds the port itself, and its health URL names it first.
    let port = crate::ports::free_port();
    Ok(format!(
        "[[skill.allowed_tests]]\nname = \"noop\"\nargv = [\"true\"]\ntimeout_ms = 10000\n\
         [[services]]\nname = \"fixture\"\nargv = [{:?}, \"--port\", \"{port}\", \"--log-every-ms\", \"1000\"]\nstop_timeout_ms = 3000\n\
         health = {{ kind = \"http\", url = \"http://127.0.0.1:{port}/healthz\", timeout_ms = 2000 }}\n",
        bin.display().to_string()
    ))
}

/// Every event id of `session_id`'s calls in the audit trail (all pages).
async fn lease_events(admin: &Admin, session_id: &str) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/v1/root/mcp/audit?actor=lease:{session_id}&limit=1000&order=asc");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let page = admin.get(&path).await?;
        for e in page["events"].as_array().context("events")? {
            ids.push(e["event_id"].as_str().context("event_id")?.to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return Ok(ids),
        }
    }
}

/// Runs the soak and checks the trail; the hubs are stopped before it returns.
pub async fn run(o: &SoakOptions) -> anyhow::Result<SoakReport> {
    anyhow::ensure!(o.hubs > 0 && o.clients > 0, "a soak needs hubs and clients");
    let http = crate::http_client();
    let targets = crate::hubsim::target_ids(&o.target_prefix, o.hubs);
    let enrolled: Vec<Enrolled> = enroll_all(
        &http,
        &o.root_url,
        &o.admin_token,
        &targets,
        "test",
        "subnet-a",
        4,
    )
    .await?;
    let mut hubs = Vec::new();
    for e in &enrolled {
        hubs.push(TestHub::start(&o.root_url, &e.target_id, &e.token, &hub_toml()?).await?);
    }
    let res = drive(&http, o, &targets).await;
    for h in hubs {
        h.stop().await;
    }
    res
}

async fn drive(
    http: &reqwest::Client,
    o: &SoakOptions,
    targets: &[String],
) -> anyhow::Result<SoakReport> {
    let admin = Admin::new(http.clone(), &o.root_url, &o.admin_token);
    let ttl = o.duration.as_secs() + 600;
    let mut leases = Vec::new();
    for i in 0..o.clients {
        let descriptive = i % 4 == 3;
        let profile = if descriptive {
            "AdaOSDevRead"
        } else {
            "InfraOpsControl"
        };
        let v = admin
            .post(
                "/v1/root/mcp/sessions",
                json!({"target_id": targets[i % targets.len()], "capability_profile": profile, "ttl_sec": ttl}),
            )
            .await?;
        leases.push((
            v["session_id"].as_str().context("session_id")?.to_owned(),
            v["token"].as_str().context("token")?.to_owned(),
            descriptive,
        ));
    }
    let mcp_url = format!("{}/mcp", o.root_url);
    let started = Instant::now();
    let until = started + o.duration;
    let run_tag = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, (_, token, descriptive)) in leases.iter().enumerate() {
        tasks.spawn(run_client(
            mcp_url.clone(),
            token.clone(),
            i,
            *descriptive,
            until,
            run_tag,
        ));
    }
    let mut report = SoakReport::default();
    let mut answered: Vec<String> = Vec::new();
    while let Some(done) = tasks.join_next().await {
        let t = done.context("client task")??;
        report.calls += t.calls;
        report.ok += t.ok;
        report.busy += t.busy;
        report.unanswered += t.unanswered;
        report.lists += t.lists;
        report.executes += t.executes;
        for (k, v) in t.errors {
            *report.errors.entry(k).or_default() += v;
        }
        answered.extend(t.event_ids);
    }
    report.elapsed = started.elapsed();

    // The trail: the events of the soak's leases are exactly the answers' event ids.
    let mut in_trail: Vec<String> = Vec::new();
    for (session_id, _, _) in &leases {
        in_trail.extend(lease_events(&admin, session_id).await?);
    }
    report.audit_events = in_trail.len();
    let answered_set: HashSet<&str> = answered.iter().map(String::as_str).collect();
    let mut seen = HashSet::new();
    report.extra_events = in_trail
        .iter()
        .filter(|id| !answered_set.contains(id.as_str()) || !seen.insert(id.as_str()))
        .count();
    report.missing_events = answered_set.iter().filter(|id| !seen.contains(*id)).count()
        + (answered.len() - answered_set.len());
    let v = admin.get("/v1/root/mcp/audit/verify").await?;
    report.verify_ok = v["ok"] == true;
    report.verify_checked = v["checked"].as_u64().unwrap_or(0);
    Ok(report)
}
