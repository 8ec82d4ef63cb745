//! `mcp-load`: a bounded load generator for a root's MCP endpoint.
//!
//! Opens `--concurrency` MCP sessions (real rmcp clients), sends `--count` requests in total
//! (`tools/call` of `--tool` with `--arguments`, or `ping` with `--tool ping`), and prints one
//! summary line: calls/s, p50, p99, errors.
//!
//! `--lifecycle wire` speaks the stateless 2026-07-28 lifecycle directly over one keep-alive
//! HTTP connection per worker (JSON-RPC bodies with the `_meta` and `Mcp-Method`/`Mcp-Name`
//! headers that protocol version requires): the rmcp client opens a new TCP connection for
//! most requests, which would make connection set-up, not the call, what is measured.
//!
//! `--execute` (session lifecycle, a write tool): each call is a write's execute, after a
//! preview for its confirmation token that is not timed; the execute carries a key of its
//! own, so every one runs on the hub.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use rmcp::model::CallToolRequestParams;

#[derive(Parser, Debug)]
#[command(name = "mcp-load", about = "Load generator for a root's MCP endpoint")]
struct Args {
    /// MCP endpoint, e.g. http://127.0.0.1:8700/mcp (loopback only).
    #[arg(long)]
    url: String,
    /// Lease bearer; several, comma-separated, spread the sessions over several leases (a
    /// lease's per-tool concurrency limit would otherwise answer `busy`).
    #[arg(long, env = "MCP_LOAD_TOKEN", hide_env_values = true)]
    token: String,
    /// Tool id, or `ping` for the ungoverned protocol ping (`discover`, i.e. `server/discover`,
    /// with `--lifecycle wire`).
    #[arg(long, default_value = "ping")]
    tool: String,
    /// Tool arguments as a JSON object.
    #[arg(long, default_value = "{}")]
    arguments: String,
    /// Total requests.
    #[arg(long, default_value_t = 2000)]
    count: usize,
    /// Concurrent sessions.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// `session`: the `initialize` handshake and an `Mcp-Session-Id` (protocol 2025-11-25, every
    /// answer an SSE stream); `stateless`: `server/discover` and self-contained requests
    /// (protocol 2026-07-28, answers as plain JSON when root can).
    #[arg(long, default_value = "session", value_parser = ["session", "stateless", "wire"])]
    lifecycle: String,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120)]
    max_seconds: u64,
    /// Time a write's execute (each after an untimed preview) instead of the call as given.
    #[arg(long)]
    execute: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let host = url_host(&args.url);
    anyhow::ensure!(
        host == "127.0.0.1" || host == "localhost" || host == "[::1]",
        "mcp-load only targets loopback addresses, not `{host}`"
    );
    let arguments: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&args.arguments)
            .map_err(|e| anyhow::anyhow!("--arguments must be a JSON object: {e}"))?;
    let next = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(args.max_seconds);
    let tokens: Vec<&str> = args
        .token
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    anyhow::ensure!(!tokens.is_empty(), "--token must name at least one bearer");
    anyhow::ensure!(
        !args.execute || args.lifecycle == "session",
        "--execute runs on the session lifecycle"
    );
    if args.lifecycle == "wire" {
        let (lat, errors, elapsed) = run_wire(&args, &tokens, &arguments, next, deadline).await?;
        report(&args, tokens.len(), lat, errors, elapsed);
        return Ok(());
    }
    let mut clients = Vec::new();
    for i in 0..args.concurrency {
        let token = tokens[i % tokens.len()];
        clients.push(if args.lifecycle == "stateless" {
            mcp_tests::mcp_client_stateless(&args.url, token).await?
        } else {
            mcp_tests::mcp_client(&args.url, token).await?
        });
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in clients {
        let next = next.clone();
        let tool = args.tool.clone();
        let arguments = arguments.clone();
        let count = args.count;
        let execute = args.execute;
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0usize;
            while next.fetch_add(1, Ordering::Relaxed) < count && Instant::now() < deadline {
                let (elapsed, failure) = if tool == "ping" {
                    let t = Instant::now();
                    let failure = client
                        .send_request(rmcp::model::ClientRequest::PingRequest(Default::default()))
                        .await
                        .err()
                        .map(|e| e.to_string());
                    (t.elapsed(), failure)
                } else if execute {
                    executed(&client, &tool, &arguments).await
                } else {
                    let t = Instant::now();
                    let failure = call(&client, &tool, arguments.clone()).await.err();
                    (t.elapsed(), failure)
                };
                lat.push(elapsed);
                if let Some(why) = failure {
                    // The first failure of each session is shown; the rest are counted.
                    if errors == 0 {
                        eprintln!("mcp-load: {tool} failed: {why}");
                    }
                    errors += 1;
                }
            }
            let _ = client.cancel().await;
            (lat, errors)
        }));
    }
    let mut lat = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await?;
        lat.extend(l);
        errors += e;
    }
    let elapsed = started.elapsed();
    report(&args, tokens.len(), lat, errors, elapsed);
    Ok(())
}

