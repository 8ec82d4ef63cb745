//! The fleet world: root (one on SQLite, or two replicas on PostgreSQL) and [`SIMS`]
//! simulated hubs in this process whose calls wait until a step lets them go
//! (`mcp_tests::hubsim::Held`), driven over the REST family as operators and agents drive it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_tests::hubsim::{self, Fleet, FleetOptions, Held};
use serde_json::{Value, json};

use super::oracle::{Answer, Snapshot};
use super::steps::{FleetStep, READ, SIMS, WRITE, Who, sim_id};
use crate::world::{Backend, World};

/// Root's configuration for fleet histories: hubs' heartbeats (and a restarted root's wait
/// for them before it takes its runs up) in half a second.
const EXTRA: &str = "[limits]\nheartbeat_interval_ms = 500\n";
/// How long a held status read may wait for its hub (the shipped contract's 5 s is shorter
/// than a history's restarts).
const READ_TIMEOUT_MS: u64 = 120_000;

/// The open run as the world knows it.
struct Open {
    run_id: String,
    /// An agent's fleet lease (`session_id`).
    lease: Option<String>,
    /// An agent's call, answered when its run ends.
    call: Option<tokio::task::JoinHandle<()>>,
    /// A replica restarted while the run was open: an agent's call it cut off has no event
    /// (a call's event is written when it answers).
    restarted: bool,
}

pub struct FleetWorld {
    pub w: World,
    fleet: Fleet,
    held: Arc<Held>,
    open: Option<Open>,
    /// The last run's id (its report is what the world shows until the next).
    last: Option<String>,
    runs: usize,
}

impl FleetWorld {
    pub fn start(backend: &Backend) -> FleetWorld {
        let w = World::start_bare(backend, EXTRA, |contracts| {
            let path = contracts.join(format!("{READ}.json"));
            let mut c: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            c["timeout_ms"] = json!(READ_TIMEOUT_MS);
            std::fs::write(&path, serde_json::to_string_pretty(&c).unwrap()).unwrap();
        });
        let ids: Vec<String> = (0..SIMS).map(sim_id).collect();
        let held = Arc::new(Held::default());
        let base = w.replicas[0].base.clone();
        let fleet = w.block(async {
            let enrolled =
                hubsim::enroll_all(&w.http, &base, &w.admin, &ids, "test", "subnet-sim", 4)
                    .await
                    .expect("the simulated targets enrolled");
            Fleet::connect(
                &base,
                enrolled,
                FleetOptions {
                    writes: true,
                    held: Some(held.clone()),
                    connect_timeout: Duration::from_secs(30),
                    ..FleetOptions::default()
                },
            )
            .await
            .expect("the simulated hubs connected")
        });
        let world = FleetWorld {
            w,
            fleet,
            held,
            open: None,
            last: None,
            runs: 0,
        };
        world.hubs_back();
        world
    }

