//! One job on one instance, as a pure state machine: [`JobProtocol::step`] takes an [`Input`]
//! (a fire falling due, a change of the view, a session event, the reply to a registry request,
//! items that returned, a wait's deadline, a stop) with the view and the time, and returns the
//! [`Action`]s to perform (registry requests, timers, launches, cancellations, events).
//!
//! The machine is *level-triggered*: after every input it looks at what it owes, in a fixed
//! order of priority, and asks for the next registry request that moves it forward (at most one
//! outstanding at a time, so the job's writes apply in the order it decided them). Waits
//! (a follower waiting for the leader's reshard, a leader waiting for running items, a view
//! that must catch up with a raced write, a stop waiting for items to return) are states with a
//! deadline the runtime arms, never sleeps.
//!
//! Priorities, highest first:
//! 1. stopping (the stop's own steps);
//! 2. with the session down: nothing (fires are skipped as disconnected);
//! 3. registration (server node, instance node, the directories, what an earlier session of
//!    this instance left, the reshard flag, a leadership bid);
//! 4. finishing items that returned (fenced removal of their markers);
//! 5. the reshard flag, then departures (queueing what a vanished instance left);
//! 6. leadership: bid when there is no leader, abdicate when our server was disabled;
//! 7. manual triggers, clearing the failover queue;
//! 8. the distribute-once records of started and completed fires;
//! 9. the fire being handled, then the next due fire;
//! 10. when idle: failover claims and runs, then a misfire catch-up, then a pending trigger.

mod changes;
mod fire;
mod io;
mod leave;
mod members;
mod once;
mod orphans;
mod register;
mod repair;
mod scope;
mod seldom;
mod servers;
#[cfg(test)]
mod transcripts;

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

pub(crate) use io::fire_of;
pub use io::{Action, Input, Launch, LaunchId, OpId, Reply, Request};
pub use scope::{narrow_scope, JobScope};

use crate::config::{JobConfig, KnownTypes};
use crate::cron::CronSchedule;
use crate::events::{FireKind, SchedulerEvent, SkipReason};
use crate::layout::JobPaths;
use crate::registry::{RegistryError, TxnOp};
use crate::sharding::ShardingStrategies;

use super::execution::Held;
use super::records::Garbage;
use super::view::View;
use fire::FireState;
use leave::StopState;
use once::OnceRecord;
use register::Registration;

/// What the protocol needs to know beyond the job's config.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How long a fire waits for a reshard (followers) or for running items to end (leader).
    pub sharding_timeout_ms: i64,
    /// How long a stopping job waits for its running items before cancelling them.
    pub shutdown_timeout_ms: i64,
    /// How long cancelled items get to return after the shutdown deadline.
    pub cancel_grace_ms: i64,
    /// How long a decision that lost a race waits for the view to show what it lost to.
    pub catch_up_ms: i64,
    /// Whether distribute-once listeners are registered (their records cost registry writes).
    pub once_listeners: bool,
    /// How long a server node no live instance has the IP of stays before the leader removes
    /// it; `None` keeps them all, as ElasticJob does.
    pub stale_server_grace_ms: Option<i64>,
    pub strategies: ShardingStrategies,
    /// The strategy and error-handler names configs may use here.
    pub known: KnownTypes,
    /// Fence decisions on the absence of the nodes they relied on being absent
    /// ([`TxnOp::Absent`]): where views can show some entries behind others
    /// (`Capability::views_in_order` false, etcd's), a node missing from the view may exist.
    pub fence_absent: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            sharding_timeout_ms: 30_000,
            shutdown_timeout_ms: 30_000,
            cancel_grace_ms: 1_000,
            catch_up_ms: 200,
            once_listeners: false,
            stale_server_grace_ms: Some(DEFAULT_STALE_SERVER_GRACE_MS),
            strategies: ShardingStrategies::default(),
            known: KnownTypes::default(),
            fence_absent: false,
        }
    }
}

/// How long an unused server node stays by default: ten minutes.
pub const DEFAULT_STALE_SERVER_GRACE_MS: i64 = 600_000;

/// What every step reads besides its input.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    /// The namespace as this process knows it (the watch, plus its own writes).
    pub view: &'a View,
    /// The time, in epoch milliseconds.
    pub now_ms: i64,
    /// How many of this client's sessions ended (expired or were given up as lost) so far: a
    /// change tells an instance node gone with the session from one an operator deleted.
    pub sessions_lost: u64,
}

/// The outcome of looking for the next thing to do.
enum Next {
    /// Ask the registry for this, and wait for the reply.
    Request(Pending, Request),
    /// Something changed without a request: look again.
    Again,
    /// Nothing to do until the next input.
    Idle,
}

