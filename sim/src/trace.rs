//! The trace of a run: one entry per event, in the order things happened, with the virtual time
//! and who did it. Entries are structured (the invariant checker reads them) and print as one
//! line of text each; the text of a run is what determinism is judged on.
//!
//! Besides the schedulers' own events, the trace holds the simulator's notes: faults and
//! workload changes as applied, instances starting and stopping, and the server-side truth
//! about sessions (`session-open`/`session-end`), read from the registry whenever an entry
//! that depends on it is recorded. A scheduler only hears about its session late (or, cut
//! off, not at all); the checker needs to know when a session really ended.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::sync::Arc;

use parking_lot::Mutex;
use shardcron_core::config::JobConfig;
use shardcron_core::registry::SessionEvent;
use shardcron_core::runtime::{FireKind, SchedulerEvent, SkipReason};
use shardcron_registry_mem::{ClientId, MemServer};

use crate::faults::Fault;
use crate::workload::Workload;

/// Virtual time starts here (2023-11-14T22:13:20Z, a whole multiple of 10 s); trace times are
/// milliseconds since then.
pub const EPOCH_MS: i64 = 1_700_000_000_000;

/// Who an entry is about: 0 is the simulator, `i` is instance `i`.
pub type Who = usize;

/// One line of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Virtual milliseconds since the start of the run.
    pub at: i64,
    pub who: Who,
    pub what: What,
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum What {
    /// A scheduler event, with the registry session the instance held when it was recorded
    /// and, for leadership events, who held the job's leader node at that moment.
    Event {
        event: SchedulerEvent,
        session: Option<u64>,
        leader: Option<String>,
    },
    Note(Note),
}

/// The simulator's own entries.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    Begin {
        seed: u64,
        instances: usize,
        profile: String,
        /// The schedulers' fire lead in ms (`Settings::fire_lead`): every instance's clock
        /// reads that far ahead of the registry's. 0: none (and not printed).
        fire_lead_ms: i64,
    },
    /// A job's config as it now stands in the registry (initially, and after every change).
    Config(JobState),
    /// A job was removed from every instance.
    JobRemoved {
        job: String,
    },
    Fault(Fault),
    /// A fault verb that could do nothing in the current state.
    Ignored {
        what: String,
        why: String,
    },
    /// The instance's `add_job` of a job failed (the application retries it, a second
    /// later, a few times): until an add succeeds the instance does not have the job.
    AddFailed {
        job: String,
        why: String,
    },
    /// The instance's `add_job` of a job succeeded after it had failed.
    AddedAfterRetry {
        job: String,
        attempts: u32,
    },
    /// A workload change completed (or failed, with the error).
    Work {
        work: Workload,
        error: Option<String>,
    },
    /// The instance is up: scheduler started, every job added.
    Started,
    StartFailed {
        error: String,
    },
    /// A graceful stop began / ended.
    Stopping,
    Stopped,
    /// kill -9: this many tasks were aborted.
    Crashed {
        tasks: usize,
    },
    /// The registry opened / ended a session of the instance (server-side truth).
    SessionOpened {
        session: u64,
    },
    SessionEnded {
        session: u64,
    },
    Phase(Phase),
    /// A job's reshard flag (`leader/sharding/necessary`) as the registry now holds it
    /// (`None`: gone), seen by the simulator's own watch: which fires wait for a reshard.
    Flag {
        job: String,
        data: Option<String>,
    },
    /// A registry snapshot was taken for the checker.
    Checkpoint {
        nodes: usize,
    },
    /// The instance's jobs read nodes outside what its watch covered (its view did not keep
    /// them up to date): how many reads, and the first paths read.
    StrayReads {
        count: u64,
        paths: Vec<String>,
    },
}

/// The phases of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Faults and workload changes from the schedule.
    Faults,
    /// The schedule is over: links healed, clocks and latencies reset, instances restarted.
    Quiet,
    /// Things are healthy: every item must run again within the liveness window.
    Live,
    /// Everything is stopped gracefully; nothing may be left behind.
    Final,
    End,
}

/// What the checker needs of a job's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobState {
    pub job: String,
    pub cron: Option<String>,
    pub time_zone: Option<String>,
    pub count: u32,
    pub failover: bool,
    pub misfire: bool,
    pub disabled: bool,
    pub max_time_diff_seconds: i32,
    pub strategy: Option<String>,
    pub item_parameters: Option<String>,
    pub monitor_execution: bool,
    pub static_sharding: bool,
    /// How long each item runs (the simulated job's, not part of the registry config).
    pub item_ms: u64,
}

