//! Deliberately broken variants of the system, to prove that the checker has teeth: each one
//! plants a bug the way it would appear in real code (a registry wrapper that loses or bends
//! something, or an event sink that forgets), and the tests require the
//! checker to report it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use shardcron_core::registry::{
    Capability, CoordinatorRegistry, CreateMode, LeaderLatch, MutexGuard, Node, Result,
    SessionEvents, TxnOp, TxnResult, Version, WatchEvent, WatchScope, WatchStream,
};
use shardcron_core::runtime::{EventSink, FireKind, SchedulerEvent, Settings, SkipReason};

/// A planted bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Instance 2's watch loses the event that first gives it an item (a registry wrapper that
    /// drops one watch event): it never learns it owns that item.
    DropWatchEvent,
    /// Instance 1's event sink forgets its first item start: a fire that seemingly never ran.
    ForgetItem,
    /// Instance 2 believes it won the election without holding the leader node.
    FalseLeader,
    /// Instance 1's running markers are persistent and never removed.
    LeakRunningMarkers,
    /// Every reshard commit forgets to write the owner of item 0.
    StaleAssignment,
    /// Instance 1 believes it owns every item and starts them without running markers.
    GreedyOwner,
    /// Every instance ignores its local lease loss (`Lost`): cut off, it keeps running its
    /// items until the server's expiry reaches it on reconnection (needs partitions).
    IgnoreLeaseLoss,
    /// No instance learns of another's departure (its watch loses the deletion of instance
    /// nodes): nobody reshards or fails over for a crash (needs crashes).
    ForgetDeparture,
    /// Misfire markers are never written: a fire skipped because items still ran owes a
    /// catch-up that nobody makes (needs overrunning items).
    DropCatchUp,
    /// The catch-ups a departed instance owes for fires it missed are never queued (needs
    /// crashes, with failover and misfire on).
    DropMissedFires,
    /// Every instance ignores garbage: its watch drops the changes that write the operator
    /// fault's garbage (needs the operator fault).
    IgnoreGarbage,
    /// Instance 2's event sink drops its `ClockSkew` skips: an instance whose clock is off
    /// skips its fires without a word (needs a clock skew, with `maxTimeDiffSeconds` set).
    MuteClockSkew,
    /// Instance 2's event sink drops its `Late` skips: a fire that waited for a reshard and was
    /// overtaken by the next one goes unrecorded (needs a reshard held up, by a leader whose
    /// crash is not detected yet).
    MuteLateSkips,
    /// Instance 2's event sink reports its `Late` skips as `Misfire`: a fire handled after a
    /// reshard made for a later flag claims a catch-up that no marker owes (needs a busy or
    /// slow owner and a reshard; the boundary of a misfire whose record came back after the
    /// reshard, which the checker accepts only with its catch-up).
    LateAsMisfire,
    /// Every instance's event sink drops its `Late` skips: a fire overtaken while it waited for
    /// a reshard goes unrecorded everywhere (the boundary of the reading that any waiting
    /// instance's `Late` record speaks for a fire whose owner there was down).
    MuteEveryLateSkip,
    /// Instance 2's event sink reports its `Late` skips as `NoItems`: a fire handled late
    /// passes for one whose items were all disabled (needs a busy or slow owner; the boundary
    /// of a `NoItems` record, which the checker accepts only for an item disabled when the
    /// owner handled the fire).
    LateAsNoItems,
    /// Every reshard's record of the assignments loses the time it was made (its `made`
    /// lines), as a record written before they existed: a fire overtaken while it waited for
    /// that reshard passes for one its new owner missed, and a restart of that owner counts it
    /// again after a restart of the owner before it counted it too (needs a leader down while
    /// fires wait, then restarts, with failover and misfire on).
    ForgetReshardTime,
    /// Every instance's event sink drops its skips of a job until it has started one of the
    /// job's items: the fires due before the job's first reshard, which each instance waiting
    /// for it records, go unrecorded (needs that reshard held up, by a leader's crash before
    /// the job's first fire; the boundary of the reading that a fire no assignment had is lost
    /// only when no instance with the job could record it).
    MuteSkipsBeforeFirstRun,
    /// Instance 2's watch drops the changes of a job's config node: it never learns of a
    /// cron change, and keeps firing the old schedule (needs a config change; the boundary of
    /// the reading that a fire of a changed config is excused only for an owner that applied
    /// the change, late).
    IgnoreConfigChange,
    /// An instance whose server is disabled for a job drops the catch-ups it owes: the end of
    /// its run also deletes the misfire markers of the items it ran, instead of keeping them
    /// until the server is enabled again or a reshard moves the items (needs overrunning items
    /// and a server disabled during a run; the boundary of the reading that a disabled owner's
    /// catch-up waits, and is excused only if its item goes before it could run).
    DisabledOwnerDropsCatchUp,
    /// An instance that learns failover was turned on never writes its ledger's mark (the
    /// transaction that writes only its ledger is lost, and reported lost to a start that
    /// wrote it meanwhile): a crash before its next start leaves the survivors nothing to
    /// count its missed fires from (needs failover turned on, then a crash of an owner before
    /// its next fire; the boundary of the reading that only an owner cut off from the change
    /// until it crashed keeps no mark).
    ForgetLedgerMark,
    /// A raise of the reshard flag also deletes the misfire markers of the job, as if the
    /// reshard settled every catch-up owed: a catch-up owed when a reshard is asked for, which
    /// waits for that reshard, is never run (needs overrunning items and a reshard asked for
    /// right after the run that blocked the catch-up ended; the boundary of the reading that a
    /// catch-up may wait for a reshard asked for within the slack after that run's end).
    RaiseDropsCatchUps,
    /// A reshard's commit also deletes the misfire markers of the job, as if the reshard
    /// settled every catch-up owed: a catch-up that waited for the reshard is never run (needs
    /// a catch-up owed while a reshard is pending; the boundary of the reading that a catch-up
    /// is dropped only if its item is disabled when it falls due after its waits).
    ReshardDropsCatchUps,
    /// A leader repairing the config node writes back the config its job registered with,
    /// not the one it runs (needs a config change, then garbage over the config while that
    /// instance leads; the boundary of the simulator's reading that a config an instance
    /// writes is the cluster's only if the last config its registry showed it was not).
    StaleConfigRepair,
    /// Instance 1 takes its fires 2 s further ahead than the run's fire lead (its clock runs
    /// that much fast, and it reads the registry's time as far ahead, so it sees no skew):
    /// restarted less than 2 s before a fire, it is back after that fire by its clock and
    /// leaves it unrun (needs restarts of instance 1; the boundary of the reading that judges
    /// fires in the schedulers' time, which is the registry's moved by the run's lead and no
    /// more).
    OverLead,
    /// Instance 3's event sink drops its catch-up runs (starts and ends of `Misfire` kind): a
    /// misfire whose item went on to instance 3 passes for caught up without a run (the
    /// boundary of the reading that a misfire between two reshards of one millisecond is the
    /// first one's owner's, which the checker accepts only with the next owner's catch-up; 3 ×
    /// 2 `lease` seed 2,541,553,107).
    MuteCatchUps,
    /// Every instance's registry claims its views are in order (`Capability::views_in_order`)
    /// where they lag: the schedulers do not fence their starts on the absence of what their
    /// views do not show (needs the `victim` or `lag` profile: 4 × 3 `victim` seed 31,533,747
    /// runs a fire twice, 6 × 4 seed 1,553,391,649 leaves one unrun).
    TrustLaggingViews,
    /// Every instance's settle of a misfire marker removes the marker and leaves its detail
    /// naming the fire, rather than blank (needs overrunning items; the boundary of the
    /// reading that a misfire marker's detail without its marker is no leak only when blank).
    LeakMisfireDetails,
}

