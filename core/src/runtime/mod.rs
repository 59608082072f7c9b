//! The scheduler runtime: any number of jobs in one process, on one registry session, one
//! subtree watch and one timer heap (`docs/architecture.md`). The only module that does registry
//! I/O for the protocol, reads the clock and spawns tasks.
//!
//! ```no_run
//! # async fn demo(registry: std::sync::Arc<dyn shardcron_core::registry::CoordinatorRegistry>) -> shardcron_core::Result<()> {
//! use shardcron_core::config::JobConfig;
//! use shardcron_core::job::Job;
//! use shardcron_core::runtime::SchedulerBuilder;
//!
//! let scheduler = SchedulerBuilder::new(registry).start().await?;
//! let config = JobConfig::builder("billing").cron("0/5 * * * * ?").sharding_total_count(3).build()?;
//! scheduler
//!     .add_job(config, Job::from_fn(|ctx| async move {
//!         println!("item {} of {}", ctx.item, ctx.job_name);
//!         Ok(())
//!     }))
//!     .await?;
//! // ... later: running items finish, this instance leaves; at most 30 s.
//! scheduler.shutdown(std::time::Duration::from_secs(30)).await?;
//! # Ok(()) }
//! ```
//!
//! ## Lifecycle
//! - [`Scheduler::shutdown`] stops gracefully within a deadline: no new fire starts, running
//!   items finish (up to [`Settings::shutdown_timeout`], then they are cancelled), this instance
//!   removes its nodes from the registry, and the event streams end.
//! - Dropping the last [`Scheduler`] handle stops its tasks at once, without that wait: running
//!   items are dropped where they are (blocking closures run to their end), nothing is written
//!   to the registry, and this instance's ephemeral nodes stay until the registry session ends
//!   (the other instances then take its items over). Shut down first to leave cleanly.
//! - The registry is the caller's: neither shuts it down. Close it when you are done with it.
//!
//! ## Events
//! [`Scheduler::events`] is an async stream over a bounded buffer
//! ([`SchedulerBuilder::event_capacity`]): a subscriber that falls behind is told how many events
//! it missed, and the scheduler never waits for it. [`SchedulerBuilder::event_sink`] calls a
//! function for every event, on a task of its own.
//!
//! ## Layout
//! - `driver`: the one task that owns the watch, the session stream and the timers.
//! - `runner`: one task per job: the I/O shell of the job's [`crate::protocol::job`] state
//!   machine (performs its registry requests, timers and launches, feeds back the results).
//! - `batch`: the group commit of the runners' transactions (those of one tick go out as one).
//! - `mailbox`: a runner's queue of events, small while the job is idle.
//! - `cache`: the watch-fed view of the namespace that fires read instead of the registry.
//! - `timer`, `instance`, `events`: the timer heap, this instance's id, the reported events.
//! - `lifetime`: what ends the tasks when the scheduler is dropped.

mod adopt;
mod batch;
pub(crate) mod cache;
mod driver;
mod events;
mod gates;
mod lifetime;
mod mailbox;
mod runner;
mod scope;
mod stop_signals;
pub(crate) mod timer;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

pub use crate::instance::InstanceId;
pub use adopt::{JobHandlers, Resolution};
pub use events::{
    EventFilter, EventSink, EventStream, EventsLagged, FireKind, SchedulerEvent, SkipReason,
    DEFAULT_EVENT_CAPACITY,
};

use crate::config::{JobConfig, KnownTypes};
use crate::error::{Error, Result};
use crate::guarantee::DistributeOnceListener;
use crate::handles::Handles;
use crate::job::{ErrorHandlers, Extensions, Job, JobListener};
use crate::registry::{CoordinatorRegistry, WatchEvent, WatchScope};
use crate::sharding::ShardingStrategies;
use batch::{Activity, TxnBatcher};
use cache::SharedCache;
use driver::Driver;
use events::{Events, SinksDrained};
use lifetime::{StopOnDrop, StoppableSpawner};
use runner::{JobEvent, JobRunner};
use tokio_util::sync::CancellationToken;

