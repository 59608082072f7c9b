//! The execution trace: every item run and every fire's states, written to SQLite or
//! PostgreSQL in ElasticJob's two tables, off the fire path.
//!
//! - [`Trace`] records: start it with a [`TraceConfig`], give its [`listener`](Trace::listener)
//!   to the scheduler (or use [`ObserveExt::trace`](crate::ObserveExt::trace)). Rows go through a
//!   bounded queue to one background writer, on a thread of its own at the lowest scheduling
//!   priority (it writes with the cores a burst of fires leaves idle); when the queue is full
//!   (database slow or down) rows are dropped and counted ([`TraceStats::dropped`],
//!   `shardcron_trace_dropped_total`, a warning in the log): a fire never waits for the database. The writer connects, creates or migrates
//!   the schema, reconnects after failures and removes rows older than the retention by itself.
//! - [`TraceReader`] searches: ElasticJob-UI's execution and status searches and autocomplete,
//!   for a console.
//!
//! # Layout
//! - `record.rs`: the rows; `listener.rs`: hooks → queue; `rows.rs`: queue entries → rows;
//!   `writer.rs`: queue → database, on a low-priority thread of its own (`crate::background`).
//! - `store/`: the two backends and the schema; `query.rs`: the searches' requests and pages.

mod listener;
mod query;
mod record;
mod rows;
mod store;
mod writer;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use shardcron_core::handles::{Clock, SystemClock};
use shardcron_core::job::JobListener;
use shardcron_core::runtime::EventSink;
use tokio::sync::{mpsc, watch};

pub use listener::TraceListener;
pub use query::{
    ExecutionQuery, ExecutionRow, Page, Paging, StatusQuery, StatusRow, MAX_PAGE_SIZE,
};
pub use record::{ExecutionRecord, StatusRecord, TraceRecord, MAX_FAILURE_CAUSE_CHARS};
pub use store::NAME_SUGGESTIONS;

use listener::Counters;
use store::{redact, Store, Target};
use writer::Writer;

/// What went wrong with the trace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// The trace URL cannot be used.
    #[error(
        "trace database {url:?}: {reason} (give a SQLite file path, sqlite:PATH, or \
         postgres://user:password@host:port/database)"
    )]
    InvalidUrl { url: String, reason: String },
    /// A search request has a value that cannot be used.
    #[error("trace search: {field} = {value:?}: {reason}")]
    InvalidQuery { field: &'static str, value: String, reason: String },
    /// The database failed.
    #[error("trace database: {0}")]
    Database(#[from] sqlx::Error),
    /// [`TraceReader::open`] could not reach the database or create its tables.
    #[error(
        "cannot open the trace database {url}: {source}; check that the database runs and \
         that the URL (host, port, database, user, password) or the file's directory is right"
    )]
    Unreachable {
        /// Without its password.
        url: String,
        #[source]
        source: sqlx::Error,
    },
    /// The database was not reachable, with its schema, within the time given.
    #[error("the trace database was not ready within {after:?}: {last}")]
    NotReady { after: Duration, last: String },
    /// The writer's thread or its runtime could not be started.
    #[error(
        "cannot start the execution trace's writer thread: {source}; the process is out of \
         threads, memory or file descriptors (check its limits: ulimit -u, ulimit -n)"
    )]
    Thread {
        #[source]
        source: std::io::Error,
    },
}

/// How to run a [`Trace`].
#[derive(Clone, Debug)]
pub struct TraceConfig {
    /// A SQLite file path (or `sqlite:PATH`), or a `postgres://` URL.
    pub url: String,
    /// Queue entries (one per item start, item end, fire start, fire end; a fire of one item
    /// takes two: its begin and its end travel with its item's) that may wait for the writer;
    /// beyond, new ones are dropped. Default 10,000.
    pub queue_capacity: usize,
    /// Queue entries written per transaction, at most. Default 10,000: a second's burst of
    /// 1,000 fires (2,000 entries if of one item each, 4,000 of two) goes in one transaction,
    /// so that each page of the indexes it touches (their rows are spread over every job) is
    /// written once, not once per smaller batch.
    pub batch_size: usize,
    /// After the first row of a batch, how long the writer waits for more before writing
    /// (unless the batch fills first). Default 200 ms: cron fires come in bursts on whole
    /// seconds, and writing after the burst rather than during it keeps the writer's CPU out of
    /// the fires' way.
    pub linger: Duration,
    /// Rows older than this are removed (checked at start and every [`purge_every`](Self::purge_every));
    /// `None` keeps everything. Default 7 days.
    pub retention: Option<Duration>,
    /// Default one hour.
    pub purge_every: Duration,
    /// Wait between attempts while the database is unreachable. Default 1 s.
    pub retry_delay: Duration,
    /// The `hostname` column; default this machine's host name.
    pub hostname: Option<String>,
    /// Where the trace reads "now": a fire's begin, a skip, an item cancelled before it started,
    /// the retention's cut-off. Give it the scheduler's clock ([`Handles::clock`], the one passed
    /// to [`SchedulerBuilder::handles`]) so that its rows agree with the scheduler's times; a
    /// simulated clock makes them deterministic. Default the system clock, which
    /// [`Handles::real`] uses too.
    ///
    /// [`Handles::clock`]: shardcron_core::handles::Handles::clock
    /// [`Handles::real`]: shardcron_core::handles::Handles::real
    /// [`SchedulerBuilder::handles`]: shardcron_core::runtime::SchedulerBuilder::handles
    pub clock: Arc<dyn Clock>,
}

