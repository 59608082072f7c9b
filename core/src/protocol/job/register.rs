//! Registration: on start and after every new session, the instance puts its nodes in the
//! registry, queues what an earlier session of it left, asks for a reshard and bids for
//! leadership.

use super::{Ctx, JobProtocol, Next, Pending, RaceFence, Reply, Request};
use crate::events::{FireKind, SkipReason};
use crate::protocol::execution::{ledger_of, running_owner};
use crate::protocol::failover::{self, Orphan};
use crate::protocol::records::{Ledger, Orphaned};
use crate::protocol::sharding;
use crate::protocol::view::View;
use crate::registry::{CreateMode, RegistryError, TxnOp};

/// The most overtaken fires a registration that waited for the job's first reshard records
/// `Late` (a registration of minutes under a cron of every second; the records say the same
/// thing of each).
const MAX_OVERTAKEN_RECORDED: usize = 1_000;

/// How far registration got.
#[derive(Debug, Default)]
pub(super) struct Registration {
    state: State,
    /// Whether this is the process's first registration of the job (a restart of the same
    /// instance id may find what its previous process left).
    first: bool,
    /// `sessions_lost` when the instance node was last written.
    instance_in: Option<u64>,
    /// How the next write of the instance node goes: a replace when a node is (or was found)
    /// at our path, a create otherwise. Decided by the last reply, not by the view alone,
    /// which may be behind on the old node's deletion.
    replace: Option<bool>,
    /// Writes of the instance node that lost a race since the last success.
    attempts: u32,
    /// What an earlier session left is queued (by us, or by the survivors first).
    leftovers_done: bool,
    /// Nodes this registration created or found existing, which the view may not show yet:
    /// asked for again, they would loop until the watch caught up.
    ensured: Vec<String>,
    /// The last fire our ledger said an earlier process started, read before this process
    /// first wrote the ledger: the leftovers rewrite it to the fires they queue, which would
    /// hide from [`JobProtocol::resume`] that a reshard came after our last start.
    started_before: Option<Option<i64>>,
    /// When this process's first registration began (before its instance node was written):
    /// a new instance's items are those of assignments made since.
    began_ms: Option<i64>,
    /// A registration after the first (a lost session's), or a first one that found our
    /// ledger (a restart's, whose leftovers queued what an earlier process missed): the fire
    /// path handles fires after this time only, even after the clock is set back.
    pub(super) rearmed_after: Option<i64>,
    /// The leftovers counted our missed fires by the registry's time, up to this time (our
    /// clock was off): the fire path takes over after it.
    counted_until: Option<i64>,
    /// This registration said that the clock is off.
    clock_reported: bool,
    /// When this process's first registration ended, the view showed no owner node: the job's
    /// first reshard was still to come, and every fire since the job was added waited for it
    /// (see `late_reshard`).
    unassigned: bool,
    /// When the job was added to this process (before its config was published).
    added_ms: Option<i64>,
    /// The last time this process's first registration, without a ledger, saw the job with
    /// no owner node (its first reshard still to come), in a view that covered them.
    saw_unassigned: Option<i64>,
    /// The leftovers' transaction lost a race: decided again once the view moved past the
    /// revision it was decided on, a bounded number of times (`leftovers_attempts`).
    leftovers_race: RaceFence,
    leftovers_attempts: u32,
}

#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
enum State {
    /// Not asked to register yet (before `Start`).
    #[default]
    Idle,
    Registering,
    Done,
}

/// The registration request outstanding.
#[derive(Debug, Clone, Copy)]
pub(super) enum Step {
    Server,
    Instance,
    ReplaceInstance,
    /// Which of [`JobProtocol::directories`].
    Directory(usize),
    Leftovers,
}

/// Where a process's first registration hands over to its leftovers and its fire path
/// ([`JobProtocol::resume`]).
#[derive(Debug, Clone, Copy)]
struct Resume {
    /// Up to when the leftovers queue the fires this instance missed.
    until: i64,
    /// After when the fire path takes over.
    after: i64,
    /// A new instance given items by a reshard made while it registered: the fires after
    /// this time and before the one the fire path takes over were overtaken unrun.
    overtaken_since: Option<i64>,
}

impl Resume {
    fn window(until: i64, after: i64) -> Self {
        Resume { until, after, overtaken_since: None }
    }

    /// The fire path takes over with the fire at `fire_ms`.
    fn before(fire_ms: i64) -> Self {
        Resume::window(fire_ms - 1, fire_ms - 1)
    }
}

impl Registration {
    pub fn starting(added_ms: i64) -> Self {
        Registration {
            added_ms: Some(added_ms),
            state: State::Registering,
            first: true,
            instance_in: None,
            replace: None,
            attempts: 0,
            leftovers_done: false,
            ensured: Vec::new(),
            started_before: None,
            began_ms: None,
            rearmed_after: None,
            counted_until: None,
            clock_reported: false,
            unassigned: false,
            saw_unassigned: None,
            leftovers_race: RaceFence::default(),
            leftovers_attempts: 0,
        }
    }

    /// When the job was added to this process (or, not known, when registering began).
    fn added(&self) -> Option<i64> {
        self.added_ms.or(self.began_ms)
    }

    pub fn done(&self) -> bool {
        self.state != State::Registering
    }