/// Tunables of a scheduler.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How many items of one fire run at once.
    pub max_parallel_items: usize,
    /// How long a fire waits for a reshard (followers) or for running items to end (leader).
    pub sharding_timeout: Duration,
    /// How long a stopping job waits for its running items before cancelling them.
    pub shutdown_timeout: Duration,
    /// The sharding strategies configs may name: the built-ins plus custom ones.
    pub strategies: ShardingStrategies,
    /// How long a `servers/{ip}` node that no live instance has the IP of stays before the
    /// job's leader removes it (ten minutes by default). Where IPs change with every restart
    /// (Kubernetes pods) they would pile up otherwise, as they do in ElasticJob. A node an
    /// operator set to `DISABLED` stays. `None` keeps them all.
    pub stale_server_grace: Option<Duration>,
    /// How far ahead of the wall clock the scheduler takes its fires ([`DEFAULT_FIRE_LEAD`],
    /// 50 ms, by default; zero: each at its time). The fire steps of a tick, the transaction
    /// that marks its items `running` and their launches happen that much early, and each item
    /// then waits until the wall clock reaches its fire before it starts: the items of a burst
    /// (1,000 jobs due in the same second) start at the second, not after the burst's work
    /// (size it for the jobs of one tick: some 40 µs each on two cores; 10,000 jobs due
    /// together want 400 ms). To the cluster this instance's clock runs `fire_lead` fast (the
    /// time stamps it writes, the fires it computes); it reads the registry's time as far
    /// ahead, so the lead is no clock skew to `maxTimeDiffSeconds`. The item timings of the
    /// execution reports and listeners are the wall clock's. The price: a `running` marker
    /// shows up to `fire_lead` before its item starts; an item still running `fire_lead`
    /// before its next fire is still running at that fire (a misfire, where monitorExecution
    /// is on: its catch-up starts at the fire's time; without misfire it is skipped); an
    /// instance restarted less than the lead before a fire is back after it by its clock (it
    /// catches the fire up as any restart does, or leaves it to the failover of the process
    /// that went down). A burst longer than the lead starts its last items late by the
    /// difference.
    pub fire_lead: Duration,
}

/// [`Settings::fire_lead`]'s default: 50 ms, the work of a tick of 1,000 jobs on two cores
/// (the items of such a tick start within 5 ms of it; without a lead, their last ones some
/// 35 ms after it).
pub const DEFAULT_FIRE_LEAD: Duration = Duration::from_millis(50);

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_parallel_items: 16,
            sharding_timeout: Duration::from_secs(30),
            shutdown_timeout: Duration::from_secs(30),
            strategies: ShardingStrategies::default(),
            stale_server_grace: Some(Duration::from_secs(600)),
            fire_lead: DEFAULT_FIRE_LEAD,
        }
    }
}

/// What the driver and the runners share.
pub(crate) struct Shared {
    pub registry: Arc<dyn CoordinatorRegistry>,
    /// The jobs' transactions go through it: those of one tick share one registry transaction.
    pub txns: TxnBatcher,
    /// The runners' work in hand, which the batcher waits for.
    pub activity: Arc<Activity>,
    /// The scheduler's clock: the wall clock, read [`Settings::fire_lead`] ahead.
    pub handles: Handles,
    /// The wall clock: what items run by (their timings, the wait for their fire).
    pub wall: Arc<dyn crate::handles::Clock>,
    /// Where the items of a scheduled fire wait for the wall clock to reach it.
    pub gates: gates::FireGates,
    pub instance: InstanceId,
    pub cache: SharedCache,
    pub settings: Settings,
    /// What every job's protocol runs with, shared (a process may run thousands of jobs).
    pub job_settings: Arc<crate::protocol::job::Settings>,
    pub listeners: Vec<Arc<dyn JobListener>>,
    pub once_listeners: Vec<Arc<dyn DistributeOnceListener>>,
    pub error_handlers: ErrorHandlers,
    /// The strategy and error-handler names configs may use here.
    pub known: KnownTypes,
    pub events: Events,
    /// The application's shared state, handed to every item.
    pub extensions: Extensions,
    /// Cancelled to end every task of the scheduler at once.
    pub stop: CancellationToken,
    /// How many of this client's sessions expired, as the driver saw them: a runner compares it
    /// with the count at its registration to tell its instance node going with an expired
    /// session (re-register) from an operator deleting it (stop).
    pub sessions_expired: AtomicU64,
    /// The last [`JobId`] given.
    last_job: AtomicU64,
    commands: mpsc::UnboundedSender<Command>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("instance", &self.instance)
            .field("registry", &self.registry)
            .finish()
    }
}

impl Shared {
    /// Sends a command to the driver (which outlives every runner of a live scheduler).
    pub fn command(&self, command: Command) {
        let _ = self.commands.send(command);
    }

