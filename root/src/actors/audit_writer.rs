//! Audit writer: appends operational events to the hash-chained trail in batches.
//!
//! Every `Append` is answered only after its batch is committed, so a call's response never
//! precedes its durable audit event. Appends that arrive while a batch is being written queue
//! in the mailbox and form the next batch. Each row stores the previous row's hash; its own
//! hash is `sha256(prev_hash "\n" canonical_event_json)`.
//!
//! The head a batch follows is read inside the batch's transaction. With replicas on one
//! PostgreSQL database that read is serialized by an advisory lock, so the writers of every
//! replica extend one chain for the zone, in commit order (see `Store::append_audit_chained`).

use std::sync::Arc;
use std::time::Duration;

use mcp_shared::event::OperationalEvent;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use sha2::{Digest, Sha256};

use crate::store::{AuditRow, Store};

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
pub fn event_json(event: &OperationalEvent) -> String {
    let value = serde_json::to_value(event).unwrap_or(serde_json::Value::Null);
    String::from_utf8(mcp_shared::canonical::to_vec(&value)).unwrap_or_default()
}

/// Answered with the event's sequence number once it is committed.
pub type AppendReply = RpcReplyPort<Result<i64, String>>;

pub enum Msg {
    Append(Box<OperationalEvent>, AppendReply),
    Flush,
}

pub struct Args {
    pub store: Store,
    pub batch_max: usize,
    /// The sequence number of the newest committed row, published after every commit (the
    /// audit live stream waits on it instead of polling the store).
    pub head: Arc<tokio::sync::watch::Sender<i64>>,
    /// Stored with each row: the replica that wrote it (replicas on PostgreSQL).
    pub replica_id: Option<String>,
    /// Marked unavailable when a batch cannot be committed (calls are then refused).
    pub health: Arc<crate::audit_health::AuditHealth>,
}

pub struct AuditWriter;

pub struct State {
    store: Store,
    batch_max: usize,
    replica_id: Option<String>,
    head_tx: Arc<tokio::sync::watch::Sender<i64>>,
    health: Arc<crate::audit_health::AuditHealth>,
    pending: Vec<(Box<OperationalEvent>, AppendReply)>,
    flush_scheduled: bool,
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
        let (head_seq, _) = args
            .store
            .audit_head()
            .await?
            .unwrap_or((0, GENESIS_HASH.to_string()));
        args.head.send_if_modified(|h| {
            let newer = head_seq > *h;
            *h = (*h).max(head_seq);
            newer
        });
        Ok(State {
            store: args.store.clone(),
            batch_max: args.batch_max,
            replica_id: args.replica_id.clone(),
            head_tx: args.head.clone(),
            health: args.health.clone(),
            pending: Vec::new(),
            flush_scheduled: false,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Msg>,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        flush(state).await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Msg>,
        msg: Msg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            Msg::Append(event, reply) => {
                state.pending.push((event, reply));
                if state.pending.len() >= state.batch_max {
                    flush(state).await;
                } else if !state.flush_scheduled {
                    state.flush_scheduled = true;
                    // Queued behind the appends already in the mailbox, so they join this batch.
                    myself.send_message(Msg::Flush)?;
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
    let pending = std::mem::take(&mut state.pending);
    let events: Vec<(OperationalEvent, String)> = pending
        .iter()
        .map(|(e, _)| ((**e).clone(), event_json(e)))
        .collect();
    let chain = |head_seq: i64, head_hash: String| {
        let (mut seq, mut prev) = if head_seq == 0 {
            (0, GENESIS_HASH.to_string())
        } else {
            (head_seq, head_hash)
        };
        events
            .iter()
            .map(|(event, json)| {
                seq += 1;
                let hash = chain_hash(&prev, json);
                AuditRow {
                    seq,
                    event: event.clone(),
                    event_json: json.clone(),
                    prev_hash: std::mem::replace(&mut prev, hash.clone()),
                    hash,
                    replica_id: state.replica_id.clone(),
                }
            })
            .collect::<Vec<_>>()
    };
    let mut attempt = 0;
    let res = loop {
        match state.store.append_audit_chained(chain).await {
            Ok(rows) => break Ok(rows),
            Err(err) if attempt < 3 => {
                attempt += 1;
                if state.health.is_available() {
                    tracing::warn!(%err, attempt, "audit append failed; retrying");
                }
                tokio::time::sleep(Duration::from_millis(50 * attempt)).await;
            }
            Err(err) => break Err(err.to_string()),
        }
    };
    match res {
        Ok(rows) => {
            if let Some(last) = rows.last() {
                let seq = last.seq;
                state.head_tx.send_if_modified(|h| {
                    let newer = seq > *h;
                    *h = (*h).max(seq);
                    newer
                });
            }
            for ((_, reply), row) in pending.into_iter().zip(&rows) {
                let _ = reply.send(Ok(row.seq));
            }
        }
        Err(err) => {
            if state.health.is_available() {
                tracing::error!(%err, n = pending.len(), "audit append failed; its calls are answered with audit_unavailable");
                state.health.mark_unavailable(&err);
            } else {
                tracing::debug!(%err, n = pending.len(), "audit append failed again");
            }
            for (_, reply) in pending {
                let _ = reply.send(Err(err.clone()));
            }
        }
    }
}
