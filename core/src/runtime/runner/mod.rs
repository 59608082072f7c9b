//! One job on one instance: a task that owns the job's state, reacts to the events the driver
//! routes to it (fires, registry changes of the job's subtree, session changes) and performs the
//! job's registry operations. Jobs are independent tasks, so a slow registry call of one job
//! never delays another's fire; the driver stays free of I/O.
//!
//! Layout: this file holds the runner's state, start-up, registration and event dispatch;
//! `firing` the fires themselves, `failover_work` this runner's part in failover, `changes`
//! its reactions to the registry and the session, `stopping` the orderly stop.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::events::{FireKind, SchedulerEvent, SkipReason};
use super::mailbox;
use super::timer::TimerKind;
use super::{Command, Shared};
use crate::config::{store, JobConfig};
use crate::cron::CronSchedule;
use crate::election;
use crate::error::{Error, Result};
use crate::execution::{self, Completion, OwnerCheck, RunningMark, Start};
use crate::failover;
use crate::guarantee;
use crate::job::{
    ExecutionSource, Executor, FireInfo, FireReport, FireRequest, ItemOutcome, Job, ShardingContext,
};
use crate::layout::{GuaranteeStage, ItemNode, JobNode, JobPaths};
use crate::registry::{CreateMode, RegistryError, RegistryExt, SessionEvent};
use crate::runtime::instance::Completed;
use crate::sharding::service::{self as sharding, Reshard, DISABLED};

mod changes;
mod failover_work;
mod firing;
mod stopping;

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
    /// `Shared::sessions_expired` when the markers were written: they are ephemeral, so once a
    /// session expired since, they are gone, and whatever sits at their paths is someone else's.
    session: u64,
    cancel: CancellationToken,
}

