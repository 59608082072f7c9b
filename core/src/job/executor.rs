//! [`Executor`]: runs one fire of a job on this instance: listeners, items in parallel, error
//! handling, report.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tokio::sync::oneshot;
use tracing::Instrument;

use super::extensions::Extensions;
use super::failure::panic_message;
use super::gate::FireGate;
use super::listener::ItemEndContext;
use super::{
    ErrorDisposition, FireInfo, Job, JobError, JobErrorHandler, JobFailure, JobListener,
    LogErrorHandler, ShardingContext,
};
use crate::config::{ConfigError, JobConfig};
use crate::handles::Handles;

/// One fire to run on this instance.
#[derive(Debug)]
pub struct FireRequest {
    /// The fire; its `items` should list the items of `contexts`.
    pub info: FireInfo,
    /// One context per item to run. Run in item order; a repeated item runs once.
    pub contexts: Vec<ShardingContext>,
    /// At most this many items run at once; `0` means no limit.
    pub max_parallel_items: usize,
}

impl FireRequest {
    /// A request with one context per item of `info`, built from `config` by
    /// [`FireInfo::contexts`] (fencing tokens 0, fresh cancellation tokens).
    pub fn from_config(
        info: FireInfo,
        config: &JobConfig,
        max_parallel_items: usize,
    ) -> Result<Self, ConfigError> {
        let contexts = info.contexts(config)?;
        Ok(FireRequest { info, contexts, max_parallel_items })
    }
}

/// How one item of a fire ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ItemOutcome {
    /// The job's code returned successfully.
    Completed,
    /// It failed or panicked; the job's error handler has seen it.
    Failed(JobFailure),
    /// Its cancellation fired before it started, or it stopped because of it.
    Cancelled,
}

/// When an item ran, read from the injected clock (epoch milliseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemTiming {
    /// When its task started.
    pub started_ms: i64,
    /// When its code ended.
    pub finished_ms: i64,
}

/// What happened in one fire on this instance. Ordered by item, so equal runs give equal
/// reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FireReport {
    /// The job's name.
    pub job_name: String,
    /// When the fire started (before the listeners), from the injected clock.
    pub started_ms: i64,
    /// When it ended (after the last item, before the after-listeners).
    pub finished_ms: i64,
    /// How each item ended.
    pub items: BTreeMap<u32, ItemOutcome>,
    /// When each item that started ran. Items cancelled before starting, and items whose task
    /// was lost, have none.
    pub timings: BTreeMap<u32, ItemTiming>,
    /// The failure of the lowest item whose failure the error handler raised.
    pub raised: Option<JobFailure>,
    /// Every item whose failure the error handler raised, ascending.
    pub raised_items: Vec<u32>,
}

impl FireReport {
    fn new(job_name: &str, started_ms: i64) -> Self {
        FireReport {
            job_name: job_name.to_string(),
            started_ms,
            finished_ms: started_ms,
            items: BTreeMap::new(),
            timings: BTreeMap::new(),
            raised: None,
            raised_items: Vec::new(),
        }
    }

    /// True when every item completed.
    pub fn all_completed(&self) -> bool {
        self.items.values().all(|outcome| *outcome == ItemOutcome::Completed)
    }

    /// The items that completed, ascending.
    pub fn completed_items(&self) -> Vec<u32> {
        self.items_where(|outcome| matches!(outcome, ItemOutcome::Completed))
    }

    /// The items that failed or panicked, ascending.
    pub fn failed_items(&self) -> Vec<u32> {
        self.items_where(|outcome| matches!(outcome, ItemOutcome::Failed(_)))
    }

    /// The items that were cancelled, ascending.
    pub fn cancelled_items(&self) -> Vec<u32> {
        self.items_where(|outcome| matches!(outcome, ItemOutcome::Cancelled))
    }

