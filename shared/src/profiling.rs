//! ProfileOps records: what a hub's profiling keeps (sessions, incidents, artifact records)
//! and publishes to root as evidence (the protocol's `evidence` frame), so root can answer
//! the profiler reads while the hub is offline (seed "ProfileOps": routing split by evidence
//! source).
//!
//! Readers are tolerant: a field a newer hub adds is ignored by an older root, as for every
//! protocol type.

use serde::{Deserialize, Serialize};

/// Which argv a managed service runs: `argv` (normal) or `profiling_argv` (profiling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Normal,
    Profiling,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Normal => "normal",
            Mode::Profiling => "profiling",
        }
    }
}

/// Where a profiling session is.
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

/// RSS growth over a session's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// One profiling session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Where the heap grew, from the service's heap snapshots (when its profiling mode writes
    /// them, `heap_profiles` in the hub's service config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap: Option<Box<HeapSummary>>,
    /// Why the heap snapshots could not be summarized (the session's other evidence stands).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_error: Option<String>,
}

/// Two heap snapshots of a session diffed: the allocation sites that grew most.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeapSummary {
    /// `pprof` or `heaptrack`.
    pub format: String,
    /// The snapshots compared (file names in the service's heap directory; the earlier one
    /// absent when the session saw one snapshot) and when each was written (RFC 3339).
    pub from_snapshot: Option<String>,
    pub to_snapshot: String,
    pub from_taken_at: Option<String>,
    pub to_taken_at: String,
    /// The artifacts that keep those two snapshots (`hub.memory.get_artifact`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_artifact_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_artifact_id: Option<String>,
    /// Heap snapshots the session kept as artifacts.
    #[serde(default)]
    pub snapshots_kept: u32,
    /// Snapshot files of the session's time skipped, and why (another process's, too large).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// Live heap at the later snapshot, and its growth since the earlier one.
    pub heap_bytes: i64,
    pub growth_bytes: i64,
    /// Objects, when the profile counts them (jemalloc's pprof does not; Go's does).
    pub growth_objects: Option<i64>,
    /// Whether the profile names functions (else frames are addresses in their mapping).
    pub symbolized: bool,
    /// The sites that grew most, largest growth first.
    pub top_sites: Vec<HeapSite>,
    /// RSS over the same interval (first and last sample between the two snapshots).
    pub rss_from_bytes: Option<u64>,
    pub rss_to_bytes: Option<u64>,
}

/// One allocation site: the first frame outside the allocator and the frames after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeapSite {
    /// The allocating function (or address).
    pub function: String,
    /// The stack's leading frames from that function on (callee first).
    pub frames: Vec<String>,
    pub growth_bytes: i64,
    pub growth_objects: Option<i64>,
    /// Live bytes at the later snapshot.
    pub bytes: i64,
}

/// A memory-growth incident.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// The allocating function that grew most over the window, when heap snapshots say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_site: Option<String>,
}

/// An artifact's record (the artifact is a file on the hub).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactMeta {
    pub artifact_id: String,
    pub session_id: String,
    pub service: String,
    pub created_at: String,
    pub size_bytes: u64,
    /// Hex SHA-256 of the file's bytes.
    pub sha256: String,
    /// What it holds (records of earlier builds hold samples).
    #[serde(default)]
    pub kind: ArtifactKind,
    /// A heap snapshot's format (`pprof`, `heaptrack`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// A heap snapshot's file name as the service wrote it (never its directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
}

/// What an artifact holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactKind {
    /// A session's samples, growth and heap summary (JSON).
    #[default]
    Samples,
    /// A heap profile the service wrote during a session, as collected (paths redacted).
    HeapSnapshot,
}

/// Largest artifact a hub sends to root with its record (and root keeps): larger ones stay on
/// the hub, and root answers for them with where they are.
pub const EVIDENCE_CONTENT_MAX_BYTES: u64 = 256 * 1024;

/// One record of a hub's evidence, as it is now (a newer one with the same id replaces it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum EvidenceRecord {
    Session(Session),
    Incident(Incident),
    Artifact {
        meta: ArtifactMeta,
        /// The artifact's exact bytes (UTF-8 JSON) when they are at most
        /// [`EVIDENCE_CONTENT_MAX_BYTES`]; root checks them against `meta.sha256`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
    },
}

impl EvidenceRecord {
    /// `session`, `incident` or `artifact`.
    pub fn kind(&self) -> &'static str {
        match self {
            EvidenceRecord::Session(_) => "session",
            EvidenceRecord::Incident(_) => "incident",
            EvidenceRecord::Artifact { .. } => "artifact",
        }
    }

    /// The record's id (a UUID v7: ids sort by creation).
    pub fn id(&self) -> &str {
        match self {
            EvidenceRecord::Session(s) => &s.session_id,
            EvidenceRecord::Incident(i) => &i.incident_id,
            EvidenceRecord::Artifact { meta, .. } => &meta.artifact_id,
        }
    }

    /// The managed service it concerns.
    pub fn service(&self) -> &str {
        match self {
            EvidenceRecord::Session(s) => &s.service,
            EvidenceRecord::Incident(i) => &i.service,
            EvidenceRecord::Artifact { meta, .. } => &meta.service,
        }
    }
}

/// How far root holds a hub's evidence log: the log's `epoch` (a new one when the hub's
/// profiling state starts afresh) and the position of the last change root stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceCursor {
    pub epoch: String,
    pub seq: u64,
}
