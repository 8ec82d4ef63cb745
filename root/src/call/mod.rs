//! The governed call path: one function shared by MCP `tools/call` and REST `/call`, so both
//! get the same policy, validation, limits, timeouts and audit.
//!
//! Order: resolve contract → policy decision → argument validation → concurrency slots →
//! answer (a descriptive tool: its descriptor set's kept answer, projected and checked
//! against the output schema once; an operational one: executed on root or routed, under the
//! tool's timeout, then output validation) → durable audit event → normalized response.

pub(crate) mod claims;
pub(crate) mod context;
mod descriptive;
pub(crate) mod dispatch;
pub(crate) mod elicitation;
pub(crate) mod executors;
mod failure;
pub(crate) mod limits;
pub(crate) mod rates;
pub(crate) mod route;
pub(crate) mod running;
mod schema;
pub(crate) mod tasks;
pub(crate) mod writes;

pub(crate) use context::{CallContext, trace};
use descriptive::descriptive_answer;
use dispatch::dispatch;
use failure::internal;
use mcp_shared::protocol::CallBody;
pub(crate) use route::{progress_channel, redacted};
use schema::validate;

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_shared::contract::RoutingClass;
use mcp_shared::error::{ErrorCode, ToolError, ToolResponse};
use mcp_shared::event::{Actor, Decision, EventStatus, OperationalEvent, PolicyDecision};
use mcp_shared::time::now;
use serde_json::{Value, json};
use tracing::Instrument;

use crate::app::App;
use crate::catalog::ContractEntry;
use crate::policy;

/// The outcome plus whether the tool id was unknown (MCP answers that as a protocol error).
pub(crate) struct Outcome {
    pub(crate) response: ToolResponse,
    pub(crate) unknown_tool: bool,
    /// No event records this call: it was refused because the audit trail cannot be written,
    /// or its own event could not be committed. The response's error says so
    /// (`audit_unavailable`) and its `event_id` names no stored event; REST answers 503 and MCP
    /// a JSON-RPC error instead of a tool result.
    pub(crate) unaudited: bool,
    /// Set by [`call_keeping_answer`] only: the descriptive answer its descriptor set keeps,
    /// which is then this call's result (and `response.result` is `None`), so an MCP answer
    /// can use the JSON text the set serialized once instead of serializing the value again.
    pub(crate) kept: Option<Arc<crate::descriptors::DescriptiveAnswer>>,
}

impl Outcome {
    /// The outcome with a kept descriptive answer copied into `response.result`.
    pub(crate) fn with_result(mut self) -> Outcome {
        if let Some(kept) = self.kept.take() {
            self.response.result = Some(kept.value.clone());
        }
        self
    }

    /// The `audit_unavailable` error of a call that left no event.
    pub(crate) fn unaudited_error(&self) -> Option<&ToolError> {
        if self.unaudited {
            self.response.error.as_ref()
        } else {
            None
        }
    }
}

/// A governed call: its outcome with the result in `response.result`.
pub(crate) async fn call(app: &App, ctx: CallContext, tool_id: &str, arguments: Value) -> Outcome {
    call_keeping_answer(app, ctx, tool_id, arguments)
        .await
        .with_result()
}

/// [`call`], except that a descriptive answer stays in [`Outcome::kept`] (not copied into
/// `response.result`).
pub(crate) async fn call_keeping_answer(
    app: &App,
    ctx: CallContext,
    tool_id: &str,
    arguments: Value,
) -> Outcome {
    match admit(app, ctx, tool_id, arguments).await {
        Admission::Admitted(call) => call.run(app).await,
        Admission::Refused(outcome) => *outcome,
    }
}

/// A call's governed checks: what [`admit`] decided.
pub(crate) enum Admission {
    /// Every check passed; [`Admitted::run`] answers it.
    Admitted(Box<Admitted>),
    /// Refused (unknown tool, policy, arguments, limits, audit unavailable): its outcome, with
    /// its event committed.
    Refused(Box<Outcome>),
}

