//! `root.evidence.*`: the ProfileOps reads answered from root while the lease's target is
//! offline (a contract's `offline`), from the evidence its hub published (`hubs::evidence`).
//!
//! Each answer has the shape the hub's own would have, and says where it came from:
//! `evidence.source` "root", `as_of` (the last moment root's copy was known complete: the
//! hub's last batch, or the end of its last connection) and `age_seconds`. A target root
//! holds no evidence from (a hub of an earlier build, or one that never connected since)
//! stays `target_offline`. An artifact root keeps (up to 256 KiB, checked against its
//! SHA-256 when it arrived) is served inline or by chunks as the hub would; a larger one is
//! answered with where it is (`delivery` "on_hub", its size and SHA-256).

use base64::Engine;
use mcp_shared::error::{ErrorCode, ToolError};
use mcp_shared::profiling::EVIDENCE_CONTENT_MAX_BYTES;
use mcp_shared::time::{format, from_unix_ms, now, unix_ms};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::input::{arg_str, internal};
use crate::app::App;
use crate::call::context::CallContext;
use crate::store::{EVIDENCE_KEEP, EvidenceRow};
use mcp_shared::protocol::CallBody;

/// Samples `get_session` shows (the newest), as the hub does.
const RECENT_SAMPLES: usize = 60;
/// Default `limit` of the list reads, as the hub's.
const DEFAULT_LIMIT: i64 = 50;

/// Runs the offline adapter `name` (one of [`crate::catalog::ROOT_OFFLINE_EXECUTORS`]).
pub(crate) async fn run(
    app: &App,
    ctx: &CallContext,
    name: &str,
    input: &CallBody,
) -> Result<Value, ToolError> {
    let target = ctx.lease.lease().target_id.clone();
    let held = Held::of(app, &target).await?;
    match name {
        "root.evidence.list_sessions" => {
            let state = arg_str(input, "state");
            let rows = held.list("session", input, state.is_some()).await?;
            let sessions: Vec<Value> = rows
                .into_iter()
                .map(|r| r.record)
                .filter(|s| state.is_none_or(|st| s["state"] == st))
                .take(limit(input))
                .collect();
            Ok(held.answer(json!({ "sessions": sessions })))
        }
        "root.evidence.get_session" => held.session(arg_str(input, "session_id")).await,
        "root.evidence.list_incidents" => {
            let rows = held.list("incident", input, false).await?;
            let incidents: Vec<Value> = rows.into_iter().map(|r| r.record).collect();
            Ok(held.answer(json!({ "incidents": incidents })))
        }
        "root.evidence.list_artifacts" => {
            let rows = held.list("artifact", input, false).await?;
            let artifacts: Vec<Value> = rows.into_iter().map(|r| r.record).collect();
            Ok(held.answer(json!({ "artifacts": artifacts })))
        }
        "root.evidence.get_artifact" => held.artifact(input).await,
        other => Err(ToolError::new(
            ErrorCode::Internal,
            format!("no offline adapter `{other}`"),
        )),
    }
}

fn limit(input: &CallBody) -> usize {
    input
        .arguments
        .get("limit")
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_LIMIT)
        .clamp(1, EVIDENCE_KEEP) as usize
}

/// The evidence root holds of one target, and since when it is known complete.
struct Held<'a> {
    app: &'a App,
    target_id: String,
    synced_at_ms: i64,
}

