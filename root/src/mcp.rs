//! The MCP endpoint: rmcp's Streamable HTTP server with a hand-written [`ServerHandler`]
//! whose tool list is built per request from the lease, the contracts and policy.
//!
//! The bearer is checked by HTTP middleware before rmcp sees the request; the middleware puts
//! the resolved [`Principal`] into the request extensions, which rmcp hands to the handler in
//! `ctx.extensions` as `http::request::Parts`. Tools and resources are never listed or
//! answered without a lease.

use std::borrow::Cow;
use std::sync::Arc;

use mcp_shared::contract::SideEffectClass;
use mcp_shared::event::Surface;
// Logging (`logging/setLevel`) is deprecated by SEP-2577 but still part of the revisions we
// serve (2025-03-26 .. 2025-11-25), and clients call it.
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, Implementation, InitializeResult, ListPromptsResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ServerCapabilities,
    SetLevelRequestParams, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::actors::lease_manager::LeaseEntry;
use crate::app::{App, Principal};
use crate::call::{self, CallContext};
use crate::catalog::ContractEntry;

/// Tools per `tools/list` page.
pub const PAGE_SIZE: usize = 50;

/// URI scheme of descriptors served as resources.
pub const DESCRIPTOR_URI_PREFIX: &str = "descriptor://";

/// Protocol revisions served: the session-based ones and the stateless 2026-07-28.
pub const SUPPORTED_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

#[derive(Clone)]
pub struct RootMcp {
    app: Arc<App>,
}

impl RootMcp {
    pub fn new(app: Arc<App>) -> RootMcp {
        RootMcp { app }
    }
}

fn lease_of(ctx: &RequestContext<RoleServer>) -> Result<Arc<LeaseEntry>, ErrorData> {
    let parts = ctx.extensions.get::<http::request::Parts>();
    match parts.and_then(|p| p.extensions.get::<Principal>()) {
        Some(Principal::Lease(l)) => Ok(l.clone()),
        _ => Err(ErrorData::invalid_request(
            "this endpoint needs a lease bearer",
            None,
        )),
    }
}

fn header<'a>(ctx: &'a RequestContext<RoleServer>, name: &str) -> Option<&'a str> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.headers.get(name))
        .and_then(|v| v.to_str().ok())
}

/// The MCP tool for a contract; annotations come from the side-effect class.
pub fn tool_of(entry: &ContractEntry) -> Tool {
    let c = &entry.contract;
    let object = |v: &Value| Arc::new(v.as_object().cloned().unwrap_or_default());
    let annotations = ToolAnnotations::with_title(c.title.clone())
        .read_only(c.side_effect == SideEffectClass::Read)
        .destructive(c.side_effect == SideEffectClass::Destructive)
        .idempotent(c.side_effect == SideEffectClass::Read)
        .open_world(false);
    Tool::new(
        c.tool_id.clone(),
        c.summary.clone(),
        object(&c.input_schema),
    )
    .with_title(c.title.clone())
    .with_raw_output_schema(object(&c.output_schema))
    .with_annotations(annotations)
}

async fn visible(app: &App, lease: &LeaseEntry) -> Result<Vec<Arc<ContractEntry>>, ErrorData> {
    app.visible_tools(lease)
        .await
        .map_err(|e| ErrorData::internal_error(e, None))
}

fn parse_cursor(cursor: Option<&str>) -> Result<usize, ErrorData> {
    match cursor {
        None => Ok(0),
        Some(c) => c
            .strip_prefix("o:")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| ErrorData::invalid_params(format!("invalid cursor `{c}`"), None)),
    }
}

