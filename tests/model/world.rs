//! The world a history runs against: a root process (`mcp-root serve`) on SQLite, or two
//! replicas sharing a PostgreSQL schema of their own, and a hub process (`mcp-hub run`) per
//! target, on loopback, driven over the REST family and MCP as operators and agents drive them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mcp_tests::hub_process::spawn_hub;
use mcp_tests::process::Proc;
use serde_json::{Value, json};

use crate::oracle::{Effects, Model};
use crate::steps::{TARGETS, Write};

/// Where root keeps its state: the embedded SQLite file of one root, or one PostgreSQL
/// database shared by two replicas.
#[derive(Clone, Debug)]
pub enum Backend {
    Sqlite,
    Postgres { base_url: String },
}

/// One `mcp-root serve` process, started again on the same configuration after a kill.
pub struct Replica {
    pub base: String,
    config: PathBuf,
    log: PathBuf,
    pub proc: Proc,
}

impl Replica {
    /// Starts root on `config`, which listens on port 0: the address root announces is read
    /// back and written into `config`, so a restart comes back on the same port (where the
    /// hubs dial it).
    fn start(rt: &tokio::runtime::Runtime, config: PathBuf, log: PathBuf) -> Replica {
        let mut proc = spawn_root(&config, &log);
        let base = rt.block_on(mcp_tests::ports::announced_root_url(
            &mut proc,
            Duration::from_secs(30),
        ));
        let text = std::fs::read_to_string(&config).unwrap();
        let bound = text.replacen(
            "listen = \"127.0.0.1:0\"",
            &format!("listen = \"{}\"", base.trim_start_matches("http://")),
            1,
        );
        std::fs::write(&config, bound).unwrap();
        Replica {
            base,
            config,
            log,
            proc,
        }
    }
}

/// A schema of its own on the PostgreSQL test database, dropped with the world.
struct Schema {
    base_url: String,
    name: String,
}

/// The processes and what the history handed out: lease bearers, operators' tokens and
/// confirmations, by the model's numbering.
pub struct World {
    pub rt: tokio::runtime::Runtime,
    pub http: reqwest::Client,
    pub dir: tempfile::TempDir,
    pub admin: String,
    pub replicas: Vec<Replica>,
    /// The replica this step's requests go to (steps take turns, so a replayed history
    /// sends each step where it went before).
    via: std::cell::Cell<usize>,
    pub hubs: Vec<Option<Proc>>,
    /// `(session_id, bearer)` of each lease the model numbered.
    pub leases: Vec<(String, String)>,
    /// How many leases are above each lease (what the ones it mints may live, see
    /// [`World::arguments`]).
    pub depths: Vec<usize>,
    /// Each OAuth sign-in's client, its current refresh token and access token (a lease by
    /// the model's number).
    pub grants: Vec<SignedIn>,
    /// Leases an operator's rotation made (a new bearer for an existing lease, not a lease
    /// the target's write issued).
    pub rotated_into: std::collections::HashSet<String>,
    /// Named operators' tokens, by the model's number.
    pub operators: Vec<Option<String>>,
    pub confirmations: Vec<String>,
    /// Approval ids of proposals, by the model's number.
    pub approvals: Vec<String>,
    /// Profiling session ids, by the model's number.
    pub sessions: Vec<String>,
    /// Hub processes started per target (each start starts its service once).
    pub hub_starts: Vec<usize>,
    /// Leases' liveness at the last check (a lease that died since must be refused).
    pub was_live: std::cell::RefCell<Vec<bool>>,
    /// The last answer root gave (for a divergence's message).
    pub last: std::cell::RefCell<Value>,
    /// Events in the trail before the history began (the enrolments).
    pub baseline: usize,
    /// Events the world caused that the oracle does not predict (a racing call refused
    /// `busy` and sent again, `call_at_once`).
    pub unpredicted: std::cell::Cell<usize>,
    schema: Option<Schema>,
    /// Configuration appended to each replica's.
    extra: String,
}

/// The audience of leases agents issue with `hub.issue_access_token` (so the world counts them).
pub const ISSUED: &str = "model-issued";

/// An OAuth sign-in as its client holds it.
pub struct SignedIn {
    pub client_id: String,
    pub refresh: String,
    /// The lease its access token is, by the model's number.
    pub lease: usize,
}

/// `(allowed_roots line, [nlu] section)` serving the shipped NLU example content.
fn nlu_toml() -> (String, String) {
    let toml = mcp_tests::nlu_hub_toml().expect("config/nlu");
    let (roots, nlu) = toml.split_once("[nlu]").expect("an [nlu] section");
    (roots.to_owned(), format!("[nlu]{nlu}"))
}

fn file_name(target: &str) -> String {
    target.replace(':', "_")
}

