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

pub(crate) mod actor;
mod evidence;
pub(crate) mod heap;
mod sample;
mod store;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_shared::error::{ErrorCode, ToolError};
use ractor::rpc::CallResult;
use ractor::{ActorRef, RpcReplyPort};
use serde_json::Value;
#[cfg(test)]
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::config::{HubConfig, ProfilingConfig};
#[cfg(test)]
use crate::machine::services::Mode;
use crate::machine::services::Services;

pub(crate) use actor::{Msg, OpsArgs, ProfileOps};
pub(crate) use evidence::{Change, frames as evidence_frames};
#[cfg(test)]
use heap::collect::Keeper;
pub(crate) use sample::Sample;
#[cfg(test)]
pub(crate) use sample::{growth, sample};
#[cfg(test)]
use store::{ARTIFACT_FORMAT, Index};
pub(crate) use store::{
    ArtifactKind, ArtifactMeta, DURATION_SEC, INTERVAL_MS, Incident, MIN_CHUNK_BYTES, PROFILES_DIR,
    Session, SessionState, StartRequest,
};
use store::{Shared, admission, internal};

/// How a chunk or a whole artifact is delivered.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Delivery {
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

/// The profiling authority of one hub (in [`crate::context::Machine::profiles`]).
pub struct Profiles {
    shared: Arc<Shared>,
    actor: crate::restartable::Restartable<Msg>,
}

impl Profiles {
    pub(crate) fn new(config: &HubConfig) -> Profiles {
        Profiles {
            shared: Arc::new(Shared {
                dir: config.state_dir.join(PROFILES_DIR),
                config: config.profiling.clone(),
                target_id: config.target_id.clone(),
                index: Mutex::new(None),
                live: Mutex::new(HashMap::new()),
                live_heap: Mutex::new(HashMap::new()),
                epoch: Mutex::new(CancellationToken::new()),
                evidence_seq: tokio::sync::watch::channel(0).0,
            }),
            actor: Default::default(),
        }
    }

    /// Spawns the `ProfileOps` actor (which first finishes sessions a previous hub process
    /// left `running` as `interrupted`). The hub's supervisor uses [`Profiles::start_under`].
    #[cfg(test)]
    pub(crate) async fn start(&self, services: Services) -> anyhow::Result<()> {
        self.start_under(services, None).await.map(|_| ())
    }

    /// `Profiles::start` linked under `supervisor` (the hub's). A restarted actor rebuilds
    /// its state from the index on disk: sessions that were running end `interrupted` with
    /// the samples they kept, and their samplers are stopped.
    pub(crate) async fn start_under(
        &self,
        services: Services,
        supervisor: Option<ractor::ActorCell>,
    ) -> anyhow::Result<ActorRef<Msg>> {
        let args = OpsArgs {
            shared: self.shared.clone(),
            services,
        };
        self.actor
            .start(ProfileOps, args, supervisor, "ProfileOps")
            .await
    }

    /// The `ProfileOps` actor running now, if any.
    pub fn current(&self) -> Option<ActorRef<Msg>> {
        self.actor.current()
    }

    /// Stops the actor; running sessions are finished as `interrupted`.
    pub(crate) async fn stop(&self) {
        self.actor.stop(Duration::from_secs(10)).await;
    }

    pub(crate) fn config(&self) -> &ProfilingConfig {
        &self.shared.config
    }

