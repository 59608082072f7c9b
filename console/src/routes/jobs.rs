//! `/api/jobs/...`: ElasticJob-UI's job endpoints, plus adding a job and the YAML form of a
//! config that the page's editor uses.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::json;
use shardcron_core::api::JobOperations;

use crate::auth::require_writer;
use crate::wrapper::{ApiError, ApiResult, Wrapped};
use crate::AppState;

fn ops(state: &AppState) -> JobOperations<'_> {
    JobOperations::new(&*state.registry)
}

/// `GET /api/jobs/count`: a bare integer, as in ElasticJob-UI.
pub async fn count(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(ops(&state).job_names().await?.len()))
}

/// `GET /api/jobs/getAllJobsBriefInfo`.
pub async fn all(State(state): State<AppState>) -> ApiResult {
    Wrapped::of(ops(&state).jobs().await?)
}

/// `GET /api/jobs/{job}`: everything the page shows of one job (not in ElasticJob-UI).
pub async fn detail(State(state): State<AppState>, Path(job): Path<String>) -> ApiResult {
    let detail = ops(&state).job_detail(&job).await?;
    let yaml = match &detail.config {
        Some(c) => c.to_yaml().map_err(shardcron_core::Error::from)?,
        None => String::new(),
    };
    Wrapped::of(json!({
        "brief": detail.brief,
        "servers": detail.servers,
        "sharding": detail.sharding,
        "yaml": yaml,
    }))
}

/// `GET /api/jobs/{job}/sharding`.
pub async fn sharding(State(state): State<AppState>, Path(job): Path<String>) -> ApiResult {
    Wrapped::of(ops(&state).sharding_status(&job).await?)
}

/// `POST /api/jobs/{job}/trigger`.
pub async fn trigger(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(job): Path<String>,
) -> ApiResult {
    require_writer(&state, &headers)?;
    Wrapped::of(json!({"instances": ops(&state).trigger(&job).await?}))
}

/// `POST /api/jobs/{job}/disable` and `.../enable`.
pub async fn toggle(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((job, verb)): Path<(String, String)>,
) -> ApiResult {
    require_writer(&state, &headers)?;
    let disabled = disabled(&verb)?;
    Wrapped::of(json!({"servers": ops(&state).disable_job(&job, disabled).await?}))
}

/// `POST /api/jobs/{job}/shutdown`.
pub async fn shutdown(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(job): Path<String>,
) -> ApiResult {
    require_writer(&state, &headers)?;
    Wrapped::of(json!({"instances": ops(&state).shutdown(&job, None).await?}))
}

/// `POST /api/jobs/{job}/sharding/{item}/disable` and `.../enable`.
pub async fn toggle_item(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((job, item, verb)): Path<(String, String, String)>,
) -> ApiResult {
    require_writer(&state, &headers)?;
    let disabled = disabled(&verb)?;
    let item: u32 = item.parse().map_err(|_| {
        ApiError::bad_request(format!("item {item:?} is not a sharding item number"))
    })?;
    ops(&state).set_item_disabled(&job, item, disabled).await?;
    Wrapped::of(json!({"item": item, "disabled": disabled}))
}

/// `GET /api/jobs/config/{job}`: the config as ElasticJob's `JobConfigurationPOJO` JSON.
pub async fn get_config(State(state): State<AppState>, Path(job): Path<String>) -> ApiResult {
    let yaml = ops(&state).config(&job).await?.to_yaml().map_err(shardcron_core::Error::from)?;
    let value: serde_norway::Value = serde_norway::from_str(&yaml)
        .map_err(|e| ApiError::internal(format!("cannot read back the config: {e}")))?;
    Wrapped::of(value)
}

/// `PUT /api/jobs/config`: replaces a config with the JSON body (its `jobName` says which).
pub async fn put_config(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: String,
) -> ApiResult {
    require_writer(&state, &headers)?;
    let job = job_name_of(&body)?;
    Wrapped::of(ops(&state).set_config_yaml(&job, &body).await?)
}

/// `POST /api/jobs/config`: adds a job from the JSON body (not in ElasticJob-UI).
pub async fn add(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: String,
) -> Result<impl IntoResponse, ApiError> {
    require_writer(&state, &headers)?;
    let job = job_name_of(&body)?;
    let config = ops(&state).add_job_yaml(&job, &body).await?;
    Ok((StatusCode::CREATED, Wrapped::of(json!({"jobName": config.job_name()}))?))
}

/// `DELETE /api/jobs/config/{job}`: removes the job's subtree, once no instance runs it.
pub async fn remove(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(job): Path<String>,
) -> ApiResult {
    require_writer(&state, &headers)?;
    ops(&state).remove(&job).await?;
    Wrapped::of(json!({"jobName": job}))
}

/// `PUT /api/jobs/{job}/yaml`: replaces a config with the YAML body (the page's editor).
pub async fn put_yaml(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(job): Path<String>,
    body: String,
) -> ApiResult {
    require_writer(&state, &headers)?;
    Wrapped::of(ops(&state).set_config_yaml(&job, &body).await?)
}

/// `POST /api/jobs/{job}/yaml`: adds job `job` from the YAML body (the page's form).
pub async fn add_yaml(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(job): Path<String>,
    body: String,
) -> Result<impl IntoResponse, ApiError> {
    require_writer(&state, &headers)?;
    let config = ops(&state).add_job_yaml(&job, &body).await?;
    Ok((StatusCode::CREATED, Wrapped::of(json!({"jobName": config.job_name()}))?))
}

/// The `jobName` of a JSON config body.
fn job_name_of(body: &str) -> Result<String, ApiError> {
    let value: serde_json::Value = serde_json::from_str(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not a JSON config: {e}")))?;
    match value.get("jobName").and_then(|n| n.as_str()) {
        Some(name) if !name.is_empty() => Ok(name.to_owned()),
        _ => Err(ApiError::bad_request("jobName: must be given in the body")),
    }
}

pub(crate) fn disabled(verb: &str) -> Result<bool, ApiError> {
    match verb {
        "disable" => Ok(true),
        "enable" => Ok(false),
        other => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no action {other:?}; use disable or enable"),
        )),
    }
}
