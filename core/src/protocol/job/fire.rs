//! Handling a fire: the checks, the reshard at fire time (the leader commits it, followers wait
//! for it on the view), the start transaction, the launch, and the misfire of a fire that came
//! while items still ran.

use super::{Action, Ctx, InFlight, JobProtocol, Launch, LaunchId, Next, Pending, Reply, Request};
use crate::events::{FireKind, SchedulerEvent, SkipReason};
use crate::layout::{GuaranteeStage, ItemNode, JobNode};
use crate::protocol::execution::{self, Held, Start, StartOf, StartPlan};
use crate::protocol::failover;
use crate::protocol::records::Ledger;
use crate::protocol::sharding::{self, Reshard, ReshardStart};
use crate::registry::{RegistryError, TxnOp};
use crate::sharding::Assignment;

/// The fire being handled.
#[derive(Debug, Clone)]
pub(super) struct FireState {
    pub fire_ms: i64,
    pub kind: FireKind,
    only: Option<Vec<u32>>,
    /// The time whose reshard must be done before the fire runs: the fire's own for scheduled
    /// and manual fires; when it was queued, for a catch-up (which runs under the current
    /// assignment: its markers follow the items to their new owners).
    sharded_by: i64,
    skew_checked: bool,
    /// Until when the fire waits for the reshard (set when the wait begins).
    sharding_deadline: Option<i64>,
    /// A decision lost a race: wait for the view to move past this revision, at most until
    /// the time given, then decide again.
    catch_up: Option<(u64, i64)>,
    /// What the fire waits for now, if anything: the deadline to arm.
    waiting_until: Option<i64>,
    /// The start found an item still running: it is a misfire here.
    misfired: bool,
    /// The reshard flag the misfire marks were tied to went: mark our own items instead.
    flag_gone: bool,
    races: u32,
    /// The assignment of the reshard commit outstanding, reported once committed.
    pending_assignment: Option<Assignment>,
    /// The `sharding` directory was ensured (the view may not show it yet).
    sharding_ensured: bool,
    /// A catch-up's items that answer another fire than `fire_ms`.
    item_fires: Vec<(u32, i64)>,
}

impl FireState {
    fn new(fire_ms: i64, kind: FireKind, only: Option<Vec<u32>>, now_ms: i64) -> Self {
        // A scheduled fire waits for the reshards asked for before its time. A catch-up, and a
        // manual run (which has no time of its own: it comes after whatever the view shows,
        // a flag raised in the same millisecond too), wait for any asked for by now (a
        // catch-up also for those asked for before the fires its markers name, in `decide`).
        let sharded_by = match kind {
            FireKind::Misfire => now_ms,
            FireKind::Manual => now_ms.saturating_add(1),
            _ => fire_ms,
        };
        FireState {
            fire_ms,
            kind,
            only,
            sharded_by,
            skew_checked: false,
            sharding_deadline: None,
            catch_up: None,
            waiting_until: None,
            misfired: false,
            flag_gone: false,
            races: 0,
            pending_assignment: None,
            sharding_ensured: false,
            item_fires: Vec::new(),
        }
    }

    pub fn deadline(&self) -> Option<i64> {
        self.waiting_until
    }
}

/// The fire request outstanding (`NoItems`: the checks behind a skip for want of items).
#[derive(Debug)]
pub(super) enum Step {
    Skew,
    EnsureSharding,
    Reshard { seen: u64 },
    Start { plan: StartPlan, seen: u64 },
    NoItems { seen: u64 },
    Misfire { flagged: bool, seen: u64 },
}

/// What to do with the fire being handled.
enum Decision {
    Skip(SkipReason),
    Wait(i64),
    Ask(Step, Request),
    Launch(Vec<u32>),
    /// Handled with no request and no skip (a manual trigger kept for later).
    Drop,
}

/// How many lost races (a raced reshard, a start that found the assignment replaced, a misfire
/// mark on a view behind) a fire takes before it gives up with `ShardingTimeout`.
const RACES: u32 = 8;

/// How long fires wait at most for the owner nodes and the record of the assignment, which one
/// reshard transaction writes, to agree on this instance's items (see
/// `JobProtocol::assignment_unsettled`), counted from when the view first showed them
/// disagree; after it the owner nodes decide, as they always did.
const SETTLE_MS: i64 = 3_000;

/// How soon a catch-up skipped because this clock was off is tried again (its clock compared
/// again): one request per job that owes a catch-up, while the clock stays off.
const CLOCK_RECHECK_MS: i64 = 2_000;

