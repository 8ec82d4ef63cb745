//! Test-only fault injection, kept out of every contract and release build: a fixture tool
//! `test.fault` with its own contract (loaded only by the roots of tests that ask for it)
//! and an adapter embedded into the hubs those tests start (in-process through
//! `HubConfig::embedded`, or the `mcp-hub-faults` binary: `mcp-hub` with this adapter).
//!
//! `{"fault": "panic"}` makes the adapter panic, `{"fault": "hang"}` never finishes; any other
//! call answers `{"ok": true}`. Its capability is `hub.get_status`'s (`infra.read.status`), so
//! `InfraOpsRead` leases reach it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use mcp_hub::adapters::{AdapterDecl, AdapterReply, CallInput, EmbeddedAdapter};
use mcp_hub::context::HubContext;
use serde_json::{Value, json};

/// The fixture tool.
pub const TOOL: &str = "test.fault";

/// The fixture's adapter.
pub static FAULT: EmbeddedAdapter = EmbeddedAdapter {
    decl: AdapterDecl {
        tool_id: TOOL,
        name: "test.fault",
        writes: false,
    },
    run,
};

fn run(_ctx: Arc<HubContext>, input: CallInput) -> BoxFuture<'static, AdapterReply> {
    Box::pin(async move {
        match input.arguments.get("fault").and_then(Value::as_str) {
            Some("panic") => panic!("test fault injected"),
            Some("hang") => std::future::pending().await,
            _ => Ok(json!({ "ok": true })),
        }
    })
}

/// The fixture's contract: a read routed to the target, 5 s timeout.
pub fn contract() -> Value {
    json!({
        "tool_id": TOOL,
        "title": "Fault fixture (tests only)",
        "summary": "Test fixture: panics or hangs on request, answers ok otherwise.",
        "input_schema": {
            "type": "object",
            "properties": {"fault": {"enum": ["panic", "hang", "none"]}},
            "additionalProperties": false
        },
        "output_schema": {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
            "additionalProperties": false
        },
        "side_effect": "read",
        "routing": "operational_read",
        "required_capability": "infra.read.status",
        "allowed_environments": ["*"],
        "timeout_ms": 5000,
        "concurrency": {"per_lease": 4, "per_target": 16},
        "stability": "experimental",
        "plane": "InfraOpsPlane"
    })
}

/// Writes the shipped contracts plus the fixture's into `dir`; returns it (a root's
/// `contracts_dir`).
pub fn contracts_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas/tools");
    std::fs::create_dir_all(dir)?;
    for e in std::fs::read_dir(shipped)? {
        let p = e?.path();
        if let Some(name) = p.file_name() {
            std::fs::copy(&p, dir.join(name))?;
        }
    }
    std::fs::write(
        dir.join(format!("{TOOL}.json")),
        serde_json::to_string_pretty(&contract())?,
    )?;
    Ok(dir.to_owned())
}

/// Has a test root load the fixture's contract besides the shipped ones (written next to its
/// data directory).
pub fn with_contract(cfg: &mut mcp_root::config::RootConfig) {
    let dir = cfg.data_dir.with_file_name("fault-contracts");
    match contracts_dir(&dir) {
        Ok(dir) => cfg.contracts_dir = Some(dir),
        Err(e) => panic!("cannot write the fault fixture's contracts: {e}"),
    }
}