    pub fn registered(&self) -> bool {
        self.state == State::Done
    }

    /// The session ended: register again once a new one is there.
    pub fn lost(&mut self) {
        if self.state == State::Done {
            self.state = State::Registering;
        }
        self.leftovers_done = false;
        self.leftovers_race = RaceFence::default();
        self.leftovers_attempts = 0;
        self.ensured.clear();
        self.began_ms = None;
    }

    /// Whether registration created or found `path` (which the view may not show yet).
    pub fn ensured(&self, path: &str) -> bool {
        self.ensured.iter().any(|p| p == path)
    }

    /// The view showed `path` deleted: registration's word on it is out of date.
    pub fn forget(&mut self, path: &str) {
        self.ensured.retain(|p| p != path);
    }

    /// Drops the paths the view shows now: its word on them is all that counts from then on
    /// (and a registered job would keep these few hundred bytes for its whole life).
    pub fn settle(&mut self, view: &View) {
        if self.ensured.is_empty() {
            return;
        }
        self.ensured.retain(|p| view.peek(p).is_none());
        if self.ensured.is_empty() {
            self.ensured = Vec::new();
        }
    }

    /// The `sessions_lost` reading of the last registration, if registered.
    pub fn registered_in(&self) -> Option<u64> {
        self.instance_in.filter(|_| self.state == State::Done)
    }
}

impl JobProtocol {
    pub(super) fn register_next(&mut self, ctx: &Ctx<'_>) -> Next {
        let view = ctx.view;
        // Back after a lost session: the view is what it was before the gap until the watch
        // resyncs, and what this registration decides by it (the config, failover on or off,
        // the leftovers to queue) may be stale by minutes. Wait for the resync, not forever.
        if let Some(deadline) = self.resync_owed {
            if ctx.now_ms < deadline {
                return Next::Idle;
            }
            self.resync_owed = None;
        }
        if self.registration.first && self.registration.started_before.is_none() {
            self.registration.started_before = Some(self.ledger_last_fire(ctx));
            self.registration.began_ms = Some(ctx.now_ms);
        }
        if self.registration.began_ms.is_none() {
            self.registration.began_ms = Some(ctx.now_ms);
        }
        self.note_unassigned(ctx);
        let server = self.paths.server(&self.ip);
        if !view.exists(&server) && !self.registration.ensured.contains(&server) {
            let request = Request::Create {
                path: server,
                data: b"ENABLED".to_vec(),
                mode: CreateMode::Persistent,
            };
            return Next::Request(Pending::Register(Step::Server), request);
        }
        let instance = self.paths.instance(&self.me);
        if self.registration.instance_in != Some(ctx.sessions_lost) {
            let data = self.instance_data();
            let replace = self.registration.replace.unwrap_or_else(|| view.exists(&instance));
            if replace {
                return Next::Request(
                    Pending::Register(Step::ReplaceInstance),
                    self.replace_instance(),
                );
            }
            let request = Request::Create { path: instance, data, mode: CreateMode::Ephemeral };
            return Next::Request(Pending::Register(Step::Instance), request);
        }
        if !self.failover_enabled() && !self.registration.leftovers_done {
            // Markers an earlier process of ours left with failover on (persistent): with
            // failover off nothing runs them again, and left in place they would hold every
            // reshard back for good (they name a live instance again). Only once the runs a
            // lost session left have returned.
            if self.in_flight.as_ref().is_some_and(|f| f.cancelled) {
                return Next::Idle;
            }
            self.registration.leftovers_done = true;
            let ops = self.stale_own_markers(ctx);
            if !ops.is_empty() {
                return Next::Request(Pending::Register(Step::Leftovers), Request::Txn(ops));
            }
        }
        if let Some(next) = self.ensure_directories(ctx) {
            return next;
        }
        if self.failover_enabled() {
            // Items a lost session left running are orphans once their code returned (the
            // cancellation asked it to): queue them only then, or a taker would run them
            // alongside.
            if self.in_flight.as_ref().is_some_and(|f| f.cancelled)
                || (!self.registration.leftovers_done
                    && self.registration.leftovers_race.holds(view.revision()))
            {
                return Next::Idle;
            }
            if let Some(ops) = self.leftovers(ctx).filter(|_| !self.registration.leftovers_done) {
                // The missed fires are counted by this clock (see `clock_unchecked`): compare
                // it first; too far off, count them by the registry's time instead (and say
                // so). Left unqueued, what an earlier process left would block its items for
                // good: its markers name this instance, live again.
                match self.clock_unchecked_now(ctx) {
                    Some(Some(next)) => return next,
                    Some(None) => {
                        if !std::mem::replace(&mut self.registration.clock_reported, true) {
                            let job = self.job().to_owned();
                            self.emit(crate::events::SchedulerEvent::Error {
                                job,
                                message: "this instance's clock is further off the registry's than maxTimeDiffSeconds allows: it skips its fires, and counts the fires it missed by the registry's time (fix the clock)".into(),
                            });
                        }
                        let registry_now =
                            Ctx { now_ms: ctx.now_ms + self.registry_offset_ms, ..*ctx };
                        self.registration.counted_until = Some(registry_now.now_ms);
                        match self.leftovers(&registry_now) {
                            Some(ops) => {
                                self.registration.leftovers_race.sent(view.revision());
                                let request = Request::Txn(ops);
                                return Next::Request(Pending::Register(Step::Leftovers), request);
                            }
                            None => self.registration.leftovers_done = true,
                        }
                    }
                    None => {
                        self.registration.leftovers_race.sent(view.revision());
                        return Next::Request(
                            Pending::Register(Step::Leftovers),
                            Request::Txn(ops),
                        );
                    }
                }
            }
        }
        // The version of the config this job runs with (what the leader's reshards are fenced
        // on), unless a change showed it already.
        if self.config_version.is_none() {
            let path = self.paths.config();
            // What the view replaced before now is no config this job was shown.
            self.config_log_seen = view.config_log_mark();
            let stored = view.get(&path).and_then(|node| {
                if self.runs_with_stored(&node.data) {
                    return Some(node.version);
                }
                let parsed = crate::config::store::parse_stored(
                    self.job(),
                    &node.data,
                    &self.settings.known,
                );
                parsed.ok().filter(|c| *c == self.config)?;
                self.config_stored = Some(crate::config::store::fingerprint(&node.data));
                Some(node.version)
            });
            self.config_version = stored;
        }
        let handover = self.resume(ctx);
        if let Some(since) = handover.overtaken_since {
            self.record_late_between(since, handover.after.saturating_add(1));
        }
        let mut resume = handover.after;
        // Fires up to when the leftovers counted our misses (by the registry's time) are
        // theirs: our clock, behind, would run them again once it is set right.
        let counted_until = self.registration.counted_until.take();
        if let Some(until) = counted_until {
            resume = resume.max(until);
        }
        // What the fire path holds back once the clock is set back: the fires up to `resume`
        // were the leftovers' or an earlier process's. With our clock off, the leftovers
        // counted by the registry's time, and an earlier process ran what its ledger says:
        // the fires after both, which a clock ahead put behind `resume`, are nobody's yet and
        // run at their time (3 × 1 `chaos` seed 4,053,787,595: a restart 20 s ahead, set
        // right 0.5 s later, recorded the fires of 72 to 84 s late at once, and nobody ran
        // its items' fires).
        let held_until = match counted_until {
            Some(until) => until.max(self.registration.started_before.flatten().unwrap_or(until)),
            None => resume,
        };
        if counted_until.is_some() {
            self.registration.rearmed_after = Some(held_until);
        }
        // Without a ledger only: a restart's leftovers counted its missed fires up to now (a
        // reshard shown late would have it run one of them twice).
        if self.registration.first && self.registration.started_before.flatten().is_none() {
            self.resume_window = Some(resume);
            self.registration.unassigned = sharding::unassigned(view, &self.paths, self.total());
            if !self.registration.unassigned {
                self.record_before_first_raise(ctx);
            }
        }
        if !self.registration.first {
            self.registration.rearmed_after = Some(held_until);
            self.hold_back_due(resume);
        }
        // A restart whose ledger said what an earlier process started: the fires up to
        // `resume` were that process's, or queued as missed by the leftovers. A clock set back
        // later re-arms them, and their timers are held back (`on_fire_due`) rather than run
        // again (1 × 5 `chaos` seed 3,885,147,064: the fire of 118 s, queued at the restart at
        // 118.4 s and re-run, ran again as scheduled once the clock, set back 8 s, was set
        // right).
        if self.registration.first && self.registration.started_before.flatten().is_some() {
            self.registration.rearmed_after = Some(held_until);
        }
        self.registration.state = State::Done;
        self.registration.first = false;
        self.members = view.children(&self.paths.instances()).into_iter().collect();
        self.unhandled_departures(ctx);
        self.membership_changed = true;
        self.owe_flag(!self.static_assignment(ctx));
        // A bid at every registration, whatever the view shows: the view may not show yet
        // that the leader's node went with its session.
        self.bid_owed = true;
        self.audit_owed = true;
        self.audit_wide = true;
        self.arm_after(resume, ctx);
        self.arm_reconcile(ctx);
        Next::Again
    }

