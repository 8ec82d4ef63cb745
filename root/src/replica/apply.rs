//! Applying the zone's change feed on this replica: catch up, reload what a change names
//! (leases, targets, descriptors, hub owners, revocations) and acknowledge it.

use super::zone::*;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::app::App;
use crate::leases::manager::LeaseEntry;
use crate::store::{self, ChangeRow};
use mcp_shared::target::TargetStatus;

/// Changes read and applied at once.
const FEED_BATCH: i64 = 500;

/// What a batch of changes names, each item once.
#[derive(Default)]
struct Named {
    leases: BTreeSet<String>,
    targets: BTreeSet<String>,
    consoles: BTreeSet<String>,
    tasks: BTreeSet<String>,
    descriptors: bool,
    operators: bool,
}

impl Named {
    fn add(&mut self, kind: ChangeKind, item: &str) {
        match kind {
            ChangeKind::Lease => {
                self.leases.insert(item.to_owned());
            }
            ChangeKind::Target => {
                self.targets.insert(item.to_owned());
            }
            ChangeKind::Console => {
                self.consoles.insert(item.to_owned());
            }
            ChangeKind::Task => {
                self.tasks.insert(item.to_owned());
            }
            ChangeKind::Descriptors => self.descriptors = true,
            ChangeKind::Operator => self.operators = true,
        }
    }
}

