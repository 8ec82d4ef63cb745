//! The Debian packages (README "Installing on a server"): cargo-deb packages this test run's
//! `mcp-root` and `mcp-hub` binaries (`--no-build`: no release build here) with the metadata
//! in root/Cargo.toml and hub/Cargo.toml. The test checks with dpkg-deb what each package
//! holds (binary, systemd unit, sysusers file, conffile, maintainer scripts, no secret),
//! checks the units with `systemd-analyze verify` and `security` and the system users with
//! `systemd-sysusers --dry-run`, all in the extracted tree, then runs the extracted daemons on
//! the extracted /etc configs, moved under a temporary directory (root on 127.0.0.1:0, the
//! operator's placeholders filled in, certificates made here): the hub connects over mutual
//! TLS, answers a governed call, and both stop cleanly on SIGTERM, as systemd stops them.

use mcp_tests::items;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_tests::process::Proc;
use mcp_tests::{private_file, workspace_bin};
use serde_json::{Value, json};

use crate::hardening::tls::{Pki, https_client};

/// The cargo-deb release `.ci/run` installs.
const CARGO_DEB: &str = "3.8.0";

/// Runs `cmd` to success and returns its standard output; a failure fails the test with the
/// command's output.
fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

/// The workspace root (cargo-deb reads the packages' metadata there).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// `cargo deb` for `package` from the binary at `bin`, written to `<out>/<package>.deb`.
///
/// cargo-deb takes binaries from `<target dir>/release/`: a staging target directory whose
/// `release/` links to this run's (debug) binary makes it package that one as a release
/// would (stripped), without building anything. A release package is `cargo deb -p NAME`.
fn cargo_deb(package: &str, bin: &Path, out: &Path) -> Child {
    let staging = out.join(format!("target-{package}"));
    std::fs::create_dir_all(staging.join("release")).unwrap();
    std::os::unix::fs::symlink(bin, staging.join("release").join(package)).unwrap();
    Command::new(env!("CARGO"))
        .args(["deb", "--no-build", "--offline", "-p", package])
        // gzip -1 (the system's): a fraction of the time of cargo-deb's own xz, for a package
        // that is unpacked once.
        .args(["--fast", "--compress-type", "gz", "--compress-system", "-o"])
        .arg(out.join(format!("{package}.deb")))
        .current_dir(workspace())
        .env("CARGO_TARGET_DIR", &staging)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a [`cargo_deb`] run and returns the path of its package.
fn finish_deb(child: Child, package: &str, out: &Path) -> PathBuf {
    let res = child.wait_with_output().unwrap();
    assert!(
        res.status.success(),
        "cargo deb -p {package} failed:\n{}\n{}",
        String::from_utf8_lossy(&res.stdout),
        String::from_utf8_lossy(&res.stderr)
    );
    out.join(format!("{package}.deb"))
}

/// `(mode, path)` of every entry of a package (`dpkg-deb --contents`), owner root for all.
fn contents(deb: &Path) -> Vec<(String, String)> {
    run(Command::new("dpkg-deb").arg("--contents").arg(deb))
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f[1], "0/0", "{l}: every file is root's");
            (f[0].to_owned(), f[f.len() - 1].to_owned())
        })
        .collect()
}

/// One control file of a package (`dpkg-deb --info DEB FILE`).
fn control(deb: &Path, file: &str) -> String {
    run(Command::new("dpkg-deb").arg("--info").arg(deb).arg(file))
}

