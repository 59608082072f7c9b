//! Reacting to the registry and the session: fires falling due, membership, leadership, servers,
//! triggers, config changes, the reshard flag and the leader's reconcile.

use super::{
    BidStep, Ctx, FlagStep, JobProtocol, Next, Pending, Reply, Request, Restamp, Stamp,
    MAX_OVERDUE_SCAN,
};
use crate::config::{store, ConfigError, JobConfig};
use crate::cron::CronSchedule;
use crate::events::{FireKind, SchedulerEvent, SkipReason};
use crate::layout::{Detailed, ItemNode, JobNode};
use crate::protocol::execution::ledger_of;
use crate::protocol::records::Ledger;
use crate::protocol::{execution, failover, sharding};
use crate::registry::{CreateMode, RegistryError, SessionEvent, TxnOp};

impl JobProtocol {
    pub(super) fn on_fire_due(&mut self, fire_ms: i64, ctx: &Ctx<'_>) {
        if self.armed_fire == Some(fire_ms) {
            self.armed_fire = None;
        }
        // A timer armed before a lost session, ringing once a registration in the new one
        // armed the fire path past it: handled, it would re-arm from there and run a fire
        // that the survivors counted among the lost session's missed fires (and caught up).
        if let Some(after) = self.registration.rearmed_after.filter(|&after| fire_ms <= after) {
            // It and the fires after it up to the registration, which it held back.
            let held_back: Vec<i64> = self.schedule.as_ref().map_or_else(Vec::new, |s| {
                s.iter_after(fire_ms).take_while(|&t| t <= after).take(MAX_OVERDUE_SCAN).collect()
            });
            for fire in std::iter::once(fire_ms).chain(held_back) {
                self.skip(fire, SkipReason::Late);
            }
            // Unless a later fire is armed already, the timer that rang was the one armed.
            if self.armed_fire.is_none_or(|armed| armed <= after) {
                self.arm_after(after, ctx);
            }
            return;
        }
        // A second ring of a fire this instance handles or started already (a timer of the
        // lost session rang while the registration of the new one, over a slow link, armed
        // the same fire again): the first ring answers it. Handled again, it found the first
        // ring's run in flight and recorded a misfire of a fire that ran, or, the run ended
        // by then, would have run it twice (one instance, `chaos` seed 2,536,971,420 of a job
        // file).
        if self.rings_again(fire_ms) {
            if self.armed_fire.is_none() {
                self.arm_after(fire_ms, ctx);
            }
            return;
        }
        if let Some(from) = self.resume_window.take() {
            self.record_overtaken_before_first_reshard(from, fire_ms);
        }
        if self.stop.is_some() {
            self.skip(fire_ms, SkipReason::ShuttingDown);
            return;
        }
        self.arm_after(fire_ms, ctx);
        // Its timer handled only once the next fire fell due too (the runner was held up, by
        // a slow link or a long step): superseded, as `decide` would find it, and recorded so
        // now, with the fires `arm_after` just found overtaken. Queued, it would be decided
        // only after its checks (a clock comparison is a round trip), with the later fires
        // recorded meanwhile: an owner that went down in between lost it unrecorded, though it
        // had spoken of the fires after it (1 × 3 `chaos` seed 3,214,561,033).
        if self.superseded(fire_ms, ctx.now_ms) {
            self.skip(fire_ms, SkipReason::Late);
            return;
        }
        // The scheduled fires still queued before it (behind a fire that waits: a catch-up
        // waiting for a reshard) are superseded by it: recorded late now, not when their turn
        // comes. An owner that went down before then lost them unrecorded (3 × 2 `lease` seed
        // 2,791,446,815: two fires queued behind a catch-up that waited 28 s for a reshard
        // held back by re-runs; the owner crashed).
        self.hold_back_due(fire_ms - 1);
        self.enqueue(fire_ms, FireKind::Scheduled, None);
    }

    /// Whether the scheduled fire `fire_ms` was started here already, or waits to be handled.
    fn rings_again(&self, fire_ms: i64) -> bool {
        let scheduled = |at: i64, kind: FireKind| kind == FireKind::Scheduled && at == fire_ms;
        self.last_scheduled_start.is_some_and(|last| fire_ms <= last)
            || self.fire.as_ref().is_some_and(|f| scheduled(f.fire_ms, f.kind))
            || self.due.iter().any(|&(at, kind, _)| scheduled(at, kind))
    }

    /// Whether the scheduled fire `fire_ms` is superseded by `now_ms`: the next fire fell due.
    pub(super) fn superseded(&self, fire_ms: i64, now_ms: i64) -> bool {
        self.schedule.as_ref().and_then(|s| s.next_after(fire_ms)).is_some_and(|n| n <= now_ms)
    }

    /// The clock went back: the timer armed for the next fire by the earlier reading waits
    /// for a time the clock now reaches only later, and the fires due before it by the clock
    /// now would go by unhandled (a clock found 20 s ahead and set right lost 20 s of fires).
    /// Armed again for the next fire by the clock now, past the fires this instance started
    /// already (a clock ahead runs them early; run again they would run twice). Fires it only
    /// recorded by the clock ahead (skipped) are due again at their time.
    pub(super) fn on_clock_back(&mut self, ctx: &Ctx<'_>) {
        // A catch-up held back by a clock found off is tried again at once: the clock may
        // have been set right (its retry time, taken by the clock before, is far off now).
        if self.seldom_if().and_then(|s| s.catch_up_retry_ms.take()).is_some() {
            self.catch_up_blocked = None;
        }
        let Some(armed) = self.armed_fire else { return };
        // Past the fires it started. Those a registration handed to its leftovers are held
        // back when their timer rings (`rearmed_after`, in `on_fire_due`): re-armed past here,
        // a time taken by a clock that ran ahead would skip the fires up to it unrecorded
        // (1 × 3 `chaos` seed 1,152,359,773).
        let after = (ctx.now_ms - 1).max(self.last_scheduled_start.unwrap_or(i64::MIN));
        let sooner = self.schedule.as_ref().and_then(|s| s.next_after(after));
        if sooner.is_some_and(|next| next < armed) {
            self.arm_after(after, ctx);
        }
    }

