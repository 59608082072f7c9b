//! The invariant checker: the promises of `GUARANTEES.md` over a run's trace and registry
//! checkpoints.
//!
//! | invariant | module | checked on |
//! |---|---|---|
//! | 1. no item on two instances at once | `exclusive` | trace |
//! | 2. every scheduled fire of every enabled item runs exactly once, or is recorded with a reason; a crash loses no running item when failover is on | `fires` | trace |
//! | 3. at most one leader acts; sharding flags cleared once a live leader exists | `leader` | trace + Live checkpoint |
//! | 4. after membership settles, the assignment is the strategy's for the live enabled instances | `assignment` | Live checkpoint |
//! | 5. no node leaks after every instance stopped | `leaks` | Final checkpoint |
//! | 6. garbage written into the registry is reported, its fires recorded by the report, and repaired by the live checkpoint | `garbage` | trace + Live checkpoint |
//! | liveness: once healthy, every enabled item runs again within two fire periods plus twice its run time | `liveness` | trace |
//!
//! Every violation names the invariant, the virtual time, and the trace entries that led to it.
//! `timeline` reads the simulator's notes (instance lifecycle, sessions, config and workload
//! changes) into the facts the checks share.

mod assignment;
mod exclusive;
mod fires;
mod garbage;
mod leader;
mod leaks;
mod liveness;
mod scope;
mod timeline;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use shardcron_core::runtime::SchedulerEvent;
use shardcron_core::sharding::ShardingStrategies;

pub use fires::Accounting;
use timeline::Timeline;

use crate::trace::{Entry, Note, Phase, What};

/// Which invariant a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invariant {
    /// 1: an item ran on two instances at once.
    Exclusive,
    /// 2: a scheduled fire ran twice, or neither ran nor was recorded with a reason, or a
    /// crashed run was not failed over.
    Fires,
    /// 3: a leader acted without holding the leader node, or flags stayed set.
    Leader,
    /// 4: the settled assignment is not the strategy's.
    Assignment,
    /// 5: nodes left behind after every instance stopped.
    Leaks,
    /// Items that did not run again once things were healthy.
    Liveness,
    /// 6: garbage in the registry not reported, or not repaired.
    Garbage,
    /// A job read a node its instance's watch did not cover (issue #15): it decided on data
    /// the view did not keep up to date.
    Scope,
    /// A property of the user's own (`UserInvariant`); the message starts with its name. Not
    /// in [`ALL`](Self::ALL), which lists the built-in ones.
    User,
}

impl Invariant {
    pub const ALL: [Invariant; 8] = [
        Invariant::Exclusive,
        Invariant::Fires,
        Invariant::Leader,
        Invariant::Assignment,
        Invariant::Leaks,
        Invariant::Liveness,
        Invariant::Garbage,
        Invariant::Scope,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Invariant::Exclusive => "1-exclusive",
            Invariant::Fires => "2-fires",
            Invariant::Leader => "3-leader",
            Invariant::Assignment => "4-assignment",
            Invariant::Leaks => "5-leaks",
            Invariant::Liveness => "liveness",
            Invariant::Garbage => "6-garbage",
            Invariant::Scope => "scope",
            Invariant::User => "user",
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One broken invariant.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub invariant: Invariant,
    /// Virtual milliseconds since the start of the run.
    pub at: i64,
    pub message: String,
    /// The trace entries that led to it (the last ones about the same job, and every fault).
    pub context: Vec<Entry>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "VIOLATION {} at {} ms: {}", self.invariant, self.at, self.message)?;
        for e in &self.context {
            writeln!(f, "    {e}")?;
        }
        Ok(())
    }
}

/// The registry as a checkpoint saw it: paths relative to the namespace, with text and
/// whether the node is ephemeral, and the instances that were up.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    pub at: i64,
    pub phase: Phase,
    pub nodes: BTreeMap<String, (String, bool)>,
    /// `(index, instance id)` of every instance up at the checkpoint.
    pub up: Vec<(usize, String)>,
    /// `(index, status)` of every instance that was neither up nor down (crashed instances are
    /// restarted in the quiet phase, so any of these means a start or stop took too long).
    pub unsettled: Vec<(usize, crate::instance::Status)>,
}

impl Checkpoint {
    pub fn text(&self, path: &str) -> Option<&str> {
        self.nodes.get(path).map(|(t, _)| t.as_str())
    }
}

/// Checks every invariant. Violations come sorted by time.
pub fn check(entries: &[Entry], checkpoints: &[Checkpoint], session: Duration) -> Vec<Violation> {
    check_with_accounting(entries, checkpoints, session).0
}

/// Checks every invariant, and accounts for every scheduled fire (how each was settled).
pub fn check_with_accounting(
    entries: &[Entry],
    checkpoints: &[Checkpoint],
    session: Duration,
) -> (Vec<Violation>, Accounting) {
    check_with_strategies(entries, checkpoints, session, &ShardingStrategies::default())
}