    /// Applies `step`; what it answered.
    pub fn perform(&mut self, step: &FleetStep) -> Answer {
        let ok = |s: u16| {
            if (200..300).contains(&s) {
                Answer::Ok
            } else {
                Answer::Refused(s)
            }
        };
        let hub = |t: usize, what: &str| format!("/v1/root/hubs/{}/{what}", sim_id(t));
        match *step {
            FleetStep::Start {
                write,
                who,
                selector,
                plan,
            } => self.start_run(write, who, selector.selector(), plan.json()),
            FleetStep::Settle { nth, fail } => {
                let running = self.running();
                assert!(!running.is_empty(), "no target of the run is running");
                let t = &running[nth as usize % running.len()];
                self.held.release(t, fail);
                Answer::Ok
            }
            FleetStep::Cordon { target, on } => {
                let command = if on { "cordon" } else { "uncordon" };
                ok(self
                    .admin(&hub(target, &format!("lifecycle/{command}")), json!({}))
                    .0)
            }
            FleetStep::Retire { target } => {
                ok(self.admin(&hub(target, "lifecycle/retire"), json!({})).0)
            }
            FleetStep::Move { target } => ok(self
                .admin(
                    &hub(target, "placement"),
                    json!({ "environment": "production" }),
                )
                .0),
            FleetStep::Label { target, out } => {
                let body = if out {
                    json!({ "set": { "out": "" } })
                } else {
                    json!({ "remove": ["out"] })
                };
                ok(self.admin(&hub(target, "labels"), body).0)
            }
            FleetStep::Narrow { target, on } => {
                let body = if on {
                    json!({ "deny": [READ, WRITE] })
                } else {
                    json!({})
                };
                ok(self.admin(&hub(target, "narrowing"), body).0)
            }
            FleetStep::AddOperator { name } => {
                let (s, v) =
                    self.admin(
                        "/v1/root/operators",
                        json!({ "name": format!("op{name}"), "roles": ["operator"], "profiles": ["*"] }),
                    );
                if s == 201 || s == 200 {
                    self.w.operators[name as usize] =
                        Some(v["token"].as_str().expect("a token").to_owned());
                }
                ok(s)
            }
            FleetStep::RevokeOperator { name, cascade } => ok(self
                .admin(
                    &format!("/v1/root/operators/op{name}/revoke"),
                    json!({ "cascade": cascade }),
                )
                .0),
            FleetStep::RevokeLease => {
                let id = self
                    .open
                    .as_ref()
                    .and_then(|o| o.lease.clone())
                    .expect("an agent's run");
                ok(self
                    .admin(&format!("/v1/root/mcp/sessions/{id}/revoke"), json!({}))
                    .0)
            }
            FleetStep::Pause => self.command("pause"),
            FleetStep::Resume => self.command("resume"),
            FleetStep::Cancel => self.command("cancel"),
            FleetStep::RestartRoot { replica } => {
                let n = replica as usize % self.w.replicas.len();
                self.w.restart(n);
                if let Some(open) = &mut self.open {
                    open.restarted = true;
                }
                self.hubs_back();
                Answer::Ok
            }
        }
    }

