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
pub(crate) mod forward;
pub(crate) mod view;
pub(crate) mod zone;

pub(crate) use view::zone_view;
pub(crate) use zone::{ACK_BUDGET, ChangeKind, Owner, Zone};

use std::sync::Arc;

use crate::app::App;
use crate::leases::manager::LeaseEntry;

/// The lease a bearer resolves to, if usable: from the index, or (replicas) from the store
/// when another replica issued it.
pub(crate) async fn authenticate(app: &App, token: &str) -> Option<Arc<LeaseEntry>> {
    let hash = crate::auth::token_hash(token);
    let entry = match app.leases.by_hash(&hash) {
        Some(e) => e,
        None => app.zone.as_ref()?.lease_on_miss(app, &hash).await?,
    };
    entry.is_usable().then_some(entry)
}

/// Holds the replica's enrolment-write lock (none on SQLite): a change of an enrolment in
/// the store and in memory is one step with respect to this replica's reload of enrolments,
/// which could otherwise put back what it read before the change.
pub(crate) async fn enrolment_write(app: &App) -> Option<tokio::sync::MutexGuard<'_, ()>> {
    match &app.zone {
        Some(z) => Some(z.enrolment_writes.lock().await),
        None => None,
    }
}

/// Tells the other replicas that a lease changed; revocations wait until every live replica
/// refuses the bearer.
pub(crate) async fn lease_changed(app: &App, session_id: &str, revoked: bool) {
    if let Some(z) = &app.zone {
        z.changed(ChangeKind::Lease, session_id, revoked).await;
    }
}

/// Tells the other replicas that a target changed (enrolment, key, connection, surface).
pub(crate) async fn target_changed(app: &App, target_id: &str, wait: bool) {
    if let Some(z) = &app.zone {
        z.changed(ChangeKind::Target, target_id, wait).await;
    }
}

/// This replica now holds `target_id`'s hub connection `connection_id`.
pub(crate) async fn hub_connected(app: &App, target_id: &str, connection_id: &str) {
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
    z.changed(ChangeKind::Target, target_id, false).await;
}

/// `target_id`'s hub connection `connection_id` ended here.
pub(crate) async fn hub_disconnected(app: &App, target_id: &str, connection_id: &str) {
    let Some(z) = &app.zone else { return };
    z.held.remove_if(target_id, |_, c| c == connection_id);
    if let Err(e) = z.store.release_hub(target_id, connection_id).await {
        tracing::warn!(%target_id, error = %e, "cannot release hub ownership; it expires by itself");
    }
    z.changed(ChangeKind::Target, target_id, false).await;
}
