//! ProfileOps on the hub: the hub is the profiling authority for its managed services.
//!
//! One ractor actor, `ProfileOps`, owns every change to the profiling state: it starts
//! sessions (restarting a service into its `profiling_argv` first when asked), stops them,
//! finishes them (artifact, growth, incident) and marks them published. Each running session
//! samples in a task of its own; readers (`hub.memory.get_status`, `list_sessions`,
//! `get_session`, `list_incidents`, `list_artifacts`, `get_artifact`) read the shared index
//! without waiting for the actor.
//!
//! - A sample reads `/proc/<pid>/smaps_rollup` (RSS, PSS, anonymous, swap) and falls back to
//!   `/proc/<pid>/status` (`VmRSS`, `RssAnon`, `VmSwap`; no PSS) when it cannot be read. A
//!   session samples at once and then every `interval_ms` until `duration_sec` has passed, it
//!   is stopped, or the process is gone (then it ends `failed`, keeping its samples).
//! - Each sample is also appended to `<state_dir>/profiles/<session>.samples.jsonl`, so a
//!   session cut short by a hub crash keeps what it sampled.
//! - At its end a session's samples become an artifact, `<state_dir>/profiles/<artifact>.json`
//!   (with its size and SHA-256 in the index); growth over the window (last minus first RSS,
//!   percent of the first, least-squares slope) is computed, and an incident is raised when
//!   growth reaches `[profiling] growth_threshold_bytes` or `growth_threshold_percent`.
//! - Sessions, incidents and artifact records are kept in `<state_dir>/profiles/index.json`
//!   (written atomically before a change is visible or answered), so they survive a hub
//!   restart; a session still `running` in the file when the hub starts (or when the hub
//!   stops) is finished as `interrupted` with the samples it had.
//! - A session that restarted its service into profiling mode returns it to its normal
//!   `argv` when it ends (completed, stopped or failed; not when the hub itself stops, which
//!   stops the service too). The actor does this before it takes its next message, so a new
//!   session for the service cannot race the restart; a restart that fails is logged and the
//!   service's `mode` (in `hub.get_status`) still says `profiling`.
//! - Limits: at most `max_concurrent_sessions` sessions and one per service sample at once
//!   (else `busy`); the last [`KEEP_SESSIONS`] sessions (with their artifacts) and
//!   [`KEEP_INCIDENTS`] incidents are kept.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use ractor::rpc::CallResult;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::config::{HubConfig, ProfilingConfig};
use crate::context::HubContext;
use crate::services::{Mode, ServiceState, kb_field};

/// Directory of the profiling state under `state_dir`.
pub const PROFILES_DIR: &str = "profiles";
/// The index file in that directory.
pub const INDEX_FILE: &str = "index.json";
/// `format` of an artifact file.
pub const ARTIFACT_FORMAT: &str = "mcp-hub.memory-profile/v1";
/// Sessions kept (oldest dropped first, with their artifacts).
pub const KEEP_SESSIONS: usize = 200;
/// Incidents kept.
pub const KEEP_INCIDENTS: usize = 500;
/// Samples `get_session` shows of a session (the newest).
pub const RECENT_SAMPLES: usize = 60;
/// Smallest chunk of a chunked artifact delivery.
pub const MIN_CHUNK_BYTES: u64 = 1024;
/// Accepted sampling intervals, in ms.
pub const INTERVAL_MS: std::ops::RangeInclusive<u64> = 100..=60_000;
/// Accepted session durations, in seconds.
pub const DURATION_SEC: std::ops::RangeInclusive<u64> = 1..=3_600;

/// One memory sample of a process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sample {
    /// Milliseconds since the session started.
    pub t_ms: u64,
    pub rss_bytes: u64,
    /// `None` when only `/proc/<pid>/status` could be read.
    pub pss_bytes: Option<u64>,
    pub anon_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
    /// `smaps_rollup` or `status`.
    pub source: String,
}

/// Reads one sample of `pid` (`None` once the process is gone).
pub fn sample(pid: u32, t_ms: u64) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    if let Ok(rollup) = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        && let Some(rss) = kb_field(&rollup, "Rss")
    {
        return Some(Sample {
            t_ms,
            rss_bytes: rss,
            pss_bytes: kb_field(&rollup, "Pss"),
            anon_bytes: kb_field(&rollup, "Anonymous"),
            swap_bytes: kb_field(&rollup, "Swap"),
            source: "smaps_rollup".into(),
        });
    }
    Some(Sample {
        t_ms,
        rss_bytes: kb_field(&status, "VmRSS")?,
        pss_bytes: None,
        anon_bytes: kb_field(&status, "RssAnon"),
        swap_bytes: kb_field(&status, "VmSwap"),
        source: "status".into(),
    })
}

/// RSS growth over a session's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Growth {
    pub start_rss_bytes: u64,
    pub end_rss_bytes: u64,
    pub peak_rss_bytes: u64,
    /// `end - start` (negative when it shrank).
    pub growth_bytes: i64,
    /// Of `start`; `None` when `start` is 0.
    pub growth_percent: Option<f64>,
    /// Least-squares slope of RSS over time; `None` with fewer than two samples.
    pub slope_bytes_per_sec: Option<f64>,
}

