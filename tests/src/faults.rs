//! Test-only fault injection, kept out of every contract and release build: a fixture tool
//! `test.fault` with its own contract (loaded only by the roots of tests that ask for it)
//! and an adapter embedded into the hubs those tests start (in-process through
//! `mcp_hub::start_with`, or the `mcp-hub-faults` binary: `mcp-hub` with this adapter).
//!
//! `{"fault": "panic"}` makes the adapter panic, `{"fault": "hang"}` never finishes,
//! `{"fault": "hang_once"}` hangs the first time a hub's state directory sees it (a marker file
//! remembers it across the hub's restarts) and answers after; any other call answers
//! `{"ok": true}`. Its capability is `hub.get_status`'s (`infra.read.status`), so
//! `InfraOpsRead` leases reach it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use mcp_hub::HubContext;
use mcp_hub::{AdapterDecl, AdapterReply, CallInput, EmbeddedAdapter};
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

/// The marker of a `hang_once` that hung, in the hub's state directory.
const HUNG: &str = "test-fault-hung";

fn run(ctx: Arc<HubContext>, input: CallInput) -> BoxFuture<'static, AdapterReply> {
    Box::pin(async move {
        match input.body.arguments.get("fault").and_then(Value::as_str) {
            Some("panic") => panic!("test fault injected"),
            Some("hang") => std::future::pending().await,
            Some("hang_once") => {
                let marker = ctx.config.state_dir.join(HUNG);
                if !marker.exists() {
                    let _ = std::fs::write(&marker, b"hung\n");
                    std::future::pending::<()>().await;
                }
                Ok(json!({ "ok": true }))
            }
            _ => Ok(json!({ "ok": true })),
        }
    })
}

/// The fixture's contract: a read routed to the target, 5 s timeout, never retried.
pub fn contract() -> Value {
    json!({
        "tool_id": TOOL,
        "title": "Fault fixture (tests only)",
        "summary": "Test fixture: panics or hangs on request, answers ok otherwise.",
        "input_schema": {
            "type": "object",
            "properties": {"fault": {"enum": ["panic", "hang", "hang_once", "none"]}},
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

/// [`contract`] with a retry policy: 5 attempts from 1 s on `target_offline`, inside a 20 s
/// deadline (so a hub killed under a call has about 15 s to come back, on a loaded machine).
pub fn retrying_contract() -> Value {
    let mut c = contract();
    c["timeout_ms"] = json!(20_000);
    c["retry"] = json!({"attempts": 5, "backoff_ms": 1000, "on": ["target_offline"]});
    c
}

/// Writes the shipped contracts plus `fixture` (the fixture's contract) into `dir`; returns
/// it (a root's `contracts_dir`).
pub fn contracts_dir_with(dir: &Path, fixture: &Value) -> anyhow::Result<PathBuf> {
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
        serde_json::to_string_pretty(fixture)?,
    )?;
    Ok(dir.to_owned())
}

/// Writes the shipped contracts plus the fixture's into `dir`; returns it (a root's
/// `contracts_dir`).
pub fn contracts_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    contracts_dir_with(dir, &contract())
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

/// [`with_contract`] with [`retrying_contract`].
pub fn with_retrying_contract(cfg: &mut mcp_root::config::RootConfig) {
    let dir = cfg.data_dir.with_file_name("fault-contracts");
    match contracts_dir_with(&dir, &retrying_contract()) {
        Ok(dir) => cfg.contracts_dir = Some(dir),
        Err(e) => panic!("cannot write the fault fixture's contracts: {e}"),
    }
}