    /// Records `Late` the scheduled fires still queued up to `after`, and drops them. A
    /// registration in a new session armed the fire path past `after`: those fell due while
    /// it registered, and handled, they would run fires the survivors counted among the lost
    /// session's missed fires (as [`Self::on_fire_due`] holds back a timer of the lost session
    /// that rings late). A fire falling due supersedes the ones queued before it.
    pub(super) fn hold_back_due(&mut self, after: i64) {
        let held: Vec<i64> = self
            .due
            .iter()
            .filter(|(fire, kind, _)| *kind == FireKind::Scheduled && *fire <= after)
            .map(|(fire, _, _)| *fire)
            .collect();
        if held.is_empty() {
            return;
        }
        self.due.retain(|(fire, kind, _)| !(*kind == FireKind::Scheduled && *fire <= after));
        for fire in held {
            self.skip(fire, SkipReason::Late);
        }
    }

    /// Queues a fire to handle.
    pub(super) fn enqueue(&mut self, fire_ms: i64, kind: FireKind, only: Option<Vec<u32>>) {
        self.due.push_back((fire_ms, kind, only));
    }

    /// Records every fire waiting to be handled (and the one being handled) as skipped.
    pub(super) fn skip_due_while(&mut self, _ctx: &Ctx<'_>, reason: SkipReason) {
        if let Some(fire) = self.fire.take() {
            self.skip_fire(fire.fire_ms, fire.kind, reason.clone());
        }
        while let Some((fire_ms, kind, _)) = self.due.pop_front() {
            self.skip_fire(fire_ms, kind, reason.clone());
        }
    }

    /// Records a fire as skipped; a manual trigger that cannot run now is kept for later.
    pub(super) fn skip_fire(&mut self, fire_ms: i64, kind: FireKind, reason: SkipReason) {
        if kind == FireKind::Manual && reason == SkipReason::Disconnected {
            self.manual_pending = true;
            return;
        }
        self.skip(fire_ms, reason);
    }

    pub(super) fn on_reconcile(&mut self, ctx: &Ctx<'_>) {
        self.arm_reconcile(ctx);
        if !self.connected || self.stop.is_some() || !self.is_leader(ctx) {
            return;
        }
        if sharding::pending(ctx.view, &self.paths) {
            return;
        }
        let eligible = sharding::eligible_instances(ctx.view, &self.paths);
        let stale = (0..self.total()).any(|n| {
            let owner = ctx.view.text(&self.paths.item_node(n, ItemNode::Instance));
            !owner.is_some_and(|o| eligible.contains(&o))
        });
        if stale && !self.static_assignment(ctx) {
            self.owe_flag(true);
            let job = self.job().to_owned();
            self.emit(SchedulerEvent::Reconciled { job });
        }
    }

    pub(super) fn on_resync(&mut self, ctx: &Ctx<'_>) {
        self.resync_owed = None;
        self.membership_changed = true;
        self.audit_owed = true;
        for node in
            [JobNode::Config, JobNode::LeaderInstance, JobNode::Instance(self.me.to_string())]
        {
            self.on_change(node, ctx);
        }
        let trigger = self.paths.trigger(&self.me);
        if ctx.view.exists(&trigger) {
            self.trigger_owed = true;
        }
    }

    pub(super) fn on_change(&mut self, node: JobNode, ctx: &Ctx<'_>) {
        if self.stop.is_some() {
            return;
        }
        // A detail changes with its node (one transaction), or alone by someone else's hand
        // (garbage): either way what the node stands for may have changed.
        let node = match node {
            JobNode::Detail(of) => of.node(),
            node => node,
        };
        if matches!(node, JobNode::Instance(_)) {
            self.membership_changed = true;
        }
        if matches!(node, JobNode::Instance(_) | JobNode::Server(_) | JobNode::LeaderInstance) {
            self.servers_audit_owed = true;
        }
        if let JobNode::Server(ip) = &node {
            let path = self.paths.server(ip);
            if !ctx.view.exists(&path) {
                self.registration.forget(&path);
            }
        }
        self.notice_garbage(&node, ctx);
        match node {
            JobNode::Config => self.on_config_change(ctx),
            JobNode::LeaderInstance => {
                // Garbage over our own leader node: still ours, and rewritten (`repair`).
                let ours = self.leader_node_ours(ctx);
                self.was_leader = self.is_leader(ctx) || (ours && self.was_leader);
            }
            JobNode::Instance(id) if id == *self.me => {
                // Our node vanished while our session lives: an operator shut this instance
                // down. A session that ended since we registered took the node with it (the
                // runtime counts ended sessions before it routes their events), and the
                // registration that follows puts it back. Confirmed with a read before acting.
                let gone = !ctx.view.exists(&self.paths.instance(&self.me));
                let same_session = self.registration.registered_in() == Some(ctx.sessions_lost);
                if gone && self.connected && same_session {
                    self.confirm_gone_owed = true;
                }
            }
            JobNode::Server(ip) => {
                // Garbage over our own leader node (rewritten by `repair`) leaves us the
                // leader: a change of a server seen with it is ours to answer (2 × 1
                // `garbage` seed 3,577,482,032: a server enabled while the leader was cut off,
                // delivered with garbage over its node, and no reshard gave it items again).
                if !self.is_leader(ctx) && !self.leader_node_ours(ctx) {
                    return;
                }
                self.owe_flag(!self.static_assignment(ctx));
                if ip == *self.ip && self.server_disabled(ctx) {
                    // A leader on a disabled server abdicates; the survivors elect again.
                    self.abdicate_owed = true;
                }
            }
            JobNode::Trigger(id)
                if id == *self.me && ctx.view.exists(&self.paths.trigger(&self.me)) =>
            {
                self.trigger_owed = true;
            }
            JobNode::Assigned => self.late_reshard(ctx),
            // When a queue entry first shows, busy or not: the wait after which another's share
            // is ours to claim counts from then, not from our first look at the queue once
            // idle (3 × 2 `lease` seed 3,780,741,665: a survivor idle 12 s after the departure
            // took only its own share, its peer's entry waited 5 s more, and the peer, cut off,
            // never came).
            JobNode::FailoverItem(n) if ctx.view.exists(&self.paths.failover_item(n)) => {
                self.seldom_mut().entries_seen.entry(n).or_insert(ctx.now_ms);
            }
            _ => {}
        }
    }

    /// Whether the leader node, whatever it holds now, last named us: garbage over it leaves
    /// it ours (an ephemeral of our session).
    fn leader_node_ours(&self, ctx: &Ctx<'_>) -> bool {
        self.leader_seen.as_deref() == Some(&*self.me)
            && ctx.view.exists(&self.paths.leader_instance())
    }

