//! Secrets at rest: the permission check every secret file passes before root reads it, and
//! the root master key that encrypts the per-hub call-signing keys in the `targets` table.
//!
//! The master key is 256 random bits in `<data_dir>/secrets.key` (hex, mode 0600), created on
//! first start. Replicas that share one database share this file. A signing key is stored as
//! `enc:v1:<hex(nonce ‖ ciphertext ‖ tag)>`: AES-256-GCM under the master key with a random
//! 96-bit nonce, the target id as associated data (a ciphertext copied to another row does
//! not open). AES-GCM comes from aws-lc-rs, the library rustls already uses for TLS, so the
//! build carries one implementation of it.
//!
//! Invariant: no secret file that is readable or writable by group or others is read; the
//! error names the file and the fix (`chmod 600 FILE`).

use std::io::Write;
use std::path::{Path, PathBuf};

use aws_lc_rs::aead::{AES_256_GCM, Aad, NONCE_LEN, Nonce, RandomizedNonceKey};

/// Prefix of an encrypted signing key as stored.
pub(crate) const ENCRYPTED_PREFIX: &str = "enc:v1:";

/// Why sealed state did not open ([`MasterKey::open`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("not issued by this root")]
    NotOurs,
    #[error("it does not verify (altered, or not issued by this zone)")]
    Altered,
    #[error("its payload is unreadable")]
    Unreadable,
}

/// Why a secret could not be read, written or opened.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error(
        "secret file {path} has mode {mode:04o}: group or others may read or write it; \
         run `chmod 600 {path}`"
    )]
    LoosePermissions { path: PathBuf, mode: u32 },
    #[error("cannot read secret file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write secret file {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("master key file {path} does not hold 64 hex digits")]
    BadMasterKey { path: PathBuf },
    #[error("stored signing key of `{target_id}` does not open with the master key")]
    Undecryptable { target_id: String },
    #[error("encryption failed")]
    Encrypt,
}

/// Refuses a file that group or others may read or write (mode `& 0o077 != 0`).
pub fn check_private_file(path: &Path) -> Result<(), SecretError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path).map_err(|source| SecretError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(SecretError::LoosePermissions {
                path: path.to_owned(),
                mode,
            });
        }
    }
    Ok(())
}

/// Reads a secret file after [`check_private_file`].
pub(crate) fn read_private_file(path: &Path) -> Result<String, SecretError> {
    check_private_file(path)?;
    std::fs::read_to_string(path).map_err(|source| SecretError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Creates (or truncates) `path` with mode 0600 and writes `text`.
pub fn write_private_file(path: &Path, text: &str) -> Result<(), SecretError> {
    let err = |source| SecretError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path).map_err(err)?;
    f.write_all(text.as_bytes()).map_err(err)?;
    f.sync_all().map_err(err)
}

/// The root master key (encrypts signing keys at rest).
pub struct MasterKey {
    key: RandomizedNonceKey,
    /// Hex of the key, kept only so that tests can prove it never leaks.
    hex: String,
}

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(<redacted>)")
    }
}

