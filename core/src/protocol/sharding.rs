//! The resharding protocol: the `necessary` flag, the leader's assignment commit, and each
//! instance's view of its own items. Owns `leader/sharding/*` and `sharding/{n}/instance`.
//!
//! The leader commits the new assignment and the removal of both flags in ONE transaction, and
//! that transaction also checks the version of `necessary` it started from: an instance that
//! joined (and set the flag again) while the leader computed makes the commit fail, and the
//! leader shards again instead of leaving the newcomer without items until the next membership
//! change (the start-up race seen in ElasticJob 3.0.4).

use std::collections::BTreeMap;

use crate::instance::ip_of;
use crate::layout::{Detailed, ItemNode, JobPaths};
use crate::registry::{CreateMode, RegistryError, TxnOp};
use crate::sharding::{sort_for_sharding, Assignment, ShardingError, ShardingStrategies};

use super::records::{parse_flag, ServerStatus};
use super::view::View;

/// The value of a disabled server node.
pub const DISABLED: &str = "DISABLED";

/// Whether a reshard is pending or running.
pub fn pending(view: &View, paths: &JobPaths) -> bool {
    view.exists(&paths.sharding_necessary()) || view.exists(&paths.sharding_processing())
}

/// Whether no item of the job's `total` has an owner node: its first reshard (or one that
/// gives every item an owner again) is still to be made.
pub fn unassigned(view: &View, paths: &JobPaths, total: u32) -> bool {
    (0..total).all(|n| !view.exists(&paths.item_node(n, ItemNode::Instance)))
}

/// Whether the fire at `fire_ms` must wait for a reshard: one is running, or was asked for
/// before the fire's time (a flag without a readable time, as ElasticJob writes it, counts).
///
/// A flag raised in the fire's own millisecond does not hold that fire: the membership change
/// that raised it (typically a session ending on the same tick) races with every instance's
/// handling of the fire, and a leader that handled the fire before the flag arrived would not
/// reshard for it, leaving the instances that saw the flag waiting for its next fire.
///
/// A flag raised no later than the raise the last reshard answered (a raise that committed
/// late, after that reshard, re-creating the flag with its decision time) holds no fire: the
/// fires after its time ran under that reshard's assignment already. It still asks for a
/// reshard.
pub fn pending_for(view: &View, paths: &JobPaths, fire_ms: i64) -> bool {
    if view.exists(&paths.sharding_processing()) {
        return true;
    }
    super::detail::flag_time(view, paths).is_some_and(|raised| {
        // Garbage (reported by the leader) holds the fire, like a flag without a time. The
        // record is read only with a flag up: this runs at every fire.
        raised.is_none_or(|raised| {
            raised < fire_ms
                && crate::protocol::failover::assigned_since(view, paths).is_none_or(|a| raised > a)
        })
    })
}

/// Whether a reshard is asked for before the fire at `fire_ms` by a flag that holds no fire
/// (see [`pending_for`]): the leader makes it at that fire, nobody waits for it.
pub fn stale_for(view: &View, paths: &JobPaths, fire_ms: i64) -> bool {
    !pending_for(view, paths, fire_ms)
        && super::detail::flag_time(view, paths).flatten().is_some_and(|raised| raised < fire_ms)
}

/// Whether any item of the job is running on a live instance. A marker left by an instance
/// that is gone (persistent, with failover on) waits for its taker and holds no reshard back:
/// nothing runs there; nor does a marker queued for failover (an earlier session of a live
/// instance left it, and its taker may be waiting for this very reshard to be idle).
pub fn any_running(view: &View, paths: &JobPaths) -> bool {
    let live = view.children(&paths.instances());
    view.children(&paths.sharding()).iter().any(|n| {
        n.parse::<u32>().is_ok_and(|item| {
            view.get(&paths.item_node(item, ItemNode::Running))
                .is_some_and(|m| live.iter().any(|i| i.as_bytes() == m.data.as_slice()))
                && !view.exists(&paths.failover_item(item))
        })
    })
}

/// The live instances that may get items: registered, on a server that is not disabled, in the
/// order ElasticJob feeds them to a strategy.
pub fn eligible_instances(view: &View, paths: &JobPaths) -> Vec<String> {
    let mut instances: Vec<String> = view
        .children(&paths.instances())
        .into_iter()
        .filter(|id| {
            // Garbage reads as enabled, as ElasticJob reads it (reported and rewritten).
            let path = paths.server(ip_of(id));
            let status = view.get(&path).map(|n| ServerStatus::parse(&path, &n.data));
            status != Some(Ok(ServerStatus::Disabled))
        })
        .collect();
    sort_for_sharding(&mut instances);
    instances
}

/// The items assigned to `instance`, below `total_count`, ascending. Owner nodes a narrow
/// watch does not cover yet (a count grown since it was made, issue #15) are not looked at:
/// no reshard has given those items to anyone the view could know of.
pub fn items_of(view: &View, paths: &JobPaths, instance: &str, total_count: u32) -> Vec<u32> {
    (0..total_count)
        .filter(|&n| {
            let path = paths.item_node(n, ItemNode::Instance);
            view.covers(&path) && view.get(&path).is_some_and(|o| o.data == instance.as_bytes())
        })
        .collect()
}

