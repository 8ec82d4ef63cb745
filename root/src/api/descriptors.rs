//! Publishing a descriptor set (`POST /v1/root/mcp/descriptors`): validated as a whole,
//! stored, served here and then on every live replica before the answer; one audited
//! operator action.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use mcp_shared::error::ErrorCode;
use serde_json::{Value, json};

use crate::api::bodies::{Audited, CatalogSummary, DescriptorList, PublishRequest};
use crate::api::{ApiError, Operator};
use crate::app::App;
use crate::descriptors::{self, DescriptorSet, PublishError};

/// Serves `set` (already validated) from now on; `Ok(false)` when a newer published revision
/// is served already (and stays).
pub async fn replace(app: &App, set: Arc<DescriptorSet>) -> Result<bool, String> {
    ractor::call_t!(
        app.actors.descriptors.load(),
        crate::descriptors::cache::Msg::Replace,
        crate::actors::RPC_TIMEOUT_MS,
        set
    )
    .map_err(|e| format!("descriptor cache unavailable: {e}"))
}

/// One publish at a time in this process, so the store's newest set is the one the cache
/// serves.
static PUBLISH: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Validates `items` as a whole set, persists it and swaps it into the descriptor cache. A set
/// that fails validation changes nothing; a set the cache cannot take is removed from the
/// store again. With replicas, publishes of the whole zone run one at a time under the
/// store's publish lock (store → serve → every live replica serves it), so two publishes
/// through two replicas end with the later revision served everywhere, never a mix.
pub async fn publish(
    app: &App,
    items: Vec<(String, Value)>,
) -> Result<Arc<DescriptorSet>, PublishError> {
    let _one = PUBLISH.lock().await;
    let (descriptors, catalog) = descriptors::validate(
        items,
        &app.catalog.contracts,
        &app.config.skill_catalog.scheme,
    )?;
    let body =
        serde_json::to_string(&descriptors).map_err(|e| PublishError::Cache(e.to_string()))?;
    let hash = descriptors::set_hash(&descriptors);
    let zone_lock = match &app.zone {
        Some(_) => Some(app.store.lock_descriptor_publish().await?),
        None => None,
    };
    let now = mcp_shared::time::now();
    let revision = app
        .store
        .put_descriptor_set(&hash, mcp_shared::time::unix_ms(now), &body)
        .await?;
    let set = Arc::new(descriptors::assemble(
        descriptors,
        catalog,
        descriptors::SetSource::Published,
        Some(revision),
        Some(mcp_shared::time::format(now)),
    ));
    match replace(app, set.clone()).await {
        Ok(true) => {}
        // Only a newer revision is served instead, which the publish lock rules out.
        Ok(false) => {
            tracing::warn!(revision, "a newer descriptor set is already served here");
        }
        Err(e) => {
            if let Err(undo) = app.store.delete_descriptor_set(revision).await {
                tracing::error!(revision, error = %undo, "could not withdraw a stored descriptor set the cache refused");
            }
            return Err(PublishError::Cache(e));
        }
    }
    // Every live replica serves the new set before the publish returns.
    if let Some(zone) = &app.zone {
        zone.changed(
            crate::replica::kind::DESCRIPTORS,
            &revision.to_string(),
            true,
        )
        .await;
    }
    if let Some(lock) = zone_lock
        && let Err(e) = lock.release().await
    {
        tracing::warn!(error = %e, "releasing the descriptor publish lock failed; it ends with its connection");
    }
    Ok(set)
}

/// `POST /v1/root/mcp/descriptors` (operator): validate a whole set and serve it instead of
/// the current one; a refused set changes nothing (422 with the first reason).
pub(super) async fn publish_descriptors(
    State(app): State<Arc<App>>,
    op: Operator,
    body: Result<Json<PublishRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Audited<DescriptorList>>, ApiError> {
    let parsed = body.map(|Json(b)| b).map_err(|e| e.body_text());
    let request = match &parsed {
        Ok(b) => json!({ "descriptors": b.descriptors.len() }),
        Err(why) => json!({ "invalid_body": why }),
    };
    let asked = crate::api::audited::Asked {
        tool_id: "admin.descriptors.publish",
        target_id: None,
        adapter: Some("root.descriptor_cache".into()),
        request,
    };
    let (set, event_id) = crate::api::audited::audited(&app, &op, asked, async {
        let body = parsed.map_err(ApiError::bad_request)?;
        let items: Vec<(String, Value)> = body
            .descriptors
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                let name = body
                    .names
                    .get(i)
                    .filter(|n| n.len() <= 200)
                    .cloned()
                    .unwrap_or_else(|| format!("descriptors[{i}]"));
                (name, v)
            })
            .collect();
        let set = crate::api::descriptors::publish(&app, items)
            .await
            .map_err(|e| match e {
                crate::descriptors::PublishError::Invalid(e) => ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    ErrorCode::InvalidArguments,
                    format!("descriptor set refused, nothing changed: {e}"),
                ),
                e => ApiError::internal(e),
            })?;
        let summary = format!(
            "descriptor set revision {} ({} descriptors, {})",
            set.origin.revision.unwrap_or_default(),
            set.by_id.len(),
            set.origin.set_hash
        );
        Ok((set, summary))
    })
    .await?;
    let skill_catalog = set.catalog.as_ref().map(|c| CatalogSummary {
        ontology: c.ontology.uri.clone(),
        skills: c.skills.len(),
        manifest_sha256: c.ontology.meta.manifest_sha256.clone(),
    });
    Ok(Json(Audited {
        item: DescriptorList {
            set: set.origin.clone(),
            descriptors: set
                .by_id
                .values()
                .map(|d| super::catalog::summary(&app, d))
                .collect(),
            skill_catalog,
        },
        event_id,
    }))
}