    /// A number for a job being added, never given before.
    fn new_job_id(&self) -> JobId {
        JobId(self.last_job.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

/// A job as the driver knows it: a number given when it is added, so that timers and
/// commands carry no name (no string compared or copied per fire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct JobId(u64);

/// Requests to the driver.
#[derive(Debug)]
pub(crate) enum Command {
    Register {
        job: String,
        id: JobId,
        mailbox: mailbox::Sender<JobEvent>,
    },
    Arm {
        job: JobId,
        kind: timer::TimerKind,
        at_ms: Option<i64>,
    },
    /// The job needs the watch to cover this (see `scope`).
    Scope {
        job: JobId,
        scope: crate::registry::WatchScope,
    },
    Forget {
        job: JobId,
    },
    Shutdown {
        reply: oneshot::Sender<()>,
    },
}

/// Configures and starts a [`Scheduler`].
pub struct SchedulerBuilder {
    registry: Arc<dyn CoordinatorRegistry>,
    handles: Option<Handles>,
    ip: String,
    pid: u32,
    suffix: Option<String>,
    settings: Settings,
    error_handlers: ErrorHandlers,
    listeners: Vec<Arc<dyn JobListener>>,
    once_listeners: Vec<Arc<dyn DistributeOnceListener>>,
    sinks: Vec<(EventFilter, EventSink)>,
    inline_sinks: Vec<EventSink>,
    audit_reads: bool,
    event_capacity: usize,
    extensions: Extensions,
    handlers: JobHandlers,
}

impl fmt::Debug for SchedulerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulerBuilder").field("ip", &self.ip).field("pid", &self.pid).finish()
    }
}

impl SchedulerBuilder {
    /// A scheduler on `registry`, with real time, this process's id and the loopback IP (set
    /// [`ip`](Self::ip) to the address other instances know this one by).
    pub fn new(registry: Arc<dyn CoordinatorRegistry>) -> Self {
        SchedulerBuilder {
            registry,
            handles: None,
            ip: "127.0.0.1".into(),
            pid: std::process::id(),
            suffix: None,
            settings: Settings::default(),
            error_handlers: ErrorHandlers::default(),
            listeners: Vec::new(),
            once_listeners: Vec::new(),
            sinks: Vec::new(),
            inline_sinks: Vec::new(),
            audit_reads: false,
            event_capacity: DEFAULT_EVENT_CAPACITY,
            extensions: Extensions::default(),
            handlers: JobHandlers::default(),
        }
    }
    /// Time, spawning and randomness (default: [`Handles::real`]).
    pub fn handles(mut self, handles: Handles) -> Self {
        self.handles = Some(handles);
        self
    }
    /// The address other instances and operators know this host by (default `127.0.0.1`); part
    /// of the instance id, and what servers are disabled by.
    pub fn ip(mut self, ip: impl Into<String>) -> Self {
        self.ip = ip.into();
        self
    }
    /// The process id in the instance id (default: this process's).
    pub fn pid(mut self, pid: u32) -> Self {
        self.pid = pid;
        self
    }
    /// Distinguishes several schedulers of one process (tests, the simulator, the demo).
    pub fn instance_suffix(mut self, suffix: impl Into<String>) -> Self {
        self.suffix = Some(suffix.into());
        self
    }
    /// Tunables (default [`Settings::default`]).
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }
    /// The error handlers configs may name (`jobErrorHandlerType`): the built-ins plus custom
    /// ones.
    pub fn error_handlers(mut self, handlers: ErrorHandlers) -> Self {
        self.error_handlers = handlers;
        self
    }
    /// Adds a listener every job's fires and items are reported to.
    pub fn listener(mut self, listener: Arc<dyn JobListener>) -> Self {
        self.listeners.push(listener);
        self
    }
    /// Runs once per fire across the cluster, when all items started and when all completed
    /// (see [`crate::guarantee`]).
    pub fn distribute_once_listener(mut self, listener: Arc<dyn DistributeOnceListener>) -> Self {
        self.once_listeners.push(listener);
        self
    }
    /// Calls `sink` with every [`SchedulerEvent`], in order, on a task of its own (see
    /// [`EventSink`]). Several sinks may be added (the event printer, the metrics, the
    /// trace...): each gets every event. For an async stream use [`Scheduler::events`].
    pub fn event_sink(mut self, sink: EventSink) -> Self {
        self.sinks.push((events::every_event, sink));
        self
    }