impl<'a> Held<'a> {
    async fn of(app: &'a App, target_id: &str) -> Result<Held<'a>, ToolError> {
        let cursor = app
            .store
            .evidence_cursor(target_id)
            .await
            .map_err(|e| internal("the evidence root holds", e))?
            .ok_or_else(|| {
                ToolError::new(
                    ErrorCode::TargetOffline,
                    format!(
                        "target `{target_id}` is not connected, and root holds no evidence its hub published (a hub that publishes evidence sends it when it connects)"
                    ),
                )
            })?;
        Ok(Held {
            app,
            target_id: target_id.to_owned(),
            synced_at_ms: cursor.synced_at_ms,
        })
    }

    /// `answer` with where it came from and how old it is.
    fn answer(&self, mut answer: Value) -> Value {
        let age_ms = (unix_ms(now()) - self.synced_at_ms).max(0);
        answer["evidence"] = json!({
            "source": "root",
            "as_of": format(from_unix_ms(self.synced_at_ms)),
            "age_seconds": age_ms / 1000,
        });
        answer
    }

    /// Records of `kind`, newest first: `limit` of them, or all kept when the caller filters
    /// further.
    async fn list(
        &self,
        kind: &str,
        input: &CallBody,
        all: bool,
    ) -> Result<Vec<EvidenceRow>, ToolError> {
        let n = if all {
            EVIDENCE_KEEP
        } else {
            limit(input) as i64
        };
        self.rows(kind, arg_str(input, "service"), None, n).await
    }

    async fn rows(
        &self,
        kind: &str,
        service: Option<&str>,
        id: Option<&str>,
        n: i64,
    ) -> Result<Vec<EvidenceRow>, ToolError> {
        self.app
            .store
            .list_evidence(&self.target_id, kind, service, id, n)
            .await
            .map_err(|e| internal("the evidence root holds", e))
    }

    async fn one(&self, kind: &str, what: &str, id: &str) -> Result<EvidenceRow, ToolError> {
        self.rows(kind, None, Some(id), 1)
            .await?
            .pop()
            .ok_or_else(|| {
                ToolError::new(
                    ErrorCode::NotFound,
                    format!(
                        "no {what} `{id}` in the evidence root holds for `{}` (its hub is offline; root has what it published until {})",
                        self.target_id,
                        format(from_unix_ms(self.synced_at_ms))
                    ),
                )
            })
    }

    /// `get_session`: the session, and its newest samples from its artifact when root keeps
    /// it.
    async fn session(&self, id: Option<&str>) -> Result<Value, ToolError> {
        let id = id.unwrap_or_default();
        let session = self.one("session", "profiling session", id).await?.record;
        let mut recent = Vec::new();
        if let Some(artifact_id) = session["artifact_id"].as_str()
            && let Some(row) = self
                .rows("artifact", None, Some(artifact_id), 1)
                .await?
                .pop()
            && let Some(content) = row.content
        {
            let artifact: Value = serde_json::from_str(&content)
                .map_err(|e| internal("a kept artifact", format!("not JSON: {e}")))?;
            if let Some(samples) = artifact["samples"].as_array() {
                recent = samples[samples.len().saturating_sub(RECENT_SAMPLES)..].to_vec();
            }
        }
        Ok(self.answer(json!({ "session": session, "recent_samples": recent })))
    }

    /// `get_artifact`: inline, or the chunk asked for, when root keeps the bytes; otherwise
    /// where the artifact is.
    async fn artifact(&self, input: &CallBody) -> Result<Value, ToolError> {
        let id = arg_str(input, "artifact_id").unwrap_or_default();
        let row = self.one("artifact", "artifact", id).await?;
        let meta = &row.record;
        let (size, sha256) = (meta["size_bytes"].clone(), meta["sha256"].clone());
        let Some(content) = row.content else {
            return Ok(self.answer(json!({
                "artifact_id": id,
                "delivery": "on_hub",
                "size_bytes": size,
                "sha256": sha256,
                "detail": format!(
                    "artifact `{id}` ({size} bytes) is kept only on the hub (root keeps artifacts up to {EVIDENCE_CONTENT_MAX_BYTES} bytes); call hub.memory.get_artifact again once `{}` is connected",
                    self.target_id
                ),
            })));
        };
        let offset = input.arguments.get("offset").and_then(Value::as_u64);
        let length = input.arguments.get("length").and_then(Value::as_u64);
        if offset.is_none() && length.is_none() {
            let artifact: Value = serde_json::from_str(&content)
                .map_err(|e| internal("a kept artifact", format!("not JSON: {e}")))?;
            return Ok(self.answer(json!({
                "artifact_id": id,
                "delivery": "inline",
                "size_bytes": size,
                "sha256": sha256,
                "artifact": artifact,
            })));
        }
        let bytes = content.as_bytes();
        let (offset, total) = (offset.unwrap_or(0), bytes.len() as u64);
        if offset >= total {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                format!("offset {offset} is past the end of artifact `{id}` ({total} bytes)"),
            ));
        }
        let length = length.unwrap_or(EVIDENCE_CONTENT_MAX_BYTES);
        if length == 0 || length > EVIDENCE_CONTENT_MAX_BYTES {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                format!("length must be between 1 and the chunk size {EVIDENCE_CONTENT_MAX_BYTES}"),
            ));
        }
        let end = offset.saturating_add(length).min(total);
        let chunk = &bytes[offset as usize..end as usize];
        Ok(self.answer(json!({
            "artifact_id": id,
            "delivery": "chunk",
            "size_bytes": size,
            "sha256": sha256,
            "offset": offset,
            "length": end - offset,
            "chunk_sha256": hex::encode(Sha256::digest(chunk)),
            "data_base64": base64::engine::general_purpose::STANDARD.encode(chunk),
            "eof": end >= total,
        })))
    }
}
