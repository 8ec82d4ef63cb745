//! Lease manager: creates, revokes and rotates MCP Session Leases, and keeps their usage.
//!
//! Invariant: the actor is this replica's only writer. The request path authenticates against
//! the published [`LeaseIndex`] (token hash → entry) and bumps usage atomically; the actor
//! writes changes to the store *before* publishing them, so a revoke is in force from the next
//! request, and flushes usage counters to the store every second (as increments, so replicas
//! serving one lease add up). With replicas, the index also takes leases other replicas
//! issued or revoked ([`LeaseIndex::upsert`], from the store), and a revoke or rotate is
//! conditional on the lease still being active in the store.
//!
//! The delegation graph: a lease minted by another (`hub.issue_access_token`) or issued under
//! it as a run credential keeps a pointer to its parent's entry, and works only while every
//! ancestor does ([`LeaseEntry::is_usable`] walks the chain), so ending a lease ends its
//! descendants on every replica the moment the lease itself is refused there. The store is
//! told too: ending a lease, an OAuth grant's leases or an operator's revokes every active
//! descendant in one statement. A child is checked against its parent when it is created
//! (same target, subnet and zone, no later deadline, a chain of at most
//! [`MAX_CHAIN`](crate::store::MAX_CHAIN) leases) and again after it is written, so a
//! revocation racing with it on another replica is seen by one side or the other.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use dashmap::DashMap;
use mcp_shared::lease::{LeaseKind, LeaseStatus, SessionLease};
use mcp_shared::time::{from_unix_ms, now, unix_ms};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::auth;
use crate::store::{LeaseRow, LeaseSource, MAX_CHAIN, Store};

/// One lease as the request path sees it: immutable binding plus atomic status and usage.
pub struct LeaseEntry {
    lease: SessionLease,
    /// The first lease of its rotation chain (see [`LeaseEntry::lineage`]).
    lineage: String,
    /// The lineage at the top of its delegation chain (see [`LeaseEntry::idempotency_owner`]).
    owner: String,
    /// The lease that handed this one its authority (a minted lease, a run credential).
    parent: Option<Arc<LeaseEntry>>,
    /// Its own rate (`SessionLease::rate`), read once.
    rate: Option<crate::config::Rate>,
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
    fn new(row: LeaseRow, parent: Option<Arc<LeaseEntry>>) -> LeaseEntry {
        let lease = row.lease;
        let rate = lease
            .rate
            .as_deref()
            .and_then(|r| crate::config::RawRate::Text(r.to_owned()).rate("rate").ok());
        LeaseEntry {
            lineage: row.lineage,
            owner: row.owner,
            parent,
            rate,
            status: AtomicU8::new(status_code(lease.status)),
            use_count: AtomicU64::new(lease.use_count),
            last_used_ms: AtomicI64::new(lease.last_used_at.map(unix_ms).unwrap_or(0)),
            dirty: AtomicBool::new(false),
            flushed: AtomicU64::new(lease.use_count),
            lease,
        }
    }

