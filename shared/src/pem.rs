//! Reading a PEM certificate list from a file, as root (its server certificate, client CAs)
//! and the hub (the CA it trusts, its client certificate) both do, with one error.

use std::path::Path;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// Why a PEM certificate file gave no certificates.
#[derive(Debug, thiserror::Error)]
pub enum CertFileError {
    #[error("{0}")]
    Read(std::io::Error),
    #[error("not a PEM certificate list: {0}")]
    Parse(rustls_pki_types::pem::Error),
    #[error("no certificate found")]
    Empty,
}

/// The certificates of the PEM file at `path`, in order; refused when it holds none.
pub fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, CertFileError> {
    let bytes = std::fs::read(path).map_err(CertFileError::Read)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(CertFileError::Parse)?;
    if certs.is_empty() {
        return Err(CertFileError::Empty);
    }
    Ok(certs)
}