/// Why a request is outstanding: what its reply continues.
#[derive(Debug)]
enum Pending {
    Register(register::Step),
    RaiseFlag(FlagStep),
    Queue {
        /// The departed instance, and the view revision its queue was computed from.
        dead: Option<(String, u64)>,
    },
    Bid(BidStep),
    Abdicate,
    Finish(Vec<Held>),
    DeleteTrigger,
    ClearQueue,
    /// The ledger's mark written when failover was turned on.
    MarkLedger,
    /// The removal of a server node no live instance uses.
    DeleteServer,
    /// Failover was turned off: our markers of runs nobody will run again go.
    DropOwnMarkers,
    /// Our `failover` markers of claimed runs whose `running` marker was lost.
    DropStrayFailover,
    /// The clock compared again before a raise of the reshard flag.
    FlagClock,
    ConfirmGone,
    Fire(fire::Step),
    /// The claims of one transaction (our share of the failover queue, or what of it can
    /// be claimed now).
    Claim(Vec<orphans::Taken>),
    DropEntry,
    /// The registry's time, before a departure's fires are counted by this clock.
    SkewCheck,
    Once(once::Step),
    Leave(leave::Step),
    Repair(repair::Repair),
}

#[derive(Debug, Clone, Copy)]
enum FlagStep {
    /// A versioned write from the view; with the times written, when the flag now holds ours.
    FromView { stamped: Option<Stamp> },
    /// The view proved behind: read the flag.
    Read,
    /// The flag is there at `version`: read its detail (its raise time).
    ReadDetail { version: u64 },
    /// A versioned write over what the read returned (the same).
    OverRead { stamped: Option<Stamp> },
    /// The raise committed later than the time it wrote: the time moved to the commit's.
    Restamp(Restamp),
    /// The restamp lost to a write over the flag (another instance's raise over it, which
    /// keeps the time it holds): read the flag.
    RestampRead(Restamp),
    /// The flag is there at `version`: read its detail; while it still holds the time our
    /// raise wrote, the restamp is made again over what was read.
    RestampReadDetail { restamp: Restamp, version: u64 },
}

/// A restamp of our raise: the time it wrote, and the times it moves the flag to (its commit's
/// and, beside it, the one it was owed since).
#[derive(Debug, Clone, Copy)]
struct Restamp {
    written: i64,
    to: i64,
    from: i64,
    attempts: u32,
}

/// The times a raise of ours wrote into the flag: the raise's, and the earlier one it was
/// owed since, if it was sent later (`records::flag_text`).
#[derive(Debug, Clone, Copy)]
struct Stamp {
    at: i64,
    moved_from: Option<i64>,
}

impl Stamp {
    fn text(self) -> String {
        crate::protocol::records::flag_text(self.at, self.moved_from)
    }
}

#[derive(Debug, Clone, Copy)]
enum BidStep {
    Create,
    /// The node exists: read whose it is (the view may not show the winner yet).
    Read,
    /// It is ours, from an earlier session of this id: replace it.
    Replace,
    /// The parent of the leader node, for the job's first election.
    Ensure,
}

/// Items running here.
/// A request that may lose a race to another writer, decided again once the view moved past
/// the revision it was decided on: that revision, not the one its failure comes back at (the
/// view may show the other writer's change first, and then nothing moves it again).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct RaceFence {
    sent_at: Option<u64>,
    lost_at: Option<u64>,
}

impl RaceFence {
    /// No request sent yet.
    pub const NONE: RaceFence = RaceFence { sent_at: None, lost_at: None };

    /// The request goes out, decided on the view at `revision`.
    pub fn sent(&mut self, revision: u64) {
        self.sent_at = Some(revision);
    }

    /// Its answer came back: lost to a race, or not.
    pub fn answered(&mut self, lost: bool) {
        self.lost_at = self.sent_at.filter(|_| lost);
    }

    /// Whether the view at `revision` is still the one the lost request was decided on.
    pub fn holds(&self, revision: u64) -> bool {
        self.lost_at == Some(revision)
    }
}

#[derive(Debug)]
struct InFlight {
    launch: LaunchId,
    fire_ms: i64,
    /// Items that answer another fire than `fire_ms` (see [`Launch::item_fires`]).
    item_fires: Vec<(u32, i64)>,
    /// The items it runs (with `monitorExecution`, those of `held`).
    items: Vec<u32>,
    /// The markers this run holds (empty without `monitorExecution`).
    held: Vec<Held>,
    /// The run was told to stop (this instance may have lost its items): whatever its items
    /// return, they may not have done their work, so they count as interrupted.
    cancelled: bool,
}