    fn on_config_change(&mut self, ctx: &Ctx<'_>) {
        let Some(node) = ctx.view.get(&self.paths.config()) else {
            self.adopt_last_readable_replaced(ctx);
            if !self.registration.registered() {
                return;
            }
            // Deleted by hand: the leader writes it again. The others say so, as each does of
            // a config it cannot read: there may be no leader to write it back (a leader on a
            // disabled server abdicates; 1 × 3 `garbage` seed 1,791,321,517: the only
            // instance disabled, the config deleted, and nobody ever said so).
            if self.is_leader(ctx) {
                self.check_config(ctx);
            } else {
                let job = self.job().to_owned();
                let reason = "the config node was deleted; this instance runs with the last \
                              config it read until the leader writes it back"
                    .to_owned();
                self.emit(SchedulerEvent::ConfigRejected { job, reason });
            }
            return;
        };
        // Not skipped on a version seen before: a node deleted and written again starts its
        // versions over, so the same version may hold another config (3 × 1 `garbage` seed
        // 1,676,230,277: an instance cut off while the cron changed came back to a config
        // deleted and rewritten at version 0, kept its old cron, and, leading, wrote it back).
        self.config_version = Some(node.version);
        // The bytes of the config we run with: what parsing them would find.
        let fingerprint = store::fingerprint(&node.data);
        if self.config_stored == Some(fingerprint) {
            self.config_log_seen = ctx.view.config_log_mark();
            return;
        }
        let (config, schedule) = match self.parse_config(&node.data) {
            Ok(ok) => {
                self.config_log_seen = ctx.view.config_log_mark();
                ok
            }
            Err(error) => {
                self.adopt_last_readable_replaced(ctx);
                let job = self.job().to_owned();
                // A parser's message may quote the whole value (a huge one, say).
                let reason = crate::protocol::records::shorten_message(&error.to_string());
                self.emit(SchedulerEvent::ConfigRejected { job, reason });
                // The leader writes the config the job runs with back over it.
                if self.registration.registered() && self.is_leader(ctx) {
                    self.check_config(ctx);
                }
                return;
            }
        };
        self.adopt_config(config, schedule, fingerprint, ctx);
    }

    /// A stored config, parsed and checked as this job's, with its cron parsed.
    fn parse_config(
        &self,
        data: &[u8],
    ) -> Result<(JobConfig, Option<CronSchedule>), store::StoredConfigError> {
        let config = store::parse_stored(self.job(), data, &self.settings.known)?;
        let schedule = match config.cron_expression() {
            Some(cron) => {
                Some(CronSchedule::parse(cron, config.time_zone.as_deref().unwrap_or("")).map_err(
                    |e| {
                        store::StoredConfigError::Invalid(ConfigError::Cron {
                            expression: cron.to_owned(),
                            reason: e.to_string(),
                        })
                    },
                )?)
            }
            None => None,
        };
        Ok((config, schedule))
    }

    /// The config node is unreadable now (garbage, or deleted), and the view replaced values
    /// of it this job did not look at: the last of them that reads is the config the job was
    /// last shown, and it runs with that one (and its leader writes that one back), not the
    /// one it ran before (2 × 1 `garbage` seed 2,386,385,390: a leader, cut off while the
    /// count changed from 3 to 2, came back to both the change and garbage over it, and wrote
    /// the count of 3 back).
    fn adopt_last_readable_replaced(&mut self, ctx: &Ctx<'_>) {
        let path = self.paths.config();
        // The newest first: the older ones are not parsed.
        let last = ctx.view.replaced_configs(&path, self.config_log_seen).rev().find_map(|data| {
            if self.runs_with_stored(data) {
                return Some(None);
            }
            Some(Some((self.parse_config(data).ok()?, store::fingerprint(data))))
        });
        self.config_log_seen = ctx.view.config_log_mark();
        // (`Some(None)`: the last that reads is the one the job runs with.)
        if let Some(Some(((config, schedule), fingerprint))) = last {
            self.adopt_config(config, schedule, fingerprint, ctx);
        }
    }

    /// Runs with `config` (stored as bytes of this fingerprint) from now on.
    fn adopt_config(
        &mut self,
        config: JobConfig,
        schedule: Option<CronSchedule>,
        fingerprint: u64,
        ctx: &Ctx<'_>,
    ) {
        self.config_stored = Some(fingerprint);
        if config == self.config {
            return;
        }
        let reschedule =
            config.cron != self.config.cron || config.time_zone != self.config.time_zone;
        let reshard = config.sharding_total_count != self.config.sharding_total_count
            || config.job_sharding_strategy_type != self.config.job_sharding_strategy_type;
        let failover_off =
            self.failover_enabled() && !(config.failover && config.monitor_execution);
        let failover_on = !self.failover_enabled() && config.failover && config.monitor_execution;
        if reschedule && self.registration.registered() && self.config.max_time_diff().is_some() {
            if let (Some(first), Some(old)) = (self.armed_fire, self.schedule.clone()) {
                self.passed_fires_owed = Some(Box::new((first, old)));
            }
        }
        self.config = config.clone();
        self.schedule = schedule;
        self.actions.push(super::Action::UseConfig(Box::new(config)));
        let job = self.job().to_owned();
        self.emit(SchedulerEvent::ConfigApplied { job });
        // Past the fires this instance started, as after a clock set back: a clock behind
        // would arm the new cron from a time before a fire it ran, and run that instant again
        // where both crons fall on it (3 × 2 `chaos` seed 3,825,523,677: a clock 8 s behind,
        // every 2 s → every 10 s, the fire of 50 s run twice).
        // A fire armed for this millisecond or before (its timer not handled yet) is due: so is
        // the new cron's fire at this instant, if it has one (1 × 3 `chaos` seed 2,052,223,718:
        // on a 1 s link, both crons fell on 64 s, the change arrived in that millisecond, and
        // the fire was armed again past it: run and recorded by nobody).
        if reschedule && self.registration.registered() {
            let due_now = self.armed_fire.is_some_and(|armed| armed <= ctx.now_ms);
            let from = if due_now { ctx.now_ms - 1 } else { ctx.now_ms };
            let after = from.max(self.last_scheduled_start.unwrap_or(i64::MIN));
            self.arm_after(after, ctx);
        }
        if reshard {
            self.owe_flag(true);
        }
        // Failover turned off: orphans waiting for a taker will not get one, and the ledgers
        // stop being written; the leader clears both so that no stale entry is taken, and no
        // stale ledger read as what an instance last started, if it is turned on again.
        if failover_off && self.is_leader(ctx) {
            self.clear_queue_owed = true;
        }
        // And each instance's markers of runs that ended unrecorded, queued a moment ago, no
        // longer have a taker: they would hold their items back for good.
        if failover_off {
            self.own_markers_owed = true;
        }
        // Failover turned on: the directories it needs are ensured, and with misfire on our
        // ledger says from when on our missed fires are owed (as registration writes them),
        // or a crash before our next start would leave the survivors nothing to count our
        // missed fires from. A clear still owed for the turning off would remove it.
        if failover_on {
            self.clear_queue_owed = false;
            self.ledger_mark_owed = true;
            self.failover_on_ms = ctx.now_ms - 1;
        }
    }

