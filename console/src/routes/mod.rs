//! The routes: ElasticJob-UI's REST API under `/api`, and the page at `/`.

pub mod jobs;
pub mod page;
pub mod servers;
pub mod trace;

use axum::routing::{get, post, put};
use axum::Router;

use crate::auth;
use crate::wrapper::{ApiError, ApiResult, Wrapped};
use crate::AppState;

/// Every route of the console.
pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/login", post(auth::login))
        .route("/console", get(console))
        .route("/jobs/count", get(jobs::count))
        .route("/jobs/getAllJobsBriefInfo", get(jobs::all))
        .route("/jobs/config", put(jobs::put_config).post(jobs::add))
        .route("/jobs/config/{job}", get(jobs::get_config).delete(jobs::remove))
        .route("/jobs/{job}", get(jobs::detail))
        .route("/jobs/{job}/sharding", get(jobs::sharding))
        .route("/jobs/{job}/trigger", post(jobs::trigger))
        .route("/jobs/{job}/shutdown", post(jobs::shutdown))
        .route("/jobs/{job}/yaml", put(jobs::put_yaml).post(jobs::add_yaml))
        .route("/jobs/{job}/sharding/{item}/{verb}", post(jobs::toggle_item))
        .route("/jobs/{job}/{verb}", post(jobs::toggle))
        .route("/servers/count", get(servers::count))
        .route("/servers/getAllServersBriefInfo", get(servers::all))
        .route("/servers/{ip}", axum::routing::delete(servers::remove))
        .route("/servers/{ip}/jobs", get(servers::jobs))
        .route("/servers/{ip}/{verb}", post(servers::act))
        .route("/servers/{ip}/jobs/{job}", axum::routing::delete(servers::remove_from_job))
        .route("/servers/{ip}/jobs/{job}/{verb}", post(servers::act_on_job))
        .route("/instances", get(servers::instances))
        .route("/event-trace/execution", post(trace::executions))
        .route("/event-trace/status", post(trace::statuses))
        .route("/event-trace/execution/jobNames", get(trace::execution_jobs))
        .route("/event-trace/execution/jobNames/{prefix}", get(trace::execution_jobs_from))
        .route("/event-trace/execution/ip", get(trace::execution_ips))
        .route("/event-trace/execution/ip/{prefix}", get(trace::execution_ips_from))
        .route("/event-trace/status/jobNames", get(trace::status_jobs))
        .route("/event-trace/status/jobNames/{prefix}", get(trace::status_jobs_from))
        .fallback(not_found);
    Router::new()
        .nest("/api", api)
        .route("/", get(page::index))
        .route("/app.js", get(page::script))
        .route("/app.css", get(page::style))
        .with_state(state)
}

/// `GET /api/console`: what the page needs to know of the console itself.
async fn console(axum::extract::State(state): axum::extract::State<AppState>) -> ApiResult {
    Wrapped::of(serde_json::json!({
        "readOnly": state.read_only,
        "registry": &*state.label,
        "trace": state.trace.is_some(),
    }))
}

async fn not_found() -> ApiError {
    ApiError::new(axum::http::StatusCode::NOT_FOUND, "no such endpoint")
}
