//! The execution markers of a job's items: `sharding/{n}/running` while an item runs (when
//! `monitorExecution` is on) and `sharding/{n}/misfire` when a fire was skipped because items
//! still ran. Owns those two nodes.
//!
//! Starting and finishing the items of one fire are one transaction each, whatever the number of
//! items (`docs/targets.md`). `running` nodes are ephemeral and hold `{fire_ms} {instance}`, so a
//! crashed runner's markers vanish with its session (ElasticJob #467, #1754) and a survivor can
//! still tell from its cache whose they were and which fire they belonged to.

use crate::layout::{ItemNode, JobPaths};
use crate::registry::{
    CoordinatorRegistry, CreateMode, RegistryError, RegistryExt, Result, TxnOp, TxnResult,
};
use crate::runtime::cache::{Cache, SharedCache};

/// The content of a `running` marker: which instance runs the item, for which scheduled fire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningMark {
    pub fire_ms: i64,
    /// The instance's run number of this launch; the instance node records the last completed
    /// one, which is how failover tells finished runs from interrupted ones.
    pub run: u64,
    pub instance: String,
}

impl RunningMark {
    pub fn encode(&self) -> Vec<u8> {
        format!("{} {} {}", self.fire_ms, self.run, self.instance).into_bytes()
    }

    /// `None` for data that is not a mark (an ElasticJob instance writes an empty one).
    pub fn decode(data: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(data).ok()?;
        let mut parts = text.splitn(3, ' ');
        let fire_ms = parts.next()?.parse().ok()?;
        let run = parts.next()?.parse().ok()?;
        Some(RunningMark { fire_ms, run, instance: parts.next()?.to_owned() })
    }
}

/// How marking the start of a fire went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    Marked,
    /// Item `0` is still marked running (by an earlier fire, here or elsewhere).
    AlreadyRunning(u32),
    /// The owner node of item `0` is no longer the version the cache showed: a reshard
    /// committed that this instance has not seen yet. Nothing was marked; decide again once the
    /// cache caught up, or the fire would run under an assignment the leader already replaced.
    Reassigned(u32),
}

/// Whether the start transaction also checks that the items' owner nodes are still the
/// versions this instance's cache shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerCheck {
    /// Scheduled and catch-up fires: the items are this instance's by the assignment in the
    /// cache, and the transaction fails if a reshard replaced it meanwhile.
    Cached,
    /// Failover work: the items were claimed, not assigned.
    None,
}

/// Marks `items` running for `mark`, all or none.
pub async fn start(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    items: &[u32],
    mark: &RunningMark,
    owners: OwnerCheck,
) -> Result<Start> {
    let data = mark.encode();
    // (item, owner node version) for each check, in the order of the transaction's first ops.
    let checked: Vec<(u32, u64)> = match owners {
        OwnerCheck::None => Vec::new(),
        OwnerCheck::Cached => {
            let c = cache.read();
            items
                .iter()
                .filter_map(|&n| Some((n, c.get(&paths.item_node(n, ItemNode::Instance))?.version)))
                .collect()
        }
    };
    // Misfire markers that owe a catch-up for this very fire are settled by running it: an
    // instance that was busy when the fire came (and a reshard was pending) marked every item,
    // not knowing who would own it after the reshard. (item, marker version), checked in the
    // same transaction, after the owner checks.
    let settled: Vec<(u32, u64)> = match owners {
        OwnerCheck::None => Vec::new(),
        OwnerCheck::Cached => {
            let c = cache.read();
            items
                .iter()
                .filter_map(|&n| {
                    let marker = c.get(&paths.item_node(n, ItemNode::Misfire))?;
                    let owed = marker.text().trim().parse::<i64>().ok()?;
                    (owed == mark.fire_ms).then_some((n, marker.version))
                })
                .collect()
        }
    };
    let checks = checked
        .iter()
        .map(|&(n, version)| TxnOp::check(paths.item_node(n, ItemNode::Instance), Some(version)));
    let settles = settled
        .iter()
        .map(|&(n, version)| TxnOp::delete(paths.item_node(n, ItemNode::Misfire), Some(version)));
    let creates = items.iter().map(|&n| {
        TxnOp::create(paths.item_node(n, ItemNode::Running), data.clone(), CreateMode::Ephemeral)
    });
    let fenced = checked.len() + settled.len();
    let ops: Vec<TxnOp> = checks.chain(settles).chain(creates).collect();
    match registry.transaction(ops).await {
        Ok(_) => {
            cache.update(|c| {
                for &(n, _) in &settled {
                    c.deleted(&paths.item_node(n, ItemNode::Misfire));
                }
                for &n in items {
                    c.wrote(&paths.item_node(n, ItemNode::Running), &data, 0, true);
                }
            });
            Ok(Start::Marked)
        }
        Err(e) => match e.transaction_failure() {
            Some((i, RegistryError::BadVersion { .. } | RegistryError::NoNode { .. }))
                if i < checked.len() =>
            {
                Ok(Start::Reassigned(checked[i].0))
            }
            // A misfire marker changed meanwhile: decide again on a fresh cache.
            Some((i, RegistryError::BadVersion { .. } | RegistryError::NoNode { .. }))
                if i < fenced =>
            {
                Ok(Start::Reassigned(settled[i - checked.len()].0))
            }
            Some((i, RegistryError::NodeExists { .. })) if i >= fenced => {
                Ok(Start::AlreadyRunning(items[i - fenced]))
            }
            _ => Err(e),
        },
    }
}

