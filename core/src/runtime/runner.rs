//! One job on one instance: a task that owns the job's state, reacts to the events the driver
//! routes to it (fires, registry changes of the job's subtree, session changes) and performs the
//! job's registry operations. Jobs are independent tasks, so a slow registry call of one job
//! never delays another's fire; the driver stays free of I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::events::{FireKind, SchedulerEvent, SkipReason};
use super::timer::TimerKind;
use super::{Command, Shared};
use crate::config::{store, JobConfig};
use crate::cron::CronSchedule;
use crate::election;
use crate::error::{Error, Result};
use crate::execution::{self, Completion, RunningMark, Start};
use crate::failover;
use crate::guarantee;
use crate::job::{
    ExecutionSource, Executor, FireInfo, FireReport, FireRequest, ItemOutcome, Job, ShardingContext,
};
use crate::layout::{GuaranteeStage, ItemNode, JobNode, JobPaths};
use crate::registry::{CreateMode, RegistryError, RegistryExt, SessionEvent};
use crate::runtime::instance::Completed;
use crate::sharding::service::{self as sharding, Reshard, DISABLED};

/// What the driver (or the runner itself) tells a runner.
#[derive(Debug)]
pub(crate) enum JobEvent {
    /// The schedule fell due.
    Fire {
        fire_ms: i64,
    },
    /// Time for the leader's periodic check of the assignment.
    Reconcile,
    /// A node of the job's subtree changed; the cache already shows the change.
    Changed(JobNode),
    Session(SessionEvent),
    /// The items of a fire finished.
    Done(Box<Finished>),
    /// Stop gracefully: finish running items (at most until the deadline), leave the registry.
    Stop {
        reason: String,
        reply: Option<oneshot::Sender<()>>,
    },
}

/// A fire in progress on this instance.
#[derive(Debug)]
struct InFlight {
    fire_ms: i64,
    /// This launch's run number (see [`crate::failover`]).
    run: u64,
    items: Vec<u32>,
    /// The items this instance runs as a failover taker (their `failover` markers go at the end).
    failed_over: Vec<u32>,
    marked: bool,
    cancel: CancellationToken,
}

/// The markers of a finished run still to remove.
#[derive(Debug, Clone)]
struct Unfinished {
    items: Vec<u32>,
    failed_over: Vec<u32>,
    completion: Option<Completion>,
}

#[derive(Debug)]
pub(crate) struct Finished {
    report: FireReport,
}

pub(crate) struct JobRunner {
    shared: Arc<Shared>,
    paths: JobPaths,
    config: JobConfig,
    schedule: Option<CronSchedule>,
    job: Job,
    /// Runs the items, with this job's error handler and the scheduler's listeners.
    executor: Arc<Executor>,
    mailbox: mpsc::UnboundedReceiver<JobEvent>,
    me: mpsc::UnboundedSender<JobEvent>,
    connected: bool,
    in_flight: Option<InFlight>,
    /// A manual trigger that came while a fire ran.
    manual_pending: bool,
    /// The last run number handed out, and the last one recorded as completed in our instance
    /// node. Both start from the registration time in microseconds-like units, so that a new
    /// registration (restart, new session) always counts above everything before it.
    runs: u64,
    completed: Completed,
    /// Work a lost connection interrupted, redone on reconnection and before the next fire: a
    /// registration (after a new session), and the removal of a finished run's markers (stale
    /// markers would block every later fire of those items).
    registered: bool,
    unfinished: Option<Unfinished>,
    /// The instances of the job as last seen, to tell joins and departures from data changes
    /// (every completed run rewrites an instance node).
    members: BTreeSet<String>,
    /// Claimed failover items not yet run, by the fire they missed.
    failover_backlog: BTreeMap<i64, Vec<u32>>,
    stopping: bool,
    was_leader: bool,
    /// A fire that ended while the job was stopping (see `stop`).
    finished_while_stopping: Option<Finished>,
    /// The version of the `config` node last evaluated, so that each stored version is judged
    /// once however many notifications point at it.
    config_version: Option<u64>,
}

impl std::fmt::Debug for JobRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobRunner").field("job", &self.config.job_name).finish()
    }
}

impl JobRunner {
    /// Publishes the config and registers this instance for the job. On success the runner is
    /// ready to [`run`](Self::run); the registry is untouched if the config is invalid.
    pub async fn start(
        shared: Arc<Shared>,
        config: JobConfig,
        job: Job,
        mailbox: mpsc::UnboundedReceiver<JobEvent>,
        me: mpsc::UnboundedSender<JobEvent>,
    ) -> Result<Self> {
        let registry = shared.registry.as_ref();
        let config = store::publish(registry, &config, &shared.known).await?;
        let schedule = schedule_of(&config)?;
        let executor = Arc::new(executor_for(&shared, &config)?);
        let paths = JobPaths::new(&config.job_name);
        let mut runner = JobRunner {
            shared,
            paths,
            config,
            schedule,
            job,
            executor,
            mailbox,
            me,
            connected: true,
            in_flight: None,
            manual_pending: false,
            failover_backlog: BTreeMap::new(),
            members: BTreeSet::new(),
            registered: false,
            unfinished: None,
            runs: 0,
            completed: Completed::default(),
            stopping: false,
            was_leader: false,
            config_version: None,
            finished_while_stopping: None,
        };
        runner.register().await?;
        Ok(runner)
    }

