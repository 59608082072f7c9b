//! The simulator's notes read into the facts the checks share: when each instance could not
//! run items and why, the config of each job over time, disabled items and servers, phases.

use std::collections::BTreeMap;
use std::time::Duration;

use shardcron_core::__private::protocol::records::{parse_flag, parse_flag_moved_from};

use crate::faults::Fault;
use shardcron_core::events::SchedulerEvent;

use crate::trace::{Entry, JobState, Note, Phase, What};
use crate::workload::Workload;

/// How long after a registry-side change (config, disable/enable) instances may still act on
/// the old state: the watch round trip, under injected latency of up to a second per operation.
pub(crate) const CHANGE_SLACK_MS: i64 = 3_000;
/// How long after a new session an instance takes to register again.
const REREGISTER_MS: i64 = 1_000;

#[derive(Debug, Default)]
pub(crate) struct Timeline {
    pub phases: BTreeMap<Phase, i64>,
    /// Per instance: `(from, to, why)` while it could not run items.
    pub down: BTreeMap<usize, Vec<(i64, i64, String)>>,
    /// Per job: its config from each time on.
    pub configs: BTreeMap<String, Vec<(i64, JobState)>>,
    /// Per job: when it was removed (a job can be added again under its name, and removed
    /// again).
    pub removed: BTreeMap<String, Vec<i64>>,
    /// Per job: when it was added again by a workload (after the start).
    pub added: BTreeMap<String, Vec<i64>>,
    pub item_disabled: BTreeMap<(String, u32), Vec<(i64, bool)>>,
    pub server_disabled: BTreeMap<(String, usize), Vec<(i64, bool)>>,
    /// `(time, instance)` of every crash.
    pub crashes: Vec<(i64, usize)>,
    pub end: i64,
    /// The registry's session timeout.
    pub session_ms: i64,
    /// Per instance: from when on its registry link was slowed down, by how many ms.
    pub slow: BTreeMap<usize, Vec<(i64, i64)>>,
    /// The operator's corruptions of the registry, and when each was reported.
    pub garbage: super::garbage::Corruptions,
    /// Per instance: from when on its clock was off the registry's, by how many ms, besides
    /// the fire lead every clock has (which the checks' time includes: see
    /// `super::check_with_strategies`; the runtime reads the registry's time that far ahead
    /// too, so it is no skew).
    pub skewed: BTreeMap<usize, Vec<(i64, i64)>>,
    /// Per job: its reshard flag's data from each time on (`None`: no flag).
    pub flags: BTreeMap<String, Vec<(i64, Option<String>)>>,
    /// Per job and instance: from each time on, whether the instance lacks the job (its
    /// `add_job` failed and has not succeeded since; a crash, a stop or the job's next add
    /// clears it: the next start, or that add, tries again).
    pub lacks: BTreeMap<(String, usize), Vec<(i64, bool)>>,
    /// Per job and instance: when the instance stopped the job while its registry link was up
    /// (its leave could remove its ledger), and per instance when its process started.
    pub stops: BTreeMap<(String, usize), Vec<i64>>,
    pub starts: BTreeMap<usize, Vec<i64>>,
}

