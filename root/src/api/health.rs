//! `/readyz` and `/metrics`.

use axum::response::IntoResponse;

use crate::actors::RPC_TIMEOUT_MS;
use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::hubs::router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header;
use axum::response::Response;
use mcp_shared::error::ErrorCode;
use ractor::call_t;
use std::sync::Arc;
use std::time::Duration;

use crate::telemetry::metrics::{ProfileLabel, TargetLabel};
use mcp_shared::target::TargetStatus;

pub(super) async fn readyz(State(app): State<Arc<App>>) -> Result<&'static str, ApiError> {
    // Public: says since when, never the cause (that is in the log and the outage record).
    if let Some(since) = app.audit.health.unavailable_since() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::AuditUnavailable,
            format!(
                "the audit trail cannot be written since {}; calls are refused until it can",
                mcp_shared::time::format(since)
            ),
        ));
    }
    tokio::time::timeout(Duration::from_secs(2), app.store.ping())
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Internal,
                "database did not answer",
            )
        })?
        .map_err(|e| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Internal,
                e.to_string(),
            )
        })?;
    Ok("ready")
}

pub(super) async fn metrics(State(app): State<Arc<App>>, _op: Operator) -> Response {
    app.metrics
        .active_leases
        .set(app.leases.active_count() as i64);
    // Series of a profile or target that went away do not linger: rebuilt at each scrape.
    app.metrics.leases.clear();
    for (profile, n) in app.leases.active_by_profile() {
        app.metrics
            .leases
            .get_or_create(&ProfileLabel { profile })
            .set(n as i64);
    }
    app.metrics.targets.connected.clear();
    for t in app.hubs.targets.iter() {
        app.metrics
            .targets
            .connected
            .get_or_create(&TargetLabel {
                target: t.key().clone(),
            })
            .set(i64::from(t.status == TargetStatus::Online));
    }
    let connected = call_t!(
        app.actors.router.load(),
        router::Msg::Connected,
        RPC_TIMEOUT_MS
    )
    .unwrap_or(0);
    app.metrics.connected_targets.set(connected as i64);
    app.metrics
        .audit_available
        .set(i64::from(app.audit.health.is_available()));
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        app.metrics.encode(),
    )
        .into_response()
}
