//! OAuth sign-in that ends in a lease: the Python SDK's OAuth client signs in end to end (the
//! test plays the browser and the operator), and every refusal a client or an attacker meets
//! at the metadata, registration, authorization and token endpoints, on real roots.

use mcp_tests::TestRoot;
use mcp_tests::items;
use mcp_tests::oauth::{authorize_query, form, query_of, sealed_request};
use serde_json::{Value, json};

use mcp_tests::oauth::with_oauth;

/// A client that does not follow redirects (the test reads them).
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A PKCE verifier and its S256 challenge.
fn pkce() -> (String, String) {
    let p = mcp_tests::oauth::pkce();
    (p.verifier, p.challenge)
}

/// The query parameters of a redirect's `Location`.
fn location_query(res: &reqwest::Response) -> std::collections::HashMap<String, String> {
    query_of(res.headers()["location"].to_str().unwrap())
}

const REDIRECT: &str = "http://127.0.0.1:47999/callback";

async fn register(root: &TestRoot) -> String {
    let res = root
        .http
        .post(root.url("/oauth/register"))
        .json(&json!({"client_name": "refusal-test", "redirect_uris": [REDIRECT]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["token_endpoint_auth_method"], "none", "{body}");
    body["client_id"].as_str().unwrap().to_owned()
}

/// `/oauth/authorize` with the usual parameters, `extra` replacing or adding some.
async fn authorize(
    root: &TestRoot,
    client_id: &str,
    challenge: &str,
    extra: &[(&str, &str)],
) -> reqwest::Response {
    let resource = root.url("/mcp");
    let mut pairs = vec![("state", "st-1"), ("resource", resource.as_str())];
    pairs.extend_from_slice(extra);
    let query = authorize_query(client_id, REDIRECT, challenge, &pairs);
    browser()
        .get(format!("{}?{query}", root.url("/oauth/authorize")))
        .send()
        .await
        .unwrap()
}

/// Signs a request in as the admin (the operator's decision over the REST bearer): the code.
async fn approved_code(root: &TestRoot, client_id: &str, challenge: &str, target: &str) -> String {
    let res = authorize(root, client_id, challenge, &[]).await;
    assert_eq!(res.status(), 302);
    let loc = res.headers()["location"].to_str().unwrap().to_owned();
    let sealed = sealed_request(&loc).unwrap();
    let decided = root
        .admin_post(
            "/oauth/authorize/approve",
            json!({"request": sealed, "target_id": target, "capability_profile": "InfraOpsRead", "ttl_sec": 3600}),
        )
        .await;
    let q = query_of(decided["redirect"].as_str().unwrap());
    assert_eq!(q["state"], "st-1");
    assert_eq!(q["iss"], root.handle().base_url());
    q["code"].clone()
}

async fn token(root: &TestRoot, pairs: &[(&str, &str)]) -> (u16, Value) {
    let res = root
        .http
        .post(root.url("/oauth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(pairs))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["cache-control"], "no-store");
    (res.status().as_u16(), res.json().await.unwrap())
}

async fn exchange(root: &TestRoot, client_id: &str, code: &str, verifier: &str) -> (u16, Value) {
    let resource = root.url("/mcp");
    token(
        root,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", client_id),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", verifier),
            ("resource", &resource),
        ],
    )
    .await
}

async fn status_call(root: &TestRoot, bearer: &str) -> u16 {
    root.call(bearer, "hub.get_status", json!({})).await.0
}

/// The Python SDK's OAuth client, end to end: discovery from the 401, dynamic registration,
/// authorization (the operator approves in the dialog's endpoints), code exchange, a call,
/// a refresh and a call; the tokens are leases under the operator's name through that
/// client, and the replaced refresh token presented again ends the sign-in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_signs_in_with_oauth_and_its_token_is_a_lease() {
    let root = TestRoot::start_with(with_oauth).await.unwrap();
    let target = "hub:oauth-alpha";
    let _hub = root.start_hub(target, "").await.unwrap();
    let ann = &root
        .add_operator("ann", &["approver"], &["InfraOpsRead"])
        .await;
    let out = mcp_tests::run_python_client(
        "oauth.py",
        &[&root.url("/mcp"), ann, target, "InfraOpsRead"],
    )
    .await
    .unwrap();
    let client_id = out["client_id"].as_str().unwrap();
    assert_eq!(out["token_endpoint_auth_method"], "none", "{out}");
    assert_eq!(
        out["shown"]["client_name"], "python-sdk-oauth-test",
        "{out}"
    );
    // The SDK asks for the scopes the 401 names (every profile): the operator picks one.
    assert_eq!(out["shown"]["capability_profile"], Value::Null, "{out}");
    assert_eq!(out["shown"]["resource"], root.url("/mcp"), "{out}");
    assert_eq!(out["redirected_to"], "http://127.0.0.1:47321/callback");
    assert_eq!(out["iss"], root.handle().base_url());
    for r in items(&out["results"]) {
        assert_eq!(r["target_id"], target, "{out}");
    }
    let (first, second) = (&out["first"], &out["second"]);
    assert_eq!(first["scope"], "InfraOpsRead");
    assert_ne!(first["access_token"], second["access_token"], "refreshed");
    assert_ne!(first["refresh_token"], second["refresh_token"], "rotated");

    // Both tokens were leases of that client, issued under ann's name; the first ended
    // with the refresh.
    let leases = root.admin_get("/v1/root/mcp/sessions").await;
    let mine: Vec<&Value> = items(&leases["sessions"])
        .iter()
        .filter(|l| l["audience"] == format!("oauth:{client_id}"))
        .collect();
    assert_eq!(mine.len(), 2, "{leases}");
    let statuses: Vec<&str> = mine.iter().map(|l| l["status"].as_str().unwrap()).collect();
    assert!(
        statuses.contains(&"active") && statuses.contains(&"revoked"),
        "{statuses:?}"
    );
    assert!(
        mine.iter()
            .all(|l| l["target_id"] == target && l["capability_profile"] == "InfraOpsRead")
    );
    let trail = root.admin_get("/v1/root/mcp/audit?limit=1000").await;
    let ann_trail = root.trail("actor=operator:ann&limit=1000").await;
    let by_ann: Vec<&Value> = ann_trail.iter().collect();
    let tools: Vec<&str> = by_ann
        .iter()
        .map(|e| e["tool_id"].as_str().unwrap())
        .collect();
    for t in [
        "admin.oauth.approve",
        "admin.lease.create",
        "admin.lease.refresh",
    ] {
        assert!(tools.contains(&t), "{t} in {tools:?}");
    }
    let created = by_ann
        .iter()
        .find(|e| e["tool_id"] == "admin.lease.create")
        .unwrap();
    assert!(created.to_string().contains(client_id), "{created}");
    let trail_text = trail.to_string();
    for secret in [
        &first["access_token"],
        &first["refresh_token"],
        &second["refresh_token"],
    ] {
        assert!(
            !trail_text.contains(secret.as_str().unwrap()),
            "no token in the trail"
        );
    }

    // The replaced refresh token again: a reuse, which ends the sign-in.
    let second_access = second["access_token"].as_str().unwrap();
    assert_eq!(status_call(&root, second_access).await, 200);
    let resource = root.url("/mcp");
    let (status, body) = token(
        &root,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", client_id),
            ("refresh_token", first["refresh_token"].as_str().unwrap()),
            ("resource", &resource),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    assert_eq!(
        status_call(&root, second_access).await,
        401,
        "the lease ended with the grant"
    );
    let (status, body) = token(
        &root,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", client_id),
            ("refresh_token", second["refresh_token"].as_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    let verify = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(verify["ok"], true, "{verify}");
    root.stop().await;
}

/// Discovery is off by default: every OAuth path is a clean 404 and a 401 names no metadata
/// (clients that pasted a bearer keep using it).
#[tokio::test]
async fn without_discovery_root_answers_no_oauth_at_all() {
    let root = TestRoot::start().await.unwrap();
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
        "/oauth/authorize",
    ] {
        let res = root.http.get(root.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 404, "{path}");
    }
    let res = root.http.post(root.url("/mcp")).send().await.unwrap();
    assert_eq!(res.status(), 401);
    let challenge = res.headers()["www-authenticate"].to_str().unwrap();
    assert!(!challenge.contains("resource_metadata"), "{challenge}");
    root.stop().await;
}

/// With discovery on: the metadata, the challenge on every 401 (before any 405), and
/// `insufficient_scope` naming the profiles that would allow a refused REST call.
#[tokio::test]
async fn discovery_names_the_metadata_and_the_scope_a_call_needs() {
    let root = TestRoot::start_with(with_oauth).await.unwrap();
    let base = root.handle().base_url();
    let expected = format!("resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\"");
    for method in [
        reqwest::Method::POST,
        reqwest::Method::GET,
        reqwest::Method::DELETE,
    ] {
        let res = root
            .http
            .request(method.clone(), root.url("/mcp"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401, "{method}");
        let c = res.headers()["www-authenticate"].to_str().unwrap();
        assert!(
            c.starts_with("Bearer ") && c.contains(&expected),
            "{method}: {c}"
        );
    }
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let prm: Value = root
            .http
            .get(root.url(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(prm["resource"], format!("{base}/mcp"), "{prm}");
        assert_eq!(prm["authorization_servers"], json!([base]), "{prm}");
        assert!(items(&prm["scopes_supported"]).contains(&json!("InfraOpsRead")));
    }
    let asm: Value = root
        .http
        .get(root.url("/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(asm["issuer"], base);
    assert_eq!(asm["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(asm["token_endpoint"], format!("{base}/oauth/token"));
    assert_eq!(
        asm["registration_endpoint"],
        format!("{base}/oauth/register")
    );

    // A read lease calling a write: 403, and the scopes that grant it.
    let _hub = root.start_hub("hub:oauth-scope", "").await.unwrap();
    let bearer = root.bearer("hub:oauth-scope", "InfraOpsRead").await;
    let res = root.post_as(&bearer, "/v1/root/mcp/call", &json!({"tool_id": "hub.run_allowed_tests", "arguments": {"name": "smoke", "phase": "preview"}})).await;
    assert_eq!(res.status(), 403);
    let c = res.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        c.contains("error=\"insufficient_scope\"") && c.contains("InfraOpsControl"),
        "{c}"
    );
    assert!(!c.contains("InfraOpsRead"), "{c}");
    root.stop().await;
}

/// Registration and authorization refuse what they must: a bad client or redirect is
/// answered at root (never redirected), the rest goes back to the client as an error.
#[tokio::test]
async fn registration_and_authorization_refuse_bad_requests() {
    let root = TestRoot::start_with(with_oauth).await.unwrap();
    for (body, error) in [
        (
            json!({"redirect_uris": ["http://evil.example/cb"]}),
            "invalid_redirect_uri",
        ),
        (json!({"redirect_uris": []}), "invalid_redirect_uri"),
        (
            json!({"redirect_uris": [REDIRECT], "grant_types": ["password"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": "not a list"}),
            "invalid_client_metadata",
        ),
    ] {
        let res = root
            .http
            .post(root.url("/oauth/register"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400, "{body}");
        let b: Value = res.json().await.unwrap();
        assert_eq!(b["error"], error, "{body}: {b}");
    }
    let client_id = register(&root).await;
    let (_, challenge) = pkce();

    let res = authorize(&root, "mcpclient_nobody", &challenge, &[]).await;
    assert_eq!(res.status(), 401);
    assert!(res.headers().get("location").is_none());
    let res = authorize(
        &root,
        &client_id,
        &challenge,
        &[("redirect_uri", "http://127.0.0.1:47999/elsewhere")],
    )
    .await;
    assert_eq!(
        res.status(),
        400,
        "an unregistered redirect is not followed"
    );
    assert!(res.headers().get("location").is_none());
    let res = browser()
        .get(format!(
            "{}?client_id={client_id}&client_id={client_id}&redirect_uri={REDIRECT}",
            root.url("/oauth/authorize")
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400, "a repeated parameter");
    assert!(res.headers().get("location").is_none());

    for (extra, error) in [
        (
            vec![("resource", "http://127.0.0.1:1/mcp")],
            "invalid_target",
        ),
        (vec![("code_challenge_method", "plain")], "invalid_request"),
        (vec![("code_challenge", "")], "invalid_request"),
        (
            vec![("response_type", "token")],
            "unsupported_response_type",
        ),
        (vec![("scope", "NoSuchProfile")], "invalid_scope"),
    ] {
        let res = authorize(&root, &client_id, &challenge, &extra).await;
        assert_eq!(res.status(), 302, "{extra:?}");
        let q = location_query(&res);
        assert_eq!(q["error"], error, "{extra:?}: {q:?}");
        assert_eq!(q["state"], "st-1");
        assert!(
            res.headers()["location"]
                .to_str()
                .unwrap()
                .starts_with(REDIRECT)
        );
    }

    // A forged or altered sealed request is refused, and the refusal is an audited action.
    let res = authorize(&root, &client_id, &challenge, &[]).await;
    let loc = res.headers()["location"].to_str().unwrap().to_owned();
    let sealed = sealed_request(&loc).unwrap().to_owned();
    let altered = format!("{}x", sealed);
    for request in [altered.as_str(), "oar1.e30.AAAA", "garbage"] {
        let res = root.post_as(root.admin_token(), "/oauth/authorize/approve", &json!({"request": request, "target_id": "hub:x", "capability_profile": "InfraOpsRead", "ttl_sec": 600})).await;
        assert_eq!(res.status(), 400, "{request}");
        let b: Value = res.json().await.unwrap();
        assert!(b["event_id"].is_string(), "{b}");
    }
    // Denied: the client hears access_denied.
    let decided = root
        .admin_post("/oauth/authorize/deny", json!({"request": sealed}))
        .await;
    let q = query_of(decided["redirect"].as_str().unwrap());
    assert_eq!(q["error"], "access_denied");
    assert_eq!(q["state"], "st-1");
    root.stop().await;
}

/// The token endpoint: PKCE, redirect, resource and client must match; a code works once,
/// and presented again revokes what it issued; a revoked lease ends its refresh token; a
/// token or a code of another root is worth nothing here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_endpoint_refuses_what_it_must() {
    let root = TestRoot::start_with(with_oauth).await.unwrap();
    let target = "hub:oauth-token";
    let _hub = root.start_hub(target, "").await.unwrap();
    let client_id = register(&root).await;

    let (status, body) = token(
        &root,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", "mcpclient_nobody"),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("invalid_client"))
    );
    let res = root
        .http
        .post(root.url("/oauth/token"))
        .json(&json!({"grant_type": "authorization_code", "client_id": client_id}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400, "JSON is not a token request");
    let (status, body) = token(
        &root,
        &[("grant_type", "password"), ("client_id", &client_id)],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("unsupported_grant_type"))
    );

    // PKCE mismatch: refused, and the code is spent.
    let (verifier, challenge) = pkce();
    let code = approved_code(&root, &client_id, &challenge, target).await;
    let (status, body) = exchange(&root, &client_id, &code, &pkce().0).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    let (status, body) = exchange(&root, &client_id, &code, &verifier).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );

    // Wrong resource: refused before the code is spent; another redirect URI: refused.
    let code = approved_code(&root, &client_id, &challenge, target).await;
    let (status, body) = token(
        &root,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &client_id),
            ("code", &code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", &verifier),
            ("resource", "http://127.0.0.1:1/mcp"),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_target")),
        "{body}"
    );
    let (status, body) = exchange(&root, &client_id, &code, &verifier).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["scope"], "InfraOpsRead");
    let expires_in = body["expires_in"].as_i64().unwrap();
    assert!((3500..=3600).contains(&expires_in), "{body}");
    let access = body["access_token"].as_str().unwrap().to_owned();
    let refresh = body["refresh_token"].as_str().unwrap().to_owned();
    assert_eq!(status_call(&root, &access).await, 200);

    // The code again: refused, and the lease it issued is revoked.
    let (status, body) = exchange(&root, &client_id, &code, &verifier).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    assert_eq!(status_call(&root, &access).await, 401);
    let (status, _) = token(
        &root,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", &client_id),
            ("refresh_token", &refresh),
        ],
    )
    .await;
    assert_eq!(status, 400, "the grant ended with the replay");

    // The operator revokes the lease: its refresh token ends too.
    let code = approved_code(&root, &client_id, &challenge, target).await;
    let (_, body) = exchange(&root, &client_id, &code, &verifier).await;
    let access = body["access_token"].as_str().unwrap().to_owned();
    let refresh = body["refresh_token"].as_str().unwrap().to_owned();
    let leases = root.admin_get("/v1/root/mcp/sessions").await;
    let lease = items(&leases["sessions"])
        .iter()
        .find(|l| l["status"] == "active" && l["audience"] == format!("oauth:{client_id}"))
        .unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    root.on_lease(&lease, "revoke").await;
    assert_eq!(status_call(&root, &access).await, 401);
    let (status, body) = token(
        &root,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", &client_id),
            ("refresh_token", &refresh),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );

    // Another root: this root's token and code mean nothing there.
    let code = approved_code(&root, &client_id, &challenge, target).await;
    let (_, body) = exchange(&root, &client_id, &code, &verifier).await;
    let access = body["access_token"].as_str().unwrap().to_owned();
    let other = TestRoot::start_with(with_oauth).await.unwrap();
    let res = other
        .http
        .post(other.url("/mcp"))
        .bearer_auth(&access)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401, "a token of another root");
    let (status, body) = exchange(&other, &client_id, &code, &verifier).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("invalid_client")),
        "{body}"
    );
    let other_client = register(&other).await;
    let (status, body) = exchange(&other, &other_client, &code, &verifier).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    other.stop().await;
    let verify = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(verify["ok"], true, "{verify}");
    root.stop().await;
}

/// A code not exchanged within `[oauth] code_ttl_sec` is refused.
#[tokio::test]
async fn an_expired_code_is_refused() {
    let root = TestRoot::start_with(|c| {
        c.oauth.discovery = true;
        c.oauth.code_ttl_sec = 10;
    })
    .await
    .unwrap();
    let client_id = register(&root).await;
    let (verifier, challenge) = pkce();
    let code = approved_code(&root, &client_id, &challenge, "hub:oauth-late").await;
    tokio::time::sleep(std::time::Duration::from_millis(10_200)).await;
    let (status, body) = exchange(&root, &client_id, &code, &verifier).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "{body}"
    );
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "{body}"
    );
    root.stop().await;
}

/// Claude Code (the CLI `.ci/run` installs) with OAuth discovery on: a server configured with
/// a pasted lease bearer still connects with it; one configured without a header is told it
/// needs authentication (its OAuth sign-in); with discovery off that one fails to connect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_keeps_its_pasted_bearer_when_discovery_is_on() {
    let on = TestRoot::start_with(with_oauth).await.unwrap();
    let off = TestRoot::start().await.unwrap();
    let on_bearer = on.bearer("hub:oauth-claude", "InfraOpsRead").await;
    let off_bearer = off.bearer("hub:oauth-claude", "InfraOpsRead").await;
    let claude = mcp_tests::claude_code().unwrap();
    let home = tempfile::tempdir().unwrap();
    let run = |args: Vec<String>| {
        let mut cmd = tokio::process::Command::new(&claude);
        cmd.args(args)
            .current_dir(home.path())
            .env("HOME", home.path())
            .env("DISABLE_TELEMETRY", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .kill_on_drop(true);
        async move {
            let out = tokio::time::timeout(std::time::Duration::from_secs(120), cmd.output())
                .await
                .expect("claude answers within 2 minutes")
                .unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success(), "{text}");
            text
        }
    };
    let add = |name: &str, url: String, bearer: Option<&str>| {
        let mut args = vec!["mcp", "add", "--transport", "http", name]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>();
        args.push(url);
        if let Some(b) = bearer {
            args.push("--header".into());
            args.push(format!("Authorization: Bearer {b}"));
        }
        args
    };
    run(add("pasted-on", on.url("/mcp"), Some(&on_bearer))).await;
    run(add("signin-on", on.url("/mcp"), None)).await;
    run(add("pasted-off", off.url("/mcp"), Some(&off_bearer))).await;
    run(add("signin-off", off.url("/mcp"), None)).await;
    let listed = run(vec!["mcp".into(), "list".into()]).await;
    let line = |name: &str| {
        listed
            .lines()
            .find(|l| l.starts_with(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name} in {listed}"))
            .to_owned()
    };
    assert!(line("pasted-on").contains("Connected"), "{listed}");
    assert!(line("pasted-off").contains("Connected"), "{listed}");
    assert!(
        line("signin-on").contains("Needs authentication"),
        "{listed}"
    );
    assert!(line("signin-off").contains("Failed to connect"), "{listed}");
    let used = on.admin_get("/v1/root/mcp/sessions").await;
    assert!(
        used["sessions"][0]["use_count"].as_u64().unwrap() > 0,
        "{used}"
    );
    on.stop().await;
    off.stop().await;
}

/// A client named by its client ID metadata document (no registration): the Python SDK
/// serves its document over HTTPS and signs in with that URL as its client_id; root fetches
/// the document, and the operator's dialog says who published it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_named_by_its_metadata_document_signs_in() {
    let pki = crate::hardening::tls::Pki::new("cimd");
    let leaf = pki.server("cimd");
    let ca = pki.ca_file();
    let root = TestRoot::start_with(|c| {
        c.oauth.discovery = true;
        c.oauth.client_metadata_ca_file = Some(ca.clone());
        c.oauth.client_metadata_private_hosts = true;
    })
    .await
    .unwrap();
    let target = "hub:oauth-cimd";
    let _hub = root.start_hub(target, "").await.unwrap();
    let asm = root
        .admin_get("/.well-known/oauth-authorization-server")
        .await;
    assert_eq!(asm["client_id_metadata_document_supported"], true);
    let out = mcp_tests::run_python_client(
        "oauth.py",
        &[
            &root.url("/mcp"),
            &root.admin_token(),
            target,
            "InfraOpsRead",
            leaf.cert.to_str().unwrap(),
            leaf.key.to_str().unwrap(),
        ],
    )
    .await
    .unwrap();
    let client_id = out["client_id"].as_str().unwrap();
    assert!(
        client_id.starts_with("https://127.0.0.1:") && client_id.ends_with("/client.json"),
        "{out}"
    );
    let shown = out["shown"]["client_name"].as_str().unwrap();
    assert!(
        shown.starts_with("python-sdk-cimd-test (published by 127.0.0.1:"),
        "{shown}"
    );
    for r in items(&out["results"]) {
        assert_eq!(r["target_id"], target, "{out}");
    }
    let leases = root.admin_get("/v1/root/mcp/sessions").await;
    assert!(
        items(&leases["sessions"])
            .iter()
            .any(|l| l["audience"] == format!("oauth:{client_id}") && l["status"] == "active"),
        "{leases}"
    );
    root.stop().await;
}

/// Root does not fetch a client_id URL that points inside (loopback or private addresses,
/// by literal or by name) unless told to, and says so.
#[tokio::test]
async fn metadata_documents_are_not_fetched_from_inside() {
    let root = TestRoot::start_with(with_oauth).await.unwrap();
    let (_, challenge) = pkce();
    for (client_id, why) in [
        (
            "https://127.0.0.1:9/client.json",
            "does not fetch client metadata from 127.0.0.1",
        ),
        ("https://localhost:9/client.json", "resolves to no address"),
        ("https://app.example/", "https with a path"),
        ("https://u:p@app.example/c.json", "credentials"),
    ] {
        let res = authorize(&root, client_id, &challenge, &[]).await;
        assert_eq!(res.status(), 401, "{client_id}");
        assert!(res.headers().get("location").is_none());
        let b: Value = res.json().await.unwrap();
        assert_eq!(b["error"], "invalid_client", "{client_id}: {b}");
        let d = b["error_description"].as_str().unwrap();
        assert!(d.contains(why), "{client_id}: {d}");
    }
    root.stop().await;
}

/// Malformed OAuth requests get precise errors and change nothing: bodies of the wrong type
/// or too large, missing parameters, an approval that is not one.
#[tokio::test]
async fn malformed_oauth_requests_get_precise_errors() {
    let root = TestRoot::start_with(with_oauth).await.unwrap();
    let client_id = register(&root).await;
    let res = root
        .http
        .post(root.url("/oauth/register"))
        .header("content-type", "text/plain")
        .body("redirect_uris=x")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let b: Value = res.json().await.unwrap();
    assert_eq!(b["error"], "invalid_client_metadata", "{b}");
    let res = root
        .http
        .post(root.url("/oauth/register"))
        .header("content-type", "application/json")
        .body(vec![b' '; 2 * 1024 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    for (pairs, status, error) in [
        (vec![], 401, "invalid_client"),
        (
            vec![("client_id", client_id.as_str())],
            400,
            "unsupported_grant_type",
        ),
        (
            vec![
                ("client_id", client_id.as_str()),
                ("grant_type", "authorization_code"),
            ],
            400,
            "invalid_grant",
        ),
        (
            vec![
                ("client_id", client_id.as_str()),
                ("grant_type", "refresh_token"),
            ],
            400,
            "invalid_grant",
        ),
        (
            vec![
                ("client_id", client_id.as_str()),
                ("client_id", client_id.as_str()),
            ],
            400,
            "invalid_request",
        ),
    ] {
        let (got, body) = token(&root, &pairs).await;
        assert_eq!(
            (got, body["error"].as_str()),
            (status, Some(error)),
            "{pairs:?}: {body}"
        );
    }
    let res = root
        .http
        .post(root.url("/oauth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(vec![0xff, 0xfe, b'=', 0xfd])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401, "not UTF-8: no client named");
    for body in [
        json!({}),
        json!({"request": 5}),
        json!({"request": "x", "extra": 1}),
    ] {
        let res = root
            .post_as(root.admin_token(), "/oauth/authorize/approve", &body)
            .await;
        assert_eq!(res.status(), 400, "{body}");
        let b: Value = res.json().await.unwrap();
        assert_eq!(b["error"]["code"], "invalid_arguments", "{body}: {b}");
        assert!(b["event_id"].is_string(), "the refusal is audited: {b}");
    }
    let res = root
        .http
        .post(root.url("/oauth/authorize/approve"))
        .json(&json!({"request": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        401,
        "the operator's endpoint needs an operator"
    );
    let verify = root.admin_get("/v1/root/mcp/audit/verify").await;
    assert_eq!(verify["ok"], true, "{verify}");
    root.stop().await;
}

/// A client ends its sign-in at the revocation endpoint (RFC 7009) with either token: the
/// lease is revoked and the refresh token ends; an unknown token is answered like a revoked
/// one, another client's is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_revokes_its_sign_in_with_either_token() {
    let root = TestRoot::start_with(with_oauth).await.unwrap();
    let target = "hub:oauth-revoke";
    let _hub = root.start_hub(target, "").await.unwrap();
    let asm = root
        .admin_get("/.well-known/oauth-authorization-server")
        .await;
    assert_eq!(asm["revocation_endpoint"], root.url("/oauth/revoke"));
    let client_id = register(&root).await;
    let other = register(&root).await;
    let revoke = async |client: &str, token: &str| -> (u16, Value) {
        let res = root
            .http
            .post(root.url("/oauth/revoke"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(&[("client_id", client), ("token", token)]))
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    };
    let (verifier, challenge) = pkce();
    for which in ["refresh_token", "access_token"] {
        let code = approved_code(&root, &client_id, &challenge, target).await;
        let (_, tokens) = exchange(&root, &client_id, &code, &verifier).await;
        let access = tokens["access_token"].as_str().unwrap();
        let refresh = tokens["refresh_token"].as_str().unwrap();
        assert_eq!(status_call(&root, access).await, 200);
        let (status, body) = revoke(&other, tokens[which].as_str().unwrap()).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("unauthorized_client")),
            "{body}"
        );
        assert_eq!(
            status_call(&root, access).await,
            200,
            "another client revoked nothing"
        );
        assert_eq!(
            revoke(&client_id, tokens[which].as_str().unwrap()).await.0,
            200
        );
        assert_eq!(
            status_call(&root, access).await,
            401,
            "{which}: the lease is revoked"
        );
        let (status, body) = token(
            &root,
            &[
                ("grant_type", "refresh_token"),
                ("client_id", &client_id),
                ("refresh_token", refresh),
            ],
        )
        .await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("invalid_grant")),
            "{which}: {body}"
        );
        assert_eq!(
            revoke(&client_id, refresh).await.0,
            200,
            "revoked again: still 200"
        );
    }
    assert_eq!(revoke(&client_id, "mcpr_unknown").await.0, 200);
    let (status, body) = revoke(&client_id, "").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_request"))
    );
    let trail = root
        .admin_get("/v1/root/mcp/audit?tool_id=admin.lease.revoke&limit=100")
        .await;
    let revoked = items(&trail["events"]);
    assert_eq!(
        revoked.len(),
        2,
        "one audited revocation per sign-in: {trail}"
    );
    root.stop().await;
}

/// Redirect URIs match as strings (RFC 6749 §3.1.2, RFC 9700 §2.1): only a loopback port may
/// vary (RFC 8252 §7.3); a fragment or userinfo is refused by name at registration and at
/// authorization, and never reaches a redirect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_uris_match_exactly_but_for_a_loopback_port() {
    let root = TestRoot::start_with(with_oauth).await.unwrap();
    let registered = "http://127.0.0.1:5999/cb";
    let res = root
        .http
        .post(root.url("/oauth/register"))
        .json(&json!({"client_name": "exact", "redirect_uris": [registered]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let client_id = res.json::<Value>().await.unwrap()["client_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, challenge) = pkce();
    let ask = async |redirect: &str| {
        let query = authorize_query(&client_id, redirect, &challenge, &[("state", "s")]);
        browser()
            .get(format!("{}?{query}", root.url("/oauth/authorize")))
            .send()
            .await
            .unwrap()
    };
    for (redirect, why) in [
        ("http://127.0.0.1:5999/cb#evil", "fragment"),
        ("http://evil.example@127.0.0.1:5999/cb", "userinfo"),
        ("http://u:p@127.0.0.1:6000/cb", "userinfo"),
        (
            "http://127.0.0.1:5999/cb?x=1",
            "not one the client registered",
        ),
        ("http://127.0.0.1:5999/cb/", "not one the client registered"),
        ("http://localhost:5999/cb", "not one the client registered"),
    ] {
        let res = ask(redirect).await;
        assert_eq!(res.status(), 400, "{redirect}");
        assert!(res.headers().get("location").is_none(), "{redirect}");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"], "invalid_request", "{redirect}: {body}");
        assert!(
            body["error_description"].as_str().unwrap().contains(why),
            "{redirect}: {body}"
        );
    }
    // The registered URI, and the same URI on another loopback port, are sent on.
    for redirect in [registered, "http://127.0.0.1:6000/cb"] {
        assert_eq!(ask(redirect).await.status(), 302, "{redirect}");
    }
    // Registration refuses what authorization would.
    for bad in [
        "http://evil.example@127.0.0.1:5999/cb",
        "http://127.0.0.1:5999/cb#",
    ] {
        let res = root
            .http
            .post(root.url("/oauth/register"))
            .json(&json!({"redirect_uris": [bad]}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400, "{bad}");
        assert_eq!(
            res.json::<Value>().await.unwrap()["error"],
            "invalid_redirect_uri"
        );
    }
    root.stop().await;
}

/// Registration is bounded per client address (429 with Retry-After), and a full registry
/// drops its oldest never-used registration, so a flood locks nobody out; both counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_registrations_cannot_lock_the_registry() {
    use mcp_tests::oauth::{register, sign_in_client};
    // Per address: two at once, then 429 with when to come back.
    let root = TestRoot::start_with(|cfg| {
        with_oauth(cfg);
        cfg.oauth.registrations_per_hour = 2;
    })
    .await
    .unwrap();
    for _ in 0..2 {
        assert_eq!(register(&root).await.unwrap().0, 201);
    }
    let res = root
        .http
        .post(root.url("/oauth/register"))
        .json(&json!({"redirect_uris": [mcp_tests::oauth::REDIRECT]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 429);
    let retry: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=1800).contains(&retry), "Retry-After {retry}");
    assert_eq!(
        root.metric("mcp_root_oauth_registrations_total{outcome=\"rate_limited\"}")
            .await
            .unwrap(),
        Some(1)
    );
    root.stop().await;

    // A full registry drops the oldest registration that never signed in.
    let root = TestRoot::start_with(|cfg| {
        with_oauth(cfg);
        cfg.oauth.max_clients = 3;
    })
    .await
    .unwrap();
    let target = "hub:oauth-flood";
    let _hub = root.start_hub(target, "").await.unwrap();
    let admin = root.admin_token();
    let id = |b: &Value| b["client_id"].as_str().unwrap().to_owned();
    let used = id(&register(&root).await.unwrap().1);
    sign_in_client(&root, &used, &admin, target, "InfraOpsRead")
        .await
        .unwrap();
    let oldest = id(&register(&root).await.unwrap().1);
    let next = id(&register(&root).await.unwrap().1);
    let (status, newest) = register(&root).await.unwrap();
    assert_eq!(status, 201, "a full registry takes a new client: {newest}");
    let (_, challenge) = pkce();
    let known = async |client: &str| authorize(&root, client, &challenge, &[]).await.status();
    assert_eq!(
        known(&oldest).await,
        401,
        "the oldest unused one was dropped"
    );
    for kept in [&used, &next, &id(&newest)] {
        assert_ne!(known(kept).await, 401, "{kept} is kept");
    }
    assert_eq!(
        root.metric("mcp_root_oauth_registrations_total{outcome=\"evicted\"}")
            .await
            .unwrap(),
        Some(1)
    );
    // Only when every registration has signed in is the registry full.
    for client in [next, id(&newest)] {
        sign_in_client(&root, &client, &admin, target, "InfraOpsRead")
            .await
            .unwrap();
    }
    let (status, body) = register(&root).await.unwrap();
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("temporarily_unavailable")),
        "{body}"
    );
    assert_eq!(
        root.metric("mcp_root_oauth_registrations_total{outcome=\"full\"}")
            .await
            .unwrap(),
        Some(1)
    );
    root.stop().await;
}

/// What an approval grants is checked when it is approved, and the token endpoint answers
/// every refusal with its OAuth error, never `500`: an approval for a retired target, or for
/// a fleet sign-in whose profile grants no fleet tool, is refused to the operator; a code
/// approved for a target retired before the client exchanges it is `invalid_grant`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_check_the_lease_they_grant_and_the_token_endpoint_never_answers_500() {
    let root = TestRoot::start_with(with_oauth).await.unwrap();
    root.enroll("hub:oa-live", "test").await.unwrap();
    root.enroll("hub:oa-gone", "test").await.unwrap();
    root.admin_post("/v1/root/hubs/hub:oa-gone/lifecycle/retire", json!({}))
        .await;
    let c = mcp_tests::oauth::client(&root);
    let (_, registered) = c.register().await.unwrap();
    let client_id = registered["client_id"].as_str().unwrap();
    let admin = root.admin_token();

    let a = c
        .approve(client_id, &admin, "hub:oa-gone", "InfraOpsRead")
        .await
        .unwrap();
    assert_eq!(
        (a.status, a.body["error"]["code"].as_str()),
        (409, Some("target_retired")),
        "{}",
        a.body
    );
    let a = c
        .approve(client_id, &admin, "fleet:id=hub:oa-*", "ProfileOpsRead")
        .await
        .unwrap();
    assert_eq!(a.status, 403, "{}", a.body);
    assert!(
        a.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("grants no fleet tool"),
        "{}",
        a.body
    );

    // Approved while live, retired before the exchange.
    let a = c
        .approve(client_id, &admin, "hub:oa-live", "InfraOpsRead")
        .await
        .unwrap();
    assert_eq!(a.status, 200, "{}", a.body);
    root.admin_post("/v1/root/hubs/hub:oa-live/lifecycle/retire", json!({}))
        .await;
    let (s, b) = c.exchange(client_id, &a).await.unwrap();
    assert_eq!(
        (s, b["error"].as_str()),
        (400, Some("invalid_grant")),
        "{b}"
    );
    assert!(
        b["error_description"].as_str().unwrap().contains("retired"),
        "{b}"
    );
}
