//! One job on one instance, the I/O shell around its [`JobProtocol`]: a task that feeds the
//! protocol the events the driver routes to it, with the view and the time, and performs the
//! actions it returns (registry requests, timers, launches, events). Jobs are independent
//! tasks, so a slow registry call of one job never delays another's fire; the driver stays free
//! of I/O.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::batch::{InHand, Urgency};
use super::events::{FireKind, SchedulerEvent};
use super::mailbox;
use super::timer::TimerKind;
use super::{Command, JobId, Shared};
use crate::config::{store, JobConfig};
use crate::cron::CronSchedule;
use crate::error::Result;
use crate::job::{ExecutionSource, Executor, FireInfo, FireRequest, Job, ShardingContext};
use crate::layout::{GuaranteeStage, JobNode};
use crate::protocol::job::{
    self, Action, Ctx, Input, JobProtocol, JobScope, Launch, LaunchId, Reply, Request,
};
use crate::registry::{RegistryError, RegistryExt, SessionEvent};

/// What the driver (or the runner itself) tells a runner.
#[derive(Debug)]
pub(crate) enum JobEvent {
    /// The schedule fell due.
    Fire {
        fire_ms: i64,
    },
    /// Time for the leader's periodic check of the assignment.
    Reconcile,
    /// A wait the protocol armed reached its deadline.
    Wait,
    /// The clock went back: a timer rang before its time by the clock now.
    ClockBack,
    /// A node of the job's subtree changed; the cache already shows the change.
    Changed(JobNode),
    /// The cache was replaced by a snapshot.
    Resynced,
    Session(SessionEvent),
    /// The items of a launch returned.
    Done {
        launch: LaunchId,
        report: Box<crate::job::FireReport>,
    },
    /// Stop gracefully: finish running items (at most until the deadline), leave the registry.
    Stop {
        reason: String,
        reply: Option<oneshot::Sender<()>>,
    },
}

pub(crate) struct JobRunner {
    shared: Arc<Shared>,
    /// How the driver knows this job.
    id: JobId,
    /// The protocol, which holds the config the job runs with (`JobProtocol::config`).
    protocol: JobProtocol,
    job: Job,
    /// Runs the items, with this job's error handler and the scheduler's listeners.
    executor: Arc<Executor>,
    mailbox: mailbox::Receiver<JobEvent>,
    me: mailbox::Sender<JobEvent>,
    /// The cancellation of each launch still running, and the fire time it was launched for
    /// (its tick: the ends of one tick share a registry write). Rarely more than one: a vector,
    /// which keeps its room from one fire to the next where a map would allocate each time.
    launches: Vec<(LaunchId, CancellationToken, i64)>,
    /// Who asked for the stop, told once the job has stopped.
    stop_replies: Vec<oneshot::Sender<()>>,
    /// The scope last asked of the driver.
    scope: Option<JobScope>,
}

impl std::fmt::Debug for JobRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobRunner").field("job", &self.protocol.job()).finish()
    }
}