    fn name(&self) -> &str {
        &self.config.job_name
    }

    fn emit(&self, event: SchedulerEvent) {
        self.shared.events.emit(event);
    }

    fn report_error(&self, e: &Error) {
        self.emit(SchedulerEvent::Error { job: self.name().to_owned(), message: e.to_string() });
    }

    /// Server node, instance node, the reshard flag, and a bid for leadership.
    async fn register(&mut self) -> Result<()> {
        let shared = self.shared.clone();
        let registry = shared.registry.as_ref();
        let instance = &self.shared.instance;
        registry
            .create_if_absent(&self.paths.server(instance.ip()), b"", CreateMode::Persistent)
            .await?;
        let node = self.paths.instance(instance.as_str());
        let now = self.shared.handles.clock.now_ms();
        let base = u64::try_from(now).unwrap_or(0).saturating_mul(1000);
        self.runs = self.runs.max(base);
        // Nothing before this registration is owed by it.
        self.completed = Completed { run: self.runs, fire_ms: now };
        let data = instance.node_data(self.completed);
        match registry.create(&node, data.as_bytes(), CreateMode::Ephemeral).await {
            Ok(_) => {}
            // Our own node from a session that is not gone yet, or a twin instance id.
            Err(RegistryError::NodeExists { .. }) => {
                registry.delete(&node, None).await?;
                registry.create(&node, data.as_bytes(), CreateMode::Ephemeral).await?;
            }
            Err(e) => return Err(e.into()),
        }
        self.shared.cache.update(|c| c.wrote(&node, data.as_bytes(), 0, true));
        self.members =
            self.shared.cache.read().children(&self.paths.instances()).into_iter().collect();
        sharding::set_necessary(registry, &self.shared.cache, &self.paths).await?;
        self.bid_for_leadership().await?;
        self.registered = true;
        self.arm_after(self.shared.handles.clock.now_ms());
        self.arm_reconcile();
        Ok(())
    }

    /// Arms the next reconcile, `reconcileIntervalMinutes` from now (off below one minute).
    fn arm_reconcile(&self) {
        let at_ms = self.config.reconcile_interval().map(|interval| {
            let interval_ms = i64::try_from(interval.as_millis()).unwrap_or(i64::MAX / 2);
            self.shared.handles.clock.now_ms().saturating_add(interval_ms)
        });
        self.shared.command(Command::Arm {
            job: self.name().to_owned(),
            kind: TimerKind::Reconcile,
            at_ms,
        });
    }

    /// The leader's periodic repair (DESIGN section 5): if an item has no live, enabled owner
    /// (an owner that vanished while no reshard was flagged, a flag lost to an error), flag a
    /// reshard so that the next fire fixes it. Reads only the cache.
    async fn reconcile(&mut self) -> Result<()> {
        if !self.connected || self.stopping || !self.is_leader() {
            return Ok(());
        }
        let total = self.config.checked_total_count()?;
        let stale = {
            let cache = self.shared.cache.read();
            if sharding::pending(&cache, &self.paths) {
                return Ok(());
            }
            let eligible = sharding::eligible_instances(&cache, &self.paths);
            (0..total).any(|n| {
                let owner = cache.text(&self.paths.item_node(n, ItemNode::Instance));
                !owner.is_some_and(|o| eligible.contains(&o))
            })
        };
        if stale {
            let shared = self.shared.clone();
            sharding::set_necessary(shared.registry.as_ref(), &shared.cache, &self.paths).await?;
            self.emit(SchedulerEvent::Reconciled { job: self.name().to_owned() });
        }
        Ok(())
    }

    /// Redoes what a lost connection interrupted (see `registered` and `unfinished`).
    async fn settle(&mut self) -> Result<()> {
        if !self.registered {
            self.register().await?;
        }
        if let Some(work) = self.unfinished.clone() {
            let shared = self.shared.clone();
            let registry = shared.registry.as_ref();
            let completion = work.completion.as_ref();
            execution::finish(
                registry,
                &shared.cache,
                &self.paths,
                &work.items,
                &work.failed_over,
                completion,
            )
            .await?;
            self.unfinished = None;
        }
        Ok(())
    }

    /// Processes events until the job stops.
    pub async fn run(mut self) {
        while let Some(event) = self.mailbox.recv().await {
            let stop = matches!(event, JobEvent::Stop { .. });
            if let Err(e) = self.handle(event).await {
                self.report_error(&e);
            }
            if stop {
                break;
            }
        }
    }

