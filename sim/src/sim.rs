//! [`Sim`]: one run of a cluster in virtual time, and its [`Report`].
//!
//! A run builds a fresh single-threaded tokio runtime with paused time, so that every timer
//! of every instance, of the registry and of the simulator itself is virtual and the run is a
//! pure function of its inputs. It goes through four phases:
//!
//! 1. **Faults**: all instances start at 0 and add every job; the schedule's steps are applied
//!    at their times.
//! 2. **Quiet**: links healed, latencies and clocks reset, every instance not up (re)started;
//!    then the registry gets a session timeout and a little more to settle.
//! 3. **Live**: for two fire periods plus twice the longest item time every enabled item must
//!    run again; then a registry
//!    checkpoint for the leader, flag and assignment invariants.
//! 4. **Final**: every instance stops gracefully; once the sessions are gone a last checkpoint
//!    shows whether anything was left behind.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use shardcron_core::__private::{AuditReads, InlineEventSink};
use shardcron_core::api::JobOperations;
use shardcron_core::cron::CronSchedule;
use shardcron_core::handles::{Handles, SeededRandom, TokioClock, TokioSpawner};
use shardcron_core::registry::CoordinatorRegistry;
use shardcron_core::runtime::{EventSink, SchedulerBuilder, SchedulerEvent, Settings};
use shardcron_registry_mem::{ConnectOptions, Lagging, MemRegistry, MemServer};

use crate::builder::Builder;
use crate::code::{JobEnv, RunState};
use crate::config_witness::{ConfigBook, ConfigWitness};
use crate::faults::Fault;
use crate::garbage::Corruption;
use crate::instance::{Instance, Status};
use crate::invariants::{self, Checkpoint, Violation};
use crate::scenarios::{Action, Scenario};
use crate::trace::{self, Entry, JobState, Note, Phase, Trace, EPOCH_MS};
use crate::user::{self, ItemRun, RunView, UserInvariant};
use crate::variants::Variant;
use crate::workload::{JobSpec, Workload};

/// The namespace every simulated instance uses.
pub const NAMESPACE: &str = "/shardcron-sim";

/// A simulation ready to run (and to run again: [`run`](Self::run) takes `&self`).
#[derive(Debug, Clone)]
pub struct Sim {
    seed: u64,
    instances: usize,
    specs: Vec<JobSpec>,
    scenario: Scenario,
    duration_ms: u64,
    session_timeout: Duration,
    settings: Settings,
    variant: Option<Variant>,
    profile: String,
    checks: Vec<UserInvariant>,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct Report {
    pub seed: u64,
    pub scenario: Scenario,
    pub entries: Vec<Entry>,
    pub checkpoints: Vec<Checkpoint>,
    pub violations: Vec<Violation>,
    /// Virtual time simulated.
    pub virtual_ms: i64,
    /// Wall-clock time the run took (measurement only; never part of the trace).
    pub wall: Duration,
    /// What the run's job code kept (see [`RunState`]).
    pub state: RunState,
    /// The instances' registry load as each phase began, in order (measurement only; never
    /// part of the trace): the difference of two samples is the load of the phase between.
    pub load: Vec<LoadSample>,
}

/// What the registry server had received from the instances and sent them when a phase began:
/// counts since each instance's registry client connected, summed over the clients connected
/// at that moment (a client replaced by a restart takes its counts with it, so compare samples
/// of runs without restarts, such as the `none` profile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSample {
    /// The phase that began.
    pub phase: Phase,
    /// Virtual milliseconds since the start, as the trace counts them.
    pub at_ms: i64,
    /// How many instances had a registry client.
    pub clients: usize,
    /// Operations the clients issued (what the server received; each transaction is one).
    pub operations: u64,
    /// Change events the server queued to the clients' watches (its fan-out of the writes).
    pub events: u64,
}

/// What the world's run returns: the trace, the checkpoints and the load samples.
type Outcome = (Vec<Entry>, Vec<Checkpoint>, Vec<LoadSample>);

/// What a run comes to, in one line for scripts and the benchmarks (`shardcron-sim run
/// --json` prints it).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunSummary {
    pub seed: u64,
    /// Virtual time the run covered.
    pub virtual_ms: u64,
    /// Wall time it took, from the start of the simulated cluster to the end of the check.
    pub wall_secs: f64,
    pub item_runs: usize,
    pub violations: usize,
    /// The first line of the first violation.
    pub first_violation: Option<String>,
}

