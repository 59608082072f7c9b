//! The trace's background task: takes rows off the queue in batches and writes them, connecting
//! (and creating the schema) first, reconnecting after failures, and removing old rows.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use shardcron_core::handles::Clock;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::listener::Counters;
use super::listener::TraceEvent;
use super::record::timestamp;
use super::rows::RowMaker;
use super::store::{is_transient, Store, Target};

/// How long one write may take before the database counts as unreachable.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// What the writer needs.
pub(crate) struct Writer {
    pub rows: RowMaker,
    pub target: Target,
    pub queue: mpsc::Receiver<TraceEvent>,
    pub counters: Arc<Counters>,
    pub batch_size: usize,
    pub linger: Duration,
    pub retry_delay: Duration,
    pub retention: Option<Duration>,
    pub purge_every: Duration,
    /// Where "now" comes from for the retention cut-off (the scheduler's clock).
    pub clock: Arc<dyn Clock>,
    /// Set to true to stop: what is queued is written once more, then the task ends.
    pub stop: watch::Receiver<bool>,
    /// The open store, shared with the [`Trace`](super::Trace) handle (readiness).
    pub store: Arc<Mutex<Option<Store>>>,
    /// The last connection or write error, for [`Trace::ready`](super::Trace::ready).
    pub last_error: Arc<Mutex<Option<String>>>,
}

impl Writer {
    pub async fn run(mut self) {
        let mut pending: Vec<TraceEvent> = Vec::new();
        let mut next_purge = Instant::now();
        let mut failing_since: Option<Instant> = None;
        let mut stop_seen = false;
        loop {
            let stopping = stop_seen || *self.stop.borrow();
            // Connect (and create the schema) before the first row, so that readiness and a
            // bad database show at start, not at the first fire.
            if pending.is_empty() && !stopping && self.store.lock().is_none() {
                if self.open(&mut failing_since).await.is_none() && !self.pause().await {
                    stop_seen = true;
                }
                continue;
            }
            if let (Some(retention), false) = (self.retention, stopping) {
                if Instant::now() >= next_purge && self.store.lock().is_some() {
                    next_purge = Instant::now() + self.purge_every;
                    self.purge(retention).await;
                }
            }
            if pending.is_empty() {
                if stopping {
                    while let Ok(record) = self.queue.try_recv() {
                        pending.push(record);
                    }
                    if pending.is_empty() {
                        break;
                    }
                } else {
                    tokio::select! {
                        biased;
                        changed = self.stop.changed() => {
                            // A dropped sender (every handle gone) stops the writer too.
                            stop_seen = changed.is_err() || *self.stop.borrow();
                            continue;
                        }
                        received = self.queue.recv_many(&mut pending, self.batch_size) => {
                            if received == 0 {
                                break;
                            }
                            self.linger(&mut pending).await;
                        }
                        () = tokio::time::sleep_until(next_purge), if self.retention.is_some() => continue,
                    }
                }
            }
            metrics::gauge!("shardcron_trace_queue_depth").set(self.queue.len() as f64);
            let Some(store) = self.open(&mut failing_since).await else {
                if stopping || !self.pause().await {
                    break;
                }
                continue;
            };
            let rows = self.rows.rows(&pending);
            match tokio::time::timeout(WRITE_TIMEOUT, store.write(rows)).await {
                Ok(Ok(())) => {
                    self.written(pending.len());
                    pending.clear();
                    if failing_since.take().is_some() {
                        tracing::info!("execution trace database reachable again; writing resumed");
                    }
                }
                Ok(Err(error)) if !is_transient(&error) => {
                    // The database refuses the rows themselves: write them one by one so that
                    // one bad row does not cost the others.
                    tracing::warn!(error = %error, "execution trace batch refused; retrying row by row");
                    for event in pending.drain(..) {
                        let record = self.rows.rows(std::slice::from_ref(&event));
                        match store.write(record.clone()).await {
                            Ok(()) => self.written(1),
                            Err(error) => {
                                self.counters.rejected.fetch_add(1, Ordering::SeqCst);
                                metrics::counter!("shardcron_trace_rejected_total").increment(1);
                                tracing::warn!(error = %error, row = ?record, "execution trace row refused by the database; dropped");
                            }
                        }
                    }
                }
                failed => {
                    let message = match failed {
                        Ok(Err(error)) => error.to_string(),
                        _ => format!("a write took longer than {WRITE_TIMEOUT:?}"),
                    };
                    self.failed(&message, &mut failing_since);
                    if stopping || !self.pause().await {
                        break;
                    }
                }
            }
        }
        if !pending.is_empty() {
            tracing::warn!(rows = pending.len(), "execution trace stopped with rows unwritten");
        }
        let store = self.store.lock().take();
        if let Some(store) = store {
            store.close().await;
        }
    }

