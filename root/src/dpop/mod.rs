//! DPoP (RFC 9449): a token bound to the key of the client it was issued to. The client signs
//! a proof for each request (a JWS of type `dpop+jwt` with its public key in the header, the
//! request's method and URL, when, a unique `jti`, the token's hash `ath`, and root's nonce
//! when root asks for one); root issues a bound token to a client that proved its key at the
//! token endpoint (the lease keeps the key's thumbprint, `dpop_jkt`) and, as the resource
//! server, answers a bound token only with a proof that key signed. A token copied from the
//! client's storage or a log is useless without the key.
//!
//! - [`Verifier::check`] checks one proof; its [`DpopError`] says precisely what was wrong.
//! - [`seen`] keeps the `jti`s of the proofs accepted within the window (per replica).
//! - [`holder`] is the client's side: a key and the proofs it signs (`mcp-root login`'s).

pub(crate) mod holder;
pub(crate) mod seen;

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, HeaderValue};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, jwk::Jwk, jwk::ThumbprintHash};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The request header a proof comes in.
pub(crate) const HEADER: &str = "dpop";
/// The response header root's nonce goes out in.
pub(crate) const NONCE_HEADER: &str = "dpop-nonce";
/// The signature algorithms root accepts in a proof (`dpop_signing_alg_values_supported`).
pub(crate) const ALGORITHMS: [Algorithm; 5] = [
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
    Algorithm::PS256,
    Algorithm::RS256,
];
/// The same, as the `algs` of a challenge and the metadata's list.
pub(crate) const ALGORITHM_NAMES: [&str; 5] = ["ES256", "ES384", "EdDSA", "PS256", "RS256"];
/// A proof is accepted this many seconds either side of its `iat` (clocks differ).
pub(crate) const WINDOW_SEC: i64 = 60;
/// Root's nonces change this often; one is accepted in its window and the next.
const NONCE_WINDOW_SEC: i64 = 300;
/// A proof longer than this is refused unread (an RSA-4096 key's proof is about 1.5 KB).
const MAX_PROOF_LEN: usize = 8 * 1024;
/// The longest `jti` root keeps.
const MAX_JTI_LEN: usize = 256;

/// Why a request's proof, or its token's binding, is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DpopError {
    #[error("a DPoP proof is needed (the `DPoP` request header)")]
    Missing,
    #[error("more than one `DPoP` header")]
    Several,
    #[error("the DPoP proof is malformed: {0}")]
    Malformed(String),
    #[error("the DPoP proof's signature does not verify with the key in its header")]
    Signature,
    #[error("the DPoP proof is for method {proof}, not {request}")]
    Method { proof: String, request: String },
    #[error("the DPoP proof is for {proof}, not {request}")]
    Url { proof: String, request: String },
    #[error(
        "the DPoP proof was made {0} s from now, outside the {WINDOW_SEC} s root accepts (check the client's clock)"
    )]
    Time(i64),
    #[error("the DPoP proof's jti was used before: a proof is good for one request")]
    Replayed,
    #[error("the DPoP proof's ath is not the hash of the access token it came with")]
    TokenHash,
    #[error("root asks for its nonce in the DPoP proof: sign again with the `DPoP-Nonce` it sent")]
    Nonce,
    #[error("the token is bound to another key than the one that signed the DPoP proof")]
    OtherKey,
    #[error("the token is DPoP-bound: send it as `Authorization: DPoP` with a proof")]
    Downgrade,
    #[error("the token is not DPoP-bound: send it as `Authorization: Bearer`")]
    Unbound,
    #[error("this root accepts only DPoP-bound tokens (`[oauth] dpop = require`)")]
    Required,
}

impl DpopError {
    /// The OAuth error code (RFC 9449 §7.1, §12.2): what the client does about it.
    pub(crate) fn oauth_code(&self) -> &'static str {
        match self {
            DpopError::Nonce => "use_dpop_nonce",
            DpopError::OtherKey | DpopError::Downgrade | DpopError::Unbound => "invalid_token",
            _ => "invalid_dpop_proof",
        }
    }

    /// The resource server's `WWW-Authenticate` challenge for this refusal.
    pub(crate) fn challenge(&self) -> HeaderValue {
        let text = format!(
            "DPoP error=\"{}\", error_description=\"{}\", algs=\"{}\"",
            self.oauth_code(),
            self.to_string().replace(['"', '\\'], "'"),
            ALGORITHM_NAMES.join(" ")
        );
        HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("DPoP"))
    }
}