    async fn handle(&mut self, event: JobEvent) -> Result<()> {
        match event {
            JobEvent::Fire { fire_ms } => {
                self.arm_after(fire_ms);
                self.fire(fire_ms, FireKind::Scheduled, None).await
            }
            JobEvent::Changed(node) => self.on_change(node).await,
            JobEvent::Reconcile => {
                self.arm_reconcile();
                self.reconcile().await
            }
            JobEvent::Session(ev) => self.on_session(ev).await,
            JobEvent::Done(finished) => self.on_done(*finished).await,
            JobEvent::Stop { reason, reply } => {
                let result = self.stop(&reason).await;
                if let Some(reply) = reply {
                    let _ = reply.send(());
                }
                result
            }
        }
    }

    // ------------------------------------------------------------------ schedule

    /// Arms the next fire strictly after `after_ms` (or after now, if we fell behind).
    fn arm_after(&self, after_ms: i64) {
        let now = self.shared.handles.clock.now_ms();
        let next = self.schedule.as_ref().and_then(|s| s.next_after(after_ms.max(now)));
        self.shared.command(Command::Arm {
            job: self.name().to_owned(),
            kind: TimerKind::Fire,
            at_ms: next,
        });
        if let Some(next_fire_ms) = next {
            self.emit(SchedulerEvent::Armed { job: self.name().to_owned(), next_fire_ms });
        }
    }

    // ------------------------------------------------------------------ firing

    async fn fire(&mut self, fire_ms: i64, kind: FireKind, only: Option<Vec<u32>>) -> Result<()> {
        if self.stopping {
            return Ok(());
        }
        if let Some(reason) = self.refusal() {
            return self.skip(fire_ms, reason);
        }
        if let Err(e) = self.settle().await {
            return self.skip(fire_ms, SkipReason::RegistryError(e.to_string()));
        }
        if self.in_flight.is_some() {
            if kind == FireKind::Manual {
                self.manual_pending = true;
                return Ok(());
            }
            // As ElasticJob: every item this instance owns owes the skipped fire one catch-up.
            return self.misfire(fire_ms).await;
        }
        if let Some(diff_ms) = self.clock_skew().await? {
            return self.skip(fire_ms, SkipReason::ClockSkew { diff_ms });
        }
        if !self.ensure_sharded().await? {
            return self.skip(fire_ms, SkipReason::ShardingTimeout);
        }
        let mut items = self.my_items()?;
        if let Some(only) = only {
            items.retain(|n| only.contains(n));
        }
        if items.is_empty() {
            return self.skip(fire_ms, SkipReason::NoItems);
        }
        let marked = self.config.monitor_execution;
        if marked {
            let shared = self.shared.clone();
            let registry = shared.registry.as_ref();
            let mark = self.mark(fire_ms);
            match execution::start(registry, &self.shared.cache, &self.paths, &items, &mark).await?
            {
                Start::Marked => {}
                // A failover taker still runs one of our items: it is a misfire here too.
                Start::AlreadyRunning(_) => return self.misfire(fire_ms).await,
            }
        }
        self.launch(fire_ms, kind, items.clone(), Vec::new(), marked);
        self.distribute_once(GuaranteeStage::Started, fire_ms, &items).await
    }

    /// Records a stage of a fire for the distribute-once listeners, and runs them (on their own
    /// task, so that a slow listener delays nothing) if this instance completed the set.
    async fn distribute_once(
        &self,
        stage: GuaranteeStage,
        fire_ms: i64,
        items: &[u32],
    ) -> Result<()> {
        if self.shared.once_listeners.is_empty() || items.is_empty() {
            return Ok(());
        }
        let total = self.config.checked_total_count()?;
        if !guarantee::record(self.shared.registry.as_ref(), &self.paths, stage, items, total)
            .await?
        {
            return Ok(());
        }
        let listeners = self.shared.once_listeners.clone();
        let job = self.name().to_owned();
        self.shared.handles.spawner.spawn(Box::pin(async move {
            for listener in listeners {
                match stage {
                    GuaranteeStage::Started => listener.all_started(&job, fire_ms).await,
                    GuaranteeStage::Completed => listener.all_completed(&job, fire_ms).await,
                }
            }
        }));
        Ok(())
    }

    /// The enabled items this instance owns, ascending.
    fn my_items(&self) -> Result<Vec<u32>> {
        let total = self.config.checked_total_count()?;
        let cache = self.shared.cache.read();
        Ok(sharding::items_of(&cache, &self.paths, self.shared.instance.as_str(), total)
            .into_iter()
            .filter(|&n| !execution::item_disabled(&cache, &self.paths, n))
            .collect())
    }

