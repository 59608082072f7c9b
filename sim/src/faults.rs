//! Faults as verbs, and the fault profiles that generate a schedule of them from a seed.
//!
//! A fault names instances by their 1-based index (`i1`, `i2`, ...). Every verb is meaningful
//! in any state: crashing a crashed instance, healing one that is not cut off, and the like
//! are recorded as ignored rather than failing the run, so any subset of a schedule is still a
//! valid schedule (which is what shrinking needs).

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::garbage::Corruption;
use crate::scenarios::{Action, Step};
use crate::workload::{JobSpec, Workload};

/// Something that goes wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// kill -9: every task of the instance is aborted and its registry client dropped without
    /// closing, so its session lives on until the session timeout.
    Crash(usize),
    /// Graceful stop: `Scheduler::shutdown` (running items finish, nodes removed, session closed).
    Stop(usize),
    /// Starts the instance again with the same id (after a graceful stop if it is up).
    Restart(usize),
    /// The registry ends the instance's session, as a real server does: the instance is cut
    /// off now (it reports `Lost` at its lease deadline), the server expires the session at
    /// the session timeout, and the link comes back a second later (`Expired`, a new session).
    ExpireSession(usize),
    /// Cuts the instances' links to the registry (their sessions expire after the timeout).
    Partition(Vec<usize>),
    /// Restores the instances' links.
    Heal(Vec<usize>),
    /// Delays every registry operation of the instance by this many milliseconds (0 = normal).
    Slow(usize, u64),
    /// Shifts the instance's clock by this many milliseconds (0 = back to true time).
    SkewClock(usize, i64),
    /// The registry restarts: every client sees `Suspended` then `Reconnected`.
    RestartRegistry,
    /// The registry holds back, for this many milliseconds, the events of the entries the
    /// instance's watch added last, and then resyncs the watch, as etcd holds back a watch it
    /// must catch up and the etcd backend then reads its scope again (`MemServer::lag_watch`).
    LagWatch(usize, u64),
    /// As `LagWatch`, for one entry of the instance's watch, whichever: entry `pick` modulo
    /// their count, as etcd makes any watch of a stream that could not take its events a
    /// "victim" it catches up later (`Lagging::Entry`).
    LagEntry(usize, u64, u64),
    /// An operator writes garbage into a node of a job, or deletes a node the cluster needs.
    Corrupt(Corruption),
}

impl Fault {
    /// The instances the fault touches.
    pub fn instances(&self) -> Vec<usize> {
        match self {
            Fault::Crash(i)
            | Fault::Stop(i)
            | Fault::Restart(i)
            | Fault::ExpireSession(i)
            | Fault::Slow(i, _)
            | Fault::LagWatch(i, _)
            | Fault::LagEntry(i, _, _)
            | Fault::SkewClock(i, _) => vec![*i],
            Fault::Partition(is) | Fault::Heal(is) => is.clone(),
            Fault::RestartRegistry | Fault::Corrupt(_) => Vec::new(),
        }
    }
}

fn list(is: &[usize]) -> String {
    is.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
}

/// Prints the fault as the Rust expression that builds it (scripted scenarios print so).
impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Crash(i) => write!(f, "Fault::Crash({i})"),
            Fault::Stop(i) => write!(f, "Fault::Stop({i})"),
            Fault::Restart(i) => write!(f, "Fault::Restart({i})"),
            Fault::ExpireSession(i) => write!(f, "Fault::ExpireSession({i})"),
            Fault::Partition(is) => write!(f, "Fault::Partition(vec![{}])", list(is)),
            Fault::Heal(is) => write!(f, "Fault::Heal(vec![{}])", list(is)),
            Fault::Slow(i, ms) => write!(f, "Fault::Slow({i}, {ms})"),
            Fault::LagWatch(i, ms) => write!(f, "Fault::LagWatch({i}, {ms})"),
            Fault::LagEntry(i, pick, ms) => write!(f, "Fault::LagEntry({i}, {pick}, {ms})"),
            Fault::SkewClock(i, ms) => write!(f, "Fault::SkewClock({i}, {ms})"),
            Fault::RestartRegistry => write!(f, "Fault::RestartRegistry"),
            Fault::Corrupt(c) => write!(f, "Fault::Corrupt({c})"),
        }
    }
}

