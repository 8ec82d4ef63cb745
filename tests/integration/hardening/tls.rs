//! TLS on every cross-service path (issue 9), with a throwaway CA made in the test: MCP over
//! HTTPS with the rmcp client, hubs over WSS, a hub refusing a root it cannot verify (wrong CA,
//! pin mismatch), mutual TLS on the hub path, certificate reload without dropping an open MCP
//! session, and the refusals at start (plain HTTP on a non-loopback address, secret files that
//! others may read).

use mcp_tests::items;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mcp_root::config::TlsConfig;
use mcp_tests::{TestHub, TestRoot, private_file};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, PublicKeyData, SanType,
};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

/// A throwaway certificate authority writing PEM files into a temporary directory.
pub struct Pki {
    pub dir: tempfile::TempDir,
    ca: CertifiedIssuer<'static, KeyPair>,
    name: String,
}

/// A leaf certificate and key written to files, with its key's SPKI pin.
pub struct Leaf {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub der: Vec<u8>,
    pub pin: String,
}

impl Pki {
    pub fn new(name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} test CA"));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        Pki {
            dir,
            ca,
            name: name.to_owned(),
        }
    }

    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A server certificate for `localhost` and 127.0.0.1, as `<file>.pem` / `<file>.key`.
    pub fn server(&self, file: &str) -> Leaf {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{} root", self.name));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.leaf(params, file)
    }

    /// A client certificate (for a hub's mutual TLS).
    pub fn client(&self, file: &str) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{} hub", self.name));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.leaf(params, file)
    }

    /// A hub client certificate bound to `target`: the URI name `mcp-hub:<target>`.
    pub fn hub_client(&self, file: &str, target: &str) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{} hub {target}", self.name));
        params.subject_alt_names.push(SanType::URI(
            mcp_root::hubs::identity::uri_for(target)
                .try_into()
                .unwrap(),
        ));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.leaf(params, file)
    }

    fn leaf(&self, params: CertificateParams, file: &str) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        let cert_path = self.dir.path().join(format!("{file}.pem"));
        let key_path = self.dir.path().join(format!("{file}.key"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        private_file(&key_path).unwrap();
        Leaf {
            cert: cert_path,
            key: key_path,
            der: cert.der().to_vec(),
            pin: mcp_hub::spki_pin(&key.subject_public_key_info()),
        }
    }
}

pub fn tls_config(leaf: &Leaf, client_ca: Option<&Path>, reload_interval_sec: u64) -> TlsConfig {
    TlsConfig {
        cert_file: leaf.cert.clone(),
        key_file: leaf.key.clone(),
        client_ca_file: client_ca.map(Path::to_owned),
        bind_client_cert_to_target: false,
        reload_interval_sec,
    }
}

/// A reqwest client that trusts only `ca` and reports the server certificate it saw.
pub fn https_client(ca: &Path) -> reqwest::Client {
    mcp_tests::init_crypto();
    let pem = std::fs::read(ca).unwrap();
    reqwest::Client::builder()
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(&pem).unwrap())
        .tls_info(true)
        .build()
        .unwrap()
}

/// Starts a root serving TLS with `tls`; its REST helpers use a client that trusts `ca`.
pub async fn tls_root(tls: TlsConfig, ca: &Path) -> TestRoot {
    let mut root = TestRoot::start_with(|c| c.tls = Some(tls)).await.unwrap();
    root.http = https_client(ca);
    assert!(root.handle().base_url().starts_with("https://"));
    root
}

/// The DER of the certificate a fresh connection to `url` is served.
async fn served_cert(ca: &Path, url: &str) -> Vec<u8> {
    let res = https_client(ca).get(url).send().await.unwrap();
    res.extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .map(<[u8]>::to_vec)
        .expect("TLS info")
}

/// An rmcp client over HTTPS trusting only `ca`.
pub async fn mcp_https(
    ca: &Path,
    url: &str,
    token: &str,
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let transport = StreamableHttpClientTransport::with_client(
        https_client(ca),
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned()),
    );
    ().serve(transport).await.unwrap()
}

/// Hub TOML for `[tls]`.
pub fn hub_tls(ca: &Path, pins: &[&str], client: Option<&Leaf>) -> String {
    let mut s = format!("[tls]\nca_file = \"{}\"\n", ca.display());
    if !pins.is_empty() {
        s.push_str(&format!("pins = {}\n", json!(pins)));
    }
    if let Some(c) = client {
        s.push_str(&format!(
            "client_cert_file = \"{}\"\nclient_key_file = \"{}\"\n",
            c.cert.display(),
            c.key.display()
        ));
    }
    s
}

