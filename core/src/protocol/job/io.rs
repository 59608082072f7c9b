//! What crosses the boundary between a job's protocol and the runtime: the inputs the protocol
//! steps on, the actions it asks for, and the registry requests among them with their replies.

use std::fmt;

use crate::config::JobConfig;
use crate::events::{FireKind, SchedulerEvent};
use crate::job::FireReport;
use crate::layout::{GuaranteeStage, JobNode};
use crate::registry::{CreateMode, Node, RegistryError, SessionEvent, TxnOp, TxnResult};

/// Identifies a registry request; its reply comes back with the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u64);

/// Identifies a launch of items; its report comes back with the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LaunchId(pub u64);

/// One registry request. At most one is outstanding per job at a time: the protocol waits for
/// its reply before it asks for the next, so the job's writes apply in the order it decided
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Apply the ops atomically (creates need their parent).
    Txn(Vec<TxnOp>),
    /// Create a node, creating missing parents as persistent nodes.
    Create { path: String, data: Vec<u8>, mode: CreateMode },
    /// Create a persistent node (and parents) unless it exists.
    Ensure(String),
    /// Read a node.
    Get(String),
    /// Read the names of a node's children (none when it does not exist).
    Children(String),
    /// Read the registry server's clock.
    RegistryTime,
}

/// The successful reply to a [`Request`], in the same shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Txn(Vec<TxnResult>),
    Created,
    Ensured,
    Node(Option<Node>),
    Children(Vec<String>),
    Time(i64),
}

/// Something that happened to the job, as the protocol learns it.
#[derive(Debug)]
pub enum Input {
    /// The job was added to this instance at `added_ms` (before its config was published,
    /// which over a slow link takes a while): register it.
    Start { added_ms: i64 },
    /// The schedule fell due for the fire at `fire_ms`.
    FireDue { fire_ms: i64 },
    /// Time for the leader's periodic check of the assignment.
    ReconcileDue,
    /// A wait the protocol armed ([`Action::ArmWait`]) reached its deadline.
    WaitDue,
    /// Nodes of the job's subtree changed (each once, in the order their events came); the
    /// view already shows the changes, and maybe later ones. The runtime hands over together
    /// the changes that queued up while the job was busy: the job looks at them in one step,
    /// as it would at the last of them, and decides once (an instance joining a cluster of N
    /// changes N nodes in each of the others' views at once).
    Changed(Vec<JobNode>),
    /// The view was replaced by a snapshot: anything may have changed.
    Resynced,
    /// The session changed state.
    Session(SessionEvent),
    /// The reply to request `op`.
    Reply { op: OpId, result: Result<Reply, RegistryError> },
    /// The items of launch `launch` returned.
    Done { launch: LaunchId, report: Box<FireReport> },
    /// Stop the job here: no new work, running items finish (at most until the shutdown
    /// timeout), this instance's nodes leave the registry.
    Stop { reason: String },
    /// The clock went back (an NTP step, a clock set right): a timer armed by the earlier
    /// reading rang before its time by the clock now.
    ClockWentBack,
}

/// What the protocol asks the runtime to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Perform a registry request and feed its reply back as [`Input::Reply`].
    Request { op: OpId, request: Request },
    /// Arm (or, with `None`, disarm) the timer of the job's next fire.
    ArmFire(Option<i64>),
    /// Arm (or disarm) the leader's reconcile timer.
    ArmReconcile(Option<i64>),
    /// Arm (or disarm) the deadline of what the protocol waits for; it comes back as
    /// [`Input::WaitDue`].
    ArmWait(Option<i64>),
    /// Run items; their report comes back as [`Input::Done`].
    Launch(Launch),
    /// Tell the items of a launch to stop: this instance may have lost them.
    Cancel(LaunchId),
    /// Report an event.
    Emit(SchedulerEvent),
    /// Run the distribute-once listeners of a stage for a fire (this instance completed the set).
    RunOnceListeners { stage: GuaranteeStage, fire_ms: i64 },
    /// A new config took effect: run items with it from now on.
    UseConfig(Box<JobConfig>),
    /// The job has stopped on this instance: route nothing more to it.
    Stopped,
}

/// Items to run now.
#[derive(Clone, PartialEq, Eq)]
pub struct Launch {
    pub id: LaunchId,
    pub fire_ms: i64,
    pub kind: FireKind,
    /// Each item with its fencing token.
    pub items: Vec<(u32, u64)>,
    /// Items that answer another fire than `fire_ms`, with that fire: a catch-up's items each
    /// answer the fire their misfire marker names.
    pub item_fires: Vec<(u32, i64)>,
}

impl Launch {
    /// The fire `item` answers.
    pub fn fire_of(&self, item: u32) -> i64 {
        fire_of(&self.item_fires, item, self.fire_ms)
    }
}

/// The fire `item` answers, from a list of exceptions to `default`.
pub(crate) fn fire_of(item_fires: &[(u32, i64)], item: u32, default: i64) -> i64 {
    item_fires.iter().find(|(n, _)| *n == item).map_or(default, |&(_, f)| f)
}

impl fmt::Debug for Launch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Launch#{} {:?} fire {} items {:?}",
            self.id.0, self.kind, self.fire_ms, self.items
        )
    }
}
