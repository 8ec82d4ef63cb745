//! Subnet views for the lease's subnet (seed "WebUI and Observability Model"):
//!
//! - `get_subnet_analysis_health`: each enrolled target's live status, skill state and the
//!   error rate of its recent calls, with an overall `healthy` / `partial` / `degraded`.
//! - `get_subnet_timeline`: hub lifecycle events (connected, disconnected, surface changed)
//!   interleaved with the audit trail's calls, newest first.
//! - `get_subnet_diagnostics`: compact pressure projections: route backlog (calls awaiting a
//!   result) and pending acks (skill commands awaiting an answer) per target, transport
//!   pressure (the outbound queue), and the memory-profile summaries hubs published to root.
//!
//! All three read root's own state (target directory, router, audit store, retained
//! summaries); none needs a hub round trip, so they answer while hubs are down. Each covers
//! the targets the lease reaches (its subnet, in its target's environment: [`Reach`]) and
//! names the others in `excluded`.

use mcp_shared::error::ToolError;
use mcp_shared::target::TargetStatus;
use mcp_shared::time::{format, from_unix_ms, now, unix_ms};
use serde_json::{Value, json};

use super::input::{arg_u64, internal};
use super::reach::Reach;
use crate::app::App;
use crate::call::context::CallContext;
use crate::hubs::OUTBOUND_QUEUE;
use crate::hubs::router;
use crate::store::AuditFilter;
use mcp_shared::protocol::CallBody;

/// The window `analysis_health` computes error rates over.
const HEALTH_WINDOW_MIN: i64 = 15;

/// The targets of the lease's reach with their environment, sorted; and the reach.
fn members(app: &App, ctx: &CallContext) -> (Vec<(String, String)>, Reach) {
    let reach = Reach::of(app, ctx.lease.lease());
    let env = reach.environment.clone().unwrap_or_default();
    let m = reach
        .members
        .iter()
        .map(|t| (t.clone(), env.clone()))
        .collect();
    (m, reach)
}

fn overall(total: usize, healthy: usize) -> &'static str {
    if total == 0 || healthy == 0 {
        "degraded"
    } else if healthy == total {
        "healthy"
    } else {
        "partial"
    }
}

pub(crate) async fn analysis_health(app: &App, ctx: &CallContext) -> Result<Value, ToolError> {
    let subnet = ctx.lease.lease().subnet_id.clone();
    let since = unix_ms(now()) - HEALTH_WINDOW_MIN * 60_000;
    let mut targets = Vec::new();
    let mut healthy = 0;
    let (members, reach) = members(app, ctx);
    for (target_id, environment) in &members {
        let status = app.hubs.status(target_id);
        let rows = app
            .store
            .query_audit(&AuditFilter {
                target_id: Some(target_id.clone()),
                since_ms: Some(since),
                limit: 1_000,
                ..Default::default()
            })
            .await
            .map_err(|e| internal("the audit store", e))?;
        let calls = rows.len();
        let errors = rows
            .iter()
            .filter(|r| r.event.status == mcp_shared::event::EventStatus::Error)
            .count();
        let denied = rows
            .iter()
            .filter(|r| r.event.status == mcp_shared::event::EventStatus::Denied)
            .count();
        let (enabled, published) = app
            .hubs
            .targets
            .get(target_id)
            .map(|d| {
                (
                    d.operational_surface.enabled,
                    d.operational_surface.capabilities.len(),
                )
            })
            .unwrap_or((false, 0));
        let error_rate = if calls == 0 {
            0.0
        } else {
            errors as f64 / calls as f64
        };
        let ok = status == TargetStatus::Online && error_rate < 0.5;
        if ok {
            healthy += 1;
        }
        let last_seen = app
            .hubs
            .enrolments
            .get(target_id)
            .and_then(|e| e.row.last_seen_at_ms)
            .map(|ms| format(from_unix_ms(ms)));
        targets.push(json!({
            "target_id": target_id,
            "environment": environment,
            "status": status,
            "healthy": ok,
            "skill_enabled": enabled,
            "published_tools": published,
            "last_seen_at": last_seen,
            "recent_calls": { "window_min": HEALTH_WINDOW_MIN, "total": calls, "errors": errors, "denied": denied, "error_rate": error_rate },
        }));
    }
    let health = overall(members.len(), healthy);
    Ok(json!({
        "subnet_id": subnet,
        "health": health,
        "targets": targets,
        "excluded": reach.excluded_json(),
        "summary": format!("{healthy} of {} targets of subnet `{subnet}` are online and answering", members.len()),
    }))
}

