//! The sign-in flows: the authorization code flow with PKCE, `state` and `nonce` (the
//! console, and the CLI's loopback redirect through the browser) and the device
//! authorization grant (RFC 8628), each ending in [`sign_in`]: the ID token checked (issuer,
//! audience, signature, expiry, nonce), the person's roles mapped from their groups, and the
//! sign-in recorded as an operator, with their refresh token for the checks.
//!
//! A flow in progress in a browser is a cookie (`mcp_oidc`: its state, nonce and PKCE
//! verifier, encrypted under the master key, valid 10 minutes), so any replica finishes it;
//! a CLI's one-time code and a device grant's outcome are in the store, for the same reason.

use std::sync::Arc;
use std::time::Duration;

use mcp_shared::time::{now, unix_ms};
use openidconnect::core::CoreAuthenticationFlow;
use openidconnect::{
    AuthorizationCode, CsrfToken, Nonce, OAuth2TokenResponse, PkceCodeChallenge, PkceCodeVerifier,
    Scope, TokenResponse as _,
};
use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::provider::{Oidc, OidcError, TokenResponse, error_chain};
use super::state::{CliReturn, SignedIn};
use crate::app::App;
use crate::operators::OperatorId;
use crate::roles::Grant;

/// How long a browser sign-in may take from start to callback.
const PENDING_TTL: Duration = Duration::from_secs(600);
/// How long a CLI has to exchange its one-time code.
const CLI_CODE_TTL: Duration = Duration::from_secs(120);
/// Device grants in progress kept at once (each a provider poll of its own).
const MAX_DEVICE_GRANTS: usize = 64;
/// AAD of the encrypted pending-sign-in cookie.
const PENDING_AAD: &str = "mcp-root/oidc-pending/v1";

/// A browser sign-in in progress (the `mcp_oidc` cookie).
#[derive(Debug, Serialize, Deserialize)]
struct Pending {
    state: String,
    nonce: String,
    verifier: String,
    started_ms: i64,
    /// Where the sign-in returns to a CLI (`mcp-root login`), if it is one.
    cli: Option<CliReturn>,
}

/// A browser sign-in started: where to send the browser, and the cookie it must carry back.
pub(crate) struct Started {
    pub(crate) url: String,
    pub(crate) cookie: String,
}

/// Starts the authorization code flow, the provider redirecting back to `redirect`.
pub(crate) async fn start(
    app: &App,
    oidc: &Oidc,
    redirect: &str,
    cli: Option<CliReturn>,
) -> Result<Started, OidcError> {
    let (client, _) = oidc.client(Some(redirect), false).await?;
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut request = client
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .set_pkce_challenge(challenge);
    for s in &oidc.config.scopes {
        request = request.add_scope(Scope::new(s.clone()));
    }
    let (url, state, nonce) = request.url();
    let pending = Pending {
        state: state.secret().clone(),
        nonce: nonce.secret().clone(),
        verifier: verifier.secret().clone(),
        started_ms: unix_ms(now()),
        cli,
    };
    let json = serde_json::to_vec(&pending).map_err(|e| OidcError::Internal(e.to_string()))?;
    let cookie = app
        .master_key
        .encrypt(PENDING_AAD, &json)
        .map_err(|e| OidcError::Internal(e.to_string()))?;
    Ok(Started {
        url: url.to_string(),
        cookie,
    })
}

/// What the provider redirected back with.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Callback {
    pub(crate) code: Option<String>,
    pub(crate) state: Option<String>,
    pub(crate) iss: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) error_description: Option<String>,
}

