//! Operators signing in with the organization's OpenID provider (`[operators.oidc]`), through
//! the `openidconnect` crate: discovery, the authorization code flow with PKCE and `nonce`
//! (console, and the CLI's loopback redirect), the device authorization grant (RFC 8628, the
//! CLI on a headless machine), ID token validation, and refresh.
//!
//! Root is the provider's client: the provider's tokens stay here (the refresh token
//! encrypted in the store), and a person gets a console session or a short-lived root
//! credential, never the provider's tokens. A person is the operator
//! `oidc:<issuer>#<sub>` (actor `operator:oidc:<issuer>#<sub>`), holding what their groups map
//! to, re-evaluated at every sign-in and check (`check`): removed at the provider, their
//! sessions, credentials and what their authority held end at the next check.
//!
//! `provider` is root as the provider's client, `flow` runs the flows (`state`: what they
//! keep), `check` the checks; `api::oidc` serves them.

pub(crate) mod check;
pub(crate) mod flow;
pub(crate) mod provider;
pub(crate) mod state;

pub(crate) use provider::{Oidc, OidcError};