impl MasterKey {
    /// Reads the key at `path` (checking its mode), or creates it with mode 0600. The flag
    /// says whether it was created now.
    pub fn load_or_create(path: &Path) -> Result<(MasterKey, bool), SecretError> {
        if path.exists() {
            let text = read_private_file(path)?;
            let bytes: [u8; 32] = hex::decode(text.trim())
                .ok()
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| SecretError::BadMasterKey {
                    path: path.to_owned(),
                })?;
            return Ok((Self::from_bytes(&bytes)?, false));
        }
        let mut bytes = [0u8; 32];
        aws_lc_rs::rand::fill(&mut bytes).map_err(|_| SecretError::Encrypt)?;
        write_private_file(path, &format!("{}\n", hex::encode(bytes)))?;
        Ok((Self::from_bytes(&bytes)?, true))
    }

    fn from_bytes(bytes: &[u8; 32]) -> Result<MasterKey, SecretError> {
        Ok(MasterKey {
            key: RandomizedNonceKey::new(&AES_256_GCM, bytes).map_err(|_| SecretError::Encrypt)?,
            hex: hex::encode(bytes),
        })
    }

    /// A 256-bit key for `purpose`, derived from the master key (HMAC-SHA256 with the purpose
    /// as the message), e.g. the credential replicas of one zone authenticate each other with.
    pub fn derive_key(&self, purpose: &str) -> [u8; 32] {
        use hmac::{KeyInit, Mac};
        let bytes = hex::decode(&self.hex).unwrap_or_default();
        let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&bytes)
            .expect("HMAC takes keys of any length");
        mac.update(purpose.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// `value` as `<prefix><base64url JSON>.<base64url HMAC-SHA256>`, under the key derived
    /// for `purpose`: state root hands a client and reads back (a multi-round-trip request's
    /// `requestState`, an OAuth sign-in awaiting the operator), readable by any replica of
    /// the zone and unforgeable without the master key. Not encrypted: never seal a secret.
    pub fn seal<T: serde::Serialize>(&self, purpose: &str, prefix: &str, value: &T) -> String {
        use base64::Engine;
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use hmac::Mac;
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).unwrap_or_default());
        let mut m = self.mac(purpose);
        m.update(payload.as_bytes());
        let tag = URL_SAFE_NO_PAD.encode(m.finalize().into_bytes());
        format!("{prefix}{payload}.{tag}")
    }

    /// What [`MasterKey::seal`] sealed under `purpose` and `prefix`, if `text` is that, at
    /// most `max_len` bytes long and unaltered.
    pub fn open<T: serde::de::DeserializeOwned>(
        &self,
        purpose: &str,
        prefix: &str,
        text: &str,
        max_len: usize,
    ) -> Result<T, SealError> {
        use base64::Engine;
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use hmac::Mac;
        let (payload, tag) = text
            .strip_prefix(prefix)
            .filter(|_| text.len() <= max_len)
            .and_then(|rest| rest.split_once('.'))
            .ok_or(SealError::NotOurs)?;
        // Root's shape with a tag that does not even decode was altered, like one that
        // decodes to the wrong MAC.
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| SealError::Altered)?;
        let mut m = self.mac(purpose);
        m.update(payload.as_bytes());
        m.verify_slice(&tag).map_err(|_| SealError::Altered)?;
        URL_SAFE_NO_PAD
            .decode(payload)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or(SealError::Unreadable)
    }

    fn mac(&self, purpose: &str) -> hmac::Hmac<sha2::Sha256> {
        use hmac::KeyInit;
        <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&self.derive_key(purpose))
            .expect("HMAC takes keys of any length")
    }

    /// The key in hex (for leak tests; never log it).
    pub fn expose_hex(&self) -> &str {
        &self.hex
    }

    /// `plain` encrypted at rest as `enc:v1:<hex(nonce ‖ ciphertext ‖ tag)>`, bound to `aad`
    /// (the row it belongs to: a ciphertext copied to another row does not open).
    pub fn encrypt(&self, aad: &str, plain: &[u8]) -> Result<String, SecretError> {
        let mut in_out = plain.to_vec();
        let nonce = self
            .key
            .seal_in_place_append_tag(Aad::from(aad.as_bytes()), &mut in_out)
            .map_err(|_| SecretError::Encrypt)?;
        let mut out = nonce.as_ref().to_vec();
        out.extend_from_slice(&in_out);
        Ok(format!("{ENCRYPTED_PREFIX}{}", hex::encode(out)))
    }

    /// What [`MasterKey::encrypt`] encrypted for `aad`; `None` when `stored` is not that
    /// (another key, another row, altered).
    pub fn decrypt(&self, aad: &str, stored: &str) -> Option<Vec<u8>> {
        let bytes = hex::decode(stored.strip_prefix(ENCRYPTED_PREFIX)?).ok()?;
        if bytes.len() < NONCE_LEN {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut in_out = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(aad.as_bytes()), &mut in_out)
            .ok()?;
        Some(plain.to_vec())
    }

    /// The stored form of `target_id`'s signing key.
    pub fn seal_signing_key(
        &self,
        target_id: &str,
        signing_key: &[u8; 32],
    ) -> Result<String, SecretError> {
        self.encrypt(target_id, signing_key)
    }

    /// Opens a stored signing key; a clear (pre-encryption) row is read as hex.
    pub(crate) fn open_signing_key(
        &self,
        target_id: &str,
        stored: &str,
    ) -> Result<[u8; 32], SecretError> {
        let undecryptable = || SecretError::Undecryptable {
            target_id: target_id.to_owned(),
        };
        if !stored.starts_with(ENCRYPTED_PREFIX) {
            return hex::decode(stored)
                .ok()
                .and_then(|b| b.try_into().ok())
                .ok_or_else(undecryptable);
        }
        let plain = self.decrypt(target_id, stored).ok_or_else(undecryptable)?;
        <[u8; 32]>::try_from(&*plain).map_err(|_| undecryptable())
    }
}