    /// The raised failure as an error for the runtime to return, if the error handler raised one.
    pub fn raised_error(&self) -> Option<JobError> {
        let item = *self.raised_items.first()?;
        let failure = self.raised.clone()?;
        Some(JobError::Raised { job_name: self.job_name.clone(), item, failure })
    }

    fn items_where(&self, keep: impl Fn(&ItemOutcome) -> bool) -> Vec<u32> {
        self.items.iter().filter(|(_, outcome)| keep(outcome)).map(|(item, _)| *item).collect()
    }
}

/// Runs fires: listeners, items in parallel through the injected spawner, the error handler,
/// the report.
///
/// One executor per job is the intended use (listeners and the error handler are per job, as in
/// ElasticJob); it is cheap (a few `Arc`s) and cloning it shares them.
///
/// # A fire
/// 1. Every listener's `before_job_executed`, in registration order.
/// 2. The items, in item order, each on its own task ([`Spawner::spawn`]), at most
///    `max_parallel_items` at a time. An item whose cancellation fired while it waited for a
///    slot does not start and is reported cancelled. A panic in an item is caught and reported
///    as [`JobFailure::Panicked`]; it never reaches the runtime.
/// 3. Each failed item goes to the error handler as it ends; [`ErrorDisposition::Raise`] marks
///    it raised in the report.
/// 4. Every listener's `after_job_executed` with the report.
///
/// A request without contexts returns an empty report at once and calls no listener.
///
/// Dropping the future of [`run`](Self::run) does not stop items that already started (they
/// are detached tasks); stop them through their cancellation tokens.
///
/// [`Spawner::spawn`]: crate::handles::Spawner::spawn
#[derive(Clone)]
pub struct Executor {
    handles: Handles,
    listeners: Vec<Arc<dyn JobListener>>,
    error_handler: Arc<dyn JobErrorHandler>,
    extensions: Extensions,
}

impl Executor {
    /// An executor with no listeners and the `LOG` error handler.
    pub fn new(handles: Handles) -> Self {
        Executor {
            handles,
            listeners: Vec::new(),
            error_handler: Arc::new(LogErrorHandler),
            extensions: Extensions::default(),
        }
    }

    /// The application's shared state every item's context carries
    /// ([`ShardingContext::extension`]).
    pub fn with_extensions(mut self, extensions: Extensions) -> Self {
        self.extensions = extensions;
        self
    }

    /// Adds a listener, called after the ones added before it.
    pub fn with_listener(mut self, listener: Arc<dyn JobListener>) -> Self {
        self.listeners.push(listener);
        self
    }

    /// Replaces the error handler (e.g. with one from
    /// [`ErrorHandlers::resolve`](super::ErrorHandlers::resolve)).
    pub fn with_error_handler(mut self, handler: Arc<dyn JobErrorHandler>) -> Self {
        self.error_handler = handler;
        self
    }

    /// The handles items are spawned and timed with.
    pub fn handles(&self) -> &Handles {
        &self.handles
    }

    /// The error handler.
    pub fn error_handler(&self) -> &Arc<dyn JobErrorHandler> {
        &self.error_handler
    }

    /// Runs one fire of `job` and reports how each item ended. Never panics because of the job,
    /// its listeners or its error handler.
    pub async fn run(&self, job: &Job, request: FireRequest) -> FireReport {
        let FireRequest { info, contexts, max_parallel_items } = request;
        let span = fire_span(&info);
        let fire = self.run_fire(job, info, contexts, max_parallel_items, None, Detach::Always);
        fire.instrument(span).await
    }