/// Waits until root's log ring has a line with every one of `needles` (bounded wait).
pub async fn wait_for_log(needles: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (hits, _) = mcp_root::telemetry::logging::RING.tail(1, |l| {
            needles.iter().all(|n| l.contains(n)).then(|| l.to_owned())
        });
        if let Some(line) = hits.into_iter().next() {
            return line;
        }
        assert!(
            Instant::now() < deadline,
            "no log line with all of {needles:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts a hub that cannot connect (its config is right, root refuses it or it refuses root)
/// and returns it without waiting for a welcome.
async fn start_unconnected_hub(root: &TestRoot, target: &str, token: &str, extra: &str) -> TestHub {
    let state_dir = tempfile::tempdir().unwrap();
    let path = state_dir.path().join("hub.toml");
    std::fs::write(
        &path,
        format!(
            "target_id = \"{target}\"\nenvironment = \"test\"\nsubnet = \"subnet-a\"\nroot_url = \"{}\"\ntoken = \"{token}\"\nstate_dir = \"{}\"\n{extra}\n[reconnect]\ninitial_ms = 50\nmax_ms = 200\n",
            root.handle().base_url(),
            state_dir.path().join("state").display()
        ),
    )
    .unwrap();
    private_file(&path).unwrap();
    let cfg = mcp_hub::config::HubFile::load(&path)
        .unwrap()
        .resolve()
        .unwrap();
    let handle = mcp_hub::start(cfg).await.unwrap();
    TestHub {
        handle: Some(handle),
        state_dir,
        token: token.to_owned(),
        target_id: target.to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_https_and_a_hub_over_wss() {
    let pki = Pki::new("main");
    let server = pki.server("root");
    let root = tls_root(tls_config(&server, None, 0), &pki.ca_file()).await;
    assert_eq!(
        root.handle().tls_fingerprint().unwrap(),
        hex_sha256(&server.der)
    );
    let token = root.enroll("hub:tls-alpha", "test").await.unwrap();
    let hub = TestHub::start(
        &root.handle().base_url(),
        "hub:tls-alpha",
        &token,
        &hub_tls(&pki.ca_file(), &[], None),
    )
    .await
    .unwrap();
    let bearer = root.bearer("hub:tls-alpha", "InfraOpsRead").await;
    // The rmcp client over HTTPS, a call routed to the hub over WSS.
    let client = mcp_https(&pki.ca_file(), &root.mcp_url(), &bearer).await;
    let res = mcp_tests::hub_status(&client).await;
    assert_eq!(res["target_id"], "hub:tls-alpha");
    // Plain HTTP to the TLS port gets nothing useful.
    let plain = mcp_tests::http_client()
        .get(format!("http://{}/healthz", root.handle().addr))
        .send()
        .await;
    assert!(plain.map(|r| !r.status().is_success()).unwrap_or(true));
    // A client that does not trust the CA is refused.
    let other = Pki::new("other");
    assert!(
        https_client(&other.ca_file())
            .get(root.url("/healthz"))
            .send()
            .await
            .is_err()
    );
    drop(client);
    hub.stop().await;
    root.stop().await;
}

fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_refuses_a_root_it_cannot_verify_and_honours_pins() {
    let pki = Pki::new("pins");
    let server = pki.server("root");
    let root = tls_root(tls_config(&server, None, 0), &pki.ca_file()).await;
    let url = format!(
        "{}/v1/root/hubs/connect",
        root.handle().base_url().replace("https", "wss")
    );

    // Wrong CA: the handshake fails on the hub's side and it never says hello.
    let other = Pki::new("wrong");
    let token = root.enroll("hub:wrong-ca", "test").await.unwrap();
    let hub = start_unconnected_hub(
        &root,
        "hub:wrong-ca",
        &token,
        &hub_tls(&other.ca_file(), &[], None),
    )
    .await;
    let line = wait_for_log(&["root channel down", &url, "UnknownIssuer"]).await;
    assert!(!line.contains(&token), "{line}");
    assert!(!hub.handle().is_connected());
    hub.stop().await;

    // Right CA, but the pinned key is another one: refused after normal verification.
    let decoy = pki.server("decoy");
    let token = root.enroll("hub:pin-mismatch", "test").await.unwrap();
    let hub = start_unconnected_hub(
        &root,
        "hub:pin-mismatch",
        &token,
        &hub_tls(&pki.ca_file(), &[&decoy.pin], None),
    )
    .await;
    wait_for_log(&[
        "root channel down",
        &url,
        "matches no configured pin",
        &server.pin,
    ])
    .await;
    assert!(!hub.handle().is_connected());
    hub.stop().await;
    let hubs = root.admin_get("/v1/root/hubs").await;
    for t in items(&hubs["targets"]) {
        assert_eq!(t["status"], "offline", "{t}");
        assert!(t["last_seen_at"].is_null(), "{t}");
    }

    // The right pin (among others, for rollover) connects.
    let token = root.enroll("hub:pinned", "test").await.unwrap();
    let hub = TestHub::start(
        &root.handle().base_url(),
        "hub:pinned",
        &token,
        &hub_tls(&pki.ca_file(), &[&decoy.pin, &server.pin], None),
    )
    .await
    .unwrap();
    hub.stop().await;
    root.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_on_the_hub_path() {
    let pki = Pki::new("mtls");
    let server = pki.server("root");
    let root = tls_root(tls_config(&server, Some(&pki.ca_file()), 0), &pki.ca_file()).await;
    let url = format!(
        "{}/v1/root/hubs/connect",
        root.handle().base_url().replace("https", "wss")
    );

    // Without a client certificate a hub is refused before the upgrade (403), token or not.
    let token = root.enroll("hub:mtls-none", "test").await.unwrap();
    let hub = start_unconnected_hub(
        &root,
        "hub:mtls-none",
        &token,
        &hub_tls(&pki.ca_file(), &[], None),
    )
    .await;
    wait_for_log(&["root channel down", &url, "403"]).await;
    wait_for_log(&["hub connection without a client certificate refused"]).await;
    assert!(!hub.handle().is_connected());
    hub.stop().await;

    // A client certificate from another CA fails the handshake.
    let foreign_ca = Pki::new("foreign");
    let foreign = foreign_ca.client("hub");
    let token = root.enroll("hub:mtls-foreign", "test").await.unwrap();
    let hub = start_unconnected_hub(
        &root,
        "hub:mtls-foreign",
        &token,
        &hub_tls(&pki.ca_file(), &[], Some(&foreign)),
    )
    .await;
    wait_for_log(&["root channel down", &url, "fatal alert"]).await;
    assert!(!hub.handle().is_connected());
    hub.stop().await;

    // With a client certificate from the configured CA it connects and serves calls.
    let client_cert = pki.client("hub");
    let token = root.enroll("hub:mtls-ok", "test").await.unwrap();
    let hub = TestHub::start(
        &root.handle().base_url(),
        "hub:mtls-ok",
        &token,
        &hub_tls(&pki.ca_file(), &[], Some(&client_cert)),
    )
    .await
    .unwrap();
    // MCP clients need no certificate: mutual TLS applies to the hub path only.
    let bearer = root.bearer("hub:mtls-ok", "InfraOpsRead").await;
    let client = mcp_https(&pki.ca_file(), &root.mcp_url(), &bearer).await;
    mcp_tests::hub_status(&client).await;
    // A hub token alone, without the certificate, is not enough even for a valid hub.
    let res = mcp_tests::websocket_upgrade(
        reqwest::Client::builder()
            .tls_certs_only(
                reqwest::Certificate::from_pem_bundle(&std::fs::read(pki.ca_file()).unwrap())
                    .unwrap(),
            )
            .build()
            .unwrap()
            .get(root.url("/v1/root/hubs/connect")),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(res.status(), 403);
    drop(client);
    hub.stop().await;
    root.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_client_certificates_bound_to_their_target() {
    let pki = Pki::new("bound");
    let server = pki.server("root");
    // The binding needs a client CA to mean anything.
    let mut unbound = mcp_root::config::RootConfig {
        tls: Some(tls_config(&server, None, 0)),
        ..Default::default()
    };
    unbound.tls.as_mut().unwrap().bind_client_cert_to_target = true;
    let err = unbound.validate().unwrap_err().to_string();
    assert!(err.contains("needs tls.client_ca_file"), "{err}");

    let mut tls = tls_config(&server, Some(&pki.ca_file()), 0);
    tls.bind_client_cert_to_target = true;
    let root = tls_root(tls, &pki.ca_file()).await;
    let cert_a = pki.hub_client("hub-a", "hub:bound-a");
    let cert_b = pki.hub_client("hub-b", "hub:bound-b");
    let token_a = root.enroll("hub:bound-a", "test").await.unwrap();
    let token_b = root.enroll("hub:bound-b", "test").await.unwrap();

    // The right target's certificate: connected, and its calls served.
    let hub_a = TestHub::start(
        &root.handle().base_url(),
        "hub:bound-a",
        &token_a,
        &hub_tls(&pki.ca_file(), &[], Some(&cert_a)),
    )
    .await
    .unwrap();
    let bearer = root.bearer("hub:bound-a", "InfraOpsRead").await;
    let client = mcp_https(&pki.ca_file(), &root.mcp_url(), &bearer).await;
    mcp_tests::hub_status(&client).await;
    // B's token with A's certificate (same CA, so the handshake succeeds): refused at hello,
    // precisely, on both sides, and logged by root with the certificate's fingerprint.
    let hub = start_unconnected_hub(
        &root,
        "hub:bound-b",
        &token_b,
        &hub_tls(&pki.ca_file(), &[], Some(&cert_a)),
    )
    .await;
    let refusal = "the hub's client certificate is bound to `hub:bound-a`, not to `hub:bound-b`";
    let line = wait_for_log(&[
        "hub client certificate not bound to its target; refused",
        "target_id=hub:bound-b",
        &hex_sha256(&cert_a.der),
        refusal,
    ])
    .await;
    assert!(!line.contains(&token_b), "{line}");
    wait_for_log(&[
        "root channel down",
        "root refused the hub",
        refusal,
        "mcp-hub:hub:bound-b",
    ])
    .await;
    assert!(!hub.handle().is_connected());
    hub.stop().await;

    // A certificate from the CA that names no target at all.
    let nameless = pki.client("nameless");
    let hub = start_unconnected_hub(
        &root,
        "hub:bound-b",
        &token_b,
        &hub_tls(&pki.ca_file(), &[], Some(&nameless)),
    )
    .await;
    wait_for_log(&[
        "root channel down",
        "root refused the hub",
        "names no target (no `mcp-hub:` URI name)",
        "`mcp-hub:hub:bound-b`",
    ])
    .await;
    assert!(!hub.handle().is_connected());
    hub.stop().await;
    let targets = root.admin_get("/v1/root/hubs").await;
    let b = items(&targets["targets"])
        .iter()
        .find(|t| t["target_id"] == "hub:bound-b")
        .unwrap()
        .clone();
    assert_eq!(b["status"], "offline", "{b}");
    assert!(b["last_seen_at"].is_null(), "{b}");

    // B with its own certificate connects; A was never disturbed.
    let hub_b = TestHub::start(
        &root.handle().base_url(),
        "hub:bound-b",
        &token_b,
        &hub_tls(&pki.ca_file(), &[], Some(&cert_b)),
    )
    .await
    .unwrap();
    assert!(hub_a.handle().is_connected());
    drop(client);
    hub_b.stop().await;
    hub_a.stop().await;
    root.stop().await;
}

/// Replaces the certificate files in place (what certbot-style renewal does).
fn swap_in(target: &Leaf, new: &Leaf) {
    std::fs::copy(&new.cert, &target.cert).unwrap();
    std::fs::copy(&new.key, &target.key).unwrap();
    private_file(&target.key).unwrap();
}

async fn wait_for_cert(ca: &Path, url: &str, der: &[u8]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while served_cert(ca, url).await != der {
        assert!(
            Instant::now() < deadline,
            "new connections never saw the new certificate"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_reload_keeps_open_sessions() {
    // A SIGHUP handler for this process before any SIGHUP is sent (root installs its own in
    // a task; this one makes sure the signal can never terminate the test binary).
    let _hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).unwrap();
    let pki = Pki::new("reload");
    let first = pki.server("root");
    let original = pki.server("original");
    let root = tls_root(tls_config(&first, None, 0), &pki.ca_file()).await;
    let health = root.url("/healthz");
    assert_eq!(served_cert(&pki.ca_file(), &health).await, first.der);
    let bearer = root.bearer("hub:none", "AdaOSDevRead").await;
    let session = mcp_https(&pki.ca_file(), &root.mcp_url(), &bearer).await;
    session
        .call_tool(CallToolRequestParams::new("sdk.get_metadata"))
        .await
        .unwrap();
    // A kept-alive connection, to show it survives.
    let keep = https_client(&pki.ca_file());
    let seen = |res: &reqwest::Response| {
        res.extensions()
            .get::<reqwest::tls::TlsInfo>()
            .and_then(|i| i.peer_certificate())
            .map(<[u8]>::to_vec)
            .unwrap()
    };
    let res = keep.get(&health).send().await.unwrap();
    assert_eq!(seen(&res), first.der);
    res.bytes().await.unwrap();

    // A broken pair (certificate of one key, another key) is refused; nothing changes.
    let second = pki.server("second");
    std::fs::copy(&second.cert, &first.cert).unwrap();
    let err = root.handle().reload_tls().unwrap_err().to_string();
    assert!(err.contains("does not match"), "{err}");
    assert!(!err.contains("PRIVATE KEY"), "{err}");
    assert_eq!(served_cert(&pki.ca_file(), &health).await, first.der);

    // The renewed pair, picked up on SIGHUP.
    swap_in(&first, &second);
    let status = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    wait_for_cert(&pki.ca_file(), &health, &second.der).await;
    assert_eq!(
        root.handle().tls_fingerprint().unwrap(),
        hex_sha256(&second.der)
    );
    // The open MCP session goes on; the kept-alive connection still has the old certificate.
    let res = session
        .call_tool(CallToolRequestParams::new("sdk.get_metadata"))
        .await
        .unwrap();
    assert_ne!(res.is_error, Some(true), "{res:?}");
    let res = keep.get(&health).send().await.unwrap();
    assert_eq!(seen(&res), first.der, "the open connection was not dropped");
    drop(session);
    root.stop().await;

    // Without a signal: the files are polled for change.
    let polled = pki.server("polled");
    let root = tls_root(tls_config(&polled, None, 1), &pki.ca_file()).await;
    let health = root.url("/healthz");
    assert_eq!(served_cert(&pki.ca_file(), &health).await, polled.der);
    swap_in(&polled, &original);
    wait_for_cert(&pki.ca_file(), &health, &original.der).await;
    root.stop().await;
}

#[tokio::test]
async fn plain_http_on_a_non_loopback_address_is_refused() {
    mcp_tests::init_crypto();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let err = mcp_tests::refusal_to_start("0.0.0.0:0", &data).await;
    assert!(
        err.contains("--insecure-http") && err.contains("0.0.0.0"),
        "{err}"
    );
    assert!(
        !data.exists(),
        "refused before anything was created or bound"
    );

    // The binary says the same and exits non-zero.
    let out = std::process::Command::new(mcp_tests::workspace_bin("mcp-root").unwrap())
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--insecure-http"), "{stderr}");
    assert!(!data.exists());
}

#[cfg(unix)]
#[tokio::test]
async fn secret_files_readable_by_others_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let loosen = |p: &Path| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
    };
    // The admin token (written 0600 by root; loosened by someone since).
    let mut root = TestRoot::start().await.unwrap();
    let data = root.data_dir();
    let admin = root.admin_token();
    // Stopped, its data directory kept.
    root.handle.take().unwrap().shutdown().await;
    for file in ["admin.token", "secrets.key"] {
        let path = data.join(file);
        loosen(&path);
        let err = mcp_tests::refusal_to_start("127.0.0.1:0", &data).await;
        assert!(
            err.contains(&format!("chmod 600 {}", path.display())),
            "{file}: {err}"
        );
        assert!(!err.contains(&admin), "{err}");
        private_file(&path).unwrap();
    }
    // The TLS key.
    let pki = Pki::new("perms");
    let server = pki.server("root");
    loosen(&server.key);
    let cfg = mcp_root::config::RootConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: data.clone(),
        tls: Some(tls_config(&server, None, 0)),
        ..Default::default()
    };
    let err = format!("{:#}", mcp_root::run(cfg).await.err().expect("refused"));
    assert!(
        err.contains(&format!("chmod 600 {}", server.key.display())),
        "{err}"
    );
    assert!(!err.contains("PRIVATE KEY"), "{err}");
    // A hub's token file.
    let token_file = pki.dir.path().join("hub.token");
    std::fs::write(&token_file, "mcph_x\n").unwrap();
    loosen(&token_file);
    let overrides = mcp_hub::config::Overrides {
        root_url: Some("https://127.0.0.1:1".into()),
        token_file: Some(token_file.clone()),
        target: Some("hub:x".into()),
        environment: Some("test".into()),
        state_dir: Some(pki.dir.path().join("state")),
        ..Default::default()
    };
    let err = mcp_hub::config::HubConfig::load(None, &overrides)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("chmod 600 {}", token_file.display())),
        "{err}"
    );
}

/// `mcp-root skills sync` against a root serving HTTPS with a private CA: `--ca-file` adds
/// the CA to the trust store and the sync succeeds; without it, or with another CA, it fails
/// saying the certificate was not accepted and installs nothing; `--ca-file` with a plain
/// `http://` URL is refused before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_sync_verifies_an_https_root_with_ca_file() {
    use mcp_root::cli::skills_sync::{Budgets, SyncError, SyncOptions, TokenSource};
    let pki = Pki::new("skills");
    let server = pki.server("root");
    let root = tls_root(tls_config(&server, None, 0), &pki.ca_file()).await;
    let token = root.bearer("hub:test-alpha", "InfraOpsRead").await;
    let work = tempfile::tempdir().unwrap();
    let token_file = work.path().join("token");
    std::fs::write(&token_file, &token).unwrap();
    let dest = work.path().join("skills");
    let opts = |ca_file: Option<PathBuf>| SyncOptions {
        url: root.mcp_url(),
        token: TokenSource::File(token_file.clone()),
        dest: dest.clone(),
        namespace: "mcp_root_platform".into(),
        scheme: mcp_root::skill_catalog::DEFAULT_SCHEME.into(),
        dry_run: false,
        budgets: Budgets::default(),
        ca_file,
    };
    assert!(root.mcp_url().starts_with("https://"));

    // Without --ca-file the system roots do not know the CA: a TLS error, nothing installed.
    let err = mcp_root::cli::skills_sync::sync(&opts(None))
        .await
        .unwrap_err();
    assert!(matches!(err, SyncError::Tls { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("initialize: the root's TLS certificate was not accepted")
            && text.contains("UnknownIssuer")
            && text.contains("--ca-file"),
        "{text}"
    );
    assert!(!dest.exists());
    // Another CA's bundle does not help either.
    let other = Pki::new("skills-other");
    let err = mcp_root::cli::skills_sync::sync(&opts(Some(other.ca_file())))
        .await
        .unwrap_err();
    assert!(matches!(err, SyncError::Tls { .. }), "{err:?}");
    assert!(!dest.exists());
    // --ca-file means "verify this root": a plain URL is refused, the bearer never sent.
    let mut plain = opts(Some(pki.ca_file()));
    plain.url = plain.url.replace("https://", "http://");
    let err = mcp_root::cli::skills_sync::sync(&plain).await.unwrap_err();
    assert!(
        matches!(&err, SyncError::Args(m) if m.contains("--ca-file needs an https:// --url")),
        "{err:?}"
    );

    // With the CA: installed.
    let report = mcp_root::cli::skills_sync::sync(&opts(Some(pki.ca_file())))
        .await
        .unwrap();
    assert!(report.changed);
    assert!(!report.catalog.skills.is_empty());
    assert!(
        dest.join("mcp_root_platform/root_descriptors/SKILL.md")
            .exists()
    );

    // The binary: the same with and without --ca-file.
    let bin = mcp_tests::workspace_bin("mcp-root").unwrap();
    let run = |ca: Option<&Path>, dest: &Path| {
        let mut cmd = std::process::Command::new(&bin);
        cmd.args(["skills", "sync", "--url", &root.mcp_url(), "--token-env"])
            .arg("SYNC_TLS_TOKEN")
            .arg("--dest")
            .arg(dest)
            .arg("--json")
            .env("SYNC_TLS_TOKEN", &token)
            .env_remove("MCP_ROOT_CA_FILE");
        if let Some(ca) = ca {
            cmd.arg("--ca-file").arg(ca);
        }
        cmd.output().unwrap()
    };
    let cli_dest = work.path().join("cli");
    let out = run(None, &cli_dest);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("TLS certificate was not accepted") && stderr.contains("--ca-file"),
        "{stderr}"
    );
    assert!(!stderr.contains(&token), "{stderr}");
    assert!(!cli_dest.exists());
    let out = run(Some(&pki.ca_file()), &cli_dest);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["changed"], true, "{v}");
    root.stop().await;
}