/// A call that passed its governed checks (contract, policy, arguments, concurrency slots,
/// which it holds) and has not run yet. A task runs it later, in the background.
pub(crate) struct Admitted {
    ctx: CallContext,
    entry: Arc<ContractEntry>,
    arguments: Value,
    event: OperationalEvent,
    permits: Option<crate::call::limits::Permits>,
    started: Instant,
}

impl Admitted {
    /// The call's event as it will be committed unless it runs to its end here: its id,
    /// actor, tool and decision, with the redacted request.
    pub(crate) fn pending_event(&self, app: &App) -> OperationalEvent {
        let mut event = self.event.clone();
        record_request(
            app,
            Some(&self.entry),
            &self.event.tool_id,
            self.arguments.clone(),
            &mut event,
        );
        event
    }

    /// Refuses the admitted call after all (`error`), committing its event.
    pub(crate) async fn refuse(self, app: &App, error: ToolError) -> Outcome {
        self.finish(app, Err(error), None).await
    }

    /// Runs the admitted call and commits its event (in its span: a task's runs detached from
    /// the request that admitted it).
    pub(crate) async fn run(self, app: &App) -> Outcome {
        let span = self.ctx.span.clone();
        self.run_in_span(app).instrument(span).await
    }

    async fn run_in_span(mut self, app: &App) -> Outcome {
        // Counted as running until its event is handed to the audit writer (group commit).
        let running = app.audit.running.enter();
        let result = answer(
            app,
            &self.ctx,
            &self.entry,
            &self.arguments,
            &mut self.event,
        )
        .await;
        self.finish(app, result, Some(running)).await
    }

    async fn finish(
        self,
        app: &App,
        result: Result<Answer, ToolError>,
        running: Option<crate::audit::writer::RunningGuard>,
    ) -> Outcome {
        let call = Finished {
            ctx: self.ctx,
            entry: Some(self.entry),
            arguments: self.arguments,
            result,
            event: self.event,
            permits: self.permits,
            started: self.started,
            unknown_tool: false,
        };
        call.commit(app, running).await
    }
}

/// The governed checks of one call, in order: audit health, contract, policy, arguments,
/// concurrency slots. A refusal is committed as its event here.
/// They run in the call's span (whichever path admits it: a request, or a task's creation).
pub(crate) async fn admit(
    app: &App,
    ctx: CallContext,
    tool_id: &str,
    arguments: Value,
) -> Admission {
    let span = ctx.span.clone();
    span.record("tool", tool_id);
    admit_in_span(app, ctx, tool_id, arguments)
        .instrument(span)
        .await
}

async fn admit_in_span(app: &App, ctx: CallContext, tool_id: &str, arguments: Value) -> Admission {
    // Nothing starts while its event could not be written (see `audit::health`).
    if !app.audit.health.is_available() {
        return Admission::Refused(Box::new(audit_unavailable(app, ctx, tool_id)));
    }
    let started = Instant::now();
    let mut event = new_event(&ctx, tool_id, now());
    let Some(entry) = app.catalog.contracts.get(tool_id).cloned() else {
        let (result, unknown_tool) = uncontracted(app, tool_id, &mut event);
        let call = Finished {
            ctx,
            entry: None,
            arguments,
            result,
            event,
            permits: None,
            started,
            unknown_tool,
        };
        return Admission::Refused(Box::new(call.commit(app, None).await));
    };
    // Concurrency slots are held until the audit event is durable and the response is ready.
    let (permits, refusal) = match checks(app, &ctx, &entry, &arguments, &mut event) {
        Ok(permits) => (Some(permits), None),
        Err(e) => (None, Some(e)),
    };
    let call = Admitted {
        ctx,
        entry,
        arguments,
        event,
        permits,
        started,
    };
    match refusal {
        None => Admission::Admitted(Box::new(call)),
        Some(e) => Admission::Refused(Box::new(call.refuse(app, e).await)),
    }
}

