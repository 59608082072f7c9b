//! The execution markers of a job's items: `sharding/{n}/running` while an item runs (when
//! `monitorExecution` is on) and `sharding/{n}/misfire` when a fire was skipped because items
//! still ran.
//!
//! Starting and finishing the items of one fire are one transaction each, whatever the number of
//! items. `running` nodes are ephemeral and hold `{fire_ms} {run} {instance}`
//! ([`RunningMark`]), so a crashed runner's markers vanish with its session (ElasticJob's
//! zombie markers, its issues #467 and #1754) and a survivor can still tell from its view whose
//! they were and which fire they belonged to.

use crate::layout::{ItemNode, JobPaths};
use crate::registry::{CreateMode, RegistryError, TxnOp};

pub use super::records::RunningMark;
use super::records::{parse_time, Garbage};
use super::view::View;

/// How marking the start of a fire went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    Marked,
    /// Item `0` is still marked running (by an earlier fire, here or elsewhere).
    AlreadyRunning(u32),
    /// The owner node of item `0` is no longer the version the view showed: a reshard
    /// committed that this instance has not seen yet. Nothing was marked; decide again once the
    /// view caught up, or the fire would run under an assignment the leader already replaced.
    Reassigned(u32),
}

/// Whether the start transaction also checks that the items' owner nodes are still the
/// versions this instance's view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerCheck {
    /// Scheduled and catch-up fires: the items are this instance's by the assignment in the
    /// view, and the transaction fails if a reshard replaced it meanwhile.
    Cached,
    /// Failover work: the items were claimed, not assigned.
    None,
}

/// The start transaction of a fire and how to read its failure.
#[derive(Debug, Clone)]
pub struct StartPlan {
    pub ops: Vec<TxnOp>,
    items: Vec<u32>,
    /// Items whose owner node version is checked, in the order of the first ops.
    checked: Vec<u32>,
    /// Items whose misfire marker this run settles, checked after the owner checks.
    settled: Vec<u32>,
}

/// Marks `items` running for `mark`, all or none.
pub fn start(
    view: &View,
    paths: &JobPaths,
    items: &[u32],
    mark: &RunningMark,
    owners: OwnerCheck,
) -> StartPlan {
    let data = mark.encode();
    let mut ops = Vec::with_capacity(items.len() * 2);
    let mut checked = Vec::new();
    let mut settled = Vec::new();
    if owners == OwnerCheck::Cached {
        for &n in items {
            if let Some(owner) = view.get(&paths.item_node(n, ItemNode::Instance)) {
                ops.push(TxnOp::check(paths.item_node(n, ItemNode::Instance), Some(owner.version)));
                checked.push(n);
            }
        }
        // Misfire markers that owe a catch-up for this very fire are settled by running it: an
        // instance that was busy when the fire came (and a reshard was pending) marked every
        // item, not knowing who would own it after the reshard.
        for &n in items {
            let path = paths.item_node(n, ItemNode::Misfire);
            let Some(marker) = view.get(&path) else { continue };
            if parse_time(&path, &marker.data, "a misfire marker").ok() == Some(mark.fire_ms) {
                ops.push(TxnOp::delete(path, Some(marker.version)));
                settled.push(n);
            }
        }
    }
    ops.extend(items.iter().map(|&n| {
        TxnOp::create(paths.item_node(n, ItemNode::Running), data.clone(), CreateMode::Ephemeral)
    }));
    StartPlan { ops, items: items.to_vec(), checked, settled }
}

impl StartPlan {
    /// What a failed start transaction means, or `None` for a failure that is an error.
    pub fn outcome(&self, e: &RegistryError) -> Option<Start> {
        let fenced = self.checked.len() + self.settled.len();
        match e.transaction_failure()? {
            (i, RegistryError::BadVersion { .. } | RegistryError::NoNode { .. })
                if i < self.checked.len() =>
            {
                Some(Start::Reassigned(self.checked[i]))
            }
            // A misfire marker changed meanwhile: decide again on a fresh view.
            (i, RegistryError::BadVersion { .. } | RegistryError::NoNode { .. }) if i < fenced => {
                Some(Start::Reassigned(self.settled[i - self.checked.len()]))
            }
            (i, RegistryError::NodeExists { .. }) if i >= fenced => {
                Some(Start::AlreadyRunning(self.items[i - fenced]))
            }
            _ => None,
        }
    }
}

