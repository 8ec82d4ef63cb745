//! What the sign-in flows keep: a CLI's return address, and who signed in, also in the form
//! the store keeps between two requests of a CLI (`store::OidcPending`), so that any replica
//! answers the next one.

use serde::{Deserialize, Serialize};

use super::provider::OidcError;
use crate::operators::OperatorId;
use crate::roles::Grant;

/// A CLI's loopback redirect and the PKCE challenge its one-time code is bound to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CliReturn {
    /// `http://127.0.0.1:<port>/<path>` (or `localhost`, `[::1]`).
    pub(crate) redirect: String,
    /// BASE64URL(SHA-256(code_verifier)) of the CLI's own verifier.
    pub(crate) challenge: String,
    /// The CLI's state, given back with the code.
    pub(crate) state: String,
}

impl CliReturn {
    /// A CLI's return, checked: a loopback `http` URL, an S256 challenge, a state.
    pub(crate) fn checked(
        redirect: &str,
        challenge: &str,
        state: &str,
    ) -> Result<CliReturn, OidcError> {
        let bad = |m: &str| Err(OidcError::BadRequest(m.to_owned()));
        let Ok(url) = url::Url::parse(redirect) else {
            return bad("cli_redirect is not a URL");
        };
        let loopback = matches!(
            url.host(),
            Some(url::Host::Ipv4(ip)) if ip.is_loopback()
        ) || matches!(url.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback())
            || url.host_str() == Some("localhost");
        if url.scheme() != "http" || !loopback || url.fragment().is_some() {
            return bad("cli_redirect must be an http URL on the loopback interface (RFC 8252)");
        }
        let b64 = |s: &str| {
            s.len() == 43
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        if !b64(challenge) {
            return bad("cli_challenge must be an S256 PKCE challenge (43 base64url characters)");
        }
        if state.is_empty() || state.len() > 128 {
            return bad("cli_state must be 1 to 128 characters");
        }
        Ok(CliReturn {
            redirect: redirect.to_owned(),
            challenge: challenge.to_owned(),
            state: state.to_owned(),
        })
    }
}

/// Someone who signed in: the operator they are and what they hold now.
#[derive(Debug, Clone)]
pub(crate) struct SignedIn {
    pub(crate) operator: OperatorId,
    pub(crate) email: Option<String>,
    pub(crate) grant: Grant,
    /// Where a CLI's sign-in returns (the browser flows only).
    pub(crate) cli: Option<CliReturn>,
}

/// A CLI's sign-in as the store keeps it: who signed in, or why not.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kept {
    SignedIn {
        operator: String,
        email: Option<String>,
        roles: String,
        profiles: String,
    },
    Refused {
        why: String,
    },
}

impl SignedIn {
    /// The stored form of this sign-in (`Err`: why it was refused).
    pub(crate) fn kept(outcome: &Result<SignedIn, String>) -> String {
        let kept = match outcome {
            Ok(s) => {
                let (roles, profiles) = s.grant.to_stored();
                Kept::SignedIn {
                    operator: s.operator.name().to_owned(),
                    email: s.email.clone(),
                    roles,
                    profiles,
                }
            }
            Err(why) => Kept::Refused { why: why.clone() },
        };
        serde_json::to_string(&kept).unwrap_or_default()
    }

    /// A stored sign-in read back.
    pub(crate) fn from_kept(text: &str) -> Result<SignedIn, OidcError> {
        match serde_json::from_str::<Kept>(text) {
            Ok(Kept::SignedIn {
                operator,
                email,
                roles,
                profiles,
            }) => Ok(SignedIn {
                operator: OperatorId::named(&operator),
                email,
                grant: Grant::from_stored(Some(&roles), Some(&profiles))
                    .map_err(|e| OidcError::Internal(e.to_string()))?,
                cli: None,
            }),
            Ok(Kept::Refused { why }) => Err(OidcError::Provider(why)),
            Err(e) => Err(OidcError::Internal(format!("a kept sign-in: {e}"))),
        }
    }
}