/// A call whose answer (or refusal) is known and whose event is still to be committed.
struct Finished {
    ctx: CallContext,
    entry: Option<Arc<ContractEntry>>,
    arguments: Value,
    result: Result<Answer, ToolError>,
    event: OperationalEvent,
    permits: Option<crate::call::limits::Permits>,
    started: Instant,
    unknown_tool: bool,
}

impl Finished {
    /// Seals the event (redacted), commits it, and only then gives the answer: without a
    /// committed event the answer is withheld (`audit_unavailable`).
    async fn commit(
        self,
        app: &App,
        running: Option<crate::audit::writer::RunningGuard>,
    ) -> Outcome {
        let Finished {
            ctx,
            entry,
            arguments,
            result,
            mut event,
            permits,
            started,
            unknown_tool,
        } = self;
        let tool_id = event.tool_id.clone();
        let effect = writes::has_effect(entry.as_deref(), &arguments);
        let result = seal(
            app,
            entry.as_deref(),
            &tool_id,
            arguments,
            result,
            &mut event,
        );
        let status = event.status;
        let event_id = event.event_id.clone();
        let redactions = mcp_shared::event::RedactionSummary::of(&event.redactions);
        drop(running);
        let audited = async {
            if effect {
                app.audit.append(event).await
            } else {
                app.audit.append_read(event).await
            }
        }
        .instrument(mcp_shared::otel_span!("audit commit"))
        .await;
        let (result, unaudited) = match audited {
            Ok(_seq) => (result, false),
            Err(e @ crate::audit::writer::AppendError::NotCommitted(_)) => {
                tracing::error!(error = %e, %event_id, "audit append failed; withholding result");
                (Err(app.audit.health.withheld()), true)
            }
            Err(e @ crate::audit::writer::AppendError::Unreachable(_)) => {
                tracing::error!(error = %e, %event_id, "audit writer unreachable; withholding result");
                app.audit.health.mark_unavailable(&e.to_string());
                (Err(app.audit.health.withheld()), true)
            }
        };

        drop(permits);
        count(app, &tool_id, started, status, &result);

        let (result, kept, error) = match result {
            Ok(Answer::Value(v)) => (Some(v), None, None),
            Ok(Answer::Kept(k)) => (None, Some(k), None),
            Err(e) => (None, None, Some(e)),
        };
        Outcome {
            response: ToolResponse {
                ok: error.is_none(),
                tool_id,
                result,
                error,
                event_id: if unaudited { String::new() } else { event_id },
                trace_id: ctx.trace_id,
                redactions: if unaudited {
                    Default::default()
                } else {
                    redactions
                },
            },
            unknown_tool: unknown_tool && !unaudited,
            unaudited,
            kept,
        }
    }
}

/// The event of a call as it starts: denied until the call is governed and runs.
fn new_event(
    ctx: &CallContext,
    tool_id: &str,
    started_at: time::OffsetDateTime,
) -> OperationalEvent {
    let lease = ctx.lease.lease();
    OperationalEvent {
        event_id: uuid::Uuid::now_v7().to_string(),
        trace_id: ctx.trace_id.clone(),
        request_id: ctx.request_id.clone(),
        surface: ctx.surface,
        actor: Actor {
            id: match &ctx.operator {
                Some(op) => op.actor_id(),
                None => format!("lease:{}", lease.session_id),
            },
            session_id: Some(lease.session_id.clone()),
            audience: Some(lease.audience.clone()),
            capability_profile: Some(lease.capability_profile.clone()),
        },
        target_id: Some(lease.target_id.clone()),
        tool_id: tool_id.to_string(),
        capability: None,
        policy_decision: PolicyDecision {
            decision: Decision::Deny,
            reason: None,
            checks: Vec::new(),
        },
        execution_adapter: None,
        dry_run: false,
        status: EventStatus::Denied,
        started_at,
        finished_at: started_at,
        request: Value::Null,
        result_summary: None,
        error: None,
        redactions: Vec::new(),
        retried: Vec::new(),
    }
}

