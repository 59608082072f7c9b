//! Tests of the job module. Virtual time (`start_paused`) wherever timing matters; real processes
//! and threads only where the kind needs them (script, blocking).

mod context;
mod dataflow;
mod error_handlers;
mod executor;
#[cfg(feature = "http")]
mod http;
mod listeners;
mod logs;
#[cfg(target_os = "linux")]
mod script;
mod simple;

use super::*;
use crate::handles::Handles;

/// Virtual epoch start of [`handles`].
pub(super) const START_MS: i64 = 1_700_000_000_000;

/// Handles on tokio's (possibly paused) clock, starting at [`START_MS`].
pub(super) fn handles() -> Handles {
    Handles::simulated(START_MS, 7)
}

pub(super) fn fire(items: &[u32]) -> FireInfo {
    FireInfo {
        job_name: "orders".into(),
        instance: "10.0.0.1@-@4242".into(),
        fire_time: crate::job::epoch_ms_to_system_time(START_MS),
        source: ExecutionSource::Normal,
        items: items.to_vec(),
    }
}

/// A request for `items` of a job with `total` items and parameters `{item}=p{item}`.
pub(super) fn request(items: &[u32], total: u32, max_parallel_items: usize) -> FireRequest {
    let info = fire(items);
    let contexts = items
        .iter()
        .map(|&item| ShardingContext::new(&info, total, "jp", item, format!("p{item}")))
        .collect();
    FireRequest { info, contexts, max_parallel_items }
}

/// Runs `job` for `items` (of 10) with no parallel limit on a fresh executor.
pub(super) async fn run(job: &Job, items: &[u32]) -> FireReport {
    Executor::new(handles()).run(job, request(items, 10, 0)).await
}
