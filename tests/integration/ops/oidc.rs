//! Operators signing in with the organization's identity provider (`[operators.oidc]`),
//! against a real provider (`oidc-provider` from npm) on loopback: the CLI's loopback flow
//! and device grant through the real `mcp-root login`, the console's code flow, the roles
//! the provider's groups map to, refusals each precise and audited, and a person removed at
//! the provider losing access within the check interval.

use std::process::Stdio;
use std::time::Duration;

use mcp_tests::dpop::Holder;
use mcp_tests::oidc::{Browser, Provider};
use mcp_tests::{TestRoot, error_message, eventually, workspace_bin};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// A root with `[operators.oidc]` for `provider` (its client secret in a 0600 file).
pub(crate) async fn root_for(provider: &Provider) -> TestRoot {
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.keep().join("oidc.secret");
    std::fs::write(&secret, "mcp-root-test-secret\n").unwrap();
    mcp_tests::private_file(&secret).unwrap();
    let mut oidc = provider.config();
    oidc.client_secret_file = Some(secret);
    TestRoot::start_with(|c| c.operators.oidc = Some(oidc))
        .await
        .unwrap()
}

/// `mcp-root login` run against `root`: its stdout lines as they come, and the process.
struct Login {
    child: tokio::process::Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Login {
    fn start(root: &TestRoot, file: &std::path::Path, device: bool) -> Login {
        let mut cmd = tokio::process::Command::new(workspace_bin("mcp-root").unwrap());
        cmd.arg("login")
            .arg("--root-url")
            .arg(root.url(""))
            .arg("--credential-file")
            .arg(file)
            .arg("--no-browser")
            .arg("--timeout")
            .arg("60")
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        if device {
            cmd.arg("--device");
        }
        let mut child = cmd.spawn().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Login { child, lines }
    }

    /// The next line of output containing `marker`: what follows it.
    async fn after(&mut self, marker: &str) -> String {
        let read = async {
            while let Some(line) = self.lines.next_line().await.unwrap() {
                if let Some(at) = line.find(marker) {
                    return line[at + marker.len()..].trim().to_owned();
                }
            }
            panic!("`mcp-root login` ended without `{marker}`");
        };
        tokio::time::timeout(Duration::from_secs(60), read)
            .await
            .unwrap_or_else(|_| panic!("no `{marker}` from `mcp-root login` in 60 s"))
    }

    async fn succeeds(mut self) {
        let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("`mcp-root login` ends")
            .unwrap();
        assert!(status.success(), "`mcp-root login` failed: {status}");
    }
}

/// The credential `mcp-root login` kept.
fn kept(file: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

fn status_of(r: &reqwest::Response) -> u16 {
    r.status().as_u16()
}

#[tokio::test]
async fn an_operator_signs_in_from_the_cli_holds_their_groups_role_and_loses_it_at_the_provider() {
    let provider = Provider::start().await.unwrap();
    let root = root_for(&provider).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("credential");

    // The loopback flow: `mcp-root login` prints root's sign-in address; the browser signs
    // in at the provider and comes back to the command's loopback listener.
    let mut login = Login::start(&root, &file, false);
    let url = login.after("Sign in with your identity provider:").await;
    let mut browser = Browser::new();
    let page = browser.walk(&url, None).await.unwrap();
    assert!(
        page.url.starts_with(&provider.issuer),
        "the provider's login page: {}",
        page.url
    );
    let back = browser.log_in(&page, "alice", None).await.unwrap();
    assert_eq!(back.status, 200, "{}: {}", back.url, back.body);
    assert!(back.body.contains("Signed in"), "{}", back.body);
    login.succeeds().await;

    let cred = kept(&file);
    let bearer = cred["credential"].as_str().unwrap().to_owned();
    assert!(bearer.starts_with("mcpc_"), "{cred}");
    // The credential is bound to the key the command kept beside it (DPoP): a copy of the
    // credential alone opens nothing.
    let holder = Holder::from_kept(cred["dpop_key"].as_str().unwrap());
    let stolen = root.get_as(&bearer, "/v1/root/mcp/sessions").await;
    assert_eq!(status_of(&stolen), 401);
    let challenge = stolen.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.starts_with("DPoP error=\"invalid_token\""),
        "{challenge}"
    );
    let (get, post) = (reqwest::Method::GET, reqwest::Method::POST);
    let alice = format!("oidc:{}#alice", provider.issuer);
    assert_eq!(cred["operator"], alice.as_str(), "{cred}");
    assert_eq!(cred["email"], "alice@example.test", "{cred}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the credential file is the operator's alone");
    }