/// The instance node update that records a completed run, written in the same transaction as
/// the removal of the run's markers.
#[derive(Debug, Clone)]
pub struct Completion {
    pub instance_path: String,
    pub instance_data: Vec<u8>,
}

/// Removes the running markers of `items` and the failover markers of `failed_over` (items this
/// instance ran as a failover taker), recording `completion` in the same transaction. If some
/// markers are already gone (our session expired meanwhile), the rest are removed one by one.
pub async fn finish(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    items: &[u32],
    failed_over: &[u32],
    completion: Option<&Completion>,
) -> Result<()> {
    let nodes: Vec<String> = items
        .iter()
        .map(|&n| paths.item_node(n, ItemNode::Running))
        .chain(failed_over.iter().map(|&n| paths.item_node(n, ItemNode::Failover)))
        .collect();
    // The completion goes first: a watcher that sees the markers go has seen it already.
    let mut ops: Vec<TxnOp> = completion
        .map(|c| TxnOp::set(c.instance_path.clone(), c.instance_data.clone(), None))
        .into_iter()
        .collect();
    ops.extend(nodes.iter().map(|p| TxnOp::delete(p.clone(), None)));
    match registry.transaction(ops).await {
        Ok(results) => {
            if let (Some(c), Some(TxnResult::Set { version })) = (completion, results.first()) {
                cache.update(|cache| {
                    cache.wrote(&c.instance_path, &c.instance_data, *version, true)
                });
            }
        }
        Err(e) if matches!(e.transaction_failure(), Some((_, RegistryError::NoNode { .. }))) => {
            for p in &nodes {
                registry.delete_if_exists(p).await?;
            }
        }
        Err(e) => return Err(e),
    }
    cache.update(|c| nodes.iter().for_each(|p| c.deleted(p)));
    Ok(())
}

/// The `running` mark of item `n`, if it is marked.
pub fn running_mark(cache: &Cache, paths: &JobPaths, n: u32) -> Option<RunningMark> {
    cache
        .get(&paths.item_node(n, ItemNode::Running))
        .and_then(|node| RunningMark::decode(&node.data))
}

/// Whether any of `items` is marked running (by anyone).
pub fn any_running(cache: &Cache, paths: &JobPaths, items: &[u32]) -> bool {
    items.iter().any(|&n| cache.exists(&paths.item_node(n, ItemNode::Running)))
}

