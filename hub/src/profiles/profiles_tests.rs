//! Tests of ProfileOps: growth, sampling this process, finishing a session into an artifact
//! and an incident, and interrupted sessions.

use std::path::Path;

use super::store::lock;
use super::*;
use crate::context::HubContext;

fn s(t_ms: u64, rss: u64) -> Sample {
    Sample {
        t_ms,
        rss_bytes: rss,
        pss_bytes: None,
        anon_bytes: None,
        swap_bytes: None,
        source: "status".into(),
    }
}

#[test]
fn growth_over_the_window() {
    assert_eq!(growth(&[]), None);
    let one = growth(&[s(0, 100)]).expect("one");
    assert_eq!((one.growth_bytes, one.slope_bytes_per_sec), (0, None));
    let g = growth(&[s(0, 1000), s(1000, 3000), s(2000, 2000), s(3000, 4000)]).expect("g");
    assert_eq!(
        (
            g.start_rss_bytes,
            g.end_rss_bytes,
            g.peak_rss_bytes,
            g.growth_bytes
        ),
        (1000, 4000, 4000, 3000)
    );
    assert_eq!(g.growth_percent, Some(300.0));
    // Least squares over (0,1000) (1,3000) (2,2000) (3,4000): slope 800 bytes/s.
    assert!((g.slope_bytes_per_sec.expect("slope") - 800.0).abs() < 1e-9);
    let shrink = growth(&[s(0, 4000), s(1000, 1000)]).expect("shrink");
    assert_eq!(shrink.growth_bytes, -3000);
}

#[test]
fn a_sample_of_this_process() {
    let me = sample(std::process::id(), 7).expect("sample");
    assert_eq!(me.t_ms, 7);
    assert!(me.rss_bytes > 0);
    assert!(["smaps_rollup", "status"].contains(&me.source.as_str()));
    assert!(me.anon_bytes.is_some());
    assert_eq!(sample(u32::MAX, 0), None);
}

fn shared(dir: &Path, config: ProfilingConfig) -> Shared {
    Shared {
        dir: dir.join(PROFILES_DIR),
        config,
        target_id: "hub:t".into(),
        index: Mutex::new(None),
        live: Mutex::new(HashMap::new()),
        live_heap: Mutex::new(HashMap::new()),
        epoch: Mutex::new(CancellationToken::new()),
        evidence_seq: tokio::sync::watch::channel(0).0,
    }
}

fn running(id: &str, service: &str) -> Session {
    Session {
        session_id: id.into(),
        service: service.into(),
        mode: Mode::Normal,
        interval_ms: 100,
        duration_sec: 1,
        state: SessionState::Running,
        started_at: "2026-01-01T00:00:00Z".into(),
        ended_at: None,
        pid: Some(1),
        samples: 0,
        retry_of: None,
        artifact_id: None,
        incident_ids: Vec::new(),
        growth: None,
        published_at: None,
        error: None,
        heap: None,
        heap_error: None,
    }
}

#[test]
fn finishing_writes_the_artifact_and_raises_an_incident_past_a_threshold() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = ProfilingConfig {
        growth_threshold_bytes: 1000,
        growth_threshold_percent: 1000.0,
        ..ProfilingConfig::default()
    };
    let sh = shared(dir.path(), config);
    sh.update(|i| {
        i.sessions.push(running("a", "web"));
        i.sessions.push(running("b", "web"));
    })
    .expect("index");
    let a = sh
        .finish(
            "a",
            SessionState::Completed,
            None,
            vec![s(0, 5000), s(100, 6500)],
            None,
        )
        .expect("finish");
    assert_eq!(a.incident_ids.len(), 1, "1500 bytes >= 1000");
    let b = sh
        .finish(
            "b",
            SessionState::Stopped,
            None,
            vec![s(0, 5000), s(100, 5500)],
            None,
        )
        .expect("finish");
    assert!(
        b.incident_ids.is_empty(),
        "500 bytes and 10% are under both thresholds"
    );
    // On disk: a fresh reader sees both, the artifacts match their SHA-256.
    let again = shared(dir.path(), ProfilingConfig::default());
    let index = again.with(|i| i.clone()).expect("index");
    assert_eq!(index.sessions.len(), 2);
    assert_eq!(index.incidents.len(), 1);
    assert_eq!(index.incidents[0].session_id, "a");
    for meta in &index.artifacts {
        let bytes = std::fs::read(again.artifact_path(&meta.artifact_id)).expect("artifact");
        assert_eq!(hex::encode(Sha256::digest(&bytes)), meta.sha256);
        assert_eq!(bytes.len() as u64, meta.size_bytes);
        let v: Value = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(v["format"], ARTIFACT_FORMAT);
        assert_eq!(v["samples"].as_array().map(Vec::len), Some(2));
    }
    // Admission: one session per service, at most max_concurrent_sessions.
    let cfg = ProfilingConfig {
        max_concurrent_sessions: 1,
        ..ProfilingConfig::default()
    };
    let mut idx = Index::default();
    assert_eq!(admission(&cfg, &idx, "web"), None);
    idx.sessions.push(running("c", "web"));
    assert!(admission(&cfg, &idx, "web").is_some_and(|m| m.contains("`c`")));
    assert!(admission(&cfg, &idx, "db").is_some_and(|m| m.contains("max_concurrent_sessions")));
}

