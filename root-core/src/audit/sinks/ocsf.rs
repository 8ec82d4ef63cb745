//! The trail's events in OCSF (Open Cybersecurity Schema Framework 1.1), the schema SIEMs
//! converge on. The class follows the event:
//!
//! | event | class (`class_uid`) | `activity_id` |
//! |---|---|---|
//! | a tool call (MCP, REST) | API Activity (6003) | 2 Read for `read` tools, 3 Update for writes, 99 Other |
//! | `admin.lease.*`, `admin.oauth.*`, `admin.run_profile.*` (leases, sign-ins, run credentials) | Authentication (3002) | 1 Logon (create, approve, issue, refresh, rotate), 2 Logoff (revoke, end), 99 Other |
//! | any other operator action (`admin.*`) | Account Change (3001) | 1 Create (`add`, `enrol`, `create`), 6 Disable (`revoke`, `retire`, `cordon`), 99 Other |
//!
//! Fields, for every class:
//! - `category_uid` (6 Application Activity, 3 Identity & Access Management), `class_uid`,
//!   `activity_id`, `type_uid` (`class_uid * 100 + activity_id`), `time` (the event's start,
//!   epoch ms), `duration` (ms).
//! - `status` and `status_id`: `Success` (1) for `ok`, `Failure` (2) for an error or a denial,
//!   with `status_code` (root's error code) and `status_detail` (its message).
//! - `severity_id`: 1 Informational when ok, 3 Medium when denied, 2 Low when failed.
//! - `actor.user.uid`: root's actor id (`lease:…`, `operator:…`); `actor.session.uid` its lease.
//! - `api.operation`: the tool or action id; `api.request.uid`: the request id;
//!   `api.service.name`: `mcp-root`; `src_endpoint.svc_name`: the surface (`mcp`, `rest`,
//!   `admin`).
//! - `resources`: the target (`{uid, type: "managed_target"}`), when the event has one.
//! - `metadata`: `uid` (the event id), `correlation_uid` (the trace id), `version` `1.1.0`,
//!   `product` (`Root MCP gateway`, vendor `root-mcp`), `log_name` `audit`.
//! - `unmapped`: the event as the chain hashed it, with `seq` and `hash`, so nothing is lost.

use serde::Serialize;
use serde_json::value::RawValue;

use super::record::{Head, Shipped, parse_ms};

/// OCSF's version of the classes used here.
pub const VERSION: &str = "1.1.0";

/// `(category_uid, class_uid, activity_id)` of an event.
fn class(e: &Head<'_>) -> (u32, u32, u32) {
    let tool = Head::text(&e.tool_id);
    let verb = tool.rsplit('.').next().unwrap_or_default();
    let authentication = [
        "admin.lease.",
        "admin.oauth.",
        "admin.run_profile.",
        "oauth.",
    ];
    if authentication.iter().any(|p| tool.starts_with(p)) {
        let activity = match verb {
            "create" | "token" | "approve" | "authorize" | "rotate" | "refresh" | "issue" => 1,
            "revoke" | "end" => 2,
            _ => 99,
        };
        return (3, 3002, activity);
    }
    if tool.starts_with("admin.") {
        let activity = match verb {
            "add" | "enrol" | "enroll" | "create" | "install" => 1,
            "revoke" | "retire" | "cordon" | "disable" | "uninstall" => 6,
            _ => 99,
        };
        return (3, 3001, activity);
    }
    let activity = match e.capability.as_deref() {
        Some(c) if c.contains(".read") => 2,
        Some(c) if c.contains(".write") => 3,
        _ => 99,
    };
    (6, 6003, activity)
}

/// An event in OCSF (see the module's header), written straight to the sink's buffer.
#[derive(Serialize)]
pub struct Record<'a> {
    category_uid: u32,
    class_uid: u32,
    activity_id: u32,
    type_uid: u32,
    time: Option<i64>,
    duration: Option<i64>,
    status: &'static str,
    status_id: u8,
    severity_id: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    status_code: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status_detail: Option<&'a str>,
    actor: Actor<'a>,
    api: Api<'a>,
    src_endpoint: Svc<'a>,
    metadata: Metadata<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resources: Option<[Resource<'a>; 1]>,
    unmapped: Unmapped<'a>,
}

#[derive(Serialize)]
struct Uid<'a> {
    uid: Option<&'a str>,
}

#[derive(Serialize)]
struct Actor<'a> {
    user: Uid<'a>,
    session: Uid<'a>,
}

#[derive(Serialize)]
struct Name<'a> {
    name: &'a str,
}

#[derive(Serialize)]
struct Api<'a> {
    operation: Option<&'a str>,
    request: Uid<'a>,
    service: Name<'a>,
}

#[derive(Serialize)]
struct Svc<'a> {
    svc_name: Option<&'a str>,
}

