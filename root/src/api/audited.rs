//! An operator action over REST: its JSON body read so that a malformed one is refused with
//! why *and* recorded ([`ActionBody`]: the refusal is an audited action too), and the action
//! run and recorded as one event naming the operator ([`audited`], over `ops::audited`).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::api::error::ApiError;

/// An operator action's JSON body: the body, or why the request holds none.
pub(crate) struct ActionBody<T>(Result<T, JsonRejection>);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ActionBody<T> {
    type Rejection = std::convert::Infallible;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let body = Json::<T>::from_request(req, state).await;
        Ok(ActionBody(body.map(|Json(b)| b)))
    }
}

impl<T> ActionBody<T> {
    /// What was asked, for the trail: `context`'s fields, then `record(body)`'s, or
    /// `invalid_body` with why there is none.
    pub(crate) fn request(&self, context: Value, record: impl FnOnce(&T) -> Value) -> Value {
        let more = match &self.0 {
            Ok(body) => record(body),
            Err(why) => json!({ "invalid_body": why.body_text() }),
        };
        let mut out = match context {
            Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        if let Value::Object(m) = more {
            out.extend(m);
        }
        Value::Object(out)
    }

    /// The body, if the request holds one.
    pub(crate) fn get(&self) -> Option<&T> {
        self.0.as_ref().ok()
    }

    /// The body, or the `400` saying why the request holds none.
    pub(crate) fn parsed(self) -> Result<T, ApiError> {
        self.0.map_err(|why| ApiError::bad_request(why.body_text()))
    }
}

/// [`crate::ops::audited::audited`] for a REST handler, whose action refuses with an
/// [`ApiError`].
pub(crate) async fn audited<T>(
    app: &crate::app::App,
    op: &crate::operators::OperatorId,
    asked: crate::ops::audited::Asked,
    run: impl std::future::Future<Output = Result<(T, String), ApiError>>,
) -> Result<(T, String), ApiError> {
    crate::ops::audited::audited(app, op, asked, None, run).await
}

/// [`audited`], the event joining trace `trace_id`.
pub(crate) async fn audited_in<T>(
    app: &crate::app::App,
    op: &crate::operators::OperatorId,
    asked: crate::ops::audited::Asked,
    trace_id: Option<String>,
    run: impl std::future::Future<Output = Result<(T, String), ApiError>>,
) -> Result<(T, String), ApiError> {
    crate::ops::audited::audited(app, op, asked, trace_id, run).await
}
