//! Publishing a descriptor set (`POST /v1/root/mcp/descriptors`): validated as a whole,
//! stored, served here and then on every live replica before the answer.

use std::sync::Arc;

use serde_json::Value;

use crate::app::App;
use crate::descriptors::{self, DescriptorSet, PublishError, cache};

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
    match cache::replace(&app.actors.descriptors.load(), set.clone()).await {
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