    /// Departures nobody handled: instances whose ledger is left while their instance node is
    /// gone. Handling a departure queues what it left and removes its ledger (a graceful stop
    /// removes its own), so these went while no survivor was up to see them go (all were
    /// restarting, say): each instance that registers handles them as if it had seen them go,
    /// or their items would wait for good (chaos seed 3,896,834,009). A lost race with another
    /// survivor costs one failed transaction.
    fn unhandled_departures(&mut self, ctx: &Ctx<'_>) {
        if !self.failover_enabled() {
            return;
        }
        let left: Vec<String> = ctx
            .view
            .children(&self.paths.ledgers())
            .into_iter()
            .filter(|id| *id != *self.me && !self.members.contains(id))
            .collect();
        self.departed.extend(left);
    }

    /// For a process's first registration: up to when its leftovers queue the fires it missed
    /// (for anyone to claim), and after when its fire path takes over. Normally both are now.
    /// But a fire that fell due after a pending reshard was raised runs under the assignment
    /// that reshard makes (the instances that were up wait for it to run their share), and a
    /// fire under an assignment made since this process last started may be of items it did
    /// not have before: the latest such fire that it did not start is handled by its fire
    /// path (a restart or a new instance would miss it otherwise); the misses before it are
    /// the leftovers'.
    fn resume(&self, ctx: &Ctx<'_>) -> Resume {
        let now = Resume::window(ctx.now_ms, ctx.now_ms);
        let latest_after =
            |after: i64| self.schedule.as_ref().and_then(|s| s.last_in(after, ctx.now_ms));
        if !self.registration.first {
            // Back in a new session: a reshard made since this registration began that gives
            // us items (the one our node asked for) counted on us for the fires after it, due
            // while we were not registered yet; the latest is ours (chaos seed 1,181,518,338,
            // a slow link: it was run by nobody, and recorded by nobody).
            // The fires of it before the latest were overtaken while we registered: nobody else
            // runs them, and they are recorded late (3 × 2 `lease` seed 2,601,737,418: over a
            // 1 s link, a registration in a new session began at 93.7 s and ended at 99.7 s;
            // the fire of 96 s, under a cron changed meanwhile, overtaken by that of 98 s, was
            // run and recorded by nobody).
            return match self.reshard_since_registering(ctx).filter(|&r| r < ctx.now_ms) {
                Some(made) => latest_after(made).map_or(now, |fire| Resume {
                    overtaken_since: Some(made),
                    ..Resume::before(fire)
                }),
                None => now,
            };
        }
        let started = match self.registration.started_before {
            Some(before) => before,
            None => self.ledger_last_fire(ctx),
        };
        // A flag raised this very millisecond (or later, by a clock ahead) holds no fire due
        // by now: those answer to the assignment made before it, below. (It once returned
        // at once, and a restart in the millisecond of a fire left that fire unrun when a
        // reshard made in the same millisecond had given it the item.)
        let pending = sharding::flag_time(ctx.view, &self.paths).flatten();
        if let Some(raised) = pending.filter(|&raised| raised < ctx.now_ms) {
            // The fires between the raise and the latest one were superseded while they
            // waited (the instances that waited record them late): ours among them were
            // missed, for the leftovers; the latest one still waits, for the fire path.
            // Without a ledger, the mark the record of the assignments keeps for us says the
            // same (a graceful leave moves the ledger's there): a raise that committed late,
            // stamped before a fire our earlier process ran under the old assignment, does not
            // make that fire ours to run again (2 × 4 `chaos` seed 4,293,980,107: a restart
            // ran the fire of 109 s again, the raise stamped 108.3 s committed at 109.3 s).
            let accounted =
                started.or_else(|| failover::departed_mark(ctx.view, &self.paths, &self.me));
            let after = accounted.map_or(raised, |s| s.max(raised));
            return match latest_after(after) {
                Some(fire) => Resume::before(fire),
                None => Resume::window(raised, ctx.now_ms),
            };
        }
        // No reshard pending: a restart whose ledger says what it started, after a reshard
        // made since; or a new instance, after a reshard that gave it items (made after its
        // node appeared, whenever the flag it answered was raised: the fires since that raise
        // waited for it).
        let since = match started {
            Some(started) => failover::assigned_since(ctx.view, &self.paths)
                .filter(|&r| r >= started && r < ctx.now_ms),
            None => self.reshard_since_registering(ctx).filter(|&r| r < ctx.now_ms),
        };
        match since.and_then(|since| Some((since, latest_after(since)?))) {
            // A new instance: the fires of that assignment before the latest fell to it while
            // it was not registered yet, and the latest overtook them. Nobody ran them (the
            // others waited for the reshard and ran the items it left them), nobody recorded
            // them, and no ledger counts them among its misses: they are late, as the fire
            // path records a fire handled once the next one fell due (chaos 5 × 3 seed
            // 2,363,014,749: a job added while an instance was on a 1 s link; its instance
            // node asked for a reshard that gave it two items 2 s before its registration
            // ended, in the millisecond of a fire).
            Some((since, fire)) if started.is_none() => {
                Resume { overtaken_since: Some(since), ..Resume::before(fire) }
            }
            Some((_, fire)) => Resume::before(fire),
            // After a restart, a fire due in this very millisecond is the fire path's, as it
            // is every other instance's that is up now. Counted among the misses, it would be
            // owed to the catch-up of an earlier fire that a misfire marker already owes, and
            // that catch-up may start in this same millisecond, before the fire it should
            // answer (chaos seed 506,685,038). (A new instance owns no items yet.)
            None => match started {
                Some(started) => {
                    let before_now = (ctx.now_ms - 1).max(started);
                    Resume::window(before_now, before_now)
                }
                None => now,
            },
        }
    }

