//! ElasticJob-UI's response wrapper, `{"success", "errorCode", "errorMsg", "model"}`, and the
//! errors that fill it. Scripts written for ElasticJob-UI test `success` and read `model`; the
//! HTTP status says the same thing for clients that look at it (`curl -f`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::json;

/// A successful answer: `model` wrapped.
#[derive(Debug)]
pub struct Wrapped(pub serde_json::Value);

impl Wrapped {
    pub fn of(model: impl Serialize) -> Result<Self, ApiError> {
        serde_json::to_value(model)
            .map(Wrapped)
            .map_err(|e| ApiError::internal(format!("cannot encode the answer: {e}")))
    }
}

impl IntoResponse for Wrapped {
    fn into_response(self) -> Response {
        Json(json!({"success": true, "errorCode": 0, "errorMsg": null, "model": self.0}))
            .into_response()
    }
}

/// A failed request: its HTTP status (also the wrapper's `errorCode`) and a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into() }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({
            "success": false,
            "errorCode": self.status.as_u16(),
            "errorMsg": self.message,
            "model": null,
        });
        (self.status, Json(body)).into_response()
    }
}

impl From<shardcron_core::Error> for ApiError {
    fn from(e: shardcron_core::Error) -> Self {
        use shardcron_core::Error as E;
        let status = match &e {
            E::NoSuchJob { .. } | E::NoSuchServer { .. } | E::NoSuchInstance { .. } => {
                StatusCode::NOT_FOUND
            }
            E::JobAlreadyRegistered { .. } | E::Contended { .. } => StatusCode::CONFLICT,
            e if e.is_bad_request() => StatusCode::BAD_REQUEST,
            // The registry failed or is unreachable: the console is up, its backend is not.
            _ => StatusCode::SERVICE_UNAVAILABLE,
        };
        // YAML parser messages carry a source excerpt over several lines.
        let message = e.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
        ApiError::new(status, message)
    }
}

/// What every JSON endpoint returns.
pub type ApiResult = Result<Wrapped, ApiError>;