impl JobState {
    pub fn of(config: &JobConfig) -> Self {
        JobState {
            job: config.job_name().to_owned(),
            cron: config.cron().map(str::to_owned),
            time_zone: config.time_zone_id().map(str::to_owned),
            count: config.sharding_total_count(),
            failover: config.failover(),
            misfire: config.misfire(),
            disabled: config.disabled(),
            max_time_diff_seconds: config.max_time_diff_seconds(),
            strategy: config.job_sharding_strategy_type().map(str::to_owned),
            item_parameters: config.sharding_item_parameters().map(str::to_owned),
            monitor_execution: config.monitor_execution(),
            static_sharding: config.static_sharding(),
            item_ms: 0,
        }
    }
}

/// A string field that is set: neither absent nor empty.
fn set(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

/// The trace being recorded. Cheap to clone; every clone records into the same trace.
#[derive(Clone, Default)]
pub struct Trace {
    inner: Arc<Mutex<Inner>>,
}

impl fmt::Debug for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trace").field("entries", &self.inner.lock().entries.len()).finish()
    }
}

#[derive(Default)]
struct Inner {
    entries: Vec<Entry>,
    origin: Option<tokio::time::Instant>,
    server: Option<MemServer>,
    namespace: String,
    /// Every registry client of an instance whose session may still live: its instance and the
    /// session last seen.
    clients: BTreeMap<ClientId, (Who, Option<u64>)>,
    /// The current client of each instance.
    current: BTreeMap<Who, ClientId>,
    /// The server's sessions as the last comparison found them, by client (every entry that
    /// depends on them asks: most find nothing changed).
    live: Vec<(ClientId, Option<u64>)>,
    /// The server's sessions now, read into a kept buffer.
    live_now: Vec<(ClientId, Option<u64>)>,
    /// `clients` or `current` changed since the last comparison: it must run in full.
    stale: bool,
}

impl Trace {
    /// A trace whose clock starts now (call inside the simulation's runtime) and which reads
    /// session truth from `server`.
    pub(crate) fn start(server: MemServer, namespace: &str) -> Self {
        let trace = Trace::default();
        {
            let mut inner = trace.inner.lock();
            inner.origin = Some(tokio::time::Instant::now());
            inner.server = Some(server);
            inner.namespace = namespace.to_owned();
        }
        trace
    }

    /// A trace made of recorded entries (read back for checking).
    pub fn from_entries(entries: Vec<Entry>) -> Self {
        let trace = Trace::default();
        trace.inner.lock().entries = entries;
        trace
    }

    /// Virtual milliseconds since the start.
    pub fn now(&self) -> i64 {
        let origin = self.inner.lock().origin;
        origin.map_or(0, |o| {
            i64::try_from(tokio::time::Instant::now().duration_since(o).as_millis()).unwrap_or(0)
        })
    }

    /// The instance `who` now talks to the registry through `client`.
    pub(crate) fn attach(&self, who: Who, client: ClientId) {
        let mut inner = self.inner.lock();
        inner.clients.insert(client, (who, None));
        inner.current.insert(who, client);
        inner.stale = true;
        inner.sync_sessions();
    }

    /// Records a simulator note.
    pub fn note(&self, who: Who, note: Note) {
        let mut inner = self.inner.lock();
        inner.sync_sessions();
        inner.push(who, What::Note(note));
    }

    /// Records a scheduler event of instance `who`.
    pub(crate) fn event(&self, who: Who, event: &SchedulerEvent) {
        let mut inner = self.inner.lock();
        let probe = !matches!(
            event,
            SchedulerEvent::Armed { .. }
                | SchedulerEvent::Skipped { .. }
                | SchedulerEvent::ItemFinished { .. }
                | SchedulerEvent::ConfigApplied { .. }
        );
        if probe {
            inner.sync_sessions();
        }
        let session = match event {
            SchedulerEvent::ItemStarted { .. } => inner.session_of(who),
            _ => None,
        };
        let leader = match event {
            SchedulerEvent::LeaderElected { job } | SchedulerEvent::Sharded { job, .. } => {
                inner.leader_of(job)
            }
            _ => None,
        };
        inner.push(who, What::Event { event: event.clone(), session, leader });
    }

    /// Brings the session entries up to date with the server now.
    pub(crate) fn sync(&self) {
        self.inner.lock().sync_sessions();
    }

    pub fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of every entry so far.
    pub fn entries(&self) -> Vec<Entry> {
        self.inner.lock().entries.clone()
    }

    /// Takes the entries out (the trace is left empty).
    pub(crate) fn take(&self) -> Vec<Entry> {
        std::mem::take(&mut self.inner.lock().entries)
    }
}