impl JobRunner {
    /// Publishes the config and registers this instance for the job. On success the runner is
    /// ready to [`run`](Self::run); the registry is untouched if the config is invalid.
    pub async fn start(
        shared: Arc<Shared>,
        id: JobId,
        config: JobConfig,
        job: Job,
        mailbox: mailbox::Receiver<JobEvent>,
        me: mailbox::Sender<JobEvent>,
    ) -> Result<Box<Self>> {
        let added_ms = shared.handles.clock.now_ms();
        let registry = shared.registry.as_ref();
        let store::Published { config, fingerprint, replaced_garbage } =
            store::publish(registry, &config, &shared.known).await?;
        // Garbage in the config node, replaced by ours: this instance repaired it, so it
        // reports it (2 × 1 `garbage` seed 2,826,467,222: written while no instance was up,
        // replaced by a restart, reported by nobody).
        if let Some(bytes) = replaced_garbage {
            shared.events.emit(SchedulerEvent::RegistryGarbage {
                job: config.job_name.clone(),
                path: crate::layout::JobPaths::new(&config.job_name).config(),
                value: crate::protocol::records::shorten(&bytes),
                reason: "the stored config is no job config; this instance's replaced it".into(),
            });
        }
        let schedule = schedule_of(&config)?;
        let executor = Arc::new(executor_for(&shared, &config)?);
        let settings = shared.job_settings.clone();
        let instance = &shared.instance;
        let protocol = JobProtocol::new(
            instance.shared_id(),
            instance.shared_ip(),
            config,
            schedule,
            settings,
        )
        .with_stored_config(fingerprint);
        let mut runner = Box::new(JobRunner {
            shared,
            id,
            protocol,
            job,
            executor,
            mailbox,
            me,
            launches: Vec::new(),
            stop_replies: Vec::new(),
            scope: None,
        });
        // The registration is work in hand like a message's handling.
        runner.mailbox.begin_work();
        runner.feed(Input::Start { added_ms }, Urgency::Now).await;
        runner.mailbox.handled();
        // It reads the job's whole subtree: it waits for the driver to watch it.
        while !runner.protocol.registered() && runner.protocol.awaiting_scope() {
            let Some(event) = runner.mailbox.recv().await else { break };
            let (input, urgency) = runner.input_of(event);
            Box::pin(runner.feed(input, urgency)).await;
            runner.mailbox.handled();
        }
        if !runner.protocol.registered() {
            // Leave no instance node behind for a job this scheduler will not run: the leader
            // would give it items that nobody runs. Best effort: the error that matters is the
            // registration's.
            let error = runner.protocol.take_error();
            let node = crate::layout::JobPaths::new(runner.protocol.job())
                .instance(runner.shared.instance.as_str());
            if let Err(cleanup) = runner.shared.registry.delete_if_exists(&node).await {
                tracing::warn!(job = runner.protocol.job(), error = %cleanup, "could not remove the instance node of a job that failed to start");
            }
            runner.shared.cache.update(|c| c.deleted(&node));
            let job = runner.protocol.job().to_owned();
            return Err(match error {
                // Typed, so that the application can tell a lost connection (try again) from
                // a refusal.
                Some(source) => crate::error::Error::Registration { job, source },
                None => crate::error::Error::Refused {
                    job,
                    reason: "registration did not complete".into(),
                },
            });
        }
        Ok(runner)
    }

    /// Processes events until the job stops.
    pub async fn run(mut self: Box<Self>) {
        while let Some(event) = self.mailbox.recv().await {
            // What items that returned ask for at once (the removal of their markers) may wait
            // a little for the other ends of their tick, to share their registry write.
            let (input, urgency) = self.input_of(event);
            // Boxed: the handling of an event is a large future, and unboxed it would be part
            // of every idle runner's (< 10 KiB per job). One allocation per event.
            Box::pin(self.feed(input, urgency)).await;
            self.mailbox.handled();
            if self.protocol.stopped() {
                break;
            }
        }
        for reply in self.stop_replies.drain(..) {
            let _ = reply.send(());
        }
    }

    /// The protocol's input for an event of the mailbox (and the changes queued behind it),
    /// and how soon what it asks for must go.
    fn input_of(&mut self, event: JobEvent) -> (Input, Urgency) {
        let input = match event {
            JobEvent::Fire { fire_ms } => Input::FireDue { fire_ms },
            JobEvent::Reconcile => Input::ReconcileDue,
            JobEvent::Wait => Input::WaitDue,
            JobEvent::ClockBack => Input::ClockWentBack,
            JobEvent::Changed(node) => Input::Changed(self.queued_changes(node)),
            JobEvent::Resynced => Input::Resynced,
            JobEvent::Session(event) => Input::Session(event),
            JobEvent::Done { launch, report } => {
                let at = self.launches.iter().position(|(id, ..)| *id == launch);
                let tick = at.map(|at| self.launches.swap_remove(at).2);
                return (Input::Done { launch, report }, Urgency::Deferrable { tick });
            }
            JobEvent::Stop { reason, reply } => {
                self.stop_replies.extend(reply);
                Input::Stop { reason }
            }
        };
        (input, Urgency::Now)
    }