impl Timeline {
    pub fn read(entries: &[Entry], session: Duration) -> Self {
        let mut t = Timeline {
            end: entries.last().map_or(0, |e| e.at),
            session_ms: i64::try_from(session.as_millis()).unwrap_or(i64::MAX),
            garbage: super::garbage::Corruptions::read(entries),
            ..Timeline::default()
        };
        let mut open: BTreeMap<(usize, &'static str), (i64, String)> = BTreeMap::new();
        let mut current_session: BTreeMap<usize, u64> = BTreeMap::new();
        let mut skew: BTreeMap<usize, i64> = BTreeMap::new();
        // Jobs removed and not added again since.
        let mut gone: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        let mut instances = 0;
        let close = |open: &mut BTreeMap<(usize, &'static str), (i64, String)>,
                     down: &mut BTreeMap<usize, Vec<(i64, i64, String)>>,
                     who: usize,
                     what: &'static str,
                     at: i64| {
            if let Some((from, why)) = open.remove(&(who, what)) {
                down.entry(who).or_default().push((from, at, why));
            }
        };
        for e in entries {
            let (who, at) = (e.who, e.at);
            if let What::Event { event: SchedulerEvent::JobStopped { job, .. }, .. } = &e.what {
                let cut = t.down.get(&who).is_some_and(|d| {
                    d.iter().any(|(from, to, why)| *from <= at && at <= *to && why.contains("cut"))
                });
                let connected = !cut
                    && ["cut", "session", "crashed", "down"]
                        .iter()
                        .all(|what| !open.contains_key(&(who, *what)));
                if connected {
                    t.stops.entry((job.clone(), who)).or_default().push(at);
                }
            }
            let What::Note(note) = &e.what else { continue };
            match note {
                Note::Begin { instances: n, .. } => {
                    instances = *n;
                    for i in 1..=*n {
                        open.insert((i, "starting"), (at, "not started yet".into()));
                    }
                }
                Note::Phase(p) => {
                    t.phases.insert(*p, at);
                    if *p == Phase::Quiet {
                        for i in 1..=instances {
                            close(&mut open, &mut t.down, i, "cut", at);
                            let s = skew.remove(&i).unwrap_or(0);
                            if s != 0 {
                                t.skewed.entry(i).or_default().push((at, 0));
                                let d = s.abs() + 1_000;
                                let why = format!("its clock jumped by {}ms", -s);
                                t.down.entry(i).or_default().push((at - d, at + d, why));
                            }
                        }
                    }
                }
                Note::Started => {
                    t.starts.entry(who).or_default().push(at);
                    for what in ["starting", "crashed", "down", "cut"] {
                        close(&mut open, &mut t.down, who, what, at);
                    }
                }
                Note::StartFailed { error } => {
                    close(&mut open, &mut t.down, who, "starting", at);
                    open.insert((who, "down"), (at, format!("its start failed: {error}")));
                }
                Note::AddFailed { job, .. } => {
                    t.lacks.entry((job.clone(), who)).or_default().push((at, true));
                }
                Note::AddedAfterRetry { job, .. } => {
                    t.lacks.entry((job.clone(), who)).or_default().push((at, false));
                }
                Note::Crashed { .. } => {
                    t.clear_lacks(|_, w| w == who, at);
                    t.crashes.push((at, who));
                    for what in ["starting", "stopping"] {
                        close(&mut open, &mut t.down, who, what, at);
                    }
                    open.insert((who, "crashed"), (at, format!("it crashed at {at}")));
                }
                Note::Stopping => {
                    open.insert((who, "stopping"), (at, format!("it was stopping since {at}")));
                }
                Note::Stopped => {
                    t.clear_lacks(|_, w| w == who, at);
                    close(&mut open, &mut t.down, who, "stopping", at);
                    open.insert((who, "down"), (at, format!("it was stopped at {at}")));
                }
                Note::SessionEnded { session } if current_session.get(&who) == Some(session) => {
                    open.insert(
                        (who, "session"),
                        (at, format!("its session {session} ended at {at}")),
                    );
                }
                Note::SessionOpened { session } => {
                    current_session.insert(who, *session);
                    close(&mut open, &mut t.down, who, "session", at + REREGISTER_MS);
                }
                Note::Fault(Fault::Partition(is)) => {
                    for &i in is {
                        open.entry((i, "cut")).or_insert((at, format!("it was cut off at {at}")));
                    }
                }
                // The simulator cuts the instance off until a second after the session
                // timeout (`Fault::ExpireSession`).
                Note::Fault(Fault::ExpireSession(i)) => {
                    let back = at
                        .saturating_add(t.session_ms)
                        .saturating_add(crate::sim::expiry_heal_after_ms());
                    let why = format!("it was cut off at {at} (its session was to expire)");
                    t.down.entry(*i).or_default().push((at, back, why));
                }
                Note::Fault(Fault::Slow(i, ms)) => {
                    t.slow
                        .entry(*i)
                        .or_default()
                        .push((at, i64::try_from(*ms).unwrap_or(i64::MAX)));
                }
                Note::Fault(Fault::Heal(is)) => {
                    for &i in is {
                        close(&mut open, &mut t.down, i, "cut", at);
                    }
                }
                Note::Fault(Fault::SkewClock(i, ms)) => {
                    let before = skew.insert(*i, *ms).unwrap_or(0);
                    t.skewed.entry(*i).or_default().push((at, *ms));
                    let jump = ms - before;
                    if jump != 0 {
                        let d = jump.abs() + 1_000;
                        let why = format!("its clock jumped by {jump}ms at {at}");
                        t.down.entry(*i).or_default().push((at - d, at + d, why));
                    }
                }
                // An operator's config change to a job removed from the schedulers (the
                // registry takes the write) adds it to none: only adding the job does.
                Note::Config(state) if !gone.contains(&state.job) => {
                    t.configs.entry(state.job.clone()).or_default().push((at, state.clone()));
                }
                Note::Flag { job, data } => {
                    t.flags.entry(job.clone()).or_default().push((at, data.clone()));
                }
                Note::JobRemoved { job } => {
                    t.removed.entry(job.clone()).or_default().push(at);
                    gone.insert(job.clone());
                }
                Note::Work { work: Workload::AddJob(spec), error: None } => {
                    t.clear_lacks(|job, _| job == spec.name, at);
                    gone.remove(&spec.name);
                    t.added.entry(spec.name.clone()).or_default().push(at);
                }
                Note::Work { work, error: None } => match work {
                    Workload::DisableItem { job, item } | Workload::EnableItem { job, item } => {
                        let off = matches!(work, Workload::DisableItem { .. });
                        t.item_disabled.entry((job.clone(), *item)).or_default().push((at, off));
                    }
                    Workload::DisableServer { job, instance }
                    | Workload::EnableServer { job, instance } => {
                        let off = matches!(work, Workload::DisableServer { .. });
                        let key = (job.clone(), *instance);
                        t.server_disabled.entry(key).or_default().push((at, off));
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        let end = t.end + 1;
        for ((who, _), (from, why)) in open {
            t.down.entry(who).or_default().push((from, end, why));
        }
        t
    }

    /// Whether instance `who` lacked `job` at `at`: its `add_job` of the job had failed, and
    /// no add succeeded since.
    pub fn lacks_job(&self, who: usize, job: &str, at: i64) -> bool {
        self.lacks
            .get(&(job.to_owned(), who))
            .and_then(|list| list.iter().rev().find(|(t, _)| *t <= at))
            .is_some_and(|(_, lacks)| *lacks)
    }

    /// Notes, at `at`, that every instance and job `which` picks has the job again (or will
    /// try to add it again).
    fn clear_lacks(&mut self, which: impl Fn(&str, usize) -> bool, at: i64) {
        for ((job, who), list) in &mut self.lacks {
            if which(job, *who) && list.last().is_some_and(|(_, lacks)| *lacks) {
                list.push((at, false));
            }
        }
    }

    /// Why instance `who` could not run items at time `at`, if so.
    pub fn not_up(&self, who: usize, at: i64) -> Option<&str> {
        self.down
            .get(&who)?
            .iter()
            .find(|(from, to, _)| *from <= at && at <= *to)
            .map(|(_, _, why)| why.as_str())
    }

    /// Whether `who` was down (or cut off) for the whole of `from..=to`, in one stretch.
    pub fn down_throughout(&self, who: usize, from: i64, to: i64) -> bool {
        self.down.get(&who).is_some_and(|list| list.iter().any(|(f, t, _)| *f <= from && to <= *t))
    }

    /// Whether `who`, down at `at` after a crash, had stopped `job` gracefully before that crash,
    /// in the same run of its process, while its registry link was up, and it was not added
    /// again before the crash: its leave removed its ledger, so the fires after it were
    /// nobody's to count (GUARANTEES.md, section 2).
    pub fn left_before_crash(&self, job: &str, who: usize, at: i64) -> bool {
        let Some(crash) =
            self.crashes.iter().filter(|&&(t, w)| w == who && t <= at).map(|c| c.0).max()
        else {
            return false;
        };
        let started = self
            .starts
            .get(&who)
            .and_then(|s| s.iter().copied().filter(|&t| t <= crash).max())
            .unwrap_or(i64::MIN);
        // Not added again since (a job removed, then added back under its name, runs again).
        let added_after = |stop: i64| {
            self.added.get(job).is_some_and(|a| a.iter().any(|&t| t > stop && t <= crash))
        };
        self.stops.get(&(job.to_owned(), who)).is_some_and(|stops| {
            stops.iter().any(|&s| s >= started && s <= crash && !added_after(s))
        })
    }

    /// The first removal of `job` at or after `at`.
    pub fn removed_after(&self, job: &str, at: i64) -> Option<i64> {
        self.removed.get(job)?.iter().copied().find(|&t| t >= at)
    }

    /// Until when the first reshard asked for in `(from, to]` was pending: when its flag went,
    /// or `i64::MAX` if it never did; `None` if none was asked for then.
    pub fn reshard_asked_within(&self, job: &str, from: i64, to: i64) -> Option<i64> {
        let list = self.flags.get(job)?;
        let (raised, _) = list
            .iter()
            .filter(|(t, data)| *t > from && *t <= to && data.is_some())
            .find(|(t, _)| Self::pending_in(list, *t, i64::MAX))?;
        Some(Self::gone_after(list, *raised).unwrap_or(i64::MAX))
    }

    /// When the flag went that held the fire of `job` due at `at` (`fire_ms` by the epoch),
    /// if it fell due while a reshard was asked for: the flag held a time before the fire (or
    /// one nobody can read, which holds every fire, or none at all, as ElasticJob writes it),
    /// and not a raise no later than the one the last reshard answered (a late raise of an
    /// answered change). Such a fire waits for the reshard and answers to the assignment it
    /// makes (GUARANTEES.md, section 2), committed when the flag went; unless an operator
    /// deleted the flag (the caller tells the two apart by the assignments).
    pub fn pending_flag_gone_at(&self, job: &str, at: i64, fire_ms: i64) -> Option<i64> {
        let list = self.flags.get(job)?;
        if !Self::pending_in(list, at, fire_ms) {
            return None;
        }
        Self::gone_after(list, at)
    }

    /// When the job's reshard flag next went after `at` (a reshard made, or an operator's
    /// delete), if it did.
    pub fn flag_gone_after(&self, job: &str, at: i64) -> Option<i64> {
        Self::gone_after(self.flags.get(job)?, at)
    }

    /// Until when a reshard asked for before `at` was still pending then: when its flag went,
    /// or `i64::MAX` if it never did; `None` if none was pending at `at`.
    pub fn reshard_pending_until(&self, job: &str, at: i64) -> Option<i64> {
        let list = self.flags.get(job)?;
        if !Self::pending_in(list, at, i64::MAX) {
            return None;
        }
        Some(Self::gone_after(list, at).unwrap_or(i64::MAX))
    }

    /// When the flag noted in `list` went next after `at`.
    fn gone_after(list: &[(i64, Option<String>)], at: i64) -> Option<i64> {
        list.iter().find(|(t, data)| *t > at && data.is_none()).map(|(t, _)| *t)
    }

    /// Whether the flag notes `list` show a reshard pending for the fire due at `at`.
    fn pending_in(list: &[(i64, Option<String>)], at: i64, fire_ms: i64) -> bool {
        // The raise time the flag holds (`None` unreadable), and the one last answered.
        let mut flag: Option<Option<i64>> = None;
        let mut answered: Option<i64> = None;
        for (_, data) in list.iter().take_while(|(t, _)| *t <= at) {
            match data {
                // Read as the instances read it (a raise moved to its commit time holds
                // both times; the first is the one that holds fires).
                Some(d) => flag = Some(parse_flag("", d.as_bytes()).ok().flatten()),
                None => {
                    if let Some(raised) = flag.take().flatten() {
                        answered = Some(raised);
                    }
                }
            }
        }
        match flag {
            None => false,
            Some(None) => true,
            Some(Some(raised)) => {
                raised < fire_ms
                    && answered.is_none_or(|a| raised > a)
                    && !Self::moved_past(list, at, fire_ms)
            }
        }
    }

    /// Whether the raise the flag held at `at` was moved later, before the flag went, to its
    /// commit time at or after `fire_ms` (a raise over a slow link; the flag then holds both
    /// times): the fire came between the two, and ran under the assignment before the
    /// reshard, as every instance reads the flag once moved (GUARANTEES.md, section 2: the
    /// reshard owes the catch-ups where a record says who missed it). Its raiser, which ran
    /// it so, had not seen the flag yet (2 instances, a job file's `failover` seed
    /// 2,451,795,458: failover off, the owner of three items crashed, and the survivor's raise
    /// for it, over a 1 s link, moved past the next fire).
    fn moved_past(list: &[(i64, Option<String>)], at: i64, fire_ms: i64) -> bool {
        list.iter().skip_while(|(t, _)| *t <= at).map_while(|(_, data)| data.as_deref()).any(|d| {
            parse_flag_moved_from(d.as_bytes()).is_some()
                && parse_flag("", d.as_bytes()).ok().flatten().is_some_and(|r| r >= fire_ms)
        })
    }

    /// Whether the incarnation of `job` that existed at `at` (since its latest add) was
    /// removed by `until`: a removal before `at` counts (the job was being removed while it
    /// still ran), one of an earlier incarnation does not.
    pub fn removed_by(&self, job: &str, at: i64, until: i64) -> bool {
        let added = self
            .added
            .get(job)
            .and_then(|l| l.iter().copied().filter(|&t| t <= at).max())
            .unwrap_or(i64::MIN);
        self.removed.get(job).is_some_and(|l| l.iter().any(|&t| t >= added && t <= until))
    }

    /// When the liveness bound `bound_ms` of a failover of `job` that starts at `from` ends:
    /// section 4 counts only the time when some instance was up with its server enabled for
    /// the job and its clock within the job's `maxTimeDiffSeconds` (to the nearest 100 ms; a
    /// server disabled within the change slack counts as disabled): nobody could take
    /// anything over otherwise, so each stretch without one moves the end on. `i64::MAX` when
    /// none comes up again before the run ends.
    pub fn bound_end(&self, job: &str, from: i64, bound_ms: i64) -> i64 {
        const STEP: i64 = 100;
        let all: Vec<usize> = self.down.keys().copied().collect();
        let (mut t, mut counted) = (from, 0);
        while counted < bound_ms {
            if t > self.end {
                return i64::MAX;
            }
            let clock_bound_ms = self
                .config_at(job, t)
                .map_or(0, |c| i64::from(c.max_time_diff_seconds).saturating_mul(1_000));
            let taker = |w: &usize| {
                self.not_up(*w, t).is_none()
                    && !self.server_disabled(job, *w, t)
                    && self.clock_off_until(*w, t, clock_bound_ms).is_none()
            };
            if all.iter().any(taker) {
                counted += STEP;
            }
            t += STEP;
        }
        t
    }

    /// Whether `job` was removed at the end of the run (not added again since).
    pub fn gone_at_end(&self, job: &str) -> bool {
        let last_removal = self.removed.get(job).and_then(|l| l.last().copied());
        let last_config = self.configs.get(job).and_then(|l| l.last().map(|(t, _)| *t));
        match (last_removal, last_config) {
            (Some(gone), Some(added)) => gone >= added,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// Until when `who`'s clock stays off the registry's by more than `bound_ms` from `at`
    /// on: the next clock change that brings it within, or `i64::MAX`; `None` if it is not
    /// that far off at `at`.
    pub fn clock_off_until(&self, who: usize, at: i64, bound_ms: i64) -> Option<i64> {
        if bound_ms <= 0 || self.skew_at(who, at).abs() <= bound_ms {
            return None;
        }
        let changes = self.skewed.get(&who).map(Vec::as_slice).unwrap_or_default();
        Some(
            changes
                .iter()
                .find(|(from, skew)| *from > at && skew.abs() <= bound_ms)
                .map_or(i64::MAX, |x| x.0),
        )
    }

    /// How far `who`'s clock was off the registry's at `at`, in ms.
    pub fn skew_at(&self, who: usize, at: i64) -> i64 {
        self.skewed
            .get(&who)
            .and_then(|l| l.iter().rev().find(|(from, _)| *from <= at))
            .map_or(0, |x| x.1)
    }

    /// Whether some instance's clock was off (skewed) by at most `within` ms (by any amount:
    /// `None`) at some time within `at ± reach`, where `reach` is the largest such skew of the
    /// run plus a session timeout: how far from its time a clock off could act on a fire
    /// (early by its skew, or late, then failed over).
    pub fn clock_off_near(&self, at: i64, within: Option<i64>) -> bool {
        let counts = |skew: i64| skew != 0 && within.is_none_or(|w| skew.abs() <= w);
        let skews = self.skewed.values().flatten().map(|&(_, skew)| skew);
        let widest = skews.filter(|&skew| counts(skew)).map(i64::abs).max();
        let Some(reach) = widest.map(|w| w + self.session_ms) else {
            return false;
        };
        let (from, to) = (at.saturating_sub(reach), at.saturating_add(reach));
        self.skewed.values().any(|list| {
            list.iter().enumerate().any(|(k, &(since, skew))| {
                let until = list.get(k + 1).map_or(i64::MAX, |next| next.0);
                counts(skew) && since <= to && until >= from
            })
        })
    }

    /// The first time in `(after, before)` that `who` went down (crashed, stopped, lost its
    /// session...), with the reason. A clock jump is no going down: the instance holds on to
    /// what it was handling (the span around a jump only blurs which fire it names).
    pub fn went_down(&self, who: usize, after: i64, before: i64) -> Option<(i64, &str)> {
        self.down
            .get(&who)?
            .iter()
            .filter(|(_, _, why)| !why.contains("clock jumped"))
            .filter(|(from, _, _)| after < *from && *from < before)
            .min_by_key(|(from, _, _)| *from)
            .map(|(from, _, why)| (*from, why.as_str()))
    }

    /// The latency of `who`'s link at `at` (the last slow-link setting before it; 0 if none).
    pub fn latency_at(&self, who: usize, at: i64) -> i64 {
        let settings = self.slow.get(&who).map_or(&[][..], Vec::as_slice);
        settings.iter().rev().find(|(from, _)| *from <= at).map_or(0, |&(_, ms)| ms)
    }

    /// Whether `who` was down at `at` after a crash, and came back only once its session had
    /// ended (its departure shown, so handled by the survivors, who remove its ledger): it
    /// registered as a new instance after `at`.
    pub fn back_anew_after(&self, who: usize, at: i64) -> bool {
        self.down.get(&who).is_some_and(|spans| {
            spans.iter().any(|(from, to, why)| {
                *from <= at && at <= *to && why.contains("crashed") && *to > from + self.session_ms
            })
        })
    }

    /// When the span in which `who` could not run items that covers `at` began, if one does.
    pub fn down_since(&self, who: usize, at: i64) -> Option<i64> {
        self.down
            .get(&who)?
            .iter()
            .filter(|(from, to, _)| *from <= at && at <= *to)
            .map(|(from, _, _)| *from)
            .min()
    }

    /// The job's config in effect at `at`.
    pub fn config_at(&self, job: &str, at: i64) -> Option<&JobState> {
        let list = self.configs.get(job)?;
        list.iter().rev().find(|(from, _)| *from <= at).map(|(_, s)| s)
    }

    /// Whether a toggle keyed `key` was on anywhere within the slack around `at`.
    fn toggled<K: Ord>(map: &BTreeMap<K, Vec<(i64, bool)>>, key: &K, at: i64) -> bool {
        let Some(list) = map.get(key) else { return false };
        let state_at = |t: i64| list.iter().rev().find(|(from, _)| *from <= t).is_some_and(|x| x.1);
        state_at(at - CHANGE_SLACK_MS)
            || state_at(at + CHANGE_SLACK_MS)
            || list
                .iter()
                .any(|(from, _)| (at - CHANGE_SLACK_MS..=at + CHANGE_SLACK_MS).contains(from))
    }

    pub fn item_disabled(&self, job: &str, item: u32, at: i64) -> bool {
        Self::toggled(&self.item_disabled, &(job.to_owned(), item), at)
    }

    pub fn server_disabled(&self, job: &str, who: usize, at: i64) -> bool {
        Self::toggled(&self.server_disabled, &(job.to_owned(), who), at)
    }

    /// Whether an operator disabled `who`'s server for `job` after `from`, at or before `to`.
    pub fn server_disabled_between(&self, job: &str, who: usize, from: i64, to: i64) -> bool {
        self.server_disabled
            .get(&(job.to_owned(), who))
            .is_some_and(|list| list.iter().any(|(t, off)| *off && *t > from && *t <= to))
    }

    /// When an operator next enabled `who`'s server for `job` after `at`, if ever.
    pub fn server_enabled_after(&self, job: &str, who: usize, at: i64) -> Option<i64> {
        let list = self.server_disabled.get(&(job.to_owned(), who))?;
        list.iter().find(|(t, off)| *t > at && !off).map(|(t, _)| *t)
    }

    /// Whether the item is disabled at `at` for sure (no change nearby).
    pub fn item_disabled_now(&self, job: &str, item: u32, at: i64) -> bool {
        self.item_disabled
            .get(&(job.to_owned(), item))
            .and_then(|l| l.iter().rev().find(|(from, _)| *from <= at))
            .is_some_and(|x| x.1)
    }

    /// Whether a run of `who` that ended at `end` could not record its completion: it ended
    /// while its instance was cut off, or the instance crashed or was cut off before its
    /// finish transaction (slowed down by a slow link) could commit.
    pub fn completion_lost(&self, who: usize, end: i64) -> bool {
        // Any span, not the first that covers `end` (a clock jump may cover it too).
        let cut_at_end = self.down.get(&who).is_some_and(|spans| {
            spans
                .iter()
                .any(|(from, to, why)| *from <= end && end <= *to && why.contains("cut off"))
        });
        if cut_at_end {
            return true;
        }
        // The finish may wait behind a request sent before the run ended, while the link was
        // slower than at the end (one client's requests apply in order): a round trip or two
        // of each latency in effect until the end, from when it ended (or the run did), and a
        // little for the runtime.
        let settings = self.slow.get(&who).map_or(&[][..], Vec::as_slice);
        let until = settings
            .iter()
            .enumerate()
            .filter(|(_, (from, _))| *from <= end)
            .map(|(i, &(_, latency))| {
                let effect_ends = settings.get(i + 1).map_or(end, |next| next.0.min(end));
                effect_ends.saturating_add(latency.saturating_mul(3))
            })
            .filter(|&until| until >= end)
            .max()
            .unwrap_or(end)
            .saturating_add(100);
        let within = |t: i64| t >= end && t <= until;
        let crashed = self.crashes.iter().any(|&(t, w)| w == who && within(t));
        let cut = self.down.get(&who).is_some_and(|spans| {
            spans.iter().any(|(from, _, why)| within(*from) && why.contains("cut off"))
        });
        crashed || cut
    }

    pub fn phase(&self, p: Phase) -> Option<i64> {
        self.phases.get(&p).copied()
    }
}
