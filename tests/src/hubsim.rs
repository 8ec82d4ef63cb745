//! A light hub simulator: many managed targets speaking the real root↔hub protocol from one
//! process, for fan-in measurements and tests (`mcp-hubsim`, `tests/integration/hubs/fanin.rs`).
//!
//! Each simulated hub is one tokio task holding one WebSocket to root's
//! `/v1/root/hubs/connect`: `hello` with its enrolment token and a descriptor publishing one
//! read tool, [`SIM_TOOL`], then `welcome`, heartbeats at the interval root announces, and
//! answers to signed `call`s. Calls pass the same final checks a real hub makes, with the
//! shared protocol's functions (signature with the key derived from the token, deadline,
//! replay of the call id, the tool is published); the answer is a canned `hub.get_status`
//! result naming the simulated target, so a routed call proves it reached the right hub.
//! Skill commands are answered with the skill's state (enable and disable change what is
//! published and announce `surface_changed`, as a real hub does).
//!
//! For fleet runs ([`FleetOptions::writes`]) each hub also publishes a test write,
//! [`SIM_WRITE`] (a test-only write scope): its dry run answers the expected effect; its
//! execute runs "the test" once per idempotency key, counted per target in
//! [`FleetStats::executions`], and answers a repeated key from the hub's ledger, as a real
//! hub does. [`Faults`] make chosen targets fail both tools, or answer them only after a
//! delay (the connection meanwhile keeps serving). [`Held`] holds calls on command: every
//! call of [`SIM_TOOL`] and every execute of [`SIM_WRITE`] waits until the test lets its
//! target's calls go, answered or failed; meanwhile a second execute of the same key is
//! answered `busy`, as a real hub's claim does.
//!
//! Memory per hub is kept small: WebSocket buffers of a few KiB, a short ring of recent call
//! ids, the target id and the derived key; no adapters, no files, no actors.
//!
//! Enrolment goes through root's REST API (`POST /v1/root/hubs`, as `mcp-root admin hub
//! enroll` does), several requests at once: [`enroll_all`].

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::protocol::{
    CallOutcome, CallRequest, Envelope, HubToRoot, MAX_FRAME_BYTES, PROTOCOL_VERSION, RootToHub,
    SkillCommand, SkillState, decode, signing_key, verify_call,
};
use mcp_shared::target::{
    ManagedTargetDescriptor, OperationalSurface, TargetPolicy, TargetStatus, Transport, WriteScope,
};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_util::sync::CancellationToken;

/// The one tool every simulated hub publishes and answers.
pub const SIM_TOOL: &str = "hub.get_status";
/// The test write a fleet's simulated hubs publish ([`FleetOptions::writes`]).
pub const SIM_WRITE: &str = "hub.run_allowed_tests";
/// The skill that publishes it (the name a real hub uses).
pub const SIM_SKILL: &str = "infra_access_skill";
/// `hub_version` in the canned status: says the answer came from the simulator.
pub const SIM_VERSION: &str = concat!("hubsim-", env!("CARGO_PKG_VERSION"));
/// Call ids remembered per hub for replay refusal (root never reuses one; this only proves
/// the check runs without letting memory grow with the call count).
const REPLAY_RING: usize = 32;
/// Socket buffer sizes per hub; frames in this protocol are small.
const SOCKET_BUFFER: usize = 4 * 1024;
/// How long root has to answer `hello`.
const WELCOME_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the simulator could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("root URL `{0}` must be http://HOST:PORT on a loopback host")]
    RootUrl(String),
    #[error("enrolling `{target_id}`: {message}")]
    Enroll { target_id: String, message: String },
    #[error("{failed} of {total} hubs were not welcomed: first failure: {first}")]
    Connect {
        failed: usize,
        total: usize,
        first: String,
    },
    #[error("{welcomed} of {total} hubs welcomed after {waited:?}")]
    ConnectTimeout {
        welcomed: usize,
        total: usize,
        waited: Duration,
    },
}

