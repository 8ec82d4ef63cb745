//! What the sign-in flows keep: a CLI's return address, the one-time codes CLIs redeem and
//! the device grants in progress (by the replica that started them), and who signed in.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
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

/// The flows a replica keeps: CLIs' one-time codes and device grants in progress.
#[derive(Default)]
pub(crate) struct Flows {
    pub(crate) codes: DashMap<String, (Instant, String, SignedIn)>,
    pub(crate) devices: DashMap<String, Arc<Device>>,
}

/// A device grant in progress: what the person is shown, and how it ended.
pub(crate) struct Device {
    pub(crate) started: Instant,
    pub(crate) expires_in: Duration,
    pub(crate) outcome: std::sync::Mutex<Option<Result<SignedIn, String>>>,
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
