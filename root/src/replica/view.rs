//! The zone as operators and callers see it: replicas, their health and the hubs each holds.

use super::*;

impl Zone {
    /// The zone view: every registered replica with its health and the hubs it holds.
    /// Internal addresses only for the operator.
    pub async fn view(&self, operator: bool) -> Result<Value, store::Error> {
        let replicas = self.store.list_replicas(FORGET_MS).await?;
        let owners = self.store.live_owners(None, EXPIRY_MS).await?;
        let last_change = self.store.last_change().await?;
        let list: Vec<Value> = replicas
            .iter()
            .map(|r| {
                let up = r.heartbeat_age_ms <= EXPIRY_MS;
                let hubs: Vec<&str> = owners
                    .iter()
                    .filter(|o| o.replica_id == r.replica_id)
                    .map(|o| o.target_id.as_str())
                    .collect();
                let mut v = json!({
                    "replica_id": r.replica_id,
                    "self": r.replica_id == self.replica_id,
                    "health": if up { "up" } else { "down" },
                    "heartbeat_age_ms": r.heartbeat_age_ms,
                    "last_heartbeat_at": mcp_shared::time::format(mcp_shared::time::from_unix_ms(r.heartbeat_at_ms)),
                    "started_at": mcp_shared::time::format(mcp_shared::time::from_unix_ms(r.started_at_ms)),
                    "version": r.version,
                    "changes_behind": (last_change - r.applied_change).max(0),
                    "hubs": hubs,
                });
                if operator {
                    v["advertise_url"] = json!(r.advertise_url);
                }
                v
            })
            .collect();
        Ok(json!({
            "mode": "replicated",
            "backend": "postgres",
            "zone": self.zone,
            "self": self.replica_id,
            "replicas": list,
        }))
    }
}

/// The zone view for a single replica (SQLite): this process and the hubs connected to it.
fn single_view(app: &App) -> Value {
    let mut hubs: Vec<String> = app.hubs.links.iter().map(|e| e.key().clone()).collect();
    hubs.sort();
    json!({
        "mode": "single",
        "backend": app.store.backend(),
        "zone": app.config.zone,
        "self": "single",
        "replicas": [{
            "replica_id": "single",
            "self": true,
            "health": "up",
            "heartbeat_age_ms": 0,
            "started_at": mcp_shared::time::format(app.started_at),
            "version": env!("CARGO_PKG_VERSION"),
            "changes_behind": 0,
            "hubs": hubs,
        }],
    })
}

/// The zone view as the REST family shows it (`/v1/root/replicas`, foundation).
pub async fn zone_view(app: &App, operator: bool) -> Result<Value, ApiError> {
    match &app.zone {
        Some(z) => z.view(operator).await.map_err(ApiError::internal),
        None => Ok(single_view(app)),
    }
}

/// `GET /v1/root/replicas` (operator): the replicas of the zone, their hubs and health.
pub async fn list(State(app): State<Arc<App>>, _op: Operator) -> Result<Json<Value>, ApiError> {
    zone_view(&app, true).await.map(Json)
}

/// The zone view for a principal (advertised addresses only for the operator).
pub async fn view_for(app: &App, auth: &Auth) -> Result<Value, ApiError> {
    zone_view(app, matches!(auth.0, Principal::Operator(_))).await
}
