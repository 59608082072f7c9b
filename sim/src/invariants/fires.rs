//! Invariant 2: every scheduled fire of every enabled item runs exactly once, or is recorded
//! with a reason; and a crash loses no item of a running fire when failover is on.
//!
//! **Which fires.** For every job, the checker computes the fire instants of the cron in effect
//! (from the config notes) between the job's addition and the final phase, and for each the
//! items `0..count`. Exempt (and counted as such): fires within [`CHANGE_SLACK_MS`] of a config
//! change (instances apply it a watch round trip later, so either config may govern the fire),
//! fires in the first second after the job was added, fires of a disabled job, and fires of an
//! item disabled around that time.
//!
//! **Ran.** Exactly one `start` of the item with that `fire` (scheduled, a misfire catch-up
//! made up for that fire, or failover with the same fire time), anywhere in the cluster. Two
//! are a violation.
//!
//! **Recorded with a reason.** Without a run, one of these must hold, else it is a violation.
//! The *owners* of the item for the fire are the instance the last assignment before the fire
//! gave it to, plus any instance an assignment committed between the fire and the next one
//! gave it to. Before the job's first assignment (a leader cut off before it could shard),
//! the instance the first assignment gave the item to answers for it.
//! - *skipped*: an owner recorded `skipped` for that fire with a reason other than `no-items`
//!   (disconnected, server disabled, clock skew, sharding timeout, misfire, ...). A `misfire`
//!   skip must be followed by a catch-up run (`start ... misfire`) of the item once the run
//!   that blocked it ended, unless the owner crashed, stopped or lost its session first.
//! - *lost, owner down*: an owner could not run items then, by the simulator's record: not
//!   started yet, crashed, stopping or stopped, cut off from the registry, its session ended and
//!   not yet re-registered, or its clock jumped over the fire. The accounting lists each with
//!   its reason. With failover and misfire both on, more is asked: every item that
//!   lost fires while its crashed owner went undetected is caught up once (a `misfire` or
//!   `failover` run after the lost fire); its absence is a violation.
//! - *lost, owner went down while handling it*: an owner went down within the sharding timeout
//!   after the fire and started or skipped nothing of the job between the fire and going down
//!   (it was held up, typically waiting for a reshard from a crashed leader not detected yet).
//! - *lost, registry error*: an owner reported an `error` for the job between the fire and the
//!   next one (the runtime reports a failed fire so, without its fire time).
//!
//! **Crashes with failover on.** Every item an instance was running (started, not ended) when it
//! crashed or the registry ended its session (its instance node disappears either way) must be started again by another instance with kind `failover`, exactly once.
//! That re-execution may carry the original fire time: together with the interrupted run it
//! counts as the fire running once. A failover start of a fire whose run was not interrupted
//! is a second run.

use std::collections::BTreeMap;

use shardcron_core::cron::CronSchedule;
use shardcron_core::runtime::{FireKind, SchedulerEvent, Settings, SkipReason};

use super::timeline::{Timeline, CHANGE_SLACK_MS};
use super::{context, index_at, index_of, Invariant, Violation};
use crate::trace::{reason, Entry, Note, Phase, What, EPOCH_MS};

/// How every scheduled fire of every item was settled: outcome → count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accounting {
    pub outcomes: BTreeMap<String, usize>,
}

impl Accounting {
    fn add(&mut self, outcome: impl Into<String>) {
        *self.outcomes.entry(outcome.into()).or_default() += 1;
    }

    pub fn total(&self) -> usize {
        self.outcomes.values().sum()
    }
}

/// (job, item, fire) → (entry index, instance, kind) of each scheduled or failover start.
type Starts = BTreeMap<(String, u32, i64), Vec<(usize, usize, FireKind)>>;
/// (job, item) → (instance, fire, session, entry index) of each run not ended yet.
type Open = BTreeMap<(String, u32), Vec<(usize, i64, Option<u64>, usize)>>;
/// (job, item) → (time, instance, kind) of every start.
type Runs = BTreeMap<(String, u32), Vec<(i64, usize, FireKind)>>;
/// (job, fire) → (entry index, instance, reason) of each skip.
type Skips = BTreeMap<(String, i64), Vec<(usize, usize, SkipReason)>>;
/// job → (time, item → owner) of each committed assignment.
type Assignments = BTreeMap<String, Vec<(i64, BTreeMap<u32, usize>)>>;

#[derive(Default)]
struct Facts {
    /// (job, item, fire) → (entry index, instance, kind) of each scheduled or failover start.
    starts: Starts,
    /// (job, item, fire, instance) of every run a crash or the end of its session interrupted.
    interrupted: std::collections::BTreeSet<(String, u32, i64, usize)>,
    /// The start entry of every run interrupted so far.
    interrupted_runs: std::collections::BTreeSet<usize>,
    /// (job, item) → (time, instance, kind) of every start.
    runs: Runs,
    /// (job, item, instance) → times of its ends.
    ends: BTreeMap<(String, u32, usize), Vec<i64>>,
    /// (job, item, fire) of every manual run.
    manual: std::collections::BTreeSet<(String, u32, i64)>,
    /// (job, fire) → (entry index, instance, reason) of each skip.
    skips: Skips,
    /// job → (entry index, instance) of each `ClockSkew` skip: its fire is named by the
    /// skipper's clock, not the registry's.
    skew_skips: BTreeMap<String, Vec<(usize, usize)>>,
    /// (job, fire) → the time of its latest scheduled start, anywhere.
    scheduled_at: BTreeMap<(String, i64), i64>,
    /// job → (time, instance) of each reported error.
    errors: BTreeMap<String, Vec<(i64, usize)>>,
    /// (job, instance) → times it applied a changed config of the job.
    configs_applied: BTreeMap<(String, usize), Vec<i64>>,
    /// job → (time, item → owner) of each committed assignment.
    assignments: Assignments,
    /// job → the trace index of each assignment's `Sharded` event, in the order of
    /// `assignments`: what came before what within one millisecond.
    assignment_entries: BTreeMap<String, Vec<usize>>,
    /// (time, entry index, instance, job, item) of every run a crash or the end of its
    /// session interrupted: with failover on, another instance must re-execute it.
    /// The last field is the fire the interrupted run belonged to.
    orphans: Vec<(i64, usize, usize, String, u32, i64)>,
    /// The virtual time of each trace entry, by index.
    at: Vec<i64>,
}

impl Facts {
    fn read(entries: &[Entry]) -> Self {
        let mut f = Facts::default();
        // (job, item) → (instance, fire, session, entry index) of each run not ended yet.
        let mut open = Open::new();
        f.at = entries.iter().map(|e| e.at).collect();
        for (idx, e) in entries.iter().enumerate() {
            match &e.what {
                What::Event { event, session, .. } => match event {
                    SchedulerEvent::ItemStarted { job, item, fire_ms, kind, .. } => {
                        if matches!(
                            kind,
                            FireKind::Scheduled | FireKind::Failover | FireKind::Misfire
                        ) {
                            let key = (job.clone(), *item, *fire_ms);
                            f.starts.entry(key).or_default().push((idx, e.who, *kind));
                            if *kind == FireKind::Scheduled {
                                let last =
                                    f.scheduled_at.entry((job.clone(), *fire_ms)).or_default();
                                *last = (*last).max(e.at);
                            }
                        } else {
                            f.manual.insert((job.clone(), *item, *fire_ms));
                        }
                        let key = (job.clone(), *item);
                        f.runs.entry(key.clone()).or_default().push((e.at, e.who, *kind));
                        open.entry(key).or_default().push((e.who, *fire_ms, *session, idx));
                    }
                    SchedulerEvent::ItemFinished { job, item, .. } => {
                        let key = (job.clone(), *item, e.who);
                        f.ends.entry(key).or_default().push(e.at);
                        if let Some(runs) = open.get_mut(&(job.clone(), *item)) {
                            if let Some(k) = runs.iter().position(|r| r.0 == e.who) {
                                runs.remove(k);
                            }
                        }
                    }
                    SchedulerEvent::Skipped { job, fire_ms, reason } => {
                        let key = (job.clone(), *fire_ms);
                        f.skips.entry(key).or_default().push((idx, e.who, reason.clone()));
                        if matches!(reason, SkipReason::ClockSkew { .. }) {
                            f.skew_skips.entry(job.clone()).or_default().push((idx, e.who));
                        }
                    }
                    SchedulerEvent::Error { job, .. } => {
                        f.errors.entry(job.clone()).or_default().push((e.at, e.who));
                    }
                    SchedulerEvent::ConfigApplied { job } => {
                        f.configs_applied.entry((job.clone(), e.who)).or_default().push(e.at);
                    }
                    SchedulerEvent::Sharded { job, assignment } => {
                        let owners = assignment
                            .iter()
                            .filter_map(|(id, items)| Some((index_of(id)?, items)))
                            .flat_map(|(who, items)| items.iter().map(move |&n| (n, who)))
                            .collect();
                        f.assignments.entry(job.clone()).or_default().push((e.at, owners));
                        f.assignment_entries.entry(job.clone()).or_default().push(idx);
                    }
                    // A failover claim runs one orphaned fire: the assignment (who answers for
                    // the fires to come) stays the reshard's.
                    _ => {}
                },
                What::Note(Note::Crashed { .. }) => {
                    f.interrupt(&mut open, e, idx, |r| r.0 == e.who);
                }
                What::Note(Note::SessionEnded { session }) => {
                    f.interrupt(&mut open, e, idx, |r| r.0 == e.who && r.2 == Some(*session));
                }
                _ => {}
            }
        }
        f
    }

