//! Failover: the items a vanished instance was running are queued under
//! `leader/failover/items/{n}` and re-executed at once by the survivors, each exactly once. Owns
//! the queue and the `sharding/{n}/failover` markers.
//!
//! - **Finding orphans.** Every launch gets a run number, written into its `running` markers; the
//!   transaction that removes the markers of a completed run also records that run in the
//!   instance node. When an instance node vanishes (crash, expiry, operator shutdown, a stop whose
//!   items were cancelled), the markers it left — still there, or remembered as tombstones by the
//!   cache — whose run is newer than its last completed run are exactly the interrupted items.
//!   Items that had completed are never re-run.
//! - **Queueing.** Every survivor queues what it found, in a transaction that also checks the
//!   version of the item's owner node as the survivor saw it. A claim changes that version, so a
//!   slow survivor cannot queue an item again after it was taken: no double execution.
//! - **Claiming.** The queue is shared among the eligible instances (rotating by their order), so
//!   idle survivors claim in parallel, all in one round; an item whose share-holder is busy is
//!   claimed by it after its own run. A claim is one transaction: delete the queue entry (only
//!   one claimant can), make the claimant the item's owner (which also advances the item's fencing
//!   token) and create the ephemeral `failover` marker.
//! - **Running.** The taker waits until the old `running` marker is gone (a live old owner removes
//!   it only when its item code has returned), so an item never runs on two live sessions at once.

use std::collections::BTreeMap;

use crate::cron::CronSchedule;
use crate::execution::RunningMark;
use crate::layout::{ItemNode, JobPaths};
use crate::registry::{
    CoordinatorRegistry, CreateMode, RegistryError, RegistryExt, Result, TxnOp, TxnResult,
};
use crate::runtime::cache::{Cache, SharedCache};
use crate::runtime::instance::Completed;

/// An item waiting in the failover queue, with the scheduled fire it missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Orphan {
    pub item: u32,
    pub fire_ms: i64,
    /// Its place among the orphans queued together; shares are dealt by it, so they stay the
    /// same while the queue empties.
    pub rank: u64,
}

/// The items `dead` was running when its instance node vanished, below `total`: those whose
/// `running` marker (still there, or remembered by the cache) carries a run newer than the last
/// run `dead` recorded as completed.
pub fn orphans_of(cache: &Cache, paths: &JobPaths, dead: &str, total: u32) -> Vec<Orphan> {
    let instance = paths.instance(dead);
    let last_state = cache.get(&instance).or_else(|| cache.tombstone(&instance));
    let completed = last_state.map_or(0, |node| Completed::parse(&node.data).run);
    (0..total)
        .filter_map(|item| {
            let path = paths.item_node(item, ItemNode::Running);
            let node = cache.get(&path).or_else(|| cache.tombstone(&path))?;
            let mark = RunningMark::decode(&node.data)?;
            (mark.instance == dead && mark.run > completed).then_some(Orphan {
                item,
                fire_ms: mark.fire_ms,
                rank: 0,
            })
        })
        .enumerate()
        .map(|(rank, orphan)| Orphan { rank: rank as u64, ..orphan })
        .collect()
}

/// The items `dead` owned, was not running, and whose schedule fell due since its last completed
/// fire: fires lost while its crash went undetected. Each gets one catch-up,
/// for the latest fire it missed, through the failover queue. `skip` holds the orphans already
/// found; disabled items owe nothing.
pub fn missed_by(
    cache: &Cache,
    paths: &JobPaths,
    dead: &str,
    total: u32,
    schedule: &CronSchedule,
    now_ms: i64,
    skip: &[Orphan],
) -> Vec<Orphan> {
    let instance = paths.instance(dead);
    let Some(last_state) = cache.get(&instance).or_else(|| cache.tombstone(&instance)) else {
        return Vec::new();
    };
    let since = Completed::parse(&last_state.data).fire_ms;
    missed_since(cache, paths, dead, total, schedule, since, now_ms, skip)
}