impl Zone {
    /// Applies every change after the last one applied here, a batch at a time
    /// ([`Zone::apply_batch`]).
    pub(crate) async fn catch_up(&self, app: &App) {
        let _one = self.apply_lock.lock().await;
        loop {
            let after = self.applied.load(Ordering::Acquire);
            let changes = match self.store.changes_after(after, FEED_BATCH).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the change feed; retrying at the next notification or reload");
                    return;
                }
            };
            let Some(last) = changes.last().map(|c| c.change_id) else {
                break;
            };
            // Ids are dense (each is the previous one plus one, under the feed's lock), so a
            // jump means changes left the feed (pruned) before this replica applied them (it
            // was stopped that long): reload everything they could have named.
            let mut previous = after;
            let gap = changes.iter().any(|c| {
                let jumped = c.change_id > previous + 1;
                previous = c.change_id;
                jumped
            });
            if gap {
                tracing::warn!(
                    after,
                    last,
                    "changes left the feed before this replica applied them; reloading targets, descriptors, revocations and console sessions"
                );
                if let Err(e) = self.reload_everything(app).await {
                    tracing::warn!(error = %e, "cannot reload after a gap in the change feed; retrying");
                    self.ack().await;
                    return;
                }
            }
            if let Err(e) = self.apply_batch(app, &changes).await {
                tracing::warn!(error = %e, after, last, "cannot apply changes yet; retrying");
                self.ack().await;
                return;
            }
            self.applied.store(last, Ordering::Release);
            if changes.len() < FEED_BATCH as usize {
                break;
            }
        }
        self.ack().await;
    }

    pub(super) async fn ack(&self) {
        let applied = self.applied.load(Ordering::Acquire);
        if applied > self.acked.load(Ordering::Acquire) {
            match self
                .store
                .set_applied_change(&self.replica_id, applied)
                .await
            {
                Ok(()) => self.acked.store(applied, Ordering::Release),
                Err(e) => tracing::warn!(error = %e, "cannot record the applied change"),
            }
        }
    }

    /// Applies a batch of changes at once. A change names what changed, not how: applying it
    /// reloads that item's current state from the store, so a batch's items are reloaded
    /// once each, whatever their order and however often they changed, and its targets in
    /// one read (1,000 enrolments were 1,000 reads of every target).
    pub(super) async fn apply_batch(
        &self,
        app: &App,
        changes: &[ChangeRow],
    ) -> Result<(), store::Error> {
        let mut named = Named::default();
        for c in changes {
            match ChangeKind::parse(&c.kind) {
                Some(kind) => named.add(kind, &c.item),
                None => tracing::debug!(kind = %c.kind, "change of an unknown kind ignored"),
            }
        }
        for lease in &named.leases {
            if let Some(entry) = app
                .leases
                .upsert_chain(self.store.lease_chain(lease).await?)
                && !entry.is_usable()
            {
                app.limits.forget_prefix(&format!("lease:{lease}"));
            }
        }
        if !named.targets.is_empty() {
            let targets: Vec<String> = named.targets.into_iter().collect();
            self.refresh_targets(app, Some(&targets)).await?;
        }
        if named.descriptors {
            self.refresh_descriptors(app).await?;
        }
        for login in &named.consoles {
            app.logins.forget(login);
        }
        if named.operators {
            app.operators.reload(&app.store).await?;
        }
        for task in &named.tasks {
            app.tasks.stop(task);
        }
        Ok(())
    }

    /// Reloads everything the change feed keeps honest: every target, the descriptor set,
    /// revoked leases and console sessions (after a gap in the feed).
    pub(super) async fn reload_everything(&self, app: &App) -> Result<(), store::Error> {
        self.refresh_targets(app, None).await?;
        self.refresh_descriptors(app).await?;
        self.reload_revocations(app).await?;
        app.operators.reload(&app.store).await?;
        app.logins.recheck_all(app).await
    }

    /// Reloads targets' enrolments (every enrolled one with `None`) and, for those whose hub
    /// is not connected here, their directory entries: the descriptor the owner stored,
    /// online while a live replica holds the hub. One read of the targets, rotated keys and
    /// owners for all of them.
    pub(super) async fn refresh_targets(
        &self,
        app: &App,
        only: Option<&[String]>,
    ) -> Result<(), store::Error> {
        let wanted = |id: &str| only.is_none_or(|ids| ids.iter().any(|i| i == id));
        // Read and applied as one step with respect to key rotations (see `enrolment_writes`).
        let _writes = self.enrolment_writes.lock().await;
        let rows = match only {
            Some(ids) => self.store.load_targets_of(ids).await?,
            None => self.store.load_targets().await?,
        };
        if rows.is_empty() {
            return Ok(());
        }
        let now_ms = mcp_shared::time::unix_ms(mcp_shared::time::now());
        let mut previous: HashMap<String, store::PreviousKey> = self
            .store
            .load_previous_keys()
            .await?
            .into_iter()
            .filter(|(id, p)| wanted(id) && p.expires_at_ms > now_ms && !p.token_hash.is_empty())
            .collect();
        let target = match only {
            Some([one]) => Some(one.as_str()),
            _ => None,
        };
        let owners: HashMap<String, Owner> = self
            .store
            .live_owners(target, EXPIRY_MS)
            .await?
            .into_iter()
            .filter(|o| o.replica_id != self.replica_id)
            .map(|o| {
                (
                    o.target_id,
                    Owner {
                        replica_id: o.replica_id,
                        advertise_url: o.advertise_url,
                    },
                )
            })
            .collect();
        for row in rows {
            let target_id = row.target_id.clone();
            let mut enrolment = match crate::hubs::Enrolment::open(
                row,
                previous.remove(&target_id),
                &app.master_key,
            ) {
                Ok(e) => e,
                Err(e) => {
                    tracing::error!(%target_id, error = %e, "stored signing key cannot be opened; the target cannot connect here");
                    continue;
                }
            };
            // A hub connected here reports to memory first (the store follows): its last
            // report is the one in memory, never an older stored one.
            if app.hubs.connected(&target_id)
                && let Some(live) = app.hubs.enrolments.get(&target_id)
            {
                enrolment.skill.reported = live.skill.reported.clone();
            }
            let mut descriptor = enrolment.offline_descriptor();
            let (gate_was_open, standing_changed, moved) = app
                .hubs
                .enrolments
                .get(&target_id)
                .map_or((None, true, false), |e| {
                    let changed =
                        e.lifecycle != enrolment.lifecycle || e.narrowing != enrolment.narrowing;
                    let moved = e.row.environment != enrolment.row.environment;
                    (Some(e.skill.open()), changed || moved, moved)
                });
            let gate_open = enrolment.skill.open();
            let retired = enrolment.retired();
            app.hubs.enrolments.insert(target_id.clone(), enrolment);
            if gate_was_open != Some(gate_open) || standing_changed {
                app.hubs.surface_changed(&target_id);
            }
            if retired || moved {
                // Retired, or moved to another environment, on another replica: its hub's
                // connection here ends (a moved hub registers again under its new enrolment).
                app.hubs.drop_link(&target_id, "target retired or moved");
            }
            if app.hubs.connected(&target_id) {
                // This replica holds the hub: its live view is the authority.
                continue;
            }
            match owners.get(&target_id) {
                Some(o) => {
                    descriptor.status = TargetStatus::Online;
                    self.owners.insert(target_id.clone(), o.clone());
                }
                None => {
                    self.owners.remove(&target_id);
                }
            }
            let changed = app
                .hubs
                .targets
                .get(&target_id)
                .is_none_or(|old| *old != descriptor);
            app.hubs.targets.insert(target_id.clone(), descriptor);
            if changed {
                app.hubs.surface_changed(&target_id);
            }
        }
        Ok(())
    }

    /// Serves the newest published descriptor set if it is newer than the one served here.
    pub(super) async fn refresh_descriptors(&self, app: &App) -> Result<(), store::Error> {
        let served = app.descriptors.snapshot().origin.revision;
        let Some(latest) = self.store.latest_descriptor_set().await? else {
            return Ok(());
        };
        if served.is_some_and(|r| r >= latest.revision) {
            return Ok(());
        }
        if let Some(set) = crate::descriptors::load_published(
            &app.store,
            &app.catalog.contracts,
            &app.config.skill_catalog.scheme,
        )
        .await?
        {
            let revision = set.origin.revision;
            match crate::descriptors::publish::replace(
                &app.actors.descriptors.load(),
                Arc::new(set),
            )
            .await
            {
                Ok(true) => tracing::info!(
                    ?revision,
                    "serving the descriptor set another replica published"
                ),
                // A newer one is served here already (published here meanwhile).
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot serve a descriptor set another replica published")
                }
            }
        }
        Ok(())
    }

    /// Reconciles hub ownership with the registry: targets whose owner died go offline here,
    /// targets another replica took over come online.
    pub(super) async fn reconcile_owners(&self, app: &App) -> Result<(), store::Error> {
        let live: HashMap<String, Owner> = self
            .store
            .live_owners(None, EXPIRY_MS)
            .await?
            .into_iter()
            .filter(|o| o.replica_id != self.replica_id)
            .map(|o| {
                (
                    o.target_id,
                    Owner {
                        replica_id: o.replica_id,
                        advertise_url: o.advertise_url,
                    },
                )
            })
            .collect();
        let targets: Vec<String> = app
            .hubs
            .enrolments
            .iter()
            .map(|e| e.key().clone())
            .collect();
        let stale: Vec<String> = targets
            .into_iter()
            .filter(|target_id| {
                if app.hubs.connected(target_id) {
                    return false;
                }
                let online = app
                    .hubs
                    .targets
                    .get(target_id)
                    .is_some_and(|d| d.status != TargetStatus::Offline);
                let owner_moved = match (live.get(target_id), self.owners.get(target_id)) {
                    (Some(l), Some(c)) => *l != *c,
                    (l, c) => l.is_some() != c.is_some(),
                };
                online != live.contains_key(target_id) || owner_moved
            })
            .collect();
        if !stale.is_empty() {
            self.refresh_targets(app, Some(&stale)).await?;
        }
        self.owners.retain(|t, _| live.contains_key(t));
        Ok(())
    }

    /// Marks leases revoked in the store but active here (a change this replica missed).
    pub(super) async fn reload_revocations(&self, app: &App) -> Result<(), store::Error> {
        let now_ms = mcp_shared::time::unix_ms(mcp_shared::time::now());
        for id in self.store.revoked_unexpired_leases(now_ms).await? {
            if let Some(e) = app.leases.entry(&id)
                && e.is_usable()
            {
                tracing::warn!(session_id = %id, "a lease revoked on another replica was still active here; revoked now (missed notification)");
                app.leases.upsert_chain(self.store.lease_chain(&id).await?);
                app.limits.forget_prefix(&format!("lease:{id}"));
            }
        }
        Ok(())
    }

    /// A lease this replica has not seen (issued by another replica): loaded from the store.
    pub(crate) async fn lease_on_miss(
        &self,
        app: &App,
        token_hash: &str,
    ) -> Option<Arc<LeaseEntry>> {
        if self.unknown_bearers.contains_key(token_hash) {
            return None;
        }
        let _permit = self.lookups.acquire().await.ok()?;
        if let Some(e) = app.leases.by_hash(token_hash) {
            return Some(e);
        }
        let chain = match self.store.lease_by_hash(token_hash).await {
            Ok(Some(row)) => self.store.lease_chain(&row.lease.session_id).await,
            Ok(None) => Ok(Vec::new()),
            Err(e) => Err(e),
        };
        match chain.map(|c| app.leases.upsert_chain(c)) {
            Ok(Some(entry)) => Some(entry),
            Ok(None) => {
                if self.unknown_bearers.len() >= UNKNOWN_BEARERS_MAX {
                    self.unknown_bearers.clear();
                }
                self.unknown_bearers.insert(token_hash.to_owned(), ());
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot look a bearer up in the store; refused");
                None
            }
        }
    }

    /// Reloads every enrolment (a hub presenting a token this replica does not know may have
    /// been enrolled on another replica); at most once a second, whatever unknown tokens
    /// arrive.
    pub(crate) async fn reload_enrolments(&self, app: &App) {
        let Ok(_permit) = self.lookups.acquire().await else {
            return;
        };
        {
            let mut last = self.last_enrolment_reload.lock().await;
            if last.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
                return;
            }
            *last = Some(tokio::time::Instant::now());
        }
        if let Err(e) = self.refresh_targets(app, None).await {
            tracing::warn!(error = %e, "cannot reload enrolments");
        }
    }
}
