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

use serde_json::{Value, json};

/// OCSF's version of the classes used here.
pub const VERSION: &str = "1.1.0";

/// `(category_uid, class_uid, activity_id)` of an event.
fn class(e: &Value) -> (u32, u32, u32) {
    let tool = e["tool_id"].as_str().unwrap_or_default();
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
    let activity = match e["capability"].as_str() {
        Some(c) if c.contains(".read") => 2,
        Some(c) if c.contains(".write") => 3,
        _ => 99,
    };
    (6, 6003, activity)
}

/// The OCSF form of event `e`, the trail's `seq`-th with chain hash `hash` (see the module's
/// header).
pub fn map(e: &Value, seq: i64, hash: &str) -> Value {
    let (category, class_uid, activity) = class(e);
    let status = e["status"].as_str().unwrap_or_default();
    let (status_name, status_id, severity) = match status {
        "ok" => ("Success", 1, 1),
        "denied" => ("Failure", 2, 3),
        _ => ("Failure", 2, 2),
    };
    let time = |k: &str| {
        e[k].as_str()
            .and_then(|t| mcp_shared::time::parse(t).ok())
            .map(mcp_shared::time::unix_ms)
    };
    let (start, end) = (time("started_at"), time("finished_at"));
    let mut out = json!({
        "category_uid": category,
        "class_uid": class_uid,
        "activity_id": activity,
        "type_uid": class_uid * 100 + activity,
        "time": start,
        "duration": start.zip(end).map(|(a, b)| b - a),
        "status": status_name,
        "status_id": status_id,
        "severity_id": severity,
        "actor": {
            "user": { "uid": e["actor"]["id"] },
            "session": { "uid": e["actor"]["session_id"] },
        },
        "api": {
            "operation": e["tool_id"],
            "request": { "uid": e["request_id"] },
            "service": { "name": "mcp-root" },
        },
        "src_endpoint": { "svc_name": e["surface"] },
        "metadata": {
            "uid": e["event_id"],
            "correlation_uid": e["trace_id"],
            "version": VERSION,
            "log_name": "audit",
            "product": { "name": "Root MCP gateway", "vendor_name": "root-mcp" },
        },
        "unmapped": { "seq": seq, "hash": hash, "event": e },
    });
    if let Some(err) = e.get("error").filter(|v| !v.is_null()) {
        out["status_code"] = err["code"].clone();
        out["status_detail"] = err["message"].clone();
    }
    if let Some(t) = e["target_id"].as_str() {
        out["resources"] = json!([{ "uid": t, "type": "managed_target" }]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped(event: Value) -> Value {
        map(&event, 7, "h")
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
