//! The zone as operators and callers see it: replicas, their health and the hubs each holds.

use super::zone::*;
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::ops::error::Refusal;
use crate::store;

impl Zone {
    /// The zone view: every registered replica with its health and the hubs it holds.
    /// Internal addresses only for the operator.
    pub(crate) async fn view(&self, operator: bool) -> Result<ZoneView, store::Error> {
        let replicas = self.store.list_replicas(FORGET_MS).await?;
        let owners = self.store.live_owners(None, EXPIRY_MS).await?;
        let last_change = self.store.last_change().await?;
        let time = |ms| mcp_shared::time::format(mcp_shared::time::from_unix_ms(ms));
        let replicas = replicas
            .iter()
            .map(|r| ReplicaView {
                replica_id: r.replica_id.clone(),
                this: r.replica_id == self.replica_id,
                health: if r.heartbeat_age_ms <= EXPIRY_MS {
                    Health::Up
                } else {
                    Health::Down
                },
                heartbeat_age_ms: r.heartbeat_age_ms,
                last_heartbeat_at: Some(time(r.heartbeat_at_ms)),
                started_at: time(r.started_at_ms),
                version: r.version.clone(),
                changes_behind: (last_change - r.applied_change).max(0),
                hubs: owners
                    .iter()
                    .filter(|o| o.replica_id == r.replica_id)
                    .map(|o| o.target_id.clone())
                    .collect(),
                advertise_url: operator.then(|| r.advertise_url.clone()),
            })
            .collect();
        Ok(ZoneView {
            mode: "replicated".into(),
            backend: "postgres".into(),
            zone: self.zone.clone(),
            this: self.replica_id.clone(),
            replicas,
        })
    }
}

/// The zone view for a single replica (SQLite): this process and the hubs connected to it.
fn single_view(app: &App) -> ZoneView {
    let mut hubs: Vec<String> = app.hubs.links.iter().map(|e| e.key().clone()).collect();
    hubs.sort();
    ZoneView {
        mode: "single".into(),
        backend: app.store.backend().into(),
        zone: app.config.zone.clone(),
        this: "single".into(),
        replicas: vec![ReplicaView {
            replica_id: "single".into(),
            this: true,
            health: Health::Up,
            heartbeat_age_ms: 0,
            last_heartbeat_at: None,
            started_at: mcp_shared::time::format(app.started_at),
            version: env!("CARGO_PKG_VERSION").into(),
            changes_behind: 0,
            hubs,
            advertise_url: None,
        }],
    }
}

/// The zone view as the REST family shows it (`/v1/root/replicas`, foundation).
pub(crate) async fn zone_view(app: &App, operator: bool) -> Result<ZoneView, Refusal> {
    match &app.zone {
        Some(z) => z.view(operator).await.map_err(Refusal::internal),
        None => Ok(single_view(app)),
    }
}

/// Whether a replica's heartbeat is recent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Health {
    Up,
    Down,
}

/// One replica of the zone.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ReplicaView {
    pub(crate) replica_id: String,
    #[serde(rename = "self")]
    pub(crate) this: bool,
    pub(crate) health: Health,
    pub(crate) heartbeat_age_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_heartbeat_at: Option<String>,
    pub(crate) started_at: String,
    pub(crate) version: String,
    pub(crate) changes_behind: i64,
    /// The targets whose hubs it holds.
    pub(crate) hubs: Vec<String>,
    /// Its internal address (operators only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) advertise_url: Option<String>,
}

/// `GET /v1/root/replicas`: the zone's replicas, their health and hubs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ZoneView {
    /// `single` (SQLite) or `replicated` (PostgreSQL).
    pub(crate) mode: String,
    pub(crate) backend: String,
    pub(crate) zone: String,
    #[serde(rename = "self")]
    pub(crate) this: String,
    pub(crate) replicas: Vec<ReplicaView>,
}