/// One job on one instance; see the module documentation.
#[derive(Debug)]
pub struct JobProtocol {
    /// This instance's id and server IP, shared by the jobs of the process.
    me: Arc<str>,
    ip: Arc<str>,
    paths: JobPaths,
    config: JobConfig,
    schedule: Option<CronSchedule>,
    /// Shared by the jobs of a scheduler.
    settings: Arc<Settings>,
    actions: Vec<Action>,
    next_id: u64,
    /// Boxed, as the other states a job is in only now and then (a fire, a run, a split):
    /// the protocol of every job is held in memory, and most of them are idle.
    outstanding: Option<Box<(OpId, Pending)>>,
    /// How the outstanding transaction was split to write detailed nodes beside ElasticJob's
    /// empty ones (`protocol::detail`): its reply is mapped back before it is read.
    split: Option<Box<crate::protocol::detail::Split>>,
    /// A request failed since the last input: what it was for is retried on the next input,
    /// not at once (a registry that fails would otherwise be asked again in a loop).
    errored: bool,
    connected: bool,
    registration: Registration,
    /// The instances of the job as last seen, to tell joins and departures from data changes.
    members: members::Members,
    /// Instances seen leaving whose leftovers are not queued yet.
    departed: BTreeSet<String>,
    /// An instance node changed (or the view was replaced) since membership was last compared.
    membership_changed: bool,
    flag_owed: bool,
    bid_owed: bool,
    abdicate_owed: bool,
    trigger_owed: bool,
    clear_queue_owed: bool,
    /// Failover was turned on: the directories it needs, and our ledger's mark (from when on
    /// our missed fires are owed), are to be written.
    ledger_mark_owed: bool,
    /// Failover was turned off: our markers of runs nobody will run again are to go.
    own_markers_owed: bool,
    /// The cron changed while a clock check was set: the first fire the old cron had armed,
    /// and that cron, until a comparison with the registry's clock says whether this clock
    /// runs behind (and so whether the registry has passed fires it will now never reach).
    passed_fires_owed: Option<Box<(i64, CronSchedule)>>,
    /// When failover was last turned on (the mark's time).
    failover_on_ms: i64,
    /// Leader: server nodes no live instance uses, with since when (`servers`).
    stale_servers: std::collections::BTreeMap<String, i64>,
    /// Membership, a server node or leadership changed, or a grace ran out: look at the
    /// server nodes again.
    servers_audit_owed: bool,
    confirm_gone_owed: bool,
    /// Fires that fell due and wait to be handled, in order.
    due: VecDeque<(i64, FireKind, Option<Vec<u32>>)>,
    fire: Option<Box<FireState>>,
    in_flight: Option<Box<InFlight>>,
    /// Markers of items that returned, still to remove.
    finishing: Vec<Held>,
    /// A session was lost: until the watch resyncs (or this deadline), the view is from
    /// before the gap, and registration waits.
    resync_owed: Option<i64>,
    /// The session was lost or expired since the last `Connected`.
    session_gone: bool,
    /// The clock was compared for the raise of the reshard flag under way (see
    /// `flag_time`).
    flag_clock_fresh: bool,
    /// When (by this clock) the raise under way was first owed: a raise sent later (behind a
    /// transaction of ours, or a clock comparison, over a slow link) writes that time beside
    /// its own as the one it was moved from (see `changes::raise_request`).
    flag_noticed_ms: Option<i64>,
    once: VecDeque<OnceRecord>,
    manual_pending: bool,
    stop: Option<Box<StopState>>,
    /// The fire time the timer is armed for, until its fire is handled.
    armed_fire: Option<i64>,
    /// The latest scheduled fire this instance started items for, or marked misfired (its
    /// catch-up runs it): after its clock went back, the fires up to it are not run again.
    last_scheduled_start: Option<i64>,
    /// After the first registration of an instance without a ledger, until its first fire
    /// comes: from when on its fire path took over. A reshard that gave it items before then,
    /// shown only now, answers the latest fire before then, which is ours to handle
    /// (`register::late_reshard`).
    resume_window: Option<i64>,
    /// The deadline of the wait armed with the runtime.
    armed_wait: Option<i64>,
    was_leader: bool,
    /// The next request of a sequence a reply started (a read after a lost race, a replace
    /// after a read), asked for before anything else.
    then: Option<Box<(Pending, Request)>>,
    /// A bid lost to a leader the view did not show yet: no new bid until the view changes.
    bid_blocked: Option<u64>,
    /// Every entry of our share waited for a run at this view revision, or a stale entry's
    /// drop was answered at it: the queue is looked at again once the view changes.
    claim_blocked: Option<u64>,
    /// The claim lost its race (`Seldom::claim_race`) on a version or a node gone, which the
    /// watch shows within a round trip; not on a node that exists, which may be a lingering
    /// session's for as long as that session lasts.
    claim_behind: bool,
    /// A catch-up that could not start: none again until the view changes.
    catch_up_blocked: Option<u64>,
    /// The job's own view revision and item count at which the idle look found no catch-up
    /// owed: the answer depends on nothing else, and every idle step asks
    /// (`catch_up_owed_now`).
    no_catch_up: Option<(u64, u32)>,
    /// The job's shape revision and item count at which none of this instance's items had a
    /// misfire marker: no catch-up is owed until one shows (`catch_up_owed_now`).
    no_misfires: Option<(u64, u32)>,
    /// The view's shape revision at which the owner nodes and the record of the assignment
    /// were first seen to disagree on this instance's items, and until when fires wait for
    /// them to agree (`fire::SETTLE_MS`).
    settling: Option<(u64, i64)>,
    /// The view's shape revision and item count at which `fire::assignment_unsettled` was
    /// last answered, and its answer.
    assignment_checked: Option<((u64, u32), bool)>,
    /// The last comparison of this clock with the registry's (with `maxTimeDiffSeconds` set):
    /// when, and whether it was within the bound.
    clock_checked: Option<(i64, bool)>,
    /// The registry's time minus ours, at the last comparison.
    registry_offset_ms: i64,
    flag_attempts: u32,
    /// What a job holds only after something went wrong (`seldom`): `None` until then.
    seldom: Option<Box<seldom::Seldom>>,
    /// Every node is to be looked at for garbage (the view was replaced, leadership won).
    audit_owed: bool,
    /// The audit owed is a new leader's (or a registration's): of every node of the job, so
    /// the leader waits for the job's whole subtree first. An audit after a resync looks at
    /// what the view covers.
    audit_wide: bool,
    /// The scope last found covered by the view (`scope`).
    granted: scope::Granted,
    /// The last look found the view not covering the scope the job needs.
    scope_wait: bool,
    /// Changes came while the view did not cover the job's scope: everything is looked at
    /// again once it does.
    resync_deferred: bool,
    /// The live instance the leader node last named: when garbage replaces our own id there,
    /// the node is still ours (an ephemeral of our session), and we rewrite it.
    leader_seen: Option<String>,
    /// The version of the `config` node last evaluated, so that each stored version is judged
    /// once however many notifications point at it.
    config_version: Option<u64>,
    /// A fingerprint of stored bytes that read as `config` (`store::fingerprint`): a look at
    /// the `config` node that finds them (each change's, the leader's at every audit) need not
    /// parse them again, a YAML parse being the dearest thing a registration does.
    config_stored: Option<u64>,
    /// The last of the config values the view logged as replaced that this job looked at
    /// ([`crate::protocol::view::View::replaced_configs`]).
    config_log_seen: u64,
    launches: u64,
}