    /// As [`event_sink`](Self::event_sink), with only the events `wanted` accepts: the others
    /// are never copied to the sink's task. A sink that counts a few kinds of events (the
    /// metrics) then costs nothing at the events of every item it ignores.
    pub fn event_sink_for(mut self, wanted: EventFilter, sink: EventSink) -> Self {
        self.sinks.push((wanted, sink));
        self
    }

    /// How many events each [`Scheduler::events`] subscriber may fall behind before it misses
    /// some (default [`DEFAULT_EVENT_CAPACITY`]).
    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = capacity;
        self
    }

    /// Registers `value` as shared state of the application: every item's context reaches it
    /// by its type with [`ShardingContext::extension`](crate::job::ShardingContext::extension).
    /// One value per type; a second of the same type replaces the first.
    ///
    /// ```no_run
    /// # async fn demo(registry: std::sync::Arc<dyn shardcron_core::registry::CoordinatorRegistry>) -> shardcron_core::Result<()> {
    /// use std::sync::Arc;
    /// use shardcron_core::runtime::SchedulerBuilder;
    /// struct Pool { url: String }
    /// let scheduler = SchedulerBuilder::new(registry)
    ///     .extension(Arc::new(Pool { url: "postgres://db/orders".into() }))
    ///     .start()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn extension<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
    }

    /// Code for jobs added to the registry by others (a console, the CLI): when such a job's
    /// config appears and `handlers` has code for it, the scheduler runs it with the stored
    /// config. See [`JobHandlers`].
    pub fn job_handlers(mut self, handlers: JobHandlers) -> Self {
        self.handlers = handlers;
        self
    }

    /// Opens the watch, waits for its first snapshot, and starts the driver.
    pub async fn start(self) -> Result<Scheduler> {
        let mut handles = self.handles.unwrap_or_else(Handles::real);
        // Every task of this scheduler ends when the last handle to it is dropped.
        let stop = CancellationToken::new();
        handles.spawner = Arc::new(StoppableSpawner { inner: handles.spawner, stop: stop.clone() });
        let wall = handles.clock.clone();
        let gates =
            gates::FireGates::new(wall.clone(), handles.spawner.clone(), self.settings.fire_lead);
        if gates.lead_ms() > 0 {
            handles.clock = Arc::new(crate::handles::LeadClock::new(wall.clone(), gates.lead_ms()));
        }
        let instance = InstanceId::new(&self.ip, self.pid, self.suffix.as_deref())?;
        // The process watches what its jobs need (`scope`): nothing before the first job.
        let mut watch = self.registry.watch_scope(WatchScope::new()).await?;
        let session = self.registry.session_events();
        let cache = SharedCache::default();
        if self.audit_reads {
            cache.update(|c| c.audit_reads());
        }
        // Fires read the cache: it must hold the registry's state before any job starts.
        match watch.next().await {
            Some(WatchEvent::Resync { nodes }) => {
                cache.update(|c| c.swap(nodes, WatchScope::new()));
            }
            _ => {
                return Err(Error::Registry(crate::registry::RegistryError::Closed {
                    op: crate::registry::Op::Watch,
                    path: "/".into(),
                }))
            }
        }
        let (commands_tx, commands) = mpsc::unbounded_channel();
        let known = self.error_handlers.add_to(
            self.settings
                .strategies
                .type_names()
                .fold(KnownTypes::default(), KnownTypes::with_sharding_strategy),
        );
        let (events, sinks_drained) = Events::start(
            instance.as_str().to_owned(),
            self.event_capacity,
            self.sinks,
            self.inline_sinks,
            handles.spawner.as_ref(),
        );
        let activity = Arc::new(Activity::default());
        let txns = TxnBatcher::start(
            self.registry.clone(),
            cache.clone(),
            handles.clock.clone(),
            activity.clone(),
            handles.spawner.as_ref(),
        );
        let job_settings = Arc::new(runner::job_settings(
            &self.settings,
            !self.once_listeners.is_empty(),
            &known,
            &self.registry.capability(),
        ));
        let shared = Arc::new(Shared {
            registry: self.registry,
            job_settings,
            txns,
            activity,
            events: events.clone(),
            extensions: self.extensions,
            stop: stop.clone(),
            instance,
            cache,
            settings: self.settings,
            listeners: self.listeners,
            once_listeners: self.once_listeners,
            error_handlers: self.error_handlers,
            known,
            handles,
            wall,
            gates,
            sessions_expired: AtomicU64::new(0),
            last_job: AtomicU64::new(0),
            commands: commands_tx,
        });
        let scoper = watch.scoper();
        let driver = Driver {
            shared: shared.clone(),
            commands,
            watch,
            watching: scope::Watching::new(WatchScope::new(), scoper),
            session,
            names: BTreeMap::new(),
            jobs: BTreeMap::new(),
            timers: Default::default(),
            due: Vec::new(),
            last_now: shared.handles.clock.now_ms(),
        };
        shared.handles.spawner.spawn(Box::pin(driver.run()));
        let scheduler = Scheduler {
            shared,
            jobs: Arc::default(),
            shut_down: Arc::default(),
            sinks_drained: Arc::new(Mutex::new(Some(sinks_drained))),
            _stop_on_drop: None,
        };
        if !self.handlers.is_empty() {
            // The adopting task holds a handle that does not keep the scheduler alive.
            let adopting = adopt::run(scheduler.clone(), self.handlers);
            scheduler.shared.handles.spawner.spawn(Box::pin(adopting));
        }
        Ok(Scheduler { _stop_on_drop: Some(Arc::new(StopOnDrop { stop, events })), ..scheduler })
    }
}