    /// The view shows a reshard only now that gave this instance (without a ledger) items
    /// before its fire path took over: the latest fire it answers before then is ours, and
    /// nobody else runs our items of it. Handled now, unless a later fire came first (then it
    /// is recorded as late).
    pub(super) fn late_reshard(&mut self, ctx: &Ctx<'_>) {
        let Some(from) = self.resume_window else { return };
        let Some(made) = self.reshard_since_registering(ctx) else { return };
        // The job's first reshard: nobody owned an item before it, so every fire since the job
        // was added waited for it, whenever its flag was raised (a registration over a slow
        // link raises the job's first flag only as it ends). Those a later one
        // overtook are late (chaos seed 1,918,618,267 at 2 × 4: a job added while one
        // instance was cut off and the other took 7 s to register; nobody recorded the two
        // fires due meanwhile).
        let first = self.registration.unassigned;
        let made = match self.registration.added().filter(|_| first) {
            Some(added) => made.min(added),
            None => made,
        };
        // A fire in the very millisecond this registration began is ours too when the flag
        // this reshard answered was raised before it: the fire waited for the reshard (the
        // others ran their items of it under that reshard), and our fire path took over
        // after it (3 × 1 `chaos` seed 4,047,597,926: a restart at 120 s, the reshard made
        // that millisecond gave it two items, and nobody ran them for the fire of 120 s).
        let raised_before_began = self
            .reshard_raise_since_registering(ctx)
            .is_some_and(|(raised, began)| raised < began && made == began);
        let after = if raised_before_began { made - 1 } else { made };
        if after >= from {
            return;
        }
        self.resume_window = None;
        let Some(schedule) = self.schedule.as_ref() else { return };
        let Some(fire) = schedule.last_in(after, from) else { return };
        let late = schedule.next_after(from).is_some_and(|next| next <= ctx.now_ms);
        if first {
            self.record_late_between(made, fire);
        }
        if late {
            self.skip(fire, SkipReason::Late);
        } else {
            self.enqueue(fire, FireKind::Scheduled, None);
        }
    }

