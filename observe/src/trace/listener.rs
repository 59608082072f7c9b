//! [`TraceListener`]: turns the executor's hooks into trace rows and queues them, never waiting.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use shardcron_core::job::{
    FireInfo, FireReport, ItemEndContext, ItemOutcome, ItemTiming, JobListener, ShardingContext,
};
use tokio::sync::mpsc;

use super::record::{
    execution_source, ip_of, timestamp, truncate, ExecutionRecord, StatusRecord, TraceRecord,
    MAX_FAILURE_CAUSE_CHARS,
};

/// How often, at most, a warning about dropped rows is logged.
const DROP_WARNING_EVERY_MS: i64 = 10_000;

/// Counters shared by the listener, the writer and the [`Trace`](super::Trace) handle.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub enqueued: AtomicU64,
    pub dropped: AtomicU64,
    pub written: AtomicU64,
    /// Rows the database refused (bad data): given up, not retried.
    pub rejected: AtomicU64,
    last_drop_warning_ms: AtomicI64,
}

impl Counters {
    /// Rows handed to the writer and since written or given up.
    pub fn processed(&self) -> u64 {
        self.written.load(Ordering::SeqCst) + self.rejected.load(Ordering::SeqCst)
    }
}

/// The [`JobListener`] of a [`Trace`](super::Trace): one execution row per item (inserted as it
/// starts, completed as it ends), status rows per fire (`TASK_STAGING`, `TASK_RUNNING`, then
/// `TASK_FINISHED`, `TASK_ERROR` or `TASK_KILLED`).
///
/// Rows go to a bounded queue with `try_send`: when the queue is full (the database is slow or
/// down) the row is dropped and counted; a fire never waits for the trace.
pub struct TraceListener {
    queue: mpsc::Sender<TraceRecord>,
    hostname: String,
    counters: Arc<Counters>,
    /// Rows of items that started and have not ended yet, by (task id, item).
    open: Mutex<HashMap<(String, u32), ExecutionRecord>>,
}

impl std::fmt::Debug for TraceListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceListener").field("hostname", &self.hostname).finish_non_exhaustive()
    }
}

impl TraceListener {
    pub(crate) fn new(
        queue: mpsc::Sender<TraceRecord>,
        hostname: String,
        counters: Arc<Counters>,
    ) -> Self {
        TraceListener { queue, hostname, counters, open: Mutex::default() }
    }

    fn enqueue(&self, record: TraceRecord) {
        match self.queue.try_send(record) {
            Ok(()) => {
                self.counters.enqueued.fetch_add(1, Ordering::SeqCst);
            }
            Err(_) => self.dropped(),
        }
        metrics::gauge!("shardcron_trace_queue_depth")
            .set((self.queue.max_capacity() - self.queue.capacity()) as f64);
    }

    fn dropped(&self) {
        let total = self.counters.dropped.fetch_add(1, Ordering::SeqCst) + 1;
        metrics::counter!("shardcron_trace_dropped_total").increment(1);
        let now = now_ms();
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

    fn status(&self, fire: &FireInfo, state: &'static str, message: String, at_ms: i64) {
        let items: Vec<String> = fire.items.iter().map(u32::to_string).collect();
        self.enqueue(TraceRecord::Status(StatusRecord {
            id: uuid::Uuid::new_v4().to_string(),
            job_name: truncate(&fire.job_name, 100),
            original_task_id: String::new(),
            task_id: truncate(&fire.task_id().to_string(), 255),
            slave_id: truncate(ip_of(&fire.instance), 50),
            source: "LITE_EXECUTOR",
            execution_type: fire.source.task_type(),
            sharding_item: truncate(&items.join(","), 100),
            state,
            message: truncate(&message, MAX_FAILURE_CAUSE_CHARS),
            creation_time: timestamp(at_ms),
        }));
    }

    fn new_row(&self, fire: &FireInfo, task_id: &str, item: u32, at_ms: i64) -> ExecutionRecord {
        ExecutionRecord {
            id: uuid::Uuid::new_v4().to_string(),
            // Cut to the columns' sizes: PostgreSQL refuses longer values.
            job_name: truncate(&fire.job_name, 100),
            task_id: truncate(task_id, 255),
            hostname: truncate(&self.hostname, 255),
            ip: truncate(ip_of(&fire.instance), 50),
            sharding_item: i32::try_from(item).unwrap_or(i32::MAX),
            execution_source: execution_source(fire.source),
            failure_cause: None,
            is_success: false,
            start_time: timestamp(at_ms),
            complete_time: None,
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[async_trait]
impl JobListener for TraceListener {
    async fn before_job_executed(&self, fire: &FireInfo) {
        let now = now_ms();
        let begin = format!("Job '{}' execute begin.", fire.job_name);
        self.status(fire, "TASK_STAGING", begin, now);
        self.status(fire, "TASK_RUNNING", String::new(), now);
    }

    async fn after_job_executed(&self, fire: &FireInfo, report: &FireReport) {
        let failed: Vec<String> = report
            .items
            .iter()
            .filter_map(|(item, outcome)| match outcome {
                ItemOutcome::Failed(failure) => Some(format!("item {item}: {failure}")),
                _ => None,
            })
            .collect();
        let cancelled = report.cancelled_items();
        let (state, message) = if !failed.is_empty() {
            ("TASK_ERROR", truncate(&failed.join("\n"), MAX_FAILURE_CAUSE_CHARS))
        } else if !cancelled.is_empty() {
            ("TASK_KILLED", format!("items cancelled: {cancelled:?}"))
        } else {
            ("TASK_FINISHED", String::new())
        };
        self.status(fire, state, message, report.finished_ms);
    }

    fn item_started(&self, fire: &FireInfo, ctx: &ShardingContext, started_ms: i64) {
        let row = self.new_row(fire, &ctx.task_id, ctx.item, started_ms);
        self.open.lock().insert((ctx.task_id.clone(), ctx.item), row.clone());
        self.enqueue(TraceRecord::ExecutionStarted(row));
    }

    fn item_finished(
        &self,
        fire: &FireInfo,
        end: &ItemEndContext,
        outcome: &ItemOutcome,
        timing: Option<ItemTiming>,
    ) {
        let opened = self.open.lock().remove(&(end.task_id.clone(), end.item));
        let finished_ms = timing.map_or_else(now_ms, |t| t.finished_ms);
        let mut row = opened.unwrap_or_else(|| {
            self.new_row(fire, &end.task_id, end.item, timing.map_or(finished_ms, |t| t.started_ms))
        });
        row.complete_time = Some(timestamp(finished_ms));
        match outcome {
            ItemOutcome::Completed => row.is_success = true,
            ItemOutcome::Failed(failure) => {
                row.failure_cause = Some(truncate(&failure.to_string(), MAX_FAILURE_CAUSE_CHARS));
            }
            ItemOutcome::Cancelled => {
                let cause = if timing.is_some() {
                    "cancelled: the item was asked to stop (session lost, shutdown or stop)"
                } else {
                    "cancelled before it started"
                };
                row.failure_cause = Some(cause.to_owned());
            }
        }
        self.enqueue(TraceRecord::ExecutionFinished(row));
    }
}