/// What each package holds, and what its maintainer scripts do.
fn check_layout(deb: &Path, name: &str, config: &str, scripts_dir: &Path) {
    let entries = contents(deb);
    let has = |mode: &str, path: &str| {
        assert!(
            entries.iter().any(|(m, p)| m == mode && p == path),
            "{name}: no {mode} {path} in {entries:?}"
        );
    };
    has("-rwxr-xr-x", &format!("./usr/bin/{name}"));
    has(
        "-rw-r--r--",
        &format!("./usr/lib/systemd/system/{name}.service"),
    );
    has("-rw-r--r--", &format!("./usr/lib/sysusers.d/{name}.conf"));
    has("-rw-r--r--", &format!("./etc/{name}/{config}"));
    // No secret ships: /etc holds the config alone (token, keys and certificates are the
    // operator's), and the state directory is made by postinst and systemd, not unpacked.
    let files: Vec<&String> = entries
        .iter()
        .filter(|(m, _)| m.starts_with('-'))
        .map(|(_, p)| p)
        .collect();
    for p in &files {
        assert!(
            !p.starts_with("./etc/") || **p == format!("./etc/{name}/{config}"),
            "{name} ships {p}"
        );
        assert!(!p.starts_with("./var/"), "{name} ships {p}");
        for secret in [".key", ".pem", "token"] {
            assert!(!p.ends_with(secret), "{name} ships {p}");
        }
    }

    let info = run(Command::new("dpkg-deb").arg("--info").arg(deb));
    assert!(info.contains(&format!("Package: {name}\n")), "{info}");
    assert!(
        info.contains("Depends: ") && info.contains("libc6"),
        "{info}"
    );
    assert_eq!(
        control(deb, "conffiles"),
        format!("/etc/{name}/{config}\n"),
        "{name}: the /etc config is a conffile"
    );
    let postinst = control(deb, "postinst");
    for needle in [
        format!("systemd-sysusers ${{DPKG_ROOT:+--root=\"$DPKG_ROOT\"}} {name}.conf"),
        format!("deb-systemd-helper enable {name}.service"),
        format!("install -d -o {name} -g {name} -m 0750 \"${{DPKG_ROOT:-}}/var/lib/{name}\""),
    ] {
        assert!(
            postinst.contains(&needle),
            "{name} postinst: no {needle}:\n{postinst}"
        );
    }
    // Enabled, never started by the package: the operator starts it once it is configured
    // (a running one may be restarted on upgrade, see the test).
    assert!(
        postinst
            .lines()
            .filter(|l| l.contains("deb-systemd-invoke") || l.contains("_dh_action="))
            .all(|l| l.contains("deb-systemd-invoke try-restart")),
        "{name} postinst starts the service:\n{postinst}"
    );
    let prerm = control(deb, "prerm");
    assert!(
        prerm.contains(&format!("deb-systemd-invoke stop {name}.service")),
        "{name} prerm:\n{prerm}"
    );
    assert!(
        control(deb, "postrm").contains(&format!("deb-systemd-helper purge {name}.service")),
        "{name} postrm"
    );
    // The scripts are valid sh.
    run(Command::new("dpkg-deb")
        .arg("--control")
        .arg(deb)
        .arg(scripts_dir));
    for script in ["postinst", "prerm", "postrm"] {
        run(Command::new("sh").arg("-n").arg(scripts_dir.join(script)));
    }
}

/// Every setting of `table` by its dotted name (arrays of tables are values).
fn flatten(prefix: &str, table: &toml::Table, out: &mut Vec<(String, toml::Value)>) {
    for (k, v) in table {
        let name = format!("{prefix}{k}");
        match v {
            toml::Value::Table(t) => flatten(&format!("{name}."), t, out),
            v => out.push((name, v.clone())),
        }
    }
}

/// The packaged config at `packaged` is the production example `example` for one server:
/// it sets nothing the example does not, and everything both set has the example's value,
/// but for the settings (or sections) in `differ`.
fn same_as_example(packaged: &Path, example: &str, differ: &[&str]) {
    let read = |p: &Path| -> Vec<(String, toml::Value)> {
        let table: toml::Table = toml::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        let mut out = Vec::new();
        flatten("", &table, &mut out);
        out
    };
    let example_path = workspace().join(example);
    let (ours, theirs) = (read(packaged), read(&example_path));
    let differs = |k: &str| {
        differ
            .iter()
            .any(|d| k == *d || k.starts_with(&format!("{d}.")))
    };
    for (k, v) in &ours {
        let Some((_, e)) = theirs.iter().find(|(n, _)| n == k) else {
            panic!("{}: `{k}` is not in {example}", packaged.display());
        };
        assert!(
            differs(k) || v == e,
            "{}: `{k}` = {v}, {example} has {e}",
            packaged.display()
        );
    }
    for (k, _) in &theirs {
        assert!(
            differs(k) || ours.iter().any(|(n, _)| n == k),
            "{}: `{k}` of {example} is missing",
            packaged.display()
        );
    }
}