impl World {
    /// Starts root (one on SQLite, two replicas on PostgreSQL), enrols the targets and starts
    /// their hubs; returns once every hub is connected and publishes its skill.
    pub fn start(backend: &Backend) -> World {
        let mut w = World::start_bare(backend, "", |_| {});
        w.repository();
        for (t, spec) in TARGETS.iter().enumerate() {
            w.hubs.push(None);
            if spec.enrolled {
                let (s, v) = w.enrol(t);
                assert_eq!(s, 201, "enrol {}: {v}", spec.id);
            }
        }
        for t in (0..TARGETS.len()).filter(|&t| TARGETS[t].enrolled) {
            w.start_hub(t);
        }
        w.settle(&Model::default());
        w.baseline = w.audit_count();
        w
    }

    /// Starts root (one on SQLite, two replicas on PostgreSQL) with `extra` appended to each
    /// replica's configuration, once `prepare` has had the contracts directory root loads;
    /// no target is enrolled.
    pub fn start_bare(backend: &Backend, extra: &str, prepare: impl FnOnce(&Path)) -> World {
        mcp_tests::init_crypto();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let dir = tempfile::tempdir().expect("a temp dir");
        let schema = match backend {
            Backend::Sqlite => None,
            Backend::Postgres { base_url } => Some(rt.block_on(create_schema(base_url))),
        };
        let mut w = World {
            rt,
            http: mcp_tests::http_client(),
            admin: String::new(),
            replicas: Vec::new(),
            via: std::cell::Cell::new(0),
            hubs: Vec::new(),
            leases: Vec::new(),
            depths: Vec::new(),
            grants: Vec::new(),
            operators: vec![None; crate::steps::OPERATORS as usize],
            confirmations: Vec::new(),
            approvals: Vec::new(),
            sessions: Vec::new(),
            hub_starts: vec![0; TARGETS.len()],
            rotated_into: Default::default(),
            was_live: std::cell::RefCell::new(Vec::new()),
            last: std::cell::RefCell::new(Value::Null),
            baseline: 0,
            unpredicted: std::cell::Cell::new(0),
            schema,
            extra: extra.to_owned(),
            dir,
        };
        prepare(&w.contracts());
        let ids: &[&str] = if w.schema.is_some() {
            &["r-a", "r-b"]
        } else {
            &["root"]
        };
        for id in ids {
            // The first creates the admin token and master key the others share.
            let replica = w.start_replica(id);
            w.replicas.push(replica);
            w.wait_ready(w.replicas.len() - 1);
        }
        w.admin = std::fs::read_to_string(w.dir.path().join("admin.token"))
            .expect("admin.token")
            .trim()
            .to_owned();
        w
    }

