//! Replica credentials: how one replica of a zone proves itself to another on the internal
//! channel (`Authorization: Replica <credential>` on `POST /v1/root/internal/route`).
//!
//! A credential is `v1.<from>.<to>.<expires_ms>.<mac>`: the sending and the receiving replica
//! ids, an expiry in unix milliseconds, and the hex HMAC-SHA256 over those fields and the
//! SHA-256 of the request body, under a key every replica of the zone derives from the shared
//! master key (`MasterKey::derive_key("mcp-root/replica-credential/v1")`). So a credential is
//! good for one body, one receiver and a short time; it cannot be minted without the master
//! key, and a captured one cannot carry another request or be replayed to another replica.
//! The receiver accepts each credential once (it remembers them until they expire); a
//! forwarded call also carries its call id, which the hub refuses to run twice.

use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};

use crate::config::valid_replica_id;

/// The `Authorization` scheme of the internal channel.
pub(crate) const SCHEME: &str = "Replica";
/// Derivation label of the credential key (input to `MasterKey::derive_key`).
pub const KEY_PURPOSE: &str = "mcp-root/replica-credential/v1";
/// Longest lifetime a receiver accepts (a forwarded call's deadline plus slack never needs
/// more); also absorbs clock skew between replicas up to this much.
pub(crate) const MAX_LIFETIME_MS: i64 = 10 * 60 * 1000;

const VERSION: &str = "v1";

/// Why a replica credential was refused. Every variant names what is wrong, so an operator
/// can tell a forged credential from a clock problem or a misrouted request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CredentialError {
    #[error(
        "missing replica credential (expected `Authorization: Replica v1.<from>.<to>.<expires_ms>.<mac>`)"
    )]
    Missing,
    #[error("malformed replica credential: {0}")]
    Malformed(&'static str),
    #[error("unsupported replica credential version `{0}` (this build speaks v1)")]
    Version(String),
    #[error("replica credential is for replica `{to}`, not this one (`{me}`)")]
    WrongReceiver { to: String, me: String },
    #[error("replica credential expired {ago_ms} ms ago")]
    Expired { ago_ms: i64 },
    #[error(
        "replica credential is valid for {ms} ms, longer than the {MAX_LIFETIME_MS} ms allowed"
    )]
    TooLong { ms: i64 },
    #[error(
        "replica credential signature does not verify: forged, minted with another zone's master key, or the request was altered"
    )]
    BadSignature,
    #[error("replica credential was already used (a replayed request)")]
    Replayed,
}

type HmacSha256 = hmac::Hmac<Sha256>;

fn mac_input(from: &str, to: &str, expires_ms: i64, body: &[u8]) -> Vec<u8> {
    format!(
        "{KEY_PURPOSE}\n{from}\n{to}\n{expires_ms}\n{}",
        hex::encode(Sha256::digest(body))
    )
    .into_bytes()
}

fn mac(key: &[u8; 32]) -> HmacSha256 {
    <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length")
}

/// A credential from `from` to `to` for `body`, valid until `expires_ms`.
pub fn mint(key: &[u8; 32], from: &str, to: &str, expires_ms: i64, body: &[u8]) -> String {
    let mut m = mac(key);
    m.update(&mac_input(from, to, expires_ms, body));
    format!(
        "{VERSION}.{from}.{to}.{expires_ms}.{}",
        hex::encode(m.finalize().into_bytes())
    )
}

