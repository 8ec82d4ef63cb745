//! Why a hub configuration could not be loaded.

use std::path::PathBuf;

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum HubConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("missing configuration: {} (set them in the config file or with flags)", .0.join(", "))]
    Missing(Vec<&'static str>),
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error(transparent)]
    Tls(#[from] crate::link::tls::TlsError),
}
