//! Replicas: several `mcp-root serve` processes for one zone on one PostgreSQL database.
//!
//! Everything root persists is in the shared database already; this module keeps the
//! in-memory views of each replica honest and connects the replicas:
//!
//! - **Registry**: each replica registers itself in `replicas` (id, advertised internal
//!   address) and heartbeats every second; the replica holding a hub's connection records it
//!   in `hub_ownership`, heartbeated with it. Ages are judged by the database's clock; a row
//!   silent for [`EXPIRY_MS`] is dead, so a killed replica's hubs are nobody's within seconds.
//! - **Change feed** (`zone_changes` + `LISTEN/NOTIFY`): a replica that changes something
//!   other replicas cache (a lease revoked, rotated or created; an enrolment, hub key, hub
//!   connection or published surface; the descriptor set) appends a change and notifies. Every
//!   replica applies changes in id order by reloading the named item from the store, then
//!   records how far it got (`replicas.applied_change`). Changes that take authority away
//!   (revoke, rotate, skill disable, key rotation, publish) wait until every live replica has
//!   applied them (at most [`ACK_BUDGET`]), so the operator's request returns only when the
//!   change is in force on every live replica. A lost notification is caught by the fallback
//!   reload every [`FALLBACK`], which also re-reads which unexpired leases are revoked, so a
//!   revoked token never keeps working on a replica that missed the feed.
//! - **Forwarding** ([`forward`]): a routed call or skill command on a replica without the
//!   hub goes to the owner over `POST /v1/root/internal/route`, authenticated with a
//!   [`credential`]; policy, limits and the one audit event stay with the replica the client
//!   called.
//!
//! On SQLite there is one replica and none of this runs (`App::zone` is `None`).

mod apply;
pub mod credential;
mod feed;
pub mod forward;
mod view;

use feed::{fallback, heartbeat, listen};
pub use view::{list, view_for, zone_view};

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use axum::Json;
use axum::extract::State;
use dashmap::DashMap;
use mcp_shared::target::TargetStatus;
use sqlx::postgres::PgListener;
use tokio::sync::Semaphore;

use crate::api::{ApiError, Auth, Operator};
use crate::app::{App, Principal};
use crate::config::{RootConfig, valid_replica_id};
use crate::leases::manager::LeaseEntry;
use crate::store::{self, ChangeRow, ReplicaRow, Store};

/// How often a replica heartbeats its registry row and its hub ownerships.
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// A replica or hub ownership silent this long (database clock) is dead.
pub const EXPIRY_MS: i64 = 5_000;
/// The bounded-staleness fallback: changes, revocations and hub ownership are re-read this
/// often, whatever the notifications did.
pub const FALLBACK: Duration = Duration::from_secs(2);
/// How long a change that takes authority away waits for every live replica to apply it.
pub const ACK_BUDGET: Duration = Duration::from_secs(2);
/// Registry rows silent this long are dropped from the zone view.
const FORGET_MS: i64 = 3_600_000;
/// How long applied changes stay in the feed.
const CHANGE_RETENTION_MS: i64 = 3_600_000;
/// Bearer hashes remembered as unknown to the store (beyond that the set starts over).
const UNKNOWN_BEARERS_MAX: usize = 10_000;

/// Kinds of change in the feed; the item names what to reload.
pub mod kind {
    /// A lease (item: session id) was created, revoked or rotated.
    pub const LEASE: &str = "lease";
    /// A target (item: target id): enrolment, hub key, hub connection or published surface.
    pub const TARGET: &str = "target";
    /// A descriptor set (item: revision) was published.
    pub const DESCRIPTORS: &str = "descriptors";
    /// A console session (item: its id) ended (logout).
    pub const CONSOLE: &str = "console";
    /// An operator (item: name) was added or revoked.
    pub const OPERATOR: &str = "operator";
    /// A task (item: its id) was cancelled: the replica running it stops its call.
    pub const TASK: &str = "task";
}

/// The replica holding a hub's connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub replica_id: String,
    pub advertise_url: String,
}