/// [`missed_by`] with the dead instance's last completed fire given (a restarted instance reads
/// it from the node of its predecessor, which it replaces).
#[allow(clippy::too_many_arguments)]
pub fn missed_since(
    cache: &Cache,
    paths: &JobPaths,
    dead: &str,
    total: u32,
    schedule: &CronSchedule,
    since_ms: i64,
    now_ms: i64,
    skip: &[Orphan],
) -> Vec<Orphan> {
    // The latest fire in (since, now]; bounded, for a frequent cron after a long outage.
    let latest = schedule
        .iter_after(since_ms)
        .take(MAX_MISSED_FIRES_SCANNED)
        .take_while(|&t| t <= now_ms)
        .last();
    let Some(fire_ms) = latest else { return Vec::new() };
    let first_rank = skip.len() as u64;
    (0..total)
        .filter(|&n| cache.text(&paths.item_node(n, ItemNode::Instance)).as_deref() == Some(dead))
        .filter(|&n| !cache.exists(&paths.item_node(n, ItemNode::Disabled)))
        .filter(|&n| skip.iter().all(|o| o.item != n))
        .enumerate()
        .map(|(i, item)| Orphan { item, fire_ms, rank: first_rank + i as u64 })
        .collect()
}

/// What an earlier incarnation of `me` (same instance id: a restarted process) left running: the
/// live `running` markers under `me` whose run is older than `my_first_run`. They die with the
/// old session; until then they tell which items to run again.
pub fn left_by_predecessor(
    cache: &Cache,
    paths: &JobPaths,
    me: &str,
    total: u32,
    my_first_run: u64,
) -> Vec<Orphan> {
    (0..total)
        .filter_map(|item| {
            let node = cache.get(&paths.item_node(item, ItemNode::Running))?;
            let mark = RunningMark::decode(&node.data)?;
            (mark.instance == me && mark.run < my_first_run).then_some(Orphan {
                item,
                fire_ms: mark.fire_ms,
                rank: 0,
            })
        })
        .enumerate()
        .map(|(rank, orphan)| Orphan { rank: rank as u64, ..orphan })
        .collect()
}

/// How many fires of a dead instance's gap `missed_by` looks at before settling for the last one
/// it saw.
const MAX_MISSED_FIRES_SCANNED: usize = 100_000;