    fn start_replica(&self, id: &str) -> Replica {
        let shared = self.dir.path();
        let mut config = format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\nadmin_token_file = \"{}\"\nmaster_key_file = \"{}\"\n",
            shared.join(id).display(),
            shared.join("admin.token").display(),
            shared.join("secrets.key").display(),
        );
        // The shipped contracts and the model's fixture (a read for test targets only).
        config += &format!("contracts_dir = \"{}\"\n", self.contracts().display());
        if let Some(schema) = &self.schema {
            config += &format!(
                "database_url = \"{}\"\n[replica]\nid = \"{id}\"\n",
                schema.url()
            );
        }
        // MCP clients sign in with OAuth (approved over the console's endpoints).
        config += "[oauth]\ndiscovery = true\n";
        config += &self.extra;
        let path = shared.join(format!("{id}.toml"));
        std::fs::write(&path, config).unwrap();
        Replica::start(&self.rt, path, shared.join(format!("{id}.log")))
    }

    /// The contracts root loads: the shipped ones and the model's fixture, copied once.
    fn contracts(&self) -> PathBuf {
        let dir = self.dir.path().join("contracts");
        if !dir.exists() {
            std::fs::create_dir_all(&dir).unwrap();
            let top = Path::new(env!("CARGO_MANIFEST_DIR"));
            for from in ["../schemas/tools", "model/fixture"] {
                for e in std::fs::read_dir(top.join(from)).unwrap() {
                    let p = e.unwrap().path();
                    std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
                }
            }
        }
        dir
    }

    pub fn block<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// The replica the next request goes to.
    fn base(&self) -> &str {
        &self.replicas[self.via.get() % self.replicas.len()].base
    }

    /// The URL of `path` at this step's replica.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base())
    }

    /// The replica requests go to now.
    pub fn via_now(&self) -> usize {
        self.via.get()
    }

    /// Sends the following requests to replica `n` (mod the replicas).
    pub fn via(&self, n: usize) {
        self.via.set(n % self.replicas.len());
    }

    fn wait_ready(&self, replica: usize) {
        let r = &self.replicas[replica];
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = self.block(async {
                let res = self.http.get(format!("{}/readyz", r.base)).send().await;
                res.is_ok_and(|res| res.status().is_success())
            });
            if ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "root did not start:\n{}",
                r.proc.tail(30)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last lines of every replica's log, for a failure's message.
    pub fn root_logs(&self) -> String {
        self.replicas
            .iter()
            .map(|r| format!("--- {}\n{}", r.base, r.proc.tail(30)))
            .collect()
    }

    /// The file the allowed test `smoke` of a target appends a line to each time it runs.
    pub fn runs_file(&self, target: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("{}.runs", file_name(TARGETS[target].id)))
    }

    fn hub_config(&self, target: usize) -> PathBuf {
        let spec = &TARGETS[target];
        let name = file_name(spec.id);
        let path = self.dir.path().join(format!("{name}.toml"));
        if path.exists() {
            return path;
        }
        let scope = if spec.writes { "test-only" } else { "none" };
        let runs = self.runs_file(target);
        let runs = runs.display();
        let starts = self.starts_file(target);
        // Hubs' surfaces differ: a target lacking a tool gets no configuration serving it.
        let tests = if spec.lacks.contains(&"hub.run_allowed_tests") {
            String::new()
        } else {
            format!(
                "[[skill.allowed_tests]]\nname = \"smoke\"\nargv = [\"sh\", \"-c\", \"echo run >> {runs}\"]\n\
                 timeout_ms = 10000\n\
                 [[skill.allowed_tests]]\nname = \"slow\"\nargv = [\"sh\", \"-c\", \"sleep 1; echo run >> {runs}\"]\n\
                 timeout_ms = 10000\n"
            )
        };
        let nlu = if spec.lacks.contains(&"nlu_authoring.get_context") {
            String::new()
        } else {
            nlu_toml().1
        };
        let text = format!(
            "{nlu_roots}target_id = \"{id}\"\nenvironment = \"{env}\"\nsubnet = \"{subnet}\"\n\
             root_urls = [{urls}]\ntoken_file = \"{token}\"\nstate_dir = \"{state}\"\n\
             write_scope = \"{scope}\"\ntoken_reload_interval_ms = 100\n\
             {tests}\
             [[skill.healthchecks]]\nname = \"alive\"\nkind = \"command\"\nargv = [\"true\"]\n\
             [[skill.commands]]\ntool_id = \"model.test_status\"\n\
             argv = [\"sh\", \"-c\", \"read -r _; echo '{{\\\"ok\\\": true}}'\"]\n\
             [[services]]\nname = \"app\"\nargv = [\"sh\", \"-c\", \"echo start $$ >> {starts}; exec sleep 3600\"]\n\
             stop_timeout_ms = 1000\n\
             [deploy]\nrepository = \"{repo}\"\nworktree = \"deploy/app\"\nallowed_refs = [\"main\", \"v1\"]\n\
             [reconnect]\ninitial_ms = 50\nmax_ms = 300\n{nlu}",
            nlu_roots = nlu_toml().0,
            id = spec.id,
            env = spec.environment,
            subnet = spec.subnet,
            urls = self.root_urls(target),
            token = self.dir.path().join(format!("{name}.token")).display(),
            state = self.state_dir(target).display(),
            starts = starts.display(),
            repo = self.dir.path().join("repo").display(),
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    fn state_dir(&self, target: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("{}-state", file_name(TARGETS[target].id)))
    }

    /// The file the service `app` of a target appends `start <pid>` to each time it starts.
    fn starts_file(&self, target: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("{}.starts", file_name(TARGETS[target].id)))
    }

    /// The git repository deploys come from: `v1` at its first commit, `main` at the second.
    fn repository(&self) {
        let repo = self.dir.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let git = |args: &[&str]| mcp_tests::git::git(&repo, args);
        git(&["init", "--quiet", "--initial-branch=main"]);
        for (n, file) in ["one", "two"].iter().enumerate() {
            std::fs::write(repo.join(file), format!("{n}\n")).unwrap();
            git(&["add", file]);
            git(&["commit", "--quiet", "-m", file]);
            if n == 0 {
                git(&["tag", "v1"]);
            }
        }
    }

    /// Enrols target `t` (as admin) and writes the hub token its hub starts with.
    pub fn enrol(&self, t: usize) -> (u16, Value) {
        self.enrol_as(None, t)
    }

    pub fn enrol_as(&self, by: Option<u8>, t: usize) -> (u16, Value) {
        let spec = &TARGETS[t];
        let body = json!({"target_id": spec.id, "environment": spec.environment, "subnet_id": spec.subnet});
        let (s, v) = self.operator_as(by, "/v1/root/hubs", body);
        if s == 201 {
            self.hub_token(t, v["token"].as_str().expect("a hub token"));
        }
        (s, v)
    }

    /// What writes did on target `t`, as the hub's files and root's lease list show it.
    pub fn effects(&self, t: usize) -> Effects {
        let lines = |path: PathBuf| {
            std::fs::read_to_string(path)
                .map(|s| s.lines().count())
                .unwrap_or(0)
        };
        let json = |file: &str| -> Value {
            std::fs::read_to_string(self.state_dir(t).join(file))
                .ok()
                .and_then(|s| serde_json::from_str(&s).ok())
                .unwrap_or(Value::Null)
        };
        let count = |v: &Value| v.as_array().map_or(0, Vec::len);
        let deploys = json("deploys.json");
        let kinds = |kind: &str| {
            deploys["entries"]
                .as_array()
                .map_or(0, |a| a.iter().filter(|d| d["kind"] == kind).count())
        };
        let leases = self.get("/v1/root/mcp/sessions?limit=1000");
        let issued = leases["sessions"].as_array().map_or(0, |a| {
            a.iter()
                .filter(|l| l["target_id"] == TARGETS[t].id && l["audience"] == ISSUED)
                .filter(|l| {
                    l["session_id"]
                        .as_str()
                        .is_none_or(|id| !self.rotated_into.contains(id))
                })
                .count()
        });
        Effects {
            tests: lines(self.runs_file(t)),
            restarts: lines(self.starts_file(t)).saturating_sub(self.hub_starts[t]),
            deploys: kinds("deploy"),
            rollbacks: kinds("rollback"),
            issued,
            profiles: count(&json("profiles/index.json")["sessions"]),
            applied: count(
                &json("nlu/applied.json")["templates"][crate::steps::TEMPLATE]["history"],
            ),
        }
    }

    /// How long a lease minted by lease `lease` may live: less at each step down a chain,
    /// so a child never asks to outlive its parent (a deadline a moment away by the time the
    /// history reaches it).
    fn child_ttl(&self, lease: usize) -> u64 {
        3000 - 400 * self.depths.get(lease).copied().unwrap_or(0).min(7) as u64
    }

    /// The arguments of `write` by lease `lease` (without the write-control fields).
    pub fn arguments(&self, write: Write, lease: usize) -> Value {
        match write {
            Write::Tests => json!({"name": "smoke"}),
            Write::Restart => json!({"service": "app"}),
            Write::Deploy { main } => json!({"ref": if main { "main" } else { "v1" }}),
            Write::Rollback | Write::Apply => json!({}),
            Write::IssueToken => {
                let ttl = self.child_ttl(lease).min(600);
                json!({"capability_profile": "InfraOpsRead", "ttl_sec": ttl, "audience": ISSUED})
            }
            Write::IssueControl => {
                let ttl = self.child_ttl(lease);
                json!({"capability_profile": "InfraOpsControl", "ttl_sec": ttl, "audience": ISSUED})
            }
            Write::RevokeToken { lease } => json!({"session_id": self.leases[lease].0}),
            Write::StartProfile => {
                json!({"service": "app", "interval_ms": 100, "duration_sec": 1})
            }
            Write::StopProfile { session }
            | Write::RetryProfile { session }
            | Write::PublishProfile { session } => json!({"session_id": self.sessions[session]}),
        }
    }

    /// After an execute of `write` by `lease` ran (answer `v`, REST or MCP): keeps what it
    /// handed out (an issued bearer, a profiling session, which the world waits to end).
    pub fn ran(&mut self, write: Write, lease: usize, target: usize, v: &Value) {
        let result = &v["result"];
        match write {
            Write::IssueToken | Write::IssueControl => {
                let id = result["session_id"].as_str().expect("an issued lease");
                let token = result["token"].as_str().expect("an issued bearer");
                self.leases.push((id.to_owned(), token.to_owned()));
                self.depths.push(self.depths[lease] + 1);
            }
            Write::StartProfile | Write::RetryProfile { .. } => {
                let id = result["session"]["session_id"].as_str();
                let id = id.expect("a profiling session").to_owned();
                self.wait_ended(target, &id);
                self.sessions.push(id);
            }
            _ => {}
        }
    }

    /// Waits until profiling session `id` of target `t` ended (it samples for one second).
    fn wait_ended(&self, t: usize, id: &str) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let index = std::fs::read_to_string(self.state_dir(t).join("profiles/index.json"))
                .ok()
                .and_then(|s| serde_json::from_str::<Value>(&s).ok())
                .unwrap_or(Value::Null);
            let ended = index["sessions"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|s| s["session_id"] == id && s["state"] != "running")
            });
            if ended {
                return;
            }
            assert!(Instant::now() < deadline, "session {id} never ended");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The artifact of profiling session `session` (it has ended).
    pub fn artifact(&self, session: usize) -> String {
        let t = 0;
        let index = std::fs::read_to_string(self.state_dir(t).join("profiles/index.json"))
            .expect("the profiles index");
        let index: Value = serde_json::from_str(&index).expect("JSON");
        let id = &self.sessions[session];
        index["sessions"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["session_id"] == id.as_str()))
            .and_then(|s| s["artifact_id"].as_str())
            .unwrap_or("art_none")
            .to_owned()
    }

    /// How many times a target's hub has picked up a new token from its file (its log says
    /// so each time; the log is kept across the hub's restarts).
    pub fn token_reloads(&self, target: usize) -> usize {
        let log = self
            .dir
            .path()
            .join(format!("{}.log", file_name(TARGETS[target].id)));
        std::fs::read_to_string(log)
            .map(|t| t.matches("holds a new token").count())
            .unwrap_or(0)
    }

    /// Writes the token a target's hub starts with (a private file, as the hub requires).
    pub fn hub_token(&self, target: usize, token: &str) {
        let name = file_name(TARGETS[target].id);
        let path = self.dir.path().join(format!("{name}.token"));
        std::fs::write(&path, token).unwrap();
        mcp_tests::private_file(&path).unwrap();
    }

    /// The replicas a target's hub dials, in order: target `t` prefers replica `t mod n`.
    fn root_urls(&self, target: usize) -> String {
        let n = self.replicas.len();
        (0..n)
            .map(|i| format!("\"{}\"", self.replicas[(target + i) % n].base))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Starts target `t`'s hub (which starts its service `app`).
    pub fn start_hub(&mut self, t: usize) {
        let config = self.hub_config(t);
        let log = self
            .dir
            .path()
            .join(format!("{}.log", file_name(TARGETS[t].id)));
        self.hub_starts[t] += 1;
        self.hubs[t] = Some(spawn_hub("mcp-hub", &config, log, TARGETS[t].id).quiet());
    }

    /// SIGKILLs target `t`'s hub, and then the service it left running (in a process group
    /// of its own, so the hub's death does not end it).
    pub fn stop_hub(&mut self, t: usize) {
        self.hubs[t] = None;
        self.end_services(t);
    }

    /// Ends every process the service `app` of target `t` started (`start <pid>` lines)
    /// that still runs.
    fn end_services(&self, t: usize) {
        let text = std::fs::read_to_string(self.starts_file(t)).unwrap_or_default();
        for pid in text.lines().filter_map(|l| l.strip_prefix("start ")) {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).starts_with("sleep") {
                let _ = Command::new("kill").args(["-9", pid]).status();
            }
        }
    }

    /// `mcp-hub skill enable|disable` on a target's hub, as its owner.
    pub fn owner_switch(&self, target: usize, on: bool) {
        let out = Command::new(mcp_tests::workspace_bin("mcp-hub").unwrap())
            .args(["skill", if on { "enable" } else { "disable" }, "--config"])
            .arg(self.hub_config(target))
            .output()
            .expect("mcp-hub skill");
        assert!(
            out.status.success(),
            "mcp-hub skill: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A replica SIGKILLed and started again on the same configuration (data, port).
    pub fn restart(&mut self, replica: usize) {
        let r = &mut self.replicas[replica];
        r.proc.kill();
        r.proc = spawn_root(&r.config, &r.log);
        self.wait_ready(replica);
    }

    /// An operator's POST with the admin bearer: `(status, body)`.
    pub fn operator(&self, path: &str, body: Value) -> (u16, Value) {
        self.post(path, &self.admin, body)
    }

    /// A POST by operator `op<by>` (the bootstrap `admin` when `None`).
    pub fn operator_as(&self, by: Option<u8>, path: &str, body: Value) -> (u16, Value) {
        match by {
            None => self.operator(path, body),
            Some(n) => {
                let token = self.operators[n as usize].as_deref();
                self.post(path, token.expect("an operator that was added"), body)
            }
        }
    }

    /// Calls of `tool` sent at once, each `(lease, arguments)` through the next replica in
    /// turn: the answers, in order. A call answered `busy` (a concurrency slot another of
    /// them holds) is sent again; its refusal is an event the oracle does not predict,
    /// counted in `unpredicted`.
    pub fn call_at_once(&self, tool: &str, calls: &[(usize, Value)]) -> Vec<(u16, Value)> {
        let sends = calls.iter().enumerate().map(|(i, (lease, arguments))| {
            let base = self.replicas[(self.via.get() + i) % self.replicas.len()]
                .base
                .clone();
            let body = json!({"tool_id": tool, "arguments": arguments});
            let bearer = self.leases[*lease].1.clone();
            async move {
                let url = format!("{base}/v1/root/mcp/call");
                loop {
                    let (status, body) = send(&self.http, &url, &bearer, &body).await;
                    if body["error"]["code"] != "busy" {
                        return (status, body);
                    }
                    self.unpredicted.set(self.unpredicted.get() + 1);
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        });
        self.block(futures::future::join_all(sends))
    }

    /// A fleet tool's call (`body`) by fleet lease `session_id` (`bearer`) whose run pauses
    /// after its canary: once the canary finished, the admin labels `target` `out`; once the
    /// call answered, the label is removed. The call's answer (the label's are audited
    /// operator actions, refused for a target not enrolled).
    pub fn fleet_call_while_leaving(
        &self,
        bearer: &str,
        body: Value,
        session_id: &str,
        target: &str,
    ) -> (u16, Value) {
        let url = format!("{}/v1/root/mcp/call", self.base());
        let (http, bearer) = (self.http.clone(), bearer.to_owned());
        let call = self
            .rt
            .spawn(async move { send(&http, &url, &bearer, &body).await });
        let mine = format!("lease:{session_id}");
        let labels = format!("/v1/root/hubs/{target}/labels");
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut labelled = false;
        while !call.is_finished() && !labelled {
            assert!(
                Instant::now() < deadline,
                "the fleet run's canary never finished"
            );
            let runs = self.get("/v1/root/fleet/runs");
            let run = runs["runs"]
                .as_array()
                .and_then(|r| r.iter().find(|r| r["created_by"] == mine.as_str()).cloned());
            if let Some(run) = run {
                let report = self.get(&format!(
                    "/v1/root/fleet/runs/{}",
                    run["run_id"].as_str().unwrap_or_default()
                ));
                let open = report["counts"]["pending"].as_u64().unwrap_or(0)
                    + report["counts"]["running"].as_u64().unwrap_or(0);
                // The canary finished (whatever its part): the run pauses now.
                if open < report["total"].as_u64().unwrap_or(0) {
                    self.operator_as(None, &labels, json!({ "set": { "out": "" } }));
                    labelled = true;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let answer = self.block(call).expect("the fleet call's task");
        if !labelled {
            // The call ended before its canary did (it was refused): the label is set all the
            // same, so the step's operator actions do not depend on timing.
            self.operator_as(None, &labels, json!({ "set": { "out": "" } }));
        }
        self.operator_as(None, &labels, json!({ "remove": ["out"] }));
        answer
    }

    pub fn post(&self, path: &str, bearer: &str, body: Value) -> (u16, Value) {
        let url = format!("{}{path}", self.base());
        let (status, body) = self.block(send(&self.http, &url, bearer, &body));
        *self.last.borrow_mut() = body.clone();
        (status, body)
    }

    pub fn get(&self, path: &str) -> Value {
        self.block(async {
            let res = self
                .http
                .get(format!("{}{path}", self.base()))
                .bearer_auth(&self.admin)
                .send()
                .await
                .expect("root answers");
            assert!(res.status().is_success(), "GET {path}: {}", res.status());
            res.json().await.expect("JSON")
        })
    }

    /// A call over REST with lease `lease`'s bearer: `(status, body)`.
    pub fn call(&self, lease: usize, tool: &str, arguments: Value) -> (u16, Value) {
        self.post(
            "/v1/root/mcp/call",
            &self.leases[lease].1,
            json!({"tool_id": tool, "arguments": arguments}),
        )
    }

    /// The tool names `lease`'s bearer lists over MCP.
    pub fn tools_list(&self, lease: usize) -> std::collections::BTreeSet<String> {
        let url = format!("{}/mcp", self.base());
        self.block(async {
            let client = mcp_tests::mcp_client(&url, &self.leases[lease].1)
                .await
                .expect("an MCP session");
            let tools = client.list_all_tools().await.expect("tools/list");
            let _ = client.cancel().await;
            tools.iter().map(|t| t.name.to_string()).collect()
        })
    }

    /// `(events checked, chain verified)` from `audit verify`.
    /// The trail's events but refused credentials (`auth.refuse`, bounded per address and
    /// minute, so not the model's to predict: governance::roles tests them), and whether the
    /// chain verifies.
    pub fn audit_verify(&self) -> (usize, bool) {
        let v = self.get("/v1/root/mcp/audit/verify");
        // And the admin token's uses, gathered per address and minute.
        let refused: usize = ["auth.refuse", "admin.breakglass.use"]
            .iter()
            .map(|tool| {
                let page = self.get(&format!("/v1/root/mcp/audit?tool_id={tool}&limit=1000"));
                page["events"].as_array().map_or(0, Vec::len)
            })
            .sum();
        (
            (v["checked"].as_u64().unwrap_or(0) as usize).saturating_sub(refused),
            v["ok"].as_bool().unwrap_or(false),
        )
    }

    pub fn audit_count(&self) -> usize {
        self.audit_verify().0
    }

    pub fn event(&self, id: &str) -> Value {
        self.get(&format!("/v1/root/mcp/audit/{id}"))
    }

    /// Waits until root's view of every target agrees with the model's: connected or not,
    /// and, while connected, the hub reporting root's desired skill state and its owner's
    /// switch. Panics with root's view after 15 s.
    /// Every replica's view is checked (each asked in turn).
    pub fn settle(&self, m: &Model) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let step = self.via.get();
            let views: Vec<Value> = (0..self.replicas.len())
                .map(|r| {
                    self.via(r);
                    self.get("/v1/root/hubs")
                })
                .collect();
            self.via(step);
            let off: Vec<String> = (0..TARGETS.len())
                .filter(|&t| !views.iter().all(|view| agrees(view, t, m)))
                .map(|t| TARGETS[t].id.to_owned())
                .collect();
            if off.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "root's view of {off:?} never agreed with the model {:?}:\n{views:#?}\n{}",
                m.targets,
                self.root_logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // Processes first (their connections), then the schema.
        self.hubs.clear();
        for t in 0..TARGETS.len() {
            self.end_services(t);
        }
        self.replicas.clear();
        if let Some(schema) = self.schema.take() {
            self.rt.block_on(drop_schema(schema));
        }
    }
}

impl Schema {
    fn url(&self) -> String {
        let sep = if self.base_url.contains('?') {
            '&'
        } else {
            '?'
        };
        format!(
            "{}{sep}options=-c%20search_path%3D{}",
            self.base_url, self.name
        )
    }
}

async fn create_schema(base_url: &str) -> Schema {
    use sqlx::Connection;
    let name = format!("model_{}", uuid::Uuid::now_v7().simple());
    let mut conn = sqlx::PgConnection::connect(base_url)
        .await
        .expect("connect to MCP_TEST_DATABASE_URL");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
        .execute(&mut conn)
        .await
        .expect("CREATE SCHEMA");
    Schema {
        base_url: base_url.to_owned(),
        name,
    }
}

async fn drop_schema(schema: Schema) {
    use sqlx::Connection;
    if let Ok(mut conn) = sqlx::PgConnection::connect(&schema.base_url).await {
        let drop = format!("DROP SCHEMA IF EXISTS {} CASCADE", schema.name);
        let _ = sqlx::query(sqlx::AssertSqlSafe(drop))
            .execute(&mut conn)
            .await;
    }
}

/// `mcp-root serve` on `config`; quiet when a history fails (the divergence's message has
/// the last lines of every replica's log).
fn spawn_root(config: &Path, log: &Path) -> Proc {
    Proc::spawn(
        "mcp-root",
        Command::new(mcp_tests::workspace_bin("mcp-root").unwrap())
            .args(["serve", "--config"])
            .arg(config)
            .env("RUST_LOG", "info"),
        log.to_path_buf(),
    )
    .quiet()
}

/// Whether root's target list shows target `t` as the model has it.
fn agrees(view: &Value, t: usize, m: &Model) -> bool {
    let target = &m.targets[t];
    let Some(v) = view["targets"]
        .as_array()
        .and_then(|a| a.iter().find(|v| v["target_id"] == TARGETS[t].id))
    else {
        return !target.enrolled;
    };
    let connected = v["status"] != "offline";
    if connected != target.hub_running {
        return false;
    }
    let skill = &v["skill"];
    if skill["desired"]["installed"] != target.installed
        || skill["desired"]["enabled"] != target.enabled
    {
        return false;
    }
    if !target.hub_running {
        return true;
    }
    let hub = &skill["hub"];
    // What the replica routes by: the target's surface, published exactly while the skill is
    // open (a replica holding a stale surface shows it here).
    let published = v["descriptor"]["operational_surface"]["enabled"] == true;
    hub["installed"] == target.installed
        && hub["enabled"] == target.enabled
        && skill["owner_disabled"] == !target.owner_on
        && published == target.open()
}

/// The person at an MCP client that offers elicitation: answers every question `accept`.
#[derive(Clone)]
struct Person {
    accept: bool,
}

impl rmcp::ClientHandler for Person {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::builder()
                .enable_elicitation()
                .build(),
            rmcp::model::Implementation::new("governance-model", "0.1.0"),
        )
    }

    async fn create_elicitation(
        &self,
        _: rmcp::model::ElicitRequestParams,
        _: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        use rmcp::model::{ElicitResult, ElicitationAction};
        Ok(if self.accept {
            ElicitResult::new(ElicitationAction::Accept).with_content(json!({"confirm": true}))
        } else {
            ElicitResult::new(ElicitationAction::Decline)
        })
    }
}

impl World {
    /// A `tools/call` over an MCP session of `lease` whose client offers elicitation and
    /// answers `accept`; `(status, body)` in the REST call's shape (401 when the bearer opens
    /// no session).
    pub fn elicit_call(&self, lease: usize, tool: &str, args: Value, accept: bool) -> (u16, Value) {
        use rmcp::ServiceExt;
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let url = format!("{}/mcp", self.base());
        let bearer = self.leases[lease].1.clone();
        let tool = tool.to_owned();
        let (status, body) = self.block(async move {
            let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(bearer);
            let transport = StreamableHttpClientTransport::from_config(config);
            let Ok(client) = Person { accept }.serve(transport).await else {
                return (401, json!({"error": {"code": "unauthenticated"}}));
            };
            let params = rmcp::model::CallToolRequestParams::new(tool)
                .with_arguments(args.as_object().cloned().unwrap_or_default());
            let res = client.call_tool(params).await.expect("tools/call answers");
            let _ = client.cancel().await;
            let content = res.structured_content.unwrap_or(Value::Null);
            let event = res.meta.map_or(Value::Null, |m| m.0["event_id"].clone());
            if res.is_error == Some(true) {
                (
                    200,
                    json!({"ok": false, "error": content["error"], "event_id": event}),
                )
            } else {
                (
                    200,
                    json!({"ok": true, "result": content, "event_id": event}),
                )
            }
        });
        *self.last.borrow_mut() = body.clone();
        (status, body)
    }

    /// Whether `lease`'s bearer is refused an MCP session (a lease that is no bearer).
    pub fn refused(&self, lease: usize) -> bool {
        let url = format!("{}/mcp", self.base());
        self.block(async {
            match mcp_tests::mcp_client(&url, &self.leases[lease].1).await {
                Ok(client) => {
                    let _ = client.cancel().await;
                    false
                }
                Err(_) => true,
            }
        })
    }
}

/// How an OAuth sign-in came out, step by step.
pub enum SignInAnswer {
    /// The operator's approval was refused: its status and body.
    Refused(u16, Value),
    /// Approved (its answer) and exchanged for tokens (their status and body).
    Approved {
        approval: (u16, Value),
        tokens: (u16, Value),
        client_id: String,
    },
}

impl World {
    /// The scripted OAuth client of this step's replica.
    fn oauth(&self) -> mcp_tests::oauth::Client<'_> {
        mcp_tests::oauth::Client {
            http: &self.http,
            base: self.base().to_owned(),
        }
    }

    /// An MCP client signs in: registers, asks to be authorized, operator `by` approves for
    /// `target` and `profile`, and the client exchanges the code.
    pub fn sign_in(&self, by: Option<u8>, target: &str, profile: &str) -> SignInAnswer {
        let approver = match by {
            None => self.admin.clone(),
            Some(n) => self.operators[n as usize]
                .clone()
                .expect("an added operator"),
        };
        let oauth = self.oauth();
        self.block(async {
            let (_, registered) = oauth.register().await.expect("a registration");
            let client_id = registered["client_id"]
                .as_str()
                .expect("a client")
                .to_owned();
            let approval = oauth
                .approve(&client_id, &approver, target, profile)
                .await
                .expect("an approval's answer");
            if approval.status != 200 {
                return SignInAnswer::Refused(approval.status, approval.body);
            }
            let tokens = oauth
                .exchange(&client_id, &approval)
                .await
                .expect("the token endpoint answers");
            SignInAnswer::Approved {
                approval: (approval.status, approval.body),
                tokens,
                client_id,
            }
        })
    }

    /// `POST /oauth/token` with a form: `(status, body)`.
    pub fn oauth_token(&self, pairs: &[(&str, &str)]) -> (u16, Value) {
        let (status, body) = self
            .block(self.oauth().token(pairs))
            .expect("the token endpoint answers");
        *self.last.borrow_mut() = body.clone();
        (status, body)
    }

    /// `POST /oauth/revoke` of `token` by its client: the status.
    pub fn oauth_revoke(&self, client_id: &str, token: &str) -> u16 {
        self.block(self.oauth().revoke(client_id, token))
            .expect("the revocation endpoint answers")
    }

    /// The session id of the active lease of OAuth client `client_id` (its current access
    /// token).
    pub fn oauth_lease(&self, client_id: &str) -> String {
        let leases = self.get("/v1/root/mcp/sessions?limit=1000");
        let audience = format!("oauth:{client_id}");
        let active: Vec<&Value> = leases["sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .filter(|l| l["audience"] == audience.as_str() && l["status"] == "active")
            .collect();
        assert_eq!(active.len(), 1, "one live lease per sign-in: {active:?}");
        active[0]["session_id"].as_str().expect("an id").to_owned()
    }
}

/// A POST of `body` with `bearer`: its status and JSON body (`null` when it has none).
async fn send(http: &reqwest::Client, url: &str, bearer: &str, body: &Value) -> (u16, Value) {
    let res = http
        .post(url)
        .bearer_auth(bearer)
        .json(body)
        .send()
        .await
        .expect("root answers");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}