    /// Skips the fire at `fire_ms` because this instance still runs; with `misfire` on, its items
    /// owe one catch-up run for it.
    async fn misfire(&mut self, fire_ms: i64) -> Result<()> {
        if self.config.misfire {
            let items = self.my_items()?;
            let shared = self.shared.clone();
            execution::mark_misfire(
                shared.registry.as_ref(),
                &shared.cache,
                &self.paths,
                &items,
                fire_ms,
            )
            .await?;
        }
        self.skip(fire_ms, SkipReason::Misfire)
    }

    /// Whether any item of the job owes a catch-up run.
    fn misfire_owed(&self) -> bool {
        let total = self.config.checked_total_count().unwrap_or(0);
        let all: Vec<u32> = (0..total).collect();
        !execution::misfired(&self.shared.cache.read(), &self.paths, &all).is_empty()
    }

    /// A `running` mark for a new run of the fire at `fire_ms`.
    fn mark(&mut self, fire_ms: i64) -> RunningMark {
        self.runs += 1;
        RunningMark { fire_ms, run: self.runs, instance: self.shared.instance.as_str().to_owned() }
    }

    /// The instance-node update that records run `run` of the fire at `fire_ms` as completed.
    fn completion(&mut self, run: u64, fire_ms: i64) -> Completion {
        if run >= self.completed.run {
            self.completed = Completed { run, fire_ms: fire_ms.max(self.completed.fire_ms) };
        }
        Completion {
            instance_path: self.paths.instance(self.shared.instance.as_str()),
            instance_data: self.shared.instance.node_data(self.completed).into_bytes(),
        }
    }

    /// Why no new work may start right now, if that is so.
    fn refusal(&self) -> Option<SkipReason> {
        if !self.connected {
            return Some(SkipReason::Disconnected);
        }
        if self.config.disabled {
            return Some(SkipReason::JobDisabled);
        }
        let cache = self.shared.cache.read();
        if cache.text(&self.paths.server(self.shared.instance.ip())).as_deref() == Some(DISABLED) {
            return Some(SkipReason::ServerDisabled);
        }
        None
    }

    fn skip(&self, fire_ms: i64, reason: SkipReason) -> Result<()> {
        self.emit(SchedulerEvent::Skipped { job: self.name().to_owned(), fire_ms, reason });
        Ok(())
    }

    /// `maxTimeDiffSeconds`: the difference between the local and the registry clock, when it
    /// exceeds the allowed one.
    async fn clock_skew(&self) -> Result<Option<i64>> {
        let Some(max) = self.config.max_time_diff() else { return Ok(None) };
        let registry_ms = self.shared.registry.registry_time().await?;
        let diff_ms = self.shared.handles.clock.now_ms() - registry_ms;
        let max_ms = i64::try_from(max.as_millis()).unwrap_or(i64::MAX);
        Ok((diff_ms.abs() > max_ms).then_some(diff_ms))
    }

    /// Makes sure the assignment is current before a fire: the leader reshards when flagged,
    /// the others wait for its commit on the watch. `false` when that took too long.
    async fn ensure_sharded(&mut self) -> Result<bool> {
        let timeout = self.shared.settings.sharding_timeout;
        for _ in 0..RESHARD_ATTEMPTS {
            if !sharding::pending(&self.shared.cache.read(), &self.paths) {
                return Ok(true);
            }
            if !self.is_leader() {
                let paths = self.paths.clone();
                let leaderless = |c: &super::cache::Cache| election::leader(c, &paths).is_none();
                let settled = self
                    .shared
                    .cache
                    .wait_until(timeout, |c| !sharding::pending(c, &paths) || leaderless(c))
                    .await;
                if !settled {
                    return Ok(false);
                }
                if leaderless(&self.shared.cache.read()) {
                    self.bid_for_leadership().await?;
                }
                continue;
            }
            let paths = self.paths.clone();
            if !self.shared.cache.wait_until(timeout, |c| !sharding::any_running(c, &paths)).await {
                return Ok(false);
            }
            let total = self.config.checked_total_count()?;
            let outcome = sharding::reshard(
                self.shared.registry.as_ref(),
                &self.shared.cache,
                &self.paths,
                self.name(),
                self.config.job_sharding_strategy_type.as_deref(),
                &self.shared.settings.strategies,
                total,
            )
            .await?;
            match outcome {
                Reshard::Committed(assignment) => {
                    let assignment = assignment
                        .iter()
                        .map(|(i, items)| (i.to_owned(), items.to_vec()))
                        .collect();
                    self.emit(SchedulerEvent::Sharded { job: self.name().to_owned(), assignment });
                    return Ok(true);
                }
                Reshard::NotNeeded => return Ok(true),
                // Let the watch catch up with whatever moved, then compute again.
                Reshard::Raced => {
                    let seen = self.shared.cache.read().revision();
                    self.shared.cache.wait_until(RACE_PAUSE, |c| c.revision() > seen).await;
                }
            }
        }
        Ok(false)
    }

