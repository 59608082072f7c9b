//! Stopping the job on this instance: no new fires; the items in flight may finish until the
//! shutdown deadline, then they are cancelled and get a short grace; then this instance's nodes
//! leave the registry, in the order that lets cancelled items fail over.
//!
//! Items that returned lose their `running` markers (fenced) before the instance node goes:
//! nothing to take over. Cancelled items keep their persistent markers (failover on), which
//! name this instance: once its node is gone, the survivors queue them and run them again.

use super::{Action, Ctx, JobProtocol, Next, Pending, RaceFence, Reply, Request};
use crate::events::{SchedulerEvent, SkipReason};
use crate::layout::ItemNode;
use crate::protocol::execution::{ledger_of, running_owner};
use crate::protocol::failover;
use crate::protocol::garbage::names_live;
use crate::registry::{RegistryError, TxnOp};

/// Where a stop is.
#[derive(Debug)]
pub(super) struct StopState {
    reason: String,
    phase: Phase,
    /// Leave steps answered (done, or found done by someone else).
    answered: Vec<Step>,
    /// The ledger's removal lost its race for the record of the assignments (another writer
    /// rewrote it): made again once the view moved on.
    ledger_race: RaceFence,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the items in flight, until the deadline.
    Draining {
        deadline: i64,
    },
    /// The items were cancelled; they get until then to return.
    Grace {
        until: i64,
    },
    /// Removing this instance's nodes; with the registry out of reach (cut off, or a
    /// request failed), retried on every input until then, and given up after.
    Leaving {
        until: i64,
    },
    Done,
}

/// The leave request outstanding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    Abdicate,
    Ledger,
    Instance,
    /// Both at once, for an instance that owns no item (`leave_unowned`).
    LedgerAndInstance,
}

impl StopState {
    /// Removing this instance's nodes (which reads the job's whole subtree).
    pub(super) fn is_leaving(&self) -> bool {
        matches!(self.phase, Phase::Leaving { .. })
    }

    pub fn done(&self) -> bool {
        self.phase == Phase::Done
    }

    pub fn deadline(&self) -> Option<i64> {
        match self.phase {
            Phase::Draining { deadline } => Some(deadline),
            Phase::Grace { until } | Phase::Leaving { until } => Some(until),
            Phase::Done => None,
        }
    }
}

impl JobProtocol {
    pub(super) fn on_stop(&mut self, reason: String, ctx: &Ctx<'_>) {
        if self.stop.is_some() {
            return;
        }
        // Fires that fell due before the stop are recorded, not lost without a word: queued,
        // being handled, or armed and now disarmed; and the ones overtaken before the job's
        // first reshard while this instance registered, which its first fire was to record
        // (1 × 5 `chaos` seed 1,974,571,948: a job added on a 1 s link, registered 7 s later,
        // and removed before its first fire: nobody recorded the two fires meanwhile).
        if let Some(from) = self.resume_window.take() {
            self.record_overtaken_before_first_reshard(from, i64::MAX);
        }
        self.skip_due_while(ctx, SkipReason::ShuttingDown);
        if let Some(fire_ms) = self.armed_fire.take().filter(|&t| t <= ctx.now_ms) {
            self.skip(fire_ms, SkipReason::ShuttingDown);
        }
        self.actions.push(Action::ArmFire(None));
        self.actions.push(Action::ArmReconcile(None));
        let phase = match &self.in_flight {
            Some(_) => Phase::Draining { deadline: ctx.now_ms + self.settings.shutdown_timeout_ms },
            None => self.leaving(ctx),
        };
        self.stop = Some(Box::new(StopState {
            reason,
            phase,
            answered: Vec::new(),
            ledger_race: RaceFence::default(),
        }));
    }

    pub(super) fn leave_next(&mut self, ctx: &Ctx<'_>) -> Next {
        let Some(phase) = self.stop.as_ref().map(|s| s.phase) else { return Next::Idle };
        let set = |me: &mut Self, phase| {
            if let Some(stop) = me.stop.as_mut() {
                stop.phase = phase;
            }
        };
        match phase {
            Phase::Done => Next::Idle,
            Phase::Draining { deadline } => match &self.in_flight {
                None => {
                    set(self, self.leaving(ctx));
                    Next::Again
                }
                Some(_) if ctx.now_ms >= deadline => {
                    self.cancel_in_flight();
                    set(self, Phase::Grace { until: ctx.now_ms + self.settings.cancel_grace_ms });
                    Next::Again
                }
                Some(_) => Next::Idle,
            },
            Phase::Grace { until } => {
                if self.in_flight.is_some() && ctx.now_ms < until {
                    return Next::Idle;
                }
                if self.in_flight.is_some() {
                    let job = self.job().to_owned();
                    self.emit(SchedulerEvent::Error {
                        job,
                        message: "items did not return within the cancel grace; their takers may overlap them".into(),
                    });
                }
                set(self, self.leaving(ctx));
                Next::Again
            }
            Phase::Leaving { until } => self.leaving_next(until, ctx),
        }
    }

