//! [`TraceListener`]: hands the executor's hooks to the writer's queue as raw facts, never
//! waiting. Turning them into rows (task ids, UUIDs, messages) is the writer's work, off the
//! fire path (see `rows.rs`).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use shardcron_core::handles::Clock;
use shardcron_core::job::{
    FireInfo, FireReport, ItemEndContext, ItemOutcome, ItemTiming, JobListener, ShardingContext,
};
use shardcron_core::runtime::{SchedulerEvent, SkipReason};
use tokio::sync::mpsc;

/// How often, at most, a warning about dropped rows is logged.
const DROP_WARNING_EVERY_MS: i64 = 10_000;

/// What the listener saw, as cheap to copy as the hooks allow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TraceEvent {
    /// A fire's items are about to start (`TASK_STAGING`, `TASK_RUNNING`).
    FireBegan { fire: FireInfo, at_ms: i64 },
    /// An item started.
    ItemStarted { task_id: String, item: u32, at_ms: i64 },
    /// An item ended.
    ItemFinished {
        task_id: String,
        item: u32,
        started_ms: Option<i64>,
        finished_ms: i64,
        result: ItemResult,
    },
    /// All of a fire's items ended (`TASK_FINISHED`, `TASK_ERROR` or `TASK_KILLED`).
    FireEnded { fire: FireInfo, at_ms: i64, failures: Vec<(u32, String)>, cancelled: Vec<u32> },
    /// A fire ran nothing on `instance` (`TASK_FINISHED` with the reason, as ElasticJob
    /// records a misfire or an empty sharding).
    FireSkipped { job: String, instance: Arc<str>, fire_ms: i64, reason: String, at_ms: i64 },
}

/// How an item ended, for its row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ItemResult {
    Succeeded,
    Failed(String),
    /// Asked to stop while it ran.
    Cancelled,
    /// Cancelled before it started.
    NeverStarted,
}

/// Counters shared by the listener, the writer and the [`Trace`](super::Trace) handle; they
/// count queue entries (one per hook call).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub enqueued: AtomicU64,
    pub dropped: AtomicU64,
    pub written: AtomicU64,
    /// Entries whose rows the database refused (bad data): given up, not retried.
    pub rejected: AtomicU64,
    last_drop_warning_ms: AtomicI64,
}

impl Counters {
    /// Entries handed to the writer and since written or given up.
    pub fn processed(&self) -> u64 {
        self.written.load(Ordering::SeqCst) + self.rejected.load(Ordering::SeqCst)
    }
}

/// The [`JobListener`] of a [`Trace`](super::Trace): one execution row per item (inserted as it
/// starts, completed as it ends), status rows per fire (`TASK_STAGING`, `TASK_RUNNING`, then
/// `TASK_FINISHED`, `TASK_ERROR` or `TASK_KILLED`).
///
/// Each hook puts one entry on a bounded queue with `try_send`: when the queue is full (the
/// database is slow or down) the entry is dropped and counted; a fire never waits for the trace.
///
/// The times it adds (a fire's begin, a skip, an item cancelled before it started) are read from
/// the clock it was given ([`TraceConfig::clock`](super::TraceConfig::clock)): the scheduler's,
/// so that rows agree with the scheduler's own times, also under the simulator's virtual clock.
pub struct TraceListener {
    queue: mpsc::Sender<TraceEvent>,
    counters: Arc<Counters>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for TraceListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceListener").finish_non_exhaustive()
    }
}

