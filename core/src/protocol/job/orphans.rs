//! What items leave behind: finishing the markers of items that returned, queueing what a
//! departed instance left, claiming and running this instance's share of the failover queue,
//! and the misfire catch-up.

use std::collections::BTreeSet;

use super::{Ctx, JobProtocol, LaunchId, Next, Pending, Reply, Request};
use crate::events::{FireKind, SchedulerEvent, SkipReason};
use crate::job::{FireReport, ItemOutcome};
use crate::layout::GuaranteeStage;
use crate::protocol::execution::{self, Held};
use crate::protocol::failover::{self, Claim};
use crate::protocol::records::FailoverEntry;
use crate::protocol::sharding;
use crate::registry::RegistryError;

/// How many times a departure's queue may lose a race, each time with the view up to date,
/// before it is given up as a bug (a legitimate race is lost once: the winner's entries reach
/// the view, and the queue computed from it holds nothing more).
const QUEUE_TRIES: u32 = 3;

impl JobProtocol {
    /// Queues what the next departed instance left (failover on).
    pub(super) fn departure_next(&mut self, ctx: &Ctx<'_>) -> Option<Next> {
        let dead = self.departed.iter().next()?.clone();
        // Its queue lost a race the view did not show yet: tried again once the view moves on
        // (the winner's entries come with it, and the queue computed then is empty).
        if self
            .seldom()
            .queue_lost
            .as_ref()
            .is_some_and(|(d, at, _)| *d == dead && *at == ctx.view.revision())
        {
            return None;
        }
        // Back already (a new session or process of the same id): what it left is its own to
        // queue when it registers (its leftovers); queueing it here would hand a taker the
        // items of runs it has started since.
        if ctx.view.exists(&self.paths.instance(&dead)) {
            self.forget_departure(&dead);
            return Some(Next::Again);
        }
        // The missed fires are counted by this clock: one too far off (`maxTimeDiffSeconds`)
        // would queue fires not due yet, run early by a taker and again at their time.
        if let Some(next) = self.clock_unchecked(ctx) {
            return next;
        }
        if !ctx.view.exists(&self.paths.failover_items()) {
            return Some(Next::Request(
                Pending::Queue { dead: None },
                Request::Ensure(self.paths.failover_items()),
            ));
        }
        // Fires after the pending reshard's raise time run under the assignment it makes (they
        // wait for it, GUARANTEES.md section 2); the ones before were the dead instance's to
        // run, and it missed them. The fires a later one superseded while they waited are
        // answered by their owner under that assignment too: it records them late, or, if it
        // was down for them, counts them among its own missed fires when it comes back.
        // A fire due in this very millisecond is the fire path's, as on a restart: the dead
        // instance may be back under its id in this same millisecond, before this view shows
        // it, and take that fire itself (`chaos` seed 955,160,766 at 2 × 4: both ran it);
        // if it is not back, the reshard that moves its items away marks that fire misfired
        // for their new owners.
        let until = match sharding::flag_time(ctx.view, &self.paths) {
            Some(Some(raised)) => raised.min(ctx.now_ms - 1),
            _ => ctx.now_ms - 1,
        };
        let missed = match (self.config.misfire, &self.schedule) {
            (true, Some(schedule)) => Some((schedule, until)),
            _ => None,
        };
        let counted_until = missed.map(|(_, until)| until);
        let fallback = self.latest_fire_by(ctx.now_ms);
        let (orphans, garbage) =
            failover::left_by(ctx.view, &self.paths, &dead, self.total(), missed, fallback);
        if let Some(garbage) = garbage {
            self.report_garbage(&garbage);
        }
        self.report_garbled_markers(&orphans, ctx);
        let ops =
            failover::queue(ctx.view, &self.paths, &dead, &orphans, self.total(), counted_until);
        if ops.is_empty() {
            self.forget_departure(&dead);
            return Some(Next::Again);
        }
        let pending = Pending::Queue { dead: Some((dead, ctx.view.revision())) };
        Some(Next::Request(pending, Request::Txn(ops)))
    }

