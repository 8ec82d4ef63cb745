//! Lease manager: creates, revokes and rotates MCP Session Leases, and keeps their usage.
//!
//! Invariant: the actor is this replica's only writer. The request path authenticates against
//! the published [`LeaseIndex`] (token hash → entry) and bumps usage atomically; the actor
//! writes changes to the store *before* publishing them, so a revoke is in force from the next
//! request, and flushes usage counters to the store every second (as increments, so replicas
//! serving one lease add up). With replicas, the index also takes leases other replicas
//! issued or revoked ([`LeaseIndex::upsert`], from the store), and a revoke or rotate is
//! conditional on the lease still being active in the store.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use dashmap::DashMap;
use mcp_shared::lease::{LeaseStatus, SessionLease};
use mcp_shared::time::{from_unix_ms, now, unix_ms};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::auth;
use crate::store::Store;

/// One lease as the request path sees it: immutable binding plus atomic status and usage.
pub struct LeaseEntry {
    lease: SessionLease,
    /// The first lease of its rotation chain (see [`LeaseEntry::lineage`]).
    lineage: String,
    status: AtomicU8,
    use_count: AtomicU64,
    last_used_ms: AtomicI64,
    dirty: AtomicBool,
    /// `use_count` when usage was last written to the store.
    flushed: AtomicU64,
}

fn status_code(s: LeaseStatus) -> u8 {
    match s {
        LeaseStatus::Active => 0,
        LeaseStatus::Expired => 1,
        LeaseStatus::Revoked => 2,
    }
}

impl LeaseEntry {
    fn new(lease: SessionLease, lineage: String) -> LeaseEntry {
        LeaseEntry {
            lineage,
            status: AtomicU8::new(status_code(lease.status)),
            use_count: AtomicU64::new(lease.use_count),
            last_used_ms: AtomicI64::new(lease.last_used_at.map(unix_ms).unwrap_or(0)),
            dirty: AtomicBool::new(false),
            flushed: AtomicU64::new(lease.use_count),
            lease,
        }
    }

    /// A freshness-normalized copy (expired leases show `expired`, never `active`).
    pub fn snapshot(&self) -> SessionLease {
        let mut l = self.lease.clone();
        l.status = match self.status.load(Ordering::Acquire) {
            0 => LeaseStatus::Active,
            1 => LeaseStatus::Expired,
            _ => LeaseStatus::Revoked,
        };
        l.use_count = self.use_count.load(Ordering::Relaxed);
        let ms = self.last_used_ms.load(Ordering::Relaxed);
        l.last_used_at = (ms > 0).then(|| from_unix_ms(ms));
        l.normalized(now())
    }

    pub fn session_id(&self) -> &str {
        &self.lease.session_id
    }

    pub fn lease(&self) -> &SessionLease {
        &self.lease
    }

    /// The session id of the lease this one was rotated from, through every rotation (its
    /// own id when it was issued directly): the owner of its idempotency keys, so a client
    /// that retries an execute with a rotated bearer still gets its replay.
    pub fn lineage(&self) -> &str {
        &self.lineage
    }

    /// Who owns the idempotency keys this lease sends: `lease:<lineage>`.
    pub fn idempotency_owner(&self) -> String {
        format!("lease:{}", self.lineage)
    }

    /// Whether the lease authorizes a request now.
    pub fn is_usable(&self) -> bool {
        self.status.load(Ordering::Acquire) == 0 && now() < self.lease.deadline_at
    }

    /// Records one use.
    pub fn touch(&self) {
        self.use_count.fetch_add(1, Ordering::Relaxed);
        self.last_used_ms.store(unix_ms(now()), Ordering::Relaxed);
        self.dirty.store(true, Ordering::Release);
    }
}

/// The published read side: bearer hash → lease, session id → lease.
#[derive(Default)]
pub struct LeaseIndex {
    by_hash: DashMap<String, Arc<LeaseEntry>>,
    by_id: DashMap<String, Arc<LeaseEntry>>,
}

