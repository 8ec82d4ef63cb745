//! Operators' sign-in across replicas: a CLI's requests may reach any replica behind a load
//! balancer, so its one-time code and a device grant's outcome are the zone's (the store's),
//! not the replica's that started them.

use mcp_tests::oidc::{Browser, Provider};
use mcp_tests::zone::Zone;
use serde_json::{Value, json};

#[tokio::test]
async fn a_cli_sign_in_started_on_one_replica_finishes_on_another() {
    let Some(zone) = Zone::create("zone-oidc").await else {
        return;
    };
    let provider = Provider::start().await.unwrap();
    let secret = zone.shared().join("oidc.secret");
    std::fs::write(&secret, "mcp-root-test-secret\n").unwrap();
    mcp_tests::private_file(&secret).unwrap();
    let mut oidc = provider.config();
    oidc.client_secret_file = Some(secret);
    let a = zone
        .replica_with("r-a", |c| c.operators.oidc = Some(oidc.clone()))
        .await;
    let b = zone
        .replica_with("r-b", |c| c.operators.oidc = Some(oidc.clone()))
        .await;

    // The device grant: started on r-a, approved at the provider, polled on r-b.
    let started: Value = a
        .post_as("", "/v1/root/mcp/operators/oidc/device", &json!({}))
        .await
        .json()
        .await
        .unwrap();
    let handle = started["handle"].as_str().unwrap().to_owned();
    let body = json!({ "handle": handle });
    let poll = async |root: &mcp_tests::TestRoot| {
        root.post_as("", "/v1/root/mcp/operators/oidc/device/poll", &body)
            .await
    };
    assert_eq!(poll(&b).await.status(), 202, "waiting, on either replica");
    let mut browser = Browser::new();
    let complete = started["verification_uri_complete"].as_str().unwrap();
    let confirm = browser.walk(complete, None).await.unwrap();
    let page = browser
        .submit(&confirm, &[("confirm", "yes")], None)
        .await
        .unwrap();
    browser.log_in(&page, "bob", None).await.unwrap();
    let credential = mcp_tests::eventually("the device sign-in on r-b", async || {
        let r = poll(&b).await;
        if r.status() != 200 {
            return None;
        }
        let v: Value = r.json().await.ok()?;
        v["credential"].as_str().map(str::to_owned)
    })
    .await;
    // Once: the grant is taken.
    assert_eq!(poll(&a).await.status(), 400);
    // The credential works on both replicas (bob is an auditor).
    for root in [&a, &b] {
        let r = root.get_as(&credential, "/v1/root/mcp/audit").await;
        assert_eq!(r.status(), 200);
    }

    // The loopback flow's one-time code: issued by r-a's callback, redeemed on r-b.
    let verifier = "a-verifier-of-the-cli-that-is-long-enough-to-be-a-pkce-verifier";
    let challenge = {
        use base64::Engine;
        use sha2::Digest;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(sha2::Sha256::digest(verifier.as_bytes()))
    };
    let cli = format!(
        "http://127.0.0.1:{}/callback",
        mcp_tests::ports::free_port()
    );
    let start = format!(
        "{}?cli_redirect={}&cli_challenge={challenge}&cli_state=s1",
        a.url("/ui/oidc/start"),
        url::form_urlencoded::byte_serialize(cli.as_bytes()).collect::<String>()
    );
    let mut browser = Browser::new();
    let page = browser.walk(&start, None).await.unwrap();
    let back = browser.log_in(&page, "alice", Some(&cli)).await.unwrap();
    let code = url::Url::parse(&back.url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| panic!("a code in {}", back.url));
    let redeem = json!({ "code": code, "code_verifier": verifier });
    let r = b
        .post_as("", "/v1/root/mcp/operators/oidc/token", &redeem)
        .await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["email"], "alice@example.test", "{v}");
    // Once.
    let r = a
        .post_as("", "/v1/root/mcp/operators/oidc/token", &redeem)
        .await;
    assert_eq!(r.status(), 400);
    zone.stop([a, b]).await;
}
