//! How the hub verifies root on `wss://`: rustls (aws-lc-rs) with the operating system's CA
//! store (rustls-native-certs) or a configured CA bundle, optional SPKI SHA-256 pinning, and an
//! optional client certificate for root's mutual TLS; plus the secret-file check.
//!
//! System roots rather than a compiled-in list (webpki-roots): a managed target trusts what
//! its operators installed in the OS store (an internal CA included), and the store is updated
//! with the OS, not with a hub rebuild.
//!
//! Pinning ([`PinnedVerifier`]) runs the normal verification first (chain to a trusted root,
//! validity, server name) and then requires the end-entity certificate's public key to match
//! one configured pin. Only the end-entity key is compared: intermediates sent by the server
//! are not proven to be on the verified path, so matching them would let a certificate from
//! any trusted CA carry a pinned CA's certificate along. List a second pin for key rollover.
//!
//! Invariant: the hub dials exactly the URL configured; a `wss` failure stays a failure (no
//! fallback to `ws`), and plaintext URLs are refused for non-loopback hosts unless
//! `insecure_plaintext = true`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use mcp_shared::pem::CertFileError;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Installs the process-wide rustls crypto provider (aws-lc-rs) once; later calls are no-ops.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// `[tls]` of the hub configuration.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct HubTlsConfig {
    /// PEM CA bundle that root's certificate must chain to; the system's roots when unset.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// SPKI SHA-256 pins of root's certificate key, `sha256/<base64>`; any one must match.
    #[serde(default)]
    pub pins: Vec<String>,
    /// Client certificate chain (PEM) for root's mutual TLS.
    #[serde(default)]
    pub client_cert_file: Option<PathBuf>,
    /// Its private key (PEM); must be mode 0600.
    #[serde(default)]
    pub client_key_file: Option<PathBuf>,
}

/// Why the TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("tls.ca_file {path}: {reason}")]
    Ca {
        path: PathBuf,
        reason: CertFileError,
    },
    #[error("tls.ca_file {path}: unusable CA certificate: {reason}")]
    UnusableCa {
        path: PathBuf,
        reason: rustls::Error,
    },
    #[error("no CA certificates in the system store; set tls.ca_file")]
    NoSystemRoots,
    #[error("tls.pins: `{0}` is not sha256/<base64 of 32 bytes>")]
    BadPin(String),
    #[error("tls.client_cert_file and tls.client_key_file go together")]
    HalfClientCert,
    #[error("tls.client_cert_file {path}: {reason}")]
    ClientCert {
        path: PathBuf,
        reason: CertFileError,
    },
    /// Never carries key material.
    #[error("tls.client_key_file {path}: {reason}")]
    ClientKey { path: PathBuf, reason: &'static str },
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
    #[error("TLS: {0}")]
    Rustls(String),
}

/// Refuses a secret file that group or others may read or write.
pub(crate) fn check_private_file(path: &Path) -> Result<(), TlsError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path).map_err(|source| TlsError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(TlsError::LoosePermissions {
                path: path.to_owned(),
                mode,
            });
        }
    }
    Ok(())
}

/// Parses `sha256/<base64>` into the 32-byte digest.
pub(crate) fn parse_pin(pin: &str) -> Result<[u8; 32], TlsError> {
    let bad = || TlsError::BadPin(pin.to_owned());
    let b64 = pin.trim().strip_prefix("sha256/").ok_or_else(bad)?;
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .ok_or_else(bad)
}

/// The pin of a DER SubjectPublicKeyInfo: `sha256/<base64>`.
pub fn spki_pin(spki_der: &[u8]) -> String {
    format!(
        "sha256/{}",
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(spki_der))
    )
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// Checks what can be checked without connecting (pins, client certificate pairing).
pub(crate) fn validate(cfg: &HubTlsConfig) -> Result<(), TlsError> {
    for pin in &cfg.pins {
        parse_pin(pin)?;
    }
    if cfg.client_cert_file.is_some() != cfg.client_key_file.is_some() {
        return Err(TlsError::HalfClientCert);
    }
    Ok(())
}