/// How much further ahead than the run's lead [`Variant::OverLead`] takes instance 1's fires.
pub const OVER_LEAD: Duration = Duration::from_secs(2);

impl Variant {
    pub const ALL: [Variant; 28] = [
        Variant::DropWatchEvent,
        Variant::ForgetItem,
        Variant::FalseLeader,
        Variant::LeakRunningMarkers,
        Variant::StaleAssignment,
        Variant::GreedyOwner,
        Variant::IgnoreLeaseLoss,
        Variant::ForgetDeparture,
        Variant::DropCatchUp,
        Variant::DropMissedFires,
        Variant::IgnoreGarbage,
        Variant::MuteClockSkew,
        Variant::MuteLateSkips,
        Variant::LateAsMisfire,
        Variant::MuteEveryLateSkip,
        Variant::LateAsNoItems,
        Variant::ForgetReshardTime,
        Variant::MuteSkipsBeforeFirstRun,
        Variant::IgnoreConfigChange,
        Variant::DisabledOwnerDropsCatchUp,
        Variant::ForgetLedgerMark,
        Variant::RaiseDropsCatchUps,
        Variant::ReshardDropsCatchUps,
        Variant::StaleConfigRepair,
        Variant::OverLead,
        Variant::MuteCatchUps,
        Variant::TrustLaggingViews,
        Variant::LeakMisfireDetails,
    ];