#[derive(Serialize)]
struct Product {
    name: &'static str,
    vendor_name: &'static str,
}

#[derive(Serialize)]
struct Metadata<'a> {
    uid: Option<&'a str>,
    correlation_uid: Option<&'a str>,
    version: &'static str,
    log_name: &'static str,
    product: Product,
}

#[derive(Serialize)]
struct Resource<'a> {
    uid: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct Unmapped<'a> {
    seq: i64,
    hash: &'a str,
    event: &'a RawValue,
}

/// The OCSF form of `s`, whose fields are `e` (see the module's header).
pub fn map<'a>(e: &'a Head<'a>, s: &'a Shipped) -> Record<'a> {
    let (category, class_uid, activity) = class(e);
    let (status, status_id, severity_id) = match e.status.as_deref() {
        Some("ok") => ("Success", 1, 1),
        Some("denied") => ("Failure", 2, 3),
        _ => ("Failure", 2, 2),
    };
    let (start, end) = (parse_ms(&e.started_at), parse_ms(&e.finished_at));
    let error = e.error.as_ref();
    let actor = e.actor.as_ref();
    Record {
        category_uid: category,
        class_uid,
        activity_id: activity,
        type_uid: class_uid * 100 + activity,
        time: start,
        duration: start.zip(end).map(|(a, b)| b - a),
        status,
        status_id,
        severity_id,
        status_code: error.and_then(|x| x.code.as_deref()),
        status_detail: error.and_then(|x| x.message.as_deref()),
        actor: Actor {
            user: Uid {
                uid: actor.and_then(|a| a.id.as_deref()),
            },
            session: Uid {
                uid: actor.and_then(|a| a.session_id.as_deref()),
            },
        },
        api: Api {
            operation: e.tool_id.as_deref(),
            request: Uid {
                uid: e.request_id.as_deref(),
            },
            service: Name { name: "mcp-root" },
        },
        src_endpoint: Svc {
            svc_name: e.surface.as_deref(),
        },
        metadata: Metadata {
            uid: e.event_id.as_deref(),
            correlation_uid: e.trace_id.as_deref(),
            version: VERSION,
            log_name: "audit",
            product: Product {
                name: "Root MCP gateway",
                vendor_name: "root-mcp",
            },
        },
        resources: e.target_id.as_deref().map(|uid| {
            [Resource {
                uid,
                kind: "managed_target",
            }]
        }),
        unmapped: Unmapped {
            seq: s.seq,
            hash: &s.hash,
            event: &s.event,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::{Value, json};

    fn shipped(event: Value) -> Value {
        let s = Shipped::new(7, event.to_string(), String::new(), "h".into());
        let mut out = Vec::new();
        s.write(crate::config::SinkFormat::Ocsf, None, &mut out)
            .unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn tool_calls_sign_ins_and_operator_actions_map_to_their_classes() {
        let call = shipped(json!({
            "event_id": "e1", "trace_id": "t1", "request_id": "r1", "tool_id": "hub.get_status",
            "capability": "infra.read.status", "status": "ok", "surface": "mcp",
            "actor": { "id": "lease:abc", "session_id": "abc" }, "target_id": "hub:a",
            "started_at": "2026-12-06T12:00:00Z", "finished_at": "2026-12-06T12:00:00.250Z",
        }));
        assert_eq!(
            (call["class_uid"].as_u64(), call["activity_id"].as_u64()),
            (Some(6003), Some(2))
        );
        assert_eq!(call["type_uid"], 600302);
        assert_eq!(call["duration"], 250);
        assert_eq!(call["metadata"]["uid"], "e1");
        assert_eq!(call["resources"][0]["uid"], "hub:a");
        assert_eq!(call["unmapped"]["seq"], 7);
        let denied = shipped(json!({
            "tool_id": "hub.deploy_ref", "capability": "infra.write.deploy", "status": "denied",
            "error": { "code": "environment_forbidden", "message": "no" },
        }));
        assert_eq!(
            (denied["activity_id"].as_u64(), denied["status_id"].as_u64()),
            (Some(3), Some(2))
        );
        assert_eq!(denied["status_code"], "environment_forbidden");
        assert_eq!(denied["severity_id"], 3);
        let lease = shipped(json!({ "tool_id": "admin.lease.revoke", "status": "ok" }));
        assert_eq!(
            (lease["class_uid"].as_u64(), lease["activity_id"].as_u64()),
            (Some(3002), Some(2))
        );
        let op = shipped(json!({ "tool_id": "admin.operator.add", "status": "ok" }));
        assert_eq!(
            (op["class_uid"].as_u64(), op["activity_id"].as_u64()),
            (Some(3001), Some(1))
        );
        assert!(op.get("resources").is_none());
    }
}