    /// `first` and the changes queued right behind it, each node once (all in hand until
    /// handled). A joining instance changes several nodes of every other instance's view at
    /// once, and the others' writes land in bursts while a job waits for the registry: one
    /// step over all of them decides what the last of them would, without a look at everything
    /// for each (a simulated start of 40 instances × 100 jobs took 642,000 steps of changes,
    /// 36,000 so), nor a request for each (a leader raised the reshard flag once for a
    /// joiner's instance node and again for its server node).
    fn queued_changes(&mut self, first: JobNode) -> Vec<JobNode> {
        let mut nodes = vec![first];
        while let Some(JobEvent::Changed(node)) =
            self.mailbox.next_if(|event| matches!(event, JobEvent::Changed(_)))
        {
            if !nodes.contains(&node) {
                nodes.push(node);
            }
        }
        nodes
    }

    /// Steps the protocol on `input`, then on the reply of every request it asks for, until
    /// it waits for something else. The requests `input` asks for at once have `urgency`; those
    /// that follow a reply are urgent.
    async fn feed(&mut self, input: Input, mut urgency: Urgency) {
        let mut actions = self.step(input);
        while !actions.is_empty() {
            let mut replies = Vec::new();
            for action in actions {
                if let Some(reply) = self.perform(action, urgency).await {
                    replies.push(reply);
                }
            }
            urgency = Urgency::Now;
            actions = Vec::new();
            for reply in replies {
                // Let the driver apply the watch events that arrived meanwhile first: the
                // protocol decides its next request on the view.
                tokio::task::yield_now().await;
                actions.extend(self.step(reply));
            }
        }
    }

    fn step(&mut self, input: Input) -> Vec<Action> {
        let now_ms = self.shared.handles.clock.now_ms();
        let sessions_lost = self.shared.sessions_expired.load(Ordering::SeqCst);
        let view = self.shared.cache.read();
        let ctx = Ctx { view: &view, now_ms, sessions_lost };
        // Every step, for following one job's protocol through a simulation
        // (`RUST_LOG=shardcron_core::protocol=trace shardcron-sim run ...`).
        let trace = tracing::enabled!(target: "shardcron_core::protocol", tracing::Level::TRACE);
        if trace {
            tracing::trace!(target: "shardcron_core::protocol", now_ms, instance = self.protocol.instance(), job = self.protocol.job(), "in {input:?}");
        }
        let actions = self.protocol.step(input, &ctx);
        // What the job needs watched may have changed with this step: the driver swaps the
        // watch when the union of its jobs' scopes changes.
        let unchanged = self.scope.as_ref().is_some_and(|s| self.protocol.scope_is(&view, s));
        debug_assert_eq!(unchanged, self.scope.as_ref() == Some(&self.protocol.scope(&view)));
        if !unchanged {
            let scope = self.protocol.scope(&view);
            tracing::trace!(target: "shardcron_core::scope", now_ms, instance = self.protocol.instance(), job = self.protocol.job(), "scope {scope:?}");
            let watch = self.protocol.watch_scope(&scope);
            self.shared.command(Command::Scope { job: self.id, scope: watch });
            self.scope = Some(scope);
        }
        if trace {
            for action in &actions {
                tracing::trace!(target: "shardcron_core::protocol", now_ms, instance = self.protocol.instance(), job = self.protocol.job(), "do {action:?}");
            }
        }
        actions
    }

    /// Performs one action; a registry request's reply comes back as the next input.
    async fn perform(&mut self, action: Action, urgency: Urgency) -> Option<Input> {
        let name = || self.protocol.job().to_owned();
        match action {
            Action::Request { op, request } => {
                // The request paused the mailbox once on its way (see `request`).
                let (result, answer_in_hand) = self.request(request, urgency).await;
                self.mailbox.resume();
                // Only now that this runner's work counts again does the answer stop counting.
                drop(answer_in_hand);
                return Some(Input::Reply { op, result });
            }
            Action::ArmFire(at_ms) => {
                self.shared.command(Command::Arm { job: self.id, kind: TimerKind::Fire, at_ms })
            }
            Action::ArmReconcile(at_ms) => {
                let kind = TimerKind::Reconcile;
                self.shared.command(Command::Arm { job: self.id, kind, at_ms })
            }
            Action::ArmWait(at_ms) => {
                self.shared.command(Command::Arm { job: self.id, kind: TimerKind::Wait, at_ms })
            }
            Action::Launch(launch) => self.launch(launch),
            Action::Cancel(launch) => {
                if let Some((_, cancel, _)) = self.launches.iter().find(|(id, ..)| *id == launch) {
                    cancel.cancel();
                }
            }
            Action::Emit(event) => self.shared.events.emit(event),
            Action::RunOnceListeners { stage, fire_ms } => {
                let listeners = self.shared.once_listeners.clone();
                let job = name();
                self.shared.handles.spawner.spawn(Box::pin(async move {
                    for listener in listeners {
                        match stage {
                            GuaranteeStage::Started => listener.all_started(&job, fire_ms).await,
                            GuaranteeStage::Completed => {
                                listener.all_completed(&job, fire_ms).await
                            }
                        }
                    }
                }));
            }
            // The protocol adopted the config already; only its executor is ours to build.
            Action::UseConfig(config) => match executor_for(&self.shared, &config) {
                Ok(executor) => self.executor = Arc::new(executor),
                Err(e) => self
                    .shared
                    .events
                    .emit(SchedulerEvent::ConfigRejected { job: name(), reason: e.to_string() }),
            },
            Action::Stopped => self.shared.command(Command::Forget { job: self.id }),
        }
        None
    }