    /// Waits until every replica sees each hub that may connect (in `test`, not retired)
    /// connected, with the descriptor and tools it published (a replica learns of a hub
    /// another holds a moment later; a restarted root's hubs are within their backoff).
    fn hubs_back(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let step = self.w.via_now();
        for r in 0..self.w.replicas.len() {
            self.w.via(r);
            loop {
                let list = self.w.get("/v1/root/hubs?limit=100");
                let away: Vec<&str> = list["targets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|t| t["environment"] == "test" && t["lifecycle"]["state"] != "retired")
                    .filter(|t| {
                        t["status"] != "online"
                            || t["descriptor"].is_null()
                            || t["published_capabilities"]
                                .as_array()
                                .is_none_or(Vec::is_empty)
                    })
                    .filter_map(|t| t["target_id"].as_str())
                    .collect();
                if away.is_empty() {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "hubs not back after a restart: {away:?}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        self.w.via(step);
    }

    fn admin(&self, path: &str, body: Value) -> (u16, Value) {
        self.w.operator_as(None, path, body)
    }

    /// A POST by `who`'s operator (the admin for an agent's lease's issuer `None`).
    fn as_operator(&self, by: Option<u8>, path: &str, body: Value) -> (u16, Value) {
        self.w.operator_as(by, path, body)
    }

    fn command(&mut self, verb: &str) -> Answer {
        let id = &self.open.as_ref().expect("an open run").run_id;
        let (s, v) = self.admin(&format!("/v1/root/fleet/runs/{id}/{verb}"), json!({}));
        assert!((200..300).contains(&s), "{verb}: {s} {v}");
        Answer::Ok
    }

    fn start_run(&mut self, write: bool, who: Who, selector: &str, plan: Value) -> Answer {
        self.runs += 1;
        let (tool, arguments) = if write {
            (WRITE, json!({ "name": "smoke" }))
        } else {
            (READ, json!({}))
        };
        let operator = match who {
            Who::Admin => None,
            Who::Operator(n) => Some(n),
            Who::Agent { by } => return self.agent_start(write, by, selector, plan),
        };
        let ask =
            json!({ "selector": selector, "tool_id": tool, "arguments": arguments, "plan": plan });
        let mut run = ask.clone();
        if write {
            let (s, p) = self.as_operator(operator, "/v1/root/fleet/previews", ask);
            if s != 200 && s != 201 {
                return Answer::Refused(s);
            }
            run["confirmation_token"] = p["confirmation_token"].clone();
        }
        let (s, r) = self.as_operator(operator, "/v1/root/fleet/runs", run);
        if !(200..300).contains(&s) {
            return Answer::Refused(s);
        }
        let run_id = r["run_id"].as_str().expect("a run id").to_owned();
        self.opened(run_id, None, None);
        Answer::Ok
    }

    /// An agent's run: operator `by` issues a fleet lease on `selector`; the agent calls the
    /// fleet tool (a write previewed, then executed with the confirmation and a key of its
    /// own), and its call stays open while the run goes.
    fn agent_start(&mut self, write: bool, by: Option<u8>, selector: &str, plan: Value) -> Answer {
        let profile = if write {
            "InfraOpsControl"
        } else {
            "InfraOpsRead"
        };
        let ask = json!({ "selector": selector, "capability_profile": profile, "ttl_sec": 600 });
        let (s, v) = self.as_operator(by, "/v1/root/mcp/sessions", ask);
        if !(200..300).contains(&s) {
            return Answer::Refused(s);
        }
        let id = v["session_id"].as_str().expect("a session id").to_owned();
        let bearer = v["token"].as_str().expect("a bearer").to_owned();
        let (fleet_tool, mut arguments) = if write {
            (
                "root.run_fleet_write",
                json!({ "tool": WRITE, "arguments": { "name": "smoke" }, "plan": plan }),
            )
        } else {
            ("root.run_fleet_read", json!({ "tool": READ, "plan": plan }))
        };
        if write {
            let body = json!({ "tool_id": fleet_tool, "arguments": arguments });
            let (_, p) = self.w.post("/v1/root/mcp/call", &bearer, body);
            if p["ok"] != true {
                return Answer::Refused(400);
            }
            arguments["phase"] = json!("execute");
            arguments["confirmation_token"] = p["result"]["confirmation_token"].clone();
            arguments["idempotency_key"] = json!(format!("k{}", self.runs));
        }
        let body = json!({ "tool_id": fleet_tool, "arguments": arguments });
        let url = self.w.url("/v1/root/mcp/call");
        let http = self.w.http.clone();
        let call = self.w.rt.spawn(async move {
            // Answered when the run ends (or never, when root is killed meanwhile).
            let call = http.post(&url).bearer_auth(&bearer).json(&body).send();
            let _ = tokio::time::timeout(Duration::from_secs(600), call).await;
        });
        // The run, once the call started it (or the call's refusal).
        let mine = format!("lease:{id}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let runs = self.w.get("/v1/root/fleet/runs");
            let found = runs["runs"].as_array().and_then(|r| {
                r.iter()
                    .find(|r| r["created_by"] == mine.as_str() && r["state"] != "previewed")
                    .and_then(|r| r["run_id"].as_str().map(str::to_owned))
            });
            if let Some(run_id) = found {
                self.opened(run_id, Some(id), Some(call));
                return Answer::Ok;
            }
            if call.is_finished() {
                return Answer::Refused(400);
            }
            assert!(Instant::now() < deadline, "the agent's run never started");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn opened(
        &mut self,
        run_id: String,
        lease: Option<String>,
        call: Option<tokio::task::JoinHandle<()>>,
    ) {
        self.open = Some(Open {
            run_id,
            lease,
            call,
            restarted: false,
        });
    }

    /// The targets the open run runs now, as root reports them.
    fn running(&self) -> Vec<String> {
        let Some(open) = &self.open else {
            return Vec::new();
        };
        let r = self.w.get(&format!("/v1/root/fleet/runs/{}", open.run_id));
        let mut ids: Vec<String> = r["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["status"] == "running")
            .filter_map(|t| t["target_id"].as_str().map(str::to_owned))
            .collect();
        ids.sort();
        ids
    }

    /// What root's report of the run and the hubs show now.
    pub fn snapshot(&self) -> Snapshot {
        let id = self
            .open
            .as_ref()
            .map(|o| o.run_id.as_str())
            .or(self.last.as_deref());
        let run = id.map(|id| {
            let r = self.w.get(&format!("/v1/root/fleet/runs/{id}"));
            let parts = r["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    let status = t["status"].as_str().unwrap_or("?");
                    let shown = match t["code"].as_str() {
                        Some(code) if !matches!(status, "cancelled" | "skipped") => {
                            format!("{status}: {code}")
                        }
                        _ => status.to_owned(),
                    };
                    (t["target_id"].as_str().unwrap_or("?").to_owned(), shown)
                })
                .collect();
            (r["state"].as_str().unwrap_or("?").to_owned(), parts)
        });
        let held: BTreeMap<String, u32> = self.held.held().into_iter().collect();
        let executions = self
            .fleet
            .stats
            .executions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .into_iter()
            .collect();
        Snapshot {
            run,
            held,
            executions,
        }
    }

    /// Waits until the world shows `want` (and still does a moment later); the last seen
    /// otherwise, after `patience`.
    pub fn settle(&mut self, want: &Snapshot, patience: Duration) -> Snapshot {
        let deadline = Instant::now() + patience;
        loop {
            let seen = self.snapshot();
            if seen == *want {
                std::thread::sleep(Duration::from_millis(60));
                let again = self.snapshot();
                if again == *want {
                    return again;
                }
            }
            if Instant::now() > deadline {
                return seen;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The open run ended: its events checked against its report (every target's call in
    /// the run's trace; none for a target settled before its call).
    pub fn closed(&mut self) {
        let Some(open) = self.open.take() else {
            return;
        };
        let r = self.w.get(&format!("/v1/root/fleet/runs/{}", open.run_id));
        let trace = r["trace_id"].as_str().expect("a trace id");
        let events = self
            .w
            .get(&format!("/v1/root/mcp/audit?trace_id={trace}&limit=1000"));
        let ids: std::collections::HashSet<&str> = events["events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["event_id"].as_str())
            .collect();
        for t in r["targets"].as_array().into_iter().flatten() {
            let status = t["status"].as_str().unwrap_or("?");
            // A call cut off after its run's authority ended was never answered (`failed`,
            // `cancelled`): no event of root's names it.
            let called = matches!(status, "succeeded" | "failed" | "undeliverable")
                && t["code"] != "cancelled";
            // A call refused by policy is audited too; a target settled before any call
            // (skipped, cancelled, or refused and excluded at its turn) names none.
            match t["event_id"].as_str() {
                Some(e) => assert!(
                    ids.contains(e) && !matches!(status, "skipped" | "cancelled"),
                    "F7: {} ({status}) names event {e}, not one of the run's trace {trace}",
                    t["target_id"]
                ),
                None => assert!(
                    !called,
                    "F7: {} was called ({status}) but names no event",
                    t["target_id"]
                ),
            }
        }
        // The run's trace holds its start's event, unless that was an agent's call a restart
        // cut off and every target was settled without an answer (its call cut off too, or
        // none made).
        let start_cut_off = open.call.is_some() && open.restarted;
        assert!(
            !ids.is_empty() || start_cut_off,
            "F7: the run's trace {trace} holds no event (the run: {r})"
        );
        let (_, verified) = self.w.audit_verify();
        assert!(verified, "audit verify failed");
        if let Some(call) = open.call {
            call.abort();
        }
        self.last = Some(open.run_id);
    }

    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    pub fn shutdown(&mut self) {
        self.w.block(self.fleet.shutdown());
    }
}
