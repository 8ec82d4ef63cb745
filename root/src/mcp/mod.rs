//! The MCP endpoint: root's own Streamable HTTP transport (`transport/`) in front of a
//! hand-written rmcp [`ServerHandler`] whose tool list is built per request from the lease,
//! the contracts and policy; a write's confirmation on 2026-07-28 is `confirm`.
//!
//! The bearer is checked by HTTP middleware before rmcp sees the request; the middleware puts
//! the resolved [`Principal`] into the request extensions, which rmcp hands to the handler in
//! `ctx.extensions` as `http::request::Parts`. Tools and resources are never listed or
//! answered without a lease.
//!
//! Resources: descriptors (`descriptor://<id>`, with `resources/templates/list` for the
//! parameterised ones, `descriptor://<id><pointer>/{arg}`, the same answer as the tool with
//! that `select` projection) and the platform skill catalog (`<scheme>://platform/ontology`,
//! `<scheme>://platform/skills/<name>`); every descriptor answer carries its freshness
//! (`fresh`, `stale`, `expired`) in the text and in `_meta`. `resources/list` paginates.

pub(crate) mod bindings;
pub(crate) mod confirm;
pub mod error;
pub mod front;
pub(crate) mod kept;
pub(crate) mod tasks;
pub(crate) mod transport;

use std::borrow::Cow;
use std::sync::Arc;

use mcp_shared::contract::SideEffectClass;
use mcp_shared::event::Surface;
// Logging (`logging/setLevel`) is deprecated by SEP-2577 but still part of the revisions we
// serve (2025-03-26 .. 2025-11-25), and clients call it.
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CompleteRequestParams, CompleteResult, ContentBlock, CustomRequest, CustomResult,
    GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult, Implementation,
    InitializeResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, MetaObject, PaginatedRequestParams, ProgressNotificationParam,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, ServerCapabilities, SetLevelRequestParams, Tool,
    ToolAnnotations, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::app::{App, Principal};
use crate::call::{self, CallContext, elicitation};
use crate::catalog::ContractEntry;
use crate::leases::manager::LeaseEntry;

/// Tools per `tools/list` page.
pub(crate) const PAGE_SIZE: usize = 50;

/// URI scheme of descriptors served as resources.
pub(crate) const DESCRIPTOR_URI_PREFIX: &str = "descriptor://";

/// The `_meta` key of a descriptor resource's freshness (`freshness`, `expires_at`,
/// `content_hash`, `class`).
pub(crate) const DESCRIPTOR_META_KEY: &str = "root-mcp.local/descriptor";

/// Protocol revisions served: the session-based ones and the stateless 2026-07-28.
pub(crate) const SUPPORTED_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

#[derive(Clone)]
pub(crate) struct RootMcp {
    app: Arc<App>,
    /// The door's sessions: which lease opened each, and their peers.
    pub(crate) bindings: Arc<bindings::Bindings>,
    /// Descriptive answers the door writes as kept ([`kept`]).
    pub(crate) kept: Arc<kept::Kept>,
}

impl RootMcp {
    pub(crate) fn new(app: Arc<App>, bindings: Arc<bindings::Bindings>) -> RootMcp {
        RootMcp {
            app,
            bindings,
            kept: Default::default(),
        }
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

/// The request's W3C `traceparent`: from its `_meta` (where MCP carries trace context), else
/// from the HTTP header.
fn traceparent(ctx: &RequestContext<RoleServer>) -> Option<&str> {
    ctx.meta
        .0
        .get("traceparent")
        .and_then(Value::as_str)
        .or_else(|| header(ctx, "traceparent"))
}

fn header<'a>(ctx: &'a RequestContext<RoleServer>, name: &str) -> Option<&'a str> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.headers.get(name))
        .and_then(|v| v.to_str().ok())
}

