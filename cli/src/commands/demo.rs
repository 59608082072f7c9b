//! `shardcron demo`: a cluster of three instances in this process, on the in-memory registry, in
//! real time. A script crashes one of them in the middle of a run, lets failover re-run its
//! items, adds a fourth instance and stops them all, while a timeline shows what each instance
//! reports. The summary is computed from the events, and the command fails (status 1) when the
//! cluster did not do what the timeline promises.
//!
//! # Layout
//! - [`run`]: the runtime, the script ([`Demo::script`]) and the printer, side by side.
//! - [`Demo`]: the cluster (server, members, event log) and the scripted steps.
//! - [`Printer`]: the timeline; it folds the per-item events of one fire on one instance into
//!   one line.
//! - [`Summary`]: the counts, from the event log.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use shardcron::config::JobConfig;
use shardcron::handles::{Clock, Handles, KillableSpawner, SystemClock};
use shardcron::instance::ip_of;
use shardcron::mem::{ConnectOptions, MemRegistry, MemServer};
use shardcron::registry::{CoordinatorRegistry, WatchEvent};
use shardcron::runtime::{
    EventSink, FireKind, Scheduler, SchedulerBuilder, SchedulerEvent, Settings,
};
use tokio::sync::mpsc;

use super::events::{one_line, session_state, skip_code};
use super::worker::sleeping_job;
use crate::error::CliError;

/// One-line description, for `shardcron --help`.
pub const ABOUT: &str =
    "Watch a cluster of three instances shard, crash, fail over, reshard and stop (in-process)";

/// Full description, for `shardcron demo --help`.
pub const LONG_ABOUT: &str = "\
Watch a cluster of three instances shard, crash, fail over, reshard and stop.

Everything runs in this process, on the embedded in-memory registry, in real time (about 15 \
seconds; 8 with --fast). One job, \"demo\", has 6 items, fires every 2 seconds, and its items \
take 0.8 seconds; failover is on and sessions time out after 2 seconds. The script:

  1. starts instances 10.0.0.1, 10.0.0.2 and 10.0.0.3: one is elected leader and shards the job;
  2. crashes 10.0.0.3 in the middle of a run (kill -9: its tasks stop and its link goes dead);
  3. its session expires, the survivors claim its interrupted items and run them again;
  4. the leader reshards the job over the two survivors;
  5. 10.0.0.4 joins and gets its share at the next fire;
  6. all instances stop gracefully: running items finish first.

Each line of the timeline is one event: seconds since the start, the instance that reports it, \
the event and its details. The events of several items of one fire on one instance share a line. \
Lines starting with >>> narrate the next scripted step. The summary at the end counts, from \
the events, fires, item runs, interrupted and failed-over items, items not run, shardings, \
duplicates (an item of one fire that completed twice) and registry nodes left behind, and says \
what each number is. Items not run are explained: typically the items of a fire that was due on \
the crashed instance before its session expired, while the cluster still counted it as live. \
Each item a dead instance owned gets one catch-up run, and the failover re-run of its \
interrupted fire is that run, so those are not caught up; the next fire runs them.

Exit status 0 when every step happened as described; 1 (with a one-line reason on stderr) when \
a step did not happen in time, an item ran twice, or registry nodes were left behind.";

/// Arguments of `shardcron demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run about twice as fast: fires every second, items take 0.4 s, sessions time out after
    /// 1 s.
    #[arg(long)]
    pub fast: bool,
}

/// The job every instance runs.
const JOB: &str = "demo";
/// Its sharding total count.
const ITEMS: u32 = 6;
/// The namespace of the demo's in-memory registry.
const NAMESPACE: &str = "/shardcron-demo";
/// The instances at the start, and the one that crashes.
const FIRST: [&str; 3] = ["10.0.0.1", "10.0.0.2", "10.0.0.3"];
const VICTIM: &str = "10.0.0.3";
const JOINER: &str = "10.0.0.4";
/// Per-item events of one instance and fire that are this close share a timeline line.
const FOLD_WINDOW: Duration = Duration::from_millis(40);

/// How fast the demo runs.
///
/// Items take less than half the interval: the survivors claim a crashed instance's items after
/// their own run, and that re-run then still ends before the next fire (a longer one would
/// make the next fire a misfire and start a chain of catch-up runs, which is correct but hides
/// the story).
#[derive(Debug, Clone, Copy)]
struct Pace {
    cron: &'static str,
    interval: Duration,
    item: Duration,
    session: Duration,
}

impl Pace {
    fn new(fast: bool) -> Self {
        if fast {
            Pace {
                cron: "* * * * * ?",
                interval: Duration::from_secs(1),
                item: Duration::from_millis(400),
                session: Duration::from_secs(1),
            }
        } else {
            Pace {
                cron: "0/2 * * * * ?",
                interval: Duration::from_secs(2),
                item: Duration::from_millis(800),
                session: Duration::from_secs(2),
            }
        }
    }

    /// How long a step may take before the demo gives up on it.
    fn patience(&self) -> Duration {
        self.session + self.interval * 6 + self.item * 2
    }
}

/// Runs the demo and prints its timeline.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let pace = Pace::new(args.fast);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the async runtime: {e}")))?;
    let result = runtime.block_on(show(pace, out));
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

/// One recorded event: the IP of the instance that reported it, when, what.
#[derive(Debug, Clone)]
struct Rec {
    ip: String,
    at_ms: i64,
    event: SchedulerEvent,
}

