//! The client's side of DPoP: a P-256 key (kept as PKCS#8, base64url) and the proof it signs
//! for each request. `mcp-root login` makes one and binds its root credential to it.

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::Jwk;
#[cfg(test)]
use jsonwebtoken::jwk::ThumbprintHash;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use sha2::{Digest, Sha256};

/// Why a key cannot sign.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HolderError {
    #[error("the DPoP key is not a base64url PKCS#8 P-256 key")]
    Key,
    #[error("signing a DPoP proof: {0}")]
    Sign(#[from] jsonwebtoken::errors::Error),
}

/// A key a client proves it holds.
pub(crate) struct Holder {
    pkcs8: Vec<u8>,
    key: EncodingKey,
    jwk: Jwk,
}

impl Holder {
    /// A new P-256 key.
    pub(crate) fn generate() -> Result<Holder, HolderError> {
        let doc =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .map_err(|_| HolderError::Key)?;
        Holder::from_pkcs8(doc.as_ref().to_vec())
    }

    /// The key kept as [`Holder::kept`] gave it.
    pub(crate) fn open(kept: &str) -> Result<Holder, HolderError> {
        let pkcs8 = URL_SAFE_NO_PAD.decode(kept).map_err(|_| HolderError::Key)?;
        Holder::from_pkcs8(pkcs8)
    }

    fn from_pkcs8(pkcs8: Vec<u8>) -> Result<Holder, HolderError> {
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8)
            .map_err(|_| HolderError::Key)?;
        let key = EncodingKey::from_ec_der(&pkcs8);
        let jwk = Jwk::from_encoding_key(&key, Algorithm::ES256)?;
        Ok(Holder { pkcs8, key, jwk })
    }

    /// The private key as kept on disk (base64url PKCS#8).
    pub(crate) fn kept(&self) -> String {
        URL_SAFE_NO_PAD.encode(&self.pkcs8)
    }

    /// The key's RFC 7638 thumbprint (a bound token's `jkt`).
    #[cfg(test)]
    pub(crate) fn thumbprint(&self) -> Result<String, HolderError> {
        Ok(self.jwk.thumbprint(ThumbprintHash::SHA256)?)
    }

    /// A proof for one request: `method` on `url` (query and fragment dropped), naming
    /// `token` when one goes with it, and root's `nonce` when root asked for one.
    pub(crate) fn proof(
        &self,
        method: &str,
        url: &str,
        token: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<String, HolderError> {
        let mut header = Header::new(Algorithm::ES256);
        header.typ = Some("dpop+jwt".into());
        header.jwk = Some(self.jwk.clone());
        let htu = url.split(['?', '#']).next().unwrap_or(url);
        let iat = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut claims = serde_json::json!({
            "jti": uuid::Uuid::new_v4().to_string(),
            "htm": method,
            "htu": htu,
            "iat": iat,
        });
        if let Some(t) = token {
            claims["ath"] = URL_SAFE_NO_PAD.encode(Sha256::digest(t.as_bytes())).into();
        }
        if let Some(n) = nonce {
            claims["nonce"] = n.into();
        }
        Ok(jsonwebtoken::encode(&header, &claims, &self.key)?)
    }
}

#[cfg(test)]
impl Holder {
    pub(crate) fn jwk_for_tests(&self) -> Jwk {
        self.jwk.clone()
    }
    pub(crate) fn key_for_tests(&self) -> EncodingKey {
        self.key.clone()
    }
}