/// The MCP tool for a contract; annotations come from the side-effect class.
pub(crate) fn tool_of(entry: &ContractEntry) -> Tool {
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
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
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
            .enable_tasks()
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
            self.bindings.peers.insert(
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
        let call = ToolCall {
            lease,
            request_id: ctx.id.to_string(),
            traceparent: traceparent(&ctx),
            cancel: ctx.ct.clone(),
        };
        answer_call(&self.app, call, request, &ctx, &self.kept).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let lease = lease_of(&ctx)?;
        let row = call::tasks::get(&self.app, &lease, &request.task_id)
            .await
            .map_err(tasks::task_error)?;
        Ok(tasks::detailed(&self.app, &row))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let lease = lease_of(&ctx)?;
        match call::tasks::cancel(&self.app, &lease, &request.task_id).await {
            // Cancellation is eventually consistent: a task that has just ended is acknowledged.
            Ok(_) | Err(call::tasks::TaskError::Ended(..)) => Ok(()),
            Err(e) => Err(tasks::task_error(e)),
        }
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let lease = lease_of(&ctx)?;
        // Root's tasks never ask for input (a write is confirmed before its task starts):
        // every response is to a key that is not outstanding, which the extension says to
        // ignore, once the task is known to be this lease's.
        call::tasks::get(&self.app, &lease, &request.task_id)
            .await
            .map_err(tasks::task_error)?;
        Ok(())
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

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        lease_of(&ctx)?;
        Err(ErrorData::invalid_params(
            format!("no prompt `{}` (this server offers none)", request.name),
            None,
        ))
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(crate::mcp::front::unmatched_request(
            &request.method,
            request.params.as_ref(),
        ))
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
        let start = parse_cursor(request.as_ref().and_then(|r| r.cursor.as_deref()))?;
        let view = resource_view(&self.app, &lease).await?;
        let now = self.app.clock.now();
        let mut all: Vec<Resource> = view
            .descriptors
            .iter()
            .map(|d| {
                let state = d.freshness.state_at(now);
                Resource::new(
                    format!("{DESCRIPTOR_URI_PREFIX}{}", d.freshness.descriptor_id),
                    d.freshness.descriptor_id.clone(),
                )
                .with_title(d.title.clone())
                .with_description(format!(
                    "{} descriptor, {} ({})",
                    d.class,
                    state.as_str(),
                    d.freshness.content_hash
                ))
                .with_mime_type("application/json")
                .with_meta(descriptor_meta(d, now))
            })
            .collect();
        if let Some(catalog) = &view.catalog {
            all.extend(catalog.resources().map(|r| {
                Resource::new(r.uri.clone(), r.name.clone())
                    .with_title(r.title.clone())
                    .with_description(r.description.clone())
                    .with_mime_type(r.meta.mime_type.clone())
                    .with_size(r.meta.size)
                    .with_meta(resource_meta(&r.meta))
            }));
        }
        if start > all.len() {
            return Err(ErrorData::invalid_params(
                "cursor is past the end of the list",
                None,
            ));
        }
        let page = self.app.config.limits.resources_page_size;
        let end = start.saturating_add(page).min(all.len());
        let mut result = ListResourcesResult::with_all_items(all[start..end].to_vec());
        if end < all.len() {
            result.next_cursor = Some(format!("o:{end}"));
        }
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let lease = lease_of(&ctx)?;
        if parse_cursor(request.as_ref().and_then(|r| r.cursor.as_deref()))? != 0 {
            return Err(ErrorData::invalid_params(
                "cursor is past the end of the list",
                None,
            ));
        }
        let view = resource_view(&self.app, &lease).await?;
        let mut templates = vec![
            ResourceTemplate::new(
                format!("{DESCRIPTOR_URI_PREFIX}{{descriptor_id}}"),
                "descriptor",
            )
            .with_title("A root-cached descriptor")
            .with_description("One descriptor with its freshness header, by descriptor_id")
            .with_mime_type("application/json"),
        ];
        for c in &view.selectable {
            let Some((p, sel)) = c
                .contract
                .descriptor
                .as_ref()
                .and_then(|p| p.select.as_ref().map(|s| (p, s)))
            else {
                continue;
            };
            templates.push(
                ResourceTemplate::new(
                    format!(
                        "{DESCRIPTOR_URI_PREFIX}{}{}/{{{}}}",
                        p.descriptor_id, p.pointer, sel.argument
                    ),
                    c.contract.tool_id.clone(),
                )
                .with_title(c.contract.title.clone())
                .with_description(format!(
                    "{} (the same answer as the tool `{}`)",
                    c.contract.summary, c.contract.tool_id
                ))
                .with_mime_type("application/json"),
            );
        }
        if view.catalog.is_some() {
            let scheme = &self.app.config.skill_catalog.scheme;
            templates.push(
                ResourceTemplate::new(
                    format!("{}{{name}}", crate::skill_catalog::skill_prefix(scheme)),
                    "platform_skill",
                )
                .with_title("A platform skill")
                .with_description(format!(
                    "One SKILL.md of the platform skill catalog; {} lists them all",
                    crate::skill_catalog::ontology_uri(scheme)
                ))
                .with_mime_type(crate::skill_catalog::SKILL_MIME),
            );
        }
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let lease = lease_of(&ctx)?;
        let view = resource_view(&self.app, &lease).await?;
        let now = self.app.clock.now();
        let uri = request.uri.clone();
        if let Some(r) = view.catalog.as_ref().and_then(|c| c.get(&uri)) {
            return Ok(ReadResourceResult::new(vec![
                ResourceContents::text(r.text.clone(), uri)
                    .with_mime_type(r.meta.mime_type.clone())
                    .with_meta(resource_meta(&r.meta)),
            ])
            .into());
        }
        let not_found = || {
            ErrorData::resource_not_found(
                format!("no readable resource `{uri}`"),
                Some(json!({ "uri": uri })),
            )
        };
        let path = uri
            .strip_prefix(DESCRIPTOR_URI_PREFIX)
            .ok_or_else(not_found)?;
        let (id, rest) = path.split_once('/').unwrap_or((path, ""));
        let d = view
            .descriptors
            .iter()
            .find(|d| d.freshness.descriptor_id == id)
            .ok_or_else(not_found)?;
        let body = if rest.is_empty() {
            let mut v = serde_json::to_value(&**d).unwrap_or_default();
            if let (Value::Object(m), Value::Object(extra)) =
                (&mut v, crate::descriptors::served_state(d, now))
            {
                m.extend(extra);
            }
            v
        } else {
            // A parameterised read: `descriptor://<id><pointer>/<value>`, as a visible tool
            // with a `select` projection would answer it.
            let rest = format!("/{rest}");
            view.selectable
                .iter()
                .find_map(|c| {
                    let p = c.contract.descriptor.as_ref()?;
                    let sel = p.select.as_ref()?;
                    if p.descriptor_id != id {
                        return None;
                    }
                    let value = rest.strip_prefix(&p.pointer)?.strip_prefix('/')?;
                    if value.is_empty() || value.contains('/') {
                        return None;
                    }
                    let item = d
                        .content
                        .pointer(&p.pointer)?
                        .as_array()?
                        .iter()
                        .find(|i| i.get(&sel.key).and_then(Value::as_str) == Some(value))?;
                    let state = d.freshness.state_at(now);
                    Some(json!({
                        "data": item,
                        "descriptor": d.freshness,
                        "stale": state != mcp_shared::descriptor::FreshnessState::Fresh,
                        "freshness": state,
                    }))
                })
                .ok_or_else(not_found)?
        };
        let text = serde_json::to_string_pretty(&body).unwrap_or_default();
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, request.uri)
                .with_mime_type("application/json")
                .with_meta(descriptor_meta(d, now)),
        ])
        .into())
    }
}