    /// With `maxTimeDiffSeconds` set, what to do before this clock may count fires: compare it
    /// with the registry's unless it was compared just now, wait while it was
    /// off; `None` once it is known good.
    pub(super) fn clock_unchecked(&self, ctx: &Ctx<'_>) -> Option<Option<Next>> {
        self.config.max_time_diff()?;
        match self.clock_checked {
            // Only a comparison made now vouches for the clock: one made a while ago says
            // nothing of a jump since (an NTP step, a VM resumed), and missed fires counted
            // by a clock that jumped ahead would run fires not due yet.
            Some((at, true)) if at == ctx.now_ms => None,
            // A negative age: the clock went back since (set right?): compared again.
            Some((at, false)) if (0..CLOCK_RECHECK_MS).contains(&(ctx.now_ms - at)) => Some(None),
            _ => Some(Some(Next::Request(Pending::SkewCheck, Request::RegistryTime))),
        }
    }

    /// As [`Self::clock_unchecked`], for counting by the registry's time when this clock is
    /// off: only a comparison made at this very instant says it is off, and by how much. A
    /// clock set back since an earlier reading found it off makes that reading look recent by
    /// its own count, and the missed fires counted by the offset it left would be counted
    /// 20 s or more in the past: a registration's ledger mark before fires the survivors had
    /// already queued, which the next reshard then owed again as a catch-up.
    pub(super) fn clock_unchecked_now(&self, ctx: &Ctx<'_>) -> Option<Option<Next>> {
        self.config.max_time_diff()?;
        match self.clock_checked {
            Some((at, true)) if at == ctx.now_ms => None,
            Some((at, false)) if at == ctx.now_ms => Some(None),
            _ => Some(Some(Next::Request(Pending::SkewCheck, Request::RegistryTime))),
        }
    }

    /// Records a comparison of this clock with the registry's time.
    pub(super) fn clock_compared(&mut self, registry_ms: i64, ctx: &Ctx<'_>) -> bool {
        let max_ms = self
            .config
            .max_time_diff()
            .map_or(i64::MAX, |m| i64::try_from(m.as_millis()).unwrap_or(i64::MAX));
        let ok = (ctx.now_ms - registry_ms).abs() <= max_ms;
        self.clock_checked = Some((ctx.now_ms, ok));
        self.registry_offset_ms = registry_ms - ctx.now_ms;
        // A leader whose clock is off skips every fire, and with them the reshards it owes:
        // it steps down (and bids no more while off) so that another instance leads.
        if !ok && self.is_leader(ctx) {
            self.abdicate_owed = true;
        }
        ok
    }

    pub(super) fn on_queue_reply(
        &mut self,
        dead: Option<(String, u64)>,
        result: Result<Reply, RegistryError>,
    ) {
        let Some((dead, computed_at)) = dead else {
            // The queue's parent node: ensured, or there already.
            match result {
                Err(e) if !(failover::is_lost_race(&e) || e.is_node_exists()) => self.failed(&e),
                _ => {}
            }
            return;
        };
        match result {
            Ok(_) => {}
            // Another survivor queued them first, or a taker claimed one already: queued again
            // from the view that shows it, which is then nothing, or what is left. A queue that
            // keeps failing with the view up to date is a bug (one once wrote a marker twice in
            // its transaction, refused whole every time, which left the items behind the dead
            // instance's markers for good): said, not hidden.
            Err(e) if failover::is_lost_race(&e) || e.is_node_exists() => {
                let tries = match &self.seldom().queue_lost {
                    Some((d, _, n)) if *d == dead => n + 1,
                    _ => 1,
                };
                if tries < QUEUE_TRIES {
                    // Tried again at once if the view moved on since the queue was computed.
                    self.seldom_mut().queue_lost = Some((dead, computed_at, tries));
                    return;
                }
                let job = self.job().to_owned();
                let message = format!(
                    "queueing the failover of what {dead} left lost {tries} races in a row, each \
                     retried once the registry's state had moved on ({e}); its items may wait \
                     until it comes back. If this keeps happening it is a bug in shardcron: \
                     please report it with this message"
                );
                self.emit(SchedulerEvent::Error { job, message });
            }
            Err(e) => {
                self.failed(&e);
                return;
            }
        }
        self.forget_departure(&dead);
    }