    /// The runtime settings of instance `who`, with the bug if it has one there.
    pub(crate) fn settings(self, who: usize, settings: &Settings) -> Settings {
        match self {
            Variant::OverLead if who == 1 => {
                let fire_lead = settings.fire_lead.saturating_add(OVER_LEAD);
                Settings { fire_lead, ..settings.clone() }
            }
            _ => settings.clone(),
        }
    }

    /// The registry instance `who` uses, with the bug if it has one there.
    pub(crate) fn wrap_registry(
        self,
        who: usize,
        inner: Arc<dyn CoordinatorRegistry>,
    ) -> Arc<dyn CoordinatorRegistry> {
        let affected = match self {
            // (GreedyOwner on a follower: the leader trusts its own committed assignment over a
            // watch event that contradicts it, which would hide the bug there.)
            Variant::DropWatchEvent
            | Variant::FalseLeader
            | Variant::GreedyOwner
            | Variant::IgnoreConfigChange => who == 2,
            Variant::LeakRunningMarkers => who == 1,
            Variant::StaleAssignment
            | Variant::IgnoreLeaseLoss
            | Variant::ForgetDeparture
            | Variant::DropCatchUp
            | Variant::DropMissedFires
            | Variant::IgnoreGarbage
            | Variant::ForgetReshardTime
            | Variant::DisabledOwnerDropsCatchUp
            | Variant::ForgetLedgerMark
            | Variant::RaiseDropsCatchUps
            | Variant::ReshardDropsCatchUps
            | Variant::StaleConfigRepair
            | Variant::TrustLaggingViews
            | Variant::LeakMisfireDetails => true,
            Variant::ForgetItem
            | Variant::MuteClockSkew
            | Variant::MuteLateSkips
            | Variant::LateAsMisfire
            | Variant::MuteEveryLateSkip
            | Variant::LateAsNoItems
            | Variant::MuteSkipsBeforeFirstRun
            | Variant::OverLead
            | Variant::MuteCatchUps => false,
        };
        if !affected {
            return inner;
        }
        let me = format!("{}@-@1", crate::workload::ip_of(who));
        Arc::new(Buggy {
            inner,
            bug: self,
            me,
            started: Mutex::new(BTreeSet::new()),
            registered_config: Mutex::new(BTreeMap::new()),
        })
    }

