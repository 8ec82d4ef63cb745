//! Hub lifecycle events (connected, disconnected, surface changed) kept in a bounded ring, so
//! that `get_subnet_timeline` can interleave them with the audit trail's calls.
//!
//! The ring is in memory: after a restart the timeline starts again from the audit trail
//! (which is persistent) and new lifecycle events.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::Serialize;
use time::OffsetDateTime;

/// Lifecycle events kept.
pub(crate) const CAPACITY: usize = 2_000;

/// What happened to a target's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LifecycleKind {
    Connected,
    Disconnected,
    SurfaceChanged,
}

impl LifecycleKind {
    /// Its wire name (`connected`, `disconnected`, `surface_changed`).
    pub fn as_str(self) -> &'static str {
        match self {
            LifecycleKind::Connected => "connected",
            LifecycleKind::Disconnected => "disconnected",
            LifecycleKind::SurfaceChanged => "surface_changed",
        }
    }
}

/// One lifecycle event.
#[derive(Debug, Clone, Serialize)]
pub struct LifecycleEvent {
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub target_id: String,
    pub(crate) subnet_id: String,
    pub kind: LifecycleKind,
    pub detail: String,
}

#[derive(Default)]
pub struct Timeline {
    events: Mutex<VecDeque<LifecycleEvent>>,
}

impl Timeline {
    pub fn record(&self, target_id: &str, subnet_id: &str, kind: LifecycleKind, detail: String) {
        let Ok(mut events) = self.events.lock() else {
            return;
        };
        if events.len() == CAPACITY {
            events.pop_front();
        }
        events.push_back(LifecycleEvent {
            at: mcp_shared::time::now(),
            target_id: target_id.to_owned(),
            subnet_id: subnet_id.to_owned(),
            kind,
            detail,
        });
    }

    /// The newest `limit` events of `subnet_id` since `since` that `wanted` takes (by kind,
    /// by target), newest first.
    pub fn recent(
        &self,
        subnet_id: &str,
        since: OffsetDateTime,
        limit: usize,
        wanted: impl Fn(&LifecycleEvent) -> bool,
    ) -> Vec<LifecycleEvent> {
        let Ok(events) = self.events.lock() else {
            return Vec::new();
        };
        events
            .iter()
            .rev()
            .filter(|e| e.subnet_id == subnet_id && e.at >= since && wanted(e))
            .take(limit)
            .cloned()
            .collect()
    }
}
