//! The audit writer's commit thread on embedded SQLite: one OS thread owning one connection
//! to the trail, committing batches back to back.
//!
//! The audit writer hands each event over without waiting ([`Committer::append`]); the thread
//! takes everything queued as one batch, chains it after the head it last committed, writes it
//! in one transaction and answers each caller with its `seq`. Events that arrive while a batch
//! is committing are already queued when it ends, so the next batch starts at once, on this
//! thread, without a trip through the async runtime: the database is never idle while events
//! wait, and batches grow with the load (group commit).
//!
//! A batch is committed without waiting for the disk (`synchronous=NORMAL` in WAL mode: safe
//! against root crashing). Callers of [`Durability::Written`] events are answered then; the
//! batch then goes to the flush thread ([`super::flusher`]), which answers the callers of
//! [`Durability::Flushed`] events once the WAL is on disk, while this thread commits the next
//! batches. With `[storage] sqlite_synchronous = "normal"` nobody waits for a flush.
//!
//! Same rules as the writer's PostgreSQL path: nobody is answered before their row is
//! committed; a batch that fails is retried three times (50, 100, 150 ms apart) and then marks
//! the trail unavailable ([`crate::audit::health`]) and answers its callers with the error.
//! The thread keeps the head it committed instead of reading it per batch; a row appended by
//! anyone else makes the first `seq` collide (primary key), nothing of the batch is written,
//! the head is read again and the batch chained after it. After any other failure the
//! connection is dropped and opened again and the head re-read, so no state of a failed
//! transaction leaks into the next.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, params};

use super::failure::CommitError;
use super::flusher::{AppendReply, Committed, Flusher};
use super::writer::{APPEND_RETRIES, Args, GENESIS_HASH, chain_hash, retry_pause};
use crate::config::{Durability, SqliteSync};
use crate::store::AuditEntry;

/// What the thread needs besides the events: the database file and the writer's arguments
/// (batch size, delay, running calls, head channel, health, metrics, replica id).
pub(crate) struct Settings {
    pub(crate) path: PathBuf,
    pub(crate) synchronous: SqliteSync,
    pub(crate) writer: Arc<Args>,
}

enum Job {
    Append(Box<AuditEntry>, Durability, AppendReply),
    /// Answered once everything queued before it is committed (or has failed).
    Drain(tokio::sync::oneshot::Sender<()>),
}

/// The handle the audit writer keeps; dropping it lets the thread finish what is queued and
/// exit.
pub struct Committer {
    jobs: Sender<Job>,
}

/// The commit thread has stopped (it panicked); its writer is restarted by the supervisor.
#[derive(Debug, thiserror::Error)]
#[error("the audit commit thread has stopped")]
pub(crate) struct Stopped;

impl Committer {
    /// Starts the thread and its flush thread (which first flushes what an earlier process
    /// committed and publishes it). It opens its connection when the first batch arrives.
    pub(crate) fn start(settings: Settings) -> std::io::Result<Committer> {
        let (jobs, rx) = mpsc::channel();
        let w = &settings.writer;
        let flusher = Flusher::start(&settings.path, w.flushed.clone(), w.health.clone())?;
        std::thread::Builder::new()
            .name("audit-commit".into())
            .spawn(move || run(settings, flusher, rx))?;
        Ok(Committer { jobs })
    }

    /// Queues `entry`; `reply` is answered when its batch is committed, or flushed as
    /// `durability` asks, or has failed. When the thread has stopped the entry is handed back,
    /// not lost.
    pub(crate) fn append(
        &self,
        entry: Box<AuditEntry>,
        durability: Durability,
        reply: AppendReply,
    ) -> Result<(), Box<AuditEntry>> {
        match self.jobs.send(Job::Append(entry, durability, reply)) {
            Ok(()) => Ok(()),
            Err(mpsc::SendError(Job::Append(entry, _, _))) => Err(entry),
            Err(mpsc::SendError(Job::Drain(_))) => unreachable!("an append was sent"),
        }
    }