    /// Performs a registry request, recording what it changed in the view at once (read your
    /// own writes) before the watch delivers it. Waiting for the registry is not work in hand
    /// (the batcher need not wait for this runner: it may be the one to answer it), so the
    /// mailbox is paused once the request is on its way; the caller resumes it.
    async fn request(
        &self,
        request: Request,
        urgency: Urgency,
    ) -> (std::result::Result<Reply, RegistryError>, Option<InHand>) {
        let registry = self.shared.registry.as_ref();
        let cache = &self.shared.cache;
        let mut answer_in_hand = None;
        if !matches!(request, Request::Txn(_)) {
            self.mailbox.pause();
        }
        let result = async {
            match request {
                Request::Txn(ops) => {
                    // Paused once queued: see `TxnBatcher::transaction`. The batcher records
                    // the writes in the view before it answers.
                    let answer = self.shared.txns.transaction(ops, urgency);
                    self.mailbox.pause();
                    let (results, in_hand) = answer.await;
                    answer_in_hand = in_hand;
                    Ok(Reply::Txn(results?))
                }
                Request::Create { path, data, mode } => {
                    let created = registry.create(&path, &data, mode).await?;
                    cache.update(|c| c.wrote(&created, &data, 0, mode.is_ephemeral()));
                    Ok(Reply::Created)
                }
                Request::Ensure(path) => {
                    if registry.ensure(&path).await? {
                        cache.update(|c| c.wrote(&path, b"", 0, false));
                    }
                    Ok(Reply::Ensured)
                }
                Request::Get(path) => Ok(Reply::Node(registry.get(&path).await?)),
                Request::Children(path) => {
                    Ok(Reply::Children(registry.children_or_empty(&path).await?))
                }
                // Read the fire lead ahead, as the scheduler's clock is: the comparison with
                // the scheduler's clock sees only how far the wall clock is off (the lead is
                // no skew), and a clock found off uses the registry's time in the cluster's
                // frame. Unmoved, a stamp it took from the registry named a time the lead
                // earlier than the clocks of the others: a reshard flag raised after a peer
                // started a fire, stamped before it, handed that fire to a new owner, which
                // ran it again (3 × 2 `chaos` seed 3,666,279,373 with a 50 ms lead).
                Request::RegistryTime => {
                    let registry_ms = registry.registry_time().await?;
                    Ok(Reply::Time(registry_ms.saturating_add(self.shared.gates.lead_ms())))
                }
            }
        }
        .await;
        (result, answer_in_hand)
    }