impl LeaseIndex {
    /// The usable lease a bearer resolves to, if any (unknown, expired and revoked: `None`).
    pub fn authenticate(&self, token: &str) -> Option<Arc<LeaseEntry>> {
        let entry = self.by_hash.get(&auth::token_hash(token))?.clone();
        entry.is_usable().then_some(entry)
    }

    /// The entry of a bearer hash, usable or not.
    pub fn by_hash(&self, token_hash: &str) -> Option<Arc<LeaseEntry>> {
        self.by_hash.get(token_hash).map(|e| e.clone())
    }

    /// The entry of a session id, usable or not.
    pub fn entry(&self, session_id: &str) -> Option<Arc<LeaseEntry>> {
        self.by_id.get(session_id).map(|e| e.clone())
    }

    /// Takes a lease as stored (issued or changed by another replica): a new entry, or the
    /// stored status on the existing one. A lease that is no longer active never becomes
    /// active again here.
    ///
    /// Check and insert are one step (the session id's map entry is held), so two replicas'
    /// views of one lease arriving at once (a bearer's first use and a revocation from the
    /// change feed) cannot leave the active one in place of the revoked one.
    pub fn upsert(&self, row: crate::store::LeaseRow) -> Arc<LeaseEntry> {
        match self.by_id.entry(row.lease.session_id.clone()) {
            dashmap::Entry::Occupied(o) => {
                let e = o.get().clone();
                if row.lease.status != LeaseStatus::Active {
                    e.status
                        .store(status_code(row.lease.status), Ordering::Release);
                }
                e
            }
            dashmap::Entry::Vacant(v) => {
                let entry = Arc::new(LeaseEntry::new(row.lease, row.lineage));
                v.insert(entry.clone());
                self.by_hash.insert(row.token_hash, entry.clone());
                entry
            }
        }
    }

    pub fn get(&self, session_id: &str) -> Option<SessionLease> {
        self.by_id.get(session_id).map(|e| e.snapshot())
    }

    /// All leases, newest first, freshness-normalized.
    pub fn list(&self) -> Vec<SessionLease> {
        let mut v: Vec<_> = self.by_id.iter().map(|e| e.snapshot()).collect();
        v.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then(a.session_id.cmp(&b.session_id))
        });
        v
    }

    /// Leases active now (for metrics).
    pub fn active_count(&self) -> usize {
        self.by_id.iter().filter(|e| e.is_usable()).count()
    }

    /// Usable leases by capability profile.
    pub fn active_by_profile(&self) -> std::collections::BTreeMap<String, usize> {
        let mut by = std::collections::BTreeMap::new();
        for e in self.by_id.iter().filter(|e| e.is_usable()) {
            *by.entry(e.lease.capability_profile.clone()).or_default() += 1;
        }
        by
    }

    fn insert(&self, hash: String, entry: Arc<LeaseEntry>) {
        self.by_id
            .insert(entry.lease.session_id.clone(), entry.clone());
        self.by_hash.insert(hash, entry);
    }
}

/// What a lease is created for (the admin's request, already validated by the caller).
#[derive(Debug, Clone)]
pub struct NewLease {
    pub target_id: String,
    pub subnet_id: String,
    pub zone: String,
    pub audience: String,
    pub capability_profile: String,
    pub effective_tools: Vec<String>,
    pub ttl: Duration,
    /// The lineage of the lease this one replaces (a rotation); `None` starts a new one.
    pub lineage: Option<String>,
    /// The lease a run credential is issued under (revoked with it).
    pub parent: Option<String>,
}

/// A lease revoked, with the run credentials revoked with it.
#[derive(Debug, Clone)]
pub struct Revoked {
    pub lease: SessionLease,
    pub children: Vec<String>,
}