impl JobProtocol {
    pub(super) fn fire_next(&mut self, ctx: &Ctx<'_>) -> Next {
        if self.fire.is_none() {
            let Some((fire_ms, kind, only)) = self.due.pop_front() else { return Next::Idle };
            self.fire = Some(Box::new(FireState::new(fire_ms, kind, only, ctx.now_ms)));
        }
        let Some(mut f) = self.fire.take() else { return Next::Idle };
        f.waiting_until = None;
        match self.decide(&mut f, ctx) {
            Decision::Skip(reason) => {
                if f.kind == FireKind::Misfire {
                    // The catch-up stays owed (its markers stay): tried again once the view
                    // changes, not in a loop.
                    self.catch_up_blocked = Some(ctx.view.revision());
                    if !self.catch_up_skip_news(&reason) {
                        return Next::Again;
                    }
                }
                self.skip_fire(f.fire_ms, f.kind, reason);
                Next::Again
            }
            Decision::Drop => Next::Again,
            Decision::Wait(until) => {
                f.waiting_until = Some(until);
                self.fire = Some(f);
                Next::Idle
            }
            Decision::Ask(step, request) => {
                self.fire = Some(f);
                Next::Request(Pending::Fire(step), request)
            }
            Decision::Launch(items) => {
                if f.kind == FireKind::Misfire {
                    if let Some(seldom) = self.seldom_if() {
                        seldom.catch_up_skip_said = None;
                    }
                }
                self.launch(f.fire_ms, f.kind, &items, f.item_fires.clone(), Vec::new(), ctx);
                Next::Again
            }
        }
    }