/// The instance node update that records a completed run, written in the same transaction as
/// the removal of the run's markers.
#[derive(Debug, Clone)]
pub struct Completion {
    pub instance_path: String,
    pub instance_data: Vec<u8>,
}

/// The nodes a finished run removes: the `running` markers of `items` and the `failover`
/// markers of `failed_over` (items this instance ran as a failover taker).
pub fn finished_markers(paths: &JobPaths, items: &[u32], failed_over: &[u32]) -> Vec<String> {
    items
        .iter()
        .map(|&n| paths.item_node(n, ItemNode::Running))
        .chain(failed_over.iter().map(|&n| paths.item_node(n, ItemNode::Failover)))
        .collect()
}

/// The finish transaction: the completion first (a watcher that sees the markers go has seen
/// it already), then the removal of `markers`.
pub fn finish(markers: &[String], completion: Option<&Completion>) -> Vec<TxnOp> {
    let mut ops: Vec<TxnOp> = completion
        .map(|c| TxnOp::set(c.instance_path.clone(), c.instance_data.clone(), None))
        .into_iter()
        .collect();
    ops.extend(markers.iter().map(|p| TxnOp::delete(p.clone(), None)));
    ops
}

/// The `running` mark of item `n`, if it is marked with a readable mark.
pub fn running_mark(view: &View, paths: &JobPaths, n: u32) -> Option<RunningMark> {
    view.get(&paths.item_node(n, ItemNode::Running))
        .and_then(|node| RunningMark::decode(&node.data))
}

/// Whether any of `items` is marked running (by anyone).
pub fn any_running(view: &View, paths: &JobPaths, items: &[u32]) -> bool {
    items.iter().any(|&n| view.exists(&paths.item_node(n, ItemNode::Running)))
}

/// The transaction that marks `items` misfired for `fire_ms`, holding only while `flag` (a
/// reshard flag) still exists: the marks are for a fire that will run under the assignment the
/// pending reshard makes.
pub fn misfire_while_flagged(
    view: &View,
    paths: &JobPaths,
    items: &[u32],
    fire_ms: i64,
    flag: &str,
) -> Vec<TxnOp> {
    let data = fire_ms.to_string();
    let mut ops = vec![TxnOp::check(flag, None)];
    ops.extend(items.iter().map(|&n| {
        let p = paths.item_node(n, ItemNode::Misfire);
        if view.exists(&p) {
            TxnOp::set(p, data.clone(), None)
        } else {
            TxnOp::create(p, data.clone(), CreateMode::Persistent)
        }
    }));
    ops
}

/// A catch-up an item owes: the fire its `misfire` marker names; `None` for an empty marker (as
/// ElasticJob writes it: only its existence counts, the fire is unknown); the marker's garbage
/// otherwise (the item still owes one catch-up).
pub type Owed = Result<Option<i64>, Garbage>;

/// The misfired items among `items` with the fire each one owes, as the view shows them.
pub fn misfired(view: &View, paths: &JobPaths, items: &[u32]) -> Vec<(u32, Owed)> {
    items
        .iter()
        .filter_map(|&n| {
            let path = paths.item_node(n, ItemNode::Misfire);
            let node = view.get(&path)?;
            let owed = if node.data.iter().all(u8::is_ascii_whitespace) {
                Ok(None)
            } else {
                parse_time(&path, &node.data, "a misfire marker").map(Some)
            };
            Some((n, owed))
        })
        .collect()
}

/// Whether an operator disabled item `n`.
pub fn item_disabled(view: &View, paths: &JobPaths, n: u32) -> bool {
    view.exists(&paths.item_node(n, ItemNode::Disabled))
}