    /// A clock that runs behind the registry's by more than `maxTimeDiffSeconds` comes to
    /// each fire late, and skips it (`ClockSkew`) when it gets there. The fires of the old
    /// cron that the registry's time has passed and this clock has not reached yet would
    /// never come once the cron changes: their skips are recorded, each named by the fire
    /// this clock was waiting for, within the period the registry's clock gives it. Only a
    /// comparison made after the change tells (chaos 537,321,816: the clock was set back 8 s
    /// after its last comparison, and two fires of the old cron went unrecorded).
    ///
    /// A clock ahead by `s` records each fire `s` early by the registry's clock, the fire of
    /// the registry's period it falls in. The fire it was waiting for when the cron changes
    /// never comes, and the registry's period it was to answer for (the one the change falls
    /// in, or, if the clock's last record already answered that one, none) is left without a
    /// record: that fire's skip is recorded at the change. (1 × 3 `chaos` 3,178,348,361: 8 s
    /// ahead, the cron changed from `0/4` to `0/6` and back 9 s later; by the registry's
    /// clock the `0/6` fire of 58 s had no record, its clock's fire of 70 s cancelled.)
    fn passed_fires_next(&mut self, ctx: &Ctx<'_>) -> Option<Next> {
        self.passed_fires_owed.as_ref()?;
        match self.clock_unchecked_now(ctx) {
            Some(Some(next)) => return Some(next),
            // Off now: behind, or ahead (nothing passed then).
            Some(None) => {}
            // Within bounds (or no bound any more): the old cron's fires came in time.
            None => {
                self.passed_fires_owed = None;
                return None;
            }
        }
        let (first, schedule) = *self.passed_fires_owed.take()?;
        let diff_ms = -self.registry_offset_ms;
        if self.registry_offset_ms < 0 {
            self.skip(first, SkipReason::ClockSkew { diff_ms });
            return Some(Next::Again);
        }
        if self.registry_offset_ms == 0 {
            return None;
        }
        let registry_now = ctx.now_ms.saturating_add(self.registry_offset_ms);
        let passed: Vec<i64> = std::iter::once(first)
            .chain(schedule.iter_after(first))
            .take_while(|&t| t <= registry_now)
            .take(super::MAX_OVERDUE_SCAN)
            .collect();
        for fire_ms in passed {
            self.skip(fire_ms, SkipReason::ClockSkew { diff_ms });
        }
        Some(Next::Again)
    }

    pub(super) fn on_session(&mut self, event: SessionEvent, ctx: &Ctx<'_>) {
        match event {
            SessionEvent::Suspended | SessionEvent::Closed => {
                self.connected = false;
                self.was_leader = false;
            }
            // Lost: the local lease ran out without contact, before the server could expire
            // the session; the session is never resumed (an `Expired` follows).
            SessionEvent::Lost | SessionEvent::Expired => {
                self.connected = false;
                self.was_leader = false;
                // Our ephemeral nodes and leadership are gone: running items may now be taken
                // over elsewhere, so tell them to stop. Nothing this session marked is ours any
                // more: a survivor may take a marker over, finish its run and a new run create
                // it again at the version we would fence on. What our markers still name us
                // for when we are back is queued then, like any orphan (registration's
                // leftovers), so runs that ended but were not recorded run again (the
                // at-least-once edge), and claims not run yet go to a taker.
                self.cancel_in_flight();
                if let Some(flight) = self.in_flight.as_mut() {
                    flight.held.clear();
                }
                self.finishing.clear();
                if let Some(seldom) = self.seldom_if() {
                    seldom.backlog.clear();
                }
                if let Some(seldom) = self.seldom_if() {
                    seldom.lost_markers.clear();
                }
                self.leader_seen = None;
                self.registration.lost();
                self.outstanding = None;
                self.split = None;
                self.then = None;
                // Once per lost session (`Lost` then `Expired`): a resync between the two is
                // the one after the gap.
                if !std::mem::replace(&mut self.session_gone, true) {
                    self.resync_owed = Some(i64::MAX);
                }
            }
            SessionEvent::Reconnected => self.connected = true,
            SessionEvent::Connected { .. } => {
                if !self.connected {
                    // A new session after an expiry: register again (ElasticJob shut the job
                    // down for good here, its issue #1857).
                    self.connected = true;
                    self.registration.lost();
                    if self.resync_owed.is_some() {
                        self.resync_owed = Some(ctx.now_ms + RESYNC_WAIT_MS);
                    }
                }
                self.session_gone = false;
            }
        }
    }

    /// Joins and departures since the last look (registered instances only).
    pub(super) fn notice_membership(&mut self, ctx: &Ctx<'_>) {
        let mut present = ctx.view.children(&self.paths.instances());
        // Sorted for the lookups: a cluster of N instances would otherwise cost N² compares
        // at every change of its membership, in every job of every instance.
        present.sort_unstable();
        let gone: Vec<String> = self
            .members
            .iter()
            .filter(|m| **m != *self.me && present.binary_search(m).is_err())
            .cloned()
            .collect();
        for id in gone {
            self.members.remove(&id);
            // Every instance that sees a departure gets the reshard done (as in ElasticJob):
            // a leader that left cannot, and its successor may have seen it go before winning.
            // Not when the assignment in view is already the one it would make.
            if !self.static_assignment(ctx) && !self.assignment_current(&id, ctx) {
                self.owe_flag_for_departure(&id);
            }
            if self.failover_enabled() {
                self.departed.insert(id);
            }
        }
        if self.members.iter().eq(present.iter()) {
            return;
        }
        let leader = self.is_leader(ctx);
        for id in present {
            if self.members.insert(id) && leader {
                self.owe_flag(!self.static_assignment(ctx));
            }
        }
    }

