//! The transport of one sync: reqwest under rmcp's Streamable HTTP client, re-reading the
//! bearer once on a 401, each request bounded by the sync's budgets.

use super::options::{Budgets, SyncError, TokenSource};
use rmcp::transport::streamable_http_client::StreamableHttpClient;
use rmcp::transport::streamable_http_client::StreamableHttpError;
use rmcp::transport::streamable_http_client::StreamableHttpPostResponse;
use rmcp::transport::streamable_http_client::StreamableHttpResponseLimits;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Renewal state shared by every request of one sync.
pub(super) struct TokenState {
    pub(super) source: TokenSource,
    pub(super) current: std::sync::Mutex<String>,
    pub(super) renewals: AtomicU32,
    /// Set when a resend after renewal was refused with 401 too.
    pub(super) refused: std::sync::atomic::AtomicBool,
}

impl TokenState {
    fn current(&self) -> String {
        self.current.lock().map(|t| t.clone()).unwrap_or_default()
    }

    fn renew(&self) -> Result<String, SyncError> {
        let token = self.source.read()?;
        if let Ok(mut t) = self.current.lock() {
            *t = token.clone();
        }
        self.renewals.fetch_add(1, Ordering::Relaxed);
        Ok(token)
    }
}

/// reqwest's Streamable HTTP client with one token renewal and one resend per request on 401.
#[derive(Clone)]
pub struct RenewingHttp {
    pub(super) http: reqwest::Client,
    pub(super) token: Arc<TokenState>,
}

pub(super) fn is_unauthorized(e: &StreamableHttpError<reqwest::Error>) -> bool {
    match e {
        StreamableHttpError::AuthRequired(_) => true,
        StreamableHttpError::UnexpectedServerResponse(m) => m.starts_with("HTTP 401"),
        StreamableHttpError::Client(e) => e.status() == Some(reqwest::StatusCode::UNAUTHORIZED),
        _ => false,
    }
}

impl StreamableHttpClient for RenewingHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let first = self
            .http
            .post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                Some(self.token.current()),
                custom_headers.clone(),
                limits,
            )
            .await;
        match first {
            Err(e) if is_unauthorized(&e) => {
                let token = self.token.renew().map_err(|why| {
                    StreamableHttpError::UnexpectedServerResponse(
                        format!("HTTP 401 and the token could not be renewed: {why}").into(),
                    )
                })?;
                let second = self
                    .http
                    .post_message_with_response_limits(
                        uri,
                        message,
                        session_id,
                        Some(token),
                        custom_headers,
                        limits,
                    )
                    .await;
                if second.as_ref().err().is_some_and(is_unauthorized) {
                    self.token.refused.store(true, Ordering::Relaxed);
                }
                second
            }
            other => other,
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.http
            .delete_session(uri, session_id, Some(self.token.current()), custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<
        futures::stream::BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>,
        StreamableHttpError<Self::Error>,
    > {
        self.http
            .get_stream(
                uri,
                session_id,
                last_event_id,
                Some(self.token.current()),
                custom_headers,
            )
            .await
    }
}

/// Whether `e` or anything in its source chain is a timeout (reqwest's connect, read or total
/// budget).
pub(super) fn is_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err
            .downcast_ref::<reqwest::Error>()
            .is_some_and(reqwest::Error::is_timeout)
            || err
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        cur = err.source();
    }
    // Some layers keep only the text of the error they wrap.
    let text = format!("{e:?}");
    text.contains("TimedOut") || text.contains("timed out")
}

/// Runs one MCP request under the total budget.
pub(super) async fn bounded<T, E: std::error::Error + 'static>(
    budgets: &Budgets,
    request: &str,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, SyncError> {
    let timeout = || SyncError::Timeout {
        request: request.to_string(),
        budget_ms: budgets.total.as_millis(),
    };
    match tokio::time::timeout(budgets.total, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) if is_timeout(&e) => Err(timeout()),
        Ok(Err(e)) => Err(match crate::net::tls_client::tls_failure(&e) {
            Some(detail) => SyncError::Tls {
                request: request.to_string(),
                detail,
            },
            None => SyncError::Request {
                request: request.to_string(),
                reason: e.to_string(),
            },
        }),
        Err(_) => Err(timeout()),
    }
}
