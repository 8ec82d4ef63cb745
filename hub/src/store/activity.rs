//! The hub's activity record: every call the channel finishes (after the gate, refusals by
//! the gate included) as one [`ActivityEntry`] in a bounded in-memory ring of the last
//! [`CAPACITY`] calls. Written only by `crate::link::channel::execute`; read by the
//! `activity_log` and `capability_usage` adapters. Nothing is persisted: the record starts
//! empty with the hub process.

use std::collections::VecDeque;
use std::sync::Mutex;

use mcp_shared::error::ErrorCode;
use mcp_shared::time::OffsetDateTime;
use serde::Serialize;

/// Calls retained; the oldest is dropped when a new one arrives.
pub(crate) const CAPACITY: usize = 1000;
/// Longest recorded identifier (call id, trace id, tool id), in characters.
pub(crate) const MAX_ID_CHARS: usize = 200;

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ActivityStatus {
    /// The adapter answered.
    Ok,
    /// The call reached an adapter, which failed it (including `busy`, `timeout`,
    /// `adapter_failed`).
    Error,
    /// The gate refused the call before any adapter ran.
    Refused,
}

impl ActivityStatus {
    pub(crate) fn parse(s: &str) -> Option<ActivityStatus> {
        match s {
            "ok" => Some(ActivityStatus::Ok),
            "error" => Some(ActivityStatus::Error),
            "refused" => Some(ActivityStatus::Refused),
            _ => None,
        }
    }
}

/// One finished call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ActivityEntry {
    pub call_id: String,
    pub trace_id: String,
    pub tool_id: String,
    /// The adapter that ran the call; `None` when the gate refused it.
    pub adapter: Option<String>,
    pub status: ActivityStatus,
    pub error_code: Option<ErrorCode>,
    pub dry_run: bool,
    #[serde(with = "mcp_shared::time::rfc3339")]
    pub started_at: OffsetDateTime,
    pub duration_ms: u64,
}

/// Truncates an identifier to [`MAX_ID_CHARS`] characters.
pub(crate) fn bounded_id(s: &str) -> String {
    match s.char_indices().nth(MAX_ID_CHARS) {
        Some((at, _)) => s[..at].to_owned(),
        None => s.to_owned(),
    }
}

/// The ring of the last [`CAPACITY`] calls, oldest first.
#[derive(Debug)]
pub(crate) struct ActivityLog {
    capacity: usize,
    entries: Mutex<VecDeque<ActivityEntry>>,
}

impl Default for ActivityLog {
    fn default() -> Self {
        ActivityLog::with_capacity(CAPACITY)
    }
}

impl ActivityLog {
    pub(crate) fn with_capacity(capacity: usize) -> ActivityLog {
        let capacity = capacity.max(1);
        ActivityLog {
            capacity,
            entries: Mutex::new(VecDeque::with_capacity(capacity)),
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<ActivityEntry>> {
        // A panic while holding the lock cannot leave the ring inconsistent (push/pop only).
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends a finished call, dropping the oldest beyond capacity.
    pub(crate) fn record(&self, entry: ActivityEntry) {
        let mut entries = self.lock();
        while entries.len() >= self.capacity {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// How many calls are retained.
    pub(crate) fn retained(&self) -> usize {
        self.lock().len()
    }

    /// Every retained call, oldest first.
    pub(crate) fn snapshot(&self) -> Vec<ActivityEntry> {
        self.lock().iter().cloned().collect()
    }

    /// Up to `limit` retained calls matching the filters, newest first.
    pub(crate) fn recent(
        &self,
        limit: usize,
        tool_id: Option<&str>,
        status: Option<ActivityStatus>,
    ) -> Vec<ActivityEntry> {
        self.lock()
            .iter()
            .rev()
            .filter(|e| tool_id.is_none_or(|t| e.tool_id == t))
            .filter(|e| status.is_none_or(|s| e.status == s))
            .take(limit)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests;