    /// Marks the open runs `hit` selects as interrupted at entry `e` (a crash or a session end).
    fn interrupt(
        &mut self,
        open: &mut Open,
        e: &Entry,
        idx: usize,
        hit: impl Fn(&(usize, i64, Option<u64>, usize)) -> bool,
    ) {
        for ((job, item), runs) in open.iter_mut() {
            runs.retain(|r| {
                if !hit(r) {
                    return true;
                }
                // Once per run (a fenced run a session end interrupted may crash later), by
                // its start: the same instance may run the same fire again (a restart claims
                // its own orphan) and be interrupted again.
                self.interrupted.insert((job.clone(), *item, r.1, r.0));
                if self.interrupted_runs.insert(r.3) {
                    self.orphans.push((e.at, idx, e.who, job.clone(), *item, r.1));
                }
                // A killed process runs nothing more; a fenced run may still end (cancelled).
                !matches!(e.what, What::Note(Note::Crashed { .. }))
            });
        }
    }

    /// Whether the last assignment committed before trace entry `idx` had `item`. An earlier
    /// one that had it does not count: a reshard for a smaller count removed the item since
    /// (after its runs ended), so a count change that adds it back adds an item with no marker
    /// until the reshard that creates it again (1 × 3 `chaos` 2,137,604,737: items 4-7 of an
    /// assignment of 5 s, removed by the reshard of 73 s for four items, added back at 76 s and
    /// applied at 80.1 s, when the fire of 80 s was skipped as a misfire for items 0-3).
    fn assigned_before(&self, job: &str, item: u32, idx: usize) -> bool {
        self.assignment_before_entry(job, idx).is_some_and(|owners| owners.contains_key(&item))
    }

    /// The last assignment of `job` whose `Sharded` event comes before trace entry `idx`.
    fn assignment_before_entry(&self, job: &str, idx: usize) -> Option<&BTreeMap<u32, usize>> {
        let (list, at) = (self.assignments.get(job)?, self.assignment_entries.get(job)?);
        list.iter().zip(at).rfind(|(_, &i)| i < idx).map(|((_, owners), _)| owners)
    }

    /// Whether `who`, crashed at `crash`, could know that failover was on for `job` then: the
    /// job had it from its addition, or `who` applied a changed config (or its process
    /// started, reading the config anew) after failover was last turned on, and the slack of
    /// a change before the crash. An owner cut off before failover was turned on, and crashed
    /// before it learned, kept no ledger mark (1 × 3 `chaos` seed 800,061,542: cut off at
    /// 87 s, failover turned on at 88 s, crashed at 96 s); nor did one that crashed while its
    /// mark was on its way, a clock comparison and a write after it learned (2 × 1 `chaos`
    /// seed 4,129,504,461: applied at 29 s over a 1 s link, the mark sent at 30 s, crashed at
    /// 30.4 s).
    fn knew_failover_on(&self, tl: &Timeline, job: &str, who: usize, crash: i64) -> bool {
        let Some(configs) = tl.configs.get(job) else { return true };
        let before: Vec<&(i64, crate::trace::JobState)> =
            configs.iter().take_while(|(t, _)| *t <= crash).collect();
        let turned_on = before
            .windows(2)
            .rev()
            .find(|pair| pair[1].1.failover && !pair[0].1.failover)
            .map(|pair| pair[1].0);
        let Some(on_at) = turned_on else { return true };
        let learned = |times: Option<&Vec<i64>>| {
            times.is_some_and(|l| l.iter().any(|&t| t >= on_at && t + CHANGE_SLACK_MS <= crash))
        };
        learned(self.configs_applied.get(&(job.to_owned(), who))) || learned(tl.starts.get(&who))
    }

    /// The owner of `item` by the last assignment committed at or before `at`.
    fn owner_at(&self, job: &str, item: u32, at: i64) -> Option<usize> {
        let list = self.assignments.get(job)?;
        list.iter().rev().find(|(t, _)| *t <= at).and_then(|(_, a)| a.get(&item).copied())
    }

    /// Whether `who` owned `item` when it recorded trace entry `idx`: by the last assignment
    /// of its millisecond, or by the last one before the entry in the trace. Two reshards can
    /// share a millisecond, and what an instance did between them (its leader's own skip,
    /// right after the first) was done under the first (3 × 2 `lease` 2,541,553,107: the
    /// leader resharded at 120 s, marked the item it was just given as a misfire of the fire
    /// that waited, and resharded again with a third instance back; the marker went with the
    /// item to its new owner, which caught it up).
    fn owned_at_entry(&self, job: &str, item: u32, who: usize, idx: usize) -> bool {
        self.owner_at(job, item, self.at[idx]) == Some(who)
            || self
                .assignment_before_entry(job, idx)
                .is_some_and(|owners| owners.get(&item) == Some(&who))
    }

    /// Whether `who` owned `item` when it recorded trace entry `idx` only by the order of the
    /// trace: the last assignment of the entry's millisecond gave the item to another.
    fn owned_by_order_only(&self, job: &str, item: u32, who: usize, idx: usize) -> bool {
        self.owner_at(job, item, self.at[idx]) != Some(who)
            && self.owned_at_entry(job, item, who, idx)
    }

    /// Whether a catch-up run (`FireKind::Misfire`) of `item` started at `at` or later.
    fn caught_up_after(&self, job: &str, item: u32, at: i64) -> bool {
        self.runs.get(&(job.to_owned(), item)).is_some_and(|runs| {
            runs.iter().any(|(t, _, kind)| *t >= at && *kind == FireKind::Misfire)
        })
    }

    /// Whether `who` started or skipped anything of `job` in `[from, to)`.
    /// Whether `who` recorded anything about fire `fire` of `job` or a later one (a skip or a
    /// start) between `from` and `to`: a catch-up of an earlier fire says nothing about it.
    fn said(&self, job: &str, who: usize, fire: i64, from: i64, to: i64) -> bool {
        let within = |idx: usize| (from..to).contains(&self.at[idx]);
        let skipped = self
            .skips
            .range((job.to_owned(), fire)..)
            .take_while(|(k, _)| k.0 == job)
            .any(|(_, list)| list.iter().any(|&(idx, w, _)| w == who && within(idx)));
        // Range scans per item: the whole map would make the check quadratic in the trace.
        let items = self
            .starts
            .range((job.to_owned(), 0, i64::MIN)..)
            .take_while(|((j, _, _), _)| j == job)
            .map(|((_, n, _), _)| *n)
            .max()
            .map_or(0, |n| n + 1);
        let started = (0..items).any(|n| {
            self.starts
                .range((job.to_owned(), n, fire)..=(job.to_owned(), n, i64::MAX))
                .any(|(_, list)| list.iter().any(|&(idx, w, _)| w == who && within(idx)))
        });
        skipped || started
    }

    /// Whether the run of `item` that `who` started at `started` ended without its completion
    /// being recorded ([`Timeline::completion_lost`]).
    fn completion_lost(
        &self,
        tl: &Timeline,
        job: &str,
        item: u32,
        who: usize,
        started: i64,
    ) -> bool {
        self.ends
            .get(&(job.to_owned(), item, who))
            // Strictly after: the run before may end in the same millisecond this one starts
            // (simulated items take at least 100 ms).
            .and_then(|ends| ends.iter().copied().find(|&t| t > started))
            .is_some_and(|end| tl.completion_lost(who, end))
    }

    /// When the first run of `job`'s `item` on `who` that ends at or after `from` ended.
    /// When the failover re-runs of `job` started within `[from, to]` ended (the last of
    /// them), if any: those `who` started (any instance's if `None`), of `item` (any item if
    /// `None`).
    fn reruns_end(
        &self,
        job: &str,
        who: Option<usize>,
        item: Option<u32>,
        from: i64,
        to: i64,
    ) -> Option<i64> {
        let (first, last) = item.map_or((0, u32::MAX), |n| (n, n));
        self.runs
            .range((job.to_owned(), first)..=(job.to_owned(), last))
            .flat_map(|((_, item), runs)| runs.iter().map(move |r| (*item, r)))
            .filter(|(_, (t, w, kind))| {
                who.is_none_or(|who| who == *w)
                    && *kind == FireKind::Failover
                    && (from..=to).contains(t)
            })
            .filter_map(|(item, &(t, w, _))| self.end_from(job, item, w, t))
            .max()
    }

    /// Until when a run of `item` that started by `at` and had not ended then went on (the
    /// latest end of such runs), if any.
    fn item_busy_until(&self, job: &str, item: u32, at: i64) -> Option<i64> {
        let runs = self.runs.get(&(job.to_owned(), item))?;
        runs.iter()
            .filter(|(t, _, _)| *t <= at)
            .filter_map(|&(t, w, _)| self.end_from(job, item, w, t))
            .filter(|&end| end > at)
            .max()
    }

    fn end_from(&self, job: &str, item: u32, who: usize, from: i64) -> Option<i64> {
        let ends = self.ends.get(&(job.to_owned(), item, who))?;
        ends.iter().copied().find(|&t| t >= from)
    }

    /// When the first run of `job`'s `item` on `who` going on at or after `from` stopped: its
    /// end, or its owner's crash or the end of its session if one cut it short first (such a
    /// run records no end; its fire fails over, and what waited for it waits no longer).
    fn stop_from(&self, job: &str, item: u32, who: usize, from: i64) -> Option<i64> {
        let cut = self
            .orphans
            .iter()
            .filter(|(at, _, w, j, i, _)| *w == who && j == job && *i == item && *at >= from)
            .map(|(at, ..)| *at)
            .min();
        [self.end_from(job, item, who, from), cut].into_iter().flatten().min()
    }

    /// The owner of `item` by the first assignment committed after `at` that has it.
    fn first_owner_after(&self, job: &str, item: u32, at: i64) -> Option<usize> {
        self.first_assignment_after(job, item, at).map(|(_, owner)| owner)
    }

