//! Witnessing over HTTP (`audit::witness`): root as a witness of other zones' trails
//! (`POST /v1/root/witness/add-checkpoint`, the C2SP `tlog-witness` call, public as the
//! protocol has it: the checkpoint's signature is the request's credential; `GET
//! /v1/root/witness`, its key and what it has cosigned), and the witnesses this zone's
//! checkpoints go to (`GET /v1/root/mcp/audit/witnesses`).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::audit::witness::submit::PeerStatus;
use crate::audit::witness::{MAX_REQUEST, WitnessError};

pub(crate) use crate::audit::witness::ADD_CHECKPOINT;

/// `POST /v1/root/witness/add-checkpoint`: a cosignature line, or the protocol's refusal
/// (`409` with the latest cosigned size as `text/x.tlog.size`).
pub(super) async fn add_checkpoint(State(app): State<Arc<App>>, body: Bytes) -> Response {
    if body.len() > MAX_REQUEST {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("an add-checkpoint request is at most {MAX_REQUEST} bytes\n"),
        )
            .into_response();
    }
    match app.witness.add_checkpoint(&app.store, &body).await {
        Ok(lines) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            lines,
        )
            .into_response(),
        Err(WitnessError::Conflict(size)) => (
            StatusCode::CONFLICT,
            [(header::CONTENT_TYPE, "text/x.tlog.size")],
            format!("{size}\n"),
        )
            .into_response(),
        Err(e) => {
            let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
            if status.is_server_error() {
                tracing::error!(error = %e, "witness cannot answer add-checkpoint");
            } else {
                tracing::info!(error = %e, "witness refused a checkpoint");
            }
            (
                status,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                format!("{e}\n"),
            )
                .into_response()
        }
    }
}

/// `GET /v1/root/witness`.
#[derive(Debug, Serialize)]
pub(crate) struct WitnessBody {
    /// The cosigner's name.
    pub(crate) name: String,
    /// Its verifier key (cosignature/v1, type 0x04): what a log configures for this witness.
    pub(crate) verifier_key: String,
    /// The logs witnessed and the latest size cosigned of each.
    pub(crate) logs: Vec<WitnessedLog>,
}

#[derive(Debug, Serialize)]
pub(crate) struct WitnessedLog {
    pub(crate) origin: String,
    pub(crate) cosigned_size: u64,
}

pub(super) async fn show(State(app): State<Arc<App>>) -> Result<Json<WitnessBody>, ApiError> {
    let cosigner = app.witness.cosigner();
    let mut logs = Vec::new();
    for origin in app.witness.origins() {
        let size = app
            .store
            .witnessed(origin)
            .await
            .map_err(ApiError::internal)?
            .map_or(0, |(s, _)| s);
        logs.push(WitnessedLog {
            origin: origin.to_owned(),
            cosigned_size: size,
        });
    }
    logs.sort_by(|a, b| a.origin.cmp(&b.origin));
    Ok(Json(WitnessBody {
        name: cosigner.name().to_owned(),
        verifier_key: cosigner.verifier_key(),
        logs,
    }))
}

/// `GET /v1/root/mcp/audit/witnesses`: each configured witness and what it has cosigned.
pub(super) async fn peers(State(app): State<Arc<App>>, _op: Operator) -> Json<Vec<PeerStatus>> {
    Json(app.witnesses.status())
}
