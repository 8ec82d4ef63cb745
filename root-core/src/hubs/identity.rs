//! Hub client certificates bound to their target (`[tls] bind_client_cert_to_target`).
//!
//! With mutual TLS alone, any certificate from the client CA opens the hub path, so a hub
//! token leaked from one target could be used with another target's certificate. When the
//! binding is on, the certificate must also name the target it was issued for: a URI subject
//! alternative name `mcp-hub:<target_id>` (e.g. `mcp-hub:hub:build-01`). A URI rather than a
//! DNS name because target ids contain `:` and are not host names, and because a URI in its
//! own scheme cannot be mistaken for a server identity by any TLS client. The check runs at
//! `hello`, once the hub token has said which target is connecting; a certificate that names
//! other targets only, or none, is refused with the names it carries. A certificate may name
//! several targets (the CA decides); it is accepted for each of them.

use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

/// Scheme of the URI name that binds a certificate to a target.
pub(crate) const URI_PREFIX: &str = "mcp-hub:";

/// The URI name a certificate for `target_id` carries.
pub fn uri_for(target_id: &str) -> String {
    format!("{URI_PREFIX}{target_id}")
}

/// Why a hub's client certificate does not fit the target it connects as.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindingError {
    #[error("the hub's client certificate cannot be parsed: {0}")]
    Unreadable(String),
    #[error(
        "the hub's client certificate names no target (no `mcp-hub:` URI name); this root binds \
         hub certificates to targets, so `{target_id}`'s hub must present one with the URI \
         name `mcp-hub:{target_id}`"
    )]
    Unbound { target_id: String },
    #[error(
        "the hub's client certificate is bound to {presented}, not to `{target_id}` (the target \
         this hub token is enrolled for); present `{target_id}`'s own certificate, with the URI \
         name `mcp-hub:{target_id}`"
    )]
    OtherTarget {
        target_id: String,
        presented: String,
    },
}

/// The targets a certificate (DER) is bound to: its `mcp-hub:` URI names.
pub(crate) fn bound_targets(der: &[u8]) -> Result<Vec<String>, BindingError> {
    let (_, cert) =
        X509Certificate::from_der(der).map_err(|e| BindingError::Unreadable(e.to_string()))?;
    let san = cert
        .subject_alternative_name()
        .map_err(|e| BindingError::Unreadable(e.to_string()))?;
    Ok(san
        .map(|ext| {
            ext.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::URI(uri) => uri.strip_prefix(URI_PREFIX).map(str::to_owned),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default())
}

/// Whether the certificate (DER) is bound to `target_id`.
pub fn check(der: &[u8], target_id: &str) -> Result<(), BindingError> {
    let bound = bound_targets(der)?;
    if bound.iter().any(|t| t == target_id) {
        return Ok(());
    }
    if bound.is_empty() {
        return Err(BindingError::Unbound {
            target_id: target_id.to_owned(),
        });
    }
    Err(BindingError::OtherTarget {
        target_id: target_id.to_owned(),
        presented: bound
            .iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_unreadable_not_unbound() {
        let err = check(b"not a certificate", "hub:a").unwrap_err();
        assert!(matches!(err, BindingError::Unreadable(_)), "{err}");
    }

    #[test]
    fn the_refusals_name_the_expected_uri() {
        let e = BindingError::OtherTarget {
            target_id: "hub:a".into(),
            presented: "`hub:b`".into(),
        };
        assert!(e.to_string().contains("bound to `hub:b`, not to `hub:a`"));
        assert!(e.to_string().contains("`mcp-hub:hub:a`"));
        assert_eq!(uri_for("hub:a"), "mcp-hub:hub:a");
    }
}
