//! Tokens bound to their holder (RFC 9449) with a client of another implementation: the
//! Python DPoP client (joserfc's keys and proofs, the MCP Python SDK's transport) signs in,
//! calls over MCP and refreshes with its key; its token copied without the key, or with a
//! proof that is not the request's, is refused, each with its precise `DPoP` challenge and
//! an audited refusal.

use mcp_tests::TestRoot;
use mcp_tests::items;
use mcp_tests::oauth::with_oauth;
use serde_json::Value;

/// The challenge of a refused request, and its body's message.
fn refused(out: &Value, case: &str) -> (String, String) {
    let a = &out[case];
    assert_eq!(a["status"], 401, "{case}: {a}");
    let challenge = match &a["www_authenticate"] {
        Value::Array(all) => all
            .iter()
            .filter_map(Value::as_str)
            .find(|c| c.starts_with("DPoP "))
            .unwrap_or_default()
            .to_owned(),
        v => v.as_str().unwrap_or_default().to_owned(),
    };
    let message = a["body"]["error"]["message"].as_str().unwrap_or_default();
    (challenge, message.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dpop_bound_token_works_for_its_holder_only() {
    let root = TestRoot::start_with(|cfg| {
        with_oauth(cfg);
        cfg.oauth.dpop_nonce = true;
    })
    .await
    .unwrap();
    let target = "hub:dpop-alpha";
    let _hub = root.start_hub(target, "").await.unwrap();
    let out = mcp_tests::run_python_client(
        "dpop.py",
        &[
            &root.handle().base_url(),
            &root.admin_token(),
            target,
            "InfraOpsRead",
        ],
    )
    .await
    .unwrap();
    // Root asked for its nonce, and issued a bound token.
    assert_eq!(out["nonce_asked"], true, "{out}");
    assert_eq!(out["token"]["status"], 200, "{out}");
    assert_eq!(out["token"]["body"]["token_type"], "DPoP", "{out}");
    assert_eq!(out["call"]["target_id"], target, "{out}");
    assert_eq!(out["first_use"], 200, "{out}");

    for (case, error, says) in [
        (
            "as_bearer",
            "invalid_token",
            "send it as `Authorization: DPoP`",
        ),
        ("other_key", "invalid_token", "bound to another key"),
        ("forged", "invalid_dpop_proof", "signature does not verify"),
        ("replayed", "invalid_dpop_proof", "jti was used before"),
        ("other_url", "invalid_dpop_proof", "/v1/root/mcp/call, not"),
        ("other_method", "invalid_dpop_proof", "method GET, not POST"),
        ("other_token", "invalid_dpop_proof", "ath is not the hash"),
        ("stale", "invalid_dpop_proof", "outside the 60 s"),
    ] {
        let (challenge, message) = refused(&out, case);
        assert!(
            challenge.starts_with(&format!("DPoP error=\"{error}\"")),
            "{case}: {challenge}"
        );
        assert!(challenge.contains("algs=\"ES256"), "{case}: {challenge}");
        assert!(message.contains(says), "{case}: {message}");
    }

    // The refresh token is bound as well: the thief's key is refused, the holder's works.
    let other = &out["refresh_other_key"];
    assert_eq!(other["status"], 400, "{out}");
    assert_eq!(other["body"]["error"], "invalid_grant", "{out}");
    assert!(
        other["body"]["error_description"]
            .as_str()
            .unwrap()
            .contains("bound to its client's DPoP key"),
        "{out}"
    );
    assert_eq!(out["refresh"]["status"], 200, "{out}");
    assert_eq!(out["refresh"]["body"]["token_type"], "DPoP", "{out}");
    assert_eq!(out["call_after_refresh"]["target_id"], target, "{out}");

    // Both leases are bound to the client's key (its RFC 7638 thumbprint, as joserfc
    // computes it).
    let sessions = root.admin_get("/v1/root/mcp/sessions").await;
    let bound: Vec<&Value> = items(&sessions["sessions"])
        .iter()
        .filter(|l| l["target_id"] == target)
        .collect();
    assert_eq!(bound.len(), 2, "{sessions}");
    assert!(
        bound.iter().all(|l| l["dpop_jkt"] == out["thumbprint"]),
        "{sessions}"
    );
    // Each refusal is one audited `auth.refuse`, naming what was wrong.
    let refusals = root.trail("tool_id=auth.refuse&limit=100").await;
    let said: Vec<String> = refusals
        .iter()
        .map(|e| {
            e["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    for says in ["jti was used before", "bound to another key", "method GET"] {
        assert!(said.iter().any(|m| m.contains(says)), "{says}: {said:?}");
    }
}

/// `[oauth] dpop = "require"`: a token request without a proof is refused, and the
/// metadata says bound tokens are required.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_that_requires_dpop_refuses_a_bearer_token_request() {
    let root = TestRoot::start_with(|cfg| {
        with_oauth(cfg);
        cfg.oauth.dpop = mcp_root::config::DpopMode::Require;
    })
    .await
    .unwrap();
    let meta: Value = root
        .http
        .get(root.url("/.well-known/oauth-protected-resource/mcp"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(meta["dpop_bound_access_tokens_required"], true, "{meta}");
    assert_eq!(
        meta["dpop_signing_alg_values_supported"][0], "ES256",
        "{meta}"
    );
    let reg: Value = root
        .http
        .post(root.url("/oauth/register"))
        .json(&serde_json::json!({"client_name": "bearer-only", "redirect_uris": ["http://127.0.0.1:1/cb"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let client_id = reg["client_id"].as_str().unwrap();
    let res = root
        .http
        .post(root.url("/oauth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(mcp_tests::oauth::form(&[
            ("grant_type", "authorization_code"),
            ("client_id", client_id),
            ("code", "mcpg_unknown"),
        ]))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"], "invalid_dpop_proof", "{body}");
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("accepts only DPoP-bound tokens"),
        "{body}"
    );
}