    /// A freshness-normalized copy (expired leases show `expired`, never `active`; a lease
    /// whose ancestor ended shows `revoked`).
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
        let mut l = l.normalized(now());
        if l.status == LeaseStatus::Active && !self.ancestors().all(|a| a.is_usable()) {
            l.status = LeaseStatus::Revoked;
        }
        l
    }

    /// Its ancestors, parent first.
    pub(crate) fn ancestors(&self) -> impl Iterator<Item = &LeaseEntry> {
        std::iter::successors(self.parent.as_deref(), |e| e.parent.as_deref())
    }

    /// Marks the entry revoked here (the store was told first).
    fn set_revoked(&self) {
        self.status
            .store(status_code(LeaseStatus::Revoked), Ordering::Release);
    }

    pub fn session_id(&self) -> &str {
        &self.lease.session_id
    }

    pub fn lease(&self) -> &SessionLease {
        &self.lease
    }

    /// Its own calls-per-second rate, if whoever issued it set one.
    pub fn rate(&self) -> Option<crate::config::Rate> {
        self.rate
    }

    /// The session id of the lease this one was rotated from, through every rotation (its
    /// own id when it was issued directly): the owner of its idempotency keys, so a client
    /// that retries an execute with a rotated bearer still gets its replay.
    pub fn lineage(&self) -> &str {
        &self.lineage
    }

    /// Who owns the idempotency keys this lease sends: `lease:<owner>`, the lineage at the
    /// top of its delegation chain, so a key replayed by any rotation, run credential or
    /// minted lease of that chain is the same key (and another chain's is another key).
    pub fn idempotency_owner(&self) -> String {
        format!("lease:{}", self.owner)
    }

    /// The lineage at the top of its delegation chain (see [`LeaseEntry::idempotency_owner`]),
    /// whose concurrency slots the whole chain shares.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Who owns the tasks this lease creates: `lease:<lineage>` (its rotations, not its
    /// parent or children, which may call other tools).
    pub fn task_owner(&self) -> String {
        format!("lease:{}", self.lineage)
    }

    /// Whether the lease authorizes a request now: it is active and before its deadline, and
    /// so is every ancestor (a credential works iff every ancestor does).
    pub fn is_usable(&self) -> bool {
        self.status.load(Ordering::Acquire) == 0
            && now() < self.lease.deadline_at
            && self.parent.as_ref().is_none_or(|p| p.is_usable())
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
    ///
    /// A lease with a parent takes the parent's entry, which must be here already (load the
    /// chain with [`LeaseIndex::upsert_chain`]); one whose parent is not is refused here.
    pub(crate) fn upsert(&self, row: LeaseRow) -> Arc<LeaseEntry> {
        let parent = match &row.lease.parent_session_id {
            Some(p) => match self.entry(p) {
                Some(e) => Some(e),
                None => {
                    tracing::warn!(session_id = %row.lease.session_id, parent = %p, "a lease's parent is not known here; the lease is refused");
                    let entry = self.upsert_with(row, None);
                    entry.set_revoked();
                    return entry;
                }
            },
            None => None,
        };
        self.upsert_with(row, parent)
    }

    fn upsert_with(&self, row: LeaseRow, parent: Option<Arc<LeaseEntry>>) -> Arc<LeaseEntry> {
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
                let hash = row.token_hash.clone();
                let entry = Arc::new(LeaseEntry::new(row, parent));
                v.insert(entry.clone());
                self.by_hash.insert(hash, entry.clone());
                entry
            }
        }
    }

    /// Takes a lease with its ancestors (top first, as [`Store::lease_chain`] reads them);
    /// the lease's entry.
    pub fn upsert_chain(&self, chain: Vec<LeaseRow>) -> Option<Arc<LeaseEntry>> {
        let mut last = None;
        for row in chain {
            last = Some(self.upsert(row));
        }
        last
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

    /// Takes every stored lease (at start, and again after the manager restarts): parents
    /// before their children, whatever order the rows came in; an entry already here is kept
    /// (holders of it see later changes) and takes the stored status.
    fn load(&self, rows: Vec<LeaseRow>) {
        let mut pending = rows;
        loop {
            let before = pending.len();
            pending.retain(|row| {
                let ready = row
                    .lease
                    .parent_session_id
                    .as_ref()
                    .is_none_or(|p| self.by_id.contains_key(p));
                if ready {
                    self.upsert(row.clone());
                }
                !ready
            });
            if pending.is_empty() || pending.len() == before {
                break;
            }
        }
        // Parents that never came (a store edited by hand): refused, as `upsert` does.
        for row in pending {
            self.upsert(row);
        }
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
    /// Where its authority comes from.
    pub source: Source,
    /// Its own calls-per-second rate (checked by the caller), over its profile's.
    pub rate: Option<String>,
}

/// Where a new lease's authority comes from: its place in the delegation graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Issued by operator `by` (`operator:<name>`; `None` only for rotations of leases older
    /// than the record), through OAuth grant `grant` when it is a sign-in's access token.
    Issued {
        by: Option<String>,
        grant: Option<String>,
        /// The thumbprint of the key its token is bound to (DPoP), if it is.
        holder: Option<String>,
    },
    /// Minted by lease `parent` (`hub.issue_access_token`).
    Minted { parent: String },
    /// A run credential of lease `parent`.
    Run { parent: String },
    /// A target's lease of fleet lease `parent`, for one of its runs.
    Fleet { parent: String },
}

