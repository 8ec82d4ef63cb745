//! `mcp-hubsim`: many simulated hubs against one root (fan-in), or a bounded soak.
//!
//! Fan-in (default): enrols `--hubs` targets over REST, connects one light simulated hub per
//! target (`mcp_tests::hubsim`), and prints the enrolment time, the registration time of all
//! hubs, and, with `--root-pid`, root's resident memory per connected hub (`VmRSS` from
//! `/proc/<pid>/status` before and after, divided by the hubs). Then it checks that root lists
//! every hub online and that routed `hub.get_status` calls to the first and the last target
//! come back from that target, and disconnects (after `--hold-secs`).
//!
//! Fleet (`--mode fleet`): enrols `--hubs` targets that connect and `--offline` more that
//! never do, connects the hubs serving the test read and the test write, `--failing` percent
//! of them failing both and `--slow` of them answering after `--slow-ms` (never the first,
//! the canary), prints `ready` with the fleet's selector, and holds until SIGINT or SIGTERM;
//! then prints how many times each target ran the write (`executions: 0xN 1xN 2xN`) and, with
//! `--executions-file`, writes them as JSON. For `tests/bench/fleet-runs.sh`.
//!
//! Soak (`--mode soak`): `--real-hubs` in-process hubs and `--clients` MCP clients doing mixed
//! reads and previewed writes for `--secs`, then the audit trail checked call by call
//! (`mcp_tests::soak`). Exit status 1 when an invariant broke.
//!
//! Loopback only: the root URL must be `http://127.0.0.1:PORT` (or localhost, [::1]).

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, ValueEnum};
use mcp_tests::hubsim::{self, Fleet, FleetOptions, SIM_TOOL};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    FanIn,
    Fleet,
    Soak,
}