/// What a lease may read as resources: the descriptors behind tools it may call plus those
/// no tool projects (public self-description such as the plane registry), the visible tools
/// with `select` projections (the parameterised descriptors), and the platform skill catalog,
/// which any lease may read (it is the gateway's public guidance for agents, like the plane
/// registry; the ADR requires only an authenticated client).
struct ResourceView {
    descriptors: Vec<Arc<mcp_shared::descriptor::Descriptor>>,
    selectable: Vec<Arc<ContractEntry>>,
    catalog: Option<Arc<crate::skill_catalog::SkillCatalog>>,
}

async fn resource_view(app: &App, lease: &LeaseEntry) -> Result<ResourceView, ErrorData> {
    let visible = visible(app, lease).await?;
    let set = app.descriptors.snapshot();
    let descriptors = app.readable_in(&set, Some(&visible));
    let selectable = visible
        .into_iter()
        .filter(|c| {
            c.contract
                .descriptor
                .as_ref()
                .is_some_and(|p| p.select.is_some())
        })
        .collect();
    Ok(ResourceView {
        descriptors,
        selectable,
        catalog: set.catalog.clone(),
    })
}

/// `_meta` of a descriptor resource: its freshness now, when it expires, its hash and class.
fn descriptor_meta(
    d: &mcp_shared::descriptor::Descriptor,
    now: time::OffsetDateTime,
) -> MetaObject {
    let mut state = crate::descriptors::served_state(d, now);
    state["content_hash"] = json!(d.freshness.content_hash);
    state["class"] = json!(d.class);
    let mut m = serde_json::Map::new();
    m.insert(DESCRIPTOR_META_KEY.to_string(), state);
    MetaObject(m)
}

