//! Bearer tokens: lease bearers and the operator's admin token.
//!
//! Invariant: a bearer is shown once, when it is issued; root stores only its SHA-256.
//! Comparisons of secrets are constant-time.

use std::io::Write;
use std::path::Path;

use base64::Engine;
use rand::Rng;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Prefix of lease bearers (also what the redactor looks for).
pub const LEASE_TOKEN_PREFIX: &str = "mcpl_";
/// Prefix of admin tokens.
pub const ADMIN_TOKEN_PREFIX: &str = "mcpa_";

/// A new random bearer: prefix plus 256 random bits, base64url.
pub fn new_token(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!(
        "{prefix}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// The stored form of a bearer.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Constant-time equality of two secrets.
pub fn secret_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// The bearer from an `Authorization` header value, if it is one.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, rest) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim();
    (!token.is_empty()).then_some(token)
}

/// Reads the admin token from `path`, creating it (mode 0600) on first start.
pub fn load_or_create_admin_token(path: &Path) -> std::io::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(s) if !s.trim().is_empty() => return Ok(s.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let token = new_token(ADMIN_TOKEN_PREFIX);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(token.as_bytes())?;
    f.write_all(b"\n")?;
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_unique_and_hash_stably() {
        let a = new_token(LEASE_TOKEN_PREFIX);
        let b = new_token(LEASE_TOKEN_PREFIX);
        assert_ne!(a, b);
        assert!(a.starts_with(LEASE_TOKEN_PREFIX) && a.len() > 40);
        assert_eq!(token_hash(&a), token_hash(&a));
        assert_ne!(token_hash(&a), token_hash(&b));
    }

    #[test]
    fn bearer_parsing() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
    }

    #[test]
    fn admin_token_file_is_private_and_stable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/admin.token");
        let t1 = load_or_create_admin_token(&path).unwrap();
        let t2 = load_or_create_admin_token(&path).unwrap();
        assert_eq!(t1, t2);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
