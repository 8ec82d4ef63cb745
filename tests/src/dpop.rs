//! A DPoP holder (RFC 9449) for tests: the key `mcp-root login` kept beside its credential,
//! and requests carrying a fresh proof of it, as the CLI sends them.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use sha2::{Digest, Sha256};

/// A P-256 key a client proves it holds.
pub struct Holder {
    key: EncodingKey,
    jwk: Jwk,
}

impl Holder {
    /// The key as `mcp-root login` keeps it (`dpop_key`: base64url PKCS#8).
    pub fn from_kept(kept: &str) -> Holder {
        let der = URL_SAFE_NO_PAD.decode(kept).expect("a base64url key");
        let key = EncodingKey::from_ec_der(&der);
        let jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).expect("a P-256 key");
        Holder { key, jwk }
    }

    /// A proof for `method` on `url`, naming `token`.
    pub fn proof(&self, method: &str, url: &str, token: &str) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.typ = Some("dpop+jwt".into());
        header.jwk = Some(self.jwk.clone());
        let iat = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("the clock is after 1970")
            .as_secs();
        let claims = serde_json::json!({
            "jti": uuid::Uuid::new_v4().to_string(),
            "htm": method,
            "htu": url.split('?').next().unwrap_or(url),
            "iat": iat,
            "ath": URL_SAFE_NO_PAD.encode(Sha256::digest(token.as_bytes())),
        });
        jsonwebtoken::encode(&header, &claims, &self.key).expect("a signed proof")
    }

    /// `method` on `url` with `token` bound to this key (and `body` as JSON).
    pub async fn send(
        &self,
        http: &reqwest::Client,
        method: reqwest::Method,
        url: &str,
        token: &str,
        body: Option<&serde_json::Value>,
    ) -> reqwest::Response {
        let mut req = http
            .request(method.clone(), url)
            .header("authorization", format!("DPoP {token}"))
            .header("dpop", self.proof(method.as_str(), url, token));
        if let Some(b) = body {
            req = req.json(b);
        }
        req.send()
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"))
    }
}