    /// [`Self::run`], whose items start once `gate` opens (the scheduler's fire lead: the
    /// fire was taken ahead of its time). Where listeners are told of the fire and its items,
    /// the whole fire waits for the gate, so that what they are told starts at the fire's
    /// time; otherwise only each item's call to the job waits, its task already spawned, so
    /// that a tick's items start together when the gate opens.
    pub(crate) async fn run_gated(
        &self,
        job: &Job,
        request: FireRequest,
        gate: Option<FireGate>,
    ) -> FireReport {
        let gate = match gate {
            Some(gate) if !self.listeners.is_empty() => {
                gate.pass().await;
                None
            }
            gate => gate,
        };
        let FireRequest { info, contexts, max_parallel_items } = request;
        let span = fire_span(&info);
        // The runtime drops a fire before its end only with the whole scheduler, which ends
        // every task it spawned too: the fire's only item may run on the fire's own task.
        let detach = Detach::UnlessAlone;
        let fire = self.run_fire(job, info, contexts, max_parallel_items, gate, detach);
        fire.instrument(span).await
    }

    async fn run_fire(
        &self,
        job: &Job,
        info: FireInfo,
        contexts: Vec<ShardingContext>,
        max_parallel_items: usize,
        gate: Option<FireGate>,
        detach: Detach,
    ) -> FireReport {
        let mut report = FireReport::new(&info.job_name, self.handles.clock.now_ms());
        let contexts = in_item_order(contexts);
        if contexts.is_empty() {
            return report;
        }
        self.notify_before(&info).await;

        // What the per-item hooks are told when an item ends; kept only when someone listens.
        let mut ends: BTreeMap<u32, ItemEndContext> = BTreeMap::new();
        if !self.listeners.is_empty() {
            for ctx in &contexts {
                ends.insert(
                    ctx.item,
                    ItemEndContext {
                        item: ctx.item,
                        fencing_token: ctx.fencing_token,
                        task_id: ctx.task_id.clone(),
                    },
                );
            }
        }

        if detach == Detach::UnlessAlone && contexts.len() == 1 {
            // The fire's only item runs on the fire's own task: a task, its channel, a set of
            // futures and their allocations less per fire (in a burst of 10,000 fires the
            // allocator is a third of the work), and no parallelism to lose.
            for ctx in contexts {
                if self.starts(&info, &ends, &mut report, &ctx) {
                    let item = ctx.item;
                    let end = self.item_run(job, &info, ctx, gate.clone()).await;
                    self.ended(&info, &ends, &mut report, item, Ok(end));
                }
            }
        } else {
            let limit = if max_parallel_items == 0 { contexts.len() } else { max_parallel_items };
            let mut waiting = contexts.into_iter();
            let mut running = FuturesUnordered::new();
            loop {
                while running.len() < limit {
                    let Some(ctx) = waiting.next() else { break };
                    if self.starts(&info, &ends, &mut report, &ctx) {
                        running.push(self.spawn_item(job, &info, ctx, gate.clone()));
                    }
                }
                let Some((item, ended)) = running.next().await else { break };
                self.ended(&info, &ends, &mut report, item, ended);
            }
        }
        report.raised_items.sort_unstable();
        report.raised = report.raised_items.first().and_then(|item| match report.items.get(item) {
            Some(ItemOutcome::Failed(failure)) => Some(failure.clone()),
            _ => None,
        });
        report.finished_ms = self.handles.clock.now_ms();

        self.notify_after(&info, &report).await;
        report
    }

    /// Whether `ctx`'s item starts: not if it was cancelled while it waited for a slot (then
    /// reported cancelled). Tells the listeners of a start.
    fn starts(
        &self,
        info: &FireInfo,
        ends: &BTreeMap<u32, ItemEndContext>,
        report: &mut FireReport,
        ctx: &ShardingContext,
    ) -> bool {
        if ctx.is_cancelled() {
            tracing::debug!(item = ctx.item, "item cancelled before it started");
            self.notify_item_finished(info, ends.get(&ctx.item), &ItemOutcome::Cancelled, None);
            report.items.insert(ctx.item, ItemOutcome::Cancelled);
            return false;
        }
        if !self.listeners.is_empty() {
            self.notify_item_started(info, ctx);
        }
        true
    }

