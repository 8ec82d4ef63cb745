//! What lets the audit trail be checked outside root (`audit::checkpoint`, `audit::tree`):
//! the zone's log key (`/v1/root/mcp/audit/key`) and its signed checkpoints
//! (`/v1/root/mcp/audit/checkpoints`), both public as a transparency log's are; an event's
//! inclusion proof against a checkpoint (`/v1/root/mcp/audit/proof/{event_id}`), the
//! consistency proof between two checkpoints (`/v1/root/mcp/audit/consistency`), and the
//! chain as it was hashed, for a verifiable export (`/v1/root/mcp/audit/chain`).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use mcp_shared::error::ErrorCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::audit::tree;
use crate::store::CheckpointRow;

/// Most checkpoints one request lists, and most chain rows one page holds.
const MAX_CHECKPOINTS: i64 = 1000;
const MAX_CHAIN_PAGE: i64 = 5000;

/// `GET /v1/root/mcp/audit/key`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct LogKeyBody {
    /// The log's origin (the first line of each checkpoint).
    pub(crate) origin: String,
    /// The signed-note verifier key: `<origin>+<key id>+<base64 Ed25519 public key>`.
    pub(crate) verifier_key: String,
}

/// A checkpoint as served.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CheckpointBody {
    pub(crate) tree_size: u64,
    /// Hex.
    pub(crate) root_hash: String,
    /// The signed note.
    pub(crate) note: String,
    pub(crate) created_at: String,
    /// Witnesses' cosignatures of it (listed checkpoints only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) cosignatures: Vec<CosignatureBody>,
}

/// A witness's cosignature of a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CosignatureBody {
    pub(crate) witness: String,
    /// The cosignature's own time.
    pub(crate) time: String,
    /// Its signature line: appended to `note`, the note verifies with the witness's key.
    pub(crate) line: String,
}

impl From<CheckpointRow> for CheckpointBody {
    fn from(c: CheckpointRow) -> Self {
        CheckpointBody {
            tree_size: c.tree_size,
            root_hash: c.root_hash,
            note: c.note,
            created_at: mcp_shared::time::format(mcp_shared::time::from_unix_ms(c.created_at_ms)),
            cosignatures: Vec::new(),
        }
    }
}

/// `GET /v1/root/mcp/audit/checkpoints`: the newest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Checkpoints {
    pub(crate) latest: Option<CheckpointBody>,
    pub(crate) checkpoints: Vec<CheckpointBody>,
}

/// An event's inclusion proof.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct InclusionBody {
    pub(crate) event_id: String,
    pub(crate) seq: i64,
    /// The leaf's index (`seq - 1`).
    pub(crate) leaf_index: u64,
    /// The event's chain hash: the leaf's data (hex).
    pub(crate) chain_hash: String,
    /// The proof's hashes (hex), as RFC 6962 orders them.
    pub(crate) proof: Vec<String>,
    /// The checkpoint it proves against.
    pub(crate) checkpoint: CheckpointBody,
}

/// A consistency proof between two checkpoints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ConsistencyBody {
    pub(crate) from: CheckpointBody,
    pub(crate) to: CheckpointBody,
    pub(crate) proof: Vec<String>,
}

/// One row of the chain as it was hashed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ChainRow {
    pub(crate) seq: i64,
    pub(crate) prev_hash: String,
    pub(crate) hash: String,
    /// The event as stored (its canonical JSON is what `hash` covers).
    pub(crate) event: Value,
}

/// `GET /v1/root/mcp/audit/chain`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ChainPage {
    pub(crate) events: Vec<ChainRow>,
    /// `after_seq` of the next page, when there may be one.
    pub(crate) next_after_seq: Option<i64>,
}

fn hex_list(hashes: &[tlog_tiles::Hash]) -> Vec<String> {
    hashes.iter().map(|h| hex::encode(h.0)).collect()
}

fn tree_error(e: tree::TreeError) -> ApiError {
    ApiError::internal(e)
}

/// A stored checkpoint of `size`, or the newest when `size` is `None`.
async fn checkpoint(app: &App, size: Option<u64>) -> Result<CheckpointRow, ApiError> {
    let found = match size {
        Some(s) => app.store.audit_checkpoint(s).await,
        None => app
            .store
            .audit_checkpoints(1)
            .await
            .map(|v| v.into_iter().next()),
    }
    .map_err(ApiError::internal)?;
    found.ok_or_else(|| match size {
        Some(s) => ApiError::not_found(format!(
            "no checkpoint of tree size {s}: checkpoints are listed at /v1/root/mcp/audit/checkpoints"
        )),
        None => ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::Conflict,
            "no checkpoint has been signed yet (one is signed within audit.checkpoint.every_sec of the first event)",
        ),
    })
}

