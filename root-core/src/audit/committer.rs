//! The audit writer's commit thread on embedded SQLite: one OS thread owning one connection
//! to the trail, committing batches back to back.
//!
//! The audit writer hands each event over without waiting ([`Committer::append`]); the thread
//! takes everything queued as one batch, chains it after the head it last committed, writes it
//! in one transaction and answers each caller with its `seq`. Events that arrive while a batch
//! is committing (its `fsync`) are already queued when it ends, so the next batch starts at
//! once, on this thread, without a trip through the async runtime: the database is never idle
//! while events wait, and batches grow with the load (group commit).
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

use super::writer::{APPEND_RETRIES, AppendReply, Args, GENESIS_HASH, chain_hash, retry_pause};
use crate::config::SqliteSync;
use crate::store::AuditEntry;

/// What the thread needs besides the events: the database file and the writer's arguments
/// (batch size, delay, running calls, head channel, health, metrics, replica id).
pub(crate) struct Settings {
    pub(crate) path: PathBuf,
    pub(crate) synchronous: SqliteSync,
    pub(crate) writer: Arc<Args>,
}

enum Job {
    Append(Box<AuditEntry>, AppendReply),
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
    /// Starts the thread. It opens its connection when the first batch arrives.
    pub(crate) fn start(settings: Settings) -> std::io::Result<Committer> {
        let (jobs, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("audit-commit".into())
            .spawn(move || run(settings, rx))?;
        Ok(Committer { jobs })
    }

    /// Queues `entry`; `reply` is answered when its batch is committed or has failed. When
    /// the thread has stopped the entry is handed back, not lost.
    pub(crate) fn append(
        &self,
        entry: Box<AuditEntry>,
        reply: AppendReply,
    ) -> Result<(), Box<AuditEntry>> {
        match self.jobs.send(Job::Append(entry, reply)) {
            Ok(()) => Ok(()),
            Err(mpsc::SendError(Job::Append(entry, _))) => Err(entry),
            Err(mpsc::SendError(Job::Drain(_))) => unreachable!("an append was sent"),
        }
    }

    /// Waits until everything queued so far is committed (or has failed).
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
    replies: Vec<AppendReply>,
    drained: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl Batch {
    fn take(&mut self, job: Job) {
        match job {
            Job::Append(e, r) => {
                self.entries.push(*e);
                self.replies.push(r);
            }
            Job::Drain(tx) => self.drained.push(tx),
        }
    }
}

/// The thread: batch, commit, answer, until the writer drops its [`Committer`].
fn run(settings: Settings, rx: Receiver<Job>) {
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
            commit(&settings, &mut log, &mut batch.entries, &mut batch.replies);
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
    log: &mut Log,
    entries: &mut Vec<AuditEntry>,
    replies: &mut Vec<AppendReply>,
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
                break Err("the audit trail's head kept moving under its writer".to_string());
            }
            Err(Failure::Db(err)) => break Err(format!("append audit: {err}")),
        }
    };
    match outcome {
        Ok(last_seq) => {
            let first = last_seq - entries.len() as i64 + 1;
            s.answer_committed(std::mem::take(replies), first, started)
        }
        Err(err) => s.answer_failed(std::mem::take(replies), &err),
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

/// The thread's connection, with the settings of the store's own (see `Store::open_with`).
fn open(s: &Settings) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        &s.path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(
        None,
        "synchronous",
        match s.synchronous {
            SqliteSync::Full => "FULL",
            SqliteSync::Normal => "NORMAL",
        },
    )?;
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
            replica_id: None,
            health: Default::default(),
            commits: Default::default(),
            rows: Default::default(),
            commit_latency: crate::telemetry::metrics::latency_histogram(),
            commit_thread: Default::default(),
        })
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

    async fn append(c: &Committer, n: i64) -> Result<i64, String> {
        let (tx, rx) = ractor::concurrency::oneshot();
        assert!(c.append(entry(n), tx.into()).is_ok(), "the thread runs");
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
        assert!(err.starts_with("append audit: "), "{err}");
        assert!(
            !args.health.is_available(),
            "the trail is marked unavailable"
        );
        assert_eq!(args.rows.get(), 0);
        assert_eq!(*args.head.borrow(), 0, "no head was published");
    }

    #[tokio::test]
    async fn a_drain_waits_for_what_was_handed_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.db");
        let store = crate::store::Store::open(&format!("sqlite:{}", path.display()))
            .await
            .expect("store");
        let args = writer_args(store);
        let c = Committer::start(Settings {
            path,
            synchronous: SqliteSync::Full,
            writer: args.clone(),
        })
        .expect("thread");
        let mut answers = Vec::new();
        for n in 1..=50 {
            let (tx, rx) = ractor::concurrency::oneshot();
            assert!(c.append(entry(n), tx.into()).is_ok());
            answers.push(rx);
        }
        c.drain().await;
        assert_eq!(
            args.rows.get(),
            50,
            "all fifty committed before the drain returned"
        );
        for (n, rx) in answers.into_iter().enumerate() {
            assert_eq!(rx.await.expect("answered"), Ok(n as i64 + 1));
        }
        let v = crate::audit::verify(&args.store).await.expect("verify");
        assert!(v.ok, "{:?}", v.first_broken);
        assert_eq!(v.checked, 50);
    }
}