/// Growth of `samples` (`None` when there are none).
pub fn growth(samples: &[Sample]) -> Option<Growth> {
    let first = samples.first()?;
    let last = samples.last()?;
    let peak = samples.iter().map(|s| s.rss_bytes).max()?;
    let growth_bytes = i64::try_from(last.rss_bytes).unwrap_or(i64::MAX)
        - i64::try_from(first.rss_bytes).unwrap_or(i64::MAX);
    let growth_percent =
        (first.rss_bytes > 0).then(|| growth_bytes as f64 * 100.0 / first.rss_bytes as f64);
    let slope = if samples.len() >= 2 {
        let n = samples.len() as f64;
        let xs = samples.iter().map(|s| s.t_ms as f64 / 1000.0);
        let mean_x = xs.clone().sum::<f64>() / n;
        let mean_y = samples.iter().map(|s| s.rss_bytes as f64).sum::<f64>() / n;
        let (mut num, mut den) = (0.0, 0.0);
        for (x, s) in xs.zip(samples) {
            num += (x - mean_x) * (s.rss_bytes as f64 - mean_y);
            den += (x - mean_x) * (x - mean_x);
        }
        (den > 0.0).then(|| num / den)
    } else {
        None
    };
    Some(Growth {
        start_rss_bytes: first.rss_bytes,
        end_rss_bytes: last.rss_bytes,
        peak_rss_bytes: peak,
        growth_bytes,
        growth_percent,
        slope_bytes_per_sec: slope,
    })
}

/// Where a session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    Running,
    /// Sampled for its whole duration.
    Completed,
    /// Stopped by `hub.memory.stop_profile`.
    Stopped,
    /// The process went away (exited, restarted) before the end.
    Failed,
    /// The hub stopped while it ran.
    Interrupted,
}

impl SessionState {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Running => "running",
            SessionState::Completed => "completed",
            SessionState::Stopped => "stopped",
            SessionState::Failed => "failed",
            SessionState::Interrupted => "interrupted",
        }
    }
}

/// One profiling session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    pub session_id: String,
    pub service: String,
    pub mode: Mode,
    pub interval_ms: u64,
    pub duration_sec: u64,
    pub state: SessionState,
    /// RFC 3339.
    pub started_at: String,
    pub ended_at: Option<String>,
    /// The process sampled.
    pub pid: Option<u32>,
    /// Samples taken so far.
    pub samples: u64,
    /// The session this one retries.
    pub retry_of: Option<String>,
    pub artifact_id: Option<String>,
    pub incident_ids: Vec<String>,
    pub growth: Option<Growth>,
    /// When it was last published to root (RFC 3339).
    pub published_at: Option<String>,
    /// Why it failed or was interrupted.
    pub error: Option<String>,
}

/// A memory-growth incident.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Incident {
    pub incident_id: String,
    pub session_id: String,
    pub service: String,
    /// Always `memory_growth`.
    pub kind: String,
    pub raised_at: String,
    pub window_started_at: String,
    pub window_ended_at: String,
    pub growth_bytes: i64,
    pub growth_percent: Option<f64>,
    pub threshold_bytes: u64,
    pub threshold_percent: f64,
    pub detail: String,
}

/// An artifact's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactMeta {
    pub artifact_id: String,
    pub session_id: String,
    pub service: String,
    pub created_at: String,
    pub size_bytes: u64,
    /// Hex SHA-256 of the file's bytes.
    pub sha256: String,
}

/// `index.json`; every list oldest first.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Index {
    sessions: Vec<Session>,
    incidents: Vec<Incident>,
    artifacts: Vec<ArtifactMeta>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn internal(message: String) -> ToolError {
    ToolError::new(ErrorCode::Internal, message)
}

fn not_found(what: &str, id: &str) -> ToolError {
    ToolError::new(ErrorCode::NotFound, format!("no {what} `{id}` on this hub"))
}

fn now() -> String {
    mcp_shared::time::format(mcp_shared::time::now())
}

/// What readers and the actor share.
struct Shared {
    dir: PathBuf,
    config: ProfilingConfig,
    target_id: String,
    index: Mutex<Option<Index>>,
    /// Samples of running sessions, by session id.
    live: Mutex<HashMap<String, Vec<Sample>>>,
    /// Parent of every sampler's cancellation: a new ProfileOps actor cancels the samplers
    /// its failed predecessor left running.
    epoch: Mutex<CancellationToken>,
}

impl Shared {
    fn index_path(&self) -> PathBuf {
        self.dir.join(INDEX_FILE)
    }

    fn samples_path(&self, session_id: &str) -> PathBuf {
        self.dir.join(format!("{session_id}.samples.jsonl"))
    }

    fn artifact_path(&self, artifact_id: &str) -> PathBuf {
        self.dir.join(format!("{artifact_id}.json"))
    }

    /// Runs `f` on the index, reading it on first use.
    fn with<R>(&self, f: impl FnOnce(&mut Index) -> R) -> Result<R, ToolError> {
        let mut guard = lock(&self.index);
        if guard.is_none() {
            let path = self.index_path();
            let index = match std::fs::read_to_string(&path) {
                Ok(text) => serde_json::from_str(&text).map_err(|e| {
                    internal(format!(
                        "{}: cannot parse the profiling index: {e}",
                        path.display()
                    ))
                })?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Index::default(),
                Err(e) => {
                    return Err(internal(format!(
                        "{}: cannot read the profiling index: {e}",
                        path.display()
                    )));
                }
            };
            *guard = Some(index);
        }
        Ok(f(guard.get_or_insert_with(Index::default)))
    }

    /// Applies `change` to a copy of the index, writes it, then makes it current.
    fn update<R>(&self, change: impl FnOnce(&mut Index) -> R) -> Result<R, ToolError> {
        self.with(|index| {
            let mut next = index.clone();
            let out = change(&mut next);
            self.prune(&mut next);
            self.write_index(&next)?;
            *index = next;
            Ok(out)
        })?
    }

    /// Drops the oldest sessions (and their artifacts) and incidents past the limits.
    fn prune(&self, index: &mut Index) {
        let over = index.sessions.len().saturating_sub(KEEP_SESSIONS);
        for gone in index.sessions.drain(..over) {
            if let Some(id) = &gone.artifact_id {
                let _ = std::fs::remove_file(self.artifact_path(id));
                index.artifacts.retain(|a| &a.artifact_id != id);
            }
        }
        let over = index.incidents.len().saturating_sub(KEEP_INCIDENTS);
        index.incidents.drain(..over);
    }

    fn write_index(&self, index: &Index) -> Result<(), ToolError> {
        let bytes = serde_json::to_vec(index)
            .map_err(|e| internal(format!("cannot encode the profiling index: {e}")))?;
        write_atomic(&self.index_path(), &bytes)
    }

