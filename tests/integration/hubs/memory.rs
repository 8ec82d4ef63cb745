//! Root's memory per connected hub, checked on every run: a root process of this build, a
//! few hundred simulated hubs (`mcp_tests::hubsim`, the real protocol over real WebSockets)
//! connected to it, and root's resident memory before and after. The bound is generous
//! ([`BOUND_KIB`], against some 40 to 70 KiB measured on release builds), so allocator noise
//! cannot fail it, while a change that doubles or triples what a hub costs root does (round
//! two once tripled it, found only by a manual benchmark). The figure is printed;
//! BENCHMARKS.md has the release one at fleet size.

use std::process::Command;
use std::time::Duration;

use mcp_tests::hubsim::{self, Fleet, FleetOptions};
use mcp_tests::process::Proc;
use mcp_tests::workspace_bin;

/// Hubs connected for the measurement.
const HUBS: usize = 300;
/// Most root may grow per connected hub, in KiB.
const BOUND_KIB: u64 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_per_connected_hub_stays_bounded() {
    mcp_tests::init_crypto();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("root");
    let mut root = Proc::spawn(
        "mcp-root serve",
        Command::new(workspace_bin("mcp-root").unwrap())
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data),
        dir.path().join("root.log"),
    );
    let base = mcp_tests::ports::announced_root_url(&mut root, Duration::from_secs(30)).await;
    let http = reqwest::Client::new();
    mcp_tests::until("root answers /healthz", async || {
        http.get(format!("{base}/healthz")).send().await.is_ok()
    })
    .await;
    let admin = std::fs::read_to_string(data.join("admin.token"))
        .unwrap()
        .trim()
        .to_owned();

    // A few hubs first, so that what root allocates once (pools, the first descriptor set,
    // the runtime's workers) is in the baseline, not counted per hub.
    let warm = hubsim::enroll_all(
        &http,
        &base,
        &admin,
        &hubsim::target_ids("warm", 20),
        "test",
        "subnet-sim",
        8,
    )
    .await
    .unwrap();
    let mut warm = Fleet::connect(&base, warm, FleetOptions::default())
        .await
        .unwrap();
    let enrolled = hubsim::enroll_all(
        &http,
        &base,
        &admin,
        &hubsim::target_ids("mem", HUBS),
        "test",
        "subnet-sim",
        8,
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = hubsim::rss_kib(root.id()).unwrap();

    let mut fleet = Fleet::connect(&base, enrolled, FleetOptions::default())
        .await
        .unwrap();
    // What root does after a welcome (stored descriptors, the timeline) settles first.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = hubsim::rss_kib(root.id()).unwrap();
    let per_hub = after.saturating_sub(before) / HUBS as u64;
    println!(
        "root RSS {before} KiB before, {after} KiB with {HUBS} more hubs connected: \
         {per_hub} KiB per connected hub (debug build)"
    );
    assert_eq!(
        fleet
            .stats
            .connected
            .load(std::sync::atomic::Ordering::Relaxed),
        HUBS
    );
    assert!(
        per_hub <= BOUND_KIB,
        "root grew {per_hub} KiB per connected hub (bound {BOUND_KIB} KiB): {before} KiB -> \
         {after} KiB for {HUBS} hubs"
    );
    fleet.shutdown().await;
    warm.shutdown().await;
}