/// Why one hub's connection ended.
#[derive(Debug, thiserror::Error)]
enum ConnError {
    #[error("connect: {0}")]
    Connect(String),
    /// Root answered the upgrade `503`/`429`, perhaps with how long to wait.
    #[error("root is busy (retry after {0:?})")]
    Busy(Option<Duration>),
    #[error("websocket: {0}")]
    Socket(#[from] tokio_tungstenite::tungstenite::Error),
    #[error("root refused the hub: {0}")]
    Refused(String),
    #[error("no welcome within {0:?}")]
    NoWelcome(Duration),
    #[error("root closed the connection")]
    Closed,
    #[error("root silent for {0:?}")]
    Silent(Duration),
}

/// An enrolled target: its id and the hub token shown once at enrolment.
#[derive(Clone)]
pub struct Enrolled {
    pub target_id: String,
    pub token: String,
}

impl std::fmt::Debug for Enrolled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enrolled")
            .field("target_id", &self.target_id)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// `<prefix>-00000` … : the target ids of a simulated fleet, sorted as they are numbered.
pub fn target_ids(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:05}")).collect()
}

/// The WebSocket URL of root's hub endpoint for a root base URL (`http://127.0.0.1:PORT`).
pub fn connect_url(root_url: &str) -> Result<String, SimError> {
    let bad = || SimError::RootUrl(root_url.to_owned());
    let rest = root_url.strip_prefix("http://").ok_or_else(bad)?;
    let authority = rest.split('/').next().unwrap_or_default();
    let host = if authority.starts_with('[') {
        authority.split(']').next().map(|h| format!("{h}]"))
    } else {
        authority.split(':').next().map(str::to_owned)
    }
    .unwrap_or_default();
    if !matches!(host.as_str(), "127.0.0.1" | "localhost" | "[::1]") {
        return Err(bad());
    }
    Ok(format!("ws://{authority}/v1/root/hubs/connect"))
}

/// Enrols `targets` on `root` for simulated hubs (environment `test`, subnet `subnet-sim`,
/// eight at a time).
pub async fn enroll_on(root: &crate::TestRoot, targets: &[String]) -> Vec<Enrolled> {
    let base = root.handle().base_url();
    enroll_all(
        &root.http,
        &base,
        &root.admin_token(),
        targets,
        "test",
        "subnet-sim",
        8,
    )
    .await
    .expect("the simulated hubs enrolled")
}

/// Enrols every target in `environment` (subnet `subnet`) through `POST /v1/root/hubs`,
/// `concurrency` requests at a time; the tokens in the order of `targets`.
pub async fn enroll_all(
    http: &reqwest::Client,
    root_url: &str,
    admin_token: &str,
    targets: &[String],
    environment: &str,
    subnet: &str,
    concurrency: usize,
) -> Result<Vec<Enrolled>, SimError> {
    let url = format!("{}/v1/root/hubs", root_url.trim_end_matches('/'));
    let results: Vec<Result<Enrolled, SimError>> = futures::stream::iter(targets.iter())
        .map(|target_id| {
            let (http, url) = (http.clone(), url.clone());
            async move {
                let fail = |message: String| SimError::Enroll {
                    target_id: target_id.clone(),
                    message,
                };
                let res = http
                    .post(&url)
                    .bearer_auth(admin_token)
                    .json(&json!({
                        "target_id": target_id,
                        "environment": environment,
                        "subnet_id": subnet,
                    }))
                    .send()
                    .await
                    .map_err(|e| fail(e.to_string()))?;
                let status = res.status();
                let body: Value = res.json().await.map_err(|e| fail(e.to_string()))?;
                if !status.is_success() {
                    return Err(fail(format!("{status}: {body}")));
                }
                let token = body["token"]
                    .as_str()
                    .ok_or_else(|| fail(format!("no token in {body}")))?
                    .to_owned();
                Ok(Enrolled {
                    target_id: target_id.clone(),
                    token,
                })
            }
        })
        .buffered(concurrency.max(1))
        .collect()
        .await;
    results.into_iter().collect()
}

/// Counters of a running fleet (all hubs together).
#[derive(Debug, Default)]
pub struct FleetStats {
    /// Hubs holding a welcomed connection right now.
    pub connected: AtomicUsize,
    /// Connections welcomed, first ones and reconnects.
    pub welcomes: AtomicUsize,
    /// Calls answered with the canned result.
    pub calls_ok: AtomicUsize,
    /// Calls refused by the final checks (signature, deadline, replay, tool).
    pub calls_refused: AtomicUsize,
    /// Skill commands answered.
    pub skill_commands: AtomicUsize,
    /// Protocol errors root reported.
    pub protocol_errors: AtomicUsize,
    /// Connections that ended other than by shutdown.
    pub disconnects: AtomicUsize,
    /// Upgrades root answered busy (`503`/`429`).
    pub busy: AtomicUsize,
    /// Times each target ran its test write (a key answered from the ledger does not count).
    pub executions: std::sync::Mutex<HashMap<String, u32>>,
}