/// One `tools/call`: its structured result, or why it failed.
async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &str,
    arguments: serde_json::Map<String, serde_json::Value>,
) -> Result<serde_json::Value, String> {
    match client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
    {
        Ok(r) if r.is_error == Some(true) => Err(format!("{:?}", r.content)),
        Ok(r) => Ok(r.structured_content.unwrap_or_default()),
        Err(e) => Err(e.to_string()),
    }
}

/// A write's preview (untimed), then its execute under a new key: the execute's time.
async fn executed(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &str,
    arguments: &serde_json::Map<String, serde_json::Value>,
) -> (Duration, Option<String>) {
    let preview = match call(client, tool, arguments.clone()).await {
        Ok(p) => p,
        Err(e) => return (Duration::ZERO, Some(format!("preview: {e}"))),
    };
    // MCP's structured content is the result itself; REST wraps it in `result`.
    let Some(token) = preview["confirmation_token"].as_str() else {
        return (
            Duration::ZERO,
            Some(format!("no confirmation token in {preview}")),
        );
    };
    let mut execute = arguments.clone();
    execute.insert("phase".into(), "execute".into());
    execute.insert("confirmation_token".into(), token.into());
    execute.insert(
        "idempotency_key".into(),
        uuid::Uuid::now_v7().to_string().into(),
    );
    let t = Instant::now();
    let failure = call(client, tool, execute).await.err();
    (t.elapsed(), failure)
}

/// Prints the summary line.
fn report(args: &Args, leases: usize, mut lat: Vec<Duration>, errors: usize, elapsed: Duration) {
    lat.sort();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    println!(
        "tool={}{} lifecycle={} calls={} concurrency={} leases={} elapsed={:.2}s calls/s={:.0} p50={:.2}ms p99={:.2}ms errors={}",
        args.tool,
        if args.execute { " (execute)" } else { "" },
        args.lifecycle,
        lat.len(),
        args.concurrency,
        leases,
        elapsed.as_secs_f64(),
        lat.len() as f64 / elapsed.as_secs_f64(),
        pct(0.50).as_secs_f64() * 1000.0,
        pct(0.99).as_secs_f64() * 1000.0,
        errors
    );
}

/// The `wire` lifecycle: one keep-alive connection per worker, stateless 2026-07-28 requests.
async fn run_wire(
    args: &Args,
    tokens: &[&str],
    arguments: &serde_json::Map<String, serde_json::Value>,
    next: Arc<AtomicUsize>,
    deadline: Instant,
) -> anyhow::Result<(Vec<Duration>, usize, Duration)> {
    anyhow::ensure!(
        args.tool != "ping",
        "protocol 2026-07-28 has no `ping`; its ungoverned baseline is `--tool discover` \
         (`server/discover`)"
    );
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "mcp-load", "version": env!("CARGO_PKG_VERSION") },
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    mcp_tests::init_crypto();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..args.concurrency {
        // A client of its own per worker: one connection each, kept alive.
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()?;
        let url = args.url.clone();
        let token = format!("Bearer {}", tokens[i % tokens.len()]);
        let tool = args.tool.clone();
        let count = args.count;
        let body = if tool == "discover" {
            serde_json::json!({ "jsonrpc": "2.0", "method": "server/discover", "params": { "_meta": meta } })
        } else {
            serde_json::json!({
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": { "name": tool, "arguments": arguments, "_meta": meta },
            })
        };
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0usize;
            let mut id = 0u64;
            let mut body = body;
            while next.fetch_add(1, Ordering::Relaxed) < count && Instant::now() < deadline {
                id += 1;
                body["id"] = id.into();
                let t = Instant::now();
                let failure = wire_call(&http, &url, &token, &tool, &body).await.err();
                lat.push(t.elapsed());
                if let Some(why) = failure {
                    if errors == 0 {
                        eprintln!("mcp-load: {tool} failed: {why}");
                    }
                    errors += 1;
                }
            }
            (lat, errors)
        }));
    }
    let mut lat = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await?;
        lat.extend(l);
        errors += e;
    }
    Ok((lat, errors, started.elapsed()))
}

