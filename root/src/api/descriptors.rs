//! `POST /v1/root/mcp/descriptors`: an operator publishes a descriptor set (validated as a
//! whole, stored, served here and then on every live replica before the answer; see
//! `descriptors::publish`), one audited operator action.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use mcp_shared::error::ErrorCode;
use serde_json::{Value, json};

use crate::api::bodies::{Audited, CatalogSummary, DescriptorList, PublishRequest};
use crate::api::error::ApiError;
use crate::api::principal::Operator;
use crate::app::App;
use crate::descriptors::PublishError;
use crate::descriptors::publish::Publish;

/// `POST /v1/root/mcp/descriptors` (operator): validate a whole set and serve it instead of
/// the current one; a refused set changes nothing (422 with the first reason).
pub(super) async fn publish_descriptors(
    State(app): State<Arc<App>>,
    op: Operator,
    body: crate::api::audited::ActionBody<PublishRequest>,
) -> Result<Json<Audited<DescriptorList>>, ApiError> {
    let asked = crate::ops::audited::Asked {
        tool_id: "admin.descriptors.publish",
        target_id: None,
        adapter: Some("root.descriptor_cache".into()),
        request: body.request(json!({}), |b| json!({ "descriptors": b.descriptors.len() })),
    };
    let (set, event_id) = crate::api::audited::audited(&app, &op, asked, async {
        let body = body.parsed()?;
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
        let set = publish(&app, items).await.map_err(|e| match e {
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

/// Publishes `items` through this root's publisher; with replicas, every live one serves the
/// new revision before this returns.
async fn publish(
    app: &App,
    items: Vec<(String, Value)>,
) -> Result<Arc<crate::descriptors::DescriptorSet>, PublishError> {
    let cache = app.actors.descriptors.load();
    let to = Publish {
        store: &app.store,
        contracts: &app.catalog.contracts,
        scheme: &app.config.skill_catalog.scheme,
        cache: &cache,
        zone_wide: app.zone.is_some(),
    };
    app.publisher
        .publish(to, items, |revision| async move {
            if let Some(zone) = &app.zone {
                zone.changed(
                    crate::replica::ChangeKind::Descriptors,
                    &revision.to_string(),
                    true,
                )
                .await;
            }
        })
        .await
}
