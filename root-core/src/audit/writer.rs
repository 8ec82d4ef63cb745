//! Audit writer: appends operational events to the hash-chained trail in batches.
//!
//! Every `Append` is answered only after its batch is committed, and an event that must be
//! flushed ([`Durability::Flushed`]: anything with an effect) only after it is on disk, so a
//! call's response never precedes its audit event. Appends that arrive while a batch is being written queue
//! in the mailbox and form the next batch. Each row stores the previous row's hash; its own
//! hash is `sha256(prev_hash "\n" canonical_event_json)`.
//!
//! Group commit: a batch's commit (its `fsync`) costs the same for one row as for many. When
//! an event arrives while other calls are still running (see [`RunningCalls`]), the writer
//! waits `audit_commit_delay_ms` before committing so that their events join the batch; an
//! event with no call running beside it is committed at once, so a lone caller never waits.
//!
//! On embedded SQLite the batches are formed and committed by the writer's commit thread
//! ([`super::committer`]), which starts the next batch the moment the last one is
//! durable; the actor hands each event over without waiting. On PostgreSQL the actor batches
//! itself and the head a batch follows is read inside the batch's transaction, serialized by
//! an advisory lock, so the writers of every replica extend one chain for the zone, in commit
//! order (see `Store::append_audit_chained`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcp_shared::event::OperationalEvent;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use sha2::{Digest, Sha256};

use super::committer::Committer;
use super::flusher::{AppendReply, Flushed, publish_newest};
use crate::config::Durability;
use crate::store::{AuditEntry, ChainLink, Store};

/// The `prev_hash` of the first row.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The chain hash of a row.
pub fn chain_hash(prev_hash: &str, event_json: &str) -> String {
    let mut h = Sha256::new();
    h.update(prev_hash.as_bytes());
    h.update(b"\n");
    h.update(event_json.as_bytes());
    hex::encode(h.finalize())
}

/// The stored form of an event: canonical JSON.
pub(crate) fn event_json(event: &OperationalEvent) -> String {
    let value = serde_json::to_value(event).unwrap_or(serde_json::Value::Null);
    String::from_utf8(mcp_shared::canonical::to_vec(&value)).unwrap_or_default()
}

/// The stored form of an event with the columns the trail is indexed by; consumes the event
/// (nothing is cloned on the way to the store).
pub(crate) fn entry(event: OperationalEvent) -> AuditEntry {
    let event_json = event_json(&event);
    AuditEntry {
        started_at_ms: mcp_shared::time::unix_ms(event.started_at),
        status: event.status.as_str(),
        event_id: column(event.event_id),
        trace_id: column(event.trace_id),
        target_id: event.target_id.map(column),
        tool_id: column(event.tool_id),
        actor: column(event.actor.id),
        event_json,
    }
}

/// A text column's value: a NUL character (which PostgreSQL refuses in text, so one in a
/// refused request's field would fail the whole batch) becomes U+FFFD. The event itself,
/// hashed and verified, keeps it, escaped in its JSON.
fn column(value: String) -> String {
    if value.contains('\0') {
        value.replace('\0', "\u{FFFD}")
    } else {
        value
    }
}

/// Calls between their start and their audit append: the writer's hint that more events are
/// about to arrive (group commit).
#[derive(Debug, Default)]
pub struct RunningCalls(AtomicUsize);

impl RunningCalls {
    /// Counts a call as running until the guard is dropped (just before its append).
    pub fn enter(self: &Arc<Self>) -> RunningGuard {
        self.0.fetch_add(1, Ordering::Relaxed);
        RunningGuard(self.clone())
    }

    pub(crate) fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// One running call (see [`RunningCalls::enter`]).
pub struct RunningGuard(Arc<RunningCalls>);

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::Relaxed);
    }
}

pub use super::failure::{AppendError, CommitError};