/// A call to no contract: a destructive action (never a tool: said so, with what to do
/// instead) or an unknown tool (`true`).
fn uncontracted(
    app: &App,
    tool_id: &str,
    event: &mut OperationalEvent,
) -> (Result<Answer, ToolError>, bool) {
    event
        .policy_decision
        .checks
        .push("contract_resolution".into());
    match app.catalog.destructive.matching(tool_id) {
        // A destructive action is never a tool: say so, with what to do instead.
        Some(rule) => {
            event
                .policy_decision
                .checks
                .push("destructive_refusal".into());
            event.policy_decision.reason = Some(ErrorCode::ForbiddenDestructive);
            let err = ToolError::new(
                ErrorCode::ForbiddenDestructive,
                format!(
                    "`{tool_id}` is a destructive action and never a tool: {}",
                    rule.reason
                ),
            )
            .with_details(json!({ "alternatives": rule.alternatives }));
            (Err(err), false)
        }
        None => {
            event.policy_decision.reason = Some(ErrorCode::UnknownTool);
            (
                Err(ToolError::new(
                    ErrorCode::UnknownTool,
                    format!("no tool `{tool_id}`"),
                )),
                true,
            )
        }
    }
}

/// The call's request written into its event, redacted before anything is stored.
fn record_request(
    app: &App,
    entry: Option<&ContractEntry>,
    tool_id: &str,
    arguments: Value,
    event: &mut OperationalEvent,
) {
    let mut request = json!({ "tool_id": tool_id, "arguments": arguments });
    let (fields, patterns): (&[String], &[regex::Regex]) = match entry {
        Some(e) => (&e.contract.redaction.fields, &e.redaction_patterns),
        None => (&[], &[]),
    };
    app.audit.redactor.redact(
        "request",
        &mut request,
        fields,
        patterns,
        &mut event.redactions,
    );
    event.request = request;
}

/// The call's request and outcome written into its event, redacted before anything is
/// stored: `ok`, `denied` (refused before any adapter ran) or `error` (failed executing).
fn seal(
    app: &App,
    entry: Option<&ContractEntry>,
    tool_id: &str,
    arguments: Value,
    result: Result<Answer, ToolError>,
    event: &mut OperationalEvent,
) -> Result<Answer, ToolError> {
    record_request(app, entry, tool_id, arguments, event);
    event.finished_at = now();
    match result {
        Ok(answer) => {
            event.status = EventStatus::Ok;
            event.result_summary = Some(summarize(answer.value()));
            Ok(answer)
        }
        Err(mut err) => {
            // Refused before any adapter ran (policy, arguments, limits): denied; failed while
            // executing: error.
            event.status = if event.execution_adapter.is_some() {
                EventStatus::Error
            } else {
                EventStatus::Denied
            };
            err.message = app.audit.redactor.redact_text(
                "error.message",
                &err.message,
                &mut event.redactions,
            );
            event.error = Some(err.clone());
            Err(err)
        }
    }
}

/// A call refused because its event could not be written (see `audit::health`).
fn audit_unavailable(app: &App, ctx: CallContext, tool_id: &str) -> Outcome {
    Outcome {
        response: ToolResponse {
            ok: false,
            tool_id: tool_id.to_string(),
            result: None,
            error: Some(app.audit.health.refusal()),
            event_id: String::new(),
            trace_id: ctx.trace_id,
            redactions: Default::default(),
        },
        unknown_tool: false,
        unaudited: true,
        kept: None,
    }
}