    fn decide(&mut self, f: &mut FireState, ctx: &Ctx<'_>) -> Decision {
        let view = ctx.view;
        // The clock went back since the fire fell due (an NTP step, while it waited): run now,
        // it would run before its time, and again where its time is right. It is armed again
        // for its time.
        if f.kind == FireKind::Scheduled && f.fire_ms > ctx.now_ms {
            if self.armed_fire.is_none_or(|armed| armed > f.fire_ms) {
                self.arm_after(f.fire_ms - 1, ctx);
            }
            return Decision::Drop;
        }
        if let Some(reason) = self.refusal(ctx) {
            return Decision::Skip(reason);
        }
        // Before anything is written for the fire (a misfire marker too): a clock too far off
        // would mark a fire that is not due yet.
        if !f.skew_checked && self.config.max_time_diff().is_some() {
            return Decision::Ask(Step::Skew, Request::RegistryTime);
        }
        // A scheduled fire handled only once the next one fell due (it waited for a reshard)
        // is superseded by it: run now, it would run partly under an assignment made after its
        // time. Recorded late, not misfired (even while a run of ours goes on): the departure
        // of an instance that owned items at it counts it among the fires that instance
        // missed, and a misfire marker would have it run twice.
        if f.kind == FireKind::Scheduled && self.superseded(f.fire_ms, ctx.now_ms) {
            return Decision::Skip(SkipReason::Late);
        }
        // The assignment in view answers a flag raised at or after the fire's time: the fire
        // was due under the one before it (section 2 of GUARANTEES.md), and the items this
        // one gives us may have been others' at the fire, who ran it. Recorded late: handled
        // after that reshard (a slow link, a busy runner, a flag raise of ours), the fire
        // cannot tell which of its items ran (chaos 581,923,572 and default 1,669,791,129
        // at 5 x 3 ran one twice; chaos 581,922,831 left one unrecorded, as a misfire after
        // the reshard marked only the items it gave us).
        if f.kind == FireKind::Scheduled
            && failover::assigned_since(view, &self.paths).is_some_and(|a| a >= f.fire_ms)
        {
            return Decision::Skip(SkipReason::Late);
        }
        if self.in_flight.is_some() || f.misfired {
            if f.kind == FireKind::Manual && !f.misfired {
                // A trigger while this instance runs: it runs once the run ends.
                self.manual_pending = true;
                return Decision::Drop;
            }
            if f.kind == FireKind::Misfire {
                // The catch-up cannot start (an item still runs somewhere): its markers stay,
                // and it is tried again once the view changes.
                self.catch_up_blocked = Some(view.revision());
                return Decision::Drop;
            }
            // As ElasticJob: every item this instance owns owes the skipped fire one catch-up.
            return self.misfire(f, ctx);
        }
        if let Some((seen, until)) = f.catch_up {
            if view.revision() <= seen && ctx.now_ms < until {
                return Decision::Wait(until);
            }
            f.catch_up = None;
        }
        // A catch-up runs the items the view gives it now (the markers follow the items to
        // their new owners), each for the fire its marker names: it waits for the reshards
        // asked for before the latest of those fires, as that fire would, and not only for
        // those asked for by when it was queued. One queued before a flag was raised, and held
        // by round trips over a slow link, once ran items whose markers named a fire after
        // that flag (a busy instance marks every item with a reshard pending); the reshard then
        // gave them to others, who ran the fire as scheduled (5 x 3 chaos seed 1,173,065,998).
        // (Read once: the view is the same down to the launch below.)
        let owed = (f.kind == FireKind::Misfire).then(|| {
            let items = self.my_items(ctx);
            self.owed_catch_up(&items, ctx)
        });
        if let Some(Some(owed)) = &owed {
            f.sharded_by = f.sharded_by.max(owed.fire_ms);
        }
        // A flag that holds no fire (a raise of a change the last reshard answered, committed
        // late): the leader raises it again now, for the fires to come.
        // Without a flag up neither holds: most fires look no further.
        let flag_up = self.flag_up(view);
        if flag_up && self.is_leader(ctx) && sharding::stale_for(view, &self.paths, f.sharded_by) {
            self.owe_flag(true);
        }
        let waits_for_reshard = if flag_up {
            sharding::pending_for(view, &self.paths, f.sharded_by) || self.first_reshard_asked(view)
        } else {
            self.never_sharded(ctx)
        };
        if waits_for_reshard {
            let deadline =
                *f.sharding_deadline.get_or_insert(ctx.now_ms + self.settings.sharding_timeout_ms);
            if ctx.now_ms >= deadline || f.races >= RACES {
                return Decision::Skip(SkipReason::ShardingTimeout);
            }
            // Followers wait for the leader's commit (a leaderless job gets its bid first).
            if !self.is_leader(ctx) || sharding::any_running(view, &self.paths) {
                return Decision::Wait(deadline);
            }
            if !view.exists(&self.paths.sharding()) && !f.sharding_ensured {
                return Decision::Ask(Step::EnsureSharding, Request::Ensure(self.paths.sharding()));
            }
            match ReshardStart::from_view(view, &self.paths, &self.me) {
                Ok(start) => {
                    // The commit removes the flag and rewrites every owner node and the
                    // record of the assignments: garbage in them is reported now or never
                    // (the view may show garbage whose change this job has not handled yet).
                    let owners =
                        start.existing.keys().map(|&n| JobNode::Item(n, ItemNode::Instance));
                    let flag_and_record = [JobNode::ShardingNecessary, JobNode::Assigned];
                    for node in flag_and_record.into_iter().chain(owners) {
                        if let Some(g) =
                            crate::protocol::garbage::unreadable(view, &self.paths, &node)
                        {
                            self.report_once(&g, ctx);
                        }
                    }
                    // And an owner emptied below the count (what a reshard writes beyond it),
                    // unless the count grew since the record's reshard and the item is new (2
                    // instances, `garbage` seed 3,305,731,981 of a job file: an owner node
                    // emptied while a reshard was pending, its change still queued behind the
                    // fire that made the reshard, which wrote over it).
                    for g in self.emptied_owners(&start, ctx) {
                        self.report_once(&g, ctx);
                    }
                    let plan = sharding::plan(
                        view,
                        &self.paths,
                        self.job(),
                        self.config.job_sharding_strategy_type.as_deref(),
                        &self.settings.strategies,
                        self.total(),
                        &start,
                    );
                    return match plan {
                        Ok(mut plan) => {
                            plan.ops.extend(self.owed_on_reshard(
                                &plan.assignment,
                                f.sharded_by,
                                ctx,
                            ));
                            // Fenced on the config it was computed with: a count or strategy
                            // changed meanwhile (a leader just back from a partition sees the
                            // change only after its first fire) fails it, and it is computed
                            // again on the view that shows the change.
                            if let Some(version) = self.config_version {
                                plan.ops.push(TxnOp::check(self.paths.config(), Some(version)));
                            }
                            f.pending_assignment = Some(plan.assignment);
                            Decision::Ask(
                                Step::Reshard { seen: view.revision() },
                                Request::Txn(plan.ops),
                            )
                        }
                        Err(e) => {
                            let job = self.job().to_owned();
                            self.emit(SchedulerEvent::Error { job, message: e.to_string() });
                            Decision::Skip(SkipReason::ShardingTimeout)
                        }
                    };
                }
                Err(Reshard::NotLeader) => return Decision::Wait(deadline),
                // Only `processing` (a legacy or foreign flag) holds the fire: wait it out.
                Err(_) => return Decision::Wait(deadline),
            }
        }
        // The fire waited for a reshard: a clock compared when it came says nothing of a jump
        // since, and the clock decides below whether a later fire superseded it (two clocks
        // that disagree would have it run here and be counted missed elsewhere).
        if f.sharding_deadline.take().is_some() && self.config.max_time_diff().is_some() {
            return Decision::Ask(Step::Skew, Request::RegistryTime);
        }
        let mut items = self.my_items(ctx);
        // One reshard transaction writes the owner nodes and the record of the assignment: a
        // view in which they disagree on this instance's items shows one before the other.
        // etcd delivers the events of a watch it has to catch up after later events of the
        // stream's other watches, so an owner node's change can come seconds after the flag's
        // removal (the simulator's `lag` profile, 3 × 2 seed 3,804,968,304: an owner that saw
        // the reshard done but not its new item ran the fire without it, and nobody ran it).
        // The fire waits for them to agree, a while at most: garbage written into an owner
        // node or a lost event disagrees for good, and the owner nodes decide then, as they
        // always did.
        if owed.is_none() && self.assignment_unsettled(&items, ctx) {
            // Counted from when the view first showed them disagree: while its shape stays,
            // the fires after it (one that waited may be overtaken by the next, and skipped as
            // late) wait only for what is left.
            let shape = view.shape_revision_of(self.paths.root());
            let until = match self.settling {
                Some((seen, until)) if seen == shape => until,
                _ => {
                    let until = ctx.now_ms + SETTLE_MS;
                    self.settling = Some((shape, until));
                    until
                }
            };
            if ctx.now_ms < until {
                return Decision::Wait(until);
            }
        }
        if let Some(owed) = owed {
            // A catch-up is decided under the current assignment: the misfire markers follow
            // the items to their new owners, so which items owe one (and the fire they owe)
            // is read now, not when the catch-up was queued.
            let Some(owed) = owed else {
                if let Some(seldom) = self.seldom_if() {
                    seldom.catch_up_skip_said = None;
                }
                return Decision::Drop;
            };
            f.fire_ms = owed.fire_ms;
            f.item_fires = owed.item_fires;
            items = owed.items;
        }
        if let Some(only) = &f.only {
            items.retain(|n| only.contains(n));
        }
        if items.is_empty() {
            // Fenced as a start is (`execution::no_items_fence`): a reshard pending unseen may
            // give this instance items at this very fire.
            if f.races >= RACES {
                return Decision::Skip(SkipReason::ShardingTimeout);
            }
            return match execution::no_items_fence(view, &self.paths, self.settings.fence_absent) {
                Some(ops) => {
                    Decision::Ask(Step::NoItems { seen: view.revision() }, Request::Txn(ops))
                }
                None => Decision::Skip(SkipReason::NoItems),
            };
        }
        // Without monitorExecution nothing marks a run, but a catch-up still settles the
        // misfire markers it answers (kept, they would run it again after every run), and so
        // does a run of the very fire a marker owes: an owner busy when the fire came, with a
        // reshard pending, marks every item, and the new owner that runs the fire on time
        // would catch it up again after (3 × 3 `failover`, a job with monitorExecution off,
        // seed 1,167,590,455: a#1's fire of 76 s run twice by its new owner).
        // Where a view can lag behind a marker (`fence_absent`), only a transaction that
        // checks the markers' absence knows none owes the fire.
        if !self.config.monitor_execution
            && f.kind != FireKind::Misfire
            && !self.settings.fence_absent
            && !self.marker_owes_fire(&items, f.fire_ms, view)
        {
            return Decision::Launch(items);
        }
        if f.races >= RACES {
            return Decision::Skip(SkipReason::ShardingTimeout);
        }
        let ledger = self.ledger_for_write(ctx);
        let start = StartOf {
            me: &self.me,
            items: &items,
            fire_ms: f.fire_ms,
            persistent: self.failover_enabled(),
            check_owners: true,
            catch_up: f.kind == FireKind::Misfire,
            mark_running: self.config.monitor_execution,
            item_fires: &f.item_fires,
            fence_absent: self.settings.fence_absent,
        };
        let (ops, plan) = execution::start(view, &self.paths, start, ledger.as_ref());
        Decision::Ask(Step::Start { plan, seen: view.revision() }, Request::Txn(ops))
    }