    /// Waits out the linger, then takes what came meanwhile, up to a batch. It does not
    /// receive while it waits: every receive would wake this task, once per row of the burst.
    async fn linger(&mut self, pending: &mut Vec<TraceEvent>) {
        if self.linger.is_zero() || pending.len() >= self.batch_size {
            return;
        }
        tokio::select! {
            biased;
            _ = self.stop.changed() => {}
            () = tokio::time::sleep(self.linger) => {}
        }
        while pending.len() < self.batch_size {
            match self.queue.try_recv() {
                Ok(event) => pending.push(event),
                Err(_) => break,
            }
        }
    }

    fn written(&self, rows: usize) {
        self.counters.written.fetch_add(rows as u64, Ordering::SeqCst);
        metrics::counter!("shardcron_trace_written_total").increment(rows as u64);
    }

    fn failed(&self, message: &str, failing_since: &mut Option<Instant>) {
        metrics::counter!("shardcron_trace_write_errors_total").increment(1);
        *self.last_error.lock() = Some(message.to_owned());
        if failing_since.is_none() {
            *failing_since = Some(Instant::now());
            tracing::warn!(
                error = message,
                "execution trace database unreachable; retrying (rows queue up, then are dropped \
                 and counted; fires are not affected)"
            );
        }
    }

    /// The open store, connecting and migrating first when there is none.
    async fn open(&mut self, failing_since: &mut Option<Instant>) -> Option<Store> {
        if let Some(store) = self.store.lock().clone() {
            return Some(store);
        }
        let opened = async {
            let store = self.target.connect().await?;
            store.migrate().await?;
            Ok::<_, sqlx::Error>(store)
        };
        match tokio::time::timeout(WRITE_TIMEOUT, opened).await {
            Ok(Ok(store)) => {
                *self.store.lock() = Some(store.clone());
                *self.last_error.lock() = None;
                if failing_since.take().is_some() {
                    tracing::info!("execution trace database reachable again; writing resumed");
                } else {
                    tracing::info!("execution trace database connected; schema up to date");
                }
                Some(store)
            }
            Ok(Err(error)) => {
                self.failed(&format!("cannot open the trace database: {error}"), failing_since);
                None
            }
            Err(_) => {
                self.failed("opening the trace database timed out", failing_since);
                None
            }
        }
    }

    /// Waits before the next attempt; false when asked to stop meanwhile.
    async fn pause(&mut self) -> bool {
        tokio::select! {
            biased;
            _ = self.stop.changed() => false,
            () = tokio::time::sleep(self.retry_delay) => true,
        }
    }

    async fn purge(&self, retention: Duration) {
        let Some(store) = self.store.lock().clone() else { return };
        let now_ms = self.clock.now_ms();
        let keep_ms = i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
        let before = timestamp(now_ms.saturating_sub(keep_ms));
        match store.purge(before).await {
            Ok(0) => {}
            Ok(removed) => {
                tracing::info!(removed, before = %before, "execution trace: old rows removed")
            }
            Err(error) => {
                tracing::warn!(error = %error, "execution trace: removing old rows failed; retried later")
            }
        }
    }
}