impl TraceConfig {
    /// A trace to `url` with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        TraceConfig {
            url: url.into(),
            queue_capacity: 10_000,
            batch_size: 10_000,
            linger: Duration::from_millis(200),
            retention: Some(Duration::from_secs(7 * 24 * 3600)),
            purge_every: Duration::from_secs(3600),
            retry_delay: Duration::from_secs(1),
            hostname: None,
            clock: Arc::new(SystemClock),
        }
    }

    /// Checks the URL without connecting (what [`Trace::start`] refuses at once).
    pub fn check(&self) -> Result<(), TraceError> {
        Target::parse(&self.url).map(drop)
    }
}

/// Counts of a [`Trace`] since it started, in queue entries: one per item start, item end,
/// fire start (two status rows) and fire end (one status row), except that a fire of one item
/// sends its start and its end with its item's (two entries, the same rows).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceStats {
    /// Entries accepted into the queue.
    pub enqueued: u64,
    /// Entries whose rows are written to the database.
    pub written: u64,
    /// Entries dropped because the queue was full.
    pub dropped: u64,
    /// Entries whose rows the database refused (e.g. a value it cannot store); not retried.
    pub rejected: u64,
    /// Entries waiting in the queue or in the writer's hands.
    pub pending: u64,
    /// Whether the writer holds an open database (it may still have just failed).
    pub connected: bool,
}

/// A running execution trace. Cheap to clone; the writer runs until [`shutdown`](Self::shutdown)
/// or until every clone of the handle is dropped (keep one for as long as the scheduler runs).
#[derive(Clone)]
pub struct Trace {
    listener: Arc<TraceListener>,
    counters: Arc<Counters>,
    stop: Arc<watch::Sender<bool>>,
    store: Arc<Mutex<Option<Store>>>,
    last_error: Arc<Mutex<Option<String>>>,
    /// As given (with any password), for [`reader`](Self::reader); never printed.
    url: String,
}

impl std::fmt::Debug for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trace")
            .field("url", &redact(&self.url))
            .field("stats", &self.stats())
            .finish()
    }
}

impl Trace {
    /// Checks the URL and starts the writer on a thread of its own, at the lowest scheduling
    /// priority (on Linux), so that the database work never takes a core from a burst of fires.
    /// Does not wait for the database: an unreachable one is retried in the background (see
    /// [`ready`](Self::ready)).
    pub fn start(config: TraceConfig) -> Result<Trace, TraceError> {
        let target = Target::parse(&config.url)?;
        let (queue_tx, queue_rx) = mpsc::channel(config.queue_capacity.max(1));
        let (stop_tx, stop_rx) = watch::channel(false);
        let counters = Arc::new(Counters::default());
        let store = Arc::new(Mutex::new(None));
        let last_error = Arc::new(Mutex::new(None));
        let hostname = config
            .hostname
            .clone()
            .unwrap_or_else(|| gethostname::gethostname().to_string_lossy().into_owned());
        let writer = Writer {
            rows: rows::RowMaker { hostname },
            target,
            queue: queue_rx,
            counters: counters.clone(),
            batch_size: config.batch_size.max(1),
            linger: config.linger,
            retry_delay: config.retry_delay,
            retention: config.retention,
            purge_every: config.purge_every,
            clock: config.clock.clone(),
            stop: stop_rx,
            store: store.clone(),
            last_error: last_error.clone(),
        };
        let thread = |source| TraceError::Thread { source };
        let runtime = crate::background::runtime().map_err(thread)?;
        crate::background::spawn("shardcron-trace", runtime, writer.run()).map_err(thread)?;
        Ok(Trace {
            listener: Arc::new(TraceListener::new(
                queue_tx,
                counters.clone(),
                config.clock.clone(),
            )),
            counters,
            stop: Arc::new(stop_tx),
            store,
            last_error,
            url: config.url.clone(),
        })
    }

    /// The listener to register on the scheduler ([`SchedulerBuilder::listener`]).
    ///
    /// [`SchedulerBuilder::listener`]: shardcron_core::runtime::SchedulerBuilder::listener
    pub fn listener(&self) -> Arc<dyn JobListener> {
        self.listener.clone()
    }

