//! How far the trail is flushed (on disk, safe against power loss), and on embedded SQLite
//! the thread that flushes it.
//!
//! The commit thread ([`super::committer`]) commits every batch without waiting for the disk
//! (SQLite's `synchronous=NORMAL` in WAL mode: a commit survives root crashing). This thread
//! then `fsync`s the WAL file, which makes every commit before it durable at once (there is
//! one WAL file), and publishes the newest `seq` it covers ([`Flushed`]). Callers whose event
//! must be flushed (anything with an effect, and reads under `[audit] reads = "flushed"`) are
//! answered only then; reads are answered at the commit. A flush follows a commit at once when
//! a caller waits for it, else within [`READ_FLUSH_DELAY`] (what a power loss can cost), and
//! commits that arrive while a flush runs share the next one.
//!
//! Checkpoints, witnesses' cosignatures and sinks go only as far as [`Flushed::bound`], so none
//! of them ever covers an event a power loss could take back. On PostgreSQL every commit is
//! flushed as the server is configured (`synchronous_commit`), so the bound is the head.
//!
//! A failed `fsync` is not retried (after one, Linux may have dropped the pages it could not
//! write, and a retry that succeeds proves nothing): its callers are answered with the error
//! and the trail is marked unavailable, so calls are refused until an append is flushed again.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::failure::CommitError;
use super::health::AuditHealth;

/// How an append's caller is answered: its `seq`, or why it was not recorded (by the commit
/// thread, or by this thread once the event is flushed).
pub(crate) type AppendReply = ractor::RpcReplyPort<Result<i64, CommitError>>;

/// Publishes `seq` on `newest` unless a newer one already is (the trail's committed head and
/// its flushed seq alike; the audit live stream waits on the head).
pub(crate) fn publish_newest(newest: &tokio::sync::watch::Sender<i64>, seq: i64) {
    newest.send_if_modified(|h| {
        let newer = seq > *h;
        *h = (*h).max(seq);
        newer
    });
}

/// Longest a committed read event waits for its flush when no caller waits for one.
pub const READ_FLUSH_DELAY: Duration = Duration::from_millis(10);

/// The newest flushed `seq` of this root's trail.
#[derive(Debug)]
pub struct Flushed {
    seq: tokio::sync::watch::Sender<i64>,
    /// PostgreSQL: a commit is a flush, so every committed row is flushed.
    every_commit: bool,
    /// Fault injection: while set, the flush thread waits before its next `fsync`.
    held: Mutex<bool>,
    released: Condvar,
}

impl Flushed {
    /// `every_commit`: the store flushes each commit itself (PostgreSQL).
    pub fn new(every_commit: bool) -> Flushed {
        Flushed {
            seq: tokio::sync::watch::Sender::new(0),
            every_commit,
            held: Mutex::new(false),
            released: Condvar::new(),
        }
    }

    /// For the trail in `store`: on PostgreSQL every commit is flushed; on SQLite the flush
    /// thread says how far it went.
    pub fn for_store(store: &crate::store::Store) -> Flushed {
        Flushed::new(store.sqlite_file().is_none())
    }

    /// Of the trail up to `head` (the store's newest `seq`), how far is flushed.
    pub fn bound(&self, head: i64) -> i64 {
        if self.every_commit {
            head
        } else {
            head.min(*self.seq.borrow())
        }
    }

    /// The newest flushed `seq` this root published.
    pub fn seq(&self) -> i64 {
        *self.seq.borrow()
    }

    /// Changes whenever a newer `seq` is flushed.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<i64> {
        self.seq.subscribe()
    }

    pub(crate) fn publish(&self, seq: i64) {
        publish_newest(&self.seq, seq);
    }

    /// Fault injection: the next `fsync` waits until [`Flushed::release`].
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn hold(&self) {
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) = true;
    }

    #[cfg(any(test, feature = "fault-injection"))]
    pub fn release(&self) {
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) = false;
        self.released.notify_all();
    }

    fn wait_released(&self) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        while *held {
            held = self.released.wait(held).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Committed rows up to `upto`, and the callers waiting for their flush with their `seq`.
pub(crate) struct Committed {
    pub(crate) upto: i64,
    pub(crate) waiting: Vec<(i64, AppendReply)>,
}

/// The handle the commit thread keeps; dropping it lets the thread flush what is queued and
/// exit.
pub(crate) struct Flusher {
    jobs: Sender<Committed>,
    health: Arc<AuditHealth>,
}

impl Flusher {
    /// Starts the thread for the database file at `db` (its WAL file is `<db>-wal`), which
    /// publishes to `flushed` and marks `health` unavailable when a flush fails.
    pub(crate) fn start(
        db: &std::path::Path,
        flushed: Arc<Flushed>,
        health: Arc<AuditHealth>,
    ) -> std::io::Result<Flusher> {
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        let wal = PathBuf::from(wal);
        // Whatever an earlier process committed is flushed before anything is published.
        sync(&wal)?;
        let (jobs, rx) = mpsc::channel();
        let thread_health = health.clone();
        std::thread::Builder::new()
            .name("audit-flush".into())
            .spawn(move || run(&wal, &flushed, &thread_health, &rx))?;
        Ok(Flusher { jobs, health })
    }

    /// Hands over a committed batch. When the thread has stopped, its waiting callers are
    /// answered with the error.
    pub(crate) fn send(&self, committed: Committed) {
        if let Err(mpsc::SendError(c)) = self.jobs.send(committed) {
            let replies = c.waiting.into_iter().map(|(_, r)| r).collect();
            refuse(&self.health, replies, CommitError::FlushStopped);
        }
    }
}

fn run(wal: &std::path::Path, flushed: &Flushed, health: &AuditHealth, rx: &Receiver<Committed>) {
    while let Ok(first) = rx.recv() {
        let mut upto = first.upto;
        let mut waiting = first.waiting;
        let mut merge = |c: Committed, waiting: &mut Vec<(i64, AppendReply)>| {
            upto = upto.max(c.upto);
            waiting.extend(c.waiting);
        };
        // Nobody waits: give later commits the delay to share this flush.
        let until = Instant::now() + READ_FLUSH_DELAY;
        while waiting.is_empty() {
            match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(c) => merge(c, &mut waiting),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        while let Ok(c) = rx.try_recv() {
            merge(c, &mut waiting);
        }
        flushed.wait_released();
        match sync(wal) {
            Ok(()) => {
                flushed.publish(upto);
                for (seq, reply) in waiting {
                    let _ = reply.send(Ok(seq));
                }
            }
            Err(e) => {
                let replies = waiting.into_iter().map(|(_, r)| r).collect();
                refuse(health, replies, CommitError::Flush(Arc::new(e)));
            }
        }
    }
}

/// Answers `replies` with `err` and marks the trail unavailable (logged once per outage).
pub(crate) fn refuse(health: &AuditHealth, replies: Vec<AppendReply>, err: CommitError) {
    if health.is_available() {
        tracing::error!(%err, n = replies.len(), "audit append failed; its calls are answered with audit_unavailable");
        health.mark_unavailable(&err.to_string());
    } else {
        tracing::debug!(%err, n = replies.len(), "audit append failed again");
    }
    for reply in replies {
        let _ = reply.send(Err(err.clone()));
    }
}

/// `fsync`s the WAL file: every commit written to it so far is on disk. A missing WAL file
/// has nothing unflushed (SQLite removes it only after copying it into the database, flushed).
fn sync(wal: &std::path::Path) -> std::io::Result<()> {
    match std::fs::File::open(wal) {
        Ok(f) => f.sync_data(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