    fn session(&self, session_id: &str) -> Result<Session, ToolError> {
        self.with(|i| {
            i.sessions
                .iter()
                .find(|s| s.session_id == session_id)
                .cloned()
        })?
        .ok_or_else(|| not_found("profiling session", session_id))
    }

    /// The session as readers see it: a running one with its live sample count.
    fn view(&self, mut session: Session) -> Session {
        if session.state == SessionState::Running
            && let Some(samples) = lock(&self.live).get(&session.session_id)
        {
            session.samples = samples.len() as u64;
        }
        session
    }

    /// Turns a session's samples into an artifact, growth and maybe an incident, and records
    /// it as `state`.
    fn finish(
        &self,
        session_id: &str,
        state: SessionState,
        error: Option<String>,
        samples: Vec<Sample>,
    ) -> Result<Session, ToolError> {
        let mut session = self.session(session_id)?;
        let ended_at = now();
        session.state = state;
        session.ended_at = Some(ended_at.clone());
        session.samples = samples.len() as u64;
        session.growth = growth(&samples);
        session.error = error;
        let mut artifact = None;
        if !samples.is_empty() {
            let artifact_id = uuid::Uuid::now_v7().to_string();
            let body = json!({
                "format": ARTIFACT_FORMAT,
                "artifact_id": artifact_id,
                "session_id": session.session_id,
                "target_id": self.target_id,
                "service": session.service,
                "pid": session.pid,
                "mode": session.mode,
                "state": state,
                "interval_ms": session.interval_ms,
                "started_at": session.started_at,
                "ended_at": ended_at,
                "growth": session.growth,
                "samples": samples,
            });
            let bytes = serde_json::to_vec(&body)
                .map_err(|e| internal(format!("cannot encode an artifact: {e}")))?;
            write_atomic(&self.artifact_path(&artifact_id), &bytes)?;
            session.artifact_id = Some(artifact_id.clone());
            artifact = Some(ArtifactMeta {
                artifact_id,
                session_id: session.session_id.clone(),
                service: session.service.clone(),
                created_at: ended_at.clone(),
                size_bytes: bytes.len() as u64,
                sha256: hex::encode(Sha256::digest(&bytes)),
            });
        }
        let incident = session
            .growth
            .as_ref()
            .filter(|_| samples.len() >= 2)
            .and_then(|g| self.incident(&session, g, &ended_at));
        if let Some(i) = &incident {
            session.incident_ids.push(i.incident_id.clone());
            tracing::warn!(service = %session.service, session = %session.session_id, growth_bytes = i.growth_bytes, "memory growth incident");
        }
        let done = session.clone();
        self.update(|index| {
            if let Some(s) = index
                .sessions
                .iter_mut()
                .find(|s| s.session_id == done.session_id)
            {
                *s = done.clone();
            }
            index.artifacts.extend(artifact);
            index.incidents.extend(incident);
        })?;
        let _ = std::fs::remove_file(self.samples_path(session_id));
        tracing::info!(service = %session.service, session = %session.session_id, state = state.as_str(), samples = session.samples, "profiling session finished");
        Ok(session)
    }

    /// The summary of a finished `session`, with its artifact's record.
    fn summary(&self, session: &Session) -> Result<Value, ToolError> {
        let artifact = match &session.artifact_id {
            Some(id) => self.with(|i| {
                i.artifacts
                    .iter()
                    .find(|a| &a.artifact_id == id)
                    .map(|a| json!({"artifact_id": a.artifact_id, "size_bytes": a.size_bytes, "sha256": a.sha256}))
            })?,
            None => None,
        };
        summary(&self.target_id, session, artifact)
    }

    /// Marks `session_id` published (now); its summary.
    fn publish(&self, session_id: &str) -> Result<Value, ToolError> {
        let session = self.session(session_id)?;
        let summary = self.summary(&session)?;
        let at = now();
        self.update(|i| {
            if let Some(s) = i.sessions.iter_mut().find(|s| s.session_id == session_id) {
                s.published_at = Some(at);
            }
        })?;
        Ok(summary)
    }

    /// An incident when `g` reaches a threshold.
    fn incident(&self, session: &Session, g: &Growth, ended_at: &str) -> Option<Incident> {
        let c = &self.config;
        let by_bytes =
            g.growth_bytes > 0 && g.growth_bytes.unsigned_abs() >= c.growth_threshold_bytes;
        let by_percent = g.growth_bytes > 0
            && g.growth_percent
                .is_some_and(|p| p >= c.growth_threshold_percent);
        if !(by_bytes || by_percent) {
            return None;
        }
        let percent = g
            .growth_percent
            .map_or_else(|| "n/a".to_owned(), |p| format!("{p:.1}%"));
        Some(Incident {
            incident_id: uuid::Uuid::now_v7().to_string(),
            session_id: session.session_id.clone(),
            service: session.service.clone(),
            kind: "memory_growth".into(),
            raised_at: now(),
            window_started_at: session.started_at.clone(),
            window_ended_at: ended_at.to_owned(),
            growth_bytes: g.growth_bytes,
            growth_percent: g.growth_percent,
            threshold_bytes: c.growth_threshold_bytes,
            threshold_percent: c.growth_threshold_percent,
            detail: format!(
                "RSS of `{}` grew by {} bytes ({percent}) from {} to {} bytes; thresholds {} bytes or {}%",
                session.service,
                g.growth_bytes,
                g.start_rss_bytes,
                g.end_rss_bytes,
                c.growth_threshold_bytes,
                c.growth_threshold_percent
            ),
        })
    }
}

/// Writes `bytes` to `path` (a file in the profiles directory) through [`crate::state::write_atomic`].
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ToolError> {
    crate::state::write_atomic(path, bytes)
        .map_err(|e| internal(format!("{}: cannot write: {}", e.path.display(), e.source)))
}