/// Targets whose simulated tools fail, and targets that answer only after a delay.
#[derive(Debug, Default, Clone)]
pub struct Faults {
    pub failing: HashSet<String>,
    pub slow: HashMap<String, Duration>,
}

/// Calls held on command (see the module's header), shared by every hub of a fleet.
#[derive(Debug, Default)]
pub struct Held {
    state: std::sync::Mutex<HeldState>,
    changed: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct HeldState {
    /// Calls waiting now, per target.
    waiting: HashMap<String, usize>,
    /// Each target's releases: how many so far, and whether the last one fails its calls.
    released: HashMap<String, (u64, bool)>,
    /// Calls held per target since the start (a `busy` or replayed execute is not held).
    held: HashMap<String, u32>,
}

impl Held {
    fn state(&self) -> std::sync::MutexGuard<'_, HeldState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Calls of `target_id` waiting now.
    pub fn waiting(&self, target_id: &str) -> usize {
        self.state().waiting.get(target_id).copied().unwrap_or(0)
    }

    /// Calls held per target since the start.
    pub fn held(&self) -> HashMap<String, u32> {
        self.state().held.clone()
    }

    /// Lets every call of `target_id` waiting now go: answered, or failed (`adapter_failed`).
    pub fn release(&self, target_id: &str, fail: bool) {
        let mut s = self.state();
        let r = s.released.entry(target_id.to_owned()).or_default();
        *r = (r.0 + 1, fail);
        drop(s);
        self.changed.notify_waiters();
    }

    /// Waits until `target_id`'s calls are let go; whether they fail.
    async fn wait(&self, target_id: &str) -> bool {
        let since = {
            let mut s = self.state();
            *s.waiting.entry(target_id.to_owned()).or_default() += 1;
            *s.held.entry(target_id.to_owned()).or_default() += 1;
            s.released.get(target_id).map_or(0, |r| r.0)
        };
        loop {
            let changed = self.changed.notified();
            {
                let mut s = self.state();
                if let Some(&(n, fail)) = s.released.get(target_id)
                    && n > since
                {
                    if let Some(w) = s.waiting.get_mut(target_id) {
                        *w = w.saturating_sub(1);
                    }
                    return fail;
                }
            }
            changed.await;
        }
    }
}

/// A write's execution by idempotency key: running, or its answer.
#[derive(Debug, Clone)]
enum Entry {
    Running,
    Done(CallOutcome),
}

/// A running fleet of simulated hubs; [`Fleet::shutdown`] closes them all.
pub struct Fleet {
    pub stats: Arc<FleetStats>,
    /// From the first dial to the last hub's first welcome.
    pub registration: Duration,
    shutdown: CancellationToken,
    tasks: tokio::task::JoinSet<()>,
}

/// How a fleet connects.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Environment every hub announces (must match its enrolment).
    pub environment: String,
    /// Subnet and zone in the canned status.
    pub subnet: String,
    pub zone: String,
    /// Handshakes (dial, hello, welcome) in progress at once.
    pub connect_concurrency: usize,
    /// How long to wait for every hub's first welcome.
    pub connect_timeout: Duration,
    /// Publish [`SIM_WRITE`] too, with a test-only write scope.
    pub writes: bool,
    pub faults: Arc<Faults>,
    /// Hold calls until the test lets them go ([`Held`]).
    pub held: Option<Arc<Held>>,
}

impl Default for FleetOptions {
    fn default() -> Self {
        FleetOptions {
            environment: "test".into(),
            subnet: "subnet-sim".into(),
            zone: "zone-local".into(),
            connect_concurrency: 64,
            connect_timeout: Duration::from_secs(120),
            writes: false,
            faults: Arc::new(Faults::default()),
            held: None,
        }
    }
}

/// What every hub of a fleet shares.
struct Shared {
    url: String,
    opts: FleetOptions,
    stats: Arc<FleetStats>,
    started_at: String,
    started: Instant,
    shutdown: CancellationToken,
    handshakes: Semaphore,
}

