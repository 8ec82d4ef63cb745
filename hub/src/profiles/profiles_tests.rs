//! Tests of ProfileOps: growth, sampling this process, finishing a session into an artifact
//! and an incident, and interrupted sessions.

use std::path::Path;

use super::*;

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
        epoch: Mutex::new(CancellationToken::new()),
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
        )
        .expect("finish");
    assert_eq!(a.incident_ids.len(), 1, "1500 bytes >= 1000");
    let b = sh
        .finish(
            "b",
            SessionState::Stopped,
            None,
            vec![s(0, 5000), s(100, 5500)],
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
    let ctx = Arc::new(HubContext::new(config).expect("context"));
    ctx.machine
        .profiles
        .start(ctx.clone())
        .await
        .expect("start");
    let (session, samples) = ctx.machine.profiles.session(&id).expect("kept");
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
    ctx.machine.profiles.stop().await;
}
