//! A bare rmcp server for the front-door benchmark (`tests/bench/frontdoor.sh`): rmcp's own
//! Streamable HTTP transport, sessions kept by rmcp, one tool, `echo`, that answers its
//! arguments. No bearer, no policy, no audit: the ceiling a gateway's MCP front is compared
//! with, measured by the same load client in the same window.
//!   mcp-echo --listen 127.0.0.1:PORT

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InitializeResult,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::{ErrorData, RoleServer, ServerHandler};

#[derive(Clone)]
struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = serde_json::json!({ "type": "object" });
        let schema = Arc::new(schema.as_object().cloned().unwrap_or_default());
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "echo",
            "Answers its arguments",
            schema,
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let value = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let text = serde_json::to_string(&value).unwrap_or_default();
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(value);
        Ok(result.into())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let listen = match args.as_slice() {
        [_, flag, addr] if flag == "--listen" => addr.clone(),
        _ => anyhow::bail!("usage: mcp-echo --listen 127.0.0.1:PORT"),
    };
    let addr: std::net::SocketAddr = listen.parse()?;
    anyhow::ensure!(addr.ip().is_loopback(), "mcp-echo listens on loopback only");
    let mut config = StreamableHttpServerConfig::default();
    config.allowed_hosts = Vec::new();
    let service = StreamableHttpService::new(
        || Ok(Echo),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, app).await?;
    Ok(())
}