    /// Done with a departure: queued, nothing left to queue, or given up. Its lost races go
    /// with it (the same id may depart again later, and starts counting afresh).
    fn forget_departure(&mut self, dead: &str) {
        self.departed.remove(dead);
        if let Some(seldom) = self.seldom_if() {
            if seldom.queue_lost.as_ref().is_some_and(|(d, _, _)| d == dead) {
                seldom.queue_lost = None;
            }
        }
    }

    /// Removes the markers of items that returned, fenced: a marker a failover taker took
    /// over is no longer ours to remove.
    pub(super) fn finish_next(&mut self, ctx: &Ctx<'_>) -> Next {
        let ledger = self.ledger_for_write(ctx);
        let ops =
            execution::finish(ctx.view, &self.paths, &self.me, &self.finishing, ledger.as_ref());
        Next::Request(Pending::Finish(self.finishing.clone()), Request::Txn(ops))
    }

    pub(super) fn on_finish_reply(
        &mut self,
        held: Vec<Held>,
        result: Result<Reply, RegistryError>,
        ctx: &Ctx<'_>,
    ) {
        match result {
            Ok(_) => self.finishing.retain(|h| !held.contains(h)),
            Err(e) => match execution::lost_marker(&held, &e) {
                // Taken over (or gone with an ephemeral session): not ours any more.
                Some(i) => {
                    self.finishing.retain(|h| *h != held[i]);
                    if held[i].failed_over {
                        self.seldom_mut().stray_failover.insert(held[i].item);
                    }
                    // Unless garbage replaced it: then it is ours to remove (see `repair`).
                    self.seldom_mut().lost_markers.insert(held[i].item);
                    let node = crate::layout::JobNode::Item(
                        held[i].item,
                        crate::layout::ItemNode::Running,
                    );
                    self.notice_garbage(&node, ctx);
                }
                None => self.failed(&e),
            },
        }
    }

    /// The items of a launch returned.
    pub(super) fn on_done(&mut self, launch: LaunchId, report: FireReport, _ctx: &Ctx<'_>) {
        let Some(flight) = self.in_flight.take_if(|f| f.launch == launch) else { return };
        let fire_of = |item: u32| super::io::fire_of(&flight.item_fires, item, flight.fire_ms);
        for (&item, outcome) in &report.items {
            let ok = matches!(outcome, ItemOutcome::Completed);
            let job = self.job().to_owned();
            self.emit(SchedulerEvent::ItemFinished { job, item, fire_ms: fire_of(item), ok });
        }
        if let (Some(failure), Some(&item)) = (&report.raised, report.raised_items.first()) {
            let (job, error) = (self.job().to_owned(), failure.to_string());
            self.emit(SchedulerEvent::FireFailed { job, fire_ms: fire_of(item), item, error });
        }
        self.record_once(GuaranteeStage::Completed, flight.fire_ms, &report.completed_items());
        // Items whose code returned (well or not) ran: their markers go. Items cut short by a
        // cancellation (this instance lost them, or is stopping past its deadline) keep their
        // persistent markers: they are orphans for a taker to run again.
        let keep_cancelled = self.failover_enabled();
        for held in flight.held {
            let cancelled = flight.cancelled
                || matches!(report.items.get(&held.item), Some(ItemOutcome::Cancelled) | None);
            if !(keep_cancelled && cancelled) {
                self.finishing.push(held);
            }
        }
    }