    /// Leaving, with as long again as the shutdown timeout to reach the registry.
    fn leaving(&self, ctx: &Ctx<'_>) -> Phase {
        Phase::Leaving { until: ctx.now_ms + self.settings.shutdown_timeout_ms }
    }

    fn leaving_next(&mut self, until: i64, ctx: &Ctx<'_>) -> Next {
        // Cut off, or a request failed: the markers of items that returned, and our nodes,
        // would stay behind (persistent markers for good, if the job is gone everywhere); wait
        // for the registry (every input retries) until the deadline, then give up and leave
        // the ephemerals to the session's end.
        if (!self.connected || self.errored) && ctx.now_ms < until {
            return Next::Idle;
        }
        if self.connected && !self.errored {
            if !self.finishing.is_empty() {
                return self.finish_next(ctx);
            }
            // Which markers still name us is read on the job's whole subtree (`scope`).
            if !self.scope_ready(ctx.view) {
                return Next::Idle;
            }
            // Garbage over the markers of our runs that ended: removed now, as the repair
            // would; the ledger goes with us, and no later session could tell they were ours.
            if let Some(next) = self.lost_marker_repair_next(ctx) {
                return next;
            }
            let view = ctx.view;
            let answered =
                |me: &Self, step| me.stop.as_ref().is_some_and(|s| s.answered.contains(&step));
            let leader =
                view.get(&self.paths.leader_instance()).filter(|n| n.data == self.me.as_bytes());
            if let Some(node) = leader.filter(|_| !answered(self, Step::Abdicate)) {
                let ops = crate::protocol::election::abdication(view, &self.paths, node.version);
                return Next::Request(Pending::Leave(Step::Abdicate), Request::Txn(ops));
            }
            // Our ledger goes too, unless cancelled items still name us: the survivors read it
            // for their fires (and remove it when they queue them). A marker garbage replaced
            // on an item our ledger says we run is ours as well: only the ledger tells its
            // reader so (`failover::left_by`, a restart's leftovers), and without it the
            // marker held its item for good (1 × 3 `garbage` seed 1,360,703,320: a run that
            // ended while we were cut off, its marker garbled while we stopped).
            let stored = ledger_of(view, &self.paths, &self.me);
            let running = stored.as_ref().and_then(|l| l.as_ref().ok()).map(|l| &l.running);
            let marked = (0..self.total()).any(|n| {
                let marker = view.get(&self.paths.item_node(n, ItemNode::Running));
                let garbled = marker.is_some_and(|m| !names_live(view, &self.paths, &m.data));
                running_owner(view, &self.paths, n).as_deref() == Some(&*self.me)
                    || (garbled && running.is_some_and(|r| r.contains_key(&n)))
            });
            let ledger = view.get(&self.paths.ledger(&self.me));
            let raced = self.stop.as_ref().is_some_and(|s| s.ledger_race.holds(view.revision()));
            if ledger.is_some() && raced {
                return Next::Idle;
            }
            if let Some(node) = ledger.filter(|_| !marked && !answered(self, Step::Ledger)) {
                // A stopping job looks at no change: garbage over our ledger that only this
                // leave reads is reported here, or it went unsaid with the node (1 × 5
                // `garbage` seed 2,905,680,891: written while we were cut off and stopping).
                if let Some(Err(garbage)) = &stored {
                    self.report_once(garbage, ctx);
                }
                if let Some(ops) = self.leave_unowned(node.version, ctx) {
                    if let Some(stop) = self.stop.as_mut() {
                        stop.ledger_race.sent(view.revision());
                    }
                    return Next::Request(
                        Pending::Leave(Step::LedgerAndInstance),
                        Request::Txn(ops),
                    );
                }
                let mut ops = vec![TxnOp::delete(self.paths.ledger(&self.me), Some(node.version))];
                // What it accounted for stays in the record of the assignments: the fires
                // after it, due under the current assignment before the reshard that moves
                // our items away, ran nowhere, and that reshard owes their catch-up (2 x 4
                // `failover` seed 487,904,635: a raise committed late, moved to the
                // millisecond of the next fire, which ran without our items).
                let mark = stored.and_then(Result::ok).and_then(|l| l.last_fire_ms);
                ops.extend(
                    mark.and_then(|m| failover::note_departed(view, &self.paths, &self.me, m)),
                );
                if let Some(stop) = self.stop.as_mut() {
                    stop.ledger_race.sent(view.revision());
                }
                return Next::Request(Pending::Leave(Step::Ledger), Request::Txn(ops));
            }
            if view.exists(&self.paths.instance(&self.me)) && !answered(self, Step::Instance) {
                let ops = vec![TxnOp::delete(self.paths.instance(&self.me), None)];
                return Next::Request(Pending::Leave(Step::Instance), Request::Txn(ops));
            }
        }
        let reason = self.stop.as_ref().map(|s| s.reason.clone()).unwrap_or_default();
        if let Some(stop) = self.stop.as_mut() {
            stop.phase = Phase::Done;
        }
        let job = self.job().to_owned();
        self.emit(SchedulerEvent::JobStopped { job, reason });
        self.actions.push(Action::Stopped);
        Next::Idle
    }