    // `sre` maps to `operator` with AdaOSDevRead: leases of that profile, nothing more.
    let lease = |profile: &str| json!({"target_id": "hub:oidc-a", "capability_profile": profile, "ttl_sec": 60});
    let sessions = root.url("/v1/root/mcp/sessions");
    let r = holder
        .send(
            &root.http,
            post.clone(),
            &sessions,
            &bearer,
            Some(&lease("AdaOSDevRead")),
        )
        .await;
    assert_eq!(status_of(&r), 201, "{:?}", r.text().await);
    let r = holder
        .send(
            &root.http,
            post,
            &sessions,
            &bearer,
            Some(&lease("InfraOpsControl")),
        )
        .await;
    assert_eq!(status_of(&r), 403);
    let audit = root.url("/v1/root/mcp/audit");
    let r = holder
        .send(&root.http, get.clone(), &audit, &bearer, None)
        .await;
    assert_eq!(status_of(&r), 403, "an operator is not an auditor");
    let body: Value = r.json().await.unwrap();
    assert!(error_message(&body).contains("`auditor`"), "{body}");

    // `mcp-root admin` takes the kept credential when no token is given.
    let out = tokio::process::Command::new(workspace_bin("mcp-root").unwrap())
        .args([
            "admin",
            "--root-url",
            &root.url(""),
            "--data-dir",
            "/nonexistent",
        ])
        .arg("--credential-file")
        .arg(&file)
        .args(["lease", "list", "--json"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The trail names the person, with their email.
    let signins = root.trail("tool_id=admin.operator.signin").await;
    let ev = signins
        .iter()
        .find(|e| e["actor"]["id"] == format!("operator:{alice}").as_str())
        .unwrap_or_else(|| panic!("alice's sign-in in {signins:?}"));
    assert_eq!(ev["request"]["email"], "alice@example.test", "{ev}");
    assert_eq!(ev["request"]["how"], "cli", "{ev}");

    // Removed at the provider: refused within the check interval (10 s here).
    provider.remove("alice").await.unwrap();
    let removed = std::time::Instant::now();
    let refusal = eventually("alice's credential refused", async || {
        let r = holder
            .send(&root.http, get.clone(), &sessions, &bearer, None)
            .await;
        match status_of(&r) {
            401 => Some(r.text().await.unwrap_or_default()),
            _ => None,
        }
    })
    .await;
    assert!(
        removed.elapsed() < Duration::from_secs(25),
        "{:?}",
        removed.elapsed()
    );
    // Refused as a credential that ended, not for its proof.
    assert!(!refusal.contains("DPoP"), "{refusal}");
    // The revocation's event is written once the revocation is done (a moment after the
    // credential stops working).
    eventually("the check's revocation audited", async || {
        let revokes = root.trail("tool_id=admin.operator.revoke").await;
        revokes
            .iter()
            .any(|e| {
                e["actor"]["id"] == "root:oidc-check" && e["request"]["name"] == alice.as_str()
            })
            .then_some(())
    })
    .await;
    let verified = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(verified["ok"], true, "{verified}");
}

#[tokio::test]
async fn a_headless_operator_signs_in_with_the_device_grant() {
    let provider = Provider::start().await.unwrap();
    let root = root_for(&provider).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("credential");
    let mut login = Login::start(&root, &file, true);
    let complete = login.after("(or open").await;
    let complete = complete.trim_end_matches(')').to_owned();
    assert!(complete.starts_with(&provider.issuer), "{complete}");

    // On "another device": the provider's confirmation, its login, done.
    let mut browser = Browser::new();
    let confirm = browser.walk(&complete, None).await.unwrap();
    let page = browser
        .submit(&confirm, &[("confirm", "yes")], None)
        .await
        .unwrap();
    let done = browser.log_in(&page, "bob", None).await.unwrap();
    assert_eq!(done.status, 200, "{}: {}", done.url, done.body);
    login.succeeds().await;

    // `auditors` maps to `auditor`: the trail, not leases (with the kept key's proofs).
    let cred = kept(&file);
    let bearer = cred["credential"].as_str().unwrap().to_owned();
    let holder = Holder::from_kept(cred["dpop_key"].as_str().unwrap());
    let audit = root.url("/v1/root/mcp/audit");
    let r = holder
        .send(&root.http, reqwest::Method::GET, &audit, &bearer, None)
        .await;
    assert_eq!(status_of(&r), 200);
    let lease =
        json!({"target_id": "hub:oidc-b", "capability_profile": "AdaOSDevRead", "ttl_sec": 60});
    let sessions = root.url("/v1/root/mcp/sessions");
    let r = holder
        .send(
            &root.http,
            reqwest::Method::POST,
            &sessions,
            &bearer,
            Some(&lease),
        )
        .await;
    assert_eq!(status_of(&r), 403);
    let signins = root.trail("tool_id=admin.operator.signin").await;
    assert!(
        signins.iter().any(|e| e["request"]["how"] == "device"
            && e["request"]["email"] == "bob@example.test"),
        "{signins:?}"
    );
}

#[tokio::test]
async fn refused_sign_ins_say_why_and_are_audited() {
    let provider = Provider::start().await.unwrap();
    let root = root_for(&provider).await;
    let start = root.url("/ui/oidc/start");
    let callback = root.url("/ui/oidc/callback");

    // Someone no rule gives a role: 403, and no session.
    let mut carol = Browser::new();
    let page = carol.walk(&start, None).await.unwrap();
    let back = carol.log_in(&page, "carol", None).await.unwrap();
    assert_eq!(back.status, 403, "{}", back.body);
    assert!(back.body.contains("holds no role"), "{}", back.body);
    assert!(!carol.cookies.contains_key("mcp_console"));

    // A callback whose state is not the browser's sign-in's.
    let mut b = Browser::new();
    let page = b.walk(&start, None).await.unwrap();
    let code_url = b.log_in(&page, "alice", Some(&callback)).await.unwrap().url;
    let forged = code_url.replace("state=", "state=x");
    let r = b.walk(&forged, None).await.unwrap();
    assert_eq!(r.status, 400);
    assert!(r.body.contains("state does not match"), "{}", r.body);

    // Another provider's response (RFC 9207 `iss`): a mix-up, refused.
    let mixed = format!("{code_url}&iss=http%3A%2F%2Fevil.example");
    let mixed = mixed.replace(&format!("iss={}", urlencode(&provider.issuer)), "x=1");
    let r = b.walk(&mixed, None).await.unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("names issuer"), "{}", r.body);

    // The genuine callback signs alice in once; the same code again is the provider's to refuse.
    let ok = b.walk(&code_url, Some(&root.url("/ui/"))).await.unwrap();
    assert!(ok.url.ends_with("/ui/"), "{}", ok.url);
    assert!(b.cookies.contains_key("mcp_console"), "{:?}", b.cookies);
    let session = b.walk(&root.url("/ui/api/session"), None).await.unwrap();
    assert_eq!(session.status, 200, "{}", session.body);
    let s: Value = serde_json::from_str(&session.body).unwrap();
    assert_eq!(
        s["operator"],
        format!("oidc:{}#alice", provider.issuer).as_str()
    );
    assert_eq!(s["roles"], json!(["viewer", "operator"]), "{s}");

    // A callback without the browser's sign-in in progress.
    let mut stranger = Browser::new();
    let r = stranger.walk(&code_url, None).await.unwrap();
    assert_eq!(r.status, 400);
    assert!(r.body.contains("start again"), "{}", r.body);

    // A CLI's code is worth nothing without its verifier, and only once.
    let r = root
        .post_as(
            "",
            "/v1/root/mcp/operators/oidc/token",
            &json!({"code": "mcpx_guess", "code_verifier": "v"}),
        )
        .await;
    assert_eq!(status_of(&r), 400);
    let r = root
        .post_as(
            "",
            "/v1/root/mcp/operators/oidc/device/poll",
            &json!({"handle": "mcpd_guess"}),
        )
        .await;
    assert_eq!(status_of(&r), 400);
    // Malformed bodies: a precise 400, nothing else.
    for (path, body) in [
        ("/v1/root/mcp/operators/oidc/token", "{\"code\": 1}"),
        ("/v1/root/mcp/operators/oidc/token", "not json"),
        (
            "/v1/root/mcp/operators/oidc/device/poll",
            "{\"handle\": \"h\", \"extra\": true}",
        ),
    ] {
        let r = root
            .http
            .post(root.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(status_of(&r), 400, "{path} {body}");
        let v: Value = r.json().await.unwrap();
        assert!(!error_message(&v).is_empty(), "{path} {body}: {v}");
    }
    // A CLI return that is not on the loopback interface.
    let r = Browser::new()
        .walk(
            &format!(
                "{start}?cli_redirect=http%3A%2F%2Fevil.example%2Fcb&cli_challenge={}&cli_state=s",
                "a".repeat(43)
            ),
            None,
        )
        .await
        .unwrap();
    assert_eq!(r.status, 400);
    assert!(r.body.contains("loopback"), "{}", r.body);

    // Each refusal is one denied event naming the address and why.
    let refused = root
        .trail("tool_id=admin.operator.signin&status=denied")
        .await;
    let whys: Vec<&str> = refused
        .iter()
        .filter_map(|e| e["error"]["message"].as_str())
        .collect();
    for want in [
        "holds no role",
        "state does not match",
        "names issuer",
        "start again",
        "loopback",
    ] {
        assert!(
            whys.iter().any(|w| w.contains(want)),
            "`{want}` in {whys:?}"
        );
    }
    assert!(
        refused
            .iter()
            .all(|e| e["actor"]["id"].as_str().unwrap().starts_with("address:"))
    );
    let verified = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(verified["ok"], true, "{verified}");
}

/// A provider's bad ID tokens (signed again by the test provider, as a broken or hostile
/// provider would send them): each refused with what is wrong, no session, one denied event.
#[tokio::test]
async fn bad_id_tokens_are_refused_with_what_is_wrong() {
    let provider = Provider::start().await.unwrap();
    let root = root_for(&provider).await;
    let start = root.url("/ui/oidc/start");
    // A good sign-in first: the token `replay` sends again is its.
    let mut first = Browser::new();
    let page = first.walk(&start, None).await.unwrap();
    let ok = first.log_in(&page, "alice", None).await.unwrap();
    assert!(ok.url.ends_with("/ui/"), "{}: {}", ok.url, ok.body);
    for (claim, says) in [
        ("aud", "audience"),
        ("iss", "issuer"),
        ("exp", "expired"),
        ("nonce", "nonce"),
        ("no_nonce", "nonce"),
        ("replay", "nonce"),
        ("key", "signature"),
    ] {
        provider.tamper(claim).await.unwrap();
        let mut b = Browser::new();
        let page = b.walk(&start, None).await.unwrap();
        let back = b.log_in(&page, "alice", None).await.unwrap();
        assert_eq!(back.status, 400, "{claim}: {} {}", back.url, back.body);
        let body = back.body.to_lowercase();
        assert!(
            body.contains("the id token is not valid") && body.contains(says),
            "{claim}: {}",
            back.body
        );
        assert!(!b.cookies.contains_key("mcp_console"), "{claim}");
    }
    let refused = root
        .trail("tool_id=admin.operator.signin&status=denied")
        .await;
    let id_token_refusals = refused
        .iter()
        .filter_map(|e| e["error"]["message"].as_str())
        .filter(|m| m.contains("ID token is not valid"))
        .count();
    assert_eq!(id_token_refusals, 7, "{refused:?}");
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}
