//! The fault fixture of the hub's own unit tests: an embedded adapter serving `test.fault`,
//! which panics (`{"fault": "panic"}`) or never finishes (`{"fault": "hang"}`) on request and
//! answers `{"ok": true}` otherwise. Compiled for tests only; the integration suite has its
//! own (`mcp_tests::faults`), as any embedding program would.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::json;

use crate::context::HubContext;
use crate::skill::adapters::{AdapterDecl, AdapterReply, CallInput, EmbeddedAdapter};

pub(crate) const TOOL: &str = "test.fault";

/// The fixture as a hub's embedded adapters.
pub(crate) fn embedded() -> crate::skill::Embedded {
    vec![&FAULT].into()
}

pub(crate) static FAULT: EmbeddedAdapter = EmbeddedAdapter {
    decl: AdapterDecl {
        tool_id: TOOL,
        name: "test.fault",
        writes: false,
    },
    run,
};

fn run(_ctx: Arc<HubContext>, input: CallInput) -> BoxFuture<'static, AdapterReply> {
    Box::pin(async move {
        match input.body.arguments.get("fault").and_then(|f| f.as_str()) {
            Some("panic") => panic!("test fault injected"),
            Some("hang") => std::future::pending().await,
            _ => Ok(json!({ "ok": true })),
        }
    })
}