    /// When nothing runs: failover work first (the older debt: a job that always overruns owes
    /// a catch-up after every run, which would starve an orphan for good), then the misfire
    /// catch-up, then a trigger that came while items ran.
    pub(super) fn idle_next(&mut self, ctx: &Ctx<'_>) -> Next {
        match self.refusal(ctx) {
            None => {}
            // A server disabled since it claimed re-runs still runs them (as ElasticJob's
            // executor runs its local failover items whatever the server's status), and takes
            // nothing new: their markers name it, and left unrun they would hold every reshard
            // back until it is enabled again (`chaos` seed 595,355,891 at 2 × 4: 27 s, every
            // fire of the job skipped late meanwhile).
            Some(SkipReason::ServerDisabled) => {
                return self.run_claimed(ctx).unwrap_or(Next::Idle);
            }
            Some(_) => return Next::Idle,
        }
        if let Some(next) = self.failover_next(ctx) {
            return next;
        }
        // A claim lost to a write the view does not show yet (the claimers of 3 × 2 `lease`
        // seed 1,389 met the reshard committed in the millisecond they became idle): the
        // re-run is the older debt, and a catch-up started now would hold it back a whole run
        // (25 s there). Decided again once the view shows the write, a watch round trip.
        if self.claim_behind && self.seldom().claim_race.holds(ctx.view.revision()) {
            return Next::Idle;
        }
        let retry_due = self.seldom().catch_up_retry_ms.is_some_and(|at| ctx.now_ms >= at);
        if self.config.misfire && (self.catch_up_blocked != Some(ctx.view.revision()) || retry_due)
        {
            if self.catch_up_owed_now(ctx) {
                if let Some(seldom) = self.seldom_if() {
                    seldom.catch_up_retry_ms = None;
                }
                self.enqueue(ctx.now_ms, FireKind::Misfire, None);
                return Next::Again;
            }
            // Nothing owed (run, or moved away): a catch-up held back later is news again.
            if let Some(seldom) = self.seldom_if() {
                seldom.catch_up_skip_said = None;
            }
        }
        if std::mem::take(&mut self.manual_pending) {
            self.enqueue(ctx.now_ms, FireKind::Manual, None);
            return Next::Again;
        }
        Next::Idle
    }

    /// Whether [`Self::owed_catch_up`] finds a catch-up owed by this instance's items. A "no"
    /// is remembered until the job's nodes in the view or its item count change: it reads
    /// nothing else (what it reports and the fire it names come only with a "yes"). Nothing
    /// is owed without a misfire marker on one of the items, and neither those markers nor
    /// the owner and `disabled` nodes are execution records: a "none" of those holds until
    /// the job's shape changes, whatever its fires write (every fire's end asks).
    fn catch_up_owed_now(&mut self, ctx: &Ctx<'_>) -> bool {
        let root = self.paths.root();
        let shape = (ctx.view.shape_revision_of(root), self.total());
        if self.no_misfires == Some(shape) {
            return false;
        }
        let key = (ctx.view.revision_of(root), self.total());
        if self.no_catch_up == Some(key) {
            return false;
        }
        let items = self.my_items(ctx);
        if execution::misfired(ctx.view, &self.paths, &items).is_empty() {
            self.no_misfires = Some(shape);
            return false;
        }
        let owed = self.owed_catch_up(&items, ctx).is_some();
        self.no_catch_up = (!owed).then_some(key);
        owed
    }

    /// Failover work: claiming this instance's share of the queue, then running what was
    /// claimed. Also while a fire waits for a reshard (nothing runs here then): a leader that
    /// crashed holds the reshard back until its session ends, and the orphans would wait
    /// with it, past the liveness bound (chaos seed 1,100,306,365).
    pub(super) fn failover_next(&mut self, ctx: &Ctx<'_>) -> Option<Next> {
        if self.failover_enabled() {
            if let Some(next) = self.claim_next(ctx) {
                return Some(next);
            }
        }
        self.run_claimed(ctx)
    }