impl Report {
    /// The run in one line ([`RunSummary`]).
    pub fn summary(&self) -> RunSummary {
        RunSummary {
            seed: self.seed,
            // Virtual time counts up from 0: never negative.
            virtual_ms: u64::try_from(self.virtual_ms).unwrap_or(0),
            wall_secs: self.wall.as_secs_f64(),
            item_runs: self.item_runs(),
            violations: self.violations.len(),
            first_violation: self
                .violations
                .first()
                .map(|v| v.to_string().lines().next().unwrap_or("").to_owned()),
        }
    }

    /// No invariant was violated.
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }

    /// The trace as text, one line per entry.
    pub fn trace_text(&self) -> String {
        trace::render(&self.entries)
    }

    /// Every violation, with the events that led to it.
    pub fn violations_text(&self) -> String {
        self.violations.iter().map(|v| format!("{v}\n")).collect()
    }

    /// Every item run, in the order they started (what user invariants read).
    pub fn runs(&self) -> Vec<ItemRun> {
        RunView::new(self.seed, &self.entries, &self.state).runs()
    }

    /// How many item runs started.
    pub fn item_runs(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| {
                matches!(
                    &e.what,
                    trace::What::Event { event: SchedulerEvent::ItemStarted { .. }, .. }
                )
            })
            .count()
    }
}