/// This process as one replica of the zone.
pub struct Zone {
    pub replica_id: String,
    /// Unique per process start (a restarted replica keeps its id, not its instance).
    pub instance_id: String,
    advertise_url: OnceLock<String>,
    zone: String,
    /// Key of the replica credentials (derived from the shared master key).
    key: [u8; 32],
    http: reqwest::Client,
    /// This replica serves `[tls]`: it forwards only to `https://` peers unless
    /// `replica.insecure_http_peers` allows plain ones.
    requires_tls_peers: bool,
    store: Store,
    database_url: String,
    /// The newest change applied here.
    applied: AtomicI64,
    /// The newest change recorded as applied in the registry.
    acked: AtomicI64,
    apply_lock: tokio::sync::Mutex<()>,
    /// Target → the live replica holding its hub (not this one).
    owners: DashMap<String, Owner>,
    /// Target → the id of the hub connection this replica holds (what its heartbeat keeps
    /// in `hub_ownership`).
    held: DashMap<String, String>,
    /// Bearer hashes the store does not know (a lease created later has a new random
    /// bearer, so remembering them is safe).
    unknown_bearers: DashMap<String, ()>,
    /// Bounds concurrent store lookups of unknown bearers and hub tokens.
    lookups: Semaphore,
    /// Replica credentials already accepted, until they expire (each is good once).
    seen_credentials: DashMap<String, i64>,
    last_enrolment_reload: tokio::sync::Mutex<Option<tokio::time::Instant>>,
    /// Held while enrolments are read from the store and put into memory, and while a key
    /// rotation or an operator's skill command writes both: a reload never puts back a
    /// snapshot older than what memory has.
    pub enrolment_writes: tokio::sync::Mutex<()>,
}

impl Zone {
    /// The zone machinery for a PostgreSQL store; `None` on SQLite (one replica). Call it
    /// before loading leases, enrolments and descriptors: the change feed is read from the
    /// position it notes here, so nothing committed meanwhile is missed.
    pub async fn prepare(
        config: &RootConfig,
        store: &Store,
        master_key: &crate::secrets::MasterKey,
    ) -> anyhow::Result<Option<Arc<Zone>>> {
        if store.shared().is_none() {
            return Ok(None);
        }
        let replica_id = match &config.replica.id {
            Some(id) => id.clone(),
            None => stored_replica_id(&config.data_dir)?,
        };
        let watermark = store
            .last_change()
            .await
            .context("reading the change feed")?;
        let requires_tls_peers = config.tls.is_some() && !config.replica.insecure_http_peers;
        // Never follows a redirect (it could lead off the peer, or down to plain HTTP).
        let mut http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .pool_idle_timeout(Duration::from_secs(60))
            .redirect(reqwest::redirect::Policy::none())
            .https_only(requires_tls_peers);
        if let Some(path) = &config.replica.ca_file {
            let certs = crate::net::tls_client::load_ca_bundle(path).context("replica.ca_file")?;
            http = http.tls_certs_only(certs);
        }
        Ok(Some(Arc::new(Zone {
            replica_id,
            instance_id: uuid::Uuid::now_v7().to_string(),
            advertise_url: OnceLock::new(),
            zone: config.zone.clone(),
            key: master_key.derive_key(credential::KEY_PURPOSE),
            http: http.build().context("building the replica HTTP client")?,
            requires_tls_peers,
            store: store.clone(),
            database_url: config.database_url(),
            applied: AtomicI64::new(watermark),
            acked: AtomicI64::new(watermark),
            apply_lock: tokio::sync::Mutex::new(()),
            owners: DashMap::new(),
            held: DashMap::new(),
            unknown_bearers: DashMap::new(),
            lookups: Semaphore::new(8),
            seen_credentials: DashMap::new(),
            last_enrolment_reload: tokio::sync::Mutex::new(None),
            enrolment_writes: tokio::sync::Mutex::new(()),
        })))
    }

    /// The address other replicas reach this one at.
    pub fn advertise_url(&self) -> &str {
        self.advertise_url.get().map_or("", String::as_str)
    }