/// Which faults (and workload changes) a generated scenario contains, and how often.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultProfile {
    /// No faults, no workload changes: the baseline.
    None,
    /// Crashes and stops with restarts, session expiries, partitions shorter and longer than
    /// the session timeout, registry restarts, slow links, and workload changes (trigger,
    /// disable/enable of items and servers, count and cron changes). Jobs run with failover off.
    Default,
    /// `Default` with failover (and misfire) on for every job: crashes must lose no item.
    Failover,
    /// Everything: `Failover` plus clock skew beyond `maxTimeDiffSeconds`, failover toggled at
    /// run time, jobs added and removed.
    Chaos,
    /// An operator at work: garbage written into random nodes of the jobs (wrong types,
    /// truncated YAML, binary, empty and huge values, ids of instances that are not alive) and
    /// nodes the cluster needs deleted, amid `Failover`'s faults (jobs with failover on).
    Garbage,
    /// `Failover`'s faults with items that run longer than the session timeout: a crashed,
    /// cut-off or paused owner is still running when a survivor may take its items over, so
    /// only the local lease loss keeps an item from running twice at once.
    Lease,
    /// `Failover`'s faults with watches falling behind, as etcd's do: every few seconds (more
    /// often while the cluster forms) an instance's watch stops getting the events of the
    /// entries it added last for 50 ms to 3 s, while its other entries' events go on, then
    /// gets its whole scope again.
    Lag,
    /// `Lag` with the entry held back any one of the watch's, drawn at each lag: etcd's
    /// "victim" watches, those of a stream that could not take their events, which etcd
    /// catches up later and out of order with the stream's other watches.
    Victim,
}