impl SchedulerBuilder {
    /// See [`crate::__private::InlineEventSink`].
    pub(crate) fn push_inline_sink(mut self, sink: EventSink) -> Self {
        self.inline_sinks.push(sink);
        self
    }

    /// See [`crate::__private::AuditReads`].
    pub(crate) fn with_read_audit(mut self) -> Self {
        self.audit_reads = true;
        self
    }
}

/// A running scheduler. Cheap to clone; every clone drives the same jobs.
///
/// Stop it with [`shutdown`](Self::shutdown), which lets running items finish and leaves the
/// registry cleanly. Dropping the last handle stops its tasks at once, without waiting (see
/// the [module documentation](self#lifecycle)).
#[derive(Clone)]
pub struct Scheduler {
    shared: Arc<Shared>,
    jobs: Arc<Mutex<BTreeMap<String, JobHandle>>>,
    /// Set when [`Scheduler::shutdown`] begins: from then on the scheduler refuses new work.
    shut_down: Arc<AtomicBool>,
    /// Taken by the shutdown that waits for the event sinks to deliver their last event.
    sinks_drained: Arc<Mutex<Option<SinksDrained>>>,
    /// Stops the tasks when the last application handle goes; `None` in the scheduler's own
    /// tasks' handles, which must not keep it alive.
    _stop_on_drop: Option<Arc<StopOnDrop>>,
}

/// How the scheduler reaches one job's runner.
#[derive(Debug, Clone)]
struct JobHandle {
    id: JobId,
    mailbox: mailbox::Sender<JobEvent>,
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler").field("instance", &self.shared.instance).finish()
    }
}

impl Scheduler {
    /// This scheduler's instance id.
    pub fn instance(&self) -> &InstanceId {
        &self.shared.instance
    }

    /// The registry this scheduler works on.
    pub fn registry(&self) -> &Arc<dyn CoordinatorRegistry> {
        &self.shared.registry
    }

    /// The scheduler's events from now on, as an async stream over a bounded buffer: a
    /// subscriber that falls behind gets [`EventsLagged`] with how many events it missed, and
    /// the scheduler never waits for it. The stream ends when the scheduler has shut down or
    /// was dropped. Each call is a new subscriber.
    pub fn events(&self) -> EventStream {
        self.shared.events.subscribe()
    }

    /// See [`crate::__private::stray_reads`] (counted only with
    /// [`crate::__private::AuditReads`]).
    pub(crate) fn stray_reads(&self) -> (u64, Vec<String>) {
        self.shared.cache.read().take_strays()
    }

    /// The names of the jobs scheduled here.
    pub fn jobs(&self) -> Vec<String> {
        self.jobs.lock().keys().cloned().collect()
    }