/// Why there is no reshard to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reshard {
    /// No reshard was pending.
    NotNeeded,
    /// This instance does not hold the job's leadership (any more).
    NotLeader,
}

/// What a reshard starts from: the flag's version, the leader node's version and the count of
/// elections (the commit is fenced by all three), the eligible instances and which item nodes
/// exist.
#[derive(Debug)]
pub struct ReshardStart {
    pub necessary_version: u64,
    pub leader_version: u64,
    pub elections: Option<u64>,
    pub instances: Vec<String>,
    pub existing: BTreeMap<u32, bool>,
}

impl ReshardStart {
    /// What the view shows, or why there is no reshard to make.
    pub fn from_view(c: &View, paths: &JobPaths, me: &str) -> Result<Self, Reshard> {
        let flag = c.get(&paths.sharding_necessary()).ok_or(Reshard::NotNeeded)?;
        let leader = c
            .get(&paths.leader_instance())
            .filter(|n| n.data == me.as_bytes())
            .ok_or(Reshard::NotLeader)?;
        let existing = c
            .children(&paths.sharding())
            .iter()
            .filter_map(|n| n.parse().ok())
            .map(|n| (n, c.exists(&paths.item_node(n, ItemNode::Instance))))
            .collect();
        Ok(ReshardStart {
            necessary_version: flag.version,
            leader_version: leader.version,
            elections: c.get(&paths.leader_election()).map(|n| n.version),
            instances: eligible_instances(c, paths),
            existing,
        })
    }
}

/// A commit that failed because the registry moved on: the flag was set again (op 0), or the
/// view had not yet shown an item node that another leader created or an operator removed.
pub fn is_flag_race(e: &RegistryError) -> bool {
    matches!(
        e.transaction_failure(),
        Some((
            _,
            RegistryError::BadVersion { .. }
                | RegistryError::NoNode { .. }
                | RegistryError::NodeExists { .. }
        ))
    )
}

/// The leader's reshard as decided: the assignment and the transaction that commits it.
#[derive(Debug, Clone)]
pub struct ReshardPlan {
    pub assignment: Assignment,
    /// The commit, fenced by the flag's and the leader node's versions; it removes the flag.
    pub ops: Vec<TxnOp>,
}

/// Computes the assignment over the eligible instances of `start` and the transaction that
/// commits it. The caller has made sure no item is running, and that `sharding` exists.
pub fn plan(
    view: &View,
    paths: &JobPaths,
    job: &str,
    strategy: Option<&str>,
    strategies: &ShardingStrategies,
    total_count: u32,
    start: &ReshardStart,
) -> Result<ReshardPlan, ShardingError> {
    let (instances, existing_items) = (&start.instances, &start.existing);
    let refs: Vec<&str> = instances.iter().map(String::as_str).collect();
    let assignment = if refs.is_empty() {
        Assignment::new()
    } else {
        strategies.shard(strategy, job, &refs, total_count)?
    };
    let mut ops = vec![
        TxnOp::check(paths.sharding_necessary(), Some(start.necessary_version)),
        // Only the leader commits: a deposed one (its session expired, it lives on in a new
        // session) fails here instead of overwriting its successor's work.
        TxnOp::check(paths.leader_instance(), Some(start.leader_version)),
    ];
    // And on the count of elections: a leader node deleted and won again by anyone since has
    // the version ours had (`election::fence`).
    if let Some(elections) = start.elections {
        ops.push(TxnOp::check(paths.leader_election(), Some(elections)));
    }
    // Items beyond a reduced count keep their owner node, emptied, rather than being deleted:
    // the node's version is the item's fencing token, and it must keep growing if the count
    // grows again. Their markers go (a view behind on one fails the commit: it is retried).
    for (&stale, _) in existing_items.range(total_count..) {
        for marker in [ItemNode::Misfire, ItemNode::Disabled, ItemNode::Failover] {
            let path = paths.item_node(stale, marker);
            if view.exists(&path) {
                ops.push(TxnOp::delete(path, None));
            }
        }
    }
    // An owner node is set at the version the view shows: a write the leader has not seen (a
    // failover claim, an operator's, garbage) fails the commit, which is decided again on a
    // view that shows it, rather than erased unseen (garbage nobody reported, a claim's
    // owner replaced under its run).
    let push_owner = |ops: &mut Vec<TxnOp>, n: u32, owner: &[u8]| {
        let node = paths.item_node(n, ItemNode::Instance);
        match existing_items.get(&n) {
            Some(true) => {
                let seen = view.get(&node).map(|n| n.version);
                ops.push(TxnOp::set(node, owner.to_vec(), seen))
            }
            Some(false) => ops.push(TxnOp::create(node, owner.to_vec(), CreateMode::Persistent)),
            None => {
                ops.push(TxnOp::create(paths.item(n), Vec::new(), CreateMode::Persistent));
                ops.push(TxnOp::create(node, owner.to_vec(), CreateMode::Persistent));
            }
        }
    };
    for (instance, items) in assignment.iter() {
        for &n in items {
            push_owner(&mut ops, n, instance.as_bytes());
        }
        // Every owner is still there at the commit: an instance that left since the view
        // (its ledger and instance node removed in one transaction, see `job::leave`) noted
        // no mark in the record for the fires this assignment would give it, and nobody would
        // owe them. The commit fails instead, and is decided again without it.
        if !items.is_empty() {
            ops.push(TxnOp::check(paths.instance(instance), None));
        }
    }
    for (&stale, &owned) in existing_items.range(total_count..) {
        if owned {
            push_owner(&mut ops, stale, b"");
        }
    }
    ops.push(TxnOp::delete(paths.sharding_necessary(), None));
    Ok(ReshardPlan { assignment, ops })
}