/// A hub that crashed with a session running: the next start finishes it `interrupted`
/// with the samples its file kept.
#[tokio::test]
async fn a_session_left_running_is_interrupted_at_the_next_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = HubConfig::new("hub:t", "test", "ws://x", "t", dir.path());
    let sh = shared(dir.path(), ProfilingConfig::default());
    let id = uuid::Uuid::now_v7().to_string();
    sh.update(|i| i.sessions.push(running(&id, "web")))
        .expect("index");
    let lines: Vec<String> = [s(0, 100), s(100, 200)]
        .iter()
        .map(|x| serde_json::to_string(x).expect("json"))
        .collect();
    std::fs::write(sh.samples_path(&id), lines.join("\n") + "\n").expect("samples");
    // A heap snapshot the session kept before the hub stopped, never recorded.
    let orphan = sh.dir.join(format!("{}.pb.gz", uuid::Uuid::now_v7()));
    std::fs::write(&orphan, b"kept").expect("snapshot");
    let ctx = Arc::new(HubContext::new(config).expect("context"));
    ctx.machine
        .profiles
        .start(ctx.machine.services.clone())
        .await
        .expect("start");
    let (session, samples) = ctx.machine.profiles.session(&id).await.expect("kept");
    assert_eq!(session.state, SessionState::Interrupted);
    assert_eq!(session.samples, 2);
    assert_eq!(samples.len(), 2);
    assert!(
        session
            .error
            .as_deref()
            .is_some_and(|e| e.contains("hub stopped"))
    );
    assert!(
        !sh.samples_path(&id).exists(),
        "the samples file became the artifact"
    );
    assert!(!orphan.exists(), "an unrecorded snapshot is swept");
    ctx.machine.profiles.stop().await;
}