impl TraceListener {
    pub(crate) fn new(
        queue: mpsc::Sender<TraceEvent>,
        counters: Arc<Counters>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        TraceListener { queue, counters, clock }
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Records a fire of `instance` that ran nothing.
    pub(crate) fn skipped(&self, instance: &Arc<str>, event: &SchedulerEvent) {
        if let SchedulerEvent::Skipped { job, fire_ms, reason } = event {
            self.enqueue(TraceEvent::FireSkipped {
                job: job.clone(),
                instance: instance.clone(),
                fire_ms: *fire_ms,
                reason: skip_message(reason),
                at_ms: self.now_ms(),
            });
        }
    }

    fn enqueue(&self, event: TraceEvent) {
        match self.queue.try_send(event) {
            Ok(()) => {
                self.counters.enqueued.fetch_add(1, Ordering::SeqCst);
            }
            Err(_) => self.dropped(),
        }
    }

    fn dropped(&self) {
        let total = self.counters.dropped.fetch_add(1, Ordering::SeqCst) + 1;
        metrics::counter!("shardcron_trace_dropped_total").increment(1);
        let now = self.now_ms();
        let last = self.counters.last_drop_warning_ms.load(Ordering::Relaxed);
        if now - last >= DROP_WARNING_EVERY_MS
            && self
                .counters
                .last_drop_warning_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                dropped_total = total,
                "execution trace queue full (database slow or unreachable): rows dropped; fires \
                 are not affected"
            );
        }
    }
}

/// Why a fire ran nothing, for the status row's message.
fn skip_message(reason: &SkipReason) -> String {
    match reason {
        SkipReason::Disconnected => "Skipped: the registry link was down.".into(),
        SkipReason::JobDisabled => "Skipped: the job is disabled.".into(),
        SkipReason::ServerDisabled => "Skipped: this server is disabled.".into(),
        SkipReason::NoItems => "Skipped: sharding item for this instance is empty.".into(),
        SkipReason::Misfire => "Skipped: the previous fire is still running; its items are \
                                marked misfired and run once it completes (if misfire is on)."
            .into(),
        SkipReason::ClockSkew { diff_ms } => format!(
            "Skipped: this host's clock is {diff_ms} ms off the registry's (max time diff exceeded)."
        ),
        SkipReason::ShardingTimeout => "Skipped: the reshard did not complete in time.".into(),
        SkipReason::Late => "Skipped: a later fire was already due.".into(),
        SkipReason::ShuttingDown => "Skipped: the job was stopping here.".into(),
        SkipReason::RegistryError(error) => format!("Skipped: a registry operation failed: {error}"),
        other => format!("Skipped: {}.", other.code()),
    }
}

#[async_trait]
impl JobListener for TraceListener {
    async fn before_job_executed(&self, fire: &FireInfo) {
        self.enqueue(TraceEvent::FireBegan { fire: fire.clone(), at_ms: self.now_ms() });
    }

    async fn after_job_executed(&self, fire: &FireInfo, report: &FireReport) {
        let failures = report
            .items
            .iter()
            .filter_map(|(item, outcome)| match outcome {
                ItemOutcome::Failed(failure) => Some((*item, failure.to_string())),
                _ => None,
            })
            .collect();
        self.enqueue(TraceEvent::FireEnded {
            fire: fire.clone(),
            at_ms: report.finished_ms,
            failures,
            cancelled: report.cancelled_items(),
        });
    }

    fn item_started(&self, _fire: &FireInfo, ctx: &ShardingContext, started_ms: i64) {
        let task_id = ctx.task_id.clone();
        self.enqueue(TraceEvent::ItemStarted { task_id, item: ctx.item, at_ms: started_ms });
    }

    fn item_finished(
        &self,
        _fire: &FireInfo,
        end: &ItemEndContext,
        outcome: &ItemOutcome,
        timing: Option<ItemTiming>,
    ) {
        let result = match (outcome, timing) {
            (ItemOutcome::Completed, _) => ItemResult::Succeeded,
            (ItemOutcome::Failed(failure), _) => ItemResult::Failed(failure.to_string()),
            (ItemOutcome::Cancelled, Some(_)) => ItemResult::Cancelled,
            (ItemOutcome::Cancelled, None) => ItemResult::NeverStarted,
            (other, _) => ItemResult::Failed(format!("{other:?}")),
        };
        self.enqueue(TraceEvent::ItemFinished {
            task_id: end.task_id.clone(),
            item: end.item,
            started_ms: timing.map(|t| t.started_ms),
            finished_ms: timing.map_or_else(|| self.now_ms(), |t| t.finished_ms),
            result,
        });
    }
}