impl FaultProfile {
    pub const ALL: [FaultProfile; 8] = [
        FaultProfile::None,
        FaultProfile::Default,
        FaultProfile::Failover,
        FaultProfile::Chaos,
        FaultProfile::Garbage,
        FaultProfile::Lease,
        FaultProfile::Lag,
        FaultProfile::Victim,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultProfile::None => "none",
            FaultProfile::Default => "default",
            FaultProfile::Failover => "failover",
            FaultProfile::Chaos => "chaos",
            FaultProfile::Garbage => "garbage",
            FaultProfile::Lease => "lease",
            FaultProfile::Lag => "lag",
            FaultProfile::Victim => "victim",
        }
    }

    /// Whether the generated jobs run with failover on.
    pub fn failover_jobs(self) -> bool {
        matches!(
            self,
            FaultProfile::Failover
                | FaultProfile::Chaos
                | FaultProfile::Garbage
                | FaultProfile::Lease
                | FaultProfile::Lag
                | FaultProfile::Victim
        )
    }

    /// Generates the schedule of a run: faults and workload changes at virtual times in
    /// `[0, duration_ms)`, each fault paired with its repair (restart after a crash, heal after
    /// a partition, ...), drawn from `rng`.
    pub fn generate(self, rng: &mut ChaCha8Rng, ctx: &GenContext<'_>) -> Vec<Step> {
        if self == FaultProfile::None || ctx.instances == 0 || ctx.duration_ms < 10_000 {
            return Vec::new();
        }
        let mut steps = Vec::new();
        if self.lags() {
            // While the cluster forms, its registrations change every watch's scope.
            let mut t = rng.gen_range(0..500u64);
            while t < 5_000 {
                self.lag(rng, ctx, t, &mut steps);
                t += rng.gen_range(100..1_000u64);
            }
        }
        // On average one fault every 20 virtual seconds, starting after the cluster formed.
        let mut t = 5_000 + rng.gen_range(0..10_000u64);
        while t < ctx.duration_ms {
            self.one(rng, ctx, t, &mut steps);
            t += rng.gen_range(5_000..35_000u64);
        }
        steps.sort_by_key(|s| s.at_ms);
        steps
    }

    fn one(self, rng: &mut ChaCha8Rng, ctx: &GenContext<'_>, t: u64, steps: &mut Vec<Step>) {
        if self == FaultProfile::Garbage {
            // A corruption at every step, and another fault or workload change at some.
            if let Some(spec) = ctx.jobs.get(rng.gen_range(0..ctx.jobs.len().max(1))) {
                let c = Corruption::generate(rng, &spec.name, spec.count, ctx.instances);
                steps.push(Step { at_ms: t, action: Action::Fault(Fault::Corrupt(c)) });
            }
            if rng.gen_bool(0.4) {
                let later = t + rng.gen_range(0..5_000);
                FaultProfile::Failover.one(rng, ctx, later, steps);
            }
            return;
        }
        if self == FaultProfile::Lease {
            // The faults are `Failover`'s: its items are what differ.
            FaultProfile::Failover.one(rng, ctx, t, steps);
            return;
        }
        if self.lags() {
            FaultProfile::Failover.one(rng, ctx, t, steps);
            let mut at = t + rng.gen_range(0..1_000u64);
            for _ in 0..rng.gen_range(1..=4) {
                self.lag(rng, ctx, at, steps);
                at += rng.gen_range(200..5_000u64);
            }
            return;
        }
        let i = rng.gen_range(1..=ctx.instances);
        let session = ctx.session_timeout_ms;
        let mut at = |dt: u64, action: Action| steps.push(Step { at_ms: t + dt, action });
        let pick = rng.gen_range(0..100u32);
        let chaos = self == FaultProfile::Chaos;
        match pick {
            0..=14 => {
                at(0, Action::Fault(Fault::Crash(i)));
                at(rng.gen_range(1_000..3 * session), Action::Fault(Fault::Restart(i)));
            }
            15..=22 => {
                at(0, Action::Fault(Fault::Stop(i)));
                at(rng.gen_range(1_000..3 * session), Action::Fault(Fault::Restart(i)));
            }
            23..=27 => at(0, Action::Fault(Fault::Restart(i))),
            28..=34 => at(0, Action::Fault(Fault::ExpireSession(i))),
            35..=44 => {
                // Shorter than the session timeout: the session survives.
                let d = rng.gen_range(500..session.saturating_sub(500).max(501));
                at(0, Action::Fault(Fault::Partition(vec![i])));
                at(d, Action::Fault(Fault::Heal(vec![i])));
            }
            45..=52 => {
                // Longer than the session timeout: the session expires while cut off.
                let d = session + rng.gen_range(1_000..2 * session);
                at(0, Action::Fault(Fault::Partition(vec![i])));
                at(d, Action::Fault(Fault::Heal(vec![i])));
            }
            53..=56 => at(0, Action::Fault(Fault::RestartRegistry)),
            57..=62 => {
                let ms = [50, 200, 1_000][rng.gen_range(0..3)];
                at(0, Action::Fault(Fault::Slow(i, ms)));
                at(rng.gen_range(1_000..20_000), Action::Fault(Fault::Slow(i, 0)));
            }
            63..=67 if chaos => {
                // Beyond maxTimeDiffSeconds (the chaos jobs allow 5 s): fires are refused.
                let skew = [-8_000, 8_000, 20_000][rng.gen_range(0..3)];
                at(0, Action::Fault(Fault::SkewClock(i, skew)));
                at(rng.gen_range(5_000..40_000), Action::Fault(Fault::SkewClock(i, 0)));
            }
            _ => {
                if let Some(w) = self.workload(rng, ctx) {
                    at(0, Action::Work(w.0));
                    if let Some((dt, undo)) = w.1 {
                        at(dt, Action::Work(undo));
                    }
                }
            }
        }
    }

    /// Whether the profile makes watches fall behind.
    fn lags(self) -> bool {
        matches!(self, FaultProfile::Lag | FaultProfile::Victim)
    }

    /// One instance's watch falling behind at `t`.
    fn lag(self, rng: &mut ChaCha8Rng, ctx: &GenContext<'_>, t: u64, steps: &mut Vec<Step>) {
        let i = rng.gen_range(1..=ctx.instances);
        let ms = [50, 200, 500, 1_000, 3_000][rng.gen_range(0..5)];
        let fault = if self == FaultProfile::Victim {
            Fault::LagEntry(i, rng.gen_range(0..1 << 32), ms)
        } else {
            Fault::LagWatch(i, ms)
        };
        steps.push(Step { at_ms: t, action: Action::Fault(fault) });
    }

    /// A workload change, and maybe the change that undoes it later.
    #[allow(clippy::type_complexity)]
    fn workload(
        self,
        rng: &mut ChaCha8Rng,
        ctx: &GenContext<'_>,
    ) -> Option<(Workload, Option<(u64, Workload)>)> {
        let spec = ctx.jobs.get(rng.gen_range(0..ctx.jobs.len().max(1)))?;
        let job = spec.name.clone();
        let i = rng.gen_range(1..=ctx.instances);
        let later = rng.gen_range(5_000..40_000u64);
        let chaos = self == FaultProfile::Chaos;
        Some(match rng.gen_range(0..if chaos { 9 } else { 6 }) {
            0 => (Workload::Trigger { job }, None),
            1 => {
                let item = rng.gen_range(0..spec.count);
                (
                    Workload::DisableItem { job: job.clone(), item },
                    Some((later, Workload::EnableItem { job, item })),
                )
            }
            2 => (
                Workload::DisableServer { job: job.clone(), instance: i },
                Some((later, Workload::EnableServer { job, instance: i })),
            ),
            3 => {
                let count = rng.gen_range(1..=8);
                (
                    Workload::SetCount { job: job.clone(), count },
                    Some((later, Workload::SetCount { job, count: spec.count })),
                )
            }
            4 | 5 => {
                let secs = [2, 3, 4, 5, 6, 10][rng.gen_range(0..6)];
                (
                    Workload::SetCron { job: job.clone(), cron: format!("0/{secs} * * * * ?") },
                    Some((later, Workload::SetCron { job, cron: spec.cron.clone() })),
                )
            }
            6 => (
                Workload::SetFailover { job: job.clone(), on: !spec.failover },
                Some((later, Workload::SetFailover { job, on: spec.failover })),
            ),
            7 => {
                let name = format!("extra{}", rng.gen_range(0..1000u32));
                let mut extra = spec.clone();
                extra.name = name.clone();
                (Workload::AddJob(extra), Some((later, Workload::RemoveJob { job: name })))
            }
            _ => (Workload::RemoveJob { job }, None),
        })
    }
}

impl fmt::Display for FaultProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FaultProfile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        FaultProfile::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| {
            let names: Vec<&str> = FaultProfile::ALL.iter().map(|p| p.name()).collect();
            format!("unknown fault profile {s:?} (one of {})", names.join(", "))
        })
    }
}

/// What schedule generation needs to know about the run.
#[derive(Debug)]
pub struct GenContext<'a> {
    pub instances: usize,
    pub jobs: &'a [JobSpec],
    pub duration_ms: u64,
    pub session_timeout_ms: u64,
}