/// Counts a finished call: its latency and status per tool, a denial or an error by its code.
fn count(
    app: &App,
    tool_id: &str,
    started: Instant,
    status: EventStatus,
    result: &Result<Answer, ToolError>,
) {
    let m = &app.metrics;
    let tool = metric_tool(app, tool_id);
    m.latency
        .get_or_create(&crate::telemetry::metrics::ToolLabel { tool: tool.clone() })
        .observe(started.elapsed().as_secs_f64());
    m.calls
        .get_or_create(&crate::telemetry::metrics::CallLabels {
            tool,
            status: status.as_str().into(),
        })
        .inc();
    match (result, status) {
        (Err(e), EventStatus::Denied) => {
            m.denials
                .get_or_create(&crate::telemetry::metrics::ReasonLabel {
                    reason: e.code.as_str().into(),
                })
                .inc();
        }
        (Err(e), EventStatus::Error) => {
            m.errors
                .get_or_create(&crate::telemetry::metrics::CodeLabel {
                    code: e.code.as_str().into(),
                })
                .inc();
        }
        _ => {}
    }
}

/// Unknown tool ids are not label values (a client could blow up the metric cardinality).
fn metric_tool(app: &App, tool_id: &str) -> String {
    if app.catalog.contracts.get(tool_id).is_some() {
        tool_id.to_string()
    } else {
        "unknown".to_string()
    }
}

/// The governed checks of a contracted call: policy, arguments, concurrency slots (held
/// until the call's event is committed).
fn checks(
    app: &App,
    ctx: &CallContext,
    entry: &Arc<ContractEntry>,
    arguments: &Value,
    event: &mut OperationalEvent,
) -> Result<crate::call::limits::Permits, ToolError> {
    let c = &entry.contract;
    let lease = ctx.lease.lease();
    event.capability = Some(c.required_capability.clone());
    if c.routing == RoutingClass::DescriptiveCached {
        event.target_id = None;
    }
    // A `fail_closed` export sink too far behind: refused, and audited (the trail itself
    // can be written; see `audit::sinks`).
    if let Some(refusal) = app.audit.health.sink_refusal() {
        return Err(refusal);
    }
    // Past a rate: refused (and audited) before anything else is asked.
    let owner = ctx.lease.owner();
    if let Err(limited) = app.rates.check_call(
        &lease.capability_profile,
        &lease.session_id,
        ctx.lease.rate(),
        owner,
        &c.tool_id,
    ) {
        app.metrics
            .rate_limited(&lease.capability_profile, limited.scope);
        return Err(limited.error());
    }
    // Evaluated here, on the call's task: a pure function of shared read-only state.
    let grant = policy::Grant {
        profile: app.catalog.profiles.get(&lease.capability_profile),
        scope: lease.is_run().then_some(lease.effective_tools.as_slice()),
        admitted: ctx.resumed,
    };
    let decision = mcp_shared::otel_span!("policy").in_scope(|| {
        policy::decide(
            &app.hubs.targets,
            &app.hubs.enrolments,
            grant,
            &lease.target_id,
            entry,
        )
    });
    event.policy_decision = decision.clone();
    if let Some(reason) = decision.reason {
        let mut message = denial_message(reason, c, lease);
        if reason == ErrorCode::SkillDisabled
            && let Some(why) = app
                .hubs
                .enrolments
                .get(&lease.target_id)
                .and_then(|e| e.skill.closed_because())
        {
            message = format!("`{}` is not callable: {why}", c.tool_id);
        }
        return Err(ToolError::new(reason, message));
    }

    if ctx.confirmation.is_some() && c.routing != RoutingClass::OperationalWrite {
        return Err(ToolError::new(
            ErrorCode::InvalidArguments,
            format!(
                "`{}` asks for no input: a requestState belongs to the write that issued it",
                c.tool_id
            ),
        ));
    }
    if let Err(errors) =
        mcp_shared::otel_span!("validation").in_scope(|| validate(&entry.input, arguments))
    {
        return Err(ToolError::new(
            ErrorCode::InvalidArguments,
            format!("arguments do not match the input schema of `{}`", c.tool_id),
        )
        .with_details(json!({ "errors": errors })));
    }

    let mut keys = vec![
        (
            format!("lease:{}:{}", lease.session_id, c.tool_id),
            c.concurrency.per_lease,
        ),
        (
            format!("lease:{}", lease.session_id),
            app.config.limits.per_lease_in_flight,
        ),
        // The owner's (see `call::limits`): minted leases, run credentials and fleet
        // children share them.
        (
            format!(
                "owner:{}:{}:{}",
                ctx.lease.owner(),
                lease.target_id,
                c.tool_id
            ),
            c.concurrency.per_lease,
        ),
        (
            format!("owner:{}", ctx.lease.owner()),
            app.config.limits.per_owner_in_flight,
        ),
    ];
    if c.routing != RoutingClass::DescriptiveCached {
        keys.push((
            format!("target:{}:{}", lease.target_id, c.tool_id),
            c.concurrency.per_target,
        ));
        keys.push((
            format!("target:{}", lease.target_id),
            app.config.limits.per_target_in_flight,
        ));
    }
    app.limits
        .try_acquire(&keys)
        .map_err(|e| ToolError::new(ErrorCode::Busy, e.to_string()))
}

