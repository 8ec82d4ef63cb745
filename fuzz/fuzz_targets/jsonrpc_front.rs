//! Fuzzes the MCP endpoint's front (`mcp_root::mcp::front::check_body`): any bytes are one JSON-RPC
//! message or a refusal with a client-error status and a JSON-RPC error code, never a panic
//! or a stack overflow.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_root::mcp::error::McpError;
use mcp_root::mcp::front;

fuzz_target!(|data: &[u8]| {
    match front::check_body(data) {
        Ok(probe) => {
            // Accepted bodies are JSON objects (serde_json agrees) whose id is a string or an
            // integer.
            let v: serde_json::Value = serde_json::from_slice(data).expect("accepted is JSON");
            assert!(v.is_object());
            if let Some(id) = probe.id {
                assert!(id.is_string() || id.is_i64() || id.is_u64());
            }
        }
        Err(e) => {
            assert!(e.status().is_client_error());
            // Parse error or Invalid Request.
            assert!([-32700, -32600].contains(&e.code().0));
            let body = McpError::from(e).body();
            assert_eq!(body["jsonrpc"], "2.0");
            assert!(body["id"].is_null());
        }
    }
});