/// How long a caller waits for its event to be committed before giving up on the writer.
pub(crate) const APPEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Appends `event` to the trail and returns its `seq` once it is committed (and flushed, as
/// `durability` asks). On embedded SQLite the event goes straight to the writer's commit
/// thread (serialized here, on the caller's task); otherwise, or when that thread has
/// stopped, through the writer actor.
pub(crate) async fn append(
    actor: &ActorRef<Msg>,
    commit_thread: &CommitThread,
    event: OperationalEvent,
    durability: Durability,
) -> Result<i64, AppendError> {
    let mut entry = Box::new(entry(event));
    if let Some(committer) = commit_thread.load_full() {
        let (tx, rx) = ractor::concurrency::oneshot();
        match committer.append(entry, durability, tx.into()) {
            Ok(()) => {
                return match tokio::time::timeout(APPEND_TIMEOUT, rx).await {
                    Ok(Ok(Ok(seq))) => Ok(seq),
                    Ok(Ok(Err(e))) => Err(AppendError::NotCommitted(e)),
                    Ok(Err(_)) => Err(AppendError::Unreachable(
                        "the commit thread dropped the event".into(),
                    )),
                    Err(_) => Err(AppendError::Unreachable(format!(
                        "no answer within {} s",
                        APPEND_TIMEOUT.as_secs()
                    ))),
                };
            }
            // The thread has stopped: the actor (restarted by its supervisor) takes it.
            Err(returned) => entry = returned,
        }
    }
    match ractor::call_t!(
        actor,
        Msg::Append,
        APPEND_TIMEOUT.as_millis() as u64,
        entry,
        durability
    ) {
        Ok(Ok(seq)) => Ok(seq),
        Ok(Err(e)) => Err(AppendError::NotCommitted(e)),
        Err(e) => Err(AppendError::Unreachable(e.to_string())),
    }
}

pub enum Msg {
    /// An event in its stored form (see [`entry`]) and when its caller is answered.
    Append(Box<AuditEntry>, Durability, AppendReply),
    Flush,
    /// Test builds only: panic, so tests can prove the supervisor contains it.
    #[cfg(any(test, feature = "fault-injection"))]
    Panic,
}

pub struct Args {
    pub store: Store,
    pub batch_max: usize,
    /// How long a batch waits for the events of running calls (0: not at all).
    pub commit_delay: Duration,
    /// Calls that will append an event soon.
    pub running: Arc<RunningCalls>,
    /// The sequence number of the newest committed row, published after every commit (the
    /// audit live stream waits on it instead of polling the store).
    pub head: Arc<tokio::sync::watch::Sender<i64>>,
    /// How far the trail is on disk (published by the flush thread on SQLite).
    pub flushed: Arc<Flushed>,
    /// Stored with each row: the replica that wrote it (replicas on PostgreSQL).
    pub replica_id: Option<String>,
    /// Marked unavailable when a batch cannot be committed (calls are then refused).
    pub health: Arc<crate::audit::health::AuditHealth>,
    /// Counted per committed batch and per committed row (`/metrics`).
    pub commits: prometheus_client::metrics::counter::Counter,
    pub rows: prometheus_client::metrics::counter::Counter,
    /// Observed per committed batch: from its first attempt to its commit.
    pub commit_latency: prometheus_client::metrics::histogram::Histogram,
    /// Embedded SQLite: the running writer's commit thread, published so that callers hand
    /// their events to it directly (see [`append`]); empty on PostgreSQL.
    pub commit_thread: CommitThread,
}

impl Args {
    /// Counts a committed batch of `rows` rows ending at `last_seq`, publishes the new head,
    /// then answers `replies` with their `seq` (in that order: a caller that sees its `seq`
    /// sees the counters and the head include it).
    pub(super) fn answer_committed(
        &self,
        last_seq: i64,
        rows: usize,
        replies: Vec<(i64, AppendReply)>,
        started: std::time::Instant,
    ) {
        if rows == 0 {
            return;
        }
        self.commits.inc();
        self.commit_latency.observe(started.elapsed().as_secs_f64());
        self.rows.inc_by(rows as u64);
        publish_newest(&self.head, last_seq);
        for (seq, reply) in replies {
            let _ = reply.send(Ok(seq));
        }
    }

    /// Answers the callers of a batch that could not be committed after its retries with
    /// `err`, and marks the trail unavailable (logged once per outage).
    pub(super) fn answer_failed(&self, replies: Vec<AppendReply>, err: CommitError) {
        super::flusher::refuse(&self.health, replies, err);
    }
}

/// How often a batch is retried before its callers get the error.
pub(super) const APPEND_RETRIES: u64 = 3;

/// The pause before retry `attempt` (1-based) of a failed batch.
pub(super) fn retry_pause(attempt: u64) -> Duration {
    Duration::from_millis(50 * attempt)
}

/// The commit thread of the running audit writer, if it has one (see [`Args::commit_thread`]).
pub type CommitThread = Arc<arc_swap::ArcSwapOption<Committer>>;

pub(crate) struct AuditWriter;

pub(crate) struct State {
    args: Arc<Args>,
    /// Entries of the next batch and their callers, in the same order.
    pending: Vec<AuditEntry>,
    replies: Vec<AppendReply>,
    flush_scheduled: bool,
    /// Embedded SQLite: the commit thread every event is handed to (also published in
    /// `args.commit_thread`).
    committer: Option<Arc<Committer>>,
}

impl Actor for AuditWriter {
    type Msg = Msg;
    type State = State;
    type Arguments = Arc<Args>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Msg>,
        args: Arc<Args>,
    ) -> Result<State, ActorProcessingErr> {
        let head = args.store.audit_head().await?.unwrap_or((0, String::new()));
        publish_newest(&args.head, head.0);
        // On SQLite the flush thread flushes what is stored before it starts: it is flushed.
        let committer = match args.store.sqlite_file() {
            Some(file) => Some(Arc::new(Committer::start(super::committer::Settings {
                path: file.path.clone(),
                synchronous: file.synchronous,
                writer: args.clone(),
            })?)),
            None => None,
        };
        args.flushed.publish(head.0);
        args.commit_thread.store(committer.clone());
        Ok(State {
            args,
            pending: Vec::new(),
            replies: Vec::new(),
            flush_scheduled: false,
            committer,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Msg>,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match &state.committer {
            Some(committer) => {
                // Unpublished (unless a restarted writer already published its own), then
                // everything handed over so far is committed.
                let mine = Some(committer.clone());
                state.args.commit_thread.compare_and_swap(&mine, None);
                committer.drain().await;
            }
            None => flush(state).await,
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Msg>,
        msg: Msg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            #[cfg(any(test, feature = "fault-injection"))]
            Msg::Panic => panic!("fault injected into the audit writer"),
            Msg::Append(event, durability, reply) => {
                if let Some(committer) = &state.committer {
                    // The thread answers `reply` once the event is committed (or flushed).
                    if committer.append(event, durability, reply).is_err() {
                        return Err(super::committer::Stopped.into());
                    }
                    return Ok(());
                }
                state.pending.push(*event);
                state.replies.push(reply);
                let args = &state.args;
                if state.pending.len() >= args.batch_max {
                    flush(state).await;
                } else if !state.flush_scheduled {
                    state.flush_scheduled = true;
                    if !args.commit_delay.is_zero() && args.running.count() > 0 {
                        // Other calls are running: give their events the delay to join.
                        myself.send_after(args.commit_delay, || Msg::Flush);
                    } else {
                        // Queued behind the appends already in the mailbox, so they join
                        // this batch.
                        myself.send_message(Msg::Flush)?;
                    }
                }
            }
            Msg::Flush => {
                state.flush_scheduled = false;
                flush(state).await;
            }
        }
        Ok(())
    }
}

async fn flush(state: &mut State) {
    if state.pending.is_empty() {
        return;
    }
    let entries = std::mem::take(&mut state.pending);
    let replies = std::mem::take(&mut state.replies);
    let chain = |head_seq: i64, head_hash: String| {
        let (mut seq, mut prev) = if head_seq == 0 {
            (0, GENESIS_HASH.to_string())
        } else {
            (head_seq, head_hash)
        };
        entries
            .iter()
            .map(|e| {
                seq += 1;
                let hash = chain_hash(&prev, &e.event_json);
                ChainLink {
                    seq,
                    prev_hash: std::mem::replace(&mut prev, hash.clone()),
                    hash,
                }
            })
            .collect::<Vec<_>>()
    };
    let args = &state.args;
    let started = std::time::Instant::now();
    let mut attempt = 0;
    let res = loop {
        match args
            .store
            .append_audit_chained(&entries, args.replica_id.as_deref(), chain)
            .await
        {
            Ok(links) => break Ok(links),
            Err(err) if attempt < APPEND_RETRIES => {
                attempt += 1;
                if args.health.is_available() {
                    tracing::warn!(%err, attempt, "audit append failed; retrying");
                }
                tokio::time::sleep(retry_pause(attempt)).await;
            }
            Err(err) => break Err(CommitError::Store(Arc::new(err))),
        }
    };
    match res {
        Ok(links) => {
            // A PostgreSQL commit is flushed as the server is configured: everyone is answered.
            let last = links.last().map_or(0, |l| l.seq);
            let seqs = links.iter().map(|l| l.seq);
            args.answer_committed(last, links.len(), seqs.zip(replies).collect(), started);
            args.flushed.publish(last);
        }
        Err(err) => args.answer_failed(replies, err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_shared::event::{Actor as EventActor, Decision, EventStatus, PolicyDecision, Surface};

    #[test]
    fn a_nul_in_a_column_is_replaced_there_and_kept_in_the_hashed_event() {
        let mut e = *event(1);
        e.tool_id = "hub.get\0status".into();
        e.target_id = Some("hub:\0".into());
        let entry = entry(e);
        assert_eq!(entry.tool_id, "hub.get\u{FFFD}status");
        assert_eq!(entry.target_id.as_deref(), Some("hub:\u{FFFD}"));
        assert!(
            entry.event_json.contains(r#""hub.get\u0000status""#),
            "{}",
            entry.event_json
        );
        assert_eq!(entry.actor, "lease:s");
    }

    fn event(n: usize) -> Box<OperationalEvent> {
        let at = mcp_shared::time::now();
        Box::new(OperationalEvent {
            event_id: uuid::Uuid::now_v7().to_string(),
            trace_id: format!("trace-{n}"),
            request_id: n.to_string(),
            surface: Surface::Rest,
            actor: EventActor {
                id: "lease:s".into(),
                session_id: Some("s".into()),
                audience: None,
                capability_profile: None,
            },
            target_id: Some("hub:t".into()),
            tool_id: "hub.get_status".into(),
            capability: None,
            policy_decision: PolicyDecision {
                decision: Decision::Allow,
                reason: None,
                checks: Vec::new(),
            },
            execution_adapter: None,
            dry_run: false,
            status: EventStatus::Ok,
            started_at: at,
            finished_at: at,
            request: serde_json::json!({ "n": n }),
            result_summary: None,
            error: None,
            redactions: Vec::new(),
            retried: Vec::new(),
        })
    }

    struct Writer {
        actor: ActorRef<Msg>,
        args: Arc<Args>,
        _dir: tempfile::TempDir,
    }

    async fn writer(batch_max: usize, commit_delay: Duration) -> Writer {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite:{}", dir.path().join("audit.db").display());
        let store = Store::open(&url).await.expect("store");
        let args = Arc::new(Args {
            store,
            batch_max,
            commit_delay,
            running: Arc::new(RunningCalls::default()),
            head: Arc::new(tokio::sync::watch::Sender::new(0)),
            flushed: Arc::new(Flushed::new(false)),
            replica_id: None,
            health: Arc::new(crate::audit::health::AuditHealth::default()),
            commits: Default::default(),
            rows: Default::default(),
            commit_latency: crate::telemetry::metrics::latency_histogram(),
            commit_thread: Default::default(),
        });
        let (actor, _) = Actor::spawn(None, AuditWriter, args.clone())
            .await
            .expect("spawn");
        Writer {
            actor,
            args,
            _dir: dir,
        }
    }

    async fn append(actor: &ActorRef<Msg>, n: usize) -> i64 {
        // The bound only keeps a broken writer from hanging the test; no timing is asserted.
        ractor::call_t!(
            actor,
            Msg::Append,
            30_000,
            Box::new(entry(*event(n))),
            Durability::Flushed
        )
        .expect("answered")
        .expect("committed")
    }

    #[tokio::test]
    async fn a_lone_event_is_committed_without_waiting_for_the_delay() {
        // A delay no test could sit out: with no call running, the writer must not use it.
        let w = writer(512, Duration::from_secs(3600)).await;
        assert_eq!(append(&w.actor, 1).await, 1);
        assert_eq!(append(&w.actor, 2).await, 2);
        assert_eq!(w.args.commits.get(), 2);
        assert_eq!(w.args.rows.get(), 2);
        w.actor.stop(None);
    }

    #[tokio::test]
    async fn events_of_running_calls_share_one_commit() {
        // While a call runs, the writer waits; the batch goes out when it is full.
        let w = writer(4, Duration::from_secs(3600)).await;
        let running = w.args.running.enter();
        let actor = w.actor.clone();
        let first = tokio::spawn(async move { append(&actor, 0).await });
        // Without the delay this first event would be committed alone by now.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !first.is_finished(),
            "the writer waits for the running call"
        );
        assert_eq!(w.args.commits.get(), 0);
        let rest = futures::future::join_all((1..4).map(|n| append(&w.actor, n))).await;
        let mut seqs = rest;
        seqs.push(first.await.expect("first append"));
        seqs.sort_unstable();
        assert_eq!(seqs, vec![1, 2, 3, 4]);
        assert_eq!(w.args.commits.get(), 1, "four events, one commit");
        assert_eq!(w.args.rows.get(), 4);
        drop(running);
        assert_eq!(w.args.running.count(), 0);
        // The chain they form verifies like any other.
        let v = crate::audit::verify(&w.args.store).await.expect("verify");
        assert!(v.ok, "{:?}", v.first_broken);
        assert_eq!(v.checked, 4);
        w.actor.stop(None);
    }

    #[tokio::test]
    async fn a_row_appended_behind_the_writers_back_is_chained_after() {
        // The writer appends after the head it last committed without reading it again; a row
        // another writer appended meanwhile must not be overwritten, forked or lost.
        let w = writer(512, Duration::ZERO).await;
        assert_eq!(append(&w.actor, 1).await, 1);
        let other = entry(*event(2));
        let links = w
            .args
            .store
            .append_audit_chained(&[other], None, |seq, hash| {
                vec![ChainLink {
                    seq: seq + 1,
                    hash: chain_hash(&hash, "other"),
                    prev_hash: hash,
                }]
            })
            .await
            .expect("the other writer's row");
        assert_eq!(links[0].seq, 2);
        assert_eq!(append(&w.actor, 3).await, 3, "chained after the other row");
        let rows = w
            .args
            .store
            .audit_chain_page(0, 10)
            .await
            .expect("chain page");
        assert_eq!(rows.len(), 3);
        assert_eq!(
            rows[2].2, rows[1].3,
            "row 3 links to the other writer's row"
        );
        w.actor.stop(None);
    }

    #[tokio::test]
    async fn concurrent_appends_form_one_gapless_chain() {
        // Events handed over while batches commit: every caller gets its own seq, the
        // seqs are 1..=n without a gap, and the chain verifies.
        let w = writer(512, Duration::ZERO).await;
        let n = 300;
        let mut seqs = futures::future::join_all((0..n).map(|i| append(&w.actor, i))).await;
        seqs.sort_unstable();
        assert_eq!(seqs, (1..=n as i64).collect::<Vec<_>>());
        assert_eq!(w.args.rows.get(), n as u64);
        assert!(w.args.commits.get() >= 1);
        assert_eq!(*w.args.head.borrow(), n as i64, "the head is published");
        let v = crate::audit::verify(&w.args.store).await.expect("verify");
        assert!(v.ok, "{:?}", v.first_broken);
        assert_eq!(v.checked, n as u64);
        w.actor.stop(None);
    }

    #[tokio::test]
    async fn a_short_delay_commits_a_partial_batch() {
        let w = writer(512, Duration::from_millis(5)).await;
        let running = w.args.running.enter();
        let appends = (0..3).map(|n| append(&w.actor, n));
        let seqs = futures::future::join_all(appends).await;
        assert_eq!(seqs.len(), 3);
        assert_eq!(w.args.rows.get(), 3);
        assert!(w.args.commits.get() >= 1);
        drop(running);
        w.actor.stop(None);
    }
}
