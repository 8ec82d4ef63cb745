//! Root as the OpenID provider's client: its configuration, discovery (cached), the
//! `openidconnect` client types root uses, and the HTTP client the crate's requests take.

use std::time::{Duration, Instant};

use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreClaimName, CoreClaimType, CoreClientAuthMethod,
    CoreErrorResponseType, CoreGenderClaim, CoreGrantType, CoreJsonWebKey,
    CoreJweContentEncryptionAlgorithm, CoreJweKeyManagementAlgorithm, CoreJwsSigningAlgorithm,
    CoreResponseMode, CoreResponseType, CoreRevocableToken, CoreRevocationErrorResponse,
    CoreSubjectIdentifierType, CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AdditionalClaims, AdditionalProviderMetadata, ClientId, ClientSecret, DeviceAuthorizationUrl,
    EmptyExtraTokenFields, EndpointMaybeSet, EndpointNotSet, EndpointSet, IdTokenFields, IssuerUrl,
    ProviderMetadata, StandardErrorResponse, StandardTokenResponse,
};
use serde::{Deserialize, Serialize};

use crate::config::OidcConfig;

/// How long discovered provider metadata (endpoints, signing keys) is used before it is read
/// again; a token signed with a key not in it makes it read again at once.
const METADATA_TTL: Duration = Duration::from_secs(3600);
/// How long one request to the provider may take.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);

/// The ID token's claims past the standard ones (the groups claim is configurable).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Extra(#[serde(default)] pub(crate) serde_json::Map<String, serde_json::Value>);
impl AdditionalClaims for Extra {}

/// Provider metadata root reads past the core set.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ExtraMetadata {
    #[serde(default)]
    device_authorization_endpoint: Option<DeviceAuthorizationUrl>,
    /// RFC 9207: the provider names itself (`iss`) in every authorization response.
    #[serde(default)]
    pub(crate) authorization_response_iss_parameter_supported: bool,
}
impl AdditionalProviderMetadata for ExtraMetadata {}

type Metadata = ProviderMetadata<
    ExtraMetadata,
    CoreAuthDisplay,
    CoreClientAuthMethod,
    CoreClaimName,
    CoreClaimType,
    CoreGrantType,
    CoreJweContentEncryptionAlgorithm,
    CoreJweKeyManagementAlgorithm,
    CoreJsonWebKey,
    CoreResponseMode,
    CoreResponseType,
    CoreSubjectIdentifierType,
>;

pub(crate) type TokenResponse = StandardTokenResponse<
    IdTokenFields<
        Extra,
        EmptyExtraTokenFields,
        CoreGenderClaim,
        CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm,
    >,
    CoreTokenType,
>;

/// Root as the provider's client (`D`: whether the device endpoint is set).
pub(crate) type Client<D = EndpointNotSet> = openidconnect::Client<
    Extra,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    TokenResponse,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    D,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// Why a sign-in or a check failed; each precise, none a panic.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OidcError {
    #[error(
        "operators cannot sign in with an identity provider here: [operators.oidc] is not configured"
    )]
    NotConfigured,
    #[error("cannot read the identity provider's configuration at {issuer}: {why}")]
    Discovery { issuer: String, why: String },
    #[error("the identity provider refused: {0}")]
    Provider(String),
    #[error("the identity provider did not answer: {0}")]
    Unreachable(String),
    #[error("the sign-in's state does not match the one this browser started (start again)")]
    State,
    #[error("the sign-in started more than 10 minutes ago, or not in this browser (start again)")]
    Expired,
    #[error("the authorization response names issuer `{got}`, not `{want}`")]
    Issuer { got: String, want: String },
    #[error("the identity provider's answer has no ID token")]
    NoIdToken,
    #[error("the ID token is not valid: {0}")]
    IdToken(String),
    #[error(
        "`{who}` holds no role here: no [[operators.oidc.roles]] rule matches their groups or email"
    )]
    NoRole { who: String },
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Internal(String),
}