/// What a `tools/call` needs besides its params: the caller's lease, the request's id (the
/// event's `request_id`), its W3C `traceparent` and its cancellation.
pub(crate) struct ToolCall<'a> {
    pub(crate) lease: Arc<LeaseEntry>,
    pub(crate) request_id: String,
    pub(crate) traceparent: Option<&'a str>,
    pub(crate) cancel: tokio_util::sync::CancellationToken,
}

/// Answers one `tools/call`: the governed call (or, for a write that the client can confirm,
/// elicitation first, asking through the request's peer; or a task, for a client that takes
/// one) and its MCP answer.
async fn answer_call(
    app: &Arc<App>,
    call: ToolCall<'_>,
    request: CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
    kept: &kept::Kept,
) -> Result<CallToolResponse, ErrorData> {
    let ToolCall {
        lease,
        request_id,
        traceparent,
        cancel,
    } = call;
    let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
    let trace = call::trace(traceparent);
    let trace_id = trace.id.clone();
    // A retry that answers a question root asked (multi-round-trip requests).
    let confirmation = match request.request_state.as_deref() {
        Some(state) => match confirm::retry(app, &lease, &request, &arguments, state) {
            confirm::Retry::AskAgain(question) => return Ok(question.into()),
            confirm::Retry::Answered(answer) => Some(answer),
        },
        None => None,
    };
    // Only a call routed to a hub reports progress: no sink (and no loop) for the others.
    let progress = ctx
        .meta
        .get_progress_token()
        .filter(|_| reports_progress(app, &request.name))
        .map(|token| progress_to_client(app, ctx.peer.clone(), token));
    let new_ctx = || CallContext {
        surface: Surface::Mcp,
        lease: lease.clone(),
        trace_id: trace_id.clone(),
        span: trace.span.clone(),
        request_id: request_id.clone(),
        cancel: Some(cancel.clone()),
        operator: None,
        confirmation: confirmation.clone(),
        progress: progress.clone(),
        resumed: false,
    };
    let tool_id = &request.name;
    let modern = ctx
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
    let unconfirmed = confirmation.is_none();
    let outcome = if unconfirmed
        && modern
        && elicitation::applies(
            app,
            confirm::declares_form_elicitation(ctx),
            &lease,
            tool_id,
            &arguments,
        )
        .await
    {
        match confirm::ask(app, new_ctx, tool_id, arguments).await {
            Ok(question) => return Ok(question.into()),
            Err(outcome) => outcome,
        }
    } else if unconfirmed
        && !modern
        && elicitation::applies(
            app,
            elicitation::session_has_form(ctx),
            &lease,
            tool_id,
            &arguments,
        )
        .await
    {
        elicitation::confirm_and_execute(app, ctx, new_ctx, tool_id, arguments).await
    } else if tasks::wanted(app, ctx, tool_id, &arguments) {
        return tasks::create(app, new_ctx(), tool_id, arguments).await;
    } else {
        call::call_keeping_answer(app, new_ctx(), tool_id, arguments).await
    };
    answer(outcome, tool_id, Some(kept))
}

/// Whether a call of `tool_id` can report progress: it is routed to a hub, or runs on a
/// fleet.
fn reports_progress(app: &App, tool_id: &str) -> bool {
    app.catalog.contracts.get(tool_id).is_some_and(|e| {
        e.contract.fleet
            || (e.contract.routing != mcp_shared::contract::RoutingClass::DescriptiveCached
                && e.contract.executor.is_none())
    })
}

/// A call's progress as `notifications/progress` to the client that gave `token` (its
/// messages redacted by root), in order, from a background loop that ends with the call.
fn progress_to_client(
    app: &Arc<App>,
    peer: rmcp::Peer<RoleServer>,
    token: rmcp::model::ProgressToken,
) -> crate::hubs::router::ProgressSink {
    let (sink, mut reports) = call::progress_channel();
    let app = app.clone();
    tokio::spawn(async move {
        while let Some(p) = reports.recv().await {
            let param = progress_param(token.clone(), call::redacted(&app, p), None);
            if peer.notify_progress(param).await.is_err() {
                return;
            }
        }
    });
    sink
}

