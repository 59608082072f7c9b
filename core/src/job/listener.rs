//! [`JobListener`]: code run before and after each fire of a job on this instance, and as each
//! of its items starts and ends.

use std::sync::Arc;

use async_trait::async_trait;

use super::{FireInfo, FireReport, ItemOutcome, ItemTiming, ShardingContext};

/// Hooks around each fire on this instance (ElasticJob's `ElasticJobListener`).
///
/// The executor calls every listener's `before_job_executed` once per fire, in registration
/// order, before any item starts, and every `after_job_executed` once after all items ended,
/// with the report. A fire with no items on this instance calls neither (as in ElasticJob).
///
/// Listeners run inline in the fire: a slow listener delays it. A listener that panics is caught
/// and logged; the fire and the other listeners go on. Every method does nothing by default.
///
/// The per-item hooks ([`item_started`](Self::item_started), [`item_finished`](Self::item_finished))
/// are plain functions called on the fire's task between items: they are for recorders (an
/// execution trace, metrics) that hand the facts to a queue and return at once.
///
/// These are local listeners. "Once across the cluster" listeners (ElasticJob's
/// `AbstractDistributeOnceElasticJobListener`) need the registry and belong to the runtime.
#[async_trait]
pub trait JobListener: Send + Sync + 'static {
    /// Before the fire's items start.
    async fn before_job_executed(&self, fire: &FireInfo) {
        let _ = fire;
    }

    /// After all of the fire's items ended.
    async fn after_job_executed(&self, fire: &FireInfo, report: &FireReport) {
        let _ = (fire, report);
    }

    /// An item is about to start, at `started_ms` by the injected clock. Not called for an item
    /// cancelled before it started. Keep it quick: the next item waits for it.
    fn item_started(&self, fire: &FireInfo, ctx: &ShardingContext, started_ms: i64) {
        let _ = (fire, ctx, started_ms);
    }

    /// An item ended. `timing` is `None` when it never started (cancelled while waiting for a
    /// slot) or its task was lost. Keep it quick: the fire's other items wait for it.
    fn item_finished(
        &self,
        fire: &FireInfo,
        ctx: &ItemEndContext,
        outcome: &ItemOutcome,
        timing: Option<ItemTiming>,
    ) {
        let _ = (fire, ctx, outcome, timing);
    }

    /// The listener the scheduler calls for the fires of `job`, asked once when it builds the
    /// job's executor (and again when the job's config changes); `None`, the default, means
    /// this one. A recorder that keeps something per job (its metrics series, the job's name
    /// for its queue) resolves it here, so that the hooks, called for every item of every
    /// fire, find it without a lookup.
    fn for_job(&self, job: &str) -> Option<Arc<dyn JobListener>> {
        let _ = job;
        None
    }
}

/// What [`JobListener::item_finished`] is told about the item besides its outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ItemEndContext {
    /// The item.
    pub item: u32,
    /// Its fencing token in this fire.
    pub fencing_token: u64,
    /// The fire's task id (see [`TaskId`](super::TaskId)).
    pub task_id: String,
}