pub(super) async fn key(State(app): State<Arc<App>>) -> Json<LogKeyBody> {
    Json(LogKeyBody {
        origin: app.log_key.origin().to_owned(),
        verifier_key: app.log_key.verifier_key().to_owned(),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    limit: Option<i64>,
}

pub(super) async fn list(
    State(app): State<Arc<App>>,
    q: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Checkpoints>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let limit = q.limit.unwrap_or(20);
    if !(1..=MAX_CHECKPOINTS).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit must be 1..{MAX_CHECKPOINTS}"
        )));
    }
    let rows = app
        .store
        .audit_checkpoints(limit)
        .await
        .map_err(ApiError::internal)?;
    let (min, max) = (
        rows.last().map_or(0, |c| c.tree_size),
        rows.first().map_or(0, |c| c.tree_size),
    );
    let cosigned = app
        .store
        .cosignatures(min, max)
        .await
        .map_err(ApiError::internal)?;
    let checkpoints: Vec<CheckpointBody> = rows
        .into_iter()
        .map(|row| {
            let size = row.tree_size;
            let mut body = CheckpointBody::from(row);
            body.cosignatures = cosigned
                .iter()
                .filter(|c| c.tree_size == size)
                .map(|c| CosignatureBody {
                    witness: c.witness.clone(),
                    time: mcp_shared::time::format(mcp_shared::time::from_unix_ms(
                        c.cosigned_at.saturating_mul(1000),
                    )),
                    line: c.line.clone(),
                })
                .collect();
            body
        })
        .collect();
    Ok(Json(Checkpoints {
        latest: checkpoints.first().cloned(),
        checkpoints,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProofQuery {
    /// The checkpoint's tree size (the newest when absent).
    size: Option<u64>,
}

pub(super) async fn inclusion(
    State(app): State<Arc<App>>,
    _op: Operator,
    Path(event_id): Path<String>,
    q: Result<Query<ProofQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<InclusionBody>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let seq = app
        .store
        .audit_seq_of(&event_id)
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::not_found(format!("no audit event `{event_id}`")))?;
    let cp = checkpoint(&app, q.size).await?;
    let leaf = (seq - 1).max(0) as u64;
    if leaf >= cp.tree_size {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::Conflict,
            format!(
                "event `{event_id}` (seq {seq}) is not in the checkpoint of tree size {}: the next checkpoint covers it",
                cp.tree_size
            ),
        ));
    }
    let proof = tree::inclusion(&app.store, cp.tree_size, leaf)
        .await
        .map_err(tree_error)?;
    let chain_hash = app
        .store
        .audit_chain_hashes(seq, 1)
        .await
        .map_err(ApiError::internal)?
        .into_iter()
        .next()
        .map(|(_, h)| h)
        .unwrap_or_default();
    Ok(Json(InclusionBody {
        event_id,
        seq,
        leaf_index: leaf,
        chain_hash,
        proof: hex_list(&proof),
        checkpoint: cp.into(),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConsistencyQuery {
    from: u64,
    /// The newest when absent.
    to: Option<u64>,
}

pub(super) async fn consistency(
    State(app): State<Arc<App>>,
    _op: Operator,
    q: Result<Query<ConsistencyQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<ConsistencyBody>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let from = checkpoint(&app, Some(q.from)).await?;
    let to = checkpoint(&app, q.to).await?;
    if from.tree_size > to.tree_size {
        return Err(ApiError::bad_request(format!(
            "from ({}) must not be past to ({})",
            from.tree_size, to.tree_size
        )));
    }
    let proof = tree::consistency(&app.store, to.tree_size, from.tree_size)
        .await
        .map_err(tree_error)?;
    Ok(Json(ConsistencyBody {
        from: from.into(),
        to: to.into(),
        proof: hex_list(&proof),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ChainQuery {
    after_seq: Option<i64>,
    limit: Option<i64>,
}

pub(super) async fn chain(
    State(app): State<Arc<App>>,
    _op: Operator,
    q: Result<Query<ChainQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<ChainPage>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let limit = q.limit.unwrap_or(1000);
    if !(1..=MAX_CHAIN_PAGE).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit must be 1..{MAX_CHAIN_PAGE}"
        )));
    }
    let rows = app
        .store
        .audit_chain_page(q.after_seq.unwrap_or(0), limit)
        .await
        .map_err(ApiError::internal)?;
    let next_after_seq = (rows.len() as i64 == limit)
        .then(|| rows.last().map(|r| r.0))
        .flatten();
    let events = rows
        .into_iter()
        .map(|(seq, json, prev_hash, hash)| ChainRow {
            seq,
            prev_hash,
            hash,
            // A row that is not JSON is served as its text, for the verifier to name.
            event: serde_json::from_str(&json).unwrap_or(Value::String(json)),
        })
        .collect();
    Ok(Json(ChainPage {
        events,
        next_after_seq,
    }))
}