    fn launch(
        &mut self,
        fire_ms: i64,
        kind: FireKind,
        items: Vec<u32>,
        failed_over: Vec<u32>,
        marked: bool,
    ) {
        let cancel = CancellationToken::new();
        let item_parameters = self.config.item_parameters().unwrap_or_default();
        let total = self.config.checked_total_count().unwrap_or(1);
        let source = match kind {
            FireKind::Scheduled => ExecutionSource::Normal,
            FireKind::Misfire => ExecutionSource::Misfire,
            FireKind::Manual => ExecutionSource::Manual,
            FireKind::Failover => ExecutionSource::Failover,
        };
        let info = FireInfo {
            job_name: self.name().to_owned(),
            instance: self.shared.instance.as_str().to_owned(),
            fire_time_ms: fire_ms,
            source,
            items: items.clone(),
        };
        let job_parameter = self.config.job_parameter.clone().unwrap_or_default();
        let contexts: Vec<ShardingContext> = items
            .iter()
            .map(|&item| {
                let token = self.fencing_token(item);
                self.emit(SchedulerEvent::ItemStarted {
                    job: self.name().to_owned(),
                    item,
                    fire_ms,
                    kind,
                    token,
                });
                let parameter = item_parameters.get(&item).cloned().unwrap_or_default();
                ShardingContext::new(&info, total, job_parameter.clone(), item, parameter)
                    .with_fencing(token, cancel.child_token())
            })
            .collect();
        let request = FireRequest {
            info,
            contexts,
            max_parallel_items: self.shared.settings.max_parallel_items,
        };
        let executor = self.executor.clone();
        let job = self.job.clone();
        let me = self.me.clone();
        let run = self.runs;
        self.in_flight = Some(InFlight { fire_ms, run, items, failed_over, marked, cancel });
        self.shared.handles.spawner.spawn(Box::pin(async move {
            let report = executor.run(&job, request).await;
            let _ = me.send(JobEvent::Done(Box::new(Finished { report })));
        }));
    }

    async fn on_done(&mut self, finished: Finished) -> Result<()> {
        if self.stopping {
            // `stop` removes the markers itself, in the order that lets cancelled items fail over.
            self.finished_while_stopping = Some(finished);
            return Ok(());
        }
        let Some(flight) = self.in_flight.take() else { return Ok(()) };
        self.report(&flight, &finished);
        let completed = finished.report.completed_items();
        self.distribute_once(GuaranteeStage::Completed, flight.fire_ms, &completed).await?;
        if flight.marked {
            let completion = self.completion(flight.run, flight.fire_ms);
            self.unfinished = Some(Unfinished {
                items: flight.items.clone(),
                failed_over: flight.failed_over.clone(),
                completion: Some(completion),
            });
            self.settle().await?;
        }
        // One catch-up run for the items whose fires were skipped while they ran.
        // Only once the assignment is current (a skipped fire may have flagged a reshard): the
        // markers follow the items to their new owners.
        if self.config.misfire && self.misfire_owed() && self.ensure_sharded().await? {
            let owed =
                execution::misfired(&self.shared.cache.read(), &self.paths, &self.my_items()?);
            if let Some(fire_ms) = owed.iter().map(|&(_, fire)| fire).max() {
                let items: Vec<u32> = owed.iter().map(|&(n, _)| n).collect();
                let shared = self.shared.clone();
                execution::clear_misfire(
                    shared.registry.as_ref(),
                    &shared.cache,
                    &self.paths,
                    &items,
                )
                .await?;
                return self.fire(fire_ms, FireKind::Misfire, Some(items)).await;
            }
        }
        // Busy survivors take their share of the failover queue after their own run.
        if self.take_failover().await? {
            return Ok(());
        }
        if std::mem::take(&mut self.manual_pending) {
            let now = self.shared.handles.clock.now_ms();
            return self.fire(now, FireKind::Manual, None).await;
        }
        Ok(())
    }

    /// Reports the end of every item of a fire, and a failure the error handler raised.
    fn report(&self, flight: &InFlight, finished: &Finished) {
        for (&item, outcome) in &finished.report.items {
            let ok = matches!(outcome, ItemOutcome::Completed);
            self.emit(SchedulerEvent::ItemFinished {
                job: self.name().to_owned(),
                item,
                fire_ms: flight.fire_ms,
                ok,
            });
        }
        if let (Some(failure), Some(&item)) =
            (&finished.report.raised, finished.report.raised_items.first())
        {
            let (job, fire_ms, error) =
                (self.name().to_owned(), flight.fire_ms, failure.to_string());
            self.emit(SchedulerEvent::FireFailed { job, fire_ms, item, error });
        }
    }

    /// The fencing token of `item`: the version of its owner node, which every change of owner
    /// (a reshard commit, a failover claim) advances.
    fn fencing_token(&self, item: u32) -> u64 {
        let owner = self.paths.item_node(item, ItemNode::Instance);
        self.shared.cache.read().get(&owner).map_or(0, |n| n.version)
    }

    // ------------------------------------------------------------------ failover

    fn failover_enabled(&self) -> bool {
        self.config.failover && self.config.monitor_execution
    }

