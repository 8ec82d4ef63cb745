//! `Zone`: this process as one replica of the zone (its id, the peers' addresses, the change
//! feed's position, which hubs it and the others hold), and the kinds of change the feed
//! carries. The parts that act on the daemon's state are in the sibling modules.

use std::sync::atomic::AtomicI64;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use dashmap::DashMap;
use tokio::sync::Semaphore;

use crate::config::{RootConfig, valid_replica_id};
use crate::store::Store;

/// How often a replica heartbeats its registry row and its hub ownerships.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(1);
/// A replica or hub ownership silent this long (database clock) is dead.
pub(crate) const EXPIRY_MS: i64 = 5_000;
/// The bounded-staleness fallback: changes, revocations and hub ownership are re-read this
/// often, whatever the notifications did.
pub(crate) const FALLBACK: Duration = Duration::from_secs(2);
/// How long a change that takes authority away waits for every live replica to apply it.
pub(crate) const ACK_BUDGET: Duration = Duration::from_secs(2);
/// Registry rows silent this long are dropped from the zone view.
pub(super) const FORGET_MS: i64 = 3_600_000;
/// How long applied changes stay in the feed.
pub(super) const CHANGE_RETENTION_MS: i64 = 3_600_000;
/// Bearer hashes remembered as unknown to the store (beyond that the set starts over).
pub(super) const UNKNOWN_BEARERS_MAX: usize = 10_000;

/// What a change in the feed is about; its item names what to reload. Stored by name
/// (`as_str`), so replicas of different versions share the feed: a kind a replica does not
/// know is ignored there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    /// A lease (item: session id) was created, revoked or rotated.
    Lease,
    /// A target (item: target id): enrolment, hub key, hub connection or published surface.
    Target,
    /// A descriptor set (item: revision) was published.
    Descriptors,
    /// A console session (item: its id) ended (logout).
    Console,
    /// An operator (item: name) was added or revoked.
    Operator,
    /// A task (item: its id) was cancelled: the replica running it stops its call.
    Task,
}

impl ChangeKind {
    const ALL: [ChangeKind; 6] = [
        ChangeKind::Lease,
        ChangeKind::Target,
        ChangeKind::Descriptors,
        ChangeKind::Console,
        ChangeKind::Operator,
        ChangeKind::Task,
    ];

    /// The name the feed stores.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Lease => "lease",
            ChangeKind::Target => "target",
            ChangeKind::Descriptors => "descriptors",
            ChangeKind::Console => "console",
            ChangeKind::Operator => "operator",
            ChangeKind::Task => "task",
        }
    }

    /// The kind a stored name stands for (`None`: one this replica does not know).
    pub(crate) fn parse(name: &str) -> Option<ChangeKind> {
        ChangeKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// The replica holding a hub's connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) replica_id: String,
    pub(crate) advertise_url: String,
}

/// This process as one replica of the zone.
pub struct Zone {
    pub replica_id: String,
    /// Unique per process start (a restarted replica keeps its id, not its instance).
    pub(crate) instance_id: String,
    pub(super) advertise_url: OnceLock<String>,
    pub(super) zone: String,
    /// Key of the replica credentials (derived from the shared master key).
    pub(super) key: [u8; 32],
    pub(super) http: reqwest::Client,
    /// This replica serves `[tls]`: it forwards only to `https://` peers unless
    /// `replica.insecure_http_peers` allows plain ones.
    pub(super) requires_tls_peers: bool,
    pub(super) store: Store,
    pub(super) database_url: String,
    /// The newest change applied here.
    pub(super) applied: AtomicI64,
    /// The newest change recorded as applied in the registry.
    pub(super) acked: AtomicI64,
    pub(super) apply_lock: tokio::sync::Mutex<()>,
    /// Target → the live replica holding its hub (not this one).
    pub(super) owners: DashMap<String, Owner>,
    /// Target → the id of the hub connection this replica holds (what its heartbeat keeps
    /// in `hub_ownership`).
    pub(super) held: DashMap<String, String>,
    /// Bearer hashes the store does not know (a lease created later has a new random
    /// bearer, so remembering them is safe).
    pub(super) unknown_bearers: DashMap<String, ()>,
    /// Bounds concurrent store lookups of unknown bearers and hub tokens.
    pub(super) lookups: Semaphore,
    /// Replica credentials already accepted, until they expire (each is good once).
    pub(super) seen_credentials: DashMap<String, i64>,
    pub(super) last_enrolment_reload: tokio::sync::Mutex<Option<tokio::time::Instant>>,
    /// Held while enrolments are read from the store and put into memory, and while a key
    /// rotation or an operator's skill command writes both: a reload never puts back a
    /// snapshot older than what memory has.
    pub(crate) enrolment_writes: tokio::sync::Mutex<()>,
}

impl Zone {
    /// The zone machinery for a PostgreSQL store; `None` on SQLite (one replica). Call it
    /// before loading leases, enrolments and descriptors: the change feed is read from the
    /// position it notes here, so nothing committed meanwhile is missed.
    pub(crate) async fn prepare(
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
        // Never follows a redirect (it could lead off the peer, or down to plain HTTP). An
        // idle connection is dropped before a peer would end it (its idle timer, the same
        // `keep_alive_timeout_ms` across the zone): reusing one as the peer closes it fails
        // the forwarded request.
        let idle = Duration::from_millis(config.limits.keep_alive_timeout_ms)
            .saturating_sub(Duration::from_secs(2))
            .clamp(Duration::from_millis(500), Duration::from_secs(60));
        let mut http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .pool_idle_timeout(idle)
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
            key: master_key.derive_key(super::credential::KEY_PURPOSE),
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
    pub(crate) fn advertise_url(&self) -> &str {
        self.advertise_url.get().map_or("", String::as_str)
    }

    /// Leaves the registry with the hubs this replica held (clean shutdown).
    pub(crate) async fn stop(&self) {
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
    pub(crate) async fn changed(&self, kind: ChangeKind, item: &str, wait: bool) {
        let kind = kind.as_str();
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

    pub(super) async fn await_applied(&self, id: i64) {
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
    pub(crate) async fn replicas_heard_within(&self, within_ms: i64) -> Option<Vec<String>> {
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
    pub(crate) async fn owner_of(&self, target_id: &str) -> Option<Owner> {
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
    pub(crate) fn forget_owner(&self, target_id: &str) {
        self.owners.remove(target_id);
    }
}

/// The replica id kept in `<data_dir>/replica.id`, created on first start.
pub(super) fn stored_replica_id(data_dir: &std::path::Path) -> anyhow::Result<String> {
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

#[cfg(test)]
mod tests {
    use super::ChangeKind;

    #[test]
    fn change_kinds_are_stored_by_name_and_read_back() {
        for kind in ChangeKind::ALL {
            assert_eq!(ChangeKind::parse(kind.as_str()), Some(kind));
        }
        let names: std::collections::BTreeSet<_> =
            ChangeKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names.len(), ChangeKind::ALL.len(), "one name per kind");
        // A kind written by a newer replica is not one of ours.
        assert_eq!(ChangeKind::parse("fleet_run"), None);
        assert_eq!(ChangeKind::parse("Lease"), None);
    }
}