/// What `hub.memory.start_profile` and `retry_profile` ask for.
#[derive(Debug, Clone, PartialEq)]
pub struct StartRequest {
    pub service: String,
    pub mode: Mode,
    pub interval_ms: u64,
    pub duration_sec: u64,
    pub retry_of: Option<String>,
}

/// How a chunk or a whole artifact is delivered.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    /// The whole artifact (parsed JSON).
    Inline { meta: ArtifactMeta, artifact: Value },
    /// Too large to inline: fetch `chunks` chunks of `chunk_bytes` by offset.
    Chunked {
        meta: ArtifactMeta,
        chunk_bytes: u64,
        chunks: u64,
    },
    /// One chunk.
    Chunk {
        meta: ArtifactMeta,
        offset: u64,
        bytes: Vec<u8>,
    },
}

/// The profiling authority of one hub (in [`crate::context::HubContext::profiles`]).
pub struct Profiles {
    shared: Arc<Shared>,
    actor: Mutex<Option<ActorRef<Msg>>>,
}

impl Profiles {
    pub fn new(config: &HubConfig) -> Profiles {
        Profiles {
            shared: Arc::new(Shared {
                dir: config.state_dir.join(PROFILES_DIR),
                config: config.profiling.clone(),
                target_id: config.target_id.clone(),
                index: Mutex::new(None),
                live: Mutex::new(HashMap::new()),
                epoch: Mutex::new(CancellationToken::new()),
            }),
            actor: Mutex::new(None),
        }
    }

    /// Spawns the `ProfileOps` actor (which first finishes sessions a previous hub process
    /// left `running` as `interrupted`).
    pub async fn start(&self, ctx: Arc<HubContext>) -> anyhow::Result<()> {
        self.start_under(ctx, None).await.map(|_| ())
    }

    /// [`Profiles::start`] linked under `supervisor` (the hub's). A restarted actor rebuilds
    /// its state from the index on disk: sessions that were running end `interrupted` with
    /// the samples they kept, and their samplers are stopped.
    pub async fn start_under(
        &self,
        ctx: Arc<HubContext>,
        supervisor: Option<ractor::ActorCell>,
    ) -> anyhow::Result<ActorRef<Msg>> {
        let args = OpsArgs {
            shared: self.shared.clone(),
            ctx,
        };
        let (actor, _) = match supervisor {
            Some(sup) => Actor::spawn_linked(None, ProfileOps, args, sup).await,
            None => Actor::spawn(None, ProfileOps, args).await,
        }
        .map_err(|e| anyhow::anyhow!("cannot start ProfileOps: {e}"))?;
        if let Some(old) = lock(&self.actor).replace(actor.clone()) {
            old.stop(Some("replaced".into()));
        }
        Ok(actor)
    }

    /// The `ProfileOps` actor running now, if any.
    pub fn current(&self) -> Option<ActorRef<Msg>> {
        lock(&self.actor).clone()
    }

    /// Stops the actor; running sessions are finished as `interrupted`.
    pub async fn stop(&self) {
        let actor = lock(&self.actor).take();
        if let Some(actor) = actor {
            let _ = actor
                .stop_and_wait(
                    Some("hub shutting down".into()),
                    Some(Duration::from_secs(10)),
                )
                .await;
        }
    }

    pub fn config(&self) -> &ProfilingConfig {
        &self.shared.config
    }

    /// Chunk size of chunked deliveries.
    pub fn chunk_bytes(&self) -> u64 {
        self.shared
            .config
            .artifact_inline_max_bytes
            .max(MIN_CHUNK_BYTES)
    }

    /// Sessions newest first, filtered.
    pub fn sessions(
        &self,
        service: Option<&str>,
        state: Option<SessionState>,
        limit: usize,
    ) -> Result<Vec<Session>, ToolError> {
        let list = self.shared.with(|i| {
            i.sessions
                .iter()
                .rev()
                .filter(|s| service.is_none_or(|n| s.service == n))
                .filter(|s| state.is_none_or(|st| s.state == st))
                .take(limit)
                .cloned()
                .collect::<Vec<_>>()
        })?;
        Ok(list.into_iter().map(|s| self.shared.view(s)).collect())
    }

    /// Counts: sessions, running sessions, incidents, artifacts.
    pub fn counts(&self) -> Result<(usize, Vec<String>, usize, usize), ToolError> {
        self.shared.with(|i| {
            (
                i.sessions.len(),
                i.sessions
                    .iter()
                    .filter(|s| s.state == SessionState::Running)
                    .map(|s| s.session_id.clone())
                    .collect(),
                i.incidents.len(),
                i.artifacts.len(),
            )
        })
    }

    /// One session and its newest samples.
    pub fn session(&self, session_id: &str) -> Result<(Session, Vec<Sample>), ToolError> {
        let session = self.shared.view(self.shared.session(session_id)?);
        let recent = if session.state == SessionState::Running {
            lock(&self.shared.live)
                .get(session_id)
                .map(|s| s[s.len().saturating_sub(RECENT_SAMPLES)..].to_vec())
                .unwrap_or_default()
        } else if let Some(id) = &session.artifact_id {
            let bytes = self.artifact_bytes(id)?.1;
            let artifact: Value = serde_json::from_slice(&bytes)
                .map_err(|e| internal(format!("artifact `{id}` is not JSON: {e}")))?;
            let samples: Vec<Sample> = serde_json::from_value(artifact["samples"].clone())
                .map_err(|e| internal(format!("artifact `{id}` has bad samples: {e}")))?;
            samples[samples.len().saturating_sub(RECENT_SAMPLES)..].to_vec()
        } else {
            Vec::new()
        };
        Ok((session, recent))
    }