#[derive(Parser, Debug)]
#[command(
    name = "mcp-hubsim",
    about = "Simulated hubs (fan-in) and a bounded soak against one root"
)]
struct Args {
    #[arg(long, value_enum, default_value = "fan-in")]
    mode: Mode,
    /// Root base URL, e.g. http://127.0.0.1:8700 (loopback only).
    #[arg(long)]
    root_url: String,
    /// Root's admin token.
    #[arg(long, env = "MCP_ROOT_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: String,
    /// Root's process id, for its resident memory before and after (fan-in).
    #[arg(long)]
    root_pid: Option<u32>,
    /// Simulated hubs (fan-in).
    #[arg(long, default_value_t = 1000)]
    hubs: usize,
    /// Target id prefix; `<prefix>-00000` … (default: hubsim-<unix seconds>, unique per run).
    #[arg(long)]
    prefix: Option<String>,
    /// Enrolment requests in flight at once.
    #[arg(long, default_value_t = 16)]
    enroll_concurrency: usize,
    /// Hub handshakes (dial, hello, welcome) in progress at once.
    #[arg(long, default_value_t = 64)]
    connect_concurrency: usize,
    /// Keep the fleet connected this long after the checks (fan-in).
    #[arg(long, default_value_t = 0)]
    hold_secs: u64,
    /// Real in-process hubs (soak).
    #[arg(long, default_value_t = 3)]
    real_hubs: usize,
    /// Concurrent MCP clients (soak).
    #[arg(long, default_value_t = 24)]
    clients: usize,
    /// How long the soak runs.
    #[arg(long, default_value_t = 60)]
    secs: u64,
    /// Targets enrolled whose hub never connects (fleet).
    #[arg(long, default_value_t = 0)]
    offline: usize,
    /// Percent of the hubs whose tools fail (fleet).
    #[arg(long, default_value_t = 0)]
    failing: usize,
    /// Hubs that answer only after --slow-ms (fleet).
    #[arg(long, default_value_t = 0)]
    slow: usize,
    #[arg(long, default_value_t = 3000)]
    slow_ms: u64,
    /// Where to write each target's executions of the test write, as JSON (fleet).
    #[arg(long)]
    executions_file: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    mcp_tests::init_crypto();
    hubsim::connect_url(&args.root_url)?;
    let root_url = args.root_url.trim_end_matches('/').to_owned();
    let prefix = args.prefix.clone().unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        format!("hubsim-{secs}")
    });
    match args.mode {
        Mode::FanIn => fan_in(&args, &root_url, &prefix).await,
        Mode::Fleet => fleet(&args, &root_url, &prefix).await,
        Mode::Soak => {
            let report = mcp_tests::soak::run(&mcp_tests::soak::SoakOptions {
                root_url,
                admin_token: args.admin_token.clone(),
                hubs: args.real_hubs,
                clients: args.clients,
                duration: Duration::from_secs(args.secs),
                target_prefix: prefix,
            })
            .await?;
            println!("{}", report.summary());
            let problems = report.problems();
            if problems.is_empty() {
                Ok(())
            } else {
                for p in &problems {
                    eprintln!("mcp-hubsim: {p}");
                }
                std::process::exit(1)
            }
        }
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

async fn fan_in(args: &Args, root_url: &str, prefix: &str) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let n = args.hubs;
    let rss = |pid: Option<u32>| -> anyhow::Result<Option<u64>> {
        pid.map(|p| hubsim::rss_kib(p).with_context(|| format!("reading /proc/{p}/status")))
            .transpose()
    };
    let own_pid = Some(std::process::id());
    let root_at_start = rss(args.root_pid)?;

    let targets = hubsim::target_ids(prefix, n);
    let t = Instant::now();
    let enrolled = hubsim::enroll_all(
        &http,
        root_url,
        &args.admin_token,
        &targets,
        "test",
        "subnet-sim",
        args.enroll_concurrency,
    )
    .await?;
    let enrol_time = t.elapsed();
    println!(
        "enrolled {n} targets in {:.2}s ({:.0}/s, {} at once)",
        enrol_time.as_secs_f64(),
        n as f64 / enrol_time.as_secs_f64().max(0.001),
        args.enroll_concurrency
    );

    let root_before = rss(args.root_pid)?;
    let own_before = rss(own_pid)?;
    let mut fleet = Fleet::connect(
        root_url,
        enrolled,
        FleetOptions {
            connect_concurrency: args.connect_concurrency,
            ..FleetOptions::default()
        },
    )
    .await?;
    println!(
        "registered {n} hubs in {:.2}s (first dial to last welcome, {} handshakes at once)",
        fleet.registration.as_secs_f64(),
        args.connect_concurrency
    );
    // Let root finish what it does after a welcome (stored descriptors, timeline).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let root_after = rss(args.root_pid)?;
    let own_after = rss(own_pid)?;
    if let (Some(start), Some(before), Some(after)) = (root_at_start, root_before, root_after) {
        println!(
            "root RSS: {:.1} MiB at start, {:.1} MiB after enrolment, {:.1} MiB with {n} hubs connected: {:.1} KiB per connected hub ({:.1} KiB per hub with its enrolment)",
            mib(start),
            mib(before),
            mib(after),
            after.saturating_sub(before) as f64 / n as f64,
            after.saturating_sub(start) as f64 / n as f64,
        );
    }
    if let (Some(before), Some(after)) = (own_before, own_after) {
        println!(
            "simulator RSS: {:.1} KiB per simulated hub",
            after.saturating_sub(before) as f64 / n as f64
        );
    }

    // Root sees them all, and routed calls reach the right one.
    let list = get(
        &http,
        root_url,
        &args.admin_token,
        &format!("/v1/root/hubs?status=online&q={prefix}&limit=1"),
    )
    .await?;
    let online = list["total"].as_u64().context("total")? as usize;
    println!("root lists {online} of {n} simulated targets online");
    for target in [targets.first(), targets.last()].into_iter().flatten() {
        let lease = post(
            &http,
            root_url,
            &args.admin_token,
            "/v1/root/mcp/sessions",
            json!({"target_id": target, "capability_profile": "InfraOpsRead", "ttl_sec": 60}),
        )
        .await?;
        let token = lease["token"].as_str().context("token")?;
        let res = http
            .post(format!("{root_url}/v1/root/mcp/call"))
            .bearer_auth(token)
            .json(&json!({"tool_id": SIM_TOOL, "arguments": {}}))
            .send()
            .await?;
        let body: Value = res.json().await?;
        anyhow::ensure!(
            body["result"]["target_id"] == json!(target),
            "routed {SIM_TOOL} for {target} answered {body}"
        );
    }
    println!("routed {SIM_TOOL} to the first and the last target: each answered as itself");
    if args.hold_secs > 0 {
        // SIGINT ends the hold early (a benchmark that is done with the fleet).
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(args.hold_secs)) => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    let stats = &fleet.stats;
    println!(
        "fleet: connected={} welcomes={} disconnects={} busy={} calls_ok={} calls_refused={}",
        stats.connected.load(std::sync::atomic::Ordering::Relaxed),
        stats.welcomes.load(std::sync::atomic::Ordering::Relaxed),
        stats.disconnects.load(std::sync::atomic::Ordering::Relaxed),
        stats.busy.load(std::sync::atomic::Ordering::Relaxed),
        stats.calls_ok.load(std::sync::atomic::Ordering::Relaxed),
        stats
            .calls_refused
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    fleet.shutdown().await;
    anyhow::ensure!(online == n, "root lists {online} of {n} hubs online");
    Ok(())
}

/// Every `n / k`-th of `ids` after the first (the canary), `k` of them.
fn spread(ids: &[String], k: usize, offset: usize) -> Vec<String> {
    if k == 0 || ids.len() < 2 {
        return Vec::new();
    }
    let step = ((ids.len() - 1) / k).max(1);
    (0..k)
        .map(|i| 1 + offset % step + i * step)
        .filter(|i| *i < ids.len())
        .map(|i| ids[i].clone())
        .collect()
}

async fn fleet(args: &Args, root_url: &str, prefix: &str) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let all = hubsim::target_ids(prefix, args.hubs + args.offline);
    let enrolled = hubsim::enroll_all(
        &http,
        root_url,
        &args.admin_token,
        &all,
        "test",
        "subnet-sim",
        args.enroll_concurrency,
    )
    .await?;
    // The offline ones are spread through the fleet too.
    let offline: std::collections::HashSet<String> =
        spread(&all, args.offline, 3).into_iter().collect();
    let online: Vec<hubsim::Enrolled> = enrolled
        .into_iter()
        .filter(|e| !offline.contains(&e.target_id))
        .collect();
    let ids: Vec<String> = online.iter().map(|e| e.target_id.clone()).collect();
    let failing = spread(&ids, args.hubs * args.failing / 100, 0);
    let slow = spread(&ids, args.slow, 1)
        .into_iter()
        .filter(|t| !failing.contains(t))
        .map(|t| (t, Duration::from_millis(args.slow_ms)))
        .collect();
    let faults = hubsim::Faults {
        failing: failing.iter().cloned().collect(),
        slow,
    };
    let mut fleet = Fleet::connect(
        root_url,
        online,
        FleetOptions {
            connect_concurrency: args.connect_concurrency,
            writes: true,
            faults: std::sync::Arc::new(faults.clone()),
            ..FleetOptions::default()
        },
    )
    .await?;
    let mut slow_ids: Vec<&String> = faults.slow.keys().collect();
    slow_ids.sort();
    println!(
        "ready: selector id={prefix}-*: {} targets, {} offline, {} failing, {} slow ({} ms): {:?}",
        all.len(),
        offline.len(),
        failing.len(),
        slow_ids.len(),
        args.slow_ms,
        slow_ids
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    let runs = fleet
        .stats
        .executions
        .lock()
        .map(|m| m.clone())
        .unwrap_or_default();
    fleet.shutdown().await;
    let mut histogram = std::collections::BTreeMap::<u32, usize>::new();
    for id in &ids {
        *histogram
            .entry(runs.get(id).copied().unwrap_or(0))
            .or_default() += 1;
    }
    let line: Vec<String> = histogram.iter().map(|(k, n)| format!("{k}x{n}")).collect();
    println!("executions: {}", line.join(" "));
    if let Some(path) = &args.executions_file {
        std::fs::write(path, serde_json::to_vec(&runs)?)?;
    }
    Ok(())
}

async fn get(
    http: &reqwest::Client,
    root_url: &str,
    admin: &str,
    path: &str,
) -> anyhow::Result<Value> {
    let res = http
        .get(format!("{root_url}{path}"))
        .bearer_auth(admin)
        .send()
        .await?;
    anyhow::ensure!(res.status().is_success(), "GET {path}: {}", res.status());
    Ok(res.json().await?)
}

async fn post(
    http: &reqwest::Client,
    root_url: &str,
    admin: &str,
    path: &str,
    body: Value,
) -> anyhow::Result<Value> {
    let res = http
        .post(format!("{root_url}{path}"))
        .bearer_auth(admin)
        .json(&body)
        .send()
        .await?;
    anyhow::ensure!(res.status().is_success(), "POST {path}: {}", res.status());
    Ok(res.json().await?)
}