impl Source {
    /// The source of a lease as stored (a rotation keeps it).
    pub(crate) fn of(lease: &SessionLease) -> Source {
        match (&lease.parent_session_id, lease.kind) {
            (Some(parent), LeaseKind::Run) => Source::Run {
                parent: parent.clone(),
            },
            (Some(parent), LeaseKind::Fleet) => Source::Fleet {
                parent: parent.clone(),
            },
            (Some(parent), _) => Source::Minted {
                parent: parent.clone(),
            },
            (None, _) => Source::Issued {
                by: lease.issued_by.clone(),
                grant: lease.grant_id.clone(),
                holder: lease.dpop_jkt.clone(),
            },
        }
    }

    fn parent(&self) -> Option<&str> {
        match self {
            Source::Minted { parent } | Source::Run { parent } | Source::Fleet { parent } => {
                Some(parent)
            }
            Source::Issued { .. } => None,
        }
    }
}

/// A lease revoked, with its descendants revoked with it.
#[derive(Debug, Clone)]
pub struct Revoked {
    pub lease: SessionLease,
    pub descendants: Vec<(String, LeaseKind)>,
}

/// Leases ended together (an OAuth grant's, an operator's), with their descendants.
#[derive(Debug, Clone, Default)]
pub struct Ended {
    pub leases: Vec<String>,
    pub descendants: Vec<(String, LeaseKind)>,
}

impl Ended {
    /// Every lease that stopped working.
    pub fn count(&self) -> usize {
        self.leases.len() + self.descendants.len()
    }
}

/// What ends together with one command.
#[derive(Debug, Clone)]
pub enum Ending {
    /// The access tokens of an OAuth grant (the grant itself is the caller's).
    Grant(String),
    /// Every lease an operator (`operator:<name>`) issued or approved.
    IssuedBy(String),
    /// Every lease bound to a target (retired, or moved to another environment or subnet).
    Target(String),
}

/// A lease plus its bearer, which is shown exactly once.
#[derive(Debug, Clone)]
pub struct IssuedLease {
    pub lease: SessionLease,
    pub token: String,
    /// Descendants revoked with the lease this one replaced (a rotation).
    pub revoked: Vec<(String, LeaseKind)>,
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("no lease `{0}`")]
    NotFound(String),
    #[error("lease `{0}` is {1} and cannot be changed")]
    NotActive(String, &'static str),
    /// A child asked for more than its parent holds.
    #[error("a lease handed on by `{parent}` cannot exceed it: {why}")]
    ExceedsParent { parent: String, why: String },
    #[error(
        "lease `{0}` ends a chain of {MAX_CHAIN} leases, as long as handed-on authority may go"
    )]
    ChainTooLong(String),
    #[error(transparent)]
    Store(#[from] crate::store::Error),
}

pub enum Msg {
    Create(Box<NewLease>, RpcReplyPort<Result<IssuedLease, LeaseError>>),
    /// Revokes an active lease and every descendant.
    Revoke(String, RpcReplyPort<Result<Revoked, LeaseError>>),
    /// Revokes every active lease of a source and every descendant.
    End(Ending, RpcReplyPort<Result<Ended, LeaseError>>),
    /// A rotation revokes the old lease's descendants too (`IssuedLease::revoked`).
    Rotate(String, RpcReplyPort<Result<IssuedLease, LeaseError>>),
    FlushUsage,
    /// Test builds only: panic, so tests can prove the supervisor contains it.
    #[cfg(any(test, feature = "fault-injection"))]
    Panic,
}