impl JobProtocol {
    /// The protocol of `config`'s job for instance `me` on server `ip`. The config is the one
    /// the job runs with (already published); the job registers on [`Input::Start`].
    pub fn new(
        me: impl Into<Arc<str>>,
        ip: impl Into<Arc<str>>,
        config: JobConfig,
        schedule: Option<CronSchedule>,
        settings: impl Into<Arc<Settings>>,
    ) -> Self {
        JobProtocol {
            me: me.into(),
            ip: ip.into(),
            paths: JobPaths::new(&config.job_name),
            config,
            schedule,
            settings: settings.into(),
            actions: Vec::new(),
            next_id: 0,
            outstanding: None,
            split: None,
            errored: false,
            connected: true,
            registration: Registration::default(),
            members: members::Members::default(),
            departed: BTreeSet::new(),
            membership_changed: false,
            flag_owed: false,
            bid_owed: false,
            abdicate_owed: false,
            trigger_owed: false,
            clear_queue_owed: false,
            ledger_mark_owed: false,
            passed_fires_owed: None,
            own_markers_owed: false,
            failover_on_ms: 0,
            stale_servers: std::collections::BTreeMap::new(),
            servers_audit_owed: false,
            confirm_gone_owed: false,
            due: VecDeque::new(),
            fire: None,
            in_flight: None,
            finishing: Vec::new(),
            flag_clock_fresh: false,
            flag_noticed_ms: None,
            resync_owed: None,
            session_gone: false,
            once: VecDeque::new(),
            manual_pending: false,
            stop: None,
            armed_fire: None,
            last_scheduled_start: None,
            resume_window: None,
            armed_wait: None,
            was_leader: false,
            then: None,
            bid_blocked: None,
            claim_blocked: None,
            claim_behind: false,
            catch_up_blocked: None,
            no_catch_up: None,
            no_misfires: None,
            settling: None,
            assignment_checked: None,
            clock_checked: None,
            registry_offset_ms: 0,
            flag_attempts: 0,
            seldom: None,
            audit_owed: false,
            audit_wide: false,
            granted: scope::Granted::default(),
            scope_wait: false,
            resync_deferred: false,
            leader_seen: None,
            config_version: None,
            config_stored: None,
            config_log_seen: 0,
            launches: 0,
        }
    }