    /// Records how `item` ended (`Err`: its task was dropped first), tells the listeners, and
    /// hands a failure to the error handler.
    fn ended(
        &self,
        info: &FireInfo,
        ends: &BTreeMap<u32, ItemEndContext>,
        report: &mut FireReport,
        item: u32,
        ended: Result<ItemEnd, oneshot::error::RecvError>,
    ) {
        let (outcome, timing) = match ended {
            Ok(ended) => {
                report.timings.insert(item, ended.timing);
                (ended.outcome, Some(ended.timing))
            }
            Err(_) => (
                ItemOutcome::Failed(JobFailure::Lost(
                    "the item's task was dropped before it ran to its end".to_string(),
                )),
                None,
            ),
        };
        tracing::debug!(item, outcome = ?outcome, "item ended");
        self.notify_item_finished(info, ends.get(&item), &outcome, timing);
        if let ItemOutcome::Failed(failure) = &outcome {
            if self.dispose(info, item, failure) == ErrorDisposition::Raise {
                report.raised_items.push(item);
            }
        }
        report.items.insert(item, outcome);
    }

    /// Starts `ctx`'s item on its own task; the returned future yields its end.
    fn spawn_item(
        &self,
        job: &Job,
        info: &FireInfo,
        ctx: ShardingContext,
        gate: Option<FireGate>,
    ) -> impl Future<Output = (u32, Result<ItemEnd, oneshot::error::RecvError>)> {
        let item = ctx.item;
        let (sender, receiver) = oneshot::channel();
        let run = self.item_run(job, info, ctx, gate);
        self.handles.spawner.spawn(Box::pin(async move {
            // The receiver is gone only if the fire itself was dropped; nobody is left to tell.
            let _ = sender.send(run.await);
        }));
        receiver.map(move |ended| (item, ended))
    }