/// A lease plus its bearer, which is shown exactly once.
#[derive(Debug, Clone)]
pub struct IssuedLease {
    pub lease: SessionLease,
    pub token: String,
    /// Run credentials revoked with the lease this one replaced (a rotation).
    pub revoked: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("no lease `{0}`")]
    NotFound(String),
    #[error("lease `{0}` is {1} and cannot be changed")]
    NotActive(String, &'static str),
    #[error(transparent)]
    Store(#[from] crate::store::Error),
}

pub enum Msg {
    Create(NewLease, RpcReplyPort<Result<IssuedLease, LeaseError>>),
    Revoke(String, RpcReplyPort<Result<Revoked, LeaseError>>),
    /// A rotation revokes the old lease's run credentials too (`IssuedLease::revoked`).
    Rotate(String, RpcReplyPort<Result<IssuedLease, LeaseError>>),
    FlushUsage,
    /// Test builds only: panic, so tests can prove the supervisor contains it.
    #[cfg(any(test, feature = "fault-injection"))]
    Panic,
}

pub struct LeaseManager;

pub struct Args {
    pub store: Store,
    pub index: Arc<LeaseIndex>,
}

pub struct State {
    store: Store,
    index: Arc<LeaseIndex>,
}

impl Actor for LeaseManager {
    type Msg = Msg;
    type State = State;
    type Arguments = Arc<Args>;

    async fn pre_start(
        &self,
        myself: ActorRef<Msg>,
        args: Arc<Args>,
    ) -> Result<State, ActorProcessingErr> {
        // (Re)build the index from the store: after a restart it reflects what was committed.
        for row in args.store.load_leases().await? {
            args.index.insert(
                row.token_hash,
                Arc::new(LeaseEntry::new(row.lease, row.lineage)),
            );
        }
        myself.send_interval(Duration::from_secs(1), || Msg::FlushUsage);
        Ok(State {
            store: args.store.clone(),
            index: args.index.clone(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Msg>,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        flush_usage(state).await;
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Msg>,
        msg: Msg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            #[cfg(any(test, feature = "fault-injection"))]
            Msg::Panic => panic!("fault injected into the lease manager"),
            Msg::Create(req, reply) => {
                let _ = reply.send(create(state, req).await);
            }
            Msg::Revoke(id, reply) => {
                let res = async {
                    let entry = active_entry(state, &id).await?;
                    if !state.store.revoke_lease_if_active(&id).await? {
                        return Err(changed_meanwhile(state, &id).await);
                    }
                    entry
                        .status
                        .store(status_code(LeaseStatus::Revoked), Ordering::Release);
                    let children = revoke_children(state, &id).await?;
                    Ok(Revoked {
                        lease: entry.snapshot(),
                        children,
                    })
                }
                .await;
                let _ = reply.send(res);
            }
            Msg::Rotate(id, reply) => {
                let res = async {
                    let entry = active_entry(state, &id).await?;
                    let old = entry.lease.clone();
                    let remaining = (old.deadline_at - now()).max(time::Duration::seconds(1));
                    let issued = create(
                        state,
                        NewLease {
                            target_id: old.target_id.clone(),
                            subnet_id: old.subnet_id.clone(),
                            zone: old.zone.clone(),
                            audience: old.audience.clone(),
                            capability_profile: old.capability_profile.clone(),
                            effective_tools: old.effective_tools.clone(),
                            ttl: Duration::from_millis(
                                remaining.whole_milliseconds().max(1000) as u64
                            ),
                            lineage: Some(entry.lineage.clone()),
                            parent: old.parent_session_id.clone(),
                        },
                    )
                    .await?;
                    if !state.store.revoke_lease_if_active(&id).await? {
                        // Another replica revoked or rotated it first: the new lease is void.
                        state
                            .store
                            .set_lease_status(&issued.lease.session_id, LeaseStatus::Revoked)
                            .await?;
                        if let Some(e) = state.index.entry(&issued.lease.session_id) {
                            e.status
                                .store(status_code(LeaseStatus::Revoked), Ordering::Release);
                        }
                        return Err(changed_meanwhile(state, &id).await);
                    }
                    entry
                        .status
                        .store(status_code(LeaseStatus::Revoked), Ordering::Release);
                    let mut issued = issued;
                    issued.revoked = revoke_children(state, &id).await?;
                    Ok(issued)
                }
                .await;
                let _ = reply.send(res);
            }
            Msg::FlushUsage => flush_usage(state).await,
        }
        Ok(())
    }
}

/// Revokes the run credentials issued under `parent`, in the store and here; their ids.
async fn revoke_children(state: &State, parent: &str) -> Result<Vec<String>, LeaseError> {
    let children = state.store.revoke_children(parent).await?;
    for id in &children {
        if let Some(e) = state.index.entry(id) {
            e.status
                .store(status_code(LeaseStatus::Revoked), Ordering::Release);
        }
    }
    Ok(children)
}

/// The active lease `id`, from the index or (issued by another replica) the store.
async fn active_entry(state: &State, id: &str) -> Result<Arc<LeaseEntry>, LeaseError> {
    let entry = match state.index.entry(id) {
        Some(e) => e,
        None => state
            .store
            .lease_by_id(id)
            .await?
            .map(|row| state.index.upsert(row))
            .ok_or_else(|| LeaseError::NotFound(id.to_string()))?,
    };
    match entry.snapshot().status {
        LeaseStatus::Active => Ok(entry),
        s => Err(LeaseError::NotActive(id.to_string(), s.as_str())),
    }
}

/// The lease changed in the store since this replica looked (another replica revoked or
/// rotated it): take the stored state and say so.
async fn changed_meanwhile(state: &State, id: &str) -> LeaseError {
    match state.store.lease_by_id(id).await {
        Ok(Some(row)) => {
            let entry = state.index.upsert(row);
            LeaseError::NotActive(id.to_string(), entry.snapshot().status.as_str())
        }
        Ok(None) => LeaseError::NotFound(id.to_string()),
        Err(e) => LeaseError::Store(e),
    }
}

async fn create(state: &State, req: NewLease) -> Result<IssuedLease, LeaseError> {
    let created_at = now();
    let ttl = time::Duration::try_from(req.ttl).unwrap_or(time::Duration::days(30));
    let lease = SessionLease {
        session_id: uuid::Uuid::now_v7().to_string(),
        audience: req.audience,
        target_id: req.target_id,
        subnet_id: req.subnet_id,
        zone: req.zone,
        capability_profile: req.capability_profile,
        effective_tools: req.effective_tools,
        created_at,
        deadline_at: created_at + ttl,
        last_used_at: None,
        use_count: 0,
        status: LeaseStatus::Active,
        parent_session_id: req.parent,
    };
    let token = auth::new_token(auth::LEASE_TOKEN_PREFIX);
    let hash = auth::token_hash(&token);
    let lineage = req.lineage.unwrap_or_else(|| lease.session_id.clone());
    state.store.insert_lease(&lease, &hash, &lineage).await?;
    state
        .index
        .insert(hash, Arc::new(LeaseEntry::new(lease.clone(), lineage)));
    Ok(IssuedLease {
        lease,
        token,
        revoked: Vec::new(),
    })
}

async fn flush_usage(state: &State) {
    let mut batch = Vec::new();
    for e in state.index.by_id.iter() {
        if e.dirty.swap(false, Ordering::AcqRel) {
            let count = e.use_count.load(Ordering::Relaxed);
            let delta = count.saturating_sub(e.flushed.load(Ordering::Relaxed));
            batch.push((
                e.lease.session_id.clone(),
                e.last_used_ms.load(Ordering::Relaxed),
                delta,
                count,
            ));
        }
    }
    let usage: Vec<(String, i64, u64)> = batch
        .iter()
        .map(|(id, last, delta, _)| (id.clone(), *last, *delta))
        .collect();
    match state.store.record_lease_usage(&usage).await {
        Ok(()) => {
            for (id, _, _, count) in &batch {
                if let Some(e) = state.index.by_id.get(id) {
                    e.flushed.store(*count, Ordering::Relaxed);
                }
            }
        }
        Err(err) => {
            tracing::warn!(%err, n = batch.len(), "lease usage flush failed; will retry");
            for (id, _, _, _) in &batch {
                if let Some(e) = state.index.by_id.get(id) {
                    e.dirty.store(true, Ordering::Release);
                }
            }
        }
    }
}