    /// The fire path takes over with the fire at `fire_ms`, no reshard seen since this
    /// registration ended at `from`, when nobody owned an item then (the job's first reshard
    /// still to come): every fire since the job was added waited for that reshard, and this
    /// one overtook them. They are late; with nobody owning an item, this instance's record
    /// is the record for all of them (GUARANTEES.md, section 2; chaos seed 1,918,618,267 at
    /// 2 × 4: a job added while one instance was cut off and the other took 7 s to register,
    /// and nobody recorded the two fires due meanwhile).
    pub(super) fn record_overtaken_before_first_reshard(&mut self, from: i64, fire_ms: i64) {
        if let Some(added) = self.registration.added().filter(|_| self.registration.unassigned) {
            self.record_late_between(added, fire_ms.min(from.saturating_add(1)));
        }
    }

    /// Notes that this first registration (without a ledger) sees the job with no owner node,
    /// in a view that covers them: its first reshard is still to come.
    fn note_unassigned(&mut self, ctx: &Ctx<'_>) {
        let registration = &self.registration;
        if !registration.first || registration.started_before.flatten().is_some() {
            return;
        }
        let total = self.total();
        let view = ctx.view;
        if total > 0
            && view.covers(&self.paths.item_node(0, crate::layout::ItemNode::Instance))
            && self.scope_ready(view)
            && sharding::unassigned(view, &self.paths, total)
        {
            self.registration.saw_unassigned = Some(ctx.now_ms);
        }
    }

    /// The job's first reshard was made while this first registration went on (it saw no
    /// owner node, and ends with one): every fire since the job was added to us and before
    /// that reshard's raise waited for it, and nobody could own an item to run it. Ours to
    /// record `Late`, as for a first reshard still to come when registration ends (2 × 2
    /// `chaos` seed 1,793,358,948: a job added while our link took 1 s a request and the
    /// other instance was down; that one came back and made the first reshard as we finished
    /// registering, and the fire of 118 s, 2 s before its raise, was recorded by nobody).
    /// The raise is the earliest among the record's sections made since we saw no owner.
    fn record_before_first_raise(&mut self, ctx: &Ctx<'_>) {
        let (Some(seen), Some(added)) =
            (self.registration.saw_unassigned, self.registration.added())
        else {
            return;
        };
        let Some(record) = failover::read_assigned(ctx.view, &self.paths) else { return };
        let sections = std::iter::once((record.raised_ms, record.made_ms))
            .chain(record.earlier.iter().map(|s| (s.raised_ms, s.made_ms)));
        let first_raise = sections
            .filter(|(_, made)| made.is_some_and(|m| m >= seen))
            .map(|(raised, _)| raised)
            .min();
        if let Some(raised) = first_raise {
            self.record_late_between(added, raised);
        }
    }

    /// Records `Late` every fire after `after` and before `before` (at most
    /// `MAX_OVERTAKEN_RECORDED`).
    fn record_late_between(&mut self, after: i64, before: i64) {
        let overtaken: Vec<i64> = self.schedule.as_ref().map_or_else(Vec::new, |schedule| {
            let between = schedule.iter_after(after).take_while(|&t| t < before);
            between.take(MAX_OVERTAKEN_RECORDED).collect()
        });
        for fire in overtaken {
            self.skip(fire, SkipReason::Late);
        }
    }

    /// For an instance without a ledger (new, or restarted without one), or back in a new
    /// session: from when on the recorded reshard's assignment is ours to answer, if it gives
    /// us items. The fires since its flag's raise waited for it, but only those since this
    /// registration began: a restart without a ledger may have run earlier ones before it
    /// went down (an old record names it too), and a session ran its own fires until it was
    /// lost.
    ///
    /// From the earliest of the reshards made since then, one after the other up to the last,
    /// that each gave us items: a view that shows the last only late (a slow link) would
    /// otherwise pass over the fires of the ones before (2 × 3 `chaos` seed 2,649,193,502
    /// with 6 s sessions: a reshard made at a fire gave us items while we registered, another
    /// made 2 s later gave us the same, and nobody ran or recorded that fire).
    fn reshard_since_registering(&self, ctx: &Ctx<'_>) -> Option<i64> {
        self.reshard_raise_since_registering(ctx).map(|(raised, began)| raised.max(began))
    }