impl OidcError {
    /// The HTTP status a sign-in refused so is answered with.
    pub(crate) fn status(&self) -> axum::http::StatusCode {
        use axum::http::StatusCode;
        match self {
            OidcError::NotConfigured => StatusCode::NOT_FOUND,
            OidcError::Discovery { .. } | OidcError::Unreachable(_) => StatusCode::BAD_GATEWAY,
            OidcError::NoRole { .. } => StatusCode::FORBIDDEN,
            OidcError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    pub(crate) fn code(&self) -> mcp_shared::error::ErrorCode {
        use mcp_shared::error::ErrorCode;
        match self {
            OidcError::NotConfigured => ErrorCode::NotFound,
            OidcError::Discovery { .. } | OidcError::Unreachable(_) => ErrorCode::Internal,
            OidcError::NoRole { .. } => ErrorCode::Forbidden,
            OidcError::Internal(_) => ErrorCode::Internal,
            OidcError::BadRequest(_) => ErrorCode::InvalidArguments,
            _ => ErrorCode::Unauthenticated,
        }
    }
}

/// Why a request to the provider failed at the HTTP level.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpError {
    #[error(transparent)]
    Reqwest(#[from] reqwest::Error),
    #[error(transparent)]
    Http(#[from] http::Error),
}

/// The provider as root uses it: its configuration, an HTTP client, the metadata last
/// discovered, and how many device grants it polls for.
pub(crate) struct Oidc {
    pub(crate) config: OidcConfig,
    secret: Option<ClientSecret>,
    http: reqwest::Client,
    metadata: tokio::sync::Mutex<Option<(Instant, Metadata)>>,
    /// Device grants this replica polls the provider for.
    pub(crate) devices: std::sync::atomic::AtomicUsize,
}

impl Oidc {
    /// From `[operators.oidc]`; reads the client secret file (mode 0600) now.
    pub(crate) fn new(config: &OidcConfig) -> anyhow::Result<Oidc> {
        let secret = match &config.client_secret_file {
            Some(path) => {
                crate::secrets::check_private_file(path)?;
                let s = std::fs::read_to_string(path)?;
                Some(ClientSecret::new(s.trim().to_owned()))
            }
            None => None,
        };
        let http = reqwest::Client::builder()
            // The provider's answers are read as they come: never followed elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(PROVIDER_TIMEOUT)
            .build()?;
        Ok(Oidc {
            config: config.clone(),
            secret,
            http,
            metadata: Default::default(),
            devices: Default::default(),
        })
    }

    /// The issuer as configured (what every ID token must name).
    pub(crate) fn issuer(&self) -> &str {
        &self.config.issuer
    }

    /// The HTTP client the crate's requests take (root's reqwest, no redirects followed).
    pub(crate) fn http(&self) -> impl Fn(openidconnect::HttpRequest) -> Sent + use<> {
        let client = self.http.clone();
        move |req| {
            let client = client.clone();
            Box::pin(async move { send(&client, req).await })
        }
    }

    /// The provider's metadata: discovered, or the copy read within [`METADATA_TTL`]
    /// (`fresh`: read it again now, as when a token names a key it does not hold).
    async fn metadata(&self, fresh: bool) -> Result<Metadata, OidcError> {
        let mut held = self.metadata.lock().await;
        if let Some((at, m)) = held.as_ref()
            && !fresh
            && at.elapsed() < METADATA_TTL
        {
            return Ok(m.clone());
        }
        let discovery = |why: String| OidcError::Discovery {
            issuer: self.config.issuer.clone(),
            why,
        };
        let issuer =
            IssuerUrl::new(self.config.issuer.clone()).map_err(|e| discovery(e.to_string()))?;
        let m = Metadata::discover_async(issuer, &self.http())
            .await
            .map_err(|e| discovery(error_chain(&e)))?;
        *held = Some((Instant::now(), m.clone()));
        Ok(m)
    }

    /// Root as the provider's client, redirecting to `redirect` (none: the device grant and
    /// refresh).
    pub(crate) async fn client(
        &self,
        redirect: Option<&str>,
        fresh: bool,
    ) -> Result<(Client, Metadata), OidcError> {
        let m = self.metadata(fresh).await?;
        let mut c: Client = Client::from_provider_metadata(
            m.clone(),
            ClientId::new(self.config.client_id.clone()),
            self.secret.clone(),
        );
        if let Some(r) = redirect {
            let url = openidconnect::RedirectUrl::new(r.to_owned())
                .map_err(|e| OidcError::Internal(format!("redirect URL `{r}`: {e}")))?;
            c = c.set_redirect_uri(url);
        }
        Ok((c, m))
    }

    /// Root as the provider's client for the device grant; refused precisely when the
    /// provider offers none.
    pub(crate) async fn device_client(&self) -> Result<Client<EndpointSet>, OidcError> {
        let (c, m) = self.client(None, false).await?;
        let url = m
            .additional_metadata()
            .device_authorization_endpoint
            .clone()
            .ok_or_else(|| {
                OidcError::Provider(format!(
                    "{} offers no device authorization endpoint; sign in with a browser (`mcp-root login` without --device)",
                    self.config.issuer
                ))
            })?;
        Ok(c.set_device_authorization_url(url))
    }
}

/// A request to the provider on its way.
pub(crate) type Sent = std::pin::Pin<
    Box<dyn Future<Output = Result<openidconnect::HttpResponse, HttpError>> + Send + 'static>,
>;

/// Sends one request to the provider.
async fn send(
    client: &reqwest::Client,
    req: openidconnect::HttpRequest,
) -> Result<openidconnect::HttpResponse, HttpError> {
    let (parts, body) = req.into_parts();
    let res = client
        .request(parts.method, parts.uri.to_string())
        .headers(parts.headers)
        .body(body)
        .send()
        .await?;
    let mut out = http::Response::builder().status(res.status());
    for (k, v) in res.headers() {
        out = out.header(k, v);
    }
    let body = res.bytes().await?;
    Ok(out.body(body.to_vec())?)
}

/// An error with its causes, on one line.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