    /// Whether a misfire marker on one of `items` (ours) owes the fire at `fire_ms`. Every fire
    /// of a job without monitorExecution asks: the idle look's memo that none of our items has
    /// a marker at this shape (`no_misfires`) answers without a lookup per item.
    fn marker_owes_fire(
        &self,
        items: &[u32],
        fire_ms: i64,
        view: &crate::protocol::view::View,
    ) -> bool {
        let shape = (view.shape_revision_of(self.paths.root()), self.total());
        if self.no_misfires == Some(shape) {
            return false;
        }
        items.iter().any(|&n| {
            execution::misfire_mark(view, &self.paths, n)
                .is_some_and(|(_, owed)| owed == Some(fire_ms))
        })
    }

    /// What a reshard owes beyond the assignment, with failover and misfire on (the ledgers
    /// say who started which fire): the catch-ups of the items it moves away from an owner
    /// that missed its last fire, and the record of from when on the new assignment applies.
    /// The job's first reshard is asked for, whenever: before it nobody owns an item, so no
    /// instance ran a fire under an earlier assignment, and every fire waits for it (1 × 3
    /// `chaos` seed 2,588,539,946: the first raise, over a slow link, was moved past the fire
    /// it was written at; the only instance found no items and recorded `NoItems`).
    fn first_reshard_asked(&self, view: &crate::protocol::view::View) -> bool {
        sharding::flag_time(view, &self.paths).is_some()
            && sharding::unassigned(view, &self.paths, self.total())
    }