/// What the printer gets.
#[derive(Debug)]
enum Out {
    /// An event an instance reported.
    Event(Rec),
    /// A membership change seen on the registry: `(at_ms, ip, joined, detail)`.
    Member { at_ms: i64, ip: String, joined: bool, detail: &'static str },
    /// The narration of the next step.
    Step { at_ms: i64, text: String },
    /// A line as it is.
    Text(String),
}

/// Runs the script and the printer side by side until the script ends.
async fn show(pace: Pace, out: &mut dyn Write) -> Result<(), CliError> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let start_ms = SystemClock.now_ms();
    let mut printer = Printer::new(out, start_ms);
    let demo = Demo::new(pace, start_ms, tx);
    let script = demo.script();
    tokio::pin!(script);
    let outcome = loop {
        let due = printer.next_due();
        tokio::select! {
            biased;
            Some(line) = rx.recv() => printer.take(line)?,
            () = sleep_until(due) => printer.flush_due()?,
            outcome = &mut script => break outcome,
        }
    };
    while let Ok(line) = rx.try_recv() {
        printer.take(line)?;
    }
    printer.flush_all()?;
    outcome
}

async fn sleep_until(due: Option<tokio::time::Instant>) {
    match due {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A member of the cluster.
struct Member {
    ip: String,
    scheduler: Scheduler,
    client: MemRegistry,
    spawner: Arc<KillableSpawner>,
}

/// The cluster and its recorded events.
struct Demo {
    pace: Pace,
    /// Where the timeline's clock starts (epoch ms).
    start_ms: i64,
    server: MemServer,
    log: Arc<Mutex<Vec<Rec>>>,
    tx: mpsc::UnboundedSender<Out>,
    /// The crashed instance's id, once crashed (the registry observer names its departure).
    crashed: Arc<Mutex<Option<String>>>,
    /// When the registry saw the crashed instance's session expire (epoch ms).
    expired_ms: Arc<Mutex<Option<i64>>>,
    /// The steps that did not happen in time.
    missed: Vec<String>,
}

impl Demo {
    fn new(pace: Pace, start_ms: i64, tx: mpsc::UnboundedSender<Out>) -> Self {
        Demo {
            pace,
            start_ms,
            server: MemServer::new(Handles::real()),
            log: Arc::default(),
            tx,
            crashed: Arc::default(),
            expired_ms: Arc::default(),
            missed: Vec::new(),
        }
    }

    fn now(&self) -> i64 {
        SystemClock.now_ms()
    }

    fn say(&self, text: String) {
        let _ = self.tx.send(Out::Step { at_ms: self.now(), text });
    }

    fn secs(duration: Duration) -> String {
        let ms = duration.as_millis();
        if ms.is_multiple_of(1000) {
            format!("{} s", ms / 1000)
        } else {
            format!("{}.{} s", ms / 1000, (ms % 1000) / 100)
        }
    }

    /// The whole show: returns once every instance stopped, with the verdict.
    async fn script(mut self) -> Result<(), CliError> {
        let pace = self.pace;
        let _ = self.tx.send(Out::Text(format!(
            "shardcron demo: job \"{JOB}\" with {ITEMS} items, fired every {}, items take {}, \
             failover on;\n{} instances on one in-memory registry (session timeout {}), in real \
             time.\n",
            Self::secs(pace.interval),
            Self::secs(pace.item),
            FIRST.len(),
            Self::secs(pace.session),
        )));
        let _ = self.tx.send(Out::Text(Printer::header()));
        let observer = self.observe().await?;

        // 1. Three instances; the leader shards at the first fire.
        self.say(format!("starting {}: each registers and bids for leadership", FIRST.join(", ")));
        let mut members = Vec::new();
        for ip in FIRST {
            members.push(self.start_member(ip).await?);
        }
        let sharded = self
            .wait("a sharding over all three instances and one complete fire", |log| {
                let at = last_sharding(log, 0, |a| a.len() == FIRST.len())?;
                fire_complete_since(log, at).then_some(at)
            })
            .await;

        // 2. Crash the victim while its items run.
        let since = self.now().max(sharded.unwrap_or(0));
        let running = self
            .wait("10.0.0.3 running items", |log| {
                let running = running_on(log, VICTIM, since);
                (!running.is_empty()).then_some(())
            })
            .await;
        if running.is_some() {
            tokio::time::sleep(pace.item * 2 / 5).await;
        }
        let interrupted = running_on(&self.log.lock(), VICTIM, 0);
        let Some(victim) = members.iter().position(|m| m.ip == VICTIM) else {
            return Err(CliError::Failed("the demo lost track of 10.0.0.3".into()));
        };
        let victim = members.remove(victim);
        let items: Vec<u32> = interrupted.iter().map(|&(item, _)| item).collect();
        self.say(format!(
            "crashing {VICTIM} mid-run: kill -9 while its items {} run; its session expires in {}",
            list(&items),
            Self::secs(pace.session),
        ));
        *self.crashed.lock() = Some(victim.scheduler.instance().to_string());
        victim.spawner.kill();
        self.server.cut(victim.client.client_id());
        let crash_ms = self.now();

        // 3. Failover: every interrupted item of that fire completes on a survivor.
        let victim_id = victim.scheduler.instance().to_string();
        self.wait("failover of the interrupted items", |log| {
            interrupted
                .iter()
                .all(|&(item, fire_ms)| completed_elsewhere(log, item, fire_ms, VICTIM))
                .then_some(())
        })
        .await;

        // 4. The leader reshards over the survivors.
        let resharded = self
            .wait("a sharding without 10.0.0.3", |log| {
                last_sharding(log, crash_ms, |a| a.iter().all(|(id, _)| id != &victim_id))
            })
            .await;

        // 5. A fourth instance joins and gets its share.
        let join_from = self.now().max(resharded.unwrap_or(0));
        if resharded.is_some() {
            // Let the survivors run one fire on their own first.
            self.wait("a fire on the two survivors", |log| {
                fire_complete_since(log, join_from).then_some(())
            })
            .await;
        }
        self.say(format!("{JOINER} joins the cluster: the leader reshards at the next fire"));
        let joiner = self.start_member(JOINER).await?;
        let joiner_id = joiner.scheduler.instance().to_string();
        members.push(joiner);
        let join_ms = self.now();
        let joined = self
            .wait("a sharding that gives 10.0.0.4 items, and a fire with it", |log| {
                let at = last_sharding(log, join_ms, |a| {
                    a.iter().any(|(id, items)| id == &joiner_id && !items.is_empty())
                })?;
                fire_complete_since(log, at).then_some(())
            })
            .await;

        // 6. Stop everyone gracefully, while items run.
        if joined.is_some() {
            let now = self.now();
            let started = self
                .wait("the next fire", |log| {
                    log.iter()
                        .any(|r| {
                            r.at_ms > now && matches!(r.event, SchedulerEvent::ItemStarted { .. })
                        })
                        .then_some(())
                })
                .await;
            if started.is_some() {
                tokio::time::sleep(pace.item / 3).await;
            }
        }
        let names: Vec<&str> = members.iter().map(|m| m.ip.as_str()).collect();
        self.say(format!(
            "stopping {} gracefully: running items finish, then each leaves the registry",
            names.join(", ")
        ));
        // Each member leaves, then closes its registry session, as its process would on exit.
        let stops = members.iter().map(|m| async move {
            let stopped = m.scheduler.shutdown(Duration::from_secs(60)).await;
            let _ = m.scheduler.registry().close().await;
            stopped
        });
        let mut failures: Vec<String> = Vec::new();
        for (member, result) in members.iter().zip(futures::future::join_all(stops).await) {
            if let Err(e) = result {
                failures.push(format!("{} did not stop cleanly: {e}", member.ip));
            }
        }
        // The observer's last departures, then the verdict.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _ = observer.close().await;
        let leftover: Vec<String> = self
            .server
            .snapshot()
            .into_iter()
            .filter(|(path, node)| node.ephemeral && path.starts_with(NAMESPACE))
            .map(|(path, _)| path)
            .collect();
        let story = Story {
            interval_ms: i64::try_from(pace.interval.as_millis()).unwrap_or(i64::MAX),
            interrupted: interrupted.clone(),
            crash_ms: Some(crash_ms),
            expired_ms: *self.expired_ms.lock(),
            leftover: leftover.len(),
        };
        let summary = Summary::of(&self.log.lock(), &story);
        let _ = self.tx.send(Out::Text(format!("\n{}", summary.lines(self.start_ms).join("\n"))));

        let mut problems = std::mem::take(&mut self.missed);
        problems.extend(failures);
        if summary.duplicates > 0 {
            problems.push(format!("{} item fires completed more than once", summary.duplicates));
        }
        if !leftover.is_empty() {
            problems.push(format!("registry nodes left behind: {}", leftover.join(", ")));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(CliError::Failed(format!("the demo went wrong: {}", problems.join("; "))))
        }
    }

    /// Starts an instance with server IP `ip` and schedules the job on it.
    async fn start_member(&self, ip: &str) -> Result<Member, CliError> {
        let failed = |e: &dyn std::fmt::Display| CliError::Failed(format!("starting {ip}: {e}"));
        let client = self
            .server
            .connect(
                ConnectOptions::default().namespace(NAMESPACE).session_timeout(self.pace.session),
            )
            .map_err(|e| failed(&e))?;
        let spawner = Arc::new(KillableSpawner::new());
        let handles = Handles { spawner: spawner.clone(), ..Handles::real() };
        let (log, tx, owner) = (self.log.clone(), self.tx.clone(), ip.to_owned());
        let sink: EventSink = Arc::new(move |event: &SchedulerEvent| {
            if matches!(event, SchedulerEvent::Armed { .. }) {
                return;
            }
            let rec = Rec { ip: owner.clone(), at_ms: SystemClock.now_ms(), event: event.clone() };
            log.lock().push(rec.clone());
            let _ = tx.send(Out::Event(rec));
        });
        let settings = Settings {
            sharding_timeout: self.pace.patience(),
            shutdown_timeout: self.pace.patience(),
            ..Settings::default()
        };
        let scheduler = SchedulerBuilder::new(Arc::new(client.clone()))
            .handles(handles)
            .ip(ip)
            .settings(settings)
            .event_sink(sink)
            .start()
            .await
            .map_err(|e| failed(&e))?;
        let config = JobConfig::builder(JOB)
            .cron(self.pace.cron)
            .sharding_total_count(ITEMS)
            .failover(true)
            .build()
            .map_err(|e| failed(&e))?;
        scheduler.add_job(config, sleeping_job(self.pace.item)).await.map_err(|e| failed(&e))?;
        Ok(Member { ip: ip.to_owned(), scheduler, client, spawner })
    }

    /// Watches the job's instance nodes from a client of its own, and reports who joins and
    /// leaves: the registry's view, which the instances themselves do not report.
    async fn observe(&self) -> Result<MemRegistry, CliError> {
        let failed = |e: &dyn std::fmt::Display| CliError::Failed(format!("observing: {e}"));
        let client = self
            .server
            .connect(ConnectOptions::default().namespace(NAMESPACE))
            .map_err(|e| failed(&e))?;
        let prefix = format!("/{JOB}/instances/");
        let mut watch = client.watch(&format!("/{JOB}/instances")).await.map_err(|e| failed(&e))?;
        let (tx, crashed) = (self.tx.clone(), self.crashed.clone());
        let expired_ms = self.expired_ms.clone();
        tokio::spawn(async move {
            while let Some(event) = watch.next().await {
                let (path, joined) = match &event {
                    WatchEvent::Created { path, .. } => (path, true),
                    WatchEvent::Deleted { path } => (path, false),
                    _ => continue,
                };
                let Some(id) = path.strip_prefix(&prefix) else { continue };
                let detail = match (joined, crashed.lock().as_deref() == Some(id)) {
                    (true, _) => "instance node created",
                    (false, true) => "session expired: its ephemeral nodes are gone",
                    (false, false) => "instance node deleted",
                };
                let at_ms = SystemClock.now_ms();
                if !joined && crashed.lock().as_deref() == Some(id) {
                    *expired_ms.lock() = Some(at_ms);
                }
                let ip = ip_of(id).to_owned();
                let _ = tx.send(Out::Member { at_ms, ip, joined, detail });
            }
        });
        Ok(client)
    }

    /// Waits until `done` finds what it looks for in the log, for at most the pace's patience.
    /// On a timeout the step is recorded as missed and narrated, and the script goes on.
    async fn wait<T>(&mut self, what: &str, done: impl Fn(&[Rec]) -> Option<T>) -> Option<T> {
        let deadline = tokio::time::Instant::now() + self.pace.patience();
        loop {
            if let Some(found) = done(&self.log.lock()) {
                return Some(found);
            }
            if tokio::time::Instant::now() >= deadline {
                let waited = Self::secs(self.pace.patience());
                self.say(format!("gave up waiting for {what} after {waited}"));
                self.missed.push(format!("no {what} within {waited}"));
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

// ---------------------------------------------------------------------- reading the log

/// When the last sharding at or after `since_ms` whose assignment satisfies `fits` was
/// committed.
fn last_sharding(
    log: &[Rec],
    since_ms: i64,
    fits: impl Fn(&[(String, Vec<u32>)]) -> bool,
) -> Option<i64> {
    log.iter().rev().filter(|r| r.at_ms >= since_ms).find_map(|r| match &r.event {
        SchedulerEvent::Sharded { assignment, .. } if fits(assignment) => Some(r.at_ms),
        _ => None,
    })
}

/// Whether some fire had every item started at or after `since_ms` and completed.
fn fire_complete_since(log: &[Rec], since_ms: i64) -> bool {
    let mut started: BTreeMap<i64, BTreeSet<u32>> = BTreeMap::new();
    let mut done: BTreeMap<i64, BTreeSet<u32>> = BTreeMap::new();
    for r in log {
        match &r.event {
            SchedulerEvent::ItemStarted { item, fire_ms, kind, .. }
                if r.at_ms >= since_ms && *kind == FireKind::Scheduled =>
            {
                started.entry(*fire_ms).or_default().insert(*item);
            }
            SchedulerEvent::ItemFinished { item, fire_ms, ok: true, .. } => {
                done.entry(*fire_ms).or_default().insert(*item);
            }
            _ => {}
        }
    }
    started.iter().any(|(fire, items)| {
        items.len() == ITEMS as usize && done.get(fire).is_some_and(|d| items.is_subset(d))
    })
}

/// `(item, fire_ms)` of the items started on `ip` at or after `since_ms` that have not ended.
fn running_on(log: &[Rec], ip: &str, since_ms: i64) -> Vec<(u32, i64)> {
    let mut running: BTreeSet<(u32, i64)> = BTreeSet::new();
    for r in log.iter().filter(|r| r.ip == ip) {
        match &r.event {
            SchedulerEvent::ItemStarted { item, fire_ms, .. } if r.at_ms >= since_ms => {
                running.insert((*item, *fire_ms));
            }
            SchedulerEvent::ItemFinished { item, fire_ms, .. } => {
                running.remove(&(*item, *fire_ms));
            }
            _ => {}
        }
    }
    running.into_iter().collect()
}

/// Whether `item` of the fire at `fire_ms` completed on an instance other than `ip`.
fn completed_elsewhere(log: &[Rec], item: u32, fire_ms: i64, ip: &str) -> bool {
    log.iter().any(|r| {
        r.ip != ip
            && matches!(&r.event, SchedulerEvent::ItemFinished { item: i, fire_ms: f, ok: true, .. }
                if *i == item && *f == fire_ms)
    })
}

/// `12.34s`.
fn elapsed(ms: i64) -> String {
    format!("{}.{:02}s", ms.div_euclid(1000), ms.rem_euclid(1000) / 10)
}

/// `0,1,5`.
fn list(items: &[u32]) -> String {
    items.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// What the script did, for the summary to explain its numbers with.
#[derive(Debug, Clone, Default)]
struct Story {
    /// The fire interval: a sharding committed up to half of it after a fire time is that
    /// fire's.
    interval_ms: i64,
    /// `(item, fire_ms)` of the items running on the victim when it was killed.
    interrupted: Vec<(u32, i64)>,
    /// When the victim was killed, and when the registry saw its session expire.
    crash_ms: Option<i64>,
    expired_ms: Option<i64>,
    /// Ephemeral nodes still on the registry after the stop.
    leftover: usize,
}

/// Items of one fire that never completed anywhere, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NotRun {
    fire_ms: i64,
    items: Vec<u32>,
    /// The instance that owned them at that fire, if the log says.
    owner: Option<String>,
    /// Whether they were due on the killed instance before the registry knew it was dead.
    while_undetected: bool,
    /// The earlier fire whose failover re-run was these items' one catch-up, if one was.
    caught_up_for: Option<i64>,
    /// The next fire that completed all of them.
    next_fire_ms: Option<i64>,
}

/// The counts the demo ends with, and what they are made of.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Summary {
    /// Fire times at which at least one item started (scheduled, caught up or failed over).
    fires: usize,
    /// Item runs that completed.
    completed: usize,
    /// Item runs that failed or were cancelled.
    failed: usize,
    /// Items the crash interrupted, as `(item, fire_ms)`.
    interrupted: Vec<(u32, i64)>,
    /// Item runs started as failover, as `(item, fire_ms, ip)`.
    failed_over: Vec<(u32, i64, String)>,
    /// Items of those fires that never completed anywhere.
    not_run: Vec<NotRun>,
    /// Committed assignments: `(at_ms, instances)`.
    shardings: Vec<(i64, usize)>,
    /// `(item, fire)` pairs that completed more than once.
    duplicates: usize,
    /// Ephemeral nodes still on the registry after the stop.
    leftover: usize,
    victim: &'static str,
    expired_ms: Option<i64>,
    crash_ms: Option<i64>,
}

impl Summary {
    fn of(log: &[Rec], story: &Story) -> Self {
        let mut fires = BTreeSet::new();
        let mut completions: BTreeMap<(u32, i64), usize> = BTreeMap::new();
        let (mut failed, mut failed_over, mut shardings) = (0, Vec::new(), Vec::new());
        for r in log {
            match &r.event {
                SchedulerEvent::ItemStarted { item, fire_ms, kind, .. } => {
                    fires.insert(*fire_ms);
                    if *kind == FireKind::Failover {
                        failed_over.push((*item, *fire_ms, r.ip.clone()));
                    }
                }
                SchedulerEvent::ItemFinished { item, fire_ms, ok, .. } => {
                    if *ok {
                        *completions.entry((*item, *fire_ms)).or_default() += 1;
                    } else {
                        failed += 1;
                    }
                }
                SchedulerEvent::Sharded { assignment, .. } => {
                    shardings.push((r.at_ms, assignment.len()));
                }
                _ => {}
            }
        }
        let not_run = fires
            .iter()
            .filter_map(|&fire| {
                let items: Vec<u32> =
                    (0..ITEMS).filter(|&i| !completions.contains_key(&(i, fire))).collect();
                (!items.is_empty())
                    .then(|| why_not_run(log, story, &fires, &completions, fire, items))
            })
            .collect();
        Summary {
            fires: fires.len(),
            not_run,
            completed: completions.values().sum(),
            failed,
            interrupted: story.interrupted.clone(),
            failed_over,
            shardings,
            duplicates: completions.values().filter(|&&n| n > 1).count(),
            leftover: story.leftover,
            victim: VICTIM,
            crash_ms: story.crash_ms,
            expired_ms: story.expired_ms,
        }
    }

    /// How many item fires never completed.
    fn not_run_count(&self) -> usize {
        self.not_run.iter().map(|n| n.items.len()).sum()
    }

    /// The summary: one line per number, with what it counts; `start_ms` is where the
    /// timeline's clock starts.
    fn lines(&self, start_ms: i64) -> Vec<String> {
        let at = |ms: i64| elapsed(ms - start_ms);
        let fire = |ms: i64| format!("fire {}", at(ms));
        let victim = self.victim;
        let mut lines = vec!["summary, counted from the events above:".to_owned()];
        let mut row = |label: &str, count: usize, text: String| {
            lines.push(format!("  {label:<12}{count:>4}  {text}"));
        };
        row("fires", self.fires, "fire times at which at least one item started".into());
        let whole = self.fires * ITEMS as usize;
        let arithmetic = if self.completed + self.not_run_count() == whole + self.duplicates {
            format!(
                " ({} fires x {ITEMS} items{})",
                self.fires,
                if self.not_run_count() > 0 {
                    format!(", less {} not run", self.not_run_count())
                } else {
                    String::new()
                }
            )
        } else {
            String::new()
        };
        row(
            "completed",
            self.completed,
            format!("item runs that completed, failed-over re-runs included{arithmetic}"),
        );
        row("failed", self.failed, "item runs that failed or were cancelled".into());
        let interrupted = match self.crash_ms {
            Some(crash) => format!(
                "{}: running on {victim} when it was killed at {}",
                by_fire(&self.interrupted, &fire),
                at(crash)
            ),
            None => "nothing was killed".into(),
        };
        row("interrupted", self.interrupted.len(), interrupted);
        let taken: Vec<(u32, i64)> = self.failed_over.iter().map(|(i, f, _)| (*i, *f)).collect();
        let takers: BTreeSet<&str> =
            self.failed_over.iter().map(|(_, _, ip)| ip.as_str()).collect();
        let failed_over = if taken.is_empty() {
            "no item was re-run by failover".into()
        } else {
            let after = match self.expired_ms {
                Some(expired) => format!(", once its session expired at {}", at(expired)),
                None => String::new(),
            };
            format!(
                "{} re-run on {} (failover: the survivors take over the items a dead instance \
                 was running{after})",
                by_fire(&taken, &fire),
                takers.into_iter().collect::<Vec<_>>().join(" and ")
            )
        };
        row("failed over", self.failed_over.len(), failed_over);
        let not_run = if self.not_run.is_empty() {
            "every item of every fire completed".to_owned()
        } else {
            self.not_run.iter().map(|n| self.why(n, &at, &fire)).collect::<Vec<_>>().join("; ")
        };
        row("not run", self.not_run_count(), not_run);
        let shardings: Vec<String> = self
            .shardings
            .iter()
            .map(|(ms, n)| format!("{} over {n} {}", at(*ms), instances(*n)))
            .collect();
        row(
            "shardings",
            self.shardings.len(),
            format!("assignments the leader committed: {}", shardings.join(", ")),
        );
        row("duplicates", self.duplicates, "item fires that completed more than once".into());
        row(
            "nodes left",
            self.leftover,
            "ephemeral registry nodes still there after every instance stopped".into(),
        );
        lines
    }

    /// Why the items of one fire were not run, and whether they were caught up.
    fn why(&self, n: &NotRun, at: &dyn Fn(i64) -> String, fire: &dyn Fn(i64) -> String) -> String {
        let items = format!("{} {} of {}", plural(&n.items), list(&n.items), fire(n.fire_ms));
        let cause = match (&n.owner, n.while_undetected, self.crash_ms) {
            (Some(owner), true, Some(crash)) => {
                let expired = self.expired_ms.map_or_else(
                    || "before its session expired".to_owned(),
                    |ms| format!("before its session expired at {}", at(ms)),
                );
                format!(
                    "due on {owner} after it was killed at {} and {expired}, while the cluster \
                     still counted it as live",
                    at(crash)
                )
            }
            (Some(owner), _, _) => format!("due on {owner}, which did not report starting them"),
            (None, _, _) => "no instance reported starting them".to_owned(),
        };
        // Not run means no later run (failover, misfire catch-up) completed them either.
        let why_not = match n.caught_up_for {
            Some(earlier) => format!(
                "each item a dead instance owned gets one catch-up run, and for {} {} that was \
                 the failover re-run of {}",
                plural(&n.items),
                list(&n.items),
                fire(earlier)
            ),
            None => "no failover or misfire run completed them".to_owned(),
        };
        let next = n.next_fire_ms.map_or_else(String::new, |ms| {
            format!("; the next fire, {}, ran them on the live instances", at(ms))
        });
        format!("{items}: {cause}. Not caught up: {why_not}{next}")
    }
}

/// The owner of each item of the fire at `fire_ms`, and whether the fire fell in the window
/// where the killed instance still looked alive; and the next fire that completed them.
fn why_not_run(
    log: &[Rec],
    story: &Story,
    fires: &BTreeSet<i64>,
    completions: &BTreeMap<(u32, i64), usize>,
    fire_ms: i64,
    items: Vec<u32>,
) -> NotRun {
    // The assignment in force at that fire: the last one committed before it (or at it).
    let assignment = log.iter().rev().find_map(|r| match &r.event {
        SchedulerEvent::Sharded { assignment, .. }
            if r.at_ms <= fire_ms + story.interval_ms / 2 =>
        {
            Some(assignment)
        }
        _ => None,
    });
    let owners: BTreeSet<String> = items
        .iter()
        .filter_map(|item| {
            assignment?.iter().find(|(_, owned)| owned.contains(item)).map(|(id, _)| ip_of(id))
        })
        .map(str::to_owned)
        .collect();
    let owner = (owners.len() == 1).then(|| owners.into_iter().next()).flatten();
    let while_undetected = owner.as_deref() == Some(VICTIM)
        && story.crash_ms.is_some_and(|crash| crash < fire_ms)
        && story.expired_ms.is_none_or(|expired| fire_ms < expired);
    let next_fire_ms = fires
        .range(fire_ms + 1..)
        .find(|later| items.iter().all(|item| completions.contains_key(&(*item, **later))))
        .copied();
    // A dead instance's item gets one catch-up run: the failover re-run of an interrupted fire
    // takes that place (see `failover::missed_by`).
    let failover_fires: BTreeSet<i64> = items
        .iter()
        .map(|item| {
            log.iter().find_map(|r| match &r.event {
                SchedulerEvent::ItemStarted {
                    item: i,
                    fire_ms: f,
                    kind: FireKind::Failover,
                    ..
                } if i == item && *f != fire_ms => Some(*f),
                _ => None,
            })
        })
        .collect::<Option<_>>()
        .unwrap_or_default();
    let caught_up_for =
        (failover_fires.len() == 1).then(|| failover_fires.into_iter().next()).flatten();
    NotRun { fire_ms, items, owner, while_undetected, caught_up_for, next_fire_ms }
}

/// `items 0,1 of fire 2.79s; item 3 of fire 4.79s`.
fn by_fire(pairs: &[(u32, i64)], fire: &dyn Fn(i64) -> String) -> String {
    let mut grouped: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
    for &(item, fire_ms) in pairs {
        grouped.entry(fire_ms).or_default().push(item);
    }
    grouped
        .into_iter()
        .map(|(fire_ms, mut items)| {
            items.sort_unstable();
            items.dedup();
            format!("{} {} of {}", plural(&items), list(&items), fire(fire_ms))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn instances(n: usize) -> &'static str {
    if n == 1 {
        "instance"
    } else {
        "instances"
    }
}

fn plural(items: &[u32]) -> &'static str {
    if items.len() == 1 {
        "item"
    } else {
        "items"
    }
}

// ---------------------------------------------------------------------- the timeline

/// What a folded line is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ItemWhat {
    Start(FireKind),
    Finish,
    Claim,
}

/// Per-item events of one instance and one fire, waiting to be printed as one line.
#[derive(Debug)]
struct Fold {
    due: tokio::time::Instant,
    at_ms: i64,
    ip: String,
    what: ItemWhat,
    fire_ms: i64,
    /// `(item, token or ok)`.
    items: Vec<(u32, Option<u64>, Option<bool>)>,
}

/// Prints the timeline: `  12.34s  10.0.0.1  event     details`.
struct Printer<'a> {
    out: &'a mut dyn Write,
    start_ms: i64,
    folds: Vec<Fold>,
}

impl<'a> Printer<'a> {
    fn new(out: &'a mut dyn Write, start_ms: i64) -> Self {
        Printer { out, start_ms, folds: Vec::new() }
    }

    fn header() -> String {
        format!("{:>7}  {:<9} {:<9} {}", "time", "instance", "event", "details")
    }

    fn elapsed(&self, at_ms: i64) -> String {
        elapsed(at_ms - self.start_ms)
    }

    fn row(&mut self, at_ms: i64, who: &str, event: &str, details: &str) -> std::io::Result<()> {
        let time = self.elapsed(at_ms);
        writeln!(self.out, "{time:>7}  {who:<9} {event:<9} {details}")?;
        self.out.flush()
    }

    /// When the oldest folded line is due.
    fn next_due(&self) -> Option<tokio::time::Instant> {
        self.folds.first().map(|f| f.due)
    }

    fn take(&mut self, out: Out) -> Result<(), CliError> {
        let rec = match out {
            Out::Event(rec) => rec,
            other => {
                self.flush_all()?;
                return self.plain(other).map_err(CliError::from);
            }
        };
        let folded = match &rec.event {
            SchedulerEvent::ItemStarted { item, fire_ms, kind, token, .. } => {
                Some((ItemWhat::Start(*kind), *fire_ms, (*item, Some(*token), None)))
            }
            SchedulerEvent::ItemFinished { item, fire_ms, ok, .. } => {
                Some((ItemWhat::Finish, *fire_ms, (*item, None, Some(*ok))))
            }
            SchedulerEvent::FailoverClaimed { item, fire_ms, .. } => {
                Some((ItemWhat::Claim, *fire_ms, (*item, None, None)))
            }
            _ => None,
        };
        match folded {
            Some((what, fire_ms, entry)) => {
                let open = self
                    .folds
                    .iter_mut()
                    .find(|f| f.ip == rec.ip && f.what == what && f.fire_ms == fire_ms);
                match open {
                    Some(fold) => fold.items.push(entry),
                    None => self.folds.push(Fold {
                        due: tokio::time::Instant::now() + FOLD_WINDOW,
                        at_ms: rec.at_ms,
                        ip: rec.ip,
                        what,
                        fire_ms,
                        items: vec![entry],
                    }),
                }
                Ok(())
            }
            None => {
                self.flush_all()?;
                self.event(&rec).map_err(CliError::from)
            }
        }
    }

    fn flush_due(&mut self) -> Result<(), CliError> {
        let now = tokio::time::Instant::now();
        while self.folds.first().is_some_and(|f| f.due <= now) {
            let fold = self.folds.remove(0);
            self.fold(&fold)?;
        }
        Ok(())
    }

    fn flush_all(&mut self) -> Result<(), CliError> {
        for fold in std::mem::take(&mut self.folds) {
            self.fold(&fold)?;
        }
        Ok(())
    }

    fn fire(&self, fire_ms: i64) -> String {
        format!("fire {}", self.elapsed(fire_ms))
    }

    fn fold(&mut self, fold: &Fold) -> std::io::Result<()> {
        let mut items: Vec<u32> = fold.items.iter().map(|&(item, _, _)| item).collect();
        items.sort_unstable();
        let label = if items.len() == 1 { "item" } else { "items" };
        let what = format!("{label} {} of {}", list(&items), self.fire(fold.fire_ms));
        let (event, details) = match fold.what {
            ItemWhat::Start(kind) => {
                let tokens: BTreeSet<u64> = fold.items.iter().filter_map(|&(_, t, _)| t).collect();
                let tokens = tokens.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
                let how = match kind {
                    FireKind::Scheduled => "",
                    FireKind::Misfire => ", catching up a skipped fire",
                    FireKind::Manual => ", triggered by hand",
                    FireKind::Failover => ", failed over",
                    _ => "",
                };
                let plural = if tokens.contains(',') { "s" } else { "" };
                ("start", format!("{what}{how} (fencing token{plural} {tokens})"))
            }
            ItemWhat::Finish => {
                let failed: Vec<u32> = fold
                    .items
                    .iter()
                    .filter(|&&(_, _, ok)| ok == Some(false))
                    .map(|e| e.0)
                    .collect();
                let verdict = if failed.is_empty() {
                    "ok".to_owned()
                } else {
                    format!("failed or cancelled: {}", list(&failed))
                };
                ("finish", format!("{what}: {verdict}"))
            }
            ItemWhat::Claim => ("claim", format!("orphaned {what}")),
        };
        self.row(fold.at_ms, &fold.ip, event, &details)
    }

    fn event(&mut self, rec: &Rec) -> std::io::Result<()> {
        let (event, details) = match &rec.event {
            SchedulerEvent::LeaderElected { .. } => ("leader", "elected".to_owned()),
            SchedulerEvent::Sharded { assignment, .. } => {
                let shares: Vec<String> = assignment
                    .iter()
                    .map(|(id, items)| format!("{}: {}", ip_of(id), list(items)))
                    .collect();
                ("sharding", shares.join("  "))
            }
            SchedulerEvent::Session(session) => ("session", session_state(session).to_owned()),
            SchedulerEvent::Skipped { fire_ms, reason, .. } => {
                let reason = skip_code(reason).replace('_', " ");
                ("skip", format!("{}: {reason}", self.fire(*fire_ms)))
            }
            SchedulerEvent::JobStopped { reason, .. } => ("stopped", one_line(reason)),
            SchedulerEvent::FireFailed { item, error, .. } => {
                ("failed", format!("item {item}: {}", one_line(error)))
            }
            SchedulerEvent::Error { message, .. } => ("error", one_line(message)),
            SchedulerEvent::ConfigApplied { .. } => ("config", "applied".to_owned()),
            SchedulerEvent::ConfigRejected { reason, .. } => {
                ("config", format!("rejected: {}", one_line(reason)))
            }
            _ => return Ok(()),
        };
        self.row(rec.at_ms, &rec.ip, event, &details)
    }

    fn plain(&mut self, out: Out) -> std::io::Result<()> {
        match out {
            Out::Member { at_ms, ip, joined, detail } => {
                let event = if joined { "joined" } else { "left" };
                self.row(at_ms, &ip, event, &format!("registry: {detail}"))
            }
            Out::Step { at_ms, text } => {
                let time = self.elapsed(at_ms);
                writeln!(self.out, "{time:>7}  >>> {text}")?;
                self.out.flush()
            }
            Out::Text(text) => {
                writeln!(self.out, "{text}")?;
                self.out.flush()
            }
            Out::Event(rec) => self.event(&rec),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ip: &str, at_ms: i64, event: SchedulerEvent) -> Rec {
        Rec { ip: ip.into(), at_ms, event }
    }

    fn start(item: u32, fire_ms: i64, kind: FireKind) -> SchedulerEvent {
        SchedulerEvent::ItemStarted { job: JOB.into(), item, fire_ms, kind, token: 1 }
    }

    fn finish(item: u32, fire_ms: i64, ok: bool) -> SchedulerEvent {
        SchedulerEvent::ItemFinished { job: JOB.into(), item, fire_ms, ok }
    }

    fn sharded(at_ms: i64, shares: &[(&str, &[u32])]) -> Rec {
        let assignment =
            shares.iter().map(|(ip, items)| (format!("{ip}@-@1"), items.to_vec())).collect();
        rec("10.0.0.1", at_ms, SchedulerEvent::Sharded { job: JOB.into(), assignment })
    }

    /// The victim runs items 0,1 and is killed during the fire at 10 ms; the fire at 2010 ms is
    /// due on it before its session expires at 2500 ms; the survivor re-runs the interrupted
    /// items and runs everything from the fire at 4010 ms on.
    fn crash_story() -> (Vec<Rec>, Story) {
        let mut log = vec![sharded(10, &[(VICTIM, &[0, 1]), ("10.0.0.2", &[2, 3, 4, 5])])];
        for item in 0..ITEMS {
            let ip = if item < 2 { VICTIM } else { "10.0.0.2" };
            log.push(rec(ip, 10, start(item, 10, FireKind::Scheduled)));
            if ip != VICTIM {
                log.push(rec(ip, 20, finish(item, 10, true)));
            }
        }
        for item in 2..ITEMS {
            log.push(rec("10.0.0.2", 2010, start(item, 2010, FireKind::Scheduled)));
            log.push(rec("10.0.0.2", 2020, finish(item, 2010, true)));
        }
        for item in 0..2 {
            log.push(rec("10.0.0.2", 2600, start(item, 10, FireKind::Failover)));
            log.push(rec("10.0.0.2", 2700, finish(item, 10, true)));
        }
        log.push(sharded(4010, &[("10.0.0.2", &[0, 1, 2, 3, 4, 5])]));
        for item in 0..ITEMS {
            log.push(rec("10.0.0.2", 4010, start(item, 4010, FireKind::Scheduled)));
            log.push(rec("10.0.0.2", 4020, finish(item, 4010, true)));
        }
        let story = Story {
            interval_ms: 2000,
            interrupted: vec![(0, 10), (1, 10)],
            crash_ms: Some(15),
            expired_ms: Some(2500),
            leftover: 0,
        };
        (log, story)
    }

    #[test]
    fn the_log_readers_find_runs_and_failovers() {
        let (log, _) = crash_story();
        let before_4010 = log.iter().position(|r| r.at_ms == 4010).unwrap();
        assert!(!fire_complete_since(&log[..before_4010], 2000), "items 0,1 of 2010 never ran");
        assert!(fire_complete_since(&log, 4000));
        assert_eq!(running_on(&log, VICTIM, 0), [(0, 10), (1, 10)]);
        assert!(completed_elsewhere(&log, 1, 10, VICTIM));
    }

    #[test]
    fn the_summary_explains_every_number() {
        let (log, story) = crash_story();
        let summary = Summary::of(&log, &story);
        assert_eq!(
            summary.not_run,
            [NotRun {
                fire_ms: 2010,
                items: vec![0, 1],
                owner: Some(VICTIM.into()),
                while_undetected: true,
                caught_up_for: Some(10),
                next_fire_ms: Some(4010),
            }]
        );
        assert_eq!(
            summary.lines(0),
            [
                "summary, counted from the events above:",
                "  fires          3  fire times at which at least one item started",
                "  completed     16  item runs that completed, failed-over re-runs included (3 \
                 fires x 6 items, less 2 not run)",
                "  failed         0  item runs that failed or were cancelled",
                "  interrupted    2  items 0,1 of fire 0.01s: running on 10.0.0.3 when it was \
                 killed at 0.01s",
                "  failed over    2  items 0,1 of fire 0.01s re-run on 10.0.0.2 (failover: the \
                 survivors take over the items a dead instance was running, once its session \
                 expired at 2.50s)",
                "  not run        2  items 0,1 of fire 2.01s: due on 10.0.0.3 after it was killed \
                 at 0.01s and before its session expired at 2.50s, while the cluster still \
                 counted it as live. Not caught up: each item a dead instance owned gets one \
                 catch-up run, and for items 0,1 that was the failover re-run of fire 0.01s; the \
                 next fire, 4.01s, ran them on the live instances",
                "  shardings      2  assignments the leader committed: 0.01s over 2 instances, 4.01s \
                 over 1 instance",
                "  duplicates     0  item fires that completed more than once",
                "  nodes left     0  ephemeral registry nodes still there after every instance \
                 stopped",
            ]
        );
    }

    #[test]
    fn a_second_completion_is_a_duplicate_and_an_unexplained_gap_says_so() {
        let (mut log, story) = crash_story();
        log.push(rec(VICTIM, 50, finish(0, 10, true)));
        log.push(rec("10.0.0.2", 6010, start(3, 6010, FireKind::Scheduled)));
        let summary = Summary::of(&log, &story);
        assert_eq!(summary.duplicates, 1);
        let lines = summary.lines(0);
        let not_run = lines.iter().find(|l| l.starts_with("  not run")).unwrap();
        assert!(not_run.starts_with("  not run        8  items 0,1 of fire 2.01s: "), "{not_run}");
        assert!(
            not_run.ends_with(
                "; items 0,1,2,3,4,5 of fire 6.01s: due on 10.0.0.2, which did not report \
                 starting them. Not caught up: no failover or misfire run completed them"
            ),
            "{not_run}"
        );
    }

    #[tokio::test]
    async fn item_events_of_one_fire_share_a_line() {
        let mut out = Vec::new();
        let mut printer = Printer::new(&mut out, 0);
        for item in [1, 0] {
            printer
                .take(Out::Event(rec("10.0.0.3", 2000, start(item, 2000, FireKind::Failover))))
                .unwrap();
        }
        printer
            .take(Out::Event(rec("10.0.0.1", 2001, start(4, 2000, FireKind::Scheduled))))
            .unwrap();
        printer
            .take(Out::Event(rec(
                "10.0.0.1",
                2500,
                SchedulerEvent::LeaderElected { job: JOB.into() },
            )))
            .unwrap();
        printer.take(Out::Step { at_ms: 3000, text: "crashing".into() }).unwrap();
        drop(printer);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "  2.00s  10.0.0.3  start     items 0,1 of fire 2.00s, failed over (fencing token 1)\n\
             \x20 2.00s  10.0.0.1  start     item 4 of fire 2.00s (fencing token 1)\n\
             \x20 2.50s  10.0.0.1  leader    elected\n\
             \x20 3.00s  >>> crashing\n"
        );
    }
}