/// One `tools/call` (or `server/discover`); an error unless the answer is a JSON-RPC result
/// without `isError: true`.
async fn wire_call(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    tool: &str,
    body: &serde_json::Value,
) -> anyhow::Result<()> {
    let mut req = http
        .post(url)
        .header("Authorization", token)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28");
    req = if tool == "discover" {
        req.header("Mcp-Method", "server/discover")
    } else {
        req.header("Mcp-Method", "tools/call")
            .header("Mcp-Name", tool)
    };
    let resp = req.body(serde_json::to_vec(body)?).send().await?;
    let status = resp.status();
    let sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let bytes = resp.bytes().await?;
    // An SSE answer (root had something to send first): the last `data:` line is the result.
    let data: &[u8] = if sse {
        let text = std::str::from_utf8(&bytes)?;
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .rfind(|d| !d.is_empty())
            .ok_or_else(|| anyhow::anyhow!("HTTP {status}: an SSE answer without data"))?
            .as_bytes()
    } else {
        &bytes
    };
    check_answer(status, data)
}

/// An error unless `data` is a JSON-RPC 2.0 result without `isError: true`.
fn check_answer(status: reqwest::StatusCode, data: &[u8]) -> anyhow::Result<()> {
    let answer: WireAnswer = serde_json::from_slice(data)?;
    if answer.jsonrpc == "2.0"
        && answer.error.is_none()
        && answer.result.is_some_and(|r| r.is_error != Some(true))
    {
        return Ok(());
    }
    // A failure: read it whole to say what it was.
    let json: serde_json::Value = serde_json::from_slice(data)?;
    if let Some(e) = json.get("error") {
        anyhow::bail!("HTTP {status}: {e}");
    }
    match json.pointer("/result/content") {
        Some(content) if json["jsonrpc"] == "2.0" => anyhow::bail!("HTTP {status}: {content}"),
        _ => anyhow::bail!("HTTP {status}: not a JSON-RPC 2.0 result: {json}"),
    }
}

/// What the load client reads of a JSON-RPC answer on success: the whole text is parsed (a
/// malformed answer is an error) but only the members that decide success are kept, so the
/// client's own cost grows little with the size of what it is sent (it shares the cores
/// with root, so a client building a tree of every answer would measure itself).
#[derive(serde::Deserialize)]
struct WireAnswer {
    jsonrpc: String,
    result: Option<WireResult>,
    error: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct WireResult {
    #[serde(rename = "isError")]
    is_error: Option<bool>,
}

fn url_host(url: &str) -> String {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let authority = rest.split('/').next().unwrap_or("");
    if authority.starts_with('[') {
        return authority
            .split(']')
            .next()
            .map(|h| format!("{h}]"))
            .unwrap_or_default();
    }
    authority.split(':').next().unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(body: &str) -> Result<(), String> {
        check_answer(reqwest::StatusCode::OK, body.as_bytes()).map_err(|e| e.to_string())
    }

    #[test]
    fn only_a_json_rpc_result_without_is_error_counts_as_answered() {
        let big = "x".repeat(10_000);
        assert_eq!(check(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), Ok(()));
        assert_eq!(
            check(&format!(
                r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{big}"}}],"isError":false,"structuredContent":{{"a":[1,{{"b":null}}]}}}}}}"#
            )),
            Ok(())
        );
        let tool_error = check(
            r#"{"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[{"type":"text","text":"denied"}]}}"#,
        );
        assert!(
            tool_error.as_ref().is_err_and(|e| e.contains("denied")),
            "{tool_error:?}"
        );
        let rpc_error = check(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}"#);
        assert!(
            rpc_error.as_ref().is_err_and(|e| e.contains("-32602")),
            "{rpc_error:?}"
        );
        for bad in [
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"isError":"yes"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
            "",
        ] {
            assert!(check(bad).is_err(), "{bad} is not an answer");
        }
    }
}