/// What a request presents with its proof.
pub(crate) struct Presented<'a> {
    pub(crate) headers: &'a HeaderMap,
    pub(crate) method: &'a str,
    /// The request's URL as the client addressed it, without query: root's origin and path.
    pub(crate) url: String,
    /// The access token the proof must name (`ath`); `None` at the token endpoint.
    pub(crate) token: Option<&'a str>,
}

/// A proof's claims (RFC 9449 §4.2).
#[derive(Deserialize)]
struct Claims {
    jti: String,
    htm: String,
    htu: String,
    iat: i64,
    #[serde(default)]
    ath: Option<String>,
    #[serde(default)]
    nonce: Option<String>,
}

/// Checks proofs: their `jti`s seen, and root's nonce (when `[oauth] dpop_nonce` asks for it).
pub(crate) struct Verifier {
    seen: seen::Seen,
    nonce_key: [u8; 32],
    nonce_required: bool,
}

impl Verifier {
    /// `nonce_key`: a key every replica of the zone derives alike (a nonce one issued is good
    /// at the others).
    pub(crate) fn new(nonce_key: [u8; 32], nonce_required: bool) -> Verifier {
        Verifier {
            seen: seen::Seen::default(),
            nonce_key,
            nonce_required,
        }
    }

    /// The thumbprint (RFC 7638) of the key that signed the request's proof, once the proof
    /// is the request's, fresh, unused and (when asked for) carries root's nonce.
    pub(crate) fn check(&self, p: &Presented<'_>) -> Result<String, DpopError> {
        let mut values = p.headers.get_all(HEADER).iter();
        let proof = values.next().ok_or(DpopError::Missing)?;
        if values.next().is_some() {
            return Err(DpopError::Several);
        }
        let proof = proof
            .to_str()
            .ok()
            .filter(|v| v.len() <= MAX_PROOF_LEN)
            .ok_or_else(|| {
                DpopError::Malformed(format!("not text of at most {MAX_PROOF_LEN} bytes"))
            })?;
        let jwk = public_jwk(proof)?;
        let header = jsonwebtoken::decode_header(proof)
            .map_err(|e| DpopError::Malformed(format!("its header: {e}")))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(DpopError::Malformed(format!(
                "alg {:?} is not one of {}",
                header.alg,
                ALGORITHM_NAMES.join(", ")
            )));
        }
        let key = DecodingKey::from_jwk(&jwk)
            .map_err(|e| DpopError::Malformed(format!("its jwk: {e}")))?;
        let mut validation = Validation::new(header.alg);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_aud = false;
        let claims = jsonwebtoken::decode::<Claims>(proof, &key, &validation)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidSignature => DpopError::Signature,
                _ => DpopError::Malformed(format!("{e}")),
            })?
            .claims;
        if claims.htm != p.method {
            return Err(DpopError::Method {
                proof: claims.htm,
                request: p.method.to_owned(),
            });
        }
        if !same_url(&claims.htu, &p.url) {
            return Err(DpopError::Url {
                proof: claims.htu,
                request: p.url.clone(),
            });
        }
        let now = unix_now();
        if (claims.iat - now).abs() > WINDOW_SEC {
            return Err(DpopError::Time(claims.iat - now));
        }
        if let Some(token) = p.token {
            let ath = URL_SAFE_NO_PAD.encode(Sha256::digest(token.as_bytes()));
            if claims.ath.as_deref() != Some(ath.as_str()) {
                return Err(DpopError::TokenHash);
            }
        }
        if self.nonce_required && !claims.nonce.is_some_and(|n| self.nonce_ok(&n, now)) {
            return Err(DpopError::Nonce);
        }
        if claims.jti.is_empty() || claims.jti.len() > MAX_JTI_LEN {
            return Err(DpopError::Malformed(format!(
                "jti must be 1 to {MAX_JTI_LEN} characters"
            )));
        }
        let jkt = jwk
            .thumbprint(ThumbprintHash::SHA256)
            .map_err(|e| DpopError::Malformed(format!("its jwk: {e}")))?;
        // Last: only a proof good in every other way takes a place among the seen.
        if !self
            .seen
            .first(&jkt, &claims.jti, now + 2 * WINDOW_SEC, now)
        {
            return Err(DpopError::Replayed);
        }
        Ok(jkt)
    }

    /// The key a token request proved it holds (its thumbprint), if it sent a proof for `url`
    /// (a `POST`, no token yet): none without one, refused when `mode` requires DPoP.
    pub(crate) fn holder(
        &self,
        headers: &HeaderMap,
        url: String,
        mode: crate::config::DpopMode,
    ) -> Result<Option<String>, DpopError> {
        if !headers.contains_key(HEADER) {
            return match mode {
                crate::config::DpopMode::Require => Err(DpopError::Required),
                crate::config::DpopMode::Allow => Ok(None),
            };
        }
        let presented = Presented {
            headers,
            method: "POST",
            url,
            token: None,
        };
        self.check(&presented).map(Some)
    }

    /// Root's current nonce (`DPoP-Nonce`).
    pub(crate) fn nonce(&self) -> String {
        let window = unix_now().div_euclid(NONCE_WINDOW_SEC);
        format!("{window}.{}", self.nonce_tag(window))
    }

    fn nonce_ok(&self, nonce: &str, now: i64) -> bool {
        let current = now.div_euclid(NONCE_WINDOW_SEC);
        let Some((window, tag)) = nonce.split_once('.') else {
            return false;
        };
        let Ok(window) = window.parse::<i64>() else {
            return false;
        };
        (window == current || window == current - 1)
            && crate::auth::secret_eq(tag, &self.nonce_tag(window))
    }

    fn nonce_tag(&self, window: i64) -> String {
        use hmac::{KeyInit, Mac};
        let mut mac = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(&self.nonce_key)
            .expect("HMAC takes keys of any length");
        mac.update(&window.to_be_bytes());
        URL_SAFE_NO_PAD.encode(&mac.finalize().into_bytes()[..16])
    }
}