    /// Schedules `job` with `config`: validates the config (an invalid one leaves the registry
    /// untouched), publishes it by the overwrite rule, registers this instance, and arms the cron.
    ///
    /// A config without cron is a one-off job: it runs only when triggered
    /// ([`trigger`](Self::trigger)). When its YAML has no `cron` field at all, the scheduler
    /// warns that the job never fires by itself; a config built with
    /// [`one_off`](crate::config::JobConfigBuilder::one_off) says that this is meant.
    ///
    /// Fails with [`Error::ShutDown`] after [`shutdown`](Self::shutdown) began (also when it
    /// begins while the job registers: the job then leaves again with the others, having run
    /// nothing), [`Error::JobExists`] for a job already scheduled here, and with the config's
    /// or the registry's error.
    pub async fn add_job(&self, config: JobConfig, job: Job) -> Result<()> {
        self.refuse_after_shutdown()?;
        let name = config.job_name.clone();
        if self.jobs.lock().contains_key(&name) {
            return Err(Error::JobExists { job: name });
        }
        if config.cron.is_none() {
            warn_never_fires(&name);
        }
        let (tx, rx) = mailbox::mailbox(self.shared.activity.clone());
        // Route events before starting, so that nothing between registration and `run` is lost.
        let id = self.shared.new_job_id();
        self.shared.command(Command::Register { job: name.clone(), id, mailbox: tx.clone() });
        match JobRunner::start(self.shared.clone(), id, config, job, rx, tx.clone()).await {
            Ok(runner) => {
                let handle = JobHandle { id, mailbox: tx };
                // Looked at under the lock the shutdown takes the jobs by: a job whose start
                // outlasted the beginning of a shutdown (a slow registry) would run on unseen
                // by it, its items cut off when the process goes (1 × 3 `chaos` seed
                // 3,868,855,538: added 6 s into a stop over a 1 s link; its items, started at
                // the next fire, ran on past the instance's leave, and its next process ran
                // them again). It stops now, as the others do.
                let shutting_down = {
                    let mut jobs = self.jobs.lock();
                    let refused = self.shut_down.load(Ordering::SeqCst);
                    if !refused {
                        jobs.insert(name, handle.clone());
                    }
                    refused
                };
                self.shared.handles.spawner.spawn(Box::pin(runner.run()));
                if shutting_down {
                    Self::stop_job(&self.shared, handle).await;
                    return Err(Error::ShutDown);
                }
                Ok(())
            }
            Err(e) => {
                self.shared.command(Command::Forget { job: id });
                Err(e)
            }
        }
    }

    /// Stops `job` on this instance gracefully (running items finish, up to the shutdown
    /// timeout) and removes this instance's nodes of it. The job's config stays in the registry.
    pub async fn remove_job(&self, name: &str) -> Result<()> {
        self.refuse_after_shutdown()?;
        let Some(handle) = self.jobs.lock().remove(name) else {
            return Err(Error::NoSuchJob { job: name.to_owned() });
        };
        Self::stop_job(&self.shared, handle).await;
        Ok(())
    }

    async fn stop_job(shared: &Shared, handle: JobHandle) {
        let (reply, done) = oneshot::channel();
        let reason = "removed from the scheduler".to_owned();
        let _ = handle.mailbox.send(JobEvent::Stop { reason, reply: Some(reply) });
        let _ = done.await;
        shared.command(Command::Forget { job: handle.id });
    }

    /// Runs `job` once now, outside its schedule, on every live instance of the cluster that
    /// runs it; each instance runs the items it owns, as a fire whose source is `MANUAL`. This is
    /// how a one-off job runs; on a cron job it is an extra fire. Returns how many instances
    /// were asked to fire.
    ///
    /// The same as [`JobOperations::trigger`](crate::api::JobOperations::trigger), for a job
    /// scheduled here: fails with [`Error::NoSuchJob`] when it is not, [`Error::ShutDown`] after
    /// [`shutdown`](Self::shutdown), and with the registry's error.
    pub async fn trigger(&self, job: &str) -> Result<usize> {
        self.refuse_after_shutdown()?;
        if !self.jobs.lock().contains_key(job) {
            return Err(Error::NoSuchJob { job: job.to_owned() });
        }
        crate::api::JobOperations::new(self.shared.registry.as_ref()).trigger(job).await
    }

