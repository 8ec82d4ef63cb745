//! The `mcp-root admin` CLI against a running root, as an operator would use it.

use mcp_tests::items;
use std::path::PathBuf;
use std::process::Command;

use mcp_tests::TestRoot;
use serde_json::Value;

fn bin() -> PathBuf {
    mcp_tests::workspace_bin("mcp-root").unwrap()
}

/// Runs `mcp-root admin ARGS` against `root` (in this process): `(exit code, stdout, stderr)`.
/// On a multi-thread runtime the process is waited for in `block_in_place`, so the waiting
/// worker hands its other tasks (root's, in this process) to another thread meanwhile.
pub fn admin(root: &TestRoot, args: &[&str]) -> (i32, String, String) {
    let run = || {
        Command::new(bin())
            .arg("admin")
            .args(["--root-url", &root.handle().base_url(), "--data-dir"])
            .arg(root.data_dir())
            .args(args)
            .env_remove("MCP_ROOT_URL")
            .env_remove("MCP_ROOT_ADMIN_TOKEN")
            .output()
            .unwrap()
    };
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    let out = if multi_thread {
        tokio::task::block_in_place(run)
    } else {
        run()
    };
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_and_audit_commands_work_end_to_end() {
    let root = TestRoot::start().await.unwrap();
    let (code, out, err) = admin(
        &root,
        &[
            "lease",
            "create",
            "--target",
            "hub:test-alpha",
            "--profile",
            "AdaOSDevRead",
            "--ttl",
            "600",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let token = v["token"].as_str().unwrap().to_string();
    let id = v["session_id"].as_str().unwrap().to_string();
    assert!(v["deadline_at"].is_string());

    let (s, _) = root
        .call(&token, "sdk.get_metadata", serde_json::json!({}))
        .await;
    assert_eq!(s, 200);

    let (code, out, _) = admin(&root, &["lease", "list", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["sessions"][0]["session_id"], id.as_str());
    assert!(!out.contains(&token));
    let (code, out, _) = admin(&root, &["lease", "get", &id]);
    assert_eq!(code, 0);
    assert!(out.contains("active"), "{out}");

    let (code, out, _) = admin(&root, &["audit", "tail", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["events"][0]["tool_id"], "sdk.get_metadata");

    let export = root.dir.path().join("audit.jsonl");
    let (code, _, err) = admin(
        &root,
        &[
            "audit",
            "export",
            "--since",
            "2000-01-01T00:00:00Z",
            "-o",
            export.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let exported = std::fs::read_to_string(&export).unwrap();
    let lines: Vec<Value> = exported
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Issuing the lease is an operator action in the trail (never its bearer), then the call.
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["tool_id"], "admin.lease.create");
    assert_eq!(lines[0]["actor"]["id"], "operator:admin");
    assert!(
        lines[0]["result_summary"].as_str().unwrap().contains(&id),
        "{}",
        lines[0]
    );
    assert!(!exported.contains(&token));
    assert_eq!(lines[1]["tool_id"], "sdk.get_metadata");

    let (code, out, _) = admin(&root, &["audit", "verify"]);
    assert_eq!(code, 0);
    assert!(out.contains("intact"), "{out}");

    let (code, out, _) = admin(&root, &["lease", "rotate", &id, "--json"]);
    assert_eq!(code, 0);
    let rotated: Value = serde_json::from_str(&out).unwrap();
    let (code, _, _) = admin(
        &root,
        &["lease", "revoke", rotated["session_id"].as_str().unwrap()],
    );
    assert_eq!(code, 0);
    let (code, _, err) = admin(&root, &["lease", "revoke", "no-such-lease"]);
    assert_eq!(code, 1);
    assert!(err.contains("404") && err.contains("no lease"), "{err}");
    // Rotation, revocation and the refused revocation are each one event naming the operator.
    let (_, out, _) = admin(&root, &["audit", "tail", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let recent: Vec<(&str, &str, &str)> = items(&v["events"])
        .iter()
        .take(3)
        .map(|e| {
            (
                e["tool_id"].as_str().unwrap(),
                e["status"].as_str().unwrap(),
                e["actor"]["id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        recent,
        [
            ("admin.lease.revoke", "error", "operator:admin"),
            ("admin.lease.revoke", "ok", "operator:admin"),
            ("admin.lease.rotate", "ok", "operator:admin"),
        ]
    );

    // A wrong admin token is refused with a clear message.
    let out = Command::new(bin())
        .args([
            "admin",
            "--root-url",
            &root.handle().base_url(),
            "--admin-token",
            "wrong",
            "lease",
            "list",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"));
    // Bad usage exits 2.
    let out = Command::new(bin())
        .args(["admin", "lease", "create"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    root.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_and_skill_commands_work_end_to_end() {
    let root = TestRoot::start().await.unwrap();
    let (code, out, err) = admin(
        &root,
        &[
            "hub",
            "enroll",
            "--target",
            "hub:test-alpha",
            "--environment",
            "test",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let token = v["token"].as_str().unwrap().to_string();
    let (code, _, err) = admin(
        &root,
        &[
            "hub",
            "enroll",
            "--target",
            "hub:test-alpha",
            "--environment",
            "test",
        ],
    );
    assert_eq!(code, 1);
    assert!(err.contains("already enrolled"), "{err}");
    let (code, out, _) = admin(&root, &["hub", "list"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("hub:test-alpha") && out.contains("offline"),
        "{out}"
    );
    // No hub connected: root's own state, and that the hub never connected.
    let (code, out, err) = admin(&root, &["skill", "status", "--target", "hub:test-alpha"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("installed and enabled by root") && out.contains("never connected"),
        "{out}"
    );

    let hub = mcp_tests::TestHub::start(&root.handle().base_url(), "hub:test-alpha", &token, "")
        .await
        .unwrap();
    let (code, out, _) = admin(&root, &["hub", "list", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["targets"][0]["status"], "online");
    let (code, out, err) = admin(
        &root,
        &["skill", "disable", "--target", "hub:test-alpha", "--json"],
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["skill"]["desired"]["enabled"], false);
    assert_eq!(v["skill"]["hub"]["enabled"], false, "the hub followed: {v}");
    let (code, out, _) = admin(&root, &["skill", "enable", "--target", "hub:test-alpha"]);
    assert_eq!(code, 0);
    // A hub with nothing configured publishes the tools that answer from the hub itself.
    let n = mcp_hub::served(mcp_hub::config::HubFile::default().provided()).count();
    assert_eq!(n, 6);
    let published = format!("{n} published of {n} tools");
    assert!(
        out.contains("installed and enabled by root (operator:admin), callable")
            && out.contains(&published)
            && out.contains("applied at the hub"),
        "{out}"
    );
    hub.stop().await;
    root.stop().await;
}