    /// The event sink of instance `who`, with the bug if it has one there.
    pub(crate) fn wrap_sink(self, who: usize, sink: EventSink) -> EventSink {
        let relabel = match self {
            Variant::LateAsMisfire => Some(SkipReason::Misfire),
            Variant::LateAsNoItems => Some(SkipReason::NoItems),
            _ => None,
        };
        if let Some(reason) = relabel.filter(|_| who == 2) {
            return Arc::new(move |event: &SchedulerEvent| match event {
                SchedulerEvent::Skipped { job, fire_ms, reason: SkipReason::Late } => {
                    sink(&SchedulerEvent::Skipped {
                        job: job.clone(),
                        fire_ms: *fire_ms,
                        reason: reason.clone(),
                    });
                }
                other => sink(other),
            });
        }
        let muting = match self {
            Variant::MuteClockSkew | Variant::MuteLateSkips => who == 2,
            Variant::MuteEveryLateSkip => true,
            _ => false,
        };
        if muting {
            return Arc::new(move |event: &SchedulerEvent| {
                let muted = match event {
                    SchedulerEvent::Skipped { reason, .. } => match self {
                        Variant::MuteClockSkew => matches!(reason, SkipReason::ClockSkew { .. }),
                        _ => *reason == SkipReason::Late,
                    },
                    _ => false,
                };
                if !muted {
                    sink(event);
                }
            });
        }
        if self == Variant::MuteCatchUps && who == 3 {
            let muted_fires = parking_lot::Mutex::new(BTreeSet::new());
            return Arc::new(move |event: &SchedulerEvent| {
                let muted = match event {
                    SchedulerEvent::ItemStarted {
                        job,
                        item,
                        fire_ms,
                        kind: FireKind::Misfire,
                        ..
                    } => {
                        muted_fires.lock().insert((job.clone(), *item, *fire_ms));
                        true
                    }
                    SchedulerEvent::ItemFinished { job, item, fire_ms, .. } => {
                        muted_fires.lock().remove(&(job.clone(), *item, *fire_ms))
                    }
                    _ => false,
                };
                if !muted {
                    sink(event);
                }
            });
        }
        if self == Variant::MuteSkipsBeforeFirstRun {
            let started = parking_lot::Mutex::new(std::collections::BTreeSet::new());
            return Arc::new(move |event: &SchedulerEvent| {
                let muted = match event {
                    SchedulerEvent::ItemStarted { job, .. } => {
                        started.lock().insert(job.clone());
                        false
                    }
                    SchedulerEvent::Skipped { job, .. } => !started.lock().contains(job),
                    _ => false,
                };
                if !muted {
                    sink(event);
                }
            });
        }
        if self != Variant::ForgetItem || who != 1 {
            return sink;
        }
        let forgot = AtomicBool::new(false);
        Arc::new(move |event: &SchedulerEvent| {
            let first = matches!(event, SchedulerEvent::ItemStarted { .. })
                && !forgot.swap(true, Ordering::SeqCst);
            if !first {
                sink(event);
            }
        })
    }
}

impl std::str::FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Variant::ALL.into_iter().find(|v| v.to_string().eq_ignore_ascii_case(s)).ok_or_else(|| {
            let names: Vec<String> = Variant::ALL.iter().map(|v| v.to_string()).collect();
            format!("unknown variant {s:?} (one of {})", names.join(", "))
        })
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

fn is_assignment_record(path: &str) -> bool {
    path.ends_with("/shardcron/assigned")
}

/// An assignment record without its `made {ms}` lines.
fn without_commit_times(data: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(data);
    let kept: Vec<&str> = text.lines().filter(|line| !line.starts_with("made ")).collect();
    kept.join("\n").into_bytes()
}

/// A job's config node (`/{job}/config`).
fn is_config_node(path: &str) -> bool {
    path.strip_suffix("/config").is_some_and(|job| job.rfind('/') == Some(0))
}

fn is_owner_node(path: &str) -> bool {
    path.ends_with("/instance") && path.contains("/sharding/")
}

fn is_running_node(path: &str) -> bool {
    path.ends_with("/running") && path.contains("/sharding/")
}