/// The answer of an admitted call: a descriptive tool's kept answer, or an operational
/// tool's result (executed on root or routed, under the tool's timeout, output validated).
async fn answer(
    app: &App,
    ctx: &CallContext,
    entry: &Arc<ContractEntry>,
    arguments: &Value,
    event: &mut OperationalEvent,
) -> Result<Answer, ToolError> {
    let c = &entry.contract;
    let lease = ctx.lease.lease();
    // A descriptive call is answered from its descriptor set's kept answer (checked against
    // the output schema when it was built).
    if c.routing == RoutingClass::DescriptiveCached {
        let p = c.descriptor.as_ref().ok_or_else(|| {
            ToolError::new(ErrorCode::Internal, "descriptive tool without projection")
        })?;
        event.execution_adapter = Some("root.descriptor_cache".into());
        return descriptive_answer(app, entry, p, arguments).map(Answer::Kept);
    }
    // Routed calls enforce the deadline themselves (and cancel on the hub); this outer bound
    // is a safety net for them and the deadline for root-executed ones.
    let timeout = Duration::from_millis(c.timeout_ms + 500);
    let executed = tokio::time::timeout(timeout, execute(app, ctx, entry, arguments, event)).await;
    let value = match executed {
        Ok(r) => r?,
        Err(_) => {
            return Err(ToolError::new(
                ErrorCode::Timeout,
                format!("`{}` did not finish within {} ms", c.tool_id, c.timeout_ms),
            ));
        }
    };
    if let Err(errors) = validate(&entry.output, &value) {
        tracing::error!(tool = %c.tool_id, ?errors, "result violates the tool's output schema");
        return Err(ToolError::new(
            ErrorCode::Internal,
            format!("the result of `{}` violates its output schema", c.tool_id),
        ));
    }
    // A replay returns what was kept the first time; it keeps nothing again.
    if let Some(retain) = &c.retain
        && value.get("replay") != Some(&Value::Bool(true))
    {
        retain_result(app, &lease.target_id, retain, &value, &event.event_id).await?;
    }
    Ok(Answer::Value(value))
}

/// A successful call's result: a value of its own, or a descriptive answer its descriptor
/// set keeps.
enum Answer {
    Value(Value),
    Kept(Arc<crate::descriptors::DescriptiveAnswer>),
}

impl Answer {
    fn value(&self) -> &Value {
        match self {
            Answer::Value(v) => v,
            Answer::Kept(k) => &k.value,
        }
    }
}

/// Keeps what the contract's `retain` names of a successful result (nothing when the result
/// does not carry it, e.g. a preview).
async fn retain_result(
    app: &App,
    target_id: &str,
    retain: &mcp_shared::contract::Retention,
    value: &Value,
    event_id: &str,
) -> Result<(), ToolError> {
    let Some(body) = value.pointer(&retain.pointer) else {
        return Ok(());
    };
    let Some(key) = body.get(&retain.key).and_then(Value::as_str) else {
        tracing::warn!(pointer = %retain.pointer, key = %retain.key, "retained value has no key; not kept");
        return Ok(());
    };
    app.store
        .put_retained(&crate::store::RetainedRow {
            target_id: target_id.to_owned(),
            collection: retain.collection.clone(),
            item_key: key.to_owned(),
            body: body.clone(),
            retained_at_ms: mcp_shared::time::unix_ms(now()),
            event_id: event_id.to_owned(),
        })
        .await
        .map_err(|e| internal("retained results", e))
}