/// The evidence log: each change marks what it touched with the next position; root is sent
/// what changed after its position, the small artifacts with their bytes, in batches that
/// continue one another; an index of an earlier build starts a new epoch with everything.
#[test]
fn the_evidence_log_marks_changes_and_batches_them_for_root() {
    use mcp_shared::profiling::EvidenceRecord;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = ProfilingConfig {
        growth_threshold_bytes: 1000,
        growth_threshold_percent: 1000.0,
        evidence_artifact_max_bytes: 100_000,
        ..ProfilingConfig::default()
    };
    let sh = shared(dir.path(), config.clone());
    let (epoch, seq) = sh
        .with(|i| (i.evidence.epoch.clone(), i.evidence.seq))
        .expect("log");
    assert!(!epoch.is_empty());
    assert_eq!(seq, 0, "nothing recorded yet");
    sh.update(|i| i.sessions.push(running("a", "web")))
        .expect("a");
    sh.update(|i| i.sessions.push(running("b", "web")))
        .expect("b");
    assert_eq!(*sh.evidence_seq.borrow(), 2);
    // Unchanged records keep their marks; a changed one moves to the end.
    sh.finish(
        "a",
        SessionState::Completed,
        None,
        vec![s(0, 1000), s(100, 5000)],
        None,
    )
    .expect("finish");
    let path = |id: &str| sh.artifact_path(id);
    let changes = sh
        .with(|i| evidence::changes_after(i, 0, path, 100_000))
        .expect("changes");
    let order: Vec<(u64, &str)> = changes.iter().map(|c| (c.seq, c.record.kind())).collect();
    assert_eq!(
        order,
        vec![
            (2, "session"),
            (3, "artifact"),
            (4, "incident"),
            (5, "session")
        ],
        "b, then what finishing a touched"
    );
    let after_b = sh
        .with(|i| evidence::changes_after(i, 2, path, 100_000))
        .expect("after");
    assert_eq!(after_b.len(), 3);
    let loaded: Vec<Change> = after_b.into_iter().map(Change::load).collect();
    let EvidenceRecord::Artifact { meta, content } = &loaded[0].record else {
        panic!("the artifact first");
    };
    let bytes = content.as_deref().expect("small: sent with its bytes");
    assert_eq!(hex::encode(Sha256::digest(bytes.as_bytes())), meta.sha256);
    // Over the limit, the record goes without its bytes.
    let big = sh
        .with(|i| evidence::changes_after(i, 2, path, 10))
        .expect("changes");
    let EvidenceRecord::Artifact { content, .. } =
        &big.into_iter().next().expect("one").load().record
    else {
        panic!("the artifact first");
    };
    assert_eq!(*content, None);

    // Batches continue one another and end at the last change.
    let batches = evidence::frames(&epoch, 1, loaded);
    assert_eq!(batches.len(), 1);
    assert_eq!((batches[0].after, batches[0].upto), (1, 5));

    // An index without a log (an earlier build's) starts a new epoch with every record.
    let mut old: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sh.index_path()).expect("index")).expect("json");
    old.as_object_mut().expect("object").remove("evidence");
    std::fs::write(sh.index_path(), old.to_string()).expect("write");
    let again = shared(dir.path(), config);
    let (epoch2, seq2) = again
        .with(|i| (i.evidence.epoch.clone(), i.evidence.seq))
        .expect("log");
    assert_ne!(epoch2, epoch);
    assert_eq!(seq2, 4, "two sessions, an artifact and an incident");
}

#[test]
fn evidence_batches_stay_inside_a_frame() {
    use mcp_shared::profiling::EvidenceRecord;
    let changes: Vec<Change> = (1..=600)
        .map(|n| Change {
            seq: n,
            record: EvidenceRecord::Session(running(&format!("s-{n}"), "web")),
            content_of: None,
        })
        .collect();
    let batches = evidence::frames("e", 0, changes);
    assert_eq!(batches.len(), 3, "at most 256 records each");
    assert_eq!((batches[0].after, batches[0].upto), (0, 256));
    assert_eq!((batches[1].after, batches[1].upto), (256, 512));
    assert_eq!((batches[2].after, batches[2].upto), (512, 600));
    for b in &batches {
        let frame = serde_json::to_string(b).expect("json");
        assert!(frame.len() < mcp_shared::protocol::MAX_FRAME_BYTES);
    }
}

/// A keeper of the snapshots process 1 writes in `cfg.dir` (from the test sessions' start).
fn keeper(cfg: &crate::config::HeapProfilesConfig) -> Keeper {
    let since = mcp_shared::time::parse("2026-01-01T00:00:00Z").expect("time");
    Keeper::new(cfg.clone(), Some(1), since.into())
}

/// A heap directory `name` under `dir` whose snapshots are kept as `keep` at most.
fn heap_dir(dir: &Path, name: &str, keep: u32) -> crate::config::HeapProfilesConfig {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).expect("heap dir");
    crate::config::HeapProfilesConfig {
        dir: d,
        format: crate::config::HeapFormat::Pprof,
        max_bytes: 1 << 20,
        keep,
        keep_paths: Vec::new(),
    }
}

/// Writes `bytes` as snapshot `name`, a little after the one before it.
fn write_snapshot(cfg: &crate::config::HeapProfilesConfig, name: &str, bytes: &[u8]) {
    std::thread::sleep(std::time::Duration::from_millis(15));
    std::fs::write(cfg.dir.join(name), bytes).expect("snapshot");
}