/// The transaction that asks for a reshard before the next fire, raised at `now_ms`, as
/// decided from the view. Setting (rather than creating) the flag bumps its version, which is
/// what makes a concurrent leader's commit fail and retry.
///
/// The flag holds the time it was raised: a fire scheduled before it runs with the assignment
/// it was due under, and the reshard waits for the next fire, so that one fire never runs
/// partly under the old and partly under the new assignment. A flag already raised keeps its
/// (earliest) time: instances may be waiting for the reshard of a fire between the two times,
/// and a later time would release them to run that fire under the old assignment while the
/// leader runs it under the new one.
pub fn raise(view: &View, paths: &JobPaths, now_ms: i64, moved_from: Option<i64>) -> Vec<TxnOp> {
    let path = paths.sharding_necessary();
    match super::detail::read(view, paths, Detailed::Flag) {
        Some((flag, detail)) => {
            let data = raised_text(view, paths, detail, now_ms, moved_from);
            vec![TxnOp::set(path, data, Some(flag.version))]
        }
        None => {
            let data = super::records::flag_text(now_ms, moved_from);
            vec![TxnOp::create(path, data, CreateMode::Persistent)]
        }
    }
}

/// [`raise`] against a flag read from the registry at `versions.0` whose detail holds `data`
/// (after the view proved behind).
///
/// The detail is written here, fenced on the version read (`versions.1`, `None` when the
/// read found none): the view may be behind on it, so the write beside the flag that
/// `protocol::detail` would add, fenced on the view's version, would fail for that alone.
pub fn raise_over(
    view: &View,
    paths: &JobPaths,
    data: &[u8],
    (version, detail_version): (u64, Option<u64>),
    now_ms: i64,
    moved_from: Option<i64>,
) -> Vec<TxnOp> {
    let data = raised_text(view, paths, data, now_ms, moved_from);
    let detail = paths.detail(Detailed::Flag);
    vec![
        TxnOp::set(paths.sharding_necessary(), Vec::new(), Some(version)),
        match detail_version {
            Some(v) => TxnOp::set(detail, data, Some(v)),
            None => TxnOp::create(detail, data, CreateMode::Persistent),
        },
    ]
}

/// The raise time `necessary` should hold after a raise at `now_ms`: the earliest of the two,
/// or `now_ms` when the stored time is unreadable or no later than the raise the last reshard
/// answered (a late raise of an answered change: kept, that time would make the fires since
/// wait for a reshard they ran without).
pub fn raised_time(view: &View, paths: &JobPaths, data: &[u8], now_ms: i64) -> i64 {
    let answered = crate::protocol::failover::assigned_since(view, paths);
    parse_flag("", data)
        .ok()
        .flatten()
        .filter(|&r| answered.is_none_or(|a| r > a))
        .map_or(now_ms, |r| r.min(now_ms))
}

/// What `necessary` should hold after a raise at `now_ms` (owed since `moved_from`, if
/// earlier): [`raised_time`], with the time the raise it keeps was moved from (its fires
/// between the two still ran under the old assignment): the stored one's, or ours.
fn raised_text(
    view: &View,
    paths: &JobPaths,
    data: &[u8],
    now_ms: i64,
    moved_from: Option<i64>,
) -> String {
    let raised = raised_time(view, paths, data, now_ms);
    let kept = parse_flag("", data).ok().flatten() == Some(raised);
    // Both, when the two raises fell in the same millisecond: the earlier of the two.
    let stored_from = kept.then(|| super::records::parse_flag_moved_from(data)).flatten();
    let our_from = moved_from.filter(|_| raised == now_ms);
    super::records::flag_text(raised, stored_from.into_iter().chain(our_from).min())
}

/// The raise time of the pending flag, if one is raised (`None` for an unreadable time).
pub fn flag_time(view: &View, paths: &JobPaths) -> Option<Option<i64>> {
    super::detail::flag_time(view, paths)
}
