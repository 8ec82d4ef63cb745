//! Root's TLS clients (the replica channel, the admin CLI, `mcp-root skills sync`): a PEM CA
//! bundle read into reqwest certificates (rustls with the aws-lc-rs provider, like the
//! server side), and the TLS failure inside a request error told apart from an unreachable
//! peer, so a caller can say "certificate not trusted" instead of "connection failed".

use std::path::{Path, PathBuf};

/// Why a CA bundle could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CaFileError {
    #[error("CA file {path}: cannot be read: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("CA file {path}: not a PEM certificate bundle: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error("CA file {path}: no certificate found")]
    Empty { path: PathBuf },
}

/// The certificates of a PEM bundle (at least one).
pub(crate) fn load_ca_bundle(path: &Path) -> Result<Vec<reqwest::Certificate>, CaFileError> {
    let pem = std::fs::read(path).map_err(|source| CaFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| CaFileError::Parse {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    if certs.is_empty() {
        return Err(CaFileError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// The TLS failure inside a request error, if that is what it is: rustls' own error
/// ("invalid peer certificate: UnknownIssuer", ...), found through the source chain. An
/// `io::Error` hides the error it wraps from `source()`, so it is opened explicitly; layers
/// that keep only the text of what they wrap are recognised by rustls' wording.
pub(crate) fn tls_failure(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(t) = err.downcast_ref::<rustls::Error>() {
            return Some(t.to_string());
        }
        next = match err.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    from_text(&format!("{e:?}"))
}

/// rustls' certificate error in the text of an error that kept only the text: its `Debug`
/// form `InvalidCertificate(<reason>)`, told the way rustls' `Display` says it.
fn from_text(text: &str) -> Option<String> {
    let start = text.find("InvalidCertificate(")? + "InvalidCertificate(".len();
    let mut depth = 1;
    let end = text[start..].char_indices().find_map(|(i, c)| {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        (depth == 0).then_some(start + i)
    });
    Some(match end {
        Some(end) => format!("invalid peer certificate: {}", &text[start..end]),
        None => "invalid peer certificate".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_without_certificates_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let err = load_ca_bundle(&path).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(format!("CA file {}: no certificate found", path.display()).as_str())
        );
        let missing = dir.path().join("missing.pem");
        let err = load_ca_bundle(&missing).err().map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.starts_with("CA file") && e.contains("cannot be read")),
            "{err:?}"
        );
    }

    #[test]
    fn a_rustls_error_is_found_inside_an_io_error() {
        let inner = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, inner);
        assert_eq!(
            tls_failure(&io).as_deref(),
            Some("invalid peer certificate: UnknownIssuer")
        );
        // Wrapped twice, as hyper-util's connector does.
        let twice = std::io::Error::other(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::Expired),
        ));
        assert_eq!(
            tls_failure(&twice).as_deref(),
            Some("invalid peer certificate: Expired")
        );
        // Only the text survived (a layer kept `{:?}` of what it wrapped).
        assert_eq!(
            from_text("Transport(Client(Connect, Custom { error: InvalidCertificate(Other(OtherError(x))) }))")
                .as_deref(),
            Some("invalid peer certificate: Other(OtherError(x))")
        );
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(tls_failure(&refused), None);
    }
}
