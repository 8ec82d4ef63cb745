//! The hub door: who may open a hub WebSocket (`GET /v1/root/hubs/connect`).
//!
//! A hub presents its enrolment token in the upgrade request itself (`Authorization: Bearer
//! <hub token>`); root checks it before it upgrades anything, so an anonymous client gets
//! `401` on plain HTTP and never holds a socket (the `hello` that follows must carry the
//! same token). Refusals are counted in `mcp_root_hub_door_refusals_total{reason}` and
//! bounded per peer address: past `limits.hub_door_max_failures` within [`FAILURE_WINDOW`]
//! the address is answered `429` without a token lookup until the window ends. Hub links have
//! their own budget (`limits.max_hub_links`, apart from client connections): past it a hub
//! is answered `503` with `Retry-After` and dials again after that, jittered. Like every refusal before
//! authentication, none of this is an audit event (there is no actor to attribute it to).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode, header};
use dashmap::DashMap;
use mcp_shared::error::ErrorCode;
use mcp_shared::time::{now, unix_ms};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::api::error::ApiError;
use crate::app::App;
use crate::hubs::Enrolment;

/// The window refusals are counted in.
pub(crate) const FAILURE_WINDOW: Duration = Duration::from_secs(10);
/// Addresses tracked at once; past it, windows that ended are forgotten first.
const MAX_TRACKED: usize = 10_000;

/// Why an upgrade was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No `Authorization: Bearer` header.
    Missing,
    /// A token no enrolment (or rotation grace) has.
    Unknown,
    /// The address was refused too often lately.
    Throttled,
    /// The token's target is retired: its credentials are revoked for good.
    Retired,
}

impl Refusal {
    /// The metric label.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Unknown => "unknown",
            Refusal::Throttled => "throttled",
            Refusal::Retired => "retired",
        }
    }

    fn error(self) -> ApiError {
        match self {
            Refusal::Missing => ApiError::new(
                StatusCode::UNAUTHORIZED,
                ErrorCode::Unauthenticated,
                "a hub connects with its token in the upgrade request: Authorization: Bearer <hub token>",
            ),
            Refusal::Unknown => ApiError::new(
                StatusCode::UNAUTHORIZED,
                ErrorCode::Unauthenticated,
                "unknown hub token",
            ),
            Refusal::Retired => ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::TargetRetired,
                "this hub's target is retired: its hub token opens nothing again",
            ),
            Refusal::Throttled => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::Busy,
                format!(
                    "too many refused hub connections from this address; retry after {} s",
                    FAILURE_WINDOW.as_secs()
                ),
            )
            .retry_after(FAILURE_WINDOW.as_secs()),
        }
    }
}

/// A hub admitted at the door: its enrolment, the signing key that goes with the token it
/// presented (current, or previous within a rotation's grace) and that token's hash.
pub(crate) struct Admitted {
    pub(crate) enrolment: Enrolment,
    pub(crate) signing_key: [u8; 32],
    pub(crate) token_hash: String,
}

/// What a hub at the cap is told to wait before it dials again (it adds its own jitter).
pub(crate) const CAP_RETRY_AFTER: Duration = Duration::from_secs(5);

/// The hub links' budget and the refusal counts per peer address.
pub(crate) struct HubDoor {
    failures: DashMap<IpAddr, (Instant, u32)>,
    /// Token hash → target id, for tokens that opened an enrolment before ([`HubDoor::find`]).
    by_token: DashMap<String, String>,
    /// One permit per hub link served (`limits.max_hub_links`), held until its socket closes.
    links: Arc<Semaphore>,
    max_links: usize,
}

impl HubDoor {
    pub(crate) fn new(max_links: usize) -> HubDoor {
        HubDoor {
            failures: DashMap::new(),
            by_token: DashMap::new(),
            links: Arc::new(Semaphore::new(max_links.max(1))),
            max_links: max_links.max(1),
        }
    }