/// A misfire marker, or its detail (the fire it owes).
fn is_misfire_node(path: &str) -> bool {
    (path.ends_with("/misfire") && path.contains("/sharding/"))
        || path.rsplit('/').nth(1) == Some("misfire") && path.contains("/shardcron/")
}

fn is_instance_node(path: &str) -> bool {
    path.rsplit('/').nth(1) == Some("instances")
}

/// The item of a failover queue entry's detail for a fire its instance missed
/// (`shardcron/failover/{n}` holding `{fire} {rank} missed {id}`).
fn missed_entry(path: &str, data: &[u8]) -> Option<String> {
    let (dir, item) = path.rsplit_once('/')?;
    (dir.ends_with("/shardcron/failover")
        && std::str::from_utf8(data).is_ok_and(|t| t.split(' ').nth(2) == Some("missed")))
    .then(|| item.to_owned())
}

/// A failover queue entry (`leader/failover/items/{n}`) of one of `items`.
fn is_entry_of(path: &str, items: &[String]) -> bool {
    path.rsplit_once('/').is_some_and(|(dir, item)| {
        dir.ends_with("/leader/failover/items") && items.iter().any(|i| i == item)
    })
}

impl Buggy {
    /// `DisabledOwnerDropsCatchUp`: the end of a run (the removal of `running` markers) of a
    /// job whose server is disabled for this instance also removes the items' misfire markers
    /// and their details. The caller gets the results of its own ops only.
    async fn ending_drops_catch_ups(&self, mut ops: Vec<TxnOp>) -> Result<Vec<TxnResult>> {
        let asked = ops.len();
        let ended: Vec<String> = ops
            .iter()
            .filter(|op| matches!(op, TxnOp::Delete { .. }) && is_running_node(op.path()))
            .map(|op| op.path().to_owned())
            .collect();
        let ip = self.me.split("@-@").next().unwrap_or_default();
        for running in ended {
            let mut parts = running.trim_start_matches('/').split('/');
            let (Some(job), Some(_), Some(item)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let server = self.inner.get(&format!("/{job}/servers/{ip}")).await?;
            if server.is_none_or(|n| n.data != b"DISABLED") {
                continue;
            }
            self.push_catch_up_drops(&mut ops, job, item).await?;
        }
        let mut results = self.inner.transaction(ops).await?;
        results.truncate(asked);
        Ok(results)
    }

    /// Adds to `ops` the deletes of the misfire marker of `item` of `job` and its detail,
    /// those that exist.
    async fn push_catch_up_drops(&self, ops: &mut Vec<TxnOp>, job: &str, item: &str) -> Result<()> {
        for marker in
            [format!("/{job}/sharding/{item}/misfire"), format!("/{job}/shardcron/misfire/{item}")]
        {
            if self.inner.exists(&marker).await? {
                ops.push(TxnOp::delete(marker, None));
            }
        }
        Ok(())
    }

    /// `RaiseDropsCatchUps` and `ReshardDropsCatchUps`: a write of the reshard flag (a raise,
    /// or a reshard's delete) also removes every misfire marker of the job, and their
    /// details. The caller gets the results of its own ops only.
    async fn dropping_catch_ups(&self, mut ops: Vec<TxnOp>) -> Result<Vec<TxnResult>> {
        let asked = ops.len();
        let flag = ops.iter().map(TxnOp::path).find(|p| p.ends_with("/leader/sharding/necessary"));
        let Some(job) = flag.and_then(|p| p.trim_start_matches('/').split('/').next()) else {
            return self.inner.transaction(ops).await;
        };
        let job = job.to_owned();
        for item in self.inner.children(&format!("/{job}/sharding")).await.unwrap_or_default() {
            self.push_catch_up_drops(&mut ops, &job, &item).await?;
        }
        let mut results = self.inner.transaction(ops).await?;
        results.truncate(asked);
        Ok(results)
    }

    /// `ForgetLedgerMark`: whether `ops` write only the ledger of a job this client has
    /// started an item of since it connected: the mark written when failover is turned on (a
    /// registration writes the ledger alone before its first start, a start beside its
    /// `running` markers). Notes the starts it sees.
    fn forgets_mark(&self, ops: &[TxnOp]) -> bool {
        let job_of = |path: &str| path.trim_start_matches('/').split('/').next().map(str::to_owned);
        let Ok(mut started) = self.started.lock() else { return false };
        for op in ops {
            if matches!(op, TxnOp::Create { .. }) && is_running_node(op.path()) {
                started.extend(job_of(op.path()));
            }
        }
        match ops {
            [op @ (TxnOp::Set { .. } | TxnOp::Create { .. })]
                if op.path().contains("/shardcron/ledger/") =>
            {
                job_of(op.path()).is_some_and(|job| started.contains(&job))
            }
            _ => false,
        }
    }
}

/// A reshard's commit: it deletes the flag (a raise creates or sets it).
fn is_reshard_commit(ops: &[TxnOp]) -> bool {
    ops.iter().any(|op| {
        matches!(op, TxnOp::Delete { .. }) && op.path().ends_with("/leader/sharding/necessary")
    })
}

/// A registry wrapper with a bug.
struct Buggy {
    inner: Arc<dyn CoordinatorRegistry>,
    bug: Variant,
    /// The instance id of the wrapped client.
    me: String,
    /// The jobs this client has started an item of (`ForgetLedgerMark` spares the ledger
    /// writes of a registration, which come before).
    started: Mutex<BTreeSet<String>>,
    /// `StaleConfigRepair`: per config node, the config this client first read or wrote there.
    registered_config: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl Buggy {
    /// `StaleConfigRepair`: what this client writes to config node `path` instead of `data`
    /// (the first config it read or wrote there; a read's bytes are remembered the same way).
    fn config_to_write(&self, path: &str, data: &[u8]) -> Vec<u8> {
        if self.bug != Variant::StaleConfigRepair || !is_config_node(path) {
            return data.to_vec();
        }
        let mut first = self.registered_config.lock().unwrap_or_else(|e| e.into_inner());
        first.entry(path.to_owned()).or_insert_with(|| data.to_vec()).clone()
    }
}

impl fmt::Debug for Buggy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buggy").field("bug", &self.bug).field("inner", &self.inner).finish()
    }
}