    /// A raise of the reshard flag is owed (when `owed`), for something other than a
    /// departure: it is made whatever the assignment in view comes to.
    pub(super) fn owe_flag(&mut self, owed: bool) {
        if owed {
            self.flag_owed = true;
            if let Some(seldom) = self.seldom_if() {
                seldom.flag_owed_departures = None;
            }
        }
    }

    /// A raise is owed for the departure of `id`.
    fn owe_flag_for_departure(&mut self, id: &str) {
        if !self.flag_owed {
            self.flag_owed = true;
            self.seldom_mut().flag_owed_departures = Some(vec![id.to_owned()]);
        } else if let Some(departures) =
            self.seldom_if().and_then(|s| s.flag_owed_departures.as_mut())
        {
            departures.push(id.to_owned());
        }
    }

    /// Whether the raise owed is owed only for departures that the assignment in view now
    /// answers, each of them: a reshard made since did. (Seen in 3 × 1 `chaos` seed
    /// 137,794,321 with a first version of a catch-up fix: a departure seen with a flag up
    /// was raised again over a 1 s link after the reshard that answered it, and a catch-up
    /// waited behind that raise, the reshard it asked for and their round trips until the
    /// job was removed.)
    pub(super) fn flag_answered(&self, ctx: &Ctx<'_>) -> bool {
        self.seldom()
            .flag_owed_departures
            .as_ref()
            .is_some_and(|ids| ids.iter().all(|id| self.assignment_current(id, ctx)))
    }

    /// Whether the assignment in view is what a reshard would make now, with `departed` gone
    /// and no reshard pending: the departure needs none. A reshard made after it answered it
    /// already (the view shows changes in the order they committed, and a reshard is fenced
    /// on every instance it gives items to being registered, so none made since gave it
    /// items); so does an instance that owned nothing and whose leaving changes nobody's
    /// items. A raise then is a round trip for nothing, ahead of the fires and catch-ups
    /// queued behind it (3 × 1 `chaos` seed 137,794,321: over a 1 s link, a departure seen
    /// after the reshard that answered it raised the flag again, and with that raise, its
    /// restamp and a leader bid, a catch-up waited 7 s, until the job was removed).
    fn assignment_current(&self, departed: &str, ctx: &Ctx<'_>) -> bool {
        let view = ctx.view;
        let total = self.total();
        if self.flag_up(view)
            || sharding::pending(view, &self.paths)
            || !sharding::items_of(view, &self.paths, departed, total).is_empty()
        {
            return false;
        }
        let eligible = sharding::eligible_instances(view, &self.paths);
        if eligible.is_empty() {
            return false;
        }
        let refs: Vec<&str> = eligible.iter().map(String::as_str).collect();
        let strategy = self.config.job_sharding_strategy_type.as_deref();
        let Ok(assignment) = self.settings.strategies.shard(strategy, self.job(), &refs, total)
        else {
            return false;
        };
        let mut owner_of = vec![None; total as usize];
        for (id, items) in assignment.iter() {
            for &n in items {
                if let Some(slot) = owner_of.get_mut(n as usize) {
                    *slot = Some(id);
                }
            }
        }
        (0..total).zip(owner_of).all(|(n, want)| {
            let owner = view.get(&self.paths.item_node(n, ItemNode::Instance));
            want.is_some_and(|id| owner.is_some_and(|o| o.data == id.as_bytes()))
        })
    }

    /// `staticSharding` (as in ElasticJob): once items are assigned, instances coming and
    /// going, server changes and the reconcile leave the assignment alone (a count or strategy
    /// change still reshards, and failover still re-runs what a departed instance was
    /// running). For fixed instance ids that come back, say one per host.
    ///
    /// An assignment of another count is not one to keep: a count changed while no instance
    /// ran the job (nobody saw the change to reshard for it) left items without an owner, or
    /// owners of items beyond the count, for good (1 × 1 `chaos` seed 170,878,543 of a job
    /// file with a static job: the count went from 5 to 4 while its only instance had stopped
    /// the job, and item 4 kept its owner to the end).
    pub(super) fn static_assignment(&self, ctx: &Ctx<'_>) -> bool {
        self.config.static_sharding
            && ctx.view.has_child_nodes(&self.paths.sharding())
            && self.assignment_of_the_count(ctx)
    }

    /// Whether the owner nodes are of the configured count: every item below it owned, none
    /// beyond it. A node the view does not cover yet (a narrow watch made for a count changed
    /// since) is left to the look that will cover it.
    fn assignment_of_the_count(&self, ctx: &Ctx<'_>) -> bool {
        let total = self.total();
        let owned = |n: u32| {
            let path = self.paths.item_node(n, ItemNode::Instance);
            if ctx.view.covers(&path) {
                ctx.view.get(&path).is_some_and(|owner| !owner.data.is_empty())
            } else {
                n < total
            }
        };
        let numbered = |name: &String| name.parse::<u32>().ok();
        (0..total).all(owned)
            && ctx
                .view
                .children(&self.paths.sharding())
                .iter()
                .filter_map(numbered)
                .all(|n| n < total || !owned(n))
    }

    /// Bids for leadership when the job has no leader, abdicates when owed.
    pub(super) fn leadership_next(&mut self, ctx: &Ctx<'_>) -> Option<Next> {
        let led = self.led(ctx.view);
        if self.abdicate_owed {
            let node = ctx.view.get(&self.paths.leader_instance());
            match node.filter(|n| n.data == self.me.as_bytes()) {
                Some(n) => {
                    let ops =
                        crate::protocol::election::abdication(ctx.view, &self.paths, n.version);
                    return Some(Next::Request(Pending::Abdicate, Request::Txn(ops)));
                }
                None => self.abdicate_owed = false,
            }
        }
        let wanted = self.bid_owed || !led;
        let clock_off = matches!(self.clock_checked, Some((_, false)));
        if wanted
            && !clock_off
            && !self.server_disabled(ctx)
            && self.bid_blocked != Some(ctx.view.revision())
        {
            self.bid_owed = false;
            let request = Request::Txn(crate::protocol::election::bid(&self.paths, &self.me));
            return Some(Next::Request(Pending::Bid(BidStep::Create), request));
        }
        None
    }