/// Finishes the authorization code flow: the callback checked against the browser's pending
/// sign-in (`cookie`), the code exchanged with its verifier, the ID token checked.
pub(crate) async fn finish(
    app: &App,
    oidc: &Oidc,
    redirect: &str,
    cookie: Option<&str>,
    back: &Callback,
) -> Result<SignedIn, OidcError> {
    let pending: Pending = cookie
        .and_then(|c| app.master_key.decrypt(PENDING_AAD, c))
        .and_then(|plain| serde_json::from_slice(&plain).ok())
        .ok_or(OidcError::Expired)?;
    if unix_ms(now()) - pending.started_ms > PENDING_TTL.as_millis() as i64 {
        return Err(OidcError::Expired);
    }
    let state_ok = back
        .state
        .as_deref()
        .is_some_and(|s| crate::auth::secret_eq(s, &pending.state));
    if !state_ok {
        return Err(OidcError::State);
    }
    if let Some(e) = &back.error {
        let more = back.error_description.as_deref().unwrap_or("");
        return Err(OidcError::Provider(format!("{e} {more}").trim().to_owned()));
    }
    let (client, metadata) = oidc.client(Some(redirect), false).await?;
    // RFC 9207: a provider that names itself in its responses must name the one configured
    // (a mix-up attack sends the browser back from another).
    match &back.iss {
        Some(iss) if iss != oidc.issuer() => {
            return Err(OidcError::Issuer {
                got: iss.clone(),
                want: oidc.issuer().to_owned(),
            });
        }
        None if metadata
            .additional_metadata()
            .authorization_response_iss_parameter_supported =>
        {
            return Err(OidcError::Issuer {
                got: "(none)".into(),
                want: oidc.issuer().to_owned(),
            });
        }
        _ => {}
    }
    let code = back
        .code
        .clone()
        .ok_or_else(|| OidcError::BadRequest("the callback has no code".into()))?;
    let http = oidc.http();
    let token = client
        .exchange_code(AuthorizationCode::new(code))
        .map_err(|e| OidcError::Internal(e.to_string()))?
        .set_pkce_verifier(PkceCodeVerifier::new(pending.verifier))
        .request_async(&http)
        .await
        .map_err(token_error)?;
    let nonce = Nonce::new(pending.nonce);
    let mut signed = sign_in(app, oidc, &token, Some(&nonce)).await?;
    signed.cli = pending.cli;
    Ok(signed)
}

/// A token request's failure: the provider's refusal, or no answer.
pub(crate) fn token_error<RE, T>(e: openidconnect::RequestTokenError<RE, T>) -> OidcError
where
    RE: std::error::Error + 'static,
    T: openidconnect::ErrorResponse + 'static,
{
    match e {
        openidconnect::RequestTokenError::ServerResponse(r) => OidcError::Provider(r.to_string()),
        e @ openidconnect::RequestTokenError::Request(_) => OidcError::Unreachable(error_chain(&e)),
        e => OidcError::Provider(error_chain(&e)),
    }
}

/// The person a token response's ID token names, checked (issuer, audience, signature,
/// expiry; `nonce` when the flow sent one), and what they hold by the role rules.
pub(crate) async fn person(
    oidc: &Oidc,
    token: &TokenResponse,
    nonce: Option<&Nonce>,
) -> Result<(OperatorId, Option<String>, Option<Grant>), OidcError> {
    let id_token = token.id_token().ok_or(OidcError::NoIdToken)?;
    let claims = {
        let check = |fresh| async move {
            let (client, _) = oidc.client(None, fresh).await?;
            let verifier = client.id_token_verifier();
            let claims = match nonce {
                Some(n) => id_token.claims(&verifier, n),
                // The device grant and refresh carry no nonce.
                None => id_token.claims(&verifier, |_: Option<&Nonce>| Ok(())),
            };
            claims
                .cloned()
                .map_err(|e| OidcError::IdToken(error_chain(&e)))
        };
        match check(false).await {
            // Signed with a key published since the metadata was read: read it again.
            Err(OidcError::IdToken(why)) if why.contains("key") => check(true).await?,
            other => other?,
        }
    };
    let subject = claims.subject().as_str();
    let operator = OperatorId::oidc(oidc.issuer(), subject);
    let mut email = claims
        .email()
        .filter(|_| claims.email_verified() != Some(false))
        .map(|e| e.as_str().to_owned());
    let mut extra = claims.additional_claims().0.clone();
    // Many providers keep scope claims (email, groups) out of the ID token and serve them
    // at the userinfo endpoint (for the subject the ID token names, checked there).
    if (!extra.contains_key(&oidc.config.groups_claim) || email.is_none())
        && let Some((more, verified_email)) = userinfo(oidc, token, claims.subject()).await?
    {
        extra.extend(more);
        email = email.or(verified_email);
    }
    let groups = groups(&extra, &oidc.config.groups_claim);
    let grant = oidc.config.grant_for(&crate::config::Person {
        subject,
        email: email.as_deref(),
        groups: &groups,
    });
    Ok((operator, email, grant))
}

