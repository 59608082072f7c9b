//! The execution layer: job kinds, running one fire, listeners and error handlers.
//!
//! This module knows nothing of the registry or the schedule. The runtime decides *that* a job
//! fires and *which* items this instance runs; it then hands the [`Job`] and a [`FireRequest`]
//! (one [`ShardingContext`] per item) to an [`Executor`], which runs the listeners, the items in
//! parallel (bounded), the error handler, and returns a [`FireReport`].
//!
//! A job is one of three kinds, all held as a cheap-to-clone [`Job`]:
//! - **simple**: a [`SimpleJob`] implementation, an async closure ([`Job::from_fn`]) or a
//!   blocking closure ([`Job::blocking_fn`], run on the spawner's blocking pool);
//! - **dataflow**: a [`DataflowJob`] (`fetch` then `process`), one-shot or streaming;
//! - **script**: an external program given the context as a JSON argument ([`Job::script`]);
//! - **http** (feature `http`): one request per item, the context as JSON in a header
//!   (`Job::http`, ElasticJob's `http.*` properties).
//!
//! Everything goes through the injected [`Handles`](crate::handles::Handles), so a fire runs the
//! same, deterministically, under the simulator's paused single-threaded runtime.
//!
//! ```
//! use std::time::{Duration, UNIX_EPOCH};
//! use shardcron_core::handles::Handles;
//! use shardcron_core::job::{ExecutionSource, Executor, FireInfo, FireRequest, ItemOutcome, Job};
//! use shardcron_core::config::JobConfig;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A job whose item for Shanghai fails.
//! let job = Job::from_fn(|ctx| async move {
//!     if ctx.item_parameter == "Shanghai" {
//!         return Err("Shanghai's database is down".into());
//!     }
//!     Ok(())
//! });
//!
//! // What the runtime does at fire time: build the contexts and run them.
//! let config = JobConfig::builder("orders")
//!     .one_off()
//!     .sharding_total_count(3)
//!     .sharding_item_parameters("0=Beijing,1=Shanghai,2=Guangzhou")
//!     .build()?;
//! let fire = FireInfo {
//!     job_name: "orders".into(),
//!     instance: "10.0.0.1@-@4242".into(),
//!     fire_time: UNIX_EPOCH + Duration::from_millis(1_700_000_000_000),
//!     source: ExecutionSource::Normal,
//!     items: vec![0, 1, 2],
//! };
//! let executor = Executor::new(Handles::real()); // LOG error handler, no listeners
//! let report = executor.run(&job, FireRequest::from_config(fire, &config, 2)?).await;
//!
//! assert_eq!(report.completed_items(), [0, 2]);
//! assert!(matches!(report.items[&1], ItemOutcome::Failed(_)));
//! assert!(report.raised.is_none()); // LOG logs; THROW would have raised it
//! # Ok(())
//! # }
//! ```
//!
//! # Layout
//! - `context.rs`: [`ShardingContext`] (and its JSON form), [`FireInfo`], [`ExecutionSource`],
//!   [`TaskId`].
//! - `kinds/`: [`Job`] and its constructors; `simple.rs` ([`SimpleJob`], closures),
//!   `dataflow.rs` ([`DataflowJob`]), `script.rs` (external programs), `http.rs` (requests).
//! - `executor.rs`: [`Executor`], [`FireRequest`], [`FireReport`], [`ItemOutcome`].
//! - `listener.rs`: [`JobListener`] (per fire and per item), [`ItemEndContext`].
//! - `error_handler.rs`: [`JobErrorHandler`], `LOG`/`THROW`/`IGNORE`, [`ErrorHandlers`].
//! - `failure.rs`: [`JobFailure`], how an item went wrong; `error.rs`: [`JobError`].

mod context;
mod error;
mod error_handler;
mod executor;
mod extensions;
mod failure;
pub(crate) mod gate;
mod kinds;
mod listener;

#[cfg(test)]
mod tests;

pub(crate) use context::{epoch_ms_to_system_time, system_time_to_epoch_ms};
pub use context::{ExecutionSource, FireInfo, ShardingContext, TaskId};
pub use error::JobError;
pub use error_handler::{
    ErrorDisposition, ErrorHandlers, IgnoreErrorHandler, JobErrorHandler, LogErrorHandler,
    ThrowErrorHandler,
};
pub use executor::{Executor, FireReport, FireRequest, ItemOutcome, ItemTiming};
pub use extensions::Extensions;
pub use failure::JobFailure;
#[cfg(feature = "http")]
pub use kinds::{
    http_props, HttpJobConfig, HttpJobError, DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT,
    HTTP_ERROR_BODY_BYTES, SHARDING_CONTEXT_HEADER,
};
pub use kinds::{DataflowJob, Job, SimpleJob, SCRIPT_STDERR_TAIL_BYTES, SCRIPT_STDOUT_TAIL_BYTES};
pub use listener::{ItemEndContext, JobListener};

/// The error a job's code returns: any error type, boxed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a job's code returns for one item.
pub type JobResult = Result<(), BoxError>;