    /// No flag up, and no item has an owner: the job's first reshard (or the one that gives
    /// every item an owner again) has not been made, and its flag went (garbage or a hand
    /// deleted it, with no leader up to ask again). Nobody can run the fire before that
    /// reshard, so it waits for the one the leader asks for, as it waits for a flag (3 × 2
    /// `garbage` seed 532,648,578: the leader crashed before the first fire, the flag was
    /// deleted while the fire waited, and both survivors recorded `NoItems` for an item that
    /// nobody owned, which the next leader's reshard gave them). Read only when this instance
    /// owns nothing: most fires look no further.
    fn never_sharded(&self, ctx: &Ctx<'_>) -> bool {
        self.my_items(ctx).is_empty() && sharding::unassigned(ctx.view, &self.paths, self.total())
    }

    fn owed_on_reshard(
        &self,
        assignment: &Assignment,
        sharded_by: i64,
        ctx: &Ctx<'_>,
    ) -> Vec<TxnOp> {
        let mut owed = failover::OwedOnReshard::default();
        // The items no owner had at a fire that a raise committed late let run under the old
        // assignment are owed with misfire on, failover or not: no ledger is read for them
        // (1 × 3 `chaos` seed 2,765,115,485: a count grown from 5 to 8 over a 1 s link,
        // failover turned off before the reshard, and the fire between left items 5 to 7
        // unrun and unrecorded).
        if let (Some(schedule), true) = (&self.schedule, self.config.misfire) {
            let ledgers = self.failover_enabled() && ctx.view.exists(&self.paths.ledgers());
            owed = failover::owed_on_reshard(
                ctx.view,
                &self.paths,
                assignment,
                self.total(),
                schedule,
                ctx.now_ms,
                ledgers,
            );
        }
        // Recorded whatever the config once the record's directory is there (failover was on
        // once): who owned what for which fire is read by a fire handled late too (its
        // misfire), and a record left stale while failover was off would speak for
        // assignments made since.
        let record = self.paths.assigned();
        let parent_there =
            record.rsplit_once('/').is_some_and(|(parent, _)| ctx.view.exists(parent));
        if parent_there {
            let unknown_raise = sharded_by - 1;
            let caught_up = std::mem::take(&mut owed.catch_ups);
            let record = failover::record_assigned(
                ctx.view,
                &self.paths,
                assignment,
                unknown_raise,
                ctx.now_ms,
                caught_up,
                self.failover_enabled() && self.config.misfire,
            );
            owed.ops.push(record);
        }
        owed.ops
    }

    /// Our ledger as the view shows it, when failover keeps one (garbage reads as empty and is
    /// rewritten by the next write).
    pub(super) fn ledger_for_write(&mut self, ctx: &Ctx<'_>) -> Option<Ledger> {
        if !self.failover_enabled() {
            return None;
        }
        Some(match execution::ledger_of(ctx.view, &self.paths, &self.me) {
            None => Ledger::default(),
            Some(Ok(ledger)) => ledger,
            Some(Err(garbage)) => {
                self.report_garbage(&garbage);
                Ledger::default()
            }
        })
    }

