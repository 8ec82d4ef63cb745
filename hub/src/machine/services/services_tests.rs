//! Tests of the managed services: start, restart and shutdown leave no process, exits and
//! SIGTERM-ignoring services, capped logs, `/proc` figures.

use std::path::Path;

use super::*;

fn soon() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(30)
}

fn services(dir: &Path, list: Vec<ServiceConfig>) -> Services {
    let mut config = HubConfig::new("hub:t", "test", "ws://x", "t", dir);
    config.services = list;
    config.validate().expect("valid");
    Services::new(&config)
}

fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// Whether `pid` is gone (or only a zombie waiting for a reaper that is not the hub).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rfind(')')
            .is_some_and(|i| stat[i + 1..].trim_start().starts_with('Z')),
    }
}

async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..400 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn start_restart_and_shutdown_leave_no_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut manual = ServiceConfig::new("manual", argv(&["sleep", "30"]));
    manual.autostart = false;
    // A leader with a child of its own: the whole group goes at a stop.
    let family = ServiceConfig::new(
        "family",
        argv(&["sh", "-c", "sleep 30 & echo child $! ; wait"]),
    );
    let svc = services(
        dir.path(),
        vec![
            ServiceConfig::new("sleeper", argv(&["sleep", "30"])),
            manual,
            family,
        ],
    );
    let before = svc.snapshot();
    assert!(
        before
            .iter()
            .all(|s| s.state == ServiceState::Stopped && s.pid.is_none())
    );
    svc.start().await.expect("start");
    let snap = svc.snapshot();
    assert_eq!(snap[0].state, ServiceState::Running);
    assert_eq!(snap[1].state, ServiceState::Stopped, "not autostarted");
    let first = snap[0].pid.expect("pid");
    assert!(snap[0].rss_bytes.expect("rss") > 0);
    assert!(snap[0].cpu_seconds.expect("cpu") >= 0.0);
    assert_eq!(snap[0].mode, Mode::Normal);
    mcp_shared::time::parse(snap[0].started_at.as_deref().expect("started_at")).expect("rfc3339");

    let out = svc
        .restart("sleeper", Mode::Normal, soon())
        .await
        .expect("restart");
    assert_eq!(out.old_pid, Some(first));
    assert_ne!(out.new_pid, first);
    assert_eq!(out.stopped, StopOutcome::Terminated);
    assert_eq!((out.state, out.restarts), (ServiceState::Running, 1));
    assert!(gone(first), "the old process is gone");
    let now = svc.get("sleeper").expect("known");
    assert_eq!((now.pid, now.restarts), (Some(out.new_pid), 1));
    assert_eq!(now.last_exit.as_ref().and_then(|e| e.signal), Some(15));

    // A restart of a service that does not run starts it.
    let out = svc
        .restart("manual", Mode::Normal, soon())
        .await
        .expect("start");
    assert_eq!((out.old_pid, out.stopped), (None, StopOutcome::NotRunning));
    let manual_pid = out.new_pid;

    let err = svc
        .restart("nope", Mode::Normal, soon())
        .await
        .expect_err("unknown");
    assert_eq!(err.code, ErrorCode::InvalidArguments);
    assert!(err.message.contains("`sleeper`"), "{err}");
    let err = svc
        .restart("sleeper", Mode::Profiling, soon())
        .await
        .expect_err("no profiling argv");
    assert!(err.message.contains("profiling_argv"), "{err}");

    // The family's child pid, from its log.
    let log = svc.log_path("family").expect("log");
    assert_eq!(log, dir.path().join("services/family.log"));
    let mut child = None;
    wait_for("the family's child pid", || {
        child = std::fs::read_to_string(&log).ok().and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("child ")?.trim().parse::<u32>().ok())
        });
        child.is_some()
    })
    .await;
    let child = child.expect("child pid");
    let family = svc.get("family").expect("family").pid.expect("pid");
    assert!(!gone(child) && !gone(family));

    svc.stop().await;
    // Killed processes leave /proc a moment after the signal (on a loaded machine, a
    // while): each must be gone soon after the shutdown, not outlive it.
    for pid in [out.new_pid, manual_pid, family, child] {
        wait_for(
            &format!("pid {pid} to end after the hub's shutdown"),
            || gone(pid),
        )
        .await;
    }
    assert!(
        svc.snapshot()
            .iter()
            .all(|s| s.state == ServiceState::Stopped && s.pid.is_none())
    );
}

