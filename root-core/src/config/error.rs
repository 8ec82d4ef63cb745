//! Why a configuration was refused: the one error of every `[section]`'s checks.

use std::path::PathBuf;

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid config: {0}")]
    Invalid(String),
}

/// Why config text is not a configuration: not TOML of the configuration's types, or values
/// that make no sense ([`super::RootConfig::parse`]).
#[derive(Debug, thiserror::Error)]
pub enum ConfigTextError {
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    #[error("{0}")]
    Invalid(#[from] ConfigError),
}
