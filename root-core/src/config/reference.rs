//! The configuration reference (`docs/configuration.md`), generated from the configuration
//! types and their doc comments through their JSON Schema (`schemars`, rendered by
//! `mcp_shared::reference`). A test keeps the page equal to it.

use serde_json::Value;

use super::RootConfig;

/// The JSON Schema of root's configuration file.
pub fn schema() -> Value {
    serde_json::to_value(schemars::schema_for!(RootConfig)).unwrap_or(Value::Null)
}

/// The reference page of root's configuration file.
pub fn reference() -> String {
    mcp_shared::reference::render(
        &schema(),
        "Configuration reference",
        "Every key of root's configuration file (`mcp-root serve --config root.toml`), with its \
         type, default and meaning. Generated from the configuration types \
         (`mcp_root::config::reference`); a test keeps this page equal to them \
         (`MCP_UPDATE_DOCS=1 cargo test -p mcp-tests --test integration -- ops::docs` writes \
         it again). A key left out takes its default; an unknown key stops root at start. The \
         hub's file: [hub-configuration.md](hub-configuration.md).",
    )
}