    /// The first assignment committed after `at` that has `item` (one made under the count
    /// before a change may not have the item yet): when it was committed, and the item's owner.
    fn first_assignment_after(&self, job: &str, item: u32, at: i64) -> Option<(i64, usize)> {
        let list = self.assignments.get(job)?;
        list.iter().filter(|(t, _)| *t > at).find_map(|(t, a)| a.get(&item).map(|&o| (*t, o)))
    }

    /// When the first assignment of `job` after `at` was committed.
    fn next_assignment_after(&self, job: &str, at: i64) -> Option<i64> {
        self.assignments.get(job)?.iter().map(|(t, _)| *t).find(|&t| t > at)
    }

    /// The owners of `item` for a fire at `at` whose next fire is at `next`.
    fn owners(&self, job: &str, item: u32, at: i64, next: i64) -> Vec<usize> {
        let Some(list) = self.assignments.get(job) else { return Vec::new() };
        let mut owners = Vec::new();
        if let Some((_, a)) = list.iter().rev().find(|(t, _)| *t <= at) {
            owners.extend(a.get(&item).copied());
        }
        for (_, a) in list.iter().filter(|(t, _)| *t > at && *t < next) {
            if let Some(&w) = a.get(&item) {
                if !owners.contains(&w) {
                    owners.push(w);
                }
            }
        }
        owners
    }
}

/// A fire lost while its owner had crashed, for the failover catch-up rule.
struct LostToCrash {
    at: i64,
    owner: usize,
}