impl Inner {
    fn push(&mut self, who: Who, what: What) {
        let at = self.origin.map_or(0, |o| {
            i64::try_from(tokio::time::Instant::now().duration_since(o).as_millis()).unwrap_or(0)
        });
        self.entries.push(Entry { at, who, what });
    }

    fn session_of(&self, who: Who) -> Option<u64> {
        let client = self.current.get(&who)?;
        self.clients.get(client).and_then(|(_, s)| *s)
    }

    fn leader_of(&self, job: &str) -> Option<String> {
        let server = self.server.as_ref()?;
        let path = format!("{}/{job}/leader/election/instance", self.namespace);
        server.node(&path).map(|n| n.text().into_owned())
    }

    /// Compares each instance client's session with the server's and records what changed.
    fn sync_sessions(&mut self) {
        let Some(server) = &self.server else { return };
        if self.clients.is_empty() {
            return;
        }
        server.session_ids(&mut self.live_now);
        // Nothing changed on either side since the last comparison: it would find nothing.
        if !self.stale && self.live_now == self.live {
            return;
        }
        self.stale = false;
        std::mem::swap(&mut self.live, &mut self.live_now);
        let live = &self.live;
        let mut notes = Vec::new();
        let mut gone = Vec::new();
        for (client, (who, seen)) in self.clients.iter_mut() {
            // `live` is in client order (the server's clients are a map by id).
            let now = live.binary_search_by_key(client, |(c, _)| *c).ok().and_then(|at| live[at].1);
            if now != *seen {
                if let Some(old) = *seen {
                    notes.push((*who, Note::SessionEnded { session: old }));
                }
                if let Some(new) = now {
                    notes.push((*who, Note::SessionOpened { session: new }));
                }
                *seen = now;
            }
            let current = self.current.get(who) == Some(client);
            if now.is_none() && !current {
                gone.push(*client);
            }
        }
        for client in gone {
            self.clients.remove(&client);
        }
        for (who, note) in notes {
            self.push(who, What::Note(note));
        }
    }
}

/// Prints the entries as text, one line each.
pub fn render(entries: &[Entry]) -> String {
    let mut out = String::with_capacity(entries.len() * 48);
    for e in entries {
        let _ = writeln!(out, "{e}");
    }
    out
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = if self.who == 0 { "sim".to_owned() } else { format!("i{}", self.who) };
        write!(f, "{:>9} {who:<4} {}", self.at, self.what)
    }
}

/// A fire instant relative to the epoch, as printed.
pub fn rel(fire_ms: i64) -> i64 {
    fire_ms - EPOCH_MS
}

impl fmt::Display for What {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            What::Note(note) => write!(f, "{note}"),
            What::Event { event, session, leader } => {
                write_event(f, event)?;
                if let Some(s) = session {
                    write!(f, " sess={s}")?;
                }
                if let Some(l) = leader {
                    write!(f, " leader-node={l}")?;
                }
                Ok(())
            }
        }
    }
}

fn kind(k: FireKind) -> &'static str {
    match k {
        FireKind::Scheduled => "scheduled",
        FireKind::Misfire => "misfire",
        FireKind::Manual => "manual",
        FireKind::Failover => "failover",
        _ => "other",
    }
}

/// The reason of a skip, as printed.
pub fn reason(r: &SkipReason) -> String {
    match r {
        SkipReason::Disconnected => "disconnected".into(),
        SkipReason::JobDisabled => "job-disabled".into(),
        SkipReason::ServerDisabled => "server-disabled".into(),
        SkipReason::NoItems => "no-items".into(),
        SkipReason::Misfire => "misfire".into(),
        SkipReason::ClockSkew { diff_ms } => format!("clock-skew({diff_ms}ms)"),
        SkipReason::ShardingTimeout => "sharding-timeout".into(),
        SkipReason::Late => "late".into(),
        SkipReason::ShuttingDown => "shutting-down".into(),
        SkipReason::RegistryError(e) => format!("registry-error({e})"),
        other => other.code().replace('_', "-"),
    }
}