    /// Follows the evidence log's latest position (see [`evidence`]).
    pub(crate) fn evidence_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.evidence_seq.subscribe()
    }

    /// The evidence log's epoch and latest position.
    pub(crate) fn evidence_head(&self) -> Result<(String, u64), ToolError> {
        self.shared
            .with(|i| (i.evidence.epoch.clone(), i.evidence.seq))
    }

    /// The evidence log's epoch and the records changed after `after` (each small artifact
    /// with its bytes), in log order.
    pub(crate) fn evidence_after(&self, after: u64) -> Result<(String, Vec<Change>), ToolError> {
        let max = self.shared.config.evidence_artifact_max_bytes;
        let (epoch, changes) = self.shared.with(|i| {
            let changes =
                evidence::changes_after(i, after, |id| self.shared.artifact_path(id), max);
            (i.evidence.epoch.clone(), changes)
        })?;
        // The files are read outside the index's lock.
        Ok((epoch, changes.into_iter().map(Change::load).collect()))
    }

    /// Chunk size of chunked deliveries.
    pub(crate) fn chunk_bytes(&self) -> u64 {
        self.shared
            .config
            .artifact_inline_max_bytes
            .max(MIN_CHUNK_BYTES)
    }

    /// Sessions newest first, filtered.
    pub(crate) fn sessions(
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
    pub(crate) fn counts(&self) -> Result<(usize, Vec<String>, usize, usize), ToolError> {
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

    /// One session and its newest samples (a running one with the heap snapshots kept so
    /// far summed up: read off the runtime's threads).
    pub(crate) async fn session(
        &self,
        session_id: &str,
    ) -> Result<(Session, Vec<Sample>), ToolError> {
        let shared = self.shared.clone();
        let id = session_id.to_owned();
        tokio::task::spawn_blocking(move || shared.session_with_samples(&id))
            .await
            .map_err(|e| internal(format!("reading a session failed: {e}")))?
    }

    /// Incidents newest first.
    pub(crate) fn incidents(
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

    /// Artifact records newest first: those of ended sessions, and the heap snapshots
    /// running sessions kept so far.
    pub(crate) fn artifacts(
        &self,
        service: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ArtifactMeta>, ToolError> {
        let mut all = self.shared.with(|i| i.artifacts.clone())?;
        all.extend(self.shared.live_artifacts());
        // RFC 3339 times of one format sort as text; the index's order breaks ties.
        all.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        Ok(all
            .into_iter()
            .rev()
            .filter(|x| service.is_none_or(|n| x.service == n))
            .take(limit)
            .collect())
    }

    /// `get_artifact`: the whole artifact inline when small enough and no range is asked,
    /// else the chunked delivery contract, or the chunk at `offset` (at most `chunk_bytes`).
    pub(crate) fn artifact(
        &self,
        artifact_id: &str,
        offset: Option<u64>,
        length: Option<u64>,
    ) -> Result<Delivery, ToolError> {
        let (meta, bytes) = self.shared.artifact_bytes(artifact_id)?;
        let chunk = self.chunk_bytes();
        let size = bytes.len() as u64;
        if offset.is_none() && length.is_none() {
            // A heap snapshot is binary: it always comes in chunks.
            if meta.kind == ArtifactKind::Samples
                && size <= self.shared.config.artifact_inline_max_bytes
            {
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
        self.actor
            .current()
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
    pub(crate) async fn start_session(
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
    pub(crate) async fn stop_session(
        &self,
        session_id: &str,
        deadline: tokio::time::Instant,
    ) -> Result<(Session, bool), ToolError> {
        let session_id = session_id.to_owned();
        self.ask(deadline, |reply| Msg::Stop { session_id, reply })
            .await
    }

    /// Marks a finished session published; its summary.
    pub(crate) async fn publish(
        &self,
        session_id: &str,
        deadline: tokio::time::Instant,
    ) -> Result<Value, ToolError> {
        let session_id = session_id.to_owned();
        self.ask(deadline, |reply| Msg::Publish { session_id, reply })
            .await
    }

    /// The session `session_id` (as readers see it).
    pub(crate) fn get(&self, session_id: &str) -> Result<Session, ToolError> {
        Ok(self.shared.view(self.shared.session(session_id)?))
    }

    /// Whether a new session for `service` would be refused with `busy`, and why.
    pub(crate) fn admission(&self, service: &str) -> Result<Option<String>, ToolError> {
        self.shared
            .with(|i| admission(&self.shared.config, i, service))
    }

    /// The compact summary `publish_profile` publishes for `session` (see its contract);
    /// `busy` while it runs.
    pub(crate) fn summary(&self, session: &Session) -> Result<Value, ToolError> {
        self.shared.summary(session)
    }
}

#[cfg(test)]
mod profiles_tests;