    /// `ctx`'s item: waits for the gate, runs the job's code (a panic is the item's failure),
    /// then, where the tick's items start together, waits for them all to have started.
    fn item_run(
        &self,
        job: &Job,
        info: &FireInfo,
        ctx: ShardingContext,
        gate: Option<FireGate>,
    ) -> impl Future<Output = ItemEnd> + Send + 'static {
        let ctx = ctx.with_extensions(self.extensions.clone());
        // The item's own span repeats the fire's facts, so that a log line of the job's code
        // says which fire of which job on which instance, under which fencing token, wrote it.
        let span = tracing::info_span!(
            "item",
            job = %info.job_name,
            item = ctx.item,
            instance = %info.instance,
            fire_ms = info.fire_time_ms(),
            token = ctx.fencing_token,
        );
        let runner = Arc::clone(job.runner());
        let handles = self.handles.clone();
        let run = async move {
            if let Some(gate) = &gate {
                gate.pass().await;
            }
            let waited = gate.is_some();
            let started_ms = handles.clock.now_ms();
            // Cancelled while it waited for its fire's time: it does not start.
            let outcome = if waited && ctx.is_cancelled() {
                ItemOutcome::Cancelled
            } else {
                match AssertUnwindSafe(runner.run(ctx, &handles)).catch_unwind().await {
                    Ok(outcome) => outcome,
                    Err(payload) => {
                        ItemOutcome::Failed(JobFailure::Panicked(panic_message(&*payload)))
                    }
                }
            };
            let timing = ItemTiming { started_ms, finished_ms: handles.clock.now_ms() };
            if let Some(gate) = &gate {
                // The items of the tick start before the ends of those done (`gate`).
                gate.all_started().await;
            }
            ItemEnd { outcome, timing }
        };
        run.instrument(span)
    }

    /// Hands a failure to the error handler. A panicking handler counts as `LOG`.
    fn dispose(&self, fire: &FireInfo, item: u32, failure: &JobFailure) -> ErrorDisposition {
        let handle = || self.error_handler.handle_in_fire(fire, Some(item), failure);
        let job_name = fire.job_name.as_str();
        match catch_unwind(AssertUnwindSafe(handle)) {
            Ok(disposition) => disposition,
            Err(payload) => {
                let handler = self.error_handler.type_name();
                let panic = panic_message(&*payload);
                tracing::error!(
                    job = job_name,
                    item,
                    handler,
                    panic = %panic,
                    "the error handler panicked; the failure is reported as by LOG",
                );
                crate::stderr_fallback::eprint_if_unobserved(tracing::Level::ERROR, || {
                    format!("error handler {handler} of job {job_name:?} panicked: {panic}")
                });
                LogErrorHandler.handle_in_fire(fire, Some(item), failure)
            }
        }
    }

    fn notify_item_started(&self, info: &FireInfo, ctx: &ShardingContext) {
        let now = self.handles.clock.now_ms();
        for (index, listener) in self.listeners.iter().enumerate() {
            let call = AssertUnwindSafe(|| listener.item_started(info, ctx, now));
            if let Err(payload) = catch_unwind(call) {
                log_listener_panic(index, "item_started", &*payload);
            }
        }
    }

    fn notify_item_finished(
        &self,
        info: &FireInfo,
        end: Option<&ItemEndContext>,
        outcome: &ItemOutcome,
        timing: Option<ItemTiming>,
    ) {
        let Some(end) = end else { return };
        for (index, listener) in self.listeners.iter().enumerate() {
            let call = AssertUnwindSafe(|| listener.item_finished(info, end, outcome, timing));
            if let Err(payload) = catch_unwind(call) {
                log_listener_panic(index, "item_finished", &*payload);
            }
        }
    }

    async fn notify_before(&self, info: &FireInfo) {
        for (index, listener) in self.listeners.iter().enumerate() {
            let call = AssertUnwindSafe(listener.before_job_executed(info));
            if let Err(payload) = call.catch_unwind().await {
                log_listener_panic(index, "before_job_executed", &*payload);
            }
        }
    }

    async fn notify_after(&self, info: &FireInfo, report: &FireReport) {
        for (index, listener) in self.listeners.iter().enumerate() {
            let call = AssertUnwindSafe(listener.after_job_executed(info, report));
            if let Err(payload) = call.catch_unwind().await {
                log_listener_panic(index, "after_job_executed", &*payload);
            }
        }
    }
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("handles", &self.handles)
            .field("listeners", &self.listeners.len())
            .field("error_handler", &self.error_handler)
            .finish()
    }
}

/// Whether the items of a fire run on tasks of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detach {
    /// Every item ([`Executor::run`]): dropping the fire's future leaves those that started
    /// running.
    Always,
    /// Every item but a fire's only one, which runs on the fire's own task.
    UnlessAlone,
}

/// The span of a fire: its facts, on every log line written while it runs.
fn fire_span(info: &FireInfo) -> tracing::Span {
    tracing::info_span!(
        "fire",
        job = %info.job_name,
        instance = %info.instance,
        fire_ms = info.fire_time_ms(),
        source = %info.source,
        items = ?info.items,
    )
}

/// How an item ended.
struct ItemEnd {
    outcome: ItemOutcome,
    timing: ItemTiming,
}

/// The contexts sorted by item, repeated items dropped (the first kept).
fn in_item_order(mut contexts: Vec<ShardingContext>) -> Vec<ShardingContext> {
    // Stable: of a repeated item, the first stays first.
    contexts.sort_by_key(|ctx| ctx.item);
    contexts.dedup_by(|later, kept| {
        let repeated = later.item == kept.item;
        if repeated {
            tracing::warn!(item = later.item, "item listed twice in one fire; it runs once");
        }
        repeated
    });
    contexts
}

fn log_listener_panic(index: usize, method: &str, payload: &(dyn std::any::Any + Send)) {
    tracing::error!(
        listener = index,
        method,
        panic = %panic_message(payload),
        "a job listener panicked; the fire goes on",
    );
}