    /// Registers this replica once its listener is bound, and starts the heartbeat, the
    /// notification listener and the fallback reload. Refuses to start next to a live replica
    /// of another zone or one using the same replica id.
    pub async fn start(
        self: &Arc<Self>,
        app: Arc<App>,
        bound: SocketAddr,
        scheme: &str,
    ) -> anyhow::Result<()> {
        let advertise = match &app.config.replica.advertise_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None if bound.ip().is_unspecified() => anyhow::bail!(
                "root listens on {bound}, which other replicas cannot dial: set \
                 replica.advertise_url to this replica's internal address"
            ),
            None => format!("{scheme}://{bound}"),
        };
        let _ = self.advertise_url.set(advertise.clone());
        let rows = self
            .store
            .list_replicas(FORGET_MS)
            .await
            .context("reading the replica registry")?;
        if let Some(other) = rows
            .iter()
            .find(|r| r.heartbeat_age_ms <= EXPIRY_MS && r.zone != self.zone)
        {
            anyhow::bail!(
                "this database already serves zone `{}` (replica `{}`); one database (schema) \
                 holds one zone, so this replica of zone `{}` cannot join it",
                other.zone,
                other.replica_id,
                self.zone
            );
        }
        let row = ReplicaRow {
            replica_id: self.replica_id.clone(),
            zone: self.zone.clone(),
            advertise_url: advertise.clone(),
            instance_id: self.instance_id.clone(),
            version: env!("CARGO_PKG_VERSION").into(),
            started_at_ms: 0,
            heartbeat_at_ms: 0,
            heartbeat_age_ms: 0,
            applied_change: self.applied.load(Ordering::Acquire),
        };
        // A row still fresh from this replica's previous process (killed a moment ago)
        // expires within EXPIRY_MS; one that keeps heartbeating is another live process.
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(EXPIRY_MS as u64 + 1_000);
        while !self
            .store
            .register_replica(&row, EXPIRY_MS)
            .await
            .context("registering the replica")?
        {
            if tokio::time::Instant::now() >= deadline {
                anyhow::bail!(
                    "replica id `{}` belongs to a live replica (another process): give each \
                     replica its own replica.id (or data_dir)",
                    self.replica_id
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        tracing::info!(replica_id = %self.replica_id, advertise_url = %advertise, zone = %self.zone, "replica registered");
        tokio::spawn(heartbeat(self.clone(), app.clone()));
        tokio::spawn(listen(self.clone(), app.clone()));
        tokio::spawn(fallback(self.clone(), app));
        Ok(())
    }

    /// Leaves the registry with the hubs this replica held (clean shutdown).
    pub async fn stop(&self) {
        if let Err(e) = self
            .store
            .unregister_replica(&self.replica_id, &self.instance_id)
            .await
        {
            tracing::warn!(error = %e, "could not leave the replica registry; the row expires by itself");
        }
    }

    /// Records a change for the other replicas. With `wait`, returns once every live replica
    /// has applied it (or after [`ACK_BUDGET`], logging which have not; they apply it within
    /// the fallback reload).
    pub async fn changed(&self, kind: &str, item: &str, wait: bool) {
        let mut attempt = 0;
        let id = loop {
            match self
                .store
                .publish_change(kind, item, &self.replica_id)
                .await
            {
                Ok(id) => break id,
                Err(e) if attempt < 3 => {
                    attempt += 1;
                    tracing::warn!(error = %e, kind, item, attempt, "could not record a change; retrying");
                    tokio::time::sleep(Duration::from_millis(50 * attempt)).await;
                }
                Err(e) => {
                    tracing::error!(error = %e, kind, item, "could not record a change; other replicas see it only through the fallback reload (revocations) or not at all (surfaces, descriptors) until the next change");
                    return;
                }
            }
        };
        if wait {
            self.await_applied(id).await;
        }
    }

    async fn await_applied(&self, id: i64) {
        let deadline = tokio::time::Instant::now() + ACK_BUDGET;
        loop {
            match self
                .store
                .replicas_behind(&self.replica_id, id, EXPIRY_MS)
                .await
            {
                Ok(behind) if behind.is_empty() => return,
                Ok(behind) if tokio::time::Instant::now() >= deadline => {
                    tracing::warn!(
                        change = id,
                        ?behind,
                        "live replicas did not confirm a change in time; they apply it within the fallback reload"
                    );
                    return;
                }
                Ok(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                Err(e) => {
                    tracing::warn!(error = %e, change = id, "cannot read which replicas applied a change");
                    return;
                }
            }
        }
    }

    /// The ids of the zone's replicas heard from within `within_ms` (`None`: the registry
    /// could not be read).
    pub async fn replicas_heard_within(&self, within_ms: i64) -> Option<Vec<String>> {
        match self.store.list_replicas(FORGET_MS).await {
            Ok(rows) => Some(
                rows.into_iter()
                    .filter(|r| r.heartbeat_age_ms <= within_ms)
                    .map(|r| r.replica_id)
                    .collect(),
            ),
            Err(e) => {
                tracing::debug!(error = %e, "cannot read the replica registry");
                None
            }
        }
    }

    /// The live replica holding `target_id`'s hub, if another one does.
    pub async fn owner_of(&self, target_id: &str) -> Option<Owner> {
        if let Some(o) = self.owners.get(target_id) {
            return Some(o.clone());
        }
        let row = self
            .store
            .live_owners(Some(target_id), EXPIRY_MS)
            .await
            .ok()?
            .into_iter()
            .find(|o| o.replica_id != self.replica_id)?;
        let owner = Owner {
            replica_id: row.replica_id,
            advertise_url: row.advertise_url,
        };
        self.owners.insert(target_id.to_owned(), owner.clone());
        Some(owner)
    }

    /// Forgets a cached owner that could not be reached.
    pub fn forget_owner(&self, target_id: &str) {
        self.owners.remove(target_id);
    }
}

/// The replica id kept in `<data_dir>/replica.id`, created on first start.
fn stored_replica_id(data_dir: &std::path::Path) -> anyhow::Result<String> {
    let path = data_dir.join("replica.id");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let id = text.trim().to_owned();
            anyhow::ensure!(
                valid_replica_id(&id),
                "{} holds `{id}`, not a replica id (1..64 of [A-Za-z0-9_-])",
                path.display()
            );
            Ok(id)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let simple = uuid::Uuid::now_v7().simple().to_string();
            let id = format!("r-{}", &simple[simple.len() - 12..]);
            std::fs::write(&path, format!("{id}\n"))
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(id)
        }
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// The lease a bearer resolves to, if usable: from the index, or (replicas) from the store
/// when another replica issued it.
pub async fn authenticate(app: &App, token: &str) -> Option<Arc<LeaseEntry>> {
    let hash = crate::auth::token_hash(token);
    let entry = match app.leases.by_hash(&hash) {
        Some(e) => e,
        None => app.zone.as_ref()?.lease_on_miss(app, &hash).await?,
    };
    entry.is_usable().then_some(entry)
}

/// Tells the other replicas that a lease changed; revocations wait until every live replica
/// refuses the bearer.
pub async fn lease_changed(app: &App, session_id: &str, revoked: bool) {
    if let Some(z) = &app.zone {
        z.changed(kind::LEASE, session_id, revoked).await;
    }
}

/// Tells the other replicas that a target changed (enrolment, key, connection, surface).
pub async fn target_changed(app: &App, target_id: &str, wait: bool) {
    if let Some(z) = &app.zone {
        z.changed(kind::TARGET, target_id, wait).await;
    }
}

/// This replica now holds `target_id`'s hub connection `connection_id`.
pub async fn hub_connected(app: &App, target_id: &str, connection_id: &str) {
    let Some(z) = &app.zone else { return };
    z.forget_owner(target_id);
    if let Err(e) = z
        .store
        .claim_hub(target_id, &z.replica_id, connection_id)
        .await
    {
        tracing::error!(%target_id, error = %e, "cannot record hub ownership; the next heartbeat claims it again");
    }
    // Held from now on: the heartbeat keeps the row alive, or claims it again if it is lost.
    z.held
        .insert(target_id.to_owned(), connection_id.to_owned());
    z.changed(kind::TARGET, target_id, false).await;
}

/// `target_id`'s hub connection `connection_id` ended here.
pub async fn hub_disconnected(app: &App, target_id: &str, connection_id: &str) {
    let Some(z) = &app.zone else { return };
    z.held.remove_if(target_id, |_, c| c == connection_id);
    if let Err(e) = z.store.release_hub(target_id, connection_id).await {
        tracing::warn!(%target_id, error = %e, "cannot release hub ownership; it expires by itself");
    }
    z.changed(kind::TARGET, target_id, false).await;
}