    /// Runs the re-runs this instance claimed. Claimed runs are run even once failover is
    /// turned off: the claims took their entries and wrote markers naming us, which, left
    /// unrun, would hold every reshard back for good (chaos seed 3,303,087,331).
    ///
    /// Every re-run claimed goes in one launch, each item answering its own fire (the
    /// earliest is the launch's, the others are its `item_fires`): one launch per fire ran
    /// them one after the other, and the re-run of a later fire waited a whole run of the
    /// earlier one's items while nobody else could take it (`lease` seed 2,611,186,689 at
    /// 2 × 2: a claimer of two entries started the second 15 s after the first, past the
    /// failover bound of section 4).
    fn run_claimed(&mut self, ctx: &Ctx<'_>) -> Option<Next> {
        let backlog = &mut self.seldom_if()?.backlog;
        let (fire_ms, mut held) = backlog.pop_first()?;
        let mut item_fires = Vec::new();
        while let Some(batch) = backlog.first_entry() {
            // An item claimed for two fires (one entry per item makes it unexpected) runs
            // them one after the other.
            if batch.get().iter().any(|h| held.iter().any(|k| k.item == h.item)) {
                break;
            }
            let (later, more) = batch.remove_entry();
            item_fires.extend(more.iter().map(|h| (h.item, later)));
            held.extend(more);
        }
        let items: Vec<u32> = held.iter().map(|h| h.item).collect();
        self.launch(fire_ms, FireKind::Failover, &items, item_fires, held, ctx);
        Some(Next::Again)
    }

    /// The catch-up `items` owe, if any: the items with a misfire marker, each answering the
    /// fire its marker names (markers that name none, empty as ElasticJob writes them or
    /// unreadable, the latest fire due). Items another instance runs now (a failover taker
    /// runs an earlier fire of one) wait for that run to end: the catch-up starts all its
    /// items or none, so one of them would hold back the others' until the item moved away.
    pub(super) fn owed_catch_up(&mut self, items: &[u32], ctx: &Ctx<'_>) -> Option<CatchUp> {
        // Our own marker may still show (a finish the view has not caught up with): not a
        // run elsewhere.
        let runs_elsewhere = |n: u32| {
            execution::running_owner(ctx.view, &self.paths, n)
                .is_some_and(|owner| owner != *self.me)
        };
        // An item queued for failover is re-run by its taker first: the catch-up comes after.
        let queued = |n: u32| ctx.view.exists(&self.paths.failover_item(n));
        let idle: Vec<u32> =
            items.iter().copied().filter(|&n| !runs_elsewhere(n) && !queued(n)).collect();
        let owed = execution::misfired(ctx.view, &self.paths, &idle);
        if owed.is_empty() {
            return None;
        }
        for (_, o) in &owed {
            if let Err(garbage) = o {
                let garbage = garbage.clone();
                self.report_once(&garbage, ctx);
            }
        }
        // Each item answers the fire its marker names (unnamed markers the latest fire due);
        // the launch carries the latest of them, and the others item by item.
        // (Looked up only for such markers: a search back through the schedule, and every
        // decision about a catch-up asks.)
        let mut latest = None;
        let fires: Vec<(u32, i64)> = owed
            .iter()
            .map(|(n, o)| {
                let named = o.as_ref().ok().copied().flatten();
                let fire = named.unwrap_or_else(|| {
                    *latest.get_or_insert_with(|| self.latest_fire_by(ctx.now_ms))
                });
                (*n, fire)
            })
            .collect();
        let fire_ms = fires.iter().map(|&(_, f)| f).max()?;
        let items = fires.iter().map(|&(n, _)| n).collect();
        let item_fires = fires.into_iter().filter(|&(_, f)| f != fire_ms).collect();
        Some(CatchUp { fire_ms, items, item_fires })
    }

