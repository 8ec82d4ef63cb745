//! The loops that keep this replica in the zone: its heartbeat (which also takes over the
//! fleet runs of replicas that are gone), the change feed's `LISTEN`, and the polling
//! fallback when notifications are lost.

use super::zone::*;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use sqlx::postgres::PgListener;

use crate::app::App;
use crate::store::ReplicaRow;

pub(super) async fn heartbeat(zone: Arc<Zone>, app: Arc<App>) {
    let mut tick = tokio::time::interval(HEARTBEAT);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n = 0u64;
    loop {
        tokio::select! {
            () = app.shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        n += 1;
        let held: Vec<(String, String)> = zone
            .held
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect();
        match zone
            .store
            .heartbeat_replica(&zone.replica_id, &zone.instance_id, &held)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                // The row was dropped (this process stalled past the expiry) or taken over.
                let row = ReplicaRow {
                    replica_id: zone.replica_id.clone(),
                    zone: zone.zone.clone(),
                    advertise_url: zone.advertise_url().to_owned(),
                    instance_id: zone.instance_id.clone(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    started_at_ms: 0,
                    heartbeat_at_ms: 0,
                    heartbeat_age_ms: 0,
                    applied_change: zone.acked.load(Ordering::Acquire),
                };
                match zone.store.register_replica(&row, EXPIRY_MS).await {
                    Ok(true) => tracing::warn!("replica row was gone; registered again"),
                    Ok(false) => {
                        tracing::error!(replica_id = %zone.replica_id, "another live process uses this replica id")
                    }
                    Err(e) => tracing::warn!(error = %e, "replica heartbeat failed"),
                }
            }
            Err(e) => tracing::warn!(error = %e, "replica heartbeat failed"),
        }
        if n.is_multiple_of(2) {
            take_over_runs(&zone, &app).await;
        }
        if n.is_multiple_of(60)
            && let Err(e) = zone.store.prune_changes(CHANGE_RETENTION_MS).await
        {
            tracing::debug!(error = %e, "pruning the change feed failed");
        }
    }
}

/// Drives the fleet runs of replicas that are gone (see `Store::take_over_fleet_runs`).
async fn take_over_runs(zone: &Zone, app: &Arc<App>) {
    match zone
        .store
        .take_over_fleet_runs(&zone.replica_id, EXPIRY_MS)
        .await
    {
        Ok(runs) => {
            for run_id in runs {
                tracing::warn!(%run_id, "taking over a fleet run whose replica is gone");
                crate::fleet::execute::spawn(app.clone(), run_id);
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot look for fleet runs to take over"),
    }
}

/// Waits for notifications: changes trigger a catch-up, audit commits wake the live streams.
pub(super) async fn listen(zone: Arc<Zone>, app: Arc<App>) {
    let Some(names) = zone.store.shared().cloned() else {
        return;
    };
    loop {
        let connected = async {
            let mut l = PgListener::connect(&zone.database_url).await?;
            l.listen_all([names.changes_channel.as_str(), names.audit_channel.as_str()])
                .await?;
            Ok::<_, sqlx::Error>(l)
        };
        let mut listener = tokio::select! {
            () = app.shutdown.cancelled() => return,
            l = connected => match l {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for zone notifications; retrying (the fallback reload keeps replicas in step)");
                    tokio::select! {
                        () = app.shutdown.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            },
        };
        // Whatever was committed while nobody listened.
        zone.catch_up(&app).await;
        loop {
            let next = tokio::select! {
                () = app.shutdown.cancelled() => return,
                n = listener.try_recv() => n,
            };
            match next {
                Ok(Some(n)) => {
                    let mut changes = false;
                    let mut note = |n: &sqlx::postgres::PgNotification| {
                        if n.channel() == names.audit_channel {
                            if let Ok(seq) = n.payload().parse::<i64>() {
                                app.audit.head.send_if_modified(|h| {
                                    let newer = seq > *h;
                                    *h = (*h).max(seq);
                                    newer
                                });
                            }
                        } else {
                            changes = true;
                        }
                    };
                    note(&n);
                    while let Some(n) = listener.next_buffered() {
                        note(&n);
                    }
                    if changes {
                        zone.catch_up(&app).await;
                    }
                }
                Ok(None) => {
                    tracing::warn!(
                        "zone notification connection lost; reconnecting and catching up"
                    );
                    zone.catch_up(&app).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "zone notifications failed; reconnecting");
                    break;
                }
            }
        }
    }
}

/// The bounded-staleness fallback: every [`FALLBACK`], apply missed changes, re-read which
/// unexpired leases are revoked, reconcile hub ownership, wake the audit streams for rows
/// committed elsewhere, and drop console sessions the zone no longer holds.
pub(super) async fn fallback(zone: Arc<Zone>, app: Arc<App>) {
    let mut tick = tokio::time::interval(FALLBACK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = app.shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        zone.catch_up(&app).await;
        if let Err(e) = zone.reload_revocations(&app).await {
            tracing::warn!(error = %e, "cannot re-read revoked leases");
        }
        if let Err(e) = app.operators.reload(&app.store).await {
            tracing::warn!(error = %e, "cannot re-read the operators");
        }
        if let Err(e) = zone.reconcile_owners(&app).await {
            tracing::warn!(error = %e, "cannot reconcile hub ownership");
        }
        // Audit rows whose notification was lost wake the live streams all the same.
        match zone.store.audit_head().await {
            Ok(Some((seq, _))) => {
                app.audit.head.send_if_modified(|h| {
                    let newer = seq > *h;
                    *h = (*h).max(seq);
                    newer
                });
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "cannot read the audit head"),
        }
        if let Err(e) = app.logins.recheck_all(&app).await {
            tracing::warn!(error = %e, "cannot re-read console sessions");
        }
    }
}

impl Zone {
    /// Registers this replica once its listener is bound, and starts the heartbeat, the
    /// notification listener and the fallback reload. Refuses to start next to a live replica
    /// of another zone or one using the same replica id.
    pub(crate) async fn start(
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
}
