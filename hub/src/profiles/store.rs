//! The profiling state on disk and in memory: sessions, incidents and artifact records in
//! `<state_dir>/profiles/index.json` ([`Index`]), the artifacts and sample logs beside it, and
//! [`Shared`], what the readers and the actor share (finishing a session, publishing it,
//! raising incidents); the limits of that state, what a session is started with
//! ([`StartRequest`]) and when a new one must wait ([`admission`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use mcp_shared::error::{ErrorCode, ToolError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::config::ProfilingConfig;
use crate::machine::services::Mode;
use mcp_shared::profiling::HeapSummary;
pub(crate) use mcp_shared::profiling::{
    ArtifactKind, ArtifactMeta, Incident, Session, SessionState,
};

use super::evidence::EvidenceLog;
use super::heap::collect::{HeapSummaryError, Keeper};
use super::sample::{Growth, Sample, growth};

/// `index.json`; every list oldest first. Read tolerantly: an index a later build wrote
/// still loads after a downgrade.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Index {
    pub(super) sessions: Vec<Session>,
    pub(super) incidents: Vec<Incident>,
    pub(super) artifacts: Vec<ArtifactMeta>,
    /// What root has yet to hear of (see [`super::evidence`]).
    #[serde(default)]
    pub(super) evidence: EvidenceLog,
}

/// What readers and the actor share.
pub(super) struct Shared {
    pub(super) dir: PathBuf,
    pub(super) config: ProfilingConfig,
    pub(super) target_id: String,
    pub(super) index: Mutex<Option<Index>>,
    /// Samples of running sessions, by session id.
    pub(super) live: Mutex<HashMap<String, Vec<Sample>>>,
    /// The heap snapshots of running sessions whose services write them, by session id.
    pub(super) live_heap: Mutex<HashMap<String, Arc<Mutex<Keeper>>>>,
    /// Parent of every sampler's cancellation: a new ProfileOps actor cancels the samplers
    /// its failed predecessor left running.
    pub(super) epoch: Mutex<CancellationToken>,
    /// The evidence log's latest position, for the channel to follow.
    pub(super) evidence_seq: tokio::sync::watch::Sender<u64>,
}

impl Shared {
    pub(super) fn index_path(&self) -> PathBuf {
        self.dir.join(INDEX_FILE)
    }

    pub(super) fn samples_path(&self, session_id: &str) -> PathBuf {
        self.dir.join(format!("{session_id}.samples.jsonl"))
    }

    /// The file of a session's samples artifact.
    pub(super) fn artifact_path(&self, artifact_id: &str) -> PathBuf {
        self.dir.join(format!("{artifact_id}.json"))
    }

    /// The file of an artifact of any kind.
    pub(super) fn file_of(&self, meta: &ArtifactMeta) -> PathBuf {
        match meta.kind {
            ArtifactKind::Samples => self.artifact_path(&meta.artifact_id),
            ArtifactKind::HeapSnapshot => self.dir.join(super::heap::snapshot_file_name(meta)),
        }
    }