#[test]
fn a_session_names_the_site_its_heap_snapshots_grew_most_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let leaking = heap_dir(dir.path(), "leaking", 16);
    write_snapshot(&leaking, "heap.1.1.pb.gz", &heap::pprof::go_style(1_000));
    write_snapshot(&leaking, ".heap.1.2.pb.gz.partial", b"half");
    write_snapshot(&leaking, "heap.1.2.pb.gz", &heap::pprof::go_style(900_000));
    write_snapshot(&leaking, "heap.4242.7.pb.gz", &heap::pprof::go_style(5));
    let config = ProfilingConfig {
        growth_threshold_bytes: 1000,
        ..ProfilingConfig::default()
    };
    let sh = shared(dir.path(), config);
    let ids: Vec<String> = (0..3).map(|_| uuid::Uuid::now_v7().to_string()).collect();
    for id in &ids {
        sh.update(|i| i.sessions.push(running(id, "web")))
            .expect("push");
    }
    let samples = || vec![s(0, 5000), s(100, 6500)];
    // While the session runs, its snapshots are kept as they come, and get_session sums up
    // what was kept so far.
    let mut k = keeper(&leaking);
    k.collect(&ids[0], "web", false, |m| sh.file_of(m));
    assert_eq!(
        k.kept.len(),
        2,
        "the hidden temporary and process 4242's are not kept"
    );
    lock(&sh.live).insert(ids[0].clone(), samples());
    lock(&sh.live_heap).insert(ids[0].clone(), Arc::new(Mutex::new(k.clone())));
    let so_far = sh.heap_so_far(sh.session(&ids[0]).expect("session"));
    assert_eq!(
        so_far
            .heap
            .as_ref()
            .map(|h| h.top_sites[0].function.as_str()),
        Some("main.leakCache")
    );
    // The service's files may go: what was kept stays.
    std::fs::remove_file(leaking.dir.join("heap.1.1.pb.gz")).expect("rm");
    let a = sh
        .finish(&ids[0], SessionState::Completed, None, samples(), Some(k))
        .expect("finish");
    let h = a.heap.as_ref().expect("a heap summary");
    assert_eq!(
        (
            h.top_sites[0].function.as_str(),
            h.top_sites[0].growth_bytes
        ),
        ("main.leakCache", 899_000)
    );
    assert_eq!(h.top_sites[0].frames, ["main.leakCache", "main.main"]);
    assert_eq!(
        (h.from_snapshot.as_deref(), h.to_snapshot.as_str()),
        (Some("heap.1.1.pb.gz"), "heap.1.2.pb.gz")
    );
    assert!(
        h.skipped[0].contains("written by process 4242, not the session's 1"),
        "{:?}",
        h.skipped
    );
    assert!(h.symbolized);
    assert_eq!(h.snapshots_kept, 2);
    // Both snapshots are artifacts: recorded with the session, digest checked, paths
    // redacted, and binary: always in chunks.
    let kept: Vec<ArtifactMeta> = sh
        .with(|i| i.artifacts.clone())
        .expect("index")
        .into_iter()
        .filter(|m| m.kind == ArtifactKind::HeapSnapshot)
        .collect();
    assert_eq!(kept.len(), 2);
    assert_eq!(
        h.to_artifact_id.as_deref(),
        Some(kept[1].artifact_id.as_str())
    );
    for m in &kept {
        assert_eq!(m.session_id, ids[0]);
        assert_eq!(m.format.as_deref(), Some("pprof"));
        let bytes = std::fs::read(sh.file_of(m)).expect("kept file");
        assert_eq!(hex::encode(Sha256::digest(&bytes)), m.sha256);
        assert_eq!(bytes.len() as u64, m.size_bytes);
        let raw = flate2::read::GzDecoder::new(&bytes[..]);
        let text = String::from_utf8_lossy(
            &std::io::Read::bytes(raw)
                .map(|b| b.expect("gz"))
                .collect::<Vec<u8>>(),
        )
        .into_owned();
        assert!(
            text.contains("<redacted>/app") && !text.contains("/srv/app"),
            "{text}"
        );
    }
    let incident = sh
        .with(|i| i.incidents.last().cloned())
        .expect("index")
        .expect("an incident");
    assert_eq!(incident.top_site.as_deref(), Some("main.leakCache"));
    assert!(
        incident.detail.contains("grew most in `main.leakCache`"),
        "{}",
        incident.detail
    );
    // What the tools answer with these records fits their contracts.
    let contract = |tool: &str| -> serde_json::Value {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../schemas/tools/{tool}.json"));
        serde_json::from_str(&std::fs::read_to_string(path).expect("contract")).expect("JSON")
    };
    let fits = |schema: &serde_json::Value, value: serde_json::Value| {
        let v = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(schema)
            .expect("schema");
        let errors: Vec<String> = v.iter_errors(&value).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{value}: {errors:?}");
    };
    fits(
        &contract("hub.memory.get_session")["output_schema"]["properties"]["session"],
        serde_json::to_value(&a).expect("session"),
    );
    fits(
        &contract("hub.memory.list_incidents")["output_schema"]["properties"]["incidents"]["items"],
        serde_json::to_value(&incident).expect("incident"),
    );
    fits(
        &contract("hub.memory.list_artifacts")["output_schema"]["properties"]["artifacts"]["items"],
        serde_json::to_value(&kept[0]).expect("artifact"),
    );
    let artifact = std::fs::read(sh.artifact_path(a.artifact_id.as_deref().expect("artifact")))
        .expect("artifact file");
    fits(
        &contract("hub.memory.get_artifact")["output_schema"]["oneOf"][0]["properties"]["artifact"],
        serde_json::from_slice(&artifact).expect("artifact JSON"),
    );

    // Nothing written, or a snapshot cut short: the session says why and keeps the rest.
    let quiet = heap_dir(dir.path(), "quiet", 16);
    let b = sh
        .finish(
            &ids[1],
            SessionState::Completed,
            None,
            samples(),
            Some(keeper(&quiet)),
        )
        .expect("finish");
    assert_eq!(b.heap, None);
    assert!(
        b.heap_error
            .as_deref()
            .unwrap_or_default()
            .contains("no heap snapshot")
    );
    assert!(b.growth.is_some() && b.artifact_id.is_some());
    let cut = heap_dir(dir.path(), "cut", 16);
    write_snapshot(&cut, "heap.1.1.pb.gz", &heap::pprof::go_style(1)[..20]);
    let c = sh
        .finish(
            &ids[2],
            SessionState::Completed,
            None,
            samples(),
            Some(keeper(&cut)),
        )
        .expect("finish");
    let why = c.heap_error.expect("an error");
    assert!(
        why.contains("heap.1.1.pb.gz: the snapshot's gzip data is damaged"),
        "{why}"
    );
}