/// Whether a stored signing key is in clear (written before encryption at rest).
pub fn is_clear(stored: &str) -> bool {
    !stored.starts_with(ENCRYPTED_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signing_keys_round_trip_and_are_bound_to_their_target() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.key");
        let (key, created) = MasterKey::load_or_create(&path).unwrap();
        assert!(created);
        let (again, created) = MasterKey::load_or_create(&path).unwrap();
        assert!(!created);
        let signing = [7u8; 32];
        let stored = key.seal_signing_key("hub:a", &signing).unwrap();
        assert!(stored.starts_with(ENCRYPTED_PREFIX));
        assert!(!stored.contains(&hex::encode(signing)));
        assert_eq!(again.open_signing_key("hub:a", &stored).unwrap(), signing);
        assert!(again.open_signing_key("hub:b", &stored).is_err());
        assert_ne!(stored, key.seal_signing_key("hub:a", &signing).unwrap());
        // A clear row from before encryption at rest still opens (and is then migrated).
        assert_eq!(
            key.open_signing_key("hub:a", &hex::encode(signing))
                .unwrap(),
            signing
        );
        assert!(is_clear(&hex::encode(signing)) && !is_clear(&stored));
        assert!(!format!("{key:?}").contains(key.expose_hex()));
    }

    #[test]
    fn sealed_state_opens_only_unaltered_under_its_purpose() {
        let dir = tempfile::tempdir().unwrap();
        let (key, _) = MasterKey::load_or_create(&dir.path().join("secrets.key")).unwrap();
        let value = serde_json::json!({"lease": "s-1", "n": 42});
        let sealed = key.seal("test purpose", "t1.", &value);
        let open =
            |text: &str, purpose: &str| key.open::<serde_json::Value>(purpose, "t1.", text, 4096);
        assert_eq!(open(&sealed, "test purpose"), Ok(value));
        assert_eq!(open(&sealed, "other purpose"), Err(SealError::Altered));
        // Every one-character change after the prefix is refused as altered (a tag that
        // no longer decodes included), never opened.
        let body = sealed.len() - "t1.".len();
        for i in 0..body {
            let mut bytes = sealed.clone().into_bytes();
            let at = "t1.".len() + i;
            bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
            let changed = String::from_utf8(bytes).unwrap();
            let got = open(&changed, "test purpose");
            assert!(
                matches!(got, Err(SealError::Altered | SealError::NotOurs)),
                "{i}: {got:?}"
            );
            if changed.as_bytes()[at] != b'.' && sealed.as_bytes()[at] != b'.' {
                assert_eq!(got, Err(SealError::Altered), "{i}");
            }
        }
        assert_eq!(open("t2.x.y", "test purpose"), Err(SealError::NotOurs));
        assert_eq!(open("t1.nodot", "test purpose"), Err(SealError::NotOurs));
        assert!(open(&sealed, "test purpose").is_ok());
        assert_eq!(
            key.open::<serde_json::Value>("test purpose", "t1.", &sealed, 10),
            Err(SealError::NotOurs),
            "longer than allowed"
        );
    }

    #[cfg(unix)]
    #[test]
    fn loose_secret_files_are_refused_with_the_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.key");
        MasterKey::load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = MasterKey::load_or_create(&path).unwrap_err().to_string();
        assert!(
            err.contains(&format!("chmod 600 {}", path.display())),
            "{err}"
        );
        assert!(err.contains("0644"), "{err}");
    }
}