/// Queues `orphans` (see the module docs) in one transaction, so that every survivor computes
/// its share over the whole queue. If another survivor queued them first, or a taker already
/// claimed one, the transaction fails and nothing more is needed.
pub async fn queue(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    dead: &str,
    orphans: &[Orphan],
) -> Result<()> {
    if orphans.is_empty() {
        return Ok(());
    }
    registry.ensure(&paths.failover_items()).await?;
    let mut ops = Vec::new();
    let mut entries = Vec::new();
    for orphan in orphans {
        let owner = paths.item_node(orphan.item, ItemNode::Instance);
        if let Some(version) = cache.read().get(&owner).map(|n| n.version) {
            ops.push(TxnOp::check(owner, Some(version)));
        }
        let entry = paths.failover_item(orphan.item);
        // The entry reuses the marker format, with the rank where the run number goes.
        let data =
            RunningMark { fire_ms: orphan.fire_ms, run: orphan.rank, instance: dead.to_owned() }
                .encode();
        ops.push(TxnOp::create(entry.clone(), data.clone(), CreateMode::Persistent));
        entries.push((entry, data));
    }
    match registry.transaction(ops).await {
        Ok(_) => {
            cache.update(|c| {
                entries.iter().for_each(|(entry, data)| c.wrote(entry, data, 0, false))
            });
            Ok(())
        }
        Err(e) if is_lost_race(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

fn is_lost_race(e: &RegistryError) -> bool {
    matches!(
        e.transaction_failure(),
        Some((
            _,
            RegistryError::NodeExists { .. }
                | RegistryError::BadVersion { .. }
                | RegistryError::NoNode { .. }
        ))
    )
}

/// The queue as the cache shows it.
pub fn queued(cache: &Cache, paths: &JobPaths) -> Vec<Orphan> {
    cache
        .children(&paths.failover_items())
        .iter()
        .filter_map(|name| {
            let item: u32 = name.parse().ok()?;
            let node = cache.get(&paths.failover_item(item))?;
            let mark = RunningMark::decode(&node.data);
            let (fire_ms, rank) = mark.map_or((0, u64::from(item)), |m| (m.fire_ms, m.run));
            Some(Orphan { item, fire_ms, rank })
        })
        .collect()
}

/// The queued items `me` should claim: dealt round-robin over `eligible` by their rank.
pub fn share_of(queue: &[Orphan], eligible: &[String], me: &str) -> Vec<Orphan> {
    let Some(index) = eligible.iter().position(|i| i == me) else { return Vec::new() };
    let seats = eligible.len() as u64;
    queue.iter().copied().filter(|o| o.rank % seats == index as u64).collect()
}

/// Claims one queued item for `me`. Returns the item's new owner version (its fencing token),
/// or `None` if someone else claimed it first.
pub async fn claim(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    item: u32,
    me: &str,
) -> Result<Option<u64>> {
    let owner = paths.item_node(item, ItemNode::Instance);
    let marker = paths.item_node(item, ItemNode::Failover);
    let owner_exists = cache.read().exists(&owner);
    let mut ops = vec![TxnOp::delete(paths.failover_item(item), None)];
    ops.push(if owner_exists {
        TxnOp::set(owner.clone(), me.as_bytes().to_vec(), None)
    } else {
        TxnOp::create(owner.clone(), me.as_bytes().to_vec(), CreateMode::Persistent)
    });
    ops.push(TxnOp::create(marker.clone(), me.as_bytes().to_vec(), CreateMode::Ephemeral));
    match registry.transaction(ops).await {
        Ok(results) => {
            let version = match results.get(1) {
                Some(TxnResult::Set { version }) => *version,
                _ => 0,
            };
            cache.update(|c| {
                c.deleted(&paths.failover_item(item));
                c.wrote(&owner, me.as_bytes(), version, false);
                c.wrote(&marker, me.as_bytes(), 0, true);
            });
            Ok(Some(version))
        }
        Err(e) if is_lost_race(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Empties the queue (failover was turned off in the config).
pub async fn clear_queue(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
) -> Result<()> {
    let queue = queued(&cache.read(), paths);
    for orphan in queue {
        let entry = paths.failover_item(orphan.item);
        registry.delete_if_exists(&entry).await?;
        cache.update(|c| c.deleted(&entry));
    }
    Ok(())
}

/// Groups orphans by the fire they missed, earliest first.
pub fn by_fire(orphans: Vec<Orphan>) -> BTreeMap<i64, Vec<u32>> {
    let mut groups: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
    for o in orphans {
        groups.entry(o.fire_ms).or_default().push(o.item);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(item: u32, rank: u64) -> Orphan {
        Orphan { item, fire_ms: 10, rank }
    }

    #[test]
    fn shares_are_dealt_by_rank_and_stay_put_as_the_queue_empties() {
        let eligible = vec!["a".to_owned(), "b".to_owned()];
        let queue = [o(1, 0), o(3, 1), o(5, 2)];
        assert_eq!(share_of(&queue, &eligible, "a"), vec![o(1, 0), o(5, 2)]);
        assert_eq!(share_of(&queue, &eligible, "b"), vec![o(3, 1)]);
        // b claimed item 3: a's share does not change.
        assert_eq!(share_of(&[o(1, 0), o(5, 2)], &eligible, "a"), vec![o(1, 0), o(5, 2)]);
        assert!(share_of(&queue, &eligible, "c").is_empty(), "not eligible, no share");
    }
}