    /// Claims the next item of this instance's share of the failover queue.
    fn claim_next(&mut self, ctx: &Ctx<'_>) -> Option<Next> {
        if !ctx.view.has_children(&self.paths.failover_items()) {
            if let Some(seldom) = self.seldom_if() {
                seldom.entries_seen.clear();
            }
            return None;
        }
        let stealable =
            self.seldom().entries_seen.values().any(|&seen| ctx.now_ms >= seen + STEAL_AFTER_MS);
        // Our share was looked at for this view already: only entries left waiting long
        // enough may be tried (each waits again after a failed try).
        let revision = ctx.view.revision();
        let blocked =
            self.claim_blocked == Some(revision) || self.seldom().claim_race.holds(revision);
        if blocked && !stealable {
            return None;
        }
        let (queue, garbage) = failover::queued(ctx.view, &self.paths);
        for (item, g) in garbage {
            self.report_once(&g, ctx);
            self.seldom_mut().repairs.insert(super::repair::Repair::Entry(item));
        }
        // When each entry was first seen here: one another instance's share left unclaimed
        // that long (its claimer is busy with a long run, or cut off) is anyone's. A claim is
        // one transaction that deletes the entry, so two claimers never both run it.
        if let Some(seldom) = self.seldom_if() {
            seldom.entries_seen.retain(|item, _| queue.iter().any(|(n, _)| n == item));
        }
        if !queue.is_empty() {
            let seen = &mut self.seldom_mut().entries_seen;
            for (item, _) in &queue {
                seen.entry(*item).or_insert(ctx.now_ms);
            }
        }
        let eligible = sharding::eligible_instances(ctx.view, &self.paths);
        let ours = failover::share_of(&queue, &eligible, &self.me);
        let waited = |item: &u32| {
            let seen = self.seldom.as_deref().and_then(|s| s.entries_seen.get(item));
            seen.is_some_and(|&seen| ctx.now_ms >= seen + STEAL_AFTER_MS)
        };
        // A claimer running an item of the job takes its share only once idle, a whole run
        // later: an idle instance takes such an entry at once, not after the wait (which
        // counts from when this instance first saw the entry: a restarted one sees it anew).
        // `lease` 2 x 2 seed 2,908,977,819: the restarted survivor claimed only its share
        // while the other's waited behind its 25 s run, and then behind its crash; the re-run
        // came 41 s after the departure. Not at a revision where a claim was blocked or lost:
        // the entry is tried again once the view moves.
        let busy: BTreeSet<String> = if blocked {
            BTreeSet::new()
        } else {
            (0..self.total())
                .filter_map(|n| execution::running_owner(ctx.view, &self.paths, n))
                .collect()
        };
        let claimer_busy = |entry: &FailoverEntry| {
            failover::claimer_of(entry, &eligible)
                .is_some_and(|c| c != &*self.me && busy.contains(c))
        };
        let left_waiting = queue.iter().filter(|(item, entry)| {
            !ours.iter().any(|(n, _)| n == item) && (waited(item) || claimer_busy(entry))
        });
        let share: Vec<_> = if blocked {
            left_waiting.cloned().collect()
        } else {
            ours.iter().chain(left_waiting).cloned().collect()
        };
        // The share in one transaction (up to `CLAIM_OPS`), with one write of our ledger: one
        // claim per round trip took a survivor on a 1 s link a second per item, and its last
        // re-run came past section 4's bound (2 x 1 `chaos` seed 238,241,136). A claim lost to
        // another claimer fails them all; the share is decided again on the view that shows
        // the winner's.
        let mut ledger = self.ledger_for_write(ctx).unwrap_or_default();
        let mut ops = Vec::new();
        let mut taken = Vec::new();
        for (item, entry) in share {
            // An entry of another's share is tried once per wait, whatever comes of it: a
            // claim or a drop that fails (the view behind) is not retried at the same instant.
            if !ours.iter().any(|(n, _)| *n == item) {
                self.seldom_mut().entries_seen.insert(item, ctx.now_ms);
            }
            // An item a count change removed since it was queued (a restart queued its
            // earlier process's items, whose session lingered past the change: 2 x 2 `lease`
            // seed 4,047,588,186, three 20 s re-runs of removed items, and their claimer's
            // misfires meanwhile owed catch-ups of items that no longer exist).
            if item >= self.total() {
                if taken.is_empty() {
                    let drop = failover::drop_removed_item(ctx.view, &self.paths, item, &entry);
                    return Some(Next::Request(Pending::DropEntry, Request::Txn(drop)));
                }
                continue;
            }
            let mut next = ledger.clone();
            match failover::claim(ctx.view, &self.paths, item, &entry, &self.me, &mut next) {
                // Full: the rest of the share goes in the next transaction.
                Claim::Take { ops: claim, .. }
                    if !taken.is_empty() && ops.len() + claim.len() + 1 > CLAIM_OPS =>
                {
                    break;
                }
                Claim::Take { ops: claim, running_op } => {
                    ledger = next;
                    taken.push(Taken {
                        item,
                        fire_ms: entry.fire_ms,
                        running_op: ops.len() + running_op,
                    });
                    ops.extend(claim);
                }
                // A stale entry goes on its own, before any claim (after them, it waits for
                // the next look at the queue).
                Claim::Drop(drop) if taken.is_empty() => {
                    return Some(Next::Request(Pending::DropEntry, Request::Txn(drop)))
                }
                Claim::Drop(_) | Claim::Wait => {}
            }
        }
        if !taken.is_empty() {
            ops.push(execution::write_ledger(ctx.view, &self.paths, &self.me, &ledger));
            self.seldom_mut().claim_race.sent(ctx.view.revision());
            return Some(Next::Request(Pending::Claim(taken), Request::Txn(ops)));
        }
        // Every entry of our share waits for a run to end: look again once the view changes.
        self.claim_blocked = Some(ctx.view.revision());
        None
    }

