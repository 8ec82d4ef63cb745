//! HTTPS and WSS on root's own listener (rustls with the aws-lc-rs provider, tokio-rustls; the
//! connections themselves are served by [`crate::net::listener`]), with certificate reload that
//! keeps open connections.
//!
//! The whole `rustls::ServerConfig` (certificate, key, client CA) sits in an `ArcSwap`; each
//! accepted connection takes the config current at its handshake, so a reload changes what new
//! connections see and leaves established ones (and their MCP sessions) alone. A reload runs on
//! SIGHUP and when the files' contents change (checked every `reload_interval_sec`); a reload
//! that fails (unreadable file, key not matching the certificate, key file readable by others)
//! keeps the current certificate and logs why. The session cache is shared across reloads.
//!
//! Mutual TLS (`client_ca_file`): the handshake accepts a client without a certificate, and
//! verifies one that is presented against the CA (a bad one fails the handshake). The hub
//! connect path then requires one ([`TlsPeer`] in the request's extensions says whether the
//! connection has a verified client certificate); MCP clients and operators need none, since
//! the real MCP clients cannot present one.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use mcp_shared::pem::CertFileError;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ServerSessionMemoryCache, StoresServerSessions, WebPkiClientVerifier};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::config::TlsConfig;
use crate::secrets::SecretError;

/// Why TLS material could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ServerTlsError {
    #[error("TLS certificate file {path}: {reason}")]
    Cert {
        path: PathBuf,
        reason: CertFileError,
    },
    /// Never carries key material: the reason is one of a few fixed texts.
    #[error("TLS key file {path}: {reason}")]
    Key { path: PathBuf, reason: &'static str },
    #[error("TLS client CA file {path}: {reason}")]
    ClientCa {
        path: PathBuf,
        reason: CertFileError,
    },
    #[error("TLS client CA file {path}: unusable CA certificate: {reason}")]
    UnusableClientCa {
        path: PathBuf,
        reason: rustls::Error,
    },
    #[error("TLS client CA file {path}: {reason}")]
    ClientVerifier {
        path: PathBuf,
        reason: rustls::server::VerifierBuilderError,
    },
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// What the TLS connection says about its peer; in the extensions of every request that came
/// over TLS.
#[derive(Debug, Clone)]
pub(crate) struct TlsPeer {
    /// The client's end-entity certificate, verified against `client_ca_file`.
    pub(crate) client_certificate: Option<CertificateDer<'static>>,
}

/// Root's TLS state: the current server config and how to reload it.
pub(crate) struct TlsState {
    cfg: TlsConfig,
    current: ArcSwap<ServerConfig>,
    /// SHA-256 over the files' bytes at the last load attempt (change detection).
    files_digest: Mutex<[u8; 32]>,
    sessions: Arc<dyn StoresServerSessions>,
    fingerprint: ArcSwap<String>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn read(path: &Path) -> Result<Vec<u8>, std::io::Error> {
    std::fs::read(path)
}

/// SHA-256 of the certificate's DER, hex (what operators compare with `openssl x509
/// -fingerprint -sha256`).
pub(crate) fn fingerprint(cert: &CertificateDer<'_>) -> String {
    hex::encode(Sha256::digest(cert.as_ref()))
}

impl TlsState {
    /// Loads the configured files; any problem stops start-up with the file and the reason.
    pub(crate) fn load(cfg: &TlsConfig) -> Result<TlsState, ServerTlsError> {
        let sessions: Arc<dyn StoresServerSessions> = ServerSessionMemoryCache::new(1024);
        let digest = files_digest(cfg);
        let (config, fp) = build(cfg, sessions.clone())?;
        Ok(TlsState {
            cfg: cfg.clone(),
            current: ArcSwap::from_pointee(config),
            files_digest: Mutex::new(digest),
            sessions,
            fingerprint: ArcSwap::from_pointee(fp),
        })
    }

    /// SHA-256 fingerprint of the certificate new connections get.
    pub(crate) fn fingerprint(&self) -> String {
        self.fingerprint.load().as_ref().clone()
    }

    /// Reloads the files: always when `force` (SIGHUP, an operator), else only if their
    /// contents changed since the last attempt. `Ok(true)` when a new config is in place.
    pub(crate) fn reload(&self, force: bool) -> Result<bool, ServerTlsError> {
        let digest = files_digest(&self.cfg);
        {
            let Ok(mut last) = self.files_digest.lock() else {
                return Err(ServerTlsError::Config("reload state poisoned".into()));
            };
            if !force && *last == digest {
                return Ok(false);
            }
            *last = digest;
        }
        let (config, fp) = build(&self.cfg, self.sessions.clone())?;
        self.current.store(Arc::new(config));
        self.fingerprint.store(Arc::new(fp.clone()));
        tracing::info!(fingerprint = %fp, "TLS certificate reloaded; new connections use it");
        Ok(true)
    }

    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.current.load_full())
    }
}