    /// Incidents newest first.
    pub fn incidents(
        &self,
        service: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Incident>, ToolError> {
        self.shared.with(|i| {
            i.incidents
                .iter()
                .rev()
                .filter(|x| service.is_none_or(|n| x.service == n))
                .take(limit)
                .cloned()
                .collect()
        })
    }

    /// Artifact records newest first.
    pub fn artifacts(
        &self,
        service: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ArtifactMeta>, ToolError> {
        self.shared.with(|i| {
            i.artifacts
                .iter()
                .rev()
                .filter(|x| service.is_none_or(|n| x.service == n))
                .take(limit)
                .cloned()
                .collect()
        })
    }

    /// An artifact's record and bytes (checked against the recorded SHA-256).
    fn artifact_bytes(&self, artifact_id: &str) -> Result<(ArtifactMeta, Vec<u8>), ToolError> {
        let meta = self
            .shared
            .with(|i| {
                i.artifacts
                    .iter()
                    .find(|a| a.artifact_id == artifact_id)
                    .cloned()
            })?
            .ok_or_else(|| not_found("artifact", artifact_id))?;
        let path = self.shared.artifact_path(&meta.artifact_id);
        let bytes = std::fs::read(&path)
            .map_err(|e| internal(format!("{}: cannot read the artifact: {e}", path.display())))?;
        if hex::encode(Sha256::digest(&bytes)) != meta.sha256 {
            return Err(internal(format!(
                "{}: the artifact no longer matches its recorded SHA-256",
                path.display()
            )));
        }
        Ok((meta, bytes))
    }

    /// `get_artifact`: the whole artifact inline when small enough and no range is asked,
    /// else the chunked delivery contract, or the chunk at `offset` (at most `chunk_bytes`).
    pub fn artifact(
        &self,
        artifact_id: &str,
        offset: Option<u64>,
        length: Option<u64>,
    ) -> Result<Delivery, ToolError> {
        let (meta, bytes) = self.artifact_bytes(artifact_id)?;
        let chunk = self.chunk_bytes();
        let size = bytes.len() as u64;
        if offset.is_none() && length.is_none() {
            if size <= self.shared.config.artifact_inline_max_bytes {
                let artifact = serde_json::from_slice(&bytes)
                    .map_err(|e| internal(format!("artifact `{artifact_id}` is not JSON: {e}")))?;
                return Ok(Delivery::Inline { meta, artifact });
            }
            return Ok(Delivery::Chunked {
                meta,
                chunk_bytes: chunk,
                chunks: size.div_ceil(chunk),
            });
        }
        let offset = offset.unwrap_or(0);
        if offset >= size {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                format!(
                    "offset {offset} is past the end of artifact `{artifact_id}` ({size} bytes)"
                ),
            ));
        }
        let length = length.unwrap_or(chunk);
        if length == 0 || length > chunk {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                format!("length must be between 1 and the chunk size {chunk}"),
            ));
        }
        let end = offset.saturating_add(length).min(size);
        let range = usize::try_from(offset).unwrap_or(usize::MAX)
            ..usize::try_from(end).unwrap_or(usize::MAX);
        Ok(Delivery::Chunk {
            meta,
            offset,
            bytes: bytes.get(range).unwrap_or_default().to_vec(),
        })
    }

    fn actor(&self) -> Result<ActorRef<Msg>, ToolError> {
        lock(&self.actor)
            .clone()
            .ok_or_else(|| internal("ProfileOps is not running".into()))
    }

    async fn ask<T>(
        &self,
        deadline: tokio::time::Instant,
        msg: impl FnOnce(RpcReplyPort<Result<T, ToolError>>) -> Msg,
    ) -> Result<T, ToolError>
    where
        T: Send + 'static,
    {
        let wait = deadline.saturating_duration_since(tokio::time::Instant::now());
        match self.actor()?.call(msg, Some(wait)).await {
            Ok(CallResult::Success(r)) => r,
            Ok(CallResult::Timeout) => Err(ToolError::new(
                ErrorCode::Timeout,
                "ProfileOps did not answer before the call's deadline",
            )),
            Ok(CallResult::SenderError) | Err(_) => {
                Err(internal("ProfileOps stopped while answering".into()))
            }
        }
    }

    /// Starts a session (restarting the service into profiling mode first when asked).
    pub async fn start_session(
        &self,
        request: StartRequest,
        deadline: tokio::time::Instant,
    ) -> Result<Session, ToolError> {
        self.ask(deadline, |reply| Msg::Start {
            request,
            deadline,
            reply,
        })
        .await
    }

    /// Stops a running session; `(session, whether it was running)`.
    pub async fn stop_session(
        &self,
        session_id: &str,
        deadline: tokio::time::Instant,
    ) -> Result<(Session, bool), ToolError> {
        let session_id = session_id.to_owned();
        self.ask(deadline, |reply| Msg::Stop { session_id, reply })
            .await
    }

    /// Marks a finished session published; its summary.
    pub async fn publish(
        &self,
        session_id: &str,
        deadline: tokio::time::Instant,
    ) -> Result<Value, ToolError> {
        let session_id = session_id.to_owned();
        self.ask(deadline, |reply| Msg::Publish { session_id, reply })
            .await
    }

    /// The session `session_id` (as readers see it).
    pub fn get(&self, session_id: &str) -> Result<Session, ToolError> {
        Ok(self.shared.view(self.shared.session(session_id)?))
    }

    /// Whether a new session for `service` would be refused with `busy`, and why.
    pub fn admission(&self, service: &str) -> Result<Option<String>, ToolError> {
        self.shared
            .with(|i| admission(&self.shared.config, i, service))
    }

    /// The compact summary `publish_profile` publishes for `session` (see its contract);
    /// `busy` while it runs.
    pub fn summary(&self, session: &Session) -> Result<Value, ToolError> {
        self.shared.summary(session)
    }
}

