//! `/api/event-trace/...`: ElasticJob-UI's execution-trace searches, on the trace database the
//! workers write (`shardcron worker --trace URL`), read through the observe crate's
//! [`TraceReader`]:
//!
//! - `POST /api/event-trace/execution`: one page of item runs (`JOB_EXECUTION_LOG`), filtered
//!   by `jobName`, `ip`, `isSuccess`, `startTimeFrom`, `startTimeTo`; paged by `pageSize`,
//!   `pageNumber` (from 1), `sortBy`, `orderType`. The model is `{total, rows}`.
//! - `POST /api/event-trace/status`: one page of fire states (`JOB_STATUS_TRACE_LOG`), filtered
//!   by `jobName`, `source`, `executionType`, `state` and the same times and paging.
//! - `GET /api/event-trace/execution/jobNames[/{prefix}]`, `.../execution/ip[/{prefix}]`,
//!   `.../status/jobNames[/{prefix}]`: the autocomplete lists.
//!
//! Reading the trace needs no token, as reading the registry does not. A console started
//! without a trace answers every one of them, in the wrapper, how to give it one.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use shardcron_observe::trace::{ExecutionQuery, StatusQuery};
use shardcron_observe::{TraceError, TraceReader};

use crate::wrapper::{ApiError, ApiResult, Wrapped};
use crate::AppState;

/// The answer of every trace endpoint on a console that has no trace database.
pub const NO_TRACE: &str = "event trace: this console has no trace database; start it with \
     --trace URL (the SQLite file path or postgres:// URL the workers record to with \
     `shardcron worker --trace`)";

fn reader(state: &AppState) -> Result<&TraceReader, ApiError> {
    state.trace.as_ref().ok_or_else(|| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, NO_TRACE))
}

/// A search body: ElasticJob-UI's JSON; an empty body is a search with no filter.
fn search_body<Q: DeserializeOwned + Default>(body: &Bytes) -> Result<Q, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Q::default());
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "event trace: the search body is not valid: {e} (send JSON such as \
             {{\"jobName\": \"orders\", \"pageSize\": 20, \"pageNumber\": 1}})"
        ))
    })
}

/// How a failed search shows in the wrapper: a bad filter is the caller's, a database that
/// does not answer is the console's backend being down.
fn failed(error: TraceError) -> ApiError {
    let message = error.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
    match error {
        TraceError::InvalidQuery { .. } | TraceError::InvalidUrl { .. } => {
            ApiError::bad_request(message)
        }
        _ => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message),
    }
}

/// `POST /api/event-trace/execution`.
pub async fn executions(State(state): State<AppState>, body: Bytes) -> ApiResult {
    let reader = reader(&state)?;
    let query: ExecutionQuery = search_body(&body)?;
    Wrapped::of(reader.executions(&query).await.map_err(failed)?)
}

/// `POST /api/event-trace/status`.
pub async fn statuses(State(state): State<AppState>, body: Bytes) -> ApiResult {
    let reader = reader(&state)?;
    let query: StatusQuery = search_body(&body)?;
    Wrapped::of(reader.statuses(&query).await.map_err(failed)?)
}

/// Which autocomplete list.
#[derive(Debug, Clone, Copy)]
enum Names {
    ExecutionJobs,
    ExecutionIps,
    StatusJobs,
}

async fn names(state: &AppState, names: Names, prefix: Option<&str>) -> ApiResult {
    let reader = reader(state)?;
    let prefix = prefix.filter(|p| !p.is_empty());
    let found = match names {
        Names::ExecutionJobs => reader.execution_job_names(prefix).await,
        Names::ExecutionIps => reader.execution_ips(prefix).await,
        Names::StatusJobs => reader.status_job_names(prefix).await,
    };
    Wrapped::of(found.map_err(failed)?)
}

/// `GET /api/event-trace/execution/jobNames`.
pub async fn execution_jobs(State(state): State<AppState>) -> ApiResult {
    names(&state, Names::ExecutionJobs, None).await
}

/// `GET /api/event-trace/execution/jobNames/{prefix}`.
pub async fn execution_jobs_from(
    State(state): State<AppState>,
    Path(prefix): Path<String>,
) -> ApiResult {
    names(&state, Names::ExecutionJobs, Some(&prefix)).await
}

/// `GET /api/event-trace/execution/ip`.
pub async fn execution_ips(State(state): State<AppState>) -> ApiResult {
    names(&state, Names::ExecutionIps, None).await
}

/// `GET /api/event-trace/execution/ip/{prefix}`.
pub async fn execution_ips_from(
    State(state): State<AppState>,
    Path(prefix): Path<String>,
) -> ApiResult {
    names(&state, Names::ExecutionIps, Some(&prefix)).await
}

/// `GET /api/event-trace/status/jobNames`.
pub async fn status_jobs(State(state): State<AppState>) -> ApiResult {
    names(&state, Names::StatusJobs, None).await
}

/// `GET /api/event-trace/status/jobNames/{prefix}`.
pub async fn status_jobs_from(
    State(state): State<AppState>,
    Path(prefix): Path<String>,
) -> ApiResult {
    names(&state, Names::StatusJobs, Some(&prefix)).await
}