    pub(super) fn on_bid_reply(
        &mut self,
        step: BidStep,
        result: Result<Reply, RegistryError>,
        ctx: &Ctx<'_>,
    ) {
        let path = self.paths.leader_instance();
        match (step, result) {
            (BidStep::Create | BidStep::Replace, Ok(_)) => {
                self.bid_blocked = None;
                // What garbage the job's nodes hold is the new leader's to report and repair.
                self.audit_owed = true;
                self.audit_wide = true;
                // With failover off, what failover left (queued entries, ledgers) is stale: the
                // leader clears it when failover is turned off, but that leader may have been
                // gone then.
                self.clear_queue_owed |= !self.failover_enabled();
                self.leader_seen = Some(self.me.to_string());
                if !self.was_leader {
                    let job = self.job().to_owned();
                    self.emit(SchedulerEvent::LeaderElected { job });
                }
                self.was_leader = true;
            }
            // The view may not show the winner yet: ask the registry once.
            (BidStep::Create, Err(e))
                if matches!(
                    e.transaction_failure(),
                    Some((0, RegistryError::NodeExists { .. }))
                ) =>
            {
                self.then = Some(Box::new((Pending::Bid(BidStep::Read), Request::Get(path))));
            }
            // The job's first election: `leader/election` is not there yet (a transaction
            // creates no parents). Made, and the bid made again.
            (BidStep::Create, Err(e))
                if matches!(e.transaction_failure(), Some((_, RegistryError::NoNode { .. }))) =>
            {
                let ensure = Request::Ensure(self.paths.leader_election());
                self.then = Some(Box::new((Pending::Bid(BidStep::Ensure), ensure)));
            }
            (BidStep::Ensure, Ok(_) | Err(RegistryError::NodeExists { .. })) => {
                self.bid_owed = true;
            }
            (BidStep::Read, Ok(Reply::Node(Some(holder)))) if holder.data == self.me.as_bytes() => {
                // A node with our id that we did not just create belongs to an earlier session
                // of this id (a restarted process, before the old session timed out).
                // Leadership must live in the current session: replace it.
                let mut ops = vec![TxnOp::delete(path.clone(), Some(holder.version))];
                ops.extend(crate::protocol::election::bid(&self.paths, &self.me));
                self.then = Some(Box::new((Pending::Bid(BidStep::Replace), Request::Txn(ops))));
            }
            // Someone else leads (or the node went: the next look bids again).
            (BidStep::Read, Ok(Reply::Node(Some(_)))) => {
                self.bid_blocked = Some(ctx.view.revision())
            }
            (BidStep::Read, Ok(_)) => {}
            (BidStep::Replace, Err(e)) if crate::protocol::failover::is_lost_race(&e) => {
                self.bid_blocked = Some(ctx.view.revision());
            }
            (_, Err(e)) => self.failed(&e),
        }
    }

    /// Raises the reshard flag as the view shows it: a versioned write over it, or a create
    /// (with its parents: the first raise of a job).
    /// With the times written when the flag then holds ours (not an earlier raise's).
    pub(super) fn raise_request(&self, ctx: &Ctx<'_>) -> (Option<Stamp>, Request) {
        let path = self.paths.sharding_necessary();
        let stamp = self.stamp(ctx);
        match crate::protocol::detail::read(ctx.view, &self.paths, Detailed::Flag) {
            Some((_, detail)) => (
                (sharding::raised_time(ctx.view, &self.paths, detail, stamp.at) == stamp.at)
                    .then_some(stamp),
                Request::Txn(sharding::raise(ctx.view, &self.paths, stamp.at, stamp.moved_from)),
            ),
            // Registration ensured `leader/sharding` (the flag's detail is written beside it, in
            // one transaction).
            None => (
                Some(stamp),
                Request::Txn(vec![TxnOp::create(path, stamp.text(), CreateMode::Persistent)]),
            ),
        }
    }

    /// The times a raise sent now writes: [`Self::flag_time`], and the time the raise was
    /// first owed, by the same clock, if that was earlier. A raise put off behind our own
    /// transactions (an end over a slow link, a clock comparison) lets fires pass meanwhile
    /// under the old assignment, as a raise moved to its commit time does (1 × 3 `chaos`
    /// 47,994,016: owed at 118 s, sent at 120 s, the 120 s fire ran without the two items a
    /// count change had added): the reshard owes the last one the catch-up of those items
    /// (`failover::owed_on_reshard`).
    fn stamp(&self, ctx: &Ctx<'_>) -> Stamp {
        let at = self.flag_time(ctx);
        // Measured on this clock and carried over to the stamp's (the registry's, when this
        // clock was found off); a clock set back since leaves nothing earlier.
        let moved_from = self
            .flag_noticed_ms
            .map(|noticed| at - (ctx.now_ms - noticed))
            .filter(|&from| from < at);
        Stamp { at, moved_from }
    }

    /// The time a raise writes into the flag: fires after it wait for the reshard, the others'
    /// fires before it ran under the old assignment. A clock last found off writes the
    /// registry's time as it then differed: its own would put the raise seconds before (or
    /// after) the fires the others ran meanwhile, and a late fire of ours would mark every
    /// item's misfire for a fire they ran.
    fn flag_time(&self, ctx: &Ctx<'_>) -> i64 {
        match self.clock_checked {
            Some((_, false)) if self.flag_clock_fresh => ctx.now_ms + self.registry_offset_ms,
            _ => ctx.now_ms,
        }
    }

    /// Before a raise: a clock last found off is compared again (it may have been set right
    /// since, and the offset measured then would stamp the raise that far off the other way;
    /// by this clock no comparison can tell how old it is, as the clock jumped). With clock
    /// checks on (`maxTimeDiffSeconds`), so is a clock found good only before now: a jump
    /// since (set back 8 s unseen) would stamp the raise before fires the others ran under
    /// the old assignment, and the reshard would have them run again (chaos seed
    /// 3,896,835,122). Raises are rare: one more request each.
    pub(super) fn flag_clock_unchecked(&self, ctx: &Ctx<'_>) -> Option<Next> {
        let checks_on = self.config.max_time_diff().is_some();
        let compare = || Some(Next::Request(Pending::FlagClock, Request::RegistryTime));
        match self.clock_checked {
            Some((_, false)) if !self.flag_clock_fresh => compare(),
            Some((at, true)) if checks_on && at != ctx.now_ms => compare(),
            None if checks_on => compare(),
            _ => None,
        }
    }