/// [`check_with_accounting`] for a run whose jobs may use custom sharding `strategies` (the
/// assignment invariant computes the expected assignment with them).
pub fn check_with_strategies(
    entries: &[Entry],
    checkpoints: &[Checkpoint],
    session: Duration,
    strategies: &ShardingStrategies,
) -> (Vec<Violation>, Accounting) {
    let lead = fire_lead_ms(entries);
    if lead == 0 {
        return check_in_schedulers_time(entries, checkpoints, session, strategies);
    }
    // With a fire lead every scheduler's clock reads `lead` ahead of the registry's: each
    // instance takes the fire of `t` at the registry's `t - lead` (and its items start at
    // `t`), stamps what it writes by its clock, and, restarted less than the lead before a
    // fire, is by its clock back after it. The cluster keeps one time, the schedulers': the
    // checks judge in it, the trace and checkpoints moved `lead` later. Everything measured
    // between two moments (a run's overlap with another, a session's timeout, a liveness
    // bound) reads the same in either time; what compares a moment with a time some
    // scheduler computed or wrote (a fire, a raise's stamp, a ledger's mark) reads it as the
    // cluster does. The violations are placed in the registry's time again, as the trace is,
    // and their messages say in which time they speak.
    let later = |e: &Entry| Entry { at: e.at.saturating_add(lead), ..e.clone() };
    let entries: Vec<Entry> = entries.iter().map(later).collect();
    let checkpoints: Vec<Checkpoint> = checkpoints
        .iter()
        .map(|c| Checkpoint { at: c.at.saturating_add(lead), ..c.clone() })
        .collect();
    let (mut violations, accounting) =
        check_in_schedulers_time(&entries, &checkpoints, session, strategies);
    for v in &mut violations {
        v.message.push_str(&format!(
            " (times in this message by the schedulers' clocks: the trace's plus the {lead} ms \
             fire lead)"
        ));
        v.at = v.at.saturating_sub(lead);
        for e in &mut v.context {
            e.at = e.at.saturating_sub(lead);
        }
    }
    (violations, accounting)
}

/// The fire lead a run was made with (its `begin` note), in ms.
fn fire_lead_ms(entries: &[Entry]) -> i64 {
    let lead = entries.iter().find_map(|e| match &e.what {
        What::Note(Note::Begin { fire_lead_ms, .. }) => Some(*fire_lead_ms),
        _ => None,
    });
    lead.unwrap_or(0)
}

/// [`check_with_strategies`] on a trace whose times are the schedulers' (moved by the fire
/// lead, if any).
fn check_in_schedulers_time(
    entries: &[Entry],
    checkpoints: &[Checkpoint],
    session: Duration,
    strategies: &ShardingStrategies,
) -> (Vec<Violation>, Accounting) {
    let timeline = Timeline::read(entries, session);
    let mut out = Vec::new();
    exclusive::check(entries, &timeline, &mut out);
    let accounting = fires::check(entries, &timeline, &mut out);
    leader::check(entries, &timeline, checkpoints, &mut out);
    assignment::check(entries, &timeline, checkpoints, strategies, &mut out);
    leaks::check(entries, checkpoints, &mut out);
    liveness::check(entries, &timeline, checkpoints, &mut out);
    garbage::check(entries, &timeline, checkpoints, &mut out);
    scope::check(entries, &mut out);
    out.sort_by(|a, b| a.at.cmp(&b.at).then(a.invariant.cmp(&b.invariant)));
    (out, accounting)
}

/// How many entries of context a violation carries.
const CONTEXT: usize = 14;

/// The entries that led to entry `idx` (included): faults, lifecycle and session notes, and
/// the events of `job` (armings left out), the last [`CONTEXT`] of them.
pub(crate) fn context(entries: &[Entry], idx: usize, job: Option<&str>) -> Vec<Entry> {
    let end = (idx + 1).min(entries.len());
    let mut picked: Vec<Entry> =
        entries[..end].iter().rev().filter(|e| relevant(e, job)).take(CONTEXT).cloned().collect();
    picked.reverse();
    picked
}

/// The index of the last entry at or before virtual time `at`.
pub(crate) fn index_at(entries: &[Entry], at: i64) -> usize {
    entries.partition_point(|e| e.at <= at).saturating_sub(1)
}

fn relevant(e: &Entry, job: Option<&str>) -> bool {
    match &e.what {
        What::Note(n) => !matches!(n, Note::Config(c) if job.is_some_and(|j| j != c.job)),
        What::Event { event, .. } => {
            if matches!(event, SchedulerEvent::Armed { .. }) {
                return false;
            }
            match (job, event_job(event)) {
                (Some(j), Some(ej)) => j == ej,
                _ => true,
            }
        }
    }
}

/// The job an event is about.
pub(crate) fn event_job(event: &SchedulerEvent) -> Option<&str> {
    use SchedulerEvent as E;
    match event {
        E::Armed { job, .. }
        | E::Skipped { job, .. }
        | E::ItemStarted { job, .. }
        | E::ItemFinished { job, .. }
        | E::FireFailed { job, .. }
        | E::LeaderElected { job }
        | E::Sharded { job, .. }
        | E::ConfigRejected { job, .. }
        | E::ConfigApplied { job }
        | E::JobStopped { job, .. }
        | E::RegistryGarbage { job, .. }
        | E::Error { job, .. } => Some(job),
        _ => None,
    }
}

/// The instance index of an instance id `10.0.0.{i}@-@...`.
pub(crate) fn index_of(id: &str) -> Option<usize> {
    id.strip_prefix("10.0.0.")?.split("@-@").next()?.parse().ok()
}