    /// Waits until everything queued so far is committed (or has failed); its flush follows.
    pub(crate) async fn drain(&self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.jobs.send(Job::Drain(tx)).is_ok() {
            let _ = rx.await;
        }
    }
}

/// The events of the next batch, their callers in the same order, and the drains waiting.
#[derive(Default)]
struct Batch {
    entries: Vec<AuditEntry>,
    replies: Vec<(Durability, AppendReply)>,
    drained: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl Batch {
    fn take(&mut self, job: Job) {
        match job {
            Job::Append(e, d, r) => {
                self.entries.push(*e);
                self.replies.push((d, r));
            }
            Job::Drain(tx) => self.drained.push(tx),
        }
    }
}

/// The thread: batch, commit, answer, until the writer drops its [`Committer`].
fn run(settings: Settings, flusher: Flusher, rx: Receiver<Job>) {
    let s = &*settings.writer;
    let mut log = Log {
        conn: None,
        head: None,
    };
    let mut batch = Batch::default();
    while let Ok(first) = rx.recv() {
        batch.take(first);
        // Everything already queued joins the batch.
        while batch.entries.len() < s.batch_max {
            match rx.try_recv() {
                Ok(job) => batch.take(job),
                Err(_) => break,
            }
        }
        // Calls still running will append soon: wait for their events until none is
        // running, the batch is full or the delay is over (at once when the writer is gone).
        if !batch.entries.is_empty() && !s.commit_delay.is_zero() {
            let until = Instant::now() + s.commit_delay;
            while batch.entries.len() < s.batch_max && s.running.count() > 0 {
                match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                    Ok(job) => batch.take(job),
                    Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
                }
            }
        }
        if !batch.entries.is_empty() {
            commit(
                &settings,
                &flusher,
                &mut log,
                &mut batch.entries,
                &mut batch.replies,
            );
        }
        for tx in batch.drained.drain(..) {
            let _ = tx.send(());
        }
    }
}

/// The thread's connection and the head it last committed (`None`: read it first).
struct Log {
    conn: Option<Connection>,
    head: Option<(i64, String)>,
}

/// How a batch failed.
enum Failure {
    /// Rows were appended by someone else since the head this thread knew.
    HeadMoved,
    Db(rusqlite::Error),
}

impl From<rusqlite::Error> for Failure {
    fn from(e: rusqlite::Error) -> Failure {
        Failure::Db(e)
    }
}

fn commit(
    settings: &Settings,
    flusher: &Flusher,
    log: &mut Log,
    entries: &mut Vec<AuditEntry>,
    replies: &mut Vec<(Durability, AppendReply)>,
) {
    let s = &*settings.writer;
    let started = std::time::Instant::now();
    let mut attempt = 0;
    let outcome = loop {
        match log.append(settings, entries) {
            Ok(last) => break Ok(last),
            Err(Failure::HeadMoved) if attempt < APPEND_RETRIES => {
                attempt += 1;
                tracing::warn!("audit trail head moved under this writer; reading it again");
            }
            Err(Failure::Db(err)) if attempt < APPEND_RETRIES => {
                attempt += 1;
                if s.health.is_available() {
                    tracing::warn!(%err, attempt, "audit append failed; retrying");
                }
                std::thread::sleep(retry_pause(attempt));
            }
            Err(Failure::HeadMoved) => {
                break Err(CommitError::HeadMoved);
            }
            Err(Failure::Db(err)) => break Err(CommitError::Sqlite(Arc::new(err))),
        }
    };
    match outcome {
        Ok(last_seq) => {
            let first = last_seq - entries.len() as i64 + 1;
            let mut written = Vec::with_capacity(replies.len());
            let mut waiting = Vec::new();
            for (seq, (durability, reply)) in (first..).zip(replies.drain(..)) {
                match durability {
                    Durability::Flushed if settings.synchronous == SqliteSync::Full => {
                        waiting.push((seq, reply));
                    }
                    _ => written.push((seq, reply)),
                }
            }
            s.answer_committed(last_seq, entries.len(), written, started);
            flusher.send(Committed {
                upto: last_seq,
                waiting,
            });
        }
        Err(err) => {
            let replies = replies.drain(..).map(|(_, r)| r).collect();
            s.answer_failed(replies, err)
        }
    }
    entries.clear();
}