    /// Queues the items `dead` was running, and, with `misfire` on, the items whose fires it
    /// missed before its death was noticed (see [`crate::failover`]).
    async fn queue_orphans_of(&mut self, dead: &str) -> Result<()> {
        let total = self.config.checked_total_count()?;
        let now = self.shared.handles.clock.now_ms();
        let orphans = {
            let cache = self.shared.cache.read();
            let mut orphans = failover::orphans_of(&cache, &self.paths, dead, total);
            if let (true, Some(schedule)) = (self.config.misfire, &self.schedule) {
                let missed =
                    failover::missed_by(&cache, &self.paths, dead, total, schedule, now, &orphans);
                orphans.extend(missed);
            }
            orphans
        };
        let shared = self.shared.clone();
        let registry = shared.registry.as_ref();
        failover::queue(registry, &self.shared.cache, &self.paths, dead, &orphans).await?;
        Ok(())
    }

    /// When idle: claims this instance's share of the failover queue and runs it at once.
    /// Returns whether a failover run started.
    async fn take_failover(&mut self) -> Result<bool> {
        if !self.failover_enabled()
            || self.in_flight.is_some()
            || self.stopping
            || self.refusal().is_some()
        {
            return Ok(false);
        }
        let me = self.shared.instance.as_str().to_owned();
        let share = {
            let cache = self.shared.cache.read();
            let queue = failover::queued(&cache, &self.paths);
            failover::share_of(&queue, &sharding::eligible_instances(&cache, &self.paths), &me)
        };
        let shared = self.shared.clone();
        let registry = shared.registry.as_ref();
        for orphan in share {
            if failover::claim(registry, &self.shared.cache, &self.paths, orphan.item, &me)
                .await?
                .is_some()
            {
                self.emit(SchedulerEvent::FailoverClaimed {
                    job: self.name().to_owned(),
                    item: orphan.item,
                    fire_ms: orphan.fire_ms,
                });
                self.failover_backlog.entry(orphan.fire_ms).or_default().push(orphan.item);
            }
        }
        self.run_failover_backlog().await
    }

    /// Runs the earliest fire of claimed failover items, once their old markers are gone.
    async fn run_failover_backlog(&mut self) -> Result<bool> {
        let Some((fire_ms, items)) = self.failover_backlog.pop_first() else { return Ok(false) };
        let paths = self.paths.clone();
        let waiting = items.clone();
        let released = self
            .shared
            .cache
            .wait_until(self.shared.settings.sharding_timeout, |c| {
                !execution::any_running(c, &paths, &waiting)
            })
            .await;
        if !released {
            // The old owner still holds the markers: try again after the next change.
            self.failover_backlog.insert(fire_ms, items);
            return Ok(false);
        }
        let mark = self.mark(fire_ms);
        let shared = self.shared.clone();
        let registry = shared.registry.as_ref();
        match execution::start(registry, &self.shared.cache, &self.paths, &items, &mark).await? {
            Start::Marked => {
                self.launch(fire_ms, FireKind::Failover, items.clone(), items, true);
                Ok(true)
            }
            Start::AlreadyRunning(_) => {
                self.failover_backlog.insert(fire_ms, items);
                Ok(false)
            }
        }
    }

    // ------------------------------------------------------------------ registry changes

    fn is_leader(&self) -> bool {
        election::leader(&self.shared.cache.read(), &self.paths).as_deref()
            == Some(self.shared.instance.as_str())
    }

    async fn bid_for_leadership(&mut self) -> Result<()> {
        if !self.connected || self.stopping || self.refusal() == Some(SkipReason::ServerDisabled) {
            return Ok(());
        }
        let shared = self.shared.clone();
        let registry = shared.registry.as_ref();
        let lead = election::try_lead(
            registry,
            &self.shared.cache,
            &self.paths,
            self.shared.instance.as_str(),
        )
        .await?;
        if lead && !self.was_leader {
            self.emit(SchedulerEvent::LeaderElected { job: self.name().to_owned() });
        }
        self.was_leader = lead;
        Ok(())
    }

