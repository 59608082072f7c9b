//! [`Job`]: a job of any kind as the runtime holds it, and the constructors of each kind.
//!
//! Every kind is turned into one private [`RunItem`]: "run this item with this context and
//! these handles, tell me how it ended". The executor knows nothing else about kinds.

mod dataflow;
#[cfg(feature = "http")]
mod http;
mod script;
mod simple;

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;

pub use dataflow::DataflowJob;
#[cfg(feature = "http")]
pub use http::{
    props as http_props, HttpJobConfig, HttpJobError, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_READ_TIMEOUT, HTTP_ERROR_BODY_BYTES, SHARDING_CONTEXT_HEADER,
};
pub use script::{SCRIPT_STDERR_TAIL_BYTES, SCRIPT_STDOUT_TAIL_BYTES};
pub use simple::SimpleJob;

use super::failure::error_chain;
use super::{ItemOutcome, JobFailure, JobResult, ShardingContext};
use crate::handles::Handles;

/// Runs one item of one fire. Implemented by each kind's adapter.
#[async_trait]
pub(crate) trait RunItem: Send + Sync + 'static {
    /// Runs the item to its end. May panic (the executor catches it).
    async fn run(&self, ctx: ShardingContext, handles: &Handles) -> ItemOutcome;
}

/// A job as the runtime holds it: its code, kind erased; cheap to clone (one `Arc`).
///
/// ```
/// use shardcron_core::job::Job;
/// let job = Job::from_fn(|ctx| async move {
///     println!("item {} of {}", ctx.item, ctx.job_name);
///     Ok(())
/// });
/// assert_eq!(job.kind(), Job::SIMPLE);
/// ```
#[derive(Clone)]
pub struct Job {
    kind: &'static str,
    runner: Arc<dyn RunItem>,
}

impl Job {
    /// [`kind`](Self::kind) of simple jobs (trait objects, async and blocking closures).
    pub const SIMPLE: &'static str = "SIMPLE";
    /// [`kind`](Self::kind) of dataflow jobs.
    pub const DATAFLOW: &'static str = "DATAFLOW";
    /// [`kind`](Self::kind) of script jobs.
    pub const SCRIPT: &'static str = "SCRIPT";
    /// [`kind`](Self::kind) of HTTP jobs.
    pub const HTTP: &'static str = "HTTP";

    /// A simple job from a [`SimpleJob`] implementation.
    pub fn simple(job: impl SimpleJob) -> Job {
        Job::new(Self::SIMPLE, simple::SimpleRunner(job))
    }

    /// A simple job from an async closure. The closure gets its own copy of the context.
    pub fn from_fn<F, Fut>(f: F) -> Job
    where
        F: Fn(ShardingContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        Job::simple(simple::FnJob(f))
    }

    /// A simple job from blocking code (sync I/O, CPU-heavy work). Each item runs through
    /// [`Spawner::spawn_blocking`](crate::handles::Spawner::spawn_blocking), off the async
    /// worker threads; a panic in it is caught and reported like any other.
    pub fn blocking_fn<F>(f: F) -> Job
    where
        F: Fn(ShardingContext) -> JobResult + Send + Sync + 'static,
    {
        Job::new(Self::SIMPLE, simple::BlockingRunner(Arc::new(f)))
    }

    /// A dataflow job: `fetch` a batch for the item, then `process` it.
    ///
    /// - `streaming == false`: one round; `process` is skipped when `fetch` returns nothing.
    /// - `streaming == true` (ElasticJob's `streaming.process`): rounds until `fetch` returns
    ///   nothing (the item completes) or the item's cancellation fires (checked before each
    ///   fetch, so a fetched batch is always processed; the item is reported cancelled).
    pub fn dataflow<D: DataflowJob>(job: D, streaming: bool) -> Job {
        Job::new(Self::DATAFLOW, dataflow::DataflowRunner { job, streaming })
    }

    /// A script job: runs `program` with `args` and then the item's [`ShardingContext`] as JSON
    /// (the last argument), directly, never through a shell, so nothing in the context can be
    /// interpreted as shell syntax.
    ///
    /// Standard input is empty; standard output and error are captured (their last bytes are
    /// logged at debug level). Exit status 0 completes the item; anything else fails it with
    /// [`JobFailure::Script`] (status, signal, tail of stderr); a program that cannot be started
    /// fails it with [`JobFailure::ScriptLaunch`]. When the item's cancellation fires, the
    /// process is killed and the item reported cancelled.
    ///
    /// Needs a tokio runtime with I/O enabled; the simulator does not run script jobs.
    pub fn script(program: impl Into<String>, args: Vec<String>) -> Job {
        Job::new(Self::SCRIPT, script::ScriptRunner { program: program.into(), args })
    }

    /// An HTTP job (feature `http`): one request per item, with the item's context as JSON in
    /// the `shardingContext` header. The item completes when a response with a status below 400
    /// was read to its end; a status of 400 or above fails it with [`JobFailure::Http`] (unless
    /// [`HttpJobConfig::fail_on_error_status`] is off), and so does a connection that cannot be
    /// made or a response that does not come within the timeouts. When the item's cancellation
    /// fires, the request is aborted (its connection closed) and the item reported cancelled.
    ///
    /// Fails only when `config` is unusable (method, URI) or no HTTP client can be built.
    #[cfg(feature = "http")]
    pub fn http(config: HttpJobConfig) -> Result<Job, HttpJobError> {
        Ok(Job::new(Self::HTTP, http::HttpRunner::new(config)?))
    }

    /// `"SIMPLE"`, `"DATAFLOW"`, `"SCRIPT"` or `"HTTP"` ([`Job::SIMPLE`], ...).
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    fn new(kind: &'static str, runner: impl RunItem) -> Job {
        Job { kind, runner: Arc::new(runner) }
    }

    pub(crate) fn runner(&self) -> &Arc<dyn RunItem> {
        &self.runner
    }
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job").field("kind", &self.kind).finish_non_exhaustive()
    }
}

/// The outcome of job code that returned `result` for `ctx`. An error after the item's
/// cancellation fired is the job giving up as asked: cancelled, not failed.
fn outcome_of(result: JobResult, ctx: &ShardingContext) -> ItemOutcome {
    match result {
        Ok(()) => ItemOutcome::Completed,
        Err(error) if ctx.is_cancelled() => {
            tracing::debug!(error = %error_chain(&*error), "item stopped after cancellation");
            ItemOutcome::Cancelled
        }
        Err(error) => ItemOutcome::Failed(JobFailure::Error(error_chain(&*error))),
    }
}