impl Sim {
    pub(crate) fn new(builder: Builder, specs: Vec<JobSpec>, scenario: Scenario) -> Self {
        Sim {
            seed: builder.seed,
            instances: builder.instances,
            specs,
            scenario,
            duration_ms: u64::try_from(builder.duration.as_millis()).unwrap_or(u64::MAX),
            session_timeout: builder.session_timeout,
            settings: builder.settings,
            variant: builder.variant,
            profile: builder.profile.name().to_owned(),
            checks: builder.checks,
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn specs(&self) -> &[JobSpec] {
        &self.specs
    }

    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// The Rust code of a builder that runs this simulation with `scenario` (how shrinking
    /// reports a minimal schedule).
    pub fn code(&self, scenario: &Scenario) -> String {
        let specs: Vec<String> = self.specs.iter().map(|s| format!("        {s},")).collect();
        let steps = scenario.to_string().replace("\n", "\n        ");
        // A run of the user's jobs: their configs, code, strategies and invariants have no
        // Rust form here; the code names them.
        let user = !self.checks.is_empty()
            || self.specs.iter().any(|s| s.base.is_some() || s.code.is_some());
        let (preamble, rest) = if user {
            (
                "// `configs`: your job configs by name (`shardcron_sim::load_job_configs`);\n\
                 // `builder`: the Builder of your run (its settings and checks).\n",
                "..builder.clone()",
            )
        } else {
            ("", "..Builder::default()")
        };
        format!(
            "{preamble}let report = Builder {{\n    seed: {},\n    instances: {},\n    specs: vec![\n{}\n    ],\n    \
             duration: Duration::from_millis({}),\n    session_timeout: Duration::from_millis({}),\n    \
             profile: FaultProfile::None,\n    scenario: Some(\n        {steps},\n    ),\n    \
             {rest}\n}}\n.build()\n.run();",
            self.seed,
            self.instances,
            specs.join("\n"),
            crate::scenarios::thousands(self.duration_ms),
            crate::scenarios::thousands(
                u64::try_from(self.session_timeout.as_millis()).unwrap_or(u64::MAX)
            ),
        )
    }

    /// The same simulation with another schedule (shrinking tries many).
    pub fn with_scenario(&self, scenario: Scenario) -> Sim {
        Sim { scenario, ..self.clone() }
    }

    /// Runs the simulation and checks every invariant on its trace.
    pub fn run(&self) -> Report {
        let wall = std::time::Instant::now();
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build();
        let state = RunState::default();
        let (entries, checkpoints, load) = match runtime {
            Ok(rt) => {
                let out = rt.block_on(World::run(self, state.clone()));
                drop(rt);
                out
            }
            Err(e) => (
                vec![Entry {
                    at: 0,
                    who: 0,
                    what: trace::What::Note(Note::StartFailed { error: e.to_string() }),
                }],
                Vec::new(),
                Vec::new(),
            ),
        };
        let strategies = &self.settings.strategies;
        let (mut violations, _) = invariants::check_with_strategies(
            &entries,
            &checkpoints,
            self.session_timeout,
            strategies,
        );
        if !self.checks.is_empty() {
            let view = RunView::new(self.seed, &entries, &state);
            violations.extend(user::check(&self.checks, &view));
            violations.sort_by(|a, b| a.at.cmp(&b.at).then(a.invariant.cmp(&b.invariant)));
        }
        let virtual_ms = entries.last().map_or(0, |e| e.at);
        Report {
            seed: self.seed,
            scenario: self.scenario.clone(),
            entries,
            checkpoints,
            violations,
            virtual_ms,
            wall: wall.elapsed(),
            state,
            load,
        }
    }
}

/// Everything a running simulation shares between its tasks.
struct World {
    server: MemServer,
    trace: Trace,
    instances: Vec<Arc<Instance>>,
    /// The jobs every instance starting from now on adds.
    jobs: Mutex<BTreeMap<String, JobSpec>>,
    /// The registry configs as the cluster runs them (for windows and the checker's notes).
    configs: Arc<ConfigBook>,
    operator: MemRegistry,
    session_timeout: Duration,
    /// The schedule makes watches lag: the instances' clients say their views can lag per
    /// entry (as etcd's), so the schedulers fence on what their views may not show.
    views_lag: bool,
    settings: Settings,
    variant: Option<Variant>,
    seed: u64,
    /// What the job code of every instance shares in this run.
    state: RunState,
    /// The instances' registry load as each phase began.
    load: Mutex<Vec<LoadSample>>,
    /// (job, instance) → how many disables and enables of that server the operator asked for:
    /// a refused enable is tried again only while no later one was asked for.
    server_work: Mutex<BTreeMap<(String, usize), u64>>,
}

/// A lifecycle change of one instance, applied by a task holding the instance's lifecycle lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    Stop,
    Restart,
    EnsureUp,
}

impl World {
    async fn run(sim: &Sim, state: RunState) -> Outcome {
        let base = Handles {
            clock: Arc::new(TokioClock::starting_at(EPOCH_MS)),
            spawner: Arc::new(TokioSpawner),
            random: Arc::new(SeededRandom::new(sim.seed)),
        };
        let server = MemServer::new(base);
        let trace = Trace::start(server.clone(), NAMESPACE);
        let fire_lead_ms = i64::try_from(sim.settings.fire_lead.as_millis()).unwrap_or(i64::MAX);
        let begin = Note::Begin {
            seed: sim.seed,
            instances: sim.instances,
            profile: sim.profile.clone(),
            fire_lead_ms,
        };
        trace.note(0, begin);
        match server.connect(ConnectOptions::default().namespace(NAMESPACE)) {
            Ok(observer) => {
                tokio::spawn(crate::flags::record(observer, trace.clone()));
            }
            Err(e) => {
                trace.note(0, Note::StartFailed { error: e.to_string() });
                return (trace.take(), Vec::new(), Vec::new());
            }
        }
        let operator = match server.connect(ConnectOptions::default().namespace(NAMESPACE)) {
            Ok(c) => c,
            Err(e) => {
                trace.note(0, Note::StartFailed { error: e.to_string() });
                return (trace.take(), Vec::new(), Vec::new());
            }
        };
        let configs = Arc::new(ConfigBook::new(trace.clone(), server.clone()));
        let world = Arc::new(World {
            instances: (1..=sim.instances).map(|i| Arc::new(Instance::new(i, sim.seed))).collect(),
            server,
            trace,
            jobs: Mutex::new(sim.specs.iter().map(|s| (s.name.clone(), s.clone())).collect()),
            configs,
            operator,
            session_timeout: sim.session_timeout,
            views_lag: sim.scenario.steps.iter().any(|s| {
                matches!(s.action, Action::Fault(Fault::LagWatch(..) | Fault::LagEntry(..)))
            }),
            settings: sim.settings.clone(),
            variant: sim.variant,
            seed: sim.seed,
            state,
            load: Mutex::default(),
            server_work: Mutex::default(),
        });
        for spec in &sim.specs {
            world.record_config(JobState::of(&spec.config()), spec.item_ms);
        }
        world.enter(Phase::Faults);
        let origin = tokio::time::Instant::now();
        let at = |ms: u64| origin + Duration::from_millis(ms);
        for inst in &world.instances {
            World::lifecycle(&world, inst, Lifecycle::EnsureUp);
        }
        for step in &sim.scenario.steps {
            tokio::time::sleep_until(at(step.at_ms.min(sim.duration_ms))).await;
            world.apply(&step.action);
        }
        tokio::time::sleep_until(at(sim.duration_ms)).await;

        // Quiet: repair everything.
        world.enter(Phase::Quiet);
        for inst in &world.instances {
            if let Some(client) = inst.client() {
                world.server.heal(client);
                world.server.set_latency(client, Duration::ZERO);
            }
            inst.clock.set_skew(0);
            World::lifecycle(&world, inst, Lifecycle::EnsureUp);
        }
        let settle = world.session_timeout + Duration::from_secs(5);
        tokio::time::sleep(settle).await;
        world.enter(Phase::Live);
        tokio::time::sleep(world.live_window()).await;
        let mut checkpoints = vec![world.checkpoint(Phase::Live)];

        // Final: stop everything gracefully, wait for the sessions to go.
        world.enter(Phase::Final);
        for inst in &world.instances {
            World::lifecycle(&world, inst, Lifecycle::Stop);
        }
        let limit = world.settings.shutdown_timeout + Duration::from_secs(60);
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline
            && world.instances.iter().any(|i| {
                let s = i.state.lock();
                s.busy || matches!(s.status, Status::Up | Status::Starting | Status::Stopping)
            })
        {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        tokio::time::sleep(world.session_timeout + Duration::from_secs(1)).await;
        world.trace.sync();
        checkpoints.push(world.checkpoint(Phase::Final));
        world.enter(Phase::End);
        for inst in &world.instances {
            inst.spawner.kill();
        }
        let load = std::mem::take(&mut *world.load.lock());
        (world.trace.take(), checkpoints, load)
    }

    /// Notes that `phase` begins, with the instances' registry load so far.
    fn enter(&self, phase: Phase) {
        self.trace.note(0, Note::Phase(phase));
        let clients: Vec<_> = self.instances.iter().filter_map(|i| i.client()).collect();
        let (mut operations, mut events) = (0, 0);
        for info in self.server.sessions().iter().filter(|s| clients.contains(&s.client)) {
            operations += info.operations;
            events += info.events;
        }
        let at_ms = self.trace.now();
        self.load.lock().push(LoadSample {
            phase,
            at_ms,
            clients: clients.len(),
            operations,
            events,
        });
    }

    /// Two fire periods of the slowest job plus twice its item time: long enough for every
    /// item to run once more after things are healthy, behind the run its owner may have in
    /// flight and one launch of the re-runs it claimed, which come before its own catch-ups
    /// (GUARANTEES.md, section 4). A job's period is the longest gap between its fires over
    /// the next ones (up to `LIVE_GAP_FIRES` of them, within a week): a cron whose fires are
    /// not evenly spaced (`0,1,3,30 * * * * ?`) may have healthy come just before its longest
    /// gap, and the gap between the next two fires alone left its items no fire in the window.
    fn live_window(&self) -> Duration {
        let now = EPOCH_MS + self.trace.now();
        let mut window = 10_000i64;
        // Many jobs share a cron (and a run's configs, one each): each schedule's longest gap
        // is searched once (a thousand fires each: at 100 jobs, a tenth of a 20-instance
        // cluster's start).
        let mut gaps: BTreeMap<(&str, &str), Option<i64>> = BTreeMap::new();
        let configs = self.configs.all();
        for state in &configs {
            let Some(cron) = &state.cron else { continue };
            let zone = state.time_zone.as_deref().unwrap_or("");
            let gap = *gaps.entry((cron.as_str(), zone)).or_insert_with(|| {
                let schedule = CronSchedule::parse(cron, zone).ok()?;
                let horizon = now.saturating_add(LIVE_GAP_HORIZON_MS);
                let fires: Vec<i64> = schedule
                    .iter_after(now)
                    .take(LIVE_GAP_FIRES)
                    .take_while(|&t| t <= horizon)
                    .collect();
                fires.windows(2).map(|w| w[1] - w[0]).max()
            });
            let Some(gap) = gap else { continue };
            let item = i64::try_from(state.item_ms).unwrap_or(0);
            window = window.max(2 * gap + 2 * item + 2_000);
        }
        Duration::from_millis(u64::try_from(window).unwrap_or(10_000))
    }

    fn record_config(&self, mut state: JobState, item_ms: u64) {
        state.item_ms = item_ms;
        self.configs.record(0, state);
    }

    fn checkpoint(&self, phase: Phase) -> Checkpoint {
        let prefix = format!("{NAMESPACE}/");
        let nodes: BTreeMap<String, (String, bool)> = self
            .server
            .snapshot()
            .into_iter()
            .filter_map(|(path, node)| {
                let rest = path.strip_prefix(&prefix)?;
                Some((format!("/{rest}"), (node.text().into_owned(), node.ephemeral)))
            })
            .collect();
        let up = self
            .instances
            .iter()
            .filter(|i| i.status() == Status::Up)
            .map(|i| (i.index, i.id.clone()))
            .collect();
        let unsettled = self
            .instances
            .iter()
            .map(|i| (i.index, i.status()))
            .filter(|(_, s)| !matches!(s, Status::Up | Status::Down))
            .collect();
        self.trace.note(0, Note::Checkpoint { nodes: nodes.len() });
        Checkpoint { at: self.trace.now(), phase, nodes, up, unsettled }
    }

    fn instance(&self, i: usize) -> Option<&Arc<Instance>> {
        i.checked_sub(1).and_then(|k| self.instances.get(k))
    }

    /// Applies one step of the schedule (at once; long operations continue as tasks).
    fn apply(self: &Arc<Self>, action: &Action) {
        match action {
            Action::Fault(fault) => self.fault(fault),
            Action::Work(work) => self.work(work),
        }
    }

    fn ignored(&self, who: usize, what: &dyn std::fmt::Display, why: &str) {
        self.trace.note(who, Note::Ignored { what: what.to_string(), why: why.to_owned() });
    }

    fn fault(self: &Arc<Self>, fault: &Fault) {
        let targets = fault.instances();
        if targets.iter().any(|&i| self.instance(i).is_none()) {
            self.ignored(0, fault, "no such instance");
            return;
        }
        if let Fault::Corrupt(c) = fault {
            return self.corrupt(c);
        }
        let who = if targets.len() == 1 { targets[0] } else { 0 };
        self.trace.note(who, Note::Fault(fault.clone()));
        let each = |f: &dyn Fn(&Arc<Instance>)| {
            targets.iter().filter_map(|&i| self.instance(i)).for_each(f)
        };
        match fault {
            Fault::Crash(_) => each(&|inst| self.crash(inst)),
            Fault::Stop(_) => each(&|inst| World::lifecycle(self, inst, Lifecycle::Stop)),
            Fault::Restart(_) => each(&|inst| World::lifecycle(self, inst, Lifecycle::Restart)),
            // As a real server ends a session: the client stops getting through (its lease
            // runs out first, so it reports `Lost`), the server expires it at the session
            // timeout, and the client learns of it when its link comes back. A server never
            // ends a session it still hears from.
            Fault::ExpireSession(_) => each(&|inst| match inst.client() {
                Some(c) => {
                    self.server.cut(c);
                    let world = self.clone();
                    let back = self.session_timeout + EXPIRY_HEAL_AFTER;
                    tokio::spawn(async move {
                        tokio::time::sleep(back).await;
                        world.server.heal(c);
                    });
                }
                None => self.ignored(inst.index, fault, "no registry client"),
            }),
            Fault::Partition(_) => each(&|inst| {
                if let Some(c) = inst.client() {
                    self.server.cut(c)
                }
            }),
            Fault::Heal(_) => each(&|inst| {
                if let Some(c) = inst.client() {
                    self.server.heal(c)
                }
            }),
            Fault::Slow(_, ms) => each(&|inst| {
                if let Some(c) = inst.client() {
                    self.server.set_latency(c, Duration::from_millis(*ms))
                }
            }),
            Fault::LagWatch(_, ms) => each(&|inst| {
                if let Some(c) = inst.client() {
                    self.server.lag_watch(c, Lagging::LastAdded, Duration::from_millis(*ms))
                }
            }),
            Fault::LagEntry(_, pick, ms) => each(&|inst| {
                if let Some(c) = inst.client() {
                    self.server.lag_watch(c, Lagging::Entry(*pick), Duration::from_millis(*ms))
                }
            }),
            Fault::SkewClock(_, ms) => each(&|inst| inst.clock.set_skew(*ms)),
            Fault::RestartRegistry => self.server.restart(),
            Fault::Corrupt(_) => {}
        }
        self.trace.sync();
    }

    /// The operator's write of garbage (or deletion) through its own client: recorded as the
    /// fault once done, or as ignored when the node is not there.
    fn corrupt(self: &Arc<Self>, c: &Corruption) {
        let world = self.clone();
        let c = c.clone();
        tokio::spawn(async move {
            let path = c.path();
            let done = match (c.junk, c.read_if()) {
                // A detail whose node is gone is read by nobody: no garbage to write there.
                (Some(_), Some(node)) if !world.operator.exists(&node).await.unwrap_or(false) => {
                    Err(shardcron_core::registry::RegistryError::NoNode {
                        op: shardcron_core::registry::Op::Set,
                        path: node,
                    })
                }
                (Some(junk), _) => world.operator.set(&path, &junk.bytes(), None).await.map(drop),
                (None, _) => world.operator.delete(&path, None).await,
            };
            let fault = Fault::Corrupt(c);
            match done {
                Ok(()) => world.trace.note(0, Note::Fault(fault)),
                Err(e) => world.ignored(0, &fault, &e.to_string()),
            }
            world.trace.sync();
        });
    }

    /// kill -9: every task of the instance aborted, its scheduler (and so, once the aborted
    /// tasks are dropped, its registry client) dropped without closing.
    fn crash(&self, inst: &Arc<Instance>) {
        let scheduler = {
            let mut s = inst.state.lock();
            if matches!(s.status, Status::Down | Status::Crashed) && !s.busy {
                drop(s);
                self.ignored(inst.index, &Fault::Crash(inst.index), "not running");
                return;
            }
            s.status = Status::Crashed;
            s.busy = false;
            s.client = None;
            s.scheduler.take()
        };
        if let Some(scheduler) = &scheduler {
            self.note_strays(inst.index, scheduler);
        }
        let tasks = inst.spawner.kill();
        drop(scheduler);
        self.trace.note(inst.index, Note::Crashed { tasks });
    }

    /// Starts a stop, restart or start of `inst` as a task of the instance (a crash aborts it).
    fn lifecycle(world: &Arc<World>, inst: &Arc<Instance>, change: Lifecycle) {
        let (world, inst2) = (world.clone(), inst.clone());
        inst.state.lock().busy = true;
        inst.spawner.run(async move {
            let lock = inst2.lifecycle.clone();
            let _turn = lock.lock().await;
            let status = inst2.status();
            match change {
                Lifecycle::Stop => {
                    if status == Status::Up {
                        world.stop(&inst2).await;
                    } else {
                        world.ignored(inst2.index, &Fault::Stop(inst2.index), "not running");
                    }
                }
                Lifecycle::Restart => {
                    if status == Status::Up {
                        world.stop(&inst2).await;
                    }
                    world.start(&inst2).await;
                }
                Lifecycle::EnsureUp => {
                    if status != Status::Up {
                        world.start(&inst2).await;
                    }
                }
            }
            inst2.state.lock().busy = false;
        });
    }

    async fn stop(&self, inst: &Instance) {
        let scheduler = {
            let mut s = inst.state.lock();
            s.status = Status::Stopping;
            s.scheduler.clone()
        };
        self.trace.note(inst.index, Note::Stopping);
        if let Some(scheduler) = scheduler {
            // No deadline in effect (a day of virtual time): the simulator waits for the
            // graceful stop, however long it takes.
            if let Err(e) = scheduler.shutdown(Duration::from_secs(24 * 3600)).await {
                let what = format!("shutdown of {}", inst.id);
                self.trace.note(inst.index, Note::Ignored { what, why: e.to_string() });
            }
            // A stopped instance's session ends with it (shutdown leaves the registry open).
            let _ = scheduler.registry().close().await;
            self.note_strays(inst.index, &scheduler);
        }
        {
            let mut s = inst.state.lock();
            s.status = Status::Down;
            s.scheduler = None;
            s.client = None;
        }
        self.trace.note(inst.index, Note::Stopped);
    }

    async fn start(&self, inst: &Instance) {
        inst.state.lock().status = Status::Starting;
        let options = ConnectOptions::default()
            .namespace(NAMESPACE)
            .session_timeout(self.session_timeout)
            .views_lag(self.views_lag);
        let client = match self.server.connect(options) {
            Ok(c) => c,
            Err(e) => return self.start_failed(inst, e.to_string()),
        };
        self.trace.attach(inst.index, client.client_id());
        inst.state.lock().client = Some(client.client_id());
        let who = inst.index;
        // The witness sees what the registry shows and takes, before any planted bug.
        let mut registry = ConfigWitness::wrap(Arc::new(client), who, self.configs.clone());
        let trace = self.trace.clone();
        let mut sink: EventSink = Arc::new(move |e: &SchedulerEvent| trace.event(who, e));
        if let Some(variant) = &self.variant {
            registry = variant.wrap_registry(who, registry);
            sink = variant.wrap_sink(who, sink);
        }
        let handles = Handles {
            clock: inst.clock.clone(),
            spawner: inst.spawner.clone(),
            random: inst.random.clone(),
        };
        let started = SchedulerBuilder::new(registry)
            .handles(handles)
            .ip(&inst.ip)
            .pid(1)
            .settings(match &self.variant {
                Some(variant) => variant.settings(who, &self.settings),
                None => self.settings.clone(),
            })
            .inline_event_sink(sink)
            .audit_reads()
            .start()
            .await;
        let scheduler = match started {
            Ok(s) => s,
            Err(e) => return self.start_failed(inst, e.to_string()),
        };
        inst.state.lock().scheduler = Some(scheduler.clone());
        let jobs: Vec<JobSpec> = self.jobs.lock().values().cloned().collect();
        for spec in jobs {
            // A stored config an operator garbled is refused (and a start may meet a registry
            // outage): the application retries, as a supervisor would, while the job's leader
            // writes the config back.
            add_with_retries(
                &self.trace,
                inst.index,
                &scheduler,
                &spec,
                &self.env(inst.index),
                || true,
            )
            .await;
        }
        inst.state.lock().status = Status::Up;
        self.trace.note(inst.index, Note::Started);
    }

    /// Where instance `instance`'s job code runs.
    fn env(&self, instance: usize) -> JobEnv {
        JobEnv { instance, seed: self.seed, state: self.state.clone() }
    }

    /// Notes the reads the instance's jobs made outside its watch's scope (a failure).
    fn note_strays(&self, who: usize, scheduler: &shardcron_core::runtime::Scheduler) {
        let (count, paths) = shardcron_core::__private::stray_reads(scheduler);
        if count > 0 {
            self.trace.note(who, Note::StrayReads { count, paths });
        }
    }

    fn start_failed(&self, inst: &Instance, error: String) {
        {
            let mut s = inst.state.lock();
            s.status = Status::Down;
            s.scheduler = None;
            s.client = None;
        }
        self.trace.note(inst.index, Note::StartFailed { error });
    }

    fn work(self: &Arc<Self>, work: &Workload) {
        let world = self.clone();
        let work = work.clone();
        tokio::spawn(async move {
            match &work {
                Workload::AddJob(spec) => world.add_job(spec),
                Workload::RemoveJob { job } => world.remove_job(job),
                _ => {
                    let asked = world.note_server_work(&work);
                    let ops = JobOperations::new(&world.operator);
                    let outcome = work.apply(&ops).await;
                    let error = outcome.as_ref().err().cloned();
                    world.trace.note(0, Note::Work { work: work.clone(), error });
                    match outcome {
                        Ok(Some(config)) => {
                            let item_ms =
                                world.jobs.lock().get(work.job()).map_or(0, |s| s.item_ms);
                            world.record_config(JobState::of(&config), item_ms);
                        }
                        Ok(None) => {}
                        Err(_) => {
                            if let (Workload::EnableServer { .. }, Some(asked)) = (&work, asked) {
                                world.enable_again(work.clone(), asked).await;
                            }
                        }
                    }
                }
            }
        });
    }

    /// Counts an operator's disable or enable of a server; its number, for a retry to tell
    /// whether a later one was asked for since.
    fn note_server_work(&self, work: &Workload) -> Option<u64> {
        let (Workload::DisableServer { job, instance } | Workload::EnableServer { job, instance }) =
            work
        else {
            return None;
        };
        let mut asked = self.server_work.lock();
        let count = asked.entry((job.clone(), *instance)).or_default();
        *count += 1;
        Some(*count)
    }

    /// An operator whose enable of a server was refused (the job had no config node and no
    /// instance up to run it) tries again every second, as `remove_job` does, until it is
    /// done, the job is gone, or a later disable or enable of that server was asked for: left
    /// disabled for good, a job whose every server is disabled has no leader, and what only a
    /// leader or an enabled server does (write a deleted config back, claim failover entries)
    /// waits for the end of the run (1 × 4 `garbage` seed 3,520,241,334 over 300 s).
    async fn enable_again(self: &Arc<Self>, work: Workload, asked: u64) {
        let Workload::EnableServer { job, instance } = &work else { return };
        for _ in 0..OPERATOR_ATTEMPTS {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let current = self.server_work.lock().get(&(job.clone(), *instance)) == Some(&asked);
            if !current || !self.jobs.lock().contains_key(job) {
                return;
            }
            if work.apply(&JobOperations::new(&self.operator)).await.is_ok() {
                self.trace.note(0, Note::Work { work: work.clone(), error: None });
                return;
            }
        }
    }

    fn add_job(self: &Arc<Self>, spec: &JobSpec) {
        if self.jobs.lock().insert(spec.name.clone(), spec.clone()).is_some() {
            return self.ignored(0, &Workload::AddJob(spec.clone()), "the job exists");
        }
        self.trace.note(0, Note::Work { work: Workload::AddJob(spec.clone()), error: None });
        self.record_config(JobState::of(&spec.config()), spec.item_ms);
        for inst in &self.instances {
            let (scheduler, client) = {
                let state = inst.state.lock();
                (state.scheduler.clone(), state.client)
            };
            let (Some(scheduler), who) = (scheduler, inst.index) else { continue };
            let (spec, trace, env) = (spec.clone(), self.trace.clone(), self.env(who));
            let (world, inst) = (self.clone(), inst.clone());
            inst.spawner.clone().run(async move {
                // The application retries a failed add as it does at its start, while the job
                // is still the one it was asked to add and the instance still this scheduler
                // (a restart adds every job itself).
                let current = || {
                    let same_job = world.jobs.lock().get(&spec.name) == Some(&spec);
                    let same_start = inst.state.lock().client == client;
                    same_job && same_start
                };
                add_with_retries(&trace, who, &scheduler, &spec, &env, current).await;
            });
        }
    }

    fn remove_job(self: &Arc<Self>, job: &str) {
        let work = Workload::RemoveJob { job: job.to_owned() };
        if self.jobs.lock().remove(job).is_none() {
            return self.ignored(0, &work, "no such job");
        }
        self.configs.forget(job);
        self.trace.note(0, Note::Work { work, error: None });
        self.trace.note(0, Note::JobRemoved { job: job.to_owned() });
        for inst in &self.instances {
            let scheduler = inst.state.lock().scheduler.clone();
            let Some(scheduler) = scheduler else { continue };
            let job = job.to_owned();
            inst.spawner.run(async move {
                let _ = scheduler.remove_job(&job).await;
            });
        }
        // Then the operator removes the job from the registry, as `shardcron remove` does
        // once no instance runs it (refused before: an instance cut off still has its node
        // until its session ends). What the job left there goes with it.
        let world = self.clone();
        let job = job.to_owned();
        tokio::spawn(async move {
            for _ in 0..OPERATOR_ATTEMPTS {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if world.jobs.lock().contains_key(&job) {
                    return; // added again meanwhile: not the operator's to remove any more
                }
                match JobOperations::new(&world.operator).remove(&job).await {
                    Err(shardcron_core::Error::Refused { .. }) => continue,
                    _ => return,
                }
            }
        });
    }
}

/// How many of a job's next fires, and how far ahead, [`World::live_window`] looks at for its
/// longest gap.
const LIVE_GAP_FIRES: usize = 1_000;
const LIVE_GAP_HORIZON_MS: i64 = 7 * 24 * 3_600_000;

/// How often a starting instance tries to add a job, a second apart.
const ADD_JOB_ATTEMPTS: u32 = 30;

/// Adds a job to an instance's scheduler as an application would: a failed add is noted and
/// tried again a second later, up to `ADD_JOB_ATTEMPTS` times, while `current` says the add
/// is still wanted. The checker reads the notes: an instance whose add failed, and did not
/// succeed since, does not have the job.
async fn add_with_retries(
    trace: &Trace,
    who: usize,
    scheduler: &shardcron_core::runtime::Scheduler,
    spec: &JobSpec,
    env: &JobEnv,
    current: impl Fn() -> bool,
) {
    let mut attempts = 0;
    loop {
        attempts += 1;
        match scheduler.add_job(spec.config(), spec.job(env)).await {
            Ok(()) if attempts > 1 => {
                let job = spec.name.clone();
                return trace.note(who, Note::AddedAfterRetry { job, attempts });
            }
            Ok(()) => return,
            Err(e) => {
                let job = spec.name.clone();
                trace.note(who, Note::AddFailed { job, why: e.to_string() });
            }
        }
        if attempts >= ADD_JOB_ATTEMPTS {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        if !current() {
            return;
        }
    }
}

/// How long after the session timeout an expired instance's link comes back (it then learns
/// of the expiry).
const EXPIRY_HEAL_AFTER: Duration = Duration::from_secs(1);

/// [`EXPIRY_HEAL_AFTER`] for the checker's timeline.
pub(crate) fn expiry_heal_after_ms() -> i64 {
    i64::try_from(EXPIRY_HEAL_AFTER.as_millis()).unwrap_or(i64::MAX)
}

/// How long (in seconds, one attempt each) the simulated operator keeps trying what the
/// registry refused for now: removing a job whose instances have not all left yet, enabling
/// a server of a job that has neither a config node nor an instance up.
const OPERATOR_ATTEMPTS: u32 = 300;
