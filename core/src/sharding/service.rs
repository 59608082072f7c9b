//! The resharding protocol: the `necessary` flag, the leader's assignment
//! commit, and each instance's view of its own items. Owns `leader/sharding/*` and
//! `sharding/{n}/instance`.
//!
//! The leader commits the new assignment and the removal of both flags in ONE transaction, and
//! that transaction also checks the version of `necessary` it started from: an instance that
//! joined (and set the flag again) while the leader computed makes the commit fail, and the
//! leader shards again instead of leaving the newcomer without items until the next membership
//! change (the start-up race seen in ElasticJob 3.0.4).

use std::collections::BTreeMap;

use super::{sort_for_sharding, Assignment, ShardingStrategies};
use crate::error::{Error, Result};
use crate::layout::{ItemNode, JobPaths};
use crate::registry::{
    CoordinatorRegistry, CreateMode, RegistryError, RegistryExt, TxnOp, TxnResult,
};
use crate::runtime::cache::{Cache, SharedCache};
use crate::runtime::instance::ip_of;

/// The value of a disabled server node.
pub const DISABLED: &str = "DISABLED";

/// Asks for a reshard before the next fire. Setting (rather than creating) the flag bumps its
/// version, which is what makes a concurrent leader's commit fail and retry.
///
/// The flag holds the time it was raised (`now_ms`, the setter's clock): a fire scheduled before
/// it runs with the assignment it was due under, and the reshard waits for the next fire, so
/// that one fire never runs partly under the old and partly under the new assignment.
///
/// A flag already raised keeps its (earliest) time: instances may be waiting for the reshard
/// of a fire between the two times, and a later time would release them to run that fire under
/// the old assignment while the leader runs it under the new one. Hence a read and a
/// version-checked write here, not a blind put; flags are rare (membership and config changes).
///
/// Losing that write to another instance's raise is success: the other write came after our
/// read, so after whatever change we raise the flag for, and it bumped the version a leader's
/// commit checks just as ours would have (fifty instances starting at once all raise it).
/// Only a flag deleted under us (a reshard committed meanwhile, maybe without our change) is
/// raised again.
pub async fn set_necessary(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    now_ms: i64,
) -> Result<()> {
    let path = paths.sharding_necessary();
    for _ in 0..FLAG_ATTEMPTS {
        let written = match registry.get(&path).await? {
            Some(flag) => {
                let raised = flag.text().trim().parse::<i64>().ok();
                let data = raised.map_or(now_ms, |r| r.min(now_ms)).to_string();
                match registry.set(&path, data.as_bytes(), Some(flag.version)).await {
                    Ok(version) => Some((data, version)),
                    Err(RegistryError::BadVersion { .. }) => return Ok(()),
                    Err(RegistryError::NoNode { .. }) => None,
                    Err(e) => return Err(e.into()),
                }
            }
            None => {
                let data = now_ms.to_string();
                match registry.create(&path, data.as_bytes(), CreateMode::Persistent).await {
                    Ok(_) => Some((data, 0)),
                    Err(RegistryError::NodeExists { .. }) => return Ok(()),
                    Err(e) => return Err(e.into()),
                }
            }
        };
        if let Some((data, version)) = written {
            cache.update(|c| c.wrote(&path, data.as_bytes(), version, false));
            return Ok(());
        }
    }
    Err(Error::Contended { what: format!("raising the reshard flag {path}") })
}

/// How often `set_necessary` retries against concurrent writers of the flag.
const FLAG_ATTEMPTS: usize = 16;

/// Whether a reshard is pending or running.
pub fn pending(cache: &Cache, paths: &JobPaths) -> bool {
    cache.exists(&paths.sharding_necessary()) || cache.exists(&paths.sharding_processing())
}

/// Whether the fire at `fire_ms` must wait for a reshard: one is running, or was asked for
/// before the fire's time (a flag without a readable time, as ElasticJob writes it, counts).
///
/// A flag raised in the fire's own millisecond does not hold that fire: the membership change
/// that raised it (typically a session ending on the same tick) races with every instance's
/// handling of the fire, and a leader that handled the fire before the flag arrived would not
/// reshard for it, leaving the instances that saw the flag waiting for its next fire.
pub fn pending_for(cache: &Cache, paths: &JobPaths, fire_ms: i64) -> bool {
    if cache.exists(&paths.sharding_processing()) {
        return true;
    }
    cache.get(&paths.sharding_necessary()).is_some_and(|flag| {
        flag.text().trim().parse::<i64>().map_or(true, |raised| raised < fire_ms)
    })
}