    /// The stored bytes of the config this job runs with have this [`store::fingerprint`] (as
    /// [`store::publish`] left them): a look at the `config` node that finds them need not
    /// parse them.
    ///
    /// [`store::fingerprint`]: crate::config::store::fingerprint
    /// [`store::publish`]: crate::config::store::publish
    #[must_use]
    pub fn with_stored_config(mut self, fingerprint: u64) -> Self {
        self.config_stored = Some(fingerprint);
        self
    }

    /// Whether `data`, the `config` node's bytes, are those that read as the config this job
    /// runs with (no need to parse them).
    fn runs_with_stored(&self, data: &[u8]) -> bool {
        self.config_stored == Some(crate::config::store::fingerprint(data))
    }

    /// The job's name.
    pub fn job(&self) -> &str {
        &self.config.job_name
    }

    /// The instance this protocol runs on.
    pub fn instance(&self) -> &str {
        &self.me
    }

    /// The config the job runs with.
    pub fn config(&self) -> &JobConfig {
        &self.config
    }

    /// Whether the job is registered on this instance (the instance node is written).
    pub fn registered(&self) -> bool {
        self.registration.registered()
    }

    /// The error of the last failed request, if one failed since this was last asked.
    pub fn take_error(&mut self) -> Option<RegistryError> {
        self.seldom_if().and_then(|s| s.last_error.take())
    }

    /// Whether the job waits for the runtime to watch the scope it needs ([`Self::scope`]).
    pub fn awaiting_scope(&self) -> bool {
        self.scope_wait && self.outstanding.is_none()
    }