    pub(super) fn on_flag_reply(
        &mut self,
        step: FlagStep,
        result: Result<Reply, RegistryError>,
        ctx: &Ctx<'_>,
    ) {
        let read =
            || (Pending::RaiseFlag(FlagStep::Read), Request::Get(self.paths.sharding_necessary()));
        let stamp = self.stamp(ctx);
        let now = stamp.at;
        match (step, result) {
            (FlagStep::FromView { stamped } | FlagStep::OverRead { stamped }, Ok(reply)) => {
                self.flag_owed = false;
                self.flag_attempts = 0;
                // Fires after the flag's time wait for the reshard, the ones before run under
                // the assignment they were due under: an instance that did not see the flag at
                // a fire (it was not committed yet) ran it so. A raise that committed later
                // than the time it wrote (a slow link) moves the time to when it committed.
                let version = match &reply {
                    Reply::Created => Some(0),
                    Reply::Txn(results) => results.iter().find_map(|r| match r {
                        crate::registry::TxnResult::Set { version } => Some(*version),
                        crate::registry::TxnResult::Created { .. } => Some(0),
                        _ => None,
                    }),
                    _ => None,
                };
                if let (Some(written), Some(version)) = (stamped, version) {
                    if now > written.at {
                        // The time written (or the earlier one it was moved from already)
                        // stays beside: the fires between the two ran under the old
                        // assignment, which lacks any item a count change added, and the
                        // reshard owes those items the last one's catch-up.
                        let from = written.moved_from.unwrap_or(written.at);
                        let restamp = Restamp { written: written.at, to: now, from, attempts: 0 };
                        let ops = vec![TxnOp::set(
                            self.paths.sharding_necessary(),
                            crate::protocol::records::flag_text(now, Some(from)),
                            Some(version),
                        )];
                        self.then = Some(Box::new((
                            Pending::RaiseFlag(FlagStep::Restamp(restamp)),
                            Request::Txn(ops),
                        )));
                    }
                }
            }
            // Another write over the flag came first: a raise over it by an instance that saw
            // the time our raise wrote, and kept it (the earliest time a change is owed since
            // stays). The fires between that time and our commit still ran under the old
            // assignment, unseen by whoever holds them: the move is made again while the flag
            // holds the time we wrote (3 x 2 `failover` seed 2,047,788,398: two raises over
            // ours, as a partitioned instance came back, beat the restamp over a slow link;
            // the reshard judged the fire of 62 s, which three items ran before the late
            // raise committed, by its time of 59.3 s, and they ran it again).
            (FlagStep::Restamp(restamp), Err(e))
                if restamp.attempts < RESTAMP_ATTEMPTS
                    && matches!(
                        e.transaction_failure(),
                        Some((_, RegistryError::BadVersion { .. }))
                    ) =>
            {
                let request = Request::Get(self.paths.sharding_necessary());
                self.then =
                    Some(Box::new((Pending::RaiseFlag(FlagStep::RestampRead(restamp)), request)));
            }
            // The reshard committed meanwhile (the flag is gone), or it was moved: done.
            (FlagStep::Restamp(_), _) => {}
            (FlagStep::RestampRead(restamp), Ok(Reply::Node(Some(flag)))) => {
                let step = FlagStep::RestampReadDetail { restamp, version: flag.version };
                let request = Request::Get(self.paths.detail(Detailed::Flag));
                self.then = Some(Box::new((Pending::RaiseFlag(step), request)));
            }
            (FlagStep::RestampReadDetail { restamp, version }, Ok(Reply::Node(Some(detail)))) => {
                let holds_ours = crate::protocol::records::parse_flag("", &detail.data)
                    .is_ok_and(|t| t == Some(restamp.written));
                if holds_ours {
                    let text = crate::protocol::records::flag_text(restamp.to, Some(restamp.from));
                    let ops = vec![
                        TxnOp::set(self.paths.sharding_necessary(), Vec::new(), Some(version)),
                        TxnOp::set(self.paths.detail(Detailed::Flag), text, Some(detail.version)),
                    ];
                    let next = Restamp { attempts: restamp.attempts + 1, ..restamp };
                    self.then = Some(Box::new((
                        Pending::RaiseFlag(FlagStep::Restamp(next)),
                        Request::Txn(ops),
                    )));
                }
            }
            // The flag or its detail is gone (the reshard committed): nothing to move.
            (FlagStep::RestampRead(_) | FlagStep::RestampReadDetail { .. }, Ok(_)) => {}
            // The view was behind: whoever wrote the flag may have raised it before the change
            // we raise it for. Read it, and raise over what is there.
            (FlagStep::FromView { .. }, Err(e))
                if e.transaction_failure().is_some() || e.is_node_exists() =>
            {
                self.then = Some(Box::new(read()));
            }
            // Lost to a raise that came after our read, so after our change: done.
            (FlagStep::OverRead { .. }, Err(e))
                if e.is_node_exists()
                    || matches!(
                        e.transaction_failure(),
                        Some((
                            _,
                            RegistryError::BadVersion { .. } | RegistryError::NodeExists { .. }
                        ))
                    ) =>
            {
                self.flag_owed = false;
                self.flag_attempts = 0;
            }
            // Deleted under us: a reshard committed, maybe without our change. Raise it again.
            (FlagStep::OverRead { .. }, Err(e)) if e.transaction_failure().is_some() => {
                self.flag_attempts += 1;
                if self.flag_attempts >= FLAG_ATTEMPTS {
                    self.flag_attempts = 0;
                    let what =
                        format!("raising the reshard flag {}", self.paths.sharding_necessary());
                    let job = self.job().to_owned();
                    self.errored = true;
                    self.emit(SchedulerEvent::Error {
                        job,
                        message: format!("{what}: gave up after repeated concurrent changes of the node; retried on the next event"),
                    });
                } else {
                    self.then = Some(Box::new(read()));
                }
            }
            // The flag is there: read its detail, written with it (read after it, so no older
            // than the flag's version, which the raise is fenced on).
            (FlagStep::Read, Ok(Reply::Node(Some(flag)))) => {
                let step = FlagStep::ReadDetail { version: flag.version };
                let request = Request::Get(self.paths.detail(Detailed::Flag));
                self.then = Some(Box::new((Pending::RaiseFlag(step), request)));
            }
            (FlagStep::ReadDetail { version }, Ok(Reply::Node(detail))) => {
                let detail_version = detail.as_ref().map(|d| d.version);
                let data = detail.map(|d| d.data).unwrap_or_default();
                let stamped = (sharding::raised_time(ctx.view, &self.paths, &data, now) == now)
                    .then_some(stamp);
                let ops = sharding::raise_over(
                    ctx.view,
                    &self.paths,
                    &data,
                    (version, detail_version),
                    now,
                    stamp.moved_from,
                );
                let step = FlagStep::OverRead { stamped };
                self.then = Some(Box::new((Pending::RaiseFlag(step), Request::Txn(ops))));
            }
            (FlagStep::Read, Ok(Reply::Node(None))) => {
                let path = self.paths.sharding_necessary();
                let ops = vec![TxnOp::create(path, stamp.text(), CreateMode::Persistent)];
                let step = FlagStep::OverRead { stamped: Some(stamp) };
                self.then = Some(Box::new((Pending::RaiseFlag(step), Request::Txn(ops))));
            }
            (_, Ok(_)) => {}
            (_, Err(e)) => self.failed(&e),
        }
    }