#[async_trait]
impl CoordinatorRegistry for Buggy {
    fn capability(&self) -> Capability {
        let mut capability = self.inner.capability();
        if self.bug == Variant::TrustLaggingViews {
            capability.views_in_order = true;
        }
        capability
    }

    async fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        if self.bug == Variant::FalseLeader && path.ends_with("/leader/election/instance") {
            return Ok(path.to_owned());
        }
        let data = self.config_to_write(path, data);
        self.inner.create(path, &data, mode).await
    }

    async fn get(&self, path: &str) -> Result<Option<Node>> {
        let node = self.inner.get(path).await?;
        if let Some(node) = &node {
            self.config_to_write(path, &node.data);
        }
        Ok(node)
    }

    async fn set(&self, path: &str, data: &[u8], expected: Option<Version>) -> Result<Version> {
        let data = self.config_to_write(path, data);
        self.inner.set(path, &data, expected).await
    }

    async fn delete(&self, path: &str, expected: Option<Version>) -> Result<()> {
        if self.bug == Variant::LeakRunningMarkers && is_running_node(path) {
            return Ok(());
        }
        self.inner.delete(path, expected).await
    }

    async fn exists(&self, path: &str) -> Result<bool> {
        self.inner.exists(path).await
    }

    async fn children(&self, path: &str) -> Result<Vec<String>> {
        self.inner.children(path).await
    }

    async fn delete_recursive(&self, path: &str) -> Result<()> {
        self.inner.delete_recursive(path).await
    }

    async fn transaction(&self, ops: Vec<TxnOp>) -> Result<Vec<TxnResult>> {
        // The bid for leadership (the leader node created with the count of elections) is
        // answered as won, and nothing is written.
        let bid = ops.iter().any(|op| {
            matches!(op, TxnOp::Create { path, .. } if path.ends_with("/leader/election/instance"))
        });
        if self.bug == Variant::FalseLeader && bid {
            return Ok(ops.iter().map(pretend_applied).collect());
        }
        let reshard = ops.iter().any(|op| op.path().ends_with("/leader/sharding/necessary"));
        // The entries queued for missed fires: their detail says so, the entry is empty.
        let missed: Vec<String> = ops
            .iter()
            .filter_map(|op| match op {
                TxnOp::Create { path, data, .. } => missed_entry(path, data),
                _ => None,
            })
            .collect();
        let ops: Vec<TxnOp> = ops
            .into_iter()
            .filter_map(|op| match (self.bug, op) {
                (Variant::LeakRunningMarkers, TxnOp::Create { path, data, .. })
                    if is_running_node(&path) =>
                {
                    Some(TxnOp::Create { path, data, mode: CreateMode::Persistent })
                }
                (Variant::LeakRunningMarkers, TxnOp::Delete { path, .. })
                    if is_running_node(&path) =>
                {
                    None
                }
                (Variant::GreedyOwner, op @ TxnOp::Create { .. }) if is_running_node(op.path()) => {
                    None
                }
                (Variant::GreedyOwner, op @ TxnOp::Delete { .. }) if is_running_node(op.path()) => {
                    None
                }
                (Variant::StaleAssignment, op)
                    if reshard && op.path().ends_with("/sharding/0/instance") =>
                {
                    None
                }
                (Variant::DropCatchUp, op @ (TxnOp::Create { .. } | TxnOp::Set { .. }))
                    if is_misfire_node(op.path()) =>
                {
                    None
                }
                (Variant::DropMissedFires, TxnOp::Create { path, data, .. })
                    if missed_entry(&path, &data).is_some() || is_entry_of(&path, &missed) =>
                {
                    None
                }
                (Variant::ForgetReshardTime, TxnOp::Create { path, data, mode })
                    if is_assignment_record(&path) =>
                {
                    Some(TxnOp::Create { path, data: without_commit_times(&data), mode })
                }
                (Variant::ForgetReshardTime, TxnOp::Set { path, data, version })
                    if is_assignment_record(&path) =>
                {
                    Some(TxnOp::Set { path, data: without_commit_times(&data), version })
                }
                // The blank a settle writes into the marker's detail: only checked, the fire it
                // names stays.
                (Variant::LeakMisfireDetails, TxnOp::Set { path, data, version })
                    if is_misfire_node(&path)
                        && path.contains("/shardcron/")
                        && data.iter().all(u8::is_ascii_whitespace) =>
                {
                    Some(TxnOp::check(path, version))
                }
                (Variant::StaleConfigRepair, TxnOp::Set { path, data, version })
                    if is_config_node(&path) =>
                {
                    let data = self.config_to_write(&path, &data);
                    Some(TxnOp::Set { path, data, version })
                }
                (_, op) => Some(op),
            })
            .collect();
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        match self.bug {
            Variant::DisabledOwnerDropsCatchUp => self.ending_drops_catch_ups(ops).await,
            Variant::ForgetLedgerMark if self.forgets_mark(&ops) => {
                Err(shardcron_core::registry::RegistryError::Transaction {
                    index: 0,
                    source: Box::new(shardcron_core::registry::RegistryError::BadVersion {
                        op: shardcron_core::registry::Op::Set,
                        path: ops[0].path().to_owned(),
                        expected: 0,
                    }),
                })
            }
            Variant::RaiseDropsCatchUps if reshard && !is_reshard_commit(&ops) => {
                self.dropping_catch_ups(ops).await
            }
            Variant::ReshardDropsCatchUps if is_reshard_commit(&ops) => {
                self.dropping_catch_ups(ops).await
            }
            _ => self.inner.transaction(ops).await,
        }
    }

    async fn watch_scope(&self, scope: WatchScope) -> Result<WatchStream> {
        let stream = self.inner.watch_scope(scope).await?;
        // The planted bugs change the events, not how the stream's scope is changed.
        let scoper = stream.scoper();
        match self.bug {
            Variant::DropWatchEvent => {
                let me = self.me.clone();
                let mut dropped = false;
                Ok(WatchStream::with_scoper(
                    stream.filter(move |event| {
                        let drop_it = !dropped
                            && matches!(event, WatchEvent::Created { path, node }
                            if is_owner_node(path) && node.data == me.as_bytes());
                        dropped |= drop_it;
                        std::future::ready(!drop_it)
                    }),
                    scoper,
                ))
            }
            Variant::GreedyOwner => {
                let me = self.me.clone().into_bytes();
                Ok(WatchStream::with_scoper(
                    stream.map(move |mut event| {
                        match &mut event {
                            WatchEvent::Created { path, node }
                            | WatchEvent::Changed { path, node }
                                if is_owner_node(path) =>
                            {
                                node.data = me.clone();
                            }
                            WatchEvent::Resync { nodes }
                            | WatchEvent::Rescoped { added: nodes, .. } => {
                                for (path, node) in nodes.iter_mut() {
                                    if is_owner_node(path) {
                                        node.data = me.clone();
                                    }
                                }
                            }
                            _ => {}
                        }
                        event
                    }),
                    scoper,
                ))
            }
            Variant::IgnoreGarbage => Ok(WatchStream::with_scoper(
                stream.filter(|event| {
                    let garbage = matches!(event, WatchEvent::Changed { node, .. }
                    if crate::garbage::Junk::is_junk(&node.data));
                    std::future::ready(!garbage)
                }),
                scoper,
            )),
            Variant::IgnoreConfigChange => Ok(WatchStream::with_scoper(
                stream.filter(|event| {
                    let change =
                        matches!(event, WatchEvent::Changed { path, .. } if is_config_node(path));
                    std::future::ready(!change)
                }),
                scoper,
            )),
            Variant::ForgetDeparture => Ok(WatchStream::with_scoper(
                stream.filter(|event| {
                    let departure =
                        matches!(event, WatchEvent::Deleted { path } if is_instance_node(path));
                    std::future::ready(!departure)
                }),
                scoper,
            )),
            _ => Ok(stream),
        }
    }

    fn session_events(&self) -> SessionEvents {
        let events = self.inner.session_events();
        if self.bug != Variant::IgnoreLeaseLoss {
            return events;
        }
        SessionEvents::new(events.filter(|event| {
            std::future::ready(!matches!(event, shardcron_core::registry::SessionEvent::Lost))
        }))
    }

    async fn leader_latch(&self, path: &str, participant: &str) -> Result<Box<dyn LeaderLatch>> {
        self.inner.leader_latch(path, participant).await
    }

    async fn lock(
        &self,
        path: &str,
        owner: &str,
        timeout: Duration,
    ) -> Result<Box<dyn MutexGuard>> {
        self.inner.lock(path, owner, timeout).await
    }

    async fn registry_time(&self) -> Result<i64> {
        self.inner.registry_time().await
    }

    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
}

/// What `op` would answer had it been applied (a planted bug that pretends it was).
fn pretend_applied(op: &TxnOp) -> TxnResult {
    match op {
        TxnOp::Check { .. } | TxnOp::Absent { .. } => TxnResult::Checked,
        TxnOp::Create { path, .. } => TxnResult::Created { path: path.clone() },
        TxnOp::Set { .. } => TxnResult::Set { version: 0 },
        TxnOp::Delete { .. } => TxnResult::Deleted,
    }
}
