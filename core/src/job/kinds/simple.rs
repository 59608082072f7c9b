//! Simple jobs: [`SimpleJob`] implementations, async closures and blocking closures.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::oneshot;

use super::{outcome_of, RunItem};
use crate::handles::Handles;
use crate::job::failure::panic_message;
use crate::job::{ItemOutcome, JobFailure, JobResult, ShardingContext};

/// A job that runs each of its items with one call (ElasticJob's `SimpleJob`).
///
/// ```
/// use async_trait::async_trait;
/// use shardcron_core::job::{Job, JobResult, ShardingContext, SimpleJob};
///
/// struct Archive;
///
/// #[async_trait]
/// impl SimpleJob for Archive {
///     async fn execute(&self, ctx: &ShardingContext) -> JobResult {
///         if ctx.item_parameter.is_empty() {
///             return Err(format!("item {} has no shardingItemParameters entry", ctx.item).into());
///         }
///         Ok(())
///     }
/// }
///
/// let job = Job::simple(Archive);
/// ```
#[async_trait]
pub trait SimpleJob: Send + Sync + 'static {
    /// Runs one item. An error fails the item (and goes to the job's error handler), unless the
    /// item's cancellation fired first.
    async fn execute(&self, ctx: &ShardingContext) -> JobResult;
}

/// Share one job value between several jobs or with the application.
#[async_trait]
impl<T: SimpleJob + ?Sized> SimpleJob for Arc<T> {
    async fn execute(&self, ctx: &ShardingContext) -> JobResult {
        (**self).execute(ctx).await
    }
}

/// [`Job::from_fn`](super::Job::from_fn)'s closure as a [`SimpleJob`].
pub(super) struct FnJob<F>(pub(super) F);

#[async_trait]
impl<F, Fut> SimpleJob for FnJob<F>
where
    F: Fn(ShardingContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = JobResult> + Send + 'static,
{
    async fn execute(&self, ctx: &ShardingContext) -> JobResult {
        (self.0)(ctx.clone()).await
    }
}

/// Runs a [`SimpleJob`] on the item's task.
pub(super) struct SimpleRunner<J>(pub(super) J);

#[async_trait]
impl<J: SimpleJob> RunItem for SimpleRunner<J> {
    async fn run(&self, ctx: ShardingContext, _handles: &Handles) -> ItemOutcome {
        let result = self.0.execute(&ctx).await;
        outcome_of(result, &ctx)
    }
}

type BlockingFn = dyn Fn(ShardingContext) -> JobResult + Send + Sync + 'static;

/// Runs a blocking closure through the spawner's blocking pool.
pub(super) struct BlockingRunner(pub(super) Arc<BlockingFn>);

#[async_trait]
impl RunItem for BlockingRunner {
    async fn run(&self, ctx: ShardingContext, handles: &Handles) -> ItemOutcome {
        let (sender, receiver) = oneshot::channel();
        let f = Arc::clone(&self.0);
        let job_ctx = ctx.clone();
        handles.spawner.spawn_blocking(Box::new(move || {
            // Caught here, on the blocking thread, so the message reaches the report; a panic
            // escaping to the pool would only show as a dropped sender.
            let result = catch_unwind(AssertUnwindSafe(|| f(job_ctx)));
            let _ = sender.send(result);
        }));
        match receiver.await {
            Ok(Ok(result)) => outcome_of(result, &ctx),
            Ok(Err(payload)) => ItemOutcome::Failed(JobFailure::Panicked(panic_message(&*payload))),
            Err(_) => ItemOutcome::Failed(JobFailure::Lost(
                "the blocking task was dropped before it ran to its end".to_string(),
            )),
        }
    }
}
