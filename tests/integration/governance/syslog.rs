//! The audit trail over RFC 5425 syslog (TLS) to a real receiver: Debian's rsyslog with its
//! gtls driver (packages `rsyslog`, `rsyslog-gnutls`; `.ci/run` installs them), started by
//! the test with a certificate from a throwaway CA. Every event arrives as one RFC 5424
//! message rsyslog parses: app-name `mcp-root`, msgid `audit`, the event id and sequence
//! number in the structured data, the chain row as the message. rsyslog restarts mid-export
//! and nothing is lost. A sink that does not trust the receiver's certificate delivers
//! nothing and counts its errors.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mcp_tests::process::Proc;
use mcp_tests::{TestRoot, eventually};
use serde_json::Value;

use crate::hardening::tls::Pki;

/// rsyslogd in the foreground, receiving syslog over TLS on `port` and writing each message's
/// parsed fields as a JSON line.
struct Rsyslog {
    proc: Proc,
    out: PathBuf,
}

impl Rsyslog {
    fn start(dir: &Path, pki: &Pki, port: u16) -> Rsyslog {
        let leaf = pki.server("rsyslog");
        let work = dir.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let out = dir.join("received.jsonl");
        let conf = dir.join("rsyslog.conf");
        std::fs::write(
            &conf,
            format!(
                r#"global(workDirectory="{work}" maxMessageSize="64k"
  defaultNetstreamDriver="gtls"
  defaultNetstreamDriverCAFile="{ca}"
  defaultNetstreamDriverCertFile="{cert}"
  defaultNetstreamDriverKeyFile="{key}")
module(load="imtcp" StreamDriver.Name="gtls" StreamDriver.Mode="1" StreamDriver.AuthMode="anon")
input(type="imtcp" port="{port}" address="127.0.0.1")
template(name="fields" type="list") {{
  constant(value="{{")
  property(name="app-name" format="jsonf" outname="app")
  constant(value=",")
  property(name="msgid" format="jsonf")
  constant(value=",")
  property(name="pri" format="jsonf")
  constant(value=",")
  property(name="structured-data" format="jsonf" outname="sd")
  constant(value=",")
  property(name="msg" format="jsonf")
  constant(value="}}\n")
}}
*.* action(type="omfile" file="{out}" template="fields")
"#,
                work = work.display(),
                ca = pki.ca_file().display(),
                cert = leaf.cert.display(),
                key = leaf.key.display(),
                out = out.display(),
            ),
        )
        .unwrap();
        let pid = dir.join("rsyslog.pid");
        let _ = std::fs::remove_file(&pid);
        let proc = Proc::spawn(
            "rsyslogd",
            Command::new("rsyslogd")
                .arg("-n")
                .arg("-f")
                .arg(&conf)
                .arg("-i")
                .arg(&pid),
            dir.join("rsyslog.log"),
        );
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "rsyslogd did not listen on {port}: {}",
                proc.tail(20)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Rsyslog { proc, out }
    }

    /// The messages rsyslog wrote: `(sd, msg as JSON, the whole line)`.
    fn received(&self) -> Vec<(String, Value, Value)> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).expect("rsyslog's JSON line");
                let msg = serde_json::from_str(v["msg"].as_str().unwrap()).expect("a JSON record");
                (v["sd"].as_str().unwrap().to_owned(), msg, v)
            })
            .collect()
    }

    /// The event ids of the messages rsyslog wrote for SD-ID `sd_id`.
    fn ids(&self, sd_id: &str) -> BTreeSet<String> {
        self.received()
            .into_iter()
            .filter(|(sd, _, _)| sd.starts_with(&format!("[{sd_id} ")))
            .map(|(_, msg, _)| msg["event"]["event_id"].as_str().unwrap().to_owned())
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rsyslog_receives_every_event_over_tls_across_its_restart() {
    let pki = Pki::new("syslog");
    let stranger = Pki::new("stranger");
    let dir = tempfile::tempdir().unwrap();
    let port = mcp_tests::ports::free_port();
    let mut rsyslog = Rsyslog::start(dir.path(), &pki, port);
    let sink = |name: &str, ca: &Path, sd: &str| -> mcp_root::config::SinkConfig {
        toml::from_str(&format!(
            "name = \"{name}\"\nkind = \"syslog\"\nendpoint = \"tls://localhost:{port}\"\n\
             ca_file = \"{}\"\nsd_id = \"{sd}\"\nbatch = 6\n",
            ca.display()
        ))
        .unwrap()
    };
    let (trusted, untrusted) = (pki.ca_file(), stranger.ca_file());
    let root = TestRoot::start_with(|c| {
        c.audit.sinks = vec![
            sink("siem", &trusted, "audit@32473"),
            sink("wrong-ca", &untrusted, "stranger@32473"),
        ];
    })
    .await
    .unwrap();
    root.issue_sessions("sys-a", 20).await;
    let trail = |root: &TestRoot| {
        let root_url = root.url("");
        let admin = root.admin_token();
        async move {
            crate::governance::sinks::trail_ids(&root_url, &admin)
                .await
                .into_iter()
                .collect::<BTreeSet<String>>()
        }
    };
    let all = trail(&root).await;
    eventually("every event at rsyslog", async || {
        all.is_subset(&rsyslog.ids("audit@32473")).then_some(())
    })
    .await;
    // What rsyslog parsed: RFC 5424 fields, and the chain row as the message.
    let (sd, msg, line) = rsyslog
        .received()
        .into_iter()
        .find(|(_, m, _)| m["event"]["tool_id"] == "admin.lease.create")
        .expect("a lease's message");
    assert_eq!(
        (line["app"].as_str(), line["msgid"].as_str()),
        (Some("mcp-root"), Some("audit"))
    );
    assert_eq!(line["pri"], "110", "facility 13 (log audit), informational");
    let id = msg["event"]["event_id"].as_str().unwrap();
    assert!(sd.contains(&format!("event_id=\"{id}\"")), "{sd}");
    assert!(sd.contains(&format!("seq=\"{}\"", msg["seq"])), "{sd}");
    assert!(
        msg["hash"].is_string() && msg["prev_hash"].is_string(),
        "{msg}"
    );

    // rsyslog restarts mid-export: what happens meanwhile arrives after.
    rsyslog.proc.terminate(Duration::from_secs(10)).await;
    root.issue_sessions("sys-b", 10).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rsyslog = Rsyslog::start(dir.path(), &pki, port);
    root.issue_sessions("sys-c", 5).await;
    let all = trail(&root).await;
    eventually("every event after the restart", async || {
        all.is_subset(&rsyslog.ids("audit@32473")).then_some(())
    })
    .await;
    // The sink that does not trust rsyslog's certificate sent nothing, and says why.
    assert!(rsyslog.ids("stranger@32473").is_empty());
    let errors = root
        .metric("mcp_root_audit_sink_errors_total{sink=\"wrong-ca\"}")
        .await
        .unwrap()
        .unwrap_or(0);
    assert!(errors >= 1, "{errors}");
    root.stop().await;
}
