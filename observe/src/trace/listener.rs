//! [`TraceListener`]: hands the executor's hooks to the writer's queue as raw facts, never
//! waiting. Turning them into rows (task ids, UUIDs, messages) is the writer's work, off the
//! fire path (see `rows.rs`).
//!
//! The hooks run on the fire path, once per fire and once per item of every job, in bursts: an
//! entry costs no allocation in the usual case. The scheduler asks for one listener per job
//! ([`JobListener::for_job`]), which keeps the job's and the instance's names, shared by its
//! entries (one reference count per job: no counter every job's entries would touch); a fire's
//! few items are carried inline; the task id, which repeats all of these, is built by the
//! writer.
//!
//! A fire of one item (the usual fire: one item per instance) takes two entries, not four: its
//! begin travels with its item's start (held by the job's listener between the two hooks,
//! which follow each other at once) and its end with its item's end (the item's outcome is the
//! fire's). Each entry on the shared queue costs a few atomic operations on cache lines that
//! both workers of a burst write; the rows are the same.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use parking_lot::Mutex;
use shardcron_core::__private::time::epoch_ms;
use shardcron_core::handles::Clock;
use shardcron_core::job::{
    ExecutionSource, FireInfo, FireReport, ItemEndContext, ItemOutcome, ItemTiming, JobListener,
    ShardingContext,
};
use shardcron_core::runtime::{SchedulerEvent, SkipReason};
use tokio::sync::mpsc;

/// How often, at most, a warning about dropped rows is logged.
const DROP_WARNING_EVERY_MS: i64 = 10_000;

/// What the listener saw, as cheap to copy as the hooks allow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TraceEvent {
    /// A fire's items are about to start (`TASK_STAGING`, `TASK_RUNNING`).
    FireBegan { fire: Fire, at_ms: i64 },
    /// An item started; `began_ms` is its fire's begin when that was not sent by itself (a
    /// one-item fire): the fire's `FireBegan` rows go first.
    ItemStarted { fire: Fire, item: u32, at_ms: i64, began_ms: Option<i64> },
    /// An item ended; `ends_fire` when it was its fire's only item, whose end is then the fire's
    /// end too (the fire's `FireEnded` row follows, at `finished_ms`, from `result`).
    ItemFinished {
        fire: Fire,
        item: u32,
        started_ms: Option<i64>,
        finished_ms: i64,
        result: ItemResult,
        ends_fire: bool,
    },
    /// All of a fire's items ended (`TASK_FINISHED`, `TASK_ERROR` or `TASK_KILLED`).
    FireEnded { fire: Fire, at_ms: i64, failures: Vec<(u32, String)>, cancelled: Vec<u32> },
    /// A fire ran nothing on `instance` (`TASK_FINISHED` with the reason, as ElasticJob
    /// records a misfire or an empty sharding).
    FireSkipped { job: String, instance: Arc<str>, fire_ms: i64, reason: String, at_ms: i64 },
}

/// What the rows say of a fire (its task id is made of these), copied without allocating.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fire {
    pub names: Arc<Names>,
    pub fire_ms: i64,
    pub source: ExecutionSource,
    pub items: Items,
}

/// The names of a fire's job and instance.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Names {
    pub job: String,
    pub instance: String,
}

/// How many items a fire carries without an allocation.
const INLINE_ITEMS: usize = 4;

/// A fire's items on this instance, ascending: inline when they are few, as they usually are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Items {
    Inline { len: u8, items: [u32; INLINE_ITEMS] },
    Heap(Box<[u32]>),
}

impl Items {
    pub fn of(items: &[u32]) -> Items {
        if items.len() <= INLINE_ITEMS {
            let mut inline = [0; INLINE_ITEMS];
            inline[..items.len()].copy_from_slice(items);
            // At most INLINE_ITEMS: fits.
            Items::Inline { len: items.len() as u8, items: inline }
        } else {
            Items::Heap(items.into())
        }
    }

    pub fn as_slice(&self) -> &[u32] {
        match self {
            Items::Inline { len, items } => &items[..usize::from(*len)],
            Items::Heap(items) => items,
        }
    }
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
/// count queue entries (one per hook call, but none for the begin and the end of a fire of one
/// item, which travel with its item's entries).
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
    queue: Arc<Queue>,
}

