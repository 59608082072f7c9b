//! `/api/servers/...`: ElasticJob-UI's server endpoints (a server is an IP), and the live
//! instances (not in ElasticJob-UI).

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::json;
use shardcron_core::api::JobOperations;

use super::jobs::disabled;
use crate::auth::require_writer;
use crate::wrapper::{ApiError, ApiResult, Wrapped};
use crate::AppState;

fn ops(state: &AppState) -> JobOperations<'_> {
    JobOperations::new(&*state.registry)
}

/// `GET /api/servers/count`: a bare integer.
pub async fn count(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(ops(&state).all_servers().await?.len()))
}

/// `GET /api/servers/getAllServersBriefInfo`.
pub async fn all(State(state): State<AppState>) -> ApiResult {
    Wrapped::of(ops(&state).all_servers().await?)
}

/// `GET /api/servers/{ip}/jobs`.
pub async fn jobs(State(state): State<AppState>, Path(ip): Path<String>) -> ApiResult {
    Wrapped::of(ops(&state).server_jobs(&ip).await?)
}

/// `GET /api/instances`.
pub async fn instances(State(state): State<AppState>) -> ApiResult {
    Wrapped::of(ops(&state).all_instances().await?)
}

/// `POST /api/servers/{ip}/{disable|enable|shutdown}`: on every job of the server.
pub async fn act(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((ip, verb)): Path<(String, String)>,
) -> ApiResult {
    require_writer(&state, &headers)?;
    act_on(&state, &ip, None, &verb).await
}

/// `POST /api/servers/{ip}/jobs/{job}/{disable|enable|shutdown}`: on one job of the server.
pub async fn act_on_job(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((ip, job, verb)): Path<(String, String, String)>,
) -> ApiResult {
    require_writer(&state, &headers)?;
    act_on(&state, &ip, Some(&job), &verb).await
}

async fn act_on(state: &AppState, ip: &str, job: Option<&str>, verb: &str) -> ApiResult {
    let ops = ops(state);
    if verb == "shutdown" {
        return Wrapped::of(json!({"instances": ops.shutdown_server(ip, job).await?}));
    }
    let disabled = disabled(verb).map_err(|_| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no action {verb:?}; use disable, enable or shutdown"),
        )
    })?;
    Wrapped::of(json!({"jobNames": ops.disable_server(ip, job, disabled).await?}))
}

/// `DELETE /api/servers/{ip}`: the server leaves every job.
pub async fn remove(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(ip): Path<String>,
) -> ApiResult {
    require_writer(&state, &headers)?;
    Wrapped::of(json!({"jobNames": ops(&state).remove_server(&ip, None).await?}))
}

/// `DELETE /api/servers/{ip}/jobs/{job}`: the server leaves one job.
pub async fn remove_from_job(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((ip, job)): Path<(String, String)>,
) -> ApiResult {
    require_writer(&state, &headers)?;
    Wrapped::of(json!({"jobNames": ops(&state).remove_server(&ip, Some(&job)).await?}))
}