    /// A place among the hub links for one connection, or, with every place taken, the
    /// `503` (with `Retry-After`) to answer instead of upgrading. Checked before the token:
    /// at the cap, a hub's retry costs root no lookup.
    pub(crate) fn link_slot(&self, app: &App) -> Result<OwnedSemaphorePermit, ApiError> {
        self.links.clone().try_acquire_owned().map_err(|_| {
            app.metrics.connections.refused("hub_links");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Busy,
                format!(
                    "root serves its maximum of {} hub links (limits.max_hub_links); retry after {} s",
                    self.max_links,
                    CAP_RETRY_AFTER.as_secs()
                ),
            )
            .retry_after(CAP_RETRY_AFTER.as_secs())
        })
    }

    fn throttled(&self, ip: IpAddr, max_failures: u32) -> bool {
        self.failures
            .get(&ip)
            .is_some_and(|f| f.0.elapsed() < FAILURE_WINDOW && f.1 >= max_failures)
    }

    /// The enrolment a hub token of this hash opens, and its signing key: through an index
    /// of token hashes (each hit checked again, constant-time, against its enrolment). A miss
    /// (an enrolment since the last one, or an unknown token) scans every enrolment once and
    /// indexes all of their tokens, so a fleet registering costs one scan, not one per hub
    /// (15,000 hubs made some 10^8 comparisons). An entry that no longer opens its enrolment
    /// (a rotated or revoked token) is dropped.
    fn find(&self, app: &App, token_hash: &str, now_ms: i64) -> Option<(Enrolment, [u8; 32])> {
        if let Some(target_id) = self.by_token.get(token_hash).map(|t| t.clone()) {
            let hit = app
                .hubs
                .enrolments
                .get(&target_id)
                .and_then(|e| e.key_for(token_hash, now_ms).map(|k| (e.clone(), k)));
            if hit.is_some() {
                return hit;
            }
            self.by_token.remove(token_hash);
        }
        let mut found = None;
        for e in app.hubs.enrolments.iter() {
            let hashes = std::iter::once(&e.row.token_hash)
                .chain(e.previous.as_ref().map(|p| &p.token_hash));
            for hash in hashes {
                if !self.by_token.contains_key(hash.as_str()) {
                    self.by_token.insert(hash.clone(), e.row.target_id.clone());
                }
            }
            if found.is_none() {
                found = e.key_for(token_hash, now_ms).map(|k| (e.clone(), k));
            }
        }
        found
    }

    fn failed(&self, ip: IpAddr) {
        if self.failures.len() >= MAX_TRACKED {
            self.failures.retain(|_, f| f.0.elapsed() < FAILURE_WINDOW);
        }
        let mut f = self.failures.entry(ip).or_insert((Instant::now(), 0));
        if f.0.elapsed() >= FAILURE_WINDOW {
            *f = (Instant::now(), 0);
        }
        f.1 = f.1.saturating_add(1);
    }
}

/// Checks the upgrade request's hub token; the refusal is the answer to send instead of
/// upgrading.
pub(crate) async fn admit(
    app: &App,
    door: &HubDoor,
    remote: Option<IpAddr>,
    headers: &HeaderMap,
) -> Result<Admitted, ApiError> {
    let refuse = |r: Refusal| {
        app.metrics
            .hub_door_refusals
            .get_or_create(&crate::telemetry::metrics::ReasonLabel {
                reason: r.reason().into(),
            })
            .inc();
        if r != Refusal::Throttled {
            app.metrics.unauthenticated.inc();
            if let Some(ip) = remote {
                door.failed(ip);
            }
        }
        tracing::warn!(peer = ?remote, reason = r.reason(), "hub connection refused before the upgrade");
        r.error()
    };
    let max_failures = app.config.limits.hub_door_max_failures;
    if remote.is_some_and(|ip| door.throttled(ip, max_failures)) {
        return Err(refuse(Refusal::Throttled));
    }
    let Some(token) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::auth::bearer)
    else {
        return Err(refuse(Refusal::Missing));
    };
    let token_hash = crate::auth::token_hash(token);
    let now_ms = unix_ms(now());
    let find = |app: &App| door.find(app, &token_hash, now_ms);
    let mut found = find(app);
    if found.is_none()
        && let Some(zone) = &app.zone
    {
        // Enrolled (or its key rotated) on another replica a moment ago.
        zone.reload_enrolments(app).await;
        found = find(app);
    }
    match found {
        Some((enrolment, _)) if enrolment.retired() => Err(refuse(Refusal::Retired)),
        Some((enrolment, signing_key)) => Ok(Admitted {
            enrolment,
            signing_key,
            token_hash,
        }),
        None => Err(refuse(Refusal::Unknown)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_throttled_after_its_failures_and_others_are_not() {
        let door = HubDoor::new(1);
        let a: IpAddr = "10.0.0.1".parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let b: IpAddr = "10.0.0.2".parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
        for _ in 0..9 {
            door.failed(a);
        }
        assert!(!door.throttled(a, 10));
        door.failed(a);
        assert!(door.throttled(a, 10));
        assert!(!door.throttled(b, 10));
    }
}