    /// [`Self::reshard_since_registering`]'s raise time, and when this registration began.
    fn reshard_raise_since_registering(&self, ctx: &Ctx<'_>) -> Option<(i64, i64)> {
        let began = self.registration.began_ms?;
        let record = failover::read_assigned(ctx.view, &self.paths)?;
        let ours = |owners: &crate::protocol::records::Owners| {
            owners.values().any(|owner| *owner == *self.me)
        };
        if !ours(&record.owners) {
            return None;
        }
        let earlier = record
            .earlier
            .iter()
            .take_while(|section| {
                section.made_ms.is_some_and(|made| made >= began) && ours(&section.owners)
            })
            .last()
            .map(|section| section.raised_ms);
        Some((earlier.unwrap_or(record.raised_ms), began))
    }

    fn ledger_last_fire(&self, ctx: &Ctx<'_>) -> Option<i64> {
        match ledger_of(ctx.view, &self.paths, &self.me) {
            Some(Ok(ledger)) => ledger.last_fire_ms,
            _ => None,
        }
    }

    pub(super) fn instance_data(&self) -> Vec<u8> {
        crate::protocol::records::InstanceRecord {
            job_instance_id: self.me.to_string(),
            server_ip: self.ip.to_string(),
        }
        .encode()
        .into_bytes()
    }

    /// Our node from a session that is not gone yet (this process restarted, or the watch has
    /// not shown its expiry yet), or a twin: replace it.
    fn replace_instance(&self) -> Request {
        let path = self.paths.instance(&self.me);
        Request::Txn(vec![
            TxnOp::delete(path.clone(), None),
            TxnOp::create(path, self.instance_data(), CreateMode::Ephemeral),
        ])
    }