    /// Whether the job has stopped on this instance.
    pub fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|stop| stop.done())
    }

    /// Takes one input and returns what to do about it.
    pub fn step(&mut self, input: Input, ctx: &Ctx<'_>) -> Vec<Action> {
        if !matches!(input, Input::Reply { .. }) {
            self.errored = false;
        }
        match input {
            Input::Start { added_ms } => self.registration = Registration::starting(added_ms),
            Input::FireDue { fire_ms } => self.on_fire_due(fire_ms, ctx),
            Input::ReconcileDue => self.on_reconcile(ctx),
            Input::WaitDue => {
                self.armed_wait = None;
                self.servers_audit_owed = true;
            }
            Input::Changed(nodes) => {
                for node in nodes {
                    self.on_change_in_scope(node, ctx);
                }
            }
            Input::Resynced => self.on_resync_in_scope(ctx),
            Input::Session(event) => self.on_session(event, ctx),
            Input::Reply { op, result } => self.on_reply(op, result, ctx),
            Input::Done { launch, report } => self.on_done(launch, *report, ctx),
            Input::Stop { reason } => self.on_stop(reason, ctx),
            Input::ClockWentBack => self.on_clock_back(ctx),
        }
        self.registration.settle(ctx.view);
        // When a raise was first owed, before anything puts it off: a request of ours on its
        // way, a registration, a finish.
        self.flag_noticed_ms = match self.flag_owed {
            true => Some(self.flag_noticed_ms.unwrap_or(ctx.now_ms)),
            false => None,
        };
        self.drive(ctx);
        std::mem::take(&mut self.actions)
    }

    /// Asks for requests until one is outstanding or nothing is left to do, then arms the
    /// deadline of whatever the job waits for.
    fn drive(&mut self, ctx: &Ctx<'_>) {
        // Each round either asks for a request (and stops), or settles something for good
        // (a skip, a launch, a queued fire): the bound only guards against a bug looping.
        for _ in 0..DRIVE_ROUNDS {
            if self.outstanding.is_some() {
                break;
            }
            match self.next(ctx) {
                Next::Request(pending, request) => {
                    let op = OpId(self.next_id);
                    self.next_id += 1;
                    self.outstanding = Some(Box::new((op, pending)));
                    let ensured = |path: &str| self.registration.ensured(path);
                    let split =
                        crate::protocol::detail::split(ctx.view, &self.paths, &request, &ensured);
                    let request = match split {
                        Some((request, split)) => {
                            self.split = Some(Box::new(split));
                            request
                        }
                        None => request,
                    };
                    self.note_writes(&request);
                    self.actions.push(Action::Request { op, request });
                }
                Next::Again => continue,
                Next::Idle => break,
            }
        }
        // A deadline already past was handled by the look above, or waits behind a higher
        // priority that the next input moves on: arming it would only wake the job for nothing.
        let deadline = self.wait_deadline().filter(|&at| at > ctx.now_ms);
        if deadline != self.armed_wait {
            self.armed_wait = deadline;
            self.actions.push(Action::ArmWait(deadline));
        }
    }

    /// Notes which reported paths `request` writes (see `writing`).
    fn note_writes(&mut self, request: &Request) {
        if self.seldom().reported.is_empty() {
            return;
        }
        let written: Vec<&str> = match request {
            Request::Txn(ops) => ops.iter().map(TxnOp::path).collect(),
            Request::Create { path, .. } => vec![path.as_str()],
            Request::Ensure(_) | Request::Get(_) | Request::Children(_) | Request::RegistryTime => {
                Vec::new()
            }
        };
        let seldom = self.seldom_mut();
        seldom.writing = written
            .into_iter()
            .filter(|path| seldom.reported.contains_key(*path))
            .map(str::to_owned)
            .collect();
    }

    /// The next thing to do, by the priorities of the module documentation.
    fn next(&mut self, ctx: &Ctx<'_>) -> Next {
        if let Some((pending, request)) = self.then.take().map(|then| *then) {
            return Next::Request(pending, request);
        }
        if self.stop.is_some() {
            return self.leave_next(ctx);
        }
        if !self.connected {
            self.skip_due_while(ctx, SkipReason::Disconnected);
            return Next::Idle;
        }
        if self.errored {
            // Whatever failed is retried on the next input; fires due meanwhile say why they
            // did not run.
            return Next::Idle;
        }
        self.scope_wait = !self.scope_ready(ctx.view);
        if self.scope_wait {
            // The finish of our own run reads only what every scope of ours covers (our
            // markers, the items' nodes, our ledger): it does not wait for a wider one. Over
            // a slow link the wider scope's snapshot took 2 s, and a crash meanwhile left a
            // completed run unrecorded, run again by failover (3 × 3 `failover` seed
            // 1,321,928,369 with 4 s sessions: four items of one fire ran twice).
            if self.registration.done()
                && self.seldom().repairs.is_empty()
                && !self.finishing.is_empty()
            {
                return self.finish_next(ctx);
            }
            // The runtime widens the watch; its snapshot comes as a resync.
            return Next::Idle;
        }
        if std::mem::take(&mut self.resync_deferred) {
            self.on_resync(ctx);
        }
        if !self.registration.done() {
            return self.register_next(ctx);
        }
        if std::mem::take(&mut self.audit_owed) {
            self.audit(ctx);
            self.audit_wide = false;
        }
        // Before finishing: a marker rewritten after garbage is what the finish is fenced on.
        if let Some(next) = self.repair_next(ctx) {
            return next;
        }
        if !self.finishing.is_empty() {
            return self.finish_next(ctx);
        }
        if std::mem::take(&mut self.membership_changed) {
            self.notice_membership(ctx);
            // A departure seen is handled on the job's whole subtree.
            self.scope_wait = !self.scope_ready(ctx.view);
            if self.scope_wait {
                return Next::Idle;
            }
        }
        if !self.flag_owed {
            self.flag_clock_fresh = false;
        }
        if self.flag_owed && self.flag_answered(ctx) {
            self.flag_owed = false;
        }
        if self.flag_owed {
            if let Some(next) = self.flag_clock_unchecked(ctx) {
                return next;
            }
            // A raise writes over the flag: garbage in it is reported now or never.
            self.report_flag_garbage(ctx);
            let (stamped, request) = self.raise_request(ctx);
            return Next::Request(Pending::RaiseFlag(FlagStep::FromView { stamped }), request);
        }
        if let Some(next) = self.departure_next(ctx) {
            return next;
        }
        if let Some(next) = self.leadership_next(ctx) {
            return next;
        }
        if let Some(next) = self.housekeeping_next(ctx) {
            return next;
        }
        if let Some(next) = self.stale_servers_next(ctx) {
            return next;
        }
        if let Some(next) = self.once_next() {
            return next;
        }
        match self.fire_next(ctx) {
            Next::Idle => {}
            other => return other,
        }
        if self.in_flight.is_none() && self.fire.is_none() && self.due.is_empty() {
            return self.idle_next(ctx);
        }
        let fire_waits = self.fire.as_ref().is_some_and(|f| f.deadline().is_some());
        if self.in_flight.is_none() && fire_waits && self.refusal(ctx).is_none() {
            if let Some(next) = self.failover_next(ctx) {
                return next;
            }
        }
        Next::Idle
    }

    /// Continues what the reply to `op` was for.
    fn on_reply(&mut self, op: OpId, result: Result<Reply, RegistryError>, ctx: &Ctx<'_>) {
        let Some((expected, pending)) = self.outstanding.take().map(|o| *o) else { return };
        if expected != op {
            // Not the reply we wait for: a runtime bug; keep waiting for ours.
            self.outstanding = Some(Box::new((expected, pending)));
            return;
        }
        if let Some(seldom) = self.seldom_if() {
            if result.is_ok() {
                // What we wrote replaced any garbage there (a repair, a claim, a start): a
                // later garbage is a new change, to be reported even if it equals the one
                // reported before (the same junk at the same version of the next incarnation:
                // garbage seed 1,517,309,833 went unreported after a claim). A node gone is
                // forgotten by `look_at`.
                for path in &seldom.writing {
                    seldom.reported.remove(path);
                }
            }
            seldom.writing.clear();
        }
        let result = match self.split.take() {
            Some(split) => {
                if let Some(detail) = split.failed_detail(&result) {
                    // Registration's word that it exists is out of date.
                    self.registration.forget(detail);
                }
                split.reply(result)
            }
            None => result,
        };
        match pending {
            Pending::Register(step) => self.on_register_reply(step, result, ctx),
            Pending::RaiseFlag(step) => self.on_flag_reply(step, result, ctx),
            Pending::Queue { dead } => self.on_queue_reply(dead, result),
            Pending::Bid(step) => self.on_bid_reply(step, result, ctx),
            Pending::Abdicate => {
                self.abdicate_owed = false;
                self.was_leader = false;
                self.tolerate(result, super::failover::is_lost_race);
            }
            Pending::Finish(held) => self.on_finish_reply(held, result, ctx),
            Pending::DeleteTrigger => {
                if self.tolerate(result, |e| e.transaction_failure().is_some()) {
                    self.trigger_owed = false;
                    self.enqueue(ctx.now_ms, FireKind::Manual, None);
                }
            }
            // A lost race (a reshard rewrote the record of the assignments, an entry went) is
            // cleared again on the view that shows it: a departed mark left behind would
            // outlive the ledgers it stands for.
            Pending::ClearQueue => {
                let raced = result.as_ref().err().is_some_and(super::failover::is_lost_race);
                if self.tolerate(result, super::failover::is_lost_race) {
                    self.clear_queue_owed = raced;
                    // The clear was sent, so the state is there already.
                    if let Some(seldom) = self.seldom_if() {
                        seldom.clear_queue_race.answered(raced);
                    }
                }
            }
            // Changed or gone meanwhile: looked at again on the view that shows it.
            // Changed meanwhile (taken over, finished): nothing of ours is left there.
            Pending::DropOwnMarkers | Pending::DropStrayFailover => {
                self.tolerate(result, |e| e.transaction_failure().is_some());
            }
            Pending::DeleteServer => {
                self.tolerate(result, |e| e.transaction_failure().is_some());
            }
            Pending::MarkLedger => {
                // Written meanwhile (a start writes it too): nothing left to mark.
                if self.tolerate(result, |e| e.transaction_failure().is_some()) {
                    self.ledger_mark_owed = false;
                }
            }
            Pending::ConfirmGone => self.on_confirm_gone(result, ctx),
            Pending::Fire(step) => self.on_fire_reply(step, result, ctx),
            Pending::Claim(taken) => self.on_claim_reply(taken, result, ctx),
            Pending::DropEntry => {
                // Look at the queue again once the view shows the entry gone.
                self.claim_blocked = Some(ctx.view.revision());
                self.tolerate(result, super::failover::is_lost_race);
            }
            check @ (Pending::SkewCheck | Pending::FlagClock) => match result {
                Ok(Reply::Time(registry_ms)) => {
                    self.clock_compared(registry_ms, ctx);
                    // A comparison made for a raise stamps that raise (`flag_time`).
                    self.flag_clock_fresh |= matches!(check, Pending::FlagClock);
                }
                Ok(_) => {}
                Err(e) => self.failed(&e),
            },
            Pending::Once(step) => self.on_once_reply(step, result),
            Pending::Leave(step) => self.on_leave_reply(step, result, ctx),
            Pending::Repair(repair) => self.on_repair_reply(repair, result),
        }
    }

    /// Reads a reply whose expected failures (`expected`) count as done: `true` when done,
    /// `false` (reported, retried on the next input) for any other failure.
    fn tolerate(
        &mut self,
        result: Result<Reply, RegistryError>,
        expected: impl Fn(&RegistryError) -> bool,
    ) -> bool {
        match result {
            Ok(_) => true,
            Err(e) if expected(&e) => true,
            Err(e) => {
                self.failed(&e);
                false
            }
        }
    }

    /// Tells the run in flight to stop: this instance may have lost its items.
    fn cancel_in_flight(&mut self) {
        if let Some(flight) = self.in_flight.as_mut() {
            flight.cancelled = true;
            let launch = flight.launch;
            self.actions.push(Action::Cancel(launch));
        }
    }

    /// Reports a failed request; what it was for is retried on the next input.
    fn failed(&mut self, e: &RegistryError) {
        self.errored = true;
        self.seldom_mut().last_error = Some(e.clone());
        self.emit(SchedulerEvent::Error { job: self.job().to_owned(), message: e.to_string() });
    }

    fn emit(&mut self, event: SchedulerEvent) {
        self.actions.push(Action::Emit(event));
    }

    fn skip(&mut self, fire_ms: i64, reason: SkipReason) {
        let job = self.job().to_owned();
        self.emit(SchedulerEvent::Skipped { job, fire_ms, reason });
    }

    /// Reports a registry node the protocol could not read (and read in the safe way instead).
    fn report_garbage(&mut self, garbage: &Garbage) {
        self.emit(SchedulerEvent::RegistryGarbage {
            job: self.job().to_owned(),
            path: garbage.path.clone(),
            value: garbage.value.clone(),
            reason: garbage.reason.clone(),
        });
    }

    fn failover_enabled(&self) -> bool {
        self.config.failover && self.config.monitor_execution
    }

    /// The job's item count (a stored config was validated, so it is positive).
    fn total(&self) -> u32 {
        self.config.checked_total_count().unwrap_or(0)
    }

    /// Why no new work may start right now, if that is so.
    fn refusal(&self, ctx: &Ctx<'_>) -> Option<SkipReason> {
        if !self.connected {
            return Some(SkipReason::Disconnected);
        }
        if self.config.disabled {
            return Some(SkipReason::JobDisabled);
        }
        if self.server_disabled(ctx) {
            return Some(SkipReason::ServerDisabled);
        }
        None
    }

    /// The earliest deadline of what the job waits for.
    fn wait_deadline(&self) -> Option<i64> {
        let fire = self.fire.as_deref().and_then(FireState::deadline);
        let stop = self.stop.as_ref().and_then(|stop| stop.deadline());
        let servers = self.stale_servers_deadline();
        let resync = self.resync_owed.filter(|_| self.connected);
        let steal = self.steal_deadline();
        let catch_up = self.seldom().catch_up_retry_ms;
        [fire, stop, servers, resync, steal, catch_up].into_iter().flatten().min()
    }

    /// Arms the next fire strictly after `after_ms` (or the latest overdue one, if the job fell
    /// behind: it runs now or is recorded as a misfire; older overdue ones are reported late).
    pub(super) fn arm_after(&mut self, after_ms: i64, ctx: &Ctx<'_>) {
        let mut next = None;
        let mut late = Vec::new();
        if let Some(schedule) = &self.schedule {
            let mut overdue = schedule
                .iter_after(after_ms)
                .take_while(|&t| t <= ctx.now_ms)
                .take(MAX_OVERDUE_SCAN);
            let mut latest = overdue.next();
            for t in overdue {
                late.extend(latest.replace(t));
            }
            next = latest.or_else(|| schedule.next_after(after_ms.max(ctx.now_ms)));
        }
        for fire_ms in late {
            self.skip(fire_ms, SkipReason::Late);
        }
        self.armed_fire = next;
        self.actions.push(Action::ArmFire(next));
        if let Some(next_fire_ms) = next {
            let job = self.job().to_owned();
            self.emit(SchedulerEvent::Armed { job, next_fire_ms });
        }
    }

    /// The latest scheduled fire at or before `now_ms` (within a day), else `now_ms`: the fire a
    /// catch-up answers when no record says which.
    fn latest_fire_by(&self, now_ms: i64) -> i64 {
        let latest = self.schedule.as_ref().and_then(|s| s.last_in(now_ms - DAY_MS, now_ms));
        latest.unwrap_or(now_ms)
    }

    /// Arms the next reconcile, `reconcileIntervalMinutes` from now (off below one minute).
    fn arm_reconcile(&mut self, ctx: &Ctx<'_>) {
        let at = self.config.reconcile_interval().map(|interval| {
            let ms = i64::try_from(interval.as_millis()).unwrap_or(i64::MAX / 2);
            ctx.now_ms.saturating_add(ms)
        });
        self.actions.push(Action::ArmReconcile(at));
    }
}

/// A bound on the rounds of one [`JobProtocol::drive`]; see there.
const DRIVE_ROUNDS: usize = 10_000;
const DAY_MS: i64 = 24 * 3600 * 1000;
/// How many overdue fires `arm_after` looks through (a per-second cron after a long stall).
pub(super) const MAX_OVERDUE_SCAN: usize = 100_000;
