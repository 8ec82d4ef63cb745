//! Why an event was not recorded: [`CommitError`], what the commit and flush threads tell
//! every caller of a failed batch, and [`AppendError`], what a caller of an append learns.
//! A leaf of `audit`, so the writer, its threads and the health watch all name it.

use std::sync::Arc;

/// Why an event was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// The writer tried and could not commit it (the trail is then marked unavailable).
    #[error("{0}")]
    NotCommitted(CommitError),
    /// The writer did not take the event or did not answer within its deadline.
    #[error("the audit writer did not take an append: {0}")]
    Unreachable(String),
}

/// Why a batch of events was not recorded after its retries: every caller of the batch is
/// told (a clone each, so the causes are shared).
#[derive(Debug, Clone, thiserror::Error)]
pub enum CommitError {
    /// The store refused the append (the writer actor's path).
    #[error("{0}")]
    Store(Arc<crate::store::Error>),
    /// The commit thread's SQLite connection refused it.
    #[error("append audit: {0}")]
    Sqlite(Arc<rusqlite::Error>),
    #[error("the audit trail's head kept moving under its writer")]
    HeadMoved,
    #[error("the audit flush thread has stopped")]
    FlushStopped,
    /// The `fsync` of the WAL failed (never retried, see [`super::flusher`]).
    #[error("flush the audit trail: {0}")]
    Flush(Arc<std::io::Error>),
}