    async fn on_change(&mut self, node: JobNode) -> Result<()> {
        if self.stopping {
            return Ok(());
        }
        let shared = self.shared.clone();
        let registry = shared.registry.as_ref();
        let me = self.shared.instance.as_str();
        match node {
            JobNode::Config => self.on_config_change().await?,
            JobNode::LeaderInstance => {
                let leader = election::leader(&self.shared.cache.read(), &self.paths);
                self.was_leader = leader.as_deref() == Some(me);
                if leader.is_none() {
                    self.bid_for_leadership().await?;
                }
            }
            JobNode::Instance(id) if id == me => {
                // Our node vanished while our session lives: an operator shut this instance down.
                let gone = !self.shared.cache.read().exists(&self.paths.instance(me));
                if gone && self.connected {
                    // The survivors take our running items over at once: cancel them now.
                    self.cancel_running();
                    self.stop("instance node removed by an operator").await?;
                    self.shared.command(Command::Forget { job: self.name().to_owned() });
                }
            }
            JobNode::Instance(id) => {
                let gone = !self.shared.cache.read().exists(&self.paths.instance(&id));
                let changed =
                    if gone { self.members.remove(&id) } else { self.members.insert(id.clone()) };
                if !changed {
                    return Ok(());
                }
                if gone && self.failover_enabled() {
                    self.queue_orphans_of(&id).await?;
                }
                // Membership changed: the leader flags a reshard before the next fire.
                if self.is_leader() {
                    let shared = self.shared.clone();
                    let registry = shared.registry.as_ref();
                    sharding::set_necessary(registry, &self.shared.cache, &self.paths).await?;
                }
                // A departure changes the shares of the failover queue.
                self.take_failover().await?;
            }
            JobNode::FailoverItem(_) => {
                self.take_failover().await?;
            }
            JobNode::Server(ip) => {
                let disabled = self.shared.cache.read().text(&self.paths.server(&ip)).as_deref()
                    == Some(DISABLED);
                if ip == self.shared.instance.ip() && disabled && self.is_leader() {
                    // A leader on a disabled server abdicates; the survivors elect again.
                    sharding::set_necessary(registry, &self.shared.cache, &self.paths).await?;
                    election::abdicate(registry, &self.shared.cache, &self.paths, me).await?;
                    self.was_leader = false;
                } else if self.is_leader() {
                    sharding::set_necessary(registry, &self.shared.cache, &self.paths).await?;
                }
            }
            JobNode::Trigger(id) if id == me => {
                let path = self.paths.trigger(me);
                if self.shared.cache.read().exists(&path) {
                    registry.delete_if_exists(&path).await?;
                    self.shared.cache.update(|c| c.deleted(&path));
                    let now = self.shared.handles.clock.now_ms();
                    self.fire(now, FireKind::Manual, None).await?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    async fn on_config_change(&mut self) -> Result<()> {
        let node = self.shared.cache.read().get(&self.paths.config()).cloned();
        let Some(node) = node else { return Ok(()) };
        if self.config_version.replace(node.version) == Some(node.version) {
            return Ok(());
        }
        let data = node.data;
        let parsed = store::parse_stored(self.name(), &data, &self.shared.known).and_then(|c| {
            let schedule = schedule_of(&c).map_err(|e| e.to_string())?;
            let executor = executor_for(&self.shared, &c).map_err(|e| e.to_string())?;
            Ok((c, schedule, executor))
        });
        let (config, schedule, executor) = match parsed {
            Ok(ok) => ok,
            Err(reason) => {
                self.emit(SchedulerEvent::ConfigRejected { job: self.name().to_owned(), reason });
                return Ok(());
            }
        };
        if config == self.config {
            return Ok(());
        }
        let reschedule =
            config.cron != self.config.cron || config.time_zone != self.config.time_zone;
        let reshard = config.sharding_total_count != self.config.sharding_total_count
            || config.job_sharding_strategy_type != self.config.job_sharding_strategy_type;
        let failover_off = self.config.failover && !config.failover;
        self.config = config;
        self.schedule = schedule;
        self.executor = Arc::new(executor);
        self.emit(SchedulerEvent::ConfigApplied { job: self.name().to_owned() });
        if reschedule {
            self.arm_after(self.shared.handles.clock.now_ms());
        }
        if reshard {
            sharding::set_necessary(self.shared.registry.as_ref(), &self.shared.cache, &self.paths)
                .await?;
        }
        // Failover turned off: orphans waiting for a taker will not get one; the leader clears
        // the queue so that no stale entry is taken if it is turned on again.
        if failover_off && self.is_leader() {
            failover::clear_queue(self.shared.registry.as_ref(), &self.shared.cache, &self.paths)
                .await?;
            self.failover_backlog.clear();
        }
        Ok(())
    }

    async fn on_session(&mut self, event: SessionEvent) -> Result<()> {
        match event {
            SessionEvent::Suspended | SessionEvent::Expired | SessionEvent::Closed => {
                self.connected = false;
                self.was_leader = false;
                if event == SessionEvent::Expired {
                    // Our markers and ownership are gone with the session: running items may
                    // now be taken over elsewhere, so tell them to stop.
                    if let Some(flight) = &self.in_flight {
                        flight.cancel.cancel();
                    }
                }
            }
            SessionEvent::Reconnected => {
                self.connected = true;
                if !self.stopping {
                    self.settle().await?;
                }
            }
            SessionEvent::Connected { .. } => {
                let was_connected = std::mem::replace(&mut self.connected, true);
                if !was_connected && !self.stopping {
                    // A new session after an expiry: register again (ElasticJob shut the job
                    // down for good here, #1857). The old session's markers are gone with it.
                    self.registered = false;
                    self.settle().await?;
                }
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ stopping

    /// Tells the items in flight to stop: this instance may have lost them.
    fn cancel_running(&self) {
        if let Some(flight) = &self.in_flight {
            flight.cancel.cancel();
        }
    }

    /// Stops the job here: no new fires; the fire in flight may finish until the shutdown
    /// deadline, then it is cancelled; this instance's nodes leave the registry.
    ///
    /// The order of the last writes matters to failover. Items that completed lose their
    /// `running` markers before the instance node goes: nothing to take over. Items that did not
    /// complete keep their markers until after the instance node is gone, so the survivors see
    /// them as orphans and run them again (DESIGN section 8: failover after a graceful stop).
    async fn stop(&mut self, reason: &str) -> Result<()> {
        if self.stopping {
            return Ok(());
        }
        self.stopping = true;
        self.shared.command(Command::Forget { job: self.name().to_owned() });
        if self.in_flight.is_some() {
            let deadline = self.shared.settings.shutdown_timeout;
            if tokio::time::timeout(deadline, self.await_done()).await.is_err() {
                self.cancel_running();
                let _ = tokio::time::timeout(CANCEL_GRACE, self.await_done()).await;
            }
        }
        let flight = self.in_flight.take();
        let finished = self.finished_while_stopping.take();
        if let (Some(flight), Some(finished)) = (&flight, &finished) {
            self.report(flight, finished);
        }
        let complete = match (&flight, &finished) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(_), Some(f)) => {
                f.report.items.values().all(|o| !matches!(o, ItemOutcome::Cancelled))
            }
        };
        if flight.is_some() && finished.is_none() {
            tracing::warn!(
                job = self.name(),
                "items did not return within the cancel grace; their takers may overlap them"
            );
        }
        let shared = self.shared.clone();
        let registry = shared.registry.as_ref();
        let me = self.shared.instance.as_str().to_owned();
        if self.connected {
            election::abdicate(registry, &self.shared.cache, &self.paths, &me).await?;
            let node = self.paths.instance(&me);
            if let Some(flight) = flight.as_ref().filter(|f| f.marked && complete) {
                let completion = self.completion(flight.run, flight.fire_ms);
                let shared = self.shared.clone();
                let registry = shared.registry.as_ref();
                execution::finish(
                    registry,
                    &self.shared.cache,
                    &self.paths,
                    &flight.items,
                    &flight.failed_over,
                    Some(&completion),
                )
                .await?;
                // Let watchers read the recorded completion before the node that holds it goes
                // (a ZooKeeper watcher reads data after the event, and would miss it).
                tokio::time::sleep(STOP_PAUSE).await;
            }
            let shared = self.shared.clone();
            let registry = shared.registry.as_ref();
            registry.delete_if_exists(&node).await?;
            self.shared.cache.update(|c| c.deleted(&node));
            if let Some(flight) = flight.as_ref().filter(|f| f.marked && !complete) {
                execution::finish(
                    registry,
                    &self.shared.cache,
                    &self.paths,
                    &flight.items,
                    &flight.failed_over,
                    None,
                )
                .await?;
            }
        }
        self.emit(SchedulerEvent::JobStopped {
            job: self.name().to_owned(),
            reason: reason.to_owned(),
        });
        Ok(())
    }

    /// Processes mailbox events until the fire in flight reports back (other events are
    /// dropped: the job is stopping).
    async fn await_done(&mut self) {
        while self.finished_while_stopping.is_none() {
            match self.mailbox.recv().await {
                Some(JobEvent::Done(finished)) => self.finished_while_stopping = Some(*finished),
                Some(JobEvent::Stop { reply: Some(reply), .. }) => {
                    let _ = reply.send(());
                }
                Some(_) => {}
                None => return,
            }
        }
    }
}

/// How often a leader retries a reshard that raced with a membership change before giving the
/// fire up.
const RESHARD_ATTEMPTS: usize = 8;
/// How long a leader waits for the watch after a raced reshard.
const RACE_PAUSE: Duration = Duration::from_millis(200);
/// The pause between recording the last completed run and removing the instance node on stop.
const STOP_PAUSE: Duration = Duration::from_millis(100);
/// How long cancelled items get to return after the shutdown deadline.
const CANCEL_GRACE: Duration = Duration::from_secs(1);

fn executor_for(shared: &Shared, config: &JobConfig) -> Result<Executor> {
    let handler = shared.error_handlers.resolve(config.job_error_handler_type.as_deref())?.clone();
    let executor = Executor::new(shared.handles.clone()).with_error_handler(handler);
    Ok(shared.listeners.iter().cloned().fold(executor, Executor::with_listener))
}

fn schedule_of(config: &JobConfig) -> Result<Option<CronSchedule>> {
    match config.cron_expression() {
        Some(cron) => {
            Ok(Some(CronSchedule::parse(cron, config.time_zone.as_deref().unwrap_or(""))?))
        }
        None => Ok(None),
    }
}