    /// What an earlier session of this instance left (items it was running, marked with our
    /// id but not held by this process; and after a restart, with `misfire` on, the fires it
    /// missed since its last one), as the transaction that queues it and rewrites our ledger.
    /// The survivors cannot tell: our instance node never went away for them.
    fn leftovers(&mut self, ctx: &Ctx<'_>) -> Option<Vec<TxnOp>> {
        let stored = ledger_of(ctx.view, &self.paths, &self.me);
        let (garbled, no_ledger) = (matches!(stored, Some(Err(_))), stored.is_none());
        let ledger = match stored {
            None => Ledger::default(),
            Some(Ok(ledger)) => ledger,
            Some(Err(garbage)) => {
                self.report_once(&garbage, ctx);
                // It does not say which fires we started: ours owe the latest one due (a run
                // may repeat; none is lost).
                Ledger { last_fire_ms: Some(ctx.now_ms - super::DAY_MS), ..Ledger::default() }
            }
        };
        let held: Vec<u32> = self.held_items();
        let owned = if garbled {
            sharding::items_of(ctx.view, &self.paths, &self.me, self.total())
        } else {
            Vec::new()
        };
        // Runs started while failover was off (their markers are ephemeral, and nothing
        // recorded them) are not failed over, even with failover on since (GUARANTEES.md,
        // section 2): their markers, which the lost session's end removes anyway, go now, so
        // that no later fire of their items waits for them. Queued, such a run was given the
        // latest fire due, which is another owner's to run (chaos 1,130,952,448 ran it twice).
        let mut unfailed: Vec<TxnOp> = Vec::new();
        let mut orphans: Vec<Orphan> = (0..self.total())
            .filter(|n| !held.contains(n))
            .filter(|&n| {
                let marker = self.paths.item_node(n, crate::layout::ItemNode::Running);
                let Some(node) = ctx.view.get(&marker) else { return true };
                let started_with_failover_off = node.ephemeral
                    && !ledger.running.contains_key(&n)
                    && node.text().trim() == &*self.me;
                if started_with_failover_off {
                    unfailed.push(TxnOp::delete(marker, Some(node.version)));
                }
                !started_with_failover_off
            })
            .filter(|&n| {
                // Ours, or garbage over a marker our ledger says we held (an earlier session
                // of ours could not rewrite it before it ended); with our ledger garbage too,
                // over a marker of an item we own (as a departure reads it: `left_by`).
                let marker = self.paths.item_node(n, crate::layout::ItemNode::Running);
                let marker_garbled = ctx.view.get(&marker).is_some_and(|m| {
                    !crate::protocol::garbage::names_live(ctx.view, &self.paths, &m.data)
                }) && (ledger.running.contains_key(&n)
                    || (garbled && owned.contains(&n)));
                marker_garbled
                    || running_owner(ctx.view, &self.paths, n).as_deref() == Some(&*self.me)
            })
            .map(|item| Orphan {
                item,
                // Unrecorded (started while failover was off, or garbage): the latest fire
                // before this registration, which the earlier process started; the fire due
                // in this very millisecond is the fire path's (`resume`).
                fire_ms: ledger
                    .running
                    .get(&item)
                    .copied()
                    .unwrap_or_else(|| self.latest_fire_by(ctx.now_ms - 1)),
                rank: 0,
                why: Orphaned::Interrupted,
            })
            .collect();
        // (2 × 1 `garbage` seed 517,347,409: an expired session's marker garbled, queued by
        // the next session of the same process, reported by nobody.)
        self.report_garbled_markers(&orphans, ctx);
        let mut last_fire = ledger.last_fire_ms;
        // Without a ledger, the mark the record of the assignments keeps for us says from when
        // on the fires of our items were ours: a reshard gave our earlier process items before
        // its ledger was written (its registration's write on its way), and it went down; the
        // survivors never saw it leave, since we came back under its id before its session
        // ended (3 x 2 `chaos` seed 693,228,483: on a 1 s link, given two items at 100 s, it
        // crashed at 101.2 s with its ledger unwritten, came back at 108.4 s, and the reshard
        // that followed gave the items back: the fire of 100 s was run by nobody, owed by
        // nobody).
        // Counted from that mark, the fire of this very millisecond is the fire path's, as after
        // a restart with a ledger (counted here too, it ran twice: 4 x 2 `lease` seed
        // 1,968,784,869 over 300 s, a restart after a graceful leave, in a fire's millisecond);
        // and the count is fenced on the record that keeps the mark: a survivor that handles
        // our earlier session's departure counts from it too, and moves it past what it queues
        // (2 x 4 `chaos` seed 3,868,854,197: counted by both, and run twice).
        let from_mark =
            no_ledger.then(|| failover::departed_mark(ctx.view, &self.paths, &self.me)).flatten();
        let since = ledger.last_fire_ms.or(from_mark);
        let mut record_fence = None;
        if let (true, true, Some(schedule), Some(since)) =
            (self.registration.first, self.config.misfire, &self.schedule, since)
        {
            // Interrupted items stay in: a later fire they missed is owed as a misfire. (Not
            // after garbage: their fire is the latest one due already.)
            let mut skip: Vec<u32> = held.clone();
            if garbled {
                skip.extend(orphans.iter().map(|o| o.item));
            }
            let total = self.total();
            // Fires under the current (or the pending) assignment are handled when registered.
            let mut until = self.resume(ctx).until;
            if from_mark.is_some() {
                until = until.min(ctx.now_ms - 1);
            }
            let missed = failover::missed_since(
                ctx.view,
                &self.paths,
                &self.me,
                total,
                schedule,
                since,
                until,
                &skip,
            );
            if let Some(fire) = missed.first().map(|o| o.fire_ms) {
                last_fire = Some(fire);
            }
            if from_mark.is_some() && !missed.is_empty() {
                let record = self.paths.assigned();
                record_fence = ctx.view.get(&record).map(|n| TxnOp::check(record, Some(n.version)));
            }
            orphans.extend(missed);
        }
        // With misfire on, the ledger says from when on our missed fires are owed: a crash
        // before our first fire must leave that mark too, or the survivors could not tell which
        // fires we missed (they queue the fires after it that we did not start).
        if garbled && last_fire == ledger.last_fire_ms {
            // Nothing was found missed since the made-up time: what is owed starts now.
            last_fire = None;
        }
        let mark_owed = (self.config.misfire || garbled) && last_fire.is_none();
        if mark_owed {
            last_fire = Some(ctx.now_ms - 1);
        }
        for (rank, orphan) in orphans.iter_mut().enumerate() {
            orphan.rank = rank as u64;
        }
        let mut ops =
            failover::queue(ctx.view, &self.paths, &self.me, &orphans, self.total(), None);
        // `queue` removes a departed instance's ledger and notes its leaving in the record of
        // the assignments; ours stays, without the queued items, and we did not leave.
        let (ledger_path, record) = (self.paths.ledger(&self.me), self.paths.assigned());
        ops.retain(|op| op.path() != ledger_path && op.path() != record);
        ops.extend(record_fence);
        ops.extend(unfailed);
        if ops.is_empty() && !mark_owed {
            return None;
        }
        let mut next = ledger.clone();
        for orphan in &orphans {
            next.running.remove(&orphan.item);
        }
        next.last_fire_ms = last_fire;
        ops.push(crate::protocol::execution::write_ledger(ctx.view, &self.paths, &self.me, &next));
        Some(ops)
    }

    /// The directories failover needs, in the order registration ensures them.
    /// The deletes of the `running` markers naming us on items we do not hold (a run that
    /// ended unrecorded, with failover on): with failover off nothing runs them again, and
    /// left in place they would hold every reshard back for good (they name a live instance).
    /// Items beyond the count too (both callers watch the job whole): a count reduced while
    /// such runs were out leaves their markers there, and once it grows back they hold every
    /// reshard back just the same (1 × 3 `chaos` seed 3,825,525,871: a partition, the count
    /// cut from 5 to 2 and failover turned off while it lasted; grown back to 5, the job ran
    /// nothing more).
    pub(super) fn stale_own_markers(&self, ctx: &Ctx<'_>) -> Vec<TxnOp> {
        let held = self.held_items();
        let mut items: Vec<u32> = ctx
            .view
            .children(&self.paths.sharding())
            .iter()
            .filter_map(|name| name.parse().ok())
            .collect();
        items.sort_unstable();
        items
            .into_iter()
            .filter(|n| !held.contains(n))
            .filter_map(|n| {
                let path = self.paths.item_node(n, crate::layout::ItemNode::Running);
                let node = ctx.view.get(&path)?;
                (node.text().trim() == &*self.me).then(|| TxnOp::delete(path, Some(node.version)))
            })
            .collect()
    }