    /// Runs `f` on the index, reading it on first use.
    pub(super) fn with<R>(&self, f: impl FnOnce(&mut Index) -> R) -> Result<R, ToolError> {
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
            let mut index: Index = index;
            if index.evidence.epoch.is_empty() {
                EvidenceLog::start(&mut index);
            }
            self.evidence_seq.send_replace(index.evidence.seq);
            *guard = Some(index);
        }
        Ok(f(guard.get_or_insert_with(Index::default)))
    }

    /// Applies `change` to a copy of the index, writes it, then makes it current.
    pub(super) fn update<R>(&self, change: impl FnOnce(&mut Index) -> R) -> Result<R, ToolError> {
        self.with(|index| {
            let mut next = index.clone();
            let out = change(&mut next);
            self.prune(&mut next);
            EvidenceLog::mark(index, &mut next);
            self.write_index(&next)?;
            let seq = next.evidence.seq;
            *index = next;
            self.evidence_seq.send_replace(seq);
            Ok(out)
        })?
    }

    /// Drops the oldest sessions (and their artifacts) and incidents past the limits, and
    /// the oldest heap snapshots past `heap_snapshots_max_bytes`.
    pub(super) fn prune(&self, index: &mut Index) {
        let over = index.sessions.len().saturating_sub(KEEP_SESSIONS);
        let gone: Vec<String> = index.sessions.drain(..over).map(|s| s.session_id).collect();
        let mut heap_bytes: u64 = index
            .artifacts
            .iter()
            .filter(|a| a.kind == ArtifactKind::HeapSnapshot)
            .map(|a| a.size_bytes)
            .sum();
        index.artifacts.retain(|a| {
            let snapshot = a.kind == ArtifactKind::HeapSnapshot;
            let drop = gone.contains(&a.session_id)
                || (snapshot && heap_bytes > self.config.heap_snapshots_max_bytes);
            if drop {
                if snapshot {
                    heap_bytes -= a.size_bytes;
                }
                let _ = std::fs::remove_file(self.file_of(a));
            }
            !drop
        });
        let over = index.incidents.len().saturating_sub(KEEP_INCIDENTS);
        index.incidents.drain(..over);
    }

    /// Removes heap snapshot files no record names: what a session kept while it ran and a
    /// hub that stopped before the session's end never recorded.
    pub(super) fn sweep_snapshots(&self) {
        let Ok(known) = self.with(|i| {
            i.artifacts
                .iter()
                .map(|a| a.artifact_id.clone())
                .collect::<std::collections::HashSet<_>>()
        }) else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let id = super::heap::SNAPSHOT_EXTENSIONS
                .iter()
                .find_map(|ext| name.strip_suffix(ext));
            if let Some(id) = id
                && !known.contains(id)
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    pub(super) fn write_index(&self, index: &Index) -> Result<(), ToolError> {
        let bytes = serde_json::to_vec(index)
            .map_err(|e| internal(format!("cannot encode the profiling index: {e}")))?;
        write_atomic(&self.index_path(), &bytes)
    }

    pub(super) fn session(&self, session_id: &str) -> Result<Session, ToolError> {
        self.with(|i| {
            i.sessions
                .iter()
                .find(|s| s.session_id == session_id)
                .cloned()
        })?
        .ok_or_else(|| not_found("profiling session", session_id))
    }

    /// One session and its newest samples (from the live series, or its artifact).
    pub(super) fn session_with_samples(
        &self,
        session_id: &str,
    ) -> Result<(Session, Vec<Sample>), ToolError> {
        let session = self.heap_so_far(self.view(self.session(session_id)?));
        let recent = if session.state == SessionState::Running {
            lock(&self.live)
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

    /// An artifact's record and bytes (checked against the recorded SHA-256).
    pub(super) fn artifact_bytes(
        &self,
        artifact_id: &str,
    ) -> Result<(ArtifactMeta, Vec<u8>), ToolError> {
        let recorded = self.with(|i| {
            i.artifacts
                .iter()
                .find(|a| a.artifact_id == artifact_id)
                .cloned()
        })?;
        let meta = recorded
            .or_else(|| {
                self.live_artifacts()
                    .into_iter()
                    .find(|a| a.artifact_id == artifact_id)
            })
            .ok_or_else(|| not_found("artifact", artifact_id))?;
        let path = self.file_of(&meta);
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

    /// The heap snapshots running sessions kept so far (recorded in the index when their
    /// session ends): readable as artifacts within a collection of being written.
    pub(super) fn live_artifacts(&self) -> Vec<ArtifactMeta> {
        let keepers: Vec<Arc<Mutex<Keeper>>> = lock(&self.live_heap).values().cloned().collect();
        keepers
            .iter()
            .flat_map(|k| {
                lock(k)
                    .kept
                    .iter()
                    .map(|kept| kept.meta.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// A running `session` with the heap summary of the snapshots kept so far (when its
    /// service writes them); others as they are.
    pub(super) fn heap_so_far(&self, mut session: Session) -> Session {
        if session.state != SessionState::Running {
            return session;
        }
        let Some(keeper) = lock(&self.live_heap).get(&session.session_id).cloned() else {
            return session;
        };
        // A copy: the sampler replaces the keeper after each collection, never holding it,
        // and sums it up then; made here only before the sampler's first.
        let keeper = lock(&keeper).clone();
        let summary = keeper.so_far.clone().unwrap_or_else(|| {
            let samples = lock(&self.live)
                .get(&session.session_id)
                .cloned()
                .unwrap_or_default();
            keeper.summary(started_at(&session), &samples)
        });
        set_heap(&mut session, summary);
        session
    }

    /// The session as readers see it: a running one with its live sample count.
    pub(super) fn view(&self, mut session: Session) -> Session {
        if session.state == SessionState::Running
            && let Some(samples) = lock(&self.live).get(&session.session_id)
        {
            session.samples = samples.len() as u64;
        }
        session
    }

    /// Turns a session's samples into an artifact, growth and maybe an incident, and records
    /// it as `state`.
    pub(super) fn finish(
        &self,
        session_id: &str,
        state: SessionState,
        error: Option<String>,
        samples: Vec<Sample>,
        heap: Option<Keeper>,
    ) -> Result<Session, ToolError> {
        let mut session = self.session(session_id)?;
        let ended_at = now();
        session.state = state;
        session.ended_at = Some(ended_at.clone());
        session.samples = samples.len() as u64;
        session.growth = growth(&samples);
        session.error = error;
        let mut snapshots = Vec::new();
        if let Some(mut keeper) = heap {
            keeper.collect(session_id, &session.service, true, |m| self.file_of(m));
            summarize_heap(&mut session, &keeper, &samples);
            if let Some(why) = &session.heap_error {
                tracing::warn!(service = %session.service, session = %session.session_id, error = %why, "no heap summary");
            }
            snapshots = keeper.kept.into_iter().map(|k| k.meta).collect();
        }
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
            let mut body = body;
            if let Some(heap) = &session.heap {
                body["heap"] = json!(heap);
            }
            if let Some(why) = &session.heap_error {
                body["heap_error"] = json!(why);
            }
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
                kind: ArtifactKind::Samples,
                format: None,
                snapshot: None,
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
            index.artifacts.extend(snapshots);
            index.artifacts.extend(artifact);
            index.incidents.extend(incident);
        })?;
        let _ = std::fs::remove_file(self.samples_path(session_id));
        tracing::info!(service = %session.service, session = %session.session_id, state = state.as_str(), samples = session.samples, "profiling session finished");
        Ok(session)
    }

    /// The summary of a finished `session`, with its artifact's record.
    pub(super) fn summary(&self, session: &Session) -> Result<Value, ToolError> {
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
    pub(super) fn publish(&self, session_id: &str) -> Result<Value, ToolError> {
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
    pub(super) fn incident(
        &self,
        session: &Session,
        g: &Growth,
        ended_at: &str,
    ) -> Option<Incident> {
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
        let top = session
            .heap
            .as_ref()
            .and_then(|h| h.top_sites.first())
            .cloned();
        let named = top.as_ref().map_or_else(String::new, |t| {
            format!(
                "; the heap grew most in `{}` (+{} bytes)",
                t.function, t.growth_bytes
            )
        });
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
            ) + &named,
            top_site: top.map(|t| t.function),
        })
    }
}

/// Sets `session`'s heap summary (or why it has none) from the snapshots kept of what its
/// service wrote since it started, with RSS from `samples`.
fn summarize_heap(session: &mut Session, keeper: &Keeper, samples: &[Sample]) {
    set_heap(session, keeper.summary(started_at(session), samples));
}

/// Sets `session`'s heap summary, or why it has none.
fn set_heap(session: &mut Session, summary: Result<HeapSummary, HeapSummaryError>) {
    match summary {
        Ok(summary) => session.heap = Some(Box::new(summary)),
        Err(why) => session.heap_error = Some(why.to_string()),
    }
}

/// When `session` started.
pub(super) fn started_at(session: &Session) -> std::time::SystemTime {
    mcp_shared::time::parse(&session.started_at)
        .map_or(std::time::UNIX_EPOCH, std::time::SystemTime::from)
}

/// Writes `bytes` to `path` (a file in the profiles directory) through [`crate::store::state::write_atomic`].
pub(super) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ToolError> {
    crate::store::state::write_atomic(path, bytes)
        .map_err(|e| internal(format!("{}: cannot write: {}", e.path.display(), e.source)))
}

/// Directory of the profiling state under `state_dir`.
pub(crate) const PROFILES_DIR: &str = "profiles";
/// The index file in that directory.
pub(crate) const INDEX_FILE: &str = "index.json";
/// `format` of an artifact file.
pub(crate) const ARTIFACT_FORMAT: &str = "mcp-hub.memory-profile/v1";
/// Sessions kept (oldest dropped first, with their artifacts).
pub(crate) const KEEP_SESSIONS: usize = 200;
/// Incidents kept.
pub(crate) const KEEP_INCIDENTS: usize = 500;
/// Samples `get_session` shows of a session (the newest).
pub(crate) const RECENT_SAMPLES: usize = 60;
/// Smallest chunk of a chunked artifact delivery.
pub(crate) const MIN_CHUNK_BYTES: u64 = 1024;
/// Accepted sampling intervals, in ms.
pub(crate) const INTERVAL_MS: std::ops::RangeInclusive<u64> = 100..=60_000;
/// Accepted session durations, in seconds.
pub(crate) const DURATION_SEC: std::ops::RangeInclusive<u64> = 1..=3_600;

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(super) fn internal(message: String) -> ToolError {
    ToolError::new(ErrorCode::Internal, message)
}

pub(super) fn not_found(what: &str, id: &str) -> ToolError {
    ToolError::new(ErrorCode::NotFound, format!("no {what} `{id}` on this hub"))
}

pub(super) fn now() -> String {
    mcp_shared::time::format(mcp_shared::time::now())
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

/// The summary of a finished session.
pub(super) fn summary(
    target_id: &str,
    s: &Session,
    artifact: Option<Value>,
) -> Result<Value, ToolError> {
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
pub(super) fn admission(config: &ProfilingConfig, index: &Index, service: &str) -> Option<String> {
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