/// Hash of the three files' contents (missing files hash as empty).
fn files_digest(cfg: &TlsConfig) -> [u8; 32] {
    let mut h = Sha256::new();
    for path in [
        Some(&cfg.cert_file),
        Some(&cfg.key_file),
        cfg.client_ca_file.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        let bytes = read(path).unwrap_or_default();
        h.update((bytes.len() as u64).to_be_bytes());
        h.update(&bytes);
    }
    h.finalize().into()
}

fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, ServerTlsError> {
    crate::secrets::check_private_file(path)?;
    let bytes = read(path).map_err(|_| ServerTlsError::Key {
        path: path.to_owned(),
        reason: "cannot be read",
    })?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|_| ServerTlsError::Key {
        path: path.to_owned(),
        reason: "no PEM private key (PKCS#8, PKCS#1 or SEC1) found",
    })
}

/// The server config for the files as they are now, and the certificate's fingerprint.
fn build(
    cfg: &TlsConfig,
    sessions: Arc<dyn StoresServerSessions>,
) -> Result<(ServerConfig, String), ServerTlsError> {
    let provider = provider();
    let chain = mcp_shared::pem::certs(&cfg.cert_file).map_err(|reason| ServerTlsError::Cert {
        path: cfg.cert_file.clone(),
        reason,
    })?;
    let key = load_key(&cfg.key_file)?;
    let fp = fingerprint(&chain[0]);
    let certified =
        rustls::sign::CertifiedKey::from_der(chain.clone(), key, &provider).map_err(|e| {
            ServerTlsError::Key {
                path: cfg.key_file.clone(),
                reason: match e {
                    rustls::Error::InconsistentKeys(_) => {
                        "does not match the certificate's public key"
                    }
                    _ => "unusable private key",
                },
            }
        })?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ServerTlsError::Config(e.to_string()))?;
    let builder = match &cfg.client_ca_file {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            let certs =
                mcp_shared::pem::certs(path).map_err(|reason| ServerTlsError::ClientCa {
                    path: path.clone(),
                    reason,
                })?;
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|reason| ServerTlsError::UnusableClientCa {
                        path: path.clone(),
                        reason,
                    })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|reason| ServerTlsError::ClientVerifier {
                    path: path.clone(),
                    reason,
                })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(Arc::new(SingleCert(Arc::new(certified))));
    config.session_storage = sessions;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((config, fp))
}

/// One certificate for every server name.
#[derive(Debug)]
struct SingleCert(Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for SingleCert {
    fn resolve(
        &self,
        _hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// Reloads on SIGHUP and, every `reload_interval_sec` (unless 0), when the files changed.
pub(crate) async fn watch(tls: Arc<TlsState>, interval_sec: u64, stop: CancellationToken) {
    #[cfg(unix)]
    let mut hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "no SIGHUP handler; TLS reloads only on file change");
            None
        }
    };
    let mut tick = (interval_sec > 0).then(|| {
        let period = Duration::from_secs(interval_sec);
        let mut t = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    });
    loop {
        let hangup = async {
            #[cfg(unix)]
            if let Some(s) = hup.as_mut() {
                s.recv().await;
                return;
            }
            std::future::pending::<()>().await
        };
        let ticked = async {
            match tick.as_mut() {
                Some(t) => {
                    t.tick().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let force = tokio::select! {
            () = stop.cancelled() => return,
            () = hangup => true,
            () = ticked => false,
        };
        if let Err(e) = tls.reload(force) {
            tracing::error!(error = %e, "TLS reload failed; the current certificate stays in use");
        }
    }
}