/// The queue's end shared by the listener and its per-job listeners.
struct Queue {
    sender: mpsc::Sender<TraceEvent>,
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
        TraceListener { queue: Arc::new(Queue { sender: queue, counters, clock }) }
    }

    /// Records a fire of `instance` that ran nothing.
    pub(crate) fn skipped(&self, instance: &Arc<str>, event: &SchedulerEvent) {
        if let SchedulerEvent::Skipped { job, fire_ms, reason } = event {
            self.queue.enqueue(TraceEvent::FireSkipped {
                job: job.clone(),
                instance: instance.clone(),
                fire_ms: *fire_ms,
                reason: skip_message(reason),
                at_ms: self.queue.now_ms(),
            });
        }
    }

    /// The listener of `job`'s fires; `holds` when it is the job's own (asked once, called for
    /// every fire), which may hold a fire's begin for its item's start.
    fn job(&self, job: &str, holds: bool) -> JobTrace {
        JobTrace {
            queue: self.queue.clone(),
            job: job.to_owned(),
            names: OnceLock::new(),
            holds,
            held: Mutex::new(None),
        }
    }
}

impl Queue {
    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    fn enqueue(&self, event: TraceEvent) {
        match self.sender.try_send(event) {
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

/// The [`TraceListener`] of one job, as the scheduler calls it ([`JobListener::for_job`]): the
/// job's name and its instance's id made shared strings once, not copied at every entry.
struct JobTrace {
    queue: Arc<Queue>,
    job: String,
    /// The job's name and the instance id of its first fire (every fire of an executor has the
    /// same: it belongs to one scheduler).
    names: OnceLock<Arc<Names>>,
    /// Whether a one-item fire's begin waits in `held` for its item's start: only in the job's
    /// own listener (the one [`JobListener::for_job`] gives), which sees both hooks.
    holds: bool,
    /// A one-item fire's begin, until its item starts (or ends without starting). Another fire
    /// beginning meanwhile (fires of one job may overlap: a failover run beside a scheduled one)
    /// sends it on its own first.
    held: Mutex<Option<(Fire, i64)>>,
}

/// Whether `outcome` of the only item of `fire` is the whole fire's end, as the rows tell it:
/// `FireEnded`'s state and message come from the item's outcome alone. An outcome of a kind
/// added later ends the fire in `after_job_executed`, as before.
fn ends_with_its_item(fire: &FireInfo, outcome: &ItemOutcome) -> bool {
    fire.items.len() == 1
        && matches!(
            outcome,
            ItemOutcome::Completed | ItemOutcome::Failed(_) | ItemOutcome::Cancelled
        )
}

/// Whether `held` is the begin of `fire` (a fire of one job is its time, its source and its
/// items).
fn is_begin_of(held: &Fire, fire: &FireInfo) -> bool {
    held.fire_ms == epoch_ms(fire.fire_time)
        && held.source == fire.source
        && held.items.as_slice() == fire.items.as_slice()
}

impl JobTrace {
    /// `fire`, which is one of this job's fires on this listener's scheduler (the contract of
    /// `for_job`, and an executor belongs to one scheduler): its job's and instance's names are
    /// this listener's, not compared at every entry.
    fn fire(&self, fire: &FireInfo) -> Fire {
        let names = self.names.get_or_init(|| {
            Arc::new(Names { job: self.job.clone(), instance: fire.instance.clone() })
        });
        debug_assert_eq!((&names.job, &names.instance), (&fire.job_name, &fire.instance));
        Fire {
            names: names.clone(),
            fire_ms: epoch_ms(fire.fire_time),
            source: fire.source,
            items: Items::of(&fire.items),
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

/// Called directly (not through [`JobListener::for_job`]), the listener makes the job's listener
/// for each call.
#[async_trait]
impl JobListener for TraceListener {
    async fn before_job_executed(&self, fire: &FireInfo) {
        self.job(&fire.job_name, false).before_job_executed(fire).await;
    }

    async fn after_job_executed(&self, fire: &FireInfo, report: &FireReport) {
        self.job(&fire.job_name, false).after_job_executed(fire, report).await;
    }

    fn item_started(&self, fire: &FireInfo, ctx: &ShardingContext, started_ms: i64) {
        self.job(&fire.job_name, false).item_started(fire, ctx, started_ms);
    }

    fn item_finished(
        &self,
        fire: &FireInfo,
        end: &ItemEndContext,
        outcome: &ItemOutcome,
        timing: Option<ItemTiming>,
    ) {
        self.job(&fire.job_name, false).item_finished(fire, end, outcome, timing);
    }

    fn for_job(&self, job: &str) -> Option<Arc<dyn JobListener>> {
        Some(Arc::new(self.job(job, true)))
    }
}

#[async_trait]
impl JobListener for JobTrace {
    async fn before_job_executed(&self, fire: &FireInfo) {
        let at_ms = self.queue.now_ms();
        let fire = self.fire(fire);
        if !self.holds || fire.items.as_slice().len() != 1 {
            self.queue.enqueue(TraceEvent::FireBegan { fire, at_ms });
            return;
        }
        let earlier = self.held.lock().replace((fire, at_ms));
        if let Some((fire, at_ms)) = earlier {
            self.queue.enqueue(TraceEvent::FireBegan { fire, at_ms });
        }
    }

    async fn after_job_executed(&self, fire: &FireInfo, report: &FireReport) {
        let only_item = report.items.iter().next().filter(|_| report.items.len() == 1);
        if only_item.is_some_and(|(_, outcome)| ends_with_its_item(fire, outcome)) {
            return; // Its item's end said it (`ItemFinished::ends_fire`).
        }
        let failures = report
            .items
            .iter()
            .filter_map(|(item, outcome)| match outcome {
                ItemOutcome::Failed(failure) => Some((*item, failure.to_string())),
                _ => None,
            })
            .collect();
        self.queue.enqueue(TraceEvent::FireEnded {
            fire: self.fire(fire),
            at_ms: report.finished_ms,
            failures,
            cancelled: report.cancelled_items(),
        });
    }

    fn item_started(&self, fire: &FireInfo, ctx: &ShardingContext, started_ms: i64) {
        let held = if self.holds && fire.items.len() == 1 {
            let mut held = self.held.lock();
            held.take_if(|(held, _)| is_begin_of(held, fire))
        } else {
            None
        };
        let (fire, began_ms) = match held {
            Some((fire, began_ms)) => (fire, Some(began_ms)),
            None => (self.fire(fire), None),
        };
        self.queue.enqueue(TraceEvent::ItemStarted {
            fire,
            item: ctx.item,
            at_ms: started_ms,
            began_ms,
        });
    }

    fn item_finished(
        &self,
        fire: &FireInfo,
        end: &ItemEndContext,
        outcome: &ItemOutcome,
        timing: Option<ItemTiming>,
    ) {
        // An item that never started: its fire's begin may still be held.
        if self.holds && timing.is_none() {
            let held = self.held.lock().take_if(|(held, _)| is_begin_of(held, fire));
            if let Some((fire, at_ms)) = held {
                self.queue.enqueue(TraceEvent::FireBegan { fire, at_ms });
            }
        }
        let result = match (outcome, timing) {
            (ItemOutcome::Completed, _) => ItemResult::Succeeded,
            (ItemOutcome::Failed(failure), _) => ItemResult::Failed(failure.to_string()),
            (ItemOutcome::Cancelled, Some(_)) => ItemResult::Cancelled,
            (ItemOutcome::Cancelled, None) => ItemResult::NeverStarted,
            (other, _) => ItemResult::Failed(format!("{other:?}")),
        };
        self.queue.enqueue(TraceEvent::ItemFinished {
            fire: self.fire(fire),
            item: end.item,
            started_ms: timing.map(|t| t.started_ms),
            finished_ms: timing.map_or_else(|| self.queue.now_ms(), |t| t.finished_ms),
            result,
            ends_fire: ends_with_its_item(fire, outcome),
        });
    }
}
