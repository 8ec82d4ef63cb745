//! `GET /v1/root/replicas`: the zone's replicas, their hubs and health (`replica::zone_view`),
//! and the same view for a caller's run profile.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;

use crate::api::bodies::ZoneView;
use crate::api::error::ApiError;
use crate::api::principal::{Auth, Operator};
use crate::app::{App, Principal};
use crate::replica::zone_view;

/// `GET /v1/root/replicas` (operator): the replicas of the zone, their hubs and health.
pub(crate) async fn list(
    State(app): State<Arc<App>>,
    _op: Operator,
) -> Result<Json<ZoneView>, ApiError> {
    Ok(Json(zone_view(&app, true).await?))
}

/// The zone view for a principal (advertised addresses only for the operator).
pub(crate) async fn view_for(app: &App, auth: &Auth) -> Result<ZoneView, ApiError> {
    Ok(zone_view(app, matches!(auth.0, Principal::Operator(_))).await?)
}