pub(super) fn check(entries: &[Entry], tl: &Timeline, out: &mut Vec<Violation>) -> Accounting {
    let facts = Facts::read(entries);
    let mut acc = Accounting::default();
    let final_at = tl.phase(Phase::Final).unwrap_or(tl.end);
    let mut misfires: Vec<(usize, usize, String, u32)> = Vec::new();
    let mut crash_losses: BTreeMap<(String, u32), Vec<LostToCrash>> = BTreeMap::new();

    for (job, configs) in &tl.configs {
        for (k, (from, state)) in configs.iter().enumerate() {
            let bound = tl.removed_after(job, *from).unwrap_or(i64::MAX).min(final_at);
            let to = configs.get(k + 1).map_or(bound, |(t, _)| *t).min(bound);
            let Some(cron) = &state.cron else { continue };
            let tz = state.time_zone.as_deref().unwrap_or("");
            let Ok(schedule) = CronSchedule::parse(cron, tz) else { continue };
            let changed_later = k + 1 < configs.len() && to < bound;
            for fire in schedule.iter_after(EPOCH_MS + from) {
                let at = fire - EPOCH_MS;
                if at > to {
                    break;
                }
                let next = schedule.next_after(fire).map_or(i64::MAX, |n| n - EPOCH_MS);
                if state.disabled {
                    acc.add("exempt: job disabled");
                    continue;
                }
                // Without clock checks (`maxTimeDiffSeconds` unset, ElasticJob's default) the
                // promise assumes clocks in step: an instance whose clock is off runs its fires
                // by it, early or late; with them, so does one off by no more than the checks
                // allow (GUARANTEES.md, "Configurations").
                let tolerance = (state.max_time_diff_seconds >= 0)
                    .then(|| i64::from(state.max_time_diff_seconds) * 1_000);
                if tl.clock_off_near(at, tolerance) {
                    acc.add("exempt: a clock off, within what clock checks allow");
                    continue;
                }
                if k == 0 && at < from + 1_000 {
                    acc.add("exempt: job being added");
                    continue;
                }
                if (k > 0 && at < from + CHANGE_SLACK_MS)
                    || (changed_later && at > to - CHANGE_SLACK_MS)
                {
                    acc.add("exempt: config change");
                    continue;
                }
                for item in 0..state.count {
                    let changed_at = (k > 0).then_some(*from);
                    let ctx = Fire { job, item, fire, at, next, changed_at };
                    ctx.judge(
                        entries,
                        tl,
                        &facts,
                        state.misfire,
                        &mut acc,
                        out,
                        &mut misfires,
                        &mut crash_losses,
                    );
                }
            }
        }
    }

    // Misfire skips must be caught up once the blocking run ended.
    for (idx, who, job, item) in misfires {
        let skip_at = entries[idx].at;
        let caught = facts.caught_up_after(&job, item, skip_at);
        // The item ran that very fire anyway (a manual trigger handled in the fire's own
        // millisecond carries its time): nothing is owed.
        let ran_it = match &entries[idx].what {
            What::Event { event: SchedulerEvent::Skipped { fire_ms, .. }, .. } => {
                let key = (job.clone(), item, *fire_ms);
                facts.starts.contains_key(&key) || facts.manual.contains(&key)
            }
            _ => false,
        };
        if caught || ran_it {
            continue;
        }
        let end = facts
            .ends
            .get(&(job.clone(), item, who))
            .and_then(|ends| ends.iter().copied().find(|t| *t >= skip_at));
        let Some(end) = end else { continue };
        if end >= final_at || tl.not_up(who, end).is_some() || tl.not_up(who, skip_at).is_some() {
            continue;
        }
        // A count change that removed the item before its owner could run the catch-up (the
        // owner's own run ends first, then a watch round trip) leaves nothing to catch up:
        // also one made within a change's slack before the skip, which the skipper had not
        // seen when it skipped (4 × 1 `chaos` 3,868,855,112: the count went from 3 to 1 at
        // 118.3 s, and the skipper, on a slow link, marked item 2 at 120 s under the old
        // count; the reshard made then removed the item). So does the job's removal before the
        // catch-up was due (GUARANTEES.md, section 2).
        let removed = tl.configs.get(&job).is_some_and(|configs| {
            configs.iter().any(|(t, state)| {
                *t > skip_at - CHANGE_SLACK_MS
                    && *t <= end + 2 * CHANGE_SLACK_MS
                    && state.count <= item
            })
        }) || tl.removed_by(&job, skip_at, end + CHANGE_SLACK_MS);
        if removed {
            continue;
        }
        // The item was disabled when the catch-up fell due (the skipper's run that blocked
        // it ended, a run of this item or of another): disabled items run nothing, and the
        // catch-up is dropped (GUARANTEES.md, section 2; failover 537,321,492: disabled 93 ms
        // before the skip, enabled again after the run; chaos 733,006,803: disabled before
        // the skip, so the item's own next run came only after it was enabled again).
        let blocking_end = facts
            .ends
            .iter()
            .filter(|((j, _, w), _)| *j == job && *w == who)
            .filter_map(|(_, ends)| ends.iter().copied().find(|t| *t >= skip_at))
            .min()
            .unwrap_or(end);
        if tl.item_disabled_now(&job, item, blocking_end) || tl.item_disabled_now(&job, item, end) {
            continue;
        }
        // A reshard was pending when the run ended: the catch-up waits for it (as ElasticJob's
        // does), then falls to the item's owner under the assignment it makes, who runs it
        // after the run it started then, if any (the fire that waited; a run its owner's crash
        // cut short stops at the crash: 3 × 2 `lease` seed 4,182,359,914, where the new owner's
        // 25 s run never ended and a count change removed the item during it). The job's removal, or
        // a count change that removed the item, before then leaves nothing to catch up
        // (GUARANTEES.md, section 2). When that run ends while another reshard is pending,
        // the catch-up waits for that one too, and so on (`lease` seed 1,134: items that run
        // 20 s, each reshard held back by the runs of the one before).
        // And an owner with failover re-runs of the job claimed when the catch-up fell due
        // runs them first (the older debt), then the catch-up (`lease` seed 1,077: two 20 s
        // re-runs went first).
        let mut due = end;
        let mut waited = false;
        // The skipper's server was disabled for the job when its run ended: a disabled server
        // runs nothing, its catch-ups neither (they stay owed), until the server is enabled
        // again or a reshard gives the item to another instance; then as below (`lease` 3 × 2
        // seed 830,029,761: the leader had crashed, so the disable raised no flag until its
        // session ended; its successor's reshard waited for running items, and a count change
        // removed the item first).
        // (Disabled within the slack of the end counts; so does an enable within it, which
        // ends the wait at the end. A reshard made in the millisecond the run ended, which
        // waited for it, moves the catch-up then.)
        if tl.server_disabled(&job, who, end) {
            waited = true;
            let enabled = tl.server_enabled_after(&job, who, end - CHANGE_SLACK_MS);
            let resharded = tl.flag_gone_after(&job, end - 1);
            due = [enabled, resharded].into_iter().flatten().min().map_or(i64::MAX, |t| t.max(end));
        }
        let mut last_reshard = i64::MIN;
        for _ in 0..MAX_CHAINED_WAITS {
            if due == i64::MAX {
                break;
            }
            // (Pending until the run ended, the reshard may come in that very millisecond:
            // it waited for the run; `lease` seed 1,146.) Or asked for within the slack after
            // the run ended: the catch-up is decided once the run's end is written, which
            // takes a round trip, after the requests queued before it, over a slow link
            // (3 × 2 `chaos` seed 800,060,818: the run ended at 83 s, its end was written at
            // 84 s, a server disabled at 83.4 s asked for a reshard, and the job was removed
            // during the run that followed it).
            let pending = tl
                .reshard_pending_until(&job, due - 1)
                .or_else(|| tl.reshard_asked_within(&job, due - 1, due + CHANGE_SLACK_MS))
                .filter(|&r| r != last_reshard);
            if let Some(reshard) = pending {
                last_reshard = reshard;
                waited = true;
                if reshard == i64::MAX {
                    due = i64::MAX;
                    break;
                }
                let owner = facts.owner_at(&job, item, reshard);
                due =
                    owner.and_then(|o| facts.stop_from(&job, item, o, reshard)).unwrap_or(reshard);
                continue;
            }
            // The item itself still running (a failover taker re-running an earlier fire of
            // it), or queued for failover then and re-run by its taker first
            // (`owed_catch_up`): the catch-up follows that run (`lease` seed 836,920,862:
            // queued when the reshard gave the item to its catch-up's owner).
            let slack_end = due + CHANGE_SLACK_MS;
            let busy_until = facts
                .item_busy_until(&job, item, due)
                .or_else(|| facts.reruns_end(&job, None, Some(item), due, slack_end))
                .filter(|&e| e > due);
            if let Some(busy_until) = busy_until {
                waited = true;
                due = busy_until;
                continue;
            }
            let owner = facts.owner_at(&job, item, due).unwrap_or(who);
            match facts.reruns_end(&job, Some(owner), None, due, slack_end) {
                Some(rerun_end) if rerun_end > due => {
                    waited = true;
                    due = rerun_end;
                }
                _ => break,
            }
        }
        let caught_up_by = waited.then(|| due.saturating_add(CHANGE_SLACK_MS));
        // Its turn came once the run was over (everything stops gracefully in its final phase).
        if caught_up_by.is_some_and(|t| t >= final_at) {
            continue;
        }
        // After its waits the catch-up falls due at `due`: an item disabled then runs nothing,
        // and the catch-up is dropped, as when its item is disabled at the end of the run it
        // waited for (GUARANTEES.md, section 2; 3 × 3 `lease` seed 4,099,042,499 with 4 s
        // sessions: disabled at 89.7 s while the catch-up waited for a reshard, made at
        // 97.7 s, held back by running items and two leaders' departures).
        if waited && tl.item_disabled_now(&job, item, due) {
            continue;
        }
        let removed_while_waiting = caught_up_by.is_some_and(|until| {
            tl.removed_by(&job, skip_at, until)
                || tl.configs.get(&job).is_some_and(|configs| {
                    configs.iter().any(|(t, c)| *t > skip_at && *t <= until && c.count <= item)
                })
        });
        if removed_while_waiting {
            continue;
        }
        // The job's removal by `until`, or a count change that removes the item by then.
        let gone_by = |until: i64| {
            tl.removed_by(&job, skip_at, until)
                || tl.configs.get(&job).is_some_and(|configs| {
                    configs.iter().any(|(t, c)| *t > skip_at && *t <= until && c.count <= item)
                })
        };
        // The instance the catch-up fell to (the skipper, or the item's owner under the
        // reshard it waited for) had a clock off the registry's by more than
        // `maxTimeDiffSeconds`: it runs nothing until its clock is right, and the job's
        // removal, or a count change that removes the item, before then leaves nothing to
        // catch up (GUARANTEES.md, section 2; chaos 2,229,504,887 at 5 × 3: the reshard gave
        // the item to an instance 8 s behind; 3 × 1 `chaos` 4,047,597,879: set right 1 s
        // before the count went from 8 to 2, its clock compared again every 2 s).
        // Its clock is looked at when the reshard it waited for was made, and when it fell due
        // after the waits (3 × 2 `chaos` 3,094,299,706: given the item at 82 s, the owner ran
        // that fire first, as scheduled; its clock went 8 s back during that run, and the job
        // was removed before it was set right).
        let due_at = tl.reshard_pending_until(&job, end).filter(|&t| t < i64::MAX).unwrap_or(end);
        let clock_off_at = |at: i64| {
            let owner = facts.owner_at(&job, item, at).unwrap_or(who);
            let bound_ms = tl
                .config_at(&job, at)
                .map_or(0, |c| i64::from(c.max_time_diff_seconds).saturating_mul(1_000));
            tl.clock_off_until(owner, at, bound_ms)
        };
        let clock_off_until = clock_off_at(due_at).or_else(|| clock_off_at(due));
        if clock_off_until.is_some_and(|right| gone_by(right.saturating_add(CHANGE_SLACK_MS))) {
            continue;
        }
        // The catch-up's owner went down (crashed or cut off) before it could start it: the
        // skipper itself, before its next start could follow its run's end, or the owner a
        // reshard since the skip gave the item to, down by then or before the run of the item
        // it was in then ended (chaos 2,983,438,997: cut off during the run of the fire the
        // reshard was made at, 3 s before the job's removal). After its departure the
        // catch-up is its successor's, within the liveness bound of a failover (section 4);
        // the job's removal before then leaves nothing to catch up (GUARANTEES.md, section 2).
        // Right after: within the slack of a change, or, over a slow link, three round trips
        // (the run's end, a clock comparison, the catch-up's start) and a second (1 × 3 `chaos`
        // 2,601,736,433: on a 1 s link, the skipper crashed 3,008 ms after its run's end, 8 ms
        // before its catch-up's start could return).
        let skipper_slack = CHANGE_SLACK_MS.max(tl.latency_at(who, end).saturating_mul(3) + 1_000);
        let skipper_down = tl.went_down(who, end, end + skipper_slack).map(|(from, _)| from);
        // The heir is judged from when it was given the item (the run's end at the earliest):
        // down then, or gone down before the run of the item it was in then ended. Judged at
        // the run's end instead, a heir given the item by a reshard 16 s later was read as down
        // since an earlier stop (the span of its session, which the second a new session may
        // take to register again stretched past the run's end), and the bound of its
        // successor ran from there (3 × 2 `chaos` 1,968,787,309: the skip at 34 s, a reshard
        // held back by a crashed leader's session gave the item at 51.3 s to an instance that
        // had crashed 0.4 s before, and the job was removed 3.5 s before its session ended).
        // The skipper itself, when a reshard the catch-up waited for gave it the item back
        // after the run's end, is such an owner too (5 × 1 `chaos` 2,440,431,628: a reshard
        // held back 9 s by a cut-off instance's markers gave the item back to the skipper, cut
        // off 3 s before; the job was removed 3 s after the reshard).
        let heir = facts
            .first_assignment_after(&job, item, skip_at - 1)
            .filter(|&(given, o)| o != who || given > end);
        // Its departure after then comes first: a span that covers that time as well (the
        // second a new session may take to register) is over by then, since the heir came back
        // to be given the item (3 × 1 `chaos` 2,472,653,517: restarted at 25.2 s, its earlier
        // session's span ran to 26.2 s; given the item at 26 s, it crashed at 26.15 s in the
        // run it had started; the job was removed 13 s after its session ended, its
        // successor's failover re-run going first).
        let heir_down = heir.and_then(|(given, o)| {
            let from = given.max(end);
            let busy_until = facts.end_from(&job, item, o, from).unwrap_or(from);
            tl.went_down(o, from, busy_until + CHANGE_SLACK_MS)
                .map(|(down, _)| down)
                .or_else(|| tl.down_since(o, from))
        });
        let successor_by = skipper_down.or(heir_down).map(|from| {
            let shows = from.saturating_add(tl.session_ms);
            tl.bound_end(&job, shows, failover_slack_ms(tl, &job))
        });
        // Or, as for a failover re-run, a count change that removes the item by then (chaos
        // 7,848,411: the reshard gave the catch-up to an instance cut off, then the count
        // went from 3 to 2).
        if successor_by.is_some_and(gone_by) {
            continue;
        }
        out.push(Violation {
            invariant: Invariant::Fires,
            at: end,
            message: format!(
                "{job}#{item}: i{who} skipped a fire as a misfire at {skip_at}, but no catch-up \
                 run followed when its run ended at {end}"
            ),
            context: context(entries, index_at(entries, end), Some(&job)),
        });
    }

    // With failover and misfire on, items that lost fires to a crashed owner are caught up.
    for ((job, item), losses) in crash_losses {
        let Some(first) = losses.first() else { continue };
        // An item an operator disabled, or a count change removed, before its owner's crash
        // was noticed (the session timeout after the last loss, at most) runs no catch-up:
        // disabled items run nothing, removed ones do not exist.
        // Noticed by an instance up (one that could take it over): with none up when the
        // session ended, once one is (1 × 3 `failover` 14,732,640: the only instance came back
        // 18 s after its session ended, 5 s after an operator disabled the item).
        let last = losses.last().map_or(first.at, |l| l.at);
        let noticed_by = tl.bound_end(&job, last.saturating_add(tl.session_ms), 1_000);
        let disabled_meanwhile = tl.item_disabled.get(&(job.clone(), item)).is_some_and(|l| {
            l.iter().any(|(from, on)| *on && *from > first.at && *from <= noticed_by)
        });
        // Once the crash is noticed, the catch-up is its successor's, within the liveness
        // bound of a failover (section 4): the job's removal, or a count change that removes
        // the item, before then leaves nothing to catch up (GUARANTEES.md, section 2; chaos
        // 581,922,752: the catch-up waited for two reshards, then the job went).
        let successor_by = tl.bound_end(&job, noticed_by, failover_slack_ms(tl, &job));
        let job_removed = tl.removed_by(&job, first.at, successor_by);
        // Or failover turned off by then: the catch-ups a crash owes are queued as failover
        // re-runs, and the leader clears the queue when failover is turned off (chaos
        // 538,601,397 at 2 × 4: turned off 9.6 s after the crashed owner's session ended,
        // which nobody saw, the other instance being cut off).
        let removed_meanwhile = job_removed
            || tl.configs.get(&job).is_some_and(|configs| {
                configs.iter().any(|(t, c)| {
                    *t > first.at && *t <= successor_by && (c.count <= item || !c.failover)
                })
            });
        if disabled_meanwhile || removed_meanwhile {
            acc.add("exempt: item disabled before the crash was noticed, or removed (or failover turned off) before its successor was due");
            continue;
        }
        // Garbage in the assignment record before the crash was noticed: a reshard meanwhile
        // cannot tell who owed which fire, and owes none (GUARANTEES.md, section 6).
        if tl.garbage.blurs_catch_up(&job, first.at - tl.session_ms, noticed_by) {
            acc.add("exempt: assignment record garbage before the crash was noticed");
            continue;
        }
        // The missed fires are counted under the cron in effect when the loss is handled (the
        // registry keeps the current config only): a cron change before then recounts them.
        let cron_at_loss = tl.config_at(&job, first.at).map(|c| c.cron.clone());
        let cron_changed = tl.configs.get(&job).is_some_and(|configs| {
            configs.iter().any(|(t, c)| {
                *t > first.at && *t <= noticed_by && Some(&c.cron) != cron_at_loss.as_ref()
            })
        });
        if cron_changed {
            acc.add("exempt: cron changed before the crash was noticed");
            continue;
        }
        // Failover was off when the owner crashed, as far as it could know: it kept no record
        // of the fires it started then, so the survivors cannot tell which it missed
        // (GUARANTEES.md, section 2).
        let crashed_at = tl
            .crashes
            .iter()
            .filter(|&&(t, w)| w == first.owner && t <= first.at)
            .map(|&(t, _)| t)
            .max();
        let failover_then =
            crashed_at.and_then(|t| tl.config_at(&job, t)).is_none_or(|c| c.failover && c.misfire)
                && crashed_at.is_none_or(|t| facts.knew_failover_on(tl, &job, first.owner, t));
        // Or turned off before the crash was noticed: nothing is queued then.
        let turned_off = tl.configs.get(&job).is_some_and(|configs| {
            configs.iter().any(|(t, c)| *t > first.at && *t <= noticed_by && !c.failover)
        });
        if !failover_then || turned_off {
            acc.add("exempt: failover or misfire off when the owner crashed or was noticed");
            continue;
        }
        let caught = facts.runs.get(&(job.clone(), item)).is_some_and(|runs| {
            runs.iter().any(|(t, _, kind)| {
                *t > first.at && matches!(kind, FireKind::Misfire | FireKind::Failover)
            })
        });
        if !caught {
            out.push(Violation {
                invariant: Invariant::Fires,
                at: first.at,
                message: format!(
                    "{job}#{item}: {} fire(s) from +{} on fell due while its owner i{} had crashed \
                     and was not yet detected; with failover and misfire on they must be caught \
                     up once, and were not",
                    losses.len(),
                    first.at,
                    first.owner
                ),
                context: context(entries, index_at(entries, first.at), Some(&job)),
            });
        }
    }

    // Runs interrupted by a crash are failed over, exactly once, when failover is on.
    for (k, (crash_at, idx, who, job, item, fire)) in facts.orphans.iter().enumerate() {
        let failover = tl.config_at(job, *crash_at).is_some_and(|s| s.failover);
        let how = match &entries[*idx].what {
            What::Note(Note::Crashed { .. }) => "crashed",
            _ => "lost its session",
        };
        if !failover {
            acc.add(format!("interrupted: owner {how} (failover off)"));
            continue;
        }
        // A run started while failover was off (as far as its instance could know: a change
        // takes a watch round trip) is recorded nowhere, and its marker goes with the session:
        // nothing can fail it over (GUARANTEES.md, section 2).
        let started_at = facts.runs.get(&(job.clone(), *item)).and_then(|runs| {
            runs.iter().filter(|(t, w, _)| *w == *who && *t <= *crash_at).map(|r| r.0).max()
        });
        let started_without = started_at.is_some_and(|t| {
            let from = t - CHANGE_SLACK_MS;
            tl.config_at(job, from).is_some_and(|c| !c.failover)
                || tl.configs.get(job).is_some_and(|configs| {
                    configs.iter().any(|(at, c)| *at > from && *at <= t && !c.failover)
                })
        });
        if started_without {
            acc.add(format!("interrupted: owner {how}, run started with failover off"));
            continue;
        }
        // When the departure shows to the survivors: a crashed instance's session ends a
        // session timeout after it; an ended session at once.
        let shows = match &entries[*idx].what {
            What::Note(Note::Crashed { .. }) => crash_at.saturating_add(tl.session_ms),
            _ => *crash_at,
        };
        // A count change removed the item (while it ran, or before the departure showed), or
        // the job was removed: there is nothing to run again (GUARANTEES.md, section 2).
        let job_removed = tl.removed_by(job, *crash_at, shows + 1_000);
        let removed = job_removed
            || tl.config_at(job, *crash_at).is_some_and(|c| c.count <= *item)
            || tl.configs.get(job).is_some_and(|configs| {
                configs
                    .iter()
                    .any(|(t, c)| *t > *crash_at && *t <= shows + 1_000 && c.count <= *item)
            });
        if removed {
            acc.add(format!("interrupted: owner {how}, item removed before it showed"));
            continue;
        }
        // Failover turned off before the departure showed (or before its queue entry was
        // taken): the leader clears the queue and the records of what ran, and nothing is owed
        // (GUARANTEES.md, section 2).
        let turned_off = tl.configs.get(job).is_some_and(|configs| {
            configs.iter().any(|(t, c)| *t > *crash_at && *t <= shows + 1_000 && !c.failover)
        });
        if turned_off {
            acc.add(format!("interrupted: owner {how}, failover turned off before it showed"));
            continue;
        }
        let until = facts.orphans[k + 1..]
            .iter()
            .find(|o| o.3 == *job && o.4 == *item && o.5 == *fire)
            .map_or(i64::MAX, |o| o.0);
        // Any instance may take it over, the same one too once it is back in a new session (an
        // expiry, a restart): what counts is one failover run of the interrupted fire after the
        // interruption (a failover of a later fire of the item answers another interruption).
        let takers: Vec<(usize, usize)> = facts
            .starts
            .get(&(job.clone(), *item, *fire))
            .map(|starts| {
                starts
                    .iter()
                    .filter(|(i, _, kind)| {
                        let t = entries[*i].at;
                        t >= *crash_at && t <= until && *kind == FireKind::Failover
                    })
                    .map(|s| (s.0, s.1))
                    .collect()
            })
            .unwrap_or_default();
        // A taker whose run ended while it was cut off could not record the completion (the
        // at-least-once edge): the next taker's run is the failover that counts.
        let unrecorded =
            |&(i, w): &(usize, usize)| facts.completion_lost(tl, job, *item, w, entries[i].at);
        let counted = match takers.split_last() {
            Some((_, before)) if before.iter().all(unrecorded) => 1,
            _ => takers.len(),
        };
        // Liveness (GUARANTEES.md, section 4): the survivors start an orphan as soon as they
        // see its instance leave, give or take a claimer busy with a run of its own.
        let noticed = shows;
        let first_start = takers.first().map(|&(i, _)| entries[i].at);
        // While no instance was up (all crashed or cut off), or every one up had its server
        // disabled for the job, nobody could take it over (GUARANTEES.md, section 4; 2 × 4
        // `failover` 2,601,912,491: the only survivor's server was disabled for 15 s).
        let slack = failover_slack_ms(tl, job);
        let due = tl.bound_end(job, noticed, slack);
        let late = |t: i64| t > due;
        if counted == 1 && first_start.is_some_and(late) {
            out.push(Violation {
                invariant: Invariant::Fires,
                at: *crash_at,
                message: format!(
                    "{job}#{item} was running on i{who} when it {how} at {crash_at}; its \
                     departure showed at {noticed}, but it was failed over only at {}",
                    first_start.unwrap_or_default()
                ),
                context: context(entries, *idx, Some(job)),
            });
            continue;
        }
        // Garbage in what says which fire it was (GUARANTEES.md, section 6): the failover
        // runs the latest fire the survivors can tell. Written before the departure could be
        // read: with nobody up to read it when it showed, until the bound that waits for one
        // (1 × 5 `garbage` seed 1,360,704,030: the only instance crashed, garbage over its
        // ledger as its session ended, and its restart re-ran the latest fire).
        let blurred = counted == 0
            && tl.garbage.blurs_fire(job, *crash_at - tl.session_ms, due.max(shows + slack))
            && facts.runs.get(&(job.clone(), *item)).is_some_and(|runs| {
                runs.iter().any(|(t, _, kind)| *t >= *crash_at && *kind == FireKind::Failover)
            });
        if blurred {
            acc.add(format!(
                "interrupted: owner {how}, failed over for another fire after garbage"
            ));
            continue;
        }
        // The job was removed, or a count change removed the item, before the re-run was due
        // (a claimer may be busy, or cut off, for up to the liveness bound): the item no
        // longer exists, nothing is owed any more (GUARANTEES.md, section 2).
        // (1 × 3 `failover` 479,507,292: the only instance crashed, and the count went down in
        // the millisecond its session ended, before it came back.)
        let removed_before_due = tl.removed_by(job, *crash_at, due.saturating_sub(1))
            || tl.configs.get(job).is_some_and(|configs| {
                configs.iter().any(|(t, c)| *t > *crash_at && *t < due && c.count <= *item)
            });
        if counted == 0 && removed_before_due {
            acc.add(format!("interrupted: owner {how}, item removed before the re-run was due"));
            continue;
        }
        // Failover turned off before the re-run was due: the leader clears the queue, claimed
        // or not (GUARANTEES.md, section 2).
        let off_before_due = tl.configs.get(job).is_some_and(|configs| {
            configs.iter().any(|(t, c)| *t > *crash_at && *t < due && !c.failover)
        });
        if counted == 0 && off_before_due {
            acc.add(format!(
                "interrupted: owner {how}, failover turned off before the re-run was due"
            ));
            continue;
        }
        let message = match counted {
            1 => {
                acc.add(format!("interrupted: owner {how}, failed over"));
                continue;
            }
            0 => format!(
                "{job}#{item} was running on i{who} when it {how} at {crash_at}; failover is on \
                 but it was not re-executed"
            ),
            n => format!(
                "{job}#{item} was running on i{who} when it {how} at {crash_at}; it was failed \
                 over {n} times instead of once"
            ),
        };
        out.push(Violation {
            invariant: Invariant::Fires,
            at: *crash_at,
            message,
            context: context(entries, *idx, Some(job)),
        });
    }
    acc
}