    /// Waits for Ctrl-C (SIGINT), or SIGTERM on Unix (what `docker stop`, Kubernetes and
    /// systemd send), then stops gracefully as [`shutdown`](Self::shutdown) does: running items
    /// finish (up to [`Settings::shutdown_timeout`]), then this instance leaves the registry.
    ///
    /// ```no_run
    /// # async fn demo(scheduler: shardcron_core::runtime::Scheduler) -> shardcron_core::Result<()> {
    /// // ... add jobs, then, at the end of main:
    /// scheduler.shutdown_on_ctrl_c().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// A second signal while items are still finishing stops waiting for them and returns
    /// [`Error::ShutdownInterrupted`]: return from `main` then, and the instance's registry
    /// session ends with the process (with failover on, other instances re-run the abandoned
    /// items). Fails with [`Error::Signals`] when the signal handlers cannot be installed.
    pub async fn shutdown_on_ctrl_c(&self) -> Result<()> {
        let mut signals = stop_signals::StopSignals::install()?;
        signals.next().await;
        let seconds = self.shared.settings.shutdown_timeout.as_secs_f64();
        tracing::info!(instance = %self.shared.instance, "stop signal: stopping gracefully");
        crate::stderr_fallback::eprint_if_unobserved(tracing::Level::INFO, || {
            format!(
                "stopping gracefully: running items finish (for up to {seconds:.0} s), then \
                 this instance leaves the registry; press Ctrl-C again to stop at once"
            )
        });
        let deadline = self.shared.settings.shutdown_timeout + LEAVING_TIME;
        tokio::select! {
            biased;
            () = signals.next() => {
                self.stop_now();
                Err(Error::ShutdownInterrupted)
            }
            stopped = self.shutdown(deadline) => stopped,
        }
    }

    fn refuse_after_shutdown(&self) -> Result<()> {
        if self.shut_down.load(Ordering::SeqCst) {
            Err(Error::ShutDown)
        } else {
            Ok(())
        }
    }

    /// Stops gracefully, within `deadline`: no new fire starts, every job's running items
    /// finish (each job waits up to [`Settings::shutdown_timeout`] for them, then cancels
    /// them), this instance removes its nodes from the registry, the driver stops, and the
    /// event sinks deliver their last event. Afterwards the scheduler refuses new work with
    /// [`Error::ShutDown`]; calling `shutdown` again does nothing.
    ///
    /// The registry stays open: it is the caller's, to use further or to close.
    ///
    /// When `deadline` passes first, the remaining tasks are stopped at once (as when the
    /// scheduler is dropped) and [`Error::ShutdownDeadline`] says so.
    pub async fn shutdown(&self, deadline: Duration) -> Result<()> {
        if self.shut_down.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let clock = self.shared.handles.clock.clone();
        let deadline_ms = clock.now_ms().saturating_add(millis(deadline));
        let graceful = async {
            self.stop_jobs_and_driver().await;
            self.shared.events.close();
            let drained = self.sinks_drained.lock().take();
            if let Some(drained) = drained {
                drained.wait().await;
            }
        };
        tokio::select! {
            biased;
            () = graceful => Ok(()),
            () = clock.sleep_until(deadline_ms) => {
                self.stop_now();
                Err(Error::ShutdownDeadline { deadline })
            }
        }
    }

    async fn stop_jobs_and_driver(&self) {
        // All jobs stop at once: the slowest one bounds the shutdown, not their sum.
        let handles: Vec<JobHandle> =
            std::mem::take(&mut *self.jobs.lock()).into_values().collect();
        let shared = &self.shared;
        futures::future::join_all(handles.into_iter().map(|handle| async move {
            Self::stop_job(shared, handle).await;
        }))
        .await;
        let (reply, done) = oneshot::channel();
        self.shared.command(Command::Shutdown { reply });
        let _ = done.await;
    }

    /// Ends every task of this scheduler now, as dropping it does.
    fn stop_now(&self) {
        self.shut_down.store(true, Ordering::SeqCst);
        self.shared.events.close();
        self.shared.stop.cancel();
    }
}

/// What a Ctrl-C shutdown allows beyond the items' wait: stopping the runners and leaving the
/// registry.
const LEAVING_TIME: Duration = Duration::from_secs(10);

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4)
}

/// Says, through `tracing` and on stderr when nothing receives `tracing` events, that `job` has
/// no cron and so never fires by itself.
fn warn_never_fires(job: &str) {
    tracing::warn!(job, "job has no cron: it never fires by itself, only when triggered");
    crate::stderr_fallback::eprint_if_unobserved(tracing::Level::WARN, || {
        format!(
            "job {job:?} has no cron, so it never fires by itself: it runs only when triggered \
             (Scheduler::trigger). Set its config's cron, e.g. \"0/5 * * * * ?\", to run it on a \
             schedule, or build it with JobConfig::builder(..).one_off() if a trigger-only job is meant"
        )
    });
}