impl ServerHandler for RootMcp {
    fn get_info(&self) -> InitializeResult {
        #[allow(deprecated)]
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_prompts()
            .enable_logging()
            .enable_completions()
            .build();
        InitializeResult::new(caps)
            .with_server_info(
                Implementation::new("mcp-root", env!("CARGO_PKG_VERSION"))
                    .with_title("Root MCP gateway")
                    .with_description("Governed, audited tools for one zone"),
            )
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_instructions(
                "Root MCP gateway. The tools listed are those your session lease may call. Descriptive \
                 tools (sdk.*) answer from root's descriptor cache with freshness fields; every call is \
                 audited and its result's _meta carries event_id and trace_id.",
            )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(SUPPORTED_VERSIONS)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let lease = lease_of(&ctx)?;
        if let Some(sid) = header(&ctx, "mcp-session-id") {
            // Remember the peer so a change of this target's surface can be announced.
            self.app.mcp_peers.insert(
                sid.to_string(),
                (lease.lease().target_id.clone(), ctx.peer.clone()),
            );
        }
        let all = visible(&self.app, &lease).await?;
        let start = parse_cursor(request.as_ref().and_then(|r| r.cursor.as_deref()))?;
        if start > all.len() {
            return Err(ErrorData::invalid_params(
                "cursor is past the end of the list",
                None,
            ));
        }
        let end = (start + PAGE_SIZE).min(all.len());
        let mut result =
            ListToolsResult::with_all_items(all[start..end].iter().map(|e| tool_of(e)).collect());
        if end < all.len() {
            result.next_cursor = Some(format!("o:{end}"));
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let lease = lease_of(&ctx)?;
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let trace_id = call::trace_id_from(header(&ctx, "traceparent"));
        let new_ctx = || CallContext {
            surface: Surface::Mcp,
            lease: lease.clone(),
            trace_id: trace_id.clone(),
            request_id: ctx.id.to_string(),
            cancel: Some(ctx.ct.clone()),
        };
        let elicit = crate::elicit::applies(
            &self.app,
            &ctx,
            &lease.lease().target_id,
            &request.name,
            &arguments,
        )
        .await;
        let outcome = if elicit {
            crate::elicit::confirm_and_execute(&self.app, &ctx, new_ctx, &request.name, arguments)
                .await
        } else {
            call::call(&self.app, new_ctx(), &request.name, arguments).await
        };
        let r = outcome.response;
        let meta = json!({ "event_id": r.event_id, "trace_id": r.trace_id });
        if outcome.unknown_tool {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{}`", request.name),
                Some(meta),
            ));
        }
        let meta_obj = serde_json::from_value(meta).ok();
        let result = match (r.result, r.error) {
            (Some(value), _) => {
                // `CallToolResult::structured` would serialize the value once more for its own
                // text copy; build the result from our single serialization instead.
                let text = serde_json::to_string(&value).unwrap_or_default();
                let mut res = CallToolResult::success(vec![ContentBlock::text(text)]);
                res.structured_content = Some(value);
                res
            }
            (None, error) => {
                let body = json!({ "error": error });
                let text = serde_json::to_string(&body).unwrap_or_default();
                let mut res = CallToolResult::error(vec![ContentBlock::text(text)]);
                res.structured_content = Some(body);
                res
            }
        };
        Ok(result.with_meta(meta_obj).into())
    }

    fn get_tool(&self, _name: &str) -> Option<Tool> {
        // Visibility depends on the caller's lease, which this synchronous hook cannot see;
        // `call_tool` validates arguments and results itself.
        None
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        lease_of(&ctx)?;
        Ok(ListPromptsResult::with_all_items(Vec::new()))
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let lease = lease_of(&ctx)?;
        tracing::debug!(session = lease.session_id(), level = ?request.level, "client set its log level");
        Ok(())
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        lease_of(&ctx)?;
        Ok(CompleteResult::default())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let lease = lease_of(&ctx)?;
        parse_cursor(request.as_ref().and_then(|r| r.cursor.as_deref()))?;
        let readable = readable_descriptors(&self.app, &lease).await?;
        Ok(ListResourcesResult::with_all_items(
            readable
                .iter()
                .map(|d| {
                    Resource::new(
                        format!("{DESCRIPTOR_URI_PREFIX}{}", d.freshness.descriptor_id),
                        d.freshness.descriptor_id.clone(),
                    )
                    .with_title(d.title.clone())
                    .with_description(format!(
                        "{} descriptor ({})",
                        d.class, d.freshness.content_hash
                    ))
                    .with_mime_type("application/json")
                })
                .collect(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let lease = lease_of(&ctx)?;
        let readable = readable_descriptors(&self.app, &lease).await?;
        let id = request.uri.strip_prefix(DESCRIPTOR_URI_PREFIX);
        let Some(d) = id.and_then(|id| readable.iter().find(|d| d.freshness.descriptor_id == id))
        else {
            return Err(ErrorData::resource_not_found(
                format!("no readable resource `{}`", request.uri),
                Some(json!({ "uri": request.uri })),
            ));
        };
        let text = serde_json::to_string_pretty(&**d).unwrap_or_default();
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, request.uri).with_mime_type("application/json"),
        ])
        .into())
    }
}

/// Descriptors a lease may read as resources: those behind a tool it may call, plus those
/// no tool projects (public self-description such as the plane registry).
async fn readable_descriptors(
    app: &App,
    lease: &LeaseEntry,
) -> Result<Vec<Arc<mcp_shared::descriptor::Descriptor>>, ErrorData> {
    let visible = visible(app, lease).await?;
    app.readable_descriptors(Some(&visible))
        .await
        .map_err(|e| ErrorData::internal_error(e, None))
}

/// Sends `notifications/tools/list_changed` to every MCP session whose lease is bound to
/// `target_id`; sessions that are gone are forgotten.
pub fn notify_tools_changed(app: &App, target_id: &str) {
    let peers: Vec<(String, rmcp::Peer<RoleServer>)> = app
        .mcp_peers
        .iter()
        .filter(|e| e.value().0 == target_id)
        .map(|e| (e.key().clone(), e.value().1.clone()))
        .collect();
    for (sid, peer) in peers {
        let gone = peer.is_transport_closed();
        if gone {
            app.mcp_peers.remove(&sid);
            continue;
        }
        tokio::spawn(async move {
            if let Err(e) = peer.notify_tool_list_changed().await {
                tracing::debug!(session = %sid, error = %e, "could not announce a tool list change");
            }
        });
    }
}