/// Marks `items` misfired: the fire at `fire_ms` came while this instance was still running, so
/// one catch-up run is owed. A later misfire replaces the time: the catch-up runs once, for the
/// latest missed fire (earlier ones are reported skipped).
pub async fn mark_misfire(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    items: &[u32],
    fire_ms: i64,
) -> Result<()> {
    let data = fire_ms.to_string();
    for &n in items {
        let p = paths.item_node(n, ItemNode::Misfire);
        let version = registry.put(&p, data.as_bytes()).await?;
        cache.update(|c| c.wrote(&p, data.as_bytes(), version, false));
    }
    Ok(())
}

/// The misfired items among `items` with the fire each one owes, as the cache shows them.
/// Marks `items` misfired for `fire_ms` in one transaction that holds only while `flag` (a
/// reshard flag) still exists: the marks are for a fire that will run under the assignment the
/// pending reshard makes. Returns `false`, marking nothing, when the flag is gone (the reshard
/// committed, and the new assignment decides whose items owe the catch-up).
pub async fn mark_misfire_while_flagged(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    items: &[u32],
    fire_ms: i64,
    flag: &str,
) -> Result<bool> {
    let data = fire_ms.to_string();
    let nodes: Vec<(String, bool)> = {
        let c = cache.read();
        items
            .iter()
            .map(|&n| {
                let p = paths.item_node(n, ItemNode::Misfire);
                let exists = c.exists(&p);
                (p, exists)
            })
            .collect()
    };
    let mut ops = vec![TxnOp::check(flag, None)];
    ops.extend(nodes.iter().map(|(p, exists)| {
        if *exists {
            TxnOp::set(p.clone(), data.clone(), None)
        } else {
            TxnOp::create(p.clone(), data.clone(), CreateMode::Persistent)
        }
    }));
    match registry.transaction(ops).await {
        Ok(results) => {
            cache.update(|c| {
                for (k, (p, _)) in nodes.iter().enumerate() {
                    let version = match results.get(k + 1) {
                        Some(TxnResult::Set { version }) => *version,
                        _ => 0,
                    };
                    c.wrote(p, data.as_bytes(), version, false);
                }
            });
            Ok(true)
        }
        Err(e) => match e.transaction_failure() {
            Some((0, RegistryError::NoNode { .. })) => Ok(false),
            // The cache was behind on a marker: mark them one by one instead.
            Some((_, RegistryError::NoNode { .. } | RegistryError::NodeExists { .. })) => {
                mark_misfire(registry, cache, paths, items, fire_ms).await?;
                Ok(true)
            }
            _ => Err(e),
        },
    }
}

pub fn misfired(cache: &Cache, paths: &JobPaths, items: &[u32]) -> Vec<(u32, i64)> {
    items
        .iter()
        .filter_map(|&n| {
            let node = cache.get(&paths.item_node(n, ItemNode::Misfire))?;
            Some((n, node.text().parse().unwrap_or(0)))
        })
        .collect()
}

/// Clears the misfire markers of `items` (before their catch-up run).
pub async fn clear_misfire(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    items: &[u32],
) -> Result<()> {
    for &n in items {
        let p = paths.item_node(n, ItemNode::Misfire);
        registry.delete_if_exists(&p).await?;
        cache.update(|c| c.deleted(&p));
    }
    Ok(())
}

/// Whether an operator disabled item `n`.
pub fn item_disabled(cache: &Cache, paths: &JobPaths, n: u32) -> bool {
    cache.exists(&paths.item_node(n, ItemNode::Disabled))
}

#[cfg(test)]
mod tests {
    use super::RunningMark;

    #[test]
    fn marks_round_trip_and_reject_foreign_data() {
        let mark =
            RunningMark { fire_ms: 1_700_000_010_000, run: 3, instance: "10.0.0.1@-@7".into() };
        assert_eq!(mark.encode(), b"1700000010000 3 10.0.0.1@-@7");
        assert_eq!(RunningMark::decode(&mark.encode()), Some(mark));
        assert_eq!(RunningMark::decode(b""), None);
        assert_eq!(RunningMark::decode(b"soon 10.0.0.1"), None);
    }
}