/// How long after a departure shows an orphan may wait for its taker: a claimer runs its
/// share once its own run ends, and an entry left unclaimed for 5 s goes to any idle
/// survivor; all of them may be busy with a run of the job's for as long as its items take.
fn failover_slack_ms(tl: &Timeline, job: &str) -> i64 {
    let longest = tl.configs.get(job).into_iter().flatten().map(|(_, c)| c.item_ms).max();
    let longest = longest.map_or(0, |ms| i64::try_from(ms).unwrap_or(i64::MAX));
    FAILOVER_SLACK_MS.max(longest.saturating_add(BEYOND_A_RUN_MS))
}

/// How many waits in a row a catch-up is followed through (a reshard pending, or failover
/// re-runs its owner ran first, when the run it waited for ended).
const MAX_CHAINED_WAITS: usize = 8;

/// The slack for jobs whose items run a few seconds at most.
const FAILOVER_SLACK_MS: i64 = 15_000;

/// What comes on top of a run of the job's own: the claim, the 5 s an entry waits for its
/// share's claimer, watch round trips.
const BEYOND_A_RUN_MS: i64 = 10_000;

/// One fire of one item.
struct Fire<'a> {
    job: &'a str,
    item: u32,
    /// The fire instant (epoch ms) and its virtual time.
    fire: i64,
    at: i64,
    /// The virtual time of the job's next fire.
    next: i64,
    /// When the config this fire follows took effect in the registry, if it was a change
    /// (not the job's first config).
    changed_at: Option<i64>,
}