    /// When another instance's unclaimed failover entry becomes ours to claim, if one waits.
    pub(super) fn steal_deadline(&self) -> Option<i64> {
        if !self.failover_enabled() {
            return None;
        }
        self.seldom().entries_seen.values().map(|&seen| seen + STEAL_AFTER_MS).min()
    }

    pub(super) fn on_claim_reply(
        &mut self,
        taken: Vec<Taken>,
        result: Result<Reply, RegistryError>,
        _ctx: &Ctx<'_>,
    ) {
        // The claim was sent, so the state is there already.
        if let Some(seldom) = self.seldom_if() {
            seldom.claim_race.answered(matches!(&result, Err(e) if failover::is_lost_race(e)));
        }
        match result {
            Ok(Reply::Txn(results)) => {
                for Taken { item, fire_ms, running_op } in taken {
                    let version = execution::written_version(&results, running_op);
                    let job = self.job().to_owned();
                    self.emit(SchedulerEvent::FailoverClaimed { job, item, fire_ms });
                    self.seldom_mut().backlog.entry(fire_ms).or_default().push(Held {
                        item,
                        version,
                        failed_over: true,
                    });
                }
            }
            Ok(_) => {}
            // Someone else claimed it first, or a reshard rewrote an owner node: look again
            // once the view shows it.
            Err(e) if failover::is_lost_race(&e) => {
                self.claim_behind =
                    !matches!(e.transaction_failure(), Some((_, RegistryError::NodeExists { .. })));
            }
            Err(e) => self.failed(&e),
        }
    }
}

/// An item a claim transaction takes: its entry's fire, and the index of the op that leaves
/// our `running` marker (whose resulting version the re-run's finish expects).
#[derive(Debug)]
pub(super) struct Taken {
    pub item: u32,
    pub fire_ms: i64,
    pub running_op: usize,
}

/// A catch-up owed: the items, each with the fire it answers (the launch's `fire_ms`, the latest,
/// unless `item_fires` names another).
pub(super) struct CatchUp {
    pub fire_ms: i64,
    pub items: Vec<u32>,
    pub item_fires: Vec<(u32, i64)>,
}

/// How many ops a claim transaction holds at most (with at least one item): the items of a
/// share beyond it go in the next one. An item's claim is five or six ops, and the runtime
/// adds the detail node of an ElasticJob node that has one (the queue entry's): some 30
/// registry ops for four items. Chosen when an etcd of default `--max-txn-ops` (128) took
/// some 40 ops in one transaction; the etcd backend now takes far more (`registry-etcd`,
/// "Transaction size"), but a claim of a few items stays a short transaction on every server,
/// and it is the bound the simulator's checked runs claim with.
const CLAIM_OPS: usize = 24;

/// How long a queued failover entry of another instance's share waits for that instance
/// before an idle one claims it (its claimer may be busy for a long run, or cut off).
const STEAL_AFTER_MS: i64 = 5_000;

/// How long after a bad comparison the clock is compared again.
const CLOCK_RECHECK_MS: i64 = 5_000;
