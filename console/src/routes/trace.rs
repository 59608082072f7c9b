//! `/api/event-trace/...`: ElasticJob-UI's execution-trace search. The console reads the
//! registry only and has no trace database configured, so these endpoints answer, in the
//! wrapper, that there is nothing to search rather than a bare 404 a script would misread.

use axum::http::StatusCode;

use crate::wrapper::{ApiError, ApiResult};

pub async fn unavailable() -> ApiResult {
    Err(ApiError::new(
        StatusCode::NOT_IMPLEMENTED,
        "event trace: this console reads the registry only and has no trace data source",
    ))
}
