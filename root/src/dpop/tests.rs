use super::holder::Holder;
use super::*;
use axum::http::HeaderMap;

const URL: &str = "http://127.0.0.1:8080/mcp";

fn verifier(nonce: bool) -> Verifier {
    Verifier::new([7; 32], nonce)
}

fn with(proof: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(HEADER, proof.parse().unwrap());
    h
}

fn presented<'a>(h: &'a HeaderMap, method: &'a str, token: Option<&'a str>) -> Presented<'a> {
    Presented {
        headers: h,
        method,
        url: URL.into(),
        token,
    }
}

/// A proof with the claims given, signed by `signer` with `holder`'s public key in its header.
fn forged(holder: &Holder, signer: &Holder, claims: serde_json::Value) -> String {
    let mut header = jsonwebtoken::Header::new(Algorithm::ES256);
    header.typ = Some("dpop+jwt".into());
    header.jwk = Some(holder.jwk_for_tests());
    jsonwebtoken::encode(&header, &claims, &signer.key_for_tests()).unwrap()
}

#[test]
fn a_proof_for_this_request_is_accepted_once() {
    let v = verifier(false);
    let key = Holder::generate().unwrap();
    let proof = key.proof("POST", URL, Some("mcpl_x"), None).unwrap();
    let h = with(&proof);
    let jkt = v.check(&presented(&h, "POST", Some("mcpl_x"))).unwrap();
    assert_eq!(jkt, key.thumbprint().unwrap());
    assert_eq!(
        v.check(&presented(&h, "POST", Some("mcpl_x"))),
        Err(DpopError::Replayed)
    );
    assert_eq!(v.seen.len(), 1);
}

#[test]
fn a_proof_for_another_request_or_token_is_refused() {
    let v = verifier(false);
    let key = Holder::generate().unwrap();
    let h = with(&key.proof("GET", URL, Some("t"), None).unwrap());
    assert!(matches!(
        v.check(&presented(&h, "POST", Some("t"))),
        Err(DpopError::Method { .. })
    ));
    let h = with(
        &key.proof(
            "POST",
            "http://127.0.0.1:8080/v1/root/mcp/call",
            Some("t"),
            None,
        )
        .unwrap(),
    );
    assert!(matches!(
        v.check(&presented(&h, "POST", Some("t"))),
        Err(DpopError::Url { .. })
    ));
    let h = with(&key.proof("POST", URL, Some("another"), None).unwrap());
    assert_eq!(
        v.check(&presented(&h, "POST", Some("t"))),
        Err(DpopError::TokenHash)
    );
    // The URL's query is not part of it; the default port is.
    let h = with(
        &key.proof("POST", "HTTP://127.0.0.1:8080/mcp?x=1", None, None)
            .unwrap(),
    );
    assert!(v.check(&presented(&h, "POST", None)).is_ok());
}

#[test]
fn a_proof_signed_by_another_key_or_out_of_time_is_refused() {
    let v = verifier(false);
    let (key, thief) = (Holder::generate().unwrap(), Holder::generate().unwrap());
    let now = unix_now();
    let claims = |iat: i64| serde_json::json!({"jti": uuid::Uuid::new_v4().to_string(), "htm": "POST", "htu": URL, "iat": iat});
    let h = with(&forged(&key, &thief, claims(now)));
    assert_eq!(
        v.check(&presented(&h, "POST", None)),
        Err(DpopError::Signature)
    );
    let h = with(&forged(&key, &key, claims(now - 300)));
    assert_eq!(
        v.check(&presented(&h, "POST", None)),
        Err(DpopError::Time(-300))
    );
    let h = with(&forged(&key, &key, claims(now + 300)));
    assert_eq!(
        v.check(&presented(&h, "POST", None)),
        Err(DpopError::Time(300))
    );
}

#[test]
fn malformed_proofs_say_what_is_wrong() {
    let v = verifier(false);
    for (proof, says) in [
        ("x", "not base64url JSON"),
        ("eyJhbGciOiJFUzI1NiJ9.e30.c2ln", "typ must be dpop+jwt"),
        // {"typ":"dpop+jwt","alg":"none"}
        ("eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6Im5vbmUifQ.e30.", "no jwk"),
    ] {
        let h = with(proof);
        let e = v.check(&presented(&h, "POST", None)).unwrap_err();
        assert!(e.to_string().contains(says), "{proof}: {e}");
    }
    assert_eq!(
        v.check(&presented(&HeaderMap::new(), "POST", None)),
        Err(DpopError::Missing)
    );
    let key = Holder::generate().unwrap();
    let mut h = with(&key.proof("POST", URL, None, None).unwrap());
    h.append(
        HEADER,
        key.proof("POST", URL, None, None).unwrap().parse().unwrap(),
    );
    assert_eq!(
        v.check(&presented(&h, "POST", None)),
        Err(DpopError::Several)
    );
}

#[test]
fn a_private_key_in_the_header_is_refused() {
    use base64::Engine;
    let header = serde_json::json!({"typ": "dpop+jwt", "alg": "ES256",
        "jwk": {"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA", "d": "AA"}});
    let first = URL_SAFE_NO_PAD.encode(header.to_string());
    let h = with(&format!("{first}.e30.c2ln"));
    let e = v_check(&h);
    assert!(e.to_string().contains("private key"), "{e}");
}

fn v_check(h: &HeaderMap) -> DpopError {
    verifier(false)
        .check(&presented(h, "POST", None))
        .unwrap_err()
}

#[test]
fn root_s_nonce_is_asked_for_and_then_accepted() {
    let v = verifier(true);
    let key = Holder::generate().unwrap();
    let h = with(&key.proof("POST", URL, None, None).unwrap());
    assert_eq!(v.check(&presented(&h, "POST", None)), Err(DpopError::Nonce));
    let h = with(&key.proof("POST", URL, None, Some("1.forged")).unwrap());
    assert_eq!(v.check(&presented(&h, "POST", None)), Err(DpopError::Nonce));
    // Another zone's nonce (another key) is not this one's.
    let other = Verifier::new([8; 32], true).nonce();
    let h = with(&key.proof("POST", URL, None, Some(&other)).unwrap());
    assert_eq!(v.check(&presented(&h, "POST", None)), Err(DpopError::Nonce));
    let h = with(&key.proof("POST", URL, None, Some(&v.nonce())).unwrap());
    assert!(v.check(&presented(&h, "POST", None)).is_ok());
}

#[test]
fn the_challenge_names_the_error_and_the_algorithms() {
    let c = DpopError::Nonce.challenge();
    let c = c.to_str().unwrap();
    assert!(c.starts_with("DPoP error=\"use_dpop_nonce\""), "{c}");
    assert!(c.contains("algs=\"ES256 ES384 EdDSA PS256 RS256\""), "{c}");
    assert_eq!(DpopError::Downgrade.oauth_code(), "invalid_token");
    assert_eq!(DpopError::Replayed.oauth_code(), "invalid_dpop_proof");
}

#[test]
fn the_authorization_scheme_is_read() {
    assert_eq!(token("DPoP abc"), Some("abc"));
    assert_eq!(token("dpop abc "), Some("abc"));
    assert_eq!(token("Bearer abc"), None);
    assert_eq!(token("DPoP "), None);
}

#[test]
fn a_kept_key_is_the_same_key() {
    let key = Holder::generate().unwrap();
    let again = Holder::open(&key.kept()).unwrap();
    assert_eq!(key.thumbprint().unwrap(), again.thumbprint().unwrap());
    assert!(Holder::open("not a key").is_err());
}