async fn execute(
    app: &App,
    ctx: &CallContext,
    entry: &ContractEntry,
    arguments: &Value,
    event: &mut OperationalEvent,
) -> Result<Value, ToolError> {
    let c = &entry.contract;
    match c.routing {
        // Answered by `governed` from the descriptor cache, never executed.
        RoutingClass::DescriptiveCached => Err(ToolError::new(
            ErrorCode::Internal,
            "a descriptive tool is not executed",
        )),
        RoutingClass::OperationalRead => {
            let input = CallBody::run(arguments.clone());
            dispatch(app, ctx, entry, input, event).await
        }
        RoutingClass::OperationalWrite => {
            crate::call::writes::write(app, ctx, entry, arguments, event).await
        }
    }
}

fn denial_message(
    reason: ErrorCode,
    c: &mcp_shared::ToolContract,
    lease: &mcp_shared::SessionLease,
) -> String {
    match reason {
        ErrorCode::CapabilityNotGranted if lease.is_run() => format!(
            "this run credential grants the {} actions of its run profile; `{}` is not one",
            lease.effective_tools.len(),
            c.tool_id
        ),
        ErrorCode::CapabilityNotGranted if c.fleet != lease.fleet_selector().is_some() => {
            if c.fleet {
                format!(
                    "`{}` is a fleet tool: it needs a fleet lease (one issued for a selector)",
                    c.tool_id
                )
            } else {
                format!(
                    "this fleet lease calls fleet tools only; `{}` runs on targets through root.run_fleet_read or root.run_fleet_write",
                    c.tool_id
                )
            }
        }
        ErrorCode::CapabilityNotGranted => format!(
            "profile `{}` does not grant `{}`, which `{}` requires",
            lease.capability_profile, c.required_capability, c.tool_id
        ),
        ErrorCode::ForbiddenDestructive => format!(
            "`{}` is destructive; destructive actions are never tools",
            c.tool_id
        ),
        ErrorCode::EnvironmentForbidden => format!(
            "target `{}` does not allow `{}` in its environment or write scope",
            lease.target_id, c.tool_id
        ),
        ErrorCode::SkillDisabled => format!(
            "target `{}` does not publish `{}` through an enabled skill",
            lease.target_id, c.tool_id
        ),
        ErrorCode::TargetOffline => format!("target `{}` is not connected", lease.target_id),
        ErrorCode::TargetCordoned => format!(
            "target `{}` is cordoned by an operator: it takes no new calls until uncordoned",
            lease.target_id
        ),
        ErrorCode::TargetRetired => format!(
            "target `{}` is retired: it takes no calls again",
            lease.target_id
        ),
        ErrorCode::TargetNarrowed => format!(
            "an operator denied `{}` on target `{}`",
            c.tool_id, lease.target_id
        ),
        other => format!("denied: {other}"),
    }
}

/// A short human summary of a result for the audit trail (no payload).
fn summarize(value: &Value) -> String {
    let descriptor = value
        .get("descriptor")
        .and_then(|d| d.get("descriptor_id"))
        .and_then(|d| d.as_str());
    let items = value
        .get("data")
        .and_then(|d| d.as_array())
        .map(|a| a.len());
    match (descriptor, items) {
        (Some(id), Some(n)) => format!("descriptor {id}: {n} items"),
        (Some(id), None) => format!("descriptor {id}"),
        (None, _) => match value {
            Value::Object(m) => format!("object with {} fields", m.len()),
            _ => "value".to_string(),
        },
    }
}
