//! Dataflow jobs: fetch a batch of data for an item, process it, and in streaming mode repeat.

use async_trait::async_trait;

use super::{outcome_of, RunItem};
use crate::handles::Handles;
use crate::job::{BoxError, ItemOutcome, JobResult, ShardingContext};

/// A job that fetches data for its item and processes it (ElasticJob's `DataflowJob`).
///
/// Run it with [`Job::dataflow`](super::Job::dataflow), which also picks one-shot or streaming
/// mode. `fetch` and `process` of one item run one after the other on the same task; items of a
/// fire run in parallel.
///
/// ```
/// use async_trait::async_trait;
/// use shardcron_core::job::{BoxError, DataflowJob, Job, JobResult, ShardingContext};
///
/// struct Mailer;
///
/// #[async_trait]
/// impl DataflowJob for Mailer {
///     type Data = String;
///     async fn fetch(&self, ctx: &ShardingContext) -> Result<Vec<String>, BoxError> {
///         Ok(vec![format!("outbox of shard {}", ctx.item)]) // e.g. rows WHERE id % total = item
///     }
///     async fn process(&self, _ctx: &ShardingContext, mails: Vec<String>) -> JobResult {
///         for _mail in mails { /* send it */ }
///         Ok(())
///     }
/// }
///
/// let job = Job::dataflow(Mailer, false);
/// assert_eq!(job.kind(), Job::DATAFLOW);
/// ```
#[async_trait]
pub trait DataflowJob: Send + Sync + 'static {
    /// One unit of work.
    type Data: Send + 'static;

    /// The next batch for the item; empty when there is nothing (left) to do.
    async fn fetch(&self, ctx: &ShardingContext) -> Result<Vec<Self::Data>, BoxError>;

    /// Processes a non-empty batch.
    async fn process(&self, ctx: &ShardingContext, data: Vec<Self::Data>) -> JobResult;
}

/// Share one job value between several jobs or with the application.
#[async_trait]
impl<D: DataflowJob + ?Sized> DataflowJob for std::sync::Arc<D> {
    type Data = D::Data;

    async fn fetch(&self, ctx: &ShardingContext) -> Result<Vec<Self::Data>, BoxError> {
        (**self).fetch(ctx).await
    }

    async fn process(&self, ctx: &ShardingContext, data: Vec<Self::Data>) -> JobResult {
        (**self).process(ctx, data).await
    }
}

pub(super) struct DataflowRunner<D> {
    pub(super) job: D,
    pub(super) streaming: bool,
}

impl<D: DataflowJob> DataflowRunner<D> {
    /// The rounds of one item: `Ok(true)` when stopped by cancellation.
    async fn rounds(&self, ctx: &ShardingContext) -> Result<bool, BoxError> {
        loop {
            if ctx.is_cancelled() {
                return Ok(true);
            }
            let data = self.job.fetch(ctx).await?;
            if data.is_empty() {
                return Ok(false);
            }
            self.job.process(ctx, data).await?;
            if !self.streaming {
                return Ok(false);
            }
            // A fetch and process that never wait would otherwise hold the worker (and, in the
            // single-threaded simulator, everything) until the data runs out.
            tokio::task::yield_now().await;
        }
    }
}

#[async_trait]
impl<D: DataflowJob> RunItem for DataflowRunner<D> {
    async fn run(&self, ctx: ShardingContext, _handles: &Handles) -> ItemOutcome {
        match self.rounds(&ctx).await {
            Ok(true) => ItemOutcome::Cancelled,
            Ok(false) => ItemOutcome::Completed,
            Err(error) => outcome_of(Err(error), &ctx),
        }
    }
}