    /// The leave of an instance that owns no item in the record of the assignments: its
    /// ledger and its instance node go in one transaction, fenced on the record's version,
    /// and no mark is noted in the record (no reshard moves items away from it). The fences
    /// close both races: a reshard committed before it, which may have given it items, fails
    /// it (it is decided again on the view that shows that reshard, noting the mark); one
    /// computed before it and committed after fails on the instance node it checks for each
    /// owner (`sharding::plan`). Every leaving instance noting its mark in the one record
    /// made the leaves of a whole cluster quadratic: each lost the race to all the others
    /// in turn (50 instances × 100 jobs: 118,000 leave transactions for 5,000 leaves).
    /// `None` when it owns items, or the record is not there to fence on.
    fn leave_unowned(&self, ledger_version: u64, ctx: &Ctx<'_>) -> Option<Vec<TxnOp>> {
        let view = ctx.view;
        let path = self.paths.assigned();
        let record = view.get(&path)?;
        let owners = crate::protocol::records::Assigned::parse(&path, &record.data).ok()?.owners;
        if owners.values().any(|owner| *owner == *self.me) {
            return None;
        }
        let mut ops = vec![TxnOp::delete(self.paths.ledger(&self.me), Some(ledger_version))];
        let instance = self.paths.instance(&self.me);
        if let Some(node) = view.get(&instance) {
            ops.push(TxnOp::delete(instance, Some(node.version)));
        }
        ops.push(TxnOp::check(path, Some(record.version)));
        Some(ops)
    }

    pub(super) fn on_leave_reply(
        &mut self,
        step: Step,
        result: Result<Reply, RegistryError>,
        _ctx: &Ctx<'_>,
    ) {
        // Our ledger gone or changed already: the instance node still goes, on its own.
        let ledger_only = step == Step::LedgerAndInstance
            && result
                .as_ref()
                .err()
                .and_then(RegistryError::transaction_failure)
                .is_some_and(|(i, _)| i == 0);
        match result {
            // A node gone or changed already is fine: someone else removed it. But not the
            // record of the assignments, which the ledger's removal notes our mark in: a
            // reshard rewrote it meanwhile, and given up, the removal would leave our ledger
            // for the survivors to read as a crash's, and queue the fires it missed, while a
            // process back under our id runs the latest (2 × 4 `failover` 2,647,375,626 ran
            // it twice). Made again on the view that shows the reshard.
            Err(e)
                if matches!(step, Step::Ledger | Step::LedgerAndInstance)
                    && e.transaction_failure().is_some_and(|(i, _)| i > 0) =>
            {
                if let Some(stop) = self.stop.as_mut() {
                    stop.ledger_race.answered(true);
                }
                return;
            }
            Ok(_) => {}
            Err(e) if e.transaction_failure().is_some() => {}
            Err(e) => {
                // Retried on the next input, until the leave's deadline.
                self.errored = true;
                let job = self.job().to_owned();
                self.emit(SchedulerEvent::Error { job, message: e.to_string() });
                return;
            }
        }
        if let Some(stop) = self.stop.as_mut() {
            match step {
                Step::LedgerAndInstance if ledger_only => stop.answered.push(Step::Ledger),
                Step::LedgerAndInstance => stop.answered.extend([Step::Ledger, Step::Instance]),
                _ => stop.answered.push(step),
            }
        }
    }
}