/// Checks an `Authorization` header value for a request with `body` received by `me` at
/// `now_ms`; returns the sending replica's id.
pub(crate) fn verify(
    key: &[u8; 32],
    me: &str,
    header: Option<&str>,
    body: &[u8],
    now_ms: i64,
) -> Result<String, CredentialError> {
    let header = header.ok_or(CredentialError::Missing)?;
    let (scheme, cred) = header
        .split_once(' ')
        .ok_or(CredentialError::Malformed("no scheme"))?;
    if !scheme.eq_ignore_ascii_case(SCHEME) {
        return Err(CredentialError::Missing);
    }
    let parts: Vec<&str> = cred.trim().split('.').collect();
    if parts
        .first()
        .is_some_and(|v| *v != VERSION && v.starts_with('v'))
    {
        return Err(CredentialError::Version(
            parts[0].chars().take(16).collect::<String>(),
        ));
    }
    let [version, from, to, expires, sig] = parts.as_slice() else {
        return Err(CredentialError::Malformed(
            "expected five dot-separated fields",
        ));
    };
    if *version != VERSION {
        return Err(CredentialError::Malformed("no version field"));
    }
    if !valid_replica_id(from) || !valid_replica_id(to) {
        return Err(CredentialError::Malformed(
            "replica ids are 1..64 of [A-Za-z0-9_-]",
        ));
    }
    let expires_ms: i64 = expires
        .parse()
        .map_err(|_| CredentialError::Malformed("expiry is not an integer"))?;
    let sig = hex::decode(sig).map_err(|_| CredentialError::Malformed("mac is not hex"))?;
    // The signature first: an unsigned claim about the receiver or the time says nothing.
    let mut m = mac(key);
    m.update(&mac_input(from, to, expires_ms, body));
    m.verify_slice(&sig)
        .map_err(|_| CredentialError::BadSignature)?;
    if *to != me {
        return Err(CredentialError::WrongReceiver {
            to: (*to).to_owned(),
            me: me.to_owned(),
        });
    }
    if expires_ms <= now_ms {
        return Err(CredentialError::Expired {
            ago_ms: now_ms - expires_ms,
        });
    }
    if expires_ms - now_ms > MAX_LIFETIME_MS {
        return Err(CredentialError::TooLong {
            ms: expires_ms - now_ms,
        });
    }
    Ok((*from).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = [7; 32];

    fn header(cred: &str) -> String {
        format!("Replica {cred}")
    }

    #[test]
    fn a_minted_credential_verifies_once_for_its_body_and_receiver() {
        let c = mint(&KEY, "r-a", "r-b", 10_000, b"{}");
        assert_eq!(
            verify(&KEY, "r-b", Some(&header(&c)), b"{}", 5_000),
            Ok("r-a".into())
        );
        assert_eq!(
            verify(&KEY, "r-b", Some(&header(&c)), b"{\"x\":1}", 5_000),
            Err(CredentialError::BadSignature),
            "another body"
        );
        assert_eq!(
            verify(&KEY, "r-c", Some(&header(&c)), b"{}", 5_000),
            Err(CredentialError::WrongReceiver {
                to: "r-b".into(),
                me: "r-c".into()
            })
        );
        assert_eq!(
            verify(&[8; 32], "r-b", Some(&header(&c)), b"{}", 5_000),
            Err(CredentialError::BadSignature),
            "another zone's key"
        );
    }

    #[test]
    fn expired_long_lived_and_malformed_credentials_are_refused_precisely() {
        let c = mint(&KEY, "r-a", "r-b", 10_000, b"");
        assert_eq!(
            verify(&KEY, "r-b", Some(&header(&c)), b"", 10_250),
            Err(CredentialError::Expired { ago_ms: 250 })
        );
        let far = mint(&KEY, "r-a", "r-b", 10_000 + MAX_LIFETIME_MS + 1, b"");
        assert!(matches!(
            verify(&KEY, "r-b", Some(&header(&far)), b"", 10_000),
            Err(CredentialError::TooLong { .. })
        ));
        assert_eq!(
            verify(&KEY, "r-b", None, b"", 0),
            Err(CredentialError::Missing)
        );
        assert_eq!(
            verify(&KEY, "r-b", Some("Bearer abc"), b"", 0),
            Err(CredentialError::Missing)
        );
        assert_eq!(
            verify(&KEY, "r-b", Some("Replica v2.a.b.1.00"), b"", 0),
            Err(CredentialError::Version("v2".into()))
        );
        for bad in [
            "Replica",
            "Replica v1.a.b",
            "Replica v1.a.b.x.00",
            "Replica v1.a.b.1.zz",
            "Replica v1.a!.b.1.00",
        ] {
            assert!(
                matches!(
                    verify(&KEY, "b", Some(bad), b"", 0),
                    Err(CredentialError::Malformed(_))
                ),
                "{bad}"
            );
        }
        // A forged mac (right shape, wrong value).
        let forged = format!("v1.r-a.r-b.10000.{}", "00".repeat(32));
        assert_eq!(
            verify(&KEY, "r-b", Some(&header(&forged)), b"", 5_000),
            Err(CredentialError::BadSignature)
        );
    }
}