/// The summary of a finished session.
fn summary(target_id: &str, s: &Session, artifact: Option<Value>) -> Result<Value, ToolError> {
    let ended_at = s.ended_at.clone().ok_or_else(|| {
        ToolError::new(
            ErrorCode::Busy,
            format!(
                "session `{}` is still running; stop it or wait until it ends, then publish",
                s.session_id
            ),
        )
    })?;
    let duration_ms = match (
        mcp_shared::time::parse(&s.started_at),
        mcp_shared::time::parse(&ended_at),
    ) {
        (Ok(a), Ok(b)) => (b - a).whole_milliseconds().max(0) as u64,
        _ => 0,
    };
    Ok(json!({
        "session_id": s.session_id,
        "target_id": target_id,
        "service": s.service,
        "mode": s.mode,
        "state": s.state,
        "window": {"started_at": s.started_at, "ended_at": ended_at, "duration_ms": duration_ms},
        "interval_ms": s.interval_ms,
        "samples": s.samples,
        "rss": s.growth.as_ref().map(|g| json!({
            "start_bytes": g.start_rss_bytes,
            "end_bytes": g.end_rss_bytes,
            "peak_bytes": g.peak_rss_bytes,
        })),
        "growth": s.growth.as_ref().map(|g| json!({
            "bytes": g.growth_bytes,
            "percent": g.growth_percent,
            "slope_bytes_per_sec": g.slope_bytes_per_sec,
        })),
        "incident_ids": s.incident_ids,
        "artifact": artifact,
    }))
}

/// Why a new session for `service` must wait, if it must.
fn admission(config: &ProfilingConfig, index: &Index, service: &str) -> Option<String> {
    let running: Vec<&Session> = index
        .sessions
        .iter()
        .filter(|s| s.state == SessionState::Running)
        .collect();
    if let Some(s) = running.iter().find(|s| s.service == service) {
        return Some(format!(
            "session `{}` already profiles `{service}`; stop it or wait for it to end",
            s.session_id
        ));
    }
    (running.len() >= config.max_concurrent_sessions).then(|| {
        format!(
            "{} profiling sessions are running, the most this hub allows (max_concurrent_sessions); retry later",
            running.len()
        )
    })
}

pub enum Msg {
    Start {
        request: StartRequest,
        deadline: tokio::time::Instant,
        reply: RpcReplyPort<Result<Session, ToolError>>,
    },
    Stop {
        session_id: String,
        reply: RpcReplyPort<Result<(Session, bool), ToolError>>,
    },
    Publish {
        session_id: String,
        reply: RpcReplyPort<Result<Value, ToolError>>,
    },
    /// A sampler ended (`state` says how).
    Ended {
        session_id: String,
        state: SessionState,
        error: Option<String>,
    },
    /// Test builds only: panic, so tests can prove the hub's supervisor contains it.
    #[cfg(any(test, feature = "fault-injection"))]
    Panic,
}

pub struct ProfileOps;

pub struct OpsArgs {
    shared: Arc<Shared>,
    ctx: Arc<HubContext>,
}

struct Running {
    cancel: CancellationToken,
    stoppers: Vec<RpcReplyPort<Result<(Session, bool), ToolError>>>,
}

/// How long returning a service from profiling mode to its normal argv may take (its stop
/// takes at most the service's `stop_timeout_ms`, then it starts).
const RESTORE_TIMEOUT: Duration = Duration::from_secs(60);

pub struct OpsState {
    shared: Arc<Shared>,
    ctx: Arc<HubContext>,
    running: HashMap<String, Running>,
}

impl OpsState {
    async fn start(
        &mut self,
        myself: &ActorRef<Msg>,
        request: StartRequest,
        deadline: tokio::time::Instant,
    ) -> Result<Session, ToolError> {
        let service = request.service.as_str();
        if let Some(why) = self
            .shared
            .with(|i| admission(&self.shared.config, i, service))?
        {
            return Err(ToolError::new(ErrorCode::Busy, why));
        }
        let services = &self.ctx.services;
        let pid = if request.mode == Mode::Profiling {
            services
                .restart(service, Mode::Profiling, deadline)
                .await?
                .new_pid
        } else {
            let now = services.get(service)?;
            match (now.state, now.pid) {
                (ServiceState::Running, Some(pid)) => pid,
                (state, _) => {
                    return Err(ToolError::new(
                        ErrorCode::InvalidArguments,
                        format!(
                            "service `{service}` is not running (state {}); restart it first or profile it in mode \"profiling\"",
                            state.as_str()
                        ),
                    ));
                }
            }
        };
        let mode = services.get(service)?.mode;
        let session = Session {
            session_id: uuid::Uuid::now_v7().to_string(),
            service: service.to_owned(),
            mode,
            interval_ms: request.interval_ms,
            duration_sec: request.duration_sec,
            state: SessionState::Running,
            started_at: now(),
            ended_at: None,
            pid: Some(pid),
            samples: 0,
            retry_of: request.retry_of,
            artifact_id: None,
            incident_ids: Vec::new(),
            growth: None,
            published_at: None,
            error: None,
        };
        let recorded = session.clone();
        self.shared.update(|i| i.sessions.push(recorded))?;
        let cancel = lock(&self.shared.epoch).child_token();
        lock(&self.shared.live).insert(session.session_id.clone(), Vec::new());
        tokio::spawn(sampler(
            self.shared.clone(),
            myself.clone(),
            session.clone(),
            pid,
            cancel.clone(),
        ));
        self.running.insert(
            session.session_id.clone(),
            Running {
                cancel,
                stoppers: Vec::new(),
            },
        );
        tracing::info!(service, session = %session.session_id, pid, mode = mode.as_str(), "profiling session started");
        Ok(session)
    }

    fn ended(&mut self, session_id: &str, state: SessionState, error: Option<String>) {
        let samples = lock(&self.shared.live)
            .remove(session_id)
            .unwrap_or_default();
        let outcome = self.shared.finish(session_id, state, error, samples);
        if let Err(e) = &outcome {
            tracing::error!(session = session_id, error = %e, "cannot finish a profiling session");
        }
        if let Some(running) = self.running.remove(session_id) {
            for stopper in running.stoppers {
                let _ = stopper.send(outcome.clone().map(|s| (s, true)));
            }
        }
    }