/// Whether any item of the job is running anywhere.
pub fn any_running(cache: &Cache, paths: &JobPaths) -> bool {
    cache.children(&paths.sharding()).iter().any(|n| {
        n.parse::<u32>().is_ok_and(|item| cache.exists(&paths.item_node(item, ItemNode::Running)))
    })
}

/// The live instances that may get items: registered, on a server that is not disabled, in the
/// order ElasticJob feeds them to a strategy.
pub fn eligible_instances(cache: &Cache, paths: &JobPaths) -> Vec<String> {
    let mut instances: Vec<String> = cache
        .children(&paths.instances())
        .into_iter()
        .filter(|id| cache.text(&paths.server(ip_of(id))).as_deref() != Some(DISABLED))
        .collect();
    sort_for_sharding(&mut instances);
    instances
}

/// The items assigned to `instance`, below `total_count`, ascending.
pub fn items_of(cache: &Cache, paths: &JobPaths, instance: &str, total_count: u32) -> Vec<u32> {
    (0..total_count)
        .filter(|&n| {
            cache.text(&paths.item_node(n, ItemNode::Instance)).as_deref() == Some(instance)
        })
        .collect()
}

/// What a reshard attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reshard {
    /// The assignment was committed and both flags removed.
    Committed(Assignment),
    /// The flag changed while computing (an instance joined or left): try again.
    Raced,
    /// No reshard was pending.
    NotNeeded,
    /// This instance does not hold the job's leadership (any more).
    NotLeader,
}

/// What a reshard starts from: the flag's version, the leader node's version (the commit is
/// fenced by both), the eligible instances and which item nodes exist.
#[derive(Debug)]
struct Start {
    necessary_version: u64,
    leader_version: u64,
    instances: Vec<String>,
    existing: BTreeMap<u32, bool>,
}

impl Start {
    fn from_cache(c: &Cache, paths: &JobPaths, me: &str) -> std::result::Result<Self, Reshard> {
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
        Ok(Start {
            necessary_version: flag.version,
            leader_version: leader.version,
            instances: eligible_instances(c, paths),
            existing,
        })
    }

    /// The same, read from the registry: for when the cache keeps racing (a watch that merges
    /// events may have left it behind).
    async fn from_registry(
        registry: &dyn CoordinatorRegistry,
        paths: &JobPaths,
        me: &str,
    ) -> Result<std::result::Result<Self, Reshard>> {
        let Some(flag) = registry.get(&paths.sharding_necessary()).await? else {
            return Ok(Err(Reshard::NotNeeded));
        };
        let leader = registry.get(&paths.leader_instance()).await?;
        let Some(leader) = leader.filter(|n| n.data == me.as_bytes()) else {
            return Ok(Err(Reshard::NotLeader));
        };
        let mut existing = BTreeMap::new();
        for name in registry.children_or_empty(&paths.sharding()).await? {
            if let Ok(n) = name.parse::<u32>() {
                existing.insert(n, registry.exists(&paths.item_node(n, ItemNode::Instance)).await?);
            }
        }
        let mut instances = Vec::new();
        for id in registry.children_or_empty(&paths.instances()).await? {
            let server = registry.get(&paths.server(ip_of(&id))).await?;
            if server.is_none_or(|n| n.data != DISABLED.as_bytes()) {
                instances.push(id);
            }
        }
        sort_for_sharding(&mut instances);
        Ok(Ok(Start {
            necessary_version: flag.version,
            leader_version: leader.version,
            instances,
            existing,
        }))
    }
}