#[test]
fn a_session_keeps_its_first_and_newest_snapshots_and_the_hub_its_byte_cap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = heap_dir(dir.path(), "heap", 3);
    let one = heap::pprof::redact(&heap::pprof::go_style(1_000), &[]).expect("redact");
    let config = ProfilingConfig {
        // Room for the snapshots of one session, not two.
        heap_snapshots_max_bytes: 3 * one.len() as u64 + 10,
        ..ProfilingConfig::default()
    };
    let sh = shared(dir.path(), config);
    let ids: Vec<String> = (0..3).map(|_| uuid::Uuid::now_v7().to_string()).collect();
    for id in &ids {
        sh.update(|i| i.sessions.push(running(id, "web")))
            .expect("push");
    }
    let mut k = keeper(&cfg);
    for n in 1..=5 {
        write_snapshot(
            &cfg,
            &format!("heap.1.{n}.pb.gz"),
            &heap::pprof::go_style(1_000 * n),
        );
        k.collect(&ids[0], "web", false, |m| sh.file_of(m));
    }
    let names: Vec<_> = k
        .kept
        .iter()
        .map(|x| x.meta.snapshot.clone().expect("name"))
        .collect();
    assert_eq!(
        names,
        ["heap.1.1.pb.gz", "heap.1.4.pb.gz", "heap.1.5.pb.gz"]
    );
    let files = || {
        std::fs::read_dir(dir.path().join(PROFILES_DIR))
            .expect("dir")
            .filter(|e| {
                e.as_ref()
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".pb.gz")
            })
            .count()
    };
    assert_eq!(files(), 3, "dropped snapshots leave no file");
    // The session ends as its service exits mid-way: the snapshots kept still name the leak.
    let a = sh
        .finish(
            &ids[0],
            SessionState::Failed,
            Some("the process of `web` (pid 1) is gone".into()),
            vec![s(0, 5000), s(100, 6500)],
            Some(k),
        )
        .expect("finish");
    let h = a.heap.expect("a summary");
    assert_eq!((h.top_sites[0].growth_bytes, h.snapshots_kept), (4_000, 3));
    // A second session's snapshots push the first session's out (the hub's byte cap).
    let cfg2 = heap_dir(dir.path(), "heap2", 3);
    let mut k2 = keeper(&cfg2);
    for n in 1..=3 {
        write_snapshot(
            &cfg2,
            &format!("heap.1.{n}.pb.gz"),
            &heap::pprof::go_style(1_000),
        );
        k2.collect(&ids[1], "web", false, |m| sh.file_of(m));
    }
    sh.finish(
        &ids[1],
        SessionState::Completed,
        None,
        vec![s(0, 1)],
        Some(k2),
    )
    .expect("finish");
    let kept: Vec<String> = sh
        .with(|i| {
            i.artifacts
                .iter()
                .filter(|m| m.kind == ArtifactKind::HeapSnapshot)
                .map(|m| m.session_id.clone())
                .collect()
        })
        .expect("index");
    assert_eq!(kept, vec![ids[1].clone(); 3]);
    assert_eq!(files(), 3);
    // A snapshot that cannot be stored (a full disk takes the same path; here the place is
    // a file, not a directory): named with the reason, the session's other evidence kept.
    let mut blocked = keeper(&cfg2);
    let wall = dir.path().join("not-a-directory");
    std::fs::write(&wall, b"").expect("file");
    blocked.collect(&ids[2], "web", true, |m| wall.join(&m.artifact_id));
    let why = blocked
        .summary(std::time::UNIX_EPOCH, &[])
        .expect_err("nothing kept")
        .to_string();
    assert!(
        why.starts_with("no usable heap snapshot: heap.1.1.pb.gz: could not be kept:"),
        "{why}"
    );
    // An oversized file is named, not kept.
    let small = crate::config::HeapProfilesConfig {
        max_bytes: 10,
        ..heap_dir(dir.path(), "small", 3)
    };
    write_snapshot(&small, "heap.1.1.pb.gz", &heap::pprof::go_style(1));
    let c = sh
        .finish(
            &ids[2],
            SessionState::Completed,
            None,
            vec![s(0, 1)],
            Some(keeper(&small)),
        )
        .expect("finish");
    assert!(
        c.heap_error
            .as_deref()
            .unwrap_or_default()
            .contains("over heap_profiles.max_bytes (10)"),
        "{:?}",
        c.heap_error
    );
    // The summary so far is made once and kept until a collection changes what is kept.
    let scratch = tempfile::tempdir().expect("tempdir");
    let cfg3 = heap_dir(dir.path(), "heap3", 3);
    let mut k3 = keeper(&cfg3);
    let into = |m: &ArtifactMeta| scratch.path().join(&m.artifact_id);
    write_snapshot(&cfg3, "heap.1.1.pb.gz", &heap::pprof::go_style(1_000));
    k3.collect(&ids[2], "web", false, into);
    k3.refresh(std::time::UNIX_EPOCH, &[]);
    let made = k3.so_far.clone().expect("made").expect("a summary");
    assert_eq!(made.to_snapshot, "heap.1.1.pb.gz");
    k3.collect(&ids[2], "web", false, into);
    assert!(k3.so_far.is_some(), "nothing new: still the same");
    write_snapshot(&cfg3, "heap.1.2.pb.gz", &heap::pprof::go_style(2_000));
    k3.collect(&ids[2], "web", false, into);
    assert!(
        k3.so_far.is_none(),
        "a new snapshot: made again at the next refresh"
    );
}
