//! Root's memory per connected hub, checked on every run: a root process of this build, a
//! few hundred simulated hubs (`mcp_tests::hubsim`, the real protocol over real WebSockets)
//! connected to it, and root's resident memory before and after. The bound is generous
//! ([`BOUND_KIB`], against some 40 to 70 KiB measured on release builds), so allocator noise
//! cannot fail it, while a change that doubles or triples what a hub costs root does (round
//! two once tripled it, found only by a manual benchmark). The figure is printed;
//! BENCHMARKS.md has the release one at fleet size.

use std::time::Duration;

use mcp_tests::hubsim::{self, Fleet, FleetOptions};
use mcp_tests::root_process::RootProcess;

/// Hubs connected for the measurement.
const HUBS: usize = 300;
/// Most root may grow per connected hub, in KiB.
const BOUND_KIB: u64 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_per_connected_hub_stays_bounded() {
    mcp_tests::init_crypto();
    let dir = tempfile::tempdir().unwrap();
    let RootProcess {
        proc: root,
        base,
        admin,
    } = RootProcess::serve(dir.path(), Duration::from_secs(30))
        .await
        .unwrap();
    let http = mcp_tests::http_client();

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
