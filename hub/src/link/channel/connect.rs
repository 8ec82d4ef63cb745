//! Reaching root: the WebSocket upgrade request carrying the hub token, why a connection
//! ended ([`ChannelError`]), and the jittered exponential [`Backoff`] between attempts.

use std::time::Duration;

/// The socket of one connection to root.
pub(super) type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("connect to {url}: {source}")]
    Connect {
        url: String,
        source: Box<tokio_tungstenite::tungstenite::Error>,
    },
    #[error("websocket: {0}")]
    Socket(#[from] Box<tokio_tungstenite::tungstenite::Error>),
    #[error("root refused the hub: {0}")]
    Refused(String),
    #[error("root at {url} is at its capacity ({status}); retry after {retry_after:?}")]
    Busy {
        url: String,
        status: u16,
        /// Root's `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
    },
    #[error("no welcome from root within {0:?}")]
    NoWelcome(Duration),
    #[error("root sent {0} before welcome")]
    UnexpectedBeforeWelcome(String),
    #[error("root closed the connection")]
    Closed,
    #[error("root silent for {0:?}")]
    Silent(Duration),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("the hub token changed; reconnecting with the new one")]
    TokenChanged,
    /// Root answered the upgrade `403 target_retired`: the target is retired for good.
    #[error("root at {0} retired this target: its hub token opens nothing again")]
    Retired(String),
}

impl ChannelError {
    /// A failed upgrade: `Busy` when root answered `503` or `429` (with its `Retry-After`),
    /// `Retired` when it answered `403` with code `target_retired`, `Connect` otherwise.
    pub fn of_upgrade(url: &str, e: tokio_tungstenite::tungstenite::Error) -> ChannelError {
        use tokio_tungstenite::tungstenite::{Error, http::StatusCode, http::header};
        if let Error::Http(response) = &e
            && response.status() == StatusCode::FORBIDDEN
            && response.body().as_deref().is_some_and(|b| {
                serde_json::from_slice::<serde_json::Value>(b)
                    .is_ok_and(|v| v["error"]["code"] == "target_retired")
            })
        {
            return ChannelError::Retired(url.to_owned());
        }
        if let Error::Http(response) = &e
            && matches!(
                response.status(),
                StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
            )
        {
            let retry_after = response
                .headers()
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|secs| Duration::from_secs(secs.min(MAX_RETRY_AFTER_SECS)));
            return ChannelError::Busy {
                url: url.to_owned(),
                status: response.status().as_u16(),
                retry_after,
            };
        }
        ChannelError::Connect {
            url: url.to_owned(),
            source: Box::new(e),
        }
    }

    /// How long root asked the hub to wait, if it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ChannelError::Busy { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The longest `Retry-After` honoured (a root asking for more is waited on this long).
const MAX_RETRY_AFTER_SECS: u64 = 300;

impl From<tokio_tungstenite::tungstenite::Error> for ChannelError {
    fn from(e: tokio_tungstenite::tungstenite::Error) -> Self {
        ChannelError::Socket(Box::new(e))
    }
}

/// The upgrade request to `url`, carrying the hub token as `Authorization: Bearer` (marked
/// sensitive, so no HTTP client logs it).
pub fn upgrade_request(
    url: &str,
    token: &str,
) -> Result<tokio_tungstenite::tungstenite::handshake::client::Request, ChannelError> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::http::{HeaderValue, header};
    let mut request = url
        .into_client_request()
        .map_err(|e| ChannelError::Config(format!("root URL `{url}`: {e}")))?;
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| ChannelError::Config("the hub token is not a valid header value".into()))?;
    value.set_sensitive(true);
    request.headers_mut().insert(header::AUTHORIZATION, value);
    Ok(request)
}

/// Exponential backoff with jitter between half and all of the current step.
#[derive(Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
    seed: u64,
}

impl Backoff {
    pub fn new(initial_ms: u64, max_ms: u64) -> Backoff {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(std::process::id() as u64);
        Backoff::seeded(initial_ms, max_ms, h.finish())
    }

    /// A backoff whose jitter starts from `seed` (many hubs in one process, as the
    /// simulator runs them, each need their own).
    pub fn seeded(initial_ms: u64, max_ms: u64, seed: u64) -> Backoff {
        let initial = Duration::from_millis(initial_ms.max(1));
        Backoff {
            initial,
            max: Duration::from_millis(max_ms.max(initial_ms.max(1))),
            next: initial,
            // xorshift never leaves zero.
            seed: seed.max(1),
        }
    }

    /// After a successful welcome.
    pub fn reset(&mut self) {
        self.next = self.initial;
    }

    /// The delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let step = self.next;
        self.next = (self.next * 2).min(self.max);
        step.mul_f64(0.5 + 0.5 * self.fraction())
    }

    /// The delay before the next attempt when root asked for `retry_after` (it was at its
    /// capacity): at least that, plus up to half of it again, so that hubs refused together
    /// do not all come back at the same instant; and never less than the backoff's own step.
    pub fn delay_after(&mut self, retry_after: Duration) -> Duration {
        let own = self.next_delay();
        own.max(retry_after.mul_f64(1.0 + 0.5 * self.fraction()))
    }

    /// A pseudo-random fraction in [0, 1): xorshift64, enough to spread hubs reconnecting
    /// after a root restart.
    fn fraction(&mut self) -> f64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        (self.seed % 1_000) as f64 / 1_000.0
    }
}