impl Log {
    /// Writes `entries` after the head in one transaction; the `seq` of the last on success.
    /// On failure nothing is written and the connection and head are forgotten.
    fn append(&mut self, s: &Settings, entries: &[AuditEntry]) -> Result<i64, Failure> {
        let res = self.try_append(s, entries);
        if res.is_err() {
            // Closing the connection rolls back whatever the failed transaction left open.
            self.conn = None;
            self.head = None;
        }
        res
    }

    fn try_append(&mut self, s: &Settings, entries: &[AuditEntry]) -> Result<i64, Failure> {
        if self.conn.is_none() {
            self.conn = Some(open(s)?);
        }
        let conn = self.conn.as_ref().expect("opened above");
        let (mut seq, mut prev) = match self.head.take() {
            Some(head) => head,
            None => read_head(conn)?,
        };
        conn.execute_batch("BEGIN IMMEDIATE")?;
        {
            let mut insert = conn.prepare_cached(crate::store::AUDIT_INSERT_ONE_SQL)?;
            for e in entries {
                seq += 1;
                let hash = chain_hash(&prev, &e.event_json);
                match insert.execute(params![
                    seq,
                    e.event_id,
                    e.trace_id,
                    e.target_id,
                    e.tool_id,
                    e.status,
                    e.actor,
                    e.started_at_ms,
                    e.event_json,
                    prev,
                    hash,
                    s.writer.replica_id,
                ]) {
                    Ok(_) => {}
                    Err(rusqlite::Error::SqliteFailure(f, _))
                        if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY =>
                    {
                        return Err(Failure::HeadMoved);
                    }
                    Err(e) => return Err(e.into()),
                }
                prev = hash;
            }
        }
        conn.execute_batch("COMMIT")?;
        self.head = Some((seq, prev));
        Ok(seq)
    }
}

/// The newest row's `(seq, hash)`, or `(0, GENESIS_HASH)` for an empty trail.
fn read_head(conn: &Connection) -> rusqlite::Result<(i64, String)> {
    let head = conn
        .prepare_cached("SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1")?
        .query_row([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)));
    match head {
        Ok(h) => Ok(h),
        Err(rusqlite::Error::QueryReturnedNoRows) => Ok((0, GENESIS_HASH.to_string())),
        Err(e) => Err(e),
    }
}