fn write_event(f: &mut fmt::Formatter<'_>, event: &SchedulerEvent) -> fmt::Result {
    use SchedulerEvent as E;
    match event {
        E::Armed { job, next_fire_ms } => write!(f, "armed {job} next=+{}", rel(*next_fire_ms)),
        E::Skipped { job, fire_ms, reason: r } => {
            write!(f, "skipped {job} fire=+{} {}", rel(*fire_ms), reason(r))
        }
        E::ItemStarted { job, item, fire_ms, kind: k, token } => {
            write!(f, "start {job}#{item} fire=+{} {} token={token}", rel(*fire_ms), kind(*k))
        }
        E::ItemFinished { job, item, fire_ms, ok } => {
            write!(
                f,
                "end {job}#{item} fire=+{} {}",
                rel(*fire_ms),
                if *ok { "ok" } else { "failed" }
            )
        }
        E::FireFailed { job, fire_ms, item, error } => {
            write!(f, "fire-failed {job}#{item} fire=+{} {error}", rel(*fire_ms))
        }
        E::LeaderElected { job } => write!(f, "leader {job}"),
        E::Sharded { job, assignment } => {
            write!(f, "sharded {job}")?;
            for (instance, items) in assignment {
                let items: Vec<String> = items.iter().map(u32::to_string).collect();
                write!(f, " {instance}=[{}]", items.join(","))?;
            }
            Ok(())
        }
        E::ConfigRejected { job, reason } => write!(f, "config-rejected {job} {reason}"),
        E::ConfigApplied { job } => write!(f, "config-applied {job}"),
        E::Session(SessionEvent::Connected { session }) => {
            write!(f, "session Connected sess={session}")
        }
        E::Session(s) => write!(f, "session {s:?}"),
        E::JobStopped { job, reason } => write!(f, "stopped {job} ({reason})"),
        E::Error { job, message } => write!(f, "error {job}: {message}"),
        E::FailoverClaimed { job, item, fire_ms } => {
            write!(f, "failover-claim {job}#{item} fire=+{}", rel(*fire_ms))
        }
        E::Reconciled { job } => write!(f, "reconciled {job}"),
        E::RegistryGarbage { job, path, value, reason } => {
            write!(f, "registry-garbage {job} {path}={value:?}: {reason}")
        }
        other => write!(f, "{other:?}"),
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::Begin { seed, instances, profile, fire_lead_ms } => {
                write!(f, "begin seed={seed} instances={instances} profile={profile}")?;
                if *fire_lead_ms != 0 {
                    write!(f, " fire-lead={fire_lead_ms}ms")?;
                }
                Ok(())
            }
            Note::Config(s) => {
                write!(
                    f,
                    "config {} cron={} count={} failover={} misfire={} disabled={} \
                     max-time-diff={}",
                    s.job,
                    s.cron.as_deref().unwrap_or("-"),
                    s.count,
                    s.failover,
                    s.misfire,
                    s.disabled,
                    s.max_time_diff_seconds
                )?;
                // Only what differs from the defaults, so that the generated jobs' lines read
                // as they always have.
                if let Some(tz) = set(&s.time_zone) {
                    write!(f, " time-zone={tz}")?;
                }
                if let Some(strategy) = set(&s.strategy) {
                    write!(f, " strategy={strategy}")?;
                }
                if let Some(params) = set(&s.item_parameters) {
                    write!(f, " item-parameters={params}")?;
                }
                if !s.monitor_execution {
                    f.write_str(" monitor-execution=false")?;
                }
                if s.static_sharding {
                    f.write_str(" static-sharding=true")?;
                }
                Ok(())
            }
            Note::JobRemoved { job } => write!(f, "job-removed {job}"),
            Note::Flag { job, data: Some(d) } => write!(f, "flag {job} {d:?}"),
            Note::Flag { job, data: None } => write!(f, "flag {job} gone"),
            Note::Fault(fault) => write!(f, "FAULT {fault}"),
            Note::Ignored { what, why } => write!(f, "ignored {what}: {why}"),
            Note::AddFailed { job, why } => write!(f, "add-failed {job}: {why}"),
            Note::AddedAfterRetry { job, attempts } => {
                write!(f, "added {job} (attempt {attempts})")
            }
            Note::Work { work, error: None } => write!(f, "WORK {work}"),
            Note::Work { work, error: Some(e) } => write!(f, "WORK {work} failed: {e}"),
            Note::Started => write!(f, "up"),
            Note::StartFailed { error } => write!(f, "start-failed {error}"),
            Note::Stopping => write!(f, "stopping"),
            Note::Stopped => write!(f, "down"),
            Note::Crashed { tasks } => write!(f, "crashed ({tasks} tasks killed)"),
            Note::StrayReads { count, paths } => {
                write!(f, "{count} reads outside the watched scope: {}", paths.join(", "))
            }
            Note::SessionOpened { session } => write!(f, "session-open {session}"),
            Note::SessionEnded { session } => write!(f, "session-end {session}"),
            Note::Phase(p) => write!(f, "phase {p:?}"),
            Note::Checkpoint { nodes } => write!(f, "checkpoint ({nodes} nodes)"),
        }
    }
}