    /// An event sink that records the fires of `instance` that ran nothing (a `TASK_FINISHED`
    /// status row saying why: misfire, disabled, disconnected, no items...), as ElasticJob
    /// records misfires and empty shardings. `instance` is the scheduler's instance id
    /// ([`InstanceId::new`] with the builder's IP, pid and suffix; [`Scheduler::instance`]):
    ///
    /// ```no_run
    /// # fn demo(trace: &shardcron_observe::Trace, builder: shardcron_core::runtime::SchedulerBuilder) -> Result<(), Box<dyn std::error::Error>> {
    /// use shardcron_core::runtime::InstanceId;
    /// let instance = InstanceId::new("10.0.0.7", std::process::id(), None)?;
    /// let builder = builder.ip("10.0.0.7").event_sink(trace.skip_sink(instance.as_str()));
    /// # Ok(()) }
    /// ```
    ///
    /// [`InstanceId::new`]: shardcron_core::runtime::InstanceId::new
    /// [`Scheduler::instance`]: shardcron_core::runtime::Scheduler::instance
    pub fn skip_sink(&self, instance: &str) -> EventSink {
        let listener = self.listener.clone();
        let instance: Arc<str> = Arc::from(instance);
        Arc::new(move |event| listener.skipped(&instance, event))
    }

    /// Counts so far.
    pub fn stats(&self) -> TraceStats {
        let c = &self.counters;
        let enqueued = c.enqueued.load(Ordering::SeqCst);
        TraceStats {
            enqueued,
            written: c.written.load(Ordering::SeqCst),
            dropped: c.dropped.load(Ordering::SeqCst),
            rejected: c.rejected.load(Ordering::SeqCst),
            pending: enqueued.saturating_sub(c.processed()),
            connected: self.store.lock().is_some(),
        }
    }

    /// Waits until the writer has connected and the schema is in place, at most `timeout`.
    pub async fn ready(&self, timeout: Duration) -> Result<(), TraceError> {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.store.lock().is_none() {
            if tokio::time::Instant::now() >= deadline {
                let last = self.last_error.lock().clone().unwrap_or_else(|| "no answer yet".into());
                return Err(TraceError::NotReady { after: timeout, last });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Waits until every row queued before the call is written (or refused), at most
    /// `timeout`; true if it was.
    pub async fn flush(&self, timeout: Duration) -> bool {
        let target = self.counters.enqueued.load(Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.counters.processed() >= target {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Writes what is queued (for at most `timeout`) and stops the writer. Rows recorded after
    /// this are dropped.
    pub async fn shutdown(&self, timeout: Duration) {
        self.flush(timeout).await;
        let _ = self.stop.send(true);
    }

    /// A reader on the same database, with connections of its own: the writer's run on its
    /// low-priority thread, where searches would wait behind the scheduler's work.
    pub async fn reader(&self) -> Result<TraceReader, TraceError> {
        TraceReader::open(&self.url).await
    }
}

/// Searches a trace database: what ElasticJob-UI's "job trace" and "history status" pages and
/// their autocomplete ask (`/api/event-trace/execution`, `/status`, `.../jobNames`, `.../ip`).
#[derive(Clone, Debug)]
pub struct TraceReader {
    store: Store,
}

impl TraceReader {
    /// Connects to `url` (as [`TraceConfig::url`]) and creates or migrates the schema, so that
    /// a console started before any worker finds empty tables rather than none.
    pub async fn open(url: &str) -> Result<TraceReader, TraceError> {
        let unreachable = |source| TraceError::Unreachable { url: redact(url), source };
        let store = Target::parse(url)?.connect().await.map_err(unreachable)?;
        store.migrate().await.map_err(unreachable)?;
        Ok(TraceReader { store })
    }

    /// One page of item runs matching `query`, newest first by default.
    pub async fn executions(
        &self,
        query: &ExecutionQuery,
    ) -> Result<Page<ExecutionRow>, TraceError> {
        self.store.executions(query).await
    }

    /// One page of fire states matching `query`, newest first by default.
    pub async fn statuses(&self, query: &StatusQuery) -> Result<Page<StatusRow>, TraceError> {
        self.store.statuses(query).await
    }

    /// Job names of the execution log starting with `prefix` (all when `None`), sorted.
    pub async fn execution_job_names(
        &self,
        prefix: Option<&str>,
    ) -> Result<Vec<String>, TraceError> {
        Ok(self.store.distinct("JOB_EXECUTION_LOG", "job_name", prefix).await?)
    }

    /// IPs of the execution log starting with `prefix`, sorted.
    pub async fn execution_ips(&self, prefix: Option<&str>) -> Result<Vec<String>, TraceError> {
        Ok(self.store.distinct("JOB_EXECUTION_LOG", "ip", prefix).await?)
    }

    /// Job names of the status log starting with `prefix`, sorted.
    pub async fn status_job_names(&self, prefix: Option<&str>) -> Result<Vec<String>, TraceError> {
        Ok(self.store.distinct("JOB_STATUS_TRACE_LOG", "job_name", prefix).await?)
    }
}