/// The thread's connection, with the settings of the store's own (see `Store::open_with`)
/// except `synchronous`.
fn open(s: &Settings) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        &s.path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // Commits do not wait for the disk; the flush thread makes them durable.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer_args(store: crate::store::Store) -> Arc<Args> {
        Arc::new(Args {
            store,
            batch_max: 512,
            commit_delay: Duration::ZERO,
            running: Default::default(),
            head: Arc::new(tokio::sync::watch::Sender::new(0)),
            flushed: Arc::new(super::super::flusher::Flushed::new(false)),
            replica_id: None,
            health: Default::default(),
            commits: Default::default(),
            rows: Default::default(),
            commit_latency: crate::telemetry::metrics::latency_histogram(),
            commit_thread: Default::default(),
        })
    }

    /// A commit thread on a fresh trail in a temporary directory (kept while it is used).
    async fn started(synchronous: SqliteSync) -> (tempfile::TempDir, Arc<Args>, Committer) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.db");
        let store = crate::store::Store::open(&format!("sqlite:{}", path.display()))
            .await
            .expect("store");
        let args = writer_args(store);
        let settings = Settings {
            path,
            synchronous,
            writer: args.clone(),
        };
        let c = Committer::start(settings).expect("thread");
        (dir, args, c)
    }

    fn entry(n: i64) -> Box<AuditEntry> {
        Box::new(AuditEntry {
            event_id: format!("e-{n}"),
            trace_id: format!("t-{n}"),
            target_id: None,
            tool_id: "sdk.list_schemas".into(),
            status: "ok",
            actor: "lease:s".into(),
            started_at_ms: n,
            event_json: format!("{{\"n\":{n}}}"),
        })
    }

    async fn append(c: &Committer, n: i64) -> Result<i64, CommitError> {
        let (tx, rx) = ractor::concurrency::oneshot();
        assert!(
            c.append(entry(n), Durability::Flushed, tx.into()).is_ok(),
            "the thread runs"
        );
        rx.await.expect("answered")
    }

    #[tokio::test]
    async fn a_trail_that_cannot_be_written_fails_its_callers_and_marks_it_unavailable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store =
            crate::store::Store::open(&format!("sqlite:{}", dir.path().join("a.db").display()))
                .await
                .expect("store");
        let args = writer_args(store);
        // The database file is gone (its directory with it): every attempt fails.
        let c = Committer::start(Settings {
            path: dir.path().join("gone").join("a.db"),
            synchronous: SqliteSync::Full,
            writer: args.clone(),
        })
        .expect("thread");
        let err = append(&c, 1).await.expect_err("nothing to write to");
        assert!(matches!(err, CommitError::Sqlite(_)), "{err}");
        assert!(err.to_string().starts_with("append audit: "), "{err}");
        assert!(
            !args.health.is_available(),
            "the trail is marked unavailable"
        );
        assert_eq!(args.rows.get(), 0);
        assert_eq!(*args.head.borrow(), 0, "no head was published");
    }

    #[tokio::test]
    async fn a_drain_waits_for_what_was_handed_over() {
        let (_dir, args, c) = started(SqliteSync::Full).await;
        let mut answers = Vec::new();
        for n in 1..=50 {
            let (tx, rx) = ractor::concurrency::oneshot();
            assert!(c.append(entry(n), Durability::Written, tx.into()).is_ok());
            answers.push(rx);
        }
        c.drain().await;
        assert_eq!(
            args.rows.get(),
            50,
            "all fifty committed before the drain returned"
        );
        for (n, rx) in answers.into_iter().enumerate() {
            assert_eq!(
                rx.await.expect("answered").map_err(|e| e.to_string()),
                Ok(n as i64 + 1)
            );
        }
        let v = crate::audit::verify(&args.store).await.expect("verify");
        assert!(v.ok, "{:?}", v.first_broken);
        assert_eq!(v.checked, 50);
    }

    #[tokio::test]
    async fn reads_are_answered_at_their_commit_and_effects_at_their_flush() {
        let (_dir, args, c) = started(SqliteSync::Full).await;
        args.flushed.hold();
        let (tx, read) = ractor::concurrency::oneshot();
        assert!(c.append(entry(1), Durability::Written, tx.into()).is_ok());
        assert_eq!(
            read.await.expect("answered").map_err(|e| e.to_string()),
            Ok(1),
            "a read waits for no flush"
        );
        let (tx, mut effect) = ractor::concurrency::oneshot();
        assert!(c.append(entry(2), Durability::Flushed, tx.into()).is_ok());
        c.drain().await;
        assert_eq!(*args.head.borrow(), 2, "both are committed");
        assert!(
            effect.try_recv().is_err(),
            "an effect is not answered before its flush"
        );
        assert_eq!(args.flushed.seq(), 0, "nothing past the flush is published");
        assert_eq!(args.flushed.bound(2), 0);
        args.flushed.release();
        assert_eq!(
            effect.await.expect("answered").map_err(|e| e.to_string()),
            Ok(2)
        );
        assert_eq!(
            args.flushed.seq(),
            2,
            "published before its callers are answered"
        );
    }

    #[tokio::test]
    async fn with_synchronous_normal_nobody_waits_for_a_flush() {
        let (_dir, args, c) = started(SqliteSync::Normal).await;
        args.flushed.hold();
        assert_eq!(
            append(&c, 1).await.map_err(|e| e.to_string()),
            Ok(1),
            "answered while the flush is held"
        );
        assert_eq!(args.flushed.seq(), 0);
        args.flushed.release();
        // The flush still follows within its delay, for checkpoints and sinks.
        let mut seq = args.flushed.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(10), seq.wait_for(|s| *s == 1)).await;
        assert_eq!(args.flushed.seq(), 1);
    }
}