    /// The fire came while this instance still runs: with `misfire` on, its items owe one
    /// catch-up run for it.
    fn misfire(&mut self, f: &mut FireState, ctx: &Ctx<'_>) -> Decision {
        let view = ctx.view;
        if !self.config.misfire || f.kind != FireKind::Scheduled {
            return Decision::Skip(SkipReason::Misfire);
        }
        if f.races >= RACES {
            return Decision::Skip(SkipReason::Misfire);
        }
        if let Some((seen, until)) = f.catch_up {
            if view.revision() <= seen && ctx.now_ms < until {
                return Decision::Wait(until);
            }
            f.catch_up = None;
        }
        // With a reshard pending for this fire, the others run it under an assignment not
        // made yet (it waits for our items to end): every item owes the catch-up, and whoever
        // runs the fire for an item settles its marker (see `execution::start`). That holds
        // only while the flag does; once the reshard committed, the new assignment says which
        // items are ours.
        // (Neither flag shows in most fires: the cached facts say so without a lookup.)
        let flag = if self.flag_up(view) {
            [self.paths.sharding_necessary(), self.paths.sharding_processing()]
                .into_iter()
                .find(|p| view.exists(p))
                .filter(|_| !f.flag_gone && sharding::pending_for(view, &self.paths, f.fire_ms))
        } else {
            None
        };
        let candidates: Vec<u32> = match &flag {
            Some(_) => (0..self.total())
                .filter(|&n| view.exists(&self.paths.item(n)))
                .filter(|&n| !execution::item_disabled(view, &self.paths, n))
                .collect(),
            // A fire handled late, after a reshard committed since it fell due: the items the
            // reshard gave us were another's for that fire (it ran them, or its own misses are
            // owed): the record of the assignments says whose they were.
            None => {
                let record = failover::assigned_record(view, &self.paths);
                self.my_items(ctx)
                    .into_iter()
                    .filter(|&n| match record.as_ref().and_then(|r| r.owner_at(n, f.fire_ms)) {
                        Some(owner) => owner == Some(&*self.me),
                        None => true,
                    })
                    .collect()
            }
        };
        // Items the run in flight runs for this very fire (a catch-up started by another
        // instance's marks before the fire reached us) owe it nothing. Its items, not the
        // markers it holds: without monitorExecution it holds none (one instance, `chaos`
        // seed 2,536,971,420 of a job file with such a job: the fire, due again as the
        // registration ended, found its own run in flight, marked every item, and the
        // catch-up ran it twice).
        let items: Vec<u32> = match self.in_flight.as_ref() {
            Some(flight) => candidates
                .into_iter()
                .filter(|&n| {
                    super::io::fire_of(&flight.item_fires, n, flight.fire_ms) != f.fire_ms
                        || !flight.items.contains(&n)
                })
                .collect(),
            None => candidates,
        };
        if items.is_empty() {
            return Decision::Skip(SkipReason::Misfire);
        }
        let mut ops =
            execution::mark_misfire(view, &self.paths, &items, f.fire_ms, flag.as_deref());
        // With a ledger, the fire is accounted for in it, as a start's is: the markers owe its
        // catch-up. A reshard that moves our items away judges by the ledger whether we left
        // the last fire unrun, and a failover run of that fire (claimed from an earlier
        // session's marker, which settled this marker) would otherwise be owed again (2 × 1
        // `chaos` seed 936,424,240: ran twice).
        if let Some(mut ledger) = self.ledger_for_write(ctx) {
            if ledger.last_fire_ms.is_none_or(|last| last < f.fire_ms) {
                ledger.last_fire_ms = Some(f.fire_ms);
                ops.push(execution::write_ledger(ctx.view, &self.paths, &self.me, &ledger));
            }
        }
        let step = Step::Misfire { flagged: flag.is_some(), seen: ctx.view.revision() };
        Decision::Ask(step, Request::Txn(ops))
    }

    /// Whether the record of the assignment, read, gives this instance an enabled item that
    /// its owner nodes do not (`items`: see `decide`). Not the other way round: an item its
    /// owner node gives it and the record does not is fenced by the start transaction's check
    /// of that owner node, which a reshard rewrites. Read once per shape of the view (the
    /// record, the owner nodes and the `disabled` markers are no execution records): every
    /// scheduled fire asks, and the record is up to 17 assignments long.
    fn assignment_unsettled(&mut self, items: &[u32], ctx: &Ctx<'_>) -> bool {
        let at = (ctx.view.shape_revision_of(self.paths.root()), self.total());
        if let Some((seen, unsettled)) = self.assignment_checked {
            if seen == at {
                return unsettled;
            }
        }
        let unsettled = failover::read_assigned(ctx.view, &self.paths).is_some_and(|record| {
            record.owners.iter().filter(|&(&n, owner)| n < at.1 && owner.trim() == &*self.me).any(
                |(&n, _)| {
                    !items.contains(&n) && !execution::item_disabled(ctx.view, &self.paths, n)
                },
            )
        });
        self.assignment_checked = Some((at, unsettled));
        unsettled
    }