/// The proof header's `jwk`, a public key: a header without one, or with a private key's
/// parameters, is refused (RFC 9449 §4.3).
fn public_jwk(proof: &str) -> Result<Jwk, DpopError> {
    let first = proof.split('.').next().unwrap_or_default();
    let header: serde_json::Value = URL_SAFE_NO_PAD
        .decode(first)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| DpopError::Malformed("its header is not base64url JSON".into()))?;
    if header["typ"].as_str() != Some("dpop+jwt") {
        return Err(DpopError::Malformed("typ must be dpop+jwt".into()));
    }
    let jwk = header
        .get("jwk")
        .ok_or_else(|| DpopError::Malformed("its header has no jwk".into()))?;
    if ["d", "p", "q", "dp", "dq", "qi", "k"]
        .iter()
        .any(|private| jwk.get(private).is_some())
    {
        return Err(DpopError::Malformed(
            "its jwk holds a private key: send the public key only".into(),
        ));
    }
    serde_json::from_value(jwk.clone()).map_err(|e| DpopError::Malformed(format!("its jwk: {e}")))
}

/// Whether a proof's `htu` names `request` (RFC 9449 §4.3: query and fragment ignored; the
/// scheme and host compared as URLs compare them, default ports included).
fn same_url(htu: &str, request: &str) -> bool {
    let (Ok(a), Ok(b)) = (url::Url::parse(htu), url::Url::parse(request)) else {
        return false;
    };
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
        && a.path() == b.path()
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The access token from an `Authorization` header of the `DPoP` scheme, if it is one.
pub(crate) fn token(header: &str) -> Option<&str> {
    let (scheme, rest) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("dpop") {
        return None;
    }
    let token = rest.trim();
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests;