    /// After a session in profiling mode ended: its service back in its normal argv, if it
    /// is still in profiling mode.
    async fn restore_mode(&self, session_id: &str) {
        let Ok(session) = self.shared.session(session_id) else {
            return;
        };
        let services = &self.ctx.services;
        if session.mode != Mode::Profiling
            || !services
                .get(&session.service)
                .is_ok_and(|s| s.mode == Mode::Profiling)
        {
            return;
        }
        let deadline = tokio::time::Instant::now() + RESTORE_TIMEOUT;
        match services
            .restart(&session.service, Mode::Normal, deadline)
            .await
        {
            Ok(r) => {
                tracing::info!(service = %session.service, session = session_id, pid = r.new_pid, "profiling session ended; the service runs its normal argv again")
            }
            Err(e) => {
                tracing::error!(service = %session.service, session = session_id, error = %e, "profiling session ended; the service could not be returned to its normal argv")
            }
        }
    }
}

/// Samples `pid` for `session` until its duration has passed, it is cancelled, or the
/// process is gone; then tells the actor.
async fn sampler(
    shared: Arc<Shared>,
    actor: ActorRef<Msg>,
    session: Session,
    pid: u32,
    cancel: CancellationToken,
) {
    let started = tokio::time::Instant::now();
    let duration = Duration::from_secs(session.duration_sec);
    let mut ticks = tokio::time::interval(Duration::from_millis(session.interval_ms));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let jsonl = shared.samples_path(&session.session_id);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&jsonl)
        .map_err(|e| tracing::warn!(path = %jsonl.display(), error = %e, "samples are kept in memory only"))
        .ok();
    // The first tick is immediate: a session that starts always takes its first sample.
    ticks.tick().await;
    let (state, error) = loop {
        let t_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let Some(s) = sample(pid, t_ms) else {
            break (
                SessionState::Failed,
                Some(format!(
                    "the process of `{}` (pid {pid}) is gone",
                    session.service
                )),
            );
        };
        if let Some(f) = file.as_mut()
            && let Ok(line) = serde_json::to_string(&s)
        {
            let _ = writeln!(f, "{line}");
        }
        if let Some(live) = lock(&shared.live).get_mut(&session.session_id) {
            live.push(s);
        }
        if started.elapsed() >= duration {
            break (SessionState::Completed, None);
        }
        tokio::select! {
            _ = cancel.cancelled() => break (SessionState::Stopped, None),
            _ = ticks.tick() => {}
        }
    };
    let _ = actor.cast(Msg::Ended {
        session_id: session.session_id,
        state,
        error,
    });
}

