//! `mcp-load`: a bounded load generator for a root's MCP endpoint.
//!
//! Opens `--concurrency` MCP sessions (real rmcp clients), sends `--count` requests in total
//! (`tools/call` of `--tool` with `--arguments`, or `ping` with `--tool ping`), and prints one
//! summary line: calls/s, p50, p99, errors.

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
    /// Tool id, or `ping` for the ungoverned protocol ping.
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
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120)]
    max_seconds: u64,
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
    let mut clients = Vec::new();
    for i in 0..args.concurrency {
        clients.push(mcp_tests::mcp_client(&args.url, tokens[i % tokens.len()]).await?);
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in clients {
        let next = next.clone();
        let tool = args.tool.clone();
        let arguments = arguments.clone();
        let count = args.count;
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0usize;
            while next.fetch_add(1, Ordering::Relaxed) < count && Instant::now() < deadline {
                let t = Instant::now();
                let ok = if tool == "ping" {
                    client
                        .send_request(rmcp::model::ClientRequest::PingRequest(Default::default()))
                        .await
                        .is_ok()
                } else {
                    match client
                        .call_tool(
                            CallToolRequestParams::new(tool.clone())
                                .with_arguments(arguments.clone()),
                        )
                        .await
                    {
                        Ok(r) => r.is_error != Some(true),
                        Err(_) => false,
                    }
                };
                lat.push(t.elapsed());
                if !ok {
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
    lat.sort();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    println!(
        "tool={} calls={} concurrency={} leases={} elapsed={:.2}s calls/s={:.0} p50={:.2}ms p99={:.2}ms errors={}",
        args.tool,
        lat.len(),
        args.concurrency,
        tokens.len(),
        elapsed.as_secs_f64(),
        lat.len() as f64 / elapsed.as_secs_f64(),
        pct(0.50).as_secs_f64() * 1000.0,
        pct(0.99).as_secs_f64() * 1000.0,
        errors
    );
    Ok(())
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