impl Fire<'_> {
    /// When an owner of the item at this fire first handled the fire (started an item of it,
    /// or skipped it), if one did at or after its time.
    fn owner_handled_at(
        &self,
        facts: &Facts,
        entries: &[Entry],
        tl: &Timeline,
        at: i64,
    ) -> Option<i64> {
        let owners = facts.owners(self.job, self.item, at, self.next);
        let count = tl
            .configs
            .get(self.job)
            .map_or(0, |l| l.iter().map(|(_, c)| c.count).max().unwrap_or(0));
        let starts = (0..count)
            .filter_map(|n| facts.starts.get(&(self.job.to_owned(), n, self.fire)))
            .flat_map(|list| list.iter().map(|(i, w, _)| (*i, *w)));
        let skips = facts
            .skips
            .get(&(self.job.to_owned(), self.fire))
            .into_iter()
            .flatten()
            .map(|(i, w, _)| (*i, *w));
        starts
            .chain(skips)
            .filter(|(_, w)| owners.contains(w))
            .map(|(i, _)| entries[i].at)
            .filter(|&t| t >= at)
            .min()
    }

    #[allow(clippy::too_many_arguments)]
    fn judge(
        &self,
        entries: &[Entry],
        tl: &Timeline,
        facts: &Facts,
        misfire: bool,
        acc: &mut Accounting,
        out: &mut Vec<Violation>,
        misfires: &mut Vec<(usize, usize, String, u32)>,
        crash_losses: &mut BTreeMap<(String, u32), Vec<LostToCrash>>,
    ) {
        let (job, item, at) = (self.job, self.item, self.at);
        let key = (job.to_owned(), item, self.fire);
        if let Some(starts) = facts.starts.get(&key) {
            acc.add("ran");
            // A failover re-execution of a run that a crash or a session end interrupted is the
            // same fire running once; anything else beyond one start is a second run.
            //
            // A run that ended while its instance was cut off from the registry could not
            // record its completion (its markers stayed until the session ended): the
            // survivors cannot tell it from an interrupted run, and fail it over. That second
            // run is the documented at-least-once edge of a partition (the fencing token lets
            // the job tell), not a scheduling fault.
            let unrecorded =
                |i: usize, w: usize| facts.completion_lost(tl, job, item, w, entries[i].at);
            let interrupted = |i: usize, w: usize| {
                facts.interrupted.contains(&(job.to_owned(), item, self.fire, w))
                    || unrecorded(i, w)
            };
            let scheduled: Vec<_> = starts.iter().filter(|s| s.2 == FireKind::Scheduled).collect();
            // A catch-up carries the fire it makes up for: with a scheduled run of that same
            // fire, the item ran it twice.
            let caught_up: Vec<_> = starts.iter().filter(|s| s.2 == FireKind::Misfire).collect();
            // Runs after the first are failover re-runs, each of a run that was interrupted
            // (a failover run can itself be interrupted, and is then failed over again).
            let chained = starts.iter().skip(1).all(|s| s.2 == FireKind::Failover)
                && starts.windows(2).all(|pair| interrupted(pair[0].0, pair[0].1));
            let extra = scheduled.len() + caught_up.len() > 1 || !chained;
            // Garbage that hid which fire a catch-up or failover owed (GUARANTEES.md, section
            // 6): those run the latest fire the instances can tell, maybe one that ran. One
            // such run beyond the first, each of the two maybe failed over once interrupted
            // (the at-least-once edge above: 3 × 1 `garbage` seed 2,472,651,753, a catch-up
            // that garbage sent to a fire that had run, then cut off at its end and re-run).
            let heads: Vec<_> = starts
                .iter()
                .enumerate()
                .filter(|&(k, s)| {
                    k == 0
                        || s.2 != FireKind::Failover
                        || !interrupted(starts[k - 1].0, starts[k - 1].1)
                })
                .map(|(_, s)| s)
                .collect();
            let blurred = heads.len() == 2
                && heads.iter().any(|&&(i, _, kind)| {
                    tl.garbage.explains_extra_run(job, item, kind, entries[i].at)
                });
            if extra && blurred {
                acc.add("ran, and again after garbage hid which fire was owed");
                return;
            }
            if extra {
                let (idx, _, _) = starts[1];
                let on: Vec<String> = starts.iter().map(|(_, w, _)| format!("i{w}")).collect();
                out.push(Violation {
                    invariant: Invariant::Fires,
                    at: entries[idx].at,
                    message: format!(
                        "fire +{at} of {job}#{item} ran {} times (on {})",
                        starts.len(),
                        on.join(", ")
                    ),
                    context: context(entries, idx, Some(job)),
                });
            }
            return;
        }
        if tl.item_disabled(job, item, at) {
            acc.add("exempt: item disabled");
            return;
        }
        // Still being handled when the corruption landed: by the item's owner, on a slow link
        // or behind a busy runner, later than the fire's own time (3 × 2 `garbage`
        // 3,868,854,017: on a 1 s link, the owner handled the fire of 110 s at 114 s; garbage
        // replaced the item's owner node at 112.3 s, and the owner ran the fire's other items).
        let owner_handled = || self.owner_handled_at(facts, entries, tl, at);
        if tl.garbage.excuses(job, at, &owner_handled) {
            acc.add("exempt: registry garbage, recorded by its report");
            return;
        }
        // A fire that waited for a reshard runs under the assignment that reshard makes: the
        // owners are those of the assignments committed until the fire was last handled (a
        // start or a skip of it anywhere), not only until the next fire.
        let started = facts.scheduled_at.get(&(job.to_owned(), self.fire)).copied();
        let handled = facts
            .skips
            .get(&(job.to_owned(), self.fire))
            .into_iter()
            .flatten()
            .map(|(i, _, _)| entries[*i].at)
            .chain(started)
            .max()
            .map_or(self.next, |t| t.saturating_add(1).max(self.next));
        let mut owners = facts.owners(job, item, at, handled);
        // Before the job's first assignment (the leader could not shard yet) nobody owned the
        // item: the instance the first assignment gave it to answers for it.
        let heir = owners.is_empty().then(|| facts.first_owner_after(job, item, at)).flatten();
        // A fire due while a reshard was asked for waits for it and answers to the assignment
        // it makes, whenever it comes: its owner there runs the fire or records it (late, if
        // the next fire came first). The owners it was due under waited too: their records
        // speak for it as well, but a crash of theirs while it waited lost nothing. A flag an
        // operator deleted made no assignment: the fire then runs under the one it was due
        // under.
        let answered = tl
            .pending_flag_gone_at(job, at, self.fire)
            .filter(|&gone| !tl.garbage.deleted_flag(job, gone));
        let awaited = answered.and_then(|_| facts.first_owner_after(job, item, at));
        if let Some(w) = awaited.filter(|w| !owners.contains(w)) {
            owners.push(w);
        }
        // The owner the awaited reshard gave the item to was down for the fire and came back
        // as a new instance (its departure handled meanwhile): a new instance answers only for
        // fires from when it began registering (GUARANTEES.md, section 2). The fire is then
        // answered as before any assignment: the instances that waited for the reshard
        // recorded it, and any one's record speaks for it.
        let awaited_new = awaited.is_some_and(|w| tl.back_anew_after(w, at));
        let skips = facts.skips.get(&(job.to_owned(), self.fire));
        // A skip covers the item if the skipper owned it for this fire, or owned it when it
        // recorded the skip (a fire handled late, after a reshard). The owner at the fire's
        // time answers first: a later owner's skip (say a misfire of its own items) does not
        // speak for an item it did not hold yet.
        // A misfire marks the items its skipper owned when the fire came, or, with a reshard
        // pending, every item (for whoever owns it next, which makes it one of the owners of
        // a fire that waited for that reshard). Either way, with misfire on, the skip is then
        // owed a catch-up of the item (checked below), so a skip that marked nothing for the
        // item does not pass for a record. A later owner's misfire speaks for the item only
        // while the owner at the fire was up: one that was down lost the fire (judged below).
        let owner_at_fire = facts.owner_at(job, item, at);
        let first_up = owner_at_fire.is_none_or(|o| tl.not_up(o, at).is_none());
        let unowned = owners.is_empty() && heir.is_none();
        // Due before the job's first reshard: nobody owned the item, every instance waited for
        // that reshard, and any instance's record is the record for all its items, whoever
        // the reshard then gave them to (GUARANTEES.md, section 2; `failover` seed
        // 1,034,104,214 at 2 × 4: the leader was cut off before the first fire, which it
        // recorded `Disconnected`; the other instance waited, crashed while it waited, and
        // made the first reshard itself once back).
        let before_first =
            facts.assignments.get(job).is_none_or(|list| list.iter().all(|(t, _)| *t > at));
        let covers = |(idx, w, r): &&(usize, usize, SkipReason)| {
            let skip_at = entries[*idx].at;
            // A misfire between two reshards of one millisecond marked the item the first gave
            // the skipper, and the marker went with it to the second's owner: the skip is a
            // record of the item once that owner caught it up. (The check of the catch-ups
            // owed follows the skipper's own runs, which no longer have the item.)
            let owed_elsewhere = matches!(r, SkipReason::Misfire)
                && facts.owned_by_order_only(job, item, *w, *idx)
                && !facts.caught_up_after(job, item, skip_at);
            let owned_at_skip = facts.owned_at_entry(job, item, *w, *idx) && !owed_elsewhere;
            // A fire that waited for a reshard is skipped under the assignment it made: the
            // owner at the fire's time speaks for the item only if no reshard came between.
            let resharded = facts
                .assignments
                .get(job)
                .is_some_and(|list| list.iter().any(|(t, _)| *t > at && *t <= skip_at));
            let owned_at_fire = owner_at_fire == Some(*w) && !resharded;
            let direct = owned_at_skip || owned_at_fire || heir == Some(*w);
            match r {
                // The owner found the item disabled when it handled the fire: an item an
                // operator disabled by then owes the fire nothing (GUARANTEES.md, section 2;
                // 10 × 10 `failover` 2,176,086,081: a slow owner handled the fire 4 s late, an
                // operator had disabled the item 0.7 s before). The disable is checked at the
                // skip: a `NoItems` of an enabled item is no record.
                SkipReason::NoItems => direct && tl.item_disabled_now(job, item, skip_at),
                // Skipped after a reshard made since the fire: only the new owner's misfire
                // marks the item. Unless the fire was due before any flag that reshard answers
                // and the skipper owned the item at the fire: handled after that reshard, the
                // fire would be `Late`, so its misfire was decided before it, under the
                // assignment that gave it the item, which it marked; its event came back
                // later (GUARANTEES.md, section 2; 5 × 3 seed 2,332,122,118: the reply to the
                // skip took a slow link past the reshard). The catch-up it owes is checked.
                SkipReason::Misfire if resharded => {
                    owned_at_skip
                        || heir == Some(*w)
                        || (answered.is_none() && owner_at_fire == Some(*w))
                }
                // The owner a fire that waited for a reshard answers to: a misfire with the
                // reshard pending marks every item, for whoever owns it next.
                SkipReason::Misfire => {
                    direct || (owners.contains(w) && first_up) || awaited == Some(*w)
                }
                // Nobody ever owned the item (the job's first reshard never came): each
                // instance waited for it, and its record speaks for the whole fire.
                _ => {
                    owners.contains(w)
                        || heir == Some(*w)
                        || owned_at_skip
                        || unowned
                        || before_first
                        || awaited_new
                }
            }
        };
        let skip = skips.and_then(|s| {
            let first_owner = owners.first().copied().or(heir);
            s.iter()
                .filter(covers)
                .find(|(_, w, _)| Some(*w) == first_owner)
                .or_else(|| s.iter().find(covers))
        });
        // An instance whose clock is off the registry's names the fires it skips for
        // `ClockSkew` by its own clock: the skip it recorded during this fire's period (by the
        // registry's clock) answers for this fire (GUARANTEES.md, section 2).
        let skewed_skip = || {
            facts.skew_skips.get(job)?.iter().find(|&&(idx, w)| {
                let t = entries[idx].at;
                let owned_at_skip = facts.owner_at(job, item, t) == Some(w);
                // Before any assignment (or answered as before one), any instance's record
                // speaks for every item, as for the other skips.
                let anyone = unowned || before_first || awaited_new;
                (at..self.next).contains(&t)
                    && tl.skew_at(w, t) != 0
                    && (owners.contains(&w) || heir == Some(w) || owned_at_skip || anyone)
            })
        };
        if skip.is_none() && skewed_skip().is_some() {
            acc.add("skipped: clock-skew, by the skipper's clock");
            return;
        }
        if let Some((idx, who, r)) = skip {
            // An item a count change added owes no catch-up for a misfire skipped before any
            // assignment had it: no marker could be written for it yet (GUARANTEES.md, 2).
            // Before means before in the trace: the skip and the reshard that created the item
            // can share a millisecond (`failover` 2,320,651,129: the skip's markers committed
            // first, then the reshard).
            let existed = facts.assigned_before(job, item, *idx);
            if *r == SkipReason::Misfire && misfire && existed {
                misfires.push((*idx, *who, job.to_owned(), item));
            }
            acc.add(format!("skipped: {}", reason_class(r)));
            return;
        }
        // An owner whose clock runs behind the registry's by `s` comes to each fire `s` late:
        // a job removed before then was gone when its clock reached the fire (GUARANTEES.md,
        // section 2).
        // One whose clock runs ahead by `s` records the fire of this period (by the registry's
        // clock) when its clock reaches its first fire at or after `at + s`, `s` before that
        // fire by the registry's: a job removed before then was gone when it got there.
        // Before any assignment had the item (or answered as before one), each instance up
        // with the job could record the fire: it is exempt only if every one of them got there
        // after the removal (1 × 3 `chaos` 937,940,233: the only instance, 8 s behind, with a
        // job added and removed before its clock reached the job's first fire).
        let unassigned =
            before_first || awaited_new || (owner_at_fire.is_none() && awaited.is_none());
        // The instances up at the fire that had the job (their add had not failed).
        let up_with_job = |w: usize| tl.not_up(w, at).is_none() && !tl.lacks_job(w, job, at);
        let reached_late = |w: usize| match tl.skew_at(w, at) {
            0 => false,
            skew if skew < 0 => tl.removed_by(job, at, at - skew + 999),
            skew => {
                let met = tl.config_at(job, at).and_then(|c| {
                    let tz = c.time_zone.as_deref().unwrap_or("");
                    CronSchedule::parse(c.cron.as_deref()?, tz)
                        .ok()?
                        .next_after(self.fire + skew - 1)
                });
                met.is_some_and(|own| tl.removed_by(job, at, own - EPOCH_MS - skew))
            }
        };
        let with_job: Vec<usize> = (1..=tl.down.len()).filter(|&w| up_with_job(w)).collect();
        let reached_after_removal = if unassigned && !with_job.is_empty() {
            with_job.iter().all(|&w| reached_late(w))
        } else {
            owners.iter().any(|&w| reached_late(w))
        };
        if reached_after_removal {
            acc.add("exempt: job removed before the owner's clock reached the fire");
            return;
        }
        if owners.iter().any(|&w| tl.server_disabled(job, w, at)) {
            acc.add("exempt: server disabled");
            return;
        }
        let errored = facts.errors.get(job).is_some_and(|errs| {
            errs.iter().any(|(t, w)| owners.contains(w) && *t >= at - 50 && *t < self.next)
        });
        if errored {
            acc.add("lost: registry error");
            return;
        }
        // A fire that waited for a reshard which came only after the next fire was due was
        // overtaken while it waited: it is `Late` whoever the reshard gives its items to, so
        // that owner going down before the reshard came (before the fire or while the fire
        // waited: it could not have run it before then either) lost nothing, and the `Late`
        // record of any instance that waited speaks for it (GUARANTEES.md, section 2; chaos
        // 477,835,834: the count grew, the leader crashed before resharding and came back
        // under the same id to make the reshard that gave it the new item; the others recorded
        // the fire late. 10 x 10 chaos 3,983,268,745: the reshard's owner crashed 1.1 s after
        // the fire, which waited for a leader whose crash was not detected yet).
        let overtaken = answered.is_some_and(|gone| gone >= self.next);
        let awaited_down = awaited.is_some_and(|w| {
            tl.not_up(w, at).is_some()
                || answered.is_some_and(|gone| tl.went_down(w, at, gone).is_some())
        });
        // An instance handling the fire waits for a reshard at most the sharding timeout.
        let held_up_ms = i64::try_from(Settings::default().sharding_timeout.as_millis())
            .unwrap_or(i64::MAX)
            .saturating_add(1_000);
        // Whether instance `w` could record the fire: up with the job, and not gone down while
        // it handled it (waiting for a reshard) without a word of it.
        let could_record = |w: usize| {
            up_with_job(w)
                && tl
                    .went_down(w, at, at.saturating_add(held_up_ms))
                    .is_none_or(|(from, _)| facts.said(job, w, self.fire, at, from))
        };
        if overtaken && awaited_down {
            let late = skips.into_iter().flatten().any(|(_, _, r)| *r == SkipReason::Late);
            if late {
                acc.add("skipped: late (overtaken while it waited; its owner there was down)");
                return;
            }
            // Nobody waited to record it: every instance with the job was down, or went down
            // while it waited without a word of it (2 × 4 `failover` 417,371,193: both crashed
            // while the reshard a count change asked for waited; the one it gave the item to
            // restarted under its id, and lost nothing, the fire being overtaken).
            // An instance whose server is disabled for the job takes none of its fires: it
            // records its own skip at once and waits for no reshard (3 × 2 `failover`
            // 3,924,902,754: the only other instance up had its server disabled; the owner
            // crashed while it waited and came back under its id as the reshard was made).
            let could_wait = |w: usize| could_record(w) && !tl.server_disabled(job, w, at);
            if !(1..=tl.down.len()).any(could_wait) {
                acc.add("lost: overtaken while it waited, nobody up to record it");
                return;
            }
        }
        // Due before any assignment had the item (before the job's first reshard, or before
        // the reshard that creates an item a count change added), and no instance that had the
        // job could record it: each was down, went down while it waited for that reshard
        // without a word of the fire, or lacked the job (its add had failed). Nobody owned the
        // item, so no restart or departure counts the fire among those it missed: it is lost,
        // as a fire while the whole cluster is down (GUARANTEES.md, section 2; 1 × 3
        // `failover` 479,507,397: the only instance crashed 0.6 s before the job's first fire;
        // `chaos` 479,507,365: the only instance's add failed, its session expiring; `chaos`
        // 479,507,338: the count grew while the only instance was down). So is a fire that
        // waited for a reshard which gave the item to an instance that was down for it and
        // came back anew (answered as before any assignment; `failover` 264,491,183: the count
        // grew while the only instance was down, its departure handled by its own restart).
        if unassigned && !(1..=tl.down.len()).any(could_record) {
            acc.add("lost: no assignment had the item, no instance with the job could record it");
            return;
        }
        // Who answers for the fire: its owners, or before the first assignment its heir.
        let answering: Vec<usize> = match awaited {
            Some(w) => vec![w],
            None if owners.is_empty() => heir.into_iter().collect(),
            None => owners.clone(),
        };
        for &w in &answering {
            if let Some(why) = tl.not_up(w, at) {
                // Stopped the job gracefully, then crashed (say while the rest of its process
                // stopped): its leave removed its ledger, and nothing counts the fires after it
                // (GUARANTEES.md, section 2; 1 × 3 `failover` 1,188,597,844).
                if why.contains("crashed") && tl.left_before_crash(job, w, at) {
                    acc.add("lost: owner left the job, then crashed");
                    return;
                }
                acc.add(format!("lost: owner {}", why_class(why)));
                if why.contains("crashed") {
                    let fo = tl.config_at(job, at).is_some_and(|s| s.failover && s.misfire);
                    if fo {
                        crash_losses
                            .entry((job.to_owned(), item))
                            .or_default()
                            .push(LostToCrash { at, owner: w });
                    }
                }
                return;
            }
        }
        // An owner whose clock runs behind by `s` comes to the fire `s` late: gone down before
        // its clock got there, it lost the fire with its going, whatever it said of the fire
        // meanwhile by other paths (a failover re-run of another item of it), and a crash's
        // miss is owed as any (3 × 2 `chaos` 2,601,736,288 over 300 s: 8 s behind, given two
        // items by the reshard made at the fire of 184 s, it claimed a re-run of that fire for
        // a third item at 188.9 s and crashed at 189.4 s, before its clock reached 184 s; its
        // restart queued the latest fire missed, of 190 s).
        let behind_down = answering.iter().find_map(|&w| {
            let skew = tl.skew_at(w, at);
            if skew >= 0 {
                return None;
            }
            tl.went_down(w, at, at.saturating_sub(skew)).map(|(_, why)| (w, why))
        });
        // An owner that went down without a word about this fire (or anything of the job after
        // it) was held up handling it, typically waiting for a reshard from a leader whose crash
        // was not detected yet, when it crashed, stopped or lost its session: lost with it.
        let lost =
            behind_down.map(|(w, why)| (w, why, "before its clock reached it")).or_else(|| {
                answering.iter().find_map(|&w| {
                    let (from, why) = tl.went_down(w, at, at.saturating_add(held_up_ms))?;
                    let said = facts.said(job, w, self.fire, at, from);
                    (!said).then_some((w, why, "while handling it"))
                })
            });
        if let Some((w, why, when)) = lost {
            acc.add(format!("lost: owner {} {when}", why_class(why)));
            // With failover and misfire on, a fire its crashed owner held is one it missed:
            // the survivors owe it a catch-up (GUARANTEES.md, section 2).
            let fo = tl.config_at(job, at).is_some_and(|s| s.failover && s.misfire);
            if fo && why.contains("crashed") {
                crash_losses
                    .entry((job.to_owned(), item))
                    .or_default()
                    .push(LostToCrash { at, owner: w });
            }
            return;
        }
        // The fire waited (for a reshard) and was handled (an item of it started, or an owner
        // skipped it) once a count change had removed this item, or an operator had disabled
        // it: the item did not exist, or was not to run, when the fire was handled.
        let count =
            tl.configs.get(job).map_or(0, |l| l.iter().map(|(_, c)| c.count).max().unwrap_or(0));
        let started_at = (0..count)
            .filter_map(|n| facts.starts.get(&(job.to_owned(), n, self.fire)))
            .filter_map(|starts| starts.first().map(|(i, _, _)| entries[*i].at));
        let skipped_at = facts
            .skips
            .get(&(job.to_owned(), self.fire))
            .into_iter()
            .flatten()
            .filter(|(_, w, _)| owners.contains(w))
            .map(|(i, _, _)| entries[*i].at);
        let handled_at = started_at.chain(skipped_at).filter(|&t| t >= at).min();
        // The item's own owner handles it when it handles the fire: one on a slow link, given
        // the item by the reshard the fire waited for, starts its share later than the others
        // start theirs, and a count change between the two has removed the item by then (3 × 1
        // `chaos` 3,868,856,086: the reshard at 26 s, the count from 5 to 3 at 26.6 s, the
        // owner's start of the fire at 27 s without the removed item).
        let owner_handled_at = (0..count)
            .filter_map(|n| facts.starts.get(&(job.to_owned(), n, self.fire)))
            .filter_map(|starts| {
                starts.iter().find(|(_, w, _)| owners.contains(w)).map(|(i, _, _)| entries[*i].at)
            })
            .filter(|&t| t >= at)
            .min();
        let handled_at = owner_handled_at.or(handled_at);
        // Or the reshard it waited for came once a count change had removed the item: the
        // fire answers to that reshard's assignment, which has no such item.
        let removed_by_reshard =
            answered.is_some_and(|t| tl.config_at(job, t).is_some_and(|c| c.count <= item));
        // Or no assignment had the item (a count change added it), so the reshard the change
        // asked for owed it the catch-up of this fire (section 2), and that reshard came once
        // a count change had removed the item again: no assignment ever has the item to run it
        // (1 × 3 `chaos` 2,916,928,559: the count from 3 to 4 at 41 s, the fire of 45 s run
        // under the old assignment at 46 s, the count back to 3 at 49.7 s, the reshard at 50 s).
        let removed_before_its_reshard = owners.is_empty()
            && facts
                .next_assignment_after(job, at)
                .is_some_and(|t| tl.config_at(job, t).is_some_and(|c| c.count <= item));
        if removed_by_reshard
            || removed_before_its_reshard
            || handled_at.is_some_and(|t| {
                tl.config_at(job, t).is_some_and(|c| c.count <= item)
                    || tl.item_disabled_now(job, item, t)
            })
        {
            acc.add("exempt: item removed or disabled while the fire waited");
            return;
        }
        if owners.is_empty() {
            let anyone_up = (1..=tl.down.len()).any(|w| tl.not_up(w, at).is_none());
            if !anyone_up {
                acc.add("lost: no instance alive");
                return;
            }
        }
        // The config change that made this fire had not reached its owner yet (a slow link:
        // it applied the change only after the fire's time, not restarted meanwhile, and within
        // the session timeout plus 15 s of it), which ran the schedule it knew (GUARANTEES.md,
        // section 2; chaos 1,012,580,706 at 10 × 10: a cron change reached a leader of ten
        // jobs on a 1 s link 9 s late). An owner that never applies it (a watch event lost,
        // the planted bug `DropWatchEvent`) is not excused.
        let unseen_change = self.changed_at.is_some_and(|from| {
            let seen_by = from.saturating_add(tl.session_ms).saturating_add(15_000);
            !answering.is_empty()
                && answering.iter().all(|&w| {
                    let applied = facts.configs_applied.get(&(self.job.to_owned(), w));
                    let applied_at = applied.and_then(|l| l.iter().copied().find(|&t| t >= from));
                    // Up all along, or back in a new session of the same process (a session
                    // that ended while it was cut off: it registers again over the same slow
                    // link; 1 × 3 `failover` 200,204,689: a cron change in the millisecond its
                    // session ended, applied 2.3 s after it was back, over a 1 s link).
                    let restarted = tl.went_down(w, from - 1, at + 1).is_some_and(|(_, why)| {
                        why.contains("crashed") || why.contains("stop") || why.contains("start")
                    });
                    applied_at.is_some_and(|t| t > at && t <= seen_by) && !restarted
                })
        });
        if unseen_change {
            acc.add("exempt: config change not seen yet by the owner");
            return;
        }
        let who = if owners.is_empty() {
            "no instance owned it".to_owned()
        } else {
            let list: Vec<String> = owners.iter().map(|w| format!("i{w}")).collect();
            format!("its owner {} was up", list.join("/"))
        };
        out.push(Violation {
            invariant: Invariant::Fires,
            at,
            message: format!(
                "fire +{at} of {job}#{item} neither ran nor was recorded with a reason ({who})"
            ),
            context: context(entries, index_at(entries, at.max(0) + 1), Some(job)),
        });
    }
}

/// A skip reason without its variable details, for the accounting.
fn reason_class(r: &SkipReason) -> String {
    match r {
        SkipReason::ClockSkew { .. } => "clock-skew".into(),
        SkipReason::RegistryError(_) => "registry-error".into(),
        other => reason(other),
    }
}

/// A down reason without its times, for the accounting.
fn why_class(why: &str) -> &str {
    for class in [
        "crashed",
        "stopping",
        "stopped",
        "cut off",
        "session",
        "clock",
        "not started",
        "start failed",
    ] {
        if why.contains(class) {
            return class;
        }
    }
    "down"
}