impl Actor for ProfileOps {
    type Msg = Msg;
    type State = OpsState;
    type Arguments = OpsArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Msg>,
        args: OpsArgs,
    ) -> Result<OpsState, ActorProcessingErr> {
        let shared = args.shared;
        // Samplers a failed ProfileOps left behind stop; their sessions end below.
        let old = std::mem::replace(&mut *lock(&shared.epoch), CancellationToken::new());
        old.cancel();
        // Sessions a previous hub process (or a failed ProfileOps) left running: finished as interrupted with the
        // samples their files kept. A damaged index is reported by every profiling tool.
        match shared.with(|i| {
            i.sessions
                .iter()
                .filter(|s| s.state == SessionState::Running)
                .map(|s| s.session_id.clone())
                .collect::<Vec<_>>()
        }) {
            Ok(left) => {
                for id in left {
                    let samples: Vec<Sample> = std::fs::read_to_string(shared.samples_path(&id))
                        .map(|t| {
                            t.lines()
                                .filter_map(|l| serde_json::from_str(l).ok())
                                .collect()
                        })
                        .unwrap_or_default();
                    if let Err(e) = shared.finish(
                        &id,
                        SessionState::Interrupted,
                        Some("the hub stopped while the session ran".into()),
                        samples,
                    ) {
                        tracing::error!(session = %id, error = %e, "cannot finish an interrupted session");
                    }
                }
            }
            Err(e) => tracing::error!(error = %e, "the profiling index cannot be read"),
        }
        Ok(OpsState {
            shared,
            ctx: args.ctx,
            running: HashMap::new(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Msg>,
        state: &mut OpsState,
    ) -> Result<(), ActorProcessingErr> {
        let ids: Vec<String> = state.running.keys().cloned().collect();
        for id in ids {
            if let Some(r) = state.running.get(&id) {
                r.cancel.cancel();
            }
            state.ended(
                &id,
                SessionState::Interrupted,
                Some("the hub stopped while the session ran".into()),
            );
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Msg>,
        msg: Msg,
        state: &mut OpsState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            Msg::Start {
                request,
                deadline,
                reply,
            } => {
                let outcome = state.start(&myself, request, deadline).await;
                let _ = reply.send(outcome);
            }
            Msg::Stop { session_id, reply } => match state.running.get_mut(&session_id) {
                Some(running) => {
                    running.cancel.cancel();
                    running.stoppers.push(reply);
                }
                None => {
                    let _ = reply.send(state.shared.session(&session_id).map(|s| (s, false)));
                }
            },
            Msg::Publish { session_id, reply } => {
                let _ = reply.send(state.shared.publish(&session_id));
            }
            #[cfg(any(test, feature = "fault-injection"))]
            Msg::Panic => panic!("fault injected into ProfileOps"),
            Msg::Ended {
                session_id,
                state: end,
                error,
            } => {
                state.ended(&session_id, end, error);
                state.restore_mode(&session_id).await;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t_ms: u64, rss: u64) -> Sample {
        Sample {
            t_ms,
            rss_bytes: rss,
            pss_bytes: None,
            anon_bytes: None,
            swap_bytes: None,
            source: "status".into(),
        }
    }

    #[test]
    fn growth_over_the_window() {
        assert_eq!(growth(&[]), None);
        let one = growth(&[s(0, 100)]).expect("one");
        assert_eq!((one.growth_bytes, one.slope_bytes_per_sec), (0, None));
        let g = growth(&[s(0, 1000), s(1000, 3000), s(2000, 2000), s(3000, 4000)]).expect("g");
        assert_eq!(
            (
                g.start_rss_bytes,
                g.end_rss_bytes,
                g.peak_rss_bytes,
                g.growth_bytes
            ),
            (1000, 4000, 4000, 3000)
        );
        assert_eq!(g.growth_percent, Some(300.0));
        // Least squares over (0,1000) (1,3000) (2,2000) (3,4000): slope 800 bytes/s.
        assert!((g.slope_bytes_per_sec.expect("slope") - 800.0).abs() < 1e-9);
        let shrink = growth(&[s(0, 4000), s(1000, 1000)]).expect("shrink");
        assert_eq!(shrink.growth_bytes, -3000);
    }

    #[test]
    fn a_sample_of_this_process() {
        let me = sample(std::process::id(), 7).expect("sample");
        assert_eq!(me.t_ms, 7);
        assert!(me.rss_bytes > 0);
        assert!(["smaps_rollup", "status"].contains(&me.source.as_str()));
        assert!(me.anon_bytes.is_some());
        assert_eq!(sample(u32::MAX, 0), None);
    }

    fn shared(dir: &Path, config: ProfilingConfig) -> Shared {
        Shared {
            dir: dir.join(PROFILES_DIR),
            config,
            target_id: "hub:t".into(),
            index: Mutex::new(None),
            live: Mutex::new(HashMap::new()),
            epoch: Mutex::new(CancellationToken::new()),
        }
    }

    fn running(id: &str, service: &str) -> Session {
        Session {
            session_id: id.into(),
            service: service.into(),
            mode: Mode::Normal,
            interval_ms: 100,
            duration_sec: 1,
            state: SessionState::Running,
            started_at: "2026-01-01T00:00:00Z".into(),
            ended_at: None,
            pid: Some(1),
            samples: 0,
            retry_of: None,
            artifact_id: None,
            incident_ids: Vec::new(),
            growth: None,
            published_at: None,
            error: None,
        }
    }

    #[test]
    fn finishing_writes_the_artifact_and_raises_an_incident_past_a_threshold() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = ProfilingConfig {
            growth_threshold_bytes: 1000,
            growth_threshold_percent: 1000.0,
            ..ProfilingConfig::default()
        };
        let sh = shared(dir.path(), config);
        sh.update(|i| {
            i.sessions.push(running("a", "web"));
            i.sessions.push(running("b", "web"));
        })
        .expect("index");
        let a = sh
            .finish(
                "a",
                SessionState::Completed,
                None,
                vec![s(0, 5000), s(100, 6500)],
            )
            .expect("finish");
        assert_eq!(a.incident_ids.len(), 1, "1500 bytes >= 1000");
        let b = sh
            .finish(
                "b",
                SessionState::Stopped,
                None,
                vec![s(0, 5000), s(100, 5500)],
            )
            .expect("finish");
        assert!(
            b.incident_ids.is_empty(),
            "500 bytes and 10% are under both thresholds"
        );
        // On disk: a fresh reader sees both, the artifacts match their SHA-256.
        let again = shared(dir.path(), ProfilingConfig::default());
        let index = again.with(|i| i.clone()).expect("index");
        assert_eq!(index.sessions.len(), 2);
        assert_eq!(index.incidents.len(), 1);
        assert_eq!(index.incidents[0].session_id, "a");
        for meta in &index.artifacts {
            let bytes = std::fs::read(again.artifact_path(&meta.artifact_id)).expect("artifact");
            assert_eq!(hex::encode(Sha256::digest(&bytes)), meta.sha256);
            assert_eq!(bytes.len() as u64, meta.size_bytes);
            let v: Value = serde_json::from_slice(&bytes).expect("json");
            assert_eq!(v["format"], ARTIFACT_FORMAT);
            assert_eq!(v["samples"].as_array().map(Vec::len), Some(2));
        }
        // Admission: one session per service, at most max_concurrent_sessions.
        let cfg = ProfilingConfig {
            max_concurrent_sessions: 1,
            ..ProfilingConfig::default()
        };
        let mut idx = Index::default();
        assert_eq!(admission(&cfg, &idx, "web"), None);
        idx.sessions.push(running("c", "web"));
        assert!(admission(&cfg, &idx, "web").is_some_and(|m| m.contains("`c`")));
        assert!(admission(&cfg, &idx, "db").is_some_and(|m| m.contains("max_concurrent_sessions")));
    }

    /// A hub that crashed with a session running: the next start finishes it `interrupted`
    /// with the samples its file kept.
    #[tokio::test]
    async fn a_session_left_running_is_interrupted_at_the_next_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = HubConfig::new("hub:t", "test", "ws://x", "t", dir.path());
        let sh = shared(dir.path(), ProfilingConfig::default());
        let id = uuid::Uuid::now_v7().to_string();
        sh.update(|i| i.sessions.push(running(&id, "web")))
            .expect("index");
        let lines: Vec<String> = [s(0, 100), s(100, 200)]
            .iter()
            .map(|x| serde_json::to_string(x).expect("json"))
            .collect();
        std::fs::write(sh.samples_path(&id), lines.join("\n") + "\n").expect("samples");
        let ctx = Arc::new(HubContext::new(config).expect("context"));
        ctx.profiles.start(ctx.clone()).await.expect("start");
        let (session, samples) = ctx.profiles.session(&id).expect("kept");
        assert_eq!(session.state, SessionState::Interrupted);
        assert_eq!(session.samples, 2);
        assert_eq!(samples.len(), 2);
        assert!(
            session
                .error
                .as_deref()
                .is_some_and(|e| e.contains("hub stopped"))
        );
        assert!(
            !sh.samples_path(&id).exists(),
            "the samples file became the artifact"
        );
        ctx.profiles.stop().await;
    }
}