    /// The enabled items this instance owns, ascending.
    pub(super) fn my_items(&self, ctx: &Ctx<'_>) -> Vec<u32> {
        self.cached_items(ctx.view, || {
            sharding::items_of(ctx.view, &self.paths, &self.me, self.total())
                .into_iter()
                .filter(|&n| !execution::item_disabled(ctx.view, &self.paths, n))
                .collect()
        })
    }

    pub(super) fn on_fire_reply(
        &mut self,
        step: Step,
        result: Result<Reply, RegistryError>,
        ctx: &Ctx<'_>,
    ) {
        let Some(mut f) = self.fire.take() else { return };
        let race_pause = ctx.now_ms + self.settings.catch_up_ms;
        match (step, result) {
            (Step::Skew, Ok(Reply::Time(registry_ms))) => {
                let diff_ms = ctx.now_ms - registry_ms;
                if !self.clock_compared(registry_ms, ctx) {
                    self.fire_skipped(&f, SkipReason::ClockSkew { diff_ms }, ctx);
                    return;
                }
                f.skew_checked = true;
            }
            (Step::EnsureSharding, Ok(_) | Err(RegistryError::NodeExists { .. })) => {
                f.sharding_ensured = true;
            }
            (Step::Reshard { .. }, Ok(_)) => {
                if let Some(assignment) = f.pending_assignment.take() {
                    self.emit_sharded(&assignment);
                }
                // Our own reshard's record comes back as no change: what a reshard seen late
                // owes a registration that just ended (`late_reshard`) is settled now.
                self.late_reshard(ctx);
            }
            (Step::Reshard { seen }, Err(e)) if sharding::is_flag_race(&e) => {
                // The config is gone (deleted by hand, maybe before this instance led: the
                // leader of the time was cut off and never wrote it again): every reshard is
                // fenced on it, so it is written again first.
                if matches!(e.transaction_failure(), Some((_, RegistryError::NoNode { path, .. })) if *path == self.paths.config())
                {
                    self.check_config(ctx);
                }
                // Let the view catch up with whatever moved, then compute again.
                f.races += 1;
                f.pending_assignment = None;
                f.catch_up = Some((seen, race_pause));
            }
            (Step::Start { plan, .. }, Ok(_)) => {
                let Start::Marked(marked) = plan.marked() else { return };
                let items: Vec<u32> = marked.iter().map(|&(n, _)| n).collect();
                let held = marked
                    .iter()
                    .filter(|_| plan.marks_running)
                    .map(|&(item, version)| Held { item, version, failed_over: false })
                    .collect();
                self.launch(f.fire_ms, f.kind, &items, f.item_fires.clone(), held, ctx);
                return;
            }
            (Step::Start { plan, seen }, Err(e)) => match plan.outcome(&e) {
                // A failover taker (or an earlier fire) still runs one of our items: it is a
                // misfire here too.
                Some(Start::AlreadyRunning(_)) => f.misfired = true,
                // The leader resharded and our view has not shown it yet: wait for it, then
                // decide again under the new assignment.
                Some(Start::Reassigned(_)) => {
                    f.races += 1;
                    f.catch_up = Some((seen, race_pause));
                }
                _ => {
                    self.fire_skipped(&f, SkipReason::RegistryError(e.to_string()), ctx);
                    return;
                }
            },
            (Step::NoItems { .. }, Ok(_)) => {
                self.fire_skipped(&f, SkipReason::NoItems, ctx);
                return;
            }
            // A raise came since the view: decided again once the view shows it.
            (Step::NoItems { seen }, Err(e)) if failover::is_lost_race(&e) => {
                f.races += 1;
                f.catch_up = Some((seen, race_pause));
            }
            (Step::Misfire { .. }, Ok(_)) => {
                // Marked: its catch-up runs it. A clock set back does not bring it round again
                // (3 × 2 `chaos` seed 1,321,827,857 over 300 s: marked, caught up, then the
                // clock went 8 s back, and the fire ran again as scheduled once it got there).
                self.last_scheduled_start = self.last_scheduled_start.max(Some(f.fire_ms));
                self.fire_skipped(&f, SkipReason::Misfire, ctx);
                return;
            }
            (Step::Misfire { flagged, seen }, Err(e)) => match e.transaction_failure() {
                // The flag went: the reshard committed, and the new assignment says whose items
                // owe the catch-up.
                Some((0, RegistryError::NoNode { .. })) if flagged => {
                    f.flag_gone = true;
                    f.catch_up = Some((seen, race_pause));
                }
                // The view was behind on a marker (or on our ledger).
                Some((
                    _,
                    RegistryError::NoNode { .. }
                    | RegistryError::NodeExists { .. }
                    | RegistryError::BadVersion { .. },
                )) => {
                    f.races += 1;
                    f.catch_up = Some((seen, race_pause));
                }
                _ => {
                    self.fire_skipped(&f, SkipReason::RegistryError(e.to_string()), ctx);
                    return;
                }
            },
            (_, Err(e)) => {
                self.fire_skipped(&f, SkipReason::RegistryError(e.to_string()), ctx);
                return;
            }
            (_, Ok(_)) => {}
        }
        self.fire = Some(f);
    }