    /// The deletes of our `failover` markers on items whose claimed run lost its `running`
    /// marker (see `stray_failover`), unless we hold the item again. Left in place, such a
    /// marker would fail every later claim of the item for as long as our session lives.
    pub(super) fn stray_failover_markers(&mut self, ctx: &Ctx<'_>) -> Vec<TxnOp> {
        let held = self.held_items();
        self.seldom_if()
            .map(|s| std::mem::take(&mut s.stray_failover))
            .unwrap_or_default()
            .into_iter()
            .filter(|n| !held.contains(n))
            .filter_map(|n| {
                let path = self.paths.item_node(n, crate::layout::ItemNode::Failover);
                let node = ctx.view.get(&path)?;
                (node.text().trim() == &*self.me).then(|| TxnOp::delete(path, Some(node.version)))
            })
            .collect()
    }

    /// The request that ensures the next directory failover needs, if one is missing.
    pub(super) fn ensure_directories(&self, ctx: &Ctx<'_>) -> Option<Next> {
        let (k, dir) =
            self.directories().into_iter().enumerate().find(|(_, dir)| {
                !ctx.view.exists(dir) && !self.registration.ensured.contains(dir)
            })?;
        Some(Next::Request(Pending::Register(Step::Directory(k)), Request::Ensure(dir)))
    }

    /// What registration ensures exists: the directories of the detail nodes, the flag's
    /// detail (see `protocol::detail`) and the flag's directory, and with failover on, the
    /// ledgers' and the queue's directories.
    pub(super) fn directories(&self) -> Vec<String> {
        let mut dirs = Vec::with_capacity(6);
        dirs.extend(self.paths.detail_dirs());
        dirs.push(self.paths.detail(crate::layout::Detailed::Flag));
        // The flag is raised in a transaction with its detail, which creates no parents.
        dirs.push(self.paths.leader_sharding());
        if self.failover_enabled() {
            dirs.extend([self.paths.ledgers(), self.paths.failover_items()]);
        }
        dirs
    }

    /// A write of the instance node lost a race: try the other way, a bounded number of times.
    fn instance_raced(&mut self, replace: bool) {
        self.registration.attempts += 1;
        self.registration.replace = Some(replace);
        if self.registration.attempts >= INSTANCE_ATTEMPTS {
            self.registration.attempts = 0;
            self.registration.replace = None;
            let e = RegistryError::Backend {
                backend: "shardcron",
                op: crate::registry::Op::Create,
                path: self.paths.instance(&self.me),
                message: "the instance node kept changing under this instance's writes; retried on the next event".into(),
                retryable: true,
                source: None,
            };
            self.failed(&e);
        }
    }

    /// Items whose markers this process holds (running, returned but not finished, claimed).
    pub(super) fn held_items(&self) -> Vec<u32> {
        self.held_item_iter().collect()
    }

    /// As [`Self::held_items`], without collecting them (`scope` asks at every step).
    pub(super) fn held_item_iter(&self) -> impl Iterator<Item = u32> + '_ {
        let flight = self.in_flight.iter().flat_map(|f| f.held.iter());
        let backlog = self.seldom().backlog.values().flatten();
        flight.chain(&self.finishing).chain(backlog).map(|h| h.item)
    }

    pub(super) fn on_register_reply(
        &mut self,
        step: Step,
        result: Result<Reply, RegistryError>,
        ctx: &Ctx<'_>,
    ) {
        match (step, result) {
            (Step::Instance | Step::ReplaceInstance, Ok(_)) => {
                self.registration.instance_in = Some(ctx.sessions_lost);
                self.registration.replace = None;
                self.registration.attempts = 0;
            }
            // Our old session's node, or a twin's, that the view did not show: replace it; or
            // the node went meanwhile (the old session ended): create it.
            (Step::Instance, Err(RegistryError::NodeExists { .. })) => self.instance_raced(true),
            (Step::ReplaceInstance, Err(e)) if failover::is_lost_race(&e) => {
                self.instance_raced(false)
            }
            (Step::Server, Ok(_) | Err(RegistryError::NodeExists { .. })) => {
                self.registration.ensured.push(self.paths.server(&self.ip));
            }
            (Step::Directory(k), Ok(_) | Err(RegistryError::NodeExists { .. })) => {
                self.registration.ensured.extend(self.directories().into_iter().nth(k));
            }
            // The survivors saw our node go and queued what our earlier session left first.
            // Queued in part by others meanwhile (survivors, or a departure of another
            // instance queuing the same item): decide again on the view that shows it, since
            // what was not queued yet is still owed.
            (Step::Leftovers, Err(e)) if failover::is_lost_race(&e) => {
                let r = &mut self.registration;
                r.leftovers_attempts += 1;
                r.leftovers_race.answered(true);
                if r.leftovers_attempts >= LEFTOVERS_ATTEMPTS {
                    r.leftovers_done = true;
                }
            }
            (Step::Leftovers, Ok(_)) => self.registration.leftovers_done = true,
            (_, Err(e)) => self.failed(&e),
        }
    }
}

/// How often the instance node's write is retried against races before waiting for an input.
const INSTANCE_ATTEMPTS: u32 = 8;
/// How often the leftovers are decided again after losing a race before they are left to the
/// survivors.
const LEFTOVERS_ATTEMPTS: u32 = 4;