/// The `notifications/progress` parameters of `p` for `token`, `meta` riding along.
pub(crate) fn progress_param(
    token: rmcp::model::ProgressToken,
    p: crate::hubs::router::Progress,
    meta: Option<rmcp::model::NotificationMetaObject>,
) -> ProgressNotificationParam {
    let mut param = ProgressNotificationParam::new(token, p.progress);
    param.total = p.total;
    param.message = p.message;
    param.meta = meta;
    param
}

/// A governed call's outcome as MCP answers it: a tool result, or a protocol error for an
/// unknown tool and for a call that left no audit event.
pub(crate) fn tool_answer(
    outcome: call::Outcome,
    tool_id: &str,
) -> Result<CallToolResponse, ErrorData> {
    answer(outcome, tool_id, None)
}

/// [`tool_answer`], a kept descriptive answer staged for the door to write when `kept` is
/// given (the direct answer to a `tools/call`, which the door writes at once).
fn answer(
    outcome: call::Outcome,
    tool_id: &str,
    kept: Option<&kept::Kept>,
) -> Result<CallToolResponse, ErrorData> {
    if let Some(e) = outcome.unaudited_error() {
        // No event, so no tool result: a server error whose data names the code.
        return Err(ErrorData::internal_error(
            e.message.clone(),
            Some(
                json!({ "code": e.code, "retryable": e.retryable, "trace_id": outcome.response.trace_id }),
            ),
        ));
    }
    let r = outcome.response;
    let meta = meta_of(&r);
    if outcome.unknown_tool {
        return Err(ErrorData::invalid_params(
            format!("unknown tool `{tool_id}`"),
            Some(meta),
        ));
    }
    if let Some(answer) = outcome.kept {
        let meta_obj: Option<MetaObject> = serde_json::from_value(meta).ok();
        let result = match kept {
            Some(kept) => kept.stage(answer),
            None => success_result(answer.value.clone(), String::from(&*answer.text)),
        };
        return Ok(result.with_meta(meta_obj).into());
    }
    Ok(tool_result(r).into())
}

/// The `_meta` of a governed call's MCP answer: its event, its trace, and what root
/// redacted from the answer (the structured content is the tool's own typed result, so the
/// summary rides beside it).
fn meta_of(r: &mcp_shared::error::ToolResponse) -> Value {
    json!({ "event_id": r.event_id, "trace_id": r.trace_id, "redactions": r.redactions })
}

/// A governed call's response as an MCP tool result: its value, or its error with
/// `isError`; `_meta` names the call's event and trace, and what was redacted.
pub(crate) fn tool_result(r: mcp_shared::error::ToolResponse) -> CallToolResult {
    let meta = meta_of(&r);
    let meta_obj: Option<MetaObject> = serde_json::from_value(meta).ok();
    let result = match (r.result, r.error) {
        (Some(value), _) => {
            let text = serde_json::to_string(&value).unwrap_or_default();
            success_result(value, text)
        }
        (None, error) => {
            let body = json!({ "error": error });
            let text = serde_json::to_string(&body).unwrap_or_default();
            let mut res = CallToolResult::error(vec![ContentBlock::text(text)]);
            res.structured_content = Some(body);
            res
        }
    };
    result.with_meta(meta_obj)
}

/// A successful tool result as MCP carries it: the structured value and, as the
/// specification asks of a tool returning structured content, its JSON text as text content.
fn success_result(value: Value, text: String) -> CallToolResult {
    let mut res = CallToolResult::success(vec![ContentBlock::text(text)]);
    res.structured_content = Some(value);
    res
}

/// A skill's catalog metadata as an MCP `_meta` object (under `skill_catalog::META_KEY`).
fn resource_meta(meta: &mcp_shared::skill_catalog::ResourceMeta) -> rmcp::model::MetaObject {
    let mut m = serde_json::Map::new();
    m.insert(
        mcp_shared::skill_catalog::META_KEY.to_string(),
        serde_json::json!(meta),
    );
    rmcp::model::MetaObject(m)
}