    /// Records the fire being handled as skipped (see [`Self::fire_next`] for catch-ups).
    fn fire_skipped(&mut self, f: &FireState, reason: SkipReason, ctx: &Ctx<'_>) {
        if f.kind == FireKind::Misfire {
            self.catch_up_blocked = Some(ctx.view.revision());
            // A clock found off is compared again by the catch-up's next try: nothing in the
            // view need change when the clock is set right, and the fires that would compare
            // it may be far off (3 × 1 `chaos` seed 4,053,787,595: a clock 20 s ahead, set
            // right, compared again only at fires its skewed clock had armed 20 s out; the
            // job was removed first, the catch-up unrun).
            if matches!(reason, SkipReason::ClockSkew { .. }) {
                self.seldom_mut().catch_up_retry_ms = Some(ctx.now_ms + CLOCK_RECHECK_MS);
            }
            if !self.catch_up_skip_news(&reason) {
                return;
            }
        }
        self.skip_fire(f.fire_ms, f.kind, reason);
    }

    /// Whether a held-back catch-up's skip for `reason` is news: not when the skip recorded
    /// last for the debt it still owes had the same reason. A clock off once recorded a
    /// `ClockSkew` skip of "now" at every change of the view (five in one millisecond at a
    /// registration), and another every 2 s, for the one catch-up it held back.
    fn catch_up_skip_news(&mut self, reason: &SkipReason) -> bool {
        let kind = std::mem::discriminant(reason);
        self.seldom_mut().catch_up_skip_said.replace(kind) != Some(kind)
    }

    fn emit_sharded(&mut self, assignment: &Assignment) {
        let assignment =
            assignment.iter().map(|(i, items)| (i.to_owned(), items.to_vec())).collect();
        let job = self.job().to_owned();
        self.emit(SchedulerEvent::Sharded { job, assignment });
    }

    /// Runs `items` of the fire at `fire_ms` now (those in `item_fires` answer the fire given
    /// there), holding `held` markers.
    pub(super) fn launch(
        &mut self,
        fire_ms: i64,
        kind: FireKind,
        items: &[u32],
        item_fires: Vec<(u32, i64)>,
        held: Vec<Held>,
        ctx: &Ctx<'_>,
    ) {
        let id = LaunchId(self.launches);
        self.launches += 1;
        if kind == FireKind::Scheduled {
            self.last_scheduled_start = self.last_scheduled_start.max(Some(fire_ms));
        }
        let mut with_tokens = Vec::with_capacity(items.len());
        for &item in items {
            // The fencing token: the version of the item's owner node, which every change of
            // owner (a reshard commit, a failover claim) advances.
            let token = ctx
                .view
                .get(&self.paths.item_node(item, ItemNode::Instance))
                .map_or(0, |n| n.version);
            let job = self.job().to_owned();
            let fire_ms = super::io::fire_of(&item_fires, item, fire_ms);
            self.emit(SchedulerEvent::ItemStarted { job, item, fire_ms, kind, token });
            with_tokens.push((item, token));
        }
        self.in_flight = Some(Box::new(InFlight {
            launch: id,
            fire_ms,
            item_fires: item_fires.clone(),
            items: items.to_vec(),
            held,
            cancelled: false,
        }));
        let launch = Launch { id, fire_ms, kind, items: with_tokens, item_fires };
        self.actions.push(Action::Launch(launch));
        self.record_once(GuaranteeStage::Started, fire_ms, items);
    }
}