pub(crate) async fn timeline(
    app: &App,
    ctx: &CallContext,
    input: &CallBody,
) -> Result<Value, ToolError> {
    let subnet = ctx.lease.lease().subnet_id.clone();
    let since_min = arg_u64(input, "since_minutes", 60, 1, 7 * 24 * 60) as i64;
    let limit = arg_u64(input, "limit", 100, 1, 500) as usize;
    let since = now() - time::Duration::minutes(since_min);
    // `kinds` (default all): lifecycle kinds by their wire names, and `call`.
    let kinds: Option<Vec<&str>> = input
        .arguments
        .get("kinds")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect());
    let wanted = |kind: &str| kinds.as_ref().is_none_or(|k| k.contains(&kind));
    let (members, reach) = members(app, ctx);
    let mut items: Vec<(i64, Value)> = app.hubs.timeline
        .recent(&subnet, since, limit, |e| {
            wanted(e.kind.as_str()) && reach.contains(&e.target_id)
        })
        .into_iter()
        .map(|e| {
            (
                unix_ms(e.at),
                json!({ "at": format(e.at), "target_id": e.target_id, "kind": e.kind, "detail": e.detail }),
            )
        })
        .collect();
    let members = if wanted("call") { members } else { Vec::new() };
    for (target_id, _) in members {
        let rows = app
            .store
            .query_audit(&AuditFilter {
                target_id: Some(target_id.clone()),
                since_ms: Some(unix_ms(since)),
                limit: limit as i64,
                ..Default::default()
            })
            .await
            .map_err(|e| internal("the audit store", e))?;
        for r in rows {
            let e = &r.event;
            items.push((
                unix_ms(e.started_at),
                json!({
                    "at": format(e.started_at),
                    "target_id": target_id,
                    "kind": "call",
                    "tool_id": e.tool_id,
                    "status": e.status,
                    "error_code": e.error.as_ref().map(|x| x.code),
                    "event_id": e.event_id,
                    "detail": e.result_summary.clone().or_else(|| e.error.as_ref().map(|x| x.message.clone())).unwrap_or_default(),
                }),
            ));
        }
    }
    items.sort_by_key(|i| std::cmp::Reverse(i.0));
    let total = items.len();
    items.truncate(limit);
    Ok(json!({
        "subnet_id": subnet,
        "since": format(since),
        "events": items.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
        "truncated": total > limit,
        "excluded": reach.excluded_json(),
    }))
}

fn pressure_level(queue_depth: usize, backlog: usize) -> &'static str {
    let fill = queue_depth as f64 / OUTBOUND_QUEUE as f64;
    if fill >= 0.75 || backlog >= 256 {
        "high"
    } else if fill >= 0.25 || backlog >= 32 {
        "elevated"
    } else {
        "low"
    }
}

pub(crate) async fn diagnostics(app: &App, ctx: &CallContext) -> Result<Value, ToolError> {
    let subnet = ctx.lease.lease().subnet_id.clone();
    let (members, reach) = members(app, ctx);
    let ids: Vec<String> = members.iter().map(|(t, _)| t.clone()).collect();
    let pressure = router::pressure(&app.hubs.links, &ids).await;
    let mut targets = Vec::new();
    let (mut backlog_total, mut acks_total, mut high) = (0, 0, 0);
    for (target_id, _) in &members {
        let p = pressure.get(target_id).cloned().unwrap_or_default();
        let level = pressure_level(p.queue_depth, p.pending_calls);
        backlog_total += p.pending_calls;
        acks_total += p.pending_commands;
        if level == "high" {
            high += 1;
        }
        targets.push(json!({
            "target_id": target_id,
            "status": app.hubs.status(target_id),
            "connected": pressure.contains_key(target_id),
            "route_backlog": p.pending_calls,
            "pending_acks": p.pending_commands,
            "transport": { "queue_depth": p.queue_depth, "queue_capacity": OUTBOUND_QUEUE, "pressure": level },
        }));
    }
    let profiles = app
        .store
        .list_retained("memory_profiles", &ids, 20)
        .await
        .map_err(|e| internal("the retained summaries", e))?;
    let memory_profiles: Vec<Value> = profiles
        .iter()
        .map(|r| {
            json!({
                "target_id": r.target_id,
                "session_id": r.item_key,
                "published_at": format(from_unix_ms(r.retained_at_ms)),
                "service": r.body.get("service"),
                "growth_bytes": r.body.get("growth_bytes"),
                "peak_rss_bytes": r.body.get("peak_rss_bytes"),
                "incident_ids": r.body.get("incident_ids"),
            })
        })
        .collect();
    Ok(json!({
        "subnet_id": subnet,
        "targets": targets,
        "totals": { "route_backlog": backlog_total, "pending_acks": acks_total, "targets_under_high_pressure": high },
        "memory_profiles": memory_profiles,
        "excluded": reach.excluded_json(),
        "summary": format!(
            "{} targets; {backlog_total} calls awaiting results, {acks_total} commands awaiting acks; {} memory-profile summaries",
            members.len(), memory_profiles.len()
        ),
    }))
}