/// Replaces each `from` (which must occur) with its `to`.
fn adjust(text: &str, edits: &[(&str, String)]) -> String {
    let mut text = text.to_owned();
    for (from, to) in edits {
        assert!(text.contains(from), "the packaged config has no `{from}`");
        text = text.replace(from, to);
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_packages_install_a_root_and_a_hub_that_connect() {
    let version = Command::new(env!("CARGO"))
        .args(["deb", "--version"])
        .output();
    assert!(
        version.as_ref().is_ok_and(|o| o.status.success()),
        "cargo-deb is not installed: `cargo install --locked cargo-deb --version {CARGO_DEB}` \
         (.ci/run installs it)"
    );
    let root_bin = workspace_bin("mcp-root").unwrap();
    let hub_bin = workspace_bin("mcp-hub").unwrap();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("debs");
    // Both packages at once (two cores): compressing the binary is most of it.
    let root_job = cargo_deb("mcp-root", &root_bin, &out);
    let hub_job = cargo_deb("mcp-hub", &hub_bin, &out);
    let root_deb = finish_deb(root_job, "mcp-root", &out);
    let hub_deb = finish_deb(hub_job, "mcp-hub", &out);
    let packaged = started.elapsed();

    check_layout(
        &root_deb,
        "mcp-root",
        "root.toml",
        &dir.path().join("ctl-root"),
    );
    check_layout(&hub_deb, "mcp-hub", "hub.toml", &dir.path().join("ctl-hub"));
    let hub_postinst = control(&hub_deb, "postinst");
    assert!(
        !hub_postinst.contains("try-restart"),
        "an upgrade must not restart the hub (and so its managed services):\n{hub_postinst}"
    );
    assert!(
        control(&root_deb, "postinst").contains("deb-systemd-invoke try-restart mcp-root.service"),
        "an upgrade restarts a running root"
    );

    // The packages unpacked over a copy of this machine's systemd units: a system root the
    // units can be verified in (their ExecStart binaries, the targets they name).
    let sys = dir.path().join("sysroot");
    std::fs::create_dir_all(sys.join("usr/lib/systemd")).unwrap();
    run(Command::new("cp")
        .arg("-a")
        .arg("/usr/lib/systemd/system")
        .arg(sys.join("usr/lib/systemd/")));
    for deb in [&root_deb, &hub_deb] {
        run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&sys));
    }
    let units = ["mcp-root.service", "mcp-hub.service"];
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", sys.display()))
        .args(units)
        .output()
        .expect("systemd-analyze (Debian package systemd)");
    let said = String::from_utf8_lossy(&verify.stderr);
    assert!(
        verify.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {}\n{said}",
        verify.status
    );
    let exec_start = |unit: &str| {
        std::fs::read_to_string(sys.join("usr/lib/systemd/system").join(unit))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart=").map(str::to_owned))
            .unwrap()
    };
    assert_eq!(
        exec_start("mcp-root.service"),
        "/usr/bin/mcp-root serve --config /etc/mcp-root/root.toml"
    );
    assert_eq!(
        exec_start("mcp-hub.service"),
        "/usr/bin/mcp-hub run --config /etc/mcp-hub/hub.toml"
    );
    // systemd signals the hub alone, which stops its services' process groups itself (then
    // SIGKILLs what is left in the cgroup after TimeoutStopSec).
    let hub_unit =
        std::fs::read_to_string(sys.join("usr/lib/systemd/system/mcp-hub.service")).unwrap();
    assert!(hub_unit.contains("\nKillMode=mixed\n"), "{hub_unit}");
    // Hardening, as systemd scores it (0 = most confined, 100 = none): a unit that loses
    // some of it fails here. Root only listens and writes its state; the hub's children
    // (managed services, allowed tests) keep what they may need.
    for (unit, threshold) in [("mcp-root.service", 20), ("mcp-hub.service", 50)] {
        run(Command::new("systemd-analyze")
            .args(["security", "--offline=yes", "--no-pager"])
            .arg(format!("--root={}", sys.display()))
            .arg(format!("--threshold={threshold}"))
            .arg(unit));
    }
    let users = Command::new("systemd-sysusers")
        .arg("--dry-run")
        .arg(format!("--root={}", sys.display()))
        .output()
        .expect("systemd-sysusers (Debian package systemd)");
    assert!(users.status.success(), "systemd-sysusers: {users:?}");
    // It reports what it would do on standard error.
    let users = String::from_utf8_lossy(&users.stderr);
    for user in ["mcp-root", "mcp-hub"] {
        assert!(
            users.contains(&format!("Creating user '{user}'")),
            "systemd-sysusers: {users}"
        );
    }

    // The configs as packaged: the production examples, for one server (SQLite, the admin
    // token and master key in the state directory; one root URL; no example service).
    same_as_example(
        &sys.join("etc/mcp-root/root.toml"),
        "config/root.production.example.toml",
        &[
            "database_url",
            "allowed_origins",
            "admin_token_file",
            "master_key_file",
            "replica",
        ],
    );
    same_as_example(
        &sys.join("etc/mcp-hub/hub.toml"),
        "config/hub.production.example.toml",
        &["root_urls", "tls.pins", "skill.healthchecks", "services"],
    );

    // The packaged configs, moved under the temporary directory and filled in as an operator
    // would: root on 127.0.0.1:0 (allowed as a host name too), the hub dialing it.
    let d = sys.display();
    let root_toml = sys.join("etc/mcp-root/root.toml");
    let text = std::fs::read_to_string(&root_toml).unwrap();
    let text = adjust(
        &text,
        &[
            (
                "listen = \"0.0.0.0:8700\"",
                "listen = \"127.0.0.1:0\"".into(),
            ),
            (
                "allowed_hosts = [\"root.example.org\"]",
                "allowed_hosts = [\"root.example.org\", \"127.0.0.1\"]".into(),
            ),
            ("\"/var/lib/mcp-root\"", format!("\"{d}/var/lib/mcp-root\"")),
            ("\"/etc/mcp-root/", format!("\"{d}/etc/mcp-root/")),
        ],
    );
    std::fs::write(&root_toml, text).unwrap();
    // Root's certificate, and the CA of hub client certificates (one throwaway CA for both).
    let pki = Pki::new("packages");
    let server = pki.server("root");
    let hub_cert = pki.hub_client("hub", "hub:prod-eu-1");
    let put = |from: &Path, to: &str, secret: bool| {
        let to = sys.join(to);
        std::fs::copy(from, &to).unwrap();
        if secret {
            private_file(&to).unwrap();
        }
    };
    put(&server.cert, "etc/mcp-root/fullchain.pem", false);
    put(&server.key, "etc/mcp-root/key.pem", true);
    put(&pki.ca_file(), "etc/mcp-root/hub-ca.pem", false);

    let mcp_root = sys.join("usr/bin/mcp-root");
    let mut root = Proc::spawn(
        "mcp-root",
        Command::new(&mcp_root)
            .args(["serve", "--config"])
            .arg(&root_toml),
        dir.path().join("root.log"),
    );
    // The packaged config listens on port 0; root announces the address it bound.
    let base = mcp_tests::ports::announced_root_url(&mut root, Duration::from_secs(30)).await;
    assert!(base.starts_with("https://127.0.0.1:"), "{base}");
    // The bootstrap credential, made by root on first start in its state directory, private.
    let state = sys.join("var/lib/mcp-root");
    {
        use std::os::unix::fs::PermissionsExt;
        for secret in ["admin.token", "secrets.key"] {
            let mode = std::fs::metadata(state.join(secret))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{secret}");
        }
    }

    // The target enrolled with the packaged CLI as the README says, with the identity the
    // packaged hub config names.
    let hub_toml = sys.join("etc/mcp-hub/hub.toml");
    let file: toml::Table = toml::from_str(&std::fs::read_to_string(&hub_toml).unwrap()).unwrap();
    let field = |k: &str| file[k].as_str().unwrap().to_owned();
    let (target, environment) = (field("target_id"), field("environment"));
    assert_eq!(target, "hub:prod-eu-1");
    let enrolled = run(Command::new(&mcp_root)
        .args(["admin", "--root-url", &base, "--data-dir"])
        .arg(&state)
        .arg("--ca-file")
        .arg(pki.ca_file())
        .args(["hub", "enroll", "--target", &target, "--environment"])
        .arg(&environment)
        .args([
            "--subnet",
            &field("subnet"),
            "--zone",
            &field("zone"),
            "--json",
        ]));
    let enrolled: Value = serde_json::from_str(&enrolled).unwrap();
    let token_file = sys.join("etc/mcp-hub/token");
    std::fs::write(&token_file, enrolled["token"].as_str().unwrap()).unwrap();
    private_file(&token_file).unwrap();
    put(&pki.ca_file(), "etc/mcp-hub/root-ca.pem", false);
    put(&hub_cert.cert, "etc/mcp-hub/hub.pem", false);
    put(&hub_cert.key, "etc/mcp-hub/hub.key", true);
    let text = std::fs::read_to_string(&hub_toml).unwrap();
    let text = adjust(
        &text,
        &[
            (
                "root_urls = [\"wss://root.example.org:8700\"]",
                format!(
                    "root_urls = [\"{}\"]",
                    base.replacen("https://", "wss://", 1)
                ),
            ),
            ("\"/var/lib/mcp-hub\"", format!("\"{d}/var/lib/mcp-hub\"")),
            ("\"/etc/mcp-hub/", format!("\"{d}/etc/mcp-hub/")),
        ],
    );
    std::fs::write(&hub_toml, text).unwrap();
    let mut hub = Proc::spawn(
        "mcp-hub",
        Command::new(sys.join("usr/bin/mcp-hub"))
            .args(["run", "--config"])
            .arg(&hub_toml),
        dir.path().join("hub.log"),
    );

    // Online on root, and a governed call through it answered by this hub.
    let http = https_client(&pki.ca_file());
    let admin = std::fs::read_to_string(state.join("admin.token")).unwrap();
    let admin = admin.trim();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let hubs: Value = mcp_tests::get_json(&http, format!("{base}/v1/root/hubs"), admin).await;
        let online = items(&hubs["targets"])
            .iter()
            .any(|t| t["target_id"] == target.as_str() && t["status"] == "online");
        if online {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the packaged hub never came online: {hubs}\n--- hub\n{}\n--- root\n{}",
            hub.log_text(),
            root.log_text()
        );
        assert!(
            hub.try_wait().is_none(),
            "the packaged hub exited:\n{}",
            hub.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let lease: Value = http
        .post(format!("{base}/v1/root/mcp/sessions"))
        .bearer_auth(admin)
        .json(&json!({ "target_id": target, "capability_profile": "InfraOpsRead", "ttl_sec": 600 }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let res = http
        .post(format!("{base}/v1/root/mcp/call"))
        .bearer_auth(lease["token"].as_str().unwrap())
        .json(&json!({ "tool_id": "hub.get_status", "arguments": {} }))
        .send()
        .await
        .unwrap();
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["target_id"], target.as_str(), "{body}");

    // `systemctl stop`: SIGTERM to the hub (KillMode=mixed) and to root; both end cleanly.
    // SIGTERM, as `systemctl stop` sends it; each exits within its limit.
    let hub_exit = hub
        .terminate(Duration::from_secs(20))
        .await
        .unwrap_or_else(|| panic!("mcp-hub still runs 20 s after SIGTERM:\n{}", hub.log_text()));
    assert!(hub_exit.success(), "hub: {hub_exit}\n{}", hub.log_text());
    let root_exit = root
        .terminate(Duration::from_secs(30))
        .await
        .unwrap_or_else(|| {
            panic!(
                "mcp-root still runs 30 s after SIGTERM:\n{}",
                root.log_text()
            )
        });
    assert!(
        root_exit.success(),
        "root: {root_exit}\n{}",
        root.log_text()
    );
    eprintln!(
        "packages: cargo deb {:.1} s, the whole test past the binaries' build {:.1} s",
        packaged.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}