impl Fleet {
    /// Connects one simulated hub per enrolled target and waits until root has welcomed every
    /// one of them (or one was refused, or `connect_timeout` passed).
    pub async fn connect(
        root_url: &str,
        hubs: Vec<Enrolled>,
        opts: FleetOptions,
    ) -> Result<Fleet, SimError> {
        let url = connect_url(root_url)?;
        let total = hubs.len();
        let stats = Arc::new(FleetStats::default());
        let shutdown = CancellationToken::new();
        let shared = Arc::new(Shared {
            url,
            handshakes: Semaphore::new(opts.connect_concurrency.max(1)),
            opts,
            stats: stats.clone(),
            started_at: mcp_shared::time::format(mcp_shared::time::now()),
            started: Instant::now(),
            shutdown: shutdown.clone(),
        });
        let (first_tx, mut first_rx) = mpsc::channel::<Result<(), String>>(total.max(1));
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for e in hubs {
            let hub = SimHub::new(shared.clone(), e);
            tasks.spawn(hub.run(first_tx.clone()));
        }
        drop(first_tx);
        let mut fleet = Fleet {
            stats,
            registration: Duration::ZERO,
            shutdown,
            tasks,
        };
        let timeout = shared.opts.connect_timeout;
        let mut welcomed = 0usize;
        let mut failures = Vec::new();
        let waited = tokio::time::timeout(timeout, async {
            while welcomed + failures.len() < total {
                match first_rx.recv().await {
                    Some(Ok(())) => welcomed += 1,
                    Some(Err(e)) => failures.push(e),
                    None => break,
                }
            }
        })
        .await;
        fleet.registration = started.elapsed();
        if let Some(first) = failures.first().cloned() {
            fleet.shutdown().await;
            return Err(SimError::Connect {
                failed: failures.len(),
                total,
                first,
            });
        }
        if waited.is_err() || welcomed < total {
            fleet.shutdown().await;
            return Err(SimError::ConnectTimeout {
                welcomed,
                total,
                waited: timeout,
            });
        }
        Ok(fleet)
    }

    /// Closes every connection and waits for the tasks to end.
    pub async fn shutdown(&mut self) {
        self.shutdown.cancel();
        while self.tasks.join_next().await.is_some() {}
    }
}

/// One simulated hub.
struct SimHub {
    shared: Arc<Shared>,
    target_id: String,
    token: String,
    key: [u8; 32],
    /// Whether the skill publishes [`SIM_TOOL`] (skill commands flip it).
    enabled: bool,
    installed: bool,
    recent: VecDeque<String>,
    /// The test write's executions by idempotency key (shared with held calls' tasks).
    ledger: Arc<std::sync::Mutex<HashMap<String, Entry>>>,
}

/// What a call comes to: an answer now, or one once [`Held`] lets it go.
enum Answer {
    Now(CallOutcome),
    Held(Arc<Held>, HeldCall),
}

/// A held call: what its answer is made of once let go.
struct HeldCall {
    target_id: String,
    tool_id: String,
    /// An execute's key (its ledger entry is `Running` meanwhile).
    key: Option<String>,
    test: String,
    /// The canned status, for a read.
    status: Value,
    ledger: Arc<std::sync::Mutex<HashMap<String, Entry>>>,
}

impl HeldCall {
    /// Waits to be let go; the answer.
    async fn answer(self, held: Arc<Held>) -> CallOutcome {
        let fail = held.wait(&self.target_id).await;
        self.outcome(fail)
    }

    /// The call's answer (a failure on command with `fail`), recorded in the ledger for a
    /// keyed execute.
    fn outcome(self, fail: bool) -> CallOutcome {
        let outcome = if fail {
            CallOutcome::Error {
                adapter: None,
                error: ToolError::new(
                    ErrorCode::AdapterFailed,
                    format!("`{}` failed on command (simulated)", self.tool_id),
                ),
            }
        } else if self.tool_id == SIM_WRITE {
            CallOutcome::Ok {
                adapter: format!("{SIM_SKILL}.test_runs"),
                result: test_result(&self.test),
            }
        } else {
            CallOutcome::Ok {
                adapter: format!("{SIM_SKILL}.status"),
                result: self.status,
            }
        };
        if let Some(key) = self.key {
            self.ledger
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, Entry::Done(outcome.clone()));
        }
        outcome
    }
}

/// A test run's result.
fn test_result(test: &str) -> Value {
    json!({
        "run_id": uuid::Uuid::now_v7().to_string(), "test": test, "passed": true,
        "exit_code": 0, "timed_out": false, "duration_ms": 0,
        "started_at": mcp_shared::time::format(mcp_shared::time::now()),
        "output_tail": "", "redactions": 0,
    })
}

