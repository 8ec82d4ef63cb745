//! Publishing a descriptor set: validated as a whole against the contracts, stored, then
//! served by the descriptor cache. A set that fails validation changes nothing; a set the
//! cache cannot take is removed from the store again. With replicas the whole publish runs
//! under the store's zone-wide lock, and the caller's `announce` (every live replica serves
//! the revision) runs before the lock is released, so two publishes through two replicas end
//! with the later revision served everywhere, never a mix.

use std::future::Future;
use std::sync::Arc;

use ractor::ActorRef;
use serde_json::Value;

use super::cache::Msg;
use super::{DescriptorSet, PublishError, SetSource};
use crate::catalog::ContractRegistry;
use crate::store::Store;

/// The descriptor cache did not take a set: its actor is gone or did not answer in time.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CacheUnavailable(ractor::RactorErr<Msg>);

impl From<CacheUnavailable> for PublishError {
    fn from(e: CacheUnavailable) -> PublishError {
        PublishError::Cache(Box::new(e))
    }
}

/// Serves `set` (already validated) from now on; `Ok(false)` when a newer published revision
/// is served already (and stays).
pub async fn replace(
    cache: &ActorRef<Msg>,
    set: Arc<DescriptorSet>,
) -> Result<bool, CacheUnavailable> {
    ractor::call_t!(cache, Msg::Replace, crate::actors::RPC_TIMEOUT_MS, set)
        .map_err(CacheUnavailable)
}

/// What a publish reads and writes.
pub struct Publish<'a> {
    pub store: &'a Store,
    pub contracts: &'a ContractRegistry,
    /// The skill catalog's URI scheme (descriptor sets carry the catalog).
    pub scheme: &'a str,
    pub cache: &'a ActorRef<Msg>,
    /// Replicas share the store: take the zone-wide publish lock.
    pub zone_wide: bool,
}

/// One publish at a time in this process, so the store's newest set is the one the cache
/// serves.
#[derive(Default)]
pub struct Publisher {
    one: tokio::sync::Mutex<()>,
}

impl Publisher {
    /// Publishes `items` as the new set; `announce(revision)` runs once this process serves
    /// it, before the zone-wide lock is released.
    pub async fn publish<F: Future<Output = ()>>(
        &self,
        to: Publish<'_>,
        items: Vec<(String, Value)>,
        announce: impl FnOnce(i64) -> F,
    ) -> Result<Arc<DescriptorSet>, PublishError> {
        let _one = self.one.lock().await;
        let (descriptors, catalog) = super::validate(items, to.contracts, to.scheme)?;
        let body = serde_json::to_string(&descriptors).map_err(PublishError::Encode)?;
        let hash = super::set_hash(&descriptors);
        let zone_lock = match to.zone_wide {
            true => Some(to.store.lock_descriptor_publish().await?),
            false => None,
        };
        let now = mcp_shared::time::now();
        let revision = to
            .store
            .put_descriptor_set(&hash, mcp_shared::time::unix_ms(now), &body)
            .await?;
        let set = Arc::new(super::assemble(
            descriptors,
            catalog,
            SetSource::Published,
            Some(revision),
            Some(mcp_shared::time::format(now)),
        ));
        match replace(to.cache, set.clone()).await {
            Ok(true) => {}
            // Only a newer revision is served instead, which the publish lock rules out.
            Ok(false) => {
                tracing::warn!(revision, "a newer descriptor set is already served here");
            }
            Err(e) => {
                if let Err(undo) = to.store.delete_descriptor_set(revision).await {
                    tracing::error!(revision, error = %undo, "could not withdraw a stored descriptor set the cache refused");
                }
                return Err(e.into());
            }
        }
        announce(revision).await;
        if let Some(lock) = zone_lock
            && let Err(e) = lock.release().await
        {
            tracing::warn!(error = %e, "releasing the descriptor publish lock failed; it ends with its connection");
        }
        Ok(set)
    }
}