/// The rustls client config the hub dials `wss://` with.
pub(crate) fn client_config(cfg: &HubTlsConfig) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    validate(cfg)?;
    let provider = provider();
    let mut roots = rustls::RootCertStore::empty();
    match &cfg.ca_file {
        Some(path) => {
            let ca = |reason| TlsError::Ca {
                path: path.clone(),
                reason,
            };
            for cert in mcp_shared::pem::certs(path).map_err(ca)? {
                roots.add(cert).map_err(|reason| TlsError::UnusableCa {
                    path: path.clone(),
                    reason,
                })?;
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            for e in &native.errors {
                tracing::warn!(error = %e, "reading the system CA store");
            }
            let (added, _) = roots.add_parsable_certificates(native.certs);
            if added == 0 {
                return Err(TlsError::NoSystemRoots);
            }
        }
    }
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    let pins = cfg
        .pins
        .iter()
        .map(|p| parse_pin(p))
        .collect::<Result<Vec<_>, _>>()?;
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    let builder = if pins.is_empty() {
        builder.with_webpki_verifier(webpki)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedVerifier {
                inner: webpki,
                pins,
            }))
    };
    let config = match (&cfg.client_cert_file, &cfg.client_key_file) {
        (Some(cert), Some(key)) => {
            let chain = mcp_shared::pem::certs(cert).map_err(|reason| TlsError::ClientCert {
                path: cert.clone(),
                reason,
            })?;
            check_private_file(key)?;
            let bad_key = |reason| TlsError::ClientKey {
                path: key.clone(),
                reason,
            };
            let bytes = std::fs::read(key).map_err(|_| bad_key("cannot be read"))?;
            let der = PrivateKeyDer::from_pem_slice(&bytes)
                .map_err(|_| bad_key("no PEM private key (PKCS#8, PKCS#1 or SEC1) found"))?;
            builder
                .with_client_auth_cert(chain, der)
                .map_err(|_| bad_key("unusable, or does not match the certificate"))?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// Root's end-entity key matched no pin. Debug reads like Display: rustls shows this error
/// with `{:?}`.
struct PinMismatch(String);

impl std::fmt::Display for PinMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "root's certificate key {} matches no configured pin (tls.pins)",
            self.0
        )
    }
}

impl std::fmt::Debug for PinMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for PinMismatch {}

/// Normal verification, then an SPKI SHA-256 pin on the end-entity certificate.
#[derive(Debug)]
pub(crate) struct PinnedVerifier {
    inner: Arc<WebPkiServerVerifier>,
    pins: Vec<[u8; 32]>,
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )?;
        let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
        let spki = parsed.subject_public_key_info();
        let digest: [u8; 32] = Sha256::digest(spki.as_ref()).into();
        if self.pins.iter().any(|p| p == &digest) {
            return Ok(verified);
        }
        Err(rustls::Error::InvalidCertificate(CertificateError::Other(
            rustls::OtherError(Arc::new(PinMismatch(spki_pin(spki.as_ref())))),
        )))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Whether `host` (as in a URL: a name, an IPv4 address or a bracketed IPv6 address) is a
/// loopback host.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_parse_and_bad_ones_are_named() {
        let pin = spki_pin(b"some spki");
        assert_eq!(
            parse_pin(&pin).unwrap(),
            <[u8; 32]>::from(Sha256::digest(b"some spki"))
        );
        for bad in ["sha1/AAAA", "sha256/not-base64!", "sha256/AAAA"] {
            let err = parse_pin(bad).unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
        }
    }

    #[test]
    fn loopback_hosts() {
        for h in ["localhost", "127.0.0.1", "127.1.2.3", "[::1]", "::1"] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["root.example", "10.0.0.1", "[2001:db8::1]", "0.0.0.0"] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }

    #[test]
    fn a_client_certificate_needs_its_key() {
        let cfg = HubTlsConfig {
            client_cert_file: Some("c.pem".into()),
            ..Default::default()
        };
        assert!(matches!(validate(&cfg), Err(TlsError::HalfClientCert)));
    }
}