/// The person's claims at the provider's userinfo endpoint (none when it has none): the
/// extra ones, and the email if verified.
async fn userinfo(
    oidc: &Oidc,
    token: &TokenResponse,
    subject: &openidconnect::SubjectIdentifier,
) -> Result<Option<(serde_json::Map<String, serde_json::Value>, Option<String>)>, OidcError> {
    let (client, _) = oidc.client(None, false).await?;
    let Ok(request) = client.user_info(token.access_token().clone(), Some(subject.clone())) else {
        return Ok(None);
    };
    let info: openidconnect::UserInfoClaims<
        super::provider::Extra,
        openidconnect::core::CoreGenderClaim,
    > = request
        .request_async(&oidc.http())
        .await
        .map_err(|e| OidcError::Provider(format!("userinfo: {}", error_chain(&e))))?;
    let email = info
        .email()
        .filter(|_| info.email_verified() != Some(false))
        .map(|e| e.as_str().to_owned());
    Ok(Some((info.additional_claims().0.clone(), email)))
}

/// The groups claim: a list of strings, or one string.
fn groups(claims: &serde_json::Map<String, serde_json::Value>, name: &str) -> Vec<String> {
    match claims.get(name) {
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        Some(serde_json::Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// Signs the person of `token` in: checked ([`person`]), holding some role, recorded as an
/// operator with their refresh token (encrypted) and next check, on every replica.
pub(crate) async fn sign_in(
    app: &App,
    oidc: &Oidc,
    token: &TokenResponse,
    nonce: Option<&Nonce>,
) -> Result<SignedIn, OidcError> {
    let (operator, email, grant) = person(oidc, token, nonce).await?;
    let Some(grant) = grant else {
        return Err(OidcError::NoRole {
            who: email.unwrap_or_else(|| operator.name().to_owned()),
        });
    };
    let refresh = match token.refresh_token() {
        Some(r) => Some(
            app.master_key
                .encrypt(operator.name(), r.secret().as_bytes())
                .map_err(|e| OidcError::Internal(e.to_string()))?,
        ),
        None => None,
    };
    let at = unix_ms(now());
    let who = crate::store::OidcIdentity {
        name: operator.name().to_owned(),
        email: email.clone(),
        refresh_token: refresh,
        signed_in_at_ms: at,
        next_check_ms: at + oidc.config.check_interval_sec as i64 * 1000,
    };
    let (roles, profiles) = grant.to_stored();
    app.store
        .sign_in_oidc(&who, &roles, &profiles)
        .await
        .map_err(|e| OidcError::Internal(e.to_string()))?;
    crate::ops::operators::changed(app, operator.name())
        .await
        .map_err(|e| OidcError::Internal(e.tool_error().message))?;
    Ok(SignedIn {
        operator,
        email,
        grant,
        cli: None,
    })
}

/// Keeps `signed` for the CLI that started it, behind a one-time code (in the store, so
/// any replica redeems it); returns the code.
pub(crate) async fn code_for_cli(
    app: &App,
    signed: &SignedIn,
    challenge: &str,
) -> Result<String, OidcError> {
    let code = crate::auth::new_token("mcpx_");
    let now_ms = unix_ms(now());
    let kept = crate::store::OidcPending {
        challenge: Some(challenge.to_owned()),
        outcome: Some(SignedIn::kept(&Ok(signed.clone()))),
        expires_at_ms: now_ms + CLI_CODE_TTL.as_millis() as i64,
    };
    app.store
        .keep_oidc_pending(&crate::auth::token_hash(&code), "code", &kept, now_ms)
        .await
        .map_err(|e| OidcError::Internal(e.to_string()))?;
    Ok(code)
}

/// The sign-in behind a CLI's one-time `code`, once, for the verifier of its challenge.
pub(crate) async fn redeem(app: &App, code: &str, verifier: &str) -> Result<SignedIn, OidcError> {
    let taken = app
        .store
        .take_oidc_pending(&crate::auth::token_hash(code), "code", unix_ms(now()))
        .await
        .map_err(|e| OidcError::Internal(e.to_string()))?;
    let Some(crate::store::OidcPending {
        challenge: Some(challenge),
        outcome: Some(outcome),
        ..
    }) = taken
    else {
        return Err(OidcError::BadRequest(
            "unknown, used or expired sign-in code".into(),
        ));
    };
    let computed = crate::logins::b64(&sha2::Sha256::digest(verifier.as_bytes()));
    if !crate::auth::secret_eq(&computed, &challenge) {
        return Err(OidcError::BadRequest(
            "code_verifier does not match the sign-in's challenge".into(),
        ));
    }
    SignedIn::from_kept(&outcome)
}

/// How a device grant stands, for its CLI's poll.
pub(crate) enum Polled {
    Pending,
    Done(SignedIn),
}

/// A CLI's poll of the device grant `handle` (any replica answers it).
pub(crate) async fn poll(app: &App, handle: &str) -> Result<Polled, OidcError> {
    let taken = app
        .store
        .take_oidc_pending(&crate::auth::token_hash(handle), "device", unix_ms(now()))
        .await
        .map_err(|e| OidcError::Internal(e.to_string()))?;
    match taken {
        None => Err(OidcError::BadRequest(
            "unknown, finished or expired device sign-in".into(),
        )),
        Some(crate::store::OidcPending { outcome: None, .. }) => Ok(Polled::Pending),
        Some(crate::store::OidcPending {
            outcome: Some(o), ..
        }) => SignedIn::from_kept(&o).map(Polled::Done),
    }
}

/// What a person on a headless machine is told to do.
#[derive(Debug, Serialize)]
pub(crate) struct DeviceStart {
    pub(crate) handle: String,
    pub(crate) verification_uri: String,
    pub(crate) verification_uri_complete: Option<String>,
    pub(crate) user_code: String,
    pub(crate) expires_in: u64,
    pub(crate) interval: u64,
}

/// Starts a device grant at the provider; root polls the provider for it (a task of this
/// replica) until the person approved, refused, or the code expired, and keeps the outcome
/// in the store for the CLI's poll.
pub(crate) async fn start_device(app: Arc<App>, oidc: Arc<Oidc>) -> Result<DeviceStart, OidcError> {
    let running = oidc.devices.load(std::sync::atomic::Ordering::Relaxed);
    if running >= MAX_DEVICE_GRANTS {
        return Err(OidcError::Provider(
            "too many device sign-ins in progress; try again in a few minutes".into(),
        ));
    }
    let client = oidc.device_client().await?;
    let mut request = client
        .exchange_device_code()
        .add_scope(Scope::new("openid".into()));
    for s in &oidc.config.scopes {
        request = request.add_scope(Scope::new(s.clone()));
    }
    let details: openidconnect::core::CoreDeviceAuthorizationResponse = request
        .request_async(&oidc.http())
        .await
        .map_err(token_error)?;
    let handle = crate::auth::new_token("mcpd_");
    let handle_hash = crate::auth::token_hash(&handle);
    let expires_in = details.expires_in();
    let now_ms = unix_ms(now());
    let waiting = crate::store::OidcPending {
        challenge: None,
        outcome: None,
        expires_at_ms: now_ms + (expires_in + Duration::from_secs(60)).as_millis() as i64,
    };
    app.store
        .keep_oidc_pending(&handle_hash, "device", &waiting, now_ms)
        .await
        .map_err(|e| OidcError::Internal(e.to_string()))?;
    let start = DeviceStart {
        handle,
        verification_uri: details.verification_uri().to_string(),
        verification_uri_complete: details
            .verification_uri_complete()
            .map(|u| u.secret().clone()),
        user_code: details.user_code().secret().clone(),
        expires_in: expires_in.as_secs(),
        interval: details.interval().as_secs().max(1),
    };
    oidc.devices
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tokio::spawn(async move {
        let outcome = poll_device(&app, &oidc, &client, &details).await;
        oidc.devices
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        if let Err(e) = &outcome {
            tracing::warn!(error = %e, "a device sign-in ended without an operator");
        }
        let kept = SignedIn::kept(&outcome.map_err(|e| e.to_string()));
        if let Err(e) = app.store.settle_oidc_pending(&handle_hash, &kept).await {
            tracing::error!(error = %e, "cannot keep a device sign-in's outcome");
        }
    });
    Ok(start)
}

async fn poll_device(
    app: &App,
    oidc: &Oidc,
    client: &super::provider::Client<openidconnect::EndpointSet>,
    details: &openidconnect::core::CoreDeviceAuthorizationResponse,
) -> Result<SignedIn, OidcError> {
    let token = client
        .exchange_device_access_token(details)
        .map_err(|e| OidcError::Internal(e.to_string()))?
        .request_async(&oidc.http(), tokio::time::sleep, Some(details.expires_in()))
        .await
        .map_err(token_error)?;
    sign_in(app, oidc, &token, None).await
}