    /// Confirming that our instance node is really gone (an operator's shutdown).
    pub(super) fn on_confirm_gone(&mut self, result: Result<Reply, RegistryError>, ctx: &Ctx<'_>) {
        match result {
            Ok(Reply::Node(None))
                if self.registration.registered_in() == Some(ctx.sessions_lost) =>
            {
                // The survivors take our running items over at once: cancel them now.
                self.cancel_in_flight();
                self.on_stop("instance node removed by an operator".to_owned(), ctx);
            }
            Ok(_) => {}
            Err(e) => self.failed(&e),
        }
    }

    /// Small duties: confirming an operator's shutdown, manual triggers, clearing the queue.
    pub(super) fn housekeeping_next(&mut self, ctx: &Ctx<'_>) -> Option<Next> {
        if let Some(next) = self.passed_fires_next(ctx) {
            return Some(next);
        }
        if self.confirm_gone_owed {
            self.confirm_gone_owed = false;
            let request = Request::Get(self.paths.instance(&self.me));
            return Some(Next::Request(Pending::ConfirmGone, request));
        }
        if self.trigger_owed {
            let trigger = self.paths.trigger(&self.me);
            if !ctx.view.exists(&trigger) {
                self.trigger_owed = false;
            } else {
                let ops = vec![TxnOp::delete(trigger, None)];
                return Some(Next::Request(Pending::DeleteTrigger, Request::Txn(ops)));
            }
        }
        if !self.seldom().stray_failover.is_empty() {
            let ops = self.stray_failover_markers(ctx);
            if !ops.is_empty() {
                return Some(Next::Request(Pending::DropStrayFailover, Request::Txn(ops)));
            }
        }
        if self.own_markers_owed {
            // Not while runs a lost session left are returning (their markers are theirs).
            if self.failover_enabled() {
                self.own_markers_owed = false;
            } else if !self.in_flight.as_ref().is_some_and(|f| f.cancelled) {
                self.own_markers_owed = false;
                let ops = self.stale_own_markers(ctx);
                if !ops.is_empty() {
                    return Some(Next::Request(Pending::DropOwnMarkers, Request::Txn(ops)));
                }
            }
        }
        if self.ledger_mark_owed {
            // A ledger written since failover was turned on (by a start, or by us) is current.
            let current = ledger_of(ctx.view, &self.paths, &self.me)
                .and_then(Result::ok)
                .is_some_and(|l| l.last_fire_ms.is_some_and(|last| last >= self.failover_on_ms));
            if !self.failover_enabled() || current {
                self.ledger_mark_owed = false;
            } else if let Some(next) = self.ensure_directories(ctx) {
                // Failover was never on: what it needs is missing (registration makes it).
                return Some(next);
            } else if !self.config.misfire {
                self.ledger_mark_owed = false;
            } else {
                // What an earlier time with failover on left in it is stale (nothing was
                // recorded while it was off, and the leader that was to clear it may have
                // been gone): it is replaced. The mark is a time by this clock, which a
                // reshard compares with fire times: with clock checks on the clock is
                // compared first, and one too far off marks by the registry's time (chaos
                // seed 2,088,254,478 at 2 × 4: a clock 8 s behind marked 105.3 s at 113.3 s,
                // before the 110 s fire this instance had run while failover was off, and
                // the next reshard owed that fire again as a catch-up).
                let now = match self.clock_unchecked_now(ctx) {
                    Some(Some(next)) => return Some(next),
                    Some(None) => ctx.now_ms + self.registry_offset_ms,
                    None => ctx.now_ms,
                };
                let mark = Ledger { last_fire_ms: Some(now - 1), ..Ledger::default() };
                let op = execution::write_ledger(ctx.view, &self.paths, &self.me, &mark);
                return Some(Next::Request(Pending::MarkLedger, Request::Txn(vec![op])));
            }
        }
        if self.clear_queue_owed && !self.seldom().clear_queue_race.holds(ctx.view.revision()) {
            let entries = ctx.view.children(&self.paths.failover_items());
            let ledgers = ctx.view.children(&self.paths.ledgers());
            let marks = failover::forget_departed(ctx.view, &self.paths);
            if (entries.is_empty() && ledgers.is_empty() && marks.is_none()) || !self.is_leader(ctx)
            {
                self.clear_queue_owed = false;
            } else {
                let entries = entries.iter().flat_map(|e| match e.parse::<u32>() {
                    Ok(item) => failover::remove_entry(ctx.view, &self.paths, item, None),
                    Err(_) => {
                        let path = format!("{}/{e}", self.paths.failover_items());
                        vec![TxnOp::delete(path, None)]
                    }
                });
                let ledgers = ledgers
                    .iter()
                    .map(|l| TxnOp::delete(format!("{}/{l}", self.paths.ledgers()), None));
                let ops = entries.chain(ledgers).chain(marks).collect();
                self.seldom_mut().clear_queue_race.sent(ctx.view.revision());
                return Some(Next::Request(Pending::ClearQueue, Request::Txn(ops)));
            }
        }
        None
    }
}

/// How often a raise of the reshard flag is retried against concurrent writers.
const FLAG_ATTEMPTS: u32 = 16;

/// How many times a restamp is made again after losing to writes over the flag that kept the
/// time our raise wrote (each loss is a raise by another instance: a handful at most).
const RESTAMP_ATTEMPTS: u32 = 4;

/// How long a registration after a lost session waits for the watch's resync: it normally
/// comes within milliseconds; one that came before the session event is not waited for long.
const RESYNC_WAIT_MS: i64 = 5_000;