pub(crate) struct LeaseManager;

pub struct Args {
    pub store: Store,
    pub index: Arc<LeaseIndex>,
}

pub(crate) struct State {
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
        args.index.load(args.store.load_leases().await?);
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
                let _ = reply.send(create(state, *req).await);
            }
            Msg::Revoke(id, reply) => {
                let res = async {
                    let entry = active_entry(state, &id).await?;
                    if !state.store.revoke_lease_if_active(&id).await? {
                        return Err(changed_meanwhile(state, &id).await);
                    }
                    entry.set_revoked();
                    let descendants = revoke_descendants(state, std::slice::from_ref(&id)).await?;
                    Ok(Revoked {
                        lease: entry.snapshot(),
                        descendants,
                    })
                }
                .await;
                let _ = reply.send(res);
            }
            Msg::End(ending, reply) => {
                let res = async {
                    let (source, value) = match &ending {
                        Ending::Grant(g) => (LeaseSource::Grant, g),
                        Ending::IssuedBy(by) => (LeaseSource::IssuedBy, by),
                        Ending::Target(t) => (LeaseSource::Target, t),
                    };
                    let leases = state.store.revoke_leases_where(source, value).await?;
                    for id in &leases {
                        if let Some(e) = state.index.entry(id) {
                            e.set_revoked();
                        }
                    }
                    let descendants = revoke_descendants(state, &leases).await?;
                    Ok(Ended {
                        leases,
                        descendants,
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
                            source: Source::of(&old),
                            rate: old.rate.clone(),
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
                            e.set_revoked();
                        }
                        return Err(changed_meanwhile(state, &id).await);
                    }
                    entry.set_revoked();
                    let mut issued = issued;
                    issued.revoked = revoke_descendants(state, std::slice::from_ref(&id)).await?;
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

/// Revokes the active descendants of `roots`, in the store and here (where their ancestors'
/// entries already refuse them); their ids and kinds.
async fn revoke_descendants(
    state: &State,
    roots: &[String],
) -> Result<Vec<(String, LeaseKind)>, LeaseError> {
    let descendants = state.store.revoke_descendants(roots).await?;
    for (id, _) in &descendants {
        if let Some(e) = state.index.entry(id) {
            e.set_revoked();
        }
    }
    Ok(descendants)
}

/// The active lease `id`, from the index or (issued by another replica) the store.
async fn active_entry(state: &State, id: &str) -> Result<Arc<LeaseEntry>, LeaseError> {
    let entry = match state.index.entry(id) {
        Some(e) => e,
        None => state
            .index
            .upsert_chain(state.store.lease_chain(id).await?)
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
    match state.store.lease_chain(id).await {
        Ok(chain) => match state.index.upsert_chain(chain) {
            Some(entry) => LeaseError::NotActive(id.to_string(), entry.snapshot().status.as_str()),
            None => LeaseError::NotFound(id.to_string()),
        },
        Err(e) => LeaseError::Store(e),
    }
}

async fn create(state: &State, req: NewLease) -> Result<IssuedLease, LeaseError> {
    let created_at = now();
    let ttl = time::Duration::try_from(req.ttl).unwrap_or(time::Duration::days(30));
    let parent = match req.source.parent() {
        Some(id) => Some(usable_parent(state, id).await?),
        None => None,
    };
    let (kind, issued_by, grant_id, dpop_jkt) = match &req.source {
        Source::Issued { by, grant, holder } => {
            (LeaseKind::Issued, by.clone(), grant.clone(), holder.clone())
        }
        Source::Minted { .. } => (LeaseKind::Minted, None, None, None),
        Source::Run { .. } => (LeaseKind::Run, None, None, None),
        Source::Fleet { .. } => (LeaseKind::Fleet, None, None, None),
    };
    let lease = SessionLease {
        session_id: uuid::Uuid::now_v7().to_string(),
        audience: req.audience,
        target_id: req.target_id,
        subnet_id: req.subnet_id,
        zone: req.zone,
        capability_profile: req.capability_profile,
        effective_tools: req.effective_tools,
        created_at,
        // A child ends no later than its parent (callers refuse a longer ask by name; what
        // they computed a moment ago is not let past it by the time it took to get here).
        deadline_at: parent.as_ref().map_or(created_at + ttl, |p| {
            (created_at + ttl).min(p.lease().deadline_at)
        }),
        last_used_at: None,
        use_count: 0,
        status: LeaseStatus::Active,
        parent_session_id: parent.as_ref().map(|p| p.session_id().to_owned()),
        kind,
        issued_by,
        grant_id,
        rate: req.rate,
        dpop_jkt,
    };
    if let Some(p) = &parent {
        within(p, &lease)?;
    }
    let token = auth::new_token(auth::LEASE_TOKEN_PREFIX);
    let lineage = req.lineage.unwrap_or_else(|| lease.session_id.clone());
    let row = LeaseRow {
        owner: parent
            .as_ref()
            .map_or_else(|| lineage.clone(), |p| p.owner.clone()),
        lineage,
        token_hash: auth::token_hash(&token),
        lease: lease.clone(),
    };
    state.store.insert_lease(&row).await?;
    let entry = state.index.upsert_with(row, parent.clone());
    // Checked again once written: a revocation of the parent (or the end of the grant) on
    // another replica either saw this lease, or is seen here.
    let now_ms = unix_ms(now());
    let source_ended = match (&parent, &lease.grant_id) {
        (Some(p), _) => (!state.store.chain_active(p.session_id(), now_ms).await?)
            .then(|| p.session_id().to_owned()),
        (None, Some(g)) => (!state.store.grant_live(g).await?).then(|| format!("grant {g}")),
        (None, None) => None,
    };
    if let Some(source) = source_ended {
        state
            .store
            .set_lease_status(&lease.session_id, LeaseStatus::Revoked)
            .await?;
        entry.set_revoked();
        return Err(LeaseError::NotActive(source, "ended"));
    }
    Ok(IssuedLease {
        lease,
        token,
        revoked: Vec::new(),
    })
}

/// The parent of a new child: usable, with room for one more lease in its chain.
async fn usable_parent(state: &State, id: &str) -> Result<Arc<LeaseEntry>, LeaseError> {
    let parent = active_entry(state, id).await?;
    if !parent.is_usable() {
        return Err(LeaseError::NotActive(id.to_owned(), "ended"));
    }
    if parent.ancestors().count() + 1 >= MAX_CHAIN {
        return Err(LeaseError::ChainTooLong(id.to_owned()));
    }
    Ok(parent)
}

/// A child holds nothing its parent does not: its binding (its deadline is clamped to the
/// parent's; callers check the profile, which needs the catalog). A fleet lease hands on
/// only its targets' leases, one target each (the caller resolved it from the selector);
/// any other lease only leases of its own target.
fn within(parent: &LeaseEntry, child: &SessionLease) -> Result<(), LeaseError> {
    let p = parent.lease();
    let exceeds = |why: &str| LeaseError::ExceedsParent {
        parent: p.session_id.clone(),
        why: why.to_owned(),
    };
    if p.zone != child.zone {
        return Err(exceeds("another zone"));
    }
    let fleet_child = child.kind == LeaseKind::Fleet && child.fleet_selector().is_none();
    match p.fleet_selector() {
        Some(_) if !fleet_child => Err(exceeds(
            "a fleet lease hands on only one target's lease for its fleet runs",
        )),
        Some(_) => Ok(()),
        None if child.kind == LeaseKind::Fleet => Err(exceeds(
            "only a fleet lease hands on a fleet target's lease",
        )),
        None if (&p.target_id, &p.subnet_id) != (&child.target_id, &child.subnet_id) => {
            Err(exceeds("another target, subnet or zone"))
        }
        None => Ok(()),
    }
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