/// The markers of a finished run still to remove.
#[derive(Debug, Clone)]
struct Unfinished {
    items: Vec<u32>,
    failed_over: Vec<u32>,
    completion: Option<Completion>,
    /// The session the markers were written in (see `InFlight::session`).
    session: u64,
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
    mailbox: mailbox::Receiver<JobEvent>,
    me: mailbox::Sender<JobEvent>,
    /// Cancelled when the job is told to stop, so that waits inside a fire end at once.
    halt: CancellationToken,
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
    /// `Shared::sessions_expired` when this instance last registered.
    registered_in: u64,
    unfinished: Option<Unfinished>,
    /// The items of the run our session's expiry interrupted, queued for failover once we are
    /// registered again.
    interrupted: Vec<(u32, i64)>,
    /// The instances of the job as last seen, to tell joins and departures from data changes
    /// (every completed run rewrites an instance node).
    members: BTreeSet<String>,
    /// Claimed failover items not yet run, by the fire they missed.
    failover_backlog: BTreeMap<i64, Vec<u32>>,
    stopping: bool,
    /// The fire time the driver's timer is armed for, until its `Fire` event is handled: a stop
    /// records it as skipped if it fell due before the stop (see `stop`).
    armed_fire: Option<i64>,
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
        mailbox: mailbox::Receiver<JobEvent>,
        me: mailbox::Sender<JobEvent>,
        halt: CancellationToken,
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
            halt,
            connected: true,
            in_flight: None,
            manual_pending: false,
            failover_backlog: BTreeMap::new(),
            members: BTreeSet::new(),
            registered: false,
            unfinished: None,
            interrupted: Vec::new(),
            runs: 0,
            completed: Completed::default(),
            stopping: false,
            armed_fire: None,
            registered_in: 0,
            was_leader: false,
            config_version: None,
            finished_while_stopping: None,
        };
        if let Err(e) = runner.register().await {
            // Leave no instance node behind for a job this scheduler will not run: the leader
            // would give it items that nobody runs. Best effort: the error that matters is `e`.
            let node = runner.paths.instance(runner.shared.instance.as_str());
            if let Err(cleanup) = runner.shared.registry.delete_if_exists(&node).await {
                tracing::warn!(job = runner.name(), error = %cleanup, "could not remove the instance node of a job that failed to start");
            }
            runner.shared.cache.update(|c| c.deleted(&node));
            return Err(e);
        }
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
        self.registered_in = self.shared.sessions_expired.load(Ordering::SeqCst);
        let now = self.shared.handles.clock.now_ms();
        let base = u64::try_from(now).unwrap_or(0).saturating_mul(1000);
        self.runs = self.runs.max(base);
        // Nothing before this registration is owed by it.
        self.completed = Completed { run: self.runs, fire_ms: now };
        let data = instance.node_data(self.completed);
        let mut predecessor = None;
        match registry.create(&node, data.as_bytes(), CreateMode::Ephemeral).await {
            Ok(_) => {}
            // Our own node from a session that is not gone yet (this process restarted), or a
            // twin instance id: replace it, remembering what it recorded.
            Err(RegistryError::NodeExists { .. }) => {
                predecessor = registry.get(&node).await?;
                registry.delete(&node, None).await?;
                registry.create(&node, data.as_bytes(), CreateMode::Ephemeral).await?;
            }
            Err(e) => return Err(e.into()),
        }
        self.shared.cache.update(|c| c.wrote(&node, data.as_bytes(), 0, true));
        // Replacing our node hides the departure of our previous session from the survivors
        // (they see the node still there), so this instance queues what that session left
        // behind itself.
        self.queue_what_our_last_session_left(predecessor.as_ref(), base).await?;
        self.members =
            self.shared.cache.read().children(&self.paths.instances()).into_iter().collect();
        self.flag_reshard().await?;
        self.bid_for_leadership().await?;
        self.registered = true;
        self.arm_after(self.shared.handles.clock.now_ms());
        self.arm_reconcile();
        Ok(())
    }

    /// Queues for failover the items our previous session (an expired one, or the one of a
    /// process that ran under our id before a restart) was running, and with `misfire` on, the
    /// fires it missed; the survivors cannot tell, as our instance node never went away for them.
    async fn queue_what_our_last_session_left(
        &mut self,
        predecessor: Option<&crate::registry::Node>,
        first_run: u64,
    ) -> Result<()> {
        let interrupted = std::mem::take(&mut self.interrupted);
        if !self.failover_enabled() {
            return Ok(());
        }
        let me = self.shared.instance.as_str().to_owned();
        let total = self.config.checked_total_count()?;
        let now = self.shared.handles.clock.now_ms();
        let orphans = {
            let cache = self.shared.cache.read();
            let mut orphans =
                failover::left_by_predecessor(&cache, &self.paths, &me, total, first_run);
            for (item, fire_ms) in interrupted {
                if item < total && orphans.iter().all(|o| o.item != item) {
                    let rank = orphans.len() as u64;
                    orphans.push(failover::Orphan { item, fire_ms, rank });
                }
            }
            if let (true, Some(schedule), Some(old)) =
                (self.config.misfire, &self.schedule, predecessor)
            {
                let since = Completed::parse(&old.data).fire_ms;
                orphans.extend(failover::missed_since(
                    &cache,
                    &self.paths,
                    &me,
                    total,
                    schedule,
                    since,
                    now,
                    &orphans,
                ));
            }
            orphans
        };
        let registry = self.shared.registry.as_ref();
        failover::queue(registry, &self.shared.cache, &self.paths, &me, &orphans).await?;
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

    /// The leader's periodic repair: if an item has no live, enabled owner
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
            self.flag_reshard().await?;
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
            if !self.same_session(work.session) {
                // The markers went with the expired session (and the completion with its
                // instance node); their paths may hold a failover taker's markers by now.
                self.unfinished = None;
                return Ok(());
            }
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

    /// Asks for a reshard before the next fire.
    async fn flag_reshard(&self) -> Result<()> {
        let now = self.shared.handles.clock.now_ms();
        sharding::set_necessary(self.shared.registry.as_ref(), &self.shared.cache, &self.paths, now)
            .await
    }

    /// Processes events until the job stops.
    ///
    /// Takes the runner boxed: an `async fn` by value holds its argument twice in its future
    /// (the argument, and the local it moves into), which doubled an idle job's memory.
    pub async fn run(mut self: Box<Self>) {
        while let Some(event) = self.mailbox.recv().await {
            let stop = matches!(event, JobEvent::Stop { .. });
            // Boxed: the handling of an event (a fire, a reshard, a stop) is a large state
            // machine, and unboxed it would be part of every idle runner's future
            // (`docs/targets.md`: < 10 KiB per job). One allocation per event, freed when it is handled.
            if let Err(e) = Box::pin(self.handle(event)).await {
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
                self.disarmed(fire_ms);
                self.arm_after(fire_ms);
                // A fire that fails on the registry is reported as skipped, with its time.
                if let Err(e) = self.fire(fire_ms, FireKind::Scheduled, None).await {
                    self.skip(fire_ms, SkipReason::RegistryError(e.to_string()))?;
                }
                Ok(())
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
    fn arm_after(&mut self, after_ms: i64) {
        let now = self.shared.handles.clock.now_ms();
        let mut next = None;
        if let Some(schedule) = &self.schedule {
            // Fires that fell due while this runner was held up are not dropped silently: the
            // latest is armed at its own, past, time (so it runs now or is recorded as a
            // misfire); older ones are reported late.
            let mut overdue =
                schedule.iter_after(after_ms).take_while(|&t| t <= now).take(MAX_OVERDUE_SCAN);
            let mut latest = overdue.next();
            for t in overdue {
                if let Some(older) = latest.replace(t) {
                    self.emit(SchedulerEvent::Skipped {
                        job: self.name().to_owned(),
                        fire_ms: older,
                        reason: SkipReason::Late,
                    });
                }
            }
            next = latest.or_else(|| schedule.next_after(after_ms.max(now)));
        }
        self.armed_fire = next;
        self.shared.command(Command::Arm {
            job: self.name().to_owned(),
            kind: TimerKind::Fire,
            at_ms: next,
        });
        if let Some(next_fire_ms) = next {
            self.emit(SchedulerEvent::Armed { job: self.name().to_owned(), next_fire_ms });
        }
    }
}

impl JobRunner {
    /// Whether no session expired since `session` (a `Shared::sessions_expired` reading).
    fn same_session(&self, session: u64) -> bool {
        self.shared.sessions_expired.load(Ordering::SeqCst) == session
    }

    /// Notes that the timer's `Fire` event for `fire_ms` reached the runner.
    fn disarmed(&mut self, fire_ms: i64) {
        if self.armed_fire == Some(fire_ms) {
            self.armed_fire = None;
        }
    }
}

/// How many overdue fires `arm_after` looks through (a per-second cron after a long stall).
const MAX_OVERDUE_SCAN: usize = 100_000;
/// How often a leader retries a reshard that raced with a membership change before giving the
/// fire up.
const RESHARD_ATTEMPTS: usize = 8;
/// How often a fire is decided again after its start transaction found the assignment replaced.
const REASSIGNED_ATTEMPTS: usize = 4;
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