#[tokio::test]
async fn a_service_that_exits_is_not_restarted_and_one_that_ignores_sigterm_is_killed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut stubborn = ServiceConfig::new(
        "stubborn",
        argv(&[
            "sh",
            "-c",
            "trap '' TERM; echo ready; while :; do sleep 1; done",
        ]),
    );
    stubborn.stop_timeout_ms = 300;
    let broken = ServiceConfig::new("broken", argv(&["/nonexistent/program"]));
    let svc = services(
        dir.path(),
        vec![
            ServiceConfig::new("quitter", argv(&["sh", "-c", "exit 3"])),
            stubborn,
            broken,
        ],
    );
    svc.start().await.expect("start");
    wait_for("the quitter to exit", || {
        svc.get("quitter").expect("known").state == ServiceState::Exited
    })
    .await;
    let quitter = svc.get("quitter").expect("known");
    assert_eq!(quitter.last_exit.as_ref().and_then(|e| e.code), Some(3));
    assert_eq!((quitter.pid, quitter.restarts), (None, 0));
    let broken = svc.get("broken").expect("known");
    assert_eq!(broken.state, ServiceState::Failed);
    assert!(
        broken
            .error
            .as_deref()
            .is_some_and(|e| e.contains("/nonexistent/program"))
    );

    let log = svc.log_path("stubborn").expect("log");
    wait_for("the trap to be set", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("ready"))
    })
    .await;
    let out = svc
        .restart("stubborn", Mode::Normal, soon())
        .await
        .expect("restart");
    assert_eq!(out.stopped, StopOutcome::Killed);
    assert!(out.old_pid.is_some_and(gone));
    // Failed and exited services start again on an explicit restart only.
    let out = svc
        .restart("quitter", Mode::Normal, soon())
        .await
        .expect("restart");
    assert_eq!(out.stopped, StopOutcome::NotRunning);
    svc.stop().await;
}

#[tokio::test]
async fn the_log_is_capped_and_rotated_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut chatty = ServiceConfig::new(
        "chatty",
        argv(&[
            "sh",
            "-c",
            "i=0; while [ $i -lt 2000 ]; do echo line $i of a chatty service; i=$((i+1)); done; echo done; sleep 30",
        ]),
    );
    chatty.log_max_bytes = 4096;
    chatty.profiling_argv = Some(argv(&["sh", "-c", "echo profiling; sleep 30"]));
    let svc = services(dir.path(), vec![chatty]);
    svc.start().await.expect("start");
    let log = svc.log_path("chatty").expect("log");
    let rotated = CappedLog::rotated_path(&log);
    wait_for("the last line", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.ends_with("done\n"))
    })
    .await;
    let current = std::fs::metadata(&log).expect("log").len();
    let previous = std::fs::metadata(&rotated).expect("rotated").len();
    assert!(current <= 4096 && previous == 4096, "{current} {previous}");
    assert!(!dir.path().join("services/chatty.log.2").exists());
    let text = std::fs::read_to_string(&rotated).expect("rotated");
    assert!(text.contains("of a chatty service"), "{text}");

    let out = svc
        .restart("chatty", Mode::Profiling, soon())
        .await
        .expect("profiling");
    assert_eq!(out.mode, Mode::Profiling);
    assert_eq!(svc.get("chatty").expect("known").mode, Mode::Profiling);
    wait_for("the profiling argv", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("profiling\n"))
    })
    .await;
    svc.stop().await;
}

#[test]
fn capped_log_splits_a_large_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.log");
    let mut log = CappedLog::open(&path, 1024).expect("open");
    log.write(&[b'a'; 1000]);
    log.write(&[b'b'; 3000]);
    let current = std::fs::read(&path).expect("current");
    let previous = std::fs::read(CappedLog::rotated_path(&path)).expect("previous");
    assert_eq!(previous, [b'b'; 1024]);
    assert_eq!(current, [b'b'; 928], "24 + 1024 + 1024 + 928 = 3000");
    // Reopened, it continues from the size on disk.
    let mut log = CappedLog::open(&path, 1024).expect("reopen");
    log.write(&[b'c'; 96]);
    assert_eq!(std::fs::read(&path).expect("current").len(), 1024);
    log.write(b"d");
    assert_eq!(std::fs::read(&path).expect("current"), b"d");
}

#[test]
fn proc_figures_of_this_process() {
    let me = std::process::id();
    assert!(rss_bytes(me).expect("rss") > 0);
    assert!(cpu_seconds(me).expect("cpu") >= 0.0);
    assert_eq!(rss_bytes(u32::MAX), None);
}