/// The leader's reshard: computes the assignment over the eligible instances and commits it,
/// fenced by the flag's and the leader node's versions. The caller has made sure no item is
/// running. With `fresh`, the starting state is read from the registry instead of the cache.
#[allow(clippy::too_many_arguments)]
pub async fn reshard(
    registry: &dyn CoordinatorRegistry,
    cache: &SharedCache,
    paths: &JobPaths,
    me: &str,
    job: &str,
    strategy: Option<&str>,
    strategies: &ShardingStrategies,
    total_count: u32,
    fresh: bool,
) -> Result<Reshard> {
    let start = if fresh {
        Start::from_registry(registry, paths, me).await?
    } else {
        Start::from_cache(&cache.read(), paths, me)
    };
    let start = match start {
        Ok(start) => start,
        Err(outcome) => return Ok(outcome),
    };
    let processing = paths.sharding_processing();
    match registry.create(&processing, b"", CreateMode::Ephemeral).await {
        Ok(_) => {}
        // A stale flag of a leader that died mid-reshard goes with its session; the caller retries.
        Err(RegistryError::NodeExists { .. }) => return Ok(Reshard::Raced),
        Err(e) => return Err(e.into()),
    }
    let result = commit(registry, paths, job, strategy, strategies, total_count, &start).await;
    match result {
        Ok((assignment, written)) => {
            cache.update(|c| {
                for (path, data, version) in &written {
                    c.wrote(path, data, *version, false);
                }
                c.deleted(&paths.sharding_necessary());
                c.deleted(&processing);
            });
            Ok(Reshard::Committed(assignment))
        }
        Err(e) => {
            // Leave no processing flag behind, or followers would wait for nothing.
            registry.delete_if_exists(&processing).await?;
            match e {
                Error::Registry(ref r) if is_flag_race(r) => Ok(Reshard::Raced),
                other => Err(other),
            }
        }
    }
}

/// A commit that failed because the registry moved on: the flag was set again (op 0), or the
/// cache had not yet shown an item node that another leader created or an operator removed.
fn is_flag_race(e: &RegistryError) -> bool {
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

async fn commit(
    registry: &dyn CoordinatorRegistry,
    paths: &JobPaths,
    job: &str,
    strategy: Option<&str>,
    strategies: &ShardingStrategies,
    total_count: u32,
    start: &Start,
) -> Result<(Assignment, Vec<(String, Vec<u8>, u64)>)> {
    let (instances, existing_items) = (&start.instances, &start.existing);
    let refs: Vec<&str> = instances.iter().map(String::as_str).collect();
    let assignment = if refs.is_empty() {
        Assignment::new()
    } else {
        strategies.shard(strategy, job, &refs, total_count)?
    };
    // Items beyond a reduced count keep their owner node, emptied, rather than being deleted: the
    // node's version is the item's fencing token, and it must keep growing if the count grows
    // again. Their markers go first, outside the transaction.
    for (&stale, _) in existing_items.range(total_count..) {
        for marker in [ItemNode::Misfire, ItemNode::Disabled, ItemNode::Failover] {
            registry.delete_if_exists(&paths.item_node(stale, marker)).await?;
        }
    }
    let mut ops = vec![
        TxnOp::check(paths.sharding_necessary(), Some(start.necessary_version)),
        // Only the leader commits: a deposed one (its session expired, it lives on in a new
        // session) fails here instead of overwriting its successor's work.
        TxnOp::check(paths.leader_instance(), Some(start.leader_version)),
    ];
    // What each op writes, by op index, to record in the cache with the version it got.
    let mut writes: Vec<(usize, String, Vec<u8>)> = Vec::new();
    let mut push_owner = |ops: &mut Vec<TxnOp>, n: u32, owner: &[u8]| {
        let node = paths.item_node(n, ItemNode::Instance);
        match existing_items.get(&n) {
            Some(true) => ops.push(TxnOp::set(node.clone(), owner.to_vec(), None)),
            Some(false) => {
                ops.push(TxnOp::create(node.clone(), owner.to_vec(), CreateMode::Persistent))
            }
            None => {
                ops.push(TxnOp::create(paths.item(n), Vec::new(), CreateMode::Persistent));
                ops.push(TxnOp::create(node.clone(), owner.to_vec(), CreateMode::Persistent));
            }
        }
        writes.push((ops.len() - 1, node, owner.to_vec()));
    };
    for (instance, items) in assignment.iter() {
        for &n in items {
            push_owner(&mut ops, n, instance.as_bytes());
        }
    }
    for (&stale, &owned) in existing_items.range(total_count..) {
        if owned {
            push_owner(&mut ops, stale, b"");
        }
    }
    ops.push(TxnOp::delete(paths.sharding_necessary(), None));
    ops.push(TxnOp::delete(paths.sharding_processing(), None));
    registry.ensure(&paths.sharding()).await?;
    let results = registry.transaction(ops).await?;
    let written = writes
        .into_iter()
        .map(|(index, path, data)| {
            let version = match results.get(index) {
                Some(TxnResult::Set { version }) => *version,
                _ => 0,
            };
            (path, data, version)
        })
        .collect();
    Ok((assignment, written))
}