    fn launch(&mut self, launch: Launch) {
        let cancel = CancellationToken::new();
        let config = self.protocol.config();
        let item_parameters = config.item_parameters().unwrap_or_default();
        let total = config.checked_total_count().unwrap_or(1);
        let source = match launch.kind {
            FireKind::Scheduled => ExecutionSource::Normal,
            FireKind::Misfire => ExecutionSource::Misfire,
            FireKind::Manual => ExecutionSource::Manual,
            FireKind::Failover => ExecutionSource::Failover,
        };
        let info = FireInfo {
            job_name: config.job_name.clone(),
            instance: self.shared.instance.as_str().to_owned(),
            fire_time: crate::job::epoch_ms_to_system_time(launch.fire_ms),
            source,
            items: launch.items.iter().map(|&(n, _)| n).collect(),
        };
        let job_parameter = config.job_parameter.as_deref().unwrap_or("");
        // One task id for every item of the launch.
        let mut task_id = Some(info.task_id_text());
        let last = launch.items.len().saturating_sub(1);
        let contexts: Vec<ShardingContext> = launch
            .items
            .iter()
            .enumerate()
            .map(|(index, &(item, token))| {
                let parameter = item_parameters.get(&item).map_or("", String::as_str);
                // The last item takes the text itself: a fire of one item copies none.
                let task_id = if index == last { task_id.take() } else { task_id.clone() };
                let mut context = ShardingContext::with_task_id(
                    &info,
                    task_id.unwrap_or_default(),
                    total,
                    job_parameter,
                    item,
                    parameter,
                    cancel.child_token(),
                );
                context.fencing_token = token;
                // A catch-up's item answers the fire its misfire marker names.
                context.fire_time_ms = launch.fire_of(item);
                context
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
        let id = launch.id;
        self.launches.push((id, cancel, launch.fire_ms));
        let txns = self.shared.txns.clone();
        // A fire taken ahead of its time (`Settings::fire_lead`) starts at its time: a
        // scheduled one, and a catch-up or a re-run of a fire still ahead by the wall clock (a
        // run that ended within the lead before the next fire saw that fire skipped as a
        // misfire, and its catch-up started before the fire's time). A trigger's time is now.
        let (gate, starts_ms) = match launch.kind {
            FireKind::Scheduled | FireKind::Misfire | FireKind::Failover => {
                self.shared.gates.gate(launch.fire_ms).unzip()
            }
            FireKind::Manual => (None, None),
        };
        // Counts this launch among its tick's running ones until its end is queued for us
        // (from when its items start: at the gate's opening, for a fire taken ahead).
        let running = self.shared.txns.launched(launch.fire_ms, starts_ms);
        self.shared.handles.spawner.spawn(Box::pin(async move {
            let report = executor.run_gated(&job, request, gate).await;
            // The end of a run is not urgent, the start of the others is: the runners of a
            // tick still to launch their items would otherwise take turns with this job's end
            // (its protocol's step, its end transaction).
            txns.settled().await;
            let _ = me.send(JobEvent::Done { launch: id, report: Box::new(report) });
            // Only now: the end is work in hand of the runner before the tick stops counting it.
            drop(running);
        }));
    }
}

fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4)
}

fn executor_for(shared: &Shared, config: &JobConfig) -> Result<Executor> {
    let handler = shared.error_handlers.resolve(config.job_error_handler_type.as_deref())?.clone();
    // Items run by the wall clock (their timings), not by the scheduler's, which reads ahead.
    let handles = crate::handles::Handles { clock: shared.wall.clone(), ..shared.handles.clone() };
    let executor = Executor::new(handles)
        .with_error_handler(handler)
        .with_extensions(shared.extensions.clone());
    // Each listener as it wants to be called for this job (resolved once, not per fire).
    let listeners = shared
        .listeners
        .iter()
        .map(|listener| listener.for_job(&config.job_name).unwrap_or_else(|| listener.clone()));
    Ok(listeners.fold(executor, Executor::with_listener))
}

fn schedule_of(config: &JobConfig) -> Result<Option<CronSchedule>> {
    match config.cron_expression() {
        Some(cron) => {
            Ok(Some(CronSchedule::parse(cron, config.time_zone.as_deref().unwrap_or(""))?))
        }
        None => Ok(None),
    }
}

/// What the protocol of each job of a scheduler runs with: built once per scheduler and shared
/// by its jobs (`Shared::job_settings`).
pub(crate) fn job_settings(
    settings: &super::Settings,
    once_listeners: bool,
    known: &crate::config::KnownTypes,
    capability: &crate::registry::Capability,
) -> job::Settings {
    job::Settings {
        fence_absent: !capability.views_in_order && capability.absent_check,
        sharding_timeout_ms: millis(settings.sharding_timeout),
        shutdown_timeout_ms: millis(settings.shutdown_timeout),
        once_listeners,
        stale_server_grace_ms: settings.stale_server_grace.map(millis),
        strategies: settings.strategies.clone(),
        known: known.clone(),
        ..job::Settings::default()
    }
}