/// A call's answer to send, counted in `stats` as answered or refused.
fn result(stats: &FleetStats, call_id: String, outcome: CallOutcome, reply_to: String) -> Message {
    let counter = match outcome {
        CallOutcome::Ok { .. } => &stats.calls_ok,
        CallOutcome::Error { .. } => &stats.calls_refused,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    envelope(HubToRoot::Result { call_id, outcome }, Some(reply_to))
}

fn envelope(body: HubToRoot, in_reply_to: Option<String>) -> Message {
    let env = Envelope {
        v: PROTOCOL_VERSION,
        id: uuid::Uuid::now_v7().to_string(),
        in_reply_to,
        body,
    };
    Message::text(serde_json::to_string(&env).unwrap_or_default())
}

impl SimHub {
    fn new(shared: Arc<Shared>, e: Enrolled) -> SimHub {
        SimHub {
            shared,
            key: signing_key(&e.token),
            target_id: e.target_id,
            token: e.token,
            enabled: true,
            installed: true,
            recent: VecDeque::with_capacity(REPLAY_RING),
            ledger: Arc::default(),
        }
    }

    /// The tools this hub's skill serves.
    fn tools(&self) -> Vec<String> {
        if self.shared.opts.writes {
            vec![SIM_TOOL.into(), SIM_WRITE.into()]
        } else {
            vec![SIM_TOOL.into()]
        }
    }

    fn skill_state(&self) -> SkillState {
        SkillState {
            skill: SIM_SKILL.into(),
            installed: self.installed,
            enabled: self.enabled,
            published: if self.enabled && self.installed {
                self.tools()
            } else {
                Vec::new()
            },
            owner_disabled: false,
            version: Some("hubsim".into()),
            adapters: self.tools(),
        }
    }

    fn descriptor(&self) -> ManagedTargetDescriptor {
        ManagedTargetDescriptor {
            target_id: self.target_id.clone(),
            kind: "hub".into(),
            environment: self.shared.opts.environment.clone(),
            status: TargetStatus::Online,
            transport: Transport {
                channel: "hub_root_protocol".into(),
            },
            operational_surface: OperationalSurface {
                published_by: format!("skill:{SIM_SKILL}"),
                enabled: self.enabled && self.installed,
                capabilities: self.skill_state().published,
            },
            policy: TargetPolicy {
                write_scope: if self.shared.opts.writes {
                    WriteScope::TestOnly
                } else {
                    WriteScope::None
                },
            },
        }
    }

    /// The canned `hub.get_status` answer: the contract's output shape, this target's id.
    fn status(&self, connected_since: &str) -> Value {
        json!({
            "target_id": self.target_id,
            "environment": self.shared.opts.environment,
            "subnet": self.shared.opts.subnet,
            "zone": self.shared.opts.zone,
            "hub_version": SIM_VERSION,
            "protocol_version": PROTOCOL_VERSION,
            "started_at": self.shared.started_at,
            "uptime_sec": self.shared.started.elapsed().as_secs(),
            "connected": true,
            "connected_since": connected_since,
            "skills": [self.skill_state()],
        })
    }

    /// The final checks a real hub makes, in its order; the answer to send, now or once let
    /// go.
    fn answer(&mut self, call: &CallRequest, connected_since: &str) -> Answer {
        match (self.checked(call, connected_since), &self.shared.opts.held) {
            (Err(now), _) => Answer::Now(now),
            (Ok(call), Some(held)) => Answer::Held(held.clone(), call),
            (Ok(call), None) => Answer::Now(call.outcome(false)),
        }
    }

    /// [`SimHub::answer`]'s checks: `Err` is the answer now, `Ok` a call that runs (held
    /// first, with [`Held`]).
    fn checked(
        &mut self,
        call: &CallRequest,
        connected_since: &str,
    ) -> Result<HeldCall, CallOutcome> {
        let refuse = |code, message: String| {
            Err(CallOutcome::Error {
                adapter: None,
                error: ToolError::new(code, message),
            })
        };
        let now_ms = mcp_shared::time::unix_ms(mcp_shared::time::now());
        if !verify_call(call, &self.key) {
            return refuse(
                ErrorCode::SignatureInvalid,
                "the call's signature does not verify with this hub's key".into(),
            );
        }
        if call.expires_at_ms <= now_ms {
            return refuse(
                ErrorCode::DeadlineExpired,
                format!(
                    "the call's deadline passed {} ms ago",
                    now_ms - call.expires_at_ms
                ),
            );
        }
        if self.recent.iter().any(|id| *id == call.call_id) {
            return refuse(
                ErrorCode::ReplayRejected,
                format!("call id `{}` was already received", call.call_id),
            );
        }
        if self.recent.len() == REPLAY_RING {
            self.recent.pop_front();
        }
        self.recent.push_back(call.call_id.clone());
        if !self.enabled || !self.tools().contains(&call.tool_id) {
            return refuse(
                ErrorCode::SkillDisabled,
                format!("no enabled skill publishes `{}` here", call.tool_id),
            );
        }
        if self.shared.opts.faults.failing.contains(&self.target_id) {
            return refuse(
                ErrorCode::AdapterFailed,
                format!("`{}` failed on command (simulated)", call.tool_id),
            );
        }
        if call.tool_id == SIM_WRITE {
            return self.write(call);
        }
        let status = self.status(connected_since);
        Ok(HeldCall {
            target_id: self.target_id.clone(),
            tool_id: call.tool_id.clone(),
            key: None,
            test: String::new(),
            status,
            ledger: self.ledger.clone(),
        })
    }

    /// The test write: its dry run's expected effect, or its execution once per key (a key
    /// still running is `busy`; a finished one answers its first execution).
    fn write(&mut self, call: &CallRequest) -> Result<HeldCall, CallOutcome> {
        let adapter = format!("{SIM_SKILL}.test_runs");
        let test = call.body.arguments["name"]
            .as_str()
            .unwrap_or("smoke")
            .to_owned();
        if call.body.dry_run {
            let effect = json!({
                "action": "run_allowed_test", "test": test, "argv": ["true"], "cwd": null,
                "timeout_ms": 1000, "last_result": null,
            });
            return Err(CallOutcome::Ok {
                adapter,
                result: effect,
            });
        }
        let key = call.body.idempotency_key.clone().unwrap_or_default();
        if !key.is_empty() {
            let mut ledger = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
            match ledger.get(&key) {
                Some(Entry::Done(first)) => return Err(first.clone()),
                Some(Entry::Running) => {
                    return Err(CallOutcome::Error {
                        adapter: Some(adapter),
                        error: ToolError::new(
                            ErrorCode::Busy,
                            format!(
                                "a call with idempotency key `{key}` is still running; retry later"
                            ),
                        ),
                    });
                }
                None => {
                    ledger.insert(key.clone(), Entry::Running);
                }
            }
        }
        *self
            .shared
            .stats
            .executions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(self.target_id.clone())
            .or_default() += 1;
        Ok(HeldCall {
            target_id: self.target_id.clone(),
            tool_id: call.tool_id.clone(),
            key: (!key.is_empty()).then_some(key),
            test,
            status: Value::Null,
            ledger: self.ledger.clone(),
        })
    }

    /// Connects, and reconnects after a connection ends, until shutdown, as a real hub does:
    /// its jittered exponential backoff (the default 200 ms to 10 s), at least as long as a
    /// busy root asks. The first connection's outcome (welcomed, or why not) goes to `first`.
    async fn run(mut self, first: mpsc::Sender<Result<(), String>>) {
        let mut first = Some(first);
        let seed = {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write(self.target_id.as_bytes());
            h.finish()
        };
        let mut backoff = mcp_hub::Backoff::seeded(200, 10_000, seed);
        let shutdown = self.shared.shutdown.clone();
        loop {
            let res = tokio::select! {
                () = shutdown.cancelled() => return,
                res = self.session(&mut first, &mut backoff) => res,
            };
            if let Some(tx) = first.take() {
                // Never welcomed: the fleet reports it instead of retrying forever.
                let msg = match res {
                    Ok(()) => "ended before welcome".to_owned(),
                    Err(e) => e.to_string(),
                };
                let _ = tx.send(Err(format!("{}: {msg}", self.target_id))).await;
                return;
            }
            if self.shared.shutdown.is_cancelled() {
                return;
            }
            self.shared
                .stats
                .disconnects
                .fetch_add(1, Ordering::Relaxed);
            let delay = match res {
                Err(ConnError::Busy(Some(asked))) => {
                    self.shared.stats.busy.fetch_add(1, Ordering::Relaxed);
                    backoff.delay_after(asked)
                }
                Err(ConnError::Busy(None)) => {
                    self.shared.stats.busy.fetch_add(1, Ordering::Relaxed);
                    backoff.next_delay()
                }
                _ => backoff.next_delay(),
            };
            tokio::select! {
                () = self.shared.shutdown.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// One connection from dial to its end.
    async fn session(
        &mut self,
        first: &mut Option<mpsc::Sender<Result<(), String>>>,
        backoff: &mut mcp_hub::Backoff,
    ) -> Result<(), ConnError> {
        let permit = self.shared.handshakes.acquire().await.ok();
        let cfg = WebSocketConfig::default()
            .read_buffer_size(SOCKET_BUFFER)
            .write_buffer_size(0)
            .max_message_size(Some(MAX_FRAME_BYTES))
            .max_frame_size(Some(MAX_FRAME_BYTES));
        // The hub's own upgrade request: the token rides in `Authorization`.
        let request = mcp_hub::upgrade_request(&self.shared.url, &self.token)
            .map_err(|e| ConnError::Connect(e.to_string()))?;
        let (mut ws, _) = tokio_tungstenite::connect_async_with_config(request, Some(cfg), true)
            .await
            .map_err(
                |e| match mcp_hub::ChannelError::of_upgrade(&self.shared.url, e) {
                    busy @ mcp_hub::ChannelError::Busy { .. } => {
                        ConnError::Busy(busy.retry_after())
                    }
                    other => ConnError::Connect(other.to_string()),
                },
            )?;
        let hello = envelope(
            HubToRoot::Hello {
                protocol_version: PROTOCOL_VERSION,
                token: self.token.clone(),
                descriptor: self.descriptor(),
                skills: vec![self.skill_state()],
                features: mcp_shared::protocol::announce(None),
            },
            None,
        );
        ws.send(hello).await?;
        let interval = tokio::time::timeout(WELCOME_TIMEOUT, async {
            loop {
                let text = match ws.next().await {
                    None | Some(Ok(Message::Close(_))) => return Err(ConnError::Closed),
                    Some(Err(e)) => return Err(e.into()),
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(_)) => continue,
                };
                match decode::<RootToHub>(&text).map(|e| e.body) {
                    Ok(RootToHub::Welcome {
                        heartbeat_interval_ms,
                        ..
                    }) => return Ok(heartbeat_interval_ms),
                    Ok(RootToHub::ProtocolError { message }) => {
                        return Err(ConnError::Refused(message));
                    }
                    Ok(_) => continue,
                    Err(e) => return Err(ConnError::Refused(format!("undecodable frame: {e}"))),
                }
            }
        })
        .await
        .map_err(|_| ConnError::NoWelcome(WELCOME_TIMEOUT))??;
        drop(permit);
        let connected_since = mcp_shared::time::format(mcp_shared::time::now());
        let stats = &self.shared.stats;
        stats.welcomes.fetch_add(1, Ordering::Relaxed);
        backoff.reset();
        stats.connected.fetch_add(1, Ordering::Relaxed);
        if let Some(tx) = first.take() {
            let _ = tx.send(Ok(())).await;
        }
        let heartbeat = Duration::from_millis(interval.max(50));
        let res = self.serve(&mut ws, heartbeat, &connected_since).await;
        self.shared.stats.connected.fetch_sub(1, Ordering::Relaxed);
        let _ = ws.close(None).await;
        res
    }

    /// The welcomed connection: answers root's frames and sends heartbeats.
    async fn serve<S>(
        &mut self,
        ws: &mut S,
        heartbeat: Duration,
        connected_since: &str,
    ) -> Result<(), ConnError>
    where
        S: futures::Sink<Message, Error = tokio_tungstenite::tungstenite::Error>
            + futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>>
            + Unpin,
    {
        let mut ticker =
            tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let silence = heartbeat * 3;
        let mut last_heard = tokio::time::Instant::now();
        let mut pace = mcp_shared::protocol::HeartbeatPace::new(heartbeat);
        let stats = self.shared.stats.clone();
        // Answers a slow target sends later, while the connection goes on.
        let (later_tx, mut later) = mpsc::channel::<Message>(64);
        let delay = self.shared.opts.faults.slow.get(&self.target_id).copied();
        loop {
            let msg = tokio::select! {
                () = self.shared.shutdown.cancelled() => return Ok(()),
                Some(answer) = later.recv() => {
                    ws.send(answer).await?;
                    continue;
                }
                _ = ticker.tick() => {
                    if last_heard.elapsed() > silence {
                        return Err(ConnError::Silent(silence));
                    }
                    if pace.on_tick() {
                        ws.send(envelope(HubToRoot::Heartbeat, None)).await?;
                    }
                    continue;
                }
                msg = ws.next() => msg,
            };
            last_heard = tokio::time::Instant::now();
            let text = match msg {
                None | Some(Ok(Message::Close(_))) => return Err(ConnError::Closed),
                Some(Err(e)) => return Err(e.into()),
                Some(Ok(Message::Text(t))) => t,
                Some(Ok(_)) => continue,
            };
            let env = match decode::<RootToHub>(&text) {
                Ok(env) => env,
                Err(e) => {
                    let message = e.to_string();
                    ws.send(envelope(HubToRoot::ProtocolError { message }, None))
                        .await?;
                    continue;
                }
            };
            match env.body {
                RootToHub::Call(call) => {
                    let outcome = match self.answer(&call, connected_since) {
                        Answer::Now(outcome) => outcome,
                        Answer::Held(held, waiting) => {
                            // Answered once let go, while the connection goes on (an answer
                            // to a connection that ended meanwhile is dropped).
                            let (tx, stats, reply_to) = (later_tx.clone(), stats.clone(), env.id);
                            tokio::spawn(async move {
                                let outcome = waiting.answer(held).await;
                                let reply = result(&stats, call.call_id, outcome, reply_to);
                                let _ = tx.send(reply).await;
                            });
                            continue;
                        }
                    };
                    let reply = result(&stats, call.call_id, outcome, env.id);
                    match delay {
                        Some(d) => {
                            let tx = later_tx.clone();
                            tokio::spawn(async move {
                                tokio::time::sleep(d).await;
                                let _ = tx.send(reply).await;
                            });
                        }
                        None => ws.send(reply).await?,
                    }
                }
                RootToHub::SkillCommand { skill, command } => {
                    stats.skill_commands.fetch_add(1, Ordering::Relaxed);
                    if skill != SIM_SKILL {
                        let message = format!("skill command failed: no skill `{skill}` here");
                        ws.send(envelope(HubToRoot::ProtocolError { message }, Some(env.id)))
                            .await?;
                        continue;
                    }
                    match command {
                        SkillCommand::Install => self.installed = true,
                        SkillCommand::Uninstall => self.installed = false,
                        SkillCommand::Enable => self.enabled = true,
                        SkillCommand::Disable => self.enabled = false,
                        SkillCommand::Status => {}
                    }
                    if command != SkillCommand::Status {
                        let changed = HubToRoot::SurfaceChanged {
                            descriptor: self.descriptor(),
                            skills: vec![self.skill_state()],
                        };
                        ws.send(envelope(changed, None)).await?;
                    }
                    ws.send(envelope(
                        HubToRoot::SkillState(self.skill_state()),
                        Some(env.id),
                    ))
                    .await?;
                }
                // As a real hub: root's heartbeat answered (see `HeartbeatPace`).
                RootToHub::Heartbeat => {
                    if pace.answer_root() {
                        ws.send(envelope(HubToRoot::Heartbeat, None)).await?;
                    }
                }
                // A slow answer is sent anyway (root drops what it no longer waits for).
                RootToHub::Cancel { .. } | RootToHub::Welcome { .. } => {}
                RootToHub::ProtocolError { .. } => {
                    stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// Resident memory of process `pid` in KiB (`VmRSS` in `/proc/<pid>/status`).
pub fn rss_kib(pid: u32) -> std::io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("no VmRSS line in /proc/{pid}/status"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_url_is_loopback_only() {
        assert_eq!(
            connect_url("http://127.0.0.1:8700").unwrap(),
            "ws://127.0.0.1:8700/v1/root/hubs/connect"
        );
        assert_eq!(
            connect_url("http://[::1]:1/").unwrap(),
            "ws://[::1]:1/v1/root/hubs/connect"
        );
        assert!(connect_url("http://10.0.0.1:8700").is_err());
        assert!(connect_url("https://127.0.0.1:8700").is_err());
    }

    #[test]
    fn target_ids_sort_as_numbered() {
        let ids = target_ids("sim", 12);
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        assert_eq!(ids[11], "sim-00011");
    }
}
